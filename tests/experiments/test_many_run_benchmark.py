"""Smoke test of `python -m experiments.benchmarks.many_run` (tiny sizes) and its error path."""

import pytest

from dpaudit.results import loads, read_json
from tests.conftest import run_cli_cases
from tests.experiments.test_performance_docs import assert_table


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_cases): the two refused
  flags on one --output_dir, then the tiny benchmark on its own."""
  bad, tiny = tmp_path_factory.mktemp("bad"), tmp_path_factory.mktemp("tiny")
  # 8 runs in chunks of 3 (one padded run) exercise the chunking; 2 runs are also trained in
  # the sequential loop and must end with the vmapped runs' parameters and batch sizes.
  cnn, too_many, out = run_cli_cases(
      "experiments.benchmarks.many_run", (f"--output_dir={bad}", "--model=cnn"),
      (f"--output_dir={bad}", "--num_runs=4", "--sequential_runs=5"),
      (f"--output_dir={tiny}", "--num_runs=8", "--num_steps=3", "--sequential_runs=2",
       "--check_runs=2", "--num_repeats=1", "--chunk_size=3", "--model=mlp"))
  return {"bad": (cnn, too_many, bad), "tiny": (out, tiny)}


def test_tiny_benchmark_prints_and_writes_json(runs):
  # 8 runs in chunks of 3 (one padded run) exercise the chunking; 2 runs are also trained in
  # the sequential loop and must end with the vmapped runs' parameters and batch sizes.
  out, tmp_path = runs["tiny"]
  assert out.returncode == 0, out.stderr
  printed = loads(out.stdout)
  written = read_json(tmp_path / "results.json")
  assert printed == written
  assert written["num_runs"] == 8 and written["num_steps"] == 3 and written["model"] == "mlp"
  assert written["param_count"] == 64 * 32 + 32 + 32 * 10 + 10  # 8x8x1 digits, 10 classes
  assert written["physical_batch_size"] >= 128
  vmapped, sequential = written["vmapped"], written["sequential"]
  assert 0 < vmapped["min_s"] <= vmapped["median_s"] <= vmapped["max_s"]
  assert vmapped["compile_s"] > 0 and vmapped["repeats"] == 1
  assert (vmapped["chunk_size"], vmapped["num_chunks"], vmapped["padded_runs"]) == (3, 3, 1)
  assert sequential["runs_timed"] == 2 and sequential["extrapolated"] is True
  assert abs(sequential["extrapolated_total_s"] - 8e-3 * sequential["per_run_ms"]) < 1e-9
  assert abs(written["speedup"]
             - sequential["extrapolated_total_s"] / vmapped["median_s"]) < 1e-9
  assert written["target_speedup"] == 20.0
  assert written["meets_target"] == (written["speedup"] >= 20.0)
  check = written["equality_check"]
  assert check["runs_compared"] == 2
  assert check["passed"] and check["final_params_allclose"] and check["batch_sizes_equal"]
  assert check["max_abs_diff"] <= 1e-5
  stats = written["batch_size_stats"]
  assert 0 <= stats["min"] <= stats["mean"] <= stats["max"]
  assert_table(written["table"], 2)  # vmapped against the scan loop, then the step loop
  scan, steps = written["table"]
  assert scan["dpaudit"] == steps["dpaudit"] == vmapped["median_s"] and scan["unit"] == "s"
  assert scan["ratio"] == written["speedup"] and scan["target"] == 20.0
  assert scan["met"] == written["meets_target"]
  assert steps["peer"] == written["sequential_step_loop"]["extrapolated_total_s"]
  assert written["machine"]["cpu_cores"] > 0 and "many_run" in written["command"]


def test_bad_flags_give_one_line_errors(runs):
  cnn, too_many, tmp_path = runs["bad"]  # on one --output_dir
  out = cnn
  assert out.returncode == 2
  assert out.stderr.strip().splitlines() == ["error: --model='cnn' is not one of logistic, mlp"]
  out = too_many
  assert out.returncode == 2
  assert out.stderr.strip().splitlines() == [
      "error: --sequential_runs=5 exceeds --num_runs=4"]
  assert not (tmp_path / "results.json").exists()
