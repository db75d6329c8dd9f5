"""Lower bounds on Renyi divergences from Monte Carlo counts (App. C of Chadha et al.).

Renyi DP has no hypothesis-testing characterisation, but its *cuts* do (Balle et al., 2020):
for any partition of the output space into sets O_1..O_k, the Renyi divergence of the induced
discrete distributions is at most the divergence of the mechanism's outputs. The 2-cut uses a
set and its complement (Eq. (3) of Chadha et al., "Auditing Private Prediction"), the k-cut a
k-way partition (Eq. (5)). Lower-bounding the induced probabilities with confidence intervals
gives statistically valid lower bounds on the RDP of the mechanism at each order alpha; the
bootstrap variants (App. C, "Bootstrap based methods") are only asymptotically valid.

All bounds are stated for orders alpha > 1, broadcast over counts, and return
``(..., len(orders))`` arrays (or ``(...)`` for a scalar order).
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

from dpaudit import _validate
from dpaudit.estimators import _compile, binomial, multinomial


def _float(x):
  return _compile.float_arguments(x)[0]


_ROUNDING = 1e-9  # probabilities formed as sums may leave [0, 1] by this much


def _check_probabilities(**values) -> None:
  """Probabilities in [0, 1], up to a rounding of 1e-9 (a sum of class probabilities may come
  to 1 + 2e-16; outside [0, 1] a value counts as the nearest end)."""
  for name, value in values.items():
    _validate.check_not_boolean(name, value, "probabilities")
    _validate.check_range(name, value)
    if _validate.is_concrete(value):
      arr = np.asarray(value)
      bad = (arr < -_ROUNDING) | (arr > 1.0 + _ROUNDING)
      if np.any(bad):
        item = arr.reshape(-1)[int(np.flatnonzero(bad.reshape(-1))[0])]
        raise ValueError(f"{name}={item} is outside the valid range [0, 1]")


def _check_num_bootstrap(num_bootstrap, batch_shape, cells: int, orders) -> int:
  """A whole number of resamples >= 1 whose arrays (the draws, their probabilities and the
  divergences of each, in float64) fit in memory."""
  num_bootstrap = _validate.check_integer("num_bootstrap", num_bootstrap, 1)
  per_resample = 8 * max(1, math.prod(batch_shape)) * (4 * cells + 2 * max(1, np.size(orders)))
  _validate.check_allocation("num_bootstrap", num_bootstrap, per_resample, what="resample")
  return num_bootstrap


def _orders_last(orders):
  """Orders as a float array; callers add a trailing axis to the data to broadcast."""
  _validate.check_orders(orders)
  return _float(orders)


def _on_host(*values) -> bool:
  """Whether an eager function computes in NumPy: its inputs are concrete (not traced) and its
  work would run on a CPU. Run eagerly, each ``jnp`` operation compiles a small program per
  shape at its first call (eight programs, about a second, for :func:`binary_renyi_divergence`);
  NumPy computes the same formulas at once. Inside a trace, or on an accelerator, ``jnp``."""
  return _validate.is_concrete(values) and _compile.platform(values) == "cpu"


def _host_float(x) -> np.ndarray:
  """``x`` as a NumPy array in the default float dtype (float64 with ``jax_enable_x64``, else
  float32), as :func:`_float` gives the compiled programs."""
  return np.asarray(x, jnp.result_type(float))


def _to_jax(x) -> jax.Array:
  """A host result as a JAX array in the default float dtype (no program compiled)."""
  return _compile.to_device(_host_float(x))


def _xlogy_ratio(alpha, x, y, xp=jnp):
  r"""``log(x^alpha y^(1-alpha))`` with the convention ``0^alpha y^(1-alpha) = 0`` for x = 0.
  ``xp``: ``jax.numpy``, or ``numpy`` on the host."""
  safe_x = xp.where(x > 0.0, x, 1.0)
  safe_y = xp.where(y > 0.0, y, 1.0)
  finite = alpha * xp.log(safe_x) + (1.0 - alpha) * xp.log(safe_y)
  return xp.where(x > 0.0, xp.where(y > 0.0, finite, xp.inf), -xp.inf)


def _logsumexp(a, axis: int, xp=jnp):
  """``log(sum(exp(a)))`` over ``axis``: ``jax.nn.logsumexp``, or its NumPy equivalent (the
  same shift by a finite maximum, 0 where the maximum is infinite)."""
  if xp is jnp:
    return jax.nn.logsumexp(a, axis=axis)
  top = np.max(a, axis=axis, keepdims=True)
  top = np.where(np.isfinite(top), top, 0.0).astype(a.dtype)
  with np.errstate(divide="ignore"):
    return np.log(np.sum(np.exp(a - top), axis=axis)) + np.squeeze(top, axis)


def _binary_divergence(p1, p2, alpha, xp=jnp):
  """:func:`binary_renyi_divergence` without checks (orders last when ``alpha`` is 1-D)."""
  if alpha.ndim:
    p1, p2 = p1[..., None], p2[..., None]
  log_sum = xp.logaddexp(_xlogy_ratio(alpha, p1, p2, xp),
                         _xlogy_ratio(alpha, 1.0 - p1, 1.0 - p2, xp))
  return xp.maximum(log_sum / (alpha - 1.0), 0.0)


def _divergence(p, q, alpha, xp=jnp):
  """:func:`renyi_divergence` without checks."""
  if alpha.ndim:
    log_sum = _logsumexp(_xlogy_ratio(alpha[:, None], p[..., None, :], q[..., None, :], xp),
                         -1, xp)
  else:
    log_sum = _logsumexp(_xlogy_ratio(alpha, p, q, xp), -1, xp)
  return xp.maximum(log_sum / (alpha - 1.0), 0.0)


def binary_renyi_divergence(p1, p2, orders) -> jax.Array:
  r"""Renyi divergence between Bernoulli(p1) and Bernoulli(p2), the value inside Eq. (3).

  .. math::
     \frac{1}{\alpha-1}\log\big(p_1^\alpha p_2^{1-\alpha}
        + (1-p_1)^\alpha (1-p_2)^{1-\alpha}\big)

  Args:
    p1, p2: probabilities of the set under the two distributions (broadcast).
    orders: scalar or 1-D orders alpha > 1 (appended as the last axis when 1-D).

  >>> d = binary_renyi_divergence(0.6, 0.4, [2.0, 4.0])  # order 2: log(.6**2/.4 + .4**2/.6)
  >>> [round(float(v), 4) for v in d]
  [0.1542, 0.2541]
  """
  _check_probabilities(p1=p1, p2=p2)
  _validate.check_orders(orders)
  if _on_host(p1, p2, orders):
    return _to_jax(_binary_divergence(*map(_host_float, (p1, p2, orders)), np))
  return _binary_divergence(_float(p1), _float(p2), _float(orders))


def renyi_divergence(p, q, orders) -> jax.Array:
  r"""Renyi divergence between discrete distributions ``p`` and ``q`` (last axis = outcomes).

  .. math:: D_\alpha(P\|Q) = \frac{1}{\alpha-1}\log\sum_i p_i^\alpha q_i^{1-\alpha}

  Outcomes with ``p_i = 0`` contribute nothing; ``p_i > 0 = q_i`` gives ``+inf``. This is the
  k-cut of Eq. (5) evaluated at the finest partition, i.e. the plug-in divergence of counts.

  >>> p, q = [0.5, 0.3, 0.2], [0.2, 0.3, 0.5]
  >>> round(float(renyi_divergence(p, q, 2.0)), 4)  # log(sum(p**2 / q))
  0.4886
  """
  _check_probabilities(p=p, q=q)
  _validate.check_broadcastable("q", q, np.shape(p), "shape of p")
  _validate.check_orders(orders)
  if _on_host(p, q, orders):
    return _to_jax(_divergence(*map(_host_float, (p, q, orders)), np))
  return _divergence(_float(p), _float(q), _float(orders))


def per_sample_significance(significance):
  """Significance for each of two independent samples so that both hold with 1 - beta."""
  _validate.check_not_boolean("significance", significance, "significances")
  _validate.check_significance(significance)
  return 1.0 - jnp.sqrt(1.0 - _float(significance))


def renyi_two_cut_lower_bound(counts_p, trials_p, counts_q, trials_q, orders,
                              significance: float = 0.05) -> jax.Array:
  r"""Clopper-Pearson lower bound on the 2-cut of the Renyi divergence (App. C, first display).

  ``counts_p`` of ``trials_p`` runs of the mechanism on D landed in the set O, and ``counts_q``
  of ``trials_q`` runs on D'. With two-sided Clopper-Pearson boxes
  :math:`[p_1^\ell, p_1^u] \times [p_2^\ell, p_2^u]`, each at significance
  :math:`1 - \sqrt{1-\beta}` so that both hold with probability :math:`1-\beta` (the samples
  are independent), the bound is the minimum of the 2-cut divergence over the box:

  .. math::
     \underline{D}_\alpha = \begin{cases}
       d_\alpha(p_1^\ell, p_2^u) & p_1^\ell > p_2^u \\
       d_\alpha(p_1^u, p_2^\ell) & p_1^u < p_2^\ell \\
       0 & \text{otherwise,}\end{cases}
     \qquad d_\alpha(x, y) = \tfrac{1}{\alpha-1}\log\big(x^\alpha y^{1-\alpha}
        + (1-x)^\alpha(1-y)^{1-\alpha}\big).

  For alpha > 1, ``d`` increases in x and decreases in y when x > y (and the reverse when
  x < y), and vanishes on x = y, so this is the exact minimum over the box. It is never below
  the paper's displayed bound, which lower-bounds the two terms separately, and it is
  valid for every sample size.

  Args:
    counts_p, trials_p: outcomes in O and runs on D (whole numbers, broadcast).
    counts_q, trials_q: outcomes in O and runs on D'.
    orders: scalar or 1-D orders alpha > 1.
    significance: beta in (0, 1): the bound holds for each order with probability 1 - beta.

  Returns:
    Lower bounds on :math:`D_\alpha(M(D)\|M(D'))`, shape ``(..., len(orders))``.

  >>> bound = renyi_two_cut_lower_bound(600, 1000, 400, 1000, [2.0, 4.0])  # 60% of runs vs 40%
  >>> [round(float(v), 4) for v in bound]  # the plug-in divergences are 0.1542 and 0.2541
  [0.0656, 0.1192]
  """
  _validate.check_significance(significance)
  _validate.check_counts("counts_p", counts_p, trials_p, "trials_p")
  _validate.check_counts("counts_q", counts_q, trials_q, "trials_q")
  _validate.check_range("trials_p", trials_p, 1)
  _validate.check_range("trials_q", trials_q, 1)
  alpha = _orders_last(orders)
  counts = _compile.float_arguments(counts_p, trials_p, counts_q, trials_q)
  if not _validate.is_concrete((counts, significance, orders)):
    return _two_cut(*counts, _float(significance), alpha)
  size = math.prod(np.broadcast_shapes(*(np.shape(v) for v in counts + (significance,))))
  if np.ndim(significance):  # an array of significances is one more elementwise argument
    return _compile.elementwise(lambda *flat: _two_cut_first_call(flat, alpha, size), *counts,
                                _float(significance))
  significance = _float(significance)
  return _compile.elementwise(
      lambda *flat: _two_cut_first_call(flat + (significance,), alpha, size), *counts)


def _two_cut_first_call(args: tuple, alpha, size: int):
  """:func:`_two_cut` on flat ``args`` (the counts and the significance) padded from ``size``
  elements to their bucket, answered by :func:`_host_two_cut` on the ``size`` real elements
  while the program compiles (:func:`_compile.first_call`)."""
  padded = np.shape(args[0])[0]

  def host(*args):
    real = [v[:size] if np.ndim(v) else v for v in args[:-1]]
    return _compile.pad_edge(_host_two_cut(*real, args[-1]), padded, axis=0)
  return _compile.first_call(_two_cut, host, args + (alpha,), padded)


@_compile.jit(fusion_emitters=_compile.fusion_below(_compile.LARGE_BATCH),
              tree_reductions=False)
def _two_cut(counts_p, trials_p, counts_q, trials_q, significance, alpha):
  counts_p, trials_p, counts_q, trials_q = jnp.broadcast_arrays(counts_p, trials_p, counts_q,
                                                                trials_q)
  # Both samples' two-sided intervals from one solver call.
  log_tail = jnp.log(per_sample_significance(significance) / 2.0)
  lower, upper = binomial._cp_limits(jnp.stack([counts_p, counts_q]),
                                     jnp.stack([trials_p, trials_q]), log_tail, True, True)
  p_lower, q_lower = lower
  p_upper, q_upper = upper
  return _two_cut_over_box(p_lower, p_upper, q_lower, q_upper, alpha)


def _host_cp_limit(k, n, log_tail, upper: bool) -> np.ndarray:
  """The lower (or ``upper``) two-sided Clopper-Pearson limit at tail ``exp(log_tail)`` by
  scipy's Beta quantiles, with the compiled limits' closed forms at k = 0 and k = n (lower: 0
  and ``exp(log_tail / n)``; upper: ``-expm1(log_tail / n)`` and 1). Float64 NumPy."""
  inside = np.logical_and(k > 0.0, k < n)
  tail = np.exp(log_tail)
  with np.errstate(divide="ignore", invalid="ignore"):
    if upper:
      solved = scipy.special.betainccinv(np.where(inside, k + 1.0, 1.0),
                                         np.where(inside, n - k, 1.0), tail)
      return np.where(k >= n, 1.0, np.where(k <= 0.0, -np.expm1(log_tail / n), solved))
    solved = scipy.special.betaincinv(np.where(inside, k, 1.0),
                                      np.where(inside, n - k + 1.0, 1.0), tail)
    return np.where(k <= 0.0, 0.0, np.where(k >= n, np.exp(log_tail / n), solved))


def _host_two_cut(counts_p, trials_p, counts_q, trials_q, significance, alpha) -> np.ndarray:
  """:func:`_two_cut` in NumPy and scipy (float64), for first calls on small inputs.

  The box's minimum needs only two of the four limits of each pair: where the observed
  frequency under P is at least that under Q, ``p_upper >= q_lower`` (each limit is on its
  side of its frequency), so the box is above the diagonal or straddles it, and only
  ``p_lower`` and ``q_upper`` decide; elsewhere only ``p_upper`` and ``q_lower``. Computing
  those two halves the scipy quantiles (about 5 us each)."""
  counts_p, trials_p, counts_q, trials_q, significance = np.broadcast_arrays(
      *(np.asarray(v, np.float64) for v in (counts_p, trials_p, counts_q, trials_q,
                                            significance)))
  log_tail = np.log((1.0 - np.sqrt(1.0 - significance)) / 2.0)
  p_ge_q = counts_p * trials_q >= counts_q * trials_p
  p_lower, p_upper = np.zeros(counts_p.shape), np.ones(counts_p.shape)
  q_lower, q_upper = np.zeros(counts_p.shape), np.ones(counts_p.shape)
  ge, lt = p_ge_q, ~p_ge_q
  p_lower[ge] = _host_cp_limit(counts_p[ge], trials_p[ge], log_tail[ge], False)
  q_upper[ge] = _host_cp_limit(counts_q[ge], trials_q[ge], log_tail[ge], True)
  p_upper[lt] = _host_cp_limit(counts_p[lt], trials_p[lt], log_tail[lt], True)
  q_lower[lt] = _host_cp_limit(counts_q[lt], trials_q[lt], log_tail[lt], False)
  return _two_cut_over_box(p_lower, p_upper, q_lower, q_upper, np.asarray(alpha, np.float64),
                           np)


def renyi_two_cut_from_intervals(p_lower, p_upper, q_lower, q_upper, orders) -> jax.Array:
  r"""The minimum of the 2-cut divergence :math:`d_\alpha(x, y)` (see
  :func:`renyi_two_cut_lower_bound`) over the box :math:`[p^\ell, p^u] \times [q^\ell, q^u]`:
  a lower bound on the 2-cut whenever the box holds :math:`(P(O), Q(O))`, whatever
  confidence intervals made it (e.g. :func:`empirical_bernstein_interval` on Rao-Blackwellised
  estimates). Shape ``(..., len(orders))``.

  >>> bound = renyi_two_cut_from_intervals(0.55, 0.65, 0.35, 0.45, [2.0, 4.0])
  >>> [round(float(v), 4) for v in bound]  # binary_renyi_divergence(0.55, 0.45, [2.0, 4.0])
  [0.0396, 0.0746]
  """
  _check_probabilities(p_lower=p_lower, p_upper=p_upper, q_lower=q_lower, q_upper=q_upper)
  for (lower, lo), (upper, hi) in ((("p_lower", p_lower), ("p_upper", p_upper)),
                                    (("q_lower", q_lower), ("q_upper", q_upper))):
    if _validate.is_concrete((lo, hi)) and np.any(np.asarray(lo) > np.asarray(hi)):
      raise ValueError(f"{upper} is below {lower} somewhere ({upper}={np.asarray(hi)!r}, "
                       f"{lower}={np.asarray(lo)!r}); an interval needs {lower} <= {upper}")
  _validate.check_orders(orders)
  box = (p_lower, p_upper, q_lower, q_upper, orders)
  if _on_host(*box):
    return _to_jax(_two_cut_over_box(*map(_host_float, box), np))
  return _two_cut_over_box(*map(_float, box))


def _two_cut_over_box(p_lower, p_upper, q_lower, q_upper, alpha, xp=jnp):
  above = p_lower > q_upper
  below = p_upper < q_lower
  x = xp.where(above, p_lower, xp.where(below, p_upper, 0.5))
  y = xp.where(above, q_upper, xp.where(below, q_lower, 0.5))
  if alpha.ndim:
    above, below = above[..., None], below[..., None]
  value = _binary_divergence(x, y, alpha, xp)
  return xp.where(xp.logical_or(above, below), value, 0.0)


def empirical_bernstein_interval(values, significance: float = 0.05):
  r"""Two-sided confidence interval for the mean of i.i.d. values in [0, 1] (Maurer & Pontil
  2009, Thm. 4, each side at ``significance / 2``):

  .. math:: \bar X \pm \Big(\sqrt{\frac{2 V_n \log(4/\beta)}{n}}
     + \frac{7 \log(4/\beta)}{3(n-1)}\Big),

  with :math:`V_n` the unbiased sample variance, clipped to [0, 1]. Valid for every n >= 2;
  tight when the values vary little (a Rao-Blackwellised estimate), where Clopper-Pearson on
  0/1 outcomes cannot be. ``values`` has the samples on its last axis.

  Returns:
    ``(lower, upper)``, shape ``values.shape[:-1]``.

  >>> import numpy as np
  >>> lower, upper = empirical_bernstein_interval(np.linspace(0.25, 0.35, 1000))  # mean 0.3
  >>> round(float(lower), 4), round(float(upper), 4)
  (0.2871, 0.3129)
  """
  _validate.check_significance(significance)
  _validate.check_range("values", values, 0.0, 1.0)
  n = np.shape(values)[-1] if np.ndim(values) else 0
  if n < 2:
    raise ValueError(f"values has {n} samples on its last axis; need at least 2")
  if _on_host(values, significance):
    lower, upper = _bernstein(_host_float(values), _host_float(significance), n, np)
    return _to_jax(lower), _to_jax(upper)
  return _bernstein(_float(values), _float(significance), n, jnp)


def _bernstein(values, significance, n: int, xp=jnp):
  """:func:`empirical_bernstein_interval` without checks."""
  mean = xp.mean(values, axis=-1)
  variance = xp.var(values, axis=-1, ddof=1)
  log_term = xp.log(4.0 / significance)
  half = xp.sqrt(2.0 * variance * log_term / n) + 7.0 * log_term / (3.0 * (n - 1))
  return xp.clip(mean - half, 0.0, 1.0), xp.clip(mean + half, 0.0, 1.0)


K_CUT_METHODS = ("sison-glaz", "goodman")


def renyi_k_cut_lower_bound(counts_p, counts_q, orders, significance: float = 0.05,
                            method: str = "sison-glaz") -> jax.Array:
  r"""Lower bound on the k-cut of the Renyi divergence from outcome counts (App. C, Eq. (5)).

  ``counts_p[..., i]`` and ``counts_q[..., i]`` count the runs on D and D' whose output fell in
  cell i of a fixed k-way partition (e.g. the k classes of noisy argmax). With simultaneous
  multinomial intervals for each distribution (Sison-Glaz or Goodman, each at significance
  :math:`1-\sqrt{1-\beta}`):

  .. math::
     \underline{D}^k_\alpha = \max\Big(0, \frac{1}{\alpha-1}
        \log \sum_{i=1}^k (p_1^\ell(i))^\alpha (p_2^u(i))^{1-\alpha}\Big),

  since each term increases in :math:`p_1(i)` and decreases in :math:`p_2(i)` for alpha > 1.
  Only asymptotically valid: the simultaneous intervals are approximations.

  Args:
    counts_p, counts_q: counts with the k cells on the last axis (k >= 2).
    orders: scalar or 1-D orders alpha > 1.
    significance: beta in (0, 1).
    method: "sison-glaz" or "goodman".

  >>> bound = renyi_k_cut_lower_bound([500, 300, 200], [200, 300, 500], [2.0, 4.0])
  >>> [round(float(v), 4) for v in bound]  # the plug-in divergences are 0.4886 and 0.6983
  [0.1507, 0.4257]
  """
  _validate.check_choice("method", method, K_CUT_METHODS)
  _validate.check_significance(significance)
  _validate.check_counts("counts_p", counts_p)
  _validate.check_counts("counts_q", counts_q)
  cells_p, cells_q = np.shape(counts_p)[-1:], np.shape(counts_q)[-1:]
  if cells_p != cells_q:
    raise ValueError(f"counts_p has {cells_p[0] if cells_p else 0} cells but counts_q has "
                     f"{cells_q[0] if cells_q else 0}; the partitions must match")
  for counts in (counts_p, counts_q):  # beta is in (0, 1) where significance is
    multinomial.check_interval_inputs(counts, significance)
  _orders_last(orders)
  if (not _validate.is_concrete((counts_p, counts_q, orders, significance))
      or _compile.platform((counts_p, counts_q)) != "cpu" or _outer(counts_p, counts_q)):
    return _k_cut_lower_bound(_float(counts_p), _float(counts_q), _float(orders),
                              _float(significance), method=method)
  return _k_cut_rows(counts_p, counts_q, _host_float(orders), significance, method)


def _outer(counts_p, counts_q) -> bool:
  """Whether the two samples' batches broadcast against each other with several rows on both
  sides (an outer product, such as every pair of a grid of counts): the program then solves each
  sample's intervals once per row of its own and broadcasts only the divergence, where padded
  rows would solve the intervals of every pair."""
  rows_p, rows_q = (math.prod(np.shape(c)[:-1]) for c in (counts_p, counts_q))
  return (np.shape(counts_p)[:-1] != np.shape(counts_q)[:-1] and rows_p > 1 and rows_q > 1)


def _k_cut_rows(counts_p, counts_q, orders, significance, method: str):
  """:func:`_k_cut_lower_bound` on concrete CPU inputs, with the batch flattened to rows and
  padded to its bucket (:func:`multinomial.padded_rows`), so that one program serves every
  number of rows in a bucket. A single row of one sample against a batch of the other stays one
  row (its intervals are solved once); other batches are broadcast against each other."""
  batch = np.broadcast_shapes(np.shape(counts_p)[:-1], np.shape(counts_q)[:-1],
                              np.shape(significance))
  real = math.prod(batch)
  min_rows = multinomial.SISON_GLAZ_MIN_ROWS if method == "sison-glaz" else None
  sides = []
  for counts in (counts_p, counts_q):
    if math.prod(np.shape(counts)[:-1]) == 1 and np.ndim(significance) == 0:
      sides.append(multinomial.padded_rows(np.reshape(counts, (1, -1)), significance, 1)[0])
    else:
      sides.append(multinomial.padded_rows(
          np.broadcast_to(counts, batch + np.shape(counts)[-1:]), significance, min_rows)[0])
  bucket = multinomial.row_bucket(real, np.shape(counts_p)[-1], min_rows)
  beta = _host_float(significance)
  if beta.ndim:
    beta = _compile.pad_edge(np.broadcast_to(beta, batch).reshape(real), bucket, axis=0)

  def host(rows_p, rows_q, orders, beta):
    cut = [x[:real] if np.ndim(x) else x for x in (rows_p, rows_q, beta)]
    out = _host_k_cut(*cut[:2], orders, cut[2], method)
    return _compile.pad_edge(np.broadcast_to(out, (real,) + out.shape[1:]), bucket, axis=0)
  if method == "sison-glaz" and sum(min(len(rows), real) for rows in sides) > (
      multinomial.SISON_GLAZ_HOST_ROWS):
    host = None  # many rows: the program (multinomial.SISON_GLAZ_HOST_ROWS)
  out = _compile.first_call(_K_CUT_PROGRAMS[method], host, (*sides, orders, beta),
                            bucket * np.shape(counts_p)[-1])
  return multinomial.cut_rows(out, batch)


def _host_k_cut(rows_p, rows_q, orders, beta, method: str) -> np.ndarray:
  """:func:`_k_cut_lower_bound` in NumPy and scipy (float64), on rows of counts (one row of a
  sample broadcasts against the other's rows; ``beta`` a scalar or one per row)."""
  intervals = {"goodman": multinomial.host_goodman, "sison-glaz": multinomial.host_sison_glaz}
  beta = 1.0 - np.sqrt(1.0 - np.asarray(beta, np.float64))
  lower = intervals[method](rows_p, np.broadcast_to(beta, np.shape(rows_p)[:-1])).lower
  upper = intervals[method](rows_q, np.broadcast_to(beta, np.shape(rows_q)[:-1])).upper
  return _divergence(lower, upper, np.asarray(orders, np.float64), np)


@_compile.jit(static_argnames="method", fusion_emitters=False, tree_reductions=False)
def _k_cut_lower_bound(counts_p, counts_q, orders, significance, method):
  # One program (run eagerly, the divergence's few operations compiled about 25 programs of
  # their own on the first call, 0.85 s), with one copy of the intervals: the rows of both
  # samples go through it as one batch, each sample's rows once (a batch of counts_p against one
  # of counts_q solves len(p) + len(q) intervals, and the divergence broadcasts).
  # A scalar significance is passed on as a scalar, as the intervals' public functions do.
  beta = per_sample_significance(significance)
  shapes = [jnp.broadcast_shapes(counts.shape[:-1], beta.shape) + counts.shape[-1:]
            for counts in (counts_p, counts_q)]
  rows = [jnp.broadcast_to(counts, shape).reshape(-1, shape[-1])
          for counts, shape in zip((counts_p, counts_q), shapes)]
  if beta.ndim:
    beta = jnp.concatenate([jnp.broadcast_to(beta, shape[:-1]).reshape(-1) for shape in shapes])
  intervals = multinomial.simultaneous_intervals(method, jnp.concatenate(rows), beta)
  split = rows[0].shape[0]
  return renyi_divergence(intervals.lower[:split].reshape(shapes[0]),
                          intervals.upper[split:].reshape(shapes[1]), orders)


_K_CUT_PROGRAMS = {method: functools.partial(_k_cut_lower_bound, method=method)
                   for method in K_CUT_METHODS}


class BootstrapBound(NamedTuple):
  """A percentile-bootstrap bound with the diagnostics that say whether to trust it.

  Attributes:
    lower_bound: the ``significance`` quantile of the resampled plug-in divergences. An
      *asymptotic* lower bound only, never a finite-sample one.
    plug_in: the plug-in divergence of the observed counts.
    bias: mean of the resampled divergences minus ``plug_in``: the bootstrap's estimate of
      the plug-in's upward bias.
    spread: standard deviation of the resampled divergences.
    smoothed: whether an outcome seen under P but never under Q had to be given half a count
      (see :func:`renyi_k_cut_bootstrap`).
    trusted: at least ``BOOTSTRAP_MIN_TRIALS`` trials under each distribution, ``plug_in``
      at least ``BOOTSTRAP_MIN_SIGNAL`` times ``spread`` (the divergence is told apart from
      0), and not ``smoothed``: the rule under which the coverage study of the README found
      the bound within its significance.

  >>> import jax
  >>> result = renyi_two_cut_bootstrap(jax.random.key(0), 600, 1000, 400, 1000, 2.0,
  ...                                  num_bootstrap=200)
  >>> result._fields
  ('lower_bound', 'plug_in', 'bias', 'spread', 'smoothed', 'trusted')
  >>> round(float(result.plug_in), 4), bool(result.smoothed), bool(result.trusted)  # few runs
  (0.1542, False, False)
  """
  lower_bound: jax.Array
  plug_in: jax.Array
  bias: jax.Array
  spread: jax.Array
  smoothed: jax.Array
  trusted: jax.Array


# Measured by `python -m experiments.bootstrap_coverage` (README, "What each number means"):
# below 1e5 trials per distribution, or with the plug-in divergence within 4 bootstrap standard
# deviations of 0, the percentile bounds exceeded the exact divergence more often than their
# significance allows (up to 34% of audits at nominal 5%; every audit at D = 0).
BOOTSTRAP_MIN_TRIALS = 100_000
BOOTSTRAP_MIN_SIGNAL = 4.0


class BootstrapWarning(UserWarning):
  """A bootstrap bound was computed where it is not to be trusted.

  Issued (a warning, not an error) by :func:`renyi_two_cut_bootstrap_lower_bound` and
  :func:`renyi_k_cut_bootstrap_lower_bound`; ``warnings.simplefilter("ignore",
  BootstrapWarning)`` silences it.

  >>> import jax, warnings
  >>> with warnings.catch_warnings(record=True) as caught:
  ...   warnings.simplefilter("always")
  ...   _ = renyi_two_cut_bootstrap_lower_bound(jax.random.key(0), 600, 1000, 400, 1000, 2.0,
  ...                                           num_bootstrap=200)  # too few runs to trust
  >>> [w.category.__name__ for w in caught]
  ['BootstrapWarning']
  """


def _summarise(values, plug_in, smoothed, trials, significance) -> BootstrapBound:
  """Percentile bound and diagnostics from resampled values along axis 0; ``trials`` is the
  smaller number of trials of the two samples (broadcasting with ``plug_in``)."""
  lower = jnp.quantile(values, significance, axis=0, method="lower")
  bias = jnp.mean(values, axis=0) - plug_in
  spread = jnp.std(values, axis=0)
  smoothed = jnp.broadcast_to(smoothed, plug_in.shape)
  trusted = (jnp.logical_not(smoothed) & (trials >= BOOTSTRAP_MIN_TRIALS)
             & (plug_in >= BOOTSTRAP_MIN_SIGNAL * spread) & (plug_in > 0.0))
  return BootstrapBound(lower, plug_in, bias, spread, smoothed, trusted)


def _warn_untrusted(name: str, result: BootstrapBound) -> None:
  trusted = result.trusted
  if isinstance(trusted, jax.core.Tracer):
    return
  untrusted = ~np.asarray(trusted, bool)
  if np.any(untrusted):
    warnings.warn(
        f"{name}: {int(np.sum(untrusted))} of {untrusted.size} asymptotic bounds are not to be "
        f"trusted (fewer than {BOOTSTRAP_MIN_TRIALS:,} trials, a divergence within "
        f"{BOOTSTRAP_MIN_SIGNAL:g} bootstrap deviations of 0, or an outcome never seen under "
        "Q); use the Clopper-Pearson 2-cut", BootstrapWarning, stacklevel=3)


def _half_count_floor(probabilities, total):
  """Probabilities under Q with zero cells raised to half a count, 1 / (2 n)."""
  return jnp.maximum(probabilities, 0.5 / total)


def renyi_two_cut_bootstrap(key: jax.Array, counts_p, trials_p, counts_q, trials_q, orders,
                            significance: float = 0.05,
                            num_bootstrap: int = 1000) -> BootstrapBound:
  r"""Percentile-bootstrap bound on the 2-cut with its diagnostics (App. C, "2-cut Bootstrap
  audit" of Chadha et al.).

  Resamples the Bernoulli outcomes of both runs (:math:`k^* \sim \mathrm{Bin}(n, \hat p)`),
  evaluates the plug-in 2-cut :func:`binary_renyi_divergence` on each resample and takes its
  ``significance`` quantile. Only asymptotically valid: it exceeds the divergence more often
  than ``significance`` near D = 0 and at small counts (Table 2 of Chadha et al.; the
  README's coverage study), which ``trusted`` flags. An event never seen under Q (or always
  seen) would make the plug-in infinite; the probabilities under Q are kept within
  :math:`[1/(2n_Q), 1 - 1/(2n_Q)]` (half a count), so the result is finite, and such bounds
  are flagged ``smoothed`` and not trusted.

  >>> import jax
  >>> result = renyi_two_cut_bootstrap(jax.random.key(0), 60_000, 100_000, 40_000, 100_000,
  ...                                  2.0, num_bootstrap=200)
  >>> round(float(result.plug_in), 4), bool(0.0 < result.lower_bound < result.plug_in)
  (0.1542, True)
  >>> bool(result.trusted)  # 1e5 runs each, a divergence far from 0, no smoothing
  True
  """
  _validate.check_significance(significance)
  _validate.check_counts("counts_p", counts_p, trials_p, "trials_p")
  _validate.check_counts("counts_q", counts_q, trials_q, "trials_q")
  _validate.check_range("trials_p", trials_p, 1)
  _validate.check_range("trials_q", trials_q, 1)
  _validate.check_key(key)
  _orders_last(orders)
  num_bootstrap = _check_num_bootstrap(
      num_bootstrap, np.broadcast_shapes(*(np.shape(v) for v in (counts_p, trials_p, counts_q,
                                                                  trials_q))), 2, orders)
  counts_p, trials_p, counts_q, trials_q = jnp.broadcast_arrays(
      *(_float(v) for v in (counts_p, trials_p, counts_q, trials_q)))
  return _two_cut_bootstrap(key, counts_p, trials_p, counts_q, trials_q, _float(orders),
                            _float(significance), num_bootstrap)


@_compile.jit(static_argnames="num_bootstrap")
def _two_cut_bootstrap(key, counts_p, trials_p, counts_q, trials_q, orders, significance,
                       num_bootstrap):
  key_p, key_q = jax.random.split(key)
  shape = (num_bootstrap,) + counts_p.shape

  def divergence(k_p, k_q):
    q = jnp.clip(k_q / trials_q, 0.5 / trials_q, 1.0 - 0.5 / trials_q)
    return binary_renyi_divergence(k_p / trials_p, q, orders)

  draws_p = jax.random.binomial(key_p, trials_p, counts_p / trials_p, shape)
  draws_q = jax.random.binomial(key_q, trials_q, counts_q / trials_q, shape)
  smoothed = jnp.logical_or(counts_q <= 0.0, counts_q >= trials_q)
  trials = jnp.minimum(trials_p, trials_q)
  if orders.ndim:
    smoothed, trials = smoothed[..., None], trials[..., None]
  return _summarise(divergence(draws_p, draws_q), divergence(counts_p, counts_q), smoothed,
                    trials, significance)


def renyi_two_cut_bootstrap_lower_bound(key: jax.Array, counts_p, trials_p, counts_q, trials_q,
                                        orders, significance: float = 0.05,
                                        num_bootstrap: int = 1000) -> jax.Array:
  r"""Percentile-bootstrap *asymptotic* lower bound on the 2-cut (App. C of Chadha et al.).

  The ``lower_bound`` of :func:`renyi_two_cut_bootstrap`: finite for all counts, and a
  one-line :class:`BootstrapWarning` when some bound is not ``trusted`` (too few trials for the
  asymptotics, or an event never seen under Q). Use :func:`renyi_two_cut_lower_bound` for a
  finite-sample guarantee.

  >>> import jax
  >>> bound = renyi_two_cut_bootstrap_lower_bound(jax.random.key(0), 60_000, 100_000, 40_000,
  ...                                             100_000, 2.0, num_bootstrap=200)
  >>> 0.14 < float(bound) < 0.1542  # below the plug-in divergence; trusted, so no warning
  True
  """
  result = renyi_two_cut_bootstrap(key, counts_p, trials_p, counts_q, trials_q, orders,
                                   significance, num_bootstrap)
  _warn_untrusted("renyi_two_cut_bootstrap_lower_bound", result)
  return result.lower_bound


def renyi_k_cut_bootstrap(key: jax.Array, counts_p, counts_q, orders,
                          significance: float = 0.05,
                          num_bootstrap: int = 1000) -> BootstrapBound:
  r"""Percentile-bootstrap bound on the k-cut with its diagnostics (App. C, "k-cut Bootstrap
  audit" of Chadha et al.).

  Resamples both count vectors from their empirical multinomials, evaluates the plug-in
  divergence :func:`renyi_divergence` of each pair and takes its ``significance`` quantile.
  Only asymptotically valid: not at D = 0, not for small divergences or small counts (Table 2
  of Chadha et al.; the README's coverage study), which ``trusted`` flags. A cell with counts
  under P but none under Q would make the plug-in infinite; such cells get half a count under
  Q, :math:`\hat q_i = 1/(2 n_Q)`, so the result is finite, and the bound is flagged
  ``smoothed`` and not trusted.

  >>> import jax
  >>> result = renyi_k_cut_bootstrap(jax.random.key(0), [500, 300, 200], [200, 300, 500], 2.0,
  ...                                num_bootstrap=200)
  >>> round(float(result.plug_in), 4), bool(0.0 < result.lower_bound < result.plug_in)
  (0.4886, True)
  >>> bool(result.trusted)  # 1000 runs each: fewer than BOOTSTRAP_MIN_TRIALS
  False
  """
  _validate.check_significance(significance)
  _validate.check_counts("counts_p", counts_p)
  _validate.check_counts("counts_q", counts_q)
  cells_p, cells_q = np.shape(counts_p)[-1:], np.shape(counts_q)[-1:]
  if cells_p != cells_q:
    raise ValueError(f"counts_p has {cells_p[0] if cells_p else 0} cells but counts_q has "
                     f"{cells_q[0] if cells_q else 0}; the partitions must match")
  if not cells_p or cells_p[0] < 2:
    raise ValueError(f"counts_p must have at least 2 cells on its last axis, got shape "
                     f"{np.shape(counts_p)}")
  _validate.check_key(key)
  _orders_last(orders)
  num_bootstrap = _check_num_bootstrap(
      num_bootstrap, np.broadcast_shapes(np.shape(counts_p)[:-1], np.shape(counts_q)[:-1]),
      cells_p[0], orders)
  return _k_cut_bootstrap(key, _float(counts_p), _float(counts_q), _float(orders),
                          _float(significance), num_bootstrap)


@_compile.jit(static_argnames="num_bootstrap")
def _k_cut_bootstrap(key, counts_p, counts_q, orders, significance, num_bootstrap):
  counts_p, counts_q = jnp.broadcast_arrays(counts_p, counts_q)
  total_p = jnp.sum(counts_p, axis=-1, keepdims=True)
  total_q = jnp.sum(counts_q, axis=-1, keepdims=True)
  key_p, key_q = jax.random.split(key)

  def resample(key, counts, total):
    probs = jnp.broadcast_to(counts / total, (num_bootstrap,) + counts.shape)
    return jax.random.multinomial(key, total[..., 0], probs, dtype=counts.dtype)

  def divergence(k_p, k_q):
    return renyi_divergence(k_p / total_p, _half_count_floor(k_q / total_q, total_q), orders)

  values = divergence(resample(key_p, counts_p, total_p), resample(key_q, counts_q, total_q))
  smoothed = jnp.any(jnp.logical_and(counts_p > 0.0, counts_q <= 0.0), axis=-1)
  trials = jnp.minimum(total_p, total_q)[..., 0]
  if orders.ndim:
    smoothed, trials = smoothed[..., None], trials[..., None]
  return _summarise(values, divergence(counts_p, counts_q), smoothed, trials, significance)


def renyi_k_cut_bootstrap_lower_bound(key: jax.Array, counts_p, counts_q, orders,
                                      significance: float = 0.05,
                                      num_bootstrap: int = 1000) -> jax.Array:
  r"""Percentile-bootstrap *asymptotic* lower bound on the k-cut (App. C of Chadha et al.).

  The ``lower_bound`` of :func:`renyi_k_cut_bootstrap`: finite for all counts, and a one-line
  :class:`BootstrapWarning` when some bound is not ``trusted``. Use
  :func:`renyi_k_cut_lower_bound` or the 2-cut for bounds with stated coverage.

  >>> import jax
  >>> bound = renyi_k_cut_bootstrap_lower_bound(
  ...     jax.random.key(0), [50_000, 30_000, 20_000], [20_000, 30_000, 50_000], 2.0,
  ...     num_bootstrap=200)
  >>> 0.46 < float(bound) < 0.4886  # below the plug-in divergence; trusted, so no warning
  True
  """
  result = renyi_k_cut_bootstrap(key, counts_p, counts_q, orders, significance, num_bootstrap)
  _warn_untrusted("renyi_k_cut_bootstrap_lower_bound", result)
  return result.lower_bound
