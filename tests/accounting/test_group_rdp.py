"""Tests for dpaudit.accounting.dpsgd.dpsgd_group_rdp: the RDP D_alpha(P || Q) of DP-SGD
towards a record repeated k times, against dpsgd_rdp (k = 1, dp_accounting), the Gaussian
mechanism with sensitivity k (q = 1) and the closed form of integer orders evaluated here by a
naive loop over all tuples (J_1, ..., J_alpha)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpaudit import accounting
from dpaudit.accounting import dpsgd

INTEGER_ORDERS = np.arange(2.0, 21.0)


def _closed_form_rdp(sigma, q, steps, k, alpha):
  """T/(alpha-1) log E[exp(sum_{i<i'} J_i J_i' / sigma^2)], J_i iid Binomial(k, q)."""
  pmf = [math.comb(k, j) * q**j * (1.0 - q)**(k - j) for j in range(k + 1)]
  total = 0.0
  for tup in itertools.product(range(k + 1), repeat=alpha):
    weight = math.prod(pmf[j] for j in tup)
    if weight == 0.0:
      continue
    s, s2 = sum(tup), sum(j * j for j in tup)
    total += weight * math.exp((s * s - s2) / (2.0 * sigma**2))
  return steps * math.log(total) / (alpha - 1)


def test_exported():
  assert accounting.dpsgd_group_rdp is dpsgd.dpsgd_group_rdp


@pytest.mark.parametrize("sigma,q", [(0.4, 2.81e-4), (0.6, 2.81e-4), (0.8, 2.81e-4),
                                     (1.0, 2.81e-4), (1.1, 0.01), (0.7, 0.1), (2.0, 0.5),
                                     (0.5, 1.0), (1.3, 1.0)])
def test_one_copy_is_sampled_gaussian(sigma, q):
  steps = 1000
  got = dpsgd.dpsgd_group_rdp(sigma, q, steps, INTEGER_ORDERS, 1)
  want = dpsgd.dpsgd_rdp(sigma, q, steps, INTEGER_ORDERS)
  np.testing.assert_allclose(got, want, rtol=1e-6)
  if q == 1.0:
    np.testing.assert_allclose(got, steps * INTEGER_ORDERS / (2 * sigma**2), rtol=1e-9)


@pytest.mark.parametrize("k", [1, 2, 5, 40])
@pytest.mark.parametrize("sigma", [0.5, 3.0])
def test_full_batch_is_gaussian_with_sensitivity_k(k, sigma):
  orders = np.array([1.01, 1.5, 2.0, 3.7, 10.0, 64.0])
  got = dpsgd.dpsgd_group_rdp(sigma, 1.0, 7, orders, k)
  np.testing.assert_allclose(got, 7 * orders * k**2 / (2 * sigma**2), rtol=1e-9)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("sigma,q", [(0.5, 0.01), (0.8, 2.81e-4), (1.0, 0.2), (2.0, 0.6)])
def test_integer_orders_match_closed_form(k, sigma, q):
  orders = np.arange(2, 7)
  got = dpsgd.dpsgd_group_rdp(sigma, q, 3, orders.astype(float), k)
  want = [_closed_form_rdp(sigma, q, 3, k, int(a)) for a in orders]
  np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("k", [1, 3, 20])
@pytest.mark.parametrize("sigma,q", [(0.5, 2.81e-4), (1.0, 0.05)])
def test_fractional_orders_monotone_and_between_integers(k, sigma, q):
  orders = np.linspace(1.05, 12.0, 120)
  rdp = dpsgd.dpsgd_group_rdp(sigma, q, 10, orders, k)
  assert np.all(np.isfinite(rdp)) and np.all(rdp >= 0.0)
  assert np.all(np.diff(rdp) >= -1e-9 * np.abs(rdp[1:]))
  frac = orders[(orders > 2.0) & (orders != np.round(orders))]
  low = dpsgd.dpsgd_group_rdp(sigma, q, 10, np.floor(frac), k)
  high = dpsgd.dpsgd_group_rdp(sigma, q, 10, np.ceil(frac), k)
  mid = dpsgd.dpsgd_group_rdp(sigma, q, 10, frac, k)
  assert np.all(low <= mid * (1 + 1e-9)) and np.all(mid <= high * (1 + 1e-9))


def test_fractional_order_matches_quadrature_reference():
  # Independent check of a fractional order with scipy's adaptive quadrature of the integrand.
  from scipy import integrate, stats
  sigma, q, k, alpha = 0.9, 0.05, 3, 2.5
  b = stats.binom.pmf(np.arange(k + 1), k, q)

  def integrand(x):
    ratio = np.sum(b * np.exp((2 * np.arange(k + 1) * x - np.arange(k + 1)**2) / (2 * sigma**2)))
    return stats.norm.pdf(x, scale=sigma) * ratio**alpha

  a_alpha, _ = integrate.quad(integrand, -40, 60, points=[0, alpha * k], limit=200,
                              epsabs=0, epsrel=1e-12)
  got = dpsgd.dpsgd_group_rdp(sigma, q, 1, alpha, k)
  np.testing.assert_allclose(got, math.log(a_alpha) / (alpha - 1), rtol=1e-8)
  assert np.shape(got) == ()


@pytest.mark.parametrize("sigma,q", [(0.5, 2.81e-4), (1.0, 0.01)])
def test_more_copies_leak_more(sigma, q):
  orders = np.array([1.1, 2.0, 4.5, 16.0])
  curves = [dpsgd.dpsgd_group_rdp(sigma, q, 100, orders, k) for k in (1, 2, 4, 16, 280)]
  for smaller, larger in zip(curves, curves[1:]):
    assert np.all(larger > smaller)


def test_many_copies_far_component_dominates():
  # k = 280 copies (Stock et al., Sec. 4.3): the all-sampled component at mean k gives
  # A >= b_k^alpha exp(alpha (alpha - 1) k^2 / (2 sigma^2)).
  sigma, q, k, alpha = 0.4, 2.81e-4, 280, 2.0
  got = dpsgd.dpsgd_group_rdp(sigma, q, 1, alpha, k)
  lower = alpha * k**2 / (2 * sigma**2) + alpha / (alpha - 1) * k * math.log(q)
  assert got >= lower
  assert got <= alpha * k**2 / (2 * sigma**2)  # the q = 1 value bounds it


def test_limit_cases():
  orders = np.array([1.5, 2.0, 32.0])
  np.testing.assert_array_equal(dpsgd.dpsgd_group_rdp(1.0, 0.3, 0, orders, 4), 0.0)
  np.testing.assert_array_equal(dpsgd.dpsgd_group_rdp(1.0, 0.0, 50, orders, 4), 0.0)
  np.testing.assert_array_equal(dpsgd.dpsgd_group_rdp(0.0, 0.0, 50, orders, 4), 0.0)
  np.testing.assert_array_equal(dpsgd.dpsgd_group_rdp(0.0, 0.3, 50, orders, 4), np.inf)
  out = dpsgd.dpsgd_group_rdp(1.0, 0.3, 5, orders, 2)
  assert out.dtype == np.float64 and out.shape == (3,)


@pytest.mark.parametrize("group_size", [0, -1, 1.5, np.nan, np.inf, "2", True, [2, 3]])
def test_bad_group_size(group_size):
  with pytest.raises(ValueError, match="group_size"):
    dpsgd.dpsgd_group_rdp(1.0, 0.1, 10, [2.0], group_size)


@pytest.mark.parametrize("orders", [1.0, 0.5, [2.0, 1.0], [[2.0, 3.0]], [], [np.nan], [np.inf]])
def test_bad_orders(orders):
  with pytest.raises(ValueError, match="orders"):
    dpsgd.dpsgd_group_rdp(1.0, 0.1, 10, orders, 2)


@pytest.mark.parametrize("args,name", [((-1.0, 0.1, 10), "noise_multiplier"),
                                       ((1.0, 1.5, 10), "sampling_rate"),
                                       ((1.0, 0.1, 2.5), "num_steps"),
                                       ((1.0, 0.1, -1), "num_steps")])
def test_bad_dpsgd_args(args, name):
  with pytest.raises(ValueError, match=name):
    dpsgd.dpsgd_group_rdp(*args, [2.0], 2)
