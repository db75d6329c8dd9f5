r"""PANORAMIA: privacy measurement without retraining, from generated non-members.

Kazmi et al., "PANORAMIA: Privacy Auditing of Machine Learning Models without Retraining".
The audit set holds m points; point i is real training data (member, :math:`s_i = 1`) or a
generated sample (:math:`s_i = 0`) with :math:`s \sim \mathrm{Bernoulli}(1/2)^m` (Def. 2). A
baseline classifier scores the points without the target model (:math:`t^b`) and a membership
inference attack scores them with it (:math:`t^a`). Thresholding a score vector predicts
"member" for the r points whose score is at least the threshold; tp of them are members.

* Prop. 1: if the generator is c-close (Def. 3), tp is stochastically dominated by
  :math:`\mathrm{Bin}(r, \sigma(c))`, :math:`\sigma(c) = e^c / (1 + e^c)`, given the scores.
* Prop. 2: if moreover the target model is epsilon-DP, the MIA's tp is dominated by
  :math:`\mathrm{Bin}(r, \sigma(c + \epsilon))`.
* Cor. 1-2: testing each at level beta / 2 and inverting the tests gives lower confidence bounds
  :math:`c_{lb}` and :math:`\{c+\epsilon\}_{lb}` at joint level 1 - beta.
* Alg. 1 (lines 4-8 of "measure privacy leakage"): both maximised over thresholds, and
  :math:`\tilde\epsilon = \max(0, \{c+\epsilon\}_{lb} - c_{lb})`.

As the paper stresses (Sec. 4.2), :math:`\tilde\epsilon` is not a lower bound on epsilon: it
says that if the c-closeness claim at :math:`c_{lb}` is tight, the model cannot be
:math:`\tilde\epsilon`-DP.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate
from dpaudit.estimators import _compile
from dpaudit.estimators import binomial
from dpaudit.estimators._sorting import descending_cumulative

TAILS = ("binomial", "hoeffding")
CORRECTIONS = ("bonferroni", "none")


class ThresholdCurve(NamedTuple):
  """Per-threshold statistics of one score vector, in descending order of threshold.

  Arrays have length m (one entry per position in the descending sort of the scores). Entry k
  is a threshold when position k is the last of its group of tied scores and at least
  ``min_predictions`` points score at or above it (``valid``); at other positions
  ``thresholds``, ``precision``, ``recall`` and ``lower_bound`` are NaN (``predictions`` and
  ``true_positives`` are the counts of the top k + 1 points in sort order). ``thresholds[valid]`` are the distinct score values, largest first.

  Attributes:
    thresholds: the score value t; "member" is predicted for scores >= t.
    predictions: r, the number of points predicted "member".
    true_positives: tp, the members among them.
    precision: tp / r.
    recall: tp / (number of members); 0 when there are no members.
    lower_bound: the lower confidence bound of this threshold alone (c for the baseline,
      c + epsilon for the MIA), clipped at 0.
    valid: which entries are thresholds that were tested.
    num_thresholds: how many thresholds were tested.
    per_test_significance: the level of each test: significance / 2, further divided by
      ``num_thresholds`` under the Bonferroni correction.
  """
  thresholds: jax.Array
  predictions: jax.Array
  true_positives: jax.Array
  precision: jax.Array
  recall: jax.Array
  lower_bound: jax.Array
  valid: jax.Array
  num_thresholds: jax.Array
  per_test_significance: jax.Array


class PanoramiaBounds(NamedTuple):
  r"""Result of :func:`panoramia_bounds`.

  Attributes:
    c_lb: lower confidence bound on the closeness c of the generator (Prop. 1), >= 0.
    c_plus_eps_lb: lower confidence bound on c + epsilon (Prop. 2), >= 0.
    eps_tilde: :math:`\max(0, \{c+\epsilon\}_{lb} - c_{lb})` (Alg. 1, line 8).
    baseline: :class:`ThresholdCurve` of the baseline scores (``lower_bound`` is c_lb per
      threshold).
    mia: :class:`ThresholdCurve` of the MIA scores (``lower_bound`` is {c+eps}_lb per
      threshold).
    optimistic: True with ``correction="none"``: the maxima over thresholds were taken after
      testing each at the full level, so c_lb and {c+eps}_lb are NOT valid 1 - beta lower
      bounds (the paper's numbers).
  """
  c_lb: jax.Array
  c_plus_eps_lb: jax.Array
  eps_tilde: jax.Array
  baseline: ThresholdCurve
  mia: ThresholdCurve
  optimistic: bool = False

  @property
  def c_lb_per_threshold(self) -> jax.Array:
    """c_lb(t) at each baseline threshold (``baseline.lower_bound``)."""
    return self.baseline.lower_bound

  @property
  def c_plus_eps_lb_per_threshold(self) -> jax.Array:
    """{c+eps}_lb(t) at each MIA threshold (``mia.lower_bound``)."""
    return self.mia.lower_bound


def _float_dtype():
  return jnp.result_type(float)


def _clipped_logit(p):
  """logit(p) for p > 1/2, else 0 (the bounds are on c >= 0)."""
  above = p > 0.5
  ps = jnp.where(above, p, 0.75)
  return jnp.where(above, jnp.log(ps) - jnp.log1p(-ps), 0.0)


class _SortedCounts(NamedTuple):
  sorted_scores: jax.Array
  true_positives: jax.Array
  predictions: jax.Array
  valid: jax.Array


def _sorted_counts(scores, is_member, min_predictions) -> _SortedCounts:
  """One sort and cumulative counts: position k predicts "member" for the top k + 1 points
  (ties broken by index); it is a threshold when it ends its group of tied scores."""
  m = scores.shape[0]
  order, tp = descending_cumulative(scores, is_member, stable=True)
  sorted_scores = scores[order]
  r = jnp.arange(1, m + 1, dtype=scores.dtype)
  # Position k ends a tie group when the next score is strictly smaller (or k is last).
  last = jnp.ones((min(m, 1),), bool)
  is_end = jnp.concatenate([sorted_scores[:-1] > sorted_scores[1:], last])
  return _SortedCounts(sorted_scores, tp, r, jnp.logical_and(is_end, r >= min_predictions))


@_compile.jit(static_argnames=("tail",),
              fusion_emitters=_compile.fusion_below(_compile.LARGE_BATCH), tree_reductions=False)
def _panoramia(scores, is_member, significance, bonferroni, min_predictions, tail):
  """``scores`` stacks the baseline and MIA scores, (2, m); both curves share one solver call."""
  dtype = scores.dtype
  counts = jax.vmap(_sorted_counts, in_axes=(0, None, None))(scores, is_member, min_predictions)
  num_thresholds = jnp.sum(counts.valid, axis=-1)
  level = significance / 2.0
  level = jnp.where(bonferroni, level / jnp.maximum(num_thresholds, 1).astype(dtype), level)
  tp, r = counts.true_positives, counts.predictions
  precision = tp / r
  if tail == "binomial":
    # Largest p with P[Bin(r, p) >= tp] <= level: the one-sided Clopper-Pearson lower limit.
    p_lb = binomial.cp_lower_limit(tp, r, jnp.log(level)[:, None])
  else:
    p_lb = precision - jnp.sqrt(jnp.log(1.0 / level)[:, None] / (2.0 * r))
  bound = _clipped_logit(p_lb)
  m = scores.shape[1]
  members = tp[:, -1:] if m else jnp.zeros((2, 1), dtype)
  recall = tp / jnp.maximum(members, 1.0)
  nan = jnp.asarray(jnp.nan, dtype)
  valid = counts.valid
  curves = ThresholdCurve(
      thresholds=jnp.where(valid, counts.sorted_scores, nan),
      predictions=r,
      true_positives=tp,
      precision=jnp.where(valid, precision, nan),
      recall=jnp.where(valid, recall, nan),
      lower_bound=jnp.where(valid, bound, nan),
      valid=valid,
      num_thresholds=num_thresholds,
      per_test_significance=level)
  lbs = jnp.max(jnp.where(valid, bound, 0.0), axis=-1, initial=0.0)
  baseline, mia = (jax.tree_util.tree_map(lambda x, i=i: x[i], curves) for i in (0, 1))
  return PanoramiaBounds(c_lb=lbs[0], c_plus_eps_lb=lbs[1],
                         eps_tilde=jnp.maximum(lbs[1] - lbs[0], 0.0),
                         baseline=baseline, mia=mia)


def panoramia_bounds(baseline_scores, mia_scores, is_member, significance=0.05, *,
                     tail: str = "binomial", correction: str = "bonferroni",
                     min_predictions: int = 1) -> PanoramiaBounds:
  r"""PANORAMIA's lower bounds on c and c + epsilon and its privacy measurement eps~.

  Props. 1-2, Cor. 1-2 and Alg. 1 (lines 4-8 of "measure privacy leakage") of Kazmi et al.,
  PANORAMIA. For a threshold t on a score vector with r predictions and tp true positives, c
  is rejected at level :math:`\beta/2` when :math:`\Pr[\mathrm{Bin}(r, \sigma(c)) \ge tp] \le
  \beta/2`, so the per-threshold bound is

  .. math:: c_{lb}(t) = \max\big(0,\ \mathrm{logit}\ \underline{p}(tp, r; \beta/2)\big),

  where :math:`\underline{p}` is

  * ``tail="binomial"`` (default, exact): the one-sided Clopper-Pearson lower limit, i.e. the
    largest p with :math:`\Pr[\mathrm{Bin}(r, p) \ge tp] \le \beta/2`;
  * ``tail="hoeffding"`` (the paper's illustrative bound after Cor. 1):
    :math:`tp/r - \sqrt{\log(2/\beta) / (2r)}`, always below the binomial limit.

  The same on the MIA scores gives :math:`\{c+\epsilon\}_{lb}(t)`. Then
  :math:`c_{lb} = \max_t c_{lb}(t)`, :math:`\{c+\epsilon\}_{lb} = \max_t \{c+\epsilon\}_{lb}(t)`
  and :math:`\tilde\epsilon = \max(0, \{c+\epsilon\}_{lb} - c_{lb})`.

  Thresholds are every distinct score value (tied scores are always on the same side), from
  one sort and cumulative counts; those with fewer than ``min_predictions`` predictions are
  skipped. Selection honesty: with ``correction="bonferroni"`` (default) each test runs at
  :math:`\beta / (2K)` for the K thresholds of its score vector, so the maxima over thresholds
  keep the joint 1 - beta confidence of Cor. 2 (K depends only on the scores, and Props. 1-2
  hold conditionally on the scores, so the union bound is valid). With ``correction="none"``
  each threshold is tested at :math:`\beta/2` and the maximum is taken afterwards, as in the
  paper; the resulting bounds are optimistic (not valid at 1 - beta).

  Args:
    baseline_scores: 1-D array of m baseline scores :math:`t^b` (higher = more likely real).
    mia_scores: 1-D array of m MIA scores :math:`t^a` (higher = more likely member).
    is_member: 1-D boolean (or 0/1) array s of length m.
    significance: beta in (0, 1); each of the two tests gets beta / 2.
    tail: "binomial" or "hoeffding".
    correction: "bonferroni" or "none".
    min_predictions: thresholds predicting fewer members than this are ignored (>= 1).

  Returns:
    :class:`PanoramiaBounds`. With m = 0 or no valid threshold every bound is 0.
  """
  _validate.check_choice("tail", tail, TAILS)
  _validate.check_choice("correction", correction, CORRECTIONS)
  _validate.check_significance(significance)
  if isinstance(min_predictions, bool) or not isinstance(min_predictions, (int, np.integer)):
    raise ValueError(f"min_predictions={min_predictions!r} must be a Python int >= 1")
  _validate.check_range("min_predictions", min_predictions, 1)
  for name, value in (("baseline_scores", baseline_scores), ("mia_scores", mia_scores),
                      ("is_member", is_member)):
    if np.ndim(value) != 1:
      raise ValueError(f"{name} must be 1-D, got shape {np.shape(value)}")
  _validate.check_same_shape("baseline_scores", baseline_scores, "is_member", is_member)
  _validate.check_same_shape("mia_scores", mia_scores, "is_member", is_member)
  _validate.check_range("baseline_scores", baseline_scores)
  _validate.check_range("mia_scores", mia_scores)
  if _validate.is_concrete(is_member):
    values = np.asarray(is_member)
    if values.dtype.kind not in "biuf" or not np.all((values == 0) | (values == 1)):
      raise ValueError(f"is_member must be boolean or 0/1, got values {np.unique(values)[:5]!r}")
  dtype = _float_dtype()
  curves = [_compile.argument(v, dtype) for v in (baseline_scores, mia_scores)]
  stack = np.stack if all(isinstance(v, np.ndarray) for v in curves) else jnp.stack
  out = _panoramia(stack(curves), _compile.argument(is_member, dtype),
                   _compile.argument(significance, dtype), np.asarray(correction == "bonferroni"),
                   _compile.argument(min_predictions, dtype), tail=tail)
  return out._replace(optimistic=correction == "none")
