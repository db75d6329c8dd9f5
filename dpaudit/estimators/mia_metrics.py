r"""Standard metrics of membership inference attacks (MIAs) from member and non-member scores.

A higher score means "more likely a member"; thresholding at t predicts "member" for every
score >= t, so tied scores always land on the same side. Each metric does one sort of the
pooled scores and works with cumulative counts, so it costs O(n log n), has static shapes and
is jit/vmap-able (the number of scores is static; metric arguments such as ``fpr`` or
``fraction`` may be traced arrays).

The metrics follow the usual definitions, e.g. Carlini et al., "Membership Inference Attacks
From First Principles" (2022), for the ROC curve and TPR at low FPR, and the Mann-Whitney U
statistic for the area under the ROC curve.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpaudit import _validate
from dpaudit.estimators import _compile


def _float_dtype():
  return jnp.result_type(float)


class RocCurve(NamedTuple):
  """ROC curve of :func:`roc_curve`; arrays of length n_in + n_out + 1.

  Attributes:
    fpr: false positive rate (fraction of non-member scores >= threshold), non-decreasing.
    tpr: true positive rate (fraction of member scores >= threshold), non-decreasing.
    thresholds: +inf (nothing predicted "member"), then the pooled scores in descending order.
      Tied scores give the same point repeatedly (shapes stay static); drop repeats with e.g.
      ``np.unique`` on the thresholds if needed.
  """
  fpr: jax.Array
  tpr: jax.Array
  thresholds: jax.Array


def _as_float(*xs):
  dtype = _float_dtype()
  return tuple(jnp.asarray(x, dtype) for x in xs)


def _check_scores(name, scores):
  """1-D, non-empty, real (no booleans: cast them), no NaN or +inf (the curve's first
  threshold); -inf is allowed."""
  _validate.check_real_array(name, scores, ndim=1, neg_inf=True)


def _tie_groups(sorted_scores):
  """First and last position of the group of equal values at each position of a sorted
  (descending) array."""
  n = sorted_scores.shape[0]
  idx = jnp.arange(n)
  is_end = jnp.concatenate([sorted_scores[:-1] != sorted_scores[1:], jnp.ones((1,), bool)])
  is_start = jnp.concatenate([jnp.ones((1,), bool), sorted_scores[1:] != sorted_scores[:-1]])
  start = jax.lax.cummax(jnp.where(is_start, idx, 0))
  end = jax.lax.cummin(jnp.where(is_end, idx, n - 1), reverse=True)
  return start, end


def _sorted_counts(in_scores, out_scores):
  dtype = _float_dtype()
  pooled = jnp.concatenate([in_scores, out_scores])
  labels = jnp.concatenate([jnp.ones(in_scores.shape, dtype), jnp.zeros(out_scores.shape, dtype)])
  order = jnp.argsort(pooled, descending=True, stable=True)
  sorted_scores = pooled[order]
  cum_in = jnp.cumsum(labels[order])
  cum_out = jnp.arange(1, pooled.shape[0] + 1, dtype=dtype) - cum_in
  _, end = _tie_groups(sorted_scores)
  # Every member of a tie group is predicted together: take the counts at the group's end.
  return sorted_scores, cum_in[end], cum_out[end]


def roc_curve(in_scores, out_scores) -> RocCurve:
  r"""ROC curve of an MIA: for each threshold t,

  .. math:: \mathrm{TPR}(t) = \frac{|\{i : x^{in}_i \ge t\}|}{n_{in}}, \qquad
            \mathrm{FPR}(t) = \frac{|\{j : x^{out}_j \ge t\}|}{n_{out}},

  over t = +inf and every pooled score, in descending order (see :class:`RocCurve`).

  Args:
    in_scores: 1-D scores of members, non-empty, no NaN or +inf.
    out_scores: 1-D scores of non-members, non-empty, no NaN or +inf.

  >>> curve = roc_curve([0.9, 0.8, 0.4, 0.3], [0.7, 0.35, 0.2, 0.1])
  >>> [float(v) for v in curve.fpr]
  [0.0, 0.0, 0.0, 0.25, 0.25, 0.5, 0.5, 0.75, 1.0]
  >>> [float(v) for v in curve.tpr]
  [0.0, 0.25, 0.5, 0.5, 0.75, 0.75, 1.0, 1.0, 1.0]
  """
  _check_scores("in_scores", in_scores)
  _check_scores("out_scores", out_scores)
  return _roc_curve(*_as_float(in_scores, out_scores))


def _roc_counts(in_scores, out_scores):
  """(thresholds, true positive counts, false positive counts), starting at +inf."""
  dtype = _float_dtype()
  sorted_scores, tp, fp = _sorted_counts(in_scores, out_scores)
  zero = jnp.zeros((1,), dtype)
  return (jnp.concatenate([jnp.full((1,), jnp.inf, dtype), sorted_scores]),
          jnp.concatenate([zero, tp]), jnp.concatenate([zero, fp]))


@_compile.jit
def _roc_curve(in_scores, out_scores) -> RocCurve:
  thresholds, tp, fp = _roc_counts(in_scores, out_scores)
  # Divide by the (traced) totals rather than the static sizes: XLA would turn division by a
  # constant into multiplication by its reciprocal, which is not correctly rounded.
  return RocCurve(fpr=fp / fp[-1], tpr=tp / tp[-1], thresholds=thresholds)


def roc_auc(in_scores, out_scores) -> jax.Array:
  r"""Area under the ROC curve, the Mann-Whitney statistic with ties counted 1/2:

  .. math:: \mathrm{AUC} = \frac{1}{n_{in} n_{out}} \sum_{i,j}
     \Big(\mathbb{1}[x^{in}_i > x^{out}_j] + \tfrac12 \mathbb{1}[x^{in}_i = x^{out}_j]\Big).

  Computed as the trapezoidal area under :func:`roc_curve` (whose tie groups step diagonally,
  which is exactly the 1/2 for ties) in O(n log n).

  >>> float(roc_auc([0.9, 0.8, 0.4, 0.3], [0.7, 0.35, 0.2, 0.1]))  # 13 of the 16 pairs ordered
  0.8125
  """
  _check_scores("in_scores", in_scores)
  _check_scores("out_scores", out_scores)
  return _roc_auc(*_as_float(in_scores, out_scores))


@_compile.jit
def _roc_auc(in_scores, out_scores):
  _, tp, fp = _roc_counts(in_scores, out_scores)
  # Twice the area in units of (1 / n_in) x (1 / n_out): a sum of whole numbers, exact below
  # 2^53, divided once at the end.
  twice_area = jnp.sum(jnp.diff(fp) * (tp[1:] + tp[:-1]))
  return twice_area / (2.0 * tp[-1] * fp[-1])


def tpr_at_fpr(in_scores, out_scores, fpr) -> jax.Array:
  r"""Highest TPR over thresholds whose FPR is at most ``fpr``:

  .. math:: \mathrm{TPR@FPR}(\alpha) = \max\{\mathrm{TPR}(t) : \mathrm{FPR}(t) \le \alpha\},

  with t ranging over +inf (TPR = FPR = 0) and the pooled scores; thresholds are never
  interpolated, so ties are never split. An FPR within a relative 1e-12 of the target counts
  as equal to it (so ``fpr=0.3`` admits 3 false positives out of 10).

  Args:
    in_scores: 1-D member scores, non-empty.
    out_scores: 1-D non-member scores, non-empty.
    fpr: target false positive rate(s) in [0, 1]; any shape.

  Returns:
    The TPR, with the shape of ``fpr``.

  >>> tpr = tpr_at_fpr([0.9, 0.8, 0.4, 0.3], [0.7, 0.35, 0.2, 0.1], [0.0, 0.25, 0.5])
  >>> [float(v) for v in tpr]
  [0.5, 0.75, 1.0]
  """
  _check_scores("in_scores", in_scores)
  _check_scores("out_scores", out_scores)
  _validate.check_range("fpr", fpr, 0.0, 1.0)
  return _tpr_at_fpr(*_as_float(in_scores, out_scores, fpr))


@_compile.jit
def _tpr_at_fpr(in_scores, out_scores, fpr):
  _, tp, fp = _roc_counts(in_scores, out_scores)
  # Both counts are non-decreasing along the curve: the answer is at the last point with
  # fp <= fpr * n_out (the first point, fp = 0, always qualifies). The relative slack of 1e-12
  # makes a target written as a decimal (0.3) admit the rate it stands for (3 / 10).
  allowed = fpr * fp[-1] * (1.0 + 1e-12)
  idx = jnp.searchsorted(fp, allowed, side="right") - 1
  return tp[jnp.clip(idx, 0, fp.shape[0] - 1)] / tp[-1]


def precision_at_top(scores, is_member, fraction) -> jax.Array:
  r"""Precision among the :math:`k = \lceil \mathrm{fraction} \cdot m \rceil` highest scores.

  .. math:: \mathrm{prec}@k = \frac{1}{k}\,\mathbb{E}\Big[\sum_{i \in \mathrm{top}_k} s_i\Big],

  where the expectation is over uniformly random tie-breaking: when the k-th score is tied, the
  tied group contributes its member fraction times the number of its points that fit in the
  top k (order-independent and deterministic). ``fraction * m`` within 1e-9 (relative) of an
  integer is taken as that integer, so that e.g. 0.7 * 10 gives k = 7.

  Args:
    scores: 1-D scores of the m audited points, non-empty, no NaN.
    is_member: 1-D boolean (or 0/1) membership of the m points.
    fraction: fraction(s) in (0, 1] of points to keep; any shape.

  Returns:
    The precision, with the shape of ``fraction``.

  >>> scores = [0.9, 0.8, 0.4, 0.3, 0.7, 0.35, 0.2, 0.1]
  >>> is_member = [1, 1, 1, 1, 0, 0, 0, 0]
  >>> [float(v) for v in precision_at_top(scores, is_member, [0.25, 0.5])]  # top 2, top 4
  [1.0, 0.75]
  """
  _validate.check_real_array("scores", scores, ndim=1, neg_inf=True, pos_inf=True)
  _validate.check_same_shape("scores", scores, "is_member", is_member)
  _validate.check_binary("is_member", is_member)
  _validate.check_range("fraction", fraction, 0.0, 1.0, low_open=True)
  dtype = _float_dtype()
  return _precision_at_top(jnp.asarray(scores, dtype), jnp.asarray(is_member, dtype),
                           jnp.asarray(fraction, dtype))


@_compile.jit
def _precision_at_top(scores, is_member, fraction):
  dtype = scores.dtype
  m = scores.shape[0]
  order = jnp.argsort(scores, descending=True, stable=True)
  sorted_scores = scores[order]
  top_members = jnp.concatenate([jnp.zeros((1,), dtype), jnp.cumsum(is_member[order])])
  x = fraction * m
  nearest = jnp.round(x)
  k = jnp.where(jnp.abs(x - nearest) <= 1e-9 * jnp.maximum(x, 1.0), nearest, jnp.ceil(x))
  k = jnp.clip(k, 1, m)
  start, end = _tie_groups(sorted_scores)
  pos = k.astype(jnp.int32) - 1
  gs, ge = start[pos], end[pos]
  group_members = top_members[ge + 1] - top_members[gs]
  tp = top_members[gs] + (k - gs) * group_members / (ge - gs + 1)
  return tp / k
