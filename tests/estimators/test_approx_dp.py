"""epsilon_from_error_counts / epsilon_from_scores against naive references and the truth."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
import scipy.stats

from dpaudit.estimators import approx_dp


def _naive_eps(fp, neg, fn, pos, delta, beta):
  """Eq. (1) of Chadha et al. with scipy's Beta quantiles (two-sided Clopper-Pearson)."""
  fpr_u = 1.0 if fp == neg else scipy.stats.beta.isf(beta / 2, fp + 1, neg - fp)
  fnr_u = 1.0 if fn == pos else scipy.stats.beta.isf(beta / 2, fn + 1, pos - fn)
  candidates = [0.0]
  if 1 - delta - fnr_u > 0:
    candidates.append(np.log((1 - delta - fnr_u) / fpr_u))
  if 1 - delta - fpr_u > 0:
    candidates.append(np.log((1 - delta - fpr_u) / fnr_u))
  return max(candidates)


def test_error_counts_match_naive_formula():
  rng = np.random.default_rng(0)
  for _ in range(40):
    neg, pos = rng.integers(1, 5000, 2)
    fp, fn = rng.integers(0, neg + 1), rng.integers(0, pos + 1)
    delta = rng.choice([0.0, 1e-5, 0.01])
    beta = rng.choice([0.05, 0.01])
    got = float(approx_dp.epsilon_from_error_counts(fp, neg, fn, pos, delta, beta))
    assert got == pytest.approx(_naive_eps(fp, neg, fn, pos, delta, beta), rel=1e-9, abs=1e-12)


def test_zero_errors_give_the_finite_ceiling():
  n, beta = 1000, 0.05
  eps = float(approx_dp.epsilon_from_error_counts(0, n, 0, n, 0.0, beta))
  upper = -np.expm1(np.log(beta / 2) / n)
  assert np.isfinite(eps)
  assert eps == pytest.approx(np.log((1 - upper) / upper), rel=1e-12)
  # UniAud's text quotes eps_O = 5.6 for T = 1,000 trials with Eq. (6).
  assert 5.5 < eps < 5.7


def test_error_counts_limits_and_monotonicity():
  # A coin-flip test certifies nothing.
  assert float(approx_dp.epsilon_from_error_counts(500, 1000, 500, 1000)) == 0.0
  # delta can only lower the bound; more errors can only lower it.
  base = approx_dp.epsilon_from_error_counts(10, 1000, 20, 1000, 0.0)
  assert approx_dp.epsilon_from_error_counts(10, 1000, 20, 1000, 1e-2) < base
  assert approx_dp.epsilon_from_error_counts(30, 1000, 20, 1000, 0.0) < base
  # Broadcasting over arrays of counts.
  out = approx_dp.epsilon_from_error_counts(jnp.arange(5), 100, jnp.arange(5)[:, None], 100)
  assert out.shape == (5, 5)


def _naive_scores(in_scores, out_scores, delta, beta):
  """Best threshold by brute force: every distinct value, each evaluated at beta."""
  best = (0.0, np.inf)
  for t in np.concatenate([[np.inf], np.unique(np.concatenate([in_scores, out_scores]))]):
    fp = int(np.sum(out_scores >= t))
    fn = int(np.sum(in_scores < t))
    eps = _naive_eps(fp, len(out_scores), fn, len(in_scores), delta, beta)
    if eps > best[0]:
      best = (eps, t)
  return best


def test_bonferroni_matches_brute_force_over_thresholds():
  rng = np.random.default_rng(1)
  in_scores = rng.normal(1.5, 1.0, 300).round(1)  # rounding creates ties
  out_scores = rng.normal(0.0, 1.0, 200).round(1)
  beta = 0.05
  got = approx_dp.epsilon_from_scores(in_scores, out_scores, 1e-5, beta, method="bonferroni")
  corrected = 2 * beta / (len(in_scores) + len(out_scores) + 2)
  eps, threshold = _naive_scores(in_scores, out_scores, 1e-5, corrected)
  assert float(got.epsilon) == pytest.approx(eps, rel=1e-9)
  assert float(got.threshold) == pytest.approx(threshold)
  assert float(got.significance) == pytest.approx(corrected)
  assert int(got.false_positives) == int(np.sum(out_scores >= threshold))


def test_split_chooses_on_even_and_evaluates_on_odd():
  rng = np.random.default_rng(2)
  in_scores, out_scores = rng.normal(2.0, 1.0, 401), rng.normal(0.0, 1.0, 400)
  got = approx_dp.epsilon_from_scores(in_scores, out_scores, 0.0, 0.05, method="split")
  _, threshold = _naive_scores(in_scores[0::2], out_scores[0::2], 0.0, 0.05)
  assert float(got.threshold) == pytest.approx(threshold)
  fp = int(np.sum(out_scores[1::2] >= threshold))
  fn = int(np.sum(in_scores[1::2] < threshold))
  assert (int(got.false_positives), int(got.false_negatives)) == (fp, fn)
  assert float(got.epsilon) == pytest.approx(
      _naive_eps(fp, len(out_scores[1::2]), fn, len(in_scores[1::2]), 0.0, 0.05), rel=1e-9)


def test_degenerate_scores_do_not_crash():
  same = np.zeros(100)
  for method in ("split", "bonferroni"):
    got = approx_dp.epsilon_from_scores(same, same, 0.0, 0.05, method=method)
    assert float(got.epsilon) == 0.0
  # Perfect separation reaches the ceiling of the sample size (finite).
  got = approx_dp.epsilon_from_scores(np.ones(100), np.zeros(100), 0.0, 0.05, "bonferroni")
  assert 0 < float(got.epsilon) < np.inf


def _gaussian_epsilon(mu, delta):
  """Exact epsilon(delta) of the Gaussian mechanism with sensitivity/sigma = mu."""
  def delta_of(eps):
    return (scipy.stats.norm.cdf(-eps / mu + mu / 2)
            - np.exp(eps) * scipy.stats.norm.cdf(-eps / mu - mu / 2))
  return scipy.optimize.brentq(lambda e: delta_of(e) - delta, 0.0, 50.0)


@pytest.mark.parametrize("method", ["split", "bonferroni"])
def test_validity_on_gaussian_mechanism(method):
  """The lower bound exceeds the true epsilon in at most ~significance of repetitions.

  A smoke test: the true violation rate is far below the limit (it would pass with the
  threshold chosen on the evaluation data, too). tests/estimators/test_coverage.py checks
  the split method at its exact size, and that the in-sample choice fails.
  """
  mu, delta, beta, n, reps = 1.0, 1e-3, 0.1, 300, 150
  truth = _gaussian_epsilon(mu, delta)
  keys = jax.random.split(jax.random.key(3), reps)
  in_scores = jax.vmap(lambda k: mu + jax.random.normal(k, (n,)))(keys)
  out_scores = jax.vmap(lambda k: jax.random.normal(jax.random.fold_in(k, 1), (n,)))(keys)
  estimate = jax.vmap(lambda a, b: approx_dp.epsilon_from_scores(a, b, delta, beta, method
                                                                  ).epsilon)
  eps = np.asarray(estimate(in_scores, out_scores))
  violations = np.mean(eps > truth)
  assert violations <= beta + 3 * np.sqrt(beta * (1 - beta) / reps)
  # ... and the audit has power: it certifies a good part of the truth on average.
  assert np.median(eps) > 0.2 * truth


@pytest.mark.parametrize("kwargs,match", [
    (dict(false_positives=5, negatives=4, false_negatives=0, positives=4), "false_positives=5"),
    (dict(false_positives=0, negatives=0, false_negatives=0, positives=4), "negatives=0"),
    (dict(false_positives=0, negatives=4, false_negatives=-1, positives=4), "false_negatives=-1"),
    (dict(false_positives=0, negatives=4, false_negatives=0, positives=4, delta=1.0), "delta=1.0"),
    (dict(false_positives=0, negatives=4, false_negatives=0, positives=4, significance=2),
     "significance=2"),
])
def test_error_count_validation(kwargs, match):
  with pytest.raises(ValueError, match=match):
    approx_dp.epsilon_from_error_counts(**kwargs)


def test_score_validation():
  with pytest.raises(ValueError, match="method='best'"):
    approx_dp.epsilon_from_scores([1.0, 2.0], [0.0, 1.0], method="best")
  with pytest.raises(ValueError, match="in_scores has 1 scores"):
    approx_dp.epsilon_from_scores([1.0], [0.0, 1.0], method="split")
  with pytest.raises(ValueError, match="out_scores has 0 scores"):
    approx_dp.epsilon_from_scores([1.0], [], method="bonferroni")
  with pytest.raises(ValueError, match="NaN"):
    approx_dp.epsilon_from_scores([1.0, np.nan], [0.0, 1.0])
  with pytest.raises(ValueError, match="must be 1-D"):
    approx_dp.epsilon_from_scores(np.zeros((2, 2)), [0.0, 1.0])


def _scipy_sweep(in_scores, out_scores, delta, beta):
  """Eq. (1) at every distinct threshold with scipy, all at once: (best epsilon, threshold)."""
  thresholds = np.concatenate([[np.inf], np.unique(np.concatenate([in_scores, out_scores]))[::-1]])
  fp = np.array([np.sum(out_scores >= t) for t in thresholds])
  fn = np.array([np.sum(in_scores < t) for t in thresholds])
  neg, pos = len(out_scores), len(in_scores)
  fpr = np.where(fp < neg, scipy.stats.beta.isf(beta / 2, fp + 1, np.maximum(neg - fp, 1)), 1.0)
  fnr = np.where(fn < pos, scipy.stats.beta.isf(beta / 2, fn + 1, np.maximum(pos - fn, 1)), 1.0)
  with np.errstate(divide="ignore", invalid="ignore"):
    one = np.where(1 - delta - fnr > 0, np.log(1 - delta - fnr) - np.log(fpr), -np.inf)
    two = np.where(1 - delta - fpr > 0, np.log(1 - delta - fpr) - np.log(fnr), -np.inf)
  eps = np.maximum(np.maximum(one, two), 0.0)
  best = int(np.argmax(eps))  # first maximum in order of decreasing threshold
  return eps[best], thresholds[best]


@pytest.mark.parametrize("separation,rounding", [(0.8, None), (2.5, 1), (0.0, 2)])
def test_block_search_equals_the_full_sweep(separation, rounding):
  """The search that solves only the blocks that can hold the maximum (and, with heavy ties,
  blocks whose first position is not a threshold) finds the full sweep's maximum and
  threshold, for both methods, over a few thousand scores."""
  rng = np.random.default_rng(31)
  in_scores, out_scores = rng.normal(separation, 1.0, 2500), rng.normal(0.0, 1.0, 2300)
  if rounding is not None:
    in_scores, out_scores = in_scores.round(rounding), out_scores.round(rounding)
  beta, delta = 0.05, 1e-5
  corrected = 2 * beta / (len(in_scores) + len(out_scores) + 2)
  got = approx_dp.epsilon_from_scores(in_scores, out_scores, delta, beta, "bonferroni")
  eps, threshold = _scipy_sweep(in_scores, out_scores, delta, corrected)
  assert float(got.epsilon) == pytest.approx(eps, rel=1e-9, abs=1e-12)
  assert float(got.threshold) == threshold
  got = approx_dp.epsilon_from_scores(in_scores, out_scores, delta, beta, "split")
  _, threshold = _scipy_sweep(in_scores[0::2], out_scores[0::2], delta, beta)
  assert float(got.threshold) == threshold
  fp, fn = np.sum(out_scores[1::2] >= threshold), np.sum(in_scores[1::2] < threshold)
  assert float(got.epsilon) == pytest.approx(
      _naive_eps(fp, len(out_scores[1::2]), fn, len(in_scores[1::2]), delta, beta), rel=1e-9,
      abs=1e-12)


def test_tree_search_on_short_lists_with_ties():
  """Short lists (a search tree of one node), heavy ties and every delta: the bound and the
  threshold are those of the full sweep (one compiled shape, 20 draws)."""
  rng = np.random.default_rng(8)
  for draw in range(20):
    in_scores = rng.integers(0, 1 + draw % 5, 3).astype(float)
    out_scores = rng.integers(0, 3, 40).astype(float) - (draw % 3)
    delta = (0.0, 1e-3, 0.3)[draw % 3]
    corrected = 2 * 0.05 / (len(in_scores) + len(out_scores) + 2)
    got = approx_dp.epsilon_from_scores(in_scores, out_scores, delta, 0.05, "bonferroni")
    eps, threshold = _scipy_sweep(in_scores, out_scores, delta, corrected)
    assert float(got.epsilon) == pytest.approx(eps, rel=1e-9, abs=1e-12), draw
    assert float(got.threshold) == threshold, draw


def test_descending_cumulative_matches_numpy_under_jit_and_vmap():
  from dpaudit.estimators._sorting import descending_cumulative
  rng = np.random.default_rng(3)
  x = rng.normal(size=(3, 500))
  x[:, ::5] = 0.25  # ties
  labels = (rng.uniform(size=500) < 0.4).astype(np.float64)
  for stable in (False, True):
    order, top = jax.jit(jax.vmap(lambda s, stable=stable: descending_cumulative(
        s, jnp.asarray(labels), stable)))(jnp.asarray(x))
    order, top = np.asarray(order), np.asarray(top)
    assert order.dtype == np.int32 and top.dtype == np.float64
    for row in range(3):
      assert np.all(np.diff(x[row][order[row]]) <= 0)  # descending
      if stable:
        np.testing.assert_array_equal(order[row], np.argsort(-x[row], kind="stable"))
      np.testing.assert_array_equal(top[row], np.cumsum(labels[order[row]]))
  # Labels batched and scores not (a coverage study's vmap over membership draws).
  draws = rng.uniform(size=(4, 500)) < 0.5
  order, top = jax.vmap(lambda m: descending_cumulative(jnp.asarray(x[0]), m, True))(
      jnp.asarray(draws.astype(np.float64)))
  assert order.shape == top.shape == (4, 500)
  expected = np.argsort(-x[0], kind="stable")
  for row in range(4):
    np.testing.assert_array_equal(np.asarray(order[row]), expected)
    np.testing.assert_array_equal(np.asarray(top[row]), np.cumsum(draws[row][expected]))
  _, counts = descending_cumulative(jnp.asarray(x[0]), jnp.asarray(labels > 0))
  assert counts.dtype == jnp.int32 and int(counts[-1]) == int(labels.sum())
