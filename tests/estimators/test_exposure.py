"""Tests for dpaudit.estimators.exposure (Carlini et al. 2019, Sec. 4): exact exposure against
a naive Python count over an enumerated 4-digit space, the sampling estimate within a
tolerance set by the binomial sample size, Monte Carlo coverage of the Clopper-Pearson lower
bound, and the Gaussian extrapolation against scipy.stats.norm."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpaudit import estimators
from dpaudit.estimators import exposure as ex

NUM_DIGITS = 4


def _digit_log_probs(num_digits, seed=0, concentration=0.7):
  rng = np.random.default_rng(seed)
  probs = rng.dirichlet(np.full(10, concentration), size=num_digits)
  return np.log(probs)


def _space(num_digits=NUM_DIGITS, seed=0):
  """Log-probabilities of all 10^num_digits secrets (independent per-digit categoricals)."""
  lp = _digit_log_probs(num_digits, seed)
  grids = np.meshgrid(*[lp[t] for t in range(num_digits)], indexing="ij")
  return np.sum(grids, axis=0).reshape(-1)


def _naive_exposure(canary, space):
  rank = 0
  for value in space.tolist():
    if value >= canary:
      rank += 1
  return math.log2(len(space)) - math.log2(rank)


def test_exported():
  assert estimators.exposure_exact is ex.exposure_exact
  assert estimators.exposure_sampled is ex.exposure_sampled
  assert estimators.Exposure is ex.Exposure


def test_exact_matches_naive_count():
  space = _space()
  order = np.argsort(-space)
  picks = order[[0, 1, 7, 100, 999, 2500, 5000, 9998, 9999]]
  got = ex.exposure_exact(space[picks], space)
  want = [_naive_exposure(space[i], space) for i in picks]
  np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
  assert got.shape == (len(picks),)


def test_exact_limit_cases_and_ties():
  space = _space()
  np.testing.assert_allclose(ex.exposure_exact(space.max(), space), math.log2(space.size),
                             rtol=1e-15)
  assert float(ex.exposure_exact(space.min(), space)) == 0.0
  # ties count against the canary: every candidate tied -> rank N -> exposure 0
  assert float(ex.exposure_exact(-2.0, np.full(16, -2.0))) == 0.0
  # canary tied with one other candidate at the top: rank 2
  tied = np.array([-1.0, -1.0, -3.0, -4.0, -np.inf, -5.0, -6.0, -7.0])
  np.testing.assert_allclose(ex.exposure_exact(-1.0, tied), 3.0 - 1.0, rtol=1e-15)
  np.testing.assert_allclose(ex.exposure_exact(-np.inf, tied), 0.0, atol=0)


def test_exact_batched_and_jittable():
  space = _space()
  batch = np.stack([space, space[::-1]])
  canary = np.array([space[5], space[5]])
  got = jax.jit(ex.exposure_exact)(canary, batch)
  np.testing.assert_allclose(got, [_naive_exposure(space[5], space)] * 2, rtol=1e-12)
  assert jax.vmap(ex.exposure_exact, in_axes=(0, None))(jnp.asarray(canary), space).shape == (2,)


def _moderate_canaries(space):
  order = np.argsort(-space)
  return space[order[[500, 1000, 2000, 4000]]]  # rank / |R| between 0.05 and 0.4


def test_sampled_rank_estimate_within_binomial_tolerance():
  space = _space()
  rng = np.random.default_rng(1)
  m = 2000
  samples = space[rng.integers(0, space.size, size=m)]
  canaries = _moderate_canaries(space)
  got = ex.exposure_sampled(canaries, samples)
  exact = np.asarray(ex.exposure_exact(canaries, space))
  frac = 2.0 ** -exact
  sd_bits = np.sqrt((1 - frac) / (m * frac)) / math.log(2)  # delta method on -log2(c/M)
  tol = 5 * sd_bits + 2.0 / (m * frac * math.log(2))  # + the (c+1)/(M+1) shift
  assert np.all(np.abs(np.asarray(got.rank_estimate) - exact) <= tol)
  assert np.all(np.asarray(got.lower_bound) <= np.asarray(got.rank_estimate))
  np.testing.assert_array_equal(got.count, [np.sum(samples >= c) for c in canaries])


def _miss_probability(fraction, m, beta):
  """Exact Pr[lower_bound > exposure] = Pr[Clopper-Pearson upper limit < rank / |R|] for c ~
  Bin(m, fraction), summed over the counts with scipy."""
  c = np.arange(m + 1)
  upper = np.where(c < m, stats.beta.isf(beta, c + 1, np.maximum(m - c, 1)), 1.0)
  return float(np.sum(stats.binom.pmf(c, m, fraction)[upper < fraction]))


def test_lower_bound_coverage():
  """Each canary's miss rate over 2000 sample sets is within 4 binomial standard errors of its
  exact miss probability, itself <= beta (tests/estimators/test_coverage.py has the check at a
  size close to beta that fails at twice the significance)."""
  space = _space()
  seeds, m, beta = 2000, 2000, 0.05
  rng = np.random.default_rng(2)
  samples = space[rng.integers(0, space.size, size=(seeds, m))]
  canaries = _moderate_canaries(space)
  exact = np.asarray(ex.exposure_exact(canaries, space))
  got = ex.exposure_sampled(canaries[:, None], samples[None, :, :], significance=beta)
  assert got.lower_bound.shape == (len(canaries), seeds)
  missed = np.mean(np.asarray(got.lower_bound) > exact[:, None], axis=1)
  for canary, rate in zip(canaries, missed):
    probability = _miss_probability(float(np.mean(space >= canary)), m, beta)
    assert probability <= beta
    assert abs(rate - probability) <= 4 * math.sqrt(probability * (1 - probability) / seeds)
  # not vacuous: within a few binomial standard deviations of the exact value
  assert np.all(np.asarray(got.lower_bound) >= exact[:, None] - 1.0)


def test_sampled_limit_cases():
  samples = np.linspace(-10.0, -1.0, 1000)
  top = ex.exposure_sampled(0.0, samples, significance=0.05)
  np.testing.assert_allclose(top.rank_estimate, math.log2(1001), rtol=1e-14)
  np.testing.assert_allclose(top.lower_bound, -math.log2(-math.expm1(math.log(0.05) / 1000)),
                             rtol=1e-9)
  assert float(top.count) == 0.0
  bottom = ex.exposure_sampled(-11.0, samples)
  assert float(bottom.rank_estimate) == 0.0 and float(bottom.lower_bound) == 0.0
  assert float(bottom.count) == 1000.0
  assert float(ex.exposure_sampled(-np.inf, samples).extrapolated) == 0.0
  flat = np.full(10, -3.0)
  assert float(ex.exposure_sampled(-2.0, flat).extrapolated) == np.inf
  assert float(ex.exposure_sampled(-3.0, flat).extrapolated) == 0.0


def test_gaussian_extrapolation_on_many_digits():
  # 16 digits: log p = sum of 16 independent per-digit terms, close to Gaussian under uniform
  # sampling of the secret when the per-digit log-probabilities are not skewed (a large
  # Dirichlet concentration; with small ones the upper tail is lighter than Gaussian and the
  # Gaussian fit under-states exposure, the reason Carlini et al. fit a skew-normal). Compare
  # the fit from M samples with the Gaussian of the known mean and variance.
  lp = _digit_log_probs(16, seed=3, concentration=50.0)
  mu, var = lp.mean(axis=1).sum(), lp.var(axis=1).sum()
  rng = np.random.default_rng(4)
  m = 20000
  digits = rng.integers(0, 10, size=(m, 16))
  samples = lp[np.arange(16), digits].sum(axis=1)
  z = np.array([0.5, 2.0, 3.5])
  canaries = mu + z * math.sqrt(var)
  got = np.asarray(ex.exposure_sampled(canaries, samples).extrapolated)
  want = -stats.norm.logsf(z) / math.log(2)
  np.testing.assert_allclose(got, want, atol=0.3)
  # within the sampled range the rank estimate agrees with the fit
  rank = np.asarray(ex.exposure_sampled(canaries, samples).rank_estimate)
  np.testing.assert_allclose(rank[:2], want[:2], atol=0.3)


def test_gaussian_extrapolation_far_tail():
  rng = np.random.default_rng(5)
  x = rng.normal(size=500)
  x = (x - x.mean()) / x.std(ddof=1)  # exactly mean 0, sd 1
  mu, sd = -40.0, 3.0
  samples = mu + sd * x
  z = np.array([-3.0, 0.0, 5.0, 30.0, 200.0])
  got = ex.exposure_sampled(mu + sd * z, samples)
  want = -stats.norm.logsf(z) / math.log(2)
  np.testing.assert_allclose(got.extrapolated, want, rtol=1e-9)
  assert np.all(np.asarray(got.rank_estimate) <= math.log2(501) + 1e-12)


def test_sampled_jittable():
  samples = jnp.linspace(-5.0, 0.0, 100)
  got = jax.jit(ex.exposure_sampled)(jnp.asarray(-1.0), samples, 0.1)
  want = ex.exposure_sampled(-1.0, samples, 0.1)
  for a, b in zip(got, want):
    np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("canary,cands,match", [
    (np.nan, [-1.0, -2.0], "canary_log_prob"),
    (np.inf, [-1.0, -2.0], "canary_log_prob"),
    (-1.0, [-1.0, np.nan], "candidate_log_probs"),
    (-1.0, [-1.0, np.inf], "candidate_log_probs"),
    (-1.0, [], "candidate_log_probs"),
    (-1.0, -1.0, "candidate_log_probs"),
    ([-1.0, -2.0, -3.0], [[-1.0, -2.0], [-3.0, -4.0]], "canary_log_prob"),
])
def test_exact_validation(canary, cands, match):
  with pytest.raises(ValueError, match=match):
    ex.exposure_exact(canary, np.asarray(cands))


@pytest.mark.parametrize("canary,samples,significance,match", [
    (-1.0, [-1.0, -np.inf, -2.0], 0.05, "sample_log_probs"),
    (-1.0, [-1.0], 0.05, "sample_log_probs"),
    (-1.0, [], 0.05, "sample_log_probs"),
    (np.nan, [-1.0, -2.0], 0.05, "canary_log_prob"),
    (-1.0, [-1.0, -2.0], 0.0, "significance"),
    (-1.0, [-1.0, -2.0], 1.0, "significance"),
])
def test_sampled_validation(canary, samples, significance, match):
  with pytest.raises(ValueError, match=match):
    ex.exposure_sampled(canary, np.asarray(samples), significance)
