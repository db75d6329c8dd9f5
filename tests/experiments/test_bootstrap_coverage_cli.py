"""Smoke test of `python -m experiments.bootstrap_coverage` (tiny study) and its error path."""

from dpaudit.results import read_json
from tests.conftest import run_module


def _run(*flags):
  return run_module("experiments.bootstrap_coverage", *flags)


def test_tiny_study_writes_rates(tmp_path):
  out = _run(f"--output_dir={tmp_path}", "--num_audits=20", "--num_bootstrap=20",
             "--num_trials=1000", "--orders=2")
  assert out.returncode == 0, out.stderr
  results = read_json(tmp_path / "results.json")
  settings = results["result"]["settings"] if "result" in results else results["settings"]
  assert {s["pair"] for s in settings} == {"fig6_sigma2", "fig6_sigma6", "fig6_sigma12",
                                           "zero_divergence"}
  zero = next(s for s in settings if s["pair"] == "zero_divergence")
  # At D = 0 the percentile bootstrap is above the truth in (nearly) every audit, and the
  # trust rule flags every one of them.
  assert zero["k_cut"]["violation_rate"] > 0.9 and zero["k_cut"]["trusted_fraction"] == 0.0
  for s in settings:
    rows = s["k_cut"]["by_signal"]
    assert rows[0]["kept"] == 20 and 0.0 <= s["two_cut"]["violation_rate"] <= 1.0


def test_bad_flag_prints_one_line(tmp_path):
  out = _run(f"--output_dir={tmp_path}", "--num_audits=0")
  assert out.returncode != 0 and "Traceback" not in out.stderr
  assert out.stderr.strip().count("\n") == 0 and "num_audits=0" in out.stderr
