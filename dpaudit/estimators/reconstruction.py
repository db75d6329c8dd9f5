r"""Reconstruction-risk bounds from RDP: Stock et al., "Defending against Reconstruction Attacks
with Renyi Differential Privacy" (2022).

A secret :math:`s` has prior probability :math:`p_0 = \Pr[\mathcal A(\mathcal M(D)) = s]` of
being output by a reconstruction attack on a model trained without it, and posterior
:math:`p_1 = \Pr[\mathcal A(\mathcal M(D \cup \{s\})) = s]`. If :math:`\mathcal M` is
:math:`(\alpha, d_\alpha)`-RDP, probability preservation (their Eq. (1)) gives their Eq. (2),

.. math::
   -h(\alpha, p_0) \le \log\frac{p_1}{p_0} \le l(\alpha, p_0), \qquad
   l(\alpha, p_0) = d_\alpha\frac{\alpha - 1}{\alpha} + \frac{\log(1/p_0)}{\alpha},\quad
   h(\alpha, p_0) = d_\alpha + \frac{\log(1/p_0)}{\alpha - 1},

and :math:`L(p_0) = \min_{\alpha > 1} l(\alpha, p_0)` (Eq. (3)). All logs are natural except in
:func:`leakage_bits`. RDP curves carry the orders on their last axis; batch axes of the curve
broadcast against the shape of ``p0`` / ``secret_bits`` (so an ``(T, 1, K)`` stack of curves
and ``B`` priors give a ``(T, B)`` table). Priors are handled through :math:`\log p_0`, and
every function accepts ``log_p0=`` instead of ``p0`` for priors below the floating-point range
(e.g. :math:`2^{-2000}`).

All functions are pure JAX, jit- and vmap-able, and compute in float64 when
``jax_enable_x64`` is on.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate
from dpaudit.estimators import _compile
from dpaudit.estimators import rdp as _rdp

_LOG2 = math.log(2.0)


def _float_dtype():
  return jnp.result_type(float)


class BoundAtOrder(NamedTuple):
  r"""A bound minimised over Renyi orders and the order attaining it.

  ``order`` is 1.0 where the trivial bound (the :math:`\alpha \to 1^+` limit, see
  :func:`reconstruction_leakage_bound`) is the minimum, and NaN where the bound is infinite.
  """
  value: jax.Array
  order: jax.Array


def _log_prior(p0, log_p0, batch_shape):
  """Validates exactly one of p0 / log_p0 and returns log p0 as a float array."""
  if (p0 is None) == (log_p0 is None):
    raise ValueError("pass exactly one of p0 and log_p0")
  dtype = _float_dtype()
  if p0 is not None:
    name, value = "p0", p0
    _validate.check_range("p0", p0, 0.0, 1.0, low_open=True)
  else:
    name, value = "log_p0", log_p0
    _validate.check_range("log_p0", log_p0, None, 0.0)
    if _validate.is_concrete(log_p0) and np.any(np.isneginf(np.asarray(log_p0))):
      raise ValueError("log_p0=-inf is outside the valid range (-inf, 0] (p0 must be > 0)")
  _validate.check_broadcastable(name, value, batch_shape, "rdp batch shape")
  xp = np if _rdp.on_host(value) else jnp
  if p0 is not None:
    return xp.log(xp.asarray(p0, dtype))
  return xp.asarray(log_p0, dtype)


def _minimise(values, orders, trivial=None, xp=jnp):
  """min over the last axis (optionally with a trivial alpha -> 1+ candidate) + argmin order."""
  idx = xp.argmin(values, axis=-1)
  best = xp.take_along_axis(values, idx[..., None], axis=-1)[..., 0]
  order = orders[idx]
  if trivial is not None:
    use_trivial = trivial <= best
    best = xp.where(use_trivial, trivial, best)
    order = xp.where(use_trivial, 1.0, order)
  return BoundAtOrder(best, xp.where(xp.isfinite(best), order, xp.nan))


def _leakage_bound(rdp, orders, log_p0, xp=jnp) -> BoundAtOrder:
  # l(alpha, p0) = d (alpha - 1)/alpha + log(1/p0)/alpha, shape broadcast(batch, p0) + (K,).
  neg = -log_p0[..., None]
  l = rdp * ((orders - 1.0) / orders) + neg / orders
  l, _ = xp.broadcast_arrays(l, neg)
  return _minimise(l, orders, trivial=xp.broadcast_to(0.0 - log_p0, l.shape[:-1]), xp=xp)


@_compile.jit
def _leakage(rdp, orders, log_p0):
  return _leakage_bound(rdp, orders, log_p0)


def _host(bound):
  """``bound(rdp, orders, value, xp)`` in NumPy (float64): the host path of a first call."""
  def call(rdp, orders, value):
    return bound(*(np.asarray(v, np.float64) for v in (rdp, orders, value)), xp=np)
  return call


_PROGRAMS = {}  # compiled program -> the NumPy form of its bound (filled below)


def _call_with_prior(core, rdp, orders, p0, log_p0):
  """Validates the curve and the prior, then evaluates ``core(rdp, orders, log_p0)`` (on
  bucketed rows of concrete CPU inputs, :func:`_rdp.row_call`)."""
  _rdp.check_rdp_curve(rdp, orders)
  lp0 = _log_prior(p0, log_p0, np.shape(rdp)[:-1])
  dtype = _float_dtype()
  if _rdp.on_host(rdp, orders, lp0):
    return _rdp.row_call(core, _host(_PROGRAMS[core]), rdp, orders, lp0)
  return core(jnp.asarray(rdp, dtype), jnp.asarray(orders, dtype), lp0)


def reconstruction_leakage_bound(rdp, orders, p0=None, *, log_p0=None) -> BoundAtOrder:
  r"""Bound :math:`L(p_0)` on the reconstruction leakage :math:`\log(p_1/p_0)`, Stock et al.,
  Eqs. (2)-(3).

  .. math::
     L(p_0) = \min\Big(\log\frac{1}{p_0},\; \min_\alpha\; d_\alpha\frac{\alpha - 1}{\alpha}
        + \frac{\log(1/p_0)}{\alpha}\Big)

  over the given orders. The first term is the limit :math:`\alpha \to 1^+` of
  :math:`l(\alpha, p_0)` (for any finite :math:`d_1`) and holds unconditionally since
  :math:`p_1 \le 1`; including it makes :math:`L(1) = 0` exactly, as for the infimum over
  all :math:`\alpha > 1` in Eq. (3). ``order`` is 1.0 where that term is the minimum.

  Args:
    rdp: RDP curve(s) :math:`d_\alpha \ge 0` (``+inf`` allowed), shape ``(..., K)``.
    orders: the K orders :math:`\alpha > 1`, 1-D.
    p0: prior :math:`p_0 \in (0, 1]`; broadcasts against the batch shape ``(...)``.
    log_p0: alternatively :math:`\log p_0 \in (-\infty, 0]` (keyword only).

  Returns:
    ``BoundAtOrder(value, order)`` of the broadcast shape, value in nats.

  >>> orders = [2.0, 4.0, 8.0, 16.0, 32.0]
  >>> rdp = [a / 2 for a in orders]  # the Gaussian mechanism with sigma = 1
  >>> bound = reconstruction_leakage_bound(rdp, orders, p0=2.0**-10)  # a 10-bit secret
  >>> round(float(bound.value), 4), float(bound.order)  # below log(1 / p0) = 6.9315
  (3.2329, 4.0)
  """
  return _call_with_prior(_leakage, rdp, orders, p0, log_p0)


def _traditional_bound(rdp, orders, log_p0, xp=jnp) -> BoundAtOrder:
  neg = -log_p0[..., None]
  h = rdp + neg / (orders - 1.0)
  h, _ = xp.broadcast_arrays(h, neg)
  return _minimise(h, orders, xp=xp)


@_compile.jit
def _traditional(rdp, orders, log_p0):
  return _traditional_bound(rdp, orders, log_p0)


def traditional_reconstruction_bound(rdp, orders, p0=None, *, log_p0=None) -> BoundAtOrder:
  r"""The "traditional" bound :math:`\min_\alpha h(\alpha, p_0)` of Stock et al., Eq. (2).

  .. math:: \min_\alpha\; d_\alpha + \frac{\log(1/p_0)}{\alpha - 1}

  This bounds the absolute leakage :math:`|\log(p_1/p_0)|` and equals Mironov's RDP-to-DP
  conversion :math:`\varepsilon` at :math:`\delta = p_0` (their Sec. 3); it is larger than
  :math:`l(\alpha, p_0)` at every order.

  Args:
    rdp: RDP curve(s) :math:`d_\alpha \ge 0`, shape ``(..., K)``.
    orders: the K orders :math:`\alpha > 1`, 1-D.
    p0: prior :math:`p_0 \in (0, 1]`; broadcasts against the batch shape.
    log_p0: alternatively :math:`\log p_0 \in (-\infty, 0]` (keyword only).

  Returns:
    ``BoundAtOrder(value, order)`` of the broadcast shape, value in nats.

  >>> orders = [2.0, 4.0, 8.0, 16.0, 32.0]
  >>> rdp = [a / 2 for a in orders]  # the Gaussian mechanism with sigma = 1
  >>> bound = traditional_reconstruction_bound(rdp, orders, p0=2.0**-10)
  >>> round(float(bound.value), 4), float(bound.order)  # above L(p0) = 3.2329
  (4.3105, 4.0)
  """
  return _call_with_prior(_traditional, rdp, orders, p0, log_p0)


def _bits_bound(rdp, orders, bits, xp=jnp) -> BoundAtOrder:
  b = bits[..., None]
  l2 = rdp * ((orders - 1.0) / (orders * _LOG2)) + b / orders
  l2, _ = xp.broadcast_arrays(l2, b)
  return _minimise(l2, orders, trivial=xp.broadcast_to(bits, l2.shape[:-1]), xp=xp)


@_compile.jit
def _bits(rdp, orders, bits):
  return _bits_bound(rdp, orders, bits)


_PROGRAMS.update({_leakage: _leakage_bound, _traditional: _traditional_bound, _bits: _bits_bound})


def leakage_bits(rdp, orders, secret_bits) -> BoundAtOrder:
  r"""Leakage in bits of a secret of :math:`b` bits, :math:`L_2(b)` of Stock et al. ("Length of
  the Secret", Sec. 3; App. A.2).

  .. math::
     L_2(b) = \min\Big(b,\; \min_\alpha\; d_\alpha\frac{\alpha - 1}{\alpha\log 2}
        + \frac{b}{\alpha}\Big) = \frac{L(2^{-b})}{\log 2},

  with the same trivial :math:`\alpha \to 1^+` term :math:`b` as in
  :func:`reconstruction_leakage_bound`, so :math:`L_2(0) = 0`. As a minimum of non-decreasing
  linear functions of :math:`b`, :math:`L_2` is non-decreasing and concave (App. A.2).

  Args:
    rdp: RDP curve(s) :math:`d_\alpha \ge 0` (nats), shape ``(..., K)``.
    orders: the K orders :math:`\alpha > 1`, 1-D.
    secret_bits: secret length :math:`b \ge 0` (prior :math:`2^{-b}`); broadcasts against the
      batch shape.

  Returns:
    ``BoundAtOrder(value, order)`` of the broadcast shape, value in bits.

  >>> orders = [2.0, 4.0, 8.0, 16.0, 32.0]
  >>> rdp = [a / 2 for a in orders]  # the Gaussian mechanism with sigma = 1
  >>> bound = leakage_bits(rdp, orders, secret_bits=10.0)
  >>> round(float(bound.value), 4), float(bound.order)  # L(2**-10) / log(2) = 3.2329 / 0.6931
  (4.664, 4.0)
  """
  _rdp.check_rdp_curve(rdp, orders)
  _validate.check_range("secret_bits", secret_bits, 0.0)
  if _validate.is_concrete(secret_bits) and np.any(np.isposinf(np.asarray(secret_bits))):
    raise ValueError("secret_bits=inf is outside the valid range [0, inf)")
  _validate.check_broadcastable("secret_bits", secret_bits, np.shape(rdp)[:-1],
                                "rdp batch shape")
  if _rdp.on_host(rdp, orders, secret_bits):
    return _rdp.row_call(_bits, _host(_bits_bound), rdp, orders, secret_bits)
  dtype = _float_dtype()
  return _bits(jnp.asarray(rdp, dtype), jnp.asarray(orders, dtype),
               jnp.asarray(secret_bits, dtype))


def posterior_bound(rdp, orders, p0=None, *, log_p0=None) -> jax.Array:
  r"""Upper bound on the posterior :math:`p_1 \le \min(1, p_0 e^{L(p_0)})` (Stock et al.,
  Eq. (2)-(3); :math:`L` from :func:`reconstruction_leakage_bound`).

  Equivalently :math:`\log p_1 \le \min_\alpha \frac{\alpha - 1}{\alpha}(d_\alpha + \log p_0)`
  (their App. A.1). Arguments as for :func:`reconstruction_leakage_bound`; returns the
  broadcast shape.

  >>> orders = [2.0, 4.0, 8.0, 16.0, 32.0]
  >>> rdp = [a / 2 for a in orders]  # the Gaussian mechanism with sigma = 1
  >>> round(float(posterior_bound(rdp, orders, p0=2.0**-10)), 4)  # 2**-10 * exp(3.2329)
  0.0248
  """
  bound = reconstruction_leakage_bound(rdp, orders, p0, log_p0=log_p0).value
  lp0 = _log_prior(p0, log_p0, np.shape(rdp)[:-1])
  if _rdp.on_host(bound, lp0):
    dtype = _float_dtype()
    return _compile.to_device(np.asarray(np.minimum(np.exp(lp0 + np.asarray(bound)), 1.0),
                                         dtype))
  return jnp.minimum(jnp.exp(lp0 + bound), 1.0)
