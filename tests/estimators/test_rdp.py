"""Tests for dpaudit.estimators.rdp: composition and RDP -> (epsilon, delta) conversion."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant

from dpaudit.estimators import rdp

ORDERS = np.concatenate([np.linspace(1.05, 10.0, 60), np.geomspace(10.5, 512.0, 40)])


def _gaussian_rdp(noise, orders=ORDERS):
  return orders / (2.0 * noise**2)


def _naive_epsilon(curve, orders, delta):
  best, best_order = math.inf, math.nan
  for a, r in zip(orders, curve):
    e = r + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1)
    if e < best:
      best, best_order = e, a
  return max(best, 0.0), best_order


@pytest.mark.parametrize("noise,delta", [(0.5, 1e-5), (1.0, 1e-6), (3.0, 1e-3), (10.0, 1e-2)])
def test_matches_dp_accounting_compute_epsilon(noise, delta):
  # dp_accounting implements the same Balle et al. formula for orders > 1.01, but returns 0 at
  # orders where delta^2 > 1 - exp(-rdp) (a KL/Pinsker-type shortcut) and ignores orders <= 1.01;
  # neither case is hit on these curves (all orders >= 1.05, rdp large enough).
  curve = _gaussian_rdp(noise)
  assert np.all(delta**2 + np.expm1(-curve) <= 0)
  ref_eps, ref_order = rdp_privacy_accountant.compute_epsilon(ORDERS, curve, delta)
  got = rdp.rdp_to_epsilon(curve, ORDERS, delta)
  assert float(got.epsilon) == pytest.approx(ref_eps, rel=1e-10, abs=1e-12)
  assert float(got.order) == ref_order


def test_matches_naive_loop_batched_with_infinities():
  rng = np.random.default_rng(0)
  curves = rng.uniform(0.0, 3.0, size=(4, 3, ORDERS.size)) * ORDERS / 10.0
  curves[0, 0, :50] = np.inf          # infinite entries are ignored
  curves[1, 2, :] = np.inf            # ... unless all are infinite
  curves[2, 1, :] = 0.0               # epsilon clipped at 0
  deltas = np.array([1e-5, 1e-3, 0.3])
  got = rdp.rdp_to_epsilon(curves, ORDERS, deltas)
  assert got.epsilon.shape == got.order.shape == (4, 3)
  for i in range(4):
    for j in range(3):
      ref_eps, ref_order = _naive_epsilon(curves[i, j], ORDERS, deltas[j])
      if math.isinf(ref_eps):
        assert np.isinf(got.epsilon[i, j]) and np.isnan(got.order[i, j])
        continue
      assert float(got.epsilon[i, j]) == pytest.approx(ref_eps, rel=1e-12, abs=1e-14)
      assert float(got.order[i, j]) == ref_order
  assert float(got.epsilon[2, 1]) == 0.0


def test_epsilon_of_gaussian_continuous_optimum():
  # For rdp = alpha / (2 s^2), the per-order bound is smooth in alpha; a fine grid reaches the
  # continuous minimum (found with scipy) to grid accuracy, max|eps''| h^2 / 8 ~ 1e-8 here.
  from scipy import optimize
  s, delta = 1.2, 1e-6

  def eps(a):
    return a / (2 * s * s) + math.log1p(-1 / a) - (math.log(delta) + math.log(a)) / (a - 1)

  best = optimize.minimize_scalar(eps, bounds=(1.001, 200), method="bounded",
                                  options={"xatol": 1e-10})
  orders = np.linspace(1.001, 200, 200_000)
  got = rdp.rdp_to_epsilon(_gaussian_rdp(s, orders), orders, delta)
  assert float(got.epsilon) == pytest.approx(best.fun, abs=1e-7)
  assert float(got.epsilon) >= best.fun - 1e-12
  assert float(got.order) == pytest.approx(best.x, abs=2e-3)


def test_composition_of_gaussians_is_gaussian():
  noises = np.array([0.8, 1.5, 2.0, 5.0])
  per_query = np.stack([_gaussian_rdp(s) for s in noises])
  composed_noise = 1.0 / math.sqrt(np.sum(noises**-2.0))
  np.testing.assert_allclose(rdp.compose_rdp(per_query), _gaussian_rdp(composed_noise),
                             rtol=1e-13)
  # k identical repeats of sigma equal one Gaussian with sigma / sqrt(k).
  np.testing.assert_allclose(rdp.compose_rdp(_gaussian_rdp(3.0), 9, axis=None),
                             _gaussian_rdp(1.0), rtol=1e-13)
  np.testing.assert_allclose(rdp.compose_rdp(per_query, num_compositions=4),
                             _gaussian_rdp(composed_noise / 2.0), rtol=1e-13)
  # Summing over a middle batch axis.
  stacked = np.stack([per_query, 2 * per_query], axis=0)  # (2, 4, K)
  np.testing.assert_allclose(rdp.compose_rdp(stacked, axis=1),
                             np.stack([per_query.sum(0), 2 * per_query.sum(0)]), rtol=1e-13)


def test_compose_zero_repeats_and_infinities():
  curve = np.array([0.5, np.inf, 2.0])
  np.testing.assert_array_equal(rdp.compose_rdp(curve, 0, axis=None), 0.0)
  np.testing.assert_array_equal(rdp.compose_rdp(curve, 2, axis=None), [1.0, np.inf, 4.0])


def test_jit_and_vmap():
  curves = jnp.asarray(np.stack([_gaussian_rdp(s) for s in (0.7, 1.0, 2.0)]))
  orders = jnp.asarray(ORDERS)
  eager = rdp.rdp_to_epsilon(curves, orders, 1e-5)
  jitted = jax.jit(rdp.rdp_to_epsilon)(curves, orders, 1e-5)
  vmapped = jax.vmap(lambda c: rdp.rdp_to_epsilon(c, orders, 1e-5))(curves)
  for other in (jitted, vmapped):
    np.testing.assert_allclose(other.epsilon, eager.epsilon, rtol=1e-15)
    np.testing.assert_allclose(other.order, eager.order, rtol=1e-15)
  composed = jax.jit(rdp.compose_rdp, static_argnames="axis")(curves, 3)
  np.testing.assert_allclose(composed, 3 * np.asarray(curves).sum(0), rtol=1e-15)


@pytest.mark.parametrize("call,match", [
    (lambda: rdp.rdp_to_epsilon(_gaussian_rdp(1.0), ORDERS, 0.0), "delta=0"),
    (lambda: rdp.rdp_to_epsilon(_gaussian_rdp(1.0), ORDERS, 1.0), "delta=1"),
    (lambda: rdp.rdp_to_epsilon(_gaussian_rdp(1.0), ORDERS, -0.1), "delta=-0.1"),
    (lambda: rdp.rdp_to_epsilon([0.1, 0.2], [1.0, 2.0], 1e-5), "orders=1"),
    (lambda: rdp.rdp_to_epsilon([0.1, 0.2], [0.5, 2.0], 1e-5), "orders=0.5"),
    (lambda: rdp.rdp_to_epsilon([0.1, 0.2, 0.3], [1.5, 2.0], 1e-5), "shape"),
    (lambda: rdp.rdp_to_epsilon(np.ones((2, 3)), [1.5, 2.0, 3.0], [1e-5] * 3), "broadcast"),
    (lambda: rdp.rdp_to_epsilon([0.1, -0.2], [1.5, 2.0], 1e-5), "rdp=-0.2"),
    (lambda: rdp.rdp_to_epsilon([0.1, np.nan], [1.5, 2.0], 1e-5), "rdp=nan"),
    (lambda: rdp.rdp_to_epsilon([0.1], [], 1e-5), "orders is empty"),
    (lambda: rdp.compose_rdp([[0.1, -0.2]]), "rdp=-0.2"),
    (lambda: rdp.compose_rdp([0.1, 0.2]), "orders axis"),
    (lambda: rdp.compose_rdp([[0.1, 0.2]], axis=-1), "orders axis"),
    (lambda: rdp.compose_rdp([[0.1, 0.2]], axis=2), "axis=2"),
    (lambda: rdp.compose_rdp([[0.1, 0.2]], num_compositions=1.5), "num_compositions=1.5"),
    (lambda: rdp.compose_rdp([[0.1, 0.2]], num_compositions=-1), "num_compositions=-1"),
])
def test_validation_errors(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_infinite_orders_are_rejected():
  with pytest.raises(ValueError, match=r"orders=inf \(at flat index 1\) is outside the valid "
                     r"range \(1, inf\)"):
    rdp.rdp_to_epsilon(np.array([0.1, 0.2]), np.array([2.0, np.inf]), 1e-5)
