"""Runs one sweep job and guards it: ``python -m launch.job --launch_module=experiments.X ...``.

``python -m launch.job --launch_module=experiments.X --flag=value ... --output_dir=DIR`` runs
``python -m experiments.X`` with the other arguments, sends its output to ``DIR/job.log``,
and, when it exits 0 having written ``DIR/results.json``, marks the job finished
(``DIR/job.json``) so that a rerun of the sweep skips it. :mod:`launch.local` starts every job
this way, and xmanager's jobs run it as their command (:mod:`launch.xm`).

It is the experiment's guard (Linux):

* the experiment runs in a process group of its own and receives SIGKILL if this guard dies
  (``PR_SET_PDEATHSIG``);
* SIGTERM, SIGINT or SIGHUP to the guard (also the parent-death signal :mod:`launch.local`
  arms: a launcher killed with ``kill -9`` takes its jobs with it) stops the experiment's whole
  process group: SIGTERM, then SIGKILL after :data:`GRACE_S` seconds; the guard then exits
  128 + the signal. With ``DPAUDIT_JOB_LAUNCHER_PID=PID`` in its environment (set by
  :mod:`launch.xm` for xmanager's local executor, which starts jobs through a shell) the guard
  does the same when process PID ends;
* when the experiment ends, anything left in its process group is killed;
* a job whose ``DIR`` another live process holds (an experiment claims its ``--output_dir``
  while it runs, e.g. one still running from an earlier launch) is not started a second time:
  one line on stderr, exit status :data:`EXIT_IN_USE`.

Exits with the experiment's status (2 for bad arguments), or 0 whenever
``DPAUDIT_JOB_EXIT_ZERO=1`` (set by launchers that would otherwise stop the other jobs when one
fails, such as xmanager's local executor; the marker tells them apart).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from launch import processes
from launch import sweep as sweep_lib

GRACE_S = 10.0  # from SIGTERM to SIGKILL of a stopped experiment's process group
EXIT_IN_USE = 75  # EX_TEMPFAIL: the job's directory is held by a live process


def split_args(argv: list[str]) -> tuple[str, dict[str, str], str]:
  """(module, flags without output_dir, output_dir) from ``--k=v`` arguments."""
  module, flags, output_dir = None, {}, None
  for arg in argv:
    if not arg.startswith("--") or "=" not in arg:
      raise ValueError(f"expected --name=value arguments, got {arg!r}")
    name, value = arg[2:].split("=", 1)
    if name == "launch_module":
      module = value
    elif name == "output_dir":
      output_dir = value
    else:
      flags[name] = value
  if not module or not output_dir:
    raise ValueError("--launch_module and --output_dir are required")
  return module, flags, output_dir


def run_guarded(argv: list[str], log, stop: processes.StopRequest, poll: float = 0.1,
                grace: float = GRACE_S, launcher: processes.Watch | None = None) -> int:
  """Runs ``argv`` in a process group of its own with its output to ``log``, until it ends,
  ``stop`` is requested or the ``launcher`` ends (then its group is stopped: SIGTERM, SIGKILL
  after ``grace``). Returns its exit status (negative: killed by that signal)."""
  process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL,
                             preexec_fn=processes.die_with_parent(signal.SIGKILL,
                                                                  new_group=True))
  while not processes.exited(process):
    if launcher is not None and not launcher.alive() and not stop:
      stop.request(signal.SIGTERM)  # as if the launcher's death had sent it
    if stop:
      processes.stop([process], grace)
      break
    stop.sleep(poll)
  return processes.reap(process)


def launcher_watch() -> processes.Watch | None:
  """A :class:`launch.processes.Watch` on ``DPAUDIT_JOB_LAUNCHER_PID``, or None."""
  pid = os.environ.get("DPAUDIT_JOB_LAUNCHER_PID", "")
  return processes.Watch(int(pid)) if pid.isdigit() else None


def main(argv: list[str]) -> int:
  stop = processes.StopRequest()  # first: a stop from now on is honoured
  try:
    module, flags, output_dir = split_args(argv)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  exit_zero = os.environ.get("DPAUDIT_JOB_EXIT_ZERO") == "1"
  launcher = launcher_watch()
  if launcher is not None and not launcher.alive():
    print(f"error: the launcher (process {launcher.pid}) has ended; not starting {output_dir}",
          file=sys.stderr)
    return 128 + signal.SIGTERM
  holder = processes.directory_holder(output_dir)
  if holder is not None:
    print(f"error: {output_dir} is in use by process {holder} (this job, still running from an "
          "earlier launch?); not starting a second copy", file=sys.stderr)
    return 0 if exit_zero else EXIT_IN_USE
  job = sweep_lib.Job("", module, flags, output_dir)
  start = time.perf_counter()
  try:
    os.makedirs(output_dir, exist_ok=True)
    marker = os.path.join(output_dir, sweep_lib.MARKER)
    if os.path.exists(marker):
      os.remove(marker)
    with open(os.path.join(output_dir, sweep_lib.LOG), "w") as log:
      code = run_guarded(job.argv(sys.executable), log, stop, launcher=launcher)
  except OSError as e:
    print(f"error: {output_dir}: {processes.describe_os_error(e)}", file=sys.stderr)
    return 2
  seconds = time.perf_counter() - start
  if stop:
    print(f"STOPPED {module} -> {output_dir} by signal {stop.signum}", file=sys.stderr)
    return 128 + stop.signum
  if code == 0 and os.path.isfile(os.path.join(output_dir, "results.json")):
    sweep_lib.mark_finished(output_dir, module, flags, seconds)
    print(f"done {module} -> {output_dir} ({seconds:.1f} s)")
  else:
    print(f"FAILED {module} -> {output_dir}: exit code {code}; log: "
          f"{os.path.join(output_dir, sweep_lib.LOG)}", file=sys.stderr)
  if exit_zero:
    return 0
  return 128 - code if code < 0 else code  # killed by signal n: 128 + n, as a shell reports


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
