"""launch.job, the guard every sweep job runs under: its experiment's whole process group ends
with it, and a job directory another process holds is not started twice."""

import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  try:
    with open(f"/proc/{pid}/stat") as f:  # a zombie nobody collected yet has ended too
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except OSError:
    return False


def _wait_for(condition, timeout=30):
  deadline = time.time() + timeout
  while not condition():
    assert time.time() < deadline, "timed out"
    time.sleep(0.05)


def _guard(job_dir, env=None):
  """launch.job running tests.launch.sleeper (which starts a child) in ``job_dir``; returns
  (guard, [experiment pid, its child's pid]) once both run."""
  guard = subprocess.Popen(
      [sys.executable, "-m", "launch.job", "--launch_module=tests.launch.sleeper", "--child=1",
       f"--output_dir={job_dir}"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True, env={**os.environ, **(env or {})})
  paths = [job_dir / "pid_0", job_dir / "pid_child"]
  try:
    _wait_for(lambda: all(p.exists() for p in paths) or guard.poll() is not None)
  except BaseException:
    guard.send_signal(signal.SIGTERM)  # the guard takes its experiment's group with it
    guard.communicate()
    raise
  return guard, [int(p.read_text()) for p in paths if p.exists()]


def _kill(pids):
  for pid in pids:
    try:
      os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
      pass


@pytest.mark.parametrize("how", ["SIGTERM", "launcher ends"])
def test_the_experiments_process_group_ends_with_the_guard(tmp_path, how):
  """SIGTERM to the guard, or the end of the launcher it watches (xmanager's local executor),
  stops the experiment and the child it started (same process group)."""
  launcher = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
  env = {"DPAUDIT_JOB_LAUNCHER_PID": str(launcher.pid)} if how == "launcher ends" else {}
  guard, pids = None, []
  try:
    guard, pids = _guard(tmp_path / "job", env)
    assert len(pids) == 2, guard.communicate()
    if how == "SIGTERM":
      guard.send_signal(signal.SIGTERM)
    else:
      launcher.kill()
    _, err = guard.communicate(timeout=60)
    assert guard.returncode == 128 + signal.SIGTERM, err
    assert "STOPPED tests.launch.sleeper" in err
    _wait_for(lambda: not any(_alive(p) for p in pids))
    assert not (tmp_path / "job" / "job.json").exists()
  finally:
    launcher.kill()
    launcher.wait()
    if guard is not None and guard.poll() is None:
      guard.kill()
      guard.communicate()
    _kill(pids)


def test_a_job_directory_another_process_holds_is_not_started_again(tmp_path):
  job_dir = tmp_path / "job"
  holder = subprocess.Popen(
      [sys.executable, "-c", "import time; from dpaudit import results; "
       f"results.lock_directory({str(job_dir)!r}); print('held', flush=True); time.sleep(120)"],
      cwd=ROOT, stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline() == "held\n"
    for exit_zero, code in (("0", 75), ("1", 0)):
      out = subprocess.run(
          [sys.executable, "-m", "launch.job", "--launch_module=tests.launch.sleeper",
           f"--output_dir={job_dir}"], cwd=ROOT, capture_output=True, text=True, timeout=60,
          env={**os.environ, "DPAUDIT_JOB_EXIT_ZERO": exit_zero})
      assert out.returncode == code, out.stderr
      assert out.stderr.count("\n") == 1 and f"in use by process {holder.pid}" in out.stderr
  finally:
    holder.kill()
    holder.wait()
  assert sorted(os.listdir(job_dir)) == [".lock"]  # nothing started, no log truncated


def test_a_finished_experiments_leftover_children_are_killed(tmp_path):
  """The experiment exits (here: fails) while a child it started still runs: the guard kills
  the child before it collects the experiment."""
  job_dir = tmp_path / "job"
  out = subprocess.run(
      [sys.executable, "-m", "launch.job", "--launch_module=tests.launch.sleeper", "--child=1",
       "--fail=0", f"--output_dir={job_dir}"], cwd=ROOT, capture_output=True, text=True,
      timeout=60)
  assert out.returncode == 3 and "FAILED tests.launch.sleeper" in out.stderr, out.stderr
  child = int((job_dir / "pid_child").read_text()) if (job_dir / "pid_child").exists() else None
  if child is not None:  # the child may not have got as far as writing its id
    _wait_for(lambda: not _alive(child), 10)
