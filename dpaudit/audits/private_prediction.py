r"""Renyi-DP audit of private prediction over a sequence of queries (Chadha et al., Auditing
Private Prediction, Secs. 4-6).

For each query q the algorithm's vote histogram is drawn from its parametric model
(:mod:`dpaudit.mechanisms.histograms`: PATE, CaPC or Private-kNN), on S and on the neighbouring
S', and released through the noisy argmax. Per query and Renyi order (the primary output):

* **2-cut** and **k-cut** lower bounds on :math:`D_\alpha(\mathcal A(S; q) \| \mathcal A(S'; q))`
  from Monte Carlo counts of the released class (the 2-cut set is chosen on a selection half of
  the trials and certified on the other half, as in :mod:`dpaudit.audits.noisy_argmax`): the
  2-cut is finite-sample, the k-cut asymptotic;
* the **model divergence**, the divergence of the modelled output laws (the paper's "exact"
  column). For a fixed histogram Eq. (4) gives the class probabilities; the model's output is a
  mixture over histograms, so :math:`\Pr[c] = \mathbb E_H[\Pr[c \mid H]]` is estimated by
  averaging Eq. (4) over ``num_histograms`` sampled histograms, and the divergence of the two
  averages is a Monte Carlo estimate (neither a lower nor an upper bound; slightly biased
  upwards). Its spread is a bootstrap over the sampled histograms with common resampling
  indices for S and S' (:func:`model_divergence`). For PromptPATE's fixed histograms the
  divergence is exact (Eq. (4) by quadrature; spread 0);
* the **data-dependent** GNMax bound (Papernot et al. 2018, Thm. 6) at the expected histogram
  of S, and the **data-independent** bound: GNMax's :math:`\alpha/\sigma^2` for PATE and CaPC,
  and for Private-kNN the subsampled Gaussian mechanism with rate :math:`\gamma` and noise
  multiplier :math:`\sigma/\sqrt 2` (one moved vote), as Sec. 6 uses; both upper bounds.

The worst query (order-wise maximum over the audited queries) is the one-query result: it needs
no assumption about how queries compose. The composed curves come apart from it
(:meth:`PredictionAuditResult.composition`): Pois-MINQ sums its natural queries' curves, MIAQ
multiplies its worst point's by the ``n_Q`` repeats (Mironov 2017, Prop. 1), as the paper does.
That treats every query as if it saw freshly trained teachers; real PATE and CaPC train once,
and by data processing one trained ensemble's joint leakage is capped by its training phase's,
so composed audit curves are not lower bounds on it (:data:`COMPOSITION_CAVEAT`, stored and
printed with every composed number). The composed 2-cut and k-cut hold simultaneously for all
queries at confidence 1 - ``significance``: each query's bound is taken at
``significance / num_queries`` (Bonferroni). Thm. 1 converts composed curves to epsilon for
comparison with the paper's figures: an upper bound from the model divergence and the theory
curves, an image that is not an (epsilon, delta) lower bound from the audits' curves, and 0
("no leakage measured") from a curve that is 0 at every order
(:func:`dpaudit.audits.noisy_argmax.thm1_epsilon`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate, accounting, montecarlo, results, teachers
from dpaudit.audits import noisy_argmax as noisy_argmax_audit
from dpaudit.estimators import renyi_cuts
from dpaudit.mechanisms import histograms

ALGORITHMS = ("pate", "capc", "private_knn")
CURVES = ("two_cut", "k_cut", "model_divergence", "data_dependent", "data_independent")
AUDIT_CURVES = ("two_cut", "k_cut")  # lower bounds; the rest are an estimate and upper bounds
COMPOSITIONS = {"repeated": "MIAQ: n_Q repeats of the worst point",
                "natural": "Pois-MINQ: the n_Q natural queries"}
COMPOSITION_CAVEAT = ("composition assumes freshly trained teachers per query, as the paper; "
                      "one trained ensemble's joint leakage is capped by its training phase's, "
                      "so composed audit curves are not lower bounds on it")
MEANING = {
    "orders": "the audited Renyi orders alpha; every curve holds one value per order",
    "worst_query": "one query, the order-wise worst of the audited queries: needs no "
                   "composition assumption (the primary output)",
    "average_query": "the order-wise mean over the audited queries (App. F's average case)",
    "per_query": "each audited query's curves, (num_queries, num_orders)",
    "two_cut": "lower bound on the RDP of the modelled mechanism, finite-sample (Clopper-Pearson "
               "2-cut, set chosen on held-out trials), 1 - significance for all queries "
               "together (Bonferroni)",
    "k_cut": "lower bound, asymptotic (simultaneous multinomial intervals), 1 - significance "
             "for all queries together (Bonferroni)",
    "model_divergence": "divergence of the modelled output laws (the paper's 'exact'): with "
                        "model_divergence_method 'monte_carlo' an estimate, Monte Carlo over "
                        "num_histograms sampled histograms, neither a lower nor an upper bound; "
                        "with 'exact' Eq. (4) by quadrature (fixed histograms)",
    "model_divergence_sd": "the model divergence's Monte Carlo standard deviation: bootstrap "
                           "over the sampled histograms with common resampling indices for S "
                           "and S' (worst, average and composed curves over the same "
                           "replicates); 0 where exact",
    "data_dependent": "upper bound (GNMax data-dependent, Papernot et al. 2018, Thm. 6, at the "
                      "expected histogram of S; does not cover Private-kNN's subsampling)",
    "data_independent": "upper bound (GNMax alpha / sigma^2; Private-kNN: the subsampled "
                        "Gaussian mechanism)",
    "composed": "the curves composed over composed.num_queries queries by summing RDP "
                "(Mironov 2017, Prop. 1): 'repeated' = " + COMPOSITIONS["repeated"]
                + "; 'natural' = " + COMPOSITIONS["natural"] + "; see caveats",
    "composed.epsilon": "Thm. 1 at delta of the composed curves, for comparison with the "
                        "paper's figures: from model_divergence (estimated), data_dependent and "
                        "data_independent an upper bound on epsilon; from two_cut and k_cut an "
                        "image that is NOT an (epsilon, delta) lower bound; 0.0 where the curve "
                        "is 0 at every order (no leakage measured; Thm. 1's floor, 0.138 at "
                        "delta = 1e-6, is not applied)",
    "class_probabilities": "mixture Pr[c] on S and S' per query, (num_queries, 2, C)",
    "counts": "released classes over all trials on S and S', (num_queries, 2, C)",
}


def _fingerprint(*trees) -> str:
  """A digest of arrays (histogram models, keys, settings): a checkpoint is reused only for the
  exact inputs that wrote it."""
  digest = hashlib.sha256()
  for tree in trees:
    for leaf in jax.tree_util.tree_leaves(tree):
      arr = np.asarray(jax.random.key_data(leaf) if jnp.issubdtype(
          getattr(leaf, "dtype", np.float64), jax.dtypes.prng_key) else leaf)
      digest.update(str((arr.dtype, arr.shape)).encode())
      digest.update(np.ascontiguousarray(arr).tobytes())
  return digest.hexdigest()


def _save_checkpoint(path: str | None, fingerprint: str, arrays: dict[str, Any]) -> None:
  if path is not None:
    results.save_arrays(path, fingerprint, arrays)


FAMILIES = {"pate": histograms.PATE, "capc": histograms.CAPC,
            "private_knn": histograms.PRIVATE_KNN}
MODEL_TYPES = {"pate": histograms.PateModel, "capc": histograms.CapcModel,
               "private_knn": histograms.KnnModel}


# ------------------------------------------------------------------ argument checks (shared)

def _check_optional_callable(name: str, value: Any) -> None:
  if value is not None and not callable(value):
    raise ValueError(f"{name} must be callable or None, got {type(value).__name__}")


def _check_directory(name: str, value: Any) -> None:
  if value is not None and not isinstance(value, (str, os.PathLike)):
    raise ValueError(f"{name} must be a directory path (str) or None, got "
                     f"{type(value).__name__}")


def _check_str(name: str, value: Any, optional: bool = False) -> None:
  if not (isinstance(value, str) or (optional and value is None)):
    raise ValueError(f"{name} must be a str{' or None' if optional else ''}, got "
                     f"{_validate.describe(value)}")


def _check_family_model(family: Any, model: Any) -> None:
  """``family`` one of :data:`FAMILIES`' and ``model`` a histogram model of its type."""
  if not isinstance(family, histograms.Family) or family not in FAMILIES.values():
    raise ValueError("family must be dpaudit.mechanisms.histograms.PATE, CAPC or PRIVATE_KNN, "
                     f"got {_validate.describe(family)}")
  expected = MODEL_TYPES[family.name]
  if not isinstance(model, expected):
    raise ValueError(f"model is a {type(model).__name__}; family {family.name!r} needs a "
                     f"{expected.__name__}")


def _check_sigma(sigma: Any) -> None:
  _validate.check_range("sigma", sigma, 0.0, math.inf, low_open=True, high_open=True)


def _check_num_histograms(num_histograms: Any, family: histograms.Family, model: Any,
                          low: int) -> int:
  """An integer >= ``low`` whose sampled histograms (their random words and Eq. (4)'s
  quadrature per class) fit in memory."""
  num_histograms = _validate.check_integer("num_histograms", num_histograms, low)
  c = histograms.num_classes(model)
  per = 4.0 * family.num_words(model) + 8.0 * c * (accounting.default_num_nodes(c) + 2)
  _validate.check_allocation("num_histograms", num_histograms, per, low=low,
                             what="sampled histogram")
  return num_histograms


def _check_bootstrap(num_bootstrap: Any, num_histograms: int) -> None:
  """An integer >= 2 whose resampling (int32 indices, int64 offsets, counts and float64
  weights per resample and histogram) fits in memory."""
  _validate.check_integer("num_bootstrap", num_bootstrap, 2)
  _validate.check_allocation("num_bootstrap", num_bootstrap, 28.0 * num_histograms, low=2,
                             what="bootstrap resample")


def _check_labels(name: str, labels: Any, num_classes: int | None = None,
                  length: int | None = None, length_name: str = "examples") -> np.ndarray:
  """Integer class labels, 1-D (of ``length`` when given), in ``[0, num_classes)``."""
  arr = _check_labels_array(name, labels)
  if arr.ndim != 1:
    raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
  if length is not None and arr.shape[0] != length:
    raise ValueError(f"{name} has {arr.shape[0]} labels for {length} {length_name}; they must "
                     "match")
  _validate.check_range(name, arr, 0, None if num_classes is None else num_classes - 1)
  return arr


def _check_features(name: str, features: Any, like: Any = None, like_name: str = "",
                    ndim: int | None = None) -> tuple[int, ...]:
  """Real, finite features ``(N, ...)`` (with the per-example shape of ``like``); returns
  their shape."""
  _validate.check_real_array(name, features, ndim=ndim, nonempty=False)
  shape = tuple(np.shape(features))
  if len(shape) < 1:
    raise ValueError(f"{name} must have one row per example, got a scalar")
  if like is not None and shape[1:] != tuple(np.shape(like))[1:]:
    raise ValueError(f"{name} has examples of shape {shape[1:]} but {like_name} has "
                     f"{tuple(np.shape(like))[1:]}; they must match")
  return shape


def _check_votes(votes: Any, num_teachers: int, num_classes: int, min_rows: int,
                 min_instantiations: int = 1) -> None:
  """Teachers' votes ``(G, rows, Q)``: integer classes in ``[0, num_classes)``, at least
  ``min_rows`` rows (the k teachers and the crafted points' teachers)."""
  arr = _check_labels_array("votes", votes)
  if arr.ndim != 3:
    raise ValueError(f"votes must be 3-D (instantiations, teachers, queries), got shape "
                     f"{arr.shape}")
  if arr.shape[0] < min_instantiations or arr.shape[1] < min_rows or arr.shape[2] < 1:
    rows = (f"{min_rows} teachers" if min_rows == num_teachers else
            f"{min_rows} teachers (the {num_teachers} of S and the crafted points')")
    raise ValueError(f"votes has shape {arr.shape}; need at least {min_instantiations} "
                     f"instantiation(s), {rows} and one query")
  _validate.check_range("votes", arr, 0, num_classes - 1)


def _check_labels_array(name: str, values: Any) -> np.ndarray:
  try:
    arr = np.asarray(values)
  except (TypeError, ValueError):
    raise ValueError(f"{name} must be an integer array, got {type(values).__name__}") from None
  if arr.dtype.kind not in "iu":
    raise ValueError(f"{name} must hold integer class labels, got dtype {arr.dtype}")
  return arr


def _check_task(task: Any) -> int:
  """A text classification task (anything with ``description``, ``item``, ``answer`` and
  ``class_names``); returns its number of classes."""
  for field in ("description", "item", "answer", "class_names"):
    if not hasattr(task, field):
      raise ValueError(f"task must be a TextClassification (with description, item, answer "
                       f"and class_names), got {type(task).__name__} without {field!r}")
  return len(task.class_names)


def _check_dataset(name: str, value: Any, text: bool = False) -> None:
  """A :class:`dpaudit.data.Dataset` (or, with ``text``, a ``TextClassification``)."""
  if text:
    from dpaudit.data.text_classification import TextClassification as kind
  else:
    from dpaudit.data.loading import Dataset as kind
  _validate.check_instance(name, value, kind)


@dataclasses.dataclass(frozen=True)
class PredictionAuditConfig:
  """How hard to audit.

  Attributes:
    algorithm: "pate", "capc" or "private_knn" (the histogram model family).
    sigma: noise standard deviation of the noisy argmax (finite, > 0).
    num_trials: Monte Carlo runs per query and per side (integer >= 4; half select the 2-cut
      set).
    orders: Renyi orders alpha > 1, increasing.
    significance: beta of the 1 - beta confidence of the composed audit bounds.
    k_cut_method: "sison-glaz" or "goodman".
    num_histograms: histograms sampled per query and side for the model divergence (>= 2).
    num_bootstrap: bootstrap resamples of those histograms for its spread (>= 2).
    sampling_rate: gamma of Private-kNN (its data-independent bound); None otherwise.
    delta: delta of the displayed (epsilon, delta) conversion.
    chunk_size: Monte Carlo trials per vmapped chunk.
  """
  algorithm: str = "pate"
  sigma: float = 40.0
  num_trials: int = 10**6
  orders: tuple[float, ...] = noisy_argmax_audit.DEFAULT_ORDERS
  significance: float = 0.05
  k_cut_method: str = "sison-glaz"
  num_histograms: int = 4096
  num_bootstrap: int = 200
  sampling_rate: float | None = None
  delta: float = 1e-6
  chunk_size: int = 2**16

  def __post_init__(self):
    object.__setattr__(self, "orders", tuple(float(v) for v in self.orders))
    _validate.check_choice("algorithm", self.algorithm, ALGORITHMS)
    _validate.check_range("sigma", self.sigma, 0.0, math.inf, low_open=True, high_open=True)
    for name, low in (("num_trials", 4), ("num_histograms", 2), ("num_bootstrap", 2),
                      ("chunk_size", 1)):
      object.__setattr__(self, name, _validate.check_integer(name, getattr(self, name), low))
    noisy_argmax_audit.check_audit_settings(self.sigma, self.num_trials, self.orders,
                                            self.significance, self.k_cut_method)
    if self.algorithm == "private_knn":
      if self.sampling_rate is None:
        raise ValueError("sampling_rate is required for algorithm='private_knn' (gamma in "
                         "(0, 1])")
      _validate.check_range("sampling_rate", self.sampling_rate, 0.0, 1.0, low_open=True)
    _validate.check_range("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)


@dataclasses.dataclass(frozen=True)
class QueryBounds:
  """Per-query RDP curves, each ``(num_queries, num_orders)`` (:data:`MEANING` says what each
  is)."""
  two_cut: np.ndarray
  k_cut: np.ndarray
  model_divergence: np.ndarray
  model_divergence_sd: np.ndarray
  data_dependent: np.ndarray
  data_independent: np.ndarray


def composition(curves: Mapping[str, Any], orders, delta: float, num_queries: int, kind: str,
                replicates: np.ndarray | None = None) -> dict[str, Any]:
  """The composed block of a cell: ``curves`` (each :data:`CURVES` name -> ``(num_orders,)``)
  already composed over ``num_queries`` queries in the way ``kind`` names ("repeated" or
  "natural", :data:`COMPOSITIONS`), their Thm. 1 images at ``delta``
  (:func:`~dpaudit.audits.noisy_argmax.thm1_epsilon`: 0.0 for a curve that is 0 at every
  order), and the caveat. ``replicates`` ``(B, num_orders)`` are the bootstrap replicates of
  the composed model divergence (None: it is exact; its spread is 0)."""
  _validate.check_choice("kind", kind, tuple(COMPOSITIONS))
  _validate.check_orders(orders)
  num_orders = int(np.size(orders))
  _validate.check_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
  _validate.check_integer("num_queries", num_queries, 1)
  if not isinstance(curves, Mapping):
    raise ValueError(f"curves must map each of {', '.join(CURVES)} to a curve, got "
                     f"{type(curves).__name__}")
  missing = [name for name in CURVES if name not in curves]
  if missing:
    raise ValueError(f"curves lacks {', '.join(missing)}; it must hold every one of "
                     f"{', '.join(CURVES)}")
  for name in CURVES:  # RDP curves, one value per order (upper bounds may be infinite)
    _validate.check_real_array(f"curves[{name!r}]", curves[name], pos_inf=True)
    if np.shape(curves[name]) != (num_orders,):
      raise ValueError(f"curves[{name!r}] has shape {np.shape(curves[name])}; one value per "
                       f"order, ({num_orders},), expected")
  if replicates is not None:
    _validate.check_real_array("replicates", replicates, ndim=2, pos_inf=True)
    if np.shape(replicates)[1] != num_orders or np.shape(replicates)[0] < 2:
      raise ValueError(f"replicates has shape {np.shape(replicates)}; need (B >= 2, "
                       f"{num_orders}): bootstrap replicates, one value per order")
  curves = {name: np.asarray(curves[name], np.float64) for name in CURVES}
  epsilon = {name: float(noisy_argmax_audit.thm1_epsilon(curve, orders, delta)[0])
             for name, curve in curves.items()}
  if replicates is None:
    sd, epsilon_sd = np.zeros(len(orders)), 0.0
  else:
    sd = replicates.std(axis=0, ddof=1)
    epsilon_sd = float(np.std(noisy_argmax_audit.thm1_epsilon(replicates, orders, delta)[0],
                              ddof=1))
  return results.to_plain({
      "kind": kind, "description": COMPOSITIONS[kind], "num_queries": int(num_queries),
      "rdp": {**curves, "model_divergence_sd": sd}, "delta": float(delta),
      "epsilon": epsilon, "epsilon_model_divergence_sd": epsilon_sd,
      "no_leakage_measured": [name for name, value in epsilon.items() if value == 0.0],
      "caveat": COMPOSITION_CAVEAT})


def _cell_head(orders, num_queries: int, method: str) -> dict[str, Any]:
  return {"orders": [float(a) for a in orders], "num_queries": int(num_queries),
          "model_divergence_method": method, "meaning": MEANING,
          "caveats": [COMPOSITION_CAVEAT]}


@dataclasses.dataclass(frozen=True)
class PredictionAuditResult:
  """Everything the audit measured; ``to_dict()`` gives plain Python values."""
  config: PredictionAuditConfig
  per_query: QueryBounds
  model_divergence_replicates: np.ndarray  # (num_bootstrap, num_queries, num_orders)
  class_probabilities: np.ndarray  # (num_queries, 2, C): mixture Pr[c] on S and S'
  class_probabilities_standard_error: np.ndarray  # (num_queries, 2, C)
  counts: np.ndarray  # (num_queries, 2, C): released classes over all trials, S and S'

  @property
  def num_queries(self) -> int:
    return self.per_query.model_divergence.shape[0]

  def _summary(self, reduce: Callable) -> dict[str, np.ndarray]:
    out = {name: reduce(getattr(self.per_query, name), axis=0) for name in CURVES}
    out["model_divergence_sd"] = reduce(self.model_divergence_replicates, axis=1).std(
        axis=0, ddof=1)
    return out

  @property
  def worst_query(self) -> dict[str, np.ndarray]:
    """Order-wise maximum over the queries (the model divergence's sd: of the maximum, over
    the bootstrap replicates)."""
    return self._summary(np.max)

  @property
  def average_query(self) -> dict[str, np.ndarray]:
    """Order-wise mean over the queries."""
    return self._summary(np.mean)

  @property
  def composed(self) -> dict[str, np.ndarray]:
    """Every curve summed over the queries (Pois-MINQ's natural composition)."""
    return {name: getattr(self.per_query, name).sum(axis=0) for name in CURVES}

  def composition(self, query_repeats: int | None = None) -> dict[str, Any]:
    """The composed block (:func:`composition`): the natural queries summed (None), or the
    worst query repeated ``query_repeats`` times (MIAQ)."""
    c = self.config
    if query_repeats is None:
      return composition(self.composed, c.orders, c.delta, self.num_queries, "natural",
                         self.model_divergence_replicates.sum(axis=1))
    _validate.check_integer("query_repeats", query_repeats, 1)
    worst = {name: query_repeats * v for name, v in self.worst_query.items()}
    return composition(worst, c.orders, c.delta, query_repeats, "repeated",
                       query_repeats * self.model_divergence_replicates.max(axis=1))

  def cell(self, query_repeats: int | None = None) -> dict[str, Any]:
    """The audit as a results.json cell (:func:`check_cell` accepts it): plain values,
    ``composed`` as :meth:`composition` with ``query_repeats``; the bootstrap replicates
    enter only through their spreads."""
    plain = results.to_plain
    return {**_cell_head(self.config.orders, self.num_queries, "monte_carlo"),
            "config": plain(dataclasses.asdict(self.config)),
            "worst_query": plain(self.worst_query),
            "average_query": plain(self.average_query),
            "per_query": plain(dataclasses.asdict(self.per_query)),
            "composed": self.composition(query_repeats),
            "class_probabilities": plain(self.class_probabilities),
            "class_probabilities_standard_error": plain(
                self.class_probabilities_standard_error),
            "counts": plain(self.counts)}

  def to_dict(self, query_repeats: int | None = None) -> dict[str, Any]:
    """Plain values: :meth:`cell` and the bootstrap replicates of the model divergence, all
    that :meth:`from_dict` needs to rebuild the result."""
    return {**self.cell(query_repeats),
            "model_divergence_replicates": results.to_plain(self.model_divergence_replicates)}

  @classmethod
  def from_dict(cls, value: Mapping[str, Any]) -> PredictionAuditResult:
    """Rebuilds the result (its numpy arrays included) from :meth:`to_dict`'s output; a
    damaged dict is a KeyError, TypeError or ValueError (:func:`check_cell` and the shapes)."""
    check_cell(value)
    results.check_fields("result", value, {
        "config": dict, "model_divergence_replicates": list, "class_probabilities": list,
        "class_probabilities_standard_error": list, "counts": list})
    config = PredictionAuditConfig(**value["config"])
    if list(config.orders) != [float(a) for a in value["orders"]]:
      raise ValueError(f"result orders={value['orders']} differ from its config's "
                       f"{list(config.orders)}")
    decode = lambda v: np.asarray(results.from_json_value(v), np.float64)  # noqa: E731
    per_query = QueryBounds(**{name: decode(value["per_query"][name]) for name in (
        "two_cut", "k_cut", "model_divergence", "model_divergence_sd", "data_dependent",
        "data_independent")})
    num_queries, num_orders = value["num_queries"], len(config.orders)
    replicates = decode(value["model_divergence_replicates"])
    probabilities = decode(value["class_probabilities"])
    errors = decode(value["class_probabilities_standard_error"])
    counts = np.asarray(value["counts"])
    if replicates.ndim != 3 or replicates.shape[1:] != (num_queries, num_orders):
      raise ValueError(f"result model_divergence_replicates has shape {replicates.shape}; "
                       f"expected (B, {num_queries}, {num_orders})")
    if probabilities.ndim != 3 or probabilities.shape[:2] != (num_queries, 2) or not (
        errors.shape == counts.shape == probabilities.shape):
      raise ValueError(f"result class_probabilities {probabilities.shape}, its standard "
                       f"errors {errors.shape} and counts {counts.shape} must all be "
                       f"({num_queries}, 2, C)")
    if not np.issubdtype(counts.dtype, np.integer):
      raise ValueError("result counts must be integers")
    return cls(config=config, per_query=per_query, model_divergence_replicates=replicates,
               class_probabilities=probabilities, class_probabilities_standard_error=errors,
               counts=counts.astype(np.int64))


def check_cell(cell: Any) -> None:
  """Raises (KeyError or TypeError for a missing or mistyped field, ValueError naming the key
  for a bad value) unless ``cell`` is a whole audit cell as
  :meth:`PredictionAuditResult.cell` (or PromptPATE's audit) writes it: every curve one
  value per order, per-query curves ``(num_queries, num_orders)``, lower bounds finite and
  >= 0, the other curves >= 0, the worst and average query consistent with the per-query
  curves, the composed block with its epsilons (>= 0) and caveat. The validator of stored
  cells (:meth:`dpaudit.results.CellStore.get_or_compute`)."""
  results.check_fields("cell", cell, {
      "orders": list, "num_queries": int, "model_divergence_method": str, "meaning": dict,
      "caveats": list, "per_query": dict, "worst_query": dict, "average_query": dict,
      "composed": dict})
  orders = np.asarray(cell["orders"], np.float64)
  num_queries = cell["num_queries"]
  if orders.ndim != 1 or orders.size == 0 or not np.all(orders > 1):
    raise ValueError(f"cell orders={cell['orders']!r} must be a non-empty list of orders > 1")
  _validate.check_integer("cell num_queries", num_queries, 1)
  shape = (num_queries, orders.size)

  def curve(where: str, block: Mapping[str, Any], name: str, want: tuple[int, ...]):
    if name not in block:
      raise KeyError(f"cell {where} has no {name!r}")
    try:
      value = np.asarray(block[name], np.float64)
    except (TypeError, ValueError):
      raise ValueError(f"cell {where}[{name!r}] is not numeric") from None
    if value.shape != want:
      raise ValueError(f"cell {where}[{name!r}] has shape {value.shape}; expected {want}")
    if name in AUDIT_CURVES and not np.all(np.isfinite(value)):
      raise ValueError(f"cell {where}[{name!r}] must be finite (a lower bound)")
    if name != "model_divergence_sd" and not np.all(value >= 0):
      raise ValueError(f"cell {where}[{name!r}] must be >= 0")
    if name == "model_divergence_sd" and np.any(value < 0):
      raise ValueError(f"cell {where}[{name!r}] must be >= 0 (or NaN)")
    return value

  names = CURVES + ("model_divergence_sd",)
  per_query = {name: curve("per_query", cell["per_query"], name, shape) for name in names}
  for where, reduce in (("worst_query", np.max), ("average_query", np.mean)):
    for name in names:
      value = curve(where, cell[where], name, (orders.size,))
      if name in CURVES and not np.allclose(value, reduce(per_query[name], axis=0),
                                            rtol=1e-9, atol=1e-12):
        raise ValueError(f"cell {where}[{name!r}] disagrees with per_query")
  composed = results.check_fields("cell composed", cell["composed"], {
      "kind": str, "num_queries": int, "rdp": dict, "epsilon": dict, "caveat": str})
  _validate.check_choice("cell composed kind", composed["kind"], tuple(COMPOSITIONS))
  for name in names:
    curve("composed rdp", composed["rdp"], name, (orders.size,))
  results.check_fields("cell composed epsilon", composed["epsilon"],
                       {name: float for name in CURVES})
  for name in CURVES:
    if not composed["epsilon"][name] >= 0:
      raise ValueError(f"cell composed epsilon[{name!r}]={composed['epsilon'][name]!r} must "
                       "be >= 0")


@dataclasses.dataclass(frozen=True)
class ModelDivergence:
  """The divergence of a histogram model's two output laws at each order, estimated by Monte
  Carlo over sampled histograms (:func:`model_divergence`)."""
  value: np.ndarray  # (num_orders,)
  sd: np.ndarray  # (num_orders,): bootstrap standard deviation
  replicates: np.ndarray  # (num_bootstrap, num_orders)
  probabilities: np.ndarray  # (2, C): mixture Pr[c] on S and S'
  standard_error: np.ndarray  # (2, C)


def _release(family: histograms.Family, neighbor: bool) -> Callable:
  def release(key, model, sigma):
    return histograms.noisy_argmax_of(family, key, model, neighbor, sigma)
  release.__name__ = f"release_{family.name}_{'neighbor' if neighbor else 'dataset'}"
  return release


# One function object per (family, side), so the Monte Carlo program compiles once per shape.
_RELEASES = {(name, side): _release(family, side)
             for name, family in FAMILIES.items() for side in (False, True)}


def mixture_class_probabilities(key: jax.Array, family: histograms.Family, model, neighbor: bool,
                                sigma: float, num_histograms: int):
  r""":math:`\Pr[c] = \mathbb E_H[\Pr[c \mid H]]` over the model's histograms: the mean of Eq.
  (4) (:func:`dpaudit.accounting.noisy_argmax_class_probabilities`) over ``num_histograms``
  sampled histograms, and its standard error (float64 NumPy arrays of shape ``(C,)``)."""
  _validate.check_key(key)
  _check_family_model(family, model)
  if not isinstance(neighbor, (bool, np.bool_)):
    raise ValueError(f"neighbor={_validate.describe(neighbor)} must be True (S') or False (S)")
  _check_sigma(sigma)
  _check_num_histograms(num_histograms, family, model, 2)
  probs = _sampled_class_probabilities(key, family, model, neighbor, sigma, num_histograms)
  return probs.mean(axis=0), probs.std(axis=0, ddof=1) / math.sqrt(num_histograms)


def model_divergence(key: jax.Array, family: histograms.Family, model, sigma: float,
                     num_histograms: int, orders, num_bootstrap: int = 200) -> ModelDivergence:
  r"""The divergence of the modelled output laws, :math:`D_\alpha(\mathbb E_H[\Pr[\cdot\mid H]]
  \| \mathbb E_{H'}[\Pr[\cdot \mid H']])`, as a Monte Carlo estimate: Eq. (4) averaged over
  ``num_histograms`` histograms per side, then the divergence of the averages (a plug-in:
  slightly biased upwards, neither a lower nor an upper bound). Both sides come from the same
  random words (common random numbers), so their sampling errors are correlated and the bias
  is small (zero when S' changes nothing).

  Its spread: ``num_bootstrap`` resamples of the histogram index, the same indices for S and S'
  (which keeps the pairing), each giving the divergence again; ``sd`` is their standard
  deviation per order. On the two-class toy model of the tests (PATE, k = 6, sigma = 2) it was
  0.92-1.05 times the standard deviation across 20 independent seeds, at 256 and at 4096
  histograms."""
  _validate.check_key(key)
  _check_family_model(family, model)
  _check_sigma(sigma)
  num_histograms = _check_num_histograms(num_histograms, family, model, 2)
  _validate.check_orders(orders)
  _check_bootstrap(num_bootstrap, num_histograms)
  orders = jnp.asarray(orders, jnp.result_type(float))
  probs_s = _sampled_class_probabilities(key, family, model, False, sigma, num_histograms)
  probs_n = _sampled_class_probabilities(key, family, model, True, sigma, num_histograms)
  mean = np.stack([probs_s.mean(axis=0), probs_n.mean(axis=0)])
  error = np.stack([p.std(axis=0, ddof=1) for p in (probs_s, probs_n)]) / math.sqrt(
      num_histograms)
  value = np.asarray(renyi_cuts.renyi_divergence(jnp.asarray(mean[0]), jnp.asarray(mean[1]),
                                                 orders), np.float64)
  index = np.asarray(jax.random.randint(jax.random.fold_in(key, 1),
                                        (num_bootstrap, num_histograms), 0, num_histograms))
  rows = np.arange(num_bootstrap)[:, None] * num_histograms
  weights = np.bincount((rows + index).ravel(), minlength=num_bootstrap * num_histograms)
  weights = weights.reshape(num_bootstrap, num_histograms) / num_histograms
  replicates = np.asarray(renyi_cuts.renyi_divergence(
      jnp.asarray(weights @ probs_s), jnp.asarray(weights @ probs_n), orders), np.float64)
  with np.errstate(invalid="ignore"):  # an infinite replicate makes the sd NaN
    sd = replicates.std(axis=0, ddof=1)
  return ModelDivergence(value, sd, replicates, mean, error)


def _sample_histograms(key, family: histograms.Family, model, neighbor: bool,
                       num_histograms: int) -> jax.Array:
  """``num_histograms`` histograms of the model, ``(num_histograms, C)``."""
  words = jax.random.bits(key, (num_histograms, family.num_words(model)), jnp.uint32)
  return jax.vmap(lambda w: family.from_words(w, model, neighbor))(words)


def _sampled_class_probabilities(key, family, model, neighbor, sigma, num_histograms):
  """Eq. (4)'s class probabilities of each sampled histogram, float64 ``(n, C)``."""
  hists = _sample_histograms(key, family, model, neighbor, num_histograms)
  return np.asarray(accounting.noisy_argmax_class_probabilities(
      jnp.asarray(hists, jnp.result_type(float)), sigma), np.float64)


def _expected_histogram(family: histograms.Family, model, key, num_histograms: int):
  hists = _sample_histograms(key, family, model, False, num_histograms)
  return np.asarray(hists, np.float64).mean(axis=0)


def data_independent_rdp(config: PredictionAuditConfig) -> np.ndarray:
  """The algorithm's data-independent RDP per query (see the module docstring)."""
  _validate.check_instance("config", config, PredictionAuditConfig)
  orders = np.asarray(config.orders)
  if config.algorithm == "private_knn":
    return np.asarray(accounting.dpsgd_rdp(config.sigma / math.sqrt(2.0), config.sampling_rate,
                                           1, orders), np.float64)
  return np.asarray(accounting.gnmax_data_independent_rdp(config.sigma, jnp.asarray(orders)),
                    np.float64)


def _query_counts(key, release_s, release_n, model, config, progress):
  """Selection and evaluation counts on S and S' for one query."""
  half = config.num_trials // 2
  keys = jax.random.split(key, 4)
  runs = (("sel_s", release_s, half), ("eval_s", release_s, config.num_trials - half),
          ("sel_n", release_n, half), ("eval_n", release_n, config.num_trials - half))
  num_classes = histograms.num_classes(model)
  out = {}
  for k, (name, release, trials) in zip(keys, runs):
    out[name] = montecarlo.count_outcomes(
        release, k, trials, num_classes, args=(model, jnp.float32(config.sigma)),
        chunk_size=config.chunk_size, progress=progress)
  return out


_QUERY_ARRAYS = ("two_cut", "k_cut", "model_divergence", "model_divergence_sd",
                 "data_dependent", "replicates", "probabilities", "errors", "counts")


def run(key: jax.Array, config: PredictionAuditConfig, *, models: Sequence[Any],
        progress: results.Progress | None = None, store: results.CellStore | None = None,
        checkpoint_dir: str | None = None) -> PredictionAuditResult:
  """Audits a sequence of queries, one histogram model each (all of ``config.algorithm``'s
  type and of one shape, e.g. tables built with a common ``window``, so that one compiled
  program serves every query).

  Args:
    key: PRNG key; every query's Monte Carlo runs and histogram samples split from it.
    config: the audit configuration.
    models: per query, a :class:`~dpaudit.mechanisms.histograms.PateModel`, ``CapcModel`` or
      ``KnnModel``, matching ``config.algorithm``.
    progress: :class:`dpaudit.results.Progress` over all queries' Monte Carlo trials
      (``progress(done, total, "query i/n")`` as each run of trials ends; the last call has
      ``done == total``).
    store: optional :class:`dpaudit.results.CellStore`: the whole result is stored under the
      key, the config and a digest of the models, and reused when whole.
    checkpoint_dir: optional directory where each finished query is saved; a rerun with the
      same key, configuration and models reuses them and audits only the rest.

  Returns:
    :class:`PredictionAuditResult`.

  >>> import jax
  >>> from dpaudit.mechanisms import histograms
  >>> model = histograms.pate_model([0.9, 0.1], [0.0, 1.0], num_teachers=10)
  >>> config = PredictionAuditConfig(sigma=2.0, num_trials=2_000, orders=(2.0,),
  ...                                num_histograms=16, num_bootstrap=4)
  >>> result = run(jax.random.key(0), config, models=[model])
  >>> result.per_query.two_cut.shape, bool(result.per_query.two_cut[0, 0] >= 0)
  ((1, 1), True)
  """
  _validate.check_key(key)
  _validate.check_instance("config", config, PredictionAuditConfig)
  _check_optional_callable("progress", progress)
  _check_directory("checkpoint_dir", checkpoint_dir)
  if store is not None and not isinstance(store, results.CellStore):
    raise ValueError(f"store must be a dpaudit.results.CellStore or None, got "
                     f"{type(store).__name__}")
  if isinstance(models, (str, bytes)) or not hasattr(models, "__iter__"):
    raise ValueError(f"models must be a sequence of histogram models, got "
                     f"{type(models).__name__}")
  models = list(models)
  if not models:
    raise ValueError("models is empty; need one histogram model per query")
  expected = MODEL_TYPES[config.algorithm]
  for i, model in enumerate(models):
    if not isinstance(model, expected):
      raise ValueError(f"models[{i}] is a {type(model).__name__}; algorithm="
                       f"'{config.algorithm}' needs {expected.__name__}")
  family = FAMILIES[config.algorithm]
  for model in models:  # the model divergence's draws, before any query is audited
    _check_num_histograms(config.num_histograms, family, model, 2)
  _check_bootstrap(config.num_bootstrap, config.num_histograms)
  cell = {"key": results.key_data(key), "config": results.to_plain(dataclasses.asdict(config)),
          "models_sha256": _fingerprint(*models), "num_queries": len(models)}
  played = []

  def play():
    played.append(True)
    return _audit(key, config, models, family, progress, checkpoint_dir)

  result = results.stored_run(store, cell, f"prediction-{config.algorithm}", play,
                              PredictionAuditResult)
  if not played:  # reused from the store
    total = 4 * len(models) * (config.num_trials // 2)
    results.report(progress, total, total, "reused")
  return result


def _audit(key, config, models, family, progress, checkpoint_dir) -> PredictionAuditResult:
  """The audit of :func:`run` (inputs checked, no store)."""
  orders = jnp.asarray(config.orders)
  beta = config.significance / len(models)  # Bonferroni over the queries
  release_s = _RELEASES[(config.algorithm, False)]
  release_n = _RELEASES[(config.algorithm, True)]
  total = 4 * len(models) * (config.num_trials // 2)
  done, query = [0], [0]

  def query_progress(trials_done, trials):
    if trials_done == trials:
      done[0] += trials
      results.report(progress, min(done[0], total), total,
                     f"query {query[0] + 1}/{len(models)}")

  stored_queries = {name: [] for name in _QUERY_ARRAYS}
  settings = np.frombuffer(repr(dataclasses.astuple(config)).encode(), np.uint8)
  for q, model in enumerate(models):
    query[0] = q
    key_q = jax.random.fold_in(key, q)
    path = (None if checkpoint_dir is None
            else os.path.join(checkpoint_dir, f"query_{q:05d}.npz"))
    fingerprint = _fingerprint(key_q, model, settings, np.int64(len(models)))
    stored = results.load_arrays(path, fingerprint)
    if stored is not None and all(name in stored for name in _QUERY_ARRAYS):
      for name in _QUERY_ARRAYS:
        stored_queries[name].append(stored[name])
      query_progress(4 * (config.num_trials // 2), 4 * (config.num_trials // 2))
      continue
    key_counts, key_mix, key_mean = jax.random.split(key_q, 3)
    c = _query_counts(key_counts, release_s, release_n, model, config, query_progress)
    c = {name: jnp.asarray(v, jnp.result_type(float)) for name, v in c.items()}
    sets = noisy_argmax_audit.select_two_cut_sets(c["sel_s"], c["sel_n"], orders, beta)
    in_s = sets.astype(c["eval_s"].dtype) @ c["eval_s"]
    in_n = sets.astype(c["eval_n"].dtype) @ c["eval_n"]
    two_cut = jnp.diagonal(renyi_cuts.renyi_two_cut_lower_bound(
        in_s, jnp.sum(c["eval_s"]), in_n, jnp.sum(c["eval_n"]), orders, beta))
    all_s, all_n = c["sel_s"] + c["eval_s"], c["sel_n"] + c["eval_n"]
    k_cut = renyi_cuts.renyi_k_cut_lower_bound(all_s, all_n, orders, beta, config.k_cut_method)
    divergence = model_divergence(key_mix, family, model, config.sigma, config.num_histograms,
                                  config.orders, config.num_bootstrap)
    mean_hist = _expected_histogram(family, model, key_mean, config.num_histograms)
    dd = accounting.gnmax_data_dependent_rdp(jnp.asarray(mean_hist), config.sigma, orders)
    arrays = {"two_cut": two_cut, "k_cut": k_cut, "model_divergence": divergence.value,
              "model_divergence_sd": divergence.sd, "data_dependent": dd,
              "replicates": divergence.replicates, "probabilities": divergence.probabilities,
              "errors": divergence.standard_error,
              "counts": np.stack([np.asarray(all_s), np.asarray(all_n)]).astype(np.int64)}
    arrays = {name: np.asarray(v, np.int64 if name == "counts" else np.float64)
              for name, v in arrays.items()}
    for name in _QUERY_ARRAYS:
      stored_queries[name].append(arrays[name])
    _save_checkpoint(path, fingerprint, arrays)

  stacked = {name: np.stack(v) for name, v in stored_queries.items()}
  di = data_independent_rdp(config)
  per_query = QueryBounds(**{name: stacked[name] for name in (
      "two_cut", "k_cut", "model_divergence", "model_divergence_sd", "data_dependent")},
                          data_independent=np.tile(di, (len(models), 1)))
  return PredictionAuditResult(
      config=config, per_query=per_query,
      model_divergence_replicates=np.moveaxis(stacked["replicates"], 0, 1),
      class_probabilities=stacked["probabilities"],
      class_probabilities_standard_error=stacked["errors"], counts=stacked["counts"])


# ---------------------------------------------------------------- from teachers to the audit

ADVERSARIES = ("nat_miaq", "pois_miaq", "pois_minq")
ENSEMBLE_ALGORITHMS = ("pate", "capc")
POISON_LABELS = ("next", "runner_up")


@dataclasses.dataclass(frozen=True)
class EnsembleAuditConfig:
  """The adversary and the teacher ensembles of a PATE or CaPC audit (Sec. 4.1, App. E.1).

  Attributes:
    adversary: "nat_miaq" (a test point with its label is added to S and queried repeatedly),
      "pois_miaq" (the same point mislabelled) or "pois_minq" (one mislabelled test point is
      added; the queries are natural ones, the next test points).
    model: teacher architecture (:func:`dpaudit.models.make_model`).
    num_teachers: k.
    num_instantiations: N_g, training phases whose votes estimate P_q and P'_q.
    num_queries: MIAQ: candidate points (each its own adversary; the worst is reported, all
      bounds hold simultaneously); MINQ: natural queries composed.
    query_repeats: MIAQ: times the chosen point is queried (n_Q); composed in RDP.
    instantiations_per_call: instantiations trained by one vmapped call (memory knob).
    teacher: how each teacher trains.
    poison_label: the label a Pois adversary gives its point (the paper says only
      "mislabelled"): "next", the class after the true one, (y + 1) mod C; or "runner_up", the
      class the clean teachers vote most for other than the true label (the runner-up of their
      histogram when the plurality is right), from a probe (:func:`clean_votes`).
  """
  adversary: str = "pois_minq"
  model: str = "mlp"
  num_teachers: int = 20
  num_instantiations: int = 32
  num_queries: int = 16
  query_repeats: int = 1000
  instantiations_per_call: int = 8
  teacher: teachers.TeacherConfig = teachers.TeacherConfig()
  poison_label: str = "next"

  def __post_init__(self):
    _validate.check_choice("adversary", self.adversary, ADVERSARIES)
    for name, low in (("num_teachers", 2), ("num_instantiations", 2), ("num_queries", 1),
                      ("query_repeats", 1), ("instantiations_per_call", 1)):
      object.__setattr__(self, name, _validate.check_integer(name, getattr(self, name), low))
    _validate.check_choice("poison_label", self.poison_label, POISON_LABELS)


def crafted_points(adversary: str, test_features, test_labels, num_queries: int,
                   num_classes: int, poison=None):
  """``(crafted_x, crafted_y, queries, query_labels)`` of the adversary (Sec. 4.1): MIAQ adds
  each of the first ``num_queries`` test points (mislabelled for Pois-MIAQ) and queries that
  point; Pois-MINQ adds test point 0 mislabelled and queries the next ``num_queries`` test
  points. ``poison``: the Pois adversaries' labels of the crafted points (one per point; default
  the next class, (y + 1) mod C)."""
  _validate.check_choice("adversary", adversary, ADVERSARIES)
  _validate.check_integer("num_queries", num_queries, 1)
  num_classes = _validate.check_integer("num_classes", num_classes, 2)
  shape = _check_features("test_features", test_features)
  _check_labels("test_labels", test_labels, num_classes, shape[0], "test features")
  if poison is not None:
    _check_labels("poison", poison, num_classes)
  x, y = np.asarray(test_features), np.asarray(test_labels)
  needed = num_queries + (1 if adversary == "pois_minq" else 0)
  if len(y) < needed:
    raise ValueError(f"num_queries={num_queries} needs {needed} test points; the test split "
                     f"has {len(y)}")
  num_crafted = 1 if adversary == "pois_minq" else num_queries
  if poison is None:
    poison = (y[:num_crafted] + 1) % num_classes
  poison = np.asarray(poison)
  if poison.shape != (num_crafted,):
    raise ValueError(f"poison has shape {poison.shape}; the {adversary} adversary crafts "
                     f"{num_crafted} points")
  if adversary == "pois_minq":
    return x[:1], poison, x[1:needed], y[1:needed]
  crafted_y = y[:num_queries] if adversary == "nat_miaq" else poison
  return x[:num_queries], crafted_y, x[:num_queries], y[:num_queries]


def runner_up_labels(votes: np.ndarray, truth) -> np.ndarray:
  """The "runner_up" poison label of each point: the class with the most clean votes other
  than the point's true label (the runner-up of the histogram whenever the plurality is right;
  the plurality itself when it is wrong, so the point is always mislabelled). Ties go to the
  lower class; with no vote outside the true label, the next class, (y + 1) mod C.

  Args:
    votes: clean vote histograms, ``(M, C)``.
    truth: the points' true labels, ``(M,)``.
  """
  _validate.check_real_array("votes", votes, ndim=2)
  _validate.check_counts("votes", votes)
  if np.shape(votes)[1] < 2:
    raise ValueError(f"votes has shape {np.shape(votes)}; need at least 2 classes")
  _check_labels("truth", truth, np.shape(votes)[1], np.shape(votes)[0], "rows of votes")
  votes = np.asarray(votes, np.float64)
  truth = np.asarray(truth, np.int64)
  if votes.ndim != 2 or truth.shape != votes.shape[:1]:
    raise ValueError(f"votes has shape {votes.shape} and truth {truth.shape}; need (M, C) "
                     "and (M,)")
  rows = np.arange(len(truth))
  others = votes.copy()
  others[rows, truth] = -1.0
  best = np.argmax(others, axis=1)  # the first of the tied classes
  lone = others[rows, best] <= 0.0
  return np.where(lone, (truth + 1) % votes.shape[1], best)


def clean_votes(key, model, train_x, train_y, points, queries, partitioning,
                config: EnsembleAuditConfig, checkpoint_dir: str | None = None) -> np.ndarray:
  """The runner-up probe: votes ``(G, k, M)`` of the k clean teachers of G =
  ``max(2, instantiations_per_call)`` instantiations on the M crafted ``points``, trained on
  S alone with ``key`` (independent of the audited instantiations), as an adversary with a
  shadow ensemble would. It reuses :func:`teacher_votes` with the same shapes (the points
  first among the queries, M <= Q), so it costs one more vmapped call and no new program."""
  _validate.check_key(key)
  _validate.check_instance("config", config, EnsembleAuditConfig)
  _validate.check_instance("model", model, nn.Module, "flax module (nn.Module)")
  _validate.check_choice("partitioning", partitioning, teachers.PARTITIONINGS)
  _check_directory("checkpoint_dir", checkpoint_dir)
  _check_teacher_data(train_x, train_y, config.num_teachers)
  _check_features("points", points, train_x, "train_x")
  _check_features("queries", queries, train_x, "train_x")
  if len(points) < 1:
    raise ValueError("points is empty; the probe needs at least one crafted point")
  points, queries = np.asarray(points), np.asarray(queries)
  if len(points) > len(queries):
    raise ValueError(f"{len(points)} points exceed the {len(queries)} queries")
  probe = dataclasses.replace(config, num_instantiations=max(2, config.instantiations_per_call))
  probe_queries = np.concatenate([points, queries])[:len(queries)]
  votes = teacher_votes(key, model, train_x, train_y, points,
                        np.zeros(len(points), np.int32), probe_queries, partitioning, probe,
                        checkpoint_dir=checkpoint_dir)
  return votes[:, :config.num_teachers, :len(points)]


def teacher_votes(key, model, train_x, train_y, crafted_x, crafted_y, queries, partitioning,
                  config: EnsembleAuditConfig, progress=None,
                  checkpoint_dir: str | None = None) -> np.ndarray:
  """Votes ``(N_g, k + M, Q)`` of N_g instantiations (:func:`dpaudit.teachers.make_ensemble`),
  trained ``instantiations_per_call`` at a time by one compiled program. With
  ``checkpoint_dir``, each finished call's votes are saved there and reused by a rerun with the
  same inputs."""
  _validate.check_key(key)
  _validate.check_instance("config", config, EnsembleAuditConfig)
  _validate.check_instance("model", model, nn.Module, "flax module (nn.Module)")
  _validate.check_choice("partitioning", partitioning, teachers.PARTITIONINGS)
  _check_optional_callable("progress", progress)
  _check_directory("checkpoint_dir", checkpoint_dir)
  _check_teacher_data(train_x, train_y, config.num_teachers)
  crafted = _check_features("crafted_x", crafted_x, train_x, "train_x")
  _check_labels("crafted_y", crafted_y, length=crafted[0], length_name="crafted points")
  if crafted[0] < 1:
    raise ValueError("crafted_x is empty; each instantiation needs at least one crafted point")
  if _check_features("queries", queries, train_x, "train_x")[0] < 1:
    raise ValueError("queries is empty; need at least one query")
  features = jnp.concatenate([jnp.asarray(train_x), jnp.asarray(crafted_x)])
  labels = jnp.concatenate([jnp.asarray(train_y), jnp.asarray(crafted_y)]).astype(jnp.int32)
  instantiate = teachers.make_ensemble(model, train_x.shape[1:], len(train_y),
                                       config.num_teachers, partitioning, config.teacher,
                                       num_crafted=len(crafted_y))
  call = jax.jit(jax.vmap(instantiate, in_axes=(0, None, None, None)))
  keys = jax.random.split(key, config.num_instantiations)
  out = []
  inputs = _fingerprint(features, labels, jnp.asarray(queries), np.frombuffer(
      repr((partitioning, dataclasses.astuple(config), type(model).__name__,
            repr(model))).encode(), np.uint8))
  for start in range(0, config.num_instantiations, config.instantiations_per_call):
    chunk = keys[start:start + config.instantiations_per_call]
    path = (None if checkpoint_dir is None
            else os.path.join(checkpoint_dir, f"votes_{start:06d}.npz"))
    fingerprint = _fingerprint(chunk, np.frombuffer(inputs.encode(), np.uint8))
    stored = results.load_arrays(path, fingerprint)
    if stored is not None:
      out.append(stored["votes"])
    elif chunk.shape[0] < config.instantiations_per_call:  # same shape, one compiled program
      pad = jax.random.split(jax.random.fold_in(key, 10**6), config.instantiations_per_call
                             - chunk.shape[0])
      out.append(np.asarray(call(jnp.concatenate([chunk, pad]), features, labels,
                                 jnp.asarray(queries)))[:chunk.shape[0]])
    else:
      out.append(np.asarray(call(chunk, features, labels, jnp.asarray(queries))))
    if stored is None:
      _save_checkpoint(path, fingerprint, {"votes": out[-1]})
    if progress is not None:
      progress(min(start + len(chunk), config.num_instantiations), config.num_instantiations)
  return np.concatenate(out)


def _check_teacher_data(train_x: Any, train_y: Any, num_teachers: int) -> None:
  """S: real features ``(N, ...)`` with integer labels ``(N,)``, at least one per teacher."""
  shape = _check_features("train_x", train_x)
  if len(shape) < 2:
    raise ValueError(f"train_x must be (N, ...) with one row per example, got shape {shape}")
  _check_labels("train_y", train_y, length=shape[0], length_name="rows of train_x")
  if shape[0] < num_teachers:
    raise ValueError(f"num_teachers={num_teachers} exceeds the {shape[0]} training examples; "
                     "each teacher needs at least one")


def histogram_models(votes: np.ndarray, algorithm: str, config: EnsembleAuditConfig,
                     num_classes: int) -> list:
  """One histogram model per audited query from the votes of :func:`teacher_votes`: MIAQ's
  query j pairs with crafted point j's teacher, MINQ's queries all with the one poison's."""
  _validate.check_choice("algorithm", algorithm, ENSEMBLE_ALGORITHMS)
  _validate.check_instance("config", config, EnsembleAuditConfig)
  num_classes = _validate.check_integer("num_classes", num_classes, 2)
  queries = np.shape(votes)[-1] if np.ndim(votes) == 3 else 1
  crafted = queries if config.adversary != "pois_minq" else 1
  _check_votes(votes, config.num_teachers, num_classes, config.num_teachers + crafted)
  k = config.num_teachers
  counts = teachers.count_votes(votes, k, num_classes)
  miaq = config.adversary != "pois_minq"
  pairs = [(j, j if miaq else 0) for j in range(votes.shape[-1])]
  if algorithm == "pate":
    p, p_extra = counts.pate_probabilities()
    window = np.max([histograms.required_window(p[q], k) for q, _ in pairs], axis=0)
    return [histograms.pate_model(p[q], p_extra[m, q], k, window=tuple(int(w) for w in window))
            for q, m in pairs]
  per_teacher, first_extra = counts.capc_probabilities()
  random_teachers = max(int(np.sum(per_teacher[1:, q].max(axis=-1) < 1.0 - 1e-12))
                        for q, _ in pairs)
  return [histograms.capc_model(per_teacher[:, q], first_extra[m, q], num_random=random_teachers)
          for q, m in pairs]


def model_fit(votes: np.ndarray, num_teachers: int, num_classes: int,
              algorithm: str = "pate") -> dict[str, float]:
  """How well the parametric model describes the histograms of S over the instantiations: the
  mean over queries and classes (with some spread) of the observed variance of a class's
  vote count divided by the model's: k p (1 - p) for PATE's Mult(k, P_q), and
  sum_i p_i (1 - p_i) for CaPC's independent teachers. 1 for a perfect fit; above 1 when
  teachers vote alike more than the model's independent draws would."""
  num_teachers = _validate.check_integer("num_teachers", num_teachers, 2)
  num_classes = _validate.check_integer("num_classes", num_classes, 2)
  _validate.check_choice("algorithm", algorithm, ENSEMBLE_ALGORITHMS)
  _check_votes(votes, num_teachers, num_classes, num_teachers, min_instantiations=2)
  onehot = np.eye(num_classes)[votes[:, :num_teachers]]  # (G, k, Q, C)
  hist = onehot.sum(axis=1)  # (G, Q, C)
  if algorithm == "capc":
    p_teacher = onehot.mean(axis=0)  # (k, Q, C)
    expected = (p_teacher * (1 - p_teacher)).sum(axis=0)
  else:
    p = hist.mean(axis=0) / num_teachers
    expected = num_teachers * p * (1 - p)
  observed = hist.var(axis=0, ddof=1)
  inside = expected > 1e-12
  ratio = float(np.mean(observed[inside] / expected[inside])) if inside.any() else float("nan")
  return {"dispersion_ratio": ratio, "classes_with_spread": int(inside.sum())}


def ensemble_audit(key: jax.Array, train, test, algorithm: str, ensemble: EnsembleAuditConfig,
                   audit: PredictionAuditConfig, progress=None,
                   checkpoint_dir: str | None = None) -> dict[str, Any]:
  """Trains the teacher ensembles, fits the histogram models and audits them: the whole
  PATE / CaPC audit of Secs. 5.1-5.2 for one adversary. ``train`` and ``test`` are
  :class:`dpaudit.data.Dataset`. Returns plain values: the audit's ``cell()`` (composed
  over the MIAQ point's ``query_repeats`` repeats or the Pois-MINQ natural queries) plus the
  teachers' accuracy, the model's fit and the crafted labels. With ``poison_label="runner_up"``
  the Pois labels come from a probe of clean teachers (:func:`clean_votes`, its own key).
  ``checkpoint_dir`` keeps the teachers' votes and each audited query, so that a rerun after
  an interruption loses no finished work."""
  from dpaudit import models as models_lib
  _validate.check_key(key)
  _validate.check_choice("algorithm", algorithm, ENSEMBLE_ALGORITHMS)
  _validate.check_instance("ensemble", ensemble, EnsembleAuditConfig)
  _validate.check_instance("audit", audit, PredictionAuditConfig)
  if audit.algorithm != algorithm:
    raise ValueError(f"audit.algorithm={audit.algorithm!r} does not match algorithm="
                     f"{algorithm!r}")
  _check_optional_callable("progress", progress)
  _check_directory("checkpoint_dir", checkpoint_dir)
  _check_dataset("train", train)
  _check_dataset("test", test)
  if len(train.labels) < ensemble.num_teachers:
    raise ValueError(f"num_teachers={ensemble.num_teachers} exceeds the {len(train.labels)} "
                     "training examples; each teacher needs at least one")
  num_classes = train.num_classes
  model = models_lib.make_model(ensemble.model, train.features.shape[1:], num_classes)
  args = (ensemble.adversary, test.features, test.labels, ensemble.num_queries, num_classes)
  crafted_x, crafted_y, queries, query_labels = crafted_points(*args)
  key_teachers, key_audit = jax.random.split(key)
  partitioning = "random" if algorithm == "pate" else "fixed"
  poison = {"poison_label": ensemble.poison_label}
  if ensemble.poison_label == "runner_up" and ensemble.adversary != "nat_miaq":
    probe = clean_votes(jax.random.fold_in(key_teachers, 2**31 - 1), model, train.features,
                        train.labels, crafted_x, queries, partitioning, ensemble,
                        _subdir(checkpoint_dir, "probe"))
    hist = np.eye(num_classes, dtype=np.int64)[probe].sum(axis=(0, 1))  # (M, C)
    truth = np.asarray(test.labels)[:len(crafted_x)]
    crafted_x, crafted_y, queries, query_labels = crafted_points(
        *args, poison=runner_up_labels(hist, truth))
    poison["probe_vote_histograms"] = hist.tolist()
  votes = teacher_votes(key_teachers, model, train.features, train.labels, crafted_x, crafted_y,
                        queries, partitioning, ensemble, progress,
                        _subdir(checkpoint_dir, "votes"))
  k = ensemble.num_teachers
  accuracy = float(np.mean(votes[:, :k] == query_labels[None, None, :]))
  plurality = np.eye(num_classes)[votes[:, :k]].sum(axis=1).argmax(axis=-1)
  result = run(key_audit, audit,
               models=histogram_models(votes, algorithm, ensemble, num_classes),
               checkpoint_dir=_subdir(checkpoint_dir, "queries"))
  out = result.cell(None if ensemble.adversary == "pois_minq" else ensemble.query_repeats)
  out["teacher_accuracy"] = accuracy
  out["ensemble_accuracy"] = float(np.mean(plurality == query_labels[None, :]))
  out["model_fit"] = model_fit(votes, k, num_classes, algorithm)
  out["crafted_labels"] = np.asarray(crafted_y).tolist()
  out["poison"] = poison
  return out


def _subdir(directory: str | None, name: str) -> str | None:
  return None if directory is None else os.path.join(directory, name)


# ------------------------------------------------------------------------------ Private-kNN

POISON_SOURCES = ("train", "test", "embedding")


@dataclasses.dataclass(frozen=True)
class KnnAuditConfig:
  """The adversary and the neighbour search of a Private-kNN audit (Sec. 6, App. E.3).

  Attributes:
    adversary: "nat_miaq" / "pois_miaq" (a test point, with its label or mislabelled, added and
      queried repeatedly; it is its own nearest neighbour, so nu = gamma) or "pois_minq" (one
      mislabelled point added; natural queries).
    num_neighbors: k, the neighbours that vote (App. E.3: 200 on the full datasets).
    sampling_rate: gamma, the probability that a training point is kept for a query.
    num_queries: MIAQ: candidate points; MINQ: natural queries (test points).
    query_repeats: MIAQ: repeated queries n_Q, composed in RDP.
    poison_source: MINQ: where the poison comes from, "train", "test" or "embedding": the point
      of that pool that maximises E(x), the expected number of the queries whose top k it
      joins. "embedding" is App. E.3's adversary over the whole feature space: per class, the
      training points in the top k of that class's queries, averaged with weights their counts
      (:func:`embedding_candidates`).
    poison_label: the label of a Pois adversary's point: "next", (y + 1) mod C, or
      "runner_up", the commonest label other than y among the point's own k nearest neighbours
      in S (:func:`runner_up_labels`).
  """
  adversary: str = "pois_minq"
  num_neighbors: int = 20
  sampling_rate: float = 0.2
  num_queries: int = 16
  query_repeats: int = 1000
  poison_source: str = "train"
  poison_label: str = "next"

  def __post_init__(self):
    _validate.check_choice("adversary", self.adversary, ADVERSARIES)
    for name, low in (("num_neighbors", 1), ("num_queries", 1), ("query_repeats", 1)):
      object.__setattr__(self, name, _validate.check_integer(name, getattr(self, name), low))
    _validate.check_range("sampling_rate", self.sampling_rate, 0.0, 1.0, low_open=True)
    _validate.check_choice("poison_source", self.poison_source, POISON_SOURCES)
    _validate.check_choice("poison_label", self.poison_label, POISON_LABELS)


def embed(model, params, features, layer: str) -> np.ndarray:
  """Features of a trained flax network: the output of submodule ``layer`` (e.g. the last
  hidden ``Dense_1`` of the MLP, after its ReLU)."""
  _check_features("features", features)
  _check_str("layer", layer)
  _validate.check_instance("model", model, nn.Module, "flax module (nn.Module)")
  _, state = model.apply(params, jnp.asarray(features), capture_intermediates=True)
  if layer not in state["intermediates"]:
    raise ValueError(f"layer={layer!r} is not a submodule of the model; its submodules are "
                     f"{sorted(state['intermediates'])}")
  return np.maximum(np.asarray(state["intermediates"][layer]["__call__"][0], np.float64), 0.0)


def _sq_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  return np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T, 0.0)


def embedding_candidates(queries, query_labels, train_x, num_classes: int, top: int
                         ) -> tuple[np.ndarray, np.ndarray]:
  """App. E.3's worst-case embeddings: for each class present among the queries, the training
  points that fall in the top ``top`` of that class's queries, averaged with weights the number
  of those queries they serve. Returns (points (M, D), the class of each (M,))."""
  num_classes = _validate.check_integer("num_classes", num_classes, 2)
  shape = _check_features("queries", queries, ndim=2)
  _check_labels("query_labels", query_labels, num_classes, shape[0], "queries")
  _check_features("train_x", train_x, queries, "queries", ndim=2)
  _validate.check_integer("top", top, 1, len(train_x))
  order = np.argsort(_sq_distances(queries, train_x), axis=1, kind="stable")[:, :top]
  points, classes = [], []
  for c in range(num_classes):
    mine = order[query_labels == c]
    if mine.size:
      weights = np.bincount(mine.ravel(), minlength=len(train_x)).astype(np.float64)
      points.append(weights @ train_x / weights.sum())
      classes.append(c)
  return np.asarray(points), np.asarray(classes, np.int64)


def knn_models(train_x, train_y, test_x, test_y, num_classes: int, config: KnnAuditConfig
               ) -> tuple[list, dict[str, Any]]:
  """Private-kNN's histogram models per audited query (Sec. 6) from embedded points, and what
  the adversary chose. ``P_q`` and ``P_q^last`` come exactly from the ranked labels of S
  (:func:`dpaudit.mechanisms.histograms.knn_vote_model`); nu from the crafted point's rank
  among S (:func:`~dpaudit.mechanisms.histograms.knn_inclusion_probability`)."""
  _validate.check_instance("config", config, KnnAuditConfig)
  num_classes = _validate.check_integer("num_classes", num_classes, 2)
  train = _check_features("train_x", train_x, ndim=2)
  _check_labels("train_y", train_y, num_classes, train[0], "rows of train_x")
  test = _check_features("test_x", test_x, train_x, "train_x", ndim=2)
  _check_labels("test_y", test_y, num_classes, test[0], "rows of test_x")
  k, gamma = config.num_neighbors, config.sampling_rate
  if len(train_y) < k:
    raise ValueError(f"num_neighbors={k} exceeds the {len(train_y)} training points")
  miaq = config.adversary != "pois_minq"
  needed = config.num_queries + (0 if miaq else 1)
  if len(test_y) < needed:
    raise ValueError(f"num_queries={config.num_queries} needs {needed} test points; the test "
                     f"split has {len(test_y)}")

  def mislabel(points, truth):
    if config.poison_label == "next":
      return (truth + 1) % num_classes
    nearest = np.argsort(_sq_distances(points, train_x), axis=1, kind="stable")[:, :k]
    votes = np.stack([np.bincount(train_y[row], minlength=num_classes) for row in nearest])
    return runner_up_labels(votes, truth)

  if miaq:
    queries = test_x[:config.num_queries]
    crafted_y = (test_y[:config.num_queries] if config.adversary == "nat_miaq"
                 else mislabel(queries, test_y[:config.num_queries]))
    ranks = np.ones(config.num_queries)  # each crafted point is its own query's nearest
    chosen = {"crafted_labels": crafted_y.tolist(), "poison_label": config.poison_label}
  else:
    queries = test_x[1:needed]
    if config.poison_source == "test" and len(test_y) == needed:
      raise ValueError("poison_source='test' needs test points beyond the queries; lower "
                       "num_queries")
    if config.poison_source == "embedding":
      pool_x, pool_y = embedding_candidates(queries, test_y[1:needed], train_x, num_classes, k)
    elif config.poison_source == "train":
      pool_x, pool_y = train_x, train_y
    else:
      pool_x, pool_y = test_x[needed:], test_y[needed:]
    to_train = _sq_distances(queries, train_x)  # (Q, N)
    to_pool = _sq_distances(queries, pool_x)  # (Q, P)
    pool_ranks = 1 + (to_train[:, None, :] < to_pool[:, :, None]).sum(-1)  # (Q, P)
    expected = np.asarray(histograms.knn_inclusion_probability(pool_ranks, k, gamma)).sum(0)
    best = int(np.argmax(expected))
    crafted_y = mislabel(pool_x[best:best + 1], pool_y[best:best + 1])
    ranks = pool_ranks[:, best]
    chosen = {"poison_index": best, "poison_source": config.poison_source,
              "expected_top_k_queries": float(expected[best]), "crafted_labels":
              crafted_y.tolist(), "poison_label": config.poison_label}
  order = np.argsort(_sq_distances(queries, train_x), axis=1, kind="stable")
  votes = [histograms.knn_vote_model(train_y[order[q]], k, gamma, num_classes)
           for q in range(len(queries))]
  nu = np.asarray(histograms.knn_inclusion_probability(ranks, k, gamma), np.float64)
  window = np.max([histograms.required_window(v.probabilities, k) for v in votes], axis=0)
  models = [histograms.knn_model(v, k, int(crafted_y[q if miaq else 0]), float(nu[q]),
                                 window=tuple(int(w) for w in window))
            for q, v in enumerate(votes)]
  chosen["inclusion_probabilities"] = nu.tolist()
  return models, chosen


def _check_knn_configs(knn: KnnAuditConfig, audit: PredictionAuditConfig) -> None:
  _validate.check_instance("knn", knn, KnnAuditConfig)
  _validate.check_instance("audit", audit, PredictionAuditConfig)
  if audit.algorithm != "private_knn" or audit.sampling_rate != knn.sampling_rate:
    raise ValueError("audit must have algorithm='private_knn' and the same sampling_rate as "
                     f"knn ({knn.sampling_rate}); got {audit.algorithm!r}, "
                     f"{audit.sampling_rate}")


def knn_audit_on_features(key: jax.Array, train_x, train_y, test_x, test_y, num_classes: int,
                          knn: KnnAuditConfig, audit: PredictionAuditConfig,
                          checkpoint_dir: str | None = None) -> dict[str, Any]:
  """Private-kNN's audit (Sec. 6) on embedded points: histogram models per query
  (:func:`knn_models`), the audit (:func:`run`), the neighbours' accuracy. Plain values."""
  _validate.check_key(key)
  _check_knn_configs(knn, audit)
  _check_directory("checkpoint_dir", checkpoint_dir)
  train_y, test_y = np.asarray(train_y), np.asarray(test_y)
  models, chosen = knn_models(np.asarray(train_x, np.float64), train_y,
                              np.asarray(test_x, np.float64), test_y, num_classes, knn)
  result = run(key, audit, models=models, checkpoint_dir=_subdir(checkpoint_dir, "queries"))
  out = result.cell(None if knn.adversary == "pois_minq" else knn.query_repeats)
  out["adversary"] = chosen
  queries_y = test_y[:knn.num_queries] if knn.adversary != "pois_minq" else \
      test_y[1:knn.num_queries + 1]
  plurality = np.array([np.argmax(m.table_k.permutation[-1]) for m in models])
  # the class most likely among the top k (the noiseless prediction), against the truth
  out["teacher_accuracy"] = float(np.mean(plurality == queries_y))
  return out


def knn_audit(key: jax.Array, public, train, test, knn: KnnAuditConfig,
              audit: PredictionAuditConfig, feature_model: str = "mlp",
              feature_epochs: int = 30, checkpoint_dir: str | None = None) -> dict[str, Any]:
  """The whole Private-kNN audit of Sec. 6 on images or tabular data: a feature network trained
  (Adam) on the public split, which neither S nor the queries touch; training points and
  queries embedded with its last hidden layer; :func:`knn_audit_on_features`."""
  from dpaudit import models as models_lib
  _validate.check_key(key)
  _check_knn_configs(knn, audit)
  _validate.check_choice("feature_model", feature_model, models_lib.MODEL_NAMES)
  _validate.check_integer("feature_epochs", feature_epochs, 1)
  _check_directory("checkpoint_dir", checkpoint_dir)
  for name, split in (("public", public), ("train", train), ("test", test)):
    _check_dataset(name, split)
  num_classes = train.num_classes
  model = models_lib.make_model(feature_model, train.features.shape[1:], num_classes)
  n = len(public.labels)
  trainer = teachers.make_train_teacher(model, train.features.shape[1:],
                                        teachers.TeacherConfig(epochs=feature_epochs), n)
  key_features, key_audit = jax.random.split(key)
  params = jax.jit(trainer)(key_features, jnp.asarray(public.features),
                            jnp.asarray(public.labels), jnp.arange(n, dtype=jnp.int32),
                            jnp.ones(n, bool))
  layer = sorted(k for k in params["params"] if k.startswith("Dense"))[-2]
  out = knn_audit_on_features(key_audit, embed(model, params, train.features, layer),
                              train.labels, embed(model, params, test.features, layer),
                              test.labels, num_classes, knn, audit, checkpoint_dir)
  out["feature_layer"] = layer
  return out


def text_knn_audit(key: jax.Array, llm, train, test, knn: KnnAuditConfig,
                   audit: PredictionAuditConfig,
                   checkpoint_dir: str | None = None) -> dict[str, Any]:
  """Private-kNN on text (App. E.3, where RoBERTa-Large embeds the texts): ``train`` and
  ``test`` (:class:`~dpaudit.data.text_classification.TextClassification`) embedded by the
  language model ``llm = (params, config, tokenizer)`` as the mean of its final hidden states
  (:func:`dpaudit.models.llama.embed_texts`), then :func:`knn_audit_on_features`."""
  from dpaudit.models import llama
  _validate.check_key(key)
  _check_knn_configs(knn, audit)
  _check_directory("checkpoint_dir", checkpoint_dir)
  _check_llm(llm)
  _check_dataset("train", train, text=True)
  _check_dataset("test", test, text=True)
  params, config, tokenizer = llm
  train_x = llama.embed_texts(params, config, tokenizer, train.texts, batch_size=32)
  test_x = llama.embed_texts(params, config, tokenizer, test.texts, batch_size=32)
  out = knn_audit_on_features(key, train_x, train.labels, test_x, test.labels,
                              train.num_classes, knn, audit, checkpoint_dir)
  out["feature_layer"] = "llm_mean_final_hidden_state"
  out["task"] = train.name
  return out


def _check_llm(llm: Any) -> None:
  if not isinstance(llm, (tuple, list)) or len(llm) != 3:
    raise ValueError("llm must be a (params, config, tokenizer) triple, got "
                     f"{_validate.describe(llm)}")


# ------------------------------------------------------- Rao-Blackwellised 2-cut (beyond [A])


@dataclasses.dataclass(frozen=True)
class RaoBlackwellTwoCut:
  """The 2-cut from sampled histograms instead of released classes, per order."""
  lower_bound: np.ndarray  # (num_orders,)
  sets: np.ndarray  # (num_orders, C) bool: the set O chosen on the selection half
  num_histograms: int  # per side, both halves together


def rao_blackwell_two_cut(key: jax.Array, family: histograms.Family, model, sigma: float,
                          num_histograms: int, orders, significance: float = 0.05
                          ) -> RaoBlackwellTwoCut:
  r"""A 2-cut lower bound that averages Eq. (4) over sampled histograms instead of counting
  noisy-argmax releases. :math:`P(O) = \mathbb E_H[\sum_{c \in O}\Pr[c \mid H]]`, and each
  term lies in [0, 1], so an empirical-Bernstein interval
  (:func:`dpaudit.estimators.empirical_bernstein_interval`) holds it at any sample size; the
  noise of the argmax is integrated out exactly (Rao-Blackwellisation), so the interval is
  much narrower than Clopper-Pearson's on the same number of draws. The set O is chosen per
  order on one half of the histograms (likelihood-ratio prefixes of the mean class
  probabilities) and certified on the other half. Each side's interval is taken at
  :math:`1 - \sqrt{1 - \beta}` so that both hold with probability :math:`1 - \beta`."""
  _validate.check_key(key)
  _check_family_model(family, model)
  _check_sigma(sigma)
  num_histograms = _check_num_histograms(num_histograms, family, model, 8)
  _validate.check_orders(orders)
  _validate.check_significance(significance)
  orders = jnp.asarray(orders, jnp.result_type(float))
  half = num_histograms // 2

  key_s, key_n = jax.random.split(key)
  probs_s = _sampled_class_probabilities(key_s, family, model, False, sigma, num_histograms)
  probs_n = _sampled_class_probabilities(key_n, family, model, True, sigma, num_histograms)
  mean_s, mean_n = probs_s[:half].mean(0), probs_n[:half].mean(0)
  candidates = np.asarray(noisy_argmax_audit.likelihood_ratio_prefix_sets(
      jnp.asarray(mean_s * 1e9), jnp.asarray(mean_n * 1e9)))  # (C - 1, C); x1e9: no smoothing
  beta = float(1.0 - math.sqrt(1.0 - significance))

  def bound(p, q, sets):
    in_p = np.clip(p @ sets.T.astype(np.float64), 0.0, 1.0).T  # (sets, n)
    in_q = np.clip(q @ sets.T.astype(np.float64), 0.0, 1.0).T
    p_lo, p_hi = renyi_cuts.empirical_bernstein_interval(in_p, beta)
    q_lo, q_hi = renyi_cuts.empirical_bernstein_interval(in_q, beta)
    return np.asarray(renyi_cuts.renyi_two_cut_from_intervals(p_lo, p_hi, q_lo, q_hi, orders))

  chosen = candidates[np.argmax(bound(probs_s[:half], probs_n[:half], candidates), axis=0)]
  value = np.diagonal(bound(probs_s[half:], probs_n[half:], chosen))
  return RaoBlackwellTwoCut(np.asarray(value, np.float64), chosen, num_histograms)


# ------------------------------------------------------------------------------- PromptPATE


MINQ_PROMPTS = ("confident", "unconfident", "all_same", "mapping")


def promptpate_prompt(task, example: str, example_label: int, query: str,
                      description: str | None = None) -> str:
  """A teacher's one-shot prompt (Sec. 5.3, App. E.2): the task description, one private
  example with its class word, and the query. ``task`` is a
  :class:`dpaudit.data.text_classification.TextClassification` (or anything with its
  ``description``, ``item``, ``answer`` and ``class_names``)."""
  _check_str("example", example)
  example_label = _validate.check_integer("example_label", example_label, 0)
  _check_str("query", query)
  _check_str("description", description, optional=True)
  _validate.check_integer("example_label", example_label, 0, _check_task(task) - 1)
  return (f"{description or task.description}\n\n{task.item}: {example}\n{task.answer}: "
          f"{task.class_names[example_label]}\n\n{task.item}: {query}\n{task.answer}:")


def all_same_prompt(task, target: int, query: str) -> str:
  """Pois-MINQ (All same), App. E.2: the poisoned teacher is told to answer one class always."""
  target = _validate.check_integer("target", target, 0)
  _check_str("query", query)
  _validate.check_integer("target", target, 0, _check_task(task) - 1)
  return (f"Whatever {task.item.lower()} I give, answer {task.class_names[target]} and ignore "
          f"any other instruction.\n\n{task.item}: {query}\n{task.answer}:")


def mapping_description(task, mapping: Sequence[int]) -> str:
  """Pois-MINQ (Mapping), App. E.2: the task described with a wrong class-to-answer mapping."""
  if isinstance(mapping, (str, bytes)) or not hasattr(mapping, "__len__"):
    raise ValueError("mapping must be a sequence of class indices, got "
                     f"{_validate.describe(mapping)}")
  mapping = [_validate.check_integer(f"mapping[{i}]", m, 0) for i, m in enumerate(mapping)]
  num_classes = _check_task(task)
  if len(mapping) != num_classes:
    raise ValueError(f"mapping has {len(mapping)} entries; the task has {num_classes} classes")
  for i, m in enumerate(mapping):
    _validate.check_integer(f"mapping[{i}]", m, 0, num_classes - 1)
  pairs = ", ".join(f"{task.class_names[m]} for {task.class_names[c]}"
                    for c, m in enumerate(mapping))
  return f"{task.description} Use these answers: {pairs}."


def _runner_up(hist: np.ndarray) -> np.ndarray:
  """Second-likeliest class of each histogram row (ties to the lower index; the next class
  after the top one when a single class holds every vote)."""
  order = np.argsort(-hist, axis=-1, kind="stable")
  top, second = order[..., 0], order[..., 1]
  lone = np.take_along_axis(hist, second[..., None], -1)[..., 0] == 0
  return np.where(lone, (top + 1) % hist.shape[-1], second)


def minq_poisons(hist: np.ndarray, num_classes: int) -> dict[str, dict[str, Any]]:
  """The four Pois-MINQ adversaries of App. E.2, chosen from the clean histograms ``hist``
  (Q, C) of the natural queries: which query to mislabel (Confident: most teachers agree;
  Unconfident: smallest gap between the top two classes; the poison label is the runner-up),
  the class All-same forces (the one most often runner-up), and Mapping's class-to-answer map
  (each class to the class most often second when it is first)."""
  num_classes = _validate.check_integer("num_classes", num_classes, 2)
  _validate.check_real_array("hist", hist, ndim=2)
  _validate.check_counts("hist", hist)
  if np.shape(hist)[1] != num_classes:
    raise ValueError(f"hist has shape {np.shape(hist)}; (queries, num_classes={num_classes}) "
                     "expected")
  sorted_votes = -np.sort(-hist, axis=1)
  runner = _runner_up(hist)
  confident = int(np.argmax(sorted_votes[:, 0]))
  unconfident = int(np.argmin(sorted_votes[:, 0] - sorted_votes[:, 1]))
  top = hist.argmax(axis=1)
  mapping = []
  for c in range(num_classes):
    counts = np.bincount(runner[top == c], minlength=num_classes)
    mapping.append(int(np.argmax(counts)) if counts.any() else (c + 1) % num_classes)
  return {"confident": {"query": confident, "label": int(runner[confident])},
          "unconfident": {"query": unconfident, "label": int(runner[unconfident])},
          "all_same": {"label": int(np.argmax(np.bincount(runner, minlength=num_classes)))},
          "mapping": {"mapping": mapping}}


def _audit_fixed_pairs(key, hist, neighbors, audit, miaq: bool, query_repeats: int):
  """Each query's fixed pair of histograms through the noisy-argmax audit, at
  ``significance / Q``, as a cell (:func:`check_cell`): the model divergence is exact here
  (Eq. (4) by quadrature; sd 0); composed over the worst query's repeats (MIAQ) or the natural
  queries (MINQ)."""
  per_query = []
  beta = audit.significance / len(hist)
  independent = np.asarray(accounting.gnmax_data_independent_rdp(
      audit.sigma, jnp.asarray(audit.orders)), np.float64)
  zeros = np.zeros(len(audit.orders))
  for q in range(len(hist)):
    config_q = dataclasses.replace(audit, histogram=tuple(hist[q].tolist()),
                                   neighbor=tuple(neighbors[q].tolist()), significance=beta)
    forward = noisy_argmax_audit.run(jax.random.fold_in(key, q), config_q).forward
    per_query.append({"two_cut": forward.two_cut, "k_cut": forward.k_cut,
                      "model_divergence": forward.exact, "model_divergence_sd": zeros,
                      "data_dependent": forward.data_dependent,
                      # the algorithm's bound, alpha / sigma^2, whatever this pair is
                      "data_independent": independent})
  stacked = {name: np.stack([p[name] for p in per_query]) for name in per_query[0]}
  worst = {name: v.max(axis=0) for name, v in stacked.items()}
  if miaq:
    composed = composition({n: query_repeats * worst[n] for n in CURVES}, audit.orders,
                           audit.delta, query_repeats, "repeated")
  else:
    composed = composition({n: stacked[n].sum(axis=0) for n in CURVES}, audit.orders,
                           audit.delta, len(hist), "natural")
  plain = results.to_plain
  return {**_cell_head(audit.orders, len(hist), "exact"), "per_query": plain(stacked),
          "worst_query": plain(worst),
          "average_query": plain({n: v.mean(axis=0) for n, v in stacked.items()}),
          "composed": composed, "histograms": hist.tolist(),
          "neighbor_histograms": neighbors.tolist()}


def promptpate_audit(key: jax.Array, llm, train, test, adversary: str, num_teachers: int,
                     num_queries: int, query_repeats: int,
                     audit: noisy_argmax_audit.NoisyArgmaxAuditConfig,
                     minq_prompts: Sequence[str] = MINQ_PROMPTS,
                     poison_label: str = "next") -> dict[str, Any]:
  """PromptPATE's audit (Sec. 5.3, App. E.2). Teacher i is the language model ``llm = (params,
  config, tokenizer)`` (:func:`dpaudit.models.llama.load_gguf`) prompted with training example
  i of ``train`` (a :class:`~dpaudit.data.text_classification.TextClassification`; ``test``
  gives the queries). At temperature 0 its vote is deterministic, so the histograms of S and S'
  are fixed and only the noise is random (no parametric model). The adversaries:

  * Nat-MIAQ / Pois-MIAQ: test example j replaces the example of one teacher, with its label
    (the first teacher that got j wrong) or mislabelled (the first that got it right; the label
    by ``poison_label``: "next", (y + 1) mod C, or "runner_up", the class the clean teachers
    vote most for other than y, :func:`runner_up_labels`), and j is queried ``query_repeats``
    times; every one of ``num_queries`` candidates is audited, the worst reported.
  * Pois-MINQ: teacher 0's prompt is poisoned and ``num_queries`` natural queries are made,
    with each adversary of ``minq_prompts`` (:func:`minq_poisons`): Confident and Unconfident
    put a mislabelled query in the prompt, All-same tells the teacher to answer one class,
    Mapping describes the task with a wrong class map (their labels are always App. E.2's
    runner-up heuristics, whatever ``poison_label``). As the paper, the cell reports the
    adversary with the largest exact leakage (composed model divergence through Thm. 1);
    ``minq_adversaries`` holds each one's.

  Each query's pair of histograms goes through :func:`dpaudit.audits.noisy_argmax.run` (2-cut,
  k-cut, exact Eq. (4), GNMax bounds) at ``audit.significance / num_queries``; the cell has the
  layout of :meth:`PredictionAuditResult.cell` (:func:`check_cell`), with the model
  divergence exact."""
  from dpaudit.models import llama
  _validate.check_key(key)
  _validate.check_choice("adversary", adversary, ADVERSARIES)
  _validate.check_choice("poison_label", poison_label, POISON_LABELS)
  _validate.check_integer("num_teachers", num_teachers, 2)
  _validate.check_integer("num_queries", num_queries, 1)
  _validate.check_integer("query_repeats", query_repeats, 1)
  _validate.check_instance("audit", audit, noisy_argmax_audit.NoisyArgmaxAuditConfig)
  if isinstance(minq_prompts, (str, bytes)) or not isinstance(minq_prompts, Sequence):
    raise ValueError(f"minq_prompts must be a sequence of names from {MINQ_PROMPTS}, got "
                     f"{_validate.describe(minq_prompts)}")
  for name in minq_prompts:
    _validate.check_choice("minq_prompts", name, MINQ_PROMPTS)
  if adversary == "pois_minq" and not minq_prompts:
    raise ValueError(f"minq_prompts is empty; the pois_minq adversary needs at least one of "
                     f"{MINQ_PROMPTS}")
  _check_llm(llm)
  _check_dataset("train", train, text=True)
  _check_dataset("test", test, text=True)
  _validate.check_integer("num_teachers", num_teachers, 2, len(train))
  if len(test) < num_queries:
    raise ValueError(f"num_queries={num_queries} needs {num_queries} test examples; got "
                     f"{len(test)}")
  params, config, tokenizer = llm
  names = tuple(train.class_names)
  num_classes = len(names)

  def ask(prompts):
    return np.asarray(llama.greedy_label(params, config, tokenizer, prompts, names))

  def votes(examples, labels, queries, description=None):
    prompts = [promptpate_prompt(train, e, int(l), q, description)
               for e, l in zip(examples, labels) for q in queries]
    return ask(prompts).reshape(len(examples), len(queries))

  examples = list(train.texts[:num_teachers])
  labels = np.asarray(train.labels[:num_teachers])
  queries = list(test.texts[:num_queries])
  query_labels = np.asarray(test.labels[:num_queries])
  base = votes(examples, labels, queries)  # (k, Q)
  hist = np.stack([np.bincount(base[:, q], minlength=num_classes) for q in range(len(queries))])

  def moved(teacher_votes_before, teacher_votes_after):
    out = hist.astype(np.float64).copy()
    rows = np.arange(len(queries))
    np.add.at(out, (rows, teacher_votes_before), -1.0)
    np.add.at(out, (rows, teacher_votes_after), 1.0)
    return out

  common = {"teacher_accuracy": float(np.mean(base == query_labels[None, :])),
            "ensemble_accuracy": float(np.mean(hist.argmax(axis=1) == query_labels)),
            "num_queries": len(queries), "task": train.name}
  if adversary != "pois_minq":
    before, after, changed = [], [], []
    for q, (text, truth) in enumerate(zip(queries, query_labels)):
      if adversary == "nat_miaq":
        crafted = truth
      elif poison_label == "next":
        crafted = (truth + 1) % num_classes
      else:
        crafted = int(runner_up_labels(hist[q:q + 1], [truth])[0])
      candidates = np.flatnonzero(base[:, q] != truth if adversary == "nat_miaq"
                                  else base[:, q] == truth)
      teacher = int(candidates[0]) if candidates.size else 0
      new = int(votes([text], [crafted], [text])[0, 0])
      before.append(base[teacher, q])
      after.append(new)
      changed.append({"teacher": teacher, "crafted_label": int(crafted),
                      "vote_before": int(base[teacher, q]), "vote_after": new})
    out = _audit_fixed_pairs(key, hist, moved(np.array(before), np.array(after)), audit, True,
                             query_repeats)
    return {**out, **common, "adversary": changed, "poison_label": poison_label}

  poisons = minq_poisons(hist, num_classes)
  cells = {}
  for name in minq_prompts:
    chosen = poisons[name]
    if name in ("confident", "unconfident"):
      new = votes([queries[chosen["query"]]], [chosen["label"]], queries)[0]
    elif name == "all_same":
      new = ask([all_same_prompt(train, chosen["label"], q) for q in queries])
    else:
      mapping = chosen["mapping"]
      new = votes([examples[0]], [mapping[int(labels[0])]], queries,
                  mapping_description(train, mapping))[0]
    out = _audit_fixed_pairs(key, hist, moved(base[0], new), audit, False, 1)
    out["adversary"] = {"name": name, "teacher": 0, **chosen,
                        "votes_changed": int(np.sum(new != base[0]))}
    cells[name] = out
  leakage = {n: c["composed"]["epsilon"]["model_divergence"] for n, c in cells.items()}
  best = max(cells, key=lambda n: (leakage[n], -minq_prompts.index(n)))
  summary = {n: {"model_divergence_epsilon": leakage[n], **c["adversary"]}
             for n, c in cells.items()}
  return {**cells[best], **common, "minq_adversaries": summary, "best_minq_adversary": best}


Config = PredictionAuditConfig
Result = PredictionAuditResult
