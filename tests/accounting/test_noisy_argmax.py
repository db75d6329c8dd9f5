"""Tests for dpaudit.accounting.noisy_argmax against independent scipy / mpmath / numpy
references written here from the formulas (Chadha et al. Eq. (4); Papernot et al. 2018)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from dpaudit import accounting
from dpaudit.accounting import noisy_argmax as na

FIG6_H = [14.0, 12.0, 10.0, 8.0, 6.0]
FIG6_H_PRIME = [13.0, 13.0, 10.0, 8.0, 6.0]
ORDERS = np.array([1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0])


def _pate_histograms(num, seed=0, teachers=250, classes=10):
  rng = np.random.default_rng(seed)
  probs = rng.dirichlet(np.full(classes, 0.3), size=num)
  return np.stack([rng.multinomial(teachers, p) for p in probs]).astype(float)


# ----------------------------------------------------------------------------- references


def _eq4_scipy(hist, sigma):
  """Eq. (4) of Chadha et al. in the original x variable, by scipy.integrate.quad."""
  hist = np.asarray(hist, float)
  out = []
  for c in range(hist.size):
    others = np.delete(hist, c)

    def integrand(x, c=c, others=others):
      return (stats.norm.pdf((x - hist[c]) / sigma) / sigma
              * np.prod(stats.norm.cdf((x - others) / sigma)))

    lo, hi = hist.min() - 15.0 * sigma, hist.max() + 15.0 * sigma
    val, _ = integrate.quad(integrand, lo, hi, points=sorted(set(hist.tolist())), limit=400,
                            epsabs=1e-15, epsrel=1e-13)
    out.append(val)
  return np.array(out)


def _log_integrand_np(z, d):
  return stats.norm.logpdf(z) + np.sum(special.log_ndtr(z + d))


def _mode(d):
  hi = 1.0 + max(0.0, -float(np.min(d)))
  res = optimize.minimize_scalar(lambda z: -_log_integrand_np(z, d), bounds=(-1.0, hi),
                                 method="bounded", options={"xatol": 1e-10})
  return float(res.x)


def _log_eq4_mpmath(hist, sigma, c, dps=30):
  """log Pr[c] with mpmath quadrature around the mode (found with scipy), relative accuracy."""
  hist = np.asarray(hist, float)
  d = (hist[c] - np.delete(hist, c)) / sigma
  m = _mode(d)
  with mpmath.workdps(dps):
    dm = [mpmath.mpf(float(v)) for v in d]
    log_peak = mpmath.log(mpmath.npdf(m)) + mpmath.fsum(mpmath.log(mpmath.ncdf(m + v)) for v in dm)

    def f(z):
      return mpmath.exp(mpmath.log(mpmath.npdf(z))
                        + mpmath.fsum(mpmath.log(mpmath.ncdf(z + v)) for v in dm) - log_peak)

    val = mpmath.quad(f, [m - 14, m - 3, m - 1, m, m + 1, m + 3, m + 14])
    return float(log_peak + mpmath.log(val))


# ----------------------------------------------------------------------------- probabilities


@pytest.mark.parametrize("hist,sigma", [
    (FIG6_H, 2.0),
    (FIG6_H_PRIME, 2.0),
    ([5.0, 5.0, 5.0], 1.0),          # three-way tie
    ([3.0, 3.0, 0.0, 7.0], 1.5),      # tie below the top
    ([7.0, 2.0], 3.0),                # C = 2
    ([250.0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 40.0),
])
def test_matches_scipy_quad_of_eq4(hist, sigma):
  got = np.asarray(na.noisy_argmax_class_probabilities(hist, sigma))
  np.testing.assert_allclose(got, _eq4_scipy(hist, sigma), rtol=0, atol=1e-10)


def test_matches_scipy_quad_pate_histograms():
  hists = _pate_histograms(4, seed=3)
  got = np.asarray(na.noisy_argmax_class_probabilities(hists, 40.0))
  ref = np.stack([_eq4_scipy(h, 40.0) for h in hists])
  np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10)


def test_two_classes_closed_form_in_log_space():
  gaps = np.array([0.0, 0.5, 3.0, 10.0, 30.0, 100.0, 1000.0])
  sigma = np.array([1.0, 2.0, 0.1, 1.0, 1.0, 1.0, 1.0])
  hist = np.stack([gaps, np.zeros_like(gaps)], axis=-1)
  got = np.asarray(na.noisy_argmax_log_probabilities(hist, sigma))
  z = gaps / (sigma * math.sqrt(2.0))
  ref = np.stack([special.log_ndtr(z), special.log_ndtr(-z)], axis=-1)
  np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("hist,sigma,cls", [
    ([40.0, 36.0, 30.0, 0.0], 2.0, 3),   # 20 sigma below the top, 15 below the next
    (FIG6_H, 0.5, 4),                    # Fig. 6 histogram with little noise
    ([250.0, 0.0, 0.0, 0.0], 40.0, 2),   # PATE, unanimous teachers
])
def test_small_probabilities_relative_accuracy(hist, sigma, cls):
  got = float(na.noisy_argmax_log_probabilities(hist, sigma)[cls])
  ref = _log_eq4_mpmath(hist, sigma, cls)
  assert got < -3.0
  assert abs(got - ref) < 1e-11 * max(1.0, abs(ref))


@pytest.mark.parametrize("hist,sigma", [
    ([1.0, 3.0, 1.0], 1e-6),   # two votes behind: the quadrature sits near z = 1e6
    ([0.0, 4.0, 1.0], 1e-6),
    ([5.0, 0.0, 0.0], 1e-9),
])
def test_tiny_sigma_matches_mpmath(hist, sigma):
  """Classes millions of standard deviations behind: the inverse Mills ratio from the continued
  fraction keeps the grid on the peak (from exp(log phi - log Phi) it was off by ~500 at
  z = -2e6, and log Pr[c] by ~1e8)."""
  got = np.asarray(na.noisy_argmax_log_probabilities(hist, sigma))
  for cls in range(len(hist)):
    ref = _log_eq4_mpmath(hist, sigma, cls)
    assert abs(got[cls] - ref) < 1e-13 * max(1.0, abs(ref)), (cls, got[cls], ref)


def test_tiny_sigma_divergence_matches_mpmath_and_stays_below_the_bound():
  """Two classes: D_alpha between Bernoulli(Phi(a)) and Bernoulli(Phi(-a)), a = 1/(sigma sqrt 2),
  in 50 digits. At sigma = 1e-6 this was NaN-free but 7.6e-5 above alpha/sigma^2 for three
  classes (below)."""
  for sigma in (1e-12, 1e-6, 1e-3):
    for alpha in (1.5, 2.0, 64.0):
      got = float(na.noisy_argmax_renyi([1.0, 0.0], [0.0, 1.0], sigma, alpha).forward)
      with mpmath.workdps(50):
        a = mpmath.mpf(1) / (mpmath.mpf(sigma) * mpmath.sqrt(2))
        p, q, al = mpmath.ncdf(a), mpmath.ncdf(-a), mpmath.mpf(alpha)
        ref = mpmath.log(p**al * q**(1 - al) + (1 - p)**al * (1 - q)**(1 - al)) / (al - 1)
      assert abs(got - float(ref)) <= 1e-14 * float(ref), (sigma, alpha, got, float(ref))
  got = np.asarray(na.noisy_argmax_renyi([1.0, 3.0, 1.0], [0.0, 4.0, 1.0], 1e-6,
                                         np.array([1.5, 2.0])).forward)
  assert np.all(np.isfinite(got)) and np.all(got <= np.array([1.5, 2.0]) / 1e-12)
  # The asymptotics: D_2 = 2/sigma^2 - 14.39 (the log prefactors of the two Gaussian tails).
  assert abs(got[1] - (2e12 - 14.39)) < 0.05


def test_sigma_below_the_quadrature_resolution_is_rejected():
  with pytest.raises(ValueError, match=r"sigma=1e-20 is too small .* sigma >= 5e-12"):
    na.noisy_argmax_log_probabilities([5.0, 0.0], 1e-20)
  with pytest.raises(ValueError, match="sigma=inf is outside the valid range"):
    na.noisy_argmax_renyi([1.0, 0.0], [0.0, 1.0], np.inf, 2.0)


def test_probabilities_sum_to_one_without_normalisation():
  hists = np.concatenate([_pate_histograms(50, seed=1), 0.1 * _pate_histograms(50, seed=2)])
  sigmas = np.concatenate([np.full(50, 40.0), np.full(50, 1.0)])
  p = np.asarray(na.noisy_argmax_class_probabilities(hists, sigmas))
  assert p.shape == (100, 10)
  np.testing.assert_allclose(p.sum(-1), 1.0, rtol=0, atol=1e-12)
  small = np.asarray(na.noisy_argmax_class_probabilities([FIG6_H, [0.0, 0.0, 0.0, 0.0, 9.0]], 2.0))
  np.testing.assert_allclose(small.sum(-1), 1.0, rtol=0, atol=1e-12)


def test_matches_monte_carlo():
  rng = np.random.default_rng(12345)
  hist, sigma, draws = np.array(FIG6_H), 2.0, 2_000_000
  counts = np.zeros(hist.size)
  for _ in range(4):
    winners = np.argmax(hist + sigma * rng.standard_normal((draws // 4, hist.size)), axis=1)
    counts += np.bincount(winners, minlength=hist.size)
  p = np.asarray(na.noisy_argmax_class_probabilities(hist, sigma))
  sd = np.sqrt(draws * p * (1 - p))
  assert np.all(np.abs(counts - draws * p) < 5.0 * sd), (counts / draws, p)


def test_batching_broadcasting_and_symmetry():
  hists = _pate_histograms(6, seed=4, teachers=30, classes=5).reshape(2, 3, 5)
  sigma = np.array([[1.0], [3.0]])
  batched = np.asarray(na.noisy_argmax_log_probabilities(hists, sigma))
  assert batched.shape == (2, 3, 5)
  for i in range(2):
    for j in range(3):
      single = np.asarray(na.noisy_argmax_log_probabilities(hists[i, j], sigma[i, 0]))
      np.testing.assert_allclose(batched[i, j], single, rtol=1e-14, atol=1e-14)
  perm = np.array([3, 0, 4, 1, 2])
  permuted = np.asarray(na.noisy_argmax_log_probabilities(hists[..., perm], sigma))
  np.testing.assert_allclose(permuted, batched[..., perm], rtol=1e-13, atol=1e-13)
  # Shifting all counts changes nothing; ties give equal probabilities.
  shifted = np.asarray(na.noisy_argmax_log_probabilities(hists + 17.0, sigma))
  np.testing.assert_allclose(shifted, batched, rtol=1e-12, atol=1e-12)
  tie = np.asarray(na.noisy_argmax_class_probabilities([4.0, 4.0, 4.0, 4.0], 0.7))
  np.testing.assert_allclose(tie, 0.25, rtol=0, atol=1e-14)


def test_jit_and_vmap():
  hists = jnp.asarray(_pate_histograms(4, seed=5, teachers=20, classes=4))
  eager = na.noisy_argmax_log_probabilities(hists, 2.0)
  jitted = jax.jit(na.noisy_argmax_log_probabilities)(hists, 2.0)
  vmapped = jax.vmap(lambda h: na.noisy_argmax_log_probabilities(h, 2.0))(hists)
  np.testing.assert_allclose(jitted, eager, rtol=1e-14, atol=1e-14)
  np.testing.assert_allclose(vmapped, eager, rtol=1e-14, atol=1e-14)


def test_float32_mode_is_reasonable():
  with jax.enable_x64(False):
    p = na.noisy_argmax_class_probabilities(FIG6_H, 2.0)
    assert p.dtype == jnp.float32
  np.testing.assert_allclose(np.asarray(p, float), _eq4_scipy(FIG6_H, 2.0), rtol=0, atol=2e-6)


def test_fewer_nodes_lose_accuracy():
  # The default node count matters: a very coarse grid is visibly wrong.
  ref = _eq4_scipy(FIG6_H, 2.0)
  coarse = np.asarray(na.noisy_argmax_class_probabilities(FIG6_H, 2.0, num_nodes=6))
  assert np.max(np.abs(coarse - ref)) > 1e-8
  assert na.default_num_nodes(10) >= 40


# ----------------------------------------------------------------------------- Renyi


def _renyi_reference(p, q, orders):
  out = []
  with mpmath.workdps(30):
    for a in orders:
      a = mpmath.mpf(float(a))
      s = mpmath.fsum(mpmath.mpf(float(pi)) ** a * mpmath.mpf(float(qi)) ** (1 - a)
                      for pi, qi in zip(p, q))
      out.append(float(mpmath.log(s) / (a - 1)))
  return np.array(out)


@pytest.mark.parametrize("hist,nbr,sigma", [
    (FIG6_H, FIG6_H_PRIME, 2.0),
    ([200.0, 30.0, 10.0, 5.0, 5.0], [199.0, 31.0, 10.0, 5.0, 5.0], 40.0),
    ([120.0, 118.0, 12.0], [119.0, 119.0, 12.0], 20.0),
])
def test_renyi_matches_direct_formula(hist, nbr, sigma):
  p, q = _eq4_scipy(hist, sigma), _eq4_scipy(nbr, sigma)
  got = accounting.noisy_argmax_renyi(hist, nbr, sigma, ORDERS)
  np.testing.assert_allclose(got.forward, _renyi_reference(p, q, ORDERS), rtol=1e-8, atol=1e-11)
  np.testing.assert_allclose(got.reverse, _renyi_reference(q, p, ORDERS), rtol=1e-8, atol=1e-11)


def test_renyi_properties():
  hists = _pate_histograms(5, seed=6, teachers=250, classes=10)
  nbrs = hists.copy()
  top = hists.argmax(-1)
  second = np.argsort(hists, -1)[:, -2]
  nbrs[np.arange(5), top] -= 1
  nbrs[np.arange(5), second] += 1
  orders = np.array([1.1, 2.0, 4.0, 16.0, 64.0, 256.0])
  got = accounting.noisy_argmax_renyi(hists, nbrs, 40.0, orders)
  assert got.forward.shape == got.reverse.shape == (5, 6)
  for d in (got.forward, got.reverse):
    d = np.asarray(d)
    assert np.all(d >= 0)
    assert np.all(np.diff(d, axis=-1) >= -1e-12)  # non-decreasing in the order
    # Post-processing of the Gaussian mechanism (L2 sensitivity sqrt 2): D <= alpha / sigma^2.
    assert np.all(d <= orders / 40.0**2 + 1e-15)
  same = accounting.noisy_argmax_renyi(hists, hists, 40.0, orders)
  np.testing.assert_allclose(same.forward, 0.0, atol=1e-12)
  np.testing.assert_allclose(same.reverse, 0.0, atol=1e-12)
  scalar = accounting.noisy_argmax_renyi(FIG6_H, FIG6_H_PRIME, 2.0, 3.0)
  vector = accounting.noisy_argmax_renyi(FIG6_H, FIG6_H_PRIME, 2.0, [3.0])
  assert np.shape(scalar.forward) == ()
  np.testing.assert_allclose(scalar.forward, vector.forward[0], rtol=1e-15)


# ----------------------------------------------------------------------------- GNMax bounds


def test_data_independent_rdp():
  got = accounting.gnmax_data_independent_rdp(np.array([2.0, 40.0]), ORDERS)
  np.testing.assert_allclose(got, ORDERS[None, :] / np.array([[4.0], [1600.0]]), rtol=1e-15)
  assert np.shape(accounting.gnmax_data_independent_rdp(3.0, 2.0)) == ()


def _log_q_reference(hist, sigma):
  hist = np.asarray(hist, float)
  top = int(np.argmax(hist))
  gaps = hist[top] - np.delete(hist, top)
  q = np.sum(0.5 * special.erfc(gaps / (2.0 * sigma)))
  return min(math.log(q), math.log(1.0 - 1.0 / hist.size))


@pytest.mark.parametrize("hist,sigma", [
    (FIG6_H, 2.0), (FIG6_H_PRIME, 2.0), ([200.0, 30.0, 10.0, 5.0, 5.0], 40.0),
    ([250.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 40.0), ([60.0, 0.0], 4.0),
    ([3.0, 3.0, 3.0], 1.0),  # union bound 1 > 1 - 1/C: capped
])
def test_log_q_bound_matches_direct_computation(hist, sigma):
  got = float(accounting.gnmax_log_q_bound(hist, sigma))
  assert got == pytest.approx(_log_q_reference(hist, sigma), rel=1e-13, abs=1e-15)


def test_log_q_bound_huge_gap_and_upper_bounds_true_q():
  # erfc underflows in float64 here; compare with mpmath.
  got = float(accounting.gnmax_log_q_bound([1000.0, 0.0, 10.0], 2.0))
  with mpmath.workdps(30):
    ref = float(mpmath.log(mpmath.erfc(mpmath.mpf(250)) / 2 + mpmath.erfc(mpmath.mpf(247.5)) / 2))
  assert got == pytest.approx(ref, rel=1e-13)
  hists = _pate_histograms(20, seed=7)
  log_q = np.asarray(accounting.gnmax_log_q_bound(hists, 40.0))
  log_p = np.asarray(na.noisy_argmax_log_probabilities(hists, 40.0))
  true_q = 1.0 - np.exp(log_p[np.arange(20), hists.argmax(-1)])
  assert np.all(true_q <= np.exp(log_q) * (1 + 1e-12))


def _thm6_naive(log_q, sigma, orders):
  """Thm. 6 of Papernot et al. (2018) with Prop. 10's mu's, evaluated naively in mpmath."""
  out = []
  with mpmath.workdps(50):
    q = mpmath.exp(mpmath.mpf(log_q))
    s = mpmath.mpf(sigma)
    mu2 = s * mpmath.sqrt(mpmath.log(1 / q))
    mu1 = mu2 + 1
    e1, e2 = mu1 / s**2, mu2 / s**2
    for lam in orders:
      lam = mpmath.mpf(float(lam))
      indep = lam / s**2
      ok = (mu2 > 1 and lam < mu1 and q * mpmath.exp(e2) < 1
            and q <= mpmath.exp((mu2 - 1) * e2) / (mu1 / (mu1 - 1) * mu2 / (mu2 - 1)) ** mu2)
      if not ok:
        out.append(float(indep))
        continue
      a = (1 - q) / (1 - (q * mpmath.exp(e2)) ** ((mu2 - 1) / mu2))
      b = mpmath.exp(e1) / q ** (1 / (mu1 - 1))
      bound = mpmath.log((1 - q) * a ** (lam - 1) + q * b ** (lam - 1)) / (lam - 1)
      out.append(float(min(bound, indep)))
  return np.array(out)


@pytest.mark.parametrize("hist,sigma", [
    ([200.0, 30.0, 10.0, 5.0, 5.0], 40.0),
    ([250.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 40.0),
    ([240.0, 10.0, 0.0, 0.0], 25.0),
    ([30.0, 0.0, 0.0], 2.0),
    ([150.0, 100.0, 0.0], 40.0),  # q too large: data-independent everywhere
])
def test_data_dependent_matches_naive_theorem6(hist, sigma):
  orders = np.array([1.25, 2.0, 3.0, 5.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0])
  got = np.asarray(accounting.gnmax_data_dependent_rdp(hist, sigma, orders))
  ref = _thm6_naive(_log_q_reference(hist, sigma), sigma, orders)
  np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-300)


def test_data_dependent_properties():
  orders = np.concatenate([np.linspace(1.01, 10, 30), np.geomspace(10, 1000, 30)])
  hists = np.concatenate([_pate_histograms(30, seed=8),
                          np.pad(_pate_histograms(30, seed=9, classes=3), ((0, 0), (0, 7)))])
  for sigma in (20.0, 40.0):
    dep = np.asarray(accounting.gnmax_data_dependent_rdp(hists, sigma, orders))
    indep = np.asarray(accounting.gnmax_data_independent_rdp(sigma, orders))
    assert dep.shape == (60, orders.size)
    assert np.all(dep >= 0) and np.all(dep <= indep * (1 + 1e-15))
    assert np.any(dep < 0.5 * indep)  # the data-dependent bound does bite for confident votes
  # -> 0 as the gap between the top two counts grows.
  gaps = np.array([20.0, 50.0, 100.0, 200.0, 400.0, 800.0])
  hist = np.stack([gaps, np.zeros(6), np.zeros(6)], axis=-1)
  vals = np.asarray(accounting.gnmax_data_dependent_rdp(hist, 10.0, 4.0))
  assert vals[0] == pytest.approx(4.0 / 10.0**2)  # small gap: data-independent
  assert np.all(np.diff(vals[:5]) < 0) and vals[4] < 1e-100 and vals[5] >= 0
  # The exact Renyi divergence to a neighbour never exceeds the data-dependent bound.
  h = np.array([200.0, 30.0, 10.0, 5.0, 5.0])
  exact = accounting.noisy_argmax_renyi(h, h + np.array([-1.0, 1.0, 0, 0, 0]), 40.0, ORDERS)
  bound = np.asarray(accounting.gnmax_data_dependent_rdp(h, 40.0, ORDERS))
  assert np.all(np.asarray(exact.forward) <= bound) and np.all(np.asarray(exact.reverse) <= bound)


def test_theorem6_zero_when_q_is_zero():
  out = na._thm6_rdp(jnp.array([-jnp.inf, -5.0]), jnp.array([10.0, 10.0]), jnp.array([2.0, 3.0]))
  np.testing.assert_array_equal(np.asarray(out)[0], 0.0)
  assert np.all(np.asarray(out)[1] > 0)


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("call,match", [
    (lambda: na.noisy_argmax_log_probabilities(FIG6_H, 0.0), "sigma=0"),
    (lambda: na.noisy_argmax_log_probabilities(FIG6_H, -1.0), "sigma=-1"),
    (lambda: na.noisy_argmax_log_probabilities([3.0], 1.0), "at least 2 classes"),
    (lambda: na.noisy_argmax_log_probabilities(5.0, 1.0), "at least 2 classes"),
    (lambda: na.noisy_argmax_log_probabilities([1.0, np.nan], 1.0), "histogram=nan"),
    (lambda: na.noisy_argmax_log_probabilities([1.0, np.inf], 1.0), "histogram=inf"),
    (lambda: na.noisy_argmax_log_probabilities(np.ones((2, 3)), np.ones(3)), "broadcast"),
    (lambda: na.noisy_argmax_renyi(FIG6_H, FIG6_H_PRIME[:4], 2.0, ORDERS), "shape"),
    (lambda: na.noisy_argmax_renyi(FIG6_H, FIG6_H_PRIME, 2.0, [0.5, 2.0]), "orders=0.5"),
    (lambda: na.noisy_argmax_renyi(FIG6_H, FIG6_H_PRIME, 2.0, 1.0), "orders=1"),
    (lambda: na.noisy_argmax_renyi(FIG6_H, FIG6_H_PRIME, -2.0, ORDERS), "sigma=-2"),
    (lambda: na.gnmax_data_independent_rdp(0.0, ORDERS), "sigma=0"),
    (lambda: na.gnmax_data_independent_rdp(1.0, [1.0]), "orders=1"),
    (lambda: na.gnmax_log_q_bound([1.0], 1.0), "at least 2 classes"),
    (lambda: na.gnmax_data_dependent_rdp(FIG6_H, 2.0, [2.0, 0.9]), "orders=0.9"),
    (lambda: na.gnmax_data_dependent_rdp(FIG6_H, 0.0, [2.0]), "sigma=0"),
])
def test_validation_errors(call, match):
  with pytest.raises(ValueError, match=match):
    call()
