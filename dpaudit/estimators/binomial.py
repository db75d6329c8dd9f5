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

import decimal
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

from dpaudit import _validate
from dpaudit.estimators import _compile, _elementary

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _float_dtype():
  return jnp.result_type(float)


def _as_float(*xs):
  dtype = _float_dtype()
  return tuple(jnp.asarray(x, dtype) for x in xs)


_STIRLING_SHIFT = 16


def _check_positive(**values) -> None:
  """Shape parameters and the like: real numbers > 0 (no NaN, booleans or strings)."""
  for name, value in values.items():
    if value is not None:
      _validate.check_not_boolean(name, value, "parameters")
      _validate.check_range(name, value, 0.0, low_open=True)


def _check_probability(name: str, value, open_ends: bool = False) -> None:
  if value is not None:
    _validate.check_not_boolean(name, value, "probabilities")
    _validate.check_range(name, value, 0.0, 1.0, low_open=open_ends, high_open=open_ends)


def _check_binomial(k, n, p, q=None) -> None:
  """Whole ``k`` (any sign: the tails are 0 or 1 outside [1, n]) and ``n >= 0``, and
  probabilities ``p`` (and ``q``) in [0, 1]. Concrete values only (traced ones are the calling
  estimator's to check)."""
  for name, value in (("k", k), ("n", n)):
    _validate.check_not_boolean(name, value)
    _validate.check_integer_valued(name, value)
    _validate.check_range(name, value, 0.0 if name == "n" else None)
  _check_probability("p", p)
  _check_probability("q", q)


def _stirling_series(z):
  """The asymptotic series of :func:`stirling_remainder`, for ``z > 15`` (error below 1e-16)."""
  inv = 1.0 / z  # one division (five nested quotients took ~10 ms of a million CP pairs)
  inv2 = inv * inv
  return (1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (1.0 / 1260 - inv2 * (1.0 / 1680
                                                                      - inv2 / 1188)))) * inv


_PI = decimal.Decimal("3.14159265358979323846264338327950288419716939937510582097494459")


def _whole_stirling_table() -> np.ndarray:
  """:func:`stirling_remainder` at z = 1..15 (index z; index 0 unused), from ``log z!`` in
  60-digit decimals: exact to the last bit of a double."""
  ctx = decimal.Context(prec=60)
  half = decimal.Decimal("0.5")
  table = np.zeros(16)
  for z in range(1, 16):
    d = decimal.Decimal(z)
    log_factorial = ctx.ln(decimal.Decimal(math.factorial(z)))
    stirling = ctx.add(ctx.multiply(half, ctx.ln(ctx.multiply(2 * _PI, d))),
                       ctx.subtract(ctx.multiply(d, ctx.ln(d)), d))
    table[z] = float(ctx.subtract(log_factorial, stirling))
  return table


_WHOLE_STIRLING = _whole_stirling_table()


def _stirling_remainder_whole(z):
  """:func:`stirling_remainder` where every z is above 15 or a whole number >= 1 (the counts of
  the binomial tails and Clopper-Pearson limits): the series, or the table by a chain of
  selects (no logarithms)."""
  small = jnp.full_like(z, _WHOLE_STIRLING[15])
  for i in range(14, 0, -1):
    small = jnp.where(z <= i, _WHOLE_STIRLING[i], small)
  return jnp.where(z > 15.0, _stirling_series(jnp.maximum(z, 16.0)), small)


def stirling_remainder(z: jax.Array) -> jax.Array:
  r"""Remainder of Stirling's formula, :math:`\log\Gamma(z+1) - \log(\sqrt{2\pi z}(z/e)^z)`.

  Uses the asymptotic series for ``z > 15`` (truncation error below 1e-16) and, when every
  smaller z of the batch is a whole number (counts), a table of exact values. Otherwise it
  shifts the argument by :math:`m = 16` with
  :math:`\Gamma(z+1) = \Gamma(z+m+1) / \prod_{i=1}^m (z+i)`:

  .. math:: s(z) = s(z+m) + (z+m+\tfrac12)\log(z+m) - (z+\tfrac12)\log z - m
            - \log\prod_{i=1}^{m}(z+i),

  whose terms cancel to an absolute error of about 2e-14 (what matters, since ``s`` enters
  every bound as an additive term of a logarithm) at a fraction of the cost of ``lgamma``. The
  shift's three logarithms per element were a quarter of the cost of a binomial tail, hence the
  table (the choice is one test per batch; under ``vmap`` both are computed). Needs ``z > 0``.
  """
  _check_positive(z=z)
  return _stirling(z)


def _stirling(z):
  """:func:`stirling_remainder` without the checks (for the estimators' own calls, whose
  arguments are formed inside them)."""
  (z,) = _as_float(z)
  whole = jnp.all(jnp.logical_or(z > 15.0, jnp.logical_and(z >= 1.0, z == jnp.floor(z))))
  return jax.lax.cond(whole, _stirling_remainder_whole, _stirling_remainder_shifted, z)


def _stirling_remainder_shifted(z):
  big = z > 15.0
  zb = jnp.where(big, z, 16.0)
  zs = jnp.where(big, 1.0, jnp.maximum(z, jnp.finfo(z.dtype).tiny))
  m = float(_STIRLING_SHIFT)
  product = zs + 1.0
  for i in range(2, _STIRLING_SHIFT + 1):
    product = product * (zs + i)
  shifted = (_stirling_series(zs + m) + (zs + m + 0.5) * jnp.log(zs + m)
             - (zs + 0.5) * jnp.log(zs) - m - jnp.log(product))
  return jnp.where(big, _stirling_series(zb), shifted)


def binomial_deviance(k: jax.Array, m: jax.Array) -> jax.Array:
  r"""Loader's ``bd0(k, m) = k log(k/m) + m - k`` without cancellation when ``k ~ m``; needs
  ``k >= 0`` and ``m > 0``."""
  _validate.check_not_boolean("k", k, "values")
  _validate.check_range("k", k, 0.0)
  _check_positive(m=m)
  return _bd0(k, m)


def _bd0(k, m):
  """:func:`binomial_deviance` without the checks."""
  return _deviance(*_as_float(k, m), jnp.log)


def _logs(fast: bool):
  """``(log, log1mexp)``: the vectorised ones of :mod:`dpaudit.estimators._elementary` (faster
  to run, about 30 ms of compile time per call site) for the top-level Clopper-Pearson and
  binomial-tail programs, whose speed targets they serve; XLA's own elsewhere, so that the
  estimators that call these functions many times keep their compile times."""
  return (_elementary.log, _elementary.log1mexp) if fast else (jnp.log, _log1mexp)


def _deviance(k, m, log):
  close = jnp.abs(k - m) < 0.1 * (k + m)
  safe_m = jnp.where(m > 0, m, 1.0)
  v = jnp.where(close, _elementary.quotient(k - m, jnp.where(k + m > 0, k + m, 1.0)), 0.0)
  total = (k - m) * v
  term = 2.0 * k * v
  v2 = v * v
  for j in range(1, 11):  # |v| < 0.1, so the terms fall below 1e-20 of the first.
    term = term * v2
    total = total + term * (1.0 / (2 * j + 1))  # (a product: XLA keeps a division a division)
  safe_k = jnp.where(k > 0, k, 1.0)
  direct = jnp.where(k > 0, k * log(_elementary.quotient(safe_k, safe_m)), 0.0) + m - k
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
  _check_positive(a=a, b=b)
  _check_probability("x", x, open_ends=True)
  _check_probability("y", y, open_ends=True)
  return _log_beta_prefactor(a, b, x, y)


def _log_beta_prefactor(a, b, x, y=None):
  """:func:`log_beta_prefactor` without the checks."""
  a, b, x = _as_float(a, b, x)
  y = 1.0 - x if y is None else _as_float(y)[0]
  n = a + b
  log_d = (0.5 * (jnp.log(n) - jnp.log(a) - jnp.log(b)) - _HALF_LOG_2PI
           + _stirling(n) - _stirling(a) - _stirling(b)
           - _bd0(a, n * x) - _bd0(b, n * y))
  return log_d + jnp.log(b) - jnp.log(n)


def _cpu_chunk_size() -> int | None:
  """Elements per chunk for the elementwise solvers, or None for one pass over the batch.

  XLA:CPU materialises many intermediate arrays of these long elementwise programs; passing
  over the batch in chunks that stay in the caches is about 1.6x faster on a CPU (measured on
  2M Clopper-Pearson limits). Accelerators take the whole batch at once."""
  return 65536 if _compile.default_platform() == "cpu" else None


def _chunked(size: int) -> bool:
  """Whether a batch of ``size`` elements goes through :func:`_map_grouped` in chunks (more
  than one chunk's worth on a CPU)."""
  chunk = _cpu_chunk_size()
  return chunk is not None and size > chunk


def _map_grouped(fn, sources, first, parts: int, results: int, shared=(), order=None,
                 rows=None):
  """``fn(part, *rows, *shared)`` on every row of ``sources`` (1-D, of one length) and every
  part ``0 .. parts - 1`` of it: ``fn`` is elementwise, called with ``part`` of shape
  ``(parts, 1)`` and rows of shape ``(1, m)``, and returns a tuple of ``results`` arrays of
  shape ``(parts, m)`` and the sources' dtype. Returns the tuple with each of them a list of
  ``parts`` arrays, one value per row each.

  Without chunks (accelerators, small batches), ``fn`` on all rows at once. On a CPU, larger
  batches go in chunks of :func:`_cpu_chunk_size` results (XLA:CPU materialises many
  intermediate arrays of these long elementwise programs, and chunks that stay in the caches
  run faster), and the rows where ``first`` holds go ahead of the others (``first=None``: the
  rows in their order), so that most chunks hold rows of one kind and the ``lax.cond`` branches
  in ``fn`` skip what none of a chunk's rows needs. ``order`` is that permutation of the rows
  (32-bit indices, :func:`_host_order`) when the caller computed it on the host; else it is
  formed here (:func:`_grouping_order`). Each chunk gathers its rows and scatters
  its results to their places in the outputs; the last chunk ends at the last row (it repeats
  rows of the one before, which compute the same values), so there is no padding. ``rows`` (a
  traced count, or None for all): only the first ``rows`` rows are real, the rest the padding
  of a batch to its bucket (:func:`dpaudit.estimators._compile.elementwise`); the chunks then
  cover the real rows alone (the padding goes last in the order, and its results stay 0), and
  a million pairs padded to 2^20 cost no more than before. So nothing of
  the batch's size is formed but the indices, and XLA's temporary memory stays small: above
  about 32 MB glibc maps it afresh at every call, and its page faults cost time (a million
  Clopper-Pearson pairs took 84 MB of temporaries with the batch-sized gathers this replaced,
  and 20,600 page faults per call, about 0.7 us each; now 18 MB, and page faults in one call
  of seven measured)."""
  size = sources[0].shape[0]
  part = jnp.arange(parts, dtype=jnp.int32)[:, None]

  def split(out):
    return tuple([v[p] for p in range(parts)] for v in out)

  if not _chunked(parts * size):
    return split(fn(part, *(v[None, :] for v in sources), *shared))
  chunk = _cpu_chunk_size() // parts  # fewer than size rows (_chunked)
  if rows is None:
    count, last = -(-size // chunk), size - chunk
  else:  # a padded batch has more than half its rows real, so at least one chunk's worth
    rows = jnp.asarray(rows, jnp.int32)
    count, last = (rows + (chunk - 1)) // chunk, jnp.maximum(rows - chunk, 0)
  if order is None and first is None:
    order = jnp.arange(size, dtype=jnp.int32)
  elif order is None:
    if rows is not None:  # the padding among the others, which keep their order: last
      first = jnp.logical_and(first, jnp.arange(size, dtype=jnp.int32) < rows)
    order = _grouping_order(first)

  def run(c, outs):
    start = jnp.minimum(c * chunk, last)
    picked = jax.lax.dynamic_slice(order, (start,), (chunk,))
    values = [v.at[picked].get(mode="promise_in_bounds")[None, :] for v in sources]
    out = split(fn(part, *values, *shared))
    return tuple([o.at[picked].set(v, unique_indices=True, mode="promise_in_bounds")
                  for o, v in zip(os, vs)] for os, vs in zip(outs, out))

  zeros = functools.partial(jnp.zeros, (size,), sources[0].dtype)
  return jax.lax.fori_loop(0, count, run,
                           tuple([zeros() for _ in range(parts)] for _ in range(results)))


def _host_grouping_order(first):
  # A stable sort of booleans: NumPy counts them (a batch axis under vmap sorts row by row).
  return np.argsort(np.logical_not(first), axis=-1, kind="stable").astype(np.int32)


def _grouping_order(first: jax.Array) -> jax.Array:
  """The rows where ``first`` holds, then the others, each in their order (int32): the
  permutation of :func:`_map_grouped` inside a program, from one NumPy callback (chunks are
  formed only on a CPU). XLA:CPU compiled the cumulative sum and scatter that form it on the
  device as a tree of a dozen reduce-window, slice and scatter kernels (about 20 ms of compile
  time each)."""
  return jax.pure_callback(_host_grouping_order, jax.ShapeDtypeStruct(first.shape, jnp.int32),
                           first, vmap_method="expand_dims")


def _host_order(key, *arrays, parts: int = 1, rows: int | None = None):
  """The permutation of :func:`_map_grouped` computed on the host with NumPy: the indices of
  the rows where ``key(*arrays)`` holds (the arrays as NumPy arrays, broadcast and flattened
  but for single values), then the others (int32); or None where the map takes no chunks
  (accelerators, small batches) or an array is a tracer (inside a caller's ``jax.jit``, where
  the map forms it itself). ``clopper_pearson`` takes this path on large batches: the
  program then forms neither the key nor the order (:func:`_grouping_order`), and NumPy forms
  the order faster than a program's cumulative sum did (3.1 ms against 5.6 ms for a million
  pairs with one tail for all). ``rows``: only the first ``rows`` rows are real (the others
  pad the batch to its bucket, and go last, in their order)."""
  if not _validate.is_concrete(arrays):
    return None
  shape = np.broadcast_shapes(*(np.shape(v) for v in arrays))
  size = math.prod(shape)
  if not _chunked(parts * size):
    return None
  rows = size if rows is None else rows
  # A value shared by all rows stays one value (its key terms are computed once).
  first = key(*(np.asarray(v).reshape(()) if np.size(v) == 1
                else np.broadcast_to(np.asarray(v), shape).reshape(-1)[:rows] for v in arrays))
  order = np.empty(size, np.int32)
  ahead = np.count_nonzero(first)
  order[:ahead], order[ahead:rows] = np.flatnonzero(first), np.flatnonzero(~first)
  order[rows:] = np.arange(rows, size, dtype=np.int32)
  return order


# ----------------------------------------------------------------------------------------------
# The regularized incomplete beta function at a bounded cost per element.
# ----------------------------------------------------------------------------------------------


def _series_coefficients(terms: int) -> np.ndarray:
  r"""Table ``c[j, i]`` of the density factor :math:`f(\eta) = \sum_j \eta^j \sum_i c_{ji}\kappa^i`.

  With :math:`p = a/(a+b)`, :math:`q = 1 - p`, :math:`\kappa = (q - p)/\sqrt{pq}` and
  :math:`t = p + \sqrt{pq}\,u`,

  .. math:: -\tfrac12\eta^2 = p\log\frac{t}{p} + q\log\frac{1-t}{q}
     = -\tfrac12 u^2 + \sum_{n \ge 3} e_n(\kappa)\, u^n,
     \qquad \operatorname{sign}\eta = \operatorname{sign}u,

  maps the beta integrand :math:`t^{a-1}(1-t)^{b-1}dt` to
  :math:`p^a q^b (pq)^{-1/2} e^{-(a+b)\eta^2/2} f(\eta)\,d\eta` with :math:`f = \eta/u`. Every
  :math:`e_n` is a polynomial in :math:`\kappa` (:math:`e_n = -P_{n-1}(s)/(n s^{(n-2)/2})` for even
  n and :math:`\kappa D_{n-1}(s)/(n s^{(n-3)/2})` for odd n, with the power sums
  :math:`P_k = p^k + q^k`, :math:`D_k = (q^k - p^k)/(q - p)` written in :math:`s = pq` and
  :math:`1/s = \kappa^2 + 4`), hence so is every :math:`\phi_j = [\eta^j] f`. Writing
  :math:`\eta = u H(u)`, Lagrange inversion gives
  :math:`\phi_j = \frac1j [u^{j-1}]\, H'(u) H(u)^{-j}` (since :math:`f = H(u(\eta))`). The
  arithmetic runs in 50-digit decimals, far beyond the cancellation it meets (float64 loses up
  to six digits here), and takes a few hundredths of a second.
  """
  ctx = decimal.Context(prec=50)
  one, zero = ctx.create_decimal(1), ctx.create_decimal(0)
  length = terms + 1  # series orders 0..terms; kappa degrees 0..terms

  def add(p, q):
    n = max(len(p), len(q))
    return [ctx.add(p[i] if i < len(p) else zero, q[i] if i < len(q) else zero) for i in range(n)]

  def mul(p, q):
    out = [zero] * min(len(p) + len(q) - 1, length)
    for i, u in enumerate(p[:length]):
      for j, v in enumerate(q[:length - i]):
        out[i + j] = ctx.add(out[i + j], ctx.multiply(u, v))
    return out

  def scale(p, c):
    return [ctx.multiply(u, c) for u in p]

  def total(polys):
    out = [zero]
    for p in polys:
      out = add(out, p)
    return out

  order = terms + 3
  power_sums, differences = [[2 * one], [one]], [[zero], [one]]  # polynomials in s = pq
  for _ in range(2, order):
    power_sums.append(add(power_sums[-1], [zero] + scale(power_sums[-2], -one)))
    differences.append(add(differences[-1], [zero] + scale(differences[-2], -one)))
  inv_s_powers = [[one]]  # (1/s)^m = (kappa^2 + 4)^m
  for _ in range(order):
    inv_s_powers.append(mul(inv_s_powers[-1], [4 * one, zero, one]))
  e = {}
  for n in range(3, order + 1):
    if n % 2 == 0:
      acc = total(scale(inv_s_powers[(n - 2) // 2 - i], c)
                  for i, c in enumerate(power_sums[n - 1]))
      e[n] = scale(acc, ctx.divide(-one, n))
    else:
      acc = total(scale(inv_s_powers[(n - 3) // 2 - i], c)
                  for i, c in enumerate(differences[n - 1]))
      e[n] = [zero] + scale(acc, ctx.divide(one, n))
  # H(u)^2 = 1 - 2 sum_{n >= 3} e_n u^{n-2}; H by the square-root recursion, then 1/H.
  h_squared = [[one]] + [scale(e[k + 2], -2 * one) for k in range(1, length)]
  h = [[one]]
  for k in range(1, length):
    acc = add(h_squared[k], scale(total(mul(h[i], h[k - i]) for i in range(1, k)), -one))
    h.append(scale(acc, ctx.divide(one, 2)))
  h_inv = [[one]]
  for k in range(1, length):
    h_inv.append(scale(total(mul(h[i], h_inv[k - i]) for i in range(1, k + 1)), -one))
  h_prime = [scale(h[k + 1], k + 1) for k in range(length - 1)]
  phi = [[one]]
  h_pow = [[one]] + [[zero]] * (length - 1)  # H^{-j}
  for j in range(1, length):
    h_pow = [total(mul(h_pow[i], h_inv[k - i]) for i in range(k + 1)) for k in range(length)]
    acc = total(mul(h_prime[i], h_pow[j - 1 - i]) for i in range(j))
    phi.append(scale(acc, ctx.divide(one, j)))
  table = np.zeros((length, length))
  for j, poly in enumerate(phi):
    for i, c in enumerate(poly[:length]):
      table[j, i] = float(c)
  return table


_SERIES_TERMS = 20
_SERIES_TABLE = _series_coefficients(_SERIES_TERMS)
_SERIES_MIN_SHAPE = 20.0
"""The uniform series is used only when both parameters are at least this large: its terms
then fall like ``(|zeta| / sqrt(4 pi min(a, b)))^j`` (the nearest singularity of ``f`` lies at
``|eta|^2 = 4 pi min(p, q)``) and its asymptotic part like ``(2j-1)!! / (4 pi min(a, b))^j``,
both below 1e-15 at 20 terms."""
_SERIES_MAX_RATIO = 0.18
"""...and only where ``|zeta| <= 0.18 sqrt(4 pi min(a, b))``: 0.18^21 = 2e-16."""


def _series_max_zeta(dtype) -> float:
  # exp(-zeta^2 / 2) stays a normal number: e^-612 ~ 1e-266 (float64), e^-40.5 ~ 3e-18 (float32).
  return 35.0 if dtype == jnp.float64 else 9.0


def _series_reach_squared(min_shape):
  """The square of the largest |zeta| the series serves at ``min(a, b) = min_shape``."""
  return jnp.minimum(_SERIES_MAX_RATIO ** 2 * 4.0 * math.pi * min_shape,
                     _series_max_zeta(min_shape.dtype) ** 2)


def _continued_fraction_steps(dtype) -> int:
  # Measured: with min(a, b) >= 1 the even fraction below converges to 1e-16 within 20 steps
  # wherever the series is not used (at most 20 steps for min(a, b) <= 20 at any x, 16 at
  # |zeta| >= 0.18 sqrt(4 pi min(a, b)) beyond that); float32 needs about half.
  return 24 if dtype == jnp.float64 else 12


def _max_adaptive_steps(dtype) -> int:
  # For min(a, b) < 1 the fraction needs O(1 / min(a, b)) more steps near the mean.
  return 100_000 if dtype == jnp.float64 else 10_000


class _Oriented(NamedTuple):
  """``I_x(a, b)`` on the side of the mean where ``x <= a / (a + b)`` (``lam >= 0``)."""
  a: jax.Array
  b: jax.Array
  x: jax.Array
  y: jax.Array
  lam: jax.Array  # a - (a + b) x >= 0, formed without cancellation
  swapped: jax.Array  # True when the parameters and x, y were exchanged


def _orient(a, b, x, y) -> _Oriented:
  """``I_x(a, b) = 1 - I_y(b, a)``: exchanges so that the computed tail is the one below the
  mean, which is the smaller one up to O(1/sqrt(a + b)) and the one the fraction converges on.
  ``lam`` is formed from whichever of x, y is below 1/2, so it keeps its absolute accuracy."""
  lam = jnp.where(x <= 0.5, a - (a + b) * x, (a + b) * y - b)
  swapped = lam < 0.0
  return _Oriented(jnp.where(swapped, b, a), jnp.where(swapped, a, b), jnp.where(swapped, y, x),
                   jnp.where(swapped, x, y), jnp.abs(lam), swapped)


def _fraction_beta(o: _Oriented, m):
  r"""``beta_m`` of the even part of the continued fraction of DLMF 8.17.22 (``m`` a whole
  number, or an array of them).

  With :math:`d_{2m} = \frac{m(b-m)x}{(a+2m-1)(a+2m)}` and
  :math:`d_{2m+1} = -\frac{(a+m)(a+b+m)x}{(a+2m)(a+2m+1)}`, the even contraction of
  :math:`1/(1 + d_1/(1 + d_2/(1 + \dots)))` is
  :math:`1/(\beta_0 + \alpha_1/(\beta_1 + \alpha_2/(\beta_2 + \dots)))` with
  :math:`\beta_m = 1 + d_{2m} + d_{2m+1}` and :math:`\alpha_m = -d_{2m-1}d_{2m}`
  (:func:`_fraction_alpha`). Substituting :math:`(a+b)x = a - \lambda` writes
  :math:`1 + d_{2m+1}` as a sum of non-negative terms,

  .. math:: 1 + d_{2m+1} = \frac{a(1+2m) + m(3m+2) + (a+m)\lambda + m(a+m)y}{(a+2m)(a+2m+1)},

  so nothing cancels when x is close to 1 (the Poisson regime of a binomial tail), which is
  where the plain fraction loses ``eps / (1 - x)``.
  """
  a, b, x, y, lam = o.a, o.b, o.x, o.y, o.lam
  if isinstance(m, int) and m == 0:
    return (lam + 1.0) / (a + 1.0)
  c = a + 2.0 * m
  odd = a * (1.0 + 2.0 * m) + m * (3.0 * m + 2.0) + (a + m) * lam + m * (a + m) * y
  return (odd * (c - 1.0) + m * (b - m) * x * (c + 1.0)) / ((c - 1.0) * c * (c + 1.0))


def _fraction_alpha(o: _Oriented, m):
  """``alpha_m`` (m >= 1) of the fraction of :func:`_fraction_beta`."""
  a, b, x = o.a, o.b, o.x
  c = a + 2.0 * m
  return ((a + m - 1.0) * (a + b + m - 1.0) * x * (m * (b - m) * x)
          / (((c - 2.0) * (c - 1.0)) * ((c - 1.0) * c)))


def _continued_fraction(o: _Oriented, steps: int) -> jax.Array:
  r"""The fraction's value ``I_x(a, b) / prefactor`` by the backward recurrence over a fixed
  number of steps: no division beyond the terms themselves, one fusible expression.

  The terms are rescaled by the equivalence transformation :math:`\beta_m \to s\beta_m`,
  :math:`\alpha_m \to s^2\alpha_m` (which multiplies the fraction's denominator by ``s``) with
  :math:`s = (a + 1)/(\lambda + 1)`, so that :math:`\beta_0 = 1` and every term is O(m): unscaled,
  :math:`\beta_m \approx (2m + 1 + \lambda)/a`, and the recurrence's product of ``steps`` such
  terms underflows (float64 at a ~ 1e14, float32 at a ~ 1e4).

  (One division per step instead of two, by the product of the terms' denominators, made XLA
  keep each step's quotient as a kernel of its own, 24 more kernels to compile, and ran no
  faster.)"""
  scale = _elementary.quotient(o.a + 1.0, o.lam + 1.0)
  scale2 = scale * scale
  p = scale * _fraction_beta(o, steps)
  q = jnp.ones_like(p)
  def step(j, pq):  # m = steps - 1 - j; traced once and unrolled (tracing 24 copies is slow)
    p, q = pq
    m = jnp.asarray(steps - 1 - j, p.dtype)
    return scale * _fraction_beta(o, m) * p + scale2 * _fraction_alpha(o, m + 1.0) * q, p

  p, q = jax.lax.fori_loop(0, steps - 1, step, (p, q), unroll=True)
  # m = 0 has its own (simpler) beta
  p, q = scale * _fraction_beta(o, 0) * p + scale2 * _fraction_alpha(o, 1) * q, p
  return scale * q / p


def _adaptive_continued_fraction(o: _Oriented, active: jax.Array, max_steps: int) -> jax.Array:
  """The same fraction by the modified Lentz method, stepping until every ``active`` element
  has converged (inactive elements are replaced by a case that converges at once). Costs one
  loop test when nothing is active."""
  dtype = o.x.dtype
  tiny = jnp.asarray(1e-300 if dtype == jnp.float64 else 1e-30, dtype)
  eps = jnp.finfo(dtype).eps
  o = _Oriented(*(jnp.where(active, v, d) for v, d in
                  zip(o[:5], (1.0, 1.0, 0.25, 0.75, 0.5))), o.swapped)
  block = 8

  def clamp(v):
    return jnp.where(jnp.abs(v) < tiny, tiny, v)

  def body(state):
    m, f, c, d, done = state
    for j in range(block):
      mf = (m + j + 1).astype(dtype)
      beta, alpha = _fraction_beta(o, mf), _fraction_alpha(o, mf)
      d = 1.0 / clamp(beta + alpha * d)
      c = clamp(beta + alpha / c)
      delta = c * d
      f = jnp.where(done, f, f * delta)
      done = jnp.logical_or(done, jnp.abs(delta - 1.0) < 2.0 * eps)
    return m + block, f, c, d, done

  def cond(state):
    m, _, _, _, done = state
    return jnp.logical_and(m < max_steps, jnp.logical_not(jnp.all(done)))

  f0 = clamp((o.lam + 1.0) / (o.a + 1.0))
  state = (jnp.asarray(0, jnp.int32), f0, f0, jnp.zeros_like(f0), jnp.logical_not(active))
  _, f, _, _, _ = jax.lax.while_loop(cond, body, state)
  return 1.0 / f


def _uniform_series(zeta, omega, inv_r):
  r"""``S`` with :math:`I_x(a, b) =
  \frac{\Gamma^*(a+b)}{\Gamma^*(a)\Gamma^*(b)}\frac{S}{\sqrt{2\pi}}`.

  With the substitution of :func:`_series_coefficients` and
  :math:`\zeta = \eta\sqrt{a+b}`,
  :math:`I_x(a, b) = \frac{\Gamma^*(a+b)}{\Gamma^*(a)\Gamma^*(b)}\sqrt{\frac{r}{2\pi}}
  \int_{-\infty}^{\eta_x} e^{-r\eta^2/2} f(\eta)\,d\eta`, and integrating the series of ``f`` term
  by term,

  .. math:: S = \sum_j K_j(\zeta) \sum_i c_{ji}\,\omega^i r^{-(j-i)/2}, \quad
     K_j(\zeta) = \int_{-\infty}^{\zeta} t^j e^{-t^2/2}dt,\quad \omega = \frac{\kappa}{\sqrt r}
     = \frac{b - a}{\sqrt{ab(a+b)}},

  with :math:`K_0 = \sqrt{\pi/2}\,\mathrm{erfc}(-\zeta/\sqrt2)`, :math:`K_1 = -e^{-\zeta^2/2}`,
  :math:`K_j = -\zeta^{j-1}e^{-\zeta^2/2} + (j-1)K_{j-2}` (for :math:`\zeta \le 0` every term of
  this recursion has the sign of :math:`(-1)^j`, so it does not cancel). :math:`\Gamma^*` is the
  Stirling-scaled gamma function :math:`\Gamma(z)/(\sqrt{2\pi/z}(z/e)^z)`. This is Temme's uniform
  expansion of the incomplete beta function (Temme, *Special Functions*, 1996, Sec. 11.3.3) in
  the form of an expansion about the saddle point, as in DiDonato & Morris (ACM TOMS 18, 1992).
  """
  gauss = jnp.exp(-0.5 * zeta * zeta)
  k_prev, k_cur = math.sqrt(math.pi / 2.0) * jax.scipy.special.erfc(-zeta / math.sqrt(2.0)), -gauss
  omega_powers = [jnp.ones_like(omega)]
  for _ in range(_SERIES_TERMS):
    omega_powers.append(omega_powers[-1] * omega)
  out = k_prev + _SERIES_TABLE[1, 1] * omega * k_cur
  power = gauss  # zeta^(j-1) exp(-zeta^2/2)
  for j in range(2, _SERIES_TERMS + 1):
    power = power * zeta
    k_prev, k_cur = k_cur, -power + (j - 1) * k_prev
    coefficient = jnp.zeros_like(omega)
    for l in range(j // 2, -1, -1):  # Horner in 1/r over the terms omega^(j-2l) r^-l
      coefficient = coefficient * inv_r + _SERIES_TABLE[j, j - 2 * l] * omega_powers[j - 2 * l]
    out = out + coefficient * k_cur
  return out


class _BetaShape(NamedTuple):
  """The parts of ``I_x(a, b)`` that do not depend on x (all symmetric in a and b but omega)."""
  log_gamma_star_ratio: jax.Array  # log(G*(a+b) / (G*(a) G*(b))), G* of _uniform_series
  half_log_ratio: jax.Array  # 0.5 log(a b / (a + b))
  log_a: jax.Array
  log_b: jax.Array
  log_r: jax.Array  # log(a + b)
  min_shape: jax.Array
  bulk_shape: jax.Array  # min(a, b) or less: decides where the series and the normal start serve
  omega: jax.Array  # (b - a) / sqrt(a b (a + b)), for the unexchanged order
  series_reach: jax.Array  # largest |zeta| the series serves (-1 where it serves none)


def _beta_shape(a, b, log=jnp.log, bulk_shape=None) -> _BetaShape:
  """The x-free parts of ``I_x(a, b)``. ``log`` is one of :func:`_logs`. ``bulk_shape``, at most
  ``min(a, b)`` (the default), is the parameter size that decides whether the uniform series
  and the normal start of :func:`_initial_logit` serve: a caller may pass less, so that the
  elements it groups together make the same choices (:func:`_cp_limits`)."""
  r = a + b
  log_a, log_b, log_r = log(a), log(b), log(r)
  min_shape = jnp.minimum(a, b)
  bulk_shape = min_shape if bulk_shape is None else bulk_shape
  reach = jnp.sqrt(_series_reach_squared(min_shape))
  # One call for the three: one test of whether all are whole, one set of kernels.
  stirling = _stirling(jnp.stack([r, a, b]))
  return _BetaShape(
      stirling[0] - stirling[1] - stirling[2],
      0.5 * (log_a + log_b - log_r), log_a, log_b, log_r, min_shape, bulk_shape,
      (b - a) / jnp.sqrt(a * b * r), jnp.where(bulk_shape >= _SERIES_MIN_SHAPE, reach, -1.0))


class _SmallTail(NamedTuple):
  log_tail: jax.Array  # log I_x(a, b) after orientation: the tail below the mean
  log_density: jax.Array  # log(x^a y^b / B(a, b)), the same in either orientation
  swapped: jax.Array


def _log_small_tail(a, b, x, y, shape: _BetaShape, small_shapes: bool = True,
                    fast: bool = False, skip_unused: bool = False) -> _SmallTail:
  """``log`` of the tail below the mean, by the uniform series where both parameters are large
  and x is within its reach, else by the fixed continued fraction, else (a parameter below 1)
  by the adaptive one. Requires ``a, b > 0`` and ``0 < x, y < 1``; with ``small_shapes=False``
  the caller guarantees ``a, b >= 1`` (binomial tails, Clopper-Pearson) and the adaptive branch
  is left out of the program. ``fast`` picks the logarithms (:func:`_logs`). With
  ``skip_unused`` (and ``small_shapes=False``) the series or the fraction is computed only when
  some element uses it (``lax.cond``: on a CPU, chunks of elements that all take the series skip
  the fraction).

  Everything that does not need the orientation (the deviances, the density, zeta) is formed
  from the unexchanged arguments, so that the exchanged ones feed only the fraction: on a CPU
  this keeps XLA's fused kernels few and the memory traffic low."""
  dtype = x.dtype
  r = a + b
  lam = jnp.where(x <= 0.5, a - r * x, r * y - b)
  log, _ = _logs(fast)
  dev = _deviance(a, r * x, log) + _deviance(b, r * y, log)  # symmetric under exchange

  # The branches form what they need from x, y, lam and dev (the arrays they take as operands
  # under lax.cond): each further array they took would be a kernel of its own on a CPU.
  def use_series_and_zeta():
    zeta = -jnp.sqrt(2.0 * dev)
    return -zeta <= shape.series_reach, zeta

  def series():
    use_series, zeta = use_series_and_zeta()
    omega = jnp.where(lam < 0.0, -shape.omega, shape.omega)
    return _uniform_series(jnp.where(use_series, zeta, 0.0), jnp.where(use_series, omega, 0.0),
                           1.0 / r)

  def oriented():
    swapped = lam < 0.0
    return _Oriented(jnp.where(swapped, b, a), jnp.where(swapped, a, b),
                     jnp.where(swapped, y, x), jnp.where(swapped, x, y), jnp.abs(lam), swapped)

  def fixed():
    return _continued_fraction(oriented(), _continued_fraction_steps(dtype))

  swapped = lam < 0.0
  log_density = shape.half_log_ratio - _HALF_LOG_2PI + shape.log_gamma_star_ratio - dev
  use_series, _ = use_series_and_zeta()

  if small_shapes:  # the series needs min(a, b) >= 20, so these always take the fraction
    slow = shape.min_shape < 1.0
    fraction = jax.lax.cond(
        jnp.any(slow),
        lambda: jnp.where(slow, _adaptive_continued_fraction(oriented(), slow,
                                                             _max_adaptive_steps(dtype)),
                          fixed()),
        fixed)
    series_value = series()
  elif skip_unused:
    ones = functools.partial(jnp.ones_like, x)
    series_value = jax.lax.cond(jnp.any(use_series), series, ones)
    fraction = jax.lax.cond(jnp.all(use_series), ones, fixed)
  else:
    series_value, fraction = series(), fixed()
  # I = (G* ratio / sqrt(2 pi)) S by the series, (density / a) times the fraction otherwise
  # (after orientation); one logarithm serves both.
  log_scale = jnp.where(use_series, shape.log_gamma_star_ratio - _HALF_LOG_2PI,
                        log_density - jnp.where(swapped, shape.log_b, shape.log_a))
  log_tail = log_scale + log(jnp.where(use_series, series_value, fraction))
  return _SmallTail(log_tail, log_density, swapped)


class BetaTails(NamedTuple):
  """``lower = I_x(a, b)`` and ``upper = 1 - I_x(a, b)``, each accurate in relative terms
  whenever it is the smaller of the two."""
  lower: jax.Array
  upper: jax.Array


def incomplete_beta_tails(a: jax.Array, b: jax.Array, x: jax.Array,
                          y: jax.Array | None = None) -> BetaTails:
  r"""Regularized incomplete beta function and its complement.

  .. math:: I_x(a, b) = \frac{1}{B(a,b)} \int_0^x t^{a-1}(1-t)^{b-1}\,dt

  The tail below the mean is computed and the other is one minus it. Where both parameters are
  at least 20 and x lies within a few standard deviations of the mean, by Temme's uniform
  expansion (:func:`_uniform_series`, 20 terms); elsewhere by the even part of the continued
  fraction of DLMF 8.17.22 (:func:`_fraction_beta`), 24 steps evaluated backwards, times
  Loader's saddle-point prefactor (:func:`log_beta_prefactor`). Both are fixed, fusible
  computations, so the cost per element does not depend on the parameters. Only a parameter
  below 1 near the mean needs more fraction steps; such elements run an adaptive loop, which
  costs one test when the batch has none. Requires ``a, b > 0``; ``x`` is clipped to
  ``[0, 1]``. ``y = 1 - x`` may be passed separately so that tiny ``1 - x`` keeps its relative
  accuracy.

  >>> tails = incomplete_beta_tails(2.0, 3.0, 0.4)  # I_x(2, 3) = 6x^2 - 8x^3 + 3x^4
  >>> round(float(tails.lower), 4), round(float(tails.upper), 4)
  (0.5248, 0.4752)
  """
  _check_positive(a=a, b=b)
  for name, value in (("x", x), ("y", y)):
    if value is not None:
      _validate.check_not_boolean(name, value, "points")
      _validate.check_range(name, value)  # real, not NaN (clipped to [0, 1] below)
  args = _compile.float_arguments(a, b, x, *(() if y is None else (y,)))
  return _compile.first_call(_bucketed_beta_tails, host_incomplete_beta_tails, args,
                             _broadcast_size(*args))


def _bucketed_beta_tails(a, b, x, y=None):
  """:func:`_incomplete_beta_tails` on batches padded to their bucket
  (:func:`dpaudit.estimators._compile.elementwise`)."""
  rows = np.int32(_broadcast_size(a, b, x, *(() if y is None else (y,))))
  if y is None:
    return _compile.elementwise(
        lambda a, b, x: _incomplete_beta_tails(a, b, x, None, rows), a, b, x)
  return _compile.elementwise(
      lambda a, b, x, y: _incomplete_beta_tails(a, b, x, y, rows), a, b, x, y)


@_compile.jit
def _incomplete_beta_tails(a, b, x, y=None, rows=None):
  y = 1.0 - x if y is None else y
  a, b, x, y = jnp.broadcast_arrays(a, b, x, y)
  interior = jnp.logical_and(x > 0.0, y > 0.0)
  xs = jnp.where(interior, x, 0.5)
  ys = jnp.where(interior, y, 0.5)
  shape = a.shape

  def tails(_, a, b, x, y):
    small = _log_small_tail(a, b, x, y, _beta_shape(a, b))
    near = jnp.clip(jnp.exp(small.log_tail), 0.0, 1.0)
    far = 1.0 - near
    return jnp.where(small.swapped, far, near), jnp.where(small.swapped, near, far)

  (lower,), (upper,) = _map_grouped(tails, tuple(v.reshape(-1) for v in (a, b, xs, ys)),
                                    None, 1, 2, rows=rows)
  lower, upper = lower.reshape(shape), upper.reshape(shape)
  lower = jnp.where(interior, lower, jnp.where(x <= 0.0, 0.0, 1.0))
  upper = jnp.where(interior, upper, jnp.where(x <= 0.0, 1.0, 0.0))
  return BetaTails(lower=lower, upper=upper)


def regularized_incomplete_beta(a: jax.Array, b: jax.Array, x: jax.Array) -> jax.Array:
  """``I_x(a, b)``; see :func:`incomplete_beta_tails`."""
  return incomplete_beta_tails(a, b, x).lower


def binomial_sf(k: jax.Array, n: jax.Array, p: jax.Array) -> jax.Array:
  r"""Upper tail :math:`\Pr[\mathrm{Bin}(n, p) \ge k] = I_p(k, n - k + 1)`.

  Equals 1 for ``k <= 0`` and 0 for ``k > n``. Whole ``k`` and ``n``; broadcasts; accurate in
  relative terms in the upper tail. Both binomial tails are :func:`log_binomial_tails`
  exponentiated: shapes ``k, n - k + 1 >= 1``, so the fixed-cost series and fraction serve every
  element (no adaptive loop in the program).

  >>> from scipy.stats import binom
  >>> round(float(binomial_sf(3, 10, 0.2)), 4), round(float(binom.sf(2, 10, 0.2)), 4)
  (0.3222, 0.3222)
  """
  _check_binomial(k, n, p)
  args = _compile.float_arguments(k, n, p)
  return _compile.first_call(_bucketed_sf, host_binomial_sf, args, _broadcast_size(*args))


def binomial_cdf(k: jax.Array, n: jax.Array, p: jax.Array) -> jax.Array:
  r""":math:`\Pr[\mathrm{Bin}(n, p) \le k] = \Pr[\mathrm{Bin}(n, p) < k + 1]`, accurate in
  relative terms in the lower tail (see :func:`binomial_sf`).

  >>> round(float(binomial_cdf(2, 10, 0.2)), 4)  # 1 - binomial_sf(3, 10, 0.2)
  0.6778
  """
  _check_binomial(k, n, p)
  args = _compile.float_arguments(k, n, p)
  return _compile.first_call(_bucketed_cdf, host_binomial_cdf, args, _broadcast_size(*args))


def _broadcast_size(*arrays) -> int:
  """Elements of the broadcast shape of ``arrays`` (the size a first call is judged by)."""
  return math.prod(np.broadcast_shapes(*(np.shape(v) for v in arrays)))


def _bucketed_sf(k, n, p):
  rows = np.int32(_broadcast_size(k, n, p))
  return _compile.elementwise(lambda k, n, p: _binomial_sf(k, n, p, rows), k, n, p)


def _bucketed_cdf(k, n, p):
  rows = np.int32(_broadcast_size(k, n, p))
  return _compile.elementwise(lambda k, n, p: _binomial_cdf(k, n, p, rows), k, n, p)


# The broadcasting and the exponential are in the tails' programs: run eagerly around them,
# each was a dispatch of its own at every call and a program of its own to compile at the first.
@_compile.jit(tree_reductions=False)
def _binomial_sf(k, n, p, rows=None):
  return jnp.exp(_binomial_tails(*jnp.broadcast_arrays(k, n, p), rows).upper)


@_compile.jit(tree_reductions=False)
def _binomial_cdf(k, n, p, rows=None):
  k, n, p = jnp.broadcast_arrays(k, n, p)
  return jnp.exp(_binomial_tails(k + 1.0, n, p, rows).lower)


@_compile.jit(tree_reductions=False)
def _binomial_tails(k, n, p, rows=None):
  """Both log tails; ``rows``: the real elements of a batch padded to its bucket (the first;
  :func:`_map_grouped`), or None for all."""
  shape = k.shape
  k, n, p = (v.reshape(-1) for v in (k, n, jnp.clip(p, 0.0, 1.0)))
  # Where I_p(k, n - k + 1) takes the uniform series, by the normal approximation of its zeta
  # (|k - (n + 1) p| / sqrt((n + 1) p q) within the series' reach): the key that groups the
  # chunks of _map_grouped, so that most compute the series or the fraction, not both. (It is
  # formed in the program: on the host, NumPy's dozen passes over the batch took 19 ms for a
  # million tails, against about 5 ms here.)
  shapes = jnp.minimum(k, n - k + 1.0)
  offset = k - (n + 1.0) * p
  series = jnp.logical_and(
      shapes >= _SERIES_MIN_SHAPE,
      offset * offset <= _series_reach_squared(shapes) * (n + 1.0) * p * (1.0 - p))
  skip_unused = _chunked(k.shape[0])

  def tails(_, k, n, p):
    return tuple(log_binomial_tails(k, n, p, fast=True, skip_unused=skip_unused))

  upper, lower = _map_grouped(tails, (k, n, p), series, 1, 2, rows=rows)
  return LogBinomialTails(upper[0].reshape(shape), lower[0].reshape(shape))


class LogBinomialTails(NamedTuple):
  """``log Pr[Bin(n, p) >= k]`` and ``log Pr[Bin(n, p) < k]``, each accurate in relative terms
  when its probability is the smaller of the two (and in absolute terms otherwise)."""
  upper: jax.Array
  lower: jax.Array


def log_binomial_tails(k, n, p, q=None, fast: bool = False,
                       skip_unused: bool = False) -> LogBinomialTails:
  r"""Both tails of :math:`\mathrm{Bin}(n, p)` at ``k``, on the log scale, from one evaluation of
  the incomplete beta function (:math:`\Pr[\mathrm{Bin}(n, p) \ge k] = I_p(k, n - k + 1)`).
  ``q = 1 - p`` may be passed when it is known more accurately. Whole ``k`` and ``n``; for use
  inside other estimators (traceable, broadcasts; concrete inputs are checked). ``fast=True``
  takes the vectorised logarithms (faster to run, slower to compile; see :func:`_logs`);
  ``skip_unused`` computes the series or the fraction only where some element takes it (for
  the grouped chunks of :func:`_map_grouped`)."""
  return log_binomial_tails_and_density(k, n, p, q, fast, skip_unused)[0]


def log_binomial_tails_and_density(k, n, p, q=None, fast: bool = False,
                                   skip_unused: bool = False
                                   ) -> tuple[LogBinomialTails, jax.Array]:
  r""":func:`log_binomial_tails` and, from the same evaluation, the log of the Beta(k, n - k + 1)
  density at p times p q,

  .. math:: D_k = \frac{p^k q^{n-k+1}}{B(k, n-k+1)} = k\,q\Pr[\mathrm{Bin}(n, p) = k]
     = (n-k+1)\,p\Pr[\mathrm{Bin}(n, p) = k-1] = n\,p\,q\Pr[\mathrm{Bin}(n-1, p) = k-1],

  which is also :math:`p\,q\,\frac{d}{dp}\Pr[\mathrm{Bin}(n, p) \ge k]`. Callers that need
  a pmf next to the tails (the one-run bound, :mod:`dpaudit.estimators.one_run`) take it from
  here instead of compiling :func:`binomial_logpmf` beside them. Valid for
  :math:`1 \le k \le n` and :math:`0 < p < 1`; elsewhere the value is meaningless (callers
  mask it). Concrete inputs are checked (whole k and n >= 0, p and q in [0, 1])."""
  _check_binomial(k, n, p, q)
  k, n, p = _as_float(k, n, p)
  q = 1.0 - p if q is None else _as_float(q)[0]
  k, n, p, q = jnp.broadcast_arrays(k, n, p, q)
  inside = jnp.logical_and(jnp.logical_and(k >= 1.0, k <= n),
                           jnp.logical_and(p > 0.0, q > 0.0))
  a = jnp.where(inside, k, 1.0)
  b = jnp.where(inside, n - k + 1.0, 1.0)
  small = _log_small_tail(a, b, jnp.where(inside, p, 0.5), jnp.where(inside, q, 0.5),
                          _beta_shape(a, b, _logs(fast)[0]), small_shapes=False, fast=fast,
                          skip_unused=skip_unused)
  other = _logs(fast)[1](jnp.minimum(small.log_tail, 0.0))
  upper = jnp.where(small.swapped, other, small.log_tail)
  lower = jnp.where(small.swapped, small.log_tail, other)
  # Outside the interior the tails are 0 or 1: k <= 0 always succeeds, k > n never does, and
  # p = 0 (q = 0) puts all mass on 0 (n).
  certain = jnp.logical_or(k <= 0.0, jnp.logical_and(k <= n, q <= 0.0))
  upper = jnp.where(inside, upper, jnp.where(certain, 0.0, -jnp.inf))
  lower = jnp.where(inside, lower, jnp.where(certain, -jnp.inf, 0.0))
  return LogBinomialTails(upper, lower), small.log_density


def binomial_logpmf(k: jax.Array, n: jax.Array, p: jax.Array, q: jax.Array | None = None
                    ) -> jax.Array:
  """``log Pr[Bin(n, p) = k]`` by Loader's saddle-point formula (no lgamma cancellation).

  ``q = 1 - p`` may be passed when it is known more accurately than ``1 - p`` (p near 1).

  >>> round(float(binomial_logpmf(3, 10, 0.2)), 4)  # log(120 * 0.2**3 * 0.8**7)
  -1.6028
  """
  _check_binomial(k, n, p, q)
  args = _compile.float_arguments(k, n, p, *(() if q is None else (q,)))
  return _compile.first_call(_bucketed_logpmf, host_binomial_logpmf, args,
                             _broadcast_size(*args))


def _bucketed_logpmf(k, n, p, q=None):
  """:func:`_binomial_logpmf` on batches padded to their bucket."""
  if q is None:
    return _compile.elementwise(_binomial_logpmf, k, n, p)
  return _compile.elementwise(_binomial_logpmf, k, n, p, q)


@_compile.jit
def _binomial_logpmf(k, n, p, q=None):
  q = 1.0 - p if q is None else q
  k, n, p, q = jnp.broadcast_arrays(k, n, p, q)
  interior = jnp.logical_and(k > 0.0, k < n)
  ks = jnp.where(interior, k, 1.0)
  ns = jnp.where(interior, n, 2.0)
  general = (_stirling(ns) - _stirling(ks) - _stirling(ns - ks)
             - _bd0(ks, ns * p) - _bd0(ns - ks, ns * q)
             + 0.5 * (jnp.log(ns) - jnp.log(ks) - jnp.log(ns - ks))
             - _HALF_LOG_2PI)
  log_q = jnp.where(q > 0.0, jnp.where(p < 0.5, jnp.log1p(-p),
                                       jnp.log(jnp.where(q > 0.0, q, 1.0))), -jnp.inf)
  log_p = jnp.where(p > 0.0, jnp.where(q < 0.5, jnp.log1p(-q),
                                       jnp.log(jnp.where(p > 0.0, p, 1.0))), -jnp.inf)
  at_zero = jnp.where(n > 0.0, n * log_q, 0.0)
  at_n = jnp.where(n > 0.0, n * log_p, 0.0)
  out = jnp.where(k == 0.0, at_zero, jnp.where(k == n, at_n, general))
  out = jnp.where(jnp.logical_and(interior, jnp.logical_or(p <= 0.0, q <= 0.0)), -jnp.inf, out)
  return jnp.where(jnp.logical_or(k < 0.0, k > n), -jnp.inf, out)




# ----------------------------------------------------------------------------------------------
# Beta quantiles and Clopper-Pearson limits.
# ----------------------------------------------------------------------------------------------


def _log1mexp(v):
  """``log(1 - exp(v))`` for ``v <= 0`` without cancellation (Maechler, 2012), by XLA's
  logarithms (fast to compile; :func:`_elementary.log1mexp` is faster to run)."""
  return jnp.where(v > -math.log(2.0), jnp.log(-jnp.expm1(v)), jnp.log1p(-jnp.exp(v)))


def _max_steps(dtype) -> int:
  return 60


def _converged_mismatch(dtype) -> float:
  # Even Halley's error is cubic in the error before the step: a step taken at
  # |log I - log tau| <= 1e-4 (float64) leaves an error of order 1e-12 of the tail's scale,
  # 1e-3 (float32) 1e-9; the Taylor step's is of order 8.
  return 1e-4 if dtype == jnp.float64 else 1e-3


def _settled_error(dtype) -> float:
  # The error in w (hence the relative error of x and 1 - x) that a step's last Taylor term
  # may leave: far below the 1e-10 relative accuracy promised in float64, 1e-6 in float32.
  return 1e-13 if dtype == jnp.float64 else 1e-6


def _logit_bounds(dtype):
  return (-745.0, 37.0) if dtype == jnp.float64 else (-103.0, 17.0)


def _tail_model_logit(a, b, log_target, log_beta, log_a, steps: int = 3, fast: bool = False):
  r"""Solves the first approximant of the fraction, :math:`\log I_x(a, b) \approx
  a\log x + b\log y - \log(aB(a, b)) - \log\frac{\lambda + 1}{a + 1}`, :math:`\lambda = a - (a+b)x`,
  for ``w = logit(x)`` by Newton's method from the power-series start
  :math:`x^a = a B(a, b) e^{\mathrm{target}}`. Good below the mean for any a and b (it keeps the
  :math:`y^b` factor that matters when b is small); cheap (no fraction, no series). ``log_a``
  is ``log(a)``; ``fast`` picks the logarithms (:func:`_logs`)."""
  log, log1mexp = _logs(fast)
  r = a + b
  w = (log_target + log_a + log_beta) / a
  w = w - log1mexp(jnp.minimum(w, -1e-300))  # log(1 - x) to 1e-16 absolute: a start
  offset = log((a + 1.0) / a) - log_beta  # to 1e-16 absolute, as a start needs

  def newton(_, w):  # a loop, not unrolled: the start is a small part of the cost
    # One exponential and one logarithm give x, y and log x = min(w, 0) - log(1 + e) (to 1e-16
    # absolute, as a start needs); log y = log x - w.
    e = jnp.exp(-jnp.abs(w))
    s = 1.0 / (1.0 + e)
    x, y = jnp.where(w >= 0.0, s, e * s), jnp.where(w >= 0.0, e * s, s)
    log_x = jnp.minimum(w, 0.0) - log(1.0 + e)
    lam1 = jnp.maximum(a + 1.0 - r * x, 1e-3)
    model = r * log_x - b * w - log(lam1) + offset
    slope = a * y - b * x + r * x * y / lam1
    return w - jnp.clip((model - log_target) / slope, -8.0, 8.0)

  return jax.lax.fori_loop(0, steps, newton, w)


def _normal_quantile(log_tau):
  r""":math:`\Phi^{-1}(\tau)` from ``log(tau)``."""
  dtype = jnp.result_type(log_tau)
  tau = jnp.exp(log_tau)
  return jax.scipy.special.ndtri(jnp.clip(tau, jnp.finfo(dtype).tiny, 1.0 - jnp.finfo(dtype).eps))


_NEAR_BULK = 0.36
"""The squared normal quantile, per unit of the smaller parameter, up to which the starts use
the uniform expansion (:func:`_near_bulk`)."""


def _near_bulk(z, min_shape):
  """Where :func:`_initial_logit` starts from the uniform expansion (the normal quantile ``z``
  within 0.6 standard deviations of the smaller parameter; measured: see its docstring). Without
  a square root, so that XLA recomputes it where it is needed rather than storing it."""
  return z * z <= _NEAR_BULK * min_shape


def _initial_logit(a, b, log_tau, z, shape: _BetaShape, skip_unused: bool = False,
                   fast: bool = False):
  r"""A starting point for the quantile of Beta(a, b) at ``tau``, on the logit scale
  (``z = Phi^-1(tau)``, :func:`_normal_quantile`).

  Near the bulk (:math:`|\Phi^{-1}(\tau)| \le 0.6\sqrt{\min(a, b)}`): the two leading terms of
  the uniform expansion give :math:`I_x \approx \Phi(\zeta + \omega/3)`, so
  :math:`\zeta_0 = \Phi^{-1}(\tau) - \omega/3`, and the reversion
  :math:`u = \eta(1 + \kappa\eta/3 + (\kappa^2/36 - 1/4)\eta^2)` of :func:`_series_coefficients`
  maps it to :math:`x = p + \sqrt{pq}\,u`. Farther out, the tail model of
  :func:`_tail_model_logit`, on the lower tail when ``tau < 1/2`` and on the upper one (with the
  parameters exchanged) when not, or, where that tail's second parameter is at least 2 and a
  quarter of the first at most and the tail not below 1e-3, the gamma limit of
  :func:`_gamma_limit_logit`. (Chosen from the 99.9th percentile of the first mismatch
  ``|log I - log tau|`` of each start over random Clopper-Pearson problems with n up to 1e7.)
  With ``skip_unused``, the tail-model and gamma-limit starts are computed only when some
  element needs them (``lax.cond``). ``fast`` picks the logarithms (:func:`_logs`).
  """
  log, log1mexp = _logs(fast)
  r = a + b
  zeta = z - shape.omega / 3.0
  kz = shape.omega * zeta
  u_scaled = zeta * (1.0 + kz / 3.0 + kz * kz / 36.0 - zeta * zeta / (4.0 * r))
  # x = (a + s u) / r and 1 - x = (b - s u) / r, each without cancellation.
  spread = jnp.sqrt(a * b / r) * u_scaled
  near_bulk = _near_bulk(z, shape.bulk_shape)
  normal_ok = jnp.logical_and(near_bulk, jnp.logical_and(a + spread > 0.0, b - spread > 0.0))
  w_normal = log(jnp.where(normal_ok, (a + spread) / (b - spread), 1.0))

  def tail_start():
    # log B(a, b) = log(sqrt(2 pi / r) p^a q^b / sqrt(pq)) - log_gamma_star_ratio
    log_p, log_q = shape.log_a - shape.log_r, shape.log_b - shape.log_r
    log_beta = (_HALF_LOG_2PI - 0.5 * shape.log_r + (a - 0.5) * log_p + (b - 0.5) * log_q
                - shape.log_gamma_star_ratio)
    first, second = jnp.where(low_side, a, b), jnp.where(low_side, b, a)
    target = jnp.where(low_side, log_tau, _log1mexp(jnp.minimum(log_tau, 0.0)))
    w_tail = _tail_model_logit(first, second, target, log_beta,
                               jnp.where(low_side, shape.log_a, shape.log_b), fast=fast)
    gamma_ok = jnp.logical_and(jnp.logical_and(second >= 2.0, first >= 4.0 * second),
                               jnp.abs(z) <= _GAMMA_LIMIT_MAX_Z)
    return jnp.where(gamma_ok, _gamma_limit_logit(first, second, jnp.abs(z), log1mexp),
                     w_tail)

  low_side = log_tau < -math.log(2.0)
  if skip_unused:
    w_tail = jax.lax.cond(jnp.all(normal_ok), functools.partial(jnp.zeros_like, w_normal),
                          tail_start)
  else:
    w_tail = tail_start()
  return jnp.where(normal_ok, w_normal, jnp.where(low_side, w_tail, -w_tail))


_GAMMA_LIMIT_MAX_Z = 3.1
"""The gamma-limit start serves tails down to Phi(-3.1) ~ 1e-3; farther out Wilson and Hilferty's
quantile drifts (first mismatch 0.87 at tau = 1e-6, b = 2) and the tail model is the better
start (at most 0.005 there for a up to 1e7, b = 2)."""


def _gamma_limit_logit(a, b, z, log1mexp=_log1mexp):
  r"""The quantile of Beta(a, b) at a lower tail :math:`\tau = \Phi(-z) \le 1/2` when
  ``a >> b``. There :math:`-(a + (b - 1)/2)\log x` is close to Gamma(b) (exactly Exp(1) for
  b = 1), so :math:`-\log x \approx t / (a + (b-1)/2)` with t the upper quantile of Gamma(b) by
  Wilson and Hilferty, :math:`t = b(1 - 1/(9b) + z/(3\sqrt b))^3`. Returns ``logit(x)``. Used
  for ``b >= 2``, ``a >= 4b`` and ``z <= 3.1``, where the first mismatch ``|log I - log tau|`` of
  the tail model reached 1.5 on the Clopper-Pearson workloads of
  ``experiments.benchmarks.estimators`` (lower limits at n ~ 1e5 with n - k < 20; 5.3 at
  a = 1e7, b = 19) and this start's stays below 0.06 at tau = 0.025 and 0.12 at tau = 1e-3.
  ``log1mexp`` is one of :func:`_logs`."""
  t = b * (1.0 - 1.0 / (9.0 * b) + z / (3.0 * jnp.sqrt(b))) ** 3
  u = jnp.maximum(t, 1e-3) / (a + 0.5 * (b - 1.0))
  return -u - log1mexp(-u)


def _log_tail_taylor(g1, x, y, a, b, terms: int) -> list:
  r"""Scaled Taylor coefficients ``[b_2, ..., b_terms]`` of :math:`g(w_0 + t) - g(w_0) = s +
  \sum_{k \ge 2} b_k s^k` in :math:`s = g'(w_0)\,t`, where :math:`g(w) = \log I_{x(w)}(a, b)`,
  ``g1`` :math:`= g'(w_0)` and ``x, y`` are taken at :math:`w_0`. (So :math:`b_k = G_k / G_1^k`
  for the plain coefficients :math:`G_k`; scaled, they stay O(1) where the plain ones reach
  :math:`a^k`.)

  All of them follow from ``g1`` and power-series arithmetic, with no further evaluation of I:
  on the logit scale the density is :math:`D = I' = x^a y^b / B(a, b)`, so
  :math:`(\log D)' = a y - b x` and :math:`x' = x y`. The recursions, in coefficients of s
  (each a coefficient of t times :math:`p^k`, :math:`p = 1/g_1`):
  :math:`X_{k+1} = p\,[xy]_k / (k+1)` (with :math:`Y_0 = y_0`, :math:`Y_j = -X_j`, so nothing
  cancels near x = 1), :math:`U_0 = a y_0 - b x_0`, :math:`U_j = -(a+b) X_j` for
  :math:`(\log D)'`, :math:`d = D/D_0` by the exponential's recursion
  :math:`d_k = \frac{p}{k}\sum_{j=1}^k U_{j-1} d_{k-j}`, :math:`J = I/I_0` with
  :math:`J_k = d_{k-1} / k` (as :math:`p g_1 = 1`), and the logarithm's recursion
  :math:`b_k = J_k - \frac1k\sum_{j=1}^{k-1} j b_j J_{k-j}`, :math:`b_1 = 1`. (Against mpmath
  in 40 digits, the series through :math:`s^7` is within 3e-11 of g at :math:`|s| = 0.3`:
  ``tests/estimators/test_binomial.py``.)"""
  p = 1.0 / g1
  r = a + b
  xs = [x, p * x * y]  # scaled Taylor coefficients of x(w0 + t)
  for k in range(1, terms - 2):
    xy = xs[k] * (y - x)
    for i in range(1, k):
      xy = xy - xs[i] * xs[k - i]
    xs.append(p * xy / (k + 1))
  u = [p * (a * y - b * x)] + [-r * p * v for v in xs[1:terms - 1]]  # p U_j
  d = [jnp.ones_like(x)]
  for k in range(1, terms):
    d.append(sum(u[j - 1] * d[k - j] for j in range(1, k + 1)) / k)
  j_ = [None] + [d[k - 1] / k for k in range(1, terms + 1)]
  bs = [None, jnp.ones_like(x)]
  for k in range(2, terms + 1):
    bs.append(j_[k] - sum((j / k) * bs[j] * j_[k - j] for j in range(1, k)))
  return bs[2:]


def _reverted_root(h, b):
  r"""The root :math:`s = h + \sum_{k=2}^{7} e_k h^k` of :math:`s + \sum_{k=2}^{7} b_k s^k = h`
  by series reversion (Lagrange inversion), truncated after :math:`h^7`, and the size of its
  last term. ``b = [b_2, ..., b_7]``. (The coefficients were checked in 60-digit arithmetic: the
  residual of the truncated series falls as :math:`h^8`.)"""
  b2, b3, b4, b5, b6, b7 = b
  b2s = b2 * b2
  e = [
      -b2,
      2.0 * b2s - b3,
      -5.0 * b2s * b2 + 5.0 * b2 * b3 - b4,
      14.0 * b2s * b2s - 21.0 * b2s * b3 + 6.0 * b2 * b4 + 3.0 * b3 * b3 - b5,
      (-42.0 * b2s * b2s * b2 + 84.0 * b2s * b2 * b3 - 28.0 * b2s * b4 - 28.0 * b2 * b3 * b3
       + 7.0 * b2 * b5 + 7.0 * b3 * b4 - b6),
      (132.0 * b2s * b2s * b2s - 330.0 * b2s * b2s * b3 + 120.0 * b2s * b2 * b4
       + 180.0 * b2s * b3 * b3 - 36.0 * b2s * b5 - 72.0 * b2 * b3 * b4 - 12.0 * b3 * b3 * b3
       + 8.0 * b2 * b6 + 8.0 * b3 * b5 + 4.0 * b4 * b4 - b7),
  ]
  root = e[-1]
  for coefficient in reversed(e[:-1]):
    root = root * h + coefficient
  root = (root * h + 1.0) * h
  return root, jnp.abs(e[-1] * h ** 7)


_TAYLOR_TERMS = 7
"""Degree of the Taylor series of each step of :func:`_beta_quantile_logit` (fixed: the
reversion coefficients of :func:`_reverted_root` are those of degree 7). With 7, every one of 1.2
million Clopper-Pearson limits (tail 0.025, n up to 1e3, 1e6 and 1e9) settled after its first
evaluation, within 2e-15 (relative, in the logit) of the root the Halley solver this replaced
converged to; with degree 5, 1% at n <= 1e3 needed another evaluation."""

_TAYLOR_REACH = 0.25
"""Largest mismatch ``|log I - log tau|`` at which a step takes the reverted Taylor series;
farther out it takes Halley's step (the series needs the mismatch inside its radius of
convergence)."""


def _beta_quantile_logit(a, b, log_tau, z, fast: bool = False, skip_unused: bool = False,
                         bulk_shape=None):
  r"""``w = logit(x)`` with :math:`I_x(a, b) = \tau`, by steps on :math:`g(w) = \log
  I_{x(w)}(a, b) - \log\tau` that each evaluate I once and then invert g's Taylor series of
  degree :data:`_TAYLOR_TERMS` about the current point (:func:`_log_tail_taylor`,
  :func:`_reverted_root`). ``z`` is :math:`\Phi^{-1}(\tau)` (:func:`_normal_quantile`), computed
  by the caller so that a tail shared by all elements costs one evaluation. ``skip_unused``
  (for the grouped chunks of :func:`_map_grouped`) puts the branches of the start and of the
  tail that some elements do not need under ``lax.cond``; on small batches, where every branch
  is needed anyway, the tests only cost time and compile time. ``bulk_shape``: see
  :func:`_beta_shape`.

  The derivatives cost no further evaluation of I, so a step converges with order 8 where the
  series serves (mismatch up to :data:`_TAYLOR_REACH`): from the usual start a single
  evaluation leaves the root within 1e-15. Farther out a step is Halley's,
  :math:`w \leftarrow w - (g/g') / (1 - g g'' / (2 g'^2))`. One step runs for the whole batch,
  then more only while some element is unsettled (one test when none is); one loop holds both,
  so the step is compiled once. An element is settled when its last step began within
  :func:`_converged_mismatch` of the target, or when the last term of that step's reverted
  series, divided by g' (the error in w its truncation may leave, bounding the relative error
  of both x and 1 - x), is below :func:`_settled_error`, or when the step moved w by a few
  units in its last place. (Measured on 1.2 million limits: every element so settled was
  within 2e-15 of the converged root.)
  """
  dtype = a.dtype
  shape = _beta_shape(a, b, _logs(fast)[0], bulk_shape)
  lo, hi = _logit_bounds(dtype)
  tol = _converged_mismatch(dtype)

  def step(w):
    x, y = jax.nn.sigmoid(w), jax.nn.sigmoid(-w)
    small = _log_small_tail(a, b, x, y, shape, small_shapes=False, fast=fast,
                            skip_unused=skip_unused)
    log_t = jnp.where(small.swapped, _logs(fast)[1](jnp.minimum(small.log_tail, 0.0)),
                      small.log_tail)
    g = log_t - log_tau
    g1 = jnp.exp(small.log_density - log_t)
    scaled = _log_tail_taylor(g1, x, y, a, b, _TAYLOR_TERMS)
    newton = g / g1
    denominator = 1.0 - g * scaled[0]  # Halley: 1 - g g'' / (2 g'^2), with g'' = 2 b_2 g'^2
    halley = jnp.where(denominator > 0.25, newton / denominator, newton)
    root, last = _reverted_root(-g, scaled)
    t, last = root / g1, last / g1  # back from s = g' t
    polynomial = jnp.logical_and(jnp.abs(g) <= _TAYLOR_REACH, jnp.isfinite(last))
    delta = jnp.clip(jnp.where(polynomial, -t, halley), -16.0, 16.0)
    w_new = jnp.clip(w - delta, lo, hi)
    return (jnp.where(jnp.isfinite(w_new), w_new, w), jnp.where(jnp.isfinite(g), g, jnp.inf),
            jnp.where(polynomial, last, jnp.inf))

  resolution = 16.0 * float(jnp.finfo(dtype).eps)
  error_goal = _settled_error(dtype)

  def settled(w, w_new, g, predicted):
    # The step began close enough for its convergence, or its truncation error is below the
    # goal, or it moved w by no more than a few units in its last place: then the tail cannot
    # resolve the root any better (float32 with n ~ 1e9, where log I changes by ~n eps between
    # neighbouring w).
    return jnp.logical_or(jnp.logical_or(jnp.abs(g) <= tol, predicted <= error_goal),
                          jnp.abs(w_new - w) <= resolution * jnp.maximum(jnp.abs(w_new), 1.0))

  def cond(state):
    i, packed = state
    return jnp.logical_and(i < _max_steps(dtype), jnp.logical_not(jnp.all(_unpack(packed)[1])))

  def body(state):
    # One array is carried, w with the settled flag in its last bit: XLA:CPU copies the step's
    # fused arithmetic into each array the step hands on (with a separate flag, the Taylor
    # step was computed twice).
    i, packed = state
    w, done = _unpack(packed)
    w_new, g, predicted = step(w)
    return (i + 1, _pack(jnp.where(done, w, w_new),
                         jnp.logical_or(done, settled(w, w_new, g, predicted))))

  w = _initial_logit(a, b, log_tau, z, shape, skip_unused, fast)
  _, packed = jax.lax.while_loop(cond, body, (jnp.asarray(0, jnp.int32),
                                              _pack(w, jnp.zeros(w.shape, bool))))
  return _unpack(packed)[0]


def _pack(w, flag):
  """``w`` with its last bit replaced by ``flag`` (a change of at most one unit in the last
  place of w, 1.1e-13 at the largest |w| = 745 of float64: far below the 1e-10 promised)."""
  bits = jax.lax.bitcast_convert_type(w, _UINT[w.dtype])
  return jax.lax.bitcast_convert_type((bits & ~bits.dtype.type(1)) | flag.astype(bits.dtype),
                                      w.dtype)


def _unpack(packed):
  """``(w, flag)`` from :func:`_pack`."""
  bits = jax.lax.bitcast_convert_type(packed, _UINT[packed.dtype])
  return packed, (bits & bits.dtype.type(1)).astype(bool)


_UINT = {jnp.dtype(jnp.float64): jnp.uint64, jnp.dtype(jnp.float32): jnp.uint32}


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
  naming of ``alternative`` follows ``scipy.stats.binomtest``. Each limit solves its own tail
  equation, :math:`I_x(k, n-k+1) = \tau` for the lower and :math:`I_{1-x}(n-k, k+1) = \tau` for
  the upper, by one or two Taylor steps of order 8 on the logit scale (each one evaluation of the
  tail) from an asymptotic starting point
  (:func:`_beta_quantile_logit`), so that it stays accurate (1e-10 relative in float64) for
  tiny and huge counts; ``k = 0`` and ``k = n`` have closed forms.

  Args:
    successes: number of successes k (whole numbers, 0 <= k <= trials); any shape.
    trials: number of trials n >= 1 (broadcasts against ``successes``).
    significance: beta in (0, 1) of the 1 - beta confidence level.
    alternative: one of "two-sided", "less", "greater".

  Returns:
    ``Interval(lower, upper)`` with the broadcast shape of the inputs.

  >>> interval = clopper_pearson(7, 10)  # 7 successes in 10 trials, 95% two-sided
  >>> round(float(interval.lower), 4), round(float(interval.upper), 4)
  (0.3475, 0.9333)
  """
  _validate.check_choice("alternative", alternative, ALTERNATIVES)
  _validate.check_significance(significance)
  if not _plainly_valid_pairs(successes, trials):
    _validate.check_counts("successes", successes, trials, "trials")
    _validate.check_range("trials", trials, 1)
  k, n, beta = _compile.float_arguments(successes, trials, significance)
  return _compile.first_call(_bucketed_clopper_pearson, host_clopper_pearson,
                             (k, n, beta, alternative), _broadcast_size(k, n, beta))


def _bucketed_clopper_pearson(k, n, beta, alternative: str) -> Interval:
  """:func:`_clopper_pearson` on the pairs padded to their bucket
  (:func:`dpaudit.estimators._compile.elementwise`), with the grouping order of large batches
  formed on the host from the padded pairs (:func:`_host_order`). A significance shared by all
  pairs stays one value (its tail's terms are computed once)."""
  two_sided = alternative == "two-sided"

  size = _broadcast_size(k, n, beta)

  def call(k, n, beta):
    order = _host_order(functools.partial(_host_cp_key, halve=two_sided), k, n, beta,
                        parts=1 + two_sided, rows=size)
    return _clopper_pearson(k, n, beta, alternative, order,
                            None if order is None else np.int32(size))

  if _compile._traced((k, n, beta), {}):
    return call(k, n, beta)
  if np.ndim(beta) == 0:
    return _compile.elementwise(lambda k, n: call(k, n, beta), k, n)
  return _compile.elementwise(call, k, n, beta)


_BLOCK = 1 << 16


def _plainly_valid_pairs(k, n) -> bool:
  """Whether large float arrays of counts ``k`` and trials ``n`` are plainly valid (whole,
  ``0 <= k <= n``, ``1 <= n < inf``), tested block by block in the caches: the checks of
  :mod:`dpaudit._validate` form a dozen temporaries of the batch's size (8-10 ms for a million
  pairs, serial with the limits' program). False (the caller then runs those checks, which
  name what is wrong) for anything else: small or traced inputs, other dtypes, any offence."""
  if not (_validate.is_concrete((k, n)) and np.ndim(k) == 1 and np.shape(k) == np.shape(n)
          and np.size(k) >= _BLOCK):
    return False
  k, n = np.asarray(k), np.asarray(n)
  if k.dtype.kind != "f" or n.dtype.kind != "f":
    return False
  for start in range(0, k.size, _BLOCK):
    kb, nb = k[start:start + _BLOCK], n[start:start + _BLOCK]
    with np.errstate(invalid="ignore"):
      ok = ((kb >= 0.0) & (kb <= nb) & (nb >= 1.0) & (nb < np.inf)
            & (kb == np.trunc(kb)) & (nb == np.trunc(nb)))
    if not ok.all():
      return False
  return True


def _cp_key(k, n, z, xp=jnp):
  """The pairs whose limits start from the uniform expansion and take its series
  (``min(k, n - k)`` from :data:`_SERIES_MIN_SHAPE` on, near the bulk): the key that groups the
  chunks of :func:`_map_grouped`. ``z`` is the tail's normal quantile. ``xp``: ``jax.numpy``
  in the program, ``numpy`` on the host (:func:`_host_cp_key`)."""
  bulk = xp.minimum(k, n - k)
  return xp.logical_and(bulk >= _SERIES_MIN_SHAPE, _near_bulk(z, bulk))


def _host_cp_key(k, n, tail, halve: bool = False):
  """:func:`_cp_key` on the host, at the tail probabilities ``tail`` (halved with ``halve``: the
  two-sided limits' tails from the significance), the quantile by scipy. With one tail for all
  pairs the key is one threshold on both ``k`` and ``n - k`` (1.3 ms for a million pairs,
  against 5 ms for the general form: NumPy's ``minimum`` is slow)."""
  tail = tail / 2.0 if halve else tail
  dtype = np.result_type(tail)
  tiny, eps = np.finfo(dtype).tiny, np.finfo(dtype).eps
  z = scipy.special.ndtri(np.clip(tail, tiny, 1.0 - eps))
  if np.ndim(z) == 0:
    threshold = max(_SERIES_MIN_SHAPE, z * z / _NEAR_BULK)
    return np.logical_and(k >= threshold, n - k >= threshold)
  return _cp_key(k, n, z, np)


def _cp_limits(k, n, log_tau, lower: bool, upper: bool, fast: bool = False, order=None,
               rows=None):
  """The requested Clopper-Pearson limits at tail ``exp(log_tau)``, all from one solver call
  (one compiled solver however many limits are asked for). No validation; broadcasts.
  ``fast`` picks the logarithms of the solver's steps (:func:`_logs`); ``order`` is
  :func:`_host_order` of :func:`_host_cp_key`, or None (formed here where it is needed);
  ``rows``: the real pairs of a padded batch (:func:`_map_grouped`)."""
  k, n, log_tau = _as_float(k, n, log_tau)
  per_pair = log_tau.ndim > 0  # else one tail for all, and its terms are computed once
  if per_pair:
    k, n, log_tau = jnp.broadcast_arrays(k, n, log_tau)
    log_tau = log_tau.reshape(-1)
  else:
    k, n = jnp.broadcast_arrays(k, n)
  shape = k.shape
  k, n = k.reshape(-1), n.reshape(-1)
  parts = int(lower) + int(upper)
  z = _normal_quantile(log_tau)

  def side(part):  # part 0 is the lower limit when it is asked for, the last the upper
    return part >= parts - 1 if upper else jnp.zeros_like(part, bool)

  def params(is_upper, k, n):
    # lower: I_x(k, n - k + 1) = tau; upper: I_y(n - k, k + 1) = tau with y = 1 - x
    a = jnp.where(is_upper, jnp.where(k < n, n - k, 1.0), jnp.where(k > 0.0, k, 1.0))
    b = jnp.where(is_upper, jnp.where(k < n, k + 1.0, 1.0), jnp.where(k > 0.0, n - k + 1.0, 1.0))
    return a, b

  # Branch skipping pays only in the grouped chunks of _map_grouped, where the pairs whose
  # limits' starts and tails take only the uniform series go first.
  skip_unused = _chunked(parts * k.shape[0])

  def limit(part, k, n, log_tau, z):
    is_upper = side(part)
    a, b = params(is_upper, k, n)
    # min(a, b - 1) is min(k, n - k) for both limits of a pair (0 for k = 0 and k = n), so
    # the two limits agree on the series and the start, and a chunk of pairs grouped by it
    # needs one branch (both limits of a pair with min(k, n - k) >= 20 near the bulk take the
    # series; the others the fraction, which converges at min(a, b) <= 20 at any x).
    w = _beta_quantile_logit(a, b, log_tau, z, fast=fast, skip_unused=skip_unused,
                             bulk_shape=jnp.minimum(a, b - 1.0))
    t = _elementary.quotient(log_tau, n)
    closed = jnp.where(is_upper, -jnp.expm1(t), jnp.exp(t))  # k = n: x^n = tau; k = 0: y^n
    solved = jax.nn.sigmoid(jnp.where(is_upper, -w, w))
    x_lower = jnp.where(k > 0.0, jnp.where(k >= n, closed, solved), 0.0)
    x_upper = jnp.where(k < n, jnp.where(k <= 0.0, closed, solved), 1.0)
    return (jnp.where(is_upper, x_upper, x_lower),)

  simple = _cp_key(k, n, z) if order is None else None
  if per_pair:
    (x,) = _map_grouped(limit, (k, n, log_tau, z), simple, parts, 1, order=order, rows=rows)
  else:
    (x,) = _map_grouped(limit, (k, n), simple, parts, 1, shared=(log_tau, z), order=order,
                        rows=rows)
  return [v.reshape(shape) for v in x]


def _check_limit_inputs(k, n, log_tail) -> None:
  _validate.check_counts("k", k, n, "n")
  _validate.check_range("n", n, 1)
  _validate.check_not_boolean("log_tail", log_tail, "log probabilities")
  _validate.check_range("log_tail", log_tail, None, 0.0)


def cp_lower_limit(k, n, log_tail):
  """Lower Clopper-Pearson limit: p with ``Pr[Bin(n, p) >= k] = exp(log_tail)`` (0 for k = 0).
  For use inside other estimators: traceable, broadcasts; concrete inputs are checked
  (0 <= k <= n whole, n >= 1, log_tail <= 0)."""
  _check_limit_inputs(k, n, log_tail)
  return _cp_limits(k, n, log_tail, True, False)[0]


def cp_upper_limit(k, n, log_tail):
  """Upper Clopper-Pearson limit: p with ``Pr[Bin(n, p) <= k] = exp(log_tail)`` (1 for k = n).
  For use inside other estimators: traceable, broadcasts; concrete inputs are checked as by
  :func:`cp_lower_limit`."""
  _check_limit_inputs(k, n, log_tail)
  return _cp_limits(k, n, log_tail, False, True)[0]


@_compile.jit(static_argnames="alternative",
              fusion_emitters=_compile.fusion_from(_compile.LARGE_BATCH), tree_reductions=False)
def _clopper_pearson(k, n, beta, alternative, order=None, rows=None):
  """The limits; ``order``: :func:`_host_order` of :func:`_host_cp_key`, or None; ``rows``: the
  real pairs of a batch padded to its bucket, or None for all."""
  k, n = jnp.broadcast_arrays(k, n)
  if beta.ndim:
    k, n, beta = jnp.broadcast_arrays(k, n, beta)
  if alternative == "two-sided":
    lower, upper = _cp_limits(k, n, jnp.log(beta / 2.0), True, True, fast=True, order=order,
                              rows=rows)
    return Interval(lower, upper)
  if alternative == "less":
    (upper,) = _cp_limits(k, n, jnp.log(beta), False, True, fast=True, order=order,
                          rows=rows)
    return Interval(jnp.zeros_like(k), upper)
  (lower,) = _cp_limits(k, n, jnp.log(beta), True, False, fast=True, order=order,
                        rows=rows)
  return Interval(lower, jnp.ones_like(k))


# ----------------------------------------------------------------------------------------------
# Exact host paths (NumPy and scipy) for first calls on small inputs.
# ----------------------------------------------------------------------------------------------
#
# A first call on a small input is answered by these while its program compiles
# (:func:`dpaudit.estimators._compile.first_call`). They keep the compiled estimators'
# conventions (closed forms at k = 0 and k = n, the tails' values outside [1, n], broadcasting)
# and return float64 NumPy arrays (``first_call`` casts them to the default float dtype). Other
# estimators' host paths build on them (Clopper-Pearson limits above all), so they take any
# array-likes, check nothing (their public callers have checked) and never trace.


def _host_floats(*xs):
  """``xs`` as float64 NumPy arrays broadcast against each other."""
  return np.broadcast_arrays(*(np.asarray(x, np.float64) for x in xs))


def host_cp_lower_limit(k, n, log_tail) -> np.ndarray:
  """:func:`cp_lower_limit` by scipy: p with ``Pr[Bin(n, p) >= k] = exp(log_tail)``, i.e. the
  Beta(k, n - k + 1) quantile (``scipy.special.betaincinv``); 0 for k = 0 and
  ``exp(log_tail / n)`` for k = n. Tails down to the smallest normal double (``log_tail >=
  -708``); float64 NumPy."""
  k, n, log_tail = _host_floats(k, n, log_tail)
  inside = np.logical_and(k > 0.0, k < n)
  with np.errstate(divide="ignore", invalid="ignore"):
    solved = scipy.special.betaincinv(np.where(inside, k, 1.0), np.where(inside, n - k + 1.0, 1.0),
                                      np.exp(log_tail))
    closed = np.exp(log_tail / np.where(n > 0.0, n, 1.0))
  return np.where(k <= 0.0, 0.0, np.where(k >= n, closed, solved))


def host_cp_upper_limit(k, n, log_tail) -> np.ndarray:
  """:func:`cp_upper_limit` by scipy: p with ``Pr[Bin(n, p) <= k] = exp(log_tail)``, i.e. the
  upper ``exp(log_tail)`` quantile of Beta(k + 1, n - k) (``scipy.special.betainccinv``, accurate
  in p near 0 as near 1); 1 for k = n and ``-expm1(log_tail / n)`` for k = 0. Tails as in
  :func:`host_cp_lower_limit`; float64 NumPy."""
  k, n, log_tail = _host_floats(k, n, log_tail)
  inside = np.logical_and(k > 0.0, k < n)
  with np.errstate(divide="ignore", invalid="ignore"):
    solved = scipy.special.betainccinv(np.where(inside, k + 1.0, 1.0),
                                       np.where(inside, n - k, 1.0), np.exp(log_tail))
    closed = -np.expm1(log_tail / np.where(n > 0.0, n, 1.0))
  return np.where(k >= n, 1.0, np.where(k <= 0.0, closed, solved))


def host_clopper_pearson(successes, trials, significance=0.05,
                         alternative: str = "two-sided") -> Interval:
  """:func:`clopper_pearson` by scipy's Beta quantiles (:func:`host_cp_lower_limit`,
  :func:`host_cp_upper_limit`): the same limits, closed forms and alternatives, as float64
  NumPy arrays of the broadcast shape. Checks ``alternative`` only.

  >>> interval = host_clopper_pearson(7, 10)
  >>> round(float(interval.lower), 4), round(float(interval.upper), 4)
  (0.3475, 0.9333)
  """
  _validate.check_choice("alternative", alternative, ALTERNATIVES)
  k, n, beta = _host_floats(successes, trials, significance)
  if alternative == "two-sided":
    log_tail = np.log(beta / 2.0)
    return Interval(host_cp_lower_limit(k, n, log_tail), host_cp_upper_limit(k, n, log_tail))
  if alternative == "less":
    return Interval(np.zeros(k.shape), host_cp_upper_limit(k, n, np.log(beta)))
  return Interval(host_cp_lower_limit(k, n, np.log(beta)), np.ones(k.shape))


def _host_binomial_tail(k, n, p, upper: bool) -> np.ndarray:
  """``Pr[Bin(n, p) >= k] = I_p(k, n - k + 1)`` (``upper``) or ``Pr[Bin(n, p) < k] =
  I_q(n - k + 1, k)`` by scipy's regularized incomplete beta function (each accurate in
  relative terms; ``scipy.special.betaincc`` took 4x as long), with the conventions of
  :func:`log_binomial_tails_and_density` outside ``1 <= k <= n, 0 < p < 1``."""
  k, n, p = _host_floats(k, n, p)
  p = np.clip(p, 0.0, 1.0)
  q = 1.0 - p
  inside = np.logical_and(np.logical_and(k >= 1.0, k <= n), np.logical_and(p > 0.0, q > 0.0))
  a, b = np.where(inside, k, 1.0), np.where(inside, n - k + 1.0, 1.0)
  x = np.where(inside, p, 0.5)
  certain = np.logical_or(k <= 0.0, np.logical_and(k <= n, q <= 0.0))
  if upper:
    return np.where(inside, scipy.special.betainc(a, b, x), np.where(certain, 1.0, 0.0))
  return np.where(inside, scipy.special.betainc(b, a, 1.0 - x), np.where(certain, 0.0, 1.0))


def host_binomial_sf(k, n, p) -> np.ndarray:
  """:func:`binomial_sf` by scipy (``scipy.special.betainc``); float64 NumPy.

  >>> round(float(host_binomial_sf(3, 10, 0.2)), 4)
  0.3222
  """
  return _host_binomial_tail(k, n, p, upper=True)


def host_binomial_cdf(k, n, p) -> np.ndarray:
  """:func:`binomial_cdf` by scipy (``scipy.special.betainc``); float64 NumPy.

  >>> round(float(host_binomial_cdf(2, 10, 0.2)), 4)
  0.6778
  """
  return _host_binomial_tail(np.asarray(k, np.float64) + 1.0, n, p, upper=False)


def _host_stirling_whole(z):
  """:func:`stirling_remainder` of whole ``z >= 1`` (the table) and of any ``z > 15`` (the
  series), in NumPy."""
  table = _WHOLE_STIRLING[np.clip(z, 1.0, 15.0).astype(np.int64)]
  return np.where(z > 15.0, _stirling_series(np.maximum(z, 16.0)), table)


def _host_deviance(k, m):
  """:func:`binomial_deviance` in NumPy (``k >= 0``, ``m > 0``), as :func:`_deviance`."""
  close = np.abs(k - m) < 0.1 * (k + m)
  v = np.where(close, (k - m) / np.where(k + m > 0.0, k + m, 1.0), 0.0)
  total, term, v2 = (k - m) * v, 2.0 * k * v, v * v
  for j in range(1, 11):
    term = term * v2
    total = total + term / (2 * j + 1)
  with np.errstate(divide="ignore"):
    direct = np.where(k > 0.0, k * np.log(np.where(k > 0.0, k, 1.0) / m), 0.0) + m - k
  return np.where(close, total, direct)


def host_binomial_logpmf(k, n, p, q=None) -> np.ndarray:
  """:func:`binomial_logpmf` by scipy: the log of ``scipy.stats.binom.pmf`` (Boost's binomial
  density), from ``Bin(n, q)`` at ``n - k`` where ``p > 1/2`` (so that a ``q`` passed for p near
  1 keeps its accuracy), with the closed forms ``n log q`` and ``n log p`` at ``k = 0`` and
  ``k = n``; where the pmf is below 1e-300 (no longer a normal double), Loader's saddle-point
  form in NumPy (:func:`binomial_logpmf`). float64 NumPy.

  >>> round(float(host_binomial_logpmf(3, 10, 0.2)), 4)
  -1.6028
  """
  import scipy.stats
  k, n, p = _host_floats(k, n, p)
  q = 1.0 - p if q is None else _host_floats(q, k)[0]
  flip = p > 0.5
  j, r = np.where(flip, n - k, k), np.where(flip, q, p)  # Bin(n, r) at j
  s = 1.0 - r
  with np.errstate(divide="ignore", invalid="ignore"):
    pmf = scipy.stats.binom.pmf(j, n, r)
    # The ends in closed form (r <= 1/2, so log1p keeps s^n accurate next to 1).
    out = np.where(j <= 0.0, n * np.log1p(-r), np.where(j >= n, n * np.log(r), np.log(pmf)))
    interior = np.logical_and(j > 0.0, j < n)
    js, ns = np.where(interior, j, 1.0), np.where(interior, n, 2.0)
    rs = np.where(interior, r, 0.5)
    loader = (_host_stirling_whole(ns) - _host_stirling_whole(js)
              - _host_stirling_whole(ns - js) - _host_deviance(js, ns * rs)
              - _host_deviance(ns - js, ns * (1.0 - rs))
              + 0.5 * (np.log(ns) - np.log(js) - np.log(ns - js)) - _HALF_LOG_2PI)
  tiny = np.logical_and(np.logical_and(interior, pmf < 1e-300),
                        np.logical_and(r > 0.0, s > 0.0))
  out = np.where(tiny, loader, out)
  out = np.where(np.logical_and(interior, np.logical_or(r <= 0.0, s <= 0.0)), -np.inf, out)
  return np.where(np.logical_or(k < 0.0, k > n), -np.inf, out)


def host_incomplete_beta_tails(a, b, x, y=None) -> BetaTails:
  """:func:`incomplete_beta_tails` by scipy: ``I_x(a, b)`` and ``I_y(b, a)`` with ``y = 1 - x``
  (``scipy.special.betainc``, each tail accurate in relative terms, and a ``y`` passed for x
  near 1 keeps its accuracy); float64 NumPy.

  >>> tails = host_incomplete_beta_tails(2.0, 3.0, 0.4)
  >>> round(float(tails.lower), 4), round(float(tails.upper), 4)
  (0.5248, 0.4752)
  """
  a, b, x = _host_floats(a, b, x)
  y = 1.0 - x if y is None else _host_floats(y, x)[0]
  interior = np.logical_and(x > 0.0, y > 0.0)
  lower = scipy.special.betainc(a, b, np.where(interior, x, 0.5))
  upper = scipy.special.betainc(b, a, np.where(interior, y, 0.5))
  lower = np.where(interior, lower, np.where(x <= 0.0, 0.0, 1.0))
  upper = np.where(interior, upper, np.where(x <= 0.0, 1.0, 0.0))
  return BetaTails(lower=lower, upper=upper)
