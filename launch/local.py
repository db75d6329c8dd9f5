r"""Runs a sweep's jobs on this machine: ``python -m launch.local --sweep=NAME``.

Every job is ``python -m experiments.X --flags --output_dir=ROOT/SWEEP/JOB``, started through
its guard :mod:`launch.job` in a session of its own, ``--parallelism`` at a time. With several
jobs at once each is pinned to its share of the CPU cores (and, when the machine has several
GPUs, to one GPU through ``CUDA_VISIBLE_DEVICES``). A job's output (stdout and stderr) goes to
``JOB/job.log``; the launcher prints one line when a job starts and ends and an overall
progress line.

A job that exits 0 and wrote ``results.json`` is marked finished (``JOB/job.json``, with the
hash of its command) and skipped by a rerun (``--noresume`` reruns everything). A job that
crashes or is killed is reported with its exit code and log, the others go on, and a rerun
starts it again (the experiments' own cell stores keep its finished cells). At the end
``ROOT/SWEEP/summary.csv`` and ``summary.md`` list every job: status, exit code, seconds, the
flags that vary and the scalar numbers of its ``results.json``.

Stopping and crashes (Linux):

* SIGTERM, SIGINT (Ctrl-C) or SIGHUP only set a flag, which the launcher's loop notices within
  a fraction of a second, however loaded the machine: it then stops every running job's
  process groups (SIGTERM; SIGKILL after a grace period), writes the summary (those jobs:
  ``stopped``) and exits 130;
* if the launcher itself dies, ``kill -9`` included, each job's guard receives SIGTERM
  (``PR_SET_PDEATHSIG``) and stops its experiment's process group the same way, so no job is
  left running without its launcher;
* the launcher holds ``ROOT/SWEEP`` (:func:`dpaudit.results.lock_directory`, released by the
  kernel on any exit): a second launcher on the same sweep exits 2 with one line;
* a job whose directory a live process still holds (its experiment, from an earlier launch
  or another launcher) is not started again: one line, status ``running elsewhere``, not
  finished.

Exit status: 0 when every job finished, 1 otherwise, 2 for bad flags (one line on stderr,
nothing written), 130 when stopped by a signal.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from absl import app, flags

from launch import job as job_lib
from launch import processes, summary
from launch import sweep as sweep_lib

FLAGS = flags.FLAGS
flags.DEFINE_string("sweep", None, "A sweep file, or the name of one in launch/sweeps/.")
flags.DEFINE_integer("parallelism", 1, "Jobs run at once.")
flags.DEFINE_string("output_root", "out/sweeps", "Jobs write to OUTPUT_ROOT/SWEEP/JOB.")
flags.DEFINE_bool("resume", True, "Skip jobs that finished in an earlier run.")
flags.DEFINE_bool("dry_run", False, "Print the jobs' command lines and exit.")
flags.DEFINE_list("only", [], "Run only the jobs whose names contain one of these strings.")

MARKER, LOG = sweep_lib.MARKER, sweep_lib.LOG
is_finished = sweep_lib.is_finished
MAX_PARALLELISM = 1024
STOP_GRACE_S = job_lib.GRACE_S + 5.0  # the guards stop their experiments within GRACE_S


def core_slices(parallelism: int) -> list[set[int]]:
  """Disjoint sets of this process's CPU cores, one per slot (all cores if there are fewer
  cores than slots)."""
  cores = sorted(os.sched_getaffinity(0))
  if parallelism <= 1 or len(cores) < parallelism:
    return [set(cores)] * max(parallelism, 1)
  share = len(cores) // parallelism
  return [set(cores[i * share:(i + 1) * share]) for i in range(parallelism)]


def gpu_ids() -> list[str]:
  """GPUs to spread jobs over: ``CUDA_VISIBLE_DEVICES`` if set, else ``nvidia-smi -L``."""
  visible = os.environ.get("CUDA_VISIBLE_DEVICES")
  if visible is not None:
    return [g for g in visible.split(",") if g.strip()]
  if shutil.which("nvidia-smi") is None:
    return []
  try:
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
  except (OSError, subprocess.SubprocessError):
    return []
  return [str(i) for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU")]


class Running:
  """A started job (its guard, :mod:`launch.job`) and its slot."""

  def __init__(self, job: sweep_lib.Job, slot: int, cores: set[int], gpu: str | None):
    os.makedirs(job.output_dir, exist_ok=True)
    marker = os.path.join(job.output_dir, MARKER)
    if os.path.exists(marker):
      os.remove(marker)  # running again: no longer finished
    self.job, self.slot, self.start = job, slot, time.perf_counter()
    self.log_path = os.path.join(job.output_dir, LOG)
    env = dict(os.environ)
    if gpu is not None:
      env["CUDA_VISIBLE_DEVICES"] = gpu
    env.pop("DPAUDIT_JOB_EXIT_ZERO", None)
    argv = [sys.executable, "-m", "launch.job", f"--launch_module={job.module}",
            *(f"--{k}={v}" for k, v in job.flags.items()), f"--output_dir={job.output_dir}"]
    # The guard truncates the log for the experiment; its own lines are appended after.
    with open(self.log_path, "a") as log:
      self.process = subprocess.Popen(
          argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
          preexec_fn=processes.die_with_parent(signal.SIGTERM, cores), start_new_session=True)

  def seconds(self) -> float:
    return time.perf_counter() - self.start


def progress_bar(done: int, failed: int, running: int, total: int, width: int = 30) -> str:
  filled = int(width * (done + failed) / max(total, 1))
  return (f"[{'#' * filled}{'-' * (width - filled)}] {done + failed}/{total} ended: "
          f"{done} finished, {failed} failed, {running} running")


def select_jobs(sweep: sweep_lib.Sweep, root: str, only: Sequence[str] = ()
                ) -> list[sweep_lib.Job]:
  """The sweep's jobs whose names contain one of ``only`` (all when empty); ValueError when
  ``only`` matches none."""
  jobs = sweep.jobs(root)
  if only:
    selected = [j for j in jobs if any(s in j.name for s in only)]
    if not selected:
      names = ", ".join(j.name for j in jobs[:5]) + (", ..." if len(jobs) > 5 else "")
      raise ValueError(f"--only={','.join(only)} matches none of the {len(jobs)} jobs of sweep "
                       f"{sweep.name} ({names})")
    jobs = selected
  return jobs


def run_sweep(sweep: sweep_lib.Sweep, root: str, parallelism: int, resume: bool,
              only: Sequence[str] = (), stream=None,
              stop: processes.StopRequest | None = None) -> list[dict[str, Any]]:
  """Runs the sweep's jobs until they have ended or ``stop`` is requested (then the running
  ones are stopped: status ``stopped``); returns one record per job (also written as the
  summary)."""
  stream = stream or sys.stderr
  own_stop = stop is None
  stop = stop if stop is not None else processes.StopRequest()
  jobs = select_jobs(sweep, root, only)
  records = {j.name: {"job": j.name, "status": "pending", "exit_code": None, "seconds": None,
                      "log": os.path.join(j.output_dir, LOG)} for j in jobs}
  pending = []
  for job in jobs:
    if resume and is_finished(job):
      records[job.name].update(status="skipped (finished earlier)", exit_code=0)
    else:
      pending.append(job)
  total, skipped = len(jobs), len(jobs) - len(pending)
  print(f"sweep {sweep.name}: {total} jobs, {skipped} finished earlier, {len(pending)} to run, "
        f"{parallelism} at a time -> {os.path.join(root, sweep.name)}", file=stream, flush=True)
  cores, gpus = core_slices(parallelism), gpu_ids()
  free = list(range(parallelism))
  running: list[Running] = []
  done, failed = skipped, 0

  def say(line: str) -> None:
    print(line, file=stream, flush=True)

  try:
    while (pending or running) and not stop:
      while pending and free and not stop:
        job = pending.pop(0)
        holder = processes.directory_holder(job.output_dir)
        if holder is not None:  # e.g. still running from an earlier launch: not a second copy
          failed += 1
          records[job.name]["status"] = f"running elsewhere (pid {holder})"
          say(f"SKIPPED {job.name}: {job.output_dir} is in use by process {holder} (still "
              "running from an earlier launch?); not starting a second copy")
          continue
        slot = free[0]
        gpu = gpus[slot % len(gpus)] if len(gpus) > 1 else None
        try:
          running.append(Running(job, slot, cores[slot], gpu))
        except OSError as e:  # e.g. its directory cannot be created: this job fails, not all
          failed += 1
          records[job.name]["status"] = "failed"
          say(f"FAILED {job.name}: cannot start: {processes.describe_os_error(e)}")
          continue
        free.pop(0)
        say(f"start {job.name}" + (f" (GPU {gpu})" if gpu else ""))
      stop.sleep(0.2)
      for r in [r for r in running if processes.exited(r.process)]:
        running.remove(r)
        free.append(r.slot)
        code, seconds = processes.reap(r.process), r.seconds()
        ok = code == 0 and os.path.isfile(os.path.join(r.job.output_dir, "results.json"))
        record = records[r.job.name]
        record.update(exit_code=code, seconds=round(seconds, 2))
        if ok:
          done += 1
          record["status"] = "finished"
          sweep_lib.mark_finished(r.job.output_dir, r.job.module, r.job.flags, seconds)
          say(f"done  {r.job.name} ({seconds:.1f} s)")
        elif code == job_lib.EXIT_IN_USE:
          failed += 1
          record["status"] = "running elsewhere"
          say(f"SKIPPED {r.job.name}: its directory is in use by another process; not "
              "starting a second copy")
        else:
          failed += 1
          record["status"] = "failed"
          reason = f"exit code {code}" if code != 0 else "exit 0 without results.json"
          say(f"FAILED {r.job.name}: {reason}; log: {r.log_path}")
        say(progress_bar(done, failed, len(running), total))
  finally:
    if running:  # a stop request, or an error in the loop itself: no job outlives it
      if stop:
        say(f"stopping {len(running)} running job(s) (signal {stop.signum})")
      processes.stop([r.process for r in running], STOP_GRACE_S)
      for r in running:
        code, seconds = r.process.returncode, r.seconds()
        finished = code == 0 and os.path.isfile(os.path.join(r.job.output_dir, "results.json"))
        if finished:  # it ended on its own just before the stop reached it
          sweep_lib.mark_finished(r.job.output_dir, r.job.module, r.job.flags, seconds)
        records[r.job.name].update(status="finished" if finished else "stopped",
                                   exit_code=code, seconds=round(seconds, 2))
    if own_stop:
      stop.restore()
  rows = [summary.summary_row(records[j.name], j, sweep) for j in jobs]
  summary.write_summary(rows, os.path.join(root, sweep.name))
  return rows


def check_flags() -> tuple[sweep_lib.Sweep, list[sweep_lib.Job]]:
  """Every flag checked before anything is written; ValueError (one line) otherwise."""
  if not FLAGS.sweep:
    raise ValueError("--sweep is required (a file or one of: "
                     + ", ".join(f[:-3] for f in sweep_lib.available()) + ")")
  if not 1 <= FLAGS.parallelism <= MAX_PARALLELISM:
    raise ValueError(f"--parallelism={FLAGS.parallelism} is outside the valid range "
                     f"[1, {MAX_PARALLELISM}]")
  sweep = sweep_lib.load(sweep_lib.resolve(FLAGS.sweep))
  processes.check_directory(FLAGS.output_root, "output_root")
  processes.check_directory(os.path.join(FLAGS.output_root, sweep.name), "output_root")
  return sweep, select_jobs(sweep, FLAGS.output_root, FLAGS.only)


def main(argv: Sequence[str]) -> None:
  stop = processes.StopRequest()  # before anything starts: a signal is never lost
  if len(argv) > 1:
    print(f"error: unexpected positional arguments {argv[1:]}", file=sys.stderr)
    sys.exit(2)
  try:
    sweep, jobs = check_flags()
    if FLAGS.dry_run:
      for job in jobs:
        print(" ".join(job.argv("python")))
      return
    processes.lock_directory(os.path.join(FLAGS.output_root, sweep.name))
  except ValueError as e:
    print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
    sys.exit(2)
  except OSError as e:
    print(f"error: --output_root={FLAGS.output_root}: {processes.describe_os_error(e)}",
          file=sys.stderr)
    sys.exit(2)
  rows = run_sweep(sweep, FLAGS.output_root, FLAGS.parallelism, FLAGS.resume, FLAGS.only,
                   stop=stop)
  summary_path = os.path.join(FLAGS.output_root, sweep.name, "summary.md")
  if stop:
    print(f"interrupted (signal {stop.signum}): the running jobs were stopped; a rerun "
          f"finishes what is missing; summary: {summary_path}", file=sys.stderr)
    sys.exit(130)
  failed = [r for r in rows if r["status"] not in ("finished", "skipped (finished earlier)")]
  print(f"summary: {summary_path}", file=sys.stderr)
  if failed:
    print(f"{len(failed)} of {len(rows)} jobs did not finish: "
          + ", ".join(f"{r['job']} ({r['status']}, exit {r['exit_code']}, log {r['log']})"
                      for r in failed), file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  app.run(main, flags_parser=processes.parse_flags)
