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

Reports compile time separately from the median wall time over ``--num_repeats`` timed
repetitions, the speedups (extrapolated sequential totals / vmapped median; ``speedup`` against
the scan loop, ``speedup_vs_step_loop`` against the step loop) and the target (vmapped at least
20x faster). Prints one JSON object and writes it to ``--output_dir``.
"""

from __future__ import annotations

import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from dpaudit import data, models, results
from dpaudit.dpsgd import clipping, training
from experiments import common
from experiments.benchmarks import hot_paths, tables, timing

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
flags.DEFINE_integer("num_repeats", 3, "Timed repetitions of the vmapped T runs (median reported).")
flags.DEFINE_integer("chunk_size", 0, "Runs per vmapped call (0: all runs in one call).")
flags.DEFINE_float("noise_multiplier", 1.0, "sigma.")
flags.DEFINE_float("l2_clip_norm", 1.0, "C.")
flags.DEFINE_float("learning_rate", 0.1, "SGD step size.")
flags.DEFINE_string("prng_impl", "threefry_unrolled",
                    f"PRNG of the run keys: {', '.join(common.PRNG_IMPLS)}.")
flags.DEFINE_integer("seed", 0, "Seed of the run keys and of the train/test split.")
flags.DEFINE_string("output_dir", "out/benchmarks/many_run", "Where results.json goes.")
common.deprecated_alias("repeats", "num_repeats")

MODELS = {"logistic": (), "mlp": (32,)}
TARGET_SPEEDUP = 20.0
RTOL, ATOL = 1e-5, 1e-5


make_run = hot_paths.make_run


def _validate_flags() -> None:
  if FLAGS.prng_impl not in common.PRNG_IMPLS:
    raise ValueError(f"--prng_impl={FLAGS.prng_impl!r} is not one of "
                     f"{', '.join(common.PRNG_IMPLS)}")
  if FLAGS.model not in MODELS:
    raise ValueError(f"--model={FLAGS.model!r} is not one of {', '.join(MODELS)}")
  for name in ("num_steps", "batch_size", "sequential_runs", "check_runs", "num_repeats"):
    common.check_count(name, FLAGS[name].value)
  # Per run at once: the model (at most 32 x 64 + 32 x 10 float32 weights), its per-example
  # gradients over a microbatch, its optimizer state.
  common.check_memory("physical_batch_size", FLAGS.physical_batch_size, 4.0 * 64 * 10,
                      what="one run's per-example gradients")
  common.check_count("num_runs", FLAGS.num_runs)
  name = "chunk_size" if FLAGS.chunk_size > 0 else "num_runs"
  common.check_memory(name, FLAGS[name].value,
                      4.0 * 64 * 10 * (FLAGS.physical_batch_size + 2),
                      what="the runs trained at once")
  for name in ("noise_multiplier", "l2_clip_norm", "learning_rate"):
    common.check_float(name, FLAGS[name].value, 0.0, low_open=name != "noise_multiplier")
  common.check_seed(FLAGS.seed)
  if FLAGS.sequential_runs > FLAGS.num_runs:
    raise ValueError(f"--sequential_runs={FLAGS.sequential_runs} exceeds "
                     f"--num_runs={FLAGS.num_runs}")
  if FLAGS.check_runs > FLAGS.sequential_runs:
    raise ValueError(f"--check_runs={FLAGS.check_runs} exceeds "
                     f"--sequential_runs={FLAGS.sequential_runs}")
  if not 0 <= FLAGS.chunk_size <= FLAGS.num_runs:
    raise ValueError(f"--chunk_size={FLAGS.chunk_size} is outside [0, --num_runs="
                     f"{FLAGS.num_runs}]")


def table(result: dict) -> list[dict]:
  """The vmapped runs against each loop (:mod:`~experiments.benchmarks.tables`), seconds for
  all T runs (the loops extrapolated), target 20x against either."""
  what = f"{result['num_runs']} {result['model']} DP-SGD runs of {result['num_steps']} steps"
  vmapped = result["vmapped"]["median_s"]
  return [
      tables.row(f"{what}, vmapped", vmapped, "s",
                 peer=result["sequential"]["extrapolated_total_s"],
                 peer_name="loop over runs, one compiled scan each, extrapolated",
                 target=result["target_speedup"]),
      tables.row(f"{what}, vmapped", vmapped, "s",
                 peer=result["sequential_step_loop"]["extrapolated_total_s"],
                 peer_name="loop over runs and steps, as dpsgd.train, extrapolated",
                 target=result["target_speedup"])]


@common.cli
def main(argv):
  del argv
  common.quiet_logging()
  _validate_flags()
  common.claim_output_dir(FLAGS.output_dir)
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

  vmapped, vparams, vsizes = timing.time_vmapped(
      run, keys, (features, labels), FLAGS.chunk_size or FLAGS.num_runs, FLAGS.num_repeats)
  sequential, souts = timing.time_sequential(
      run, keys, (features, labels), FLAGS.sequential_runs)
  step_loop, louts = timing.time_step_loop(model, config, num_examples, example, strategy,
                                           keys, features, labels, FLAGS.sequential_runs)
  check = timing.check_equal(vparams, vsizes, souts, FLAGS.check_runs, RTOL, ATOL)
  check_loop = timing.check_equal(vparams, vsizes, louts, FLAGS.check_runs, RTOL, ATOL)
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
      "versions": common.versions(), "machine": tables.machine(),
  }
  result["table"] = table(result)
  result["wall_time_s"] = time.perf_counter() - start
  results.write_json(os.path.join(FLAGS.output_dir, "results.json"), result)
  print(results.dumps(result))


if __name__ == "__main__":
  common.run(main)
