"""Smoke test of `python -m experiments.benchmarks.domias` (tiny sizes) and its error path."""

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
      "experiments.benchmarks.domias", (f"--output_dir={bad}", "--num_seeds=0"),
      (f"--output_dir={tiny}", "--num_seeds=2", "--num_rows=200", "--num_queries=100",
       "--num_repeats=1", "--flow_rows=100", "--flow_hidden_dim=4", "--flow_epochs=1"))
  return {"bad": (refused, bad), "tiny": (out, tiny)}


def test_tiny_benchmark_prints_and_writes_json(runs):
  out, tmp_path = runs["tiny"]
  assert out.returncode == 0, out.stderr
  written = read_json(tmp_path / "results.json")
  assert loads(out.stdout) == written
  assert (written["seeds"], written["num_rows"], written["num_queries"]) == (2, 200, 100)
  kde, flow = written["kde"], written["flow"]
  assert kde["speedup"] == kde["loop_median_s"] / kde["vmapped_median_s"] > 0
  assert kde["repeats"] == 1
  assert flow["speedup"] == flow["loop_s"] / flow["vmapped_s"] > 0
  assert (flow["rows"], flow["hidden_dim"], flow["max_epochs"]) == (100, 4, 1)
  # The vmapped fit of seed 0 gives the single fit's density (float32 training).
  assert flow["max_log_density_difference_seed0"] < 1e-3
  assert "game" not in written  # only with --game
  assert_table(written["table"], 2)
  assert [r["dpaudit"] for r in written["table"]] == [kde["vmapped_median_s"], flow["vmapped_s"]]
  assert [r["peer"] for r in written["table"]] == [kde["loop_median_s"], flow["loop_s"]]
  assert written["machine"]["cpu_cores"] > 0 and "domias" in written["command"]
  assert out.stderr.splitlines()[-2:] == [f"kde: {kde['speedup']:.2f}x",
                                          f"flow: {flow['speedup']:.2f}x"]


def test_bad_flag_is_one_line(runs):
  out, tmp_path = runs["bad"]  # --num_seeds=0
  assert out.returncode == 2
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(
      "error: --num_seeds=0 is outside the valid range [1, ")
  assert not (tmp_path / "results.json").exists()
