"""Smoke tests of `python -m experiments.ngram_reconstruction` (results, resume, error path) and
of the benchmark `python -m experiments.benchmarks.ngram`."""

import os

import pytest

from dpaudit.results import loads, read_json
from tests.conftest import run_cli_plan

TINY_FLAGS = ("--noise_multipliers=1,4", "--num_models=500", "--num_steps=10",
              "--canary_length=4")


@pytest.fixture(scope="module")
def started(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_plan): the benchmark's
  refused flag and tiny run, then the experiment's refused flag, a tiny run (its --output_dir
  copied to ``tiny_first`` once it ends) and its rerun on the same --output_dir."""
  root = tmp_path_factory.mktemp("ngram_cli")
  tiny = root / "tiny" / "out"
  (bad_flag, benchmark), (bad_sigma, first, again) = run_cli_plan([
      ("experiments.benchmarks.ngram", [
          (f"--output_dir={root / 'bad_flag' / 'out'}", "--sequential_models=0"),
          (f"--output_dir={root / 'bench' / 'out'}", "--num_models=64", "--num_steps=5",
           "--sequential_models=4", "--check_models=2", "--num_repeats=1")]),
      ("experiments.ngram_reconstruction", [
          (f"--output_dir={root / 'bad_sigma' / 'out'}", "--noise_multipliers=0"),
          {"argv": [f"--output_dir={tiny}", *TINY_FLAGS],
           "copy_after": [[str(tiny), str(root / "tiny_first")]]},
          (f"--output_dir={tiny}", *TINY_FLAGS)]),
  ])
  return {"root": root, "bad_flag": bad_flag, "benchmark": benchmark, "bad_sigma": bad_sigma,
          "tiny": first, "again": again}


def test_tiny_run_writes_results_and_rerun_reuses_cells(started):
  out_dir = started["root"] / "tiny_first"  # as the first run left it
  out = started["tiny"]
  assert out.returncode == 0, out.stderr
  results = read_json(out_dir / "results.json")
  for key in ("canary", "log_p0", "points", "config", "versions", "wall_time_s"):
    assert key in results, key
  assert len(results["canary"]) == 4 and all(0 <= c < 10 for c in results["canary"])
  assert abs(results["log_p0"] + 4 * 2.302585092994046) < 1e-12
  assert results["config"]["num_models"] == 500 and results["config"]["num_steps"] == 10
  points = results["points"]
  assert [p["noise_multiplier"] for p in points] == [1.0, 4.0]
  for p in points:
    for key in ("leakage", "leakage_bound", "traditional_bound", "mean_log_f", "std_log_f",
                "effective_sample_size", "reliable"):
      assert key in p, key
    assert 0 < p["effective_sample_size"] <= 500
    assert p["leakage_bound"] <= p["traditional_bound"] + 1e-9
    assert p["leakage_bound"] <= -results["log_p0"] + 1e-9
    if p["reliable"]:
      assert p["leakage"] <= p["leakage_bound"] + 3 * p["log_p1_se"]
  assert points[0]["leakage"] > points[1]["leakage"]
  assert (out_dir / "fig4.png").stat().st_size > 10_000
  cells = sorted(os.listdir(out_dir / "cells"))
  assert [c.split("-")[0] for c in cells] == ["sigma_1", "sigma_4"], cells
  assert all(c.endswith(".json") for c in cells), cells
  assert "L(p0)" in out.stdout and "reused" not in out.stderr

  again = started["again"]
  assert again.returncode == 0, again.stderr
  assert again.stderr.count("reused") == 2, again.stderr
  rerun = read_json(started["root"] / "tiny" / "out" / "results.json")
  assert rerun["points"] == points and rerun["canary"] == results["canary"]


def test_ngram_reconstruction_bad_input_exits_2(started):
  out = started["bad_sigma"]
  assert out.returncode == 2
  assert out.stderr.strip().count("\n") == 0, out.stderr
  assert out.stderr.startswith("error:") and "noise_multipliers" in out.stderr
  assert "Traceback" not in out.stderr


def test_benchmark_tiny_run(started):
  out = started["benchmark"]
  tmp_path = started["root"] / "bench" / "out"
  assert out.returncode == 0, out.stderr
  printed = loads(out.stdout)
  saved = read_json(tmp_path / "results.json")
  assert printed == saved
  assert saved["num_models"] == 64 and saved["num_steps"] == 5
  assert saved["learning_rate"] == 0.5 / saved["noise_multiplier"]
  for name in ("equality_check", "equality_check_step_loop"):
    check = saved[name]
    assert check["passed"] is True, check
  vmapped = saved["vmapped"]
  assert vmapped["repeats"] == 1 and vmapped["median_s"] > 0
  for loop, speedup in (("sequential", "speedup"),
                        ("sequential_step_loop", "speedup_vs_step_loop")):
    assert saved[loop]["extrapolated_total_s"] > 0
    assert abs(saved[speedup] - saved[loop]["extrapolated_total_s"] / vmapped["median_s"]) \
        <= 1e-9 * saved[speedup]
  assert saved["target_seconds"] == 5.0
  assert saved["meets_target_seconds"] == (vmapped["median_s"] < 5.0)
  assert saved["meets_target_speedup"] == (saved["speedup"] >= saved["target_speedup"])


def test_benchmark_bad_flag_exits_2(started):
  out = started["bad_flag"]
  assert out.returncode == 2
  assert out.stderr.strip().count("\n") == 0, out.stderr
  assert out.stderr.startswith("error: --sequential_models=0")
  assert "Traceback" not in out.stderr
