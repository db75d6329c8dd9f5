"""Smoke test of `python -m experiments.noisy_argmax_audit` and its error path."""

import os

from dpaudit.results import read_json
from tests.conftest import run_module


def _run(*flags):
  return run_module("experiments.noisy_argmax_audit", *flags)


def test_tiny_run_writes_results_plot_and_table(tmp_path):
  out = _run(f"--output_dir={tmp_path}", "--num_trials=40000", "--orders=2,4,8",
             "--num_bootstrap=50", "--num_queries=10")
  assert out.returncode == 0, out.stderr
  results = read_json(tmp_path / "results.json")
  for key in ("orders", "exact_renyi", "exact_renyi_reverse", "two_cut_lower_bound",
              "k_cut_lower_bound", "data_independent_rdp", "data_dependent_rdp", "num_trials",
              "config", "versions", "wall_time_s"):
    assert key in results, key
  assert results["num_trials"] == 40000 and results["orders"] == [2.0, 4.0, 8.0]
  assert results["config"]["seed"] == 0 and results["config"]["sigma"] == 2.0
  assert (tmp_path / "rdp_vs_order.png").stat().st_size > 10_000
  assert "exact" in out.stdout and "2-cut" in out.stdout
  assert os.path.exists(tmp_path / "checkpoints" / "eval_q.npz")
  # A rerun resumes from the finished checkpoints and reproduces the result.
  again = _run(f"--output_dir={tmp_path}", "--num_trials=40000", "--orders=2,4,8",
               "--num_bootstrap=50", "--num_queries=10")
  assert again.returncode == 0, again.stderr
  rerun = read_json(tmp_path / "results.json")
  assert rerun["two_cut_lower_bound"] == results["two_cut_lower_bound"]


def test_bad_input_prints_one_line_and_exits_nonzero(tmp_path):
  out = _run(f"--output_dir={tmp_path}", "--noise_multiplier=-1")
  assert out.returncode == 2
  assert out.stderr.strip().count("\n") == 0
  assert out.stderr.startswith("error: --noise_multiplier=-1")
  out = _run(f"--output_dir={tmp_path}", "--histogram=1,2,x")
  assert out.returncode == 2 and "--histogram=1,2,x" in out.stderr
  assert "Traceback" not in out.stderr
