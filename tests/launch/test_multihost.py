"""Two cooperating processes (jax.distributed over loopback, Gloo) get the results of one
process: the Monte Carlo engine's per-chunk keys, and those of the vmapped training runs
(many-run audit, n-gram models), do not depend on who runs a chunk."""

import math
import os
import subprocess
import sys

import pytest

from dpaudit.results import read_json

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_monte_carlo_and_training_runs_spread_over_two_processes(tmp_path):
  """The tightness report's noisy-argmax cuts (Monte Carlo engine: 40,000 trials per histogram
  in 10 chunks of 4,096) and vmapped n-gram training runs (24 models in 3 chunks of 8: process 0
  runs chunks 0 and 2, process 1 chunk 1 and a repeat of chunk 2) give the one-process rows.
  The many-run DP-SGD game shares its chunks out through the same
  :func:`dpaudit.distributed.map_chunks`."""
  flags = ["--families=noisy_argmax,ngram", "--noisy_argmax_trials=40000",
           "--noisy_argmax_chunk_size=4096", "--ngram_models=24", "--ngram_chunk_size=8",
           "--ngram_steps=3"]
  rows, versions = {}, {}
  for name, prefix in (("one", []), ("two", ["-m", "launch.multihost", "--num_processes=2",
                                             "--"])):
    out = subprocess.run([sys.executable, *(prefix or ["-m"]), "experiments.tightness", *flags,
                          f"--output_dir={tmp_path / name}"] + (["--noplot"] if prefix else []),
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    if name == "one":  # the CLI's outputs (tests/experiments/test_tightness_cli.py: errors)
      assert (tmp_path / "one" / "tightness.png").stat().st_size > 10_000
      assert "ngram canary reconstruction" in out.stdout and "noisy_argmax 2-cut" in out.stdout
    written = read_json(tmp_path / name / "results.json")
    versions[name] = written["versions"]
    rows[name] = [{k: v for k, v in row.items() if k != "wall_time_s"}
                  for row in written["rows"]]
  assert versions["two"]["devices"] == "cpu:cpu, cpu:cpu"  # both processes' devices
  assert versions["one"]["devices"] == "cpu:cpu"
  assert rows["two"] == rows["one"]
  assert written["experiment"] == "tightness" and written["config"]["ngram_models"] == 24
  two_cut, k_cut, ngram = rows["one"]
  assert two_cut["audit"] == "noisy_argmax 2-cut" and k_cut["audit"] == "noisy_argmax k-cut"
  assert two_cut["num_observations"] == 40000
  assert two_cut["reference"] == k_cut["reference"] > 0 and two_cut["reference_kind"] == "exact"
  assert two_cut["kind"] == "finite-sample" and k_cut["kind"] == "asymptotic"
  for row in rows["one"]:
    assert row["confidence"] == 0.95 and row["lower_bound"] <= row["reference"] + 1e-9, row
  assert ngram["ceiling"] == pytest.approx(10 * math.log(10))  # log(1/p0), T = 10, D = 10
  assert ngram["reference"] <= ngram["ceiling"]
  assert ngram["num_observations"] == 24 and ngram["unit"] == "models"


def test_bad_arguments_exit_2():
  out = subprocess.run([sys.executable, "-m", "launch.multihost", "--num_processes=0", "--",
                        "experiments.noisy_argmax_audit"], capture_output=True, text=True,
                       cwd=ROOT)
  assert out.returncode == 2 and "num_processes=0" in out.stderr
