r"""Monte Carlo throughput: dpaudit's engine vs a vectorised NumPy baseline, same run.

  python -m experiments.benchmarks.montecarlo

Times noisy-argmax trials (C = 10 classes) per second for ``dpaudit.montecarlo.count_outcomes``
under each PRNG implementation (dpaudit's threefry_unrolled, JAX's threefry2x32, rbg,
unsafe_rbg) and, on a CPU, with the host
split into one XLA device per core, and for the NumPy code a user would otherwise write
(``default_rng`` normals, ``argmax`` over an (n, C) block, ``bincount``, in blocks so it fits in
memory). Each measurement runs in a fresh subprocess; the median of ``--num_repeats`` timed runs
after a warm-up is reported. Peak resident memory is measured for 10^6 .. 10^8 trials to show it
is flat in N. Prints one JSON object (also written to ``--output_dir/results.json``).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time

from absl import flags

from dpaudit import results
from experiments import common
from experiments.benchmarks import tables

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_classes", 10, "Classes C of the noisy argmax.")
flags.DEFINE_integer("num_trials", 2**26, "Trials per timed run.")
flags.DEFINE_integer("num_repeats", 3, "Timed runs per configuration (median reported).")
flags.DEFINE_list("prng_impls", ["threefry_unrolled", "threefry2x32", "rbg", "unsafe_rbg"],
                  "PRNG implementations (threefry_unrolled: dpaudit.prng).")
flags.DEFINE_list("memory_trials", ["1000000", "10000000", "100000000"],
                  "Trial counts for the peak-memory measurement.")
flags.DEFINE_integer("chunk_size", 2**16, "Engine chunk size.")
flags.DEFINE_string("output_dir", "out/benchmarks/montecarlo", "Where results.json goes.")
flags.DEFINE_string("worker", "", "Internal: run one measurement and print JSON.")
flags.DEFINE_string("prng_impl", "threefry_unrolled", "Internal (worker): PRNG implementation.")
flags.DEFINE_integer("host_devices", 0, "Internal (worker): XLA host devices (0: default).")
common.deprecated_alias("repeats", "num_repeats")

SIGMA = 2.0


def _histogram(num_classes):
  return [float(i) for i in range(num_classes)]


def _peak_rss_mb() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _engine_worker(num_trials, repeats):
  import jax
  import jax.numpy as jnp

  from dpaudit import montecarlo
  from dpaudit.mechanisms import noisy_argmax

  hist = jnp.asarray(_histogram(FLAGS.num_classes), jnp.float32)
  key = common.make_key(0, FLAGS.prng_impl)

  def once():
    return montecarlo.count_outcomes(noisy_argmax, key, num_trials, FLAGS.num_classes,
                                     args=(hist, SIGMA), chunk_size=FLAGS.chunk_size)

  counts = once()  # warm-up and compile
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    counts = once()
    times.append(time.perf_counter() - start)
  return {"seconds": times, "counts": counts.tolist(),
          "devices": [f"{d.platform}:{d.device_kind}" for d in jax.devices()],
          "peak_rss_mb": _peak_rss_mb()}


def _numpy_worker(num_trials, repeats, dtype_name):
  import numpy as np

  from experiments.benchmarks import hot_paths
  hist = _histogram(FLAGS.num_classes)

  def once(rng):
    return hot_paths.numpy_noisy_argmax(rng, hist, SIGMA, num_trials, np.dtype(dtype_name))

  rng = np.random.default_rng(0)
  once(rng)
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    counts = once(rng)
    times.append(time.perf_counter() - start)
  return {"seconds": times, "counts": counts.tolist(), "peak_rss_mb": _peak_rss_mb()}


def _spawn(args, host_devices=0):
  env = dict(os.environ)
  if host_devices:
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                        f" --xla_force_host_platform_device_count={host_devices}").strip()
  cmd = [sys.executable, "-m", "experiments.benchmarks.montecarlo"] + args
  out = subprocess.run(cmd, capture_output=True, text=True, env=env)
  if out.returncode != 0:
    raise RuntimeError(f"worker {' '.join(args)} failed:\n{out.stderr[-2000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])


def _rate(result, num_trials):
  return num_trials / statistics.median(result["seconds"])


def table(report: dict, on_cpu: bool) -> list[dict]:
  """The report's rows (:mod:`~experiments.benchmarks.tables`): each engine configuration
  against the faster NumPy baseline (the target on the fastest configuration, on a CPU; on an
  accelerator, the 1e9 trials/s goal), then the peak memory by trial count."""
  best_numpy = report["best_numpy"]
  peer = report["numpy_baseline"][best_numpy]["trials_per_s"]
  rows = []
  for name, entry in report["engine"].items():
    impl, _, devices = name.partition("/")
    count = devices[:-len("dev")]
    where = f", {count} host device{'s' * (count != '1')}" if devices else ""
    workload = f"noisy argmax C={report['num_classes']}, {impl} keys{where}"
    target = report["target_speedup_cpu"] if on_cpu and name == report["best_engine"] else None
    rows.append(tables.row(workload, entry["trials_per_s"], "trials/s", peer=peer,
                           peer_name=f"NumPy, {best_numpy} normals", target=target))
  if not on_cpu:
    rows.append(tables.goal_row(f"noisy argmax C={report['num_classes']}, fastest keys",
                                report["gpu_trials_per_s"], "trials/s",
                                report["gpu_target_trials_per_s"]))
  for n, mb in report["peak_rss_mb_by_num_trials"].items():
    rows.append(tables.row(f"peak resident memory, {int(n):.0e} trials", mb, "MB"))
  return rows


def check_flags() -> None:
  """Every flag, before a worker is spawned or anything written: counts in [1, MAX_COUNT], the
  classes and a chunk's trials within the machine's memory, known PRNGs and workers."""
  common.check_memory("num_classes", FLAGS.num_classes, 8.0 * 2**18, low=2,
                      what="a NumPy block of 2^18 trials")
  common.check_count("num_trials", FLAGS.num_trials)
  common.check_count("num_repeats", FLAGS.num_repeats)
  common.check_memory("chunk_size", FLAGS.chunk_size, 8.0 * FLAGS.num_classes,
                      what="one chunk of trials")
  common.check_counts("memory_trials", common.parse_ints("memory_trials", FLAGS.memory_trials))
  for flag, names in (("prng_impls", FLAGS.prng_impls), ("prng_impl", [FLAGS.prng_impl])):
    if not names:
      raise ValueError(f"--{flag} is empty; name at least one of {', '.join(common.PRNG_IMPLS)}")
    for name in names:
      if name not in common.PRNG_IMPLS:
        raise ValueError(f"--{flag} names {name!r}; valid: {', '.join(common.PRNG_IMPLS)}")
  workers = ("", "engine", "numpy:float32", "numpy:float64")
  if FLAGS.worker not in workers:
    raise ValueError(f"--worker={FLAGS.worker!r} is not one of {', '.join(workers[1:])}")
  common.check_count("host_devices", FLAGS.host_devices, 0, 4096)


@common.cli
def main(argv):
  del argv
  check_flags()
  if FLAGS.worker:
    trials = FLAGS.num_trials
    if FLAGS.worker == "engine":
      result = _engine_worker(trials, FLAGS.num_repeats)
    else:
      result = _numpy_worker(trials, FLAGS.num_repeats, FLAGS.worker.split(":")[1])
    print(json.dumps(result))
    return

  common.claim_output_dir(FLAGS.output_dir)
  base = [f"--num_classes={FLAGS.num_classes}", f"--chunk_size={FLAGS.chunk_size}"]
  timed = base + [f"--num_trials={FLAGS.num_trials}", f"--num_repeats={FLAGS.num_repeats}"]
  cores = os.cpu_count() or 1
  engine = {}
  first = _spawn(["--worker=engine", f"--prng_impl={FLAGS.prng_impls[0]}"] + timed)
  on_cpu = first["devices"][0].startswith("cpu")
  device_counts = sorted({1, cores}) if on_cpu else [0]
  for impl in FLAGS.prng_impls:
    for devices in device_counts:
      if impl == FLAGS.prng_impls[0] and devices in (0, 1):
        result = first
      else:
        result = _spawn(["--worker=engine", f"--prng_impl={impl}"] + timed, host_devices=devices)
      name = f"{impl}" + (f"/{devices}dev" if on_cpu else "")
      engine[name] = {"trials_per_s": _rate(result, FLAGS.num_trials),
                      "median_s": statistics.median(result["seconds"]),
                      "devices": result["devices"]}
  numpy_results = {}
  for dtype in ("float32", "float64"):
    result = _spawn([f"--worker=numpy:{dtype}"] + timed)
    numpy_results[dtype] = {"trials_per_s": _rate(result, FLAGS.num_trials),
                            "median_s": statistics.median(result["seconds"])}
  best_engine = max(engine, key=lambda k: engine[k]["trials_per_s"])
  best_numpy = max(numpy_results, key=lambda k: numpy_results[k]["trials_per_s"])
  ratio = engine[best_engine]["trials_per_s"] / numpy_results[best_numpy]["trials_per_s"]

  memory = {}
  best_impl = best_engine.split("/")[0]
  best_devices = int(best_engine.split("/")[1][:-3]) if on_cpu else 0
  for n in FLAGS.memory_trials:
    result = _spawn(["--worker=engine", f"--prng_impl={best_impl}", f"--num_trials={n}",
                     "--num_repeats=1"] + base, host_devices=best_devices)
    memory[n] = result["peak_rss_mb"]

  report = {
      "benchmark": "montecarlo_noisy_argmax",
      "num_classes": FLAGS.num_classes, "sigma": SIGMA, "num_trials": FLAGS.num_trials,
      "device": first["devices"][0], "cpu_cores": cores,
      "engine": engine, "numpy_baseline": numpy_results,
      "best_engine": best_engine, "best_numpy": best_numpy,
      "speedup_vs_numpy": ratio,
      "target_speedup_cpu": 1.5, "meets_cpu_target": bool(ratio >= 1.5) if on_cpu else None,
      "peak_rss_mb_by_num_trials": memory,
      "gpu_target_trials_per_s": 1e9,
      "gpu_trials_per_s": None if on_cpu else engine[best_engine]["trials_per_s"],
      "command": " ".join(sys.argv), "machine": tables.machine(first["devices"][0]),
  }
  report["table"] = table(report, on_cpu)
  results.write_json(os.path.join(FLAGS.output_dir, "results.json"), report)
  print(results.dumps(report))


if __name__ == "__main__":
  common.run(main)
