"""Renyi 2-cut and k-cut lower bounds: references, brute force, coverage, limits."""

import warnings

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.proportion import multinomial_proportions_confint

from dpaudit.estimators import renyi_cuts

ORDERS = np.array([1.5, 2.0, 4.0, 10.0, 32.0])


def _mp_binary(p1, p2, alpha):
  p1, p2, a = mpmath.mpf(p1), mpmath.mpf(p2), mpmath.mpf(alpha)
  inner = p1**a * p2**(1 - a) + (1 - p1)**a * (1 - p2)**(1 - a)
  return float(mpmath.log(inner) / (a - 1))


def test_binary_divergence_matches_mpmath():
  for p1, p2 in ((0.3, 0.2), (0.9, 0.5), (1e-4, 3e-4), (0.5, 0.5), (0.0, 0.2)):
    got = renyi_cuts.binary_renyi_divergence(p1, p2, ORDERS)
    want = [_mp_binary(p1, p2, a) for a in ORDERS]
    np.testing.assert_allclose(got, np.maximum(want, 0.0), rtol=1e-12, atol=1e-15)
  assert np.all(np.isinf(renyi_cuts.binary_renyi_divergence(0.3, 0.0, ORDERS)))


def test_discrete_divergence_matches_naive_sum():
  rng = np.random.default_rng(0)
  p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
  p[2] = 0.0
  p /= p.sum()
  for a in ORDERS:
    naive = np.log(np.sum(p[p > 0]**a * q[p > 0]**(1 - a))) / (a - 1)
    assert float(renyi_cuts.renyi_divergence(p, q, a)) == pytest.approx(naive, rel=1e-12)
  assert renyi_cuts.renyi_divergence(p, q, ORDERS).shape == (len(ORDERS),)
  assert float(renyi_cuts.renyi_divergence(p, p, 3.0)) == pytest.approx(0.0, abs=1e-14)


def _cp(k, n, beta):
  lower = 0.0 if k == 0 else scipy.stats.beta.ppf(beta / 2, k, n - k + 1)
  upper = 1.0 if k == n else scipy.stats.beta.isf(beta / 2, k + 1, n - k)
  return lower, upper


@pytest.mark.parametrize("kp,np_,kq,nq", [(3000, 10000, 2000, 10000), (20, 1000, 80, 1000),
                                           (500, 1000, 480, 1000), (0, 500, 40, 500)])
def test_two_cut_is_the_minimum_over_the_confidence_box(kp, np_, kq, nq):
  beta = 0.05
  got = np.asarray(renyi_cuts.renyi_two_cut_lower_bound(kp, np_, kq, nq, ORDERS, beta))
  each = 1 - np.sqrt(1 - beta)
  p_lo, p_hi = _cp(kp, np_, each)
  q_lo, q_hi = _cp(kq, nq, each)
  grid_p = np.linspace(p_lo, p_hi, 101)
  grid_q = np.linspace(q_lo, q_hi, 101)
  for i, a in enumerate(ORDERS):
    values = np.asarray(renyi_cuts.binary_renyi_divergence(grid_p[:, None], grid_q[None, :], a))
    assert got[i] <= values.min() + 1e-12
    assert got[i] >= values.min() - 1e-6 * max(1.0, values.min())
    # Never below the paper's displayed bound (App. C), which bounds the two terms apart.
    paper = np.log(max(p_lo, 1e-300)**a * q_hi**(1 - a)
                   + (1 - p_hi)**a * (1 - q_lo)**(1 - a)) / (a - 1) if p_lo > 0 else -np.inf
    assert got[i] >= max(paper, 0.0) - 1e-12


def test_two_cut_limits():
  # Identical distributions: 0. Perfect separation: finite and large.
  assert np.all(np.asarray(renyi_cuts.renyi_two_cut_lower_bound(500, 1000, 500, 1000, ORDERS))
                == 0.0)
  perfect = np.asarray(renyi_cuts.renyi_two_cut_lower_bound(1000, 1000, 0, 1000, ORDERS))
  assert np.all(np.isfinite(perfect)) and np.all(perfect > 1.0)
  # Scalar order gives a scalar; batches broadcast.
  assert renyi_cuts.renyi_two_cut_lower_bound(10, 100, 3, 100, 2.0).shape == ()
  batch = renyi_cuts.renyi_two_cut_lower_bound(jnp.array([10, 20]), 100, 3, 100, ORDERS)
  assert batch.shape == (2, len(ORDERS))


def _two_cut_violation_probability(p1, p2, n, beta):
  """Exact Pr[2-cut bound > D_alpha(p1 || p2)] per order, by enumerating both binomial counts
  (scipy limits; the bound is the box minimum checked above)."""
  tail = (1 - np.sqrt(1 - beta)) / 2
  def limits(p):
    k = np.arange(int(scipy.stats.binom.ppf(1e-14, n, p)),
                  int(scipy.stats.binom.isf(1e-14, n, p)) + 2)
    lower = np.where(k > 0, scipy.stats.beta.ppf(tail, np.maximum(k, 1), n - k + 1), 0.0)
    upper = np.where(k < n, scipy.stats.beta.isf(tail, k + 1, np.maximum(n - k, 1)), 1.0)
    return lower, upper, scipy.stats.binom.pmf(k, n, p)
  p_lo, p_hi, p_pmf = (x[:, None] for x in limits(p1))
  q_lo, q_hi, q_pmf = (x[None, :] for x in limits(p2))
  above, below = p_lo > q_hi, p_hi < q_lo
  x = np.where(above, p_lo, np.where(below, p_hi, 0.5))
  y = np.where(above, q_hi, np.where(below, q_lo, 0.5))
  bound = np.where((above | below)[..., None],
                   np.asarray(renyi_cuts.binary_renyi_divergence(x, y, ORDERS)), 0.0)
  truth = np.asarray(renyi_cuts.binary_renyi_divergence(p1, p2, ORDERS))
  return np.sum((p_pmf * q_pmf)[..., None] * (bound > truth), axis=(0, 1))


def test_two_cut_coverage_for_known_bernoullis():
  """A fixed set with known probabilities: the bound exceeds the truth about as often as the
  exact enumeration says (0.2-0.3% at beta = 10%: both boxes must err at once), within 4
  binomial standard errors of the 20,000 runs (tests/estimators/test_coverage.py has the
  version that fails at twice the significance)."""
  p1, p2, n, reps, beta = 0.3, 0.2, 2000, 20000, 0.1
  rng = np.random.default_rng(1)
  kp, kq = rng.binomial(n, p1, reps), rng.binomial(n, p2, reps)
  bounds = np.asarray(renyi_cuts.renyi_two_cut_lower_bound(kp, n, kq, n, ORDERS, beta))
  truth = np.asarray(renyi_cuts.binary_renyi_divergence(p1, p2, ORDERS))
  misses = np.mean(bounds > truth, axis=0)
  exact = _two_cut_violation_probability(p1, p2, n, beta)
  assert np.all(exact <= beta)
  assert np.all(np.abs(misses - exact) <= 4 * np.sqrt(exact * (1 - exact) / reps))
  # The harness has power: the plug-in estimate (no confidence) overshoots about half the time.
  plug_in = np.asarray(renyi_cuts.binary_renyi_divergence(kp / n, kq / n, ORDERS))
  assert np.all(np.mean(plug_in > truth, axis=0) > 0.3)


@pytest.mark.filterwarnings("ignore:invalid value encountered in log:RuntimeWarning")
@pytest.mark.parametrize("method,sm_method", [("goodman", "goodman"),
                                              ("sison-glaz", "sison-glaz")])
def test_k_cut_matches_naive_with_statsmodels_intervals(method, sm_method):
  counts_p = np.array([7251, 2221, 465, 58, 5])
  counts_q = np.array([5000, 4000, 850, 140, 10])
  beta = 0.05
  each = 1 - np.sqrt(1 - beta)
  p_lower = multinomial_proportions_confint(counts_p, each, method=sm_method)[:, 0]
  q_upper = multinomial_proportions_confint(counts_q, each, method=sm_method)[:, 1]
  got = np.asarray(renyi_cuts.renyi_k_cut_lower_bound(counts_p, counts_q, ORDERS, beta, method))
  for i, a in enumerate(ORDERS):
    naive = np.log(np.sum(p_lower**a * q_upper**(1 - a))) / (a - 1)
    assert got[i] == pytest.approx(max(naive, 0.0), rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("method", ["goodman", "sison-glaz"])
def test_k_cut_broadcasts_a_batch_and_compiles_one_program(method):
  rng = np.random.default_rng(7)
  counts_p = rng.multinomial(3000, [0.4, 0.3, 0.2, 0.06, 0.04], size=3)  # a batch of 3 rows
  counts_q = np.array([1000, 1000, 600, 250, 150])  # one row for all
  compiles, listening = [], [True]  # listeners stay registered: this one stops recording
  jax.monitoring.register_event_duration_secs_listener(
      lambda event, duration, **kw: compiles.append(kw.get("fun_name"))
      if listening[0] and event == "/jax/core/compile/backend_compile_duration" else None)
  try:
    got = np.asarray(renyi_cuts.renyi_k_cut_lower_bound(counts_p, counts_q, ORDERS, 0.05,
                                                        method))
  finally:
    listening[0] = False
  # One program for the intervals of both samples and the divergence (run eagerly, the
  # divergence alone compiled about 25), besides conversions of the integer counts.
  assert [name for name in compiles if "convert_element_type" not in name] == [
      "jit(_k_cut_lower_bound)"]
  assert got.shape == (3, ORDERS.size)
  for row in range(3):
    alone = renyi_cuts.renyi_k_cut_lower_bound(counts_p[row], counts_q, ORDERS, 0.05, method)
    np.testing.assert_allclose(got[row], alone, rtol=1e-12, atol=0)
  # Batches of p and q against each other (each sample's intervals solved once per row), and a
  # significance per row of p.
  grid = renyi_cuts.renyi_k_cut_lower_bound(counts_p[:, None, :], counts_p[None, :2, :],
                                            ORDERS, 0.05, method)
  assert grid.shape == (3, 2, ORDERS.size)
  np.testing.assert_allclose(grid[1, 0], renyi_cuts.renyi_k_cut_lower_bound(
      counts_p[1], counts_p[0], ORDERS, 0.05, method), rtol=1e-12, atol=0)
  levels = np.array([0.01, 0.05, 0.2])
  per_row = renyi_cuts.renyi_k_cut_lower_bound(counts_p, counts_q, 2.0, levels, method)
  for row in range(3):
    np.testing.assert_allclose(per_row[row], renyi_cuts.renyi_k_cut_lower_bound(
        counts_p[row], counts_q, 2.0, levels[row], method), rtol=1e-12, atol=0)


def test_k_cut_is_zero_for_identical_counts_and_below_plug_in():
  counts = np.array([5000, 3000, 1500, 500])
  assert np.all(np.asarray(renyi_cuts.renyi_k_cut_lower_bound(counts, counts, ORDERS)) == 0.0)
  counts = counts * 100  # 1e6 trials: enough for a positive bound at every order
  other = np.array([4000, 3500, 1700, 800]) * 100
  bound = np.asarray(renyi_cuts.renyi_k_cut_lower_bound(counts, other, ORDERS))
  plug_in = np.asarray(renyi_cuts.renyi_divergence(counts / counts.sum(), other / other.sum(),
                                                   ORDERS))
  assert np.all(bound <= plug_in) and np.all(bound > 0)


def test_bootstraps_are_reproducible_and_close_to_plug_in_for_large_counts():
  key = jax.random.key(0)
  n = 10**7
  two = renyi_cuts.renyi_two_cut_bootstrap_lower_bound(key, 3 * n // 10, n, 2 * n // 10, n,
                                                       ORDERS, 0.05, 200)
  again = renyi_cuts.renyi_two_cut_bootstrap_lower_bound(key, 3 * n // 10, n, 2 * n // 10, n,
                                                         ORDERS, 0.05, 200)
  np.testing.assert_array_equal(two, again)
  plug_in = np.asarray(renyi_cuts.binary_renyi_divergence(0.3, 0.2, ORDERS))
  np.testing.assert_allclose(two, plug_in, rtol=2e-2)
  assert np.all(np.asarray(two) <= plug_in * (1 + 1e-9))
  counts_p, counts_q = np.array([6e6, 3e6, 1e6]), np.array([5e6, 3.5e6, 1.5e6])
  k = renyi_cuts.renyi_k_cut_bootstrap_lower_bound(key, counts_p, counts_q, ORDERS, 0.05, 200)
  plug_in = np.asarray(renyi_cuts.renyi_divergence(counts_p / 1e7, counts_q / 1e7, ORDERS))
  np.testing.assert_allclose(k, plug_in, rtol=2e-2)


def test_bootstrap_is_positive_at_zero_divergence():
  """Table 2 of Chadha et al.: the bootstrap is not valid at D = 0 (a documented limitation)."""
  key = jax.random.key(1)
  counts = np.array([5000, 3000, 2000])
  k = np.asarray(renyi_cuts.renyi_k_cut_bootstrap_lower_bound(key, counts, counts, 2.0, 0.05,
                                                              500))
  assert k > 0.0


@pytest.mark.parametrize("call,match", [
    (lambda: renyi_cuts.renyi_two_cut_lower_bound(5, 4, 1, 4, ORDERS), "counts_p=5"),
    (lambda: renyi_cuts.renyi_two_cut_lower_bound(1, 4, 1, 4, [0.5, 2.0]), "orders=0.5"),
    (lambda: renyi_cuts.renyi_two_cut_lower_bound(1, 4, 1, 4, ORDERS, 1.5), "significance=1.5"),
    (lambda: renyi_cuts.renyi_k_cut_lower_bound([1, 2], [1, 2, 3], ORDERS), "partitions"),
    (lambda: renyi_cuts.renyi_k_cut_lower_bound([1, 2], [1, 2], ORDERS, method="wald"),
     "method='wald'"),
    (lambda: renyi_cuts.renyi_two_cut_bootstrap_lower_bound(jax.random.key(0), 1, 4, 1, 4,
                                                            ORDERS, num_bootstrap=0),
     "num_bootstrap=0"),
])
def test_validation(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_infinite_orders_are_rejected():
  with pytest.raises(ValueError, match=r"orders=inf is outside the valid range \(1, inf\)"):
    renyi_cuts.renyi_two_cut_lower_bound(600, 1000, 400, 1000, np.inf)
  with pytest.raises(ValueError, match="orders=inf"):
    renyi_cuts.renyi_k_cut_lower_bound([600, 400], [400, 600], [2.0, np.inf])


# ------------------------------------------------------------------ bootstrap: finite, flagged
def test_k_cut_bootstrap_is_finite_and_warns_for_an_empty_cell():
  """Issue 12: a few counts under P and none under Q gave +inf; now half a count under Q."""
  key = jax.random.key(0)
  with pytest.warns(renyi_cuts.BootstrapWarning, match="not to be trusted") as record:
    bound = renyi_cuts.renyi_k_cut_bootstrap_lower_bound(
        key, [5000, 3000, 1990, 5, 5], [5000, 3000, 1995, 5, 0], [2.0, 4.0, 8.0])
  assert len(record) == 1 and "\n" not in str(record[0].message)
  assert np.all(np.isfinite(np.asarray(bound))) and np.all(np.asarray(bound) >= 0.0)
  full = renyi_cuts.renyi_k_cut_bootstrap(key, [5000, 3000, 1990, 5, 5],
                                          [5000, 3000, 1995, 5, 0], [2.0, 4.0, 8.0])
  assert np.all(np.asarray(full.smoothed)) and not np.any(np.asarray(full.trusted))
  # The plug-in uses q = 0.5 / n for the empty cell: check it against the formula.
  p = np.array([5000, 3000, 1990, 5, 5]) / 10000
  q = np.maximum(np.array([5000, 3000, 1995, 5, 0]) / 10000, 0.5 / 10000)
  expected = np.log(np.sum(p ** 2.0 * q ** -1.0)) / 1.0
  np.testing.assert_allclose(np.asarray(full.plug_in)[0], expected, rtol=1e-12)


def test_two_cut_bootstrap_is_finite_for_an_event_never_seen_under_q():
  key = jax.random.key(1)
  with pytest.warns(renyi_cuts.BootstrapWarning):
    bound = renyi_cuts.renyi_two_cut_bootstrap_lower_bound(key, 5, 100, 0, 100, ORDERS)
  assert np.all(np.isfinite(np.asarray(bound)))


def test_bootstrap_trusted_only_with_enough_trials_and_signal():
  key = jax.random.key(2)
  n = 10**6
  big = renyi_cuts.renyi_two_cut_bootstrap(key, 3 * n // 10, n, 2 * n // 10, n, ORDERS)
  assert np.all(np.asarray(big.trusted))
  small = renyi_cuts.renyi_two_cut_bootstrap(key, 300, 1000, 200, 1000, ORDERS)
  assert not np.any(np.asarray(small.trusted))  # below BOOTSTRAP_MIN_TRIALS
  zero = renyi_cuts.renyi_two_cut_bootstrap(key, n // 5, n, n // 5, n, ORDERS)
  assert not np.any(np.asarray(zero.trusted))  # D = 0: the plug-in is within its noise
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    renyi_cuts.renyi_two_cut_bootstrap_lower_bound(key, 3 * n // 10, n, 2 * n // 10, n, ORDERS)


def test_empirical_bernstein_interval_covers_the_mean():
  """Repeated samples of Beta(2, 5) values (mean 2/7): the two-sided interval misses at most
  beta of the time; zero-variance samples give the Maurer-Pontil constant term alone."""
  rng = np.random.default_rng(11)
  samples = rng.beta(2.0, 5.0, size=(2000, 50))
  lower, upper = renyi_cuts.empirical_bernstein_interval(samples, 0.2)
  miss = np.mean((np.asarray(lower) > 2 / 7) | (np.asarray(upper) < 2 / 7))
  assert miss <= 0.2 + 3 * np.sqrt(0.2 * 0.8 / 2000)
  lo, hi = renyi_cuts.empirical_bernstein_interval(np.full(50, 0.5), 0.05)
  half = 7 * np.log(4 / 0.05) / (3 * 49)
  assert float(lo) == pytest.approx(0.5 - half) and float(hi) == pytest.approx(0.5 + half)
  with pytest.raises(ValueError, match="at least 2"):
    renyi_cuts.empirical_bernstein_interval(np.array([0.5]), 0.05)
  with pytest.raises(ValueError, match="values=1.5"):
    renyi_cuts.empirical_bernstein_interval(np.array([0.5, 1.5]), 0.05)


def test_two_cut_from_intervals_equals_the_clopper_pearson_bound_on_its_box():
  orders = jnp.array([2.0, 8.0])
  beta = 0.05
  per = 1 - np.sqrt(1 - beta)
  from dpaudit.estimators import binomial
  p = binomial.clopper_pearson(700, 1000, per)
  q = binomial.clopper_pearson(500, 1000, per)
  ours = renyi_cuts.renyi_two_cut_from_intervals(p.lower, p.upper, q.lower, q.upper, orders)
  ref = renyi_cuts.renyi_two_cut_lower_bound(700, 1000, 500, 1000, orders, beta)
  np.testing.assert_allclose(ours, ref, rtol=1e-12)
  np.testing.assert_array_equal(
      renyi_cuts.renyi_two_cut_from_intervals(0.4, 0.6, 0.5, 0.7, orders), [0.0, 0.0])
