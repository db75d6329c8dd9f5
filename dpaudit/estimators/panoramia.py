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
:math:`\tilde\epsilon`-DP. The paper's :math:`c_{lb}` is that of the *strongest* baseline tried
(Sec. 5.1, App. C.1): :func:`panoramia_bounds` takes several baselines and keeps the largest
:math:`c_{lb}`, each baseline tested at :math:`\beta / (2B)` so that the maximum keeps the joint
confidence. :func:`panoramia_null` gives the reference distribution of :math:`\tilde\epsilon`
for a target that leaks nothing (a MIA no stronger than the strongest baseline), so that a
measured :math:`\tilde\epsilon` can be told apart from what the audit shows without leakage.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate
from dpaudit.estimators import _compile, binomial
from dpaudit.estimators._sorting import descending_cumulative

TAILS = ("binomial", "hoeffding")
CORRECTIONS = ("bonferroni", "none")


class ThresholdCurve(NamedTuple):
  """Per-threshold statistics of one score vector, in descending order of threshold.

  Arrays have length m (one entry per position in the descending sort of the scores). Entry k
  is a threshold when position k is the last of its group of tied scores and at least
  ``min_predictions`` points score at or above it (``valid``); at other positions
  ``thresholds``, ``precision``, ``recall`` and ``lower_bound`` are NaN (``predictions`` and
  ``true_positives`` are the counts of the top k + 1 points in sort order).
  ``thresholds[valid]`` are the distinct score values, largest first.

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
    baseline: :class:`ThresholdCurve` of the strongest baseline's scores (``lower_bound`` is
      c_lb per threshold).
    mia: :class:`ThresholdCurve` of the MIA scores (``lower_bound`` is {c+eps}_lb per
      threshold).
    baseline_c_lb: ``(B,)`` the c_lb of each baseline, at the level it was tested at (each a
      valid lower bound on c; ``c_lb`` is their maximum).
    best_baseline: index of the strongest baseline (the first of equal ones).
    optimistic: True with ``correction="none"``: the maxima over thresholds were taken after
      testing each at the full level, so c_lb and {c+eps}_lb are NOT valid 1 - beta lower
      bounds (the paper's numbers).
  """
  c_lb: jax.Array
  c_plus_eps_lb: jax.Array
  eps_tilde: jax.Array
  baseline: ThresholdCurve
  mia: ThresholdCurve
  baseline_c_lb: jax.Array
  best_baseline: jax.Array
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


def _sorted_counts(scores, is_member, min_predictions, num_examples=None) -> _SortedCounts:
  """One sort and cumulative counts: position k predicts "member" for the top k + 1 points
  (ties broken by index); it is a threshold when it ends its group of tied scores. With
  ``num_examples`` (traced) only the first m points are real (an input padded to its bucket):
  the padding sorts after them, counts as no member and ends no group."""
  m = scores.shape[0]
  valid = None if num_examples is None else jnp.arange(m) < num_examples
  order, tp = descending_cumulative(scores, is_member, stable=True, valid=valid)
  sorted_scores = scores[order]
  r = jnp.arange(1, m + 1, dtype=scores.dtype)
  # Position k ends a tie group when the next score is strictly smaller (or k is last).
  last = jnp.ones((min(m, 1),), bool)
  is_end = jnp.concatenate([sorted_scores[:-1] > sorted_scores[1:], last])
  threshold = jnp.logical_and(is_end, r >= min_predictions)
  if num_examples is not None:
    real = r <= num_examples
    threshold = jnp.logical_and(jnp.logical_or(threshold, r == num_examples) & real,
                                r >= min_predictions)
  return _SortedCounts(sorted_scores, tp, r, threshold)


def _curves(scores, is_member, levels, bonferroni, min_predictions, tail,
            num_examples=None) -> ThresholdCurve:
  """The threshold curves of the rows of ``scores`` (rows, m), row i tested at ``levels[i]``
  (divided by its number of thresholds under ``bonferroni``); of the first ``num_examples``
  points when the rows are padded."""
  dtype = scores.dtype
  counts = jax.vmap(_sorted_counts, in_axes=(0, None, None, None))(scores, is_member,
                                                                   min_predictions, num_examples)
  num_thresholds = jnp.sum(counts.valid, axis=-1)
  level = jnp.where(bonferroni, levels / jnp.maximum(num_thresholds, 1).astype(dtype), levels)
  tp, r = counts.true_positives, counts.predictions
  precision = tp / r
  if tail == "binomial":
    # Largest p with P[Bin(r, p) >= tp] <= level: the one-sided Clopper-Pearson lower limit.
    p_lb = binomial.cp_lower_limit(tp, r, jnp.log(level)[:, None])
  else:
    p_lb = precision - jnp.sqrt(jnp.log(1.0 / level)[:, None] / (2.0 * r))
  bound = _clipped_logit(p_lb)
  m = scores.shape[1]
  members = tp[:, -1:] if m else jnp.zeros((scores.shape[0], 1), dtype)
  recall = tp / jnp.maximum(members, 1.0)
  nan = jnp.asarray(jnp.nan, dtype)
  valid = counts.valid
  return ThresholdCurve(
      thresholds=jnp.where(valid, counts.sorted_scores, nan),
      predictions=r,
      true_positives=tp,
      precision=jnp.where(valid, precision, nan),
      recall=jnp.where(valid, recall, nan),
      lower_bound=jnp.where(valid, bound, nan),
      valid=valid,
      num_thresholds=num_thresholds,
      per_test_significance=level)


def _best_bounds(curves: ThresholdCurve) -> jax.Array:
  """Each row's largest per-threshold bound (0 without a valid threshold)."""
  return jnp.max(jnp.where(curves.valid, curves.lower_bound, 0.0), axis=-1, initial=0.0)


def _row_levels(rows: int, significance, bonferroni):
  """beta / 2 for the MIA (last row); beta / (2B) for each of the B baselines under the
  Bonferroni correction, beta / 2 without it."""
  half = significance / 2.0
  num_baselines = rows - 1
  is_baseline = jnp.arange(rows) < num_baselines
  return jnp.where(jnp.logical_and(bonferroni, is_baseline), half / num_baselines, half)


@_compile.jit(static_argnames=("tail",),
              fusion_emitters=_compile.fusion_below(_compile.LARGE_BATCH), tree_reductions=False)
def _panoramia(scores, is_member, significance, bonferroni, min_predictions, tail,
               num_examples=None):
  """``scores`` stacks the B baselines' scores and the MIA's (last), (B + 1, m); every curve
  shares one solver call. ``num_examples``: the real points when m is padded."""
  curves = _curves(scores, is_member, _row_levels(scores.shape[0], significance, bonferroni),
                   bonferroni, min_predictions, tail, num_examples)
  lbs = _best_bounds(curves)
  best = jnp.argmax(lbs[:-1])
  baseline, mia = (jax.tree_util.tree_map(lambda x, i=i: x[i], curves) for i in (best, -1))
  return PanoramiaBounds(c_lb=lbs[best], c_plus_eps_lb=lbs[-1],
                         eps_tilde=jnp.maximum(lbs[-1] - lbs[best], 0.0),
                         baseline=baseline, mia=mia, baseline_c_lb=lbs[:-1], best_baseline=best)


def _check_inputs(baseline_scores, mia_scores, is_member):
  """Shapes and values of :func:`panoramia_bounds`'s score arguments; returns B, the number of
  baselines."""
  if np.ndim(baseline_scores) not in (1, 2):
    raise ValueError("baseline_scores must be 1-D (m,) or 2-D (B baselines, m), got shape "
                     f"{np.shape(baseline_scores)}")
  for name, value in (("mia_scores", mia_scores), ("is_member", is_member)):
    if np.ndim(value) != 1:
      raise ValueError(f"{name} must be 1-D, got shape {np.shape(value)}")
  if np.shape(baseline_scores)[-1:] != np.shape(is_member):
    raise ValueError(f"baseline_scores has shape {np.shape(baseline_scores)} but is_member has "
                     f"shape {np.shape(is_member)}; they must have the same last axis m")
  if np.ndim(baseline_scores) == 2 and np.shape(baseline_scores)[0] == 0:
    raise ValueError("baseline_scores holds no baseline (shape "
                     f"{np.shape(baseline_scores)}); need at least one row")
  _validate.check_same_shape("mia_scores", mia_scores, "is_member", is_member)
  # Only the order of the scores matters: infinities are allowed, NaN is not (m = 0 is).
  for name, value in (("baseline_scores", baseline_scores), ("mia_scores", mia_scores)):
    _validate.check_real_array(name, value, nonempty=False, neg_inf=True, pos_inf=True)
  _validate.check_binary("is_member", is_member)
  return 1 if np.ndim(baseline_scores) == 1 else int(np.shape(baseline_scores)[0])


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

  **The strongest baseline.** The paper measures against the baseline with the largest
  :math:`c_{lb}` among those tried (Sec. 5.1, App. C.1: helper on generated data, on real data,
  none). ``baseline_scores`` may stack B baselines, (B, m); :math:`c_{lb}` is then the largest
  of their bounds. Each baseline is a valid test of the same claim (the generator is c-close),
  so with the Bonferroni correction each is tested at :math:`\beta / (2B)` and the maximum
  still holds at :math:`1 - \beta/2`; a stronger baseline lowers :math:`\tilde\epsilon`, never
  raises it.

  Thresholds are every distinct score value (tied scores are always on the same side), from
  one sort and cumulative counts; those with fewer than ``min_predictions`` predictions are
  skipped. Selection honesty: with ``correction="bonferroni"`` (default) each test runs at
  :math:`\beta / (2K)` for the K thresholds of its score vector (and a further 1/B for each of
  B baselines), so the maxima over thresholds and baselines keep the joint 1 - beta confidence
  of Cor. 2 (K depends only on the scores, and Props. 1-2 hold conditionally on the scores, so
  the union bound is valid). With ``correction="none"`` each threshold is tested at
  :math:`\beta/2` and the maximum is taken afterwards, as in the paper; the resulting bounds
  are optimistic (not valid at 1 - beta).

  Args:
    baseline_scores: m baseline scores :math:`t^b` (higher = more likely real), 1-D, or B
      baselines' scores stacked, (B, m).
    mia_scores: 1-D array of m MIA scores :math:`t^a` (higher = more likely member).
    is_member: 1-D boolean (or 0/1) array s of length m.
    significance: beta in (0, 1); each of the two tests gets beta / 2.
    tail: "binomial" or "hoeffding".
    correction: "bonferroni" or "none".
    min_predictions: thresholds predicting fewer members than this are ignored (>= 1).

  Returns:
    :class:`PanoramiaBounds`. With m = 0 or no valid threshold every bound is 0.

  >>> import numpy as np
  >>> member = np.array([1, 0] * 50)
  >>> mia = member + 0.01 * np.arange(100)   # separates members perfectly
  >>> baseline = 0.01 * np.arange(100)       # knows nothing
  >>> out = panoramia_bounds(baseline, mia, member)
  >>> float(out.c_lb), round(float(out.eps_tilde), 2)
  (0.0, 1.71)
  """
  _validate.check_choice("tail", tail, TAILS)
  _validate.check_choice("correction", correction, CORRECTIONS)
  _validate.check_significance(significance)
  _validate.check_integer("min_predictions", min_predictions, 1)
  _check_inputs(baseline_scores, mia_scores, is_member)
  dtype = _float_dtype()
  baselines = _compile.argument(baseline_scores, dtype)
  mia = _compile.argument(mia_scores, dtype)
  if all(isinstance(v, np.ndarray) for v in (baselines, mia)):
    scores = np.concatenate([np.atleast_2d(baselines), mia[None]])
  else:
    scores = jnp.concatenate([jnp.atleast_2d(baselines), jnp.asarray(mia)[None]])
  args = (scores, _compile.argument(is_member, dtype), _compile.argument(significance, dtype),
          np.asarray(correction == "bonferroni"), _compile.argument(min_predictions, dtype), tail)
  if not _validate.is_concrete(args) or np.shape(is_member)[0] == 0:  # a caller's trace, or m = 0
    out = _panoramia(*args[:-1], tail=tail)
    return out._replace(optimistic=correction == "none")
  m = int(np.shape(is_member)[0])
  size = _compile.bucket_size(m)
  padded = (_compile.pad_edge(args[0], size), _compile.pad_edge(args[1], size), *args[2:],
            np.asarray(m, np.int32))
  # The host path's cost follows the points per row (its few rows are sorted one by one).
  out = _compile.first_call(_panoramia_program, _host_panoramia, padded, m)
  return _cut_points(out, m)._replace(optimistic=correction == "none")


def _panoramia_program(scores, is_member, significance, bonferroni, min_predictions, tail,
                       num_examples):
  """:func:`_panoramia` with ``tail`` passed by position (for :func:`_compile.first_call`)."""
  return _panoramia(scores, is_member, significance, bonferroni, min_predictions, tail=tail,
                    num_examples=num_examples)


def _cut_points(out: PanoramiaBounds, m: int) -> PanoramiaBounds:
  """``out`` with its per-point arrays cut back to the ``m`` real points (on the host: no
  slicing program per size)."""
  def cut(curve):
    return ThresholdCurve(*(jax.device_put(np.asarray(x)[..., :m]) if np.ndim(x) else x
                            for x in curve))
  return out._replace(baseline=cut(out.baseline), mia=cut(out.mia))


class PanoramiaNull(NamedTuple):
  r"""Result of :func:`panoramia_null`.

  Attributes:
    eps_tilde: ``(num_samples,)`` :math:`\tilde\epsilon` of audits of targets that leak
      nothing, each with its own resampled baselines and MIA.
    c_lb: ``(num_samples,)`` their :math:`c_{lb}` (strongest resampled baseline).
    c_plus_eps_lb: ``(num_samples,)`` their :math:`\{c+\epsilon\}_{lb}`.
    best_baseline: index of the audit's strongest baseline, whose score law the null MIAs
      follow.
  """
  eps_tilde: jax.Array
  c_lb: jax.Array
  c_plus_eps_lb: jax.Array
  best_baseline: jax.Array


@_compile.jit(static_argnames=("tail",), fusion_emitters=False, tree_reductions=False)
def _null_bounds(scores, is_member, significance, bonferroni, min_predictions, tail,
                 num_examples=None):
  """(c_lb, {c+eps}_lb) of each of R audits, ``scores`` (R, B + 1, m) as in :func:`_panoramia`
  (the first ``num_examples`` points real when m is padded)."""
  def one(rows):
    lbs = _best_bounds(_curves(rows, is_member, _row_levels(rows.shape[0], significance,
                                                            bonferroni),
                               bonferroni, min_predictions, tail, num_examples))
    return jnp.max(lbs[:-1]), lbs[-1]
  return jax.vmap(one)(scores)


def _null_bounds_program(scores, is_member, significance, bonferroni, min_predictions, tail,
                         num_examples):
  """:func:`_null_bounds` with ``tail`` passed by position (for :func:`_compile.first_call`)."""
  return _null_bounds(scores, is_member, significance, bonferroni, min_predictions, tail=tail,
                      num_examples=num_examples)


def _check_membership(is_member, m: int | None = None) -> int:
  """``is_member`` is a 1-D boolean or 0/1 array (of length ``m`` when given); returns its
  length."""
  if np.ndim(is_member) != 1:
    raise ValueError(f"is_member must be 1-D (m,), got shape {np.shape(is_member)}")
  _validate.check_binary("is_member", is_member)
  length = int(np.shape(is_member)[0])
  if m is not None and length != m:
    raise ValueError(f"is_member has length {length} but the scores have m={m} points; they "
                     "must match")
  return length


def _check_null_scores(name: str, scores, ndims: tuple[int, ...] = (1, 2)) -> int:
  """Scores that the smoothed bootstrap perturbs: real, finite (a kernel bandwidth of
  infinite scores is undefined), at least one point, 1-D (m,) or 2-D (rows, m); returns m."""
  _validate.check_real_array(name, scores)
  if np.ndim(scores) not in ndims:
    shapes = " or ".join({1: "1-D (m,)", 2: "2-D (rows, m)"}[d] for d in ndims)
    raise ValueError(f"{name} must be {shapes}, got shape {np.shape(scores)}")
  return int(np.shape(scores)[-1])


def _check_num_samples(num_samples, m: int, rows: int = 1) -> int:
  """``num_samples`` null draws of ``rows`` score vectors of m points: an integer >= 1 whose
  draws (float64 words, int64 indices and float64 scores per point) fit in memory."""
  num_samples = _validate.check_integer("num_samples", num_samples, 1)
  _validate.check_allocation("num_samples", num_samples, 8.0 * max(m, 1) * (2 + 2 * rows),
                             what="null sample")
  return num_samples


def bootstrap_within_classes(key: jax.Array, is_member, num_samples: int) -> np.ndarray:
  """``(num_samples, m)`` indices: each point's index is drawn uniformly, with replacement,
  from the points of its own class (members from members, non-members from non-members), so
  that a score vector indexed by a row has the bootstrap's class-conditional law and the audit
  set's membership."""
  _validate.check_key(key)
  m = _check_membership(is_member)
  _check_num_samples(num_samples, m)
  member = np.asarray(is_member).astype(bool).reshape(-1)
  # Drawn at the bucket of m and cut (one random program per bucket, not per m).
  u = np.asarray(jax.random.uniform(key, (num_samples, _compile.bucket_size(member.size)),
                                    jnp.float64))[:, :member.size]
  source = np.zeros(u.shape, np.int64)
  for label in (False, True):
    points = np.flatnonzero(member == label)
    if points.size:
      pick = np.minimum((u[:, points] * points.size).astype(np.int64), points.size - 1)
      source[:, points] = points[pick]
  return source


def silverman_bandwidths(scores, is_member) -> np.ndarray:
  """Per row of ``scores`` (rows, m) and per point, the rule-of-thumb kernel bandwidth of its
  class's scores (Silverman 1986, Eq. 3.31): 0.9 min(sd, IQR / 1.34) n^(-1/5) over the n
  scores of the point's row and class (the sd alone where the IQR is 0; 0 for a class of one
  point or of one value). Float64 ``(rows, m)``."""
  _check_membership(is_member, _check_null_scores("scores", scores))
  scores = np.atleast_2d(np.asarray(scores, np.float64))
  member = np.asarray(is_member).astype(bool).reshape(-1)
  out = np.zeros(scores.shape)
  for label in (False, True):
    points = member == label
    n = int(points.sum())
    if n < 2:
      continue
    x = scores[:, points]
    sd = x.std(axis=1, ddof=1)
    iqr = np.subtract(*np.quantile(x, [0.75, 0.25], axis=1))
    spread = np.where(iqr > 0, np.minimum(sd, iqr / 1.34), sd)
    out[:, points] = (0.9 * spread * n ** -0.2)[:, None]
  return out


def smoothed_bootstrap(key: jax.Array, scores, is_member, indices) -> np.ndarray:
  """``scores[..., indices]`` plus Gaussian noise of each point's class bandwidth
  (:func:`silverman_bandwidths`): draws from the kernel density estimate of each class's score
  law (the smoothed bootstrap). Unlike the plain bootstrap, whose top scores are always copies
  of the observed ones, its draws have a tail as variable as fresh scores' (what the
  maximum over thresholds of :func:`panoramia_bounds` depends on), and they are tied with
  probability 0. Float64 ``(R, m)`` for 1-D ``scores``, ``(rows, R, m)`` for 2-D; ``indices``
  is an integer array ``(R, m)`` of points in ``[0, m)`` (:func:`bootstrap_within_classes`)."""
  _validate.check_key(key)
  m = _check_null_scores("scores", scores)
  _check_membership(is_member, m)
  if not isinstance(indices, (np.ndarray, jax.Array)):
    indices = np.asarray(indices)
  if getattr(indices.dtype, "kind", "V") not in "iu":
    raise ValueError(f"indices must be an integer array of point indices, got dtype "
                     f"{indices.dtype}")
  if indices.ndim != 2 or indices.shape[1] != m:
    raise ValueError(f"indices must have shape (R, m={m}), got shape {tuple(indices.shape)}")
  _validate.check_range("indices", indices, 0, m - 1)
  rows = np.atleast_2d(np.asarray(scores, np.float64))
  picked = rows[:, indices]  # (rows, R, m)
  width = silverman_bandwidths(rows, is_member)[:, None, :]
  noise = np.asarray(jax.random.normal(key, picked.shape[:-1] + (_compile.bucket_size(m),),
                                     jnp.float64))[..., :m]  # one program per bucket
  out = picked + width * noise
  return out[0] if np.ndim(scores) == 1 else out


def null_mia_scores(key: jax.Array, baseline_scores, is_member, num_samples: int) -> np.ndarray:
  """``num_samples`` score vectors of a MIA that knows exactly as much as the baseline
  (1-D ``baseline_scores``): fresh draws from the baseline's class-conditional score laws on
  the audit set's membership, by the smoothed bootstrap (:func:`bootstrap_within_classes`,
  :func:`smoothed_bootstrap`). Float64 ``(num_samples, m)``."""
  _validate.check_key(key)
  m = _check_null_scores("baseline_scores", baseline_scores, ndims=(1,))
  _check_membership(is_member, m)
  _check_num_samples(num_samples, m)
  key_pick, key_noise = jax.random.split(key)
  indices = bootstrap_within_classes(key_pick, is_member, num_samples)
  return smoothed_bootstrap(key_noise, baseline_scores, is_member, indices)


def panoramia_null(key: jax.Array, baseline_scores, is_member, significance=0.05, *,
                   num_samples: int = 200, tail: str = "binomial",
                   correction: str = "bonferroni", min_predictions: int = 1) -> PanoramiaNull:
  r"""The reference distribution of :math:`\tilde\epsilon` when the target leaks nothing.

  Under "the target leaks nothing", a MIA that sees the target's loss can do no better than a
  baseline that does not. Each null sample replays the audit on the same audit set (same m and
  membership) with a MIA exactly as strong as the strongest baseline: the baselines' scores
  are drawn afresh from their class-conditional laws by the smoothed bootstrap
  (:func:`bootstrap_within_classes`, one draw of points shared by all baselines so that their
  dependence is kept, then :func:`smoothed_bootstrap`), and the MIA's scores are an
  independent such draw from the strongest baseline's (:func:`null_mia_scores`). :math:`c_{lb}`,
  :math:`\{c+\epsilon\}_{lb}` and :math:`\tilde\epsilon` then follow
  :func:`panoramia_bounds`' rules (the same significance, tail, correction over thresholds
  and baselines, ``min_predictions``). Resampling both sides gives the null the spread of two
  independent score vectors, as the measured :math:`\tilde\epsilon` has; :func:`null_p_value`
  gives the share of null samples at least as large as a measurement. It is a bootstrap, so
  its level is approximate: in simulations with MIA and baselines of one law (m = 300 and
  1,000, one and three baselines, from a weak to a near-saturated baseline) p <= 0.05 occurred
  in 0-5.5% of the audits (``python -m experiments.panoramia_null_calibration``;
  ``tests/estimators/test_panoramia.py`` checks one setting). The smoothing matters: a plain
  bootstrap's resampled top scores are copies of the observed ones, so its null is too narrow
  where eps~ is decided, at the extreme thresholds.

  Even without leakage :math:`\tilde\epsilon` is often above 0: it is the positive part of a
  difference of two noisy maxima, and :math:`c_{lb}` is held to :math:`\beta/(2B)` where the MIA
  gets :math:`\beta/2`. The null quantifies exactly that.

  Args:
    key: PRNG key of the draws.
    baseline_scores: as for :func:`panoramia_bounds`, (m,) or (B, m), but finite (the
      smoothed bootstrap's bandwidths need finite scores) and m >= 1.
    is_member: the audit set's membership s, (m,).
    significance, tail, correction, min_predictions: as for :func:`panoramia_bounds`.
    num_samples: null audits drawn (>= 1).

  >>> import jax, numpy as np
  >>> rng = np.random.default_rng(0)
  >>> member = rng.random(400) < 0.5
  >>> baseline = rng.normal(member.astype(float))
  >>> null = panoramia_null(jax.random.key(0), baseline, member, num_samples=50)
  >>> null.eps_tilde.shape, bool(np.all(np.asarray(null.eps_tilde) >= 0))
  ((50,), True)
  """
  _validate.check_key(key)
  _validate.check_integer("num_samples", num_samples, 1)
  _check_null_scores("baseline_scores", baseline_scores)
  rows = (1 if np.ndim(baseline_scores) != 2 else np.shape(baseline_scores)[0]) + 1
  if num_samples * rows * max(np.shape(is_member)[-1:] or (0,)) > 2**31:
    raise ValueError(f"num_samples={num_samples} x {rows} score vectors x "
                     f"m={np.shape(is_member)[-1]} exceed 2^31 scores; draw fewer null samples")
  bounds = panoramia_bounds(baseline_scores, np.zeros(np.shape(is_member)), is_member,
                            significance, tail=tail, correction=correction,
                            min_predictions=min_predictions)
  baselines = np.atleast_2d(np.asarray(baseline_scores, np.float64))
  best = int(bounds.best_baseline)
  keys = jax.random.split(key, 4)
  shared = bootstrap_within_classes(keys[0], is_member, num_samples)
  resampled = smoothed_bootstrap(keys[1], baselines, is_member, shared)  # (B, R, m)
  mia = smoothed_bootstrap(keys[3], baselines[best], is_member,
                           bootstrap_within_classes(keys[2], is_member, num_samples))
  dtype = _float_dtype()
  scores = np.concatenate([np.moveaxis(resampled, 0, 1), mia[:, None]], axis=1).astype(dtype)
  m = scores.shape[-1]
  size = _compile.bucket_size(m)
  args = (_compile.pad_edge(scores, size), _compile.pad_edge(_compile.argument(is_member, dtype),
                                                            size),
          _compile.argument(significance, dtype), np.asarray(correction == "bonferroni"),
          _compile.argument(min_predictions, dtype), tail, np.asarray(m, np.int32))
  c_lb, cpe = _compile.first_call(_null_bounds_program, _host_null_bounds, args, scores.size)
  return PanoramiaNull(eps_tilde=jnp.maximum(cpe - c_lb, 0.0), c_lb=c_lb, c_plus_eps_lb=cpe,
                       best_baseline=bounds.best_baseline)


def null_p_value(observed, null_samples) -> float:
  r"""The share of null samples at least as large as ``observed``, counting the observation
  itself: :math:`(1 + \#\{x \ge \text{observed}\}) / (1 + n)`. Small values say the measurement
  is unlikely without leakage; an observed :math:`\tilde\epsilon` of 0 gives 1.

  >>> null_p_value(0.3, [0.0, 0.1, 0.2, 0.0])
  0.2
  """
  _validate.check_real_array("null_samples", null_samples, pos_inf=True)
  _validate.check_range("observed", observed)
  null = np.asarray(null_samples, np.float64).reshape(-1)
  return float((1 + np.sum(null >= observed)) / (1 + null.size))


# --- Exact NumPy/scipy paths for first calls on small inputs ---------------------------------
#
# The same curves with scipy's inverse incomplete beta function for the Clopper-Pearson lower
# limits (``scipy.special.betaincinv``). They answer a first call while its program compiles
# (:func:`dpaudit.estimators._compile.first_call`).


def _host_curves(scores, is_member, levels, bonferroni, min_predictions, tail) -> ThresholdCurve:
  """:func:`_curves` in NumPy (unpadded rows)."""
  from scipy import special
  rows, m = scores.shape
  member = np.asarray(is_member, np.float64)
  order = np.argsort(-scores, axis=-1, kind="stable")
  sorted_scores = np.take_along_axis(scores, order, axis=-1)
  tp = np.cumsum(member[order], axis=-1)
  r = np.broadcast_to(np.arange(1, m + 1, dtype=np.float64), (rows, m))
  is_end = np.concatenate([sorted_scores[:, :-1] > sorted_scores[:, 1:],
                           np.ones((rows, min(m, 1)), bool)], axis=-1)
  valid = is_end & (r >= min_predictions)
  num_thresholds = valid.sum(axis=-1)
  level = np.where(bonferroni, levels / np.maximum(num_thresholds, 1), levels)
  precision = tp / r
  if tail == "binomial":
    with np.errstate(invalid="ignore"):
      p_lb = np.where(tp > 0.0, special.betaincinv(np.maximum(tp, 1.0), r - tp + 1.0,
                                                   level[:, None]), 0.0)
  else:
    p_lb = precision - np.sqrt(np.log(1.0 / level)[:, None] / (2.0 * r))
  above = p_lb > 0.5
  safe = np.where(above, p_lb, 0.75)
  bound = np.where(above, np.log(safe) - np.log1p(-safe), 0.0)
  members = tp[:, -1:] if m else np.zeros((rows, 1))
  recall = tp / np.maximum(members, 1.0)
  return ThresholdCurve(np.where(valid, sorted_scores, np.nan), r, tp,
                        np.where(valid, precision, np.nan), np.where(valid, recall, np.nan),
                        np.where(valid, bound, np.nan), valid, num_thresholds, level)


def _host_best_bounds(curves: ThresholdCurve) -> np.ndarray:
  return np.max(np.where(curves.valid, curves.lower_bound, 0.0), axis=-1, initial=0.0)


def _host_row_levels(rows: int, significance, bonferroni) -> np.ndarray:
  half = significance / 2.0
  is_baseline = np.arange(rows) < rows - 1
  return np.where(bonferroni & is_baseline, half / max(rows - 1, 1), half)


def _host_panoramia(scores, is_member, significance, bonferroni, min_predictions, tail,
                    num_examples):
  """:func:`_panoramia` in NumPy (arguments padded as the program takes them)."""
  m = int(num_examples)
  scores, member = np.asarray(scores, np.float64)[:, :m], np.asarray(is_member)[:m]
  curves = _host_curves(scores, member, _host_row_levels(scores.shape[0], significance,
                                                         bonferroni),
                        bool(bonferroni), float(min_predictions), tail)
  lbs = _host_best_bounds(curves)
  best = int(np.argmax(lbs[:-1]))
  baseline, mia = (ThresholdCurve(*(x[i] for x in curves)) for i in (best, -1))
  return PanoramiaBounds(c_lb=lbs[best], c_plus_eps_lb=lbs[-1],
                         eps_tilde=np.maximum(lbs[-1] - lbs[best], 0.0), baseline=baseline,
                         mia=mia, baseline_c_lb=lbs[:-1], best_baseline=np.int64(best))


def _host_null_bounds(scores, is_member, significance, bonferroni, min_predictions, tail,
                      num_examples):
  """:func:`_null_bounds` in NumPy (arguments padded as the program takes them)."""
  m = int(num_examples)
  scores, member = np.asarray(scores, np.float64)[..., :m], np.asarray(is_member)[:m]
  levels = _host_row_levels(scores.shape[1], significance, bonferroni)
  lbs = np.stack([_host_best_bounds(_host_curves(rows, member, levels, bool(bonferroni),
                                                 float(min_predictions), tail))
                  for rows in scores])
  return np.max(lbs[:, :-1], axis=1), lbs[:, -1]
