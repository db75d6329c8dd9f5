"""Tests for dpaudit.estimators.mia_metrics against naive O(n^2) / per-threshold loops."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit.estimators import mia_metrics


# ----------------------------------------------------------------------------- references
def ref_auc(x_in, x_out):
  total = 0.0
  for a in x_in:
    for b in x_out:
      total += 1.0 if a > b else (0.5 if a == b else 0.0)
  return total / (len(x_in) * len(x_out))


def ref_roc_points(x_in, x_out):
  """{threshold: (fpr, tpr)} over +inf and the distinct pooled scores."""
  x_in, x_out = np.asarray(x_in, float), np.asarray(x_out, float)
  points = {math.inf: (0.0, 0.0)}
  for t in set(np.concatenate([x_in, x_out]).tolist()):
    points[t] = (np.sum(x_out >= t) / len(x_out), np.sum(x_in >= t) / len(x_in))
  return points


def ref_tpr_at_fpr(x_in, x_out, target):
  return max(tpr for fpr, tpr in ref_roc_points(x_in, x_out).values() if fpr <= target)


def ref_precision_at_top(scores, member, fraction):
  """Average precision of the top k over uniformly random tie-breaking, in closed form."""
  scores, member = np.asarray(scores, float), np.asarray(member, bool)
  m = len(scores)
  k = math.ceil(round(fraction * m, 9))
  kth = np.sort(scores)[::-1][k - 1]
  above = scores > kth
  tied = scores == kth
  tp = np.sum(member & above) + (k - above.sum()) * np.sum(member & tied) / tied.sum()
  return tp / k


def _scores(seed, n_in, n_out, shift, resolution=None):
  rng = np.random.default_rng(seed)
  x_in = rng.normal(shift, 1.0, n_in)
  x_out = rng.normal(0.0, 1.0, n_out)
  if resolution is not None:
    x_in, x_out = np.round(x_in / resolution), np.round(x_out / resolution)
  return x_in, x_out


CASES = [(0, 60, 40, 1.0, None), (1, 50, 80, 0.5, 0.5), (2, 7, 3, 0.0, 1.0), (3, 1, 1, 0.0, None)]


# ----------------------------------------------------------------------------- ROC / AUC
@pytest.mark.parametrize("seed,n_in,n_out,shift,resolution", CASES)
def test_roc_curve_and_auc_match_naive(seed, n_in, n_out, shift, resolution):
  x_in, x_out = _scores(seed, n_in, n_out, shift, resolution)
  curve = mia_metrics.roc_curve(x_in, x_out)
  assert curve.fpr.shape == curve.tpr.shape == curve.thresholds.shape == (n_in + n_out + 1,)
  ref = ref_roc_points(x_in, x_out)
  got_points = {}
  for t, f, p in zip(*(np.asarray(a) for a in (curve.thresholds, curve.fpr, curve.tpr))):
    assert got_points.setdefault(float(t), (f, p)) == (f, p)  # repeated ties agree
  assert set(got_points) == set(ref)
  for t, (f, p) in ref.items():
    assert got_points[t] == pytest.approx((f, p), abs=1e-15)
  assert np.all(np.diff(np.asarray(curve.fpr)) >= 0) and np.all(np.diff(np.asarray(curve.tpr)) >= 0)
  assert np.all(np.diff(np.asarray(curve.thresholds)) <= 0)
  assert float(curve.fpr[-1]) == float(curve.tpr[-1]) == 1.0
  np.testing.assert_allclose(mia_metrics.roc_auc(x_in, x_out), ref_auc(x_in, x_out), rtol=1e-12)


def test_auc_closed_cases():
  assert float(mia_metrics.roc_auc([2.0, 3.0, 4.0], [0.0, 1.0])) == 1.0
  assert float(mia_metrics.roc_auc([0.0, 1.0], [2.0, 3.0, 4.0])) == 0.0
  # Identical distributions with many ties: exactly 1/2.
  values = np.repeat([0.0, 1.0, 2.0], [5, 3, 2])
  assert float(mia_metrics.roc_auc(values, values)) == 0.5
  assert float(mia_metrics.roc_auc(np.zeros(4), np.zeros(9))) == 0.5
  assert float(mia_metrics.roc_auc([1.0], [1.0])) == 0.5
  # Invariance to order and to monotone transforms.
  x_in, x_out = _scores(5, 40, 30, 1.0)
  auc = float(mia_metrics.roc_auc(x_in, x_out))
  assert float(mia_metrics.roc_auc(x_in[::-1], x_out[::-1])) == pytest.approx(auc, abs=1e-15)
  assert float(mia_metrics.roc_auc(np.exp(x_in), np.exp(x_out))) == pytest.approx(auc, abs=1e-15)
  assert float(mia_metrics.roc_auc(x_out, x_in)) == pytest.approx(1 - auc, abs=1e-15)


# ----------------------------------------------------------------------------- TPR @ FPR
@pytest.mark.parametrize("seed,n_in,n_out,shift,resolution", CASES)
def test_tpr_at_fpr_matches_naive(seed, n_in, n_out, shift, resolution):
  x_in, x_out = _scores(seed, n_in, n_out, shift, resolution)
  targets = np.array([0.0, 0.001, 0.01, 0.1, 1 / 3, 0.5, 0.7, 0.99, 1.0])
  got = np.asarray(mia_metrics.tpr_at_fpr(x_in, x_out, targets))
  want = [ref_tpr_at_fpr(x_in, x_out, t) for t in targets]
  np.testing.assert_allclose(got, want, atol=1e-15)
  # Exact multiples of 1/n_out are attained (no off-by-one at the boundary).
  exact = np.arange(n_out + 1) / n_out
  np.testing.assert_allclose(mia_metrics.tpr_at_fpr(x_in, x_out, exact),
                             [ref_tpr_at_fpr(x_in, x_out, t) for t in exact], atol=1e-15)


def test_tpr_at_fpr_closed_cases():
  assert float(mia_metrics.tpr_at_fpr([2.0, 3.0], [0.0, 1.0], 0.0)) == 1.0
  # Perfectly wrong attack: nothing at FPR < 1.
  assert float(mia_metrics.tpr_at_fpr([0.0, 1.0], [2.0, 3.0], 0.99)) == 0.0
  # All scores tied: only the empty and the full threshold exist.
  np.testing.assert_array_equal(mia_metrics.tpr_at_fpr(np.ones(5), np.ones(5), [0.0, 0.5, 1.0]),
                                [0.0, 0.0, 1.0])
  got = mia_metrics.tpr_at_fpr([1.0, 2.0], [0.0, 1.5], np.array([[0.0], [0.5]]))
  assert got.shape == (2, 1)
  np.testing.assert_array_equal(np.asarray(got).ravel(), [0.5, 1.0])


# ----------------------------------------------------------------------------- precision
@pytest.mark.parametrize("resolution", [None, 0.5, 3.0])
def test_precision_at_top_matches_naive(resolution):
  rng = np.random.default_rng(11)
  m = 97
  member = rng.random(m) < 0.4
  scores = member + rng.normal(size=m)
  if resolution is not None:
    scores = np.round(scores / resolution)
  fractions = np.array([0.01, 0.05, 0.1, 0.3, 0.5, 0.7, 0.99, 1.0])
  got = np.asarray(mia_metrics.precision_at_top(scores, member, fractions))
  want = [ref_precision_at_top(scores, member, f) for f in fractions]
  np.testing.assert_allclose(got, want, rtol=1e-13)
  assert float(mia_metrics.precision_at_top(scores, member, 1.0)) == pytest.approx(member.mean())


def test_precision_at_top_closed_cases():
  member = np.array([1, 0, 1, 0, 0, 1, 0, 0, 0, 0], bool)
  scores = np.arange(10.0)[::-1]  # descending, so the top k are the first k
  got = mia_metrics.precision_at_top(scores, member, [0.1, 0.2, 0.3, 0.7, 1.0])
  np.testing.assert_allclose(got, [1.0, 0.5, 2 / 3, 3 / 7, 0.3], rtol=1e-15)
  # 0.7 * 10 = 7.000000000000001 in floating point: still k = 7, not 8.
  assert float(mia_metrics.precision_at_top(scores, member, 0.7)) == pytest.approx(3 / 7)
  # ceil: 0.15 * 10 = 1.5 -> k = 2.
  assert float(mia_metrics.precision_at_top(scores, member, 0.15)) == 0.5
  # All tied: the base rate for every fraction.
  np.testing.assert_allclose(mia_metrics.precision_at_top(np.zeros(10), member, [0.1, 0.55]),
                             [0.3, 0.3], rtol=1e-15)


def test_jit_and_vmap():
  x_in, x_out = _scores(8, 30, 30, 1.0, 0.5)
  batch_in = jnp.stack([jnp.asarray(x_in), jnp.asarray(x_in) + 1.0])
  auc = jax.vmap(mia_metrics.roc_auc, in_axes=(0, None))(batch_in, jnp.asarray(x_out))
  np.testing.assert_allclose(auc, [ref_auc(x_in, x_out), ref_auc(x_in + 1.0, x_out)], rtol=1e-12)
  tpr = jax.jit(lambda f: mia_metrics.tpr_at_fpr(x_in, x_out, f))(jnp.array([0.1, 0.5]))
  np.testing.assert_allclose(tpr, [ref_tpr_at_fpr(x_in, x_out, t) for t in (0.1, 0.5)])
  member = np.arange(60) % 3 == 0
  scores = np.concatenate([x_in, x_out])
  prec = jax.vmap(lambda f: mia_metrics.precision_at_top(scores, member, f))(jnp.array([0.2, 0.5]))
  np.testing.assert_allclose(prec, [ref_precision_at_top(scores, member, f) for f in (0.2, 0.5)],
                             rtol=1e-13)


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize("call,match", [
    (lambda: mia_metrics.roc_curve([], [1.0]), "in_scores is empty"),
    (lambda: mia_metrics.roc_curve([1.0], []), "out_scores is empty"),
    (lambda: mia_metrics.roc_auc([], []), "empty"),
    (lambda: mia_metrics.roc_auc([1.0, np.nan], [1.0]), "in_scores=nan"),
    (lambda: mia_metrics.roc_auc([1.0], [np.inf]), "out_scores=inf"),
    (lambda: mia_metrics.roc_auc([[1.0]], [1.0]), "1-D"),
    (lambda: mia_metrics.tpr_at_fpr([1.0], [], 0.1), "out_scores is empty"),
    (lambda: mia_metrics.tpr_at_fpr([1.0], [0.0], 1.5), "fpr=1.5"),
    (lambda: mia_metrics.tpr_at_fpr([1.0], [0.0], -0.1), "fpr=-0.1"),
    (lambda: mia_metrics.precision_at_top([], [], 0.5), "scores is empty"),
    (lambda: mia_metrics.precision_at_top([1.0, 2.0], [1], 0.5), "shape"),
    (lambda: mia_metrics.precision_at_top([1.0, 2.0], [1, 2], 0.5), "is_member"),
    (lambda: mia_metrics.precision_at_top([1.0, 2.0], [1, 0], 0.0), "fraction=0"),
    (lambda: mia_metrics.precision_at_top([1.0, 2.0], [1, 0], 1.1), "fraction=1.1"),
])
def test_validation_errors(call, match):
  with pytest.raises(ValueError, match=match):
    call()
