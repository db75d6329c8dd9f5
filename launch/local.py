r"""Runs a sweep's jobs on this machine: ``python -m launch.local --sweep=NAME``.

Every job is ``python -m experiments.X --flags --output_dir=ROOT/SWEEP/JOB`` in its own
subprocess, ``--parallelism`` at a time. With several jobs at once each is pinned to its share of
the CPU cores (and, when the machine has several GPUs, to one GPU through
``CUDA_VISIBLE_DEVICES``). A job's output (stdout and stderr) goes to ``JOB/job.log``; the
launcher prints one line when a job starts and ends and an overall progress line.

A job that exits 0 and wrote ``results.json`` is marked finished (``JOB/job.json``, with the
hash of its command) and skipped by a rerun (``--noresume`` reruns everything). A job that
crashes or is killed is reported with its exit code and log, the others go on, and a rerun
starts it again (the experiments' own cell stores keep its finished cells). At the end
``ROOT/SWEEP/summary.csv`` and ``summary.md`` list every job: status, exit code, seconds, the
flags that vary and the scalar numbers of its ``results.json``. Exit status: 0 when every job
finished, 1 otherwise, 2 for bad flags.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Sequence

from absl import app
from absl import flags

from launch import summary
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
  """A started job and its slot."""

  def __init__(self, job: sweep_lib.Job, slot: int, cores: set[int], gpu: str | None):
    os.makedirs(job.output_dir, exist_ok=True)
    marker = os.path.join(job.output_dir, MARKER)
    if os.path.exists(marker):
      os.remove(marker)  # running again: no longer finished
    self.job, self.slot, self.start = job, slot, time.perf_counter()
    self.log_path = os.path.join(job.output_dir, LOG)
    self.log = open(self.log_path, "w")
    env = dict(os.environ)
    if gpu is not None:
      env["CUDA_VISIBLE_DEVICES"] = gpu
    self.process = subprocess.Popen(
        job.argv(sys.executable), stdout=self.log, stderr=subprocess.STDOUT, env=env,
        preexec_fn=lambda: os.sched_setaffinity(0, cores), start_new_session=True)

  def seconds(self) -> float:
    return time.perf_counter() - self.start

  def stop(self) -> None:
    try:
      os.killpg(self.process.pid, signal.SIGTERM)
    except ProcessLookupError:
      pass


def progress_bar(done: int, failed: int, running: int, total: int, width: int = 30) -> str:
  filled = int(width * (done + failed) / max(total, 1))
  return (f"[{'#' * filled}{'-' * (width - filled)}] {done + failed}/{total} ended: "
          f"{done} finished, {failed} failed, {running} running")


def run_sweep(sweep: sweep_lib.Sweep, root: str, parallelism: int, resume: bool,
              only: Sequence[str] = (), stream=None) -> list[dict[str, Any]]:
  """Runs the sweep's jobs; returns one record per job (also written as the summary)."""
  stream = stream or sys.stderr
  jobs = sweep.jobs(root)
  if only:
    jobs = [j for j in jobs if any(s in j.name for s in only)]
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
  try:
    while pending or running:
      while pending and free:
        slot = free.pop(0)
        job = pending.pop(0)
        gpu = gpus[slot % len(gpus)] if len(gpus) > 1 else None
        running.append(Running(job, slot, cores[slot], gpu))
        print(f"start {job.name}" + (f" (GPU {gpu})" if gpu else ""), file=stream, flush=True)
      time.sleep(0.2)
      for r in [r for r in running if r.process.poll() is not None]:
        running.remove(r)
        free.append(r.slot)
        r.log.close()
        code, seconds = r.process.returncode, r.seconds()
        ok = code == 0 and os.path.isfile(os.path.join(r.job.output_dir, "results.json"))
        record = records[r.job.name]
        record.update(exit_code=code, seconds=round(seconds, 2))
        if ok:
          done += 1
          record["status"] = "finished"
          sweep_lib.mark_finished(r.job.output_dir, r.job.module, r.job.flags, seconds)
          print(f"done  {r.job.name} ({seconds:.1f} s)", file=stream, flush=True)
        else:
          failed += 1
          record["status"] = "failed"
          reason = f"exit code {code}" if code != 0 else "exit 0 without results.json"
          print(f"FAILED {r.job.name}: {reason}; log: {r.log_path}", file=stream, flush=True)
        print(progress_bar(done, failed, len(running), total), file=stream, flush=True)
  except KeyboardInterrupt:
    for r in running:
      r.stop()
    for r in running:
      try:
        r.process.wait(timeout=15)
      except subprocess.TimeoutExpired:
        os.killpg(r.process.pid, signal.SIGKILL)
      r.log.close()
    raise
  rows = [summary.summary_row(records[j.name], j, sweep) for j in jobs]
  summary.write_summary(rows, os.path.join(root, sweep.name))
  return rows


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    print(f"error: unexpected positional arguments {argv[1:]}", file=sys.stderr)
    sys.exit(2)
  try:
    if not FLAGS.sweep:
      raise ValueError("--sweep is required (a file or one of: "
                       + ", ".join(f[:-3] for f in sweep_lib.available()) + ")")
    if FLAGS.parallelism < 1:
      raise ValueError(f"--parallelism={FLAGS.parallelism} must be at least 1")
    sweep = sweep_lib.load(sweep_lib.resolve(FLAGS.sweep))
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  if FLAGS.dry_run:
    for job in sweep.jobs(FLAGS.output_root):
      print(" ".join(job.argv("python")))
    return
  def interrupted(signum, frame):  # SIGTERM stops the jobs too, like Ctrl-C
    raise KeyboardInterrupt

  signal.signal(signal.SIGTERM, interrupted)
  try:
    rows = run_sweep(sweep, FLAGS.output_root, FLAGS.parallelism, FLAGS.resume, FLAGS.only)
  except KeyboardInterrupt:
    print("interrupted: the running jobs were stopped; a rerun finishes what is missing",
          file=sys.stderr)
    sys.exit(130)
  failed = [r for r in rows if r["status"] == "failed"]
  print(f"summary: {os.path.join(FLAGS.output_root, sweep.name, 'summary.md')}", file=sys.stderr)
  if failed:
    print(f"{len(failed)} of {len(rows)} jobs failed: "
          + ", ".join(f"{r['job']} (exit {r['exit_code']}, log {r['log']})" for r in failed),
          file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  app.run(main)
