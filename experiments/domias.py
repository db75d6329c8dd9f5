r"""DOMIAS (van Breugel et al., AISTATS 2023): Figs. 3-6, 12, 15 and the epsilon lower bounds.

  python -m experiments.domias --study=members,epochs      # Fig. 3
  python -m experiments.domias --study=reference,synthetic # Fig. 4 (DOMIAS vs Eq. 1, BNAF vs KDE)
  python -m experiments.domias --study=minority            # Fig. 5 (heart failure)
  python -m experiments.domias --study=generators          # Fig. 6 (quality vs DOMIAS AUC)
  python -m experiments.domias --study=epsilon             # audited eps vs claimed eps
  python -m experiments.domias --study=prior,shift         # App. C (Fig. 12), App. E (Fig. 15)

Each study is a grid of settings x ``--num_repeats`` games of :func:`dpaudit.audits.domias.run`
(game i of a setting uses ``fold_in(key(--seed), i)``: one generator fit, its synthetic data,
every attack of ``--attacks``, the metrics and the epsilon lower bounds), run by
:func:`dpaudit.audits.domias_studies.run`, which documents each study. Every finished game is a
cell of ``--output_dir``/cells, so an interrupted run resumes where it stopped and games shared
between studies are computed once. ``--baselines`` picks the form of GAN-leaks CAL and LOGAN:
``paper`` (default) or ``authors_code`` (as the DOMIAS authors' code; docs/domias.md).

Writes ``results.json``, ``fig3.png`` .. ``fig6.png`` for the studies run, and a table per study.
"""

from __future__ import annotations

import os
import sys

from absl import flags

from dpaudit.audits.domias_studies import STUDIES
from experiments import common

FLAGS = flags.FLAGS
flags.DEFINE_list("study", ["members"], f"Studies to run: {', '.join(STUDIES)}.")
flags.DEFINE_string("dataset", "california_housing",
                    "Data of every study but minority: california_housing or adult.")
flags.DEFINE_string("data_csv", None,
                    "Audit your own data instead of --dataset: a CSV file with a header row and "
                    "numeric columns (every study but minority).")
flags.DEFINE_integer("num_repeats", 8, "Independent games per setting (the paper's 8 runs); "
                     "game i uses the key fold_in(key(--seed), i). Tables summarise them "
                     "(mean ± std; the epsilon table max / mean).")
common.deprecated_alias("repetitions", "num_repeats")
flags.DEFINE_integer("seed", 0, "Base seed; game i uses fold_in(key(seed), i).")
flags.DEFINE_list("attacks", ["domias", "eq1", "logan_0", "logan_d1", "mc", "gan_leaks",
                              "gan_leaks_cal"], "Attacks of Figs. 3, 5 (Fig. 4: domias, eq1).")
flags.DEFINE_string("density", "kde", "Density estimator of DOMIAS / Eq. 1 outside Fig. 4: kde "
                    "or bnaf.")
flags.DEFINE_integer("num_members", 500, "|D_mem| (Fig. 3b, 4, 6, epsilon).")
flags.DEFINE_integer("num_reference", 10_000, "|D_ref|.")
flags.DEFINE_integer("num_synthetic", 10_000, "|D_syn|.")
flags.DEFINE_integer("num_holdout", 2_000, "Hold-out records for the quality metric (Fig. 6).")
flags.DEFINE_integer("tvae_epochs", 2000, "TVAE epochs (Fig. 3a, 4, 5, 6).")
flags.DEFINE_integer("reference_tvae_epochs", 0,
                     "Epochs of GAN-leaks CAL's reference TVAE on D_ref (0: as the target's); "
                     "fitted to 10,000 rows it dominates a game's time.")
flags.DEFINE_list("members", ["50", "100", "200", "500", "1000", "2000"], "Fig. 3a grid.")
flags.DEFINE_list("epochs", ["50", "200", "500", "1000", "2000", "3000"], "Fig. 3b grid.")
flags.DEFINE_list("reference_sizes", ["100", "500", "1000", "2000", "5000", "10000"],
                  "Fig. 4a grid.")
flags.DEFINE_list("synthetic_sizes", ["100", "500", "1000", "2000", "5000", "10000"],
                  "Fig. 4b grid.")
flags.DEFINE_string("minority_column", "high_blood_pressure",
                    "Fig. 5: binary heart-failure column whose value 1 defines the minority.")
flags.DEFINE_list("generators", ["tvae", "dp_tvae", "wgan_gp", "nflow"],
                  "Fig. 6 / epsilon: generators beside the ADS-GAN and additive-noise grids "
                  "(any registered name; DP ones once per --epsilons).")
flags.DEFINE_enum("baselines", "paper", ["paper", "authors_code"],
                  "GAN-leaks CAL and LOGAN as their papers describe them, or as the DOMIAS "
                  "authors' code runs them.")
flags.DEFINE_list("knowledge", ["reference", "prior_first_column", "prior_all_columns"],
                  "App. C: the attacker's knowledge of p_R.")
flags.DEFINE_string("shift_column", "diabetes", "App. E: the 0/1 heart-failure column A.")
flags.DEFINE_list("shift_shares", ["0", "0.2", "0.4", "0.6", "0.8"],
                  "App. E: shares p~(A = 0) of D_ref, in [0, 1].")
flags.DEFINE_enum("shift_non_members", "reference", ["reference", "population"],
                  "App. E: non-members drawn as D_ref (the paper) or from all records (the "
                  "authors' code).")
flags.DEFINE_integer("generator_epochs", 0, "Fig. 6: epochs of the other generators with an "
                     "epochs setting (CTGAN, ...); 0: their defaults.")
flags.DEFINE_integer("mst_bins", 16, "Fig. 6: MST's bins per column (quantiles of the data; "
                     "at most 1000).")
flags.DEFINE_list("ads_gan_lambdas", ["0.2", "0.5", "0.7", "1.0", "1.1", "1.3", "1.5"],
                  "Fig. 6: ADS-GAN's lambda grid (App. A.3).")
flags.DEFINE_list("noise_scales", ["0.7", "0.9", "1.1", "1.3", "1.5", "1.7", "1.9", "2.3",
                                   "2.5", "2.9", "3.5", "3.9"],
                  "Fig. 6: the additive-noise baseline's grid (App. A.3): the standard deviation "
                  "of the Gaussian noise in units of each column's std (>= 0; not a DP noise "
                  "multiplier: no clipping, no privacy guarantee).")
common.deprecated_alias("noise_levels", "noise_scales")
flags.DEFINE_integer("gan_iterations", 1000,
                     "Generator updates of WGAN-GP / ADS-GAN / LOGAN 0's GAN (5 critic steps "
                     "each, batch 256).")
flags.DEFINE_integer("flow_epochs", 50, "Maximum epochs of the BNAF and NFlow fits.")
flags.DEFINE_list("epsilons", ["1", "4", "10"], "Target epsilons (> 0) of the DP-TVAE "
                  "generators.")
common.deprecated_alias("dp_epsilons", "epsilons")
flags.DEFINE_float("dp_delta", 1e-5, "delta of DP-TVAE's accountant and of the bounds.")
flags.DEFINE_float("dp_epochs", 300.0, "Expected epochs of DP-TVAE's DP-SGD.")
flags.DEFINE_float("significance", 0.05, "beta: epsilon lower bounds hold at 1 - beta.")
flags.DEFINE_string("output_dir", "out/domias", "Where results and figures go.")
flags.DEFINE_bool("resume", True, "Reuse finished games under output_dir/cells.")
flags.DEFINE_bool("plot", True, "Write the figures.")


RUN_CONFIG = ("study", "dataset", "data_csv", "repetitions", "seed", "attacks", "density",
              "num_members", "num_reference", "num_synthetic", "num_holdout", "tvae_epochs",
              "reference_tvae_epochs", "members", "epochs", "reference_sizes", "synthetic_sizes",
              "minority_column", "generators", "ads_gan_lambdas", "noise_levels",
              "gan_iterations", "flow_epochs", "dp_epsilons", "dp_delta", "dp_epochs",
              "significance", "baselines", "knowledge", "shift_column", "shift_shares",
              "shift_non_members", "generator_epochs", "mst_bins")
# results.json's config keys (and the StudyConfig fields) that name a renamed flag.
RENAMED = {"repetitions": "num_repeats", "noise_levels": "noise_scales", "dp_epsilons": "epsilons"}


def _ints(name: str) -> tuple[int, ...]:
  values = getattr(FLAGS, name)
  out = common.parse_ints(name, values)
  if not out or min(out) < 1:
    raise ValueError(f"--{name}={','.join(values)} must hold positive integers")
  return out


def config_from_flags():
  """The flags, checked before anything is written (choices, counts in their ranges, finite
  rates; the config then checks every game's settings), as a StudyConfig. Whether the data
  hold enough records is checked by the run, before a study's first game."""
  from dpaudit import _validate
  from dpaudit.attacks import domias as attacks
  from dpaudit.audits import domias, domias_studies
  if not FLAGS.study:
    raise ValueError("--study must name at least one study")
  for name, values, valid in (("--study", FLAGS.study, STUDIES),
                              ("--attacks", FLAGS.attacks, attacks.ATTACKS),
                              ("--density", [FLAGS.density], domias.DENSITIES),
                              ("--dataset", [FLAGS.dataset], domias_studies.DATASETS),
                              ("--generators", FLAGS.generators, domias.generator_names()),
                              ("--knowledge", FLAGS.knowledge, domias_studies.KNOWLEDGE)):
    for value in values:
      _validate.check_choice(name, value, valid)
  for name, low in (("num_members", 1), ("num_reference", 1), ("num_synthetic", 1),
                    ("num_holdout", 0), ("tvae_epochs", 1), ("reference_tvae_epochs", 0),
                    ("gan_iterations", 1), ("flow_epochs", 1), ("num_repeats", 1),
                    ("generator_epochs", 0)):
    common.check_count(name, FLAGS[name].value, low)
  common.check_count("mst_bins", FLAGS.mst_bins, 1, domias_studies.MAX_MST_BINS)
  common.check_seed(FLAGS.seed)
  common.check_float("dp_delta", FLAGS.dp_delta, 0.0, 1.0, low_open=True, high_open=True)
  common.check_float("dp_epochs", FLAGS.dp_epochs, 0.0, low_open=True)
  common.check_significance(FLAGS.significance)
  flag = lambda field: RENAMED.get(field, field)  # noqa: E731
  floats = {name: common.parse_floats(flag(name), FLAGS[flag(name)].value)
            for name in ("ads_gan_lambdas", "noise_levels", "dp_epsilons", "shift_shares")}
  common.check_floats("shift_shares", floats["shift_shares"], 0.0, 1.0)
  for value in floats["noise_levels"]:
    common.check_float("noise_scales", value, 0.0)
  for value in floats["dp_epsilons"]:
    common.check_float("epsilons", value, 0.0, low_open=True)
  ints = {name: _ints(name) for name in ("members", "epochs", "reference_sizes",
                                          "synthetic_sizes")}
  same = ("dataset", "data_csv", "seed", "density", "num_members",
          "num_reference", "num_synthetic", "num_holdout", "tvae_epochs",
          "reference_tvae_epochs", "minority_column", "gan_iterations", "flow_epochs",
          "dp_delta", "dp_epochs", "significance", "baselines", "shift_column",
          "shift_non_members", "generator_epochs", "mst_bins")
  return domias_studies.StudyConfig(
      studies=tuple(FLAGS.study), attacks=tuple(FLAGS.attacks), knowledge=tuple(FLAGS.knowledge),
      generators=tuple(FLAGS.generators), repetitions=FLAGS.num_repeats,
      **{n: getattr(FLAGS, n) for n in same}, **floats, **ints)


@common.cli
def main(argv):
  del argv
  from dpaudit import plots, results
  from dpaudit.audits import domias_studies
  common.start_float64_experiment()
  config = config_from_flags()
  common.claim_output_dir(FLAGS.output_dir)
  store = results.CellStore(os.path.join(FLAGS.output_dir, "cells"), FLAGS.resume)
  with common.Timer() as timer, common.quiet_accountant():
    studies = domias_studies.run(common.make_key(FLAGS.seed), config,
                                 progress=results.print_progress, store=store).studies
  path = common.write_results(FLAGS.output_dir, "domias",
                              {name: FLAGS[RENAMED.get(name, name)].value
                               for name in RUN_CONFIG},
                              {"studies": studies}, timer.seconds)
  if FLAGS.plot:
    plots.domias_figures(studies, FLAGS.output_dir, FLAGS.minority_column)
  print(domias_studies.tables(studies))
  print(f"wrote {path} in {timer.seconds:.0f} s", file=sys.stderr)


if __name__ == "__main__":
  common.run(main)
