"""Exact binomial tails and Clopper-Pearson intervals in pure JAX.

Every estimator in dpaudit that turns counts into a confidence statement goes through this
module. ``jax.scipy.special.betainc`` is not accurate enough here: its prefactor
``x^a (1-x)^b / B(a, b)`` is formed from differences of ``lgamma`` values, which loses about
six significant digits once ``a + b`` reaches 1e9, and its continued fraction stops after 600
terms. Monte Carlo audits produce exactly such counts, so this module evaluates the prefactor
with Loader's saddle-point form (deviance ``bd0`` and Stirling remainders, C. Loader, "Fast and
Accurate Computation of Binomial Probabilities", 2000) and runs the continued fraction for the
regularized incomplete beta function (DLMF 8.17.22) until it converges.

All functions broadcast over their arguments, are jit- and vmap-able, and compute in float64
when ``jax_enable_x64`` is on (float32 otherwise).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpaudit import _validate

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _float_dtype():
  return jnp.result_type(float)


def _as_float(*xs):
  dtype = _float_dtype()
  return tuple(jnp.asarray(x, dtype) for x in xs)


def stirling_remainder(z: jax.Array) -> jax.Array:
  r"""Remainder of Stirling's formula, :math:`\log\Gamma(z+1) - \log(\sqrt{2\pi z}(z/e)^z)`.

  Uses the asymptotic series for ``z > 15`` (truncation error below 1e-16) and the direct
  ``lgamma`` difference otherwise, where no large terms cancel.
  """
  (z,) = _as_float(z)
  big = z > 15.0
  zb = jnp.where(big, z, 16.0)
  zb2 = zb * zb
  series = (1.0 / 12 - (1.0 / 360 - (1.0 / 1260 - (1.0 / 1680 - (1.0 / 1188) / zb2) / zb2) / zb2)
            / zb2) / zb
  zs = jnp.where(big, 1.0, jnp.maximum(z, jnp.finfo(z.dtype).tiny))
  direct = jax.lax.lgamma(zs + 1.0) - _HALF_LOG_2PI - 0.5 * jnp.log(zs) - zs * jnp.log(zs) + zs
  return jnp.where(big, series, direct)


def binomial_deviance(k: jax.Array, m: jax.Array) -> jax.Array:
  r"""Loader's ``bd0(k, m) = k log(k/m) + m - k`` without cancellation when ``k ~ m``."""
  k, m = _as_float(k, m)
  close = jnp.abs(k - m) < 0.1 * (k + m)
  safe_m = jnp.where(m > 0, m, 1.0)
  v = jnp.where(close, (k - m) / jnp.where(k + m > 0, k + m, 1.0), 0.0)
  total = (k - m) * v
  term = 2.0 * k * v
  v2 = v * v
  for j in range(1, 11):  # |v| < 0.1, so the terms fall below 1e-20 of the first.
    term = term * v2
    total = total + term / (2 * j + 1)
  safe_k = jnp.where(k > 0, k, 1.0)
  direct = jnp.where(k > 0, k * jnp.log(safe_k / safe_m), 0.0) + m - k
  return jnp.where(close, total, direct)


def log_beta_prefactor(a: jax.Array, b: jax.Array, x: jax.Array, y: jax.Array | None = None
                       ) -> jax.Array:
  r"""``log(x^a (1-x)^b / (a B(a, b)))``, accurate for any ``a, b > 0`` and ``0 < x < 1``.

  .. math::
     \frac{x^a(1-x)^b}{a\,B(a,b)} = \frac{b}{a+b}\sqrt{\frac{n}{2\pi a b}}
       \exp\big(s(n) - s(a) - s(b) - \mathrm{bd0}(a, nx) - \mathrm{bd0}(b, ny)\big),
     \quad n = a + b,\; y = 1 - x,

  where ``s`` is :func:`stirling_remainder` (Loader 2000, Sec. 2). Pass ``y = 1 - x`` when it
  is known more accurately than ``1 - x`` can be formed (x close to 1).
  """
  a, b, x = _as_float(a, b, x)
  y = 1.0 - x if y is None else _as_float(y)[0]
  n = a + b
  log_d = (0.5 * (jnp.log(n) - jnp.log(a) - jnp.log(b)) - _HALF_LOG_2PI
           + stirling_remainder(n) - stirling_remainder(a) - stirling_remainder(b)
           - binomial_deviance(a, n * x) - binomial_deviance(b, n * y))
  return log_d + jnp.log(b) - jnp.log(n)


def _beta_continued_fraction(a, b, x, y, max_iterations):
  """Modified Lentz evaluation of the continued fraction of DLMF 8.17.22 (converges for
  ``x < (a + 1) / (a + b + 2)``); runs until every element has converged.

  The leading term ``1 - (a + b) x / (a + 1)`` cancels badly when ``x`` is close to 1 and
  ``a + b`` is large (the Poisson regime of a binomial tail), so it is formed as
  ``((1 - b) + (a + b) y) / (a + 1)`` with ``y = 1 - x`` supplied exactly.
  """
  dtype = x.dtype
  tiny = jnp.asarray(1e-300 if dtype == jnp.float64 else 1e-30, dtype)
  eps = jnp.asarray(jnp.finfo(dtype).eps, dtype)

  def clamp(v):
    return jnp.where(jnp.abs(v) < tiny, tiny, v)

  f0 = jnp.ones_like(x)
  c0 = jnp.ones_like(x)
  lead = jnp.where(x > 0.5, ((1.0 - b) + (a + b) * y) / (a + 1.0), 1.0 - (a + b) * x / (a + 1.0))
  d0 = 1.0 / clamp(lead)
  state = (jnp.asarray(1, jnp.int32), d0 * f0, c0, d0, jnp.zeros(x.shape, bool))

  def cond(state):
    m, _, _, _, done = state
    return jnp.logical_and(m < max_iterations, jnp.logical_not(jnp.all(done)))

  def body(state):
    m, f, c, d, done = state
    mf = m.astype(dtype)
    # Even step: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m)).
    num = mf * (b - mf) * x / ((a + 2 * mf - 1.0) * (a + 2 * mf))
    d = 1.0 / clamp(1.0 + num * d)
    c = clamp(1.0 + num / c)
    f_new = f * d * c
    # Odd step: d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)).
    num = -(a + mf) * (a + b + mf) * x / ((a + 2 * mf) * (a + 2 * mf + 1.0))
    d = 1.0 / clamp(1.0 + num * d)
    c = clamp(1.0 + num / c)
    delta = d * c
    f_new = f_new * delta
    converged = jnp.abs(delta - 1.0) < 2.0 * eps
    f = jnp.where(done, f, f_new)
    return m + 1, f, c, d, jnp.logical_or(done, converged)

  _, f, _, _, _ = jax.lax.while_loop(cond, body, state)
  return f


def _max_cf_iterations(dtype) -> int:
  # The fraction needs O(sqrt(max(a, b))) terms near the mean; 2e5 covers counts up to ~1e10.
  return 200_000 if dtype == jnp.float64 else 20_000


def _binomial_lower_tail_sum(k, n, p, q, max_terms):
  """``Pr[Bin(n, p) <= k]`` for ``k`` below the mean, summing pmf terms downward from ``k``.

  Terms decrease geometrically away from the mean, so the loop stops once a term no longer
  changes the sum; each term comes from the previous one by the exact ratio
  ``pmf(j-1)/pmf(j) = j q / ((n - j + 1) p)``.
  """
  eps = jnp.finfo(k.dtype).eps
  first = jnp.exp(binomial_logpmf(k, n, p, q))
  ratio_pq = q / jnp.where(p > 0.0, p, 1.0)

  def cond(state):
    i, _, _, _, active = state
    return jnp.logical_and(i < max_terms, jnp.any(active))

  def body(state):
    i, j, term, total, active = state
    term = jnp.where(active, term * j / (n - j + 1.0) * ratio_pq, term)
    total = jnp.where(active, total + term, total)
    j = j - 1.0
    active = jnp.logical_and(active, jnp.logical_and(j > 0.0, term > eps * total))
    return i + 1, j, term, total, active

  active = jnp.logical_and(k > 0.0, first > 0.0)
  state = (jnp.asarray(0, jnp.int32), k, first, first, active)
  return jax.lax.while_loop(cond, body, state)[3]


class BetaTails(NamedTuple):
  """``lower = I_x(a, b)`` and ``upper = 1 - I_x(a, b)``, each accurate in relative terms
  whenever it is the smaller of the two."""
  lower: jax.Array
  upper: jax.Array


def incomplete_beta_tails(a: jax.Array, b: jax.Array, x: jax.Array,
                          y: jax.Array | None = None) -> BetaTails:
  r"""Regularized incomplete beta function and its complement.

  .. math:: I_x(a, b) = \frac{1}{B(a,b)} \int_0^x t^{a-1}(1-t)^{b-1}\,dt

  Evaluated by the continued fraction of DLMF 8.17.22 on whichever side of the mean it
  converges, with the prefactor of :func:`log_beta_prefactor`; the other tail is one minus it.
  Requires ``a, b > 0``; ``x`` is clipped to ``[0, 1]``. ``y = 1 - x`` may be passed
  separately so that tiny ``1 - x`` keeps its relative accuracy.
  """
  a, b, x = _as_float(a, b, x)
  y = 1.0 - x if y is None else _as_float(y)[0]
  return _incomplete_beta_tails(a, b, x, y)


@jax.jit
def _incomplete_beta_tails(a, b, x, y):
  a, b, x, y = jnp.broadcast_arrays(a, b, x, y)
  swap = x > (a + 1.0) / (a + b + 2.0)
  aa = jnp.where(swap, b, a)
  bb = jnp.where(swap, a, b)
  xx = jnp.where(swap, y, x)
  yy = jnp.where(swap, x, y)
  interior = jnp.logical_and(xx > 0.0, yy > 0.0)
  xs = jnp.where(interior, xx, 0.5)
  ys = jnp.where(interior, yy, 0.5)
  log_pre = log_beta_prefactor(aa, bb, xs, ys)
  cf = _beta_continued_fraction(aa, bb, xs, ys, _max_cf_iterations(x.dtype))
  near = jnp.exp(log_pre) * cf
  # The fraction loses about eps / (1 - x) when x is close to 1 (the Poisson regime of a
  # binomial tail). For whole b the same value is a finite, well-conditioned binomial sum:
  # I_x(a, b) = Pr[Bin(a + b - 1, 1 - x) <= b - 1].
  use_sum = jnp.logical_and(xs > 0.9, bb == jnp.round(bb))
  bs = jnp.where(use_sum, bb, 1.0)
  summed = _binomial_lower_tail_sum(bs - 1.0, aa + bs - 1.0, ys, xs, _max_cf_iterations(x.dtype))
  near = jnp.where(use_sum, summed, near)
  near = jnp.where(interior, near, jnp.where(xx <= 0.0, 0.0, 1.0))
  near = jnp.clip(near, 0.0, 1.0)
  far = 1.0 - near
  return BetaTails(lower=jnp.where(swap, far, near), upper=jnp.where(swap, near, far))


def regularized_incomplete_beta(a: jax.Array, b: jax.Array, x: jax.Array) -> jax.Array:
  """``I_x(a, b)``; see :func:`incomplete_beta_tails`."""
  return incomplete_beta_tails(a, b, x).lower


def binomial_sf(k: jax.Array, n: jax.Array, p: jax.Array) -> jax.Array:
  r"""Upper tail :math:`\Pr[\mathrm{Bin}(n, p) \ge k] = I_p(k, n - k + 1)`.

  Equals 1 for ``k <= 0`` and 0 for ``k > n``. Broadcasts; accurate in relative terms in the
  upper tail.
  """
  k, n, p = jnp.broadcast_arrays(*_as_float(k, n, p))
  inside = jnp.logical_and(k >= 1.0, k <= n)
  ks = jnp.where(inside, k, 1.0)
  ns = jnp.where(inside, n, 1.0)
  tail = incomplete_beta_tails(ks, ns - ks + 1.0, p).lower
  return jnp.where(k <= 0.0, 1.0, jnp.where(k > n, 0.0, tail))


def binomial_cdf(k: jax.Array, n: jax.Array, p: jax.Array) -> jax.Array:
  r""":math:`\Pr[\mathrm{Bin}(n, p) \le k]`, accurate in relative terms in the lower tail."""
  k, n, p = jnp.broadcast_arrays(*_as_float(k, n, p))
  inside = jnp.logical_and(k >= 0.0, k < n)
  ks = jnp.where(inside, k, 0.0)
  ns = jnp.where(inside, n, 1.0)
  tail = incomplete_beta_tails(ks + 1.0, ns - ks, p).upper
  return jnp.where(k < 0.0, 0.0, jnp.where(k >= n, 1.0, tail))


def binomial_logpmf(k: jax.Array, n: jax.Array, p: jax.Array, q: jax.Array | None = None
                    ) -> jax.Array:
  """``log Pr[Bin(n, p) = k]`` by Loader's saddle-point formula (no lgamma cancellation).

  ``q = 1 - p`` may be passed when it is known more accurately than ``1 - p`` (p near 1).
  """
  k, n, p = _as_float(k, n, p)
  q = 1.0 - p if q is None else _as_float(q)[0]
  k, n, p, q = jnp.broadcast_arrays(k, n, p, q)
  interior = jnp.logical_and(k > 0.0, k < n)
  ks = jnp.where(interior, k, 1.0)
  ns = jnp.where(interior, n, 2.0)
  general = (stirling_remainder(ns) - stirling_remainder(ks) - stirling_remainder(ns - ks)
             - binomial_deviance(ks, ns * p) - binomial_deviance(ns - ks, ns * q)
             + 0.5 * (jnp.log(ns) - jnp.log(ks) - jnp.log(ns - ks)) - _HALF_LOG_2PI)
  log_q = jnp.where(q > 0.0, jnp.where(p < 0.5, jnp.log1p(-p), jnp.log(jnp.where(q > 0.0, q, 1.0))),
                    -jnp.inf)
  log_p = jnp.where(p > 0.0, jnp.where(q < 0.5, jnp.log1p(-q), jnp.log(jnp.where(p > 0.0, p, 1.0))),
                    -jnp.inf)
  at_zero = jnp.where(n > 0.0, n * log_q, 0.0)
  at_n = jnp.where(n > 0.0, n * log_p, 0.0)
  out = jnp.where(k == 0.0, at_zero, jnp.where(k == n, at_n, general))
  out = jnp.where(jnp.logical_and(interior, jnp.logical_or(p <= 0.0, q <= 0.0)), -jnp.inf, out)
  return jnp.where(jnp.logical_or(k < 0.0, k > n), -jnp.inf, out)


def _bisection_steps(dtype) -> int:
  return 72 if dtype == jnp.float64 else 40


def _bisect_logit(tail_fn, target, increasing):
  dtype = target.dtype
  lo_bound = -745.0 if dtype == jnp.float64 else -103.0
  hi_bound = 37.0 if dtype == jnp.float64 else 17.0
  lo = jnp.full(target.shape, lo_bound, dtype)
  hi = jnp.full(target.shape, hi_bound, dtype)

  def body(_, bracket):
    lo, hi = bracket
    mid = 0.5 * (lo + hi)
    above = tail_fn(jax.nn.sigmoid(mid), jax.nn.sigmoid(-mid)) > target
    if not increasing:
      above = jnp.logical_not(above)
    return jnp.where(above, lo, mid), jnp.where(above, mid, hi)

  lo, hi = jax.lax.fori_loop(0, _bisection_steps(dtype), body, (lo, hi))
  return jax.nn.sigmoid(0.5 * (lo + hi))


def _beta_quantile_lower_tail(a, b, tail):
  """x such that I_x(a, b) = tail."""
  return _bisect_logit(lambda x, y: incomplete_beta_tails(a, b, x, y).lower, tail,
                       increasing=True)


def _beta_quantile_upper_tail(a, b, tail):
  """x such that 1 - I_x(a, b) = tail (accurate for small tails)."""
  return _bisect_logit(lambda x, y: incomplete_beta_tails(a, b, x, y).upper, tail,
                       increasing=False)


def _cp_lower(k, n, tail):
  """Lower Clopper-Pearson limit: p with Pr[Bin(n, p) >= k] = tail (0 when k = 0)."""
  positive = k > 0.0
  ks = jnp.where(positive, k, 1.0)
  all_success = k >= n
  closed = jnp.exp(jnp.log(tail) / jnp.where(n > 0, n, 1.0))  # k = n: p^n = tail
  general = _beta_quantile_lower_tail(ks, jnp.maximum(n - ks + 1.0, 1.0), tail)
  return jnp.where(positive, jnp.where(all_success, closed, general), 0.0)


def _cp_upper(k, n, tail):
  """Upper Clopper-Pearson limit: p with Pr[Bin(n, p) <= k] = tail (1 when k = n)."""
  below = k < n
  ks = jnp.where(below, k, 0.0)
  ns = jnp.where(below, n, 1.0)
  closed = -jnp.expm1(jnp.log(tail) / ns)  # k = 0: (1 - p)^n = tail
  general = _beta_quantile_upper_tail(ks + 1.0, jnp.maximum(ns - ks, 1.0), tail)
  return jnp.where(below, jnp.where(ks == 0.0, closed, general), 1.0)


class Interval(NamedTuple):
  lower: jax.Array
  upper: jax.Array


ALTERNATIVES = ("two-sided", "less", "greater")


def clopper_pearson(successes, trials, significance: float = 0.05,
                    alternative: str = "two-sided") -> Interval:
  r"""Exact (Clopper-Pearson) confidence interval for a binomial proportion.

  With :math:`k` successes in :math:`n` trials and significance :math:`\beta`:

  * ``"two-sided"``: :math:`[B(\beta/2; k, n-k+1),\; B(1-\beta/2; k+1, n-k)]`,
  * ``"less"``: :math:`[0,\; B(1-\beta; k+1, n-k)]` (an upper confidence bound),
  * ``"greater"``: :math:`[B(\beta; k, n-k+1),\; 1]` (a lower confidence bound),

  where :math:`B(q; a, b)` is the Beta quantile (Clopper and Pearson, Biometrika 1934). The
  naming of ``alternative`` follows ``scipy.stats.binomtest``. Quantiles are found by bisection
  on the logit scale against :func:`incomplete_beta_tails`, each limit solving its own tail
  equation so that it stays accurate (1e-10 relative in float64) for tiny and huge counts.

  Args:
    successes: number of successes k (whole numbers, 0 <= k <= trials); any shape.
    trials: number of trials n (broadcasts against ``successes``).
    significance: beta in (0, 1) of the 1 - beta confidence level.
    alternative: one of "two-sided", "less", "greater".

  Returns:
    ``Interval(lower, upper)`` with the broadcast shape of the inputs.
  """
  _validate.check_choice("alternative", alternative, ALTERNATIVES)
  _validate.check_significance(significance)
  _validate.check_counts("successes", successes, trials, "trials")
  k, n, beta = _as_float(successes, trials, significance)
  return _clopper_pearson(k, n, beta, alternative)


@functools.partial(jax.jit, static_argnames="alternative")
def _clopper_pearson(k, n, beta, alternative):
  k, n = jnp.broadcast_arrays(k, n)
  beta = jnp.broadcast_to(beta, k.shape)
  if alternative == "two-sided":
    return Interval(_cp_lower(k, n, beta / 2), _cp_upper(k, n, beta / 2))
  if alternative == "less":
    return Interval(jnp.zeros_like(k), _cp_upper(k, n, beta))
  return Interval(_cp_lower(k, n, beta), jnp.ones_like(k))
