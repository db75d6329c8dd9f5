"""Smoke test of `python -m experiments.lm_reconstruction` on the offline Shakespeare corpus
(tiny sizes), resuming from saved models, and its one-line errors."""

import pytest

from dpaudit.results import read_json
from tests.conftest import run_cli_cases

BAD_FLAGS = [
    ("--noise_multipliers=-1", "--noise_multipliers=-1"),
    ("--analysis_noise_multiplier=3", "--analysis_noise_multiplier=3"),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_cases): the refused
  flags, then a tiny run (its --output_dir copied to ``first_dir`` once it ends) and its rerun
  on the same --output_dir."""
  data_dir = tmp_path_factory.mktemp("tensorflow_datasets")
  out_dir = tmp_path_factory.mktemp("lm_reconstruction")
  flags = (f"--output_dir={out_dir}", f"--data_dir={data_dir}", "--num_train=200",
           "--num_reference=200", "--num_test=60", "--num_generated=40", "--epochs=1",
           "--batch_size=64", "--hidden_size=16", "--noise_multipliers=2",
           "--analysis_noise_multiplier=2", "--num_exposure_samples=300",
           "--secret_digits=8", "--canary_repetitions=2", "--top_k=20")
  bad = [(f"--output_dir={tmp_path_factory.mktemp('bad')}", f"--data_dir={data_dir}", flag)
         for flag, _ in BAD_FLAGS]
  first_dir = out_dir.parent / f"{out_dir.name}_first"
  *refused, first, again = run_cli_cases(
      "experiments.lm_reconstruction", *bad,
      {"argv": flags, "copy_after": [[str(out_dir), str(first_dir)]]}, flags)
  return {"out_dir": out_dir, "first_dir": first_dir, "first": first, "again": again,
          **{flag: out for (flag, _), out in zip(BAD_FLAGS, refused)}}


def test_tiny_run_writes_results_and_resumes(runs):
  tmp_path = runs["first_dir"]  # as the first run left it
  out = runs["first"]
  assert out.returncode == 0, out.stderr
  r = read_json(tmp_path / "results.json")
  assert r["canary"].startswith("John Doe's credit card number is ")
  assert len(r["secret"]) == 8 and r["canary"].endswith(r["secret"])
  assert [p["noise_multiplier"] for p in r["secrecy"]] == [2.0]
  for p in r["secrecy"]:
    assert p["prior_bits"] == pytest.approx(8 * 3.321928, rel=1e-5)
    assert p["secrecy_bits"] > 0
    assert p["bound_holds"] and p["secrecy_bits"] >= p["secrecy_bound_bits"]
    assert 0 <= p["exposure_lower_bound_bits"] <= p["exposure_rank_bits"] + 1e-9
  private = r["secrecy"][0]
  assert private["epsilon"] > 0 and private["secrecy_bound_bits"] > 0
  sets = r["at_risk_analysis"]["sets"]
  assert sets["train"]["count"] == 202 and sets["test"]["count"] == 60  # 200 + 2 canaries
  assert sets["generated"]["count"] == 40
  assert 0 < sets["test"]["fraction_memorised"] < 0.2
  for name in ("fig5_at_risk.png", "secrecy.png"):
    assert (tmp_path / name).stat().st_size > 0
  again = runs["again"]
  assert again.returncode == 0, again.stderr
  assert again.stderr.count("reused") == 2  # the reference and the target
  r2 = read_json(runs["out_dir"] / "results.json")
  assert r2["secrecy"] == r["secrecy"]


@pytest.mark.parametrize("flag,message", BAD_FLAGS)
def test_bad_flags_give_one_line_errors(runs, flag, message):
  out = runs[flag]
  assert out.returncode == 2
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], out.stderr
