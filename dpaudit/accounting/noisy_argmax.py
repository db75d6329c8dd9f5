r"""Theory side of the Gaussian noisy argmax (GNMax): exact output law and RDP upper bounds.

The mechanism releases :math:`\arg\max_c (n_c + \sigma Z_c)` with i.i.d. standard normal
:math:`Z_c` (Eq. (2) of Chadha et al., "Auditing Private Prediction", 2024). This module gives

* the exact output distribution by numerical quadrature of Eq. (4) of that paper
  (:func:`noisy_argmax_log_probabilities`, :func:`noisy_argmax_class_probabilities`),
* the exact Renyi divergence between the output laws on two neighbouring histograms
  (:func:`noisy_argmax_renyi`, the "exact RDP" curves of their Figs. 2-4),
* the bounds of Papernot et al., "Scalable Private Learning with PATE" (ICLR 2018) used for the
  "theory" curves: data-independent RDP (their Prop. 8), the bound on
  :math:`\Pr[\text{output} \ne \arg\max]` (Prop. 7) and the data-dependent RDP (Thm. 6 with
  the parameters of Prop. 10).

Everything is pure JAX: vectorised over leading batch axes of the histograms and over Renyi
orders, jit- and vmap-able, and computed in float64 when ``jax_enable_x64`` is on.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT2 = math.sqrt(2.0)

# Quadrature settings. The grid for each class ends where the log-integrand has dropped by
# _LOG_DROP below its value at the (approximate) mode; the integrand is log-concave, so it decays
# at least exponentially beyond the ends and the neglected tails are of order e^-40 ~ 4e-18
# relative to the integral (see _class_log_probabilities).
_LOG_DROP = 40.0
_MODE_NEWTON_STEPS = 8
_EDGE_NEWTON_STEPS = 3
# Terms of the asymptotic series jax uses for log Phi(x), x < -20 (3 terms leave a 2e-9
# absolute error in log Phi there; 10 terms are exact to rounding).
_LOG_NDTR_SERIES_ORDER = 10
# Below x = -_MILLS_SWITCH the inverse Mills ratio phi(x)/Phi(x) comes from Laplace's continued
# fraction, _MILLS_TERMS terms deep (relative error below 1e-15 from x = -5 on, against mpmath).
_MILLS_SWITCH = 5.0
_MILLS_TERMS = 28
MAX_SPREAD_OVER_SIGMA = 1e12
"""Largest vote spread ``(max H - min H) / sigma`` the quadrature resolves: its grid sits near
``z ~ spread / sigma`` with a peak about one unit wide, and float64 spaces numbers of size
1e12 by 1e-4 (at 1e30 the grid's nodes coincide and the probabilities come out as 0)."""


def _float_dtype():
  return jnp.result_type(float)


def _log_ndtr(x):
  return jax.scipy.special.log_ndtr(x, series_order=_LOG_NDTR_SERIES_ORDER)


def _log_phi(x):
  return -0.5 * x * x - _HALF_LOG_2PI


def default_num_nodes(num_classes: int) -> int:
  r"""Default number of quadrature nodes per class, :math:`\max(40, \lceil 24 + 8\sqrt{C}\rceil)`.

  Narrow peaks come from many classes above the integrated one (the peak width is at least
  :math:`1/\sqrt{C}`), so the node count grows with :math:`\sqrt{C}`. Against a 400-node
  reference on random and adversarial histograms (C = 2 to 100, :math:`\sigma` from 0.3 to
  40) this choice has a maximum error below 1e-14 in :math:`\log\Pr[c]` (relative error for
  :math:`|\log\Pr[c]| > 1`), while 8 fewer nodes already lose accuracy for C >= 10.
  """
  num_classes = _validate.check_integer("num_classes", num_classes, 2)
  return int(max(40, math.ceil(24.0 + 8.0 * math.sqrt(num_classes))))


def _log_mills_terms(x):
  r"""For :math:`x`: ``r = phi(x)/Phi(x)`` and ``-(log Phi)''(x) = r (x + r)``.

  Above :math:`x = -5`, ``r = exp(log phi(x) - log Phi(x))``. Below, that difference of two
  logs of size :math:`x^2/2` loses :math:`\epsilon x^2/2` absolute accuracy, and ``x + r`` then
  cancels as well: at :math:`x = -2\cdot 10^6` (a class two votes behind at
  :math:`\sigma = 10^{-6}`) ``r`` was off by about 500, which put the quadrature grid of
  :func:`_class_log_probabilities` thousands of peak widths away from the peak, and the
  divergences of :func:`noisy_argmax_renyi` above their bound :math:`\alpha/\sigma^2` (or NaN
  for smaller :math:`\sigma`). There, with :math:`t = -x`, Laplace's continued fraction for
  the Mills ratio gives ``r = t + K`` with

  .. math:: K = \cfrac{1}{t + \cfrac{2}{t + \cfrac{3}{t + \cdots}}},

  so that ``x + r = K`` needs no subtraction; every term is accurate to rounding.
  """
  far = x < -_MILLS_SWITCH
  near_x = jnp.where(far, -_MILLS_SWITCH, x)
  r_near = jnp.exp(_log_phi(near_x) - _log_ndtr(near_x))
  t = jnp.maximum(-x, _MILLS_SWITCH)
  s = t
  for j in range(_MILLS_TERMS, 1, -1):  # backwards: s = t + j / (t + (j + 1) / (...))
    s = t + j / s
  k = 1.0 / s
  r = jnp.where(far, t + k, r_near)
  x_plus_r = jnp.where(far, k, near_x + r_near)
  return r, r * x_plus_r


def _class_log_probabilities(hist, sigma, num_nodes):
  """log Pr[c] for every class; ``hist`` (..., C) float, ``sigma`` (...,) float > 0."""
  dtype = hist.dtype
  num_classes = hist.shape[-1]
  # d[..., c, i] = (n_c - n_i) / sigma; the i = c term is masked out.
  d = (hist[..., :, None] - hist[..., None, :]) / sigma[..., None, None]
  other = ~jnp.eye(num_classes, dtype=bool)

  def log_f(z):  # z: (..., C, M) -> log integrand, (..., C, M)
    # Loop over the other classes i so that no (..., C, M, C) array is materialised.
    def add_class(i, acc):
      d_i = jax.lax.dynamic_index_in_dim(d, i, axis=-1, keepdims=False)
      keep = (jnp.arange(num_classes) != i)[:, None]
      return acc + jnp.where(keep, _log_ndtr(z + d_i[..., None]), 0.0)
    return jax.lax.fori_loop(0, num_classes, add_class, _log_phi(z))

  def derivatives(z):  # z: (..., C) -> f, f', -f''
    x = z[..., None] + d
    r, curv = _log_mills_terms(x)
    f = _log_phi(z) + jnp.sum(jnp.where(other, _log_ndtr(x), 0.0), axis=-1)
    df = -z + jnp.sum(jnp.where(other, r, 0.0), axis=-1)
    neg_ddf = 1.0 + jnp.sum(jnp.where(other, curv, 0.0), axis=-1)
    return f, df, jnp.maximum(neg_ddf, 1.0)

  # Mode of the (concave) log-integrand by Newton's method from z = 0. f' is convex and
  # decreasing with f'(0) > 0, so the iterates increase monotonically to the mode.
  def newton_mode(_, z):
    _, df, neg_ddf = derivatives(z)
    return z + df / neg_ddf

  z0 = jnp.zeros(d.shape[:-1], dtype)
  mode = jax.lax.fori_loop(0, _MODE_NEWTON_STEPS, newton_mode, z0)
  f_m, df_m, a_m = derivatives(mode)
  level = f_m - _LOG_DROP

  # Conservative starting points where f <= level: f'' is increasing (the variance of a
  # truncated normal grows with the truncation point), so f'' <= f''(m) left of m and
  # f'' <= -1 everywhere.
  t_left = (-df_m + jnp.sqrt(df_m * df_m + 2.0 * a_m * _LOG_DROP)) / a_m
  t_right = df_m + jnp.sqrt(df_m * df_m + 2.0 * _LOG_DROP)

  # Newton on the concave f - level from outside the root never crosses the root, so every
  # iterate is a valid (conservative) end point; a few steps bring it close to the root.
  def newton_edge(_, z):
    f, df, _ = derivatives(z)
    safe = jnp.where(jnp.abs(df) > 0, df, 1.0)
    return jnp.where(jnp.abs(df) > 0, z - (f - level) / safe, z)

  lo = jax.lax.fori_loop(0, _EDGE_NEWTON_STEPS, newton_edge, mode - t_left)
  hi = jax.lax.fori_loop(0, _EDGE_NEWTON_STEPS, newton_edge, mode + t_right)

  u = jnp.linspace(0.0, 1.0, num_nodes, dtype=dtype)
  step = (hi - lo) / (num_nodes - 1)
  z = lo[..., None] + (hi - lo)[..., None] * u
  log_w = jnp.log(step)[..., None] + jnp.where(
      (jnp.arange(num_nodes) == 0) | (jnp.arange(num_nodes) == num_nodes - 1),
      math.log(0.5), 0.0).astype(dtype)
  return jax.nn.logsumexp(log_f(z) + log_w, axis=-1)


@functools.partial(jax.jit, static_argnames=("num_nodes",))
def _log_probabilities_jit(hist, sigma, num_nodes):
  return _class_log_probabilities(hist, sigma, num_nodes)


def _check_histogram(name, histogram):
  shape = np.shape(histogram)
  if len(shape) < 1 or shape[-1] < 2:
    raise ValueError(f"{name} must have at least 2 classes on its last axis, got shape {shape}")
  _validate.check_range(name, histogram)
  if _validate.is_concrete(histogram):
    arr = np.asarray(histogram)
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
      bad = ~np.isfinite(arr)
      idx = int(np.flatnonzero(bad.reshape(-1))[0])
      raise ValueError(f"{name}={arr.reshape(-1)[idx]} (at flat index {idx}) is outside the "
                       "valid range (-inf, inf)")


def _check_sigma(sigma, batch_shape):
  _validate.check_not_boolean("sigma", sigma, "noise scales")
  _validate.check_range("sigma", sigma, 0.0, None, low_open=True, finite=True)
  try:
    np.broadcast_shapes(np.shape(sigma), batch_shape)
  except ValueError:
    raise ValueError(f"sigma has shape {np.shape(sigma)}, which does not broadcast against the "
                     f"histogram batch shape {batch_shape}") from None


def _check_resolution(name, histogram, sigma):
  """Raises unless every ``(max - min of the histogram) / sigma`` is at most
  :data:`MAX_SPREAD_OVER_SIGMA` (concrete values only)."""
  if not _validate.is_concrete((histogram, sigma)):
    return
  hist = np.asarray(histogram, np.float64)
  spread = np.max(hist, axis=-1) - np.min(hist, axis=-1)
  spread, sig = np.broadcast_arrays(spread, np.asarray(sigma, np.float64))
  bad = spread > MAX_SPREAD_OVER_SIGMA * sig
  if np.any(bad):
    i = int(np.flatnonzero(bad.reshape(-1))[0])
    s, v = sig.reshape(-1)[i], spread.reshape(-1)[i]
    raise ValueError(f"sigma={s:g} is too small for {name} (spread {v:g} between its largest "
                     f"and smallest count): the quadrature resolves spread / sigma up to "
                     f"{MAX_SPREAD_OVER_SIGMA:g}; valid range sigma >= "
                     f"{v / MAX_SPREAD_OVER_SIGMA:g}")


def _prepare(histogram, sigma):
  dtype = _float_dtype()
  hist = jnp.asarray(histogram, dtype)
  batch = jnp.broadcast_shapes(hist.shape[:-1], jnp.shape(sigma))
  hist = jnp.broadcast_to(hist, batch + hist.shape[-1:])
  sig = jnp.broadcast_to(jnp.asarray(sigma, dtype), batch)
  return hist, sig


def noisy_argmax_log_probabilities(histogram, sigma, *, num_nodes: int | None = None
                                   ) -> jax.Array:
  r"""Log output probabilities of the Gaussian noisy argmax, Eq. (4) of Chadha et al.

  For :math:`H = (n_1, \dots, n_C)` and noise :math:`N(0, \sigma^2 I)`,

  .. math::
     \Pr[c] = \int_{-\infty}^{\infty} \frac{1}{\sigma}\phi\Big(\frac{x - n_c}{\sigma}\Big)
        \prod_{i \ne c} \Phi\Big(\frac{x - n_i}{\sigma}\Big)\,dx
      = \int_{-\infty}^{\infty} e^{f_c(z)}\,dz, \qquad
     f_c(z) = \log\phi(z) + \sum_{i \ne c} \log\Phi\Big(z + \frac{n_c - n_i}{\sigma}\Big),

  (Eq. (4), with the :math:`1/\sigma` density factor that the printed equation drops). Each
  :math:`f_c` is concave with :math:`-C < f_c'' \le -1`, and :math:`f_c''` is increasing
  (:math:`(\log\Phi)''(x) = \mathrm{Var}(Z \mid Z < x) - 1`). For a class far below the top
  the mass of :math:`e^{f_c}` moves into the tail of :math:`\phi` (for one class ahead by
  :math:`D` standard deviations it sits near :math:`z = D/2` with width
  :math:`1/\sqrt{2}`), so the grid is placed per class: Newton's method finds the mode
  :math:`m`; the end points are where :math:`f_c` has dropped by :math:`T = 40` below
  :math:`f_c(m)` (found by Newton's method started from the curvature bounds above, every
  iterate being a conservative end point); the integral is the trapezoid rule on
  ``num_nodes`` uniform nodes (exponentially convergent for this smooth integrand whose
  tails are below :math:`e^{-T}`), summed with log-sum-exp. Small probabilities therefore
  keep their relative accuracy (in float64 the error of :math:`\log\Pr[c]` is about 1e-15
  times :math:`\max(1, |\log\Pr[c]|)` against scipy/mpmath references), and even
  probabilities below the float64 range are returned as finite logs.

  The probabilities are *not* renormalised; their sum differs from 1 by the quadrature error
  only (about 1e-15; the tests require 1e-12).

  Args:
    histogram: vote counts :math:`n_c`, shape ``(..., C)`` with ``C >= 2``; any real values.
    sigma: noise standard deviation > 0; broadcasts against the batch shape ``(...)``.
    num_nodes: quadrature nodes per class (static); default :func:`default_num_nodes`.

  Returns:
    ``log Pr[c]``, shape ``(..., C)`` (batch shape broadcast with ``sigma``'s shape).
  """
  _check_histogram("histogram", histogram)
  _check_sigma(sigma, np.shape(histogram)[:-1])
  _check_resolution("histogram", histogram, sigma)
  hist, sig = _prepare(histogram, sigma)
  if num_nodes is None:
    num_nodes = default_num_nodes(hist.shape[-1])
  num_nodes = _validate.check_integer("num_nodes", num_nodes, 3)
  return _log_probabilities_jit(hist, sig, num_nodes)


def noisy_argmax_class_probabilities(histogram, sigma, *, num_nodes: int | None = None
                                     ) -> jax.Array:
  """Output probabilities of the Gaussian noisy argmax; ``exp`` of
  :func:`noisy_argmax_log_probabilities` (same arguments, shape ``(..., C)``)."""
  return jnp.exp(noisy_argmax_log_probabilities(histogram, sigma, num_nodes=num_nodes))


class RenyiPair(NamedTuple):
  """Renyi divergences in both directions, each of shape ``(..., K)`` for K orders."""
  forward: jax.Array  # D_alpha(M(H) || M(H'))
  reverse: jax.Array  # D_alpha(M(H') || M(H))


def _renyi_from_logs(log_p, log_q, orders):
  """D_alpha(P || Q) for normalised log-probabilities (..., C) and orders (K,) -> (..., K)."""
  am1 = (orders - 1.0)[:, None]
  # alpha log p + (1 - alpha) log q, written so that it is exactly log p when p == q.
  terms = log_p[..., None, :] + am1 * (log_p - log_q)[..., None, :]
  return jnp.maximum(jax.nn.logsumexp(terms, axis=-1) / am1[:, 0], 0.0)


@functools.partial(jax.jit, static_argnames=("num_nodes",))
def _renyi_jit(hist, nbr, sigma, orders, num_nodes):
  both = _class_log_probabilities(jnp.stack([hist, nbr]), jnp.stack([sigma, sigma]), num_nodes)
  both = both - jax.nn.logsumexp(both, axis=-1, keepdims=True)
  log_p, log_q = both[0], both[1]
  return RenyiPair(_renyi_from_logs(log_p, log_q, orders), _renyi_from_logs(log_q, log_p, orders))


def noisy_argmax_renyi(histogram, neighbor, sigma, orders, *, num_nodes: int | None = None
                       ) -> RenyiPair:
  r"""Exact Renyi divergences between the noisy-argmax output laws on ``H`` and ``H'``.

  With :math:`p = M(H)` and :math:`q = M(H')` the class distributions of Eq. (4) (Chadha et
  al., Sec. 4.2 "An Improved Upper Bound - Exact Renyi Divergence"),

  .. math::
     D_\alpha(p \,\|\, q) = \frac{1}{\alpha - 1}
       \log \sum_c \exp\big(\alpha \log p_c + (1 - \alpha)\log q_c\big),

  evaluated in log space from :func:`noisy_argmax_log_probabilities`. Both laws are
  renormalised to sum to one before the divergence is taken (this removes the common part of
  the quadrature error, which would otherwise be divided by :math:`\alpha - 1`), and the
  result is clipped at 0, so identical histograms give 0 up to rounding.

  Args:
    histogram: ``H``, shape ``(..., C)``.
    neighbor: ``H'``, the same shape as ``histogram``.
    sigma: noise standard deviation > 0; broadcasts against the batch shape.
    orders: Renyi orders :math:`\alpha > 1`, scalar or 1-D of length K.
    num_nodes: quadrature nodes per class (static); default :func:`default_num_nodes`.

  Returns:
    ``RenyiPair(forward, reverse)`` with :math:`D_\alpha(M(H)\|M(H'))` and
    :math:`D_\alpha(M(H')\|M(H))`, each of shape ``(..., K)`` (``(...,)`` for scalar orders).
  """
  _check_histogram("histogram", histogram)
  _check_histogram("neighbor", neighbor)
  _validate.check_same_shape("histogram", histogram, "neighbor", neighbor)
  _check_sigma(sigma, np.shape(histogram)[:-1])
  _check_resolution("histogram", histogram, sigma)
  _check_resolution("neighbor", neighbor, sigma)
  _validate.check_orders(orders)
  _validate.check_nonempty("orders", orders)
  hist, sig = _prepare(histogram, sigma)
  nbr, _ = _prepare(neighbor, sigma)
  if num_nodes is None:
    num_nodes = default_num_nodes(hist.shape[-1])
  num_nodes = _validate.check_integer("num_nodes", num_nodes, 3)
  scalar = np.ndim(orders) == 0
  ords = jnp.atleast_1d(jnp.asarray(orders, hist.dtype))
  out = _renyi_jit(hist, nbr, sig, ords, int(num_nodes))
  if scalar:
    out = RenyiPair(out.forward[..., 0], out.reverse[..., 0])
  return out


# ---------------------------------------------------------------------------------------------
# GNMax bounds of Papernot et al. (2018).


def _orders_and_sigma(sigma, orders):
  dtype = _float_dtype()
  return jnp.asarray(sigma, dtype)[..., None], jnp.atleast_1d(jnp.asarray(orders, dtype))


def gnmax_data_independent_rdp(sigma, orders) -> jax.Array:
  r"""Data-independent RDP of GNMax (Papernot et al. 2018, Prop. 8).

  .. math:: \varepsilon(\alpha) = \frac{\alpha}{\sigma^2}

  Neighbouring histograms differ by one moved vote (L2 sensitivity :math:`\sqrt 2`), so this
  is the RDP of releasing the whole noisy histogram (the "data independent" accounting of
  Chadha et al., Sec. 3).

  Args:
    sigma: noise standard deviation > 0, any shape ``S``.
    orders: orders :math:`\alpha > 1`, scalar or 1-D of length K.

  Returns:
    Shape ``S + (K,)`` (``S`` for scalar orders).
  """
  _validate.check_not_boolean("sigma", sigma, "noise scales")
  _validate.check_range("sigma", sigma, 0.0, None, low_open=True, finite=True)
  _validate.check_orders(orders)
  sig, ords = _orders_and_sigma(sigma, orders)
  out = ords / (sig * sig)
  return out[..., 0] if np.ndim(orders) == 0 else out


def _log1mexp(x):
  """log(1 - e^x) for x <= 0 (-inf at x = 0), accurate on both sides of -log 2."""
  x = jnp.minimum(x, 0.0)
  near = x > -math.log(2.0)
  safe_near = jnp.where(near, x, -1.0)
  safe_far = jnp.where(near, -1.0, x)
  return jnp.where(near, jnp.log(-jnp.expm1(safe_near)), jnp.log1p(-jnp.exp(safe_far)))


@jax.jit
def _log_q_bound_jit(hist, sigma):
  num_classes = hist.shape[-1]
  top = jnp.argmax(hist, axis=-1)
  gap = jnp.max(hist, axis=-1, keepdims=True) - hist
  terms = _log_ndtr(-gap / (_SQRT2 * sigma[..., None]))
  is_top = jnp.arange(num_classes) == top[..., None]
  log_q = jax.nn.logsumexp(jnp.where(is_top, -jnp.inf, terms), axis=-1)
  return jnp.minimum(log_q, math.log1p(-1.0 / num_classes))


def gnmax_log_q_bound(histogram, sigma) -> jax.Array:
  r"""Log of the bound :math:`\tilde q \ge \Pr[\text{output} \ne i^*]` of Papernot et al. (2018,
  Prop. 7), :math:`i^* = \arg\max_i n_i` (first index on ties).

  .. math::
     \tilde q = \min\Big(\sum_{i \ne i^*} \tfrac12\,\mathrm{erfc}
        \Big(\frac{n_{i^*} - n_i}{2\sigma}\Big),\; 1 - \frac1C\Big),
     \qquad \tfrac12\mathrm{erfc}\Big(\frac{g}{2\sigma}\Big)
       = \Phi\Big(-\frac{g}{\sqrt2\,\sigma}\Big),

  computed as a log-sum-exp of ``log_ndtr`` terms, so gaps of hundreds of standard deviations
  give finite logs. The union bound can exceed 1; it is capped at :math:`1 - 1/C`, which is
  itself a valid bound: the top-count class is the most likely output of the noisy argmax
  (raising a class's count only raises its probability), so
  :math:`\Pr[i^*] \ge 1/C`. The cap keeps :math:`\log\tilde q < 0`; Thm. 6 never applies at
  the cap for realistic :math:`\sigma`, which then falls back to the data-independent bound.

  Args:
    histogram: vote counts, shape ``(..., C)``, ``C >= 2``.
    sigma: noise standard deviation > 0; broadcasts against the batch shape.

  Returns:
    :math:`\log\tilde q`, the broadcast batch shape.
  """
  _check_histogram("histogram", histogram)
  _check_sigma(sigma, np.shape(histogram)[:-1])
  hist, sig = _prepare(histogram, sigma)
  return _log_q_bound_jit(hist, sig)


def _thm6_rdp(log_q, sigma, orders):
  """Papernot et al. Thm. 6 with Prop. 10's parameters; log_q, sigma (...,), orders (K,)."""
  log_q = log_q[..., None]
  sigma = sigma[..., None]
  var = sigma * sigma
  data_indep = orders / var
  finite = jnp.isfinite(log_q)
  lq = jnp.where(finite, jnp.minimum(log_q, -1e-300), -1.0)  # safe value where q = 0
  mu2 = sigma * jnp.sqrt(-lq)
  mu1 = mu2 + 1.0
  eps1 = mu1 / var
  eps2 = mu2 / var
  mu2_safe = jnp.where(mu2 > 1.0, mu2, 2.0)
  # q <= e^{(mu2 - 1) eps2} / (mu1/(mu1 - 1) * mu2/(mu2 - 1))^mu2, in logs.
  log_q_max = (mu2_safe - 1.0) * eps2 - mu2_safe * (
      jnp.log1p(1.0 / (mu1 - 1.0)) + jnp.log1p(1.0 / (mu2_safe - 1.0)))
  applies = (finite & (mu2 > 1.0) & (lq <= log_q_max) & (lq + eps2 < 0.0)
             & (orders < mu1))
  log_1mq = _log1mexp(lq)
  # log A = log(1 - q) - log(1 - (q e^{eps2})^{(mu2 - 1)/mu2}),  log B = eps1 - log q/(mu1 - 1).
  log_a = log_1mq - _log1mexp(jnp.minimum((lq + eps2) * (1.0 - 1.0 / mu2_safe), 0.0))
  log_b = eps1 - lq / (mu1 - 1.0)
  am1 = orders - 1.0
  bound = jnp.logaddexp(log_1mq + am1 * log_a, lq + am1 * log_b) / am1
  out = jnp.where(applies, jnp.minimum(bound, data_indep), data_indep)
  return jnp.where(finite, out, jnp.where(jnp.isneginf(log_q), 0.0, data_indep))


@jax.jit
def _data_dependent_jit(hist, sigma, orders):
  return _thm6_rdp(_log_q_bound_jit(hist, sigma), sigma, orders)


def gnmax_data_dependent_rdp(histogram, sigma, orders) -> jax.Array:
  r"""Data-dependent RDP bound of GNMax: Papernot et al. (2018), Thm. 6 with Prop. 10.

  With :math:`\tilde q` from :func:`gnmax_log_q_bound`,
  :math:`\mu_2 = \sigma\sqrt{\log(1/\tilde q)}`, :math:`\mu_1 = \mu_2 + 1` and
  :math:`\varepsilon_i = \mu_i/\sigma^2` (the data-independent RDP at order :math:`\mu_i`),

  .. math::
     \varepsilon(\lambda) \le \frac{1}{\lambda - 1}\log\Big((1 - \tilde q)\,A^{\lambda - 1}
        + \tilde q\,B^{\lambda - 1}\Big),\quad
     A = \frac{1 - \tilde q}{1 - (\tilde q e^{\varepsilon_2})^{(\mu_2 - 1)/\mu_2}},\quad
     B = \frac{e^{\varepsilon_1}}{\tilde q^{1/(\mu_1 - 1)}},

  whenever :math:`\mu_2 > 1`, :math:`\lambda < \mu_1` (Thm. 6 allows :math:`\lambda \le \mu_1`;
  at equality the bound is never below :math:`\lambda/\sigma^2`),
  :math:`\tilde q \le e^{(\mu_2 - 1)\varepsilon_2} / (\frac{\mu_1}{\mu_1 - 1}
  \frac{\mu_2}{\mu_2 - 1})^{\mu_2}` and :math:`\tilde q e^{\varepsilon_2} < 1` (so
  :math:`A > 0`). It is evaluated in log space. Elsewhere the data-independent
  :math:`\lambda/\sigma^2` is returned, and that value also caps the bound; where
  :math:`\tilde q = 0` (its log is :math:`-\infty`) the output is fixed and the RDP is 0.

  Args:
    histogram: vote counts, shape ``(..., C)``, ``C >= 2``.
    sigma: noise standard deviation > 0; broadcasts against the batch shape.
    orders: orders :math:`\lambda > 1`, scalar or 1-D of length K.

  Returns:
    Shape ``(..., K)`` (``(...,)`` for scalar orders).
  """
  _check_histogram("histogram", histogram)
  _check_sigma(sigma, np.shape(histogram)[:-1])
  _validate.check_orders(orders)
  _validate.check_nonempty("orders", orders)
  hist, sig = _prepare(histogram, sigma)
  ords = jnp.atleast_1d(jnp.asarray(orders, hist.dtype))
  out = _data_dependent_jit(hist, sig, ords)
  return out[..., 0] if np.ndim(orders) == 0 else out
