"""Smoke test of `python -m experiments.benchmarks.private_prediction` (tiny sizes) and its
errors."""

import pytest

from dpaudit.results import loads, read_json
from tests.conftest import run_cli_cases
from tests.experiments.test_performance_docs import assert_table


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """Both command lines in one process (tests.conftest.run_cli_cases): the tiny benchmark
  (first: it sets the host's device count before JAX starts), then a refused flag."""
  tiny, bad = tmp_path_factory.mktemp("tiny"), tmp_path_factory.mktemp("bad")
  outs = run_cli_cases(
      "experiments.benchmarks.private_prediction",
      (f"--output_dir={tiny}", "--num_trials=20000", "--numpy_trials=20000",
       "--num_repeats=1", "--num_teachers=30", "--num_classes=4",
       "--num_trained_teachers=3", "--teacher_epochs=1", "--teacher_models=logistic"),
      (f"--output_dir={bad}", "--num_classes=1"))
  return {"tiny": (outs[0], tiny), "bad": (outs[1], bad)}


def test_tiny_benchmark_compares_with_numpy(runs):
  out, tmp_path = runs["tiny"]
  assert out.returncode == 0, out.stderr
  written = read_json(tmp_path / "results.json")
  assert loads(out.stdout) == written
  assert written["device"] == "cpu x 2"  # sharded over --host_devices
  rows = written["workloads"]
  assert [r["name"] for r in rows] == ["pate dirichlet H_S", "pate dirichlet H_S_prime",
                                       "pate concentrated H_S", "pate concentrated H_S_prime"]
  for r in rows:
    assert r["dpaudit_trials_per_s"] > 0 and r["numpy_trials_per_s"] > 0
    assert r["ratio"] == r["dpaudit_trials_per_s"] / r["numpy_trials_per_s"]
    assert r["target_met"] == (r["ratio"] >= 3.0)
    assert r["same_law_p_value"] > 1e-4  # the two implementations sample one law
    assert abs(sum(r["dpaudit_frequencies"]) - 1) < 1e-12
  [teachers] = written["teachers"]
  assert teachers["name"] == "teachers k=3 digits logistic 1 epochs"
  assert teachers["ratio"] == teachers["vmapped_teachers_per_s"] / teachers["loop_teachers_per_s"]
  assert teachers["max_abs_param_diff_teacher_0"] < 1e-5  # the vmapped teacher is the same
  assert_table(written["table"], 5)  # the four PATE workloads, then the teachers
  for r, w in zip(written["table"], rows):
    assert (r["dpaudit"], r["peer"], r["target"]) == (w["dpaudit_trials_per_s"],
                                                      w["numpy_trials_per_s"], 3.0)
    assert r["met"] == w["target_met"] and r["unit"] == "trials/s"
  assert written["table"][-1]["dpaudit"] == teachers["vmapped_teachers_per_s"]


def test_bad_flags_give_one_line_errors(runs):
  out, tmp_path = runs["bad"]  # --num_classes=1
  assert out.returncode == 2
  assert out.stderr.strip().splitlines() == [
      "error: --num_classes=1 is outside the valid range [2, 64]"]
  assert not (tmp_path / "results.json").exists()
