r"""Runs a sweep through xmanager: ``python -m launch.xm --sweep=NAME --executor=local``.

``xmanager`` is an optional dependency (``pip install -r requirements-launch.txt``). Every job
of the sweep becomes an ``xm.Job`` whose command is ``python -m launch.job
--launch_module=experiments.X --flags --output_dir=ROOT/SWEEP/JOB`` (:mod:`launch.job`: the job's
log goes to ``JOB/job.log`` and a finished job is marked, exactly as with :mod:`launch.local`,
so either launcher skips what the other finished).

* ``--executor=local``: xmanager's local executor runs the jobs as processes on this machine
  (a prebuilt binary, the current Python; no Docker, no Bazel, no network). The experiment is
  recorded in xmanager's local database (``~/.xmanager``).
* ``--executor=vertex`` / ``--executor=kubernetes``: the repository is packaged as a Python
  container (``--base_image``, ``pip install -r requirements.txt``; the entry point is
  ``launch.job``) and each job requests ``--accelerator`` x ``--accelerator_count``.
  ``--output_root`` must then be storage the containers share, e.g. a Cloud Storage bucket
  mounted by Vertex AI at ``/gcs/BUCKET/...``. One-time set-up: see the README ("Sweeps on a
  cluster"). ``--dry_run`` builds and prints the job specs without submitting anything.

With the local executor the launcher checks ``--output_root`` first (a file, an unwritable or
absurd path: one line, exit 2, nothing written) and holds ``ROOT/SWEEP`` while it runs, like
:mod:`launch.local` (one launcher per sweep); each job's guard (:mod:`launch.job`) stops its
experiment when this launcher ends, ``kill -9`` included, and does not start a job whose
directory a live process still holds. A sweep file that does not compile or raises is one line
naming the file and the line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from absl import app, flags

from launch import processes, summary, xm_jobs
from launch import sweep as sweep_lib
from launch.xm_jobs import EXECUTORS

FLAGS = flags.FLAGS
flags.DEFINE_string("sweep", None, "A sweep file, or the name of one in launch/sweeps/.")
flags.DEFINE_enum("executor", "local", list(EXECUTORS), "Where the jobs run.")
flags.DEFINE_string("output_root", "out/sweeps", "Jobs write to OUTPUT_ROOT/SWEEP/JOB (shared "
                    "storage for cloud executors, e.g. /gcs/BUCKET/sweeps on Vertex AI).")
flags.DEFINE_bool("resume", True, "Skip jobs that finished in an earlier run.")
flags.DEFINE_string("accelerator", "none", "Accelerator per job for cloud executors "
                    "(an xm.ResourceType name such as T4, V100, A100, H100, TPU_V4), or none.")
flags.DEFINE_integer("accelerator_count", 1, "Accelerators per job.")
flags.DEFINE_string("base_image", "python:3.11", "Base image of the cloud container.")
flags.DEFINE_string("title", None, "Experiment title (default: dpaudit-SWEEP).")
flags.DEFINE_bool("dry_run", False, "Build and print the job specs; submit nothing.")


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    print(f"error: unexpected positional arguments {argv[1:]}", file=sys.stderr)
    sys.exit(2)
  if not FLAGS["verbosity"].present:  # xmanager and alembic log every step at INFO
    from absl import logging
    logging.set_verbosity(logging.WARNING)
  try:
    if not FLAGS.sweep:
      raise ValueError("--sweep is required")
    sweep = sweep_lib.load(sweep_lib.resolve(FLAGS.sweep))
    try:
      import xmanager  # noqa: F401
    except ImportError:
      raise ValueError("xmanager is not installed: pip install -r requirements-launch.txt"
                       ) from None
    if FLAGS.executor == "local":  # the other executors' output_root is the containers'
      processes.check_directory(FLAGS.output_root, "output_root")
      processes.check_directory(os.path.join(FLAGS.output_root, sweep.name), "output_root")
    p = xm_jobs.plan(sweep, FLAGS.executor, FLAGS.output_root, FLAGS.resume, FLAGS.accelerator,
             FLAGS.accelerator_count, FLAGS.base_image)
    if FLAGS.executor == "local" and not FLAGS.dry_run:
      processes.lock_directory(os.path.join(FLAGS.output_root, sweep.name))
  except ValueError as e:
    print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
    sys.exit(2)
  except OSError as e:
    print(f"error: --output_root={FLAGS.output_root}: {processes.describe_os_error(e)}",
          file=sys.stderr)
    sys.exit(2)
  print(f"sweep {sweep.name}: {len(p.jobs) + len(p.skipped)} jobs, {len(p.skipped)} finished "
        f"earlier, {len(p.jobs)} to run on {FLAGS.executor}", file=sys.stderr, flush=True)
  if FLAGS.dry_run:
    print(xm_jobs.describe(p))
    return
  experiment_id = xm_jobs.submit(p, FLAGS.title or f"dpaudit-{sweep.name}")
  print(f"xmanager experiment {experiment_id}", file=sys.stderr)
  if FLAGS.executor != "local":
    return
  rows = []
  for job in sweep.jobs(FLAGS.output_root):
    finished = sweep_lib.is_finished(job)
    was_skipped = job in p.skipped
    holder = None if finished else processes.directory_holder(job.output_dir)
    record = {"job": job.name,
              "status": ("skipped (finished earlier)" if was_skipped
                         else "finished" if finished
                         else f"running elsewhere (pid {holder})" if holder else "failed"),
              "exit_code": 0 if finished else None, "seconds": None,
              "log": os.path.join(job.output_dir, sweep_lib.LOG)}
    rows.append(summary.summary_row(record, job, sweep))
  summary.write_summary(rows, os.path.join(FLAGS.output_root, sweep.name))
  failed = [r for r in rows if r["status"] not in ("finished", "skipped (finished earlier)")]
  print(f"summary: {os.path.join(FLAGS.output_root, sweep.name, 'summary.md')}",
        file=sys.stderr)
  if failed:
    print(f"{len(failed)} of {len(rows)} jobs failed: "
          + ", ".join(f"{r['job']} (log {r['log']})" for r in failed), file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  app.run(main, flags_parser=processes.parse_flags)
