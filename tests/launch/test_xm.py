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


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
  """Bad --output_root (local executor), sweep files that do not load, unparsable flags: exit 2,
  one line, no traceback, nothing written (one child process runs every case)."""
  a_file = tmp_path / "a_file"
  a_file.write_text("x")
  syntax = tmp_path / "syntax.py"
  syntax.write_text("from launch.sweep import Sweep\nSWEEP = Sweep(name='s',\n  module=)\n")
  raising = tmp_path / "raising.py"
  raising.write_text("SWEEP = {}['missing']\n")
  good = tmp_path / "tiny.py"
  good.write_text("from launch.sweep import Sweep, product\n"
                  "SWEEP = Sweep(name='tiny', module='experiments.noisy_argmax_audit',\n"
                  "              grid=product(sigma=[2.0]))\n")
  root = f"--output_root={tmp_path / 'out'}"
  cases = [
      ([f"--sweep={good}", f"--output_root={a_file}"], "is a file"),
      ([f"--sweep={good}", f"--output_root={a_file}/sub"], "lies under the file"),
      ([f"--sweep={good}", f"--output_root={tmp_path}/{'x' * 300}"], "too long"),
      (["--sweep=", root], "--sweep is required"),
      (["--sweep=no_such_sweep", root], "is neither a file nor a sweep"),
      ([f"--sweep={syntax}", root], f"sweep file {syntax}, line 3: SyntaxError"),
      ([f"--sweep={raising}", root], f"sweep file {raising}, line 1 raised KeyError"),
      ([f"--sweep={good}", root, "--accelerator_count=two"], "--accelerator_count=two"),
      ([f"--sweep={good}", root, "--executor=moon"], "--executor"),
  ]
  before = sorted(os.listdir(tmp_path))
  code = (
      "import io, sys, contextlib\n"
      "from absl import app, flags\n"
      "from launch import processes, xm\n"
      "for argv in eval(sys.stdin.read()):\n"
      "  err = io.StringIO()\n"
      "  for name in list(flags.FLAGS):\n"
      "    flags.FLAGS[name].unparse()\n"
      "  flags.FLAGS.unparse_flags()\n"
      "  try:\n"
      "    with contextlib.redirect_stderr(err):\n"
      "      app.run(xm.main, argv=['launch.xm'] + argv, flags_parser=processes.parse_flags)\n"
      "    status = 0\n"
      "  except SystemExit as e:\n"
      "    status = e.code\n"
      "  print(repr((status, err.getvalue())))\n")
  out = subprocess.run([sys.executable, "-c", code], input=repr([argv for argv, _ in cases]),
                       capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "HOME": str(tmp_path / "home")})
  assert out.returncode == 0, out.stderr
  results = [eval(line) for line in out.stdout.splitlines()]  # pylint: disable=eval-used
  assert len(results) == len(cases), out.stdout
  for (argv, message), (status, err) in zip(cases, results):
    assert status == 2 and err.count("\n") == 1 and err.startswith("error: "), (argv, err)
    assert "Traceback" not in err and message in err, (argv, err)
  assert sorted(os.listdir(tmp_path)) == before and a_file.read_text() == "x"
