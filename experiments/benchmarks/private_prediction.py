r"""PATE's histogram model through the noisy argmax: trials per second, dpaudit vs NumPy, same run.

  python -m experiments.benchmarks.private_prediction

One trial draws a vote histogram from PATE's parametric model (Sec. 5.1 of Chadha et al.:
``H_S = Mult(k, P)``, ``H_S' = Mult(k - 1, P) + Mult(1, P')``), adds Gaussian noise and releases
the argmax, as the audit of one query does 1e7-1e8 times. dpaudit runs it through
``dpaudit.montecarlo.count_outcomes`` with ``dpaudit.mechanisms.histograms`` (inversion tables,
one PRNG call per trial, sharded over ``--host_devices`` XLA CPU devices); the baseline is the
vectorised NumPy a user would write (``Generator.multinomial``, float32 normals, ``argmax``,
``bincount``, in blocks). Two class-probability profiles: Dirichlet(1/2) over the classes and a
concentrated one (teachers mostly agree). The two implementations' outcome counts are compared
by a chi-square test (same law). Prints JSON with the ratios; the target is >= 3x on CPU.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from absl import flags

from experiments import common
from experiments.benchmarks import hot_paths, tables

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_trials", 2**24, "dpaudit trials per timed run.")
flags.DEFINE_integer("numpy_trials", 2**21, "NumPy trials per timed run (rate extrapolated).")
flags.DEFINE_integer("num_teachers", 250, "Votes k per histogram (the paper's MNIST setting).")
flags.DEFINE_integer("num_classes", 10, "Classes C.")
flags.DEFINE_float("noise_multiplier", 40.0, "Noise standard deviation sigma (the paper's MNIST "
                   "setting).")
flags.DEFINE_integer("num_repeats", 3, "Timed runs per measurement (median reported).")
flags.DEFINE_integer("host_devices", 2, "XLA CPU devices to shard over (0: JAX's default).")
flags.DEFINE_string("output_dir", "out/benchmarks/private_prediction", "Where results.json goes.")
flags.DEFINE_integer("num_trained_teachers", 20,
                     "Teachers trained in the ensemble measurement (0: skip).")
flags.DEFINE_integer("teacher_epochs", 20, "Epochs of each teacher there.")
flags.DEFINE_list("teacher_models", ["mlp", "logistic"], "Teacher architectures measured there "
                  "(mlp: hidden 512, 256; logistic: a linear model).")
common.deprecated_alias("sigma", "noise_multiplier")
common.deprecated_alias("repeats", "num_repeats")
# --num_teachers is the votes per histogram k here (as in the other PATE CLIs), so the old
# --teachers (a count of trained teachers) becomes --num_trained_teachers.
common.deprecated_alias("teachers", "num_trained_teachers")

TARGET_RATIO = 3.0
profiles = hot_paths.pate_profiles
numpy_pate = hot_paths.numpy_pate


def _median_rate(fn, num_trials, repeats):
  times, out = [], None
  for _ in range(repeats):
    start = time.perf_counter()
    out = fn()
    times.append(time.perf_counter() - start)
  return num_trials / statistics.median(times), out


def measure(name, p, p_neighbor, neighbor, config):
  import numpy as np
  import scipy.stats

  from dpaudit import montecarlo
  from dpaudit.mechanisms import histograms
  k, sigma = config["num_teachers"], config["sigma"]
  model = histograms.pate_model(p, p_neighbor, k)

  def trial(key, model):
    return histograms.noisy_argmax_of(histograms.PATE, key, model, neighbor, sigma)

  def ours(seed, trials):
    return montecarlo.count_outcomes(trial, common.make_key(seed), trials, p.size,
                                     args=(model,))

  start = time.perf_counter()
  ours(0, config["num_trials"])  # the same plan as the timed runs: compiles once, here
  first_s = time.perf_counter() - start
  ours_rate, ours_counts = _median_rate(lambda: ours(1, config["num_trials"]),
                                        config["num_trials"], config["repeats"])
  compile_s = max(first_s - config["num_trials"] / ours_rate, 0.0)
  rng = np.random.default_rng(2)
  numpy_rate, numpy_counts = _median_rate(
      lambda: numpy_pate(rng, p, p_neighbor, k, sigma, config["numpy_trials"], neighbor),
      config["numpy_trials"], config["repeats"])
  seen = (ours_counts + numpy_counts) > 0
  same_law = scipy.stats.chi2_contingency(np.stack([ours_counts[seen], numpy_counts[seen]]))[1]
  entry = {"name": f"pate {name} {'H_S_prime' if neighbor else 'H_S'}",
           "windows": [int(t.shape[-1]) for t in model.table_k.thresholds],
           "dpaudit_trials_per_s": ours_rate, "numpy_trials_per_s": numpy_rate,
           "ratio": ours_rate / numpy_rate, "target_ratio": TARGET_RATIO,
           "target_met": ours_rate / numpy_rate >= TARGET_RATIO, "compile_s": compile_s,
           "same_law_p_value": float(same_law),
           "dpaudit_frequencies": (ours_counts / ours_counts.sum()).tolist(),
           "numpy_frequencies": (numpy_counts / numpy_counts.sum()).tolist()}
  print(f"{entry['name']}: dpaudit {ours_rate:.3g}/s, NumPy {numpy_rate:.3g}/s, ratio "
        f"{entry['ratio']:.2f} ({'met' if entry['target_met'] else 'NOT met'}), same-law "
        f"p = {same_law:.2g}", file=sys.stderr)
  return entry


def measure_teachers(config, architecture: str):
  """Teacher training on digits (disjoint partitions of 1,200 examples): one vmapped call of
  all k teachers against a loop over teachers of one compiled single-teacher program (both
  timed after compiling; same keys, so the same parameters)."""
  import jax
  import numpy as np

  from dpaudit import data, models, teachers
  ds = data.load("digits")
  x, y = jax.numpy.asarray(ds.features[:1200]), jax.numpy.asarray(ds.labels[:1200])
  k = config["teachers"]
  model = models.make_model(architecture, x.shape[1:], 10)
  parts = teachers.partition(jax.random.key(0), 1200, k, "random")
  train = teachers.make_train_teacher(model, x.shape[1:],
                                      teachers.TeacherConfig(epochs=config["teacher_epochs"]),
                                      parts.indices.shape[1])
  keys = jax.random.split(jax.random.key(1), k)
  vmapped = jax.jit(jax.vmap(train, in_axes=(0, None, None, 0, 0)))
  single = jax.jit(train)

  def run_vmapped():
    return jax.block_until_ready(vmapped(keys, x, y, parts.indices, parts.mask))

  def run_loop():
    return [jax.block_until_ready(single(keys[i], x, y, parts.indices[i], parts.mask[i]))
            for i in range(k)]

  start = time.perf_counter()
  run_vmapped()
  compile_vmapped = time.perf_counter() - start
  start = time.perf_counter()
  single(keys[0], x, y, parts.indices[0], parts.mask[0])
  compile_single = time.perf_counter() - start
  vm_rate, params = _median_rate(run_vmapped, k, config["repeats"])
  loop_rate, loop_params = _median_rate(run_loop, k, config["repeats"])
  diff = max(float(np.max(np.abs(np.asarray(a)[0] - np.asarray(b))))
             for a, b in zip(jax.tree_util.tree_leaves(params),
                             jax.tree_util.tree_leaves(loop_params[0])))
  entry = {"name": f"teachers k={k} digits {architecture} {config['teacher_epochs']} epochs",
           "vmapped_teachers_per_s": vm_rate, "loop_teachers_per_s": loop_rate,
           "ratio": vm_rate / loop_rate, "first_call_s_vmapped": compile_vmapped,
           "first_call_s_single": compile_single, "max_abs_param_diff_teacher_0": diff}
  print(f"{entry['name']}: vmapped {vm_rate:.3g} teachers/s, loop {loop_rate:.3g}/s, ratio "
        f"{entry['ratio']:.2f}", file=sys.stderr)
  return entry


def table(workloads: list[dict], teacher_entries: list[dict]) -> list[dict]:
  """dpaudit's trials/s against NumPy's (target 3x), then the vmapped teachers against the loop
  over teachers (:mod:`~experiments.benchmarks.tables`)."""
  rows = [tables.row(f"{r['name']} (windows {min(r['windows'])}-{max(r['windows'])})",
                     r["dpaudit_trials_per_s"], "trials/s", peer=r["numpy_trials_per_s"],
                     peer_name="NumPy: multinomial, float32 normals, argmax",
                     target=r["target_ratio"]) for r in workloads]
  rows += [tables.row(f"{t['name']}, vmapped", t["vmapped_teachers_per_s"], "teachers/s",
                      peer=t["loop_teachers_per_s"],
                      peer_name="loop over teachers, one compiled program")
           for t in teacher_entries]
  return rows


def config_from_flags():
  common.check_count("num_trials", FLAGS.num_trials)
  common.check_count("numpy_trials", FLAGS.numpy_trials)
  common.check_count("num_repeats", FLAGS.num_repeats)
  if not 2 <= FLAGS.num_classes <= 64:
    raise ValueError(f"--num_classes={FLAGS.num_classes} is outside the valid range [2, 64]")
  if not 2 <= FLAGS.num_teachers <= 4095:
    raise ValueError(f"--num_teachers={FLAGS.num_teachers} is outside the valid range "
                     "[2, 4095]")
  common.check_float("noise_multiplier", FLAGS.noise_multiplier, 0.0, low_open=True)
  common.check_count("num_trained_teachers", FLAGS.num_trained_teachers, 0, 10_000)
  common.check_count("teacher_epochs", FLAGS.teacher_epochs, 0)
  from dpaudit import models
  bad = [m for m in FLAGS.teacher_models if m not in models.MODEL_NAMES or m == "wrn16_4"]
  if bad or (FLAGS.num_trained_teachers and not FLAGS.teacher_models):
    raise ValueError(f"--teacher_models={','.join(FLAGS.teacher_models)} names "
                     f"{bad or 'nothing'}; valid: mlp, lenet5, logistic")
  common.check_count("host_devices", FLAGS.host_devices, 0, 4096)
  # results.json keeps its keys (sigma, repeats, teachers: the flags' names before the rename).
  flag_of = {"sigma": "noise_multiplier", "repeats": "num_repeats",
             "teachers": "num_trained_teachers"}
  return {key: getattr(FLAGS, flag_of.get(key, key)) for key in
          ("num_trials", "numpy_trials", "num_teachers", "num_classes", "sigma", "repeats",
           "host_devices", "teachers", "teacher_epochs", "teacher_models")}


@common.cli
def main(argv) -> None:
  del argv
  config = config_from_flags()
  common.claim_output_dir(FLAGS.output_dir)
  if config["host_devices"]:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_"
                               f"device_count={config['host_devices']}")
  common.quiet_logging()
  import jax
  import numpy as np
  results = []
  with common.Timer() as timer:
    for name, p in profiles(config["num_classes"]).items():
      for neighbor in (False, True):
        results.append(measure(name, p, np.roll(p, 1), neighbor, config))
    teacher_entries = ([measure_teachers(config, m) for m in config["teacher_models"]]
                       if config["teachers"] else [])
  report = {"device": f"{jax.devices()[0].platform} x {len(jax.devices())}",
            "cpu_cores": os.cpu_count(), "workloads": results, "teachers": teacher_entries,
            "all_targets_met": all(r["target_met"] for r in results),
            "unmet": [r["name"] for r in results if not r["target_met"]],
            "machine": tables.machine(), "table": table(results, teacher_entries)}
  path = common.write_results(FLAGS.output_dir, "benchmarks.private_prediction", config,
                              report, timer.seconds)
  with open(path) as f:
    print(f.read())


if __name__ == "__main__":
  common.run(main)
