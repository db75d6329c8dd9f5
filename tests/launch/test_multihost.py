"""Two cooperating processes (jax.distributed over loopback, Gloo) count the same outcomes as
one process: the Monte Carlo engine's per-chunk keys do not depend on who runs a chunk."""

import os
import subprocess
import sys

from dpaudit.results import read_json

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLAGS = ["--num_trials=40000", "--orders=2", "--num_bootstrap=20", "--noplot",
         "--chunk_size=4096"]


def test_two_processes_give_the_counts_of_one(tmp_path):
  two = subprocess.run([sys.executable, "-m", "launch.multihost", "--num_processes=2", "--",
                        "experiments.noisy_argmax_audit", *FLAGS,
                        f"--output_dir={tmp_path / 'two'}"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
  assert two.returncode == 0, two.stderr
  one = subprocess.run([sys.executable, "-m", "experiments.noisy_argmax_audit", *FLAGS,
                        f"--output_dir={tmp_path / 'one'}"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
  assert one.returncode == 0, one.stderr
  two_results, one_results = (read_json(tmp_path / d / "results.json") for d in ("two", "one"))
  assert two_results["versions"]["devices"] == "cpu:cpu, cpu:cpu"  # both processes' devices
  assert one_results["versions"]["devices"] == "cpu:cpu"
  assert two_results["counts"] == one_results["counts"]
  assert sum(two_results["counts"]["sel_p"]) + sum(two_results["counts"]["eval_p"]) == 40000


def test_bad_arguments_exit_2():
  out = subprocess.run([sys.executable, "-m", "launch.multihost", "--num_processes=0", "--",
                        "experiments.noisy_argmax_audit"], capture_output=True, text=True,
                       cwd=ROOT)
  assert out.returncode == 2 and "num_processes=0" in out.stderr
