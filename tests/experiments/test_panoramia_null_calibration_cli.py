"""`python -m experiments.panoramia_null_calibration`: a tiny study, its resume and its rates."""

import numpy as np
import pytest

from dpaudit.results import read_json
from tests.conftest import run_cli_cases


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_cases): the malformed
  setting, then the tiny study (its --output_dir copied to ``first_dir`` once it ends) and its
  rerun on the same --output_dir."""
  out_dir, bad_dir = (tmp_path_factory.mktemp(n) for n in ("null_calibration", "bad"))
  first_dir = out_dir.parent / f"{out_dir.name}_first"
  flags = [f"--output_dir={out_dir}", "--settings=200:1.5:1,200:0:2", "--num_audits=12",
           "--null_samples=20"]
  malformed, first, again = run_cli_cases(
      "experiments.panoramia_null_calibration", [f"--output_dir={bad_dir}", "--settings=300:x:1"],
      {"argv": flags, "copy_after": [[str(out_dir), str(first_dir)]]}, flags)
  return {"out_dir": out_dir, "first_dir": first_dir, "first": first, "again": again,
          "malformed": (malformed, bad_dir)}


def test_tiny_study_reports_valid_rates_and_resumes(runs):
  tmp_path = runs["first_dir"]  # as the first run left it
  out = runs["first"]
  assert out.returncode == 0, out.stderr
  settings = read_json(tmp_path / "results.json")["settings"]
  assert [(s["num_audit"], s["signal"], s["num_baselines"]) for s in settings] == [
      (200, 1.5, 1), (200, 0.0, 2)]
  for s in settings:
    p, eps = np.asarray(s["p_value"]), np.asarray(s["eps_tilde"])
    assert p.shape == eps.shape == (12,)
    # The rates are what the stored audits give, and the interval holds the rate.
    assert s["rejection_rate"] == pytest.approx(np.mean(p <= 0.05))
    assert s["rejection_rate_2x"] == pytest.approx(np.mean(p <= 0.1))
    assert s["positive_rate"] == pytest.approx(np.mean(eps > 0))
    low, high = s["rejection_rate_ci95"]
    assert low <= s["rejection_rate"] <= high
    # An eps~ of 0 has p = 1 (every null audit is at least as large).
    assert np.all(p[eps == 0] == 1.0)
  # Scores without any membership gap: c_lb and {c+eps}_lb are valid lower bounds on c = 0 and
  # c + eps = 0, so eps~ > 0 needs the MIA's bound to err (at most beta / 2 of the audits).
  assert settings[1]["positive_rate"] <= 2 / 12 and settings[1]["rejection_rate"] <= 2 / 12
  again = runs["again"]
  assert again.returncode == 0 and again.stderr.count("[reused]") == 2, again.stderr
  assert read_json(runs["out_dir"] / "results.json")["settings"] == settings


def test_malformed_setting_is_one_line(runs):
  out, tmp_path = runs["malformed"]  # --settings=300:x:1
  assert out.returncode == 2 and "Traceback" not in out.stderr
  assert out.stderr.strip().count("\n") == 0 and "--settings" in out.stderr
  assert not (tmp_path / "results.json").exists()
