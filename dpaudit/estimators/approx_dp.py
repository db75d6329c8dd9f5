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
from dpaudit.estimators import binomial
from dpaudit.estimators._sorting import argsort_descending


def _float(x):
  return jnp.asarray(x, jnp.result_type(float))


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
  """
  _validate.check_significance(significance)
  _validate.check_delta(delta)
  _validate.check_counts("false_positives", false_positives, negatives, "negatives")
  _validate.check_counts("false_negatives", false_negatives, positives, "positives")
  _validate.check_range("negatives", negatives, 1)
  _validate.check_range("positives", positives, 1)
  return _epsilon_from_error_counts(*(_float(v) for v in (false_positives, negatives,
                                                          false_negatives, positives, delta,
                                                          significance)))


@jax.jit
def _epsilon_from_error_counts(false_positives, negatives, false_negatives, positives, delta,
                               significance):
  # The upper end of a two-sided interval at beta is the one-sided upper limit at beta / 2; both
  # rates go through one solver call.
  fp, neg, fn, pos, delta, significance = jnp.broadcast_arrays(
      false_positives, negatives, false_negatives, positives, delta, significance)
  upper = binomial.cp_upper_limit(jnp.stack([fp, fn]), jnp.stack([neg, pos]),
                                  jnp.log(significance / 2.0))
  return _epsilon_from_rate_bounds(upper[0], upper[1], delta)


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
    in_scores: scores of runs on D' (positives); the test calls D' when score >= threshold.
    out_scores: scores of runs on D (negatives).
  """
  in_scores = jnp.asarray(in_scores)
  out_scores = jnp.asarray(out_scores)
  scores = jnp.concatenate([in_scores, out_scores]).astype(jnp.result_type(float))
  is_in = jnp.concatenate([jnp.ones(in_scores.shape, jnp.int32),
                           jnp.zeros(out_scores.shape, jnp.int32)])
  order = argsort_descending(scores)  # ties in any order: only their group ends are thresholds
  sorted_scores = scores[order]
  sorted_in = is_in[order]
  zero = jnp.zeros((1,), jnp.int32)
  true_positives = jnp.concatenate([zero, jnp.cumsum(sorted_in)])
  predicted = jnp.arange(scores.shape[0] + 1)
  false_positives = predicted - true_positives
  false_negatives = in_scores.shape[0] - true_positives
  # Position j (j highest scores predicted D') is a threshold unless it splits a tie.
  splits_tie = jnp.concatenate([jnp.zeros((1,), bool), sorted_scores[:-1] == sorted_scores[1:],
                                jnp.zeros((1,), bool)])
  thresholds = jnp.concatenate([jnp.full((1,), jnp.inf, sorted_scores.dtype), sorted_scores])
  return ThresholdCounts(thresholds, false_positives, false_negatives, jnp.logical_not(splits_tie))


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


_BLOCK = 64  # thresholds per block
_MAX_CHUNK = 16384  # limits per solver call


def _rate_terms(limits, delta):
  """``(log(1 - delta - U), log U)``: Eq. (1) is max(A_fn - B_fp, A_fp - B_fn, 0) in these."""
  slack = 1.0 - delta - limits
  log_slack = jnp.where(slack > 0.0, jnp.log(jnp.where(slack > 0.0, slack, 1.0)), -jnp.inf)
  return log_slack, jnp.log(limits)


def _bound(fp_terms, fn_terms):
  return jnp.maximum(jnp.maximum(fn_terms[0] - fp_terms[1], fp_terms[0] - fn_terms[1]), 0.0)


def _pad_blocks(values, blocks: int, fill):
  """(blocks + 1, _BLOCK): the thresholds in blocks, then one all-padding block."""
  pad = (blocks + 1) * _BLOCK - values.shape[0]
  return jnp.concatenate([values, jnp.full((pad,), fill, values.dtype)]).reshape(blocks + 1,
                                                                                _BLOCK)


class _Search(NamedTuple):
  index: jax.Array  # position of the first threshold with the largest bound
  epsilon: jax.Array  # its bound
  evaluation_epsilon: jax.Array  # the bound on the evaluation counts there (split only)


def _approximate_best(counts: ThresholdCounts, n_out: int, n_in: int, delta, log_tail):
  """Position of the largest bound of Eq. (1) with the limits replaced by the normal
  approximation ``k/n + z sqrt((k + 1)(n - k + 1)) / n`` (a guess; nothing relies on it)."""
  z = jnp.sqrt(-2.0 * log_tail)

  def approx(k, n):
    k = k.astype(log_tail.dtype)
    return jnp.clip((k + z * jnp.sqrt((k + 1.0) * (n - k + 1.0) / n) + 1.0) / n, 1e-300, 1.0)

  eps = _bound(_rate_terms(approx(counts.false_positives, n_out), delta),
               _rate_terms(approx(counts.false_negatives, n_in), delta))
  return jnp.argmax(jnp.where(counts.valid, eps, -1.0))


def _best_threshold(counts: ThresholdCounts, n_out: int, n_in: int, delta, log_tail,
                    evaluation=None) -> _Search:
  """The first threshold (in order of decreasing threshold) with the largest bound of Eq. (1),
  computed exactly without solving for every threshold.

  Along the sweep the false-positive count only grows and the false-negative count only falls;
  the Clopper-Pearson upper limits increase with the counts and the bound decreases in both
  limits. So for a block of 64 consecutive thresholds, the bound at (first false-positive count,
  last false-negative count) is at least every bound in the block, and the bound at the block's
  first threshold is attained. The first steps of one loop solve those three limits of every
  block (up to 16,384 limits per step), and the two of the threshold that a normal
  approximation of the limits puts first; only blocks whose ceiling reaches the best attained
  bound can hold the maximum, and the next steps solve their thresholds (for a million scores per
  list, about 3% of the 4 million limits a full sweep needs). One loop holds every solve, so the
  solver is compiled once.

  ``evaluation = (fp_eval, fn_eval, n_out_eval, n_in_eval)``, functions of a threshold position
  giving the error counts of the evaluation half there (the split method), has the bound on the
  evaluation counts solved alongside, for the chosen threshold.
  """
  dtype = log_tail.dtype
  size = counts.false_positives.shape[0]
  blocks = -(-size // _BLOCK)
  fp = _pad_blocks(counts.false_positives, blocks, n_out)
  fn = _pad_blocks(counts.false_negatives, blocks, 0)
  valid = _pad_blocks(counts.valid, blocks, False)
  position = jnp.arange((blocks + 1) * _BLOCK).reshape(blocks + 1, _BLOCK)
  last = jnp.clip(size - 1 - jnp.arange(blocks) * _BLOCK, 0, _BLOCK - 1)  # last real position
  fn_last = jnp.take_along_axis(fn[:blocks], last[:, None], axis=1)[:, 0]
  # A likely maximiser from the normal approximation of the limits (cheap, not trusted): its
  # exact bound joins the attained ones and usually rules out most blocks.
  guess = _approximate_best(counts, n_out, n_in, delta, log_tail)
  edge_k = jnp.concatenate([fp[:blocks, 0], fn[:blocks, 0], fn_last,
                            jnp.stack([counts.false_positives[guess],
                                       counts.false_negatives[guess]])]).astype(dtype)
  edge_n = jnp.concatenate([jnp.repeat(jnp.asarray([n_out, n_in, n_in], dtype), blocks),
                            jnp.asarray([n_out, n_in], dtype)])
  per_threshold = 2 if evaluation is None else 4
  edges = 3 * blocks + 2
  chunk = max(min(edges, _MAX_CHUNK), per_threshold * _BLOCK)
  group = chunk // (per_threshold * _BLOCK)  # candidate blocks solved per step
  edge_steps = -(-edges // chunk)
  edge_k = jnp.concatenate([edge_k, jnp.zeros((edge_steps * chunk - edges,), dtype)])
  edge_n = jnp.concatenate([edge_n, jnp.ones((edge_steps * chunk - edges,), dtype)])

  def group_jobs(ids):
    ks = [fp[ids], fn[ids]]
    ns = [jnp.full(ks[0].shape, n_out, dtype), jnp.full(ks[0].shape, n_in, dtype)]
    if evaluation is not None:
      fp_eval, fn_eval, n_out_eval, n_in_eval = evaluation
      ks += [fp_eval(position[ids]), fn_eval(position[ids])]
      ns += [jnp.full(ks[0].shape, n_out_eval, dtype), jnp.full(ks[0].shape, n_in_eval, dtype)]
    k = jnp.stack(ks).astype(dtype).reshape(-1)
    n = jnp.stack(ns).reshape(-1)
    pad = chunk - k.shape[0]
    return jnp.concatenate([k, jnp.zeros((pad,), dtype)]), jnp.concatenate(
        [n, jnp.ones((pad,), dtype)])

  def after_edges(limits, state):
    solved = jax.lax.dynamic_update_slice(state.edge_limits, limits, (state.edge_cursor,))
    state = state._replace(edge_limits=solved, edge_cursor=state.edge_cursor + chunk)

    def candidates(state):
      fp_first, fn_first, fn_end = (_rate_terms(solved[i * blocks:(i + 1) * blocks], delta)
                                    for i in range(3))
      ceiling = _bound(fp_first, fn_end)
      attained = jnp.where(valid[:blocks, 0], _bound(fp_first, fn_first), -1.0)
      at_guess = _bound(_rate_terms(solved[3 * blocks], delta),
                        _rate_terms(solved[3 * blocks + 1], delta))
      best_attained = jnp.maximum(jnp.max(attained), jnp.where(counts.valid[guess], at_guess,
                                                               -1.0))
      chosen = ceiling >= best_attained
      order = jnp.nonzero(chosen, size=blocks + group, fill_value=blocks)[0]
      return state._replace(order=order.astype(jnp.int32),
                            count=jnp.sum(chosen).astype(jnp.int32),
                            edges_done=jnp.asarray(True))

    return jax.lax.cond(state.edge_cursor >= edges, candidates, lambda s: s, state)

  def after_group(limits, state):
    shape = (per_threshold, group, _BLOCK)
    limits = limits[:per_threshold * group * _BLOCK].reshape(shape)
    ids = jax.lax.dynamic_slice(state.order, (state.cursor,), (group,))
    eps = jnp.where(valid[ids], _bound(_rate_terms(limits[0], delta),
                                       _rate_terms(limits[1], delta)), -jnp.inf).reshape(-1)
    top = jnp.argmax(eps)  # blocks come in increasing order: the first maximum wins
    better = eps[top] > state.best_eps
    evaluation_eps = state.best_evaluation
    if evaluation is not None:
      evaluation_eps = _bound(_rate_terms(limits[2], delta),
                              _rate_terms(limits[3], delta)).reshape(-1)[top]
    return state._replace(
        cursor=state.cursor + group,
        best_index=jnp.where(better, position[ids].reshape(-1)[top].astype(jnp.int32),
                             state.best_index),
        best_eps=jnp.where(better, eps[top], state.best_eps),
        best_evaluation=jnp.where(better, evaluation_eps, state.best_evaluation))

  def body(state):
    ids = jax.lax.dynamic_slice(state.order, (state.cursor,), (group,))
    group_k, group_n = group_jobs(ids)
    start = jnp.minimum(state.edge_cursor, edge_k.shape[0] - chunk)
    k = jnp.where(state.edges_done, group_k, jax.lax.dynamic_slice(edge_k, (start,), (chunk,)))
    n = jnp.where(state.edges_done, group_n, jax.lax.dynamic_slice(edge_n, (start,), (chunk,)))
    limits = binomial.cp_upper_limit(k, n, log_tail)
    return jax.lax.cond(state.edges_done, after_group, after_edges, limits, state)

  state = _LoopState(edges_done=jnp.asarray(False),
                     edge_cursor=jnp.asarray(0, jnp.int32),
                     edge_limits=jnp.zeros((edge_steps * chunk,), dtype),
                     order=jnp.full((blocks + group,), blocks, jnp.int32),
                     count=jnp.asarray(0, jnp.int32), cursor=jnp.asarray(0, jnp.int32),
                     best_index=jnp.asarray(0, jnp.int32),
                     best_eps=jnp.asarray(-jnp.inf, dtype),
                     best_evaluation=jnp.asarray(0.0, dtype))
  state = jax.lax.while_loop(
      lambda s: jnp.logical_or(jnp.logical_not(s.edges_done), s.cursor < s.count), body, state)
  return _Search(state.best_index, state.best_eps, state.best_evaluation)


class _LoopState(NamedTuple):
  edges_done: jax.Array
  edge_cursor: jax.Array
  edge_limits: jax.Array
  order: jax.Array
  count: jax.Array
  cursor: jax.Array
  best_index: jax.Array
  best_eps: jax.Array
  best_evaluation: jax.Array


@jax.jit
def _bonferroni(in_scores, out_scores, delta, significance):
  n_in, n_out = in_scores.shape[0], out_scores.shape[0]
  corrected = 2.0 * significance / (n_in + n_out + 2)
  counts = threshold_counts(in_scores, out_scores)
  best = _best_threshold(counts, n_out, n_in, delta, jnp.log(corrected / 2.0))
  return ScoreEpsilon(best.epsilon, counts.thresholds[best.index],
                      counts.false_positives[best.index], jnp.asarray(n_out),
                      counts.false_negatives[best.index], jnp.asarray(n_in), corrected)


def _sorted_ascending(x):
  return x[argsort_descending(x)][::-1]


@jax.jit
def _split(in_scores, out_scores, delta, significance):
  sel_in, eval_in = in_scores[0::2], in_scores[1::2]
  sel_out, eval_out = out_scores[0::2], out_scores[1::2]
  counts = threshold_counts(sel_in, sel_out)
  sorted_out, sorted_in = _sorted_ascending(eval_out), _sorted_ascending(eval_in)

  def fp_eval(positions):  # evaluation negatives scoring >= the threshold
    t = counts.thresholds[jnp.minimum(positions, counts.thresholds.shape[0] - 1)]
    return eval_out.shape[0] - jnp.searchsorted(sorted_out, t, side="left")

  def fn_eval(positions):  # evaluation positives scoring < the threshold
    t = counts.thresholds[jnp.minimum(positions, counts.thresholds.shape[0] - 1)]
    return jnp.searchsorted(sorted_in, t, side="left")

  best = _best_threshold(counts, sel_out.shape[0], sel_in.shape[0], delta,
                         jnp.log(significance / 2.0),
                         (fp_eval, fn_eval, eval_out.shape[0], eval_in.shape[0]))
  threshold = counts.thresholds[best.index]
  false_positives = jnp.sum(eval_out >= threshold)
  false_negatives = jnp.sum(eval_in < threshold)
  return ScoreEpsilon(best.evaluation_epsilon, threshold, false_positives,
                      jnp.asarray(eval_out.shape[0]), false_negatives,
                      jnp.asarray(eval_in.shape[0]), significance)


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
  vmap-able; compiled once per pair of list lengths.

  Args:
    in_scores: 1-D scores of runs on D' (higher means "D' was used").
    out_scores: 1-D scores of runs on D.
    delta: in [0, 1).
    significance: beta in (0, 1) for the final statement.
    method: "split" or "bonferroni".

  Returns:
    :class:`ScoreEpsilon` with the bound, the chosen threshold and the evaluation counts.
  """
  _validate.check_choice("method", method, METHODS)
  _validate.check_significance(significance)
  _validate.check_delta(delta)
  in_scores = jnp.asarray(in_scores)
  out_scores = jnp.asarray(out_scores)
  for name, s in (("in_scores", in_scores), ("out_scores", out_scores)):
    if s.ndim != 1:
      raise ValueError(f"{name} must be 1-D, got shape {s.shape}")
    minimum = 2 if method == "split" else 1
    if s.shape[0] < minimum:
      raise ValueError(f"{name} has {s.shape[0]} scores; method={method!r} needs at least "
                       f"{minimum}")
    if _validate.is_concrete(s) and np.isnan(np.asarray(s)).any():
      raise ValueError(f"{name} contains NaN; scores must be comparable numbers")
  solve = _bonferroni if method == "bonferroni" else _split
  return solve(in_scores, out_scores, _float(delta), _float(significance))
