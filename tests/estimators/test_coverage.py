"""Coverage tests that can fail: every lower bound at a size where a factor-2 error shows.

Issue 12: the earlier validity tests compared violation rates of 0.2-3% with limits of 10-15%,
so they would have passed with the significance doubled (or with no correction at all). Here,
for each bound,

* the setting is chosen so that its violation rate, Pr[bound > truth], is known: the truth is
  fixed (a known proportion, a fixed test's epsilon, a known divergence), and the exact
  violation probability of the *correct* procedure at the nominal ``beta`` is computed
  independently of dpaudit, with scipy, by enumerating the binomial outcomes (the k-cut's
  reference uses dpaudit's Sison-Glaz intervals, compared with statsmodels; the split
  method's averages the exact sizes of fixed thresholds over the thresholds it chose). Where
  the outcome grid allows it, the truth sits just beyond a confidence limit, so that the exact
  rate is close to its level;
* many repetitions give a Monte Carlo violation rate (batched or vmapped calls; where the
  bound is a function of a few counts, it is computed once for every possible count and the
  draws are looked up, which allows millions of repetitions), and :func:`_check` asserts
  rate <= level + 4 se(level) (the level the estimator promises for the nominal ``beta``),
  exact <= level and |rate - exact| <= 4 se(exact), se being binomial standard errors;
* a NEGATIVE CONTROL applies the same check to a deliberately wrong variant (significance
  doubled, the significance not split where it must be, the threshold chosen on the evaluation
  data, the delta term dropped, no Bonferroni correction) and asserts that the check fails.

The test-only knob ``DPAUDIT_COVERAGE_SIGNIFICANCE_FACTOR`` (default 1) multiplies the
significance passed to every estimator in the coverage tests (never in the negative controls),
while the check still uses the nominal ``beta``: with the factor set to 2 every coverage test
must fail, which shows that the tolerances resolve a factor-2 error in the significance
handling::

  DPAUDIT_COVERAGE_SIGNIFICANCE_FACTOR=2 python -m pytest tests/estimators/test_coverage.py

Each check prints its numbers (``pytest -s``). Seeds are fixed, so the results are
deterministic.
"""

from __future__ import annotations

import functools
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats
from statsmodels.stats.proportion import multinomial_proportions_confint

from dpaudit import estimators

SIGNIFICANCE_FACTOR = float(os.environ.get("DPAUDIT_COVERAGE_SIGNIFICANCE_FACTOR", "1"))
NUM_SE = 4.0  # tolerance in binomial standard errors of the Monte Carlo rate


# ------------------------------------------------------------------------------- the check
def _standard_error(rate: float, reps: int) -> float:
  """Binomial standard error of a Monte Carlo rate (at least that of one event in reps)."""
  rate = min(max(rate, 1.0 / reps), 1.0 - 1.0 / reps)
  return math.sqrt(rate * (1.0 - rate) / reps)


def _coverage_holds(rate: float, reps: int, level: float, exact: float | None = None) -> bool:
  """The Monte Carlo violation rate is within the level and, if given, matches the exact rate.

  Args:
    rate: fraction of the ``reps`` repetitions in which the bound exceeded the truth.
    reps: number of repetitions.
    level: the violation probability the estimator promises for the nominal significance.
    exact: the violation probability computed independently, or None.
  """
  within = rate <= level + NUM_SE * _standard_error(level, reps)
  if exact is None:
    return within
  return within and abs(rate - exact) <= NUM_SE * _standard_error(exact, reps)


def _summary(rate: float, reps: int, level: float, exact: float | None) -> str:
  tolerance = level + NUM_SE * _standard_error(level, reps)
  text = f"rate={rate:.4g} level={level:.4g} tolerance={tolerance:.4g}"
  if exact is not None:
    text += f" exact={exact:.4g} (+-{NUM_SE * _standard_error(exact, reps):.2g})"
  return text + f" reps={reps}"


def _check(name: str, violations, level: float, exact: float | None = None) -> None:
  """Asserts :func:`_coverage_holds` for boolean ``violations`` (one per repetition)."""
  violations = np.asarray(violations, bool).reshape(-1)
  rate, reps = float(np.mean(violations)), violations.size
  summary = _summary(rate, reps, level, exact)
  print(f"\n[coverage] {name}: factor={SIGNIFICANCE_FACTOR:g} {summary}")
  if exact is not None:
    assert exact <= level, f"{name}: the exact rate {exact} exceeds the level {level}"
  assert _coverage_holds(rate, reps, level, exact), f"{name}: {summary}"


def _check_fails(name: str, violations, level: float, exact: float | None = None) -> None:
  """Negative control: asserts that the check of :func:`_check` FAILS."""
  violations = np.asarray(violations, bool).reshape(-1)
  rate, reps = float(np.mean(violations)), violations.size
  summary = _summary(rate, reps, level, exact)
  print(f"\n[negative control] {name}: {summary}")
  assert not _coverage_holds(rate, reps, level, exact), (
      f"{name}: the wrong variant passed the check ({summary}); the test has no power")


# --------------------------------------------------------------- independent references
def _cp_upper(k, n, tail):
  """scipy: p with Pr[Bin(n, p) <= k] = tail (1 at k = n)."""
  k = np.asarray(k, float)
  return np.where(k < n, stats.beta.isf(tail, k + 1.0, np.maximum(n - k, 1.0)), 1.0)


def _cp_lower(k, n, tail):
  """scipy: p with Pr[Bin(n, p) >= k] = tail (0 at k = 0)."""
  k = np.asarray(k, float)
  return np.where(k > 0, stats.beta.ppf(tail, np.maximum(k, 1.0), n - k + 1.0), 0.0)


def _support(n: int, p: float, tail: float = 1e-14) -> np.ndarray:
  """The outcomes of Bin(n, p) outside which less than ``tail`` of the mass lies."""
  lo = int(stats.binom.ppf(tail, n, p))
  hi = int(stats.binom.isf(tail, n, p)) + 1
  return np.arange(max(lo, 0), min(hi, n) + 1)


def _test_epsilon(fpr, fnr, delta):
  """max(log((1 - delta - FNR) / FPR), log((1 - delta - FPR) / FNR), 0), -inf terms when the
  numerator is not positive: the epsilon of one test, a lower bound on the mechanism's."""
  def side(numerator_rate, denominator_rate):
    numerator = 1.0 - delta - numerator_rate
    with np.errstate(divide="ignore"):
      return np.where(numerator > 0.0, np.log(np.maximum(numerator, 1e-300))
                      - np.log(denominator_rate), -np.inf)
  return np.maximum(np.maximum(side(fnr, fpr), side(fpr, fnr)), 0.0)


def _error_count_violation(fpr, fnr, n_neg, n_pos, delta, tail):
  """Exact Pr[bound > test epsilon] for Eq. (1) with Clopper-Pearson upper limits at ``tail``
  each, by enumerating (false positives, false negatives)."""
  fp, fn = _support(n_neg, fpr), _support(n_pos, fnr)
  bound = _test_epsilon(_cp_upper(fp, n_neg, tail)[:, None],
                        _cp_upper(fn, n_pos, tail)[None, :], delta)
  weight = (stats.binom.pmf(fp, n_neg, fpr)[:, None] * stats.binom.pmf(fn, n_pos, fnr)[None, :])
  return float(np.sum(weight[bound > _test_epsilon(fpr, fnr, delta)]))


# ------------------------------------------------------------------ 1. Clopper-Pearson
CP_TRIALS, CP_ANCHOR, CP_REPS, CP_BETA = 2000, 100, 20000, 0.05


def _cp_truth(alternative: str, beta: float) -> float:
  """A proportion just beyond the limit at k = CP_ANCHOR: the miss rate is then close to the
  level (beta; beta / 2 for the upper end of the two-sided interval)."""
  n, k = CP_TRIALS, CP_ANCHOR
  if alternative == "greater":
    return float(_cp_lower(k, n, beta)) * (1.0 - 1e-6)
  tail = beta if alternative == "less" else beta / 2.0
  return float(_cp_upper(k, n, tail)) * (1.0 + 1e-6)


def _cp_exact_miss(p: float, alternative: str, beta: float) -> float:
  k = _support(CP_TRIALS, p)
  lower_tail = beta if alternative == "greater" else beta / 2.0
  upper_tail = beta if alternative == "less" else beta / 2.0
  miss = np.zeros(k.shape, bool)
  if alternative != "greater":
    miss |= _cp_upper(k, CP_TRIALS, upper_tail) < p
  if alternative != "less":
    miss |= _cp_lower(k, CP_TRIALS, lower_tail) > p
  return float(np.sum(stats.binom.pmf(k, CP_TRIALS, p)[miss]))


def _cp_misses(p: float, alternative: str, significance: float, seed: int) -> np.ndarray:
  k = np.random.default_rng(seed).binomial(CP_TRIALS, p, CP_REPS)
  lower, upper = estimators.clopper_pearson(k, CP_TRIALS, significance, alternative)
  return (np.asarray(upper) < p) | (np.asarray(lower) > p)


@pytest.mark.parametrize("alternative", ["less", "greater", "two-sided"])
def test_clopper_pearson_coverage(alternative):
  """Pr[p outside the interval] <= beta, at a p where the exact miss rate is close to beta.

  2000 trials, p just beyond the limit at k = 100 (about 6%), 20,000 draws: the miss rate of
  the one-sided intervals is beta - 1e-6, of the two-sided one just over beta / 2.
  """
  p = _cp_truth(alternative, CP_BETA)
  exact = _cp_exact_miss(p, alternative, CP_BETA)
  misses = _cp_misses(p, alternative, CP_BETA * SIGNIFICANCE_FACTOR, seed=11)
  _check(f"clopper_pearson[{alternative}]", misses, CP_BETA, exact)


def test_clopper_pearson_negative_control():
  """The upper confidence bound at twice the significance fails the same check."""
  p = _cp_truth("less", CP_BETA)
  exact = _cp_exact_miss(p, "less", CP_BETA)
  _check_fails("clopper_pearson[less] at 2 beta",
               _cp_misses(p, "less", 2.0 * CP_BETA, seed=11), CP_BETA, exact)


# ------------------------------------------------- 2. epsilon_from_error_counts (a fixed test)
ERR_TRIALS, ERR_ANCHOR, ERR_DELTA, ERR_REPS, ERR_BETA = 2000, 10, 1e-3, 20000, 0.05


def _error_rate_truth(beta: float) -> float:
  """FPR = FNR just beyond the upper limit at 10 errors (each limit runs at beta / 2): both
  halves of the union bound then fail about as often as they may."""
  return float(_cp_upper(ERR_ANCHOR, ERR_TRIALS, beta / 2.0)) * 1.01


def _error_count_violations(rate: float, significance: float, seed: int) -> np.ndarray:
  rng = np.random.default_rng(seed)
  fp = rng.binomial(ERR_TRIALS, rate, ERR_REPS)
  fn = rng.binomial(ERR_TRIALS, rate, ERR_REPS)
  bound = estimators.epsilon_from_error_counts(fp, ERR_TRIALS, fn, ERR_TRIALS, ERR_DELTA,
                                               significance)
  return np.asarray(bound) > _test_epsilon(rate, rate, ERR_DELTA)


def test_error_counts_coverage():
  """A fixed test with FPR = FNR (about 0.93%) on 2000 runs each, delta = 1e-3: the bound of
  Eq. (1) exceeds the test's own epsilon with the exact probability 4.4% at beta = 5%."""
  rate = _error_rate_truth(ERR_BETA)
  exact = _error_count_violation(rate, rate, ERR_TRIALS, ERR_TRIALS, ERR_DELTA, ERR_BETA / 2.0)
  _check("epsilon_from_error_counts", _error_count_violations(
      rate, ERR_BETA * SIGNIFICANCE_FACTOR, seed=21), ERR_BETA, exact)


def test_error_counts_negative_control():
  """Without the union bound (each limit at beta instead of beta / 2) the check fails."""
  rate = _error_rate_truth(ERR_BETA)
  exact = _error_count_violation(rate, rate, ERR_TRIALS, ERR_TRIALS, ERR_DELTA, ERR_BETA / 2.0)
  _check_fails("epsilon_from_error_counts, limits at beta each",
               _error_count_violations(rate, 2.0 * ERR_BETA, seed=21), ERR_BETA, exact)


# ---------------------------------------------------- 3a. epsilon_from_scores, method="split"
SPLIT_HALF, SPLIT_MU, SPLIT_DELTA, SPLIT_REPS, SPLIT_BETA = 250, 1.0, 1e-3, 3000, 0.1

_split_scores = jax.jit(jax.vmap(
    lambda a, b, d, s: estimators.epsilon_from_scores(a, b, d, s, "split"),
    in_axes=(0, 0, None, None)))


def _gaussian_rates(threshold):
  """FPR and FNR of "score >= threshold means D'" for N(0, 1) (D) against N(mu, 1) (D')."""
  return stats.norm.sf(threshold), stats.norm.cdf(threshold - SPLIT_MU)


def _conditional_violation(thresholds, n, delta, tail):
  """Exact Pr[Eq. (1) on n fresh runs per list > the test's epsilon] for each fixed threshold.

  The bound decreases in both counts, so for each false-negative count the violations are the
  false-positive counts below a cut-off: Sum_fn Pr[fn] Pr[fp < cut(fn)], vectorised over the
  thresholds (rows).
  """
  fpr, fnr = _gaussian_rates(np.asarray(thresholds, float))
  truth = _test_epsilon(fpr, fnr, delta)[:, None]
  counts = np.arange(n + 1)
  upper = _cp_upper(counts, n, tail)
  with np.errstate(over="ignore"):
    # Side 1 > truth iff U_fp < (1 - delta - U_fn) e^-truth,
    # side 2 > truth iff U_fp < 1 - delta - U_fn e^truth.
    cut_1 = (1.0 - delta - upper[None, :]) * np.exp(-truth)
    cut_2 = 1.0 - delta - upper[None, :] * np.exp(truth)
  cut = np.searchsorted(upper, np.maximum(cut_1, cut_2).reshape(-1), side="left")
  cut = cut.reshape(cut_1.shape)  # number of fp counts with U_fp below the cut-off
  below = np.where(cut > 0, stats.binom.cdf(cut - 1, n, fpr[:, None]), 0.0)
  return np.sum(stats.binom.pmf(counts[None, :], n, fnr[:, None]) * below, axis=1)


def _split_run(in_scores, out_scores, significance):
  """Violations of the split bound (against the chosen threshold's epsilon) and the exact
  violation probabilities of fixed thresholds at those thresholds."""
  got = _split_scores(jnp.asarray(in_scores), jnp.asarray(out_scores), SPLIT_DELTA, significance)
  thresholds = np.asarray(got.threshold)
  truth = _test_epsilon(*_gaussian_rates(thresholds), SPLIT_DELTA)
  n_eval = int(np.asarray(got.negatives)[0])
  exact = _conditional_violation(thresholds, n_eval, SPLIT_DELTA, SPLIT_BETA / 2.0)
  return np.asarray(got.epsilon) > truth, float(np.mean(exact))


def _gaussian_scores(seed: int, size: int):
  rng = np.random.default_rng(seed)
  return (rng.normal(SPLIT_MU, 1.0, (SPLIT_REPS, size)), rng.normal(0.0, 1.0, (SPLIT_REPS, size)))


def test_split_coverage():
  """Gaussian scores, N(1, 1) against N(0, 1), 500 per list, delta = 1e-3, beta = 10%.

  The threshold chosen on the even-indexed half is independent of the odd-indexed half, so
  given the threshold the violation probability is that of a fixed test on 250 fresh runs per
  list: computed exactly (scipy) for each repetition's threshold and averaged, it is the
  expected violation rate. It is about 0.7%, far below beta: the chosen thresholds lie in the
  tails, where few errors make the Clopper-Pearson limits conservative, and one side of
  Eq. (1) dominates; hence the comparison with the exact rate rather than with beta.
  """
  in_scores, out_scores = _gaussian_scores(31, 2 * SPLIT_HALF)
  violations, exact = _split_run(in_scores, out_scores, SPLIT_BETA * SIGNIFICANCE_FACTOR)
  _check("epsilon_from_scores[split]", violations, SPLIT_BETA, exact)


def test_split_negative_control_threshold_chosen_on_the_evaluation_data():
  """Choosing the best threshold on the data that evaluates it fails the check.

  Its violation rate (about 9%) is 13 times the exact rate of fixed thresholds at the
  thresholds it picks; it stays below beta only because those sizes are far below beta here,
  which is why the check compares with the exact rate.

  Each score is passed twice in a row, so the even-indexed (selection) and odd-indexed
  (evaluation) halves coincide: the reported bound is Eq. (1) at the best threshold of the
  250 runs per list, i.e. epsilon_from_error_counts at the in-sample best threshold, uncorrected.
  """
  in_scores, out_scores = _gaussian_scores(31, SPLIT_HALF)
  violations, exact = _split_run(np.repeat(in_scores, 2, axis=1),
                                 np.repeat(out_scores, 2, axis=1), SPLIT_BETA)
  _check_fails("epsilon_from_scores[split], in-sample threshold", violations, SPLIT_BETA, exact)


# ----------------------------------------------- 3b. epsilon_from_scores, method="bonferroni"
BONF_N, BONF_ANCHOR, BONF_REPS, BONF_BETA = 300, 3, 4_000_000, 0.05

_bonferroni_scores = jax.jit(jax.vmap(
    lambda a, b, s: estimators.epsilon_from_scores(a, b, 0.0, s, "bonferroni").epsilon,
    in_axes=(0, 0, None)))


def _bonferroni_level(beta: float) -> float:
  """The per-threshold significance the docstring promises: 2 beta / (n_in + n_out + 2)."""
  return 2.0 * beta / (2 * BONF_N + 2)


def _bonferroni_truth() -> float:
  """FPR = FNR just beyond the upper limit at 3 errors (each limit at half the level)."""
  return float(_cp_upper(BONF_ANCHOR, BONF_N, _bonferroni_level(BONF_BETA) / 2.0)) * 1.03


def _bonferroni_table(counts, significance):
  """The method's bound for binary scores with every pair (false positives, false negatives)
  in ``counts`` x ``counts``: out-scores hold ``fp`` ones, in-scores ``fn`` zeros."""
  fp, fn = (c.reshape(-1) for c in np.meshgrid(counts, counts, indexing="ij"))
  position = np.arange(BONF_N)
  out_scores = (position[None, :] < fp[:, None]).astype(float)
  in_scores = (position[None, :] >= fn[:, None]).astype(float)
  bound = _bonferroni_scores(jnp.asarray(in_scores), jnp.asarray(out_scores), significance)
  return np.asarray(bound).reshape(len(counts), len(counts))


def _bonferroni_violations(rate, significance, seed):
  """Monte Carlo violations, looking the drawn counts up in :func:`_bonferroni_table`."""
  counts = _support(BONF_N, rate, 1e-12)
  table = _bonferroni_table(counts, significance) > _test_epsilon(rate, rate, 0.0)
  rng = np.random.default_rng(seed)
  fp = rng.binomial(BONF_N, rate, BONF_REPS) - counts[0]
  fn = rng.binomial(BONF_N, rate, BONF_REPS) - counts[0]
  assert fp.min() >= 0 and fn.min() >= 0 and max(fp.max(), fn.max()) < len(counts)
  return table[fp, fn]


def test_bonferroni_per_threshold_level():
  """Binary scores (one informative threshold), 300 runs per list, FPR = FNR about 5.4%.

  With a single threshold that can report a positive bound, the violation probability is
  that of Eq. (1) at the per-threshold level beta' = 2 beta / 602, exactly computable; beta'
  is so small that 4 million repetitions are needed, so the method is evaluated once for every
  pair of error counts (binary scores: the counts are all that matters) and the draws are
  looked up. The rate is about 12% of beta' (the other limit's upper end also moves the bound).

  Can detect: any error in beta' (the 2 / (n_in + n_out + 2) factor, the halving between the
  two limits, the significance passed on) and in Eq. (1) at that level. Cannot detect: whether
  the union over thresholds suffices for continuous scores; there the rate is far below beta by
  design (the union bound is loose), so no Monte Carlo test of feasible size can tell the
  correct correction from one that is too lenient by a factor of 2.
  """
  rate = _bonferroni_truth()
  level = _bonferroni_level(BONF_BETA)
  exact = _error_count_violation(rate, rate, BONF_N, BONF_N, 0.0, level / 2.0)
  violations = _bonferroni_violations(rate, BONF_BETA * SIGNIFICANCE_FACTOR, seed=41)
  _check("epsilon_from_scores[bonferroni], per-threshold level", violations, level, exact)


def test_bonferroni_negative_control():
  """The method at twice the significance fails the check (its rate is 4 times the exact
  rate at the correct per-threshold level)."""
  rate = _bonferroni_truth()
  level = _bonferroni_level(BONF_BETA)
  exact = _error_count_violation(rate, rate, BONF_N, BONF_N, 0.0, level / 2.0)
  _check_fails("epsilon_from_scores[bonferroni] at 2 beta",
               _bonferroni_violations(rate, 2.0 * BONF_BETA, seed=41), level, exact)


# ------------------------------------------------------------ 4. renyi_two_cut_lower_bound
TWO_CUT_P, TWO_CUT_Q, TWO_CUT_N, TWO_CUT_REPS, TWO_CUT_BETA = 0.3, 0.2, 2000, 20000, 0.1
RENYI_ORDERS = np.array([2.0, 16.0])


def _binary_renyi(x, y, orders):
  """Renyi divergence of Bernoulli(x) from Bernoulli(y) (numpy; orders on the last axis)."""
  x, y = np.asarray(x, float)[..., None], np.asarray(y, float)[..., None]
  a = orders
  return np.log(x**a * y**(1 - a) + (1 - x)**a * (1 - y)**(1 - a)) / (a - 1)


def _two_cut_exact_violation(beta: float) -> np.ndarray:
  """Exact Pr[2-cut bound > D_alpha] per order, enumerating (k_p, k_q) with scipy.

  Two-sided Clopper-Pearson boxes at 1 - sqrt(1 - beta) each; the bound is the divergence at
  the box's corner nearest the diagonal, 0 when the boxes overlap (the closed-form minimum
  over the box, checked against a grid in test_renyi_cuts.py).
  """
  tail = (1.0 - math.sqrt(1.0 - beta)) / 2.0
  n = TWO_CUT_N
  kp, kq = _support(n, TWO_CUT_P), _support(n, TWO_CUT_Q)
  p_lo, p_hi = _cp_lower(kp, n, tail)[:, None], _cp_upper(kp, n, tail)[:, None]
  q_lo, q_hi = _cp_lower(kq, n, tail)[None, :], _cp_upper(kq, n, tail)[None, :]
  above, below = p_lo > q_hi, p_hi < q_lo
  x = np.where(above, p_lo, np.where(below, p_hi, 0.5))
  y = np.where(above, q_hi, np.where(below, q_lo, 0.5))
  bound = np.where((above | below)[..., None], _binary_renyi(x, y, RENYI_ORDERS), 0.0)
  truth = _binary_renyi(TWO_CUT_P, TWO_CUT_Q, RENYI_ORDERS)
  weight = stats.binom.pmf(kp, n, TWO_CUT_P)[:, None] * stats.binom.pmf(kq, n, TWO_CUT_Q)
  return np.sum(weight[..., None] * (bound > truth), axis=(0, 1))


def _two_cut_violations(significance: float, seed: int) -> np.ndarray:
  rng = np.random.default_rng(seed)
  kp = rng.binomial(TWO_CUT_N, TWO_CUT_P, TWO_CUT_REPS)
  kq = rng.binomial(TWO_CUT_N, TWO_CUT_Q, TWO_CUT_REPS)
  bound = estimators.renyi_two_cut_lower_bound(kp, TWO_CUT_N, kq, TWO_CUT_N, RENYI_ORDERS,
                                               significance)
  return np.asarray(bound) > _binary_renyi(TWO_CUT_P, TWO_CUT_Q, RENYI_ORDERS)


def test_two_cut_coverage():
  """Bernoulli(0.3) against Bernoulli(0.2), 2000 runs each, orders 2 and 16, beta = 10%.

  The bound exceeds the divergence only when the two independent boxes err in opposite
  directions at once, so its exact violation rate is far below beta (about 0.3%); the check
  compares the Monte Carlo rate with that exact rate.
  """
  exact = _two_cut_exact_violation(TWO_CUT_BETA)
  violations = _two_cut_violations(TWO_CUT_BETA * SIGNIFICANCE_FACTOR, seed=51)
  for i, order in enumerate(RENYI_ORDERS):
    _check(f"renyi_two_cut_lower_bound[alpha={order:g}]", violations[:, i], TWO_CUT_BETA,
           float(exact[i]))


def test_two_cut_negative_control():
  """Each box at beta (the significance not split between the two samples) fails."""
  exact = _two_cut_exact_violation(TWO_CUT_BETA)
  wrong = 1.0 - (1.0 - TWO_CUT_BETA)**2  # per-sample significance 1 - sqrt(1 - wrong) = beta
  violations = _two_cut_violations(wrong, seed=51)
  _check_fails("renyi_two_cut_lower_bound, boxes at beta each", violations[:, -1],
               TWO_CUT_BETA, float(exact[-1]))


# -------------------------------------------------------------- 5. renyi_k_cut_lower_bound
K_CUT_P, K_CUT_Q = np.array([0.5, 0.5]), np.array([0.4, 0.6])
K_CUT_NP, K_CUT_NQ, K_CUT_REPS, K_CUT_BETA, K_CUT_ORDER = 2000, 20_000, 1_000_000, 0.1, 16.0


def _renyi(p, q, order):
  return float(np.log(np.sum(p**order * q**(1.0 - order))) / (order - 1.0))


def _two_cells(k, n):
  return np.stack([k, n - k], axis=-1)


def _compare_with_statsmodels(limits, counts, total, count, each, column):
  """The limits (``column`` 0: lower, 1: upper) at first-cell count ``count`` match
  statsmodels' Sison-Glaz intervals."""
  reference = multinomial_proportions_confint(_two_cells(count, total), each,
                                              method="sison-glaz")[:, column]
  np.testing.assert_allclose(limits[count - counts[0]], reference, rtol=1e-6)


@functools.cache
def _k_cut_exact_violation(beta: float) -> float:
  """Pr[k-cut bound > D_alpha], enumerating the two-cell counts of both samples.

  Uses dpaudit's Sison-Glaz intervals (compared with statsmodels here at the modal counts, and
  exhaustively in test_multinomial.py) at 1 - sqrt(1 - beta) each, so it checks how
  renyi_k_cut_lower_bound splits the significance and combines the limits, not the intervals.
  """
  each = 1.0 - math.sqrt(1.0 - beta)
  kp, kq = _support(K_CUT_NP, K_CUT_P[0]), _support(K_CUT_NQ, K_CUT_Q[0])
  # (the shapes of the calls inside renyi_k_cut_lower_bound below: compiled once)
  p_lower = np.asarray(estimators.sison_glaz_intervals(
      _two_cells(kp, K_CUT_NP)[:, None, :], each).lower)[:, 0, :]
  q_upper = np.asarray(estimators.sison_glaz_intervals(
      _two_cells(kq, K_CUT_NQ)[None, :, :], each).upper)[0]
  _compare_with_statsmodels(p_lower, kp, K_CUT_NP, K_CUT_NP // 2, each, column=0)
  _compare_with_statsmodels(q_upper, kq, K_CUT_NQ, 2 * K_CUT_NQ // 5, each, column=1)
  a = K_CUT_ORDER
  terms = p_lower[:, None, :]**a * q_upper[None, :, :]**(1.0 - a)
  bound = np.log(np.sum(terms, axis=-1)) / (a - 1.0)
  weight = (stats.binom.pmf(kp, K_CUT_NP, K_CUT_P[0])[:, None]
            * stats.binom.pmf(kq, K_CUT_NQ, K_CUT_Q[0])[None, :])
  return float(np.sum(weight[bound > _renyi(K_CUT_P, K_CUT_Q, a)]))


def _k_cut_violations(significance: float, seed: int) -> np.ndarray:
  """Monte Carlo violations. The bound is computed once for every pair of counts on the
  enumeration grid (counts_p and counts_q broadcast against each other, so each sample's
  intervals are solved once per count) and the draws are looked up."""
  kp, kq = _support(K_CUT_NP, K_CUT_P[0]), _support(K_CUT_NQ, K_CUT_Q[0])
  bound = estimators.renyi_k_cut_lower_bound(_two_cells(kp, K_CUT_NP)[:, None, :],
                                             _two_cells(kq, K_CUT_NQ)[None, :, :],
                                             K_CUT_ORDER, significance)
  table = np.asarray(bound) > _renyi(K_CUT_P, K_CUT_Q, K_CUT_ORDER)
  rng = np.random.default_rng(seed)
  i = rng.binomial(K_CUT_NP, K_CUT_P[0], K_CUT_REPS) - kp[0]
  j = rng.binomial(K_CUT_NQ, K_CUT_Q[0], K_CUT_REPS) - kq[0]
  assert min(i.min(), j.min()) >= 0 and i.max() < len(kp) and j.max() < len(kq)
  return table[i, j]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_k_cut_coverage():
  """Sison-Glaz k-cut (two cells), P = (.5, .5) on 2000 runs, Q = (.4, .6) on 20000, beta = 10%.

  The k-cut is only asymptotically valid and has no closed-form size; its violation rate is
  enumerated exactly from the intervals instead (about 0.47% at order 16). It is sharpest at a
  large order with Q known more precisely than P: at order 2 it is below 1e-13, where no Monte Carlo
  test can see a factor of 2. Two cells keep the enumeration small (k cells need a (k-1)-dimensional
  grid per sample); the significance handling does not depend on k.
  """
  exact = _k_cut_exact_violation(K_CUT_BETA)
  violations = _k_cut_violations(K_CUT_BETA * SIGNIFICANCE_FACTOR, seed=61)
  _check(f"renyi_k_cut_lower_bound[alpha={K_CUT_ORDER:g}]", violations, K_CUT_BETA, exact)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_k_cut_negative_control():
  """Each sample's intervals at beta (the significance not split) fails the check."""
  exact = _k_cut_exact_violation(K_CUT_BETA)
  violations = _k_cut_violations(1.0 - (1.0 - K_CUT_BETA)**2, seed=61)
  _check_fails("renyi_k_cut_lower_bound, intervals at beta each", violations, K_CUT_BETA, exact)


# ------------------------------------------------------------------- 6. exposure lower bound
EXP_SPACE, EXP_SAMPLES, EXP_ANCHOR, EXP_BETA = 10_000, 1000, 40, 0.05
EXP_REPS, EXP_CHUNK = 8000, 2000


def _exposure_design(beta: float):
  """A candidate space and a canary whose rank fraction lies just above the Clopper-Pearson
  upper limit at 40 of 1000 samples: the miss rate is then just below beta."""
  space = np.random.default_rng(70).normal(size=EXP_SPACE)
  limit = float(_cp_upper(EXP_ANCHOR, EXP_SAMPLES, beta))
  rank = int(math.floor(limit * EXP_SPACE)) + 1
  canary = np.sort(space)[::-1][rank - 1]
  fraction = float(np.mean(space >= canary))
  assert fraction == rank / EXP_SPACE and fraction > limit * (1.0 + 1e-6)
  return space, canary, fraction


def _exposure_violations(space, canary, fraction, significance, seed):
  rng = np.random.default_rng(seed)
  truth = -math.log2(fraction)
  out = []
  for _ in range(EXP_REPS // EXP_CHUNK):
    samples = space[rng.integers(0, EXP_SPACE, (EXP_CHUNK, EXP_SAMPLES))]
    got = estimators.exposure_sampled(np.full(EXP_CHUNK, canary), samples, significance)
    out.append(np.asarray(got.lower_bound) > truth)
  return np.concatenate(out)


def _exposure_exact(fraction: float, beta: float) -> float:
  k = _support(EXP_SAMPLES, fraction)
  miss = _cp_upper(k, EXP_SAMPLES, beta) < fraction
  return float(np.sum(stats.binom.pmf(k, EXP_SAMPLES, fraction)[miss]))


def test_exposure_lower_bound_coverage():
  """1000 uniform samples from 10^4 candidates, a canary of rank fraction 5.18% (just above
  the upper limit at 40 of 1000): Pr[lower bound > exposure] is 4.93% exactly."""
  space, canary, fraction = _exposure_design(EXP_BETA)
  exact = _exposure_exact(fraction, EXP_BETA)
  violations = _exposure_violations(space, canary, fraction, EXP_BETA * SIGNIFICANCE_FACTOR, 71)
  _check("exposure_sampled.lower_bound", violations, EXP_BETA, exact)


def test_exposure_negative_control():
  """The lower bound at twice the significance fails the check."""
  space, canary, fraction = _exposure_design(EXP_BETA)
  exact = _exposure_exact(fraction, EXP_BETA)
  _check_fails("exposure_sampled.lower_bound at 2 beta",
               _exposure_violations(space, canary, fraction, 2.0 * EXP_BETA, 71), EXP_BETA,
               exact)


# ----------------------------------------------------------- 7. one_run_epsilon (Steinke et al.)
ONE_RUN_REPS, ONE_RUN_BETA, ONE_RUN_OUTCOMES = 20000, 0.05, 1001


def _one_run_p_values(m: int, r: int, epsilon: float, delta: float) -> np.ndarray:
  """Thm. 2 (Eqs. 7-9) of UniAud for every v = 0..r, written from the statement with scipy:
  Pr[W >= v] + m delta max_{1<=i<=m} (2/i) Pr[v > W >= v - i], W ~ Bin(r, sigmoid(epsilon))."""
  v = np.arange(r + 1)
  q = special.expit(epsilon)
  tail = stats.binom.sf(v - 1, r, q)
  if delta == 0.0:
    return tail
  below = np.concatenate([[0.0], np.cumsum(stats.binom.pmf(v, r, q))])  # below[j] = Pr[W < j]
  i = np.arange(1, m + 1)
  window = below[v][:, None] - below[np.maximum(v[:, None] - i[None, :], 0)]
  alpha = np.max(2.0 * window / i[None, :], axis=1)
  return np.minimum(tail + alpha * m * delta, 1.0)


def _one_run_threshold_epsilon(m, r, v0, delta, beta) -> float:
  """Just below the epsilon that v0 correct guesses reject at level beta (bisection on the
  reference p-value): the bound exceeds it exactly when v >= v0."""
  lo, hi = 0.0, 20.0
  for _ in range(60):
    mid = 0.5 * (lo + hi)
    lo, hi = (mid, hi) if _one_run_p_values(m, r, mid, delta)[v0] <= beta else (lo, mid)
  return lo - 1e-7


def _correct_guess_pmf(r: int, epsilon: float, delta: float) -> np.ndarray:
  """Correct guesses out of r for the (epsilon, delta)-DP mechanism that reveals every canary
  with probability delta and otherwise applies randomized response at epsilon to each."""
  pmf = (1.0 - delta) * stats.binom.pmf(np.arange(r + 1), r, special.expit(epsilon))
  pmf[r] += delta
  return pmf


def _one_run_case(m, r, epsilon, delta, bound_delta, significance, seed):
  """Violations of one_run_epsilon(m, r, v, bound_delta, significance) for draws of v from the
  mechanism, and the exact violation probability of the bound with the mechanism's delta."""
  pmf = _correct_guess_pmf(r, epsilon, delta)
  v = np.random.default_rng(seed).choice(r + 1, ONE_RUN_REPS, p=pmf)
  # The bound for every possible v (one solve, padded to one length so that every case
  # shares a compilation), looked up for the draws.
  outcomes = np.minimum(np.arange(ONE_RUN_OUTCOMES), r)
  bound = np.asarray(estimators.one_run_epsilon(m, r, outcomes, bound_delta, significance))
  rejected = _one_run_p_values(m, r, epsilon, delta) <= ONE_RUN_BETA
  return bound[v] > epsilon, float(np.sum(pmf[rejected]))


def test_one_run_coverage_delta_zero():
  """Randomized response at epsilon on 1000 canaries, all guessed (delta = 0): epsilon just
  below what 800 correct guesses reject, so Pr[bound > epsilon] = Pr[v >= 800] ~ beta."""
  m = r = 1000
  epsilon = _one_run_threshold_epsilon(m, r, 800, 0.0, ONE_RUN_BETA)
  violations, exact = _one_run_case(m, r, epsilon, 0.0, 0.0,
                                    ONE_RUN_BETA * SIGNIFICANCE_FACTOR, seed=81)
  _check("one_run_epsilon[delta=0]", violations, ONE_RUN_BETA, exact)


def test_one_run_coverage_with_delta():
  """delta = 0.002, 100 canaries all guessed; the mechanism reveals every canary with
  probability delta, which (at v = r) is one of the violations.

  epsilon (about 1.11) is just below what 84 correct guesses reject, so the exact violation
  rate is Pr[v >= 84], about 2.6%: the delta term of Thm. 2 costs about half of beta here.
  """
  m = r = 100
  epsilon = _one_run_threshold_epsilon(m, r, 84, 0.002, ONE_RUN_BETA)
  violations, exact = _one_run_case(m, r, epsilon, 0.002, 0.002,
                                    ONE_RUN_BETA * SIGNIFICANCE_FACTOR, seed=82)
  _check("one_run_epsilon[delta=0.002]", violations, ONE_RUN_BETA, exact)


def test_one_run_negative_control_delta_ignored():
  """The same mechanism with delta = 0.02, audited as if delta were 0, fails the check.

  The whole-output reveal (probability 0.02) always gives v = r and a violation of the
  delta-free bound, on top of a binomial tail of about beta; the bound with the delta term
  never exceeds epsilon here (its exact violation rate is 0).
  """
  m = r = 100
  epsilon = _one_run_threshold_epsilon(m, r, 84, 0.0, ONE_RUN_BETA)
  violations, exact = _one_run_case(m, r, epsilon, 0.02, 0.0, ONE_RUN_BETA, seed=83)
  _check_fails("one_run_epsilon, delta = 0.02 ignored", violations, ONE_RUN_BETA, exact)


# -------------------------------------------------------------------- 8. panoramia_bounds
PAN_HALF, PAN_REPS, PAN_BETA = 190, 4000, 0.1


def _panoramia_scores():
  """Two score levels: the baseline ranks the first half above the second, the MIA the
  reverse; each score vector thus has two thresholds (the top half, and all points)."""
  top = np.concatenate([np.ones(PAN_HALF), np.zeros(PAN_HALF)])
  return top, 1.0 - top


def _panoramia_exact(beta: float, correction: str):
  """Exact Pr[c_lb > 0] and Pr[c_lb > 0 or {c+eps}_lb > 0] when membership is independent
  of the scores (c = 0 and epsilon = 0), enumerating the members of each half (scipy).

  A threshold rejects c = 0 when the one-sided Clopper-Pearson lower limit of its precision,
  at beta / 2 (divided by the 2 thresholds under Bonferroni), exceeds 1/2.
  """
  level = beta / 2.0 / (2.0 if correction == "bonferroni" else 1.0)
  k = np.arange(PAN_HALF + 1)
  first, second = k[:, None], k[None, :]
  rejects_half = _cp_lower(k, PAN_HALF, level) > 0.5
  rejects_all = _cp_lower(first + second, 2 * PAN_HALF, level) > 0.5
  baseline = rejects_half[:, None] | rejects_all
  either = baseline | rejects_half[None, :]
  weight = np.outer(stats.binom.pmf(k, PAN_HALF, 0.5), stats.binom.pmf(k, PAN_HALF, 0.5))
  return float(np.sum(weight[baseline])), float(np.sum(weight[either]))


def _panoramia_violations(significance: float, correction: str, seed: int):
  baseline, mia = _panoramia_scores()
  members = np.random.default_rng(seed).random((PAN_REPS, 2 * PAN_HALF)) < 0.5
  bounds = jax.vmap(lambda s: estimators.panoramia_bounds(
      baseline, mia, s, significance, correction=correction)[:2])(jnp.asarray(members))
  c_lb, c_plus_eps_lb = (np.asarray(b) for b in bounds)
  return c_lb > 0.0, (c_lb > 0.0) | (c_plus_eps_lb > 0.0)


def test_panoramia_coverage():
  """No membership signal (c = 0, epsilon = 0), 380 points, Bonferroni over 2 thresholds.

  Cor. 1-2: c_lb > c with probability <= beta / 2, and the pair holds jointly with
  1 - beta. 190 points per half puts each of the three distinct tests' exact size within
  10% of its level beta / 4; the exact rates are 0.79 beta / 2 and 0.57 beta (the test on
  all points is shared by the two bounds).
  """
  exact_c, exact_joint = _panoramia_exact(PAN_BETA, "bonferroni")
  c_viol, joint_viol = _panoramia_violations(PAN_BETA * SIGNIFICANCE_FACTOR, "bonferroni", 91)
  _check("panoramia_bounds.c_lb", c_viol, PAN_BETA / 2.0, exact_c)
  _check("panoramia_bounds, joint", joint_viol, PAN_BETA, exact_joint)


def test_panoramia_negative_control_no_correction():
  """Each threshold at beta / 2 and the maximum taken afterwards (correction="none", as in
  the paper) fails the check of c_lb at beta / 2."""
  exact_c, _ = _panoramia_exact(PAN_BETA, "bonferroni")
  c_viol, _ = _panoramia_violations(PAN_BETA, "none", 91)
  _check_fails("panoramia_bounds.c_lb, correction='none'", c_viol, PAN_BETA / 2.0, exact_c)
