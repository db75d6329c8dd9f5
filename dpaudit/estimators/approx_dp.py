r"""(epsilon, delta) lower bounds from the error rates of a distinguishing test.

An audit runs a mechanism many times on neighbouring inputs D and D' and tries to tell which one
was used. If the test's false-positive rate (calls D' when D was used) is FPR and its
false-negative rate is FNR, (epsilon, delta)-DP forces

.. math::
   \varepsilon \ge \max\Big\{\log\frac{1 - \delta - \mathrm{FNR}}{\mathrm{FPR}},\;
                              \log\frac{1 - \delta - \mathrm{FPR}}{\mathrm{FNR}}\Big\}.

The rates are only observed through counts, so both are replaced by Clopper-Pearson upper
confidence limits: Eq. (1) of Chadha et al., "Auditing Private Prediction" (in its
false-positive/false-negative form, Sec. 2.2), which is Eq. (6) of Liu & Xiong, "UniAud".
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate
from dpaudit.estimators import _compile, binomial
from dpaudit.estimators._sorting import descending_cumulative


def _float(x):
  return _compile.float_arguments(x)[0]


def _epsilon_from_rate_bounds(fpr_upper, fnr_upper, delta):
  """max(log((1 - delta - FNR^u)/FPR^u), log((1 - delta - FPR^u)/FNR^u), 0)."""
  def one_side(numerator_rate, denominator_rate):
    numerator = 1.0 - delta - numerator_rate
    safe = jnp.where(numerator > 0.0, numerator, 1.0)
    return jnp.where(numerator > 0.0, jnp.log(safe) - jnp.log(denominator_rate), -jnp.inf)
  return jnp.maximum(jnp.maximum(one_side(fnr_upper, fpr_upper), one_side(fpr_upper, fnr_upper)),
                     0.0)


def epsilon_from_error_counts(false_positives, negatives, false_negatives, positives,
                              delta: float = 0.0, significance: float = 0.05) -> jax.Array:
  r"""Lower bound on epsilon from the error counts of a test (Eq. (1) of Chadha et al.).

  .. math::
     \varepsilon_{\mathrm{lb}} = \max\Big\{\log\frac{1-\delta-\mathrm{FN}^u}{\mathrm{FP}^u},
        \log\frac{1-\delta-\mathrm{FP}^u}{\mathrm{FN}^u}, 0\Big\}

  where :math:`\mathrm{FP}^u` and :math:`\mathrm{FN}^u` are the upper ends of two-sided
  Clopper-Pearson intervals at confidence ``1 - significance`` for the false-positive rate
  (``false_positives`` out of ``negatives`` runs on D) and the false-negative rate
  (``false_negatives`` out of ``positives`` runs on D'). Each upper end fails with probability
  at most ``significance / 2``, so the bound holds with probability at least
  ``1 - significance`` (union bound). Same as Eq. (6) of UniAud.

  Zero errors give a finite bound (the Clopper-Pearson upper limit is positive), which is the
  largest bound ``negatives``/``positives`` observations can certify. All arguments broadcast.

  Args:
    false_positives: runs on D that the test called D' (0 <= . <= negatives).
    negatives: number of runs on D.
    false_negatives: runs on D' that the test called D (0 <= . <= positives).
    positives: number of runs on D'.
    delta: the delta of (epsilon, delta)-DP, in [0, 1).
    significance: beta of the 1 - beta confidence level, in (0, 1).

  Returns:
    The epsilon lower bound (>= 0) with the broadcast shape of the counts.

  >>> round(float(epsilon_from_error_counts(10, 1000, 300, 1000)), 4)  # FPR 1%, FNR 30%
  3.6005
  >>> round(float(epsilon_from_error_counts(0, 1000, 0, 1000)), 4)  # no errors: the ceiling
  5.6006
  """
  _validate.check_significance(significance)
  _validate.check_delta(delta)
  _validate.check_counts("false_positives", false_positives, negatives, "negatives")
  _validate.check_counts("false_negatives", false_negatives, positives, "positives")
  _validate.check_range("negatives", negatives, 1)
  _validate.check_range("positives", positives, 1)
  args = _compile.float_arguments(false_positives, negatives, false_negatives, positives, delta,
                                  significance)
  return _compile.elementwise(
      lambda *flat: _compile.first_call(_epsilon_from_error_counts, _host_error_counts, flat,
                                        max(int(np.size(a)) for a in flat)), *args)


@_compile.jit(fusion_emitters=False, tree_reductions=False)
def _epsilon_from_error_counts(false_positives, negatives, false_negatives, positives, delta,
                               significance):
  # The upper end of a two-sided interval at beta is the one-sided upper limit at beta / 2; both
  # rates go through one solver call.
  fp, neg, fn, pos, delta, significance = jnp.broadcast_arrays(
      false_positives, negatives, false_negatives, positives, delta, significance)
  upper = binomial.cp_upper_limit(jnp.stack([fp, fn]), jnp.stack([neg, pos]),
                                  jnp.log(significance / 2.0))
  return _epsilon_from_rate_bounds(upper[0], upper[1], delta)


def _check_scores(name: str, scores, minimum: int = 1, method: str | None = None) -> None:
  """1-D real scores (NaN, booleans, complex numbers and strings refused; infinities are
  ordered and allowed), at least ``minimum`` of them (``method`` names what needs them)."""
  _validate.check_real_array(name, scores, ndim=1, nonempty=False, neg_inf=True, pos_inf=True)
  if np.shape(scores)[0] < minimum:
    needs = f"method={method!r} needs" if method else "need"
    raise ValueError(f"{name} has {np.shape(scores)[0]} scores; {needs} at least {minimum}")


class ThresholdCounts(NamedTuple):
  """Error counts of the tests "score >= threshold means D'" at every distinct threshold.

  ``valid`` marks the positions that are real thresholds (ties are never split); position
  ``j`` predicts D' for the ``j`` highest pooled scores, and its threshold is the ``j``-th
  highest score (``+inf`` for ``j = 0``).
  """
  thresholds: jax.Array
  false_positives: jax.Array
  false_negatives: jax.Array
  valid: jax.Array


def threshold_counts(in_scores, out_scores) -> ThresholdCounts:
  """Error counts of every threshold test with one sort and cumulative sums.

  Args:
    in_scores: 1-D scores of runs on D' (positives); the test calls D' when score >= threshold.
      Real numbers (infinities allowed, NaN and booleans not).
    out_scores: 1-D scores of runs on D (negatives), likewise.
  """
  _check_scores("in_scores", in_scores)
  _check_scores("out_scores", out_scores)
  return _threshold_counts(jnp.asarray(in_scores), jnp.asarray(out_scores))


def _threshold_counts(in_scores, out_scores, n_in=None, n_out=None) -> ThresholdCounts:
  """:func:`threshold_counts` of the first ``n_in`` and ``n_out`` scores (traced counts) of
  lists padded to their buckets (all of them when None). The padding sorts after every real
  score and counts in no error; positions past the real ones repeat the last real position's
  counts and are no thresholds."""
  scores = jnp.concatenate([in_scores, out_scores]).astype(jnp.result_type(float))
  is_in = jnp.concatenate([jnp.ones(in_scores.shape, jnp.int32),
                           jnp.zeros(out_scores.shape, jnp.int32)])
  padded = n_in is not None
  valid, real = None, scores.shape[0]
  if padded:
    valid = jnp.concatenate([jnp.arange(in_scores.shape[0]) < n_in,
                             jnp.arange(out_scores.shape[0]) < n_out])
    real = n_in + n_out
  else:
    n_in = in_scores.shape[0]
  # Ties in any order: only their group ends are thresholds.
  order, in_top = descending_cumulative(scores, is_in, valid=valid)
  sorted_scores = scores[order]
  zero = jnp.zeros((1,), jnp.int32)
  true_positives = jnp.concatenate([zero, in_top])
  predicted = jnp.arange(scores.shape[0] + 1)
  if padded:
    predicted = jnp.minimum(predicted, real)
  false_positives = predicted - true_positives
  false_negatives = n_in - true_positives
  # Position j (j highest scores predicted D') is a threshold unless it splits a tie.
  splits_tie = jnp.concatenate([jnp.zeros((1,), bool), sorted_scores[:-1] == sorted_scores[1:],
                                jnp.zeros((1,), bool)])
  thresholds = jnp.concatenate([jnp.full((1,), jnp.inf, sorted_scores.dtype), sorted_scores])
  is_threshold = jnp.logical_not(splits_tie)
  if padded:
    position = jnp.arange(scores.shape[0] + 1)
    is_threshold = jnp.logical_or(is_threshold, position == real) & (position <= real)
  return ThresholdCounts(thresholds, false_positives, false_negatives, is_threshold)


class ScoreEpsilon(NamedTuple):
  """Result of :func:`epsilon_from_scores`: the bound, the chosen test and its counts."""
  epsilon: jax.Array
  threshold: jax.Array
  false_positives: jax.Array
  negatives: jax.Array
  false_negatives: jax.Array
  positives: jax.Array
  significance: jax.Array  # per-test significance actually used (after any correction)


METHODS = ("split", "bonferroni")


def _rate_terms(limits, delta):
  """``(log(1 - delta - U), log U)``: Eq. (1) is max(A_fn - B_fp, A_fp - B_fn, 0) in these."""
  slack = 1.0 - delta - limits
  log_slack = jnp.where(slack > 0.0, jnp.log(jnp.where(slack > 0.0, slack, 1.0)), -jnp.inf)
  return log_slack, jnp.log(limits)


def _bound(fp_terms, fn_terms):
  return jnp.maximum(jnp.maximum(fn_terms[0] - fp_terms[1], fp_terms[0] - fn_terms[1]), 0.0)


class _Search(NamedTuple):
  index: jax.Array  # position of the first threshold with the largest bound
  epsilon: jax.Array  # its bound
  evaluation_epsilon: jax.Array  # the bound on the evaluation counts there (split only)


_BRANCH = 16  # children per node of the search tree over threshold positions
_GROUP = 8  # nodes expanded per solver call


def _tree_sizes(size: int) -> tuple[int, int]:
  """Size of the top nodes (a power of 16) so that at most ``_GROUP`` of them cover ``size``
  positions, and the most nodes the search can ever push (each node is pushed at most once)."""
  top = _BRANCH
  while -(-size // top) > _GROUP:
    top *= _BRANCH
  pushed, node = 0, top // _BRANCH
  while node > 1:
    pushed += -(-size // node)
    node //= _BRANCH
  return top, -(-size // top) + pushed


class _TreeState(NamedTuple):
  starts: jax.Array  # stack of nodes still to expand: first position,
  sizes: jax.Array  # number of positions (a power of 16),
  ceilings: jax.Array  # and an upper bound on every bound inside
  top: jax.Array  # stack height
  evaluated: jax.Array
  best_index: jax.Array
  best_eps: jax.Array
  best_evaluation: jax.Array


def _better(eps, index, best_eps, best_index):
  """Larger bound first; among equal bounds the smaller position (the higher threshold)."""
  return jnp.logical_or(eps > best_eps, jnp.logical_and(eps == best_eps, index < best_index))


def _best_threshold(counts: ThresholdCounts, n_out: int, n_in: int, delta, log_tail,
                    evaluation=None) -> _Search:
  """The first threshold (in order of decreasing threshold) with the largest bound of Eq. (1),
  exactly, by branch and bound over a tree of threshold positions.

  Along the sweep the false-positive count only grows and the false-negative count only falls;
  the Clopper-Pearson upper limits increase with the counts and the bound decreases in both
  limits. So for a run of positions ``[s, e)`` the bound at (false positives at ``s``, false
  negatives at ``e``) is at least every bound inside, and the bound at ``s`` is attained. A node
  of 16^j positions is expanded by solving those limits for its 16 children (33 limits);
  children whose ceiling can still beat the best attained bound (or equal it at a higher
  threshold) are pushed on a stack and expanded in turn, down to single positions. Each loop
  step expands up to 8 nodes (264 limits) in one solver call, so the solver is compiled once.
  Measured on normal scores one standard deviation apart, the Bonferroni search takes 3 steps
  for 1e4 scores per list and 9 for 1e6, against 4e4 and 4e6 limits for a full sweep; on scores
  with no signal, 2 and 11 steps.

  ``evaluation = (eval_out, eval_in)``, the scores of the evaluation half (the split method),
  has the bound on the evaluation counts solved in one last step, at the chosen threshold.
  """
  dtype = log_tail.dtype
  size = counts.false_positives.shape[0]
  fp_all = counts.false_positives.astype(dtype)
  fn_all = counts.false_negatives.astype(dtype)
  top_size, capacity = _tree_sizes(size)
  slack = _GROUP * _BRANCH  # the push writes a fixed window above the stack
  initial = -(-size // top_size)
  children = jnp.arange(_BRANCH)

  def evaluation_jobs(state):
    """The split method's evaluation counts at the best threshold so far (used in the last
    step, when the stack is empty)."""
    eval_out, eval_in = evaluation[:2]
    sizes = evaluation[2:] or (eval_out.shape[0], eval_in.shape[0])
    threshold = counts.thresholds[jnp.minimum(state.best_index, size - 1)]
    k = jnp.stack(_evaluation_counts(eval_out, eval_in, threshold, *evaluation[2:])).astype(dtype)
    return k, jnp.stack([jnp.asarray(n, dtype) for n in sizes])

  def body(state):
    take = jnp.minimum(state.top, _GROUP)
    base = state.top - take
    slot = jnp.minimum(base + jnp.arange(_GROUP), capacity + slack - 1)
    start, node, ceiling = state.starts[slot], state.sizes[slot], state.ceilings[slot]
    live = jnp.logical_and(jnp.arange(_GROUP) < take,
                           _better(ceiling, start, state.best_eps, state.best_index))
    child = node // _BRANCH
    end = jnp.minimum(start + node, size)
    pos = start[:, None] + children[None, :] * child[:, None]  # (group, 16) child starts
    inside = jnp.logical_and(live[:, None], pos < end[:, None])
    fp_pos = jnp.minimum(pos, size - 1)
    fn_pos = jnp.minimum(jnp.minimum(jnp.concatenate([pos, (start + node)[:, None]], axis=1),
                                     end[:, None]), size - 1)
    ks = [jnp.where(inside, fp_all[fp_pos], 0.0).reshape(-1),
          jnp.where(live[:, None], fn_all[fn_pos], 0.0).reshape(-1)]
    ns = [jnp.full((_GROUP * _BRANCH,), n_out, dtype),
          jnp.full((_GROUP * (_BRANCH + 1),), n_in, dtype)]  # n_out, n_in may be traced
    if evaluation is not None:
      k_eval, n_eval = evaluation_jobs(state)
      ks.append(k_eval)
      ns.append(n_eval)
    limits = binomial.cp_upper_limit(jnp.concatenate(ks), jnp.concatenate(ns), log_tail)
    fp_terms = _rate_terms(limits[:_GROUP * _BRANCH].reshape(_GROUP, _BRANCH), delta)
    fn_terms = _rate_terms(
        limits[_GROUP * _BRANCH:_GROUP * (2 * _BRANCH + 1)].reshape(_GROUP, _BRANCH + 1), delta)
    attained = jnp.where(jnp.logical_and(inside, counts.valid[fp_pos]),
                         _bound(fp_terms, (fn_terms[0][:, :-1], fn_terms[1][:, :-1])), -jnp.inf)
    child_ceiling = _bound(fp_terms, (fn_terms[0][:, 1:], fn_terms[1][:, 1:]))
    flat_eps, flat_pos = attained.reshape(-1), pos.reshape(-1)
    step_eps = jnp.max(flat_eps)
    step_index = jnp.min(jnp.where(flat_eps == step_eps, flat_pos, size))
    improved = _better(step_eps, step_index, state.best_eps, state.best_index)
    best_eps = jnp.where(improved, step_eps, state.best_eps)
    best_index = jnp.where(improved, step_index, state.best_index).astype(jnp.int32)
    # Push the children that are runs of positions and can still hold the best bound.
    push = jnp.logical_and(jnp.logical_and(inside, (child > 1)[:, None]),
                           _better(child_ceiling, pos, best_eps, best_index)).reshape(-1)
    # The pushed children first, in their order (one stable sort: XLA:CPU compiles
    # jnp.nonzero as cumulative sums and a scatter loop, a dozen kernels).
    child_sizes = jnp.broadcast_to(child[:, None], pos.shape).reshape(-1)
    _, pushed_starts, pushed_sizes, pushed_ceilings = jax.lax.sort(
        (jnp.where(push, 0, 1), flat_pos.astype(jnp.int32), child_sizes.astype(jnp.int32),
         child_ceiling.reshape(-1)), num_keys=1, is_stable=True)
    starts = jax.lax.dynamic_update_slice(state.starts, pushed_starts, (base,))
    sizes = jax.lax.dynamic_update_slice(state.sizes, pushed_sizes, (base,))
    ceilings = jax.lax.dynamic_update_slice(state.ceilings, pushed_ceilings, (base,))
    evaluating = state.top == 0
    best_evaluation = state.best_evaluation
    if evaluation is not None:
      terms = _rate_terms(limits[-2:], delta)
      best_evaluation = jnp.where(evaluating, _bound((terms[0][0], terms[1][0]),
                                                     (terms[0][1], terms[1][1])),
                                  best_evaluation)
    return _TreeState(starts, sizes, ceilings, base + jnp.sum(push).astype(jnp.int32),
                      jnp.logical_or(state.evaluated, evaluating), best_index, best_eps,
                      best_evaluation)

  def cond(state):
    more = state.top > 0
    if evaluation is not None:
      more = jnp.logical_or(more, jnp.logical_not(state.evaluated))
    return more

  stack = capacity + slack
  state = _TreeState(
      starts=jnp.zeros((stack,), jnp.int32).at[:initial].set(
          jnp.arange(initial, dtype=jnp.int32) * top_size),
      sizes=jnp.full((stack,), top_size, jnp.int32),
      ceilings=jnp.full((stack,), jnp.inf, dtype),
      top=jnp.asarray(initial, jnp.int32),
      evaluated=jnp.asarray(False), best_index=jnp.asarray(size, jnp.int32),
      best_eps=jnp.asarray(-jnp.inf, dtype), best_evaluation=jnp.asarray(0.0, dtype))
  state = jax.lax.while_loop(cond, body, state)
  return _Search(state.best_index, state.best_eps, state.best_evaluation)


_SCORE_EMITTERS = _compile.fusion_below(_compile.SMALL_ELEMENTS + 1)
"""The score bounds' emitters: fusion (faster calls) for batches whose first call the host path
answers while the program compiles, loop (faster compiles) for larger ones."""


@_compile.jit(fusion_emitters=_SCORE_EMITTERS, tree_reductions=False)
def _bonferroni(in_scores, out_scores, delta, significance, n_in=None, n_out=None):
  if n_in is None:
    n_in, n_out = in_scores.shape[0], out_scores.shape[0]
    counts = _threshold_counts(in_scores, out_scores)
  else:
    counts = _threshold_counts(in_scores, out_scores, n_in, n_out)
  corrected = 2.0 * significance / (n_in + n_out + 2)
  best = _best_threshold(counts, n_out, n_in, delta, jnp.log(corrected / 2.0))
  return ScoreEpsilon(best.epsilon, counts.thresholds[best.index],
                      counts.false_positives[best.index], jnp.asarray(n_out),
                      counts.false_negatives[best.index], jnp.asarray(n_in), corrected)


def _evaluation_counts(eval_out, eval_in, threshold, n_out=None, n_in=None):
  """Error counts of "score >= threshold means D'" on the evaluation half: negatives at or
  above the threshold, positives below it (of the first ``n_out`` and ``n_in`` when padded).
  Counted directly: a sort of the half would cost more than the few counts the search asks
  for."""
  above, below = eval_out >= threshold, eval_in < threshold
  if n_out is not None:
    above = jnp.logical_and(above, jnp.arange(eval_out.shape[0]) < n_out)
    below = jnp.logical_and(below, jnp.arange(eval_in.shape[0]) < n_in)
  return jnp.sum(above), jnp.sum(below)


@_compile.jit(fusion_emitters=_SCORE_EMITTERS, tree_reductions=False)
def _split(in_scores, out_scores, delta, significance, n_in=None, n_out=None):
  sel_in, eval_in = in_scores[0::2], in_scores[1::2]
  sel_out, eval_out = out_scores[0::2], out_scores[1::2]
  if n_in is None:
    counts = _threshold_counts(sel_in, sel_out)
    sizes = (sel_out.shape[0], sel_in.shape[0], eval_out.shape[0], eval_in.shape[0])
    evaluation = (eval_out, eval_in)
  else:  # padded: the first (n + 1) // 2 even and n // 2 odd entries are real
    sizes = ((n_out + 1) // 2, (n_in + 1) // 2, n_out // 2, n_in // 2)
    counts = _threshold_counts(sel_in, sel_out, sizes[1], sizes[0])
    evaluation = (eval_out, eval_in, sizes[2], sizes[3])
  best = _best_threshold(counts, sizes[0], sizes[1], delta, jnp.log(significance / 2.0),
                         evaluation)
  threshold = counts.thresholds[best.index]
  false_positives, false_negatives = _evaluation_counts(
      eval_out, eval_in, threshold, *(() if n_in is None else sizes[2:]))
  return ScoreEpsilon(best.evaluation_epsilon, threshold, false_positives,
                      jnp.asarray(sizes[2]), false_negatives, jnp.asarray(sizes[3]),
                      significance)


def epsilon_from_scores(in_scores, out_scores, delta: float = 0.0, significance: float = 0.05,
                        method: str = "split") -> ScoreEpsilon:
  r"""Epsilon lower bound from scores, over all thresholds, with an honest threshold choice.

  The test "score >= t means D'" is evaluated for every distinct threshold ``t`` with one sort
  and cumulative counts, and each threshold's bound is :func:`epsilon_from_error_counts`
  (Eq. (1) of Chadha et al.; Eq. (6) of UniAud). Taking the best threshold on the same data
  would overstate the confidence, so the choice is made honestly:

  * ``"split"``: the threshold is chosen on the even-indexed scores of each list and the bound
    is evaluated on the odd-indexed ones (valid when the runs are i.i.d., as in a Monte Carlo
    audit; shuffle beforehand if the lists are ordered).
  * ``"bonferroni"``: all scores are used and every threshold is evaluated at significance
    :math:`\beta' = 2\beta/(n_\mathrm{in} + n_\mathrm{out} + 2)`. This is simultaneously valid
    over all thresholds: a test whose false-positive count is k has true false-positive rate
    below the (k+1)-th smallest of the uniformised negative scores, a Beta(k+1, n-k) variable,
    whose upper Clopper-Pearson limit fails with probability :math:`\beta'/2`; a union over the
    ``n_out + 1`` values of k and the ``n_in + 1`` false-negative counts gives :math:`\beta`.

  The maximum over thresholds is exact but does not solve for every threshold: the limits are
  computed on a grid of counts that brackets every threshold's bound, and only thresholds whose
  bracket reaches the best certain bound are solved (:func:`_best_threshold`). Jit- and
  vmap-able; compiled once per pair of list-length buckets (each list padded to a power of two).

  Args:
    in_scores: 1-D scores of runs on D' (higher means "D' was used").
    out_scores: 1-D scores of runs on D.
    delta: in [0, 1).
    significance: beta in (0, 1) for the final statement.
    method: "split" or "bonferroni".

  Returns:
    :class:`ScoreEpsilon` with the bound, the chosen threshold and the evaluation counts.

  >>> import numpy as np
  >>> rng = np.random.default_rng(0)
  >>> result = epsilon_from_scores(rng.normal(2.0, 1.0, 200), rng.normal(0.0, 1.0, 200))
  >>> round(float(result.epsilon), 4), int(result.false_positives), int(result.false_negatives)
  (1.8058, 57, 1)
  """
  _validate.check_choice("method", method, METHODS)
  _validate.check_significance(significance)
  _validate.check_delta(delta)
  for name, s in (("in_scores", in_scores), ("out_scores", out_scores)):
    _check_scores(name, s, 2 if method == "split" else 1, method)
  in_scores = _compile.argument(in_scores)
  out_scores = _compile.argument(out_scores)
  solve = _bonferroni if method == "bonferroni" else _split
  delta, significance = _float(delta), _float(significance)
  if not _validate.is_concrete((in_scores, out_scores, delta, significance)):
    return solve(in_scores, out_scores, delta, significance)  # the caller's shapes
  # Each list padded to its bucket, the real counts passed as values: one program per bucket.
  n_in, n_out = in_scores.shape[0], out_scores.shape[0]
  size_in, size_out = _compile.bucket_size(n_in), _compile.bucket_size(n_out)
  count = np.dtype(jnp.result_type(int))
  args = (_compile.pad_edge(in_scores, size_in), _compile.pad_edge(out_scores, size_out), delta,
          significance, np.asarray(n_in, count), np.asarray(n_out, count))
  host = _host_bonferroni if method == "bonferroni" else _host_split
  return _compile.first_call(solve, host, args, max(size_in, size_out))


# --- Exact NumPy/scipy paths for first calls on small inputs ---------------------------------
#
# The same bounds with scipy's inverse incomplete beta function for the Clopper-Pearson limits
# (``scipy.special.betainccinv``) and, for the score bounds, every threshold evaluated (the
# limits of each count solved once). They answer a first call while its program compiles
# (:func:`dpaudit.estimators._compile.first_call`).


def _host_upper_limits(k, n, tail):
  """One-sided Clopper-Pearson upper limits: U with Pr[Bin(n, U) <= k] = tail (1 at k = n)."""
  from scipy import special
  k, n = np.asarray(k, np.float64), np.asarray(n, np.float64)
  below = k < n
  with np.errstate(invalid="ignore"):
    limit = special.betainccinv(k + 1.0, np.where(below, n - k, 1.0), tail)
  return np.where(below, limit, 1.0)


def _host_terms(limits, delta):
  slack = 1.0 - delta - limits
  with np.errstate(divide="ignore", invalid="ignore"):
    return np.where(slack > 0.0, np.log(np.where(slack > 0.0, slack, 1.0)), -np.inf), \
        np.log(limits)


def _host_bound(fp_terms, fn_terms):
  return np.maximum(np.maximum(fn_terms[0] - fp_terms[1], fp_terms[0] - fn_terms[1]), 0.0)


def _host_error_counts(false_positives, negatives, false_negatives, positives, delta,
                       significance):
  fp = _host_terms(_host_upper_limits(false_positives, negatives, significance / 2.0), delta)
  fn = _host_terms(_host_upper_limits(false_negatives, positives, significance / 2.0), delta)
  return _host_bound(fp, fn)


def _host_counts(in_scores, out_scores):
  """:func:`threshold_counts` in NumPy."""
  scores = np.concatenate([in_scores, out_scores]).astype(np.float64)
  is_in = np.concatenate([np.ones(in_scores.shape[0], np.int64),
                          np.zeros(out_scores.shape[0], np.int64)])
  order = np.argsort(-scores, kind="stable")
  sorted_scores = scores[order]
  true_positives = np.concatenate([[0], np.cumsum(is_in[order])])
  false_positives = np.arange(scores.shape[0] + 1) - true_positives
  false_negatives = in_scores.shape[0] - true_positives
  splits_tie = np.concatenate([[False], sorted_scores[:-1] == sorted_scores[1:], [False]])
  thresholds = np.concatenate([[np.inf], sorted_scores])
  return ThresholdCounts(thresholds, false_positives, false_negatives, ~splits_tie)


def _host_best(counts: ThresholdCounts, n_out: int, n_in: int, delta, tail) -> tuple:
  """The first threshold with the largest bound of Eq. (1), every threshold evaluated (each
  count's limit solved once)."""
  fp_terms = _host_terms(_host_upper_limits(np.arange(n_out + 1), n_out, tail), delta)
  fn_terms = _host_terms(_host_upper_limits(np.arange(n_in + 1), n_in, tail), delta)
  fp, fn = counts.false_positives, counts.false_negatives
  eps = _host_bound((fp_terms[0][fp], fp_terms[1][fp]), (fn_terms[0][fn], fn_terms[1][fn]))
  index = int(np.argmax(np.where(counts.valid, eps, -np.inf)))
  return index, eps[index]


def _host_bonferroni(in_scores, out_scores, delta, significance, n_in, n_out):
  n_in, n_out = int(n_in), int(n_out)
  counts = _host_counts(np.asarray(in_scores)[:n_in], np.asarray(out_scores)[:n_out])
  corrected = 2.0 * significance / (n_in + n_out + 2)
  index, eps = _host_best(counts, n_out, n_in, delta, corrected / 2.0)
  return ScoreEpsilon(eps, counts.thresholds[index], counts.false_positives[index],
                      np.int64(n_out), counts.false_negatives[index], np.int64(n_in),
                      np.float64(corrected))


def _host_split(in_scores, out_scores, delta, significance, n_in, n_out):
  in_scores, out_scores = np.asarray(in_scores)[:int(n_in)], np.asarray(out_scores)[:int(n_out)]
  sel_in, eval_in = in_scores[0::2], in_scores[1::2]
  sel_out, eval_out = out_scores[0::2], out_scores[1::2]
  counts = _host_counts(sel_in, sel_out)
  index, _ = _host_best(counts, sel_out.shape[0], sel_in.shape[0], delta, significance / 2.0)
  threshold = counts.thresholds[index]
  false_positives = np.int64(np.sum(eval_out >= threshold))
  false_negatives = np.int64(np.sum(eval_in < threshold))
  eps = _host_error_counts(false_positives, eval_out.shape[0], false_negatives,
                           eval_in.shape[0], delta, significance)
  return ScoreEpsilon(eps, threshold, false_positives, np.int64(eval_out.shape[0]),
                      false_negatives, np.int64(eval_in.shape[0]), np.float64(significance))
