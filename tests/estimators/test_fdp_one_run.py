"""Tests for dpaudit.estimators.fdp_one_run (Mahloujifar, Melis & Chaudhuri, ICML 2025).

The reference below runs the paper's recursion as written, one step at a time in plain Python
(``statistics.NormalDist`` for the normal quantile, ``math.erfc`` for the CDF), with no early
stop, and finds the largest rejected mu and the probability bound by plain bisection.
"""

import functools
import math
import statistics

import jax
import numpy as np
import pytest
from scipy import integrate, stats

from dpaudit.estimators import fdp_one_run, one_run

NORMAL = statistics.NormalDist()


# ----------------------------------------------------------------------------- reference
def ref_f_bar(x, mu):
  """f(1 - x) for mu-GDP: Phi(Phi^{-1}(x) - mu)."""
  if x >= 1.0:
    return 1.0
  return 0.5 * math.erfc(-(NORMAL.inv_cdf(x) - mu) / math.sqrt(2.0))


def ref_total(m, r, v, k, mu, gamma):
  """a_0 + b_0 of the recursion, from a_v = gamma v / m, b_v = gamma (r - v) / m."""
  a, b = gamma * v / m, gamma * (r - v) / m
  for i in range(v - 1, -1, -1):
    b_next = max(b, (k - 1) * ref_f_bar(a, mu))
    a = a + i / (r - i) * (b_next - b)
    b = b_next
  return a + b


def ref_rejects(m, r, v, k, mu, gamma):
  return ref_total(m, r, v, k, mu, gamma) > r / m


def ref_mu(m, r, v, k, beta=0.05):
  if not ref_rejects(m, r, v, k, 0.0, beta):
    return 0.0
  lo, hi = 0.0, 1.0
  while ref_rejects(m, r, v, k, hi, beta):
    lo, hi = hi, 2.0 * hi
  for _ in range(64):
    mid = 0.5 * (lo + hi)
    if ref_rejects(m, r, v, k, mid, beta):
      lo = mid
    else:
      hi = mid
  return lo


def ref_p_value(m, r, v, k, mu):
  if not ref_rejects(m, r, v, k, mu, 1.0):
    return 1.0
  lo, hi = -700.0, 0.0  # log gamma
  for _ in range(64):
    mid = 0.5 * (lo + hi)
    if ref_rejects(m, r, v, k, mu, math.exp(mid)):
      hi = mid
    else:
      lo = mid
  return math.exp(hi)


CASES = [  # m, r, v, k
    (1000, 100, 95, 2), (1000, 100, 100, 2), (100, 100, 70, 2), (1000, 100, 50, 10),
    (200, 40, 30, 4), (50, 20, 20, 3), (1000, 100, 60, 2), (1000, 100, 50, 2),
]


PRIVACYGUARD = {(1000, 100, 100): 6.13, (1000, 100, 95): 3.73, (10000, 1000, 950): 4.25}
"""Meta PrivacyGuard's FDPAnalysisNode (Gaussian family, delta = 1e-6, threshold 0.05): it scans
noise levels sigma = 0.001 + 0.01 i (mu = 1 / sigma) upwards and reports epsilon at the first
sigma the audit rejects, to 0.001 (its bisection's upper end), here to two decimals."""
R_GRID = np.arange(60, 101, 10)
BATCH = {  # name: (m, r, v, k, significance), one array each; solved in one call
    "reference": [c + (0.05,) for c in CASES],
    "privacyguard": [c + (2, 0.05) for c in PRIVACYGUARD],
    "by_v": [(1000, 100, v, 2, 0.05) for v in range(50, 101)],
    "fixed_v": [(1000, r, 60, 2, 0.05) for r in R_GRID],
    "same_rate": [(1000, r, (9 * r) // 10, 2, 0.05) for r in R_GRID],
    "levels": [(1000, 100, 95, 2, beta) for beta in (0.2, 0.05, 0.01)],
    "edge": [(10, 0, 0, 2, 0.05), (10, 10, 0, 2, 0.05), (10, 10, 10, 2, 0.05), (0, 0, 0, 2, 0.05)],
}


@functools.cache
def batch_mu() -> dict:
  """fdp_one_run_mu of every problem of BATCH, by name (one program for all the tests)."""
  rows = [row for rows in BATCH.values() for row in rows]
  m, r, v, k, beta = (np.array(c) for c in zip(*rows))
  mu = np.asarray(fdp_one_run.fdp_one_run_mu(m, r, v, beta, num_candidates=k))
  out, start = {}, 0
  for name, rows in BATCH.items():
    out[name], start = mu[start:start + len(rows)], start + len(rows)
  return out


def test_mu_matches_reference_recursion():
  got = batch_mu()["reference"]
  for case, value in zip(CASES, got):
    want = ref_mu(*case)
    if want == 0.0:
      assert value == 0.0, case
    else:
      assert value == pytest.approx(want, rel=1e-8), case
      assert value <= want * (1 + 1e-12), case  # the lower end of the bracket
  assert np.count_nonzero(got) == len(CASES) - 1  # (1000, 100, 50): half right, nothing rejected


@pytest.mark.parametrize("case,mu", [((1000, 100, 95, 2), 0.5), ((200, 40, 30, 4), 0.3),
                                     ((50, 20, 20, 3), 0.0)])
def test_p_value_matches_reference(case, mu):
  m, r, v, k = case
  got = float(fdp_one_run.fdp_one_run_p_value(m, r, v, mu, num_candidates=k))
  assert got == pytest.approx(ref_p_value(m, r, v, k, mu), rel=1e-8)


def test_mu_is_where_the_p_value_crosses_significance():
  mu = float(batch_mu()["reference"][CASES.index((1000, 100, 95, 2))])
  p = fdp_one_run.fdp_one_run_p_value(1000, 100, 95, np.array([mu * (1 - 1e-7), mu * (1 + 1e-7)]))
  assert p[0] <= 0.05 < p[1]


# ----------------------------------------------------------------------------- validity
def test_bound_at_mu_zero_covers_blind_guessing():
  """At mu = 0 the output says nothing: V ~ Binomial(r, 1/k) exactly, for any guesses."""
  for m, r, v, k in [(100, 50, 30, 2), (1000, 100, 60, 2), (100, 50, 20, 4), (30, 30, 30, 2)]:
    bound = float(fdp_one_run.fdp_one_run_p_value(m, r, v, 0.0, num_candidates=k))
    assert bound >= stats.binom.sf(v - 1, r, 1 / k)


def _gaussian_argmax_accuracy(mu, k):
  """Pr[the marked one of k N(0, 1) scores, shifted by mu / sqrt(2), is the largest]: a
  mu-GDP mechanism (a change of secret moves two scores by mu / sqrt(2))."""
  shift = mu / math.sqrt(2.0)
  value, _ = integrate.quad(lambda x: stats.norm.pdf(x - shift) * stats.norm.cdf(x) ** (k - 1),
                            -np.inf, np.inf)
  return value


@pytest.mark.parametrize("m,r,v,k,mu", [(1000, 100, 80, 2, 1.0), (200, 50, 45, 2, 2.0),
                                        (500, 50, 30, 4, 1.5), (100, 100, 100, 2, 3.0)])
def test_bound_covers_independent_gaussian_guesses(m, r, v, k, mu):
  """Guesses on r fixed canaries, each right independently with the accuracy of the best test
  of a mu-GDP Gaussian mechanism: V ~ Binomial(r, p) must not exceed the bound's tail."""
  p = _gaussian_argmax_accuracy(mu, k)
  if k == 2:
    assert p == pytest.approx(stats.norm.cdf(mu / 2), rel=1e-9)
  bound = float(fdp_one_run.fdp_one_run_p_value(m, r, v, mu, num_candidates=k))
  assert bound >= stats.binom.sf(v - 1, r, p)


def _membership_audits(rng, n, m, r, mu):
  """n one-run audits of the Gaussian mechanism (score N(mu * included, 1), mu-GDP per
  canary): "member" for the r/2 highest scores, "non-member" for the r/2 lowest."""
  included = rng.random((n, m)) < 0.5
  order = np.argsort(-rng.normal(mu * included, 1.0), axis=1)
  top = np.take_along_axis(included, order[:, :r // 2], axis=1).sum(axis=1)
  bottom = (~np.take_along_axis(included, order[:, m - r // 2:], axis=1)).sum(axis=1)
  return top + bottom


def _reconstruction_audits(rng, n, m, r, k, mu):
  """n audits of a k-candidate Gaussian mechanism (the secret's score shifted by mu / sqrt(2),
  mu-GDP): guess the argmax on the r canaries with the largest margin."""
  secret = rng.integers(0, k, (n, m))
  scores = rng.normal(size=(n, m, k))
  np.put_along_axis(scores, secret[..., None],
                    np.take_along_axis(scores, secret[..., None], 2) + mu / math.sqrt(2.0), 2)
  ordered = np.sort(scores, axis=2)
  chosen = np.argsort(ordered[..., -2] - ordered[..., -1], axis=1)[:, :r]
  right = np.argmax(scores, axis=2) == secret
  return np.take_along_axis(right, chosen, axis=1).sum(axis=1)


def test_coverage_on_simulated_gaussian_audits():
  """The reported mu exceeds the true mu in at most a fraction beta of the audits: the
  Clopper-Pearson lower limit (99.9%) of the observed miss rate must not exceed beta."""
  rng = np.random.default_rng(0)
  beta, n = 0.05, 1500
  truth = np.array([1.0] * n + [2.0] * n)
  v = np.concatenate([_membership_audits(rng, n, 1000, 100, 1.0),
                      _reconstruction_audits(rng, n, 300, 60, 4, 2.0)])
  m = np.array([1000] * n + [300] * n)
  r = np.array([100] * n + [60] * n)
  k = np.array([2] * n + [4] * n)
  reported = np.asarray(fdp_one_run.fdp_one_run_mu(m, r, v, beta, num_candidates=k))
  assert np.median(reported[:n]) > 0.3 and np.median(reported[n:]) > 0.5  # not vacuous
  for part in (slice(0, n), slice(n, 2 * n)):
    misses = int(np.sum(reported[part] > truth[part]))
    lower = stats.beta.ppf(0.001, misses, n - misses + 1) if misses else 0.0
    assert lower <= beta, (part, misses)


# ----------------------------------------------------------------------------- published
def test_privacyguard_gaussian_numbers():
  """PRIVACYGUARD's epsilons are grid values (sigma steps of 0.01) below the exact bound:
  dpaudit's must be at least as large and within one grid step, and larger than the bound of
  Steinke, Nasr & Jagielski on the same counts."""
  for case, mu_l in zip(PRIVACYGUARD, batch_mu()["privacyguard"]):
    published = PRIVACYGUARD[case]
    eps_l = float(fdp_one_run.fdp_one_run_epsilon(*case, 1e-6))
    assert eps_l == pytest.approx(float(fdp_one_run.gdp_epsilon(mu_l, 1e-6)), rel=1e-8)
    index = math.ceil((1.0 / mu_l - 0.001) / 0.01)  # first grid sigma >= 1 / mu_L: rejected
    on_grid = float(fdp_one_run.gdp_epsilon(1.0 / (0.001 + 0.01 * index), 1e-6))
    previous = float(fdp_one_run.gdp_epsilon(1.0 / (0.001 + 0.01 * (index - 1)), 1e-6))
    assert abs(on_grid - published) <= 0.006, case  # their grid point, reproduced
    assert eps_l >= published - 0.006, case  # at least the grid value (rounding aside)
    assert eps_l - published <= previous - on_grid + 0.006, case  # within one grid step
    assert eps_l > float(one_run.one_run_epsilon(*case, 1e-6)), case


# ----------------------------------------------------------------------------- behaviour
def test_monotone_in_correct_guesses_and_guesses():
  got = batch_mu()
  by_v, fixed_v, same_rate, levels = got["by_v"], got["fixed_v"], got["same_rate"], got["levels"]
  assert np.all(np.diff(by_v) >= 0) and by_v[0] == 0 and by_v[-1] > 1
  # More wrong guesses (v fixed) can only weaken the evidence; more guesses at the same
  # accuracy strengthen it; a smaller significance level asks for more evidence.
  assert np.all(np.diff(fixed_v) <= 0) and fixed_v[0] > 0
  assert np.all(np.diff(same_rate) > 0)
  assert np.all(np.diff(levels) < 0)


def test_edge_counts():
  assert list(batch_mu()["edge"] > 0) == [False, False, True, False]
  assert float(fdp_one_run.fdp_one_run_p_value(10, 0, 0, 1.0)) == 1.0


def test_broadcasting_and_transforms():
  mu = fdp_one_run.fdp_one_run_mu(1000, np.array([[100], [96]]), np.array([95, 90]))
  assert mu.shape == (2, 2)
  jitted = jax.jit(fdp_one_run.fdp_one_run_mu)(1000, 100, 95)
  assert float(jitted) == pytest.approx(float(mu[0, 0]), rel=1e-12)
  mapped = jax.vmap(fdp_one_run.fdp_one_run_mu, in_axes=(None, None, 0))(1000, 100,
                                                                          np.array([95, 90]))
  np.testing.assert_allclose(mapped, mu[0], rtol=1e-12)


def test_from_scores_sweeps_the_one_run_guesses():
  rng = np.random.default_rng(3)
  member = rng.random(400) < 0.5
  scores = rng.normal(1.5 * member, 1.0)
  grid = np.array([10, 40, 100, 200, 400])
  got = fdp_one_run.fdp_one_run_from_scores(scores, member, 1e-5, num_guesses=grid)
  snj = one_run.one_run_epsilon_from_scores(scores, member, 1e-5, num_guesses=grid)
  np.testing.assert_array_equal(got.grid_correct, snj.grid_correct)  # the same guesses
  assert float(got.per_test_significance) == pytest.approx(0.05 / len(grid))
  want = fdp_one_run.fdp_one_run_mu(400, grid, np.asarray(got.grid_correct).astype(int),
                                    0.05 / len(grid))
  np.testing.assert_allclose(got.grid_mu, want, rtol=1e-12)
  best = int(np.argmax(want))
  assert float(got.mu) == pytest.approx(float(want[best]), rel=1e-12)
  assert int(got.num_guesses) == grid[best]
  assert float(got.epsilon) == pytest.approx(float(fdp_one_run.gdp_epsilon(want[best], 1e-5)),
                                             rel=1e-12)
  assert not got.optimistic
  loose = fdp_one_run.fdp_one_run_from_scores(scores, member, 1e-5, num_guesses=grid,
                                              correction="none")
  assert loose.optimistic and float(loose.mu) >= float(got.mu)


# ----------------------------------------------------------------------------- Gaussian DP
def test_gdp_delta_and_epsilon():
  mu = np.array([0.5, 1.0, 2.0, 4.0])
  eps = np.array([0.1, 1.0, 3.0, 10.0])
  want = stats.norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
  np.testing.assert_allclose(fdp_one_run.gdp_delta(mu, eps), want, rtol=1e-9)
  for delta in (1e-3, 1e-6, 1e-10):
    back = fdp_one_run.gdp_epsilon(mu, delta)
    np.testing.assert_allclose(fdp_one_run.gdp_delta(mu, back), delta, rtol=1e-8)
  assert float(fdp_one_run.gdp_epsilon(0.1, 0.5)) == 0.0  # delta(0) = 2 Phi(mu/2) - 1 < 0.5
  assert float(fdp_one_run.gdp_epsilon(1.0, 0.0)) == np.inf
  assert float(fdp_one_run.gdp_epsilon(0.0, 1e-6)) == 0.0
  assert np.all(np.diff(fdp_one_run.gdp_epsilon(np.linspace(0.1, 5, 20), 1e-6)) > 0)


def test_gdp_tradeoff_curve():
  alphas = np.array([0.0, 1e-12, 0.05, 0.5, 0.9, 1.0])
  got = fdp_one_run.gdp_tradeoff_curve(1.5, alphas)
  np.testing.assert_allclose(got, stats.norm.cdf(stats.norm.isf(alphas) - 1.5), rtol=1e-12,
                             atol=1e-300)


@pytest.mark.parametrize("call,name", [
    (lambda: fdp_one_run.fdp_one_run_mu(10, 11, 5), "num_guesses"),
    (lambda: fdp_one_run.fdp_one_run_mu(10, 5, 6), "num_correct"),
    (lambda: fdp_one_run.fdp_one_run_mu(10, 5, 2.5), "num_correct"),
    (lambda: fdp_one_run.fdp_one_run_mu(-1, 0, 0), "num_examples"),
    (lambda: fdp_one_run.fdp_one_run_mu(10, 5, 3, 1.0), "significance"),
    (lambda: fdp_one_run.fdp_one_run_mu(10, 5, 3, num_candidates=1), "num_candidates"),
    (lambda: fdp_one_run.fdp_one_run_mu(10, 5, 3, num_candidates=2.5), "num_candidates"),
    (lambda: fdp_one_run.fdp_one_run_mu(np.ones(3), np.ones(2), 1), "shapes"),
    (lambda: fdp_one_run.fdp_one_run_epsilon(10, 5, 3, 1.0), "delta"),
    (lambda: fdp_one_run.fdp_one_run_p_value(10, 5, 3, -0.1), "mu"),
    (lambda: fdp_one_run.fdp_one_run_p_value(10, 5, 3, np.inf), "mu"),
    (lambda: fdp_one_run.gdp_delta(1.0, -1.0), "epsilon"),
    (lambda: fdp_one_run.gdp_epsilon(float("nan"), 1e-5), "mu"),
    (lambda: fdp_one_run.gdp_tradeoff_curve(1.0, [0.5, 1.5]), "alphas"),
    (lambda: fdp_one_run.fdp_one_run_from_scores([0.1, np.nan], [1, 0], 1e-5), "scores"),
    (lambda: fdp_one_run.fdp_one_run_from_scores([0.1, 0.2], [1, 0], 1e-5, correction="x"),
     "correction"),
])
def test_bad_inputs_name_the_argument(call, name):
  with pytest.raises(ValueError, match=name):
    call()


# ----------------------------------------------------------------------------- DP-SGD curves
def ref_lines_f_bar(x, epsilons, deltas):
  """f(1 - x) for f(x) = max_j max(0, 1 - d_j - e^{e_j} x, e^{-e_j}(1 - d_j - x)), as written."""
  y = 1.0 - min(x, 1.0)
  return max(0.0, max(max(1.0 - d - math.exp(e) * y, math.exp(-e) * (1.0 - d - y))
                      for e, d in zip(epsilons, deltas)))


def ref_lines_ratio(m, r, v, k, beta, epsilons, deltas):
  """(a_0 + b_0 - beta r/m) / ((1 - beta) r/m) of the recursion with that curve."""
  a, b = beta * v / m, beta * (r - v) / m
  for i in range(v - 1, -1, -1):
    b_next = max(b, (k - 1) * ref_lines_f_bar(a, epsilons, deltas))
    a = a + i / (r - i) * (b_next - b)
    b = b_next
  return (a + b - beta * r / m) / ((1 - beta) * r / m)


@functools.cache
def sgm_profile():
  """The privacy profile of DP-SGD (sigma 1.5, q 0.1, T 100), at most 300 points of it."""
  from dpaudit.accounting import dpsgd
  eps, delta = dpsgd.dpsgd_privacy_profile(1.5, 0.1, 100, pld_discretization=1e-2)
  pick = np.unique(np.linspace(0, len(eps) - 1, 300).round().astype(int))
  return eps[pick], delta[pick]


def test_run_curve_recursion_matches_reference():
  eps, delta = sgm_profile()
  xs, ys = fdp_one_run._profile_vertices(eps, delta)
  cases = [(1000, 100, 95, 2, 0.05), (1000, 100, 97, 2, 0.01), (50, 20, 18, 3, 0.05),
           (1000, 100, 90, 2, 0.05), (1000, 100, 97, 2, 0.05), (200, 40, 36, 4, 0.05)]
  m, r, v, k, beta = (np.array(c, float) for c in zip(*cases))
  got = np.asarray(fdp_one_run._curve_ratio_jit(m, r, v, k, beta, xs, ys))
  want = np.array([ref_lines_ratio(*case, eps, delta) for case in cases])
  np.testing.assert_allclose(got[:4], want[:4], rtol=1e-8, atol=1e-15)
  # Past the cap the recursion stops (the test rejects; the statistic only grows).
  assert np.all(got[4:] > fdp_one_run._CAP) and np.all(want[4:] > fdp_one_run._CAP)
  assert got[0] > 1.0 > got[2] > got[1] > 0.0 == got[3]  # both outcomes, and no increment


def test_run_curve_lies_below_the_gaussian_curve():
  """One full-batch step is exactly (1/sigma)-GDP; the PLD-derived curve must lie below it."""
  from dpaudit.accounting import dpsgd
  eps, delta = dpsgd.dpsgd_privacy_profile(0.8, 1.0, 1, pld_discretization=1e-3)
  xs, ys = fdp_one_run._profile_vertices(eps, delta)
  x = np.concatenate([np.geomspace(1e-12, 0.5, 200), np.linspace(0.5, 1.0, 50)])
  curve = np.interp(x, xs, ys)  # f_bar(x) = f(1 - x)
  gaussian = stats.norm.cdf(stats.norm.ppf(x) - 1.0 / 0.8)
  assert np.all(curve <= gaussian * (1 + 1e-9) + 1e-15)
  assert np.max(gaussian - curve) < 2e-3  # and close to it


def test_dpsgd_bound_for_one_gaussian_step_is_the_gaussian_one():
  """With q = 1 and T = 1 the run is (1/sigma)-GDP: its bound is 1/mu_L, from above (the PLD
  curve lies below the Gaussian one), and epsilon at most the Gaussian family's."""
  case = (1000, np.array([100, 100]), np.array([95, 50]))
  got = fdp_one_run.fdp_one_run_dpsgd(*case, sampling_rate=1.0, num_steps=1, delta=1e-6)
  mu = float(fdp_one_run.fdp_one_run_mu(1000, 100, 95))
  assert 1.0 / mu <= got.noise_multiplier_upper_bound <= (1.0 / mu) * (1 + 1e-3)
  gaussian = float(fdp_one_run.gdp_epsilon(mu, 1e-6))
  assert gaussian * (1 - 1e-3) <= got.epsilon <= gaussian * (1 + 1e-9)
  assert got.ratio[0] > 1.0 >= got.ratio[1] and not got.at_search_limit


def test_dpsgd_bound_monotone_and_edges(monkeypatch):
  run = dict(sampling_rate=0.1, num_steps=100, delta=1e-5)
  bounds = [fdp_one_run.fdp_one_run_dpsgd(1000, np.array([100, 100]), np.array([v, 90]), **run)
            for v in (94, 100)]
  sigmas = [b.noise_multiplier_upper_bound for b in bounds]
  epsilons = [b.epsilon for b in bounds]
  assert sigmas[0] > sigmas[1] and epsilons[0] < epsilons[1]
  from dpaudit.accounting import dpsgd
  assert epsilons[1] == pytest.approx(
      dpsgd.dpsgd_epsilon(sigmas[1], 0.1, 100, 1e-5, accountant="pld", pld_discretization=1e-3),
      rel=1e-12)
  # The statistic grows with the noise multiplier (a more private curve is easier to reject).
  args = (np.array([1000.0, 1000.0]), np.array([100.0, 100.0]), np.array([96.0, 90.0]),
          np.full(2, 2.0), np.full(2, 0.05))
  ratios = [np.asarray(fdp_one_run._curve_ratio_jit(
      *args, *fdp_one_run._run_curve(s, 0.1, 100, "add_or_remove_one", 1e-3)))
      for s in (1.3, 1.4, 1.45, 1.5)]
  first = np.array(ratios)[:, 0]  # up to the cap, where the recursion stops (rejected)
  assert first[0] == 0.0 < first[1] < 1.0 < fdp_one_run._CAP < first[2] and first[3] > 1.0
  nothing = fdp_one_run.fdp_one_run_dpsgd(1000, np.array([100, 100]), np.array([50, 40]), **run)
  assert nothing.noise_multiplier_upper_bound == np.inf and nothing.epsilon == 0.0
  monkeypatch.setattr(fdp_one_run, "_NOISE_RANGE", (1.0, 1e3))
  capped = fdp_one_run.fdp_one_run_dpsgd(1000, np.array([100, 100]), np.array([100, 90]),
                                         sampling_rate=1.0, num_steps=1, delta=1e-6)
  assert capped.at_search_limit and capped.noise_multiplier_upper_bound == 1.0


def test_dpsgd_from_scores_tests_the_grid_at_once():
  rng = np.random.default_rng(3)
  member = rng.random(400) < 0.5
  scores = rng.normal(1.5 * member, 1.0)
  grid = np.array([40, 100])
  run = dict(sampling_rate=0.1, num_steps=100)
  got = fdp_one_run.fdp_one_run_dpsgd_from_scores(scores, member, 1e-5, num_guesses=grid, **run)
  order = np.argsort(-scores, kind="stable")  # the one-run guesses: top half "member",
  ranked = member[order]  # bottom half "non-member", ties by index
  want = [ranked[:(r + 1) // 2].sum() + (~ranked[len(ranked) - r // 2:]).sum() for r in grid]
  np.testing.assert_array_equal(got.grid_correct, want)
  assert float(got.per_test_significance) == pytest.approx(0.05 / 2) and not got.optimistic
  counts = fdp_one_run.fdp_one_run_dpsgd(400, grid, np.asarray(got.grid_correct).astype(int),
                                         delta=1e-5, significance=0.05 / 2, **run)
  assert got.noise_multiplier_upper_bound == counts.noise_multiplier_upper_bound < np.inf
  assert int(got.num_guesses) == grid[int(np.argmax(counts.ratio))]
  loose = fdp_one_run.fdp_one_run_dpsgd_from_scores(scores, member, 1e-5, num_guesses=grid,
                                                    correction="none", **run)
  assert loose.optimistic and loose.epsilon >= got.epsilon


def test_host_threads_keep_a_thread_local_x64_setting(monkeypatch):
  # A large CPU batch is searched in host threads; under a caller's thread-local
  # jax.enable_x64(True) (global x64 off) they must compute in float64 too, as one thread does.
  # _CHUNK is read when a program is traced: programs of these bucket sizes that earlier tests
  # compiled with the default are dropped before and after.
  clear = lambda: [getattr(fdp_one_run._mu_jit, kind).clear_cache()
                   for kind in ("fusion", "loop", "plain")]
  clear()
  monkeypatch.setattr(fdp_one_run, "_CHUNK", 8)
  rng = np.random.default_rng(3)
  r = rng.integers(20, 41, 40).astype(float)
  args = (rng.integers(1000, 5001, 40).astype(float), r, np.floor(0.9 * r))
  jax.config.update("jax_enable_x64", False)  # global off (what worker threads see) ...
  try:
    with jax.enable_x64(True):  # ... and on in the caller's thread only
      threaded = np.asarray(fdp_one_run.fdp_one_run_mu(*args, 0.05))
      monkeypatch.setattr(fdp_one_run, "_THREADS", 1)
      single = np.asarray(fdp_one_run.fdp_one_run_mu(*args, 0.05))
  finally:
    jax.config.update("jax_enable_x64", True)  # the suite's setting (tests/conftest.py)
    clear()
  assert threaded.dtype == np.float64
  np.testing.assert_array_equal(threaded, single)
