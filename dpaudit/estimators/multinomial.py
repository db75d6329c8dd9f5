"""Simultaneous confidence intervals for multinomial proportions in pure JAX.

The k-cut Renyi audit of "Auditing Private Prediction" (Chadha et al., App. C, "Auditing with
the k-cut") runs a noisy-argmax mechanism many times on two neighbouring inputs, counts how
often each of the k classes wins, and needs lower and upper bounds on all k class
probabilities at once to lower-bound the k-cut Renyi divergence. This module provides the two
intervals that audit uses:

* :func:`goodman_intervals`: Goodman's chi-square (Bonferroni) intervals, L. A. Goodman, "On
  simultaneous confidence intervals for multinomial proportions", Technometrics 7(2):247-254,
  1965.
* :func:`sison_glaz_intervals`: the Edgeworth-expansion intervals of C. P. Sison and J. Glaz,
  "Simultaneous confidence intervals and sample size determination for multinomial
  proportions", JASA 90(429):366-369, 1995.

Monte Carlo audits produce totals up to 1e9, so nothing here sums probabilities over windows
of data-dependent length: the Sison-Glaz coverage is assembled from Poisson tail
probabilities and a closed recursion for truncated-Poisson moments. Poisson tails use Temme's
uniform asymptotic expansion of the incomplete gamma function (DLMF 8.12) for large shapes and
a fixed-length series for small ones, and Poisson probabilities use Loader's saddle-point form
from :mod:`dpaudit.estimators.binomial`. (``jax.scipy.special.gammaincc`` forms its prefactor
from ``lgamma`` differences and loses about six digits at shape 1e9.)

All functions broadcast over leading (batch) axes, are jit- and vmap-able, and compute in
float64 when ``jax_enable_x64`` is on (float32 otherwise).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from jax.scipy.special import erfc, ndtri

from dpaudit import _validate
from dpaudit.estimators import _compile
from dpaudit.estimators.binomial import _WHOLE_STIRLING, Interval, _as_float, _stirling_series
from dpaudit.estimators.binomial import _bd0 as binomial_deviance  # unchecked: inner calls
from dpaudit.estimators.binomial import _stirling as stirling_remainder

__all__ = ["Interval", "TruncatedPoissonMoments", "goodman_intervals", "sison_glaz_intervals",
           "truncated_poisson_moments"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)

# The Sison-Glaz intervals run in the compiled program (``xp = jax.numpy``) or, for a first call
# on a small input, on the host (``xp = numpy``, float64): the same formulas, with these
# functions in place of JAX's special functions, and plain loops in place of ``lax`` loops.


def _floats(xp, *xs) -> tuple:
  """``xs`` as float arrays: the default float dtype in JAX, float64 in NumPy."""
  return _as_float(*xs) if xp is jnp else tuple(np.asarray(x, np.float64) for x in xs)


def _erfc(x, xp):
  return erfc(x) if xp is jnp else scipy.special.erfc(x)


def _stirling_whole(z, xp):
  """The Stirling remainder of :mod:`dpaudit.estimators.binomial` at whole ``z >= 1`` (the
  counts, window ends and totals here); in NumPy its table below 16 and its series above."""
  if xp is jnp:
    return stirling_remainder(z)
  return np.where(z > 15.0, _stirling_series(np.maximum(z, 16.0)),
                  _WHOLE_STIRLING[np.clip(z, 1.0, 15.0).astype(np.int64)])


def _deviance(k, m, xp):
  """Loader's ``bd0(k, m) = k log(k/m) + m - k`` (:mod:`dpaudit.estimators.binomial`); in
  NumPy its series in ``v = (k - m) / (k + m)`` where ``|k - m| < (k + m) / 10``."""
  if xp is jnp:
    return binomial_deviance(k, m)
  close = np.abs(k - m) < 0.1 * (k + m)
  safe_m = np.where(m > 0, m, 1.0)
  v = np.where(close, (k - m) * (1.0 / np.where(k + m > 0, k + m, 1.0)), 0.0)
  v2 = v * v  # the series' ten terms at once: 2 k v^(2j + 1) / (2j + 1), j = 1..10
  odd_powers = v[..., None] * np.cumprod(np.broadcast_to(v2[..., None], v.shape + (10,)), axis=-1)
  total = (k - m) * v + 2.0 * k * (odd_powers @ (1.0 / (2.0 * np.arange(1, 11) + 1.0)))
  safe_k = np.where(k > 0, k, 1.0)
  direct = np.where(k > 0, k * np.log(safe_k * (1.0 / safe_m)), 0.0) + m - k
  return np.where(close, total, direct)

# ----------------------------------------------------------------------------------------------
# Poisson tails (regularized incomplete gamma functions of whole-number shape).
# ----------------------------------------------------------------------------------------------

_SERIES_TERMS = 26     # Taylor terms in mu = x/s - 1; |mu| <= 0.2 gives 0.2^26 ~ 7e-19.
_SERIES_RADIUS = 0.2   # Beyond it, the closed forms lose at most ~6 digits of c_3 (x s^-3).


def _series_pow(f, alpha, terms):
  """Coefficients of f(mu)^alpha for a power series f with f(0) = 1 (J. C. P. Miller)."""
  g = [Fraction(1)] + [Fraction(0)] * (terms - 1)
  for n in range(1, terms):
    g[n] = sum(((alpha + 1) * k - n) * f[k] * g[n - k] for k in range(1, n + 1)) / n
  return g


def _temme_series_coefficients(terms=_SERIES_TERMS):
  r"""Exact Taylor coefficients in :math:`\mu = \lambda - 1` of ``h`` and ``c_0 .. c_3``.

  With :math:`\tfrac12\eta^2 = \mu - \log(1 + \mu)`, :math:`\eta = \mu\sqrt{h(\mu)}` where
  :math:`h = \sum_j 2(-1)^j \mu^j / (j + 2)`. Temme's coefficients (DLMF Sec. 8.12) are
  :math:`c_0 = 1/\mu - 1/\eta` and :math:`c_k = \eta^{-1} c_{k-1}'(\eta) + (-1)^k g_k / \mu`,
  i.e. :math:`c_k = \frac{1+\mu}{\mu}\frac{d c_{k-1}}{d\mu} + (-1)^k g_k / \mu`, where
  :math:`g_k` are the coefficients of :math:`\Gamma^*(a) \sim \sum_k g_k a^{-k}`
  (1, 1/12, 1/288, -139/51840). The :math:`\mu^{-1}` terms must cancel exactly, which is
  checked. The closed forms in :func:`_temme_eta_and_coefficients` follow from the same
  recursion (:math:`c_1` is DLMF's).
  """
  extra = 5
  n_terms = terms + extra
  h = [Fraction(2 * (-1) ** j, j + 2) for j in range(n_terms + 1)]
  inv_sqrt_h = _series_pow(h, Fraction(-1, 2), n_terms + 1)
  coeffs = [[-inv_sqrt_h[n + 1] for n in range(n_terms)]]
  stirling_g = (Fraction(1, 12), Fraction(1, 288), Fraction(-139, 51840))
  for k, g_k in enumerate(stirling_g, start=1):
    prev = coeffs[-1]
    deriv = [(n + 1) * prev[n + 1] for n in range(len(prev) - 1)]
    scaled = [deriv[n] + (deriv[n - 1] if n else 0) for n in range(len(deriv))]
    if scaled[0] + (-1) ** k * g_k != 0:
      raise RuntimeError("Temme coefficient recursion does not cancel; this is a bug")
    coeffs.append(scaled[1:])
  as_float = lambda cs: tuple(float(c) for c in cs[:terms])
  return as_float(h), tuple(as_float(c) for c in coeffs)


_H_SERIES, _C_SERIES = _temme_series_coefficients()
# (terms, 5): h, then c_0 .. c_3, each zero-padded to the longest series.
_SERIES_MATRIX = np.array([list(c) + [0.0] * (_SERIES_TERMS - len(c))
                           for c in (_H_SERIES,) + _C_SERIES]).T


def _horner(coeffs, x, xp=jnp):
  out = xp.full_like(x, coeffs[-1])
  for c in reversed(coeffs[:-1]):
    out = out * x + c
  return out


def _temme_eta_and_coefficients(mu, xp=jnp):
  r""":math:`\eta(\mu)` and Temme's :math:`c_0 .. c_3` (series near 0, closed forms away)."""
  near = xp.abs(mu) <= _SERIES_RADIUS
  mn = xp.where(near, mu, 0.0)
  if xp is np:  # the five series at once, from the powers of mu
    powers = np.cumprod(np.broadcast_to(mn[..., None], mn.shape + (_SERIES_TERMS,)), axis=-1)
    powers = np.concatenate([np.ones(mn.shape + (1,)), powers[..., :-1]], axis=-1)
    series = np.moveaxis(powers @ _SERIES_MATRIX, -1, 0)
    eta_near, c_near = mn * np.sqrt(series[0]), list(series[1:])
  else:
    eta_near = mn * xp.sqrt(_horner(_H_SERIES, mn, xp))
    c_near = [_horner(c, mn, xp) for c in _C_SERIES]
  mf = xp.where(near, 1.0, mu)
  eta_far = xp.sign(mf) * xp.sqrt(2.0 * (mf - xp.log1p(mf)))
  ie, im = 1.0 / eta_far, 1.0 / mf
  c_far = [
      im - ie,
      ie**3 - im**3 - im**2 - im / 12.0,
      -3.0 * ie**5 + 3.0 * im**5 + 5.0 * im**4 + 25.0 / 12.0 * im**3 + im**2 / 12.0
      + im / 288.0,
      15.0 * ie**7 - 15.0 * im**7 - 35.0 * im**6 - 105.0 / 4.0 * im**5 - 77.0 / 12.0 * im**4
      - 49.0 / 288.0 * im**3 - im**2 / 288.0 + 139.0 / 51840.0 * im,
  ]
  eta = xp.where(near, eta_near, eta_far)
  return eta, [xp.where(near, cn, cf) for cn, cf in zip(c_near, c_far)]


def _temme_min_shape(dtype) -> float:
  # Measured against mpmath: Temme truncated after c_3 is within 1e-13 relative from s = 500 on
  # (jax.scipy.special.gammaincc errs by 3e-13 there and by 1e-6 at s = 1e9). In float32 the
  # truncation error at s = 30 (~1e-9) is far below the float32 epsilon.
  return 500.0 if dtype == jnp.float64 else 30.0


def _series_steps(dtype) -> int:
  # Below the Temme threshold s0, series terms decay at least like exp(-n^2 / (2 s0)):
  # exp(-256^2 / 1000) ~ 1e-28 (float64), exp(-64^2 / 60) ~ 1e-30 (float32).
  return 256 if dtype == jnp.float64 else 64


def _temme_tails(s, x, xp=jnp):
  r"""``(P(s, x), Q(s, x))`` by Temme's uniform expansion (DLMF Sec. 8.12), ``x > 0``.

  With :math:`\lambda = x/s` and :math:`\tfrac12\eta^2 = \lambda - 1 - \log\lambda`
  (:math:`\eta` of the sign of :math:`\lambda - 1`),

  .. math::
     Q(s, x) = \tfrac12\operatorname{erfc}\big(\eta\sqrt{s/2}\big)
       + \frac{e^{-s\eta^2/2}}{\sqrt{2\pi s}} \sum_{k=0}^{3} c_k(\eta) s^{-k},
     \qquad P = 1 - Q,

  where the smaller of ``P`` and ``Q`` is formed directly and keeps its relative accuracy.
  """
  eta, cs = _temme_eta_and_coefficients((x - s) / s, xp)
  series = cs[0] + (cs[1] + (cs[2] + cs[3] / s) / s) / s
  remainder = xp.exp(-0.5 * s * eta * eta - _HALF_LOG_2PI - 0.5 * xp.log(s)) * series
  y = eta * xp.sqrt(0.5 * s)
  half_erfc = 0.5 * _erfc(xp.abs(y), xp)
  q_small = half_erfc + remainder  # Q when y >= 0 (x >= s)
  p_small = half_erfc - remainder  # P when y < 0
  p = xp.where(y >= 0.0, 1.0 - q_small, p_small)
  q = xp.where(y >= 0.0, q_small, 1.0 - p_small)
  return xp.clip(p, 0.0, 1.0), xp.clip(q, 0.0, 1.0)


def _poisson_series_tails(s, x, xp=jnp):
  r"""``(Pr[X >= s], Pr[X < s])`` for ``X ~ Poisson(x)``, whole ``s >= 1``, ``x > 0``, summing
  the pmf outward from ``s`` on the side where it decays:

  .. math::
     \Pr[X \ge s] = p(s)\sum_{n \ge 0}\prod_{m=1}^{n}\frac{x}{s+m}\ (x < s), \qquad
     \Pr[X < s] = p(s-1)\sum_{n \ge 0}\prod_{m=1}^{n}\frac{s-m}{x}\ (x \ge s).

  Accurate for ``s`` below :func:`_temme_min_shape` with :func:`_series_steps` terms.
  """
  upper = x < s
  log_first = _poisson_logpmf(xp.where(upper, s, s - 1.0), x, xp)

  def body(m, carry):
    term, total = carry
    mf = xp.asarray(m + 1, x.dtype)
    term = term * xp.where(upper, x / (s + mf), xp.maximum(s - mf, 0.0) / x)
    return term, total + term

  if xp is np:  # the same products, as one cumulative product over the steps
    m = np.arange(1.0, _series_steps(x.dtype) + 1.0)
    up, s_, x_ = upper[..., None], s[..., None], x[..., None]
    factors = np.where(up, x_ / (s_ + m), np.maximum(s_ - m, 0.0) / x_)
    total = 1.0 + np.sum(np.cumprod(factors, axis=-1), axis=-1)
  else:
    ones = xp.ones_like(x)
    _, total = jax.lax.fori_loop(0, _series_steps(x.dtype), body, (ones, ones))
  tail = xp.clip(xp.exp(log_first) * total, 0.0, 1.0)
  return xp.where(upper, tail, 1.0 - tail), xp.where(upper, 1.0 - tail, tail)


def _poisson_tails(s, rate, xp=jnp):
  """``(Pr[X >= s], Pr[X < s])`` for ``X ~ Poisson(rate)``, whole ``s >= 1``, ``rate >= 0``.

  These are the regularized incomplete gamma functions ``P(s, rate)`` and ``Q(s, rate)``: by
  Temme's expansion (:func:`_temme_tails`) from ``s =`` :func:`_temme_min_shape` on, by direct
  series (:func:`_poisson_series_tails`) below. Each tail is accurate in relative terms when it
  is the smaller one. ``jax.scipy.special.gammainc`` is not used: its prefactor loses six
  digits at ``s = 1e9``, its cost grows like ``sqrt(s)``, and it is slow to compile.
  """
  s, rate = xp.broadcast_arrays(*_floats(xp, s, rate))
  dtype = s.dtype
  s0 = _temme_min_shape(dtype)
  big = s >= s0
  positive = rate > 0.0
  if xp is np:  # each method on its own elements only
    p, q = np.zeros(s.shape), np.ones(s.shape)
    for method, where in ((_poisson_series_tails, positive & ~big), (_temme_tails, positive & big)):
      if np.any(where):
        p[where], q[where] = method(s[where], rate[where], np)
    return p, q
  p_small, q_small = _poisson_series_tails(xp.where(big, 1.0, s),
                                           xp.where(xp.logical_or(big, ~positive), 1.0, rate), xp)
  p_big, q_big = _temme_tails(xp.where(big, s, s0), xp.where(xp.logical_and(big, positive),
                                                                rate, s0), xp)
  p = xp.where(positive, xp.where(big, p_big, p_small), 0.0)
  q = xp.where(positive, xp.where(big, q_big, q_small), 1.0)
  return p, q


# ----------------------------------------------------------------------------------------------
# Poisson probabilities and truncated-Poisson moments.
# ----------------------------------------------------------------------------------------------


def _poisson_logpmf(x, rate, xp=jnp):
  """``log Pr[Poisson(rate) = x]`` for ``rate > 0`` by Loader's saddle-point form."""
  x, rate = xp.broadcast_arrays(*_floats(xp, x, rate))
  positive = x >= 1.0
  xs = xp.where(positive, x, 1.0)
  general = (-_stirling_whole(xs, xp) - _deviance(xs, rate, xp) - _HALF_LOG_2PI
             - 0.5 * xp.log(xs))
  return xp.where(positive, general, xp.where(x == 0.0, -rate, -xp.inf))


def _window_probability(rate, lower, upper, xp=jnp):
  """``Pr[lower <= X <= upper]`` for ``X ~ Poisson(rate)``, ``rate > 0``, ``lower >= 0``.

  With ``Pr[X <= k] = Q(k + 1, rate)`` and ``Pr[X > k] = P(k + 1, rate)``, tails are subtracted
  on the side of the mean where they are small, so a window inside one tail keeps its relative
  accuracy. Both ends go through one :func:`_poisson_tails` call.
  """
  ends = xp.stack([lower, upper + 1.0])
  # Pr[X >= s] and Pr[X < s]; s <= 0 means Pr[X >= s] = 1.
  p_tail, q_tail = _poisson_tails(xp.maximum(ends, 1.0), rate, xp)
  positive = ends >= 1.0
  p_tail = xp.where(positive, p_tail, 1.0)
  q_tail = xp.where(positive, q_tail, 0.0)
  sf_lo, sf_hi = p_tail[0], p_tail[1]    # Pr[X >= lower], Pr[X > upper]
  cdf_lo, cdf_hi = q_tail[0], q_tail[1]  # Pr[X < lower], Pr[X <= upper]
  prob = xp.where(upper < rate, cdf_hi - cdf_lo,
                   xp.where(lower > rate, sf_lo - sf_hi, 1.0 - cdf_lo - sf_hi))
  return xp.where(upper < lower, 0.0, xp.clip(prob, 0.0, 1.0))


class _WindowMoments(NamedTuple):
  prob: jax.Array    # Pr[lower <= X <= upper]
  shift: jax.Array   # E[Y] - rate
  var: jax.Array
  mu3: jax.Array
  mu4: jax.Array


_SHORT_WINDOW = 64  # Windows with at most this many points are summed directly.


def _short_window_moments(lam, a, b, xp=jnp) -> _WindowMoments:
  """Window probability and central moments by direct summation over at most
  ``_SHORT_WINDOW`` points (``lam > 0``, ``0 <= a``, ``b - a < _SHORT_WINDOW``).

  Weights ``p(a + j) / p(a)`` come from summed log-ratios ``log(lam / (a + i))``, scaled by
  their maximum; moments are two-pass, in offsets from ``lam``.
  """
  j = xp.arange(_SHORT_WINDOW, dtype=lam.dtype)
  lam_, a_ = lam[..., None], a[..., None]
  inside = j <= (b - a)[..., None]
  step = xp.where(xp.logical_and(j >= 1.0, inside), -xp.log1p((a_ + j - lam_) / lam_), 0.0)
  log_w = xp.cumsum(step, axis=-1)
  top = xp.max(xp.where(inside, log_w, -xp.inf), axis=-1, keepdims=True)
  w = xp.where(inside, xp.exp(log_w - top), 0.0)
  total = xp.sum(w, axis=-1)
  offset = a_ - lam_ + j
  shift = xp.sum(offset * w, axis=-1) / total
  d = offset - shift[..., None]
  d2 = d * d
  var = xp.sum(d2 * w, axis=-1) / total
  mu3 = xp.sum(d2 * d * w, axis=-1) / total
  mu4 = xp.sum(d2 * d2 * w, axis=-1) / total
  prob = xp.exp(_poisson_logpmf(a, lam, xp) + top[..., 0]) * total
  return _WindowMoments(xp.clip(prob, 0.0, 1.0), shift, var, mu3, mu4)


def _long_window_moments(lam, a, b, xp=jnp) -> _WindowMoments:
  r"""Window probability and central moments by the closed recursion (any window length).

  With :math:`p` the Poisson(:math:`\lambda`) pmf and
  :math:`S_j = \sum_{x=a}^{b} (x - \lambda)^j p(x)`, the identity :math:`x p(x) = \lambda
  p(x-1)` gives, for :math:`j \ge 1`,

  .. math::
     S_j = \lambda\Big[\sum_{l=0}^{j-2}\binom{j-1}{l} S_l + (a - \lambda)^{j-1} p(a-1)
       - (b + 1 - \lambda)^{j-1} p(b)\Big],

  so only :math:`S_0` (from Poisson tails) and the two boundary pmfs are needed. Raw moments
  about :math:`\lambda` are :math:`S_j / S_0`; central moments follow by shifting by
  :math:`S_1 / S_0`. The bracket of :math:`S_2` cancels to :math:`O(S_0 w^2 / \lambda)` for a
  window of half-width :math:`w`, amplifying the error of :math:`S_0` by
  :math:`\lambda / w^2`; short windows therefore go to :func:`_short_window_moments`.
  """
  p_before = xp.where(a >= 1.0, xp.exp(_poisson_logpmf(a - 1.0, lam, xp)), 0.0)
  p_last = xp.where(b >= a, xp.exp(_poisson_logpmf(b, lam, xp)), 0.0)
  s0 = _window_probability(lam, a, b, xp)
  u, v = a - lam, b + 1.0 - lam
  s1 = lam * (p_before - p_last)
  s2 = lam * (s0 + u * p_before - v * p_last)
  s3 = lam * (s0 + 2.0 * s1 + u * u * p_before - v * v * p_last)
  s4 = lam * (s0 + 3.0 * s1 + 3.0 * s2 + u**3 * p_before - v**3 * p_last)
  ok = s0 > 0.0
  inv = xp.where(ok, 1.0 / xp.where(ok, s0, 1.0), 0.0)
  m1, m2, m3, m4 = s1 * inv, s2 * inv, s3 * inv, s4 * inv
  var = xp.maximum(m2 - m1 * m1, 0.0)
  mu3 = m3 - 3.0 * m1 * m2 + 2.0 * m1**3
  mu4 = m4 - 4.0 * m1 * m3 + 6.0 * m1 * m1 * m2 - 3.0 * m1**4
  return _WindowMoments(s0, m1, var, mu3, mu4)


def _window_moments(rate, lower, upper, xp=jnp) -> _WindowMoments:
  """Probability and central moments of ``X ~ Poisson(rate)`` truncated to ``[lower, upper]``:
  :func:`_short_window_moments` for windows of at most ``_SHORT_WINDOW`` points,
  :func:`_long_window_moments` otherwise; ``rate = 0`` is a point mass at 0. Where the window
  has probability 0 the moments are 0."""
  rate, lower, upper = xp.broadcast_arrays(*_floats(xp, rate, lower, upper))
  a = xp.maximum(lower, 0.0)
  b = upper
  degenerate = rate <= 0.0
  lam = xp.where(degenerate, 1.0, rate)
  short = b - a < _SHORT_WINDOW
  empty = b < a
  if xp is np:  # each method on its own windows only
    point = np.logical_and(a <= 0.0, b >= 0.0).astype(np.float64)
    out = [np.where(degenerate, point, 0.0)] + [np.zeros(a.shape) for _ in range(4)]
    regular = ~degenerate & ~empty
    for method, where in ((_short_window_moments, regular & short),
                          (_long_window_moments, regular & ~short)):
      if np.any(where):
        for value, part in zip(out, method(lam[where], a[where], b[where], np)):
          value[where] = part
    return _WindowMoments(*out)
  short_m = _short_window_moments(lam, xp.where(short, a, lam), xp.where(short, b, lam), xp)
  long_m = _long_window_moments(lam, a, b, xp)
  point_prob = xp.where(xp.logical_and(a <= 0.0, b >= 0.0), 1.0, 0.0)
  zero = xp.zeros_like(a)

  def pick(point, short_v, long_v):
    value = xp.where(short, short_v, long_v)
    return xp.where(degenerate, point, xp.where(empty, zero, value))

  return _WindowMoments(*(pick(*vs) for vs in zip((point_prob, zero, zero, zero, zero),
                                                      short_m, long_m)))


class TruncatedPoissonMoments(NamedTuple):
  """Law of ``X ~ Poisson(rate)`` conditioned on ``lower <= X <= upper``."""
  prob: jax.Array       # Pr[lower <= X <= upper]
  mean: jax.Array
  variance: jax.Array
  mu3: jax.Array        # third central moment
  mu4: jax.Array        # fourth central moment


def truncated_poisson_moments(rate, lower, upper) -> TruncatedPoissonMoments:
  r"""Window probability, mean and central moments of a truncated Poisson variable.

  Windows of up to 64 points are summed directly; longer ones use the closed recursion of
  :func:`_long_window_moments` (no summation), so the cost does not depend on the window length
  and rates up to ~1e12 are fine.

  Args:
    rate: Poisson rate :math:`\lambda \ge 0` (``0`` is a point mass at 0).
    lower: whole-number lower end of the window (values below 0 act as 0).
    upper: whole-number upper end of the window (inclusive).

  Returns:
    ``TruncatedPoissonMoments`` with the broadcast shape of the inputs; where the window has
    probability 0 the moments are reported relative to ``rate`` as 0 (mean = rate).
  """
  _validate.check_range("rate", rate, 0.0, finite=True)
  for name, end in (("lower", lower), ("upper", upper)):
    _validate.check_not_boolean(name, end)
    _validate.check_integer_valued(name, end)
  m = _window_moments(rate, lower, upper)
  (rate,) = _as_float(rate)
  return TruncatedPoissonMoments(m.prob, rate + m.shift, m.var, m.mu3, m.mu4)


# ----------------------------------------------------------------------------------------------
# Public intervals.
# ----------------------------------------------------------------------------------------------


def check_interval_inputs(counts, significance) -> None:
  """The checks of :func:`goodman_intervals` and :func:`sison_glaz_intervals` (ValueError)."""
  _validate.check_significance(significance)
  shape = np.shape(counts)
  if len(shape) < 1 or shape[-1] < 2:
    raise ValueError(f"counts must have at least 2 categories on its last axis, got shape "
                     f"{shape}")
  _validate.check_counts("counts", counts)
  if _validate.is_concrete(counts):
    totals = np.sum(np.asarray(counts, np.float64), axis=-1)
    bad = totals <= 0
    if np.any(bad):
      where = "" if totals.ndim == 0 else f" (at batch index {np.argwhere(bad)[0].tolist()})"
      raise ValueError(f"counts has total 0{where}; need a positive total count")


def _broadcast_call(core, n, beta) -> Interval:
  """Broadcasts the batch of counts ``n`` against ``beta`` and calls ``core``."""
  shape = jnp.broadcast_shapes(n.shape[:-1], beta.shape)
  return core(jnp.broadcast_to(n, shape + n.shape[-1:]), jnp.broadcast_to(beta, shape))


def _validated_call(core, counts, significance, host=None, min_rows=None) -> Interval:
  """Validates, broadcasts the batch of counts against significance, and calls ``core`` on
  its rows (:func:`rows_call`; ``host``: its exact NumPy path, or None; ``min_rows``: as in
  :func:`row_bucket`)."""
  check_interval_inputs(counts, significance)
  if (not _validate.is_concrete((counts, significance))
      or _compile.platform((counts, significance)) != "cpu"):
    return _broadcast_call(core, *_as_float(counts, significance))
  rows, beta, batch = padded_rows(counts, significance, min_rows)
  return cut_rows(_compile.first_call(core, on_real_rows(host, len(beta), batch),
                                      (rows, beta), rows.size), batch)


def padded_rows(counts, significance, min_rows=None) -> tuple[np.ndarray, np.ndarray, tuple]:
  """The rows of ``counts`` (its batch broadcast against ``significance``, flattened) and their
  significances, in the default float dtype, padded to :func:`row_bucket` rows (``min_rows`` as
  there) by repeating the last (a copy of a row is a valid row), so that one compiled program
  serves every batch of rows in a bucket; and the batch shape."""
  dtype = jnp.result_type(float)
  counts, beta = np.asarray(counts, dtype), np.asarray(significance, dtype)
  batch = np.broadcast_shapes(counts.shape[:-1], beta.shape)
  size = math.prod(batch)
  rows = np.broadcast_to(counts, batch + counts.shape[-1:]).reshape(size, counts.shape[-1])
  bucket = row_bucket(size, counts.shape[-1], min_rows)
  return (_compile.pad_edge(rows, bucket, axis=0),
          _compile.pad_edge(np.broadcast_to(beta, batch).reshape(size), bucket, axis=0), batch)


def row_bucket(rows: int, width: int, min_rows: int | None = None) -> int:
  """The number of rows a batch of ``rows`` rows of ``width`` elements is padded to: the least
  power of two at or above it, and at least ``min_rows`` rows (default: at least
  :data:`_compile.MIN_BUCKET` rows where those hold at most :data:`_compile.SMALL_ELEMENTS`
  elements, so that a single RDP curve over 400,000 orders is not copied 128 times). Iterative
  programs whose every step costs in proportion to the rows (the Sison-Glaz search) take
  ``min_rows=1``: one row padded to 128 made each call 20 times slower.

  >>> row_bucket(1000, 10), row_bucket(3, 10), row_bucket(1, 400_000), row_bucket(3, 400_000)
  (1024, 128, 1, 4)
  >>> row_bucket(3, 10, min_rows=1)
  4
  """
  if min_rows is None:
    min_rows = min(_compile.MIN_BUCKET, max(1, _compile.SMALL_ELEMENTS // max(width, 1)))
  return max(min_rows, 1 << max(0, rows - 1).bit_length())


def on_real_rows(host, bucket: int, batch: tuple, rows_at: tuple | None = None):
  """``host`` (a NumPy function of padded rows, or None) evaluated on the real rows only (the
  first ``prod(batch)``) of the arguments at positions ``rows_at`` (default: all), its outputs
  padded back to ``bucket`` rows by repeating the last."""
  if host is None:
    return None
  size = math.prod(batch)

  def call(*args):
    out = host(*(np.asarray(a)[:size] if rows_at is None or i in rows_at else a
                 for i, a in enumerate(args)))
    return jax.tree_util.tree_map(lambda y: _compile.pad_edge(y, bucket, axis=0), out)
  return call


def cut_rows(out, batch: tuple):
  """A program's outputs on :func:`padded_rows` cut to the real rows and shaped ``batch``."""
  return jax.tree_util.tree_map(lambda y: _compile._cut(y, math.prod(batch), batch), out)


def goodman_intervals(counts, significance=0.05) -> Interval:
  r"""Goodman's simultaneous confidence intervals for multinomial proportions.

  With category counts :math:`n_i` summing to :math:`N` over :math:`k` categories and
  :math:`A = \chi^2_{1}(1 - \beta/k) = \Phi^{-1}(\beta/(2k))^2`,

  .. math::
     p_i \in \frac{A + 2n_i \mp \sqrt{A\,(A + 4 n_i (N - n_i)/N)}}{2(N + A)}
     \quad\text{for all } i,

  with asymptotic (large :math:`n_i`) simultaneous coverage at least :math:`1 - \beta` by a
  Bonferroni split of :math:`\beta` over the k Wilson-type intervals (L. A. Goodman,
  Technometrics 7(2):247-254, 1965). The k-cut audit of Chadha et al. (App. C) uses these
  bounds on the class probabilities of a noisy-argmax mechanism to lower-bound its k-cut Renyi
  divergence. The lower end is evaluated in the rationalized form
  :math:`2n_i^2 / (N(A + 2n_i + \sqrt{\cdot}))`, which avoids cancellation.

  Args:
    counts: whole-number counts of shape ``(..., k)``, ``k >= 2``, with a positive total on
      each row; leading axes are a batch.
    significance: beta in (0, 1); a scalar or an array broadcastable to ``counts.shape[:-1]``.

  Returns:
    ``Interval(lower, upper)``, each of shape ``counts.shape`` and within [0, 1].

  >>> interval = goodman_intervals([30, 50, 20])  # 95% for all three proportions at once
  >>> [round(float(v), 4) for v in interval.lower], [round(float(v), 4) for v in interval.upper]
  ([0.2036, 0.3836, 0.1217], [0.4181, 0.6164, 0.3108])
  """
  return _validated_call(_goodman_core, counts, significance, host_goodman)


def _goodman(n, beta, xp, quantile):
  k = n.shape[-1]
  total = xp.sum(n, axis=-1, keepdims=True)
  a = quantile(beta[..., None] / (2.0 * k)) ** 2
  root = xp.sqrt(a * (a + 4.0 * n * (total - n) / total))
  lower = 2.0 * n * n / (total * (a + 2.0 * n + root))
  upper = (a + 2.0 * n + root) / (2.0 * (total + a))
  return Interval(xp.clip(lower, 0.0, 1.0), xp.clip(upper, 0.0, 1.0))


@_compile.jit
def _goodman_core(n, beta):
  return _goodman(n, beta, jnp, ndtri)


def host_goodman(n, beta) -> Interval:
  """The Goodman intervals of float rows ``n`` at significances ``beta`` (broadcasting against
  the batch) in NumPy and scipy, float64: the formula of :func:`goodman_intervals`, for first
  calls on small inputs (:func:`_compile.first_call`). No checks."""
  return _goodman(np.asarray(n, np.float64), np.asarray(beta, np.float64), np,
                  scipy.special.ndtri)


def _sison_glaz_coverage(n, total, c, xp=jnp):
  r"""Sison and Glaz's Edgeworth approximation :math:`\nu(c)` of
  :math:`\Pr[n_i - c \le X_i \le n_i + c\ \forall i]` for ``X ~ Multinomial(N, n/N)``.

  ``n`` has shape ``(..., k)``, ``total`` ``(..., 1)`` and ``c`` (``>= 1``) ``(...)``. Windows
  are clipped to ``[0, N]``. Negative Edgeworth densities give coverage 0 (statsmodels gets NaN
  there and never stops its scan at such a ``c``).
  """
  cc = c[..., None]
  m = _window_moments(n, xp.maximum(n - cc, 0.0), xp.minimum(n + cc, total), xp)
  var = xp.sum(m.var, axis=-1)
  # N - sum_i E[Y_i] = -sum_i (E[Y_i] - n_i), exactly, since the n_i sum to N.
  x = -xp.sum(m.shift, axis=-1) / xp.sqrt(var)
  g1 = xp.sum(m.mu3, axis=-1) / var**1.5
  g2 = xp.sum(m.mu4 - 3.0 * m.var**2, axis=-1) / var**2
  x2 = x * x
  poly = (1.0 + g1 / 6.0 * x * (x2 - 3.0) + g2 / 24.0 * (x2 * (x2 - 6.0) + 3.0)
          + g1 * g1 / 72.0 * (x2 * (x2 * (x2 - 15.0) + 45.0) - 15.0))
  total = total[..., 0]
  # log[N! / (N^N e^-N)] by Stirling's formula with its exact remainder.
  log_scale = _stirling_whole(total, xp) + _HALF_LOG_2PI + 0.5 * xp.log(total)
  log_prob = xp.sum(xp.log(m.prob), axis=-1)
  log_nu = log_scale + log_prob - 0.5 * x2 - _HALF_LOG_2PI - 0.5 * xp.log(var)
  return xp.maximum(xp.exp(log_nu) * poly, 0.0)


_GALLOP_RATIO = 64  # Scan steps are max(1, floor(c / 64)): at most 1.6% of c.


def _sison_glaz_search(n, total, beta, xp=jnp):
  r"""First integer ``c`` with :math:`\nu(c) \le 1 - \beta < \nu(c + 1)`, and the coverages.

  Conventions (those of R's MultinomialCI and statsmodels): :math:`\nu(0) = 0`, and
  :math:`\nu(c) = 1` for :math:`c \ge N`, where every window covers the whole support.

  For very unbalanced or sparse counts the Edgeworth approximation :math:`\nu` is *not*
  monotone in ``c`` (it can exceed :math:`1 - \beta` at ``c = 1`` and fall back below it), and
  the reference implementations take the *first* crossing of an upward scan. A unit-step scan
  would take :math:`O(\sqrt N)` steps, so this scans upward with steps
  ``max(1, floor(c / 64))`` (unit steps up to ``c = 127``, then geometric growth; about 500
  steps for ``N = 1e9``) until :math:`\nu > 1 - \beta`, then bisects the last step. The result
  is the first crossing unless :math:`\nu` crosses :math:`1-\beta` twice within one step of
  width at most 1.6% of ``c``. Scan and bisection share one ``lax.while_loop`` (so the
  coverage is traced once); the function is jit- and vmap-able, and batched rows run until the
  slowest one is done.
  """
  target = 1.0 - beta
  dtype = total.dtype
  total1 = total[..., 0]

  def coverage(c):
    # nu(c) = 1 once c >= N (coverage evaluated at a harmless c there).
    inside = c < total1
    nu = _sison_glaz_coverage(n, total, xp.where(inside, c, 1.0), xp)
    return xp.where(inside, nu, 1.0)

  zeros = xp.zeros(target.shape, dtype)

  # One loop for both phases, so that the (costly to compile) coverage is traced once. Rows
  # still scanning probe ``hi``; rows that found a bracket probe its midpoint.
  def cond(state):
    lo, hi, _, _, found = state
    return xp.any(xp.logical_or(xp.logical_not(found), hi - lo > 1.0))

  def body(state):
    lo, hi, nu_lo, nu_hi, found = state
    mid = xp.floor(0.5 * (lo + hi))
    bisecting = xp.logical_and(found, hi - lo > 1.0)
    probe = xp.where(bisecting, mid, hi)
    nu = coverage(probe)
    # c >= N always counts as above, so the loop ends even for a traced beta outside (0, 1).
    above = xp.logical_or(nu > target, probe >= total1)
    scanning = xp.logical_not(found)
    step = xp.maximum(xp.floor(hi / _GALLOP_RATIO), 1.0)
    lower_moves = xp.logical_and(xp.logical_or(scanning, bisecting), xp.logical_not(above))
    upper_moves = xp.logical_and(bisecting, above)
    new_hi = xp.where(upper_moves, mid,
                       xp.where(xp.logical_and(scanning, xp.logical_not(above)),
                                 xp.minimum(hi + step, total1), hi))
    return (xp.where(lower_moves, probe, lo), new_hi,
            xp.where(lower_moves, nu, nu_lo),
            xp.where(xp.logical_or(upper_moves, xp.logical_and(scanning, above)), nu, nu_hi),
            xp.logical_or(found, above))

  state = (zeros, xp.ones_like(zeros), zeros, xp.ones_like(zeros), xp.zeros(zeros.shape, bool))
  if xp is np:
    while cond(state):
      state = body(state)
    lo, _, nu_lo, nu_hi, _ = state
  else:
    lo, _, nu_lo, nu_hi, _ = jax.lax.while_loop(cond, body, state)
  return lo, nu_lo, nu_hi


def _sison_glaz(n, beta, xp=jnp) -> Interval:
  total = xp.sum(n, axis=-1, keepdims=True)
  c, nu_c, nu_c1 = _sison_glaz_search(n, total, beta, xp)
  gamma = (1.0 - beta - nu_c) / (nu_c1 - nu_c)
  lower = (n - c[..., None]) / total
  upper = (n + (c + 2.0 * gamma)[..., None]) / total
  return Interval(xp.clip(lower, 0.0, 1.0), xp.clip(upper, 0.0, 1.0))


@_compile.jit(fusion_emitters=False, tree_reductions=False)
def _sison_glaz_core(n, beta):
  return _sison_glaz(n, beta)


SISON_GLAZ_MIN_ROWS = 1
"""The fewest rows a Sison-Glaz program runs on (:func:`row_bucket`): each step of its search
costs in proportion to the rows, so small batches are not padded to the usual 128."""

SISON_GLAZ_HOST_ROWS = 16
"""Most rows whose Sison-Glaz intervals a first call computes on the host (:func:`host_sison_glaz`).
Its search steps are NumPy calls on every row until the slowest row is done: measured in fresh
processes on the 2-core machine under load, one row of total 100 took 20-80 ms and one of 1e9
(500 steps) 1.5 s, against 2-15 s to compile the program; 200 rows of total 1e4 took 1.1-3.6 s
and 2,000 rows 26 s, where the compiled program takes 0.5 s and 7.5 s."""


def host_sison_glaz(n, beta) -> Interval:
  """The Sison-Glaz intervals of float rows ``n`` at significances ``beta`` (one per row) in
  NumPy and scipy, float64: the program's search and formulas run on the host, for first calls
  on small inputs (:func:`_compile.first_call`). No checks."""
  n, beta = np.asarray(n, np.float64), np.asarray(beta, np.float64)
  with np.errstate(all="ignore"):  # both branches of each select are formed, as in the program
    return _sison_glaz(n, beta, np)


def sison_glaz_intervals(counts, significance=0.05) -> Interval:
  r"""Sison and Glaz's simultaneous confidence intervals for multinomial proportions.

  Let :math:`n_i` be the counts, :math:`N = \sum_i n_i`, and :math:`Y_i` be
  :math:`X_i \sim \mathrm{Poisson}(n_i)` truncated to :math:`[n_i - c, n_i + c] \cap [0, N]`,
  with mean :math:`\mu_i`, variance :math:`\sigma_i^2` and third and fourth central moments
  :math:`\mu_{3,i}, \mu_{4,i}`. The coverage of the box of half-width ``c`` is approximated
  (Levin's representation plus an Edgeworth expansion) by

  .. math::
     \nu(c) = \frac{N!}{N^N e^{-N}} \prod_i \Pr[n_i - c \le X_i \le n_i + c]\,
       \frac{f_e\big((N - \sum_i\mu_i)/\sqrt{\textstyle\sum_i\sigma_i^2}\big)}
            {\sqrt{\textstyle\sum_i\sigma_i^2}},

  .. math::
     f_e(x) = \phi(x)\Big[1 + \frac{\gamma_1}{6}(x^3 - 3x)
       + \frac{\gamma_2}{24}(x^4 - 6x^2 + 3)
       + \frac{\gamma_1^2}{72}(x^6 - 15x^4 + 45x^2 - 15)\Big],

  with :math:`\gamma_1 = \sum_i\mu_{3,i} / (\sum_i\sigma_i^2)^{3/2}` and
  :math:`\gamma_2 = \sum_i(\mu_{4,i} - 3\sigma_i^4) / (\sum_i\sigma_i^2)^2`. For the integer
  ``c`` with :math:`\nu(c) \le 1 - \beta < \nu(c + 1)` and
  :math:`\gamma = (1 - \beta - \nu(c)) / (\nu(c+1) - \nu(c))`, the intervals are

  .. math::
     p_i \in \Big[\frac{n_i - c}{N},\ \frac{n_i + c + 2\gamma}{N}\Big] \cap [0, 1].

  (C. P. Sison and J. Glaz, JASA 90(429):366-369, 1995.) The conventions :math:`\nu(0) = 0`
  and :math:`\nu(c) = 1` for :math:`c \ge N`, the clipping of the windows and of the intervals,
  and the choice of the *first* such ``c`` (:math:`\nu` need not be monotone in ``c`` for very
  unbalanced counts) follow R's MultinomialCI and statsmodels'
  ``multinomial_proportions_confint(method="sison-glaz")``. ``c`` is found by an upward scan
  with geometrically growing steps and a final bisection (:func:`_sison_glaz_search`), so the
  cost grows only logarithmically with ``N``; truncated-Poisson moments come from a closed
  recursion (:func:`_long_window_moments`), so totals up to ~1e9 and beyond are fine. Where
  the Edgeworth density is negative, :math:`\nu` is taken as 0 (statsmodels gets NaN there;
  the two differ only if such a ``c`` is followed by a crossing).

  The k-cut audit of Chadha et al. (App. C) uses these bounds on the class probabilities of a
  noisy-argmax mechanism to lower-bound its k-cut Renyi divergence; they are less conservative
  than :func:`goodman_intervals` but only asymptotically valid (Sison and Glaz recommend them
  for many categories of similar size).

  Args:
    counts: whole-number counts of shape ``(..., k)``, ``k >= 2``, with a positive total on
      each row; leading axes are a batch.
    significance: beta in (0, 1); a scalar or an array broadcastable to ``counts.shape[:-1]``.

  Returns:
    ``Interval(lower, upper)``, each of shape ``counts.shape`` and within [0, 1].

  >>> interval = sison_glaz_intervals([30, 50, 20])  # 95% for all three proportions at once
  >>> [round(float(v), 4) for v in interval.lower], [round(float(v), 4) for v in interval.upper]
  ([0.2, 0.4, 0.1], [0.4028, 0.6028, 0.3028])
  """
  rows = math.prod(np.broadcast_shapes(np.shape(counts)[:-1], np.shape(significance)))
  return _validated_call(_sison_glaz_core, counts, significance,
                         host_sison_glaz if rows <= SISON_GLAZ_HOST_ROWS else None,
                         min_rows=SISON_GLAZ_MIN_ROWS)


def simultaneous_intervals(method: str, counts, significance) -> Interval:
  """``method``'s intervals ("sison-glaz" or "goodman") for use inside other estimators'
  programs: traceable; float counts whose batch broadcasts against ``significance``. Concrete
  inputs are checked as by :func:`check_interval_inputs` (traced ones are the caller's to
  check)."""
  _validate.check_choice("method", method, ("sison-glaz", "goodman"))
  check_interval_inputs(counts, significance)
  core = {"sison-glaz": _sison_glaz_core, "goodman": _goodman_core}[method]
  return _broadcast_call(core, counts, jnp.asarray(significance, counts.dtype))
