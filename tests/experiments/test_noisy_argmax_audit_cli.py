"""Smoke test of `python -m experiments.noisy_argmax_audit` and its error path."""

import os

import pytest

from dpaudit.results import read_json
from tests.conftest import run_cli_cases

TINY = ("--num_trials=40000", "--orders=2,4,8", "--num_bootstrap=50", "--num_queries=10")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_cases): the refused
  ones, then a tiny run (its --output_dir copied to ``first_dir`` once it ends) and its rerun
  on the same --output_dir."""
  out_dir = tmp_path_factory.mktemp("noisy_argmax_audit")
  first_dir = out_dir.parent / f"{out_dir.name}_first"
  bad_dir = tmp_path_factory.mktemp("bad")
  sigma, histogram, first, again = run_cli_cases(
      "experiments.noisy_argmax_audit",
      (f"--output_dir={bad_dir}", "--noise_multiplier=-1"),
      (f"--output_dir={bad_dir}", "--histogram=1,2,x"),
      {"argv": [f"--output_dir={out_dir}", *TINY], "copy_after": [[str(out_dir),
                                                                  str(first_dir)]]},
      (f"--output_dir={out_dir}", *TINY))
  return {"out_dir": out_dir, "first_dir": first_dir, "first": first, "again": again,
          "sigma": sigma, "histogram": histogram}


def test_tiny_run_writes_results_plot_and_table(runs):
  tmp_path = runs["first_dir"]  # as the first run left it
  out = runs["first"]
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
  again = runs["again"]
  assert again.returncode == 0, again.stderr
  rerun = read_json(runs["out_dir"] / "results.json")
  assert rerun["two_cut_lower_bound"] == results["two_cut_lower_bound"]


def test_bad_input_prints_one_line_and_exits_nonzero(runs):
  out = runs["sigma"]  # --noise_multiplier=-1
  assert out.returncode == 2
  assert out.stderr.strip().count("\n") == 0
  assert out.stderr.startswith("error: --noise_multiplier=-1")
  out = runs["histogram"]  # --histogram=1,2,x
  assert out.returncode == 2 and "--histogram=1,2,x" in out.stderr
  assert "Traceback" not in out.stderr
