"""Benchmark: many DP-SGD runs as one vmapped program against a Python loop over runs.

The many-run audits train T independent DP-SGD models, each from its own PRNG key
(initialisation, Poisson batches and noise all derive from it). This benchmark trains T runs of
a small model (multinomial logistic regression, or an MLP with one hidden layer of 32) on the
real, offline ``digits`` data (80% training split, standardized), ``--num_steps`` steps each
with Poisson sampling (expected batch ``--batch_size``), clipping norm C, noise multiplier sigma
and SGD, two ways:

* ``vmapped``: one run is ``lax.scan`` of :func:`dpaudit.dpsgd.training.make_step` over the
  steps after :func:`~dpaudit.dpsgd.training.init_state`; ``jax.jit(jax.vmap(run))`` over the
  keys, compiled once, called once per chunk of ``--chunk_size`` runs (0: all runs at once);
* ``sequential``: the same ``run`` jitted once for a single key and called in a Python loop
  over runs: the strongest one-at-a-time baseline (every run is one compiled scan);
* ``sequential_step_loop``: the runs one after another, each with the training loop of
  :func:`dpaudit.dpsgd.train` (the jitted step compiled once, called from Python every step),
  the way a run is otherwise executed.

Only ``--sequential_runs`` runs of each baseline are timed and the total for T runs is
extrapolated from their mean (the JSON says so).

Both execute the same function on the same keys, data and model, and the benchmark checks that
the first ``--check_runs`` vmapped runs end with the same parameters (``allclose``) and the same
per-step batch sizes as their sequential twins. ``make_step`` loops over a data-dependent
number of microbatches of ``--physical_batch_size`` (``lax.fori_loop`` with a traced bound,
a ``while_loop`` over the largest count under vmap); the default 128 holds a whole batch of
expected size 64 (its maximum over the runs is reported), so one microbatch per step suffices.

Reports compile time separately from the median wall time over ``--repeats`` timed
repetitions, the speedups (extrapolated sequential totals / vmapped median; ``speedup`` against
the scan loop, ``speedup_vs_step_loop`` against the step loop) and the target (vmapped at least
20x faster). Prints one JSON object and writes it to ``--output_dir``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time

from absl import app, flags
import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import data, models
from dpaudit.dpsgd import clipping, training
from experiments import common

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_runs", 1000, "T, the number of independent DP-SGD runs.")
flags.DEFINE_integer("num_steps", 100, "DP-SGD steps per run.")
flags.DEFINE_string("model", "logistic",
                    "logistic (multinomial logistic regression) or mlp (one hidden layer of 32).")
flags.DEFINE_integer("batch_size", 64, "Expected Poisson batch size qN.")
flags.DEFINE_integer("physical_batch_size", 128,
                     "Microbatch size of make_step (a batch larger than this takes two loops).")
flags.DEFINE_integer("sequential_runs", 20, "Runs timed in the sequential loop (extrapolated).")
flags.DEFINE_integer("check_runs", 3, "Runs compared between vmapped and sequential.")
flags.DEFINE_integer("repeats", 3, "Timed repetitions of the vmapped T runs (median reported).")
flags.DEFINE_integer("chunk_size", 0, "Runs per vmapped call (0: all runs in one call).")
flags.DEFINE_float("noise_multiplier", 1.0, "sigma.")
flags.DEFINE_float("l2_clip_norm", 1.0, "C.")
flags.DEFINE_float("learning_rate", 0.1, "SGD step size.")
flags.DEFINE_string("prng_impl", "threefry_unrolled",
                    f"PRNG of the run keys: {', '.join(common.PRNG_IMPLS)}.")
flags.DEFINE_integer("seed", 0, "Seed of the run keys and of the train/test split.")
flags.DEFINE_string("output_dir", "out/benchmarks/many_run", "Where results.json goes.")

MODELS = {"logistic": (), "mlp": (32,)}
TARGET_SPEEDUP = 20.0
RTOL, ATOL = 1e-5, 1e-5


def make_run(model, config: training.TrainConfig, num_examples: int, example: jax.Array,
             strategy: str):
  """``run(key, features, labels) -> (final params, per-step batch sizes)`` of one DP-SGD run:
  :func:`dpaudit.dpsgd.training.make_run` (the function the many-run audits vmap)."""
  full = training.make_run(model, config, num_examples, example, strategy=strategy)

  def run(key, features, labels):
    out = full(key, features, labels)
    return out.params, out.batch_sizes

  return run


def _validate_flags() -> None:
  if FLAGS.prng_impl not in common.PRNG_IMPLS:
    raise ValueError(f"--prng_impl={FLAGS.prng_impl!r} is not one of "
                     f"{', '.join(common.PRNG_IMPLS)}")
  if FLAGS.model not in MODELS:
    raise ValueError(f"--model={FLAGS.model!r} is not one of {', '.join(MODELS)}")
  for name in ("num_runs", "num_steps", "batch_size", "physical_batch_size", "sequential_runs",
               "check_runs", "repeats"):
    if getattr(FLAGS, name) < 1:
      raise ValueError(f"--{name}={getattr(FLAGS, name)} must be >= 1")
  if FLAGS.sequential_runs > FLAGS.num_runs:
    raise ValueError(f"--sequential_runs={FLAGS.sequential_runs} exceeds "
                     f"--num_runs={FLAGS.num_runs}")
  if FLAGS.check_runs > FLAGS.sequential_runs:
    raise ValueError(f"--check_runs={FLAGS.check_runs} exceeds "
                     f"--sequential_runs={FLAGS.sequential_runs}")
  if not 0 <= FLAGS.chunk_size <= FLAGS.num_runs:
    raise ValueError(f"--chunk_size={FLAGS.chunk_size} is outside [0, --num_runs="
                     f"{FLAGS.num_runs}]")


def _time_vmapped(run, keys, features, labels, chunk_size: int):
  """Compiles the vmapped run once; returns compile time, timings and the outputs."""
  num_runs = keys.shape[0]
  num_chunks = math.ceil(num_runs / chunk_size)
  padded = num_chunks * chunk_size
  if padded > num_runs:  # pad with spare keys so every chunk has one shape (one compilation)
    keys = jnp.concatenate([keys, jax.random.split(keys[-1], padded - num_runs)])
  chunks = [keys[i * chunk_size:(i + 1) * chunk_size] for i in range(num_chunks)]
  start = time.perf_counter()
  compiled = jax.jit(jax.vmap(run, in_axes=(0, None, None))).lower(
      chunks[0], features, labels).compile()
  compile_s = time.perf_counter() - start

  def all_runs():
    outs = [compiled(chunk, features, labels) for chunk in chunks]
    jax.block_until_ready(outs)
    return outs

  start = time.perf_counter()
  outs = all_runs()  # warm-up (first execution); its outputs are the ones checked
  first_s = time.perf_counter() - start
  times = []
  for _ in range(FLAGS.repeats):
    start = time.perf_counter()
    all_runs()
    times.append(time.perf_counter() - start)
  params = jax.tree.map(lambda *xs: np.concatenate(xs)[:num_runs], *[o[0] for o in outs])
  batch_sizes = np.concatenate([np.asarray(o[1]) for o in outs])[:num_runs]
  timing = {"compile_s": compile_s, "first_call_s": first_s,
            "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
            "repeats": len(times), "chunk_size": chunk_size, "num_chunks": num_chunks,
            "padded_runs": padded - num_runs,
            "per_run_ms": 1e3 * statistics.median(times) / num_runs}
  return timing, params, batch_sizes


def _time_sequential(run, keys, features, labels, num_timed: int):
  """Compiles the single run once and calls it ``num_timed`` times in a Python loop."""
  start = time.perf_counter()
  compiled = jax.jit(run).lower(keys[0], features, labels).compile()
  compile_s = time.perf_counter() - start
  jax.block_until_ready(compiled(keys[0], features, labels))  # warm-up
  outs, times = [], []
  for i in range(num_timed):
    start = time.perf_counter()
    out = compiled(keys[i], features, labels)
    jax.block_until_ready(out)
    times.append(time.perf_counter() - start)
    outs.append(jax.device_get(out))
  mean_s = sum(times) / len(times)
  timing = {"compile_s": compile_s, "runs_timed": num_timed,
            "per_run_ms": 1e3 * mean_s, "per_run_median_ms": 1e3 * statistics.median(times),
            "per_run_min_ms": 1e3 * min(times), "per_run_max_ms": 1e3 * max(times),
            "extrapolated_total_s": mean_s * keys.shape[0], "extrapolated": True,
            "note": (f"{num_timed} of {keys.shape[0]} runs timed one after another; total = "
                     f"mean time per run x {keys.shape[0]}")}
  return timing, outs


def _time_step_loop(model, config, num_examples, example, strategy, keys, features, labels,
                    num_timed: int):
  """The training loop of :func:`dpaudit.dpsgd.train` (one jitted step, compiled once,
  dispatched from Python every step) run after run: how a run is executed one at a time."""
  state, optimizer = training.init_state(keys[0], model, example, config, num_examples)
  step = jax.jit(training.make_step(model, optimizer, config, num_examples, strategy=strategy))
  start = time.perf_counter()
  compiled = step.lower(state, features, labels).compile()
  compile_s = time.perf_counter() - start

  def one_run(key):
    state, _ = training.init_state(key, model, example, config, num_examples)
    sizes = []
    for _ in range(config.num_steps):
      state, metrics = compiled(state, features, labels)
      sizes.append(metrics.batch_size)
    jax.block_until_ready(state)
    return jax.device_get((state.params, jnp.stack(sizes)))

  one_run(keys[0])  # warm-up (init_state's own small programs)
  outs, times = [], []
  for i in range(num_timed):
    start = time.perf_counter()
    outs.append(one_run(keys[i]))
    times.append(time.perf_counter() - start)
  mean_s = sum(times) / len(times)
  timing = {"compile_s": compile_s, "runs_timed": num_timed,
            "per_run_ms": 1e3 * mean_s, "per_run_median_ms": 1e3 * statistics.median(times),
            "per_step_us": 1e6 * mean_s / max(config.num_steps, 1),
            "extrapolated_total_s": mean_s * keys.shape[0], "extrapolated": True,
            "note": (f"{num_timed} of {keys.shape[0]} runs timed one after another, each a "
                     "Python loop over steps of the jitted DP-SGD step (the loop of "
                     f"dpaudit.dpsgd.train); total = mean time per run x {keys.shape[0]}")}
  return timing, outs


def _check(vmapped_params, vmapped_sizes, sequential_outs, num_check: int) -> dict:
  max_abs, max_rel, allclose, sizes_equal = 0.0, 0.0, True, True
  for i in range(num_check):
    seq_params, seq_sizes = sequential_outs[i]
    for a, b in zip(jax.tree.leaves(seq_params), jax.tree.leaves(vmapped_params)):
      a, b = np.asarray(a), np.asarray(b[i])
      diff = np.abs(a - b)
      max_abs = max(max_abs, float(diff.max()))
      max_rel = max(max_rel, float((diff / np.maximum(np.abs(a), 1e-12)).max()))
      allclose &= bool(np.allclose(b, a, rtol=RTOL, atol=ATOL))
    sizes_equal &= bool(np.array_equal(np.asarray(seq_sizes), vmapped_sizes[i]))
  return {"runs_compared": num_check, "final_params_allclose": allclose, "rtol": RTOL,
          "atol": ATOL, "max_abs_diff": max_abs, "max_rel_diff": max_rel,
          "batch_sizes_equal": sizes_equal, "passed": allclose and sizes_equal}


@common.cli
def main(argv):
  del argv
  common.quiet_logging()
  _validate_flags()
  start = time.perf_counter()
  train, test = data.train_test_split(data.load("digits"), 0.2, FLAGS.seed, stratify=True)
  train, _, _ = data.standardize(train, test)
  features, labels = jnp.asarray(train.features), jnp.asarray(train.labels)
  num_examples = features.shape[0]
  if FLAGS.batch_size > num_examples:
    raise ValueError(f"--batch_size={FLAGS.batch_size} exceeds the {num_examples} training "
                     "examples")
  model = models.MLP(MODELS[FLAGS.model], train.num_classes,
                     example_ndim=features.ndim - 1)
  config = training.TrainConfig(
      num_steps=FLAGS.num_steps, sampling_rate=FLAGS.batch_size / num_examples,
      noise_multiplier=FLAGS.noise_multiplier, l2_clip_norm=FLAGS.l2_clip_norm,
      learning_rate=FLAGS.learning_rate, optimizer="sgd",
      physical_batch_size=FLAGS.physical_batch_size)
  example = features[:1]
  params = model.init(jax.random.key(0), example)["params"]
  strategy = clipping.resolve_strategy(
      model, params, features[:min(FLAGS.physical_batch_size, num_examples)], config.clipping)
  keys = jax.random.split(common.make_key(FLAGS.seed, FLAGS.prng_impl), FLAGS.num_runs)
  run = make_run(model, config, num_examples, example, strategy)

  vmapped, vparams, vsizes = _time_vmapped(run, keys, features, labels,
                                           FLAGS.chunk_size or FLAGS.num_runs)
  sequential, souts = _time_sequential(run, keys, features, labels, FLAGS.sequential_runs)
  step_loop, louts = _time_step_loop(model, config, num_examples, example, strategy, keys,
                                     features, labels, FLAGS.sequential_runs)
  check = _check(vparams, vsizes, souts, FLAGS.check_runs)
  check_loop = _check(vparams, vsizes, louts, FLAGS.check_runs)
  speedup = sequential["extrapolated_total_s"] / vmapped["median_s"]
  speedup_loop = step_loop["extrapolated_total_s"] / vmapped["median_s"]
  result = {
      "benchmark": "many_run_dpsgd",
      "device": str(jax.devices()[0]), "device_kind": jax.devices()[0].device_kind,
      "cpu_cores": os.cpu_count(),
      "num_runs": FLAGS.num_runs, "num_steps": FLAGS.num_steps, "model": FLAGS.model,
      "hidden_sizes": list(MODELS[FLAGS.model]),
      "param_count": int(sum(np.size(p) for p in jax.tree.leaves(params))),
      "dataset": "digits", "num_examples": num_examples,
      "example_shape": list(features.shape[1:]),
      "expected_batch_size": FLAGS.batch_size, "sampling_rate": config.sampling_rate,
      "physical_batch_size": FLAGS.physical_batch_size,
      "noise_multiplier": FLAGS.noise_multiplier, "l2_clip_norm": FLAGS.l2_clip_norm,
      "learning_rate": FLAGS.learning_rate, "optimizer": "sgd", "clipping": strategy,
      "prng_impl": FLAGS.prng_impl, "seed": FLAGS.seed,
      "batch_size_stats": {
          "mean": float(vsizes.mean()), "max": int(vsizes.max()), "min": int(vsizes.min()),
          "steps_over_physical_batch": int((vsizes > FLAGS.physical_batch_size).sum())},
      "vmapped": vmapped,
      "sequential": sequential,
      "sequential_step_loop": step_loop,
      "speedup_vs_step_loop": speedup_loop,
      "meets_target_vs_step_loop": bool(speedup_loop >= TARGET_SPEEDUP),
      "speedup": speedup,
      "target_speedup": TARGET_SPEEDUP,
      "meets_target": bool(speedup >= TARGET_SPEEDUP),
      "equality_check": check,
      "equality_check_step_loop": check_loop,
      "command": " ".join(sys.argv),
      "versions": common.versions(),
  }
  result["wall_time_s"] = time.perf_counter() - start
  os.makedirs(FLAGS.output_dir, exist_ok=True)
  path = os.path.join(FLAGS.output_dir, "results.json")
  with open(path + ".tmp", "w") as f:
    json.dump(result, f, indent=2)
  os.replace(path + ".tmp", path)
  print(json.dumps(result, indent=2))


if __name__ == "__main__":
  app.run(main)
