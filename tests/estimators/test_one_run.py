"""Tests for dpaudit.estimators.one_run against a naive scipy implementation of Thm. 2 (UniAud).

The reference below is written directly from the theorem statement (Eqs. 7-9): a Python loop
over i = 1..m for alpha and a Python bisection on epsilon, using scipy.stats.binom.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

from dpaudit.estimators import one_run


# ----------------------------------------------------------------------------- reference
def ref_p_value(m, r, v, eps, delta):
  q = special.expit(eps)
  beta = stats.binom.sf(v - 1, r, q)  # P[W >= v]
  if delta == 0:
    return min(1.0, beta)
  pmf = stats.binom.pmf(np.arange(r + 1), r, q)
  alpha, window = 0.0, 0.0
  for i in range(1, m + 1):  # window = P[v > W >= v - i]
    if v - i >= 0:
      window += pmf[v - i]
    alpha = max(alpha, 2.0 * window / i)
  return min(1.0, beta + alpha * m * delta)


def ref_epsilon(m, r, v, delta, significance, steps=60):
  lo, hi = 0.0, 64.0
  for _ in range(steps):
    mid = 0.5 * (lo + hi)
    if ref_p_value(m, r, v, mid, delta) <= significance:
      lo = mid
    else:
      hi = mid
  return lo


def naive_correct(scores, is_member, r, mode):
  m = len(scores)
  order = sorted(range(m), key=lambda i: (-scores[i], i))
  if mode == "top":
    return sum(int(is_member[i]) for i in order[:r])
  top = order[:(r + 1) // 2]
  bottom = order[m - r // 2:] if r // 2 else []
  return sum(int(is_member[i]) for i in top) + sum(1 - int(is_member[i]) for i in bottom)


P_VALUE_CASES = [
    # m, r, v, eps, delta
    (1000, 1000, 1000, 5.0, 0.0),
    (1000, 1000, 900, 1.5, 0.0),
    (1000, 1000, 900, 1.5, 1e-5),
    (1000, 500, 400, 0.5, 1e-4),
    (1000, 200, 150, 2.0, 1e-3),
    (300, 120, 119, 3.0, 1e-6),
    (300, 120, 60, 0.0, 1e-3),
    (50, 50, 30, 0.2, 0.01),
    (50, 10, 10, 8.0, 0.001),
    (100_000, 100_000, 60_000, 0.39, 1e-7),  # long pmf (the batch runs to k = 1e5)
]


@pytest.fixture(scope="module")
def batched_p_values():
  # One batched call (num_examples may be an array; the pmf runs up to its maximum).
  m, r, v, eps, delta = (np.array(col) for col in zip(*P_VALUE_CASES))
  return np.asarray(one_run.one_run_p_value(m, r, v, eps, delta))


@pytest.mark.parametrize("case", range(len(P_VALUE_CASES)))
def test_p_value_matches_reference(batched_p_values, case):
  m, r, v, eps, delta = P_VALUE_CASES[case]
  np.testing.assert_allclose(batched_p_values[case], ref_p_value(m, r, v, eps, delta),
                             rtol=1e-10, atol=1e-300)


EPS_CASES = [
    # m, r, v, delta, significance
    (1000, 1000, 1000, 0.0, 0.05),
    (1000, 1000, 1000, 1e-5, 0.05),
    (1000, 1000, 880, 0.0, 0.05),
    (1000, 1000, 880, 1e-5, 0.05),
    (1000, 300, 280, 1e-4, 0.01),
    (1000, 100, 100, 1e-6, 0.1),
    (200, 150, 100, 1e-3, 0.05),
    (20, 20, 17, 0.0, 0.05),
]


@pytest.fixture(scope="module")
def batched_epsilons():
  m, r, v, delta, sig = (np.array(col) for col in zip(*EPS_CASES))
  eps = one_run.one_run_epsilon(m, r, v, delta, sig)
  p_at = one_run.one_run_p_value(m, r, v, eps, delta)
  p_above = one_run.one_run_p_value(m, r, v, eps * (1 + 1e-6) + 1e-9, delta)
  return np.asarray(eps), np.asarray(p_at), np.asarray(p_above)


@pytest.mark.parametrize("case", range(len(EPS_CASES)))
def test_epsilon_matches_reference(batched_epsilons, case):
  m, r, v, delta, sig = EPS_CASES[case]
  eps, p_at, p_above = (x[case] for x in batched_epsilons)
  want = ref_epsilon(m, r, v, delta, sig)
  assert want > 0.1  # the cases are chosen so that something is rejected
  np.testing.assert_allclose(eps, want, rtol=1e-6)
  # The reported bound is rejected, slightly above it is not.
  assert p_at <= sig < p_above


@pytest.mark.parametrize("r,v", [(20, 17), (100, 90), (1000, 1000), (1000, 700), (700, 650)])
def test_delta_zero_is_logit_of_clopper_pearson(r, v):
  lower = stats.beta.ppf(0.05, v, r - v + 1)  # one-sided Clopper-Pearson lower limit
  want = max(special.logit(lower), 0.0)
  np.testing.assert_allclose(float(one_run.one_run_epsilon(1000, r, v)), want, rtol=1e-8)


def test_ceiling_all_correct_known_value():
  # Steinke et al.: m = 1000 guesses, all correct, delta = 0, 95% confidence.
  got = float(one_run.one_run_epsilon_ceiling(1000, 1000))
  closed_form = special.logit(0.05 ** (1 / 1000))  # P[W* >= r] = q^r = beta
  np.testing.assert_allclose(got, closed_form, rtol=1e-9)
  np.testing.assert_allclose(got, ref_epsilon(1000, 1000, 1000, 0.0, 0.05), rtol=1e-6)
  assert 5.5 < got < 6.0
  with_delta = float(one_run.one_run_epsilon_ceiling(1000, 1000, 1e-5))
  np.testing.assert_allclose(with_delta, ref_epsilon(1000, 1000, 1000, 1e-5, 0.05), rtol=1e-6)
  assert with_delta < got


def test_limit_cases():
  assert float(one_run.one_run_epsilon(1000, 500, 0)) == 0.0
  assert float(one_run.one_run_epsilon(1000, 0, 0)) == 0.0
  assert float(one_run.one_run_epsilon(1000, 0, 0, 1e-5)) == 0.0
  assert float(one_run.one_run_epsilon_ceiling(1000, 0)) == 0.0
  assert float(one_run.one_run_epsilon(0, 0, 0)) == 0.0
  # Random guessing: v = r / 2 rejects nothing; one standard deviation above stays small.
  assert float(one_run.one_run_epsilon(1000, 1000, 500)) == 0.0
  assert float(one_run.one_run_epsilon(1000, 1000, 516)) < 0.05
  # p-value of v = 0 is 1 for any epsilon.
  assert float(one_run.one_run_p_value(100, 100, 0, 3.0, 1e-3)) == 1.0


MONOTONE_CASES = [(1000, 1000, 900, 0.0), (1000, 1000, 900, 1e-5), (1000, 100, 100, 1e-4),
                  (200, 200, 150, 1e-3), (1000, 50, 45, 3e-3), (1000, 1000, 600, 1e-6)]
EPS_GRID = np.linspace(0.0, 12.0, 241)


@pytest.fixture(scope="module")
def p_value_curves():
  m, r, v, delta = (np.array(col)[:, None] for col in zip(*MONOTONE_CASES))
  return np.asarray(one_run.one_run_p_value(m, r, v, EPS_GRID[None, :], delta))


@pytest.mark.parametrize("case", range(len(MONOTONE_CASES)))
def test_p_value_monotone_in_epsilon(p_value_curves, case):
  p = p_value_curves[case]
  assert np.all(np.diff(p) >= -1e-12 * p[1:])
  assert p[0] < 0.5 and p[-1] > 0.99


def test_delta_shrinks_the_bound(p_value_curves):
  zero = float(one_run.one_run_epsilon(1000, 1000, 900))
  small = float(one_run.one_run_epsilon(1000, 1000, 900, 1e-5))
  large = float(one_run.one_run_epsilon(1000, 1000, 900, 1e-4))
  assert large < small < zero
  # Rows 0 and 1 differ only in delta = 0 vs 1e-5: the delta term raises the p-value.
  assert np.all(p_value_curves[1] >= p_value_curves[0])
  small_p = p_value_curves[1] < 0.5
  assert small_p.sum() > 40  # epsilon up to about 2
  assert np.all(p_value_curves[1][small_p] > p_value_curves[0][small_p])


def test_broadcasting_jit_and_vmap():
  r = np.array([100, 400, 1000])
  v = np.minimum(np.array([[90], [350], [60]]), r)  # (3, 1) x (3,) -> (3, 3)
  got = np.asarray(one_run.one_run_epsilon(1000, r, v))
  assert got.shape == (3, 3)
  for i in range(3):
    for j in range(3):
      want = ref_epsilon(1000, int(r[j]), int(v[i, j]), 0.0, 0.05)
      assert got[i, j] == pytest.approx(want, rel=1e-6, abs=1e-9)
  jitted = jax.jit(one_run.one_run_epsilon, static_argnums=0)
  np.testing.assert_allclose(jitted(1000, r, v[1], 1e-5),
                             [ref_epsilon(1000, int(a), int(b), 1e-5, 0.05)
                              for a, b in zip(r, v[1])], rtol=1e-6)
  mapped = jax.vmap(lambda vv: one_run.one_run_epsilon(1000, 1000, vv))
  vv = jnp.array([700.0, 800.0, 900.0])
  np.testing.assert_allclose(mapped(vv), [ref_epsilon(1000, 1000, int(x), 0.0, 0.05)
                                          for x in vv], rtol=1e-6)


def test_float32():
  with jax.enable_x64(False):
    got = one_run.one_run_epsilon(1000, 1000, 880, 1e-5)
    assert got.dtype == jnp.float32
  np.testing.assert_allclose(float(got), ref_epsilon(1000, 1000, 880, 1e-5, 0.05), rtol=1e-4)


# ----------------------------------------------------------------------------- validity
def _exceedance_limit(significance, reps):
  return significance + 3 * math.sqrt(significance * (1 - significance) / reps)


@pytest.mark.parametrize("true_eps", [0.5, 2.0])
def test_validity_randomized_response(true_eps):
  """Each guess is correct with probability e^eps / (1 + e^eps), independently."""
  m, reps, sig = 1000, 300, 0.05
  rng = np.random.default_rng(1234)
  wins = rng.binomial(m, special.expit(true_eps), size=reps)
  bounds = np.asarray(one_run.one_run_epsilon(m, m, wins, 0.0, sig))
  assert np.mean(bounds > true_eps) <= _exceedance_limit(sig, reps)
  # Power: the bound is not trivially 0 (Bin(1000, q) is tight to about 0.1-0.2 in epsilon).
  assert np.median(bounds) > true_eps - 0.35


def test_validity_from_scores_bonferroni():
  """Scores from per-canary randomized response (eps-DP); guesses swept over the grid."""
  m, reps, sig, true_eps = 1000, 300, 0.05, 2.0
  rng = np.random.default_rng(99)
  member = rng.random((reps, m)) < 0.5
  keep = rng.random((reps, m)) < special.expit(true_eps)
  output = np.where(keep, member, ~member).astype(float)
  scores = output + 0.5 * rng.random((reps, m))  # independent tie-breaking noise
  fn = jax.jit(jax.vmap(lambda s, b: one_run.one_run_epsilon_from_scores(s, b, 0.0, sig)))
  res = fn(jnp.asarray(scores), jnp.asarray(member))
  eps = np.asarray(res.epsilon)
  assert np.mean(eps > true_eps) <= _exceedance_limit(sig, reps)
  assert np.median(eps) > 1.0
  # The batched result of one repetition agrees with the reference at the corrected level.
  grid, correct = np.asarray(res.grid[0]), np.asarray(res.grid_correct[0])
  assert correct[-1] == naive_correct(list(scores[0]), list(member[0]), m, "symmetric")
  want = [ref_epsilon(m, int(r), int(c), 0.0, sig / len(grid)) for r, c in zip(grid, correct)]
  np.testing.assert_allclose(res.grid_epsilon[0], want, rtol=1e-6, atol=1e-9)


# ----------------------------------------------------------------------------- from scores
@pytest.mark.parametrize("mode", ["symmetric", "top"])
def test_from_scores_counts_and_bounds_match_naive(mode):
  rng = np.random.default_rng(7)
  m = 400
  member = rng.random(m) < 0.5
  scores = np.round(member * 1.5 + rng.normal(size=m), 1)  # rounding creates ties
  grid = np.array([1, 7, 40, 120, 255, 400])
  res = one_run.one_run_epsilon_from_scores(scores, member, 1e-4, 0.05, num_guesses=grid,
                                            mode=mode)
  want_correct = [naive_correct(list(scores), list(member), int(r), mode) for r in grid]
  np.testing.assert_array_equal(np.asarray(res.grid), grid)
  np.testing.assert_array_equal(np.asarray(res.grid_correct), want_correct)
  per_test = 0.05 / len(grid)
  assert float(res.per_test_significance) == pytest.approx(per_test)
  want_eps = [ref_epsilon(m, int(r), c, 1e-4, per_test) for r, c in zip(grid, want_correct)]
  np.testing.assert_allclose(res.grid_epsilon, want_eps, rtol=1e-6, atol=1e-9)
  best = int(np.argmax(want_eps))
  assert float(res.epsilon) == pytest.approx(max(want_eps), rel=1e-6)
  assert int(res.num_guesses) == grid[best]
  assert int(res.num_correct) == want_correct[best]
  assert float(res.epsilon_ceiling) == pytest.approx(
      ref_epsilon(m, int(grid[best]), int(grid[best]), 1e-4, per_test), rel=1e-6)


def test_from_scores_correction_and_perfect_attack():
  rng = np.random.default_rng(3)
  m = 500
  member = rng.random(m) < 0.5
  scores = member + 0.8 * rng.normal(size=m)
  honest = one_run.one_run_epsilon_from_scores(scores, member)
  naive = one_run.one_run_epsilon_from_scores(scores, member, correction="none")
  assert len(honest.grid) > 20 and honest.grid[0] == 10 and honest.grid[-1] == m
  assert float(naive.per_test_significance) == 0.05
  assert np.all(np.asarray(naive.grid_epsilon) >= np.asarray(honest.grid_epsilon))
  assert float(naive.epsilon) > float(honest.epsilon) > 0.0
  assert float(honest.epsilon) <= float(honest.epsilon_ceiling)
  # Perfect separation: all guesses correct at every r, so the largest r wins.
  balanced = rng.permutation(np.arange(m) < m // 2)  # symmetric guesses are then all right
  perfect = one_run.one_run_epsilon_from_scores(balanced.astype(float), balanced)
  np.testing.assert_array_equal(perfect.grid_correct, perfect.grid)
  assert int(perfect.num_guesses) == m
  np.testing.assert_allclose(perfect.epsilon, perfect.epsilon_ceiling, rtol=1e-12)
  # delta = 0 closed form of the ceiling: q^m = corrected level.
  level = 0.05 / len(perfect.grid)
  np.testing.assert_allclose(perfect.epsilon, special.logit(level ** (1 / m)), rtol=1e-9)
  # Anti-correlated scores: symmetric guesses are mostly wrong, nothing is rejected.
  wrong = one_run.one_run_epsilon_from_scores(-member.astype(float), member)
  assert float(wrong.epsilon) == 0.0


def test_default_grid():
  assert list(one_run.default_guess_grid(1)) == [1]
  assert list(one_run.default_guess_grid(5)) == [5]
  g = one_run.default_guess_grid(100_000)
  assert g[0] == 10 and g[-1] == 100_000 and len(g) == 30 and np.all(np.diff(g) > 0)


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize("call,match", [
    (lambda: one_run.one_run_epsilon(100, 50, 60), "num_correct=60 exceeds num_guesses=50"),
    (lambda: one_run.one_run_epsilon(100, 150, 60), "num_guesses=150 exceeds num_examples"),
    (lambda: one_run.one_run_epsilon(100, -1, 0), "num_guesses=-1"),
    (lambda: one_run.one_run_epsilon(100, 50, 2.5), "whole number"),
    (lambda: one_run.one_run_epsilon(100, 50, 20, significance=1.0), "significance=1"),
    (lambda: one_run.one_run_epsilon(100, 50, 20, significance=0.0), "significance=0"),
    (lambda: one_run.one_run_epsilon(100, 50, 20, delta=1.0), "delta=1"),
    (lambda: one_run.one_run_epsilon(100, 50, 20, delta=-0.1), "delta=-0.1"),
    (lambda: one_run.one_run_epsilon(100, [50, 60], [20, 30, 40]), "do not broadcast"),
    (lambda: one_run.one_run_p_value(100, 50, 20, -1.0), "epsilon=-1"),
    (lambda: one_run.one_run_epsilon_ceiling(100, 101), "num_guesses=101"),
    (lambda: one_run.one_run_epsilon_from_scores([], []), "scores is empty"),
    (lambda: one_run.one_run_epsilon_from_scores([1.0, 2.0], [True]), "shape"),
    (lambda: one_run.one_run_epsilon_from_scores([1.0, np.nan], [True, False]), "scores=nan"),
    (lambda: one_run.one_run_epsilon_from_scores([1.0, 2.0], [2, 0]), "is_member"),
    (lambda: one_run.one_run_epsilon_from_scores([1.0, 2.0], [1, 0], mode="best"), "mode"),
    (lambda: one_run.one_run_epsilon_from_scores([1.0, 2.0], [1, 0], correction="holm"),
     "correction"),
    (lambda: one_run.one_run_epsilon_from_scores([1.0, 2.0], [1, 0], num_guesses=[3]),
     "num_guesses=3 exceeds num_examples=2"),
    (lambda: one_run.one_run_epsilon_from_scores([1.0, 2.0], [1, 0], num_guesses=[]),
     "num_guesses is empty"),
    (lambda: one_run.one_run_epsilon_from_scores([1.0, 2.0], [1, 0], significance=2.0),
     "significance=2"),
])
def test_validation_errors(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def _vectorised_reference_p_value(m, r, v, eps, delta):
  """Eqs. 7-9 with scipy, alpha over every i = 1..v at once (cdf differences)."""
  q = special.expit(eps)
  i = np.arange(1, v + 1)
  window = stats.binom.cdf(v - 1, r, q) - stats.binom.cdf(v - i - 1, r, q)
  return min(1.0, stats.binom.sf(v - 1, r, q) + 2.0 * np.max(window / i) * m * delta)


@pytest.mark.parametrize("eps", [0.5, 0.585, 0.6967])
def test_p_value_where_every_tail_probability_underflows(eps):
  """v ~ 35 standard deviations above the mean: beta and the pmf near v are below the smallest
  double, while alpha comes from windows reaching the mean. A comparison of underflowed zeros
  would end the search for alpha's maximiser at once with alpha = 0."""
  m, r, v, delta = 10**6, 137_382, 99_717, 1e-5
  want = _vectorised_reference_p_value(m, r, v, eps, delta)
  assert want > 1e-3
  assert float(one_run.one_run_p_value(m, r, v, eps, delta)) == pytest.approx(want, rel=1e-9)


def test_epsilon_at_large_m_against_vectorised_reference():
  m, r, v, delta, sig = 10**6, 137_382, 99_717, 1e-5, 0.05 / 30
  got = float(one_run.one_run_epsilon(m, r, v, delta, sig))
  assert got > 0.5
  assert _vectorised_reference_p_value(m, r, v, got, delta) <= sig * (1 + 1e-12)
  assert _vectorised_reference_p_value(m, r, v, got * (1 + 1e-6), delta) > sig
