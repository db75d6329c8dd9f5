"""Smoke test of `python -m experiments.train_dpsgd`: results, resuming, and the error path."""

import math
import os

import pytest

from dpaudit.results import read_json
from tests.conftest import run_cli_cases


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_cases): the refused
  ones, then a tiny sweep (its --output_dir copied to ``first_dir`` once it ends, then its
  finished eps=8 run forgotten) and the sweep again on the same --output_dir."""
  data_dir = tmp_path_factory.mktemp("tensorflow_datasets")  # never the user's default
  tmp_path = tmp_path_factory.mktemp("train_dpsgd")
  out_dir, bad_dir = tmp_path / "out", tmp_path / "bad"
  flags = (f"--output_dir={out_dir}", f"--compilation_cache_dir={tmp_path / 'jax_cache'}",
           f"--data_dir={data_dir}",
           "--dataset=wine", "--model=logistic", "--epochs=2", "--batch_size=32",
           "--epsilons=8,inf", "--num_repeats=1", "--learning_rate=0.1")
  epsilons, model, renamed, first, third = run_cli_cases(
      "experiments.train_dpsgd",
      (f"--output_dir={bad_dir}", "--epsilons=1,-2"),
      (f"--output_dir={bad_dir}", f"--data_dir={data_dir}", "--dataset=wine", "--model=lenet5"),
      (f"--output_dir={bad_dir}", "--num_seeds=2"),
      # Forget one finished run: only that one is trained again.
      {"argv": list(flags), "copy_after": [[str(out_dir), str(tmp_path / "first")]],
       "remove_after": [str(out_dir / "runs" / "eps8_*")]},
      flags)
  return {"out_dir": out_dir, "first_dir": tmp_path / "first", "bad_dir": bad_dir,
          "first": first, "third": third, "epsilons": epsilons, "model": model,
          "renamed": renamed}


def test_tiny_sweep_writes_results_and_resume_skips_finished_runs(cli_runs):
  out_dir = cli_runs["first_dir"]  # as the first run left it
  out = cli_runs["first"]
  assert out.returncode == 0, out.stderr
  results = read_json(out_dir / "results.json")
  for key in ("dataset", "model", "num_train", "num_test", "delta", "accountant",
              "sampling_rate", "num_steps", "summary", "runs", "config", "versions",
              "wall_time_s"):
    assert key in results, key
  assert results["dataset"] == "wine" and results["config"]["seed"] == 0
  # results.json keeps the config's field names (target_epsilons, repetitions).
  assert results["config"]["repetitions"] == 1 and results["seeds"] == [0]
  # 178 examples, 20% test (stratified by class): 142 train; q = 32/142, T = ceil(2 / q) = 9.
  assert results["num_train"] == 142 and results["num_steps"] == 9
  private, public = results["summary"]
  assert private["target_epsilon"] == 8.0 and public["target_epsilon"] == math.inf
  assert 0 < private["epsilon_rdp"] <= 8.0 and 0 < private["epsilon_pld"] <= 8.5
  assert private["noise_multiplier"] > 0 and public["noise_multiplier"] == 0.0
  assert public["epsilon_rdp"] == math.inf
  for row in results["summary"]:
    assert 0.0 <= row["test_accuracy_mean"] <= 1.0 and 0.0 <= row["train_accuracy_mean"] <= 1.0
    assert row["clipping_strategy"] in ("ghost", "vmap")
  runs = {run["target_epsilon"]: run for run in results["runs"]}
  assert runs[8.0]["l2_clip_norm"] == 1.0 and runs[math.inf]["l2_clip_norm"] == math.inf
  assert not any(run["reused"] for run in results["runs"])
  assert (out_dir / "accuracy_vs_epsilon.png").stat().st_size > 10_000
  assert "eps RDP" in out.stdout and "test acc" in out.stdout
  assert "1 repetition (seed 0)" in out.stdout

  # The finished eps=8 run was forgotten (the fixture's "remove_after"): only that one is
  # trained again (the other is read back from output_dir/runs; a rerun that trains nothing:
  # tests/dpsgd/test_tradeoff.py).
  (finished,) = [f for f in (out_dir / "runs").iterdir() if f.name.startswith("eps8_")]
  assert finished.suffix == ".json"  # a finished run keeps no checkpoint directory
  third = cli_runs["third"]
  assert third.returncode == 0, third.stderr
  retrained = read_json(cli_runs["out_dir"] / "results.json")
  assert retrained["num_runs_reused"] == 1
  assert [r["reused"] for r in retrained["runs"]] == [False, True]
  assert "reusing the finished run" in third.stderr
  assert retrained["runs"][0]["test_accuracy"] == results["runs"][0]["test_accuracy"]
  assert retrained["runs"][0]["final_loss"] == results["runs"][0]["final_loss"]


def test_bad_input_prints_one_line_and_exits_2(cli_runs):
  out = cli_runs["epsilons"]  # --epsilons=1,-2
  assert out.returncode == 2
  assert out.stderr.strip().count("\n") == 0, out.stderr
  assert out.stderr.startswith("error: epsilons=-2.0")
  assert "valid range (0, inf)" in out.stderr
  out = cli_runs["model"]  # --dataset=wine --model=lenet5
  assert out.returncode == 2 and "Traceback" not in out.stderr
  assert out.stderr.strip().splitlines()[-1].startswith("error: model='lenet5' needs image data")
  assert not os.path.exists(cli_runs["bad_dir"] / "results.json")
  # --num_seeds was renamed long ago (now --num_repeats, its deprecated alias --repetitions).
  out = cli_runs["renamed"]  # --num_seeds=2
  assert out.returncode == 2, out.stderr
  assert "Unknown command line flag 'num_seeds'" in out.stderr, out.stderr
