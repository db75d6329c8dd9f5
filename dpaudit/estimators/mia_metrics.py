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
import numpy as np

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


def _sorted_counts(in_scores, out_scores, n_in=None, n_out=None):
  """Pooled scores sorted in descending order, with the member and non-member counts at or
  above each (at the end of its tie group). ``n_in``, ``n_out``: how many of each array are
  real (the rest is padding, :func:`_padded_scores`), or None for all: padding becomes -inf
  and is counted in neither sum, so it sorts into the last tie group, whose every position
  reads the same threshold (-inf) and the same counts (the totals) whichever entries it holds;
  the first ``n_in + n_out`` positions are those of the unpadded arrays."""
  dtype = _float_dtype()
  pooled = jnp.concatenate([in_scores, out_scores])
  is_in = jnp.concatenate([jnp.ones(in_scores.shape, bool), jnp.zeros(out_scores.shape, bool)])
  if n_in is None:
    w_in, w_out = is_in.astype(dtype), jnp.logical_not(is_in).astype(dtype)
  else:
    valid = jnp.concatenate([jnp.arange(in_scores.shape[0]) < n_in,
                             jnp.arange(out_scores.shape[0]) < n_out])
    pooled = jnp.where(valid, pooled, -jnp.inf)
    w_in = jnp.logical_and(valid, is_in).astype(dtype)
    w_out = jnp.logical_and(valid, jnp.logical_not(is_in)).astype(dtype)
  order = jnp.argsort(pooled, descending=True, stable=True)
  sorted_scores = pooled[order]
  cum_in = jnp.cumsum(w_in[order])
  cum_out = jnp.cumsum(w_out[order])
  _, end = _tie_groups(sorted_scores)
  # Every member of a tie group is predicted together: take the counts at the group's end.
  return sorted_scores, cum_in[end], cum_out[end]


def _host_tie_groups(sorted_scores):
  """:func:`_tie_groups` in NumPy."""
  n = sorted_scores.shape[0]
  idx = np.arange(n)
  change = sorted_scores[:-1] != sorted_scores[1:]
  is_end = np.concatenate([change, [True]])
  is_start = np.concatenate([[True], change])
  start = np.maximum.accumulate(np.where(is_start, idx, 0))
  end = np.minimum.accumulate(np.where(is_end, idx, n - 1)[::-1])[::-1]
  return start, end


def _host_roc_counts(in_scores, out_scores):
  """:func:`_roc_counts` in NumPy (float64): a stable descending sort (negated scores)."""
  in_scores, out_scores = np.asarray(in_scores, np.float64), np.asarray(out_scores, np.float64)
  pooled = np.concatenate([in_scores, out_scores])
  labels = np.concatenate([np.ones(in_scores.shape), np.zeros(out_scores.shape)])
  order = np.argsort(-pooled, kind="stable")
  sorted_scores = pooled[order]
  cum_in = np.cumsum(labels[order])
  cum_out = np.cumsum(1.0 - labels[order])
  _, end = _host_tie_groups(sorted_scores)
  zero = np.zeros(1)
  return (np.concatenate([[np.inf], sorted_scores]), np.concatenate([zero, cum_in[end]]),
          np.concatenate([zero, cum_out[end]]))


def _padded_scores(*scores) -> tuple:
  """Each 1-D score array (as given, a NumPy or CPU JAX array in the default float dtype)
  padded to its :func:`_compile.bucket_size`, then the true sizes as int32: the arguments of
  the bucketed programs, one program per pair of buckets."""
  dtype = _float_dtype()
  padded = tuple(_compile.pad_edge(_compile.argument(x, dtype),
                                   _compile.bucket_size(np.shape(x)[0]), axis=0) for x in scores)
  return padded + tuple(np.int32(np.shape(x)[0]) for x in scores)


def _bucketed(values) -> bool:
  """Whether a call takes the bucketed programs: concrete inputs computed on a CPU."""
  return _validate.is_concrete(values) and _compile.platform(values) == "cpu"


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
  if not _bucketed((in_scores, out_scores)):
    return _roc_curve(*_as_float(in_scores, out_scores))
  args = _padded_scores(in_scores, out_scores)
  size = np.shape(in_scores)[0] + np.shape(out_scores)[0] + 1
  out = _compile.first_call(_roc_curve, _host_scores(_host_roc_curve, args), args,
                            len(args[0]) + len(args[1]))
  return RocCurve(*(_compile._cut(v, size, (size,)) for v in out))


def _host_scores(host, args):
  """``host`` on the real scores of ``args`` (:func:`_padded_scores`: arrays, then sizes)."""
  half = len(args) // 2

  def call(*args):
    return host(*(np.asarray(x)[:n] for x, n in zip(args[:half], args[half:])), *args[2 * half:])
  return call


def _roc_counts(in_scores, out_scores, n_in=None, n_out=None):
  """(thresholds, true positive counts, false positive counts), starting at +inf."""
  dtype = _float_dtype()
  sorted_scores, tp, fp = _sorted_counts(in_scores, out_scores, n_in, n_out)
  zero = jnp.zeros((1,), dtype)
  return (jnp.concatenate([jnp.full((1,), jnp.inf, dtype), sorted_scores]),
          jnp.concatenate([zero, tp]), jnp.concatenate([zero, fp]))


@_compile.jit
def _roc_curve(in_scores, out_scores, n_in=None, n_out=None) -> RocCurve:
  thresholds, tp, fp = _roc_counts(in_scores, out_scores, n_in, n_out)
  # Divide by the (traced) totals rather than the static sizes: XLA would turn division by a
  # constant into multiplication by its reciprocal, which is not correctly rounded.
  return RocCurve(fpr=fp / fp[-1], tpr=tp / tp[-1], thresholds=thresholds)


def _host_roc_curve(in_scores, out_scores) -> RocCurve:
  thresholds, tp, fp = _host_roc_counts(in_scores, out_scores)
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
  if not _bucketed((in_scores, out_scores)):
    return _roc_auc(*_as_float(in_scores, out_scores))
  args = _padded_scores(in_scores, out_scores)
  return _compile.first_call(_roc_auc, _host_scores(_host_roc_auc, args), args,
                             len(args[0]) + len(args[1]))


def _area(tp, fp, xp=jnp):
  # Twice the area in units of (1 / n_in) x (1 / n_out): a sum of whole numbers, exact below
  # 2^53, divided once at the end. Padding adds steps of zero width.
  twice_area = xp.sum(xp.diff(fp) * (tp[1:] + tp[:-1]))
  return twice_area / (2.0 * tp[-1] * fp[-1])


@_compile.jit
def _roc_auc(in_scores, out_scores, n_in=None, n_out=None):
  _, tp, fp = _roc_counts(in_scores, out_scores, n_in, n_out)
  return _area(tp, fp)


def _host_roc_auc(in_scores, out_scores):
  _, tp, fp = _host_roc_counts(in_scores, out_scores)
  return _area(tp, fp, np)


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
  if not _bucketed((in_scores, out_scores, fpr)):
    return _tpr_at_fpr(*_as_float(in_scores, out_scores, fpr))
  in_, out, n_in, n_out = _padded_scores(in_scores, out_scores)
  fpr = _compile.argument(fpr, _float_dtype())
  host = _host_scores(_host_tpr_at_fpr, (in_, out, n_in, n_out))
  return _compile.first_call(_tpr_at_fpr, lambda *a: host(*a[:2], *a[3:], a[2]),
                             (in_, out, fpr, n_in, n_out), len(in_) + len(out))


def _tpr_from_counts(tp, fp, fpr, xp=jnp):
  # Both counts are non-decreasing along the curve: the answer is at the last point with
  # fp <= fpr * n_out (the first point, fp = 0, always qualifies). The relative slack of 1e-12
  # makes a target written as a decimal (0.3) admit the rate it stands for (3 / 10).
  allowed = fpr * fp[-1] * (1.0 + 1e-12)
  idx = xp.searchsorted(fp, allowed, side="right") - 1
  return tp[xp.clip(idx, 0, fp.shape[0] - 1)] / tp[-1]


@_compile.jit
def _tpr_at_fpr(in_scores, out_scores, fpr, n_in=None, n_out=None):
  _, tp, fp = _roc_counts(in_scores, out_scores, n_in, n_out)
  return _tpr_from_counts(tp, fp, fpr)


def _host_tpr_at_fpr(in_scores, out_scores, fpr):
  _, tp, fp = _host_roc_counts(in_scores, out_scores)
  return _tpr_from_counts(tp, fp, np.asarray(fpr, np.float64), np)


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
  if not _bucketed((scores, is_member, fraction)):
    return _precision_at_top(jnp.asarray(scores, dtype), jnp.asarray(is_member, dtype),
                             jnp.asarray(fraction, dtype))
  scores, is_member, m, _ = _padded_scores(scores, np.asarray(is_member, dtype))
  fraction = _compile.argument(fraction, dtype)

  def host(scores, is_member, fraction, m):
    return _host_precision_at_top(np.asarray(scores)[:m], np.asarray(is_member)[:m], fraction)
  return _compile.first_call(_precision_at_top, host, (scores, is_member, fraction, m),
                             len(scores))


def _precision_from_order(sorted_scores, members, fraction, m, tie_groups, xp=jnp):
  """Precision at the top ``fraction`` of ``m`` real scores, sorted in descending order (any
  padding after them), with ``members`` the membership in that order."""
  top_members = xp.concatenate([xp.zeros((1,), members.dtype), xp.cumsum(members)])
  x = fraction * m
  nearest = xp.round(x)
  k = xp.where(xp.abs(x - nearest) <= 1e-9 * xp.maximum(x, 1.0), nearest, xp.ceil(x))
  k = xp.clip(k, 1, m)
  start, end = tie_groups(sorted_scores)
  pos = k.astype(xp.int32) - 1
  gs, ge = start[pos], xp.minimum(end[pos], m - 1)  # a tie group ends at the last real score
  group_members = top_members[ge + 1] - top_members[gs]
  tp = top_members[gs] + (k - gs) * group_members / (ge - gs + 1)
  return tp / k


@_compile.jit
def _precision_at_top(scores, is_member, fraction, m=None):
  # Padding (past the first m scores, :func:`_padded_scores`) becomes -inf and no member; the
  # stable sort keeps it after every real -inf, and tie groups are cut at the last real score.
  if m is None:
    m = scores.shape[0]
  else:
    valid = jnp.arange(scores.shape[0]) < m
    scores = jnp.where(valid, scores, -jnp.inf)
    is_member = jnp.where(valid, is_member, 0.0)
  order = jnp.argsort(scores, descending=True, stable=True)
  return _precision_from_order(scores[order], is_member[order], fraction, m, _tie_groups)


def _host_precision_at_top(scores, is_member, fraction):
  """:func:`_precision_at_top` in NumPy (float64)."""
  scores = np.asarray(scores, np.float64)
  order = np.argsort(-scores, kind="stable")
  return _precision_from_order(scores[order], np.asarray(is_member, np.float64)[order],
                               np.asarray(fraction, np.float64), scores.shape[0],
                               _host_tie_groups, np)
