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
                  grid=sweep.product(noise_multiplier=[2.0, 3.0], orders=[[2, 4]]))
  jobs = s.jobs(str(tmp_path))
  assert [j.name for j in jobs] == ["noise_multiplier=2.0,orders=2_4",
                                    "noise_multiplier=3.0,orders=2_4"]
  assert jobs[0].argv("python")[3:] == [
      "--plot=false", "--noise_multiplier=2.0", "--orders=2,4",
      f"--output_dir={tmp_path}/s/noise_multiplier=2.0,orders=2_4"]
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
      f"              grid=product(noise_multiplier={sigmas!r}))\n")
  return str(path)


def _launch(sweep_file, root, *flags, **kwargs):
  argv = [sys.executable, "-m", "launch.local", f"--sweep={sweep_file}",
          f"--output_root={root}", *flags]
  return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, **kwargs)


def test_crash_kill_and_rerun(tmp_path):
  """A crashed job does not stop the others; a sweep killed mid-job reruns only what was
  missing (one sweep, so the suite stays short)."""
  sweep_file = _write_sweep(tmp_path / "tiny.py", [2.0, -1.0, 3.0])  # noise_multiplier=-1: exit 2
  root = tmp_path / "out" / "tiny"
  argv = [sys.executable, "-m", "launch.local", f"--sweep={sweep_file}",
          f"--output_root={tmp_path / 'out'}"]
  launcher = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
  deadline = time.time() + 240
  while not (root / "noise_multiplier=3.0" / "job.log").exists() and time.time() < deadline:
    time.sleep(0.2)
  launcher.send_signal(signal.SIGTERM)  # mid-way through the last job
  _, err = launcher.communicate(timeout=60)
  assert launcher.returncode == 130, err
  assert "FAILED noise_multiplier=-1.0: exit code 2; log:" in err
  assert "done  noise_multiplier=2.0" in err
  assert (root / "noise_multiplier=2.0" / "job.json").exists()
  assert not (root / "noise_multiplier=3.0" / "job.json").exists()
  assert "noise_multiplier=-1.0 is outside" in (root / "noise_multiplier=-1.0" / "job.log"
                                                 ).read_text()
  rerun = _launch(sweep_file, tmp_path / "out", "--parallelism=2")
  assert rerun.returncode == 1, rerun.stderr
  assert "3 jobs, 1 finished earlier, 2 to run" in rerun.stderr
  assert "start noise_multiplier=2.0" not in rerun.stderr
  assert "done  noise_multiplier=3.0" in rerun.stderr
  with open(root / "summary.csv") as f:
    rows = {r["job"]: r for r in csv.DictReader(f)}
  failed, earlier, last = (rows[f"noise_multiplier={v}"] for v in ("-1.0", "2.0", "3.0"))
  assert failed["status"] == "failed" and failed["exit_code"] == "2"
  assert earlier["status"] == "skipped (finished earlier)"
  assert last["status"] == "finished" and float(last["num_trials"]) == 20000
  assert (root / "summary.md").read_text().startswith("| job |")


def test_bad_flags_exit_2(tmp_path):
  out = _launch("no_such_sweep", tmp_path)
  assert out.returncode == 2 and out.stderr.startswith("error: --sweep=no_such_sweep")
  assert "uniaud_table" in out.stderr


# ------------------------------------------------------------ faults, races and bad input


def _pids_with_arg(arg):
  """Live (not zombie) processes whose command line holds ``arg``."""
  pids = []
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    except OSError:
      continue
    if arg.encode() in argv and _alive(int(entry)):
      pids.append(int(entry))
  return pids


def _alive(pid):
  """False once ``pid`` has exited: no such process, or a zombie nobody collected yet (a
  process whose parent died is collected by init, which may take a moment in a container)."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except OSError:
    return False


def _wait_for(condition, timeout, what):
  deadline = time.time() + timeout
  while not condition():
    assert time.time() < deadline, f"timed out waiting for {what}"
    time.sleep(0.1)


def _start_job(tmp_path, name="slow"):
  """A launcher on a one-job sweep, once its guard and experiment are both running:
  (launcher, job directory, [guard pid, experiment pid])."""
  sweep_file = tmp_path / f"{name}.py"
  sweep_file.write_text(
      "from launch.sweep import Sweep, product\n"
      f"SWEEP = Sweep(name={name!r}, module='experiments.noisy_argmax_audit',\n"
      f"              fixed={{**{TINY!r}, 'num_trials': 10**9}},\n"
      "              grid=product(noise_multiplier=[2.0]))\n")
  launcher = subprocess.Popen(
      [sys.executable, "-m", "launch.local", f"--sweep={sweep_file}",
       f"--output_root={tmp_path / 'out'}"], cwd=ROOT, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
  job_dir = tmp_path / "out" / name / "noise_multiplier=2.0"
  arg = f"--output_dir={job_dir}"
  try:
    _wait_for(lambda: len(_pids_with_arg(arg)) >= 2 or launcher.poll() is not None, 120,
              "the job's guard and experiment")
    assert launcher.poll() is None, launcher.communicate()
  except BaseException:
    _kill(_pids_with_arg(arg) + [launcher.pid])
    raise
  return launcher, job_dir, _pids_with_arg(arg)


def _kill(pids):
  """SIGKILL to ``pids`` still alive: a failing test leaves no process behind."""
  for pid in pids:
    if _alive(pid):
      try:
        os.kill(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass


def test_sigterm_under_load_stops_the_job_group_and_writes_the_summary(tmp_path):
  """The issue's flake: under load, SIGTERM to the launcher must stop it (130), not be
  swallowed; the job's processes are gone and the summary says it was stopped."""
  hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
  pids = []
  try:
    launcher, job_dir, pids = _start_job(tmp_path)
    launcher.send_signal(signal.SIGTERM)
    _, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 130, err
    assert "interrupted (signal 15)" in err and "Traceback" not in err
    _wait_for(lambda: not any(_alive(p) for p in pids), 10, f"the job's processes {pids} to end")
  finally:
    for hog in hogs:
      hog.kill()
      hog.wait()
    _kill(pids)
  with open(job_dir.parent / "summary.csv") as f:
    assert [r["status"] for r in csv.DictReader(f)] == ["stopped"]
  assert not (job_dir / "job.json").exists()


def test_kill_9_of_the_launcher_ends_its_job_and_one_launcher_per_sweep(tmp_path):
  from dpaudit import results
  launcher, job_dir, pids = _start_job(tmp_path)
  try:
    second = _launch(tmp_path / "slow.py", tmp_path / "out", timeout=120)
    assert second.returncode == 2, second.stderr
    assert second.stderr.count("\n") == 1 and "in use by another process" in second.stderr
    assert f"pid {launcher.pid}" in second.stderr
  finally:
    launcher.kill()  # SIGKILL: no handler runs
    launcher.communicate()
  try:
    _wait_for(lambda: not any(_alive(p) for p in pids), 30, f"the job's processes {pids} to end")
  finally:
    _kill(pids)
  assert results.directory_holder(job_dir.parent) is None  # the sweep is free again


def test_rerun_does_not_start_a_job_another_process_still_holds(tmp_path):
  """A job directory held by a live process (an orphan of an earlier launch, or a foreign
  run) is reported and left alone; the job counts as not finished."""
  sweep_file = _write_sweep(tmp_path / "tiny.py", [2.0])
  job_dir = tmp_path / "out" / "tiny" / "noise_multiplier=2.0"
  job_dir.mkdir(parents=True)
  (job_dir / "job.log").write_text("the earlier launch's log\n")
  holder = subprocess.Popen(
      [sys.executable, "-c", "import sys, time; from dpaudit import results; "
       f"results.lock_directory({str(job_dir)!r}); print('held', flush=True); time.sleep(120)"],
      cwd=ROOT, stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline() == "held\n"
    out = _launch(sweep_file, tmp_path / "out", timeout=120)
  finally:
    holder.kill()
    holder.wait()
  assert out.returncode == 1, out.stderr
  assert f"is in use by process {holder.pid}" in out.stderr
  assert "start noise_multiplier" not in out.stderr
  assert (job_dir / "job.log").read_text() == "the earlier launch's log\n"
  with open(job_dir.parent / "summary.csv") as f:
    assert [r["status"] for r in csv.DictReader(f)] == [f"running elsewhere (pid {holder.pid})"]


def _bad_inputs(tmp_path):
  a_file = tmp_path / "a_file"
  a_file.write_text("x")
  syntax = tmp_path / "syntax.py"
  syntax.write_text("from launch.sweep import Sweep\nSWEEP = Sweep(name='s',\n  module=)\n")
  raising = tmp_path / "raising.py"
  raising.write_text("import math\n\nSWEEP = math.sqrt(-1)\n")
  good = _write_sweep(tmp_path / "tiny.py", [2.0])
  root = str(tmp_path / "out")
  locked = tmp_path / "locked"
  locked.mkdir(mode=0o500)
  unwritable = {}
  if os.geteuid() != 0:  # root writes anywhere: "under a file" stands for it then
    unwritable["output_root unwritable"] = ([f"--sweep={good}", f"--output_root={locked}/out"],
                                            "is not writable")
  return {
      **unwritable,
      "output_root is a file": ([f"--sweep={good}", f"--output_root={a_file}"], "is a file"),
      "output_root under a file": ([f"--sweep={good}", f"--output_root={a_file}/sub"],
                                   "lies under the file"),
      "output_root too long": ([f"--sweep={good}", f"--output_root={tmp_path}/{'x' * 300}"],
                               "too long"),
      "output_root empty": ([f"--sweep={good}", "--output_root="], "not a directory path"),
      "empty sweep name": (["--sweep=", f"--output_root={root}"], "--sweep is required"),
      "nonexistent sweep": (["--sweep=no_such_sweep", f"--output_root={root}"],
                            "is neither a file nor a sweep"),
      "syntax error": ([f"--sweep={syntax}", f"--output_root={root}"],
                       f"sweep file {syntax}, line 3: SyntaxError"),
      "raises at import": ([f"--sweep={raising}", f"--output_root={root}"],
                           f"sweep file {raising}, line 3 raised ValueError: math domain error"),
      "parallelism 0": ([f"--sweep={good}", f"--output_root={root}", "--parallelism=0"],
                        "--parallelism=0 is outside"),
      "parallelism -1": ([f"--sweep={good}", f"--output_root={root}", "--parallelism=-1"],
                         "--parallelism=-1 is outside"),
      "parallelism huge": ([f"--sweep={good}", f"--output_root={root}",
                            "--parallelism=10000000"], "--parallelism=10000000 is outside"),
      "parallelism not a number": ([f"--sweep={good}", f"--output_root={root}",
                                    "--parallelism=many"], "--parallelism=many"),
      "only matches nothing": ([f"--sweep={good}", f"--output_root={root}", "--only=nope"],
                               "--only=nope matches none of the 1 jobs"),
      "positional argument": ([f"--sweep={good}", f"--output_root={root}", "extra"],
                              "unexpected positional arguments"),
  }


BAD_INPUTS = ["output_root is a file", "output_root under a file", "output_root too long",
              "output_root empty", "empty sweep name", "nonexistent sweep", "syntax error",
              "raises at import", "parallelism 0", "parallelism -1", "parallelism huge",
              "parallelism not a number", "only matches nothing", "positional argument"]


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
  """Every bad input: exit 2, exactly one line on stderr, no traceback, nothing written.
  (An unwritable directory is refused through os.access too, but the tests may run as root,
  which may write anywhere; a path under a file stands for it.) One process runs every case,
  in-process through absl, to keep the test short."""
  cases = _bad_inputs(tmp_path)
  names = BAD_INPUTS + (["output_root unwritable"] if os.geteuid() != 0 else [])
  assert sorted(cases) == sorted(names)
  before = sorted(os.listdir(tmp_path))
  code = (
      "import io, sys, contextlib\n"
      "from absl import app, flags\n"
      "from launch import local, processes\n"
      "for argv in eval(sys.stdin.read()):\n"
      "  err = io.StringIO()\n"
      "  for name in list(flags.FLAGS):\n"
      "    flags.FLAGS[name].unparse()\n"
      "  flags.FLAGS.unparse_flags()\n"
      "  try:\n"
      "    with contextlib.redirect_stderr(err):\n"
      "      app.run(local.main, argv=['launch.local'] + argv, "
      "flags_parser=processes.parse_flags)\n"
      "    status = 0\n"
      "  except SystemExit as e:\n"
      "    status = e.code\n"
      "  print(repr((status, err.getvalue())))\n")
  out = subprocess.run([sys.executable, "-c", code], input=repr([cases[n][0] for n in names]),
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
  assert out.returncode == 0, out.stderr
  results = [eval(line) for line in out.stdout.splitlines()]  # pylint: disable=eval-used
  assert len(results) == len(names), out.stdout
  for name, (status, err) in zip(names, results):
    assert status == 2, (name, status, err)
    assert err.count("\n") == 1 and err.startswith("error: "), (name, err)
    assert "Traceback" not in err and cases[name][1] in err, (name, err)
  assert sorted(os.listdir(tmp_path)) == before  # no output root, nothing under the file
  assert (tmp_path / "a_file").read_text() == "x" and not os.listdir(tmp_path / "locked")
