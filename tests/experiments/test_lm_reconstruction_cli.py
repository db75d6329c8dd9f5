"""Smoke test of `python -m experiments.lm_reconstruction` on the offline Shakespeare corpus
(tiny sizes), resuming from saved models, and its one-line errors."""

import pytest

from dpaudit.results import read_json
from tests.conftest import run_module


def _run(*flags):
  return run_module("experiments.lm_reconstruction", *flags)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp("tensorflow_datasets"))


def test_tiny_run_writes_results_and_resumes(tmp_path, data_dir):
  flags = (f"--output_dir={tmp_path}", f"--data_dir={data_dir}", "--num_train=200",
           "--num_reference=200", "--num_test=60", "--num_generated=40", "--epochs=1",
           "--batch_size=64", "--hidden_size=16", "--noise_multipliers=2",
           "--analysis_noise_multiplier=2", "--num_exposure_samples=300",
           "--secret_digits=8", "--canary_repetitions=2", "--top_k=20")
  out = _run(*flags)
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
  again = _run(*flags)
  assert again.returncode == 0, again.stderr
  assert again.stderr.count("reused") == 2  # the reference and the target
  r2 = read_json(tmp_path / "results.json")
  assert r2["secrecy"] == r["secrecy"]


@pytest.mark.parametrize("flag,message", [
    ("--noise_multipliers=-1", "--noise_multipliers=-1"),
    ("--analysis_noise_multiplier=3", "--analysis_noise_multiplier=3"),
])
def test_bad_flags_give_one_line_errors(tmp_path, data_dir, flag, message):
  out = _run(f"--output_dir={tmp_path}", f"--data_dir={data_dir}", flag)
  assert out.returncode == 2
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], out.stderr
