r"""How tight is each audit? Every audit family at a small default, one table and one plot.

  python -m experiments.tightness --output_dir=out/tightness
  python -m experiments.tightness --families=noisy_argmax,ngram --noisy_argmax_num_trials=10000000

Runs :func:`dpaudit.tightness.run`, every family through its game or the front door
(:mod:`dpaudit.audit`): the noisy-argmax 2-cut and k-cut audits (against the exact Renyi
divergence), the four DP-SGD games (many-run, one-run, UniAud, UniAud++; against the
accountant's epsilon), the n-gram and LM canary reconstructions (against the RDP leakage
bound), PATE on one query (against GNMax's data-independent RDP), PANORAMIA on a tabular
target and DOMIAS against DP-TVAE (against the generator's epsilon). Each row gives the lower
bound at its confidence and how that confidence is guaranteed (or that it is an estimate),
the value it is held against, their ratio (1 = tight), the ceiling the audit could reach with
its observations, the number of observations and the wall time. Below each one-run bound
(one-run, UniAud, UniAud++, DOMIAS; valid for any (eps, delta)-DP algorithm) stand the f-DP
one-run bounds of the same guesses, from the same run: ``f-DP gaussian`` (valid if the
trade-off curve is Gaussian, mu-GDP) and ``f-DP run curve`` (valid if it is the DP-SGD run's
own with some noise multiplier); ``results.json`` gives each row's ``assumes``. Writes
``results.json`` and ``tightness.png`` to ``--output_dir`` and prints the table. Under ``python -m
launch.multihost`` the trials, many-run runs and n-gram models are shared out over the
processes.

The defaults take about three minutes on 2 CPU cores; raise ``--noisy_argmax_num_trials``,
``--dpsgd_num_runs``, ``--dpsgd_num_canaries`` and ``--ngram_num_models`` for tighter audits.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from absl import flags

from dpaudit import plots, tightness
from experiments import common

_D = tightness.TightnessConfig  # the defaults live in the config, not here

FLAGS = flags.FLAGS
flags.DEFINE_list("families", list(_D.families), "Audit families: "
                  + ", ".join(tightness.FAMILIES) + ".")
flags.DEFINE_integer("seed", _D.seed, "Seed of the report (one key per family).")
flags.DEFINE_enum("prng_impl", _D.prng_impl, list(common.PRNG_IMPLS), "PRNG implementation.")
flags.DEFINE_float("significance", _D.significance, "beta: bounds hold with prob. 1 - beta.")
flags.DEFINE_float("noisy_argmax_noise_multiplier", _D.noisy_argmax_noise_multiplier,
                   "Noise of noisy argmax on the Fig. 6 histograms.")
flags.DEFINE_integer("noisy_argmax_num_trials", _D.noisy_argmax_num_trials,
                     "Monte Carlo trials per histogram.")
flags.DEFINE_float("noisy_argmax_order", _D.noisy_argmax_order,
                   "Renyi order alpha of the cut bounds (fixed in advance).")
flags.DEFINE_enum("dataset", _D.dataset, ["digits", "mnist_subset", "breast_cancer", "wine",
                                          "mnist", "fashion_mnist", "cifar10"],
                  "Data of the DP-SGD games.")
flags.DEFINE_string("data_dir", None, "tfds data directory (prepared datasets only).")
flags.DEFINE_list("dpsgd_audits", [f"{g}:{c}" for g, c in _D.dpsgd_audits],
                  "game:canary pairs of the dpsgd family.")
flags.DEFINE_float("dpsgd_epsilon", _D.dpsgd_epsilon, "Target epsilon of the DP-SGD games.")
flags.DEFINE_float("dpsgd_delta", _D.dpsgd_delta, "delta of the DP-SGD accountant and bounds.")
flags.DEFINE_integer("dpsgd_num_runs", _D.dpsgd_num_runs, "T, runs per side (many-run game).")
flags.DEFINE_integer("dpsgd_num_canaries", _D.dpsgd_num_canaries, "m, canaries of O(1) games.")
flags.DEFINE_float("dpsgd_epochs", _D.dpsgd_epochs, "Expected passes over the training set.")
flags.DEFINE_integer("dpsgd_batch_size", _D.dpsgd_batch_size, "Expected Poisson batch size.")
flags.DEFINE_float("dpsgd_learning_rate", _D.dpsgd_learning_rate, "SGD learning rate.")
flags.DEFINE_list("dpsgd_hidden_sizes", [str(w) for w in _D.dpsgd_hidden_sizes],
                  "Hidden widths of the MLP (empty: logistic regression).")
flags.DEFINE_float("ngram_noise_multiplier", _D.ngram_noise_multiplier,
                   "sigma of the n-gram models' DP-SGD.")
flags.DEFINE_integer("ngram_num_models", _D.ngram_num_models, "n-gram models (Monte Carlo).")
flags.DEFINE_integer("ngram_num_steps", _D.ngram_num_steps, "DP-SGD steps per n-gram model.")
flags.DEFINE_integer("dpsgd_chunk_size", _D.dpsgd_chunk_size,
                     "Many-run game: runs per vmapped call (0: all at once).")
flags.DEFINE_integer("ngram_chunk_size", _D.ngram_chunk_size,
                     "n-gram models per vmapped call (0: all at once).")
flags.DEFINE_integer("noisy_argmax_chunk_size", _D.noisy_argmax_chunk_size,
                     "Noisy argmax: Monte Carlo trials per vmapped chunk.")
flags.DEFINE_float("lm_noise_multiplier", _D.lm_noise_multiplier,
                   "sigma of the LM reconstruction's target model.")
flags.DEFINE_integer("lm_num_lines", _D.lm_num_lines, "Training lines of the LM target.")
flags.DEFINE_float("lm_epochs", _D.lm_epochs, "Epochs of the LM target.")
flags.DEFINE_float("pate_noise_multiplier", _D.pate_noise_multiplier, "PATE's GNMax noise.")
flags.DEFINE_integer("pate_num_trials", _D.pate_num_trials, "PATE: Monte Carlo trials per side.")
flags.DEFINE_float("domias_epsilon", _D.domias_epsilon, "DP-TVAE's epsilon (DOMIAS row).")
flags.DEFINE_integer("domias_num_candidates", _D.domias_num_candidates,
                     "DOMIAS: candidate records.")
flags.DEFINE_integer("panoramia_num_members", _D.panoramia_num_members,
                     "PANORAMIA: member examples of the target.")
flags.DEFINE_string("output_dir", "out/tightness", "Where results.json and tightness.png go.")
flags.DEFINE_bool("plot", True, "Write tightness.png.")
for _old, _new in (("noisy_argmax_sigma", "noisy_argmax_noise_multiplier"),
                   ("noisy_argmax_trials", "noisy_argmax_num_trials"),
                   ("dpsgd_runs", "dpsgd_num_runs"), ("dpsgd_canaries", "dpsgd_num_canaries"),
                   ("ngram_models", "ngram_num_models"), ("ngram_steps", "ngram_num_steps")):
  common.deprecated_alias(_old, _new)  # renamed to the shared vocabulary (num_* for counts)


def check_sizes() -> None:
  """Counts in [1, MAX_COUNT] (chunk sizes from 0), the chunks and the n-gram models that are
  held in memory at once within the machine's memory, finite noise: ValueError naming the flag
  (the config checks the rest)."""
  for name in ("noisy_argmax_num_trials", "dpsgd_num_runs", "dpsgd_num_canaries",
               "dpsgd_batch_size", "ngram_num_models", "ngram_num_steps"):
    common.check_count(name, FLAGS[name].value)
  for name in ("dpsgd_chunk_size", "ngram_chunk_size"):
    common.check_count(name, FLAGS[name].value, 0)
  common.check_widths("dpsgd_hidden_sizes",
                      common.parse_ints("dpsgd_hidden_sizes", FLAGS.dpsgd_hidden_sizes),
                      FLAGS.dpsgd_batch_size)
  common.check_memory("noisy_argmax_chunk_size", FLAGS.noisy_argmax_chunk_size, 8.0 * 5,
                      what="one chunk of noisy-argmax trials")
  ngram_bytes = 4.0 * 10 * 10 * 3  # a 10 x 10 lazy n-gram model, its gradient and its update
  if FLAGS.ngram_chunk_size:
    common.check_memory("ngram_chunk_size", FLAGS.ngram_chunk_size, ngram_bytes,
                        what="the n-gram models trained at once")
  else:
    common.check_memory("ngram_num_models", FLAGS.ngram_num_models, ngram_bytes,
                        what="the n-gram models trained at once (--ngram_chunk_size=0)")
  common.check_float("noisy_argmax_noise_multiplier", FLAGS.noisy_argmax_noise_multiplier, 0.0,
                     low_open=True)
  common.check_float("ngram_noise_multiplier", FLAGS.ngram_noise_multiplier, 0.0,
                     low_open=True)
  common.check_float("dpsgd_epsilon", FLAGS.dpsgd_epsilon, 0.0, low_open=True,
                     allow_inf=True)
  common.check_float("dpsgd_epochs", FLAGS.dpsgd_epochs, 0.0, low_open=True)
  common.check_float("dpsgd_learning_rate", FLAGS.dpsgd_learning_rate, 0.0, low_open=True)
  common.check_delta(FLAGS.dpsgd_delta, "dpsgd_delta")


def config_from_flags() -> tightness.TightnessConfig:
  check_sizes()
  hidden = common.parse_ints("dpsgd_hidden_sizes", FLAGS.dpsgd_hidden_sizes)
  pairs = tuple(tuple(pair.split(":")) for pair in FLAGS.dpsgd_audits)
  if any(len(pair) != 2 for pair in pairs):
    raise ValueError(f"--dpsgd_audits={','.join(FLAGS.dpsgd_audits)} must be game:canary pairs")
  fields = {f.name: FLAGS[f.name].value for f in dataclasses.fields(tightness.TightnessConfig)
            if f.name not in ("families", "dpsgd_audits", "dpsgd_hidden_sizes")}
  return tightness.TightnessConfig(families=tuple(FLAGS.families), dpsgd_audits=pairs,
                                   dpsgd_hidden_sizes=hidden, **fields)


@common.cli
def main(argv):
  del argv
  common.quiet_logging()
  common.enable_compilation_cache()
  common.initialize_distributed()  # several processes: Monte Carlo trials, many-run runs and
  # n-gram models spread over all of them
  config = config_from_flags()  # (after joining: validation may start the XLA backend)
  common.claim_output_dir(FLAGS.output_dir)
  progress = lambda line: print(line, file=sys.stderr, flush=True)
  with common.Timer() as timer:
    result = tightness.run(config, progress=progress)
  if not common.is_main_process():
    return  # every process has the same rows; process 0 writes them
  result_dict = result.to_dict()
  run_config = result_dict.pop("config")
  path = common.write_results(FLAGS.output_dir, "tightness", run_config, result_dict,
                              timer.seconds)
  if FLAGS.plot:
    plots.tightness(result, os.path.join(FLAGS.output_dir, "tightness.png"))
  print(tightness.table(result))
  print(f"wrote {path} in {timer.seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
  common.run(main)
