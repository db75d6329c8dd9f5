r"""Renyi-DP audit of private prediction over a sequence of queries (Chadha et al., Auditing
Private Prediction, Secs. 4-6).

For each query q the algorithm's vote histogram is drawn from its parametric model
(:mod:`dpaudit.mechanisms.histograms`: PATE, CaPC or Private-kNN), on S and on the neighbouring
S', and released through the noisy argmax. Per query:

* **2-cut** and **k-cut** lower bounds on :math:`D_\alpha(\mathcal A(S; q) \| \mathcal A(S'; q))`
  from Monte Carlo counts of the released class (the 2-cut set is chosen on a selection half of
  the trials and certified on the other half, as in :mod:`dpaudit.audits.noisy_argmax`);
* the **exact** divergence of the modelled output distributions. For a fixed histogram Eq. (4)
  gives the class probabilities; the model's output is a mixture over histograms, so
  :math:`\Pr[c] = \mathbb E_H[\Pr[c \mid H]]` is estimated by averaging Eq. (4) over
  ``num_histograms`` sampled histograms (its standard error is reported with it);
* the **data-dependent** GNMax bound (Papernot et al. 2018, Thm. 6) at the expected histogram
  of S, and the **data-independent** bound: GNMax's :math:`\alpha/\sigma^2` for PATE and CaPC,
  and for Private-kNN the subsampled Gaussian mechanism with rate :math:`\gamma` and noise
  multiplier :math:`\sigma/\sqrt 2` (one moved vote), as Sec. 6 uses.

Over queries the RDP curves compose by summation (Mironov 2017, Prop. 1). The composed 2-cut
and k-cut bounds hold simultaneously for all queries at confidence 1 - ``significance``: each
query's bound is taken at ``significance / num_queries`` (Bonferroni). The worst query and the
average over queries are reported as well ("worst case" and "average case" of App. F).
Converted to (epsilon, delta) with Thm. 1 only for display: Thm. 1 is an upper-bound
conversion, so the audits' images are labelled as such and are not lower bounds on epsilon.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate
from dpaudit import accounting
from dpaudit import montecarlo
from dpaudit.audits import noisy_argmax as noisy_argmax_audit
from dpaudit.estimators import rdp as rdp_lib
from dpaudit.estimators import renyi_cuts
from dpaudit.mechanisms import histograms

ALGORITHMS = ("pate", "capc", "private_knn")
FAMILIES = {"pate": histograms.PATE, "capc": histograms.CAPC,
            "private_knn": histograms.PRIVATE_KNN}
MODEL_TYPES = {"pate": histograms.PateModel, "capc": histograms.CapcModel,
               "private_knn": histograms.KnnModel}


@dataclasses.dataclass(frozen=True)
class PredictionAuditConfig:
  """How hard to audit.

  Attributes:
    algorithm: "pate", "capc" or "private_knn" (the histogram model family).
    sigma: noise standard deviation of the noisy argmax (> 0).
    num_trials: Monte Carlo runs per query and per side (>= 4; half select the 2-cut set).
    orders: Renyi orders alpha > 1, increasing.
    significance: beta of the 1 - beta confidence of the composed audit bounds.
    k_cut_method: "sison-glaz" or "goodman".
    num_histograms: histograms sampled per query and side for the exact mixture divergence.
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
  sampling_rate: float | None = None
  delta: float = 1e-6
  chunk_size: int = 2**16

  def __post_init__(self):
    object.__setattr__(self, "orders", tuple(float(v) for v in self.orders))
    _validate.check_choice("algorithm", self.algorithm, ALGORITHMS)
    _validate.check_range("sigma", self.sigma, 0.0, low_open=True)
    _validate.check_range("num_trials", self.num_trials, 4)
    _validate.check_nonempty("orders", self.orders)
    _validate.check_orders(self.orders)
    if list(self.orders) != sorted(set(self.orders)):
      raise ValueError(f"orders={list(self.orders)} must be strictly increasing")
    _validate.check_significance(self.significance)
    _validate.check_choice("k_cut_method", self.k_cut_method, renyi_cuts.K_CUT_METHODS)
    _validate.check_range("num_histograms", self.num_histograms, 2)
    if self.algorithm == "private_knn":
      if self.sampling_rate is None:
        raise ValueError("sampling_rate is required for algorithm='private_knn' (gamma in "
                         "(0, 1])")
      _validate.check_range("sampling_rate", self.sampling_rate, 0.0, 1.0, low_open=True)
    _validate.check_range("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)
    _validate.check_range("chunk_size", self.chunk_size, 1)


@dataclasses.dataclass(frozen=True)
class QueryBounds:
  """Per-query RDP curves, each ``(num_queries, num_orders)``."""
  two_cut: np.ndarray
  k_cut: np.ndarray
  exact: np.ndarray
  data_dependent: np.ndarray
  data_independent: np.ndarray


@dataclasses.dataclass(frozen=True)
class PredictionAuditResult:
  """Everything the audit measured; ``to_dict()`` gives plain Python values."""
  config: PredictionAuditConfig
  per_query: QueryBounds
  composed: dict[str, np.ndarray]  # curve name -> (num_orders,), summed over queries
  worst_query: dict[str, np.ndarray]  # order-wise maximum over queries
  average_query: dict[str, np.ndarray]  # order-wise mean over queries
  epsilon: dict[str, float]  # composed upper-bound curves through Thm. 1
  audit_curves_through_thm1: dict[str, float]  # display only: not lower bounds on epsilon
  class_probabilities: np.ndarray  # (num_queries, 2, C): mixture Pr[c] on S and S'
  class_probabilities_standard_error: np.ndarray  # (num_queries, 2, C)
  counts: np.ndarray  # (num_queries, 2, C): released classes over all trials, S and S'

  @property
  def num_queries(self) -> int:
    return self.per_query.exact.shape[0]

  def to_dict(self) -> dict[str, Any]:
    plain = noisy_argmax_audit.to_plain
    return {"config": plain(dataclasses.asdict(self.config)),
            "num_queries": self.num_queries,
            "per_query": plain(dataclasses.asdict(self.per_query)),
            "composed": plain(self.composed), "worst_query": plain(self.worst_query),
            "average_query": plain(self.average_query), "epsilon": plain(self.epsilon),
            "audit_curves_through_thm1": plain(self.audit_curves_through_thm1),
            "class_probabilities": plain(self.class_probabilities),
            "class_probabilities_standard_error": plain(
                self.class_probabilities_standard_error),
            "counts": plain(self.counts)}


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
  words = jax.random.bits(key, (num_histograms, family.num_words(model)), jnp.uint32)
  hists = jax.vmap(lambda w: family.from_words(w, model, neighbor))(words)
  probs = np.asarray(accounting.noisy_argmax_class_probabilities(
      jnp.asarray(hists, jnp.result_type(float)), sigma), np.float64)
  return probs.mean(axis=0), probs.std(axis=0, ddof=1) / math.sqrt(num_histograms)


def _expected_histogram(family: histograms.Family, model, key, num_histograms: int):
  words = jax.random.bits(key, (num_histograms, family.num_words(model)), jnp.uint32)
  hists = jax.vmap(lambda w: family.from_words(w, model, False))(words)
  return np.asarray(hists, np.float64).mean(axis=0)


def data_independent_rdp(config: PredictionAuditConfig) -> np.ndarray:
  """The algorithm's data-independent RDP per query (see the module docstring)."""
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


def run(key: jax.Array, models: Sequence[Any], config: PredictionAuditConfig, *,
        progress: Callable[[int, int], None] | None = None) -> PredictionAuditResult:
  """Audits a sequence of queries, one histogram model each (all of ``config.algorithm``'s
  type and of one shape, e.g. tables built with a common ``window``, so that one compiled
  program serves every query).

  Args:
    key: PRNG key; every query's Monte Carlo runs and histogram samples split from it.
    models: per query, a :class:`~dpaudit.mechanisms.histograms.PateModel`, ``CapcModel`` or
      ``KnnModel``, matching ``config.algorithm``.
    config: the audit configuration.
    progress: optional ``progress(done, total)`` over all queries' trials.

  Returns:
    :class:`PredictionAuditResult`.
  """
  models = list(models)
  if not models:
    raise ValueError("models is empty; need one histogram model per query")
  expected = MODEL_TYPES[config.algorithm]
  for i, model in enumerate(models):
    if not isinstance(model, expected):
      raise ValueError(f"models[{i}] is a {type(model).__name__}; algorithm="
                       f"'{config.algorithm}' needs {expected.__name__}")
  family = FAMILIES[config.algorithm]
  orders = jnp.asarray(config.orders)
  beta = config.significance / len(models)  # Bonferroni over the queries
  release_s = _RELEASES[(config.algorithm, False)]
  release_n = _RELEASES[(config.algorithm, True)]
  total = 4 * len(models) * (config.num_trials // 2)
  done = [0]

  def query_progress(trials_done, trials):
    if progress is not None and trials_done == trials:
      done[0] += trials
      progress(min(done[0], total), total)

  curves = {name: [] for name in ("two_cut", "k_cut", "exact", "data_dependent")}
  probabilities, errors, all_counts = [], [], []
  for q, model in enumerate(models):
    key_q = jax.random.fold_in(key, q)
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
    # Common random numbers: both sides from the same words, so that their sampling errors
    # are correlated and bias the plug-in divergence far less (zero when S' changes nothing).
    p_s, se_s = mixture_class_probabilities(key_mix, family, model, False, config.sigma,
                                            config.num_histograms)
    p_n, se_n = mixture_class_probabilities(key_mix, family, model, True, config.sigma,
                                            config.num_histograms)
    exact = renyi_cuts.renyi_divergence(jnp.asarray(p_s), jnp.asarray(p_n), orders)
    mean_hist = _expected_histogram(family, model, key_mean, config.num_histograms)
    dd = accounting.gnmax_data_dependent_rdp(jnp.asarray(mean_hist), config.sigma, orders)
    for name, value in (("two_cut", two_cut), ("k_cut", k_cut), ("exact", exact),
                        ("data_dependent", dd)):
      curves[name].append(np.asarray(value, np.float64))
    probabilities.append(np.stack([p_s, p_n]))
    errors.append(np.stack([se_s, se_n]))
    all_counts.append(np.stack([np.asarray(all_s), np.asarray(all_n)]).astype(np.int64))

  di = data_independent_rdp(config)
  per_query = QueryBounds(**{name: np.stack(v) for name, v in curves.items()},
                          data_independent=np.tile(di, (len(models), 1)))
  names = ("two_cut", "k_cut", "exact", "data_dependent", "data_independent")
  stacked = {name: getattr(per_query, name) for name in names}
  composed = {name: np.asarray(rdp_lib.compose_rdp(jnp.asarray(v)), np.float64)
              for name, v in stacked.items()}
  upper = {name: composed[name] for name in ("exact", "data_dependent", "data_independent")}
  audits = {name: composed[name] for name in ("two_cut", "k_cut")}
  epsilon, _ = noisy_argmax_audit.epsilon_table(upper, config.orders, 1, config.delta)
  through_thm1, _ = noisy_argmax_audit.epsilon_table(audits, config.orders, 1, config.delta)
  return PredictionAuditResult(
      config=config, per_query=per_query, composed=composed,
      worst_query={name: v.max(axis=0) for name, v in stacked.items()},
      average_query={name: v.mean(axis=0) for name, v in stacked.items()},
      epsilon=epsilon, audit_curves_through_thm1=through_thm1,
      class_probabilities=np.stack(probabilities), class_probabilities_standard_error=np.stack(
          errors), counts=np.stack(all_counts))
