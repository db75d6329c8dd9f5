"""PATE-GAN (Jordon et al. 2019): the moments accountant and the vote noise against naive
recomputations of the formulas, training that stops at the target epsilon, argument checks.
One tiny program is compiled and run three times (about 4 s of CPU on 2 cores)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit.models import pate_gan as pg

TINY = dict(num_teachers=1, batch_size=4, teacher_iters=1, student_iters=2, max_iterations=6,
            max_order=40, noise_dim=2, generator_hidden=(4,), discriminator_hidden=(4,))


def _naive_alpha(lam, gap, order):
  """One vote's log moment at ``order``: Algorithm 1's min{2 lam^2 l (l+1), log(...)}, with pure
  DP's 2 lam l, the data-dependent term only where q <= 1 / (1 + e^{2 lam})."""
  q = (2 + lam * gap) / (4 * math.exp(lam * gap))
  bounds = [2 * lam**2 * order * (order + 1), 2 * lam * order]
  if q <= 1 / (1 + math.exp(2 * lam)):
    bounds.append(math.log((1 - q) * ((1 - q) / (1 - math.exp(2 * lam) * q)) ** order
                           + q * math.exp(2 * lam * order)))
  return min(bounds)


def _naive_epsilon(lam, gaps, delta, max_order):
  return min((sum(_naive_alpha(lam, g, l) for g in gaps) + math.log(1 / delta)) / l
             for l in range(1, max_order + 1))


def test_accountant_matches_a_naive_recomputation():
  for lam in (0.001, 0.05, 0.5, 2.0):
    for gap in (0, 1, 3, 10, 40):
      got = pg._log_moments(gap, lam, 30)
      want = [_naive_alpha(lam, gap, l) for l in range(1, 31)]
      np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-14)  # naive log(1 + tiny)
  # The data-dependent term is what makes unanimous votes cheap at lam = 2 (and is used).
  assert pg._log_moments(40, 2.0, 30)[0] < 1e-20  # data-independent: min(2 lam^2 2, 2 lam) = 4
  counts = np.array([3, 0, 5, 1, 20])  # votes with margins 0..4
  gaps = [g for g, c in enumerate(counts) for _ in range(c)]
  for lam, delta in ((0.5, 1e-5), (0.01, 1e-3)):
    eps, order = pg.pate_epsilon(counts, lam, delta, max_order=50)
    assert eps == pytest.approx(_naive_epsilon(lam, gaps, delta, 50), rel=1e-9)
    alpha = sum(_naive_alpha(lam, g, order) for g in gaps)
    assert eps == pytest.approx((alpha + math.log(1 / delta)) / order, rel=1e-9)
  assert pg.pate_epsilon([0, 0, 0], 1.0, 1e-5) == (0.0, 1)


def test_vote_noise_is_laplace_of_scale_one_over_lambda():
  """The noisy argmax flips the majority with probability (2 + lam g) / (4 e^{lam g}) exactly
  when both counts get Lap(1/lam) noise (the q of Algorithm 1)."""
  draws = 40_000
  for lam, n0, n1 in ((0.5, 3.0, 5.0), (0.1, 7.0, 2.0)):
    labels, gaps = pg._noisy_vote(jax.random.key(int(10 * lam)), jnp.full(draws, n0),
                                  jnp.full(draws, n1), jnp.float32(lam))
    gap = abs(n1 - n0)
    q = (2 + lam * gap) / (4 * math.exp(lam * gap))
    flips = np.mean(np.asarray(labels) != (n1 > n0))
    assert abs(flips - q) < 4 * math.sqrt(q * (1 - q) / draws), (lam, flips, q)
    np.testing.assert_array_equal(gaps, gap)
  assert pg.PateGanConfig(epsilon=1.0, noise_lambda=0.25).laplace_scale == 4.0


def test_training_stops_at_the_target_epsilon():
  """One teacher: every vote has margin 1, so epsilon after T iterations is known in advance."""
  rng = np.random.default_rng(0)
  data = np.column_stack([rng.normal(size=24), rng.integers(0, 2, 24)])
  lam, delta = 0.05, 1e-5
  queries = TINY["student_iters"] * TINY["batch_size"]
  naive = [_naive_epsilon(lam, [1] * (t * queries), delta, TINY["max_order"])
           for t in range(1, 8)]
  target = 0.5 * (naive[2] + naive[3])  # room for 3 iterations, not 4
  model = pg.fit_pate_gan(jax.random.key(0), data,
                          pg.PateGanConfig(epsilon=target, delta=delta, noise_lambda=lam, **TINY))
  assert model.num_steps == 3 and model.num_queries == 3 * queries
  np.testing.assert_array_equal(model.gap_counts, [0, 3 * queries])
  assert model.epsilon == pytest.approx(naive[2], rel=1e-9) and model.epsilon <= target
  np.testing.assert_allclose(model.epsilons, naive[:3], rtol=1e-6)
  assert model.gan.history.shape == (3, 2) and np.all(np.isfinite(model.gan.history))
  samples = pg.sample_pate_gan(jax.random.key(1), model, 7)
  assert samples.shape == (7, 2) and set(np.unique(samples[:, 1])) <= {0.0, 1.0}
  # A large target: the iteration cap ends training. A tiny one: no iteration fits.
  capped = pg.fit_pate_gan(jax.random.key(0), data,
                           pg.PateGanConfig(epsilon=1e4, noise_lambda=lam, **TINY))
  assert capped.num_steps == TINY["max_iterations"]
  assert capped.epsilon == pytest.approx(naive[TINY["max_iterations"] - 1], rel=1e-9)
  none = pg.fit_pate_gan(jax.random.key(0), data,
                         pg.PateGanConfig(epsilon=0.5 * naive[0], noise_lambda=lam, **TINY))
  assert none.num_steps == 0 and none.epsilon == 0.0 and none.epsilons.shape == (0,)
  assert pg.sample_pate_gan(jax.random.key(2), none, 3).shape == (3, 2)


@pytest.mark.parametrize("kwargs, name", [
    ({"epsilon": 0.0}, "epsilon"), ({"epsilon": float("inf")}, "epsilon"),
    ({"epsilon": 1.0, "delta": 1.0}, "delta"), ({"epsilon": 1.0, "delta": 0.0}, "delta"),
    ({"epsilon": 1.0, "num_teachers": 0}, "num_teachers"),
    ({"epsilon": 1.0, "noise_lambda": -1.0}, "noise_lambda"),
    ({"epsilon": 1.0, "batch_size": 2.0}, "batch_size"),
    ({"epsilon": 1.0, "student_iters": 0}, "student_iters"),
    ({"epsilon": 1.0, "max_order": 0}, "max_order"),
    ({"epsilon": 1.0, "generator_hidden": ()}, "generator_hidden"),
    ({"epsilon": 1.0, "learning_rate": 0.0}, "learning_rate"),
    ({"epsilon": 1.0, "generator_loss": "wasserstein"}, "generator_loss"),
])
def test_bad_configs_name_the_argument(kwargs, name):
  with pytest.raises(ValueError, match=name):
    pg.PateGanConfig(**kwargs)


def test_bad_arguments_name_the_argument():
  data = np.random.default_rng(0).normal(size=(5, 2))
  key = jax.random.key(0)
  config = pg.PateGanConfig(epsilon=1.0, num_teachers=6)
  for call, name in (
      (lambda: pg.fit_pate_gan(0, data, config), "key"),
      (lambda: pg.fit_pate_gan(key, data, config), "num_teachers"),
      (lambda: pg.fit_pate_gan(key, data[:, 0], config), "data"),
      (lambda: pg.fit_pate_gan(key, data, {"epsilon": 1.0}), "config"),
      (lambda: pg.sample_pate_gan(key, "model", 3), "model"),
      (lambda: pg.pate_epsilon([1, -1], 1.0, 1e-5), "gap_counts"),
      (lambda: pg.pate_epsilon([1.5, 1], 1.0, 1e-5), "gap_counts"),
      (lambda: pg.pate_epsilon([1], 1.0, 1e-5), "gap_counts"),
      (lambda: pg.pate_epsilon([1, 1], 0.0, 1e-5), "noise_lambda"),
      (lambda: pg.pate_epsilon([1, 1], 1.0, 2.0), "delta"),
      (lambda: pg.pate_epsilon([1, 1], 1.0, 1e-5, max_order=0), "max_order"),
  ):
    with pytest.raises(ValueError, match=name):
      call()
