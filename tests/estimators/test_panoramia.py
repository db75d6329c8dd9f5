"""Tests for dpaudit.estimators.panoramia against a naive per-threshold loop using scipy."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

from dpaudit.estimators import panoramia


# ----------------------------------------------------------------------------- reference
def ref_curve(scores, member, significance, tail="binomial", correction="bonferroni",
              min_predictions=1):
  """{threshold: (r, tp, bound)} by brute force over the distinct score values."""
  scores = np.asarray(scores, float)
  member = np.asarray(member, bool)
  rows = []
  for t in sorted(set(scores.tolist()), reverse=True):
    predicted = scores >= t
    r = int(predicted.sum())
    if r >= min_predictions:
      rows.append((t, r, int((predicted & member).sum())))
  level = significance / 2 / (len(rows) if correction == "bonferroni" else 1)
  out = {}
  for t, r, tp in rows:
    if tail == "binomial":
      p_lb = stats.beta.ppf(level, tp, r - tp + 1) if tp > 0 else 0.0
    else:
      p_lb = tp / r - math.sqrt(math.log(1 / level) / (2 * r))
    bound = max(0.0, special.logit(p_lb)) if p_lb > 0 else 0.0
    out[t] = (r, tp, bound)
  return out


def ref_bounds(baseline, mia, member, significance=0.05, **kw):
  cb = ref_curve(baseline, member, significance, **kw)
  ca = ref_curve(mia, member, significance, **kw)
  c_lb = max([b for _, _, b in cb.values()], default=0.0)
  cpe_lb = max([b for _, _, b in ca.values()], default=0.0)
  return c_lb, cpe_lb, max(0.0, cpe_lb - c_lb), cb, ca


def _check_curve(curve, ref):
  valid = np.asarray(curve.valid)
  assert int(curve.num_thresholds) == valid.sum() == len(ref)
  thresholds = np.asarray(curve.thresholds)[valid]
  np.testing.assert_array_equal(thresholds, sorted(ref, reverse=True))
  r = np.asarray(curve.predictions)[valid]
  tp = np.asarray(curve.true_positives)[valid]
  np.testing.assert_array_equal(r, [ref[t][0] for t in thresholds])
  np.testing.assert_array_equal(tp, [ref[t][1] for t in thresholds])
  np.testing.assert_allclose(np.asarray(curve.precision)[valid], tp / r, rtol=1e-14)
  np.testing.assert_allclose(np.asarray(curve.lower_bound)[valid],
                             [ref[t][2] for t in thresholds], rtol=1e-9, atol=1e-12)
  assert np.all(np.isnan(np.asarray(curve.lower_bound)[~valid]))


def _audit_data(seed, m, baseline_signal, mia_signal, resolution=None):
  rng = np.random.default_rng(seed)
  member = rng.random(m) < 0.5
  baseline = baseline_signal * member + rng.normal(size=m)
  mia = mia_signal * member + rng.normal(size=m)
  if resolution is not None:  # create ties
    baseline, mia = np.round(baseline / resolution), np.round(mia / resolution)
  return baseline, mia, member


# ----------------------------------------------------------------------------- reference match
@pytest.mark.parametrize("tail,correction,min_predictions,resolution", [
    ("binomial", "bonferroni", 1, None),
    ("binomial", "none", 1, 0.25),
    ("hoeffding", "bonferroni", 10, 0.25),
    ("hoeffding", "none", 1, None),
])
def test_matches_naive_reference(tail, correction, min_predictions, resolution):
  baseline, mia, member = _audit_data(0, 300, 0.7, 2.5, resolution)
  got = panoramia.panoramia_bounds(baseline, mia, member, 0.05, tail=tail,
                                   correction=correction, min_predictions=min_predictions)
  c_lb, cpe_lb, eps, cb, ca = ref_bounds(baseline, mia, member, 0.05, tail=tail,
                                         correction=correction,
                                         min_predictions=min_predictions)
  _check_curve(got.baseline, cb)
  _check_curve(got.mia, ca)
  assert got.c_lb_per_threshold is got.baseline.lower_bound
  assert got.c_plus_eps_lb_per_threshold is got.mia.lower_bound
  np.testing.assert_allclose([got.c_lb, got.c_plus_eps_lb, got.eps_tilde], [c_lb, cpe_lb, eps],
                             rtol=1e-9, atol=1e-12)
  assert float(got.c_plus_eps_lb) > 0.5  # the strong MIA is detected in every variant
  n = len(cb) if correction == "bonferroni" else 1
  assert float(got.baseline.per_test_significance) == pytest.approx(0.025 / n)
  valid = np.asarray(got.mia.valid)
  recall = np.asarray(got.mia.recall)[valid]
  np.testing.assert_allclose(recall, np.asarray(got.mia.true_positives)[valid] / member.sum())
  assert np.all(np.diff(recall) >= 0) and recall[-1] == 1.0


def test_binomial_bound_dominates_hoeffding_and_closed_form():
  baseline, mia, member = _audit_data(1, 300, 1.0, 3.0, 0.1)
  for correction in ("bonferroni", "none"):
    exact = panoramia.panoramia_bounds(baseline, mia, member, correction=correction)
    hoeff = panoramia.panoramia_bounds(baseline, mia, member, tail="hoeffding",
                                       correction=correction)
    for ce, ch in ((exact.baseline, hoeff.baseline), (exact.mia, hoeff.mia)):
      valid = np.asarray(ce.valid)
      le, lh = np.asarray(ce.lower_bound)[valid], np.asarray(ch.lower_bound)[valid]
      assert np.all(le >= lh - 1e-12)
      assert np.any(le > lh + 0.05)
      # Hoeffding closed form of the paper: precision - sqrt(log(2 / beta) / (2 r)).
      r = np.asarray(ch.predictions)[valid]
      prec = np.asarray(ch.precision)[valid]
      level = float(ch.per_test_significance)
      p = prec - np.sqrt(np.log(1 / level) / (2 * r))
      want = np.where(p > 0.5, special.logit(np.clip(p, 1e-300, 1)), 0.0)
      np.testing.assert_allclose(lh, want, rtol=1e-12, atol=1e-14)
    assert float(exact.c_plus_eps_lb) >= float(hoeff.c_plus_eps_lb)
  # Uncorrected per-test level of the paper is beta / 2, i.e. log(2 / beta) in the formula.
  none = panoramia.panoramia_bounds(baseline, mia, member, 0.1, tail="hoeffding",
                                    correction="none")
  assert float(none.mia.per_test_significance) == pytest.approx(0.05)


# ----------------------------------------------------------------------------- limit cases
def test_perfect_mia_weak_baseline_and_perfect_baseline():
  rng = np.random.default_rng(2)
  m = 300
  member = rng.random(m) < 0.5
  weak = rng.normal(size=m)
  perfect = member + 0.1 * rng.random(m)
  res = panoramia.panoramia_bounds(weak, perfect, member)
  assert float(res.c_lb) < 0.5
  assert float(res.eps_tilde) > 2.5
  # All n_members points above the top threshold are members: logit(level^(1 / n_members)).
  n_mem = int(member.sum())
  level = float(res.mia.per_test_significance)
  np.testing.assert_allclose(res.c_plus_eps_lb, special.logit(level ** (1 / n_mem)), rtol=1e-9)
  both_perfect = panoramia.panoramia_bounds(perfect, perfect, member)
  assert float(both_perfect.c_lb) > 2.5
  assert float(both_perfect.eps_tilde) == 0.0


def test_identical_scores_give_zero_eps():
  baseline, mia, member = _audit_data(3, 300, 1.5, 0.0)
  res = panoramia.panoramia_bounds(baseline, baseline, member)
  assert float(res.c_lb) > 0.0
  assert float(res.c_lb) == float(res.c_plus_eps_lb)
  assert float(res.eps_tilde) == 0.0
  # A baseline stronger than the MIA: eps~ is clipped at 0.
  res = panoramia.panoramia_bounds(baseline, mia, member)
  assert float(res.c_lb) > float(res.c_plus_eps_lb)
  assert float(res.eps_tilde) == 0.0


def test_empty_and_constant_scores():
  res = panoramia.panoramia_bounds([], [], [])
  assert float(res.c_lb) == float(res.c_plus_eps_lb) == float(res.eps_tilde) == 0.0
  assert res.baseline.thresholds.shape == (0,) and int(res.mia.num_thresholds) == 0
  member = np.array([1, 1, 0, 1, 1, 0, 1, 1], bool)
  res = panoramia.panoramia_bounds(np.ones(8), np.full(8, 2.0), member)
  assert int(res.baseline.num_thresholds) == 1 and bool(res.baseline.valid[-1])
  assert float(res.baseline.thresholds[-1]) == 1.0 and float(res.mia.thresholds[-1]) == 2.0
  assert float(res.baseline.precision[-1]) == 0.75
  assert float(res.eps_tilde) == 0.0
  # min_predictions above m: nothing is tested.
  res = panoramia.panoramia_bounds(np.arange(8.0), np.arange(8.0), member, min_predictions=9)
  assert int(res.baseline.num_thresholds) == 0 and float(res.c_lb) == 0.0
  # No members at all.
  res = panoramia.panoramia_bounds(np.arange(8.0), np.arange(8.0), np.zeros(8, bool))
  assert float(res.c_lb) == 0.0 and np.all(np.asarray(res.baseline.recall) == 0.0)


def test_ties_are_on_the_same_side():
  scores = np.array([3.0, 1.0, 2.0, 2.0, 2.0, 0.0])
  member = np.array([1, 0, 1, 0, 1, 0], bool)
  res = panoramia.panoramia_bounds(scores, scores, member, correction="none")
  valid = np.asarray(res.baseline.valid)
  np.testing.assert_array_equal(np.asarray(res.baseline.thresholds)[valid], [3, 2, 1, 0])
  np.testing.assert_array_equal(np.asarray(res.baseline.predictions)[valid], [1, 4, 5, 6])
  np.testing.assert_array_equal(np.asarray(res.baseline.true_positives)[valid], [1, 3, 3, 3])


def test_jit_and_vmap():
  baseline, mia, member = _audit_data(4, 300, 0.5, 2.0)
  fn = jax.jit(jax.vmap(lambda b, a, s: panoramia.panoramia_bounds(b, a, s).eps_tilde))
  stacked = [jnp.stack([x, x[::-1]]) for x in (jnp.asarray(baseline), jnp.asarray(mia),
                                               jnp.asarray(member))]
  got = fn(*stacked)
  want = [panoramia.panoramia_bounds(baseline, mia, member).eps_tilde,
          panoramia.panoramia_bounds(baseline[::-1], mia[::-1], member[::-1]).eps_tilde]
  np.testing.assert_allclose(got, want, rtol=1e-12)


# ----------------------------------------------------------------------------- strongest baseline
@pytest.mark.parametrize("correction", ["bonferroni", "none"])
def test_strongest_of_several_baselines_at_beta_over_2b(correction):
  """Each of B baselines is its own naive reference at beta / (2B) (Bonferroni over the
  baselines) or beta / 2 (none); c_lb is the largest, and its curve is reported."""
  rng = np.random.default_rng(11)
  m = 300
  member = rng.random(m) < 0.5
  baselines = np.stack([s * member + rng.normal(size=m) for s in (0.3, 1.5, 0.8)])
  mia = 2.5 * member + rng.normal(size=m)
  got = panoramia.panoramia_bounds(baselines, mia, member, 0.05, correction=correction)
  share = 3 if correction == "bonferroni" else 1
  want = [ref_bounds(b, mia, member, 0.05 / share, correction=correction)[0] for b in baselines]
  np.testing.assert_allclose(got.baseline_c_lb, want, rtol=1e-9, atol=1e-12)
  assert int(got.best_baseline) == int(np.argmax(want)) == 1
  assert float(got.c_lb) == pytest.approx(max(want))
  _check_curve(got.baseline, ref_curve(baselines[1], member, 0.05 / share,
                                       correction=correction))
  # The MIA keeps its full beta / 2 whatever the number of baselines.
  _check_curve(got.mia, ref_curve(mia, member, 0.05, correction=correction))
  assert float(got.eps_tilde) == pytest.approx(max(0.0, float(got.c_plus_eps_lb) - max(want)))
  # One row stacked is the 1-D call.
  one = panoramia.panoramia_bounds(baselines[1], mia, member, correction=correction)
  stacked = panoramia.panoramia_bounds(baselines[1:2], mia, member, correction=correction)
  np.testing.assert_array_equal([one.c_lb, one.c_plus_eps_lb], [stacked.c_lb,
                                                                 stacked.c_plus_eps_lb])


def test_several_baselines_keep_the_level_and_the_uncorrected_maximum_does_not():
  """No membership signal in any of 3 baselines, each a pre-registered threshold (only r = m
  qualifies, so each test is exact): the maximum of their c_lb rejects c = 0 at most about
  beta / 2 with the correction over baselines; the maximum of bounds each at beta / 2 (the
  best baseline chosen after the fact, uncorrected) rejects about three times as often. The
  members differ per baseline, as three baselines' independent errors would."""
  m, reps, beta = 60, 600, 0.2
  rng = np.random.default_rng(5)
  member = rng.random((reps, m)) < 0.5
  baselines = rng.normal(size=(reps, 3, m))
  mia = rng.normal(size=(reps, m))

  def rate(significance):
    """Share of repetitions where the largest of the 3 single-baseline c_lb is above 0."""
    each = jax.vmap(jax.vmap(lambda b, a, s: panoramia.panoramia_bounds(
        b, a, s, significance, min_predictions=m).c_lb, in_axes=(0, None, 0)))(
            baselines, mia, flips)
    return float(np.mean(np.asarray(each).max(axis=1) > 0))

  # Each baseline sees its own coin flips: independent tests, the worst case for the union.
  flips = rng.random((reps, 3, m)) < 0.5
  # panoramia_bounds gives each of B = 3 baselines beta / (2B): a single one at beta / 3.
  stacked = panoramia.panoramia_bounds(baselines[0], mia[0], member[0], beta, min_predictions=m)
  assert float(stacked.baseline.per_test_significance) == pytest.approx(beta / 6)
  half = beta / 2
  limit = half + 3 * math.sqrt(half * (1 - half) / reps)
  rate_corrected, rate_each = rate(beta / 3), rate(beta)
  assert rate_corrected <= limit
  assert rate_each > 2 * half


# ----------------------------------------------------------------------------- null reference
def test_null_mia_scores_are_smoothed_draws_of_each_class():
  rng = np.random.default_rng(0)
  member = np.array([1, 0] * 200, bool)
  baseline = np.round(rng.normal(2.0 * member), 1)  # with ties
  draws = panoramia.null_mia_scores(jax.random.key(1), baseline, member, 200)
  assert draws.shape == (200, 400)
  assert all(len(np.unique(row)) == 400 for row in draws[:5])  # no ties
  for label in (0, 1):
    own = baseline[member == label]
    drawn = draws[:, member == label].ravel()
    # The kernel density estimate of the class: same mean, variance plus the bandwidth's.
    width = panoramia.silverman_bandwidths(baseline, member)[0, member == label][0]
    assert width == pytest.approx(0.9 * min(own.std(ddof=1), np.subtract(
        *np.quantile(own, [0.75, 0.25])) / 1.34) * own.size ** -0.2)
    assert drawn.mean() == pytest.approx(own.mean(), abs=0.02)
    assert drawn.var() == pytest.approx(own.var() + width ** 2, rel=0.05)
    # and the tail goes beyond the observed maximum, as fresh draws would.
    assert drawn.max() > own.max()
  # A class of one value or one point gets no noise.
  flat = panoramia.silverman_bandwidths(np.r_[np.ones(5), np.arange(3.0)],
                                        np.r_[np.ones(5), np.zeros(3)])
  assert np.all(flat[0, :5] == 0) and np.all(flat[0, 5:] > 0)


def test_null_p_values_are_valid_when_the_mia_is_no_stronger_than_the_baseline():
  """A fresh MIA of the same law as the baseline (a target that leaks nothing): its eps~ is
  often above 0, but its p-value against the null is at most 5% about 5% of the time."""
  m, reps, beta = 300, 150, 0.05
  rng = np.random.default_rng(3)
  rejected, positive = 0, 0
  for rep in range(reps):
    member = rng.random(m) < 0.5
    baseline = 1.5 * member + rng.normal(size=m)
    mia = 1.5 * member + rng.normal(size=m)  # same law: no leakage
    observed = float(panoramia.panoramia_bounds(baseline, mia, member, beta).eps_tilde)
    null = panoramia.panoramia_null(jax.random.key(rep), baseline, member, beta, num_samples=60)
    positive += observed > 0
    rejected += panoramia.null_p_value(observed, null.eps_tilde) <= 0.05
  assert positive > 0.2 * reps  # why a null reference is needed at all
  assert rejected / reps <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)


def test_null_tells_a_leaking_target_apart_and_uses_the_strongest_baseline():
  rng = np.random.default_rng(4)
  m = 400
  member = rng.random(m) < 0.5
  baselines = np.stack([0.2 * member + rng.normal(size=m), 1.0 * member + rng.normal(size=m)])
  mia = 3.0 * member + rng.normal(size=m)
  bounds = panoramia.panoramia_bounds(baselines, mia, member)
  null = panoramia.panoramia_null(jax.random.key(0), baselines, member, num_samples=100)
  assert int(null.best_baseline) == int(bounds.best_baseline) == 1
  c_lb, cpe = np.asarray(null.c_lb), np.asarray(null.c_plus_eps_lb)
  assert c_lb.shape == cpe.shape == (100,)
  np.testing.assert_allclose(null.eps_tilde, np.maximum(cpe - c_lb, 0.0))
  # The null audits' c_lb scatter around the audit's own, their MIA as strong as its baseline.
  assert np.quantile(c_lb, 0.1) < float(bounds.c_lb) < np.quantile(c_lb, 0.9) + 0.2
  assert abs(np.median(cpe) - np.median(c_lb)) < 0.3
  assert panoramia.null_p_value(float(bounds.eps_tilde), null.eps_tilde) == pytest.approx(1 / 101)
  assert panoramia.null_p_value(0.0, null.eps_tilde) == 1.0


@pytest.mark.parametrize("kwargs,match", [
    (dict(num_samples=0), "num_samples=0"),
    (dict(num_samples=2.5), "num_samples"),
    (dict(num_samples=10**9), "2\\^31"),
    (dict(key=3), "key"),
    (dict(significance=1.5), "significance=1.5"),
])
def test_null_validation_errors(kwargs, match):
  args = dict(key=jax.random.key(0), baseline_scores=[0.1, 0.5, 0.2],
              is_member=[True, False, True])
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    panoramia.panoramia_null(**args)
  with pytest.raises(ValueError, match="null_samples"):
    panoramia.null_p_value(0.1, [])


# ----------------------------------------------------------------------------- validity
def test_validity_no_membership_signal():
  """Scores independent of s: c_lb > 0 rejects the true c = 0, at most about beta / 2."""
  m, reps, beta = 200, 300, 0.05
  rng = np.random.default_rng(2024)
  member = rng.random((reps, m)) < 0.5
  baseline = rng.normal(size=(reps, m))
  mia = np.round(rng.normal(size=(reps, m)), 1)  # with ties

  def run(correction="bonferroni", min_predictions=1):
    # Plain vmap: correction and min_predictions reach the compiled core as data, so the
    # three variants share one compilation.
    fn = jax.vmap(lambda b, a, s: panoramia.panoramia_bounds(
        b, a, s, beta, correction=correction, min_predictions=min_predictions)[:3])
    return [np.asarray(x) for x in fn(baseline, mia, member)]

  c_lb, cpe_lb, _ = run()
  half = beta / 2
  limit = half + 3 * math.sqrt(half * (1 - half) / reps)
  assert np.mean(c_lb > 0) <= limit
  assert np.mean(cpe_lb > 0) <= limit
  # Without the correction the maximum over thresholds is optimistic: it rejects c = 0 far
  # more often than beta / 2 (this is what the correction is for).
  c_none, _, _ = run("none")
  assert np.mean(c_none > 0) > 2 * limit
  # A single pre-registered threshold (only r = m qualifies): the test is exact at beta / 2.
  c_single, _, _ = run(min_predictions=m)
  assert np.mean(c_single > 0) <= limit


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize("kwargs,match", [
    (dict(significance=0.0), "significance=0"),
    (dict(significance=1.5), "significance=1.5"),
    (dict(tail="normal"), "tail"),
    (dict(correction="holm"), "correction"),
    (dict(min_predictions=0), "min_predictions=0"),
    (dict(min_predictions=2.5), "min_predictions"),
    (dict(mia_scores=[1.0, 2.0]), "shape"),
    (dict(baseline_scores=[[[1.0, 2.0, 3.0]]]), "1-D"),
    (dict(baseline_scores=np.zeros((0, 3))), "no baseline"),
    (dict(baseline_scores=[[1.0, 2.0]]), "last axis"),
    (dict(mia_scores=[True, False, True]), "real numbers"),
    (dict(mia_scores=["a", "b", "c"]), "real numbers"),
    (dict(baseline_scores=[1 + 1j, 2.0, 3.0]), "real numbers"),
    (dict(is_member=[1, 0, 3]), "is_member"),
    (dict(mia_scores=[1.0, np.nan, 0.0]), "mia_scores=nan"),
])
def test_validation_errors(kwargs, match):
  args = dict(baseline_scores=[0.1, 0.5, 0.2], mia_scores=[1.0, 2.0, 0.5],
              is_member=[True, False, True])
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    panoramia.panoramia_bounds(**args)
