"""launch.sweep grids and launch.local: jobs run, crash, get killed and resume."""

import csv
import os
import signal
import subprocess
import sys
import time

import pytest

from launch import sweep

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = {"num_trials": 20000, "orders": "2", "num_bootstrap": 20, "plot": False}


def test_grids_and_job_names(tmp_path):
  assert sweep.product(a=[1, 2], b=["x"]) == ({"a": 1, "b": "x"}, {"a": 2, "b": "x"})
  assert sweep.zip_(a=[1, 2], b=[3, 4]) == ({"a": 1, "b": 3}, {"a": 2, "b": 4})
  assert len(sweep.cross(sweep.zip_(a=[1, 2], b=[3, 4]), sweep.product(c=[5, 6, 7]))) == 6
  with pytest.raises(ValueError, match="one length"):
    sweep.zip_(a=[1, 2], b=[3])
  with pytest.raises(ValueError, match="non-empty list"):
    sweep.product(a="12")
  s = sweep.Sweep("s", "experiments.noisy_argmax_audit", fixed={"plot": False},
                  grid=sweep.product(sigma=[2.0, 3.0], orders=[[2, 4]]))
  jobs = s.jobs(str(tmp_path))
  assert [j.name for j in jobs] == ["sigma=2.0,orders=2_4", "sigma=3.0,orders=2_4"]
  assert jobs[0].argv("python")[3:] == ["--plot=false", "--sigma=2.0", "--orders=2,4",
                                        f"--output_dir={tmp_path}/s/sigma=2.0,orders=2_4"]
  assert jobs[0].fingerprint() != jobs[1].fingerprint()
  with pytest.raises(ValueError, match="output_dir"):
    sweep.Sweep("s", "experiments.x", grid=sweep.product(output_dir=["a"]))


def test_every_shipped_sweep_loads():
  names = list(sweep.available())
  assert {"uniaud_table.py", "uniaud_plus_tradeoff.py", "fig4.py",
          "train_dpsgd_accuracy.py"} <= set(names)
  for name in names:
    s = sweep.load(os.path.join(ROOT, "launch", "sweeps", name))
    assert s.jobs("out") and s.module.startswith("experiments.")


def _write_sweep(path, sigmas):
  path.write_text(
      "from launch.sweep import Sweep, product\n"
      f"SWEEP = Sweep(name='tiny', module='experiments.noisy_argmax_audit', fixed={TINY!r},\n"
      f"              grid=product(sigma={sigmas!r}))\n")
  return str(path)


def _launch(sweep_file, root, *flags, **kwargs):
  argv = [sys.executable, "-m", "launch.local", f"--sweep={sweep_file}",
          f"--output_root={root}", *flags]
  return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, **kwargs)


def test_crash_kill_and_rerun(tmp_path):
  """A crashed job does not stop the others; a sweep killed mid-job reruns only what was
  missing (one sweep, so the suite stays short)."""
  sweep_file = _write_sweep(tmp_path / "tiny.py", [2.0, -1.0, 3.0])  # sigma=-1: exit 2
  root = tmp_path / "out" / "tiny"
  argv = [sys.executable, "-m", "launch.local", f"--sweep={sweep_file}",
          f"--output_root={tmp_path / 'out'}"]
  launcher = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
  deadline = time.time() + 240
  while not (root / "sigma=3.0" / "job.log").exists() and time.time() < deadline:
    time.sleep(0.2)
  launcher.send_signal(signal.SIGTERM)  # mid-way through the last job
  _, err = launcher.communicate(timeout=60)
  assert launcher.returncode == 130, err
  assert "FAILED sigma=-1.0: exit code 2; log:" in err and "done  sigma=2.0" in err
  assert (root / "sigma=2.0" / "job.json").exists()
  assert not (root / "sigma=3.0" / "job.json").exists()
  assert "sigma=-1.0 is outside" in (root / "sigma=-1.0" / "job.log").read_text()
  rerun = _launch(sweep_file, tmp_path / "out", "--parallelism=2")
  assert rerun.returncode == 1, rerun.stderr
  assert "3 jobs, 1 finished earlier, 2 to run" in rerun.stderr
  assert "start sigma=2.0" not in rerun.stderr and "done  sigma=3.0" in rerun.stderr
  with open(root / "summary.csv") as f:
    rows = {r["job"]: r for r in csv.DictReader(f)}
  assert rows["sigma=-1.0"]["status"] == "failed" and rows["sigma=-1.0"]["exit_code"] == "2"
  assert rows["sigma=2.0"]["status"] == "skipped (finished earlier)"
  assert rows["sigma=3.0"]["status"] == "finished" and float(rows["sigma=3.0"]["num_trials"]) == 20000
  assert (root / "summary.md").read_text().startswith("| job |")


def test_bad_flags_exit_2(tmp_path):
  out = _launch("no_such_sweep", tmp_path)
  assert out.returncode == 2 and out.stderr.startswith("error: --sweep=no_such_sweep")
  assert "uniaud_table" in out.stderr
