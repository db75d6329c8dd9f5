"""Tests for dpaudit.estimators.reconstruction (Stock et al. 2022, Eqs. (2)-(3), App. A)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize

from dpaudit.estimators import reconstruction as rc

ORDERS = np.concatenate([np.linspace(1.01, 10.0, 90), np.geomspace(10.5, 1000.0, 60)])


def _gaussian_rdp(sigma, orders=ORDERS):
  return orders / (2.0 * sigma**2)


def _l(d, a, p0):
  return d * (a - 1) / a + math.log(1 / p0) / a


def _h(d, a, p0):
  return d + math.log(1 / p0) / (a - 1)


def _naive_min(fn, curve, orders, p0, trivial=None):
  vals = [fn(d, a, p0) for d, a in zip(curve, orders)]
  best = min(vals)
  order = orders[int(np.argmin(vals))]
  if trivial is not None and trivial <= best:
    return trivial, 1.0
  return best, order


def _curves():
  rng = np.random.default_rng(0)
  curves = [_gaussian_rdp(s) for s in (0.4, 1.0, 3.0)]
  # An arbitrary non-decreasing curve, and a composed subsampled-Gaussian-like one.
  curves.append(np.cumsum(rng.uniform(0.0, 0.05, ORDERS.size)))
  curves.append(np.minimum(ORDERS * 0.02, 0.5 + 0.001 * ORDERS))
  return np.stack(curves)


P0S = np.array([1.0, 0.5, 1e-2, 2.0**-20, 1e-10, 2.0**-100, 2.0**-1000])


def test_leakage_and_traditional_match_naive_loops():
  curves = _curves()
  got_l = rc.reconstruction_leakage_bound(curves[:, None, :], ORDERS, P0S)
  got_h = rc.traditional_reconstruction_bound(curves[:, None, :], ORDERS, P0S)
  assert got_l.value.shape == got_h.order.shape == (curves.shape[0], P0S.size)
  for i, curve in enumerate(curves):
    for j, p0 in enumerate(P0S):
      ref_l, ref_lo = _naive_min(_l, curve, ORDERS, p0, trivial=math.log(1 / p0))
      ref_h, ref_ho = _naive_min(_h, curve, ORDERS, p0)
      assert float(got_l.value[i, j]) == pytest.approx(ref_l, rel=1e-13, abs=1e-15)
      assert float(got_l.order[i, j]) == ref_lo
      assert float(got_h.value[i, j]) == pytest.approx(ref_h, rel=1e-13, abs=1e-15)
      assert float(got_h.order[i, j]) == ref_ho
  # The trivial alpha -> 1+ term only wins for large priors; for small ones a real order does.
  assert np.all(np.asarray(got_l.order)[:, -1] > 1.0)
  np.testing.assert_array_equal(np.asarray(got_l.value)[:, 0], 0.0)


def test_l_below_h_at_every_order():
  curve = _gaussian_rdp(0.8)
  for p0 in (0.5, 1e-6, 2.0**-64):
    for a, d in zip(ORDERS[::7], curve[::7]):
      single_l = float(rc.reconstruction_leakage_bound([d], [a], p0).value)
      single_h = float(rc.traditional_reconstruction_bound([d], [a], p0).value)
      assert single_l <= _l(d, a, p0) * (1 + 1e-14)
      assert single_h == pytest.approx(_h(d, a, p0), rel=1e-14)
      assert single_l < single_h
  both_l = rc.reconstruction_leakage_bound(_curves(), ORDERS, 1e-8).value
  both_h = rc.traditional_reconstruction_bound(_curves(), ORDERS, 1e-8).value
  assert np.all(np.asarray(both_l) < np.asarray(both_h))


def test_gaussian_matches_continuous_minimum():
  # d_alpha = c alpha with c = 1/(2 sigma^2): l = c (alpha - 1) + B / alpha, B = log(1/p0), is
  # minimised at alpha* = sqrt(B/c) with L = 2 sqrt(Bc) - c when alpha* > 1 (else L = B).
  orders = np.linspace(1.0001, 400.0, 400_000)
  for sigma in (0.5, 1.0, 2.0):
    c = 1.0 / (2.0 * sigma**2)
    for p0 in (0.9, 1e-3, 2.0**-40, 2.0**-1000):
      b = math.log(1 / p0)
      closed = 2.0 * math.sqrt(b * c) - c if b > c else b
      res = optimize.minimize_scalar(lambda a: c * (a - 1) + b / a, bounds=(1.0, 400.0),
                                     method="bounded", options={"xatol": 1e-12})
      assert res.fun == pytest.approx(closed, abs=1e-7)  # bounded search stops near alpha = 1
      got = rc.reconstruction_leakage_bound(_gaussian_rdp(sigma, orders), orders, p0)
      # Grid step 1e-3: |l''| h^2 / 8 = (2B / alpha^3) h^2 / 8 is below 1e-6 here.
      assert float(got.value) == pytest.approx(closed, abs=1e-6)
      assert float(got.value) >= closed - 1e-12
      if b > c:
        assert float(got.order) == pytest.approx(math.sqrt(b / c), abs=2e-3)


def test_leakage_bits_properties():
  bits = np.linspace(0.0, 200.0, 401)
  for curve in _curves():
    got = rc.leakage_bits(curve, ORDERS, bits)
    l2 = np.asarray(got.value)
    assert l2[0] == 0.0                                   # L2(0) = 0
    assert np.all(np.diff(l2) >= -1e-12)                  # non-decreasing
    assert np.all(np.diff(l2, 2) <= 1e-10)                # concave (App. A.2)
    assert np.all(np.diff(l2 - bits) <= 1e-12)            # b -> L2(b) - b non-increasing
    assert np.all(l2 <= bits + 1e-12)
    # Same as L(2^-b) / log 2 (priors as logs so that b = 200 is no problem).
    nats = rc.reconstruction_leakage_bound(curve, ORDERS, log_p0=-bits * math.log(2.0))
    np.testing.assert_allclose(l2, np.asarray(nats.value) / math.log(2.0), rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(got.order, nats.order)
  # A concrete value: Gaussian, sigma = 1, b = 40 bits.
  c, b_nats = 0.5, 40 * math.log(2.0)
  one = rc.leakage_bits(_gaussian_rdp(1.0, np.linspace(1.001, 100, 99_000)),
                        np.linspace(1.001, 100, 99_000), 40.0)
  assert float(one.value) == pytest.approx((2 * math.sqrt(b_nats * c) - c) / math.log(2.0),
                                           abs=1e-6)


def test_posterior_bound():
  curves = _curves()
  post = np.asarray(rc.posterior_bound(curves[:, None, :], ORDERS, P0S))
  lval = np.asarray(rc.reconstruction_leakage_bound(curves[:, None, :], ORDERS, P0S).value)
  assert np.all(post <= 1.0) and np.all(post >= P0S)
  np.testing.assert_allclose(post, np.minimum(1.0, P0S * np.exp(lval)), rtol=1e-12)
  # App. A.1 form: log p1 <= min_alpha ((alpha - 1)/alpha)(d_alpha + log p0), when below 0.
  for curve in curves:
    for p0 in (1e-6, 2.0**-100):
      direct = min(0.0, np.min((ORDERS - 1) / ORDERS * (curve + math.log(p0))))
      got = float(rc.posterior_bound(curve, ORDERS, p0))
      assert math.log(got) == pytest.approx(direct, rel=1e-12, abs=1e-13)
  # Tiny priors through log_p0: p0 = 2^-2000 underflows float64, its posterior bound need not.
  sigma, b = 0.05, 2000 * math.log(2.0)
  fine = np.linspace(1.001, 20.0, 19_000)  # step 1e-3: grid error <= l'' h^2 / 8 < 2e-5
  tiny = float(rc.posterior_bound(_gaussian_rdp(sigma, fine), fine, log_p0=-b))
  c = 1.0 / (2.0 * sigma**2)
  assert math.log(tiny) == pytest.approx(-b + 2.0 * math.sqrt(b * c) - c, abs=1e-4)
  assert rc.posterior_bound(_gaussian_rdp(0.3), ORDERS, 2.0**-1000) > 0.0


def test_jit_vmap_and_infinite_entries():
  curves = jnp.asarray(_curves())
  eager = rc.reconstruction_leakage_bound(curves, ORDERS, 1e-6)
  jitted = jax.jit(rc.reconstruction_leakage_bound)(curves, ORDERS, 1e-6)
  vmapped = jax.vmap(lambda c: rc.reconstruction_leakage_bound(c, ORDERS, 1e-6))(curves)
  for other in (jitted, vmapped):
    np.testing.assert_allclose(other.value, eager.value, rtol=1e-15)
    np.testing.assert_allclose(other.order, eager.order, rtol=1e-15)
  curve = _gaussian_rdp(1.0).copy()
  curve[:80] = np.inf
  got = rc.reconstruction_leakage_bound(curve, ORDERS, 1e-6)
  ref, ref_order = _naive_min(_l, curve, ORDERS, 1e-6, trivial=math.log(1e6))
  assert float(got.value) == pytest.approx(ref, rel=1e-13) and float(got.order) == ref_order
  all_inf = rc.traditional_reconstruction_bound(np.full(3, np.inf), [2.0, 3.0, 4.0], 0.1)
  assert np.isinf(all_inf.value) and np.isnan(all_inf.order)


@pytest.mark.parametrize("call,match", [
    (lambda: rc.reconstruction_leakage_bound(_gaussian_rdp(1.0), ORDERS, 0.0), "p0=0"),
    (lambda: rc.reconstruction_leakage_bound(_gaussian_rdp(1.0), ORDERS, 1.5), "p0=1.5"),
    (lambda: rc.posterior_bound(_gaussian_rdp(1.0), ORDERS, -0.1), "p0=-0.1"),
    (lambda: rc.traditional_reconstruction_bound(_gaussian_rdp(1.0), ORDERS, np.nan), "p0=nan"),
    (lambda: rc.reconstruction_leakage_bound(_gaussian_rdp(1.0), ORDERS, log_p0=0.5),
     "log_p0=0.5"),
    (lambda: rc.reconstruction_leakage_bound(_gaussian_rdp(1.0), ORDERS, log_p0=-np.inf),
     "log_p0=-inf"),
    (lambda: rc.reconstruction_leakage_bound(_gaussian_rdp(1.0), ORDERS, 0.5, log_p0=-1.0),
     "exactly one"),
    (lambda: rc.posterior_bound(_gaussian_rdp(1.0), ORDERS), "exactly one"),
    (lambda: rc.reconstruction_leakage_bound([0.1, 0.2], [1.0, 2.0], 0.5), "orders=1"),
    (lambda: rc.leakage_bits([0.1, 0.2], [0.5, 2.0], 3.0), "orders=0.5"),
    (lambda: rc.reconstruction_leakage_bound([0.1, 0.2, 0.3], [1.5, 2.0], 0.5), "shape"),
    (lambda: rc.reconstruction_leakage_bound(np.ones((2, 3)), [1.5, 2.0, 3.0], [0.5] * 3),
     "broadcast"),
    (lambda: rc.leakage_bits(np.ones((2, 3)), [1.5, 2.0, 3.0], [1.0] * 3), "broadcast"),
    (lambda: rc.reconstruction_leakage_bound([0.1, -0.2], [1.5, 2.0], 0.5), "rdp=-0.2"),
    (lambda: rc.leakage_bits([0.1, -0.2], [1.5, 2.0], 3.0), "rdp=-0.2"),
    (lambda: rc.leakage_bits([0.1, 0.2], [1.5, 2.0], -1.0), "secret_bits=-1"),
    (lambda: rc.leakage_bits([0.1, 0.2], [1.5, 2.0], np.inf), "secret_bits=inf"),
])
def test_validation_errors(call, match):
  with pytest.raises(ValueError, match=match):
    call()
