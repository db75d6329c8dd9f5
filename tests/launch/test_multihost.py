"""Two cooperating processes (jax.distributed over loopback, Gloo) get the results of one
process: the Monte Carlo engine's per-chunk keys, and those of the vmapped training runs
(many-run audit, n-gram models), do not depend on who runs a chunk."""

import math
import os
import signal
import subprocess
import sys
import time

import pytest

from dpaudit.results import read_json

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_monte_carlo_and_training_runs_spread_over_two_processes(tmp_path):
  """The tightness report's noisy-argmax cuts (Monte Carlo engine: 40,000 trials per histogram
  in 10 chunks of 4,096) and vmapped n-gram training runs (24 models in 3 chunks of 8: process 0
  runs chunks 0 and 2, process 1 chunk 1 and a repeat of chunk 2) give the one-process rows.
  The many-run DP-SGD game shares its chunks out through the same
  :func:`dpaudit.distributed.map_chunks`."""
  flags = ["--families=noisy_argmax,ngram", "--noisy_argmax_num_trials=40000",
           "--noisy_argmax_chunk_size=4096", "--ngram_num_models=24", "--ngram_chunk_size=8",
           "--ngram_num_steps=3"]
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
  assert written["experiment"] == "tightness" and written["config"]["ngram_num_models"] == 24
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


BAD_ARGUMENTS = [
    (["--num_processes=0", "--", "experiments.tightness"], "num_processes=0 is outside"),
    (["--num_processes=-1", "--", "experiments.tightness"], "num_processes=-1 is outside"),
    (["--num_processes=100000", "--", "experiments.tightness"], "num_processes=100000 is"),
    (["--num_processes=two", "--", "experiments.tightness"], "--num_processes=two"),
    (["--devices_per_process=0", "--", "experiments.tightness"], "devices_per_process=0"),
    (["--", "experiments.no_such_experiment"], "module experiments.no_such_experiment not"),
    (["--", "not a module"], "is not a Python module path"),
    ([], "give the experiment after --"),
    (["--process_log_dir={file}", "--", "experiments.tightness"], "is a file"),
    (["--process_log_dir={file}/logs", "--", "experiments.tightness"], "lies under the file"),
]


@pytest.mark.parametrize("args,message", BAD_ARGUMENTS, ids=[m for _, m in BAD_ARGUMENTS])
def test_bad_arguments_are_one_line_and_start_nothing(tmp_path, args, message):
  a_file = tmp_path / "a_file"
  a_file.write_text("x")
  out = subprocess.run([sys.executable, "-m", "launch.multihost",
                        *(a.format(file=a_file) for a in args)], capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
  assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
  assert out.stderr.startswith("error: ") and message in out.stderr, out.stderr
  assert os.listdir(tmp_path) == ["a_file"] and a_file.read_text() == "x"


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  with open(f"/proc/{pid}/stat") as f:  # a zombie nobody collected yet has ended too
    return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def _wait_for(condition, timeout=30):
  deadline = time.time() + timeout
  while not condition():
    assert time.time() < deadline, "timed out"
    time.sleep(0.05)


def _start(tmp_path, *extra):
  """launch.multihost with two sleepers; returns (launcher, [their pids]) once both run."""
  launcher = subprocess.Popen(
      [sys.executable, "-m", "launch.multihost", "--num_processes=2", "--",
       "tests.launch.sleeper", str(tmp_path), *extra], cwd=ROOT, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
  paths = [tmp_path / f"pid_{i}" for i in range(2)]
  _wait_for(lambda: all(p.exists() for p in paths) or launcher.poll() is not None, 60)
  return launcher, [int(p.read_text()) for p in paths if p.exists()]


def _kill(pids):
  for pid in pids:
    try:
      os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
      pass


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL", "a process fails"])
def test_processes_end_with_the_launcher(tmp_path, how):
  """SIGTERM to the launcher stops every process (exit 130); kill -9 of the launcher takes
  them with it (parent-death signal); one process failing stops the others (exit 1)."""
  launcher, pids = _start(tmp_path, *(["--fail=1"] if how == "a process fails" else []))
  try:
    assert len(pids) == 2
    if how == "SIGTERM":
      launcher.send_signal(signal.SIGTERM)
    elif how == "SIGKILL":
      launcher.kill()
    _, err = launcher.communicate(timeout=60)
    expected = {"SIGTERM": 130, "SIGKILL": -9, "a process fails": 1}[how]
    assert launcher.returncode == expected, err
    if how == "a process fails":
      assert "exit codes by process: [-15, 3]" in err
    _wait_for(lambda: not any(_alive(p) for p in pids))
  finally:
    if launcher.poll() is None:
      launcher.kill()
      launcher.communicate()
    _kill(pids)
