r"""Renyi-DP bookkeeping: composition of RDP curves and conversion to :math:`(\varepsilon, \delta)`.

An RDP curve is an array whose last axis runs over the Renyi orders :math:`\alpha > 1` (given
separately as a 1-D ``orders`` array); leading axes are batch axes (queries, settings, ...).
Composition is the order-wise sum (Mironov 2017, Prop. 1), and the conversion to approximate
DP is Thm. 1 of Chadha et al., "Auditing Private Prediction" (2024), i.e. Balle et al.,
"Hypothesis Testing Interpretations and Renyi Differential Privacy" (AISTATS 2020), Thm. 20.

All functions are pure JAX, jit- and vmap-able, and compute in float64 when
``jax_enable_x64`` is on.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate
from dpaudit.estimators import _compile, multinomial


def _float_dtype():
  return jnp.result_type(float)


def check_rdp_curve(rdp, orders, name: str = "rdp") -> None:
  """Validates an RDP curve against its orders: orders > 1 (1-D, non-empty), the curve's last
  axis has one entry per order, and every entry is >= 0 (``+inf`` allowed, NaN not)."""
  _validate.check_orders(orders)
  _validate.check_nonempty("orders", orders)
  if np.ndim(orders) == 0:
    raise ValueError(f"orders must be a 1-D array, got a scalar {orders!r}")
  shape = np.shape(rdp)
  if len(shape) < 1 or shape[-1] != np.shape(orders)[0]:
    raise ValueError(f"{name} has shape {shape} but orders has shape {np.shape(orders)}; the "
                     f"last axis of {name} must run over the {np.shape(orders)[0]} orders")
  _validate.check_not_boolean(name, rdp, "RDP values")
  _validate.check_range(name, rdp, 0.0)


def compose_rdp(rdp, num_compositions=1, axis: int | None = 0) -> jax.Array:
  r"""Composes RDP curves: order-wise sum over ``axis``, times ``num_compositions``.

  .. math:: \varepsilon_{\mathrm{total}}(\alpha) = k \sum_{j} \varepsilon_j(\alpha)

  (Mironov 2017, Prop. 1; Chadha et al., Sec. 2.1: "the RDP guarantee for the composition of
  mechanisms is simply the order-wise sum"). Use ``axis`` for per-query curves stacked along a
  batch axis and ``num_compositions`` :math:`k` for identical repeats of the whole sequence.

  Args:
    rdp: RDP values :math:`\ge 0` (``+inf`` allowed), orders on the last axis.
    num_compositions: number :math:`k \ge 0` of identical repetitions (whole number; may be
      an array broadcasting against the result). ``k = 0`` gives 0, also for infinite entries.
    axis: batch axis to sum over (not the orders axis, which is the last one); ``None`` sums
      nothing and only multiplies by ``k`` (a single curve repeated ``k`` times).

  Returns:
    The composed curve: ``rdp`` with ``axis`` removed, times ``num_compositions``.

  >>> [float(v) for v in compose_rdp([[0.5, 1.0, 2.0], [0.25, 0.5, 1.0]])]  # two mechanisms
  [0.75, 1.5, 3.0]
  >>> [float(v) for v in compose_rdp([0.5, 1.0, 2.0], num_compositions=10, axis=None)]
  [5.0, 10.0, 20.0]
  """
  _validate.check_range("rdp", rdp, 0.0)
  _validate.check_integer_valued("num_compositions", num_compositions)
  _validate.check_range("num_compositions", num_compositions, 0.0)
  ndim = np.ndim(rdp)
  if ndim < 1:
    raise ValueError(f"rdp must have an orders axis (its last axis), got a scalar {rdp!r}")
  if axis is not None:
    if not -ndim <= axis < ndim:
      raise ValueError(f"axis={axis} is outside the valid range [{-ndim}, {ndim - 1}] for rdp of "
                       f"shape {np.shape(rdp)}")
    if axis % ndim == ndim - 1:
      raise ValueError(f"axis={axis} is the orders axis (the last axis of rdp, shape "
                       f"{np.shape(rdp)}); composition sums over a batch axis. Use axis=None to "
                       "repeat a single curve num_compositions times")
  dtype = _float_dtype()
  if on_host(rdp, num_compositions):  # NumPy: eager jnp compiles a program per operation
    x = np.asarray(rdp, dtype)
    total = x if axis is None else np.sum(x, axis=axis)
    k = np.asarray(num_compositions, dtype)
    with np.errstate(invalid="ignore"):  # 0 * inf, replaced by 0
      return _compile.to_device(np.asarray(np.where(k == 0, 0.0, k * total), dtype))
  x = jnp.asarray(rdp, dtype)
  total = x if axis is None else jnp.sum(x, axis=axis)
  k = jnp.asarray(num_compositions, dtype)
  return jnp.where(k == 0, 0.0, k * total)


def on_host(*values) -> bool:
  """Whether a call computes on the host (NumPy, or bucketed programs with first calls on the
  host): its inputs are concrete (not traced) and its work runs on a CPU."""
  return _validate.is_concrete(values) and _compile.platform(values) == "cpu"


def row_call(program, host, rdp, orders, per_row):
  """``program(rows, orders, values)`` on the rows of the RDP curves ``rdp`` (orders last) and
  the per-row ``values`` (a prior, a delta), their batches broadcast, flattened and padded to a
  :func:`_compile.bucket_size` (:func:`multinomial.padded_rows`), so that one program serves
  every batch in a bucket; outputs cut back to the batch. ``host``: the exact NumPy path of a
  first call on a small input (:func:`_compile.first_call`). Concrete CPU inputs only."""
  rows, values, batch = multinomial.padded_rows(rdp, per_row)
  orders = np.asarray(orders, _float_dtype())
  out = _compile.first_call(program, multinomial.on_real_rows(host, len(rows), batch, (0, 2)),
                            (rows, orders, values), rows.size)
  return multinomial.cut_rows(out, batch)


class EpsilonFromRdp(NamedTuple):
  """``epsilon`` of the (epsilon, delta)-DP guarantee and the order that attains it (NaN where
  every RDP entry is infinite, so that epsilon is infinite)."""
  epsilon: jax.Array
  order: jax.Array


def balle_epsilon_per_order(rdp, orders, delta) -> jax.Array:
  r"""The conversion of Chadha et al., Thm. 1 (Balle et al. 2020, Thm. 20) at each order:

  .. math::
     \varepsilon(\alpha) = \varepsilon_\alpha + \log\frac{\alpha - 1}{\alpha}
       - \frac{\log\delta + \log\alpha}{\alpha - 1}.

  No clipping; broadcasts ``rdp`` (..., K) against ``orders`` (K,) and ``delta`` (...,). Concrete
  inputs are checked as by :func:`rdp_to_epsilon` (traced ones are the caller's to check).
  """
  _check_conversion(rdp, orders, delta)
  dtype = _float_dtype()
  if on_host(rdp, orders, delta):
    return _compile.to_device(np.asarray(_balle(*(np.asarray(v, dtype) for v in (
        rdp, orders, delta)), np), dtype))
  return _balle(*(jnp.asarray(v, dtype) for v in (rdp, orders, delta)))


def _balle(rdp, orders, delta, xp=jnp):
  """:func:`balle_epsilon_per_order` without checks (``xp``: ``jax.numpy`` or ``numpy``)."""
  log_delta = xp.log(delta)[..., None]
  return rdp + xp.log1p(-1.0 / orders) - (log_delta + xp.log(orders)) / (orders - 1.0)


def _check_conversion(rdp, orders, delta) -> None:
  check_rdp_curve(rdp, orders)
  _validate.check_not_boolean("delta", delta, "probabilities")
  _validate.check_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
  _validate.check_broadcastable("delta", delta, np.shape(rdp)[:-1], "rdp batch shape")


def _epsilon(rdp, orders, delta, xp=jnp) -> EpsilonFromRdp:
  eps = _balle(rdp, orders, delta, xp)
  idx = xp.argmin(eps, axis=-1)
  best = xp.take_along_axis(eps, idx[..., None], axis=-1)[..., 0]
  order = xp.where(xp.isfinite(best), orders[idx], xp.nan)
  return EpsilonFromRdp(xp.maximum(best, 0.0), order)


@_compile.jit
def _rdp_to_epsilon(rdp, orders, delta):
  return _epsilon(rdp, orders, delta)


def _host_rdp_to_epsilon(rdp, orders, delta) -> EpsilonFromRdp:
  """:func:`_rdp_to_epsilon` in NumPy (float64), for first calls on small inputs."""
  return _epsilon(*(np.asarray(v, np.float64) for v in (rdp, orders, delta)), np)


def rdp_to_epsilon(rdp, orders, delta) -> EpsilonFromRdp:
  r"""Converts an RDP curve to :math:`(\varepsilon, \delta)`-DP, Chadha et al., Thm. 1.

  Thm. 1 of Chadha et al. (after Balle et al. 2020, Thm. 20): an
  :math:`(\alpha, \varepsilon_\alpha)`-RDP mechanism is :math:`(\varepsilon, \delta)`-DP with

  .. math::
     \varepsilon = \max\Big(0,\; \min_\alpha\; \varepsilon_\alpha
       + \log\frac{\alpha - 1}{\alpha} - \frac{\log\delta + \log\alpha}{\alpha - 1}\Big),

  the minimum taken over the given orders. Infinite RDP entries never attain the minimum
  unless all entries are infinite, in which case :math:`\varepsilon = \infty` and the order is
  NaN. (``dp_accounting``'s ``compute_epsilon`` applies the same formula but additionally
  returns 0 where :math:`\delta^2 > 1 - e^{-\varepsilon_\alpha}` and skips orders
  :math:`\le 1.01`.)

  Args:
    rdp: RDP values :math:`\ge 0` (``+inf`` allowed), shape ``(..., K)``.
    orders: the K orders :math:`\alpha > 1`, 1-D.
    delta: :math:`\delta \in (0, 1)`; broadcasts against the batch shape ``(...)``.

  Returns:
    ``EpsilonFromRdp(epsilon, order)``, each of the broadcast batch shape.

  >>> orders = [2.0, 4.0, 8.0, 16.0, 32.0]
  >>> rdp = [10 * a / (2 * 2.0**2) for a in orders]  # 10 Gaussian mechanisms, sigma = 2
  >>> result = rdp_to_epsilon(rdp, orders, delta=1e-5)
  >>> round(float(result.epsilon), 4), float(result.order)
  (8.0879, 4.0)
  """
  _check_conversion(rdp, orders, delta)
  if on_host(rdp, orders, delta):
    return row_call(_rdp_to_epsilon, _host_rdp_to_epsilon, rdp, orders, delta)
  dtype = _float_dtype()
  return _rdp_to_epsilon(jnp.asarray(rdp, dtype), jnp.asarray(orders, dtype),
                         jnp.asarray(delta, dtype))
