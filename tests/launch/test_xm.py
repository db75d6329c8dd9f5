"""launch.xm: a sweep through xmanager's local executor (offline, for real), and the Vertex AI
and Kubernetes job specs up to submission."""

import os
import subprocess
import sys

import pytest

from launch import sweep

xmanager = pytest.importorskip("xmanager")  # requirements-launch.txt (in requirements-dev.txt)
from launch import xm_jobs as launch_xm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = {"num_trials": 20000, "orders": "2", "num_bootstrap": 20, "plot": False}


def test_local_executor_runs_a_two_job_sweep_offline(tmp_path):
  sweep_file = tmp_path / "tiny.py"
  sweep_file.write_text(
      "from launch.sweep import Sweep, product\n"
      f"SWEEP = Sweep(name='tiny', module='experiments.noisy_argmax_audit', fixed={TINY!r},\n"
      "              grid=product(sigma=[2.0, -1.0]))\n")
  env = {**os.environ, "HOME": str(tmp_path)}  # xmanager's local database goes to ~/.xmanager
  argv = [sys.executable, "-m", "launch.xm", f"--sweep={sweep_file}", "--executor=local",
          f"--output_root={tmp_path / 'out'}"]
  out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
  # sigma=-1 is refused by the experiment: that job fails, the other finishes.
  assert out.returncode == 1, out.stderr
  assert "1 of 2 jobs failed: sigma=-1.0" in out.stderr
  assert "xmanager experiment" in out.stderr
  assert os.path.exists(tmp_path / ".xmanager" / "experiments.sqlite3")
  done = tmp_path / "out" / "tiny" / "sigma=2.0"
  assert (done / "results.json").exists() and (done / "job.json").exists()
  assert "outside the valid range" in (tmp_path / "out" / "tiny" / "sigma=-1.0" /
                                       "job.log").read_text()
  summary = (tmp_path / "out" / "tiny" / "summary.md").read_text()
  assert "| sigma=2.0 | finished |" in summary and "| sigma=-1.0 | failed |" in summary
  # A rerun skips the finished job (also when the other launcher finished it).
  again = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
  assert "2 jobs, 1 finished earlier, 1 to run" in again.stderr


def test_cloud_job_specs_up_to_submission(tmp_path):
  from xmanager import xm_local
  s = sweep.load(os.path.join(ROOT, "launch", "sweeps", "uniaud_table.py"))
  plan = launch_xm.plan(s, "vertex", "/gcs/bucket/sweeps", accelerator="A100",
                        accelerator_count=2, base_image="python:3.11")
  assert len(plan.jobs) == 4 and not plan.skipped
  container = plan.packageable.executable_spec
  assert container.path == ROOT and container.base_image == "python:3.11"
  assert container.entrypoint.module_name == "launch.job"
  job, executor, args = plan.jobs[0]
  assert isinstance(executor, xm_local.Vertex)
  assert launch_xm.cluster_request(executor) == {
      "accelerator_type": "NVIDIA_TESLA_A100", "accelerator_count": 2,
      "machine_type": "a2-highgpu-2g"}
  assert args == {"launch_module": "experiments.dpsgd_audit", **job.flags,
                  "output_dir": f"/gcs/bucket/sweeps/uniaud_table/{job.name}"}
  k8s = launch_xm.plan(s, "kubernetes", "/mnt/shared", accelerator="T4")
  request = launch_xm.cluster_request(k8s.jobs[0][1])
  assert request["limits"] == {"nvidia.com/gpu": "1"}
  assert request["node_selector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
  with pytest.raises(ValueError, match="accelerator='Z80'"):
    launch_xm.plan(s, "vertex", "/gcs/b", accelerator="Z80")
