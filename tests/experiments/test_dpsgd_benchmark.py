"""Smoke test of `python -m experiments.benchmarks.dpsgd` (tiny sizes) and its error path."""

import pytest

from dpaudit.results import loads, read_json
from tests.conftest import run_cli_cases
from tests.experiments.test_performance_docs import assert_table


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_cases): the refused
  flag, then the tiny benchmark, each on its own --output_dir."""
  bad, tiny = tmp_path_factory.mktemp("bad"), tmp_path_factory.mktemp("tiny")
  refused, out = run_cli_cases(
      "experiments.benchmarks.dpsgd", (f"--output_dir={bad}", "--models=resnet50", "--notorch"),
      (f"--output_dir={tiny}", "--models=mlp,lenet5", "--batch_size=4", "--num_rounds=1",
       "--steps_per_round=2", "--vmap_steps_per_round=1", "--notorch"))
  return {"bad": refused, "tiny": (out, tiny)}


def test_tiny_benchmark_prints_and_writes_json(runs):
  out, tmp_path = runs["tiny"]
  assert out.returncode == 0, out.stderr
  printed = loads(out.stdout)
  written = read_json(tmp_path / "results.json")
  assert printed["models"].keys() == written["models"].keys() == {"mlp", "lenet5"}
  for report in written["models"].values():
    for method in ("nonprivate", "dp_ghost", "dp_vmap"):
      timing = report["jax"][method]
      assert 0 < timing["min_ms"] <= timing["median_ms"] <= timing["max_ms"]
    assert report["dp_ghost_over_nonprivate"] > 0
    assert isinstance(report["meets_ratio_target"], bool)
    assert "torch" not in report
  # Per model: the DP step against the non-private step (target 1 / TARGET_RATIO), then vmap.
  table = written["table"]
  assert_table(table, 4)
  assert [r["workload"].split()[0] for r in table] == ["mlp", "mlp", "lenet5", "lenet5"]
  for r, model in zip(table[::2], ("mlp", "lenet5")):
    report = written["models"][model]
    assert r["dpaudit"] == report["jax"]["dp_ghost"]["median_ms"] and r["unit"] == "ms"
    assert abs(r["ratio"] * report["dp_ghost_over_nonprivate"] - 1) < 1e-12
    assert abs(r["target"] * report["target_dp_over_nonprivate"] - 1) < 1e-12
    assert r["met"] == report["meets_ratio_target"]
  assert written["machine"]["cpu_cores"] > 0 and "dpsgd" in written["command"]


def test_bad_flags_give_one_line_errors(runs):
  out = runs["bad"]  # --models=resnet50 --notorch
  assert out.returncode == 2
  assert out.stderr.strip().splitlines() == [
      "error: --models contains 'resnet50'; valid: mlp, lenet5, wrn16_4"]
