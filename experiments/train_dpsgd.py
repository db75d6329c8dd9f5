r"""Accuracy of DP-SGD against its privacy budget: a sweep over target epsilons (and seeds).

  python -m experiments.train_dpsgd --output_dir=out/train_dpsgd
  python -m experiments.train_dpsgd --dataset=mnist_subset --output_dir=out/train_dpsgd_mnist

For each target epsilon (``inf``: non-private) the noise multiplier is calibrated so that
DP-SGD with Poisson rate q = batch_size / N_train and T = ceil(epochs / q) steps is
(eps, delta)-DP; the model is trained ``--num_repeats`` times (repetition i at ``--seed`` + i)
and evaluated (:func:`experiments.tradeoff.run`). Writes ``results.json`` (per target epsilon:
accuracy mean and standard deviation over the repetitions, sigma, T, q, the epsilon of both the
RDP and the PLD accountant; and every run) and ``accuracy_vs_epsilon.png`` to ``--output_dir``,
and prints a table.

Data: the bundled sets (digits, breast_cancer, wine, mnist_subset) are split into train and test
(stratified, ``--test_fraction``, ``--seed``); mnist, fashion_mnist and cifar10 use their own
test split (prepared in ``--data_dir``). ``--validation_fraction`` > 0 evaluates on a held-out
share of the training set instead (for tuning). The defaults (MLP, Adam, learning rate 3e-3,
expected batch 64, 30 epochs, C = 1) were tuned that way on digits (eps 1, 8, inf; SGD, momentum
and Adam over learning rates, batch 64/128/256 x 15/30/60 epochs, C in {0.3, 1, 3}); on
mnist_subset the same search preferred ``--learning_rate=1e-3``. Tuning on private data has a
privacy cost the reported epsilon does not include.

Runs with seed s use the key of s for every target epsilon (common random numbers). Finished
runs are kept in ``--output_dir/runs`` as ``eps<E>_seed<S>-<hash>.json`` and reused;
unfinished ones continue from their checkpoint (``--noresume`` retrains).
"""

from __future__ import annotations

import math
import os
import sys

from absl import flags

from experiments import common, tradeoff

FLAGS = flags.FLAGS
flags.DEFINE_enum("dataset", "digits", ["digits", "breast_cancer", "wine", "mnist_subset",
                                        "mnist", "fashion_mnist", "cifar10"],
                  "Dataset (mnist, fashion_mnist, cifar10 must be prepared in --data_dir).")
flags.DEFINE_enum("model", "mlp", ["mlp", "logistic", "lenet5", "wrn16_4"],
                  "Classifier (lenet5 and wrn16_4 need image datasets).")
flags.DEFINE_list("epsilons", ["1", "4", "8", "inf"],
                  "Target epsilons, > 0; inf trains without clipping or noise.")
flags.DEFINE_float("delta", 1e-5, "delta of the (epsilon, delta) guarantee; keep it < 1/N_train.")
flags.DEFINE_float("epochs", 30.0, "Expected passes over the training set: steps = "
                   "ceil(epochs * N_train / batch_size).")
flags.DEFINE_integer("batch_size", 64, "Expected (Poisson) batch size; sampling rate q = "
                     "batch_size / N_train.")
flags.DEFINE_float("learning_rate", 3e-3, "Learning rate.")
flags.DEFINE_enum("optimizer", "adam", ["sgd", "momentum", "adam"],
                  "Optimizer applied to the noisy mean gradient (momentum: 0.9).")
flags.DEFINE_float("l2_clip_norm", 1.0, "Per-example gradient clipping norm C of private runs.")
flags.DEFINE_enum("accountant", "rdp", ["rdp", "pld"],
                  "Accountant that calibrates the noise (both are reported).")
flags.DEFINE_float("test_fraction", 0.2, "Test share of datasets with one split (stratified).")
flags.DEFINE_float("validation_fraction", 0.0, "If > 0: hold out this share of the training "
                   "set and evaluate on it instead of the test set (for tuning).")
flags.DEFINE_bool("standardize", True, "Standardize features with training-set statistics.")
flags.DEFINE_integer("seed", 0, "Seed of the data split and of the first run.")
flags.DEFINE_integer("num_repeats", 3, "Independent repetitions (runs) per target epsilon, "
                     "repetition i at seed --seed + i (its initialisation, batches and noise); "
                     "the table shows the mean ± std over them.")
common.deprecated_alias("target_epsilons", "epsilons")
common.deprecated_alias("repetitions", "num_repeats")
flags.DEFINE_enum("clipping", "auto", ["auto", "ghost", "vmap"],
                  "Per-example clipping: ghost norms, vmap, or auto (ghost where supported).")
flags.DEFINE_integer("physical_batch_size", 128, "Examples per microbatch (memory, speed).")
flags.DEFINE_string("data_dir", None, "tfds data directory (default: $DPAUDIT_DATA_DIR or "
                    "~/.cache/dpaudit/tensorflow_datasets).")
flags.DEFINE_string("output_dir", "out/train_dpsgd", "Where results.json, the plot and runs go.")
flags.DEFINE_bool("resume", True, "Reuse finished runs and checkpoints in output_dir/runs.")
flags.DEFINE_enum("prng_impl", "threefry2x32", list(common.PRNG_IMPLS),
                  "PRNG of initialisation, batches and noise. JAX's threefry2x32 draws the bulk "
                  "Gaussian noise of DP-SGD ~6x faster on CPU than threefry_unrolled, which "
                  "wins inside fused Monte Carlo kernels (see experiments/benchmarks/dpsgd.py).")
flags.DEFINE_bool("plot", True, "Write accuracy_vs_epsilon.png.")


def plot(result, path: str) -> None:
  """Accuracy (mean ± std over seeds) against target epsilon, and the training loss curves."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  import matplotlib.ticker
  import numpy as np

  c = result.config
  fig, (ax, ax_loss) = plt.subplots(1, 2, figsize=(12, 4.6))
  private = [s for s in result.summaries if math.isfinite(s.target_epsilon)]
  public = [s for s in result.summaries if not math.isfinite(s.target_epsilon)]
  std = lambda s: s.eval_accuracy_std or 0.0
  if private:
    ax.errorbar([s.target_epsilon for s in private], [s.eval_accuracy_mean for s in private],
                yerr=[std(s) for s in private], fmt="C0o-", capsize=4,
                label=f"DP-SGD, {result.eval_split} (delta={c.delta:g})")
    ax.plot([s.target_epsilon for s in private], [s.train_accuracy_mean for s in private],
            "C1s--", ms=4, label="DP-SGD, train")
  for s in public:
    ax.axhline(s.eval_accuracy_mean, color="k", ls=":", label=f"non-private, {result.eval_split}")
    if s.eval_accuracy_std:
      ax.axhspan(s.eval_accuracy_mean - s.eval_accuracy_std,
                 s.eval_accuracy_mean + s.eval_accuracy_std, color="k", alpha=0.1)
  if private and len(private) > 1:
    ax.set_xscale("log")
    ax.set_xticks([s.target_epsilon for s in private])
    ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
  ax.set(xlabel="target epsilon", ylabel="accuracy",
         title=f"{c.dataset}, {c.model}: accuracy vs privacy ({c.repetitions} repetition"
               f"{'s' if c.repetitions > 1 else ''})")
  ax.grid(True, which="both", alpha=0.3)
  ax.legend(fontsize=8, loc="lower right")
  for i, s in enumerate(result.summaries):
    curves = [r for r in result.runs if r.target_epsilon == s.target_epsilon]
    mean_curve = np.mean([r.loss_curve for r in curves], axis=0)
    label = (f"eps={s.target_epsilon:g} (sigma={s.noise_multiplier:.2f})"
             if math.isfinite(s.target_epsilon) else "non-private")
    ax_loss.plot(curves[0].loss_curve_steps, mean_curve, color=f"C{i}", label=label)
  ax_loss.set(xlabel="step", ylabel="training loss (mean over batch, seeds)", yscale="log",
              title=f"Training loss, q={result.sampling_rate:.3g}, {result.num_steps} steps")
  ax_loss.grid(True, which="both", alpha=0.3)
  ax_loss.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def check_sizes() -> None:
  """Counts in [1, MAX_COUNT]; a microbatch's per-example gradients (at least 4 KB each) within
  the machine's memory. The config checks every other flag."""
  common.check_count("num_repeats", FLAGS.num_repeats)
  common.check_count("batch_size", FLAGS.batch_size)
  common.check_memory("physical_batch_size", FLAGS.physical_batch_size, 4096.0,
                      what="one microbatch's per-example gradients")


# The config's fields behind the renamed flags (its ValueErrors start with the field's name).
FIELD_FLAGS = {"target_epsilons": "epsilons", "repetitions": "num_repeats"}


def config_from_flags():
  check_sizes()
  try:
    return _config()
  except ValueError as e:
    message = str(e)
    for field, flag in FIELD_FLAGS.items():
      if message.startswith(field):
        message = flag + message[len(field):]
    raise ValueError(message) from None


def _config():
  return tradeoff.TradeoffConfig(
      dataset=FLAGS.dataset, model=FLAGS.model,
      target_epsilons=common.parse_floats("epsilons", FLAGS.epsilons),
      delta=FLAGS.delta, epochs=FLAGS.epochs, batch_size=FLAGS.batch_size,
      learning_rate=FLAGS.learning_rate, optimizer=FLAGS.optimizer,
      l2_clip_norm=FLAGS.l2_clip_norm, accountant=FLAGS.accountant,
      test_fraction=FLAGS.test_fraction, validation_fraction=FLAGS.validation_fraction,
      standardize=FLAGS.standardize, seed=FLAGS.seed, repetitions=FLAGS.num_repeats,
      clipping=FLAGS.clipping, physical_batch_size=FLAGS.physical_batch_size,
      data_dir=FLAGS.data_dir, prng_impl=FLAGS.prng_impl)


@common.cli
def main(argv):
  del argv
  common.quiet_logging()  # training stays in float32 (no jax_enable_x64)
  config = config_from_flags()
  common.claim_output_dir(FLAGS.output_dir)
  common.enable_compilation_cache()  # runs differing only in their seed skip compilation
  with common.Timer() as timer:
    result = tradeoff.run(config, runs_dir=os.path.join(FLAGS.output_dir, "runs"),
                          resume=FLAGS.resume)
  result_dict = result.to_dict()
  run_config = result_dict.pop("config")
  path = common.write_results(FLAGS.output_dir, "train_dpsgd", run_config, result_dict,
                              timer.seconds)
  if FLAGS.plot:
    plot(result, os.path.join(FLAGS.output_dir, "accuracy_vs_epsilon.png"))
  print(tradeoff.table(result))
  print(f"wrote {path} in {timer.seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
  common.run(main)
