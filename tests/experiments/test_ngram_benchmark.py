"""Smoke test of `python -m experiments.benchmarks.ngram` (tiny sizes): the vmapped models
against both loops, and the report's table."""

from dpaudit.results import loads, read_json
from tests.conftest import run_module
from tests.experiments.test_performance_docs import assert_table


def test_tiny_benchmark_prints_and_writes_json(tmp_path):
  out = run_module("experiments.benchmarks.ngram", f"--output_dir={tmp_path}", "--num_models=20",
                   "--num_steps=3", "--sequential_models=2", "--check_models=2",
                   "--num_repeats=1")
  assert out.returncode == 0, out.stderr
  written = read_json(tmp_path / "results.json")
  assert loads(out.stdout) == written
  assert written["equality_check"]["passed"] and written["equality_check_step_loop"]["passed"]
  # Against the step loop and the scan loop (target 100x each), then the 5 s goal.
  steps, scans, goal = written["table"]
  assert_table([steps, scans, goal])
  vmapped = written["vmapped"]["median_s"]
  assert steps["dpaudit"] == scans["dpaudit"] == goal["dpaudit"] == vmapped
  assert steps["ratio"] == written["speedup_vs_step_loop"] and steps["target"] == 100.0
  assert steps["met"] == written["meets_target_speedup_vs_step_loop"]
  assert scans["ratio"] == written["speedup"]
  assert scans["met"] == written["meets_target_speedup"]
  assert (goal["peer"], goal["target"]) == (5.0, 1.0)
  assert goal["met"] == written["meets_target_seconds"]
