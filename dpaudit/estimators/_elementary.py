r"""Natural logarithms for the estimators' hot loops, vectorised on the CPU; a fusible quotient.

XLA:CPU evaluates the float64 ``log`` about five times slower per element than ``exp``
(measured on the 2-core development CPU: 3.9 ms against 0.7 ms for 1e6 elements), and its
``log1p`` is both slow and up to 129 units in the last place (ulp) off; the incomplete beta
function, its quantiles and the binomial tails take several logarithms per element per step.
The functions below are plain arithmetic that XLA vectorises: the exponent is read from the
bits, the mantissa is reduced to ``1 + f`` in ``[sqrt(1/2), sqrt(2))``, and

.. math:: \log(1 + f) = 2\,\mathrm{artanh}\,s = 2\sum_{j \ge 0} \frac{s^{2j+1}}{2j+1},
   \qquad s = \frac{f}{2 + f},\ |s| \le 0.1716,

summed to ``j = 12`` (truncation below 1e-19 relative), with ``e log 2`` added in two parts so
that its product is exact. Measured against numpy and mpmath (``tests/estimators/
test_elementary.py``): ``log`` within 1 ulp, the same as XLA's own (2 ulp at the optimisation
level 0 the test suite compiles at), 2.3x faster; ``log1mexp`` within 3-4 ulp (XLA's
``log1p``-based form: 127), 1.6x faster. Zero gives -inf, +inf gives +inf, arguments outside
the domain and NaN give NaN; subnormal arguments count as zero (XLA:CPU flushes them, so its
own ``log`` gives -inf there too).

The price is compile time: each call site inlines the series, about 30 ms of XLA:CPU compile
against 1 ms for ``jnp.log``. dpaudit calls these only in the per-step evaluation of the
incomplete beta function (:mod:`dpaudit.estimators.binomial`) and keeps ``jnp.log`` elsewhere.
Float32 arguments, and every backend but the CPU (where ``log`` is already fast), use the
``jax.numpy`` functions.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from dpaudit.estimators import _compile

_LOG2_HIGH = 6.93147180369123816490e-01  # log 2 to 32 bits: e * _LOG2_HIGH is exact
_LOG2_LOW = 1.90821492927058770002e-10
_SQRT2 = 1.4142135623730951
_TERMS = 12


def quotient(x, y):
  """``x / y`` as ``x`` times the reciprocal of ``y``: at most one rounding more (within 2 ulp
  of the division instead of 0.5), for a quotient that several expressions use.

  XLA:CPU fuses an expensive operation (a division, an exponential) into its users only when
  it can fuse it into all of them, and a division of two arrays never, when it has more than
  one: the quotient becomes a kernel of its own, and the operations between it and its users
  that other kernels share follow it. A reciprocal (a division of a constant) it fuses, and so
  the product. Each kernel costs about 20 ms of compile time on the 2-core CPU whatever its
  size; the million-pair Clopper-Pearson program compiled 112 kernels before the quotients of
  :mod:`dpaudit.estimators.binomial` and of :func:`log` were written this way (with the tail's
  branches forming their own inputs), and 78 after (``tests/estimators/test_elementary.py``
  shows the rule on a small program)."""
  return x * jnp.reciprocal(y)


def _fast(x) -> bool:
  return x.dtype == jnp.float64 and _compile.default_platform() == "cpu"


def _reduce(x):
  """``(e, f)`` with ``x = 2^e (1 + f)`` and ``1 + f`` in ``[sqrt(1/2), sqrt(2))``."""
  bits = jax.lax.bitcast_convert_type(x, jnp.int64)
  exponent = (bits >> 52) - 1023
  m = jax.lax.bitcast_convert_type((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000,
                                   jnp.float64)
  high = m > _SQRT2
  m = jnp.where(high, 0.5 * m, m)
  return jnp.where(high, exponent + 1, exponent).astype(jnp.float64), m - 1.0


def _log_of_reduced(e, f):
  """``e log 2 + log(1 + f)`` for ``|f|`` up to ``sqrt(2) - 1``, by the artanh series."""
  s = quotient(f, 2.0 + f)
  s2 = s * s
  series = jnp.full_like(s2, 1.0 / (2 * _TERMS + 1))
  for j in range(_TERMS - 1, 0, -1):
    series = series * s2 + 1.0 / (2 * j + 1)
  # 2s = f - s f in real terms; the odd powers beyond s add 2 s^3 (1/3 + s^2/5 + ...).
  log_m = f - s * f + 2.0 * s * s2 * series
  return e * _LOG2_HIGH + (log_m + e * _LOG2_LOW)


def _limits(x, out, at_zero):
  """The non-finite and out-of-domain values: ``at_zero`` where ``x`` is the domain's end."""
  out = jnp.where(x == at_zero[0], at_zero[1], out)
  out = jnp.where(jnp.logical_or(x < at_zero[0], jnp.isnan(x)), jnp.nan, out)
  return jnp.where(x == jnp.inf, jnp.inf, out)


def log(x: jax.Array) -> jax.Array:
  """Natural logarithm; see the module docstring."""
  x = jnp.asarray(x)
  if not _fast(x):
    return jnp.log(x)
  return _limits(x, _log_of_reduced(*_reduce(x)), (0.0, -jnp.inf))


def log1mexp(v: jax.Array) -> jax.Array:
  """``log(1 - e^v)`` for ``v <= 0`` without cancellation (Maechler, 2012: ``log(-expm1(v))``
  for ``v > -log 2``, ``log1p(-e^v)`` below), with one series evaluation: the reduced argument
  is ``-expm1(v)`` in (0, 1/2) above ``-log 2``; below it, ``-e^v`` itself where ``1 - e^v``
  lies within the series' range, else ``1 - e^v`` (exact rounding aside, at least 0.5)."""
  v = jnp.asarray(v)
  if not _fast(v):
    return jnp.where(v > -math.log(2.0), jnp.log(-jnp.expm1(v)), jnp.log1p(-jnp.exp(v)))
  t = jnp.exp(v)
  upper = v > -math.log(2.0)
  near = jnp.logical_and(jnp.logical_not(upper), t <= 1.0 - _SQRT2 / 2.0)
  e, f = _reduce(jnp.where(upper, -jnp.expm1(v), jnp.where(near, 1.0, 1.0 - t)))
  out = _log_of_reduced(jnp.where(near, 0.0, e), jnp.where(near, -t, f))
  out = jnp.where(v == 0.0, -jnp.inf, out)
  return jnp.where(jnp.logical_or(v > 0.0, jnp.isnan(v)), jnp.nan, out)
