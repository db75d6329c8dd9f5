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


def dpsgd_rdp(noise_multiplier, sampling_rate, num_steps, orders) -> np.ndarray:
  r"""RDP curve of DP-SGD: :math:`T` times the RDP of the sampled Gaussian mechanism.

  For :math:`\mu_0 = N(0, \sigma^2)`, :math:`\mu_1 = N(1, \sigma^2)` and
  :math:`\mu = (1 - q)\mu_0 + q\mu_1`, the sampled Gaussian mechanism is
  :math:`(\alpha, \varepsilon_\alpha)`-RDP with (Mironov, Talwar & Zhang 2019, Sec. 3)

  .. math::
     \varepsilon_\alpha = \frac{1}{\alpha - 1}\log A_\alpha, \qquad
     A_\alpha = \mathbb{E}_{z \sim \mu_0}\Big[\Big(\frac{\mu(z)}{\mu_0(z)}\Big)^\alpha\Big]
       = \sum_{k=0}^{\alpha}\binom{\alpha}{k}(1 - q)^{\alpha - k} q^k
         e^{(k^2 - k)/(2\sigma^2)}\ \ (\text{integer } \alpha),

  and :math:`T` steps compose to :math:`T\varepsilon_\alpha` (Mironov 2017, Prop. 1). For
  :math:`q = 1` this is :math:`T\alpha/(2\sigma^2)`. The values are those of
  ``dp_accounting.rdp.RdpAccountant`` (its public ``rdp`` property) at the given orders, so
  that converting them reproduces :func:`dpsgd_epsilon` exactly:

  * integer orders: the binomial sum above, exact to rounding;
  * fractional orders: the series of Sec. 3.3 of Mironov et al. (2019), which
    ``dp_accounting`` (since 0.4.4) sums with the *absolute values* of the generalised binomial
    coefficients :math:`\binom{\alpha}{k}`. That is a valid but conservative upper bound on the
    exact RDP: against the integral for :math:`A_\alpha` it is about 8% high at
    :math:`\alpha = 1.05` and 0.1% at :math:`\alpha = 2.5` for :math:`q = 0.01`,
    :math:`\sigma = 1`, and 0.5% high or less for :math:`q = 2.8\times 10^{-4}`,
    :math:`\sigma = 0.8` (the setting of Stock et al., Sec. 4.3);
  * where that series does not reach its stopping rule within 1000 terms (fractional orders
    near 1 with a large :math:`q` and small :math:`\sigma`, e.g. :math:`q = 0.1`,
    :math:`\sigma = 0.8`, :math:`\alpha < 1.7`) the entry is ``+inf``, a vacuous bound, and
    ``dp_accounting`` logs a warning.

  Since Renyi divergences are non-decreasing in the order, the value at
  :math:`\lceil\alpha\rceil` also bounds order :math:`\alpha`; include integer orders when
  those caveats matter.

  Limit cases: zero for ``num_steps == 0`` or ``sampling_rate == 0``; otherwise ``+inf`` for
  ``noise_multiplier == 0``.

  Args:
    noise_multiplier: :math:`\sigma \ge 0`.
    sampling_rate: :math:`q \in [0, 1]`.
    num_steps: :math:`T \ge 0`.
    orders: finite Renyi orders :math:`\alpha > 1`, scalar or 1-D (e.g.
      ``np.linspace(1.01, 63, 500)``).

  Returns:
    float64 ``np.ndarray`` of RDP values :math:`\ge 0` with the shape of ``orders``, ready for
    :mod:`dpaudit.estimators.rdp` and :mod:`dpaudit.estimators.reconstruction`.
  """
  sigma, q, steps = _check_dpsgd(noise_multiplier, sampling_rate, num_steps)
  ords = _as_orders(orders)
  if _is_trivial(q, steps):
    rdp = np.zeros_like(ords)
  else:
    rdp = _composed(sigma, q, steps, "rdp", ords, DEFAULT_PLD_DISCRETIZATION).rdp
    rdp = np.asarray(rdp, np.float64)
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
