"""Two cooperating processes (jax.distributed over loopback, Gloo) get the results of one
process: the Monte Carlo engine's per-chunk keys, and those of the vmapped training runs
(many-run audit, n-gram models), do not depend on who runs a chunk."""

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


def _one_and_two(tmp_path, module, flags):
  """results.json of ``module`` run by one process and by two."""
  def run(*prefix, name):
    out = subprocess.run([sys.executable, *prefix, module, *flags,
                          f"--output_dir={tmp_path / name}"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    return read_json(tmp_path / name / "results.json")
  return (run("-m", name="one"),
          run("-m", "launch.multihost", "--num_processes=2", "--", name="two"))


def test_vmapped_training_runs_spread_over_two_processes(tmp_path):
  # many_run: 2T = 12 runs in 3 chunks of 4 (process 0 runs chunks 0 and 2, process 1 chunk 1
  # and a repeat of chunk 2); n-gram: 24 models in 3 chunks of 8 likewise.
  one, two = _one_and_two(tmp_path / "dpsgd", "experiments.dpsgd_audit", [
      "--audits=many_run:dirac", "--num_runs=6", "--chunk_size=4", "--epochs=1",
      "--batch_size=64", "--hidden_sizes=4", "--epsilons=4", "--noplot"])
  keep = lambda cell: {k: v for k, v in cell["result"].items() if k != "wall_time_s"}
  assert [keep(c) for c in two["cells"]] == [keep(c) for c in one["cells"]]
  assert one["cells"][0]["result"]["num_observations"] == 12
  one, two = _one_and_two(tmp_path / "ngram", "experiments.ngram_reconstruction", [
      "--noise_multipliers=2", "--num_models=24", "--chunk_size=8", "--num_steps=3",
      "--noplot"])
  assert two["points"] == one["points"] and two["canary"] == one["canary"]


def test_bad_arguments_exit_2():
  out = subprocess.run([sys.executable, "-m", "launch.multihost", "--num_processes=0", "--",
                        "experiments.noisy_argmax_audit"], capture_output=True, text=True,
                       cwd=ROOT)
  assert out.returncode == 2 and "num_processes=0" in out.stderr
