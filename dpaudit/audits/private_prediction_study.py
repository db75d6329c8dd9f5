r"""The private-prediction study of Chadha et al., "Auditing Private Prediction" (Secs. 4-6,
Figs. 3-5): every algorithm x adversary cell of a run, and its report.

A :class:`StudyConfig` holds the cells' configurations (per adversary an
:class:`~dpaudit.audits.private_prediction.EnsembleAuditConfig` and a
:class:`~dpaudit.audits.private_prediction.KnnAuditConfig`, per algorithm its audit config) and
the data; :func:`run` plays every cell through the one grid helper
(:func:`dpaudit.results.run_cells`): PATE and CaPC by
:func:`~dpaudit.audits.private_prediction.ensemble_audit`, Private-kNN by
:func:`~dpaudit.audits.private_prediction.knn_audit` (or ``text_knn_audit`` on a text set
embedded by a language model), PromptPATE by
:func:`~dpaudit.audits.private_prediction.promptpate_audit`. Cell ``alg/adv`` uses the key
``fold_in(key, ADVERSARIES.index(adv))``; a stored cell of a :class:`dpaudit.results.CellStore`
is reused, and a cell's teachers' votes and audited queries are checkpointed in its scratch
directory while it runs.

:func:`quantities` and :func:`spreads` give the numbers the report shows (one value, or the
spread over repetitions), :func:`table` the printed report, :func:`leakage_vs_queries` the
epsilon against the number of queries (the analogue of Figs. 3-5; figures in
:mod:`dpaudit.plots`).

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
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from dpaudit import _validate, results
from dpaudit.audits import noisy_argmax
from dpaudit.audits import private_prediction as pp

ALGORITHMS = ("pate", "capc", "private_knn", "private_knn_text", "promptpate")
TEXT_ALGORITHMS = ("private_knn_text", "promptpate")
CURVE_LABELS = {"two_cut": "2-cut", "k_cut": "k-cut", "model_divergence": "model div.",
                "data_dependent": "data-dep.", "data_independent": "data-ind."}
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

RUN_MEANING = {
    "cells": "each algorithm/adversary cell of the run at --seed (the first repetition); every "
             "cell has its own meaning and caveats",
    "repetitions": "with --repetitions > 1: each repetition's seed and cells (repetition i is "
                   "the run at --seed + i)",
    "spread": "per cell, dpaudit.results.spread over the repetitions of every number the table "
              "shows: worst_query.<curve>@<order> (one query), composed.<curve>@<order> "
              "(composed RDP), epsilon.<curve> (Thm. 1 of the composed curve at delta), "
              "teacher_accuracy, model_fit",
    "report_orders": "the orders the table shows, fixed before the run",
    "declared": "choices that differ from or are not fixed by the paper"}
"""What results.json's run-level keys mean (beside ``private_prediction.MEANING``)."""


@dataclasses.dataclass(frozen=True)
class StudyConfig:
  """The cells of one run.

  Attributes:
    ensembles: adversary -> :class:`~dpaudit.audits.private_prediction.EnsembleAuditConfig`
      (its keys are the run's adversaries).
    knns: adversary -> :class:`~dpaudit.audits.private_prediction.KnnAuditConfig`.
    audits: algorithm (of :data:`ALGORITHMS`) -> its audit config (PromptPATE's a
      :class:`~dpaudit.audits.noisy_argmax.NoisyArgmaxAuditConfig`).
    dataset, public_fraction, test_fraction: the image/tabular set and its splits.
    text_dataset, llm_gguf: the text set and language model of the text algorithms (None: the
      packaged SmolLM2-135M-Instruct).
    feature_model, feature_epochs: Private-kNN's feature network on the public share.
    minq_prompts: PromptPATE's Pois-MINQ adversaries.
    seed: the data splits' seed; :func:`run`'s key must be its key (stored cells name it).
  """
  ensembles: Mapping[str, pp.EnsembleAuditConfig]
  knns: Mapping[str, pp.KnnAuditConfig]
  audits: Mapping[str, Any]
  dataset: str = "digits"
  public_fraction: float = 0.3
  test_fraction: float = 0.3
  text_dataset: str = "vader"
  llm_gguf: str | None = None
  feature_model: str = "lenet5"
  feature_epochs: int = 30
  minq_prompts: tuple[str, ...] = pp.MINQ_PROMPTS
  seed: int = 0

  def __post_init__(self):
    for name, kind in (("ensembles", pp.EnsembleAuditConfig), ("knns", pp.KnnAuditConfig)):
      value = getattr(self, name)
      if not isinstance(value, Mapping) or not value or not all(
          a in pp.ADVERSARIES and isinstance(c, kind) for a, c in value.items()):
        raise ValueError(f"{name} must map adversaries of {pp.ADVERSARIES} to "
                         f"{kind.__name__}s, got {value!r}")
    if set(self.knns) != set(self.ensembles):
      raise ValueError(f"knns={sorted(self.knns)} must name the adversaries of ensembles "
                       f"{sorted(self.ensembles)}")
    if not isinstance(self.audits, Mapping) or not self.audits:
      raise ValueError(f"audits={self.audits!r} must map algorithms to audit configs")
    for algorithm, audit in self.audits.items():
      _validate.check_choice("audits", algorithm, ALGORITHMS)
      kind = (noisy_argmax.NoisyArgmaxAuditConfig if algorithm == "promptpate"
              else pp.PredictionAuditConfig)
      if not isinstance(audit, kind):
        raise ValueError(f"audits[{algorithm!r}] must be a {kind.__name__}")
    for name in ("public_fraction", "test_fraction"):
      _validate.check_range(name, getattr(self, name), 0.0, 1.0, low_open=True, high_open=True)
    for prompt in self.minq_prompts:
      _validate.check_choice("minq_prompts", prompt, pp.MINQ_PROMPTS)
    _validate.check_integer("feature_epochs", self.feature_epochs, 1)
    from dpaudit.data import text_classification  # pylint: disable=g-import-not-at-top
    _validate.check_choice("text_dataset", self.text_dataset, text_classification.NAMES)
    _validate.check_integer("seed", self.seed, 0)
    if self.llm_gguf is not None and not isinstance(self.llm_gguf, str):
      raise ValueError(f"llm_gguf={self.llm_gguf!r} must be a path or None")


@dataclasses.dataclass(frozen=True)
class StudyResult:
  """``cells``: ``"alg/adv"`` -> the cell (its audit's result dict, ``teacher_accuracy`` and
  ``seconds``)."""
  cells: Mapping[str, dict[str, Any]]

  def to_dict(self) -> dict[str, Any]:
    return {"cells": results.to_plain(self.cells)}

  @classmethod
  def from_dict(cls, value: Mapping[str, Any]) -> StudyResult:
    return cls(cells=dict(value["cells"]))


def load_splits(config: StudyConfig, seed: int):
  """(public, train, test) at ``seed``: the public share first, then train/test of the rest
  (for catalog sets, the public share comes out of their train split)."""
  from dpaudit import data
  if not isinstance(config, StudyConfig):
    raise ValueError(f"config must be a StudyConfig, got {type(config).__name__}")
  if config.dataset in data.LOCAL_DATASETS:
    rest, public = data.train_test_split(data.load(config.dataset), config.public_fraction,
                                         seed)
    return (public,) + data.train_test_split(rest, config.test_fraction, seed + 1)
  train, public = data.train_test_split(data.load(config.dataset, "train"),
                                        config.public_fraction, seed)
  return public, train, data.load(config.dataset, "test")


@functools.lru_cache(maxsize=1)
def _llm(path: str | None):
  from dpaudit.models import llama
  if path is not None and not os.path.isfile(path):
    raise ValueError(f"llm_gguf={path} is not a file")
  config, params, tokenizer = llama.load_gguf(path)
  return params, config, tokenizer


def _llm_name(path: str | None) -> str:
  """The language model as a cell signature records it (its file name; SmolLM2 by default)."""
  return os.path.basename(path) if path else "smollm2-135m-instruct"


@functools.lru_cache(maxsize=1)
def text_splits(text_dataset: str, seed: int):
  """(train, test) of ``text_dataset``: VADER's words split in halves (one split, shuffled by
  ``seed``); the catalog sets' own train and test splits."""
  from dpaudit.data import text_classification as tc
  _validate.check_choice("text_dataset", text_dataset, tc.NAMES)
  if text_dataset == "vader":
    words = tc.load_text_classification("vader", seed=seed)
    half = len(words) // 2
    return (words.take(range(half), "train[:50%]"),
            words.take(range(half, len(words)), "train[50%:]"))
  return (tc.load_text_classification(text_dataset, "train"),
          tc.load_text_classification(text_dataset, "test"))


def check_stored_cell(cell) -> None:
  """A cell of this study is whole (the validator of its stored cells): the audit's layout
  (:func:`dpaudit.audits.private_prediction.check_cell`), an accuracy in [0, 1] and its run
  time."""
  pp.check_cell(cell)
  accuracy = cell.get("teacher_accuracy")
  if not isinstance(accuracy, (int, float)) or not 0 <= accuracy <= 1:
    raise ValueError(f"cell teacher_accuracy={accuracy!r} must be a number in [0, 1]")
  if not isinstance(cell.get("seconds"), (int, float)):
    raise ValueError("cell has no run time ('seconds')")


def run_record(runs: list[Mapping[str, Any]], seeds, orders_shown, learning_rate: float,
               poison_label: str) -> dict[str, Any]:
  """What a run's ``results.json`` holds beside its configuration: the cells of the first
  repetition, the orders shown, the spread of every shown number over the repetitions
  (:func:`spreads`), what the keys mean, the caveats and the declared choices; with several
  repetitions each one's seed and cells."""
  if len(runs) != len(seeds) or not runs:
    raise ValueError(f"runs ({len(runs)}) and seeds ({len(seeds)}) must pair up, at least one")
  cells = runs[0]
  summary = {name: spreads([r[name] for r in runs], orders_shown) for name in cells}
  out = {"cells": cells, "report_orders": list(orders_shown), "spread": summary,
         "meaning": {**pp.MEANING, **RUN_MEANING}, "caveats": [pp.COMPOSITION_CAVEAT],
         "declared": {**DECLARED, "learning_rate": learning_rate, "paper_learning_rate": 0.03,
                      "poison_label_rule": poison_label}}
  if len(seeds) > 1:
    out["repetitions"] = [{"seed": seed, "cells": r} for seed, r in zip(seeds, runs)]
  return out


def run_config(config: StudyConfig, repetitions: int, seeds, orders_shown) -> dict[str, Any]:
  """The run's configuration as ``results.json`` records it (the seed is the first
  repetition's; every cell's settings are in the ensemble, kNN and audit configs)."""
  if not isinstance(config, StudyConfig):
    raise ValueError(f"config must be a StudyConfig, got {type(config).__name__}")
  asdict = lambda configs: {k: dataclasses.asdict(v) for k, v in configs.items()}  # noqa: E731
  return {"dataset": config.dataset, "public_fraction": config.public_fraction,
          "test_fraction": config.test_fraction, "seed": config.seed,
          "repetitions": repetitions, "seeds": list(seeds), "report_orders": list(orders_shown),
          "poison_label": next(iter(config.ensembles.values())).poison_label,
          "ensembles": asdict(config.ensembles), "knn": asdict(config.knns),
          "feature_model": config.feature_model, "feature_epochs": config.feature_epochs,
          "audits": asdict(config.audits)}


def _signature(config: StudyConfig, alg: str, adv: str, seed: int) -> dict[str, Any]:
  """The configuration a cell is stored under (every setting that changes it, seed included)."""
  knn, ensemble = config.knns[adv], config.ensembles[adv]
  if alg == "private_knn":
    setup = {"knn": dataclasses.asdict(knn), "feature_model": config.feature_model,
             "feature_epochs": config.feature_epochs}
  elif alg == "private_knn_text":
    setup = {"knn": dataclasses.asdict(knn), "text_dataset": config.text_dataset,
             "features": "mean final hidden state", "llm": _llm_name(config.llm_gguf)}
  elif alg == "promptpate":
    setup = {"llm": _llm_name(config.llm_gguf), "promptpate": {
        "num_teachers": ensemble.num_teachers, "text_dataset": config.text_dataset,
        "num_queries": ensemble.num_queries, "query_repeats": ensemble.query_repeats,
        "minq_prompts": list(config.minq_prompts), "poison_label": ensemble.poison_label}}
  else:
    setup = {"ensemble": dataclasses.asdict(ensemble)}
  data = ({"seed": seed} if alg in TEXT_ALGORITHMS else
          {"dataset": config.dataset, "public_fraction": config.public_fraction,
           "test_fraction": config.test_fraction, "seed": seed})
  return {**data, "audit": dataclasses.asdict(config.audits[alg]), **setup}


def run(key: jax.Array, config: StudyConfig, *, progress: results.Progress | None = None,
        store: results.CellStore | None = None) -> StudyResult:
  """Every algorithm x adversary cell of ``config`` (stored cells of ``store`` reused).

  ``key`` must be ``dpaudit.prng.make_key(config.seed)``: stored cells are named by the seed.
  A text set that is not prepared fails before the language model is read.
  """
  _validate.check_key(key)
  if not isinstance(config, StudyConfig):
    raise ValueError(f"config must be a StudyConfig, got {type(config).__name__}")
  seed = config.seed
  if any(alg not in TEXT_ALGORITHMS for alg in config.audits):
    public, train, test = load_splits(config, seed)
  if any(alg in TEXT_ALGORITHMS for alg in config.audits):
    text_splits(config.text_dataset, seed)
  cells, names = [], []
  for alg, audit in config.audits.items():
    for adv, ensemble in config.ensembles.items():
      knn, signature, label = config.knns[adv], _signature(config, alg, adv, seed), f"{alg}_{adv}"

      def compute(alg=alg, adv=adv, audit=audit, ensemble=ensemble, knn=knn,
                  signature=signature, label=label, done=len(cells)):  # noqa: B008  # bound now
        cell_key = jax.random.fold_in(key, pp.ADVERSARIES.index(adv))
        # teachers' votes and finished queries survive an interruption
        scratch = None if store is None else store.scratch_dir(signature, label)
        step = lambda i, n: results.report(  # noqa: E731
            progress, done, len(cells), f"  {alg}/{adv}: {i}/{n} instantiations")
        start = time.perf_counter()
        if alg == "private_knn":
          out = pp.knn_audit(cell_key, public, train, test, knn, audit,
                             feature_model=config.feature_model,
                             feature_epochs=config.feature_epochs, checkpoint_dir=scratch)
        elif alg == "private_knn_text":
          out = pp.text_knn_audit(cell_key, _llm(config.llm_gguf),
                                  *text_splits(config.text_dataset, seed), knn, audit,
                                  checkpoint_dir=scratch)
        elif alg == "promptpate":
          out = pp.promptpate_audit(cell_key, _llm(config.llm_gguf),
                                    *text_splits(config.text_dataset, seed), adv,
                                    ensemble.num_teachers, ensemble.num_queries,
                                    ensemble.query_repeats, audit, tuple(config.minq_prompts),
                                    ensemble.poison_label)
        else:
          out = pp.ensemble_audit(cell_key, train, test, alg, ensemble, audit, step,
                                  checkpoint_dir=scratch)
        out["seconds"] = time.perf_counter() - start
        return out

      cells.append(results.Cell(label, signature, compute))
      names.append(f"{alg}/{adv}")

  def report(done, total, message):
    results.report(progress, done, total, f"{names[done - 1]} (seed {seed}): done"
                   + (" (reused)" if message.endswith("(reused)") else ""))

  found = results.run_cells(cells, store, report, check_stored_cell)
  return StudyResult(dict(zip(names, found)))


Config = StudyConfig
Result = StudyResult


# ------------------------------------------------------------------ the report


def _index(orders, order: float) -> int:
  return int(min(range(len(orders)), key=lambda i: abs(orders[i] - order)))


def quantities(cell, orders_shown) -> dict[str, float]:
  """The numbers the table shows of one cell, by name: ``worst_query.<curve>@<order>`` (one
  query), ``composed.<curve>@<order>`` (composed RDP), ``epsilon.<curve>`` (Thm. 1 of the
  composed curve), their ``model_divergence_sd``, ``teacher_accuracy`` and ``model_fit``."""
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
  header = ["cell", "alpha", "acc", "fit"] + [CURVE_LABELS[n] for n in pp.CURVES]
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
  header = ["cell", "n_Q", "alpha"] + [CURVE_LABELS[n] for n in pp.CURVES]
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
  header = ["cell"] + [CURVE_LABELS[n] + ("*" if n in pp.AUDIT_CURVES else "")
                       for n in pp.CURVES]
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




def leakage_vs_queries(cell, orders, delta: float, counts) -> dict[str, list[float]]:
  """Epsilon at ``delta`` (Thm. 1; 0 for a curve that is 0 at every order) after n queries, for
  each n in ``counts`` and each curve: MIAQ repeats its worst point n times; Pois-MINQ composes
  its first n natural queries. The 2-cut and k-cut give images of lower-bound curves, for
  comparison with the paper's Figs. 3-5, not lower bounds; the composition assumes freshly
  trained teachers per query."""
  _validate.check_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
  for n in counts:
    _validate.check_integer("counts", n, 1)
  repeated = cell["composed"]["kind"] == "repeated"
  out = {}
  for name in pp.CURVES:
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

