"""Smoke tests of `python -m experiments.ngram_reconstruction` (results, resume, error path) and
of the benchmark `python -m experiments.benchmarks.ngram`."""

import os
import subprocess
import sys

import pytest

from dpaudit.results import loads, read_json

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TINY_FLAGS = ("--noise_multipliers=1,4", "--num_models=500", "--num_steps=10",
              "--canary_length=4")


def _run(module, *flags):
  return subprocess.run([sys.executable, "-m", module, *flags], capture_output=True, text=True,
                        cwd=ROOT)


class _Started:
  """A CLI run started in the background (output to files, so no pipe can fill up)."""

  def __init__(self, directory, module, *flags):
    os.makedirs(directory, exist_ok=True)
    self.directory = directory
    self._out = open(os.path.join(directory, "stdout.txt"), "w+")
    self._err = open(os.path.join(directory, "stderr.txt"), "w+")
    self._proc = subprocess.Popen([sys.executable, "-m", module, *flags], cwd=ROOT,
                                  stdout=self._out, stderr=self._err, text=True)

  def result(self, timeout=300):
    returncode = self._proc.wait(timeout=timeout)
    outputs = []
    for f in (self._out, self._err):
      f.seek(0)
      outputs.append(f.read())
      f.close()
    return subprocess.CompletedProcess(self._proc.args, returncode, *outputs)


@pytest.fixture(scope="module")
def started(tmp_path_factory):
  """The independent CLI runs of this module, started at once: they are mostly
  single-threaded compilation, so running them side by side halves the wall time."""
  root = tmp_path_factory.mktemp("ngram_cli")
  runs = {
      "tiny": _Started(root / "tiny", "experiments.ngram_reconstruction",
                       f"--output_dir={root / 'tiny' / 'out'}", *TINY_FLAGS),
      "benchmark": _Started(root / "bench", "experiments.benchmarks.ngram",
                            f"--output_dir={root / 'bench' / 'out'}", "--num_models=64",
                            "--num_steps=5", "--sequential_models=4", "--check_models=2",
                            "--num_repeats=1"),
      "bad_sigma": _Started(root / "bad_sigma", "experiments.ngram_reconstruction",
                            f"--output_dir={root / 'bad_sigma' / 'out'}",
                            "--noise_multipliers=0"),
      "bad_flag": _Started(root / "bad_flag", "experiments.benchmarks.ngram",
                           f"--output_dir={root / 'bad_flag' / 'out'}",
                           "--sequential_models=0"),
  }
  yield runs
  for run in runs.values():  # only the processes started here, each by its own handle
    if run._proc.poll() is None:
      run._proc.kill()
      run._proc.wait()


def test_tiny_run_writes_results_and_rerun_reuses_cells(started):
  out_dir = started["tiny"].directory / "out"
  flags = (f"--output_dir={out_dir}",) + TINY_FLAGS
  out = started["tiny"].result()
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

  again = _run("experiments.ngram_reconstruction", *flags)
  assert again.returncode == 0, again.stderr
  assert again.stderr.count("reused") == 2, again.stderr
  rerun = read_json(out_dir / "results.json")
  assert rerun["points"] == points and rerun["canary"] == results["canary"]


def test_ngram_reconstruction_bad_input_exits_2(started):
  out = started["bad_sigma"].result()
  assert out.returncode == 2
  assert out.stderr.strip().count("\n") == 0, out.stderr
  assert out.stderr.startswith("error:") and "noise_multipliers" in out.stderr
  assert "Traceback" not in out.stderr


def test_benchmark_tiny_run(started):
  out = started["benchmark"].result()
  tmp_path = started["benchmark"].directory / "out"
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
  out = started["bad_flag"].result()
  assert out.returncode == 2
  assert out.stderr.strip().count("\n") == 0, out.stderr
  assert out.stderr.startswith("error: --sequential_models=0")
  assert "Traceback" not in out.stderr
