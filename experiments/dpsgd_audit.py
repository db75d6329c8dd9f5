r"""Auditing DP-SGD: many-run, one-run, UniAud and UniAud++ games on offline real data.

  python -m experiments.dpsgd_audit --output_dir=out/dpsgd_audit
  python -m experiments.dpsgd_audit --game=uniaud --canary=gaussian --epsilons=1,4,inf
  python -m experiments.dpsgd_audit --game=many_run --canary=dirac --num_runs=500

Runs the games of :mod:`dpaudit.audits.dpsgd` over a grid (:func:`dpaudit.audits.dpsgd_grid.run`,
which a library user calls with a key and a ``DPSGDGridConfig``; here the key of ``--seed``): every
audit of ``--audits`` (pairs ``game:canary``; default the single ``--game``/``--canary``) x every
target epsilon of ``--epsilons`` x every ``--num_canaries`` (O(1) games) x every ``--tag_weights``
(UniAud++). Each cell reports the epsilon lower bound (1 - ``--significance`` confidence; any (eps,
delta)-DP algorithm), for the O(1) games beside it the f-DP one-run bounds of the same guesses
(fdp_gauss: if the trade-off curve is Gaussian; fdp_run: if it is this run's with some noise
multiplier), the ceiling :math:`\epsilon_O` for its number of observations, the accountant's epsilon
and the test accuracy, and is saved in ``--output_dir/cells`` as soon as it finishes; a rerun reuses
finished cells (``--noresume`` recomputes them). ``--num_repeats=N`` plays the whole grid N times,
repetition i exactly as the run at ``--seed`` + i (its data split and every game's key, so its cells
are shared with that run's and reused from ``--output_dir/cells``); the table then shows eps_L and
the test accuracy as median [min, max] over the repetitions. ``results.json`` collects the cells of
every repetition and, per grid point, their spread (:func:`dpaudit.results.spread`), and
``audit.png`` plots the lower bounds (medians, with min-max bars) against the target epsilon and
against test accuracy (the utility/auditing trade-off of UniAud's Fig. 9).

Data: ``--dataset`` is split (stratified, ``--seed``) into a test set (``--test_fraction``)
and the rest, which is split in half into the training set D and a pool of held-out real
examples for in-distribution, mislabelled and poisoned canaries (``--pool_fraction``; poisoned
ones warm the initialisation up on the pool's other rows, UniAud Sec. VIII-A); features are
standardised with D's statistics. UniAud trains on its synthetic canaries alone unless
``--include_data``; UniAud++ stamps its triggers on m examples of D.

The UniAud table of the README (the shape of Fig. 3 / Table IV of Liu & Xiong):

  python -m experiments.dpsgd_audit --dataset=mnist_subset --epsilons=1,2,4,8,inf \
    --num_canaries=2000,10000 --epochs=100 --learning_rate=0.5 \
    --audits=one_run:in_distribution,one_run:mislabelled,uniaud:gaussian,uniaud:orthogonal \
    --output_dir=out/dpsgd_audit_table

and with ``--num_repeats=3`` the same table as median [min, max] over seeds 0, 1, 2 (the cells
of seed 0 from the command above are reused).
"""

from __future__ import annotations

import dataclasses
import os
import sys

from absl import flags

from dpaudit import models, plots, results
from dpaudit.audits import dpsgd_grid as grid
from experiments import common

# The summary table lives in the library; these names are kept for callers of this module.
table, _eps_l = grid.table, grid.reported_epsilon

FLAGS = flags.FLAGS
flags.DEFINE_enum("game", "one_run", ["many_run", "one_run", "uniaud", "uniaud_plus"],
                  "Audit game (used when --audits is empty).")
flags.DEFINE_enum("canary", "mislabelled", ["in_distribution", "mislabelled", "gaussian",
                                            "orthogonal", "dirac", "trigger", "poisoned"],
                  "Canary type (used when --audits is empty); uniaud: gaussian|orthogonal, "
                  "uniaud_plus: trigger, dirac: white-box gradient canary, poisoned: real "
                  "canaries from a warmed-up initialisation (UniAud's Poisoned baseline).")
flags.DEFINE_list("audits", [], "game:canary pairs to run, e.g. "
                  "one_run:mislabelled,uniaud:gaussian (overrides --game/--canary).")
flags.DEFINE_enum("dataset", "digits", ["digits", "mnist_subset", "breast_cancer", "wine",
                                        "mnist", "fashion_mnist", "cifar10"],
                  "Dataset (mnist, fashion_mnist, cifar10 must be prepared in --data_dir).")
flags.DEFINE_enum("model", "mlp", list(models.MODEL_NAMES), "Classifier trained (mlp: the MLP "
                  "of --hidden_sizes; uniaud_plus: mlp only, its two-head MLP).")
flags.DEFINE_list("hidden_sizes", ["256"], "Hidden widths of the MLP (empty: logistic "
                  "regression).")
flags.DEFINE_list("epsilons", ["8"], "Target epsilons (> 0; inf: no noise, clipping kept).")
flags.DEFINE_list("num_canaries", ["500"], "m, canaries of the O(1) games.")
flags.DEFINE_integer("num_runs", 200, "T, runs per side of many_run (2T runs in all).")
flags.DEFINE_float("delta", 1e-5, "delta of the accountant and of the lower bounds.")
flags.DEFINE_float("significance", 0.05, "beta: the bounds hold with probability 1 - beta.")
flags.DEFINE_float("epochs", 30.0, "Expected passes over the training set.")
flags.DEFINE_integer("batch_size", 128, "Expected Poisson batch size.")
flags.DEFINE_float("learning_rate", 0.5, "SGD learning rate.")
flags.DEFINE_enum("optimizer", "sgd", ["sgd", "momentum", "adam"], "Optimizer.")
flags.DEFINE_float("l2_clip_norm", 1.0, "Per-example clipping norm C.")
flags.DEFINE_integer("physical_batch_size", 256, "Examples per microbatch (memory, speed).")
flags.DEFINE_bool("include_data", False, "uniaud: also train on the real training set.")
flags.DEFINE_float("sigma0", 0.1, "Feature scale of Gaussian synthetic canaries (Alg. 1).")
flags.DEFINE_integer("canary_dim", 0, "d of the gaussian/orthogonal canaries of one_run and "
                     "uniaud (0: the data's shape; UniAud Table IV: 1000). Needs canaries only.")
flags.DEFINE_integer("num_canary_classes", 0, "C, classes of those canaries' labels (0: the "
                     "data's; UniAud Table IV: 1000). Needs canaries only.")
flags.DEFINE_bool("canaries_only", False, "Case I of UniAud (m = n): one_run/uniaud train on "
                  "the canaries alone (uniaud does unless --include_data).")
flags.DEFINE_integer("num_warmup_examples", 0, "poisoned: pool rows (not canaries) the "
                     "initialisation is warmed up on (0: all; UniAud Fig. 1: 5000).")
flags.DEFINE_float("warmup_epochs", 50.0, "poisoned: non-private warm-up epochs (UniAud: 50).")
flags.DEFINE_integer("num_tags", 100, "UniAud++ tag space size C_e.")
flags.DEFINE_integer("num_tag_bits", 1, "UniAud++ tags per canary H (multi-bit, Sec. VI-B).")
flags.DEFINE_list("tag_weights", ["1"], "UniAud++ lambda of Eq. (12).")
flags.DEFINE_integer("patch_size", 3, "UniAud++ trigger patch side (pixels).")
flags.DEFINE_enum("correction", "bonferroni", ["bonferroni", "none"],
                  "O(1) games: bonferroni over the guess grid (valid) or none (the papers' "
                  "best-r reporting, optimistic).")
flags.DEFINE_enum("method", "split", ["split", "bonferroni"],
                  "many_run threshold selection: split halves or bonferroni over thresholds.")
flags.DEFINE_integer("chunk_size", 0, "many_run: runs per vmapped call (0: all at once).")
flags.DEFINE_float("test_fraction", 0.2, "Test share of the dataset.")
flags.DEFINE_float("pool_fraction", 0.5, "Share of the non-test data held out as canary pool.")
flags.DEFINE_integer("seed", 0, "Seed of the split and of every game's key (of the first "
                     "repetition).")
common.define_num_repeats_flag(
    "the grid; repetition i is the run at --seed + i (its data split and every game's key; "
    "its cells are reused from and by that run)")
flags.DEFINE_enum("prng_impl", "threefry2x32", list(common.PRNG_IMPLS), "PRNG of the games.")
flags.DEFINE_string("data_dir", None, "tfds data directory (default: $DPAUDIT_DATA_DIR or "
                    "~/.cache/dpaudit/tensorflow_datasets).")
flags.DEFINE_string("output_dir", "out/dpsgd_audit", "Where results.json, audit.png, cells go.")
flags.DEFINE_bool("resume", True, "Reuse finished cells in output_dir/cells.")
flags.DEFINE_bool("plot", True, "Write audit.png.")


def parse_audits(audits, game: str, canary: str) -> tuple[tuple[str, str], ...]:
  """``game:canary`` strings to pairs (validated by the config later)."""
  if not audits:
    return ((game, canary),)
  pairs = []
  for item in audits:
    parts = item.split(":")
    if len(parts) != 2:
      raise ValueError(f"--audits entry {item!r} must be game:canary, e.g. uniaud:gaussian")
    pairs.append((parts[0], parts[1]))
  return tuple(pairs)


def check_flags() -> None:
  """What the grid's config does not bound: sizes against MAX_COUNT and the machine's memory,
  finite training settings (the config checks the rest, naming the field = the flag)."""
  for name in ("num_runs", "batch_size", "num_tags", "num_tag_bits", "patch_size"):
    common.check_count(name, FLAGS[name].value)
  for name in ("canary_dim", "num_canary_classes", "num_warmup_examples"):
    common.check_count(name, FLAGS[name].value, 0)
  common.check_counts("num_canaries", common.parse_ints("num_canaries", FLAGS.num_canaries))
  common.check_count("chunk_size", FLAGS.chunk_size, 0)
  common.check_memory("physical_batch_size", FLAGS.physical_batch_size, 4096.0,
                      what="one microbatch's per-example gradients")
  common.check_widths("hidden_sizes", common.parse_ints("hidden_sizes", FLAGS.hidden_sizes),
                      min(FLAGS.physical_batch_size, FLAGS.batch_size))
  common.check_floats("epsilons", common.parse_floats("epsilons", FLAGS.epsilons), 0.0,
                      low_open=True, allow_inf=True)
  for name in ("epochs", "learning_rate", "l2_clip_norm", "sigma0", "warmup_epochs"):
    common.check_float(name, FLAGS[name].value, 0.0, low_open=True)
  common.check_delta(FLAGS.delta)
  common.check_significance(FLAGS.significance)


def config_from_flags() -> grid.DPSGDGridConfig:
  """The grid of the flags (the config's field names are the flag names, but --num_repeats
  sets ``repetitions``)."""
  check_flags()
  parsed = dict(audits=parse_audits(FLAGS.audits, FLAGS.game, FLAGS.canary),
                epsilons=common.parse_floats("epsilons", FLAGS.epsilons),
                num_canaries=common.parse_ints("num_canaries", FLAGS.num_canaries),
                tag_weights=common.parse_floats("tag_weights", FLAGS.tag_weights),
                hidden_sizes=common.parse_ints("hidden_sizes", FLAGS.hidden_sizes),
                repetitions=FLAGS.num_repeats)
  if not 0 <= FLAGS.seed < 2**63:
    raise ValueError(f"--seed={FLAGS.seed} is outside the valid range [0, 2^63)")
  common.repetition_seeds(FLAGS.seed, FLAGS.num_repeats, flag="num_repeats")  # one-line errors
  names = [f.name for f in dataclasses.fields(grid.DPSGDGridConfig) if f.name not in parsed]
  return grid.DPSGDGridConfig(**parsed, **{name: FLAGS[name].value for name in names})


@common.cli
def main(argv):
  del argv
  common.enable_compilation_cache()
  common.quiet_logging()
  common.initialize_distributed()  # several processes: many_run's runs spread over them all
  config = config_from_flags()  # (after joining: validation may start the XLA backend)
  common.claim_output_dir(FLAGS.output_dir)
  store = results.CellStore(os.path.join(FLAGS.output_dir, "cells"), FLAGS.resume)
  with common.Timer() as timer:  # the seed's key: the cells keep their names (old dirs resume)
    result = grid.run(common.make_key(config.seed, config.prng_impl), config,
                      progress=results.print_progress, store=store)
  if not common.is_main_process():
    return  # every process has the same result; process 0 writes it
  path = common.write_results(FLAGS.output_dir, "dpsgd_audit", config.to_dict(),
                              result.to_dict(), timer.seconds)
  if FLAGS.plot:
    plots.dpsgd_grid(result, os.path.join(FLAGS.output_dir, "audit.png"))
  print(result.table())
  if config.correction == "none":
    print("correction=none: the O(1) games' eps_L, fdp_gauss and fdp_run are optimistic (best "
          "of the guess grid, each at the full significance), not valid lower bounds",
          file=sys.stderr)
  print(f"wrote {path} in {timer.seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
  common.run(main)
