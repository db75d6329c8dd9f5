"""Renyi-DP audit of the noisy argmax mechanism (Sec. 4.2 and App. C of Chadha et al.).

The game: run the black-box mechanism ``argmax(H + N(0, sigma^2 I))`` many times on a histogram
H and on a neighbouring histogram H', count the released classes, and turn the counts into
lower bounds on the Renyi divergence of the two output distributions at each order alpha:

* **2-cut** (Eq. (3), App. C first display): the output set O is chosen on a *selection* half of
  the trials (the likelihood-ratio prefix set with the best bound there) and the Clopper-Pearson
  bound is evaluated on the other, *evaluation*, half, so the choice never peeks at the data
  that certifies it. Valid at every sample size.
* **k-cut** (Eq. (5)): the partition into the k classes, with simultaneous multinomial
  intervals (Sison-Glaz or Goodman) on all trials. Asymptotically valid.
* **bootstrap** variants of both (App. C): *asymptotic* estimates, not finite-sample bounds;
  each carries a ``trusted`` flag per order (the rule of
  :class:`dpaudit.estimators.BootstrapBound`, from the README's coverage study).

They are held against the exact divergence (Eq. (4) by quadrature) and the GNMax theory bounds
of Papernot et al. (2018) (data-independent and data-dependent), order by order, as in Figs. 2
and 6. The exact and theory curves, composed over ``num_queries`` queries, are converted to
upper bounds on (epsilon, delta) with Thm. 1. Thm. 1 is an upper-bound conversion: applied to
the audits' lower-bound curves it gives no lower bound on epsilon, so those images are stored
apart (``audit_curves_through_thm1``), labelled as such, for comparing curves only.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate, accounting, montecarlo, results
from dpaudit.estimators import rdp as rdp_lib
from dpaudit.estimators import renyi_cuts
from dpaudit.mechanisms import noisy_argmax
from dpaudit.results import to_plain

DEFAULT_ORDERS = (1.1, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0,
                  20.0, 24.0, 32.0, 48.0, 64.0)
FIG6_HISTOGRAM = (14.0, 12.0, 10.0, 8.0, 6.0)
FIG6_NEIGHBOR = (13.0, 13.0, 10.0, 8.0, 6.0)


def check_audit_settings(sigma, num_trials, orders, significance, k_cut_method) -> None:
  """The settings every noisy-argmax audit shares: a finite sigma > 0 (at sigma = inf the
  simulated mechanism stops matching the exact law it is held against), a whole number of at
  least 4 trials, strictly increasing orders > 1, a significance in (0, 1) and a known k-cut
  method."""
  _validate.check_range("sigma", sigma, 0.0, low_open=True, finite=True)
  _validate.check_integer("num_trials", num_trials, 4)
  _validate.check_nonempty("orders", orders)
  _validate.check_orders(orders)
  if list(orders) != sorted(set(orders)):
    raise ValueError(f"orders={list(orders)} must be strictly increasing")
  _validate.check_significance(significance)
  _validate.check_choice("k_cut_method", k_cut_method, renyi_cuts.K_CUT_METHODS)


def check_resample_sizes(num_bootstrap, chunk_size, num_classes: int, num_orders: int) -> None:
  """Whole numbers >= 1 whose arrays fit in memory, checked before any Monte Carlo trial runs:
  the bootstraps hold (num_bootstrap, sets or classes, orders) float64 arrays, a Monte Carlo
  chunk one noise vector per trial."""
  _validate.check_integer("num_bootstrap", num_bootstrap, 1)
  per_resample = 8 * max(num_classes, num_orders) * (8 + 2 * num_orders)
  _validate.check_allocation("num_bootstrap", num_bootstrap, per_resample, what="resample")
  _validate.check_integer("chunk_size", chunk_size, 1)
  _validate.check_allocation("chunk_size", chunk_size, 8 * (num_classes + 4), what="trial")


@dataclasses.dataclass(frozen=True)
class NoisyArgmaxAuditConfig:
  """What to audit and how hard.

  Attributes:
    histogram: vote histogram H (one entry per class, >= 2 classes).
    neighbor: neighbouring histogram H' (same number of classes).
    sigma: standard deviation of the Gaussian noise (> 0).
    num_trials: Monte Carlo runs of the mechanism per histogram (>= 4); half select the
      2-cut sets, half evaluate them; the k-cut uses all of them.
    orders: Renyi orders alpha > 1, increasing.
    significance: beta of the 1 - beta confidence of each bound (per order).
    k_cut_method: simultaneous intervals for the k-cut, "sison-glaz" or "goodman".
    num_bootstrap: resamples for the bootstrap bounds (>= 1).
    num_queries: n_Q, the number of (identical) queries composed for the (eps, delta) display.
    delta: delta of the displayed (eps, delta) conversion (Thm. 1), in (0, 1).
    chunk_size: Monte Carlo trials per vmapped chunk (memory knob).
  """
  histogram: tuple[float, ...] = FIG6_HISTOGRAM
  neighbor: tuple[float, ...] = FIG6_NEIGHBOR
  sigma: float = 2.0
  num_trials: int = 10**7
  orders: tuple[float, ...] = DEFAULT_ORDERS
  significance: float = 0.05
  k_cut_method: str = "sison-glaz"
  num_bootstrap: int = 1000
  num_queries: int = 1
  delta: float = 1e-6
  chunk_size: int = 2**16

  def __post_init__(self):
    for name in ("histogram", "neighbor", "orders"):
      object.__setattr__(self, name, _validate.float_tuple(name, getattr(self, name)))
    if len(self.histogram) < 2:
      raise ValueError(f"histogram={list(self.histogram)} has {len(self.histogram)} classes; "
                       "need at least 2")
    if len(self.neighbor) != len(self.histogram):
      raise ValueError(f"neighbor has {len(self.neighbor)} classes but histogram has "
                       f"{len(self.histogram)}; they must match")
    check_audit_settings(self.sigma, self.num_trials, self.orders, self.significance,
                         self.k_cut_method)
    check_resample_sizes(self.num_bootstrap, self.chunk_size, len(self.histogram),
                         len(self.orders))
    _validate.check_integer("num_queries", self.num_queries, 1)
    _validate.check_range("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)

  @property
  def num_classes(self) -> int:
    return len(self.histogram)


@dataclasses.dataclass(frozen=True)
class DirectionResult:
  """Bounds on one direction, D_alpha(M(P) || M(Q)), per order."""
  exact: np.ndarray
  two_cut: np.ndarray
  k_cut: np.ndarray
  two_cut_bootstrap: np.ndarray  # asymptotic estimate, see two_cut_bootstrap_trusted
  k_cut_bootstrap: np.ndarray  # asymptotic estimate, see k_cut_bootstrap_trusted
  data_dependent: np.ndarray
  two_cut_sets: np.ndarray  # (num_orders, num_classes) bool: the set O chosen per order
  two_cut_bootstrap_trusted: np.ndarray  # (num_orders,) bool
  k_cut_bootstrap_trusted: np.ndarray  # (num_orders,) bool

  # The keys of NoisyArgmaxAuditResult.to_dict per field (the reverse direction's end in
  # "_reverse").
  KEYS = {"exact": "exact_renyi", "two_cut": "two_cut_lower_bound",
          "k_cut": "k_cut_lower_bound", "two_cut_bootstrap": "two_cut_bootstrap_asymptotic",
          "k_cut_bootstrap": "k_cut_bootstrap_asymptotic",
          "data_dependent": "data_dependent_rdp", "two_cut_sets": "two_cut_sets",
          "two_cut_bootstrap_trusted": "two_cut_bootstrap_trusted",
          "k_cut_bootstrap_trusted": "k_cut_bootstrap_trusted"}

  @classmethod
  def from_dict(cls, stored: Mapping[str, Any], num_orders: int, num_classes: int,
                suffix: str = "") -> DirectionResult:
    """One direction from :meth:`NoisyArgmaxAuditResult.to_dict`'s keys (ending in
    ``suffix``), each array checked for its shape and kind."""
    out = {}
    for field, name in cls.KEYS.items():
      shape = (num_orders, num_classes) if field == "two_cut_sets" else (num_orders,)
      kind = bool if field in ("two_cut_sets", "two_cut_bootstrap_trusted",
                               "k_cut_bootstrap_trusted") else float
      out[field] = _stored_array(stored, name + suffix, shape, kind)
    return cls(**out)


@dataclasses.dataclass(frozen=True)
class NoisyArgmaxAuditResult:
  """Everything the audit measured; ``to_dict()`` gives plain Python values."""
  config: NoisyArgmaxAuditConfig
  forward: DirectionResult   # D_alpha(M(H) || M(H'))
  reverse: DirectionResult   # D_alpha(M(H') || M(H))
  data_independent_rdp: np.ndarray
  class_probabilities: np.ndarray
  class_probabilities_neighbor: np.ndarray
  counts: dict[str, np.ndarray]
  epsilon: dict[str, float]  # Thm. 1 upper bounds from the exact and theory curves
  epsilon_order: dict[str, float]
  audit_curves_through_thm1: dict[str, float]  # NOT lower bounds; for comparing curves

  @property
  def warnings(self) -> list[str]:
    """One line per condition under which a reported number is not to be trusted."""
    out = []
    for label, direction in (("forward", self.forward), ("reverse", self.reverse)):
      for name in ("two_cut_bootstrap", "k_cut_bootstrap"):
        untrusted = ~np.asarray(getattr(direction, f"{name}_trusted"), bool)
        if np.any(untrusted):
          orders = ", ".join(f"{a:g}" for a in self.orders[untrusted])
          out.append(f"{name} ({label}) is not to be trusted at orders {orders}: "
                     "too few trials or a divergence too close to 0 for the asymptotics")
    return out

  @property
  def orders(self) -> np.ndarray:
    return np.asarray(self.config.orders)

  def to_dict(self) -> dict[str, Any]:
    f, r = self.forward, self.reverse
    out = {
        "orders": self.orders,
        "num_trials": self.config.num_trials,
        "exact_renyi": f.exact,
        "exact_renyi_reverse": r.exact,
        "two_cut_lower_bound": f.two_cut,
        "two_cut_lower_bound_reverse": r.two_cut,
        "k_cut_lower_bound": f.k_cut,
        "k_cut_lower_bound_reverse": r.k_cut,
        "two_cut_bootstrap_asymptotic": f.two_cut_bootstrap,
        "two_cut_bootstrap_asymptotic_reverse": r.two_cut_bootstrap,
        "two_cut_bootstrap_trusted": f.two_cut_bootstrap_trusted,
        "two_cut_bootstrap_trusted_reverse": r.two_cut_bootstrap_trusted,
        "k_cut_bootstrap_asymptotic": f.k_cut_bootstrap,
        "k_cut_bootstrap_asymptotic_reverse": r.k_cut_bootstrap,
        "k_cut_bootstrap_trusted": f.k_cut_bootstrap_trusted,
        "k_cut_bootstrap_trusted_reverse": r.k_cut_bootstrap_trusted,
        "data_independent_rdp": self.data_independent_rdp,
        "data_dependent_rdp": f.data_dependent,
        "data_dependent_rdp_reverse": r.data_dependent,
        "two_cut_sets": f.two_cut_sets,
        "two_cut_sets_reverse": r.two_cut_sets,
        "class_probabilities": self.class_probabilities,
        "class_probabilities_neighbor": self.class_probabilities_neighbor,
        "counts": self.counts,
        "epsilon_upper_bound": self.epsilon,
        "epsilon_upper_bound_order": self.epsilon_order,
        "audit_curves_through_thm1": self.audit_curves_through_thm1,
        "meaning": MEANING,
        "warnings": self.warnings,
        "config": dataclasses.asdict(self.config),
    }
    return to_plain(out)

  @classmethod
  def from_dict(cls, stored: Mapping[str, Any]) -> NoisyArgmaxAuditResult:
    """The result whose :meth:`to_dict` (after a strict-JSON round trip) is ``stored``: the
    config, both directions and every array checked for its shape and kind (the validator of
    a stored run, :func:`dpaudit.results.stored_run`). Raises KeyError, TypeError or
    ValueError on a damaged dict."""
    results.check_fields("noisy argmax result", stored, {
        "config": dict, "orders": list, "num_trials": int, "counts": dict,
        "epsilon_upper_bound": dict, "epsilon_upper_bound_order": dict,
        "audit_curves_through_thm1": dict})
    config = NoisyArgmaxAuditConfig(**stored["config"])
    if (stored["num_trials"] != config.num_trials
        or [float(a) for a in stored["orders"]] != list(config.orders)):
      raise ValueError("the stored num_trials and orders are not those of its config")
    k, c = len(config.orders), config.num_classes
    counts = results.check_fields("counts", stored["counts"],
                                  dict.fromkeys(("sel_p", "eval_p", "sel_q", "eval_q"), list))
    floats = lambda name: {str(n): float(v) for n, v in results.check_fields(
        name, stored[name], dict.fromkeys(stored[name], float)).items()}
    return cls(
        config=config,
        forward=DirectionResult.from_dict(stored, k, c),
        reverse=DirectionResult.from_dict(stored, k, c, "_reverse"),
        data_independent_rdp=_stored_array(stored, "data_independent_rdp", (k,), float),
        class_probabilities=_stored_array(stored, "class_probabilities", (c,), float),
        class_probabilities_neighbor=_stored_array(stored, "class_probabilities_neighbor",
                                                   (c,), float),
        counts={name: _stored_array(counts, name, (c,), int) for name in counts},
        epsilon=floats("epsilon_upper_bound"),
        epsilon_order=floats("epsilon_upper_bound_order"),
        audit_curves_through_thm1=floats("audit_curves_through_thm1"))


def _stored_array(stored: Mapping[str, Any], name: str, shape: tuple[int, ...],
                  kind: type) -> np.ndarray:
  """``stored[name]`` as an array of ``shape``: float64 (numbers), bool or int64."""
  if name not in stored:
    raise KeyError(f"the stored result has no {name!r}")
  array = np.asarray(stored[name])
  allowed = {float: "biuf", int: "iu", bool: "b"}[kind]
  if array.shape != shape or array.dtype.kind not in allowed or (
      kind is float and array.dtype.kind == "b"):
    raise ValueError(f"the stored {name} must be {kind.__name__}s of shape {shape}, got "
                     f"{array.dtype} of shape {array.shape}")
  return array.astype({float: np.float64, int: np.int64, bool: bool}[kind])


Config = NoisyArgmaxAuditConfig
Result = NoisyArgmaxAuditResult


MEANING = {
    "exact_renyi": "exact Renyi divergence of the two output distributions (Eq. (4))",
    "two_cut_lower_bound": "lower bound, finite-sample, 1 - significance per order "
                           "(Clopper-Pearson 2-cut, set chosen on held-out trials)",
    "k_cut_lower_bound": "lower bound, asymptotic (simultaneous multinomial intervals), "
                         "1 - significance per order",
    "two_cut_bootstrap_asymptotic": "asymptotic estimate, not a finite-sample lower bound "
                                    "(percentile bootstrap); see two_cut_bootstrap_trusted",
    "k_cut_bootstrap_asymptotic": "asymptotic estimate, not a finite-sample lower bound "
                                  "(percentile bootstrap); see k_cut_bootstrap_trusted",
    "data_independent_rdp": "upper bound (GNMax theory, Papernot et al. 2018)",
    "data_dependent_rdp": "upper bound (GNMax data-dependent theory, Papernot et al. 2018)",
    "epsilon_upper_bound": "upper bound on epsilon at delta after num_queries queries "
                           "(Thm. 1 applied to the exact and theory curves)",
    "audit_curves_through_thm1": "NOT a lower bound on epsilon: Thm. 1 (an upper-bound "
                                 "conversion) applied to the audits' curves, for comparing "
                                 "curves only",
    "epsilon_zero": "an epsilon of 0.0 means the curve is 0 at every order: no leakage "
                    "measured (Thm. 1's floor, 0.138 at delta = 1e-6, is not applied)",
}


def _check_class_counts(**counts) -> None:
  """Class counts: 1-D real numbers >= 0, finite (not booleans; expected counts of a
  Rao-Blackwellised estimate need not be whole), at least 2 classes, the same number each."""
  shapes = set()
  for name, value in counts.items():
    if np.ndim(value) != 1 or np.shape(value)[0] < 2:
      raise ValueError(f"{name} must be 1-D with at least 2 classes, got shape {np.shape(value)}")
    _validate.check_not_boolean(name, value)
    _validate.check_range(name, value, 0.0, finite=True)
    shapes.add(np.shape(value))
  if len(shapes) > 1:
    names = " and ".join(counts)
    raise ValueError(f"{names} must have the same number of classes, got shapes "
                     f"{[np.shape(v) for v in counts.values()]}")


def likelihood_ratio_prefix_sets(counts_p: jax.Array, counts_q: jax.Array) -> jax.Array:
  """Candidate 2-cut sets: the classes sorted by estimated ratio p/q, every proper prefix.

  The 2-cut is a convex function of (P(O), Q(O)), so over all sets it is maximised at a
  likelihood-ratio level set (a Neyman-Pearson region); with k classes that leaves k - 1
  candidates instead of 2^k. Counts are smoothed by 1/2 so empty classes have a finite ratio.

  Returns:
    (k - 1, k) boolean masks; row j holds the j + 1 classes with the largest ratio.
  """
  _check_class_counts(counts_p=counts_p, counts_q=counts_q)
  counts_p = jnp.asarray(counts_p, jnp.result_type(float))
  counts_q = jnp.asarray(counts_q, jnp.result_type(float))
  log_ratio = (jnp.log(counts_p + 0.5) - jnp.log(jnp.sum(counts_p) + 0.5)
               - jnp.log(counts_q + 0.5) + jnp.log(jnp.sum(counts_q) + 0.5))
  rank = jnp.argsort(jnp.argsort(-log_ratio, stable=True))
  num_classes = counts_p.shape[-1]
  return rank[None, :] <= jnp.arange(num_classes - 1)[:, None]


def select_two_cut_sets(sel_p, sel_q, orders, significance) -> jax.Array:
  """Per order, the prefix set whose 2-cut lower bound is best on the selection counts."""
  _check_class_counts(sel_p=sel_p, sel_q=sel_q)
  _validate.check_orders(orders)
  _validate.check_significance(significance)
  candidates = likelihood_ratio_prefix_sets(sel_p, sel_q)
  in_p = candidates.astype(sel_p.dtype) @ sel_p
  in_q = candidates.astype(sel_q.dtype) @ sel_q
  bounds = renyi_cuts.renyi_two_cut_lower_bound(in_p, jnp.sum(sel_p), in_q, jnp.sum(sel_q),
                                                orders, significance)  # (k - 1, num_orders)
  best = jnp.argmax(bounds, axis=0)
  return candidates[best]


def _set_counts(sets, counts):
  return sets.astype(counts.dtype) @ counts


def _direction(key, sel_p, eval_p, sel_q, eval_q, exact, data_dependent, config):
  """All empirical bounds on D_alpha(P || Q) from the four count vectors."""
  orders = jnp.asarray(config.orders)
  beta = config.significance
  sets = select_two_cut_sets(sel_p, sel_q, orders, beta)
  in_p, in_q = _set_counts(sets, eval_p), _set_counts(sets, eval_q)
  n_p, n_q = jnp.sum(eval_p), jnp.sum(eval_q)
  # Each order has its own set: evaluate all sets at all orders and keep the diagonal.
  two_cut = jnp.diagonal(renyi_cuts.renyi_two_cut_lower_bound(in_p, n_p, in_q, n_q, orders, beta))
  key_two, key_k = jax.random.split(key)
  two_cut_boot = renyi_cuts.renyi_two_cut_bootstrap(key_two, in_p, n_p, in_q, n_q, orders, beta,
                                                    config.num_bootstrap)
  all_p, all_q = sel_p + eval_p, sel_q + eval_q
  k_cut = renyi_cuts.renyi_k_cut_lower_bound(all_p, all_q, orders, beta, config.k_cut_method)
  k_cut_boot = renyi_cuts.renyi_k_cut_bootstrap(key_k, all_p, all_q, orders, beta,
                                                config.num_bootstrap)
  as_np = lambda x: np.asarray(x, np.float64)
  return DirectionResult(exact=as_np(exact), two_cut=as_np(two_cut), k_cut=as_np(k_cut),
                         two_cut_bootstrap=as_np(jnp.diagonal(two_cut_boot.lower_bound)),
                         k_cut_bootstrap=as_np(k_cut_boot.lower_bound),
                         data_dependent=as_np(data_dependent), two_cut_sets=np.asarray(sets),
                         two_cut_bootstrap_trusted=np.asarray(jnp.diagonal(two_cut_boot.trusted)),
                         k_cut_bootstrap_trusted=np.asarray(k_cut_boot.trusted))


def data_independent_rdp(histogram, neighbor, sigma, orders) -> np.ndarray:
  r"""RDP of releasing the whole noisy histogram: :math:`\alpha\|H - H'\|_2^2 / (2\sigma^2)`.

  For neighbours that differ by one moved vote this is the GNMax bound
  :math:`\alpha/\sigma^2` of Papernot et al. (2018, Prop. 8), computed by
  :func:`dpaudit.accounting.gnmax_data_independent_rdp`; other pairs (e.g. one added vote in
  Private-kNN) are scaled by their squared L2 distance over 2.
  """
  histogram = _validate.float_tuple("histogram", histogram)
  neighbor = _validate.float_tuple("neighbor", neighbor)
  if len(histogram) != len(neighbor) or len(histogram) < 2:
    raise ValueError(f"histogram and neighbor must have the same number (>= 2) of classes, got "
                     f"{len(histogram)} and {len(neighbor)}")
  sq_distance = float(np.sum((np.asarray(histogram) - np.asarray(neighbor)) ** 2))
  per_moved_vote = np.asarray(accounting.gnmax_data_independent_rdp(sigma, jnp.asarray(orders)))
  return per_moved_vote * sq_distance / 2.0


NO_LEAKAGE = "0 (no leakage measured)"


def thm1_epsilon(curves, orders, delta: float, num_queries: int = 1
                 ) -> tuple[np.ndarray, np.ndarray]:
  r"""Thm. 1 of RDP curves ``(..., num_orders)``, each composed over ``num_queries`` identical
  queries: ``(epsilon, order)`` of the batch shape. The one rule by which every display turns
  a curve into an epsilon (:func:`epsilon_table`, the private-prediction audit, the tables and
  plots of both experiments).

  A curve that is 0 at every order gives epsilon 0.0 (order NaN): "no leakage measured" for an
  audit's lower-bound curve, and equal output laws, (0, 0)-DP, for an exact or theory curve.
  Thm. 1 itself never reaches 0 there: its floor :math:`\min_\alpha \log(1/\delta)/(\alpha - 1)
  + \dots` (0.138 at delta = 1e-6 over orders up to 64) would read as leakage."""
  _validate.check_integer("num_queries", num_queries, 1)
  rdp_lib.check_rdp_curve(curves, orders, name="curves")
  curves = np.asarray(curves, np.float64) * num_queries
  converted = rdp_lib.rdp_to_epsilon(curves, jnp.asarray(orders), delta)
  zero = np.all(curves == 0.0, axis=-1)
  return (np.where(zero, 0.0, np.asarray(converted.epsilon, np.float64)),
          np.where(zero, np.nan, np.asarray(converted.order, np.float64)))


def thm1_floor(orders, delta: float) -> float:
  """The least epsilon Thm. 1 gives any curve that is not 0 at every order: its image of a
  curve that tends to 0 at ``orders`` and ``delta``. A displayed epsilon near it says "almost
  no leakage measured", not leakage.

  >>> round(thm1_floor([1.5, 2, 4, 8, 16, 32, 64], 1e-6), 3)
  0.138
  """
  rdp_lib.check_rdp_curve(np.zeros(len(orders)), orders, name="zeros at orders")
  converted = rdp_lib.rdp_to_epsilon(np.zeros(len(orders)), jnp.asarray(orders), delta)
  return float(converted.epsilon)


def format_epsilon(value, digits: int = 3) -> str:
  """An epsilon for display: exactly 0 (:func:`thm1_epsilon` of a curve that is 0 at every
  order) reads ``NO_LEAKAGE``, never Thm. 1's floor. ``value`` is a number or a
  :func:`dpaudit.results.spread` summary of repetitions (``median [min, max]``; all 0 reads
  ``NO_LEAKAGE``)."""
  from dpaudit import results
  if not isinstance(value, dict):
    value = {"n": 1, "median": float(value), "min": float(value), "max": float(value)}
  return NO_LEAKAGE if value["max"] == 0.0 else results.format_spread(value, digits)


def epsilon_table(curves: dict[str, np.ndarray], orders, num_queries: int,
                  delta: float) -> tuple[dict[str, float], dict[str, float]]:
  """Composes each per-query RDP curve over ``num_queries`` and converts it with Thm. 1
  (:func:`thm1_epsilon`: a curve that is 0 at every order gives 0.0, order NaN)."""
  if not isinstance(curves, dict):
    raise ValueError(f"curves must be a dict of name -> RDP curve, got {type(curves).__name__}")
  _validate.check_integer("num_queries", num_queries, 1)
  for name, curve in curves.items():
    rdp_lib.check_rdp_curve(curve, orders, name=f"curves[{name!r}]")
  epsilon, best_order = {}, {}
  for name, curve in curves.items():
    eps, order = thm1_epsilon(curve, orders, delta, num_queries)
    epsilon[name] = float(eps)
    best_order[name] = float(order)
  return epsilon, best_order


def run(key: jax.Array, config: NoisyArgmaxAuditConfig, *,
        progress: results.Progress | None = None, store: results.CellStore | None = None,
        checkpoint_dir: str | None = None) -> NoisyArgmaxAuditResult:
  """Runs the audit (Sec. 4.2 and App. C of Chadha et al.).

  Args:
    key: PRNG key; the four Monte Carlo runs and the bootstraps use keys split from it.
    config: the audit configuration.
    progress: optional :class:`dpaudit.results.Progress`, told the trials done of the
      ``2 * num_trials`` (both histograms) after each compiled Monte Carlo call, and once more
      when the bounds are computed.
    store: optional :class:`dpaudit.results.CellStore`: the result of this key and
      configuration is reused from it when whole, else computed and stored
      (:func:`dpaudit.results.stored_run`).
    checkpoint_dir: optional directory for Monte Carlo checkpoints; a rerun with the same key
      and configuration resumes each run where it stopped.

  Returns:
    :class:`NoisyArgmaxAuditResult`.

  >>> config = NoisyArgmaxAuditConfig(num_trials=1000, orders=(2.0,), num_bootstrap=10)
  >>> result = run(jax.random.key(0), config)
  >>> bool(result.forward.two_cut[0] <= result.forward.exact[0])
  True
  """
  _validate.check_key(key)
  if not isinstance(config, NoisyArgmaxAuditConfig):
    raise ValueError(f"config must be a NoisyArgmaxAuditConfig, got {type(config).__name__}")
  if progress is not None and not callable(progress):
    raise ValueError("progress must be a function progress(done, total, message)")
  if store is not None and not isinstance(store, results.CellStore):
    raise ValueError(f"store must be a dpaudit.results.CellStore, got {type(store).__name__}")
  total = 2 * config.num_trials
  named = {"key": results.key_data(key), "config": to_plain(dataclasses.asdict(config))}
  result = results.stored_run(store, named, "noisy_argmax",
                              lambda: _audit(key, config, progress, checkpoint_dir),
                              NoisyArgmaxAuditResult)
  results.report(progress, total, total, "bounds computed")
  return result


def _audit(key, config, progress, checkpoint_dir) -> NoisyArgmaxAuditResult:
  """The work of :func:`run` (arguments checked)."""
  orders = jnp.asarray(config.orders)
  histogram = jnp.asarray(config.histogram, jnp.float32)
  neighbor = jnp.asarray(config.neighbor, jnp.float32)
  half = config.num_trials // 2
  keys = dict(zip(("sel_p", "eval_p", "sel_q", "eval_q", "boot_fwd", "boot_rev"),
                  jax.random.split(key, 6)))
  runs = {"sel_p": (histogram, half), "eval_p": (histogram, config.num_trials - half),
          "sel_q": (neighbor, half), "eval_q": (neighbor, config.num_trials - half)}
  counts, before = {}, 0
  for name, (hist, trials) in runs.items():
    path = os.path.join(checkpoint_dir, f"{name}.npz") if checkpoint_dir else None
    tag = f"noisy_argmax:{list(np.asarray(hist))}:{config.sigma}:float32"
    tell = None if progress is None else (
        lambda done, n, name=name, before=before: progress(
            before + done, 2 * config.num_trials, f"{name}: {done:,}/{n:,} trials"))
    counts[name] = montecarlo.count_outcomes(
        noisy_argmax, keys[name], trials, config.num_classes, args=(hist, config.sigma),
        chunk_size=config.chunk_size, checkpoint_path=path, checkpoint_tag=tag, progress=tell)
    before += trials
  c = {name: jnp.asarray(v, jnp.result_type(float)) for name, v in counts.items()}

  hist64 = jnp.asarray(config.histogram, jnp.result_type(float))
  neigh64 = jnp.asarray(config.neighbor, jnp.result_type(float))
  exact = accounting.noisy_argmax_renyi(hist64, neigh64, config.sigma, orders)
  dd_forward = accounting.gnmax_data_dependent_rdp(hist64, config.sigma, orders)
  dd_reverse = accounting.gnmax_data_dependent_rdp(neigh64, config.sigma, orders)
  forward = _direction(keys["boot_fwd"], c["sel_p"], c["eval_p"], c["sel_q"], c["eval_q"],
                       exact.forward, dd_forward, config)
  reverse = _direction(keys["boot_rev"], c["sel_q"], c["eval_q"], c["sel_p"], c["eval_p"],
                       exact.reverse, dd_reverse, config)
  di = data_independent_rdp(config.histogram, config.neighbor, config.sigma, config.orders)
  upper = {"exact": forward.exact, "data_dependent": forward.data_dependent,
           "data_independent": di}
  epsilon, epsilon_order = epsilon_table(upper, config.orders, config.num_queries, config.delta)
  audits = {"two_cut": forward.two_cut, "k_cut": forward.k_cut,
            "two_cut_bootstrap": forward.two_cut_bootstrap,
            "k_cut_bootstrap": forward.k_cut_bootstrap}
  through_thm1, _ = epsilon_table(audits, config.orders, config.num_queries, config.delta)
  return NoisyArgmaxAuditResult(
      config=config, forward=forward, reverse=reverse, data_independent_rdp=di,
      class_probabilities=np.asarray(accounting.noisy_argmax_class_probabilities(
          hist64, config.sigma)),
      class_probabilities_neighbor=np.asarray(accounting.noisy_argmax_class_probabilities(
          neigh64, config.sigma)),
      counts=counts, epsilon=epsilon, epsilon_order=epsilon_order,
      audit_curves_through_thm1=through_thm1)
