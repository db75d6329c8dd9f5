r"""Theoretical privacy of DP-SGD: thin, validated wrappers around ``dp_accounting``.

DP-SGD (Abadi et al., "Deep Learning with Differential Privacy", CCS 2016, Alg. 1; Eq. (2) of
Liu & Xiong, UniAud) releases at each of ``num_steps`` steps the sum of the per-example
gradients of a Poisson sample (each example kept independently with probability
``sampling_rate`` :math:`q`), each clipped to L2 norm ``l2_clip_norm`` :math:`C`, plus
:math:`N(0, \sigma^2 C^2 I)` noise with :math:`\sigma` = ``noise_multiplier``. One step is
the Poisson-subsampled Gaussian mechanism with noise multiplier :math:`\sigma` (sensitivity 1
after dividing by :math:`C`), and training is its ``num_steps``-fold adaptive composition:

.. code-block:: python

   SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), num_steps)

(:func:`dpsgd_event`). Its :math:`(\varepsilon, \delta)` upper bound comes from either

* the RDP accountant (``accountant="rdp"``): the Renyi DP of the sampled Gaussian mechanism of
  Mironov, Talwar & Zhang, "Renyi Differential Privacy of the Sampled Gaussian Mechanism"
  (2019), composed order-wise (Mironov 2017, Prop. 1) and converted to :math:`(\varepsilon, \delta)`
  as in Balle et al. (2020) (Thm. 1 of Chadha et al.; the improvement mentioned in Sec. 2.2 of Stock
  et al., "Defending against Reconstruction Attacks with Renyi DP"); or
* the privacy-loss-distribution accountant (``accountant="pld"``): numerical composition of
  the discretised (pessimistic) privacy loss distribution (Koskela et al. 2020; Doroshenko et
  al. 2022), tighter than RDP and an upper bound up to its discretisation.

Both use the add-or-remove-one neighbouring relation, the one for which Poisson-sampled DP-SGD
is usually stated. :func:`dpsgd_rdp` exposes the composed RDP curve at arbitrary orders, which
the reconstruction bounds of Stock et al. (Eqs. 2-3) consume.

These functions run on the host in float64 (``dp_accounting`` is NumPy/SciPy code); they take
Python scalars, not traced values.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from typing import Any

import dp_accounting
import numpy as np

from dpaudit import _validate

ACCOUNTANTS = ("rdp", "pld")

# dp_accounting's default value discretisation interval of the PLD accountant: the loss grid
# spacing. The PLD epsilon is pessimistic (an upper bound) for any spacing; smaller is tighter
# and slower.
DEFAULT_PLD_DISCRETIZATION = 1e-4

# Calibration searches noise multipliers up to _MAX_NOISE.
_MAX_NOISE = 2.0 ** 30


def _check_scalar(name: str, value: Any) -> None:
  if np.ndim(value) != 0:
    raise ValueError(f"{name} must be a scalar, got shape {np.shape(value)}")


def _check_dpsgd(noise_multiplier, sampling_rate, num_steps) -> tuple[float, float, int]:
  """Validates the DP-SGD parameters and returns them as Python numbers."""
  _check_scalar("noise_multiplier", noise_multiplier)
  _check_scalar("sampling_rate", sampling_rate)
  _check_scalar("num_steps", num_steps)
  for name, value in (("noise_multiplier", noise_multiplier), ("sampling_rate", sampling_rate),
                      ("num_steps", num_steps)):
    _validate.check_not_boolean(name, value, "DP-SGD parameters")
  _validate.check_range("noise_multiplier", noise_multiplier, 0.0, math.inf, high_open=True)
  _validate.check_range("sampling_rate", sampling_rate, 0.0, 1.0)
  _validate.check_integer_valued("num_steps", num_steps)
  _validate.check_range("num_steps", num_steps, 0.0, math.inf, high_open=True)
  return float(noise_multiplier), float(sampling_rate), int(num_steps)


def _check_accountant(accountant: str, orders, pld_discretization) -> None:
  _validate.check_choice("accountant", accountant, ACCOUNTANTS)
  if accountant == "pld" and orders is not None:
    raise ValueError("orders is only used by accountant='rdp', got accountant='pld' with "
                     f"orders={orders!r}")
  _check_scalar("pld_discretization", pld_discretization)
  _validate.check_range("pld_discretization", pld_discretization, 0.0, 1.0, low_open=True)


def _as_orders(orders) -> np.ndarray:
  """Validated 1-D float64 orders (dp_accounting's defaults when ``orders`` is None)."""
  if orders is None:
    return np.asarray(dp_accounting.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS, np.float64)
  _validate.check_orders(orders)
  _validate.check_nonempty("orders", orders)
  _validate.check_range("orders", orders, 1.0, math.inf, low_open=True, high_open=True)
  return np.atleast_1d(np.asarray(orders, np.float64))


def _is_trivial(sampling_rate: float, num_steps: int) -> bool:
  """True when no example can influence the output (no step, or no example ever sampled)."""
  return num_steps == 0 or sampling_rate == 0.0


def _make_accountant(accountant: str, orders: np.ndarray | None, pld_discretization: float
                     ) -> dp_accounting.PrivacyAccountant:
  if accountant == "rdp":
    return dp_accounting.rdp.RdpAccountant(orders=orders)
  return dp_accounting.pld.PLDAccountant(value_discretization_interval=pld_discretization)


def _event(noise_multiplier: float, sampling_rate: float, num_steps: int
           ) -> dp_accounting.DpEvent:
  if num_steps == 0:
    return dp_accounting.NoOpDpEvent()
  step = dp_accounting.GaussianDpEvent(noise_multiplier)
  if sampling_rate < 1.0:
    step = dp_accounting.PoissonSampledDpEvent(sampling_rate, step)
  return dp_accounting.SelfComposedDpEvent(step, num_steps)


def dpsgd_event(noise_multiplier, sampling_rate, num_steps) -> dp_accounting.DpEvent:
  r"""The ``dp_accounting`` event of DP-SGD (Abadi et al. 2016, Alg. 1).

  ``num_steps`` self-compositions of the Poisson-subsampled Gaussian mechanism:
  ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), num_steps)``. With
  ``sampling_rate`` 1 the Poisson wrapper is dropped (full-batch steps are plain Gaussian
  mechanisms, which the PLD accountant then composes in closed form); with ``num_steps`` 0 the
  event is ``NoOpDpEvent()``.

  Args:
    noise_multiplier: :math:`\sigma \ge 0`, the noise standard deviation divided by the L2
      clipping norm (0 means no noise: not private).
    sampling_rate: Poisson sampling probability :math:`q \in [0, 1]`.
    num_steps: number of training steps :math:`T \ge 0` (a whole number).

  Returns:
    A ``dp_accounting.DpEvent``.
  """
  return _event(*_check_dpsgd(noise_multiplier, sampling_rate, num_steps))


def _composed(noise_multiplier, sampling_rate, num_steps, accountant, orders,
              pld_discretization) -> dp_accounting.PrivacyAccountant:
  acc = _make_accountant(accountant, orders, pld_discretization)
  return acc.compose(_event(noise_multiplier, sampling_rate, num_steps))


def dpsgd_epsilon(noise_multiplier, sampling_rate, num_steps, delta, *, accountant: str = "rdp",
                  orders=None, pld_discretization: float = DEFAULT_PLD_DISCRETIZATION) -> float:
  r"""Upper bound on the :math:`\varepsilon` of DP-SGD at a given :math:`\delta`.

  The mechanism is :func:`dpsgd_event`. With ``accountant="rdp"`` the RDP curve
  :math:`\varepsilon_\alpha` of :func:`dpsgd_rdp` is converted as in Balle et al. (2020)
  (``dp_accounting``'s ``compute_epsilon``, the formula of
  :func:`dpaudit.estimators.rdp.rdp_to_epsilon`, which in addition returns 0 where
  :math:`\delta^2 > 1 - e^{-\varepsilon_\alpha}` and skips orders :math:`\le 1.01`),

  .. math::
     \varepsilon = \min_\alpha\; \varepsilon_\alpha + \log\frac{\alpha - 1}{\alpha}
       - \frac{\log\delta + \log\alpha}{\alpha - 1},

  minimised over ``orders``; with ``accountant="pld"`` it is the PLD accountant's pessimistic
  estimate (tighter, slower).

  Limit cases: ``num_steps == 0`` or ``sampling_rate == 0`` give 0 (nothing about any example
  is released); otherwise ``noise_multiplier == 0`` or ``delta == 0`` give ``inf`` (the
  Gaussian mechanism is never pure DP).

  Args:
    noise_multiplier: :math:`\sigma \ge 0` (noise standard deviation / L2 clipping norm).
    sampling_rate: Poisson sampling probability :math:`q \in [0, 1]`.
    num_steps: number of steps :math:`T \ge 0`.
    delta: :math:`\delta \in [0, 1)`.
    accountant: ``"rdp"`` or ``"pld"``.
    orders: Renyi orders :math:`\alpha > 1` for the RDP accountant (1-D; default
      ``dp_accounting``'s ``DEFAULT_RDP_ORDERS``, 1.25 to 1024). Must be None for ``"pld"``.
    pld_discretization: value discretisation interval of the PLD accountant, in (0, 1].

  Returns:
    :math:`\varepsilon \ge 0` as a Python float (possibly ``inf``).
  """
  sigma, q, steps = _check_dpsgd(noise_multiplier, sampling_rate, num_steps)
  _check_scalar("delta", delta)
  _validate.check_delta(delta)
  _check_accountant(accountant, orders, pld_discretization)
  ords = _as_orders(orders) if accountant == "rdp" else None
  if _is_trivial(q, steps):
    return 0.0
  if float(delta) == 0.0:
    return math.inf
  acc = _composed(sigma, q, steps, accountant, ords, float(pld_discretization))
  return float(acc.get_epsilon(float(delta)))


def dpsgd_epsilon_replace_one(noise_multiplier, sampling_rate, num_steps, delta, *,
                              pld_discretization: float = DEFAULT_PLD_DISCRETIZATION) -> float:
  r"""Upper bound on the :math:`\varepsilon` of DP-SGD under replace-one neighbouring.

  Same mechanism as :func:`dpsgd_epsilon` (:func:`dpsgd_event`), but D and D' differ in one
  *replaced* record rather than one added or removed record, the relation of audits that
  swap a canary for a counterpart (UniAud's self-comparison game, Alg. 2 and Thm. 3 of Liu &
  Xiong, where a canary is trained either with its label or with a fresh one). The PLD
  accountant of ``dp_accounting`` with ``NeighboringRelation.REPLACE_ONE`` (its RDP accountant
  does not support Poisson sampling under this relation). The value lies between the
  add-or-remove epsilon and, by group privacy, about twice it.

  Args:
    noise_multiplier: :math:`\sigma \ge 0`.
    sampling_rate: :math:`q \in [0, 1]`.
    num_steps: :math:`T \ge 0`.
    delta: :math:`\delta \in [0, 1)`.
    pld_discretization: value discretisation interval of the PLD accountant, in (0, 1].

  Returns:
    :math:`\varepsilon \ge 0` as a Python float (``inf`` without noise or with delta 0).
  """
  sigma, q, steps = _check_dpsgd(noise_multiplier, sampling_rate, num_steps)
  _check_scalar("delta", delta)
  _validate.check_delta(delta)
  _check_accountant("pld", None, pld_discretization)
  if _is_trivial(q, steps):
    return 0.0
  if float(delta) == 0.0 or sigma == 0.0:
    return math.inf
  acc = dp_accounting.pld.PLDAccountant(
      neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE,
      value_discretization_interval=float(pld_discretization))
  acc.compose(_event(sigma, q, steps))
  return float(acc.get_epsilon(float(delta)))


def dpsgd_delta(noise_multiplier, sampling_rate, num_steps, epsilon, *, accountant: str = "rdp",
                orders=None, pld_discretization: float = DEFAULT_PLD_DISCRETIZATION) -> float:
  r"""Upper bound on the :math:`\delta` of DP-SGD at a given :math:`\varepsilon`.

  The inverse view of :func:`dpsgd_epsilon`. With ``accountant="rdp"`` this is
  ``dp_accounting``'s ``compute_delta`` (Canonne, Kamath & Steinke 2020, Prop. 12, with the
  KL bound :math:`\delta \le \sqrt{1 - e^{-\varepsilon_\alpha}}` near :math:`\alpha = 1`);
  with ``accountant="pld"`` it is the hockey-stick divergence of the pessimistic PLD.

  Limit cases: ``num_steps == 0`` or ``sampling_rate == 0`` give 0; ``noise_multiplier == 0``
  otherwise gives 1 (the accountants treat a noiseless step as non-private).

  Args:
    noise_multiplier: :math:`\sigma \ge 0`.
    sampling_rate: :math:`q \in [0, 1]`.
    num_steps: :math:`T \ge 0`.
    epsilon: :math:`\varepsilon \ge 0` (finite).
    accountant: ``"rdp"`` or ``"pld"``.
    orders: Renyi orders for the RDP accountant (see :func:`dpsgd_epsilon`).
    pld_discretization: value discretisation interval of the PLD accountant, in (0, 1].

  Returns:
    :math:`\delta \in [0, 1]` as a Python float.
  """
  sigma, q, steps = _check_dpsgd(noise_multiplier, sampling_rate, num_steps)
  _check_scalar("epsilon", epsilon)
  _validate.check_range("epsilon", epsilon, 0.0, math.inf, high_open=True)
  _check_accountant(accountant, orders, pld_discretization)
  ords = _as_orders(orders) if accountant == "rdp" else None
  if _is_trivial(q, steps):
    return 0.0
  acc = _composed(sigma, q, steps, accountant, ords, float(pld_discretization))
  return float(min(max(acc.get_delta(float(epsilon)), 0.0), 1.0))


ADJACENCIES = ("add_or_remove_one", "replace_one")


def _composed_pld(noise_multiplier: float, sampling_rate: float, num_steps: int, adjacency: str,
                  pld_discretization: float):
  """The pessimistic privacy loss distribution of :func:`dpsgd_event` (dp_accounting's PLD
  accountant, the construction of :func:`dpsgd_epsilon` and :func:`dpsgd_epsilon_replace_one`)."""
  relation = (dp_accounting.NeighboringRelation.REPLACE_ONE if adjacency == "replace_one"
              else dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
  acc = dp_accounting.pld.PLDAccountant(neighboring_relation=relation,
                                        value_discretization_interval=pld_discretization)
  acc.compose(_event(noise_multiplier, sampling_rate, num_steps))
  return acc._pld  # noqa: SLF001 (dp_accounting exposes no public getter)


def _pmf_profile(pmf, size: int) -> np.ndarray:
  r"""Hockey-stick divergence of one discrete privacy loss distribution at the losses
  :math:`\varepsilon_e = e\,\Delta` (e = 0..size-1, :math:`\Delta` the discretisation):
  :math:`\delta(\varepsilon_e) = p_\infty + \sum_{i > e} p_i (1 - c^{i - e})`,
  :math:`c = e^{-\Delta}`, by the recursion :math:`\delta_e - p_\infty = (1 - c) T_e
  + c\,(\delta_{e+1} - p_\infty)` with :math:`T_e = \sum_{i > e} p_i`: sums of positive
  terms only (no cancellation), one linear filter over the grid."""
  from scipy import signal  # noqa: PLC0415 (scipy is a dependency of dp_accounting)
  dense = pmf.to_dense_pmf()
  lower, probs = int(dense._lower_loss), np.asarray(dense._probs, np.float64)  # noqa: SLF001
  step = float(dense._discretization)  # noqa: SLF001
  p = np.zeros(size + 1)
  index = np.arange(len(probs)) + lower  # loss index of each probability
  keep = index >= 0  # size reaches the largest loss
  p[index[keep]] = probs[keep]
  tail = np.cumsum(p[::-1])[::-1]  # sum_{i >= e} p_i, summed from the top
  strictly_above = np.append(tail[1:], 0.0)[:size]  # T_e = sum_{i > e} p_i
  c = math.exp(-step)
  excess = signal.lfilter([1.0 - c], [1.0, -c], strictly_above[::-1])[::-1]
  return float(dense._infinity_mass) + excess  # noqa: SLF001


def dpsgd_privacy_profile(noise_multiplier, sampling_rate, num_steps, *,
                          adjacency: str = "add_or_remove_one",
                          pld_discretization: float = DEFAULT_PLD_DISCRETIZATION
                          ) -> tuple[np.ndarray, np.ndarray]:
  r"""The privacy profile :math:`\delta(\varepsilon)` of DP-SGD from its pessimistic PLD.

  The mechanism is :func:`dpsgd_event` under ``adjacency`` (``"add_or_remove_one"`` or
  ``"replace_one"``); dp_accounting's PLD accountant (Koskela et al. 2020; Doroshenko et al.
  2022) discretises its privacy loss pessimistically on a grid of spacing
  ``pld_discretization``, so that the discrete pair dominates the mechanism: the returned
  :math:`\delta(\varepsilon)` (the larger of the two directions' hockey-stick divergences)
  is an upper bound on the true one at every grid point. DP-SGD is then
  :math:`(\varepsilon_j, \delta_j)`-DP for every returned pair, and by Dong, Roth & Su (2022,
  Prop. 2.12) its trade-off curve lies above
  :math:`\max_j \max(0, 1 - \delta_j - e^{\varepsilon_j}x, e^{-\varepsilon_j}(1 - \delta_j
  - x))`.

  >>> eps, delta = dpsgd_privacy_profile(1.0, 0.1, 100, pld_discretization=1e-3)
  >>> float(eps[0]), round(float(delta[0]), 4), bool(delta[-1] < 1e-12)
  (0.0, 0.4388, True)

  Args:
    noise_multiplier: :math:`\sigma > 0`.
    sampling_rate: :math:`q \in [0, 1]`.
    num_steps: :math:`T \ge 0`.
    adjacency: ``"add_or_remove_one"`` or ``"replace_one"``.
    pld_discretization: value discretisation interval of the PLD accountant, in (0, 1].

  Returns:
    ``(epsilons, deltas)``: the grid :math:`\varepsilon_e = e\,\Delta` from 0 to the largest
    finite loss, and :math:`\delta(\varepsilon_e)`, non-increasing (float64 arrays). With no
    step or no sampling: ``([0.], [0.])``.
  """
  sigma, q, steps = _check_dpsgd(noise_multiplier, sampling_rate, num_steps)
  _validate.check_choice("adjacency", adjacency, ADJACENCIES)
  _check_accountant("pld", None, pld_discretization)
  if sigma == 0.0:
    raise ValueError("noise_multiplier=0.0 is not in (0, inf): no noise, no privacy profile")
  if _is_trivial(q, steps):
    return np.zeros(1), np.zeros(1)
  pld = _composed_pld(sigma, q, steps, adjacency, float(pld_discretization))
  pmfs = [p.to_dense_pmf() for p in (pld._pmf_remove, pld._pmf_add)]  # noqa: SLF001
  top = max(int(p._lower_loss) + len(p._probs) for p in pmfs)  # noqa: SLF001
  size = max(top, 1)
  deltas = np.maximum(*(_pmf_profile(p, size) for p in pmfs))
  return np.arange(size) * float(pmfs[0]._discretization), np.minimum(deltas, 1.0)  # noqa: SLF001


FRACTIONAL_METHODS = ("quadrature", "dp_accounting")
_SGM_GRID_STEP = 1.0 / 32.0
_SGM_MARGIN = 40.0


def _log_excess_power(t: np.ndarray, q: float, alpha: float) -> np.ndarray:
  r""":math:`\log\big((1+u)^\alpha - 1 - \alpha u\big)` with :math:`u = q(e^t - 1) > -1` and
  :math:`\alpha > 1` (the argument is >= 0 by convexity), without cancellation or overflow: the
  binomial series :math:`\sum_{k \ge 2}\binom{\alpha}{k}u^k` (24 terms) for :math:`|u| < 0.1`;
  where the power is large, :math:`(1+u)^\alpha(1 - (1 + \alpha u)(1+u)^{-\alpha})` with
  :math:`\log u = \log q + t + \log(1 - e^{-t})` on the log scale; the closed form between."""
  t = np.asarray(t, np.float64)
  with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
    u = q * np.expm1(np.minimum(t, 700.0))
    small = np.abs(u) < 0.1
    us = np.where(small, u, 0.0)
    term = 0.5 * alpha * (alpha - 1.0) * us * us
    total = term.copy()
    for k in range(3, 27):
      term = term * (alpha - k + 1.0) / k * us
      total = total + term
    log_series = np.log(total)
    positive = t > 0.0
    tp = np.where(positive, t, 1.0)
    log_u = math.log(q) + tp + np.log1p(-np.exp(-tp))
    log1p_u = np.where(positive, np.logaddexp(0.0, log_u), np.log1p(np.where(small, 0.0, u)))
    power = alpha * log1p_u
    big = np.logical_and(positive, power > 1.0)
    log1p_alpha_u = np.logaddexp(0.0, math.log(alpha) + log_u)
    log_big = power + np.log(-np.expm1(np.where(big, log1p_alpha_u - power, -1.0)))
    log_mid = np.log(np.where(big | small, 1.0, np.expm1(power) - alpha * u))
  return np.where(small, log_series, np.where(big, log_big, log_mid))


@functools.lru_cache(maxsize=65536)
def _sgm_log_moment(sigma: float, q: float, alpha: float) -> float:
  r""":math:`\log A_\alpha` of the sampled Gaussian mechanism by quadrature, for any real order.

  With :math:`u(x) = q\,(e^{(2x-1)/(2\sigma^2)} - 1)`, the likelihood ratio is
  :math:`\mu(x)/\mu_0(x) = 1 + u`, whose mean under :math:`\mu_0` is 1, so

  .. math:: A_\alpha - 1 = \int N(x; 0, \sigma^2)\,\big((1+u)^\alpha - 1 - \alpha u\big)\,dx,

  an integral of a non-negative function (:func:`_log_excess_power`); :math:`\log A_\alpha` is
  its ``log1p``, which keeps full relative accuracy when the RDP is tiny (small q, orders near 1),
  where forming :math:`A_\alpha` itself would leave 1e-16 absolute error on a value of 1e-7.
  The log-integrand's maxima lie in :math:`[0, \alpha]` (its derivative is
  :math:`(\alpha\,w(x) - x)/\sigma^2` with :math:`w \in [0, 1]`), so the trapezoidal rule in log
  space on :math:`[-40\sigma, \alpha + 40\sigma]` with spacing :math:`\sigma/32` (spectrally
  accurate for this smooth, Gaussian-tailed integrand) covers everything above 800 nats below
  the peak. Checked against mpmath to 1e-12 and against scipy's ``quad`` in the tests.
  """
  h = sigma * _SGM_GRID_STEP
  lo, hi = -_SGM_MARGIN * sigma, alpha + _SGM_MARGIN * sigma
  x = lo + h * np.arange(int(math.ceil((hi - lo) / h)) + 1)
  log_values = (-0.5 * math.log(2.0 * math.pi * sigma * sigma) - x * x / (2.0 * sigma * sigma)
                + _log_excess_power((2.0 * x - 1.0) / (2.0 * sigma * sigma), q, alpha))
  log_values[0] -= math.log(2.0)
  log_values[-1] -= math.log(2.0)
  log_excess = float(_logsumexp(log_values)) + math.log(h)
  return math.log1p(math.exp(log_excess)) if log_excess < 700.0 else log_excess


def dpsgd_rdp(noise_multiplier, sampling_rate, num_steps, orders, *,
              fractional_orders: str = "quadrature") -> np.ndarray:
  r"""RDP curve of DP-SGD: :math:`T` times the RDP of the sampled Gaussian mechanism.

  For :math:`\mu_0 = N(0, \sigma^2)`, :math:`\mu_1 = N(1, \sigma^2)` and
  :math:`\mu = (1 - q)\mu_0 + q\mu_1`, the sampled Gaussian mechanism is
  :math:`(\alpha, \varepsilon_\alpha)`-RDP with (Mironov, Talwar & Zhang 2019, Sec. 3: the
  other direction, :math:`D_\alpha(\mu_0\|\mu)`, is never larger)

  .. math::
     \varepsilon_\alpha = \frac{1}{\alpha - 1}\log A_\alpha, \qquad
     A_\alpha = \mathbb{E}_{z \sim \mu_0}\Big[\Big(\frac{\mu(z)}{\mu_0(z)}\Big)^\alpha\Big]
       = \sum_{k=0}^{\alpha}\binom{\alpha}{k}(1 - q)^{\alpha - k} q^k
         e^{(k^2 - k)/(2\sigma^2)}\ \ (\text{integer } \alpha),

  and :math:`T` steps compose to :math:`T\varepsilon_\alpha` (Mironov 2017, Prop. 1). For
  :math:`q = 1` this is :math:`T\alpha/(2\sigma^2)` at every order.

  * Integer orders: ``dp_accounting.rdp.RdpAccountant``'s binomial sum above, exact to
    rounding (the reference the tests hold the quadrature to).
  * Fractional orders (``fractional_orders="quadrature"``, the default): :math:`A_\alpha` by
    numerical integration (:func:`_sgm_log_moment`), exact to about 1e-12 relative.
    ``dp_accounting`` instead sums the series of Sec. 3.3 of Mironov et al. with the *absolute
    values* of the generalised binomial coefficients: a valid but conservative bound, 3.1x too
    high at :math:`q = 0.0683`, :math:`\sigma = 6.43`, :math:`\alpha = 1.1` (1.92e-4 for the
    exact 6.27e-5) and ``+inf`` where it does not converge in 1000 terms (fractional orders
    near 1 with a large q, e.g. :math:`q = 0.49`, :math:`\sigma = 10.04`; exact 0.0131 per
    step). ``fractional_orders="dp_accounting"`` reproduces those values, and with them
    :func:`dpsgd_epsilon` (whose accountant keeps dp-accounting's orders and series).

  Limit cases: zero for ``num_steps == 0`` or ``sampling_rate == 0``; otherwise ``+inf`` for
  ``noise_multiplier == 0``.

  Args:
    noise_multiplier: :math:`\sigma \ge 0`.
    sampling_rate: :math:`q \in [0, 1]`.
    num_steps: :math:`T \ge 0`.
    orders: finite Renyi orders :math:`\alpha > 1`, scalar or 1-D (e.g.
      ``np.linspace(1.01, 63, 500)``).
    fractional_orders: "quadrature" (exact) or "dp_accounting" (its conservative series).

  Returns:
    float64 ``np.ndarray`` of RDP values :math:`\ge 0` with the shape of ``orders``, ready for
    :mod:`dpaudit.estimators.rdp` and :mod:`dpaudit.estimators.reconstruction`.
  """
  sigma, q, steps = _check_dpsgd(noise_multiplier, sampling_rate, num_steps)
  _validate.check_choice("fractional_orders", fractional_orders, FRACTIONAL_METHODS)
  ords = _as_orders(orders)
  if _is_trivial(q, steps):
    rdp = np.zeros_like(ords)
  else:
    rdp = _composed(sigma, q, steps, "rdp", ords, DEFAULT_PLD_DISCRETIZATION).rdp
    rdp = np.asarray(rdp, np.float64)
    fractional = ords != np.round(ords)
    if fractional_orders == "quadrature" and sigma > 0.0 and q < 1.0 and np.any(fractional):
      log_a = np.array([_sgm_log_moment(sigma, q, float(a)) for a in ords[fractional]])
      rdp[fractional] = steps * np.maximum(log_a, 0.0) / (ords[fractional] - 1.0)
  return rdp.reshape(np.shape(orders))


def calibrate_noise_multiplier(target_epsilon, sampling_rate, num_steps, delta, *,
                               accountant: str = "rdp", orders=None,
                               pld_discretization: float = DEFAULT_PLD_DISCRETIZATION,
                               tol: float = 1e-6) -> float:
  r"""Smallest noise multiplier for which DP-SGD is :math:`(\varepsilon, \delta)`-DP.

  Finds :math:`\sigma^\ast = \min\{\sigma : \varepsilon(\sigma) \le
  \varepsilon_{\mathrm{target}}\}` for the accountant of :func:`dpsgd_epsilon`
  (:math:`\varepsilon(\sigma)` decreases with :math:`\sigma`): a doubling/halving search finds
  a bracket :math:`[\sigma_{lo}, \sigma_{hi}]` with :math:`\varepsilon(\sigma_{lo}) >`
  target :math:`\ge \varepsilon(\sigma_{hi})`, then ``dp_accounting.calibrate_dp_mechanism``
  (Brent's method) returns :math:`\sigma` with :math:`\varepsilon(\sigma) \le` target and
  :math:`|\sigma - \sigma^\ast| \le` ``tol``.

  Limit cases: ``target_epsilon = inf``, ``num_steps == 0`` or ``sampling_rate == 0`` need no
  noise and return 0.

  Args:
    target_epsilon: :math:`\varepsilon_{\mathrm{target}} \in (0, \infty]`.
    sampling_rate: :math:`q \in [0, 1]`.
    num_steps: :math:`T \ge 0`.
    delta: :math:`\delta \in (0, 1)`.
    accountant: ``"rdp"`` or ``"pld"``.
    orders: Renyi orders for the RDP accountant (see :func:`dpsgd_epsilon`).
    pld_discretization: value discretisation interval of the PLD accountant, in (0, 1].
    tol: absolute tolerance on the noise multiplier, > 0.

  Returns:
    The noise multiplier as a Python float.

  Raises:
    ValueError: for invalid arguments, or when no noise multiplier up to :math:`2^{30}`
      reaches the target.
  """
  _check_scalar("target_epsilon", target_epsilon)
  _validate.check_range("target_epsilon", target_epsilon, 0.0, None, low_open=True)
  _, q, steps = _check_dpsgd(0.0, sampling_rate, num_steps)  # the noise is the unknown
  _check_scalar("delta", delta)
  _validate.check_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
  _check_accountant(accountant, orders, pld_discretization)
  _check_scalar("tol", tol)
  _validate.check_range("tol", tol, 0.0, math.inf, low_open=True, high_open=True)
  ords = _as_orders(orders) if accountant == "rdp" else None
  target, delta, tol = float(target_epsilon), float(delta), float(tol)
  if math.isinf(target) or _is_trivial(q, steps):
    return 0.0

  def make_accountant():
    return _make_accountant(accountant, ords, float(pld_discretization))

  def make_event(sigma):
    return _event(float(sigma), q, steps)

  def epsilon(sigma):
    return make_accountant().compose(make_event(sigma)).get_epsilon(delta)

  # Bracket: eps(lo) > target >= eps(hi).
  lo, hi = 0.0, 1.0
  while epsilon(hi) > target:
    lo, hi = hi, 2.0 * hi
    if hi > _MAX_NOISE:
      raise ValueError(f"target_epsilon={target_epsilon} is not reached by any "
                       f"noise_multiplier <= {_MAX_NOISE:g} (sampling_rate={sampling_rate}, "
                       f"num_steps={num_steps}, delta={delta})")
  if lo == 0.0:  # eps(1) <= target: halve until eps exceeds the target or hi is within tol of 0
    while hi > tol:
      if epsilon(0.5 * hi) > target:
        lo = 0.5 * hi
        break
      hi *= 0.5
    else:
      return hi
  return float(dp_accounting.calibrate_dp_mechanism(
      make_accountant, make_event, target, delta,
      bracket_interval=dp_accounting.ExplicitBracketInterval(lo, hi), tol=tol))


# Quadrature of dpsgd_group_rdp: grid spacing and half-width of the windows around the modes of
# the integrand, in units of the noise multiplier, and how far (in nats) below the largest mode
# a mode or a window edge may lie before it is dropped / the window stops growing.
_GROUP_GRID_STEP = 1.0 / 32.0
_GROUP_WINDOW = 24.0
_GROUP_DROP = 300.0
_GROUP_FIXED_POINT_ITERATIONS = 200


def _logsumexp(values: np.ndarray, axis: int = -1) -> np.ndarray:
  top = np.max(values, axis=axis, keepdims=True)
  top = np.where(np.isfinite(top), top, 0.0)
  out = np.log(np.sum(np.exp(values - top), axis=axis)) + np.squeeze(top, axis=axis)
  return out


class _GroupIntegrand:
  r"""Log of :math:`N(x; 0, \sigma^2)\,(P(x)/Q(x))^\alpha` for the k-copy sampled Gaussian."""

  def __init__(self, sigma: float, q: float, k: int, alpha: float):
    j = np.arange(k + 1, dtype=np.float64)
    if q >= 1.0:
      j = j[-1:]
      log_b = np.zeros(1)
    else:
      log_b = np.array([math.lgamma(k + 1) - math.lgamma(i + 1) - math.lgamma(k - i + 1)
                        for i in range(k + 1)])
      log_b = log_b + j * math.log(q) + (k - j) * math.log1p(-q)
    self.j, self.log_b, self.sigma2, self.alpha = j, log_b, sigma * sigma, alpha
    self.log_norm = -0.5 * math.log(2.0 * math.pi * self.sigma2)

  def _terms(self, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)[..., None]
    return self.log_b + (2.0 * self.j * x - self.j * self.j) / (2.0 * self.sigma2)

  def log_value(self, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return (self.log_norm - x * x / (2.0 * self.sigma2)
            + self.alpha * _logsumexp(self._terms(x)))

  def tilted_mean(self, x: np.ndarray) -> np.ndarray:
    """E[J] under weights b_j exp((2 j x - j^2) / (2 sigma^2)); the modes solve x = alpha E[J]."""
    t = self._terms(x)
    w = np.exp(t - np.max(t, axis=-1, keepdims=True))
    return np.sum(w * self.j, axis=-1) / np.sum(w, axis=-1)


def _group_log_moment(sigma: float, q: float, k: int, alpha: float) -> float:
  r"""``log A_alpha`` of :func:`dpsgd_group_rdp` by quadrature around every mode."""
  f = _GroupIntegrand(sigma, q, k, alpha)
  # The log-integrand has derivative (alpha m(x) - x) / sigma^2 with m(x) = tilted_mean(x) in
  # [0, k] and increasing, so its local maxima are fixed points of x -> alpha m(x) in
  # [0, alpha k]. The iteration is monotone; started from alpha j (j = 0..k) and from the
  # crossing points of consecutive terms, it reaches the modes.
  starts = [alpha * f.j]
  if f.j.size > 1:
    d_log_b = f.log_b[:-1] - f.log_b[1:]
    starts.append(f.sigma2 * d_log_b + (2.0 * f.j[:-1] + 1.0) / 2.0)
  x = np.clip(np.concatenate(starts), 0.0, alpha * f.j[-1])
  for _ in range(_GROUP_FIXED_POINT_ITERATIONS):
    x_new = alpha * f.tilted_mean(x)
    done = np.max(np.abs(x_new - x)) <= 1e-9 * (1.0 + np.max(np.abs(x)))
    x = x_new
    if done:
      break
  modes = np.unique(np.round(x / (sigma * 1e-3)) * (sigma * 1e-3))
  log_modes = f.log_value(modes)
  top = float(np.max(log_modes))
  modes = modes[log_modes >= top - _GROUP_DROP]
  # A window of +-_GROUP_WINDOW sigma around each mode, widened until both edges lie
  # _GROUP_DROP nats below the top; trapezoidal rule (spectrally accurate for these smooth,
  # Gaussian-tailed integrands) on a grid of spacing sigma * _GROUP_GRID_STEP.
  h = sigma * _GROUP_GRID_STEP
  pieces = []
  for mode in modes:
    lo = hi = _GROUP_WINDOW * sigma
    for _ in range(60):
      edges = f.log_value(np.array([mode - lo, mode + hi]))
      if edges[0] > top - _GROUP_DROP:
        lo *= 2.0
      if edges[1] > top - _GROUP_DROP:
        hi *= 2.0
      if np.all(edges <= top - _GROUP_DROP):
        break
    pieces.append((mode - lo, mode + hi))
  pieces.sort()
  merged = [list(pieces[0])]
  for lo, hi in pieces[1:]:
    if lo <= merged[-1][1]:
      merged[-1][1] = max(merged[-1][1], hi)
    else:
      merged.append([lo, hi])
  logs = []
  for lo, hi in merged:
    n = int(math.ceil((hi - lo) / h))
    grid = lo + h * np.arange(n + 1)
    values = []
    for chunk in np.array_split(grid, max(1, grid.size * f.j.size // 2_000_000 + 1)):
      values.append(f.log_value(chunk))
    values = np.concatenate(values)
    values[0] -= math.log(2.0)
    values[-1] -= math.log(2.0)
    logs.append(_logsumexp(values) + math.log(h))
  return float(_logsumexp(np.asarray(logs)))


def dpsgd_group_rdp(noise_multiplier, sampling_rate, num_steps, orders, group_size
                    ) -> np.ndarray:
  r"""RDP of DP-SGD towards a record repeated ``group_size`` times (D with vs without the copies).

  A canary inserted :math:`k` times (``group_size``) is :math:`k` separate examples, each
  Poisson-sampled with rate :math:`q` and each with clipped gradient of norm at most
  :math:`C`, so at each step the canaries contribute :math:`J \sim \mathrm{Binomial}(k, q)`
  gradients. As for the sampled Gaussian mechanism (Mironov, Talwar & Zhang, "Renyi
  Differential Privacy of the Sampled Gaussian Mechanism", 2019, Sec. 3) the worst case of
  one step reduces to one dimension (all copies' clipped gradients aligned, norm :math:`C`),

  .. math::
     P = \sum_{j=0}^{k} \binom{k}{j} q^j (1-q)^{k-j}\, N(j, \sigma^2), \qquad
     Q = N(0, \sigma^2),

  and the step is :math:`(\alpha, \varepsilon_\alpha)`-RDP with

  .. math::
     \varepsilon_\alpha = D_\alpha(P \,\|\, Q) = \frac{\log A_\alpha}{\alpha - 1}, \qquad
     A_\alpha = \int N(x; 0, \sigma^2)
       \Big(\sum_{j=0}^{k} b_j\, e^{(2jx - j^2)/(2\sigma^2)}\Big)^{\alpha} dx,

  :math:`b_j = \binom{k}{j} q^j (1-q)^{k-j}`; ``num_steps`` steps compose to
  :math:`T\varepsilon_\alpha` (Mironov 2017, Prop. 1). This is the direction that Eqs. (1)-(2)
  of Stock et al., "Defending against Reconstruction Attacks with Renyi Differential Privacy"
  (2022), use: :math:`\mathcal M(D')` with the canaries against :math:`\mathcal M(D)` without
  them (the canary upsampled 280 times of their Sec. 4.3 is ``group_size=280``); pass the
  result as the RDP curve of :func:`dpaudit.estimators.reconstruction_leakage_bound`.

  For an integer order, expanding the power gives the closed form

  .. math::
     A_\alpha = \mathbb{E}\Big[\exp\Big(\sum_{1 \le i < i' \le \alpha}
       \frac{J_i J_{i'}}{\sigma^2}\Big)\Big], \qquad J_1, \dots, J_\alpha
       \overset{\text{iid}}{\sim} \mathrm{Binomial}(k, q),

  used as the independent reference in the tests. With :math:`k = 1` it is the binomial sum of
  :func:`dpsgd_rdp`; with :math:`q = 1` it is the Gaussian mechanism with sensitivity
  :math:`k`, :math:`T\alpha k^2 / (2\sigma^2)`.

  .. warning::
     Only :math:`D_\alpha(P\|Q)` is computed. The other direction :math:`D_\alpha(Q\|P)`
     (the model without the canaries against the one with them), which add/remove-neighbouring
     DP-SGD accounting must also bound, is *not* computed, as the reconstruction bound does
     not need it. Do not use this function as the add/remove RDP of DP-SGD for group privacy
     (:math:`(\varepsilon, \delta)` conversion of this curve alone bounds only one direction).

  Numerics (host code, float64 NumPy): the log of the integrand has derivative
  :math:`(\alpha\,m(x) - x)/\sigma^2`, with :math:`m(x) \in [0, k]` the mean of :math:`J`
  under weights :math:`b_j e^{(2jx - j^2)/(2\sigma^2)}`, so its modes are the fixed points of
  :math:`x \mapsto \alpha m(x)`, found by iterating from :math:`\alpha j` and from the
  crossing points of consecutive terms. Modes within 300 nats of the largest get a window of
  :math:`\pm 24\sigma` (widened until the integrand has fallen 300 nats below its top), and
  the trapezoidal rule with spacing :math:`\sigma/32` in log space (log-sum-exp) integrates
  the union of the windows. Fractional and integer orders are treated alike; against the
  closed forms the relative error is about 1e-10. The cost grows with :math:`k` times the
  number of separated modes, so thousands of orders with :math:`k` in the hundreds take
  seconds.

  Limit cases: zero for ``num_steps == 0`` or ``sampling_rate == 0``; otherwise ``+inf`` for
  ``noise_multiplier == 0``.

  Args:
    noise_multiplier: :math:`\sigma \ge 0` (noise standard deviation / L2 clipping norm).
    sampling_rate: Poisson sampling probability :math:`q \in [0, 1]` of each copy.
    num_steps: number of steps :math:`T \ge 0`.
    orders: finite Renyi orders :math:`\alpha > 1`, scalar or 1-D.
    group_size: number of copies :math:`k \ge 1` of the record (a whole number).

  Returns:
    float64 ``np.ndarray`` of :math:`T\,D_\alpha(P\|Q) \ge 0` with the shape of ``orders``.
  """
  sigma, q, steps = _check_dpsgd(noise_multiplier, sampling_rate, num_steps)
  ords = _as_orders(orders)
  _check_scalar("group_size", group_size)
  _validate.check_integer_valued("group_size", group_size)
  _validate.check_range("group_size", group_size, 1.0, math.inf, high_open=True)
  if isinstance(group_size, bool) or np.asarray(group_size).dtype.kind not in "iuf":
    raise ValueError(f"group_size={group_size!r} must be a whole number >= 1")
  k = int(group_size)
  if _is_trivial(q, steps):
    rdp = np.zeros_like(ords)
  elif sigma == 0.0:
    rdp = np.full_like(ords, np.inf)
  else:
    log_a = np.array([_group_log_moment(sigma, q, k, float(a)) for a in ords])
    rdp = steps * np.maximum(log_a, 0.0) / (ords - 1.0)
  return rdp.reshape(np.shape(orders))


class _DropNonConvergedOrders(logging.Filter):
  """dp_accounting warns once per fractional Renyi order whose series does not converge
  (small noise, large sampling rate; see :func:`dpaudit.accounting.dpsgd_rdp`) and then
  leaves that order out, which can only make the RDP epsilon larger: the reported bound stays
  valid. A calibration's bracketing visits many such noise levels, so these lines would
  swamp the output."""

  def filter(self, record: logging.LogRecord) -> bool:
    return "failed to converge" not in record.getMessage()


@contextlib.contextmanager
def quiet_accountant():
  """Drops dp_accounting's "failed to converge" warnings while the block runs."""
  absl_logger = logging.getLogger("absl")
  quiet = _DropNonConvergedOrders()
  absl_logger.addFilter(quiet)
  try:
    yield
  finally:
    absl_logger.removeFilter(quiet)
