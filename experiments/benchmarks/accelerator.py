r"""Every hot path of dpaudit on the accelerator against the host CPU, in one run.

  python -m experiments.benchmarks.accelerator                 # sizes that fill an H100
  python -m experiments.benchmarks.accelerator --tiny          # under a minute on 2 CPU cores
  bash tools/device_run.sh                                     # on a lent GPU machine

Runs the workloads of :mod:`experiments.benchmarks.accelerator_workloads` in order (Monte
Carlo noisy argmax and PATE; DP-SGD steps of the MLP, LeNet-5 and WRN-16-4, private and not;
many DP-SGD runs vmapped against a loop; lazy n-gram reconstruction models; DOMIAS's KDE and
flow fits; the estimators in float64 and float32 at 1e6-1e8 elements), each on JAX's default
device (the GPU when there is one) and on the host CPU in the same process, and the Monte Carlo
also against the NumPy code a user would otherwise write. Every figure is a rate (higher is
better) with the median of timed calls after a first call that compiles.

A workload that fails is reported with its error and the others still run; workloads not
started within ``--budget_s`` seconds are skipped, and a running one leaves out its optional
parts; the report lists both. ``results.json`` and ``results.md`` (one table) in
``--output_dir`` are rewritten after every workload, so a run cut short keeps what it finished.
Progress goes to stderr; the exit status is 1 when a workload
failed or was skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from absl import flags

from dpaudit import results
from experiments import common
from experiments.benchmarks import tables

FLAGS = flags.FLAGS
flags.DEFINE_bool("tiny", False, "Tiny sizes, one timed call each: the whole suite in under a "
                  "minute on 2 CPU cores (checks that every workload runs).")
flags.DEFINE_float("scale", 1.0, "Multiplies the accelerator's sizes (e.g. 0.1 on a small GPU).")
flags.DEFINE_float("measure_s", 1.0, "Seconds of timed calls per measurement after the first "
                   "(at least one call; at most 5).")
flags.DEFINE_float("budget_s", 360.0, "Seconds after the start from which no workload starts "
                   "and a running one leaves out its optional parts (larger sizes, more "
                   "variants, models after the first); each is listed in the report.")
flags.DEFINE_list("only", [], "Run only these workloads (default: all): montecarlo, "
                  "estimators, dpsgd, many_run, ngram, domias.")
flags.DEFINE_string("output_dir", "out/benchmarks/accelerator",
                    "Where results.json and results.md go.")
flags.DEFINE_list("from_results", [], "Instead of running: merge these results.json files of "
                  "runs on one kind of device (a later file's finished workloads replace an "
                  "earlier's) and write the merged results.json and results.md.")
flags.DEFINE_integer("processes", 0, "Worker processes running workloads at once, each with its "
                     "own JAX (0: 2 with --tiny, whose time goes to compiling on a multi-core "
                     "CPU; 1 otherwise: concurrent timings are not comparable, and processes "
                     "would share one GPU's memory).")

TINY_XLA_FLAG = "--xla_backend_optimization_level=0"
"""What ``--tiny`` compiles with: XLA's optimisation level 0 compiles about twice as fast (the
tiny suite: 40-42 s on 2 CPU cores against 71-86 s) and keeps the arithmetic (XLA uses no
fast-math unless asked). Tiny timings are not figures: the mode checks that everything runs."""


def _tiny_xla_flags() -> None:
  """Adds :data:`TINY_XLA_FLAG` to ``$XLA_FLAGS`` (read when JAX first creates a backend, here
  and in the worker processes)."""
  current = os.environ.get("XLA_FLAGS", "")
  if TINY_XLA_FLAG.split("=")[0] not in current:
    os.environ["XLA_FLAGS"] = f"{current} {TINY_XLA_FLAG}".strip()


def _write(report: dict) -> None:
  from experiments.benchmarks import accelerator_workloads as w
  report["table"] = w.table(report)
  results.write_json(os.path.join(FLAGS.output_dir, "results.json"), report)
  path = os.path.join(FLAGS.output_dir, "results.md")
  with open(path + ".tmp", "w") as f:
    f.write(w.markdown(report))
  os.replace(path + ".tmp", path)


def run_in_workers(groups: list[list[str]], progress) -> dict[str, dict]:
  """Runs each group of workloads in its own ``python -m experiments.benchmarks.accelerator``
  (same flags, ``--processes=1``) at once; their workloads, in the order of ``groups``."""
  passed = [a for a in sys.argv[1:] if not a.startswith(("--only", "--output_dir",
                                                         "--processes"))]
  with tempfile.TemporaryDirectory(prefix="dpaudit-accelerator-") as scratch:
    workers = []
    for i, group in enumerate(groups):
      out = os.path.join(scratch, f"worker{i}")
      cmd = [sys.executable, "-m", "experiments.benchmarks.accelerator", *passed,
             f"--only={','.join(group)}", f"--output_dir={out}", "--processes=1"]
      workers.append((group, out, subprocess.Popen(cmd, stdout=subprocess.DEVNULL)))
    merged = {}
    for group, out, worker in workers:
      worker.wait()
      try:
        merged.update(results.read_json(os.path.join(out, "results.json"))["workloads"])
      except (OSError, ValueError, KeyError) as error:
        for name in group:
          merged[name] = {"rows": [], "wall_s": 0.0,
                          "error": f"worker exited {worker.returncode}: {error}"}
      progress(f"worker for {', '.join(group)} exited {worker.returncode}")
  return merged


def check_flags() -> list[str]:
  """The workloads to run; ValueError naming a bad flag."""
  from experiments.benchmarks import accelerator_workloads as w
  common.check_float("scale", FLAGS.scale, 0.0, 16.0, low_open=True)
  common.check_float("measure_s", FLAGS.measure_s, 0.0, 600.0)
  common.check_float("budget_s", FLAGS.budget_s, 0.0, 86400.0, low_open=True)
  common.check_count("processes", FLAGS.processes, 0, 64)
  for name in FLAGS.only:
    if name not in w.WORKLOADS:
      raise ValueError(f"--only names {name!r}; valid: {', '.join(w.WORKLOADS)}")
  return [name for name in w.WORKLOADS if not FLAGS.only or name in FLAGS.only]


@common.cli
def main(argv):
  del argv
  common.quiet_logging()
  if FLAGS.tiny:
    _tiny_xla_flags()  # before any backend exists
  names = check_flags()
  common.claim_output_dir(FLAGS.output_dir)
  from experiments.benchmarks import accelerator_workloads as w
  if FLAGS.from_results:
    report = w.merge_reports([results.read_json(path) for path in FLAGS.from_results])
    _write(report)
    print(w.markdown(report))
    return
  import jax
  start = time.perf_counter()

  def progress(line: str) -> None:
    print(f"[{time.perf_counter() - start:6.1f} s] {line}", file=sys.stderr, flush=True)

  device = jax.devices()[0]
  ctx = w.Context(accelerator=device, cpu=jax.devices("cpu")[0], tiny=FLAGS.tiny,
                  scale=FLAGS.scale, measure_s=0.0 if FLAGS.tiny else FLAGS.measure_s,
                  max_repeats=1 if FLAGS.tiny else 5, progress=progress,
                  deadline=start + FLAGS.budget_s)
  report = {"benchmark": "accelerator", "device": str(device), "device_kind": device.device_kind,
            "platform": device.platform, "cpu_cores": os.cpu_count(), "tiny": FLAGS.tiny,
            "scale": FLAGS.scale, "measure_s": ctx.measure_s, "budget_s": FLAGS.budget_s,
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "workloads": {}, "versions": common.versions(), "command": " ".join(sys.argv),
            "machine": tables.machine(f"{device.platform}:{device.device_kind}")}
  progress(f"device {device} ({device.device_kind}); workloads: {', '.join(names)}")
  processes = FLAGS.processes or (2 if FLAGS.tiny else 1)
  if processes > 1 and len(names) > 1:
    report["workloads"] = dict(sorted(
        run_in_workers(w.split_workloads(names, processes), progress).items(),
        key=lambda item: names.index(item[0])))
    report["processes"] = processes
    report["wall_time_s"] = time.perf_counter() - start
    _write(report)
  for name in names if processes == 1 or len(names) == 1 else []:
    if time.perf_counter() - start > FLAGS.budget_s:
      report["workloads"][name] = {"rows": [], "wall_s": 0.0, "error": None,
                                   "skipped": f"not started: past --budget_s={FLAGS.budget_s:g}"}
    else:
      progress(f"{name} ...")
      report["workloads"][name] = w.run_workload(name, ctx)
      entry = report["workloads"][name]
      progress(f"{name} done in {entry['wall_s']:.1f} s"
               + (f"; FAILED: {entry['error']}" if entry["error"] else ""))
    report["wall_time_s"] = time.perf_counter() - start
    _write(report)
  print(w.markdown(report))
  bad = [n for n, e in report["workloads"].items() if e.get("error") or e.get("skipped")]
  if bad:
    common.fail(f"workloads failed or skipped: {', '.join(bad)} (see "
                f"{os.path.join(FLAGS.output_dir, 'results.json')})", 1)


if __name__ == "__main__":
  common.run(main)
