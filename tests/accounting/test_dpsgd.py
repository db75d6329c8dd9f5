"""Tests for dpaudit.accounting.dpsgd: dp_accounting called directly, closed forms for q = 1,
the sampled-Gaussian RDP of Mironov et al. (2019) evaluated here with mpmath (binomial sum and
quadrature), the analytic Gaussian mechanism (Balle & Wang 2018) and calibration round trips."""

from __future__ import annotations

import math

import dp_accounting
import mpmath
import numpy as np
import pytest
from scipy import integrate, optimize, stats

from dpaudit import accounting
from dpaudit.accounting import dpsgd
from dpaudit.estimators import rdp as rdp_estimators

PLD_FAST = 1e-3  # coarser PLD grid for the tests; still a pessimistic (upper) bound

SETTINGS = [  # (noise_multiplier, sampling_rate, num_steps, delta)
    (1.1, 0.01, 1000, 1e-5),
    (0.8, 0.004, 5000, 1e-6),
    (2.0, 0.1, 200, 1e-5),
    (5.0, 1.0, 10, 1e-5),
]


def _direct_event(sigma, q, steps):
  return dp_accounting.SelfComposedDpEvent(
      dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)


# ----------------------------------------------------------------------------- references


def _log_a_binomial(q, sigma, alpha):
  """log A_alpha for integer alpha: Mironov et al. (2019), Sec. 3.1, in mpmath."""
  q, sigma = mpmath.mpf(q), mpmath.mpf(sigma)
  terms = [mpmath.binomial(alpha, k) * (1 - q) ** (alpha - k) * q ** k
           * mpmath.exp((k * k - k) / (2 * sigma ** 2)) for k in range(alpha + 1)]
  return mpmath.log(mpmath.fsum(terms))


def _log_a_integral(q, sigma, alpha):
  """log E_{z ~ N(0, s^2)}[((1 - q) + q e^{(2z - 1)/(2 s^2)})^alpha] by mpmath quadrature."""
  q, sigma, alpha = mpmath.mpf(q), mpmath.mpf(sigma), mpmath.mpf(alpha)

  def integrand(z):
    return mpmath.npdf(z, 0, sigma) * ((1 - q) + q * mpmath.exp((2 * z - 1) / (2 * sigma ** 2))
                                       ) ** alpha

  z0 = sigma ** 2 * mpmath.log(1 / q - 1) + mpmath.mpf(1) / 2
  points = sorted({-mpmath.inf, -10 * sigma, mpmath.mpf(0), mpmath.mpf(1) / 2, z0, alpha,
                   alpha + 10 * sigma, mpmath.inf})
  return mpmath.log(mpmath.quad(integrand, points))


def _gaussian_delta(mu, eps):
  """Exact delta(eps) of the Gaussian mechanism with mu = sensitivity/sigma (Balle & Wang 2018,
  Thm. 8)."""
  return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


# ----------------------------------------------------------------------------- dpsgd_event


def test_event_structure():
  assert dpsgd.dpsgd_event(1.0, 0.01, 100) == _direct_event(1.0, 0.01, 100)
  assert accounting.dpsgd_event(2.0, 1.0, 7) == dp_accounting.SelfComposedDpEvent(
      dp_accounting.GaussianDpEvent(2.0), 7)
  assert dpsgd.dpsgd_event(1.0, 0.5, 0) == dp_accounting.NoOpDpEvent()
  # numpy scalars are accepted and stored as Python numbers
  ev = dpsgd.dpsgd_event(np.float32(1.5), np.float64(0.25), np.int64(3))
  assert ev == _direct_event(1.5, 0.25, 3)
  assert type(ev.count) is int


# ----------------------------------------------------------------------------- epsilon


@pytest.mark.parametrize("sigma,q,steps,delta", SETTINGS)
def test_rdp_epsilon_matches_dp_accounting(sigma, q, steps, delta):
  acc = dp_accounting.rdp.RdpAccountant()
  acc.compose(_direct_event(sigma, q, steps))
  assert dpsgd.dpsgd_epsilon(sigma, q, steps, delta) == pytest.approx(
      acc.get_epsilon(delta), rel=1e-12)
  orders = [1.5, 2.0, 4.0, 8.0, 16.0, 32.0]
  acc = dp_accounting.rdp.RdpAccountant(orders=orders)
  acc.compose(_direct_event(sigma, q, steps))
  assert dpsgd.dpsgd_epsilon(sigma, q, steps, delta, orders=orders) == pytest.approx(
      acc.get_epsilon(delta), rel=1e-12)


@pytest.mark.parametrize("sigma,q,steps,delta", SETTINGS[:3])
def test_pld_epsilon_matches_dp_accounting_and_is_below_rdp(sigma, q, steps, delta):
  acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_FAST)
  acc.compose(_direct_event(sigma, q, steps))
  eps_pld = dpsgd.dpsgd_epsilon(sigma, q, steps, delta, accountant="pld",
                                pld_discretization=PLD_FAST)
  assert eps_pld == pytest.approx(acc.get_epsilon(delta), rel=1e-12)
  eps_rdp = dpsgd.dpsgd_epsilon(sigma, q, steps, delta)
  # PLD is the tighter accountant in these typical settings (RDP's conversion is lossy)
  assert eps_pld <= eps_rdp + 1e-3
  assert eps_pld >= 0.5 * eps_rdp  # and not absurdly smaller


def test_full_batch_pld_matches_analytic_gaussian():
  """q = 1: T Gaussian steps with noise sigma are one Gaussian mechanism with mu = sqrt(T)/sigma;
  its exact epsilon solves delta(eps) = delta (Balle & Wang 2018). PLD is an upper bound within
  its discretisation."""
  sigma, steps, delta = 5.0, 10, 1e-5
  mu = math.sqrt(steps) / sigma
  eps_exact = optimize.brentq(lambda e: _gaussian_delta(mu, e) - delta, 1e-6, 50.0, xtol=1e-12)
  eps_pld = dpsgd.dpsgd_epsilon(sigma, 1.0, steps, delta, accountant="pld")
  assert eps_exact - 1e-9 <= eps_pld <= eps_exact + 1e-3
  assert _gaussian_delta(mu, eps_pld) <= delta * (1 + 1e-9)


def test_full_batch_rdp_closed_form():
  """q = 1: RDP is T alpha / (2 sigma^2), and epsilon is its Balle et al. (2020) conversion."""
  sigma, steps, delta = 3.0, 20, 1e-5
  orders = np.array([1.5, 2.0, 3.5, 8.0, 20.0, 64.0])
  expected = steps * orders / (2 * sigma ** 2)
  np.testing.assert_allclose(dpsgd.dpsgd_rdp(sigma, 1.0, steps, orders), expected, rtol=1e-14)
  eps = np.min(expected + np.log1p(-1 / orders) - (np.log(delta) + np.log(orders)) / (orders - 1))
  assert dpsgd.dpsgd_epsilon(sigma, 1.0, steps, delta, orders=orders) == pytest.approx(
      eps, rel=1e-12)


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_limit_cases(accountant):
  kw = dict(accountant=accountant, pld_discretization=PLD_FAST)
  assert dpsgd.dpsgd_epsilon(0.0, 0.01, 100, 1e-5, **kw) == math.inf
  assert dpsgd.dpsgd_epsilon(1.0, 0.01, 0, 1e-5, **kw) == 0.0
  assert dpsgd.dpsgd_epsilon(0.0, 0.0, 100, 1e-5, **kw) == 0.0
  assert dpsgd.dpsgd_epsilon(1.0, 0.01, 100, 0.0, **kw) == math.inf
  assert dpsgd.dpsgd_delta(0.0, 0.01, 100, 1.0, **kw) == 1.0
  assert dpsgd.dpsgd_delta(1.0, 0.01, 0, 1.0, **kw) == 0.0
  assert dpsgd.calibrate_noise_multiplier(math.inf, 0.01, 100, 1e-5, **kw) == 0.0
  assert dpsgd.calibrate_noise_multiplier(1.0, 0.01, 0, 1e-5, **kw) == 0.0
  assert dpsgd.calibrate_noise_multiplier(1.0, 0.0, 10, 1e-5, **kw) == 0.0


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_delta_inverts_epsilon(accountant):
  sigma, q, steps, delta = 1.0, 0.02, 300, 1e-5
  kw = dict(accountant=accountant, pld_discretization=PLD_FAST)
  eps = dpsgd.dpsgd_epsilon(sigma, q, steps, delta, **kw)
  back = dpsgd.dpsgd_delta(sigma, q, steps, eps, **kw)
  assert back <= delta * (1 + 1e-9)
  assert back >= 0.5 * delta  # the two directions use the same bound, up to the grid / orders
  # delta decreases in epsilon
  assert dpsgd.dpsgd_delta(sigma, q, steps, eps + 0.5, **kw) < back


def test_epsilon_is_monotone():
  q, steps, delta = 0.01, 500, 1e-5
  sigmas = [0.6, 0.8, 1.0, 1.5, 2.0, 4.0]
  eps = [dpsgd.dpsgd_epsilon(s, q, steps, delta) for s in sigmas]
  assert all(a > b for a, b in zip(eps, eps[1:]))  # more noise, less epsilon
  eps_q = [dpsgd.dpsgd_epsilon(1.0, r, steps, delta) for r in (0.001, 0.01, 0.05)]
  assert all(a < b for a, b in zip(eps_q, eps_q[1:]))  # larger sampling rate, more epsilon
  eps_t = [dpsgd.dpsgd_epsilon(1.0, q, t, delta) for t in (10, 100, 1000)]
  assert all(a < b for a, b in zip(eps_t, eps_t[1:]))  # more steps, more epsilon
  eps_pld = [dpsgd.dpsgd_epsilon(s, q, steps, delta, accountant="pld",
                                 pld_discretization=PLD_FAST) for s in sigmas[1:4]]
  assert all(a > b for a, b in zip(eps_pld, eps_pld[1:]))


# ----------------------------------------------------------------------------- RDP curve


@pytest.mark.parametrize("sigma,q", [(1.0, 0.01), (0.8, 2.81e-4), (2.0, 0.1)])
def test_rdp_integer_orders_match_binomial_expansion(sigma, q):
  steps = 7
  orders = np.array([2, 3, 5, 8, 16, 32, 63], dtype=float)
  with mpmath.workdps(40):
    expected = [steps * float(_log_a_binomial(q, sigma, int(a)) / (a - 1)) for a in orders]
  np.testing.assert_allclose(dpsgd.dpsgd_rdp(sigma, q, steps, orders), expected, rtol=1e-9)


def test_binomial_reference_matches_integral_reference():
  """The two mpmath references agree, so each checks the other's formula."""
  with mpmath.workdps(30):
    for a in (2, 5):
      assert float(_log_a_binomial(0.05, 1.3, a)) == pytest.approx(
          float(_log_a_integral(0.05, 1.3, a)), rel=1e-15)


@pytest.mark.parametrize("sigma,q,max_excess", [(1.0, 0.01, 0.1), (0.8, 2.81e-4, 0.01)])
def test_rdp_fractional_orders_bound_the_exact_integral(sigma, q, max_excess):
  """dp_accounting's fractional-order series (absolute values of the binomial coefficients) is
  an upper bound on the exact RDP, and a close one; see the dpsgd_rdp docstring."""
  orders = np.array([1.05, 1.5, 2.5, 7.3])
  with mpmath.workdps(30):
    exact = np.array([float(_log_a_integral(q, sigma, a) / (a - 1)) for a in orders])
  got = dpsgd.dpsgd_rdp(sigma, q, 1, orders, fractional_orders="dp_accounting")
  assert np.all(got >= exact * (1 - 1e-9))
  assert np.all(got <= exact * (1 + max_excess))
  # the bound tightens with the order: within 1e-5 relative at alpha = 7.3
  assert got[-1] == pytest.approx(exact[-1], rel=1e-5)


def test_rdp_shapes_composition_and_limits():
  orders = np.linspace(1.01, 63, 50)
  one = dpsgd.dpsgd_rdp(1.2, 0.02, 1, orders)
  assert one.shape == (50,) and one.dtype == np.float64
  np.testing.assert_allclose(dpsgd.dpsgd_rdp(1.2, 0.02, 250, orders), 250 * one, rtol=1e-12)
  assert np.all(np.diff(one) >= 0)  # non-decreasing in the order
  scalar = dpsgd.dpsgd_rdp(1.2, 0.02, 3, 2.0)
  assert np.ndim(scalar) == 0
  assert float(scalar) == pytest.approx(3 * dpsgd.dpsgd_rdp(1.2, 0.02, 1, [2.0])[0], rel=1e-12)
  np.testing.assert_array_equal(dpsgd.dpsgd_rdp(1.2, 0.02, 0, orders), 0.0)
  np.testing.assert_array_equal(dpsgd.dpsgd_rdp(1.2, 0.0, 10, orders), 0.0)
  assert np.all(np.isinf(dpsgd.dpsgd_rdp(0.0, 0.02, 10, orders)))


def test_rdp_series_non_convergence_gives_inf():
  """Documented dp_accounting behaviour: a fractional order whose series does not converge is
  +inf (vacuous), while integer orders stay finite; the quadrature (the default) is finite."""
  got = dpsgd.dpsgd_rdp(0.8, 0.1, 1, [1.1, 2.0, 3.0], fractional_orders="dp_accounting")
  assert math.isinf(got[0]) and np.all(np.isfinite(got[1:]))
  exact = dpsgd.dpsgd_rdp(0.8, 0.1, 1, [1.1, 2.0, 3.0])
  assert np.all(np.isfinite(exact)) and exact[0] <= exact[1]
  np.testing.assert_array_equal(exact[1:], got[1:])


FRACTIONAL_CASES = [  # sigma, q, steps, alpha
    (6.43, 0.0683, 1, 1.1),  # dp_accounting's series is 3.1x the exact value here
    (10.04, 0.49, 10, 1.1),  # ... and does not converge here
    (1.0, 0.01, 1, 1.05), (0.8, 2.81e-4, 1, 1.5), (0.3, 2.81e-4, 1, 3.7), (0.5, 0.3, 1, 20.5),
    (2.0, 0.9, 1, 1.01), (0.3, 2.81e-4, 1, 62.5),
]


@pytest.mark.parametrize("sigma,q,steps,alpha", FRACTIONAL_CASES)
def test_rdp_fractional_orders_are_the_exact_integral(sigma, q, steps, alpha):
  """The default quadrature against mpmath's quadrature (1e-12) and against scipy's ``quad`` of
  A - 1 with the linear term removed (1e-9): an independent integrator on the same integral."""
  got = float(dpsgd.dpsgd_rdp(sigma, q, steps, [alpha])[0])
  with mpmath.workdps(40):
    exact = steps * float(_log_a_integral(q, sigma, alpha) / (alpha - 1))
  assert got == pytest.approx(exact, rel=1e-12)

  # scipy's quad of A_alpha itself, scaled by its peak to stay finite. Forming A and then its log
  # leaves ~1e-16 / log(A) relative error, so this check needs log(A) well above 1e-7.
  log_a = got * (alpha - 1) / steps
  if log_a < 1e-5:
    return

  def log_integrand(z):
    log_ratio = np.logaddexp(math.log1p(-q), math.log(q) + (2 * z - 1) / (2 * sigma ** 2))
    return stats.norm.logpdf(z, scale=sigma) + alpha * log_ratio

  peak = optimize.minimize_scalar(lambda z: -log_integrand(z), bounds=(-1.0, alpha + 1.0),
                                  method="bounded").x
  top = log_integrand(peak)
  edges = sorted({-40 * sigma, peak - 10 * sigma, peak, peak + 10 * sigma, alpha + 40 * sigma,
                  0.0, 0.5})
  total = sum(integrate.quad(lambda z: math.exp(log_integrand(z) - top), lo, hi, epsabs=0,
                             epsrel=1e-13, limit=200)[0] for lo, hi in zip(edges[:-1], edges[1:]))
  assert got == pytest.approx(steps * (math.log(total) + top) / (alpha - 1), rel=1e-9)


def test_issue_examples_are_tightened():
  """q = 0.0683, sigma = 6.43, alpha = 1.1: 6.27e-5 (dp_accounting 1.92e-4); q = 0.49,
  sigma = 10.04, T = 10, alpha = 1.1: 0.0131 (dp_accounting +inf)."""
  assert dpsgd.dpsgd_rdp(6.43, 0.0683, 1, [1.1])[0] == pytest.approx(6.272e-5, rel=1e-3)
  assert dpsgd.dpsgd_rdp(6.43, 0.0683, 1, [1.1], fractional_orders="dp_accounting")[0] == (
      pytest.approx(1.92e-4, rel=1e-2))
  assert dpsgd.dpsgd_rdp(10.04, 0.49, 10, [1.1])[0] == pytest.approx(0.01312, rel=1e-3)


def test_rdp_converts_to_dpsgd_epsilon():
  """The RDP curve converts to the same epsilon through dp_accounting's compute_epsilon and
  through dpaudit.estimators.rdp (Balle et al. 2020; all orders > 1.01 and outside the
  KL shortcut, where the two conversions coincide)."""
  sigma, q, steps, delta = 1.1, 0.01, 1000, 1e-5
  orders = np.concatenate([np.linspace(1.5, 10.5, 19), np.arange(11.0, 64.0)])
  curve = dpsgd.dpsgd_rdp(sigma, q, steps, orders, fractional_orders="dp_accounting")
  eps = dpsgd.dpsgd_epsilon(sigma, q, steps, delta, orders=orders)
  assert dp_accounting.rdp.compute_epsilon(orders, curve, delta)[0] == eps
  assert float(rdp_estimators.rdp_to_epsilon(curve, orders, delta).epsilon) == pytest.approx(
      eps, rel=1e-12)
  # The exact fractional orders can only lower the curve, and with it epsilon.
  exact = dpsgd.dpsgd_rdp(sigma, q, steps, orders)
  assert np.all(exact <= curve * (1 + 1e-12))
  assert dp_accounting.rdp.compute_epsilon(orders, exact, delta)[0] <= eps


# ----------------------------------------------------------------------------- calibration


@pytest.mark.parametrize("accountant,target,q,steps", [
    ("rdp", 2.0, 0.01, 1000),
    ("rdp", 8.0, 0.004, 10000),
    ("rdp", 0.5, 1.0, 5),
    ("pld", 2.0, 0.01, 500),
])
def test_calibration_round_trip(accountant, target, q, steps):
  delta, tol = 1e-5, 1e-4
  kw = dict(accountant=accountant, pld_discretization=PLD_FAST)
  sigma = dpsgd.calibrate_noise_multiplier(target, q, steps, delta, tol=tol, **kw)
  assert sigma > 0
  eps = dpsgd.dpsgd_epsilon(sigma, q, steps, delta, **kw)
  assert eps <= target
  assert eps >= target - 0.01 * target  # close to the target ...
  assert dpsgd.dpsgd_epsilon(sigma - 2 * tol, q, steps, delta, **kw) > target  # ... and minimal


def test_calibration_matches_q1_closed_form():
  """q = 1 and RDP at one order alpha: eps = T alpha/(2 s^2) + log(1 - 1/alpha)
  - (log delta + log alpha)/(alpha - 1), solved for s."""
  alpha, steps, delta, target = 8.0, 4, 1e-5, 3.0
  rest = math.log1p(-1 / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1)
  expected = math.sqrt(steps * alpha / (2 * (target - rest)))
  got = dpsgd.calibrate_noise_multiplier(target, 1.0, steps, delta, orders=[alpha], tol=1e-9)
  assert got == pytest.approx(expected, abs=1e-8)


def test_calibration_large_target_gives_small_noise():
  sigma = dpsgd.calibrate_noise_multiplier(50.0, 1.0, 1, 1e-5, tol=1e-6)
  assert 0 < sigma < 1
  assert dpsgd.dpsgd_epsilon(sigma, 1.0, 1, 1e-5) <= 50.0


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("kwargs,match", [
    (dict(noise_multiplier=-1.0), r"noise_multiplier=-1.0 is outside the valid range \[0, inf\)"),
    (dict(noise_multiplier=math.nan), r"noise_multiplier=nan"),
    (dict(noise_multiplier=math.inf), r"noise_multiplier=inf is outside"),
    (dict(noise_multiplier=[1.0, 2.0]), r"noise_multiplier must be a scalar"),
    (dict(sampling_rate=1.5), r"sampling_rate=1.5 is outside the valid range \[0, 1\]"),
    (dict(sampling_rate=-0.1), r"sampling_rate=-0.1 is outside"),
    (dict(num_steps=-1), r"num_steps=-1 is outside the valid range \[0, inf\)"),
    (dict(num_steps=2.5), r"num_steps=2.5 must be a whole number"),
    (dict(delta=1.0), r"delta=1.0 is outside the valid range \[0, 1\)"),
    (dict(delta=-1e-5), r"delta=-1e-05 is outside"),
    (dict(accountant="moments"), r"accountant='moments' is not one of 'rdp', 'pld'"),
    (dict(orders=[0.5, 2.0]), r"orders=0.5 \(at flat index 0\) is outside the valid range"),
    (dict(orders=[2.0, math.inf]), r"orders=inf \(at flat index 1\) is outside"),
    (dict(orders=[]), r"orders is empty"),
    (dict(accountant="pld", orders=[2.0]), r"orders is only used by accountant='rdp'"),
    (dict(pld_discretization=0.0), r"pld_discretization=0.0 is outside"),
])
def test_epsilon_validation(kwargs, match):
  args = dict(noise_multiplier=1.0, sampling_rate=0.01, num_steps=100, delta=1e-5)
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    dpsgd.dpsgd_epsilon(**args)


@pytest.mark.parametrize("call,match", [
    (lambda: dpsgd.dpsgd_delta(1.0, 0.01, 10, -0.5), r"epsilon=-0.5 is outside"),
    (lambda: dpsgd.dpsgd_delta(1.0, 0.01, 10, math.inf), r"epsilon=inf is outside"),
    (lambda: dpsgd.dpsgd_rdp(1.0, 0.01, 10, [1.0, 2.0]), r"orders=1.0 \(at flat index 0\)"),
    (lambda: dpsgd.dpsgd_rdp(1.0, 0.01, 10, [[2.0]]), r"orders must be a scalar or a 1-D"),
    (lambda: dpsgd.dpsgd_rdp(1.0, 2.0, 10, [2.0]), r"sampling_rate=2.0 is outside"),
    (lambda: dpsgd.dpsgd_event(1.0, 0.01, -3), r"num_steps=-3 is outside"),
    (lambda: dpsgd.calibrate_noise_multiplier(0.0, 0.01, 10, 1e-5),
     r"target_epsilon=0.0 is outside the valid range \(0, inf\)"),
    (lambda: dpsgd.calibrate_noise_multiplier(1.0, 0.01, 10, 0.0),
     r"delta=0.0 is outside the valid range \(0, 1\)"),
    (lambda: dpsgd.calibrate_noise_multiplier(1.0, 0.01, 10, 1e-5, tol=0.0),
     r"tol=0.0 is outside"),
    (lambda: dpsgd.calibrate_noise_multiplier(1.0, 0.01, 10, 1e-5, accountant="x"),
     r"accountant='x' is not one of"),
])
def test_other_validation(call, match):
  with pytest.raises(ValueError, match=match):
    call()
