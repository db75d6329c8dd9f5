"""Benchmark: training many lazy n-gram canary models (Stock et al., Sec. 4.1) as one vmapped
program against a sequential loop of the same training code.

  python -m experiments.benchmarks.ngram

Each model is :class:`dpaudit.models.LazyNgram` (T x 10 logits) trained on one random canary by
DP-SGD with :func:`dpaudit.dpsgd.training.make_run` (sampling rate 1, clip 1, noise
``--noise_multiplier``, learning rate 0.5/sigma): the function
:func:`dpaudit.audits.reconstruction.lazy_ngram_run` that ``experiments.ngram_reconstruction``
vmaps. Three ways, on the same keys:

* ``vmapped``: ``jax.jit(jax.vmap(run))`` over ``--num_models`` keys, compiled once (compile
  time reported apart), median of ``--num_repeats`` timed calls;
* ``sequential``: the same run jitted once for one key and called in a Python loop over models
  (each call one compiled scan over the steps);
* ``sequential_step_loop``: each model trained with the loop of :func:`dpaudit.dpsgd.train`:
  the jitted DP-SGD step dispatched from Python at every step (how one model is trained on
  its own, and how the paper trained its models, with Opacus).

The loops time ``--sequential_models`` models and extrapolate to ``--num_models`` (stated in the
JSON). The first ``--check_models`` vmapped models must end with the same logits as their
sequential twins. Targets: all models in under 5 s (CPU) and a speedup of at least 100x.
"""

from __future__ import annotations

import os
import sys
import time

import jax
import jax.numpy as jnp
from absl import flags

from dpaudit import results
from dpaudit.audits import reconstruction
from dpaudit.models import ngram
from experiments import common
from experiments.benchmarks import hot_paths, tables, timing

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_models", 10_000, "N, the number of models trained.")
flags.DEFINE_integer("num_steps", 100, "DP-SGD steps per model.")
flags.DEFINE_integer("canary_length", 10, "T.")
flags.DEFINE_float("noise_multiplier", 1.0, "sigma (learning rate 0.5 / sigma).")
flags.DEFINE_integer("sequential_models", 100, "Models timed in each loop (extrapolated).")
flags.DEFINE_integer("check_models", 3, "Models compared between vmapped and sequential.")
flags.DEFINE_integer("num_repeats", 5, "Timed repetitions of the vmapped program (median).")
flags.DEFINE_integer("chunk_size", 0, "Models per vmapped call (0: all at once).")
flags.DEFINE_enum("prng_impl", "threefry_unrolled", list(common.PRNG_IMPLS), "PRNG.")
flags.DEFINE_integer("seed", 0, "PRNG seed.")
flags.DEFINE_string("output_dir", "out/benchmarks/ngram", "Where results.json goes.")
common.deprecated_alias("repeats", "num_repeats")

TARGET_SECONDS = 5.0
TARGET_SPEEDUP = 100.0


def _validate_flags() -> None:
  for name in ("num_steps", "sequential_models", "check_models", "num_repeats"):
    common.check_count(name, FLAGS[name].value)
  # A lazy n-gram model: T x 10 float32 logits, their gradient and update, all models at once.
  common.check_memory("canary_length", FLAGS.canary_length, 12.0 * 10, what="one model")
  name = "chunk_size" if FLAGS.chunk_size > 0 else "num_models"
  common.check_count("num_models", FLAGS.num_models)
  common.check_memory(name, FLAGS[name].value, 12.0 * 10 * FLAGS.canary_length,
                      what="the models trained at once")
  common.check_float("noise_multiplier", FLAGS.noise_multiplier, 0.0, low_open=True)
  common.check_seed(FLAGS.seed)
  if FLAGS.sequential_models > FLAGS.num_models:
    raise ValueError(f"--sequential_models={FLAGS.sequential_models} exceeds "
                     f"--num_models={FLAGS.num_models}")
  if FLAGS.check_models > FLAGS.sequential_models:
    raise ValueError(f"--check_models={FLAGS.check_models} exceeds "
                     f"--sequential_models={FLAGS.sequential_models}")
  if not 0 <= FLAGS.chunk_size <= FLAGS.num_models:
    raise ValueError(f"--chunk_size={FLAGS.chunk_size} is outside [0, --num_models="
                     f"{FLAGS.num_models}]")


def table(result: dict) -> list[dict]:
  """The vmapped models against each loop, seconds for all N models (the loops extrapolated;
  target 100x), and the vmapped time against its 5 s goal
  (:mod:`~experiments.benchmarks.tables`)."""
  what = (f"{result['num_models']} lazy n-gram models T={result['canary_length']}, "
          f"{result['num_steps']} steps, vmapped")
  vmapped = result["vmapped"]["median_s"]
  return [
      tables.row(what, vmapped, "s", peer=result["sequential_step_loop"]["extrapolated_total_s"],
                 peer_name="loop over models and steps, as dpsgd.train, extrapolated",
                 target=result["target_speedup"]),
      tables.row(what, vmapped, "s", peer=result["sequential"]["extrapolated_total_s"],
                 peer_name="loop over models, one compiled scan each, extrapolated",
                 target=result["target_speedup"]),
      tables.goal_row(what, vmapped, "s", result["target_seconds"])]


@common.cli
def main(argv):
  del argv
  common.quiet_logging()
  _validate_flags()
  common.claim_output_dir(FLAGS.output_dir)
  start = time.perf_counter()
  config = reconstruction.NgramCanaryConfig(
      noise_multipliers=(FLAGS.noise_multiplier,), num_models=FLAGS.num_models,
      num_steps=FLAGS.num_steps, canary_length=FLAGS.canary_length)
  key = common.make_key(FLAGS.seed, FLAGS.prng_impl)
  canary_key, models_key = jax.random.split(key)
  canary = reconstruction.random_canary(canary_key, config)
  keys = jax.random.split(models_key, FLAGS.num_models)
  sigma = FLAGS.noise_multiplier
  model = ngram.LazyNgram(config.canary_length, config.vocab_size)
  train_config = reconstruction.lazy_ngram_train_config(config, sigma)
  features = jnp.zeros((1, 1), jnp.float32)
  labels = canary[None]
  run = hot_paths.make_run(model, train_config, 1, features[0], "vmap",
                           loss_fn=ngram.sequence_nll)
  args = (features, labels)
  vmapped, vparams, vsizes = timing.time_vmapped(
      run, keys, args, FLAGS.chunk_size or FLAGS.num_models, FLAGS.num_repeats)
  sequential, souts = timing.time_sequential(run, keys, args, FLAGS.sequential_models)
  step_loop, louts = timing.time_step_loop(
      model, train_config, 1, features[0], "vmap", keys, features, labels,
      FLAGS.sequential_models, loss_fn=ngram.sequence_nll)
  speedup = sequential["extrapolated_total_s"] / vmapped["median_s"]
  speedup_loop = step_loop["extrapolated_total_s"] / vmapped["median_s"]
  device = jax.devices()[0]
  result = {
      "benchmark": "lazy_ngram_models",
      "device": str(device), "device_kind": device.device_kind, "cpu_cores": os.cpu_count(),
      "num_models": FLAGS.num_models, "num_steps": FLAGS.num_steps,
      "canary_length": config.canary_length, "vocab_size": config.vocab_size,
      "noise_multiplier": sigma, "learning_rate": train_config.learning_rate,
      "sampling_rate": 1.0, "l2_clip_norm": config.l2_clip_norm,
      "prng_impl": FLAGS.prng_impl, "seed": FLAGS.seed,
      "vmapped": vmapped,
      "sequential": sequential,
      "sequential_step_loop": step_loop,
      "speedup": speedup,
      "speedup_vs_step_loop": speedup_loop,
      "target_seconds": TARGET_SECONDS,
      "meets_target_seconds": bool(vmapped["median_s"] < TARGET_SECONDS),
      "target_speedup": TARGET_SPEEDUP,
      "meets_target_speedup": bool(speedup >= TARGET_SPEEDUP),
      "meets_target_speedup_vs_step_loop": bool(speedup_loop >= TARGET_SPEEDUP),
      "equality_check": timing.check_equal(vparams, vsizes, souts, FLAGS.check_models),
      "equality_check_step_loop": timing.check_equal(vparams, vsizes, louts,
                                                     FLAGS.check_models),
      "command": " ".join(sys.argv),
      "versions": common.versions(), "machine": tables.machine(),
  }
  result["table"] = table(result)
  result["wall_time_s"] = time.perf_counter() - start
  results.write_json(os.path.join(FLAGS.output_dir, "results.json"), result)
  print(results.dumps(result))


if __name__ == "__main__":
  common.run(main)
