r"""Privacy auditing in one training run (Steinke, Nasr & Jagielski, 2023).

Each of ``m`` canaries is included in training independently with probability 1/2; after the
single run the auditor guesses the membership of ``r <= m`` canaries (abstaining on the rest)
and counts the ``v`` correct guesses. Theorem 2 (Eqs. 7-9) of Liu & Xiong, UniAud, restating
the main result of Steinke, Nasr & Jagielski (2023), bounds the tail of that count
under an (epsilon, delta)-DP training algorithm:

.. math::
   \Pr[W \ge v] \le \beta + \alpha\, m\, \delta, \qquad
   \beta = \Pr[\check W \ge v], \qquad
   \alpha = \max_{i \in \{1,\dots,m\}} \frac{2}{i}\Pr[v > \check W \ge v - i],
   \qquad \check W \sim \mathrm{Binomial}\Big(r, \frac{e^\epsilon}{1 + e^\epsilon}\Big).

The right-hand side is a p-value for the null hypothesis "the algorithm is (epsilon, delta)-DP";
the largest epsilon it rejects at level ``significance`` is a 1 - significance lower confidence
bound on epsilon. All functions broadcast, are jit/vmap-able (``num_examples`` and the guess grid
must be static) and compute in ``jnp.result_type(float)``.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate
from dpaudit.estimators import _compile, binomial
from dpaudit.estimators._sorting import descending_cumulative

MODES = ("symmetric", "top")
CORRECTIONS = ("bonferroni", "none")
DEFAULT_GRID_SIZE = 30


def _float_dtype():
  return jnp.result_type(float)


def _check_shapes(**arrays) -> None:
  shapes = {name: np.shape(a) for name, a in arrays.items()}
  try:
    np.broadcast_shapes(*shapes.values())
  except ValueError:
    desc = ", ".join(f"{name} has shape {shape}" for name, shape in shapes.items())
    raise ValueError(f"shapes do not broadcast: {desc}") from None


def _check_count_args(num_examples, num_guesses, num_correct=None) -> None:
  if num_correct is None:
    _check_shapes(num_examples=num_examples, num_guesses=num_guesses)
  else:
    _check_shapes(num_examples=num_examples, num_guesses=num_guesses, num_correct=num_correct)
  _validate.check_counts("num_examples", num_examples)
  _validate.check_counts("num_guesses", num_guesses, num_examples, "num_examples")
  if num_correct is not None:
    _validate.check_counts("num_correct", num_correct, num_guesses, "num_guesses")


def _delta_is_zero(delta) -> bool:
  """True when delta is concretely zero: then the alpha * m * delta term is skipped."""
  return _validate.is_concrete(delta) and bool(np.all(np.asarray(delta) == 0))


def _log_window(tails_v: binomial.LogBinomialTails, tails_j: binomial.LogBinomialTails):
  r""":math:`\log\Pr[j \le \check W < v]` from the tails at v and at j <= v, taking the
  difference of whichever pair of tails is small, on the log scale (so that it keeps its
  relative accuracy, also where every probability involved is below the smallest double)."""
  upper_small = tails_j.upper < -math.log(2.0)  # Pr[W >= j] < 1/2: both upper tails are small
  lower_small = tails_v.lower < -math.log(2.0)  # Pr[W < v] < 1/2: both lower tails are small
  from_upper = tails_j.upper + binomial._log1mexp(jnp.minimum(tails_v.upper - tails_j.upper,
                                                                0.0))
  from_lower = tails_v.lower + binomial._log1mexp(jnp.minimum(tails_j.lower - tails_v.lower,
                                                                0.0))
  middle = jnp.log(jnp.maximum(1.0 - jnp.exp(tails_v.upper) - jnp.exp(tails_j.lower), 0.0))
  return jnp.where(upper_small, from_upper, jnp.where(lower_small, from_lower, middle))


_PROBES = 7
"""Probes per round of the search for alpha's maximiser. With the tail at v itself, each round
evaluates 8 binomial tails per problem, a whole number of SIMD vectors: at 1e4 canaries
(60 problems) 7 probes ran 25% faster than 8 and 15% faster than 6, with the same results."""


class _Alpha(NamedTuple):
  """:func:`_beta_and_alpha`'s results: beta and alpha of Eqs. 8-9, alpha's maximiser i*, and
  the log densities D_v and D_{v - i*} of :func:`binomial.log_binomial_tails_and_density`
  (-inf where v - i* < 1), for the p-value's slope."""
  beta: jax.Array
  alpha: jax.Array
  i_star: jax.Array
  log_density_v: jax.Array
  log_density_star: jax.Array


def _beta_and_alpha(num_guesses, num_correct, epsilon, hint=None) -> _Alpha:
  r"""Eqs. 8-9: :math:`\beta = \Pr[\check W \ge v]` and
  :math:`\alpha = \max_{1 \le i \le m} \frac{2}{i}\Pr[v > \check W \ge v - i]`, at a cost that
  grows like :math:`\log v` (and not at all with m).

  Terms with i > v equal the i = v term times v / i, so only i = 1..v matter. With
  :math:`s_i = \Pr[\check W = v - i]` and :math:`g(i) = \frac1i\sum_{l \le i} s_l`,
  :math:`g(i+1) > g(i)` exactly when :math:`s_{i+1} > g(i)`. The binomial pmf is unimodal, so
  going down from v - 1 the :math:`s_i` first rise (up to the mode) and then fall; while they
  rise they exceed their running mean, and once one falls below it every later one does too. So
  g increases up to the first i with :math:`s_{i+1} \le g(i)` and never again after it. That i
  is found by a 7-way search (each round probes 7 points of the bracket at once, one
  vectorised evaluation of the binomial tails, :func:`binomial.log_binomial_tails_and_density`,
  whose density gives the pmf :math:`s_{i+1}` without a pmf program of its own, and keeps the
  stretch before the first probe that satisfies the condition): 8 rounds for
  v = 1e6. The comparison runs on the log scale: far in the tail every probability involved can
  be below the smallest double, and compared as zeros the condition would hold at once. A
  ``hint`` (the maximiser at a nearby epsilon, as in the search for the bound) is probed first
  with its neighbours and usually ends the search in one round. ``1 - q = sigmoid(-epsilon)``
  is passed exactly, so the tails keep their relative accuracy for large epsilon.
  """
  q, one_minus_q = jax.nn.sigmoid(epsilon), jax.nn.sigmoid(-epsilon)
  r, v = num_guesses, num_correct
  steps = jnp.arange(1, _PROBES + 1, dtype=v.dtype)
  hi0 = jnp.maximum(v, 1.0)

  def positions(lo, hi, first_round):
    """Sorted probes in [lo - 1, hi]: spread over the bracket, or (first round with a hint)
    the hint's neighbourhood [a - 1, a + 6], which settles the search at once when the
    maximiser has not moved by more than a few places."""
    width = hi - lo + 1.0
    spread = jnp.where(width[..., None] <= _PROBES,
                       jnp.minimum(lo[..., None] + steps - 1.0, hi[..., None]),
                       lo[..., None] + jnp.ceil(width[..., None] * steps / _PROBES) - 1.0)
    if hint is None:
      return spread
    a = jnp.clip(hint - 3.0, 1.0, jnp.maximum(hi0 - _PROBES + 2.0, 1.0))
    near = jnp.clip(a[..., None] + steps - 2.0, lo[..., None] - 1.0, hi[..., None])
    return jnp.where(first_round[..., None] & (hint[..., None] > 0.0), near, spread)

  def probe(lo, hi, first_round):
    i = positions(lo, hi, first_round)
    tails, log_density = binomial.log_binomial_tails_and_density(
        jnp.concatenate([v[..., None], v[..., None] - i], -1), r[..., None], q[..., None],
        one_minus_q[..., None])
    tails_v = binomial.LogBinomialTails(tails.upper[..., :1], tails.lower[..., :1])
    tails_j = binomial.LogBinomialTails(tails.upper[..., 1:], tails.lower[..., 1:])
    log_density_j = log_density[..., 1:]
    log_mean = _log_window(tails_v, tails_j) - jnp.log(jnp.maximum(i, 1.0))
    # Pr[W = v - i - 1] = D_{v-i} / ((r - v + i + 1) q), D of log_binomial_tails_and_density
    # (no pmf program beside the tails); 0 where v - i - 1 < 0.
    k = v[..., None] - i
    log_next = jnp.where(k >= 1.0, log_density_j - jnp.log(jnp.maximum(r[..., None] - k + 1.0,
                                                                        1.0))
                         - jnp.log(q[..., None]), -jnp.inf)
    # The condition holds at i = hi (invariant) and, by definition, not at i = lo - 1.
    done = jnp.logical_or(log_next <= log_mean, i >= hi[..., None])
    done = jnp.logical_and(done, i >= lo[..., None])
    found = jnp.any(done, axis=-1)
    first = jnp.argmax(done, axis=-1)[..., None]
    take = lambda x: jnp.take_along_axis(x, first, axis=-1)[..., 0]
    before = jnp.take_along_axis(jnp.concatenate([lo[..., None] - 1.0, i], -1), first, axis=-1)
    before = jnp.maximum(before[..., 0], lo - 1.0)
    new_hi = jnp.where(found, take(i), hi)
    new_lo = jnp.where(found, before + 1.0, jnp.max(i, axis=-1) + 1.0)
    closed = jnp.logical_and(found, new_lo >= new_hi)
    return (new_lo, new_hi, take(log_mean), jnp.exp(tails_v.upper[..., 0]), closed, found,
            log_density[..., 0], take(log_density_j))

  def body(state):
    lo, hi, beta, mean, closed, first_round, density_v, density_hi = state
    (new_lo, new_hi, new_mean, new_beta, now_closed, found, new_density_v,
     new_density_j) = probe(lo, hi, first_round)
    keep = closed
    moved = jnp.logical_and(~keep, found)  # hi is now a probe, whose density is known
    return (jnp.where(keep, lo, new_lo), jnp.where(keep, hi, new_hi),
            jnp.where(keep, beta, new_beta), jnp.where(keep, mean, new_mean),
            jnp.logical_or(closed, now_closed), jnp.zeros_like(first_round),
            jnp.where(keep, density_v, new_density_v),
            jnp.where(moved, new_density_j, density_hi))

  zeros = jnp.zeros_like(v)
  state = (jnp.ones_like(v), hi0, zeros, zeros, jnp.zeros(v.shape, bool),
           jnp.ones(v.shape, bool), zeros, jnp.full_like(v, -jnp.inf))
  _, i_star, beta, log_mean, _, _, density_v, density_star = jax.lax.while_loop(
      lambda s: jnp.logical_not(jnp.all(s[4])), body, state)
  density_star = jnp.where(v - i_star >= 1.0, density_star, -jnp.inf)
  return _Alpha(jnp.where(v <= 0.0, 1.0, beta), jnp.where(v <= 0.0, 0.0, 2.0 * jnp.exp(log_mean)),
                i_star, density_v, density_star)


def _p_value(num_examples, num_guesses, num_correct, epsilon, delta, with_delta: bool):
  """Eqs. 7-9; the delta term is skipped when ``with_delta`` is False."""
  if not with_delta:
    tails = binomial.log_binomial_tails(num_correct, num_guesses, jax.nn.sigmoid(epsilon),
                                        jax.nn.sigmoid(-epsilon))
    return jnp.where(num_correct <= 0.0, 1.0, jnp.minimum(jnp.exp(tails.upper), 1.0))
  beta, alpha = _beta_and_alpha(num_guesses, num_correct, epsilon)[:2]
  return jnp.minimum(beta + alpha * num_examples * delta, 1.0)


def _p_value_and_slope(num_examples, num_guesses, num_correct, epsilon, delta, hint):
  r"""The p-value of Eqs. 7-9 and :math:`d\log p/d\epsilon`.

  With :math:`q = \sigma(\epsilon)`, :math:`dq/d\epsilon = q(1-q)`, and
  :math:`q(1-q)\frac{d}{dq}\Pr[\check W \ge k] = D_k` (the density of
  :func:`binomial.log_binomial_tails_and_density`, which the search for alpha's maximiser has
  already evaluated): :math:`d\beta/d\epsilon = D_v` and, at the maximiser :math:`i^*` of
  alpha (the derivative of a maximum is that of its maximiser),
  :math:`d\alpha/d\epsilon = \frac{2}{i^*}(D_{v-i^*} - D_v)`, with :math:`D_0 = 0`."""
  m, r, v, d = num_examples, num_guesses, num_correct, delta
  found = _beta_and_alpha(r, v, epsilon, hint)
  p = jnp.minimum(found.beta + found.alpha * m * d, 1.0)
  log_p = jnp.log(p)
  scale = 2.0 * m * d / jnp.maximum(found.i_star, 1.0)
  rate_v = jnp.exp(found.log_density_v - log_p)
  slope = rate_v + scale * (jnp.exp(found.log_density_star - log_p) - rate_v)
  return p, jnp.where(jnp.logical_and(p < 1.0, v > 0.0), slope, 0.0), found.i_star


def _as_float(*xs):
  """Strongly typed float arrays, so that jit caches on shapes only."""
  dtype = _float_dtype()
  return tuple(jnp.asarray(x, dtype) for x in xs)


def _broadcast_float(*xs):
  dtype = _float_dtype()
  return jnp.broadcast_arrays(*(jnp.asarray(x, dtype) for x in xs))


@_compile.jit(static_argnames="with_delta")
def _p_value_jit(num_examples, num_guesses, num_correct, epsilon, delta, with_delta: bool):
  m, r, v, eps, d = _broadcast_float(num_examples, num_guesses, num_correct, epsilon, delta)
  return _p_value(m, r, v, eps, d, with_delta)


def _delta_free_epsilon(num_guesses, num_correct, significance):
  """With delta = 0 the p-value is :math:`\\Pr[\\mathrm{Bin}(r, \\sigma(\\epsilon)) \\ge v]`,
  increasing in epsilon, so the bound is the logit of the one-sided Clopper-Pearson lower limit (0
  below 1/2): no search."""
  r, v = num_guesses, num_correct
  limit = binomial.cp_lower_limit(v, jnp.maximum(r, 1.0), jnp.log(significance))
  positive = jnp.logical_and(v > 0.0, limit > 0.5)
  safe = jnp.where(positive, limit, 0.75)
  return jnp.where(positive, jnp.log(safe) - jnp.log1p(-safe), 0.0)


def _tolerance(dtype) -> float:
  return 1e-10 if dtype == jnp.float64 else 1e-6


def _epsilon_ceiling(num_guesses, num_correct, significance):
  """An upper end for the search, without a solve: the delta-free bound is the logit of the
  Clopper-Pearson lower limit, which is at most v / r, and equals significance^(1/r) at v = r."""
  r, v = num_guesses, num_correct
  all_right = v >= r
  rate = jnp.where(all_right, jnp.exp(jnp.log(significance) / jnp.maximum(r, 1.0)),
                   v / jnp.maximum(r, 1.0))
  rate = jnp.clip(rate, 0.5, 1.0 - 1e-300)
  return jnp.log(rate) - jnp.log1p(-rate)


@_compile.jit(static_argnames="with_delta",
              fusion_emitters=_compile.fusion_below(_compile.SMALL_ELEMENTS + 1))
def _epsilon_jit(num_examples, num_guesses, num_correct, delta, significance, with_delta: bool):
  m, r, v, d, sig = _broadcast_float(num_examples, num_guesses, num_correct, delta,
                                     significance)
  if not with_delta:
    return _delta_free_epsilon(r, v, sig)
  # p increases with epsilon, and the root of f = log p - log(significance) lies in [0, ceiling].
  # Newton's method on f (analytic derivative) inside a bracket whose lower end was checked to
  # have p <= significance; a step that leaves the bracket is replaced by bisection, and each
  # Newton point is moved 1e-10 towards the root's far side so that the bracket closes. The
  # first two steps evaluate the ends, so the p-value is compiled once.
  log_sig = jnp.log(sig)
  tol = _tolerance(r.dtype)
  # The delta term only raises the p-value, so the root lies below the delta-free bound (the
  # logit of a Clopper-Pearson limit, one short solve), usually close below it when m delta
  # is small: Newton from there takes 2-4 steps where it took 6-8 from logit(v / r).
  ceiling = jnp.minimum(_epsilon_ceiling(r, v, sig), _delta_free_epsilon(r, v, sig))

  def open_(lo, hi):
    return hi - lo > tol * jnp.maximum(hi, 1.0)

  def cond(state):
    i, lo, hi, _, _, _, active, _ = state
    return jnp.logical_or(i < 2, jnp.logical_and(i < 200, jnp.any(active & open_(lo, hi))))

  def body(state):
    i, lo, hi, x, f_x, slope_x, active, hint = state
    newton = x - f_x / jnp.where(slope_x > 0.0, slope_x, 1.0)
    newton = newton - jnp.sign(f_x) * 0.5 * tol * jnp.maximum(hi, 1.0)
    inside = (slope_x > 0.0) & (newton > lo) & (newton < hi)
    step = jnp.where(inside, newton, 0.5 * (lo + hi))
    # Elements that are done evaluate their last point again: its maximiser is the hint, so
    # their search for alpha's maximiser ends in the first round instead of holding every
    # other element's search open (the loop runs as long as its slowest element).
    step = jnp.where(active & open_(lo, hi), step, x)
    eps = jnp.where(i == 0, lo, jnp.where(i == 1, hi, step))
    p, slope, i_star = _p_value_and_slope(m, r, v, eps, d, jnp.where(i >= 2, hint, 0.0))
    value, rejected = jnp.log(p) - log_sig, p <= sig
    # Step 0: the lower end (nothing is rejected if p(0) > significance). Step 1: the upper end
    # (if even it is rejected, it is the bound).
    active = jnp.where(i == 0, rejected, jnp.where(i == 1, active & ~rejected, active))
    closing = (i == 1) & rejected
    lo, hi = jnp.where(closing, eps, lo), jnp.where(closing, eps, hi)
    search = (i >= 2) & active & open_(lo, hi)
    lo = jnp.where(search & rejected, eps, lo)
    hi = jnp.where(search & ~rejected, eps, hi)
    take = (i == 1) | search  # Newton continues from the newest point (from the upper end first)
    return (i + 1, lo, hi, jnp.where(take, eps, x), jnp.where(take, value, f_x),
            jnp.where(take, slope, slope_x), active, jnp.where(take, i_star, hint))

  zeros = jnp.zeros_like(r)
  state = (jnp.asarray(0), zeros, ceiling, zeros, zeros, zeros, jnp.ones(r.shape, bool), zeros)
  _, lo, _, _, _, _, _, _ = jax.lax.while_loop(cond, body, state)
  return lo


def one_run_p_value(num_examples, num_guesses, num_correct, epsilon,
                    delta=0.0) -> jax.Array:
  r"""p-value of "the training algorithm is (epsilon, delta)-DP" after one audited run.

  Thm. 2 (Eqs. 7-9) of Liu & Xiong, UniAud; after the main result of Steinke, Nasr & Jagielski
  (2023):

  .. math::
     p = \min\Big(1,\; \Pr[\check W \ge v]
       + m\,\delta \max_{1 \le i \le m} \frac{2}{i}\Pr[v > \check W \ge v - i]\Big),
     \qquad \check W \sim \mathrm{Bin}\big(r, e^\epsilon / (1 + e^\epsilon)\big).

  The maximum over i is found in O(log v) tail evaluations (:func:`_beta_and_alpha`), so the
  cost does not depend on m.

  Args:
    num_examples: number m of canaries; any shape broadcasting with the counts.
    num_guesses: number r of non-abstaining guesses, 0 <= r <= m; any shape.
    num_correct: number v of correct guesses, 0 <= v <= r; broadcasts with ``num_guesses``.
    epsilon: epsilon >= 0 of the null hypothesis; broadcasts.
    delta: delta in [0, 1) of the null hypothesis; broadcasts. When it is concretely 0 the
      delta term is skipped.

  Returns:
    The p-value, with the broadcast shape of the inputs.

  >>> round(float(one_run_p_value(100, 20, 18, 1.0)), 4)  # Pr[Bin(20, sigmoid(1)) >= 18]
  0.0648
  >>> round(float(one_run_p_value(100, 20, 18, 1.0, delta=1e-3)), 4)
  0.0977
  """
  _check_count_args(num_examples, num_guesses, num_correct)
  _validate.check_range("epsilon", epsilon, 0.0)
  _validate.check_delta(delta)
  args = _compile.float_arguments(num_examples, num_guesses, num_correct, epsilon, delta)
  with_delta = not _delta_is_zero(delta)
  return _compile.elementwise(
      lambda *flat: _compile.first_call(_P_VALUE_PROGRAMS[with_delta],
                                        _host_path(_HOST_P_VALUE[with_delta], with_delta, flat[2]),
                                        flat, _flat_size(flat)), *args)


def one_run_epsilon(num_examples, num_guesses, num_correct, delta=0.0,
                    significance=0.05) -> jax.Array:
  r"""Lower confidence bound on epsilon from one audited training run.

  The largest :math:`\epsilon` whose p-value (:func:`one_run_p_value`; Thm. 2, Eqs. 7-9 of
  Liu & Xiong, UniAud, after Steinke, Nasr & Jagielski 2023) is at most ``significance``:

  .. math:: \epsilon_L = \sup\{\epsilon \ge 0 : p(\epsilon; m, r, v, \delta) \le \beta\},

  so that :math:`\Pr[\epsilon_L > \epsilon_{\text{true}}] \le \beta` for an
  (:math:`\epsilon_{\text{true}}`, delta)-DP algorithm whenever the guesses are computed from
  the training output alone (never from the memberships).

  For ``delta = 0`` this is ``logit`` of the one-sided Clopper-Pearson lower limit of ``v / r``
  at level ``significance`` (0 when that limit is below 1/2), computed directly. For
  ``delta > 0`` the delta term only raises the p-value, so the root lies between 0 and the
  delta-free bound, itself at most ``logit(v / r)`` (``logit(significance^(1/r))`` at v = r);
  Newton's method on the log p-value (analytic derivative, bisection when a step leaves the
  bracket) shrinks that bracket to 1e-10 relative (float64) and returns its lower end: the returned
  value is always 0 or an epsilon whose p-value was checked to be <= ``significance``. The search
  presumes the p-value is non-decreasing in epsilon: the beta term is; the delta term is not in
  general (alpha can fall as epsilon grows), but the sum was non-decreasing wherever it is below 1
  in every case checked (see the tests), and alpha >= 2 (1 - beta) / v makes the sum reach 1
  when 2 m delta >= v. Each p-value costs O(log v) binomial tails (:func:`one_run_p_value`),
  whatever m.

  Args:
    num_examples: number m of canaries; any shape broadcasting with the counts.
    num_guesses: number r of guesses, 0 <= r <= m; any shape.
    num_correct: number v of correct guesses, 0 <= v <= r; broadcasts with ``num_guesses``.
    delta: delta in [0, 1); broadcasts.
    significance: beta in (0, 1) of the 1 - beta confidence level; broadcasts.

  Returns:
    The lower bound on epsilon, with the broadcast shape of the inputs.

  >>> round(float(one_run_epsilon(100, 20, 18)), 4)  # 18 of 20 guesses right, 100 canaries
  0.9315
  >>> round(float(one_run_epsilon(100, 20, 18, delta=1e-3)), 4)
  0.7473
  """
  _check_count_args(num_examples, num_guesses, num_correct)
  _validate.check_delta(delta)
  _validate.check_significance(significance)
  args = _compile.float_arguments(num_examples, num_guesses, num_correct, delta, significance)
  with_delta = not _delta_is_zero(delta)
  return _compile.elementwise(
      lambda *flat: _compile.first_call(_EPSILON_PROGRAMS[with_delta],
                                        _host_path(_HOST_EPSILON[with_delta], with_delta, flat[2]),
                                        flat, _flat_size(flat)), *args)


def one_run_epsilon_ceiling(num_examples, num_guesses, delta=0.0,
                            significance=0.05) -> jax.Array:
  r"""Largest bound the one-run audit can report with ``num_guesses`` guesses.

  :math:`\epsilon_O` of Liu & Xiong, UniAud (Sec. III-B/C): :func:`one_run_epsilon` with every
  guess correct (v = r). With delta = 0 it has the closed form
  :math:`\epsilon_O = \mathrm{logit}(\beta^{1/r})`, since :math:`\Pr[\check W \ge r] = q^r`.

  >>> round(float(one_run_epsilon_ceiling(100, 20)), 4)  # logit(0.05 ** (1 / 20))
  1.8227
  """
  _check_count_args(num_examples, num_guesses)
  return one_run_epsilon(num_examples, num_guesses, num_guesses, delta, significance)


class OneRunResult(NamedTuple):
  """Result of :func:`one_run_epsilon_from_scores`.

  Attributes:
    epsilon: best lower bound over the guess grid (valid at level ``significance`` only with
      ``correction="bonferroni"``).
    num_guesses: the number of guesses r at the best grid point (first maximiser).
    num_correct: correct guesses at that r.
    epsilon_ceiling: :func:`one_run_epsilon_ceiling` at that r and ``per_test_significance``.
    per_test_significance: level each grid point was tested at.
    grid: the guess counts r that were swept (sorted, deduplicated).
    grid_correct: correct guesses at each grid point.
    grid_epsilon: lower bound at each grid point (at ``per_test_significance``).
    grid_epsilon_ceiling: :func:`one_run_epsilon_ceiling` at each grid point (same level).
    grid_epsilon_ceiling_without_delta: the same with delta = 0: what the grid could certify
      if the delta term cost nothing.
    optimistic: True with ``correction="none"``: ``epsilon`` is then the best of several tests
      each at ``significance``, chosen after seeing the outcome, and is NOT a valid
      1 - significance lower bound (it reproduces the papers' numbers).
  """
  epsilon: jax.Array
  num_guesses: jax.Array
  num_correct: jax.Array
  epsilon_ceiling: jax.Array
  per_test_significance: jax.Array
  grid: jax.Array
  grid_correct: jax.Array
  grid_epsilon: jax.Array
  grid_epsilon_ceiling: jax.Array
  grid_epsilon_ceiling_without_delta: jax.Array
  optimistic: bool = False

  @property
  def max_epsilon_ceiling(self) -> jax.Array:
    """The largest epsilon this audit could have certified (every guess correct at the best
    grid point), given m, delta and the per-test level: the power it has before any data."""
    return jnp.max(self.grid_epsilon_ceiling)

  @property
  def max_epsilon_ceiling_without_delta(self) -> jax.Array:
    """:attr:`max_epsilon_ceiling` with delta = 0; the gap is the power lost to delta."""
    return jnp.max(self.grid_epsilon_ceiling_without_delta)


def default_guess_grid(num_examples: int, size: int = DEFAULT_GRID_SIZE) -> np.ndarray:
  """About ``size`` guess counts geometrically spaced from min(10, m) to m, deduplicated
  (``[0]`` for m = 0)."""
  m = _validate.check_integer("num_examples", num_examples, 0)
  size = _validate.check_integer("size", size, 1)
  if m <= 0:
    return np.zeros((1,), np.int64)
  grid = np.round(np.geomspace(min(10, m), m, size)).astype(np.int64)
  return np.unique(np.clip(grid, 1, m))


def _correct_counts(scores, is_member, grid, mode: str, num_examples=None):
  """Correct guesses for each r in ``grid`` (one stable sort and cumulative counts).
  ``num_examples`` (traced) is the number m of real canaries when ``scores`` is padded to its
  bucket: the padding sorts after them and counts as no member."""
  dtype = _float_dtype()
  scores = jnp.asarray(scores)
  size = scores.shape[-1]
  m = size if num_examples is None else num_examples
  valid = None if num_examples is None else jnp.arange(size) < num_examples
  # Ties: lower index first. top_members[k]: members among the k highest scores, counted as
  # integers (a host callback's float64 output trips JAX's output check when x64 is on only
  # in the caller's thread and the backend runs callbacks on another: seen on a GPU machine).
  _, in_top = descending_cumulative(scores, jnp.asarray(is_member) != 0, stable=True,
                                    valid=valid)
  in_top = in_top.astype(dtype)
  top_members = jnp.concatenate([jnp.zeros(in_top.shape[:-1] + (1,), dtype), in_top], axis=-1)
  if mode == "top":
    return top_members[grid]
  n_top = (grid + 1) // 2
  n_bottom = grid // 2
  bottom_nonmembers = n_bottom - (top_members[m] - top_members[m - n_bottom])
  return top_members[n_top] + bottom_nonmembers


def _guess_grid_and_level(scores, is_member, delta, significance, num_guesses, mode: str,
                           correction: str) -> tuple[np.ndarray, jax.Array]:
  """The checked inputs of a from-scores one-run bound: the sorted, deduplicated grid of guess
  counts (default :func:`default_guess_grid`) and the level each grid point is tested at
  (``significance``, divided by the grid's size under ``correction="bonferroni"``). Shared by
  :func:`one_run_epsilon_from_scores` and
  :func:`dpaudit.estimators.fdp_one_run.fdp_one_run_from_scores`, so both make the same
  guesses at the same levels."""
  _validate.check_choice("mode", mode, MODES)
  _validate.check_choice("correction", correction, CORRECTIONS)
  _validate.check_delta(delta)
  _validate.check_significance(significance)
  _validate.check_real_array("scores", scores, ndim=1, neg_inf=True, pos_inf=True)
  _validate.check_same_shape("scores", scores, "is_member", is_member)
  _validate.check_binary("is_member", is_member)
  m = int(np.shape(scores)[0])
  if num_guesses is None:
    grid = default_guess_grid(m)
  else:
    if not _validate.is_concrete(num_guesses):
      raise TypeError("num_guesses sets the grid (and the Bonferroni factor) and must be static")
    if np.ndim(num_guesses) != 1:
      raise ValueError(f"num_guesses must be a 1-D grid, got shape {np.shape(num_guesses)}")
    _validate.check_nonempty("num_guesses", num_guesses)
    _validate.check_counts("num_guesses", num_guesses, m, "num_examples")
    grid = np.unique(np.asarray(num_guesses).astype(np.int64))
  per_test = _compile.argument(significance, _float_dtype())
  if correction == "bonferroni":
    per_test = per_test / len(grid)
  return grid, per_test


def one_run_epsilon_from_scores(scores, is_member, delta=0.0, significance=0.05, *,
                                num_guesses=None, mode: str = "symmetric",
                                correction: str = "bonferroni") -> OneRunResult:
  r"""One-run epsilon lower bound from membership scores, sweeping the number of guesses.

  Guessing rule (fixed before the membership is looked at, so Thm. 2 / Eqs. 7-9 of Liu &
  Xiong, UniAud, after Steinke, Nasr & Jagielski 2023, applies to each r): sort the canaries by
  score, higher first, ties broken by index (a deterministic function of the output, which
  the theorem allows). With r guesses,

  * ``mode="symmetric"`` (UniAud's symmetric thresholding): "member" for the top
    :math:`\lceil r/2 \rceil` and "non-member" for the bottom :math:`\lfloor r/2 \rfloor`;
  * ``mode="top"``: "member" for the top r only.

  A guess is correct when it matches ``is_member``. For each r of the grid the bound of
  :func:`one_run_epsilon` is computed and the best one is reported.

  Selection honesty: with ``correction="bonferroni"`` (default) every grid point is tested at
  ``significance / len(grid)``, so by a union bound the maximum over the grid is a valid
  1 - significance lower confidence bound. With ``correction="none"`` every grid point is
  tested at ``significance``, as reported in the papers; the maximum over r is then
  optimistic (not a valid 1 - significance bound), since the best r is chosen after seeing the
  outcome.

  Args:
    scores: 1-D array of m membership scores (higher = more likely member), no NaN.
    is_member: 1-D boolean (or 0/1) array of the m true memberships.
    delta: delta in [0, 1) of the null hypothesis.
    significance: beta in (0, 1).
    num_guesses: 1-D grid of guess counts r in 0..m (static); default
      :func:`default_guess_grid` (about 30 values geometrically spaced from min(10, m) to m).
      It is sorted and deduplicated.
    mode: "symmetric" or "top".
    correction: "bonferroni" or "none".

  Returns:
    :class:`OneRunResult`.

  >>> import numpy as np
  >>> rng = np.random.default_rng(0)
  >>> member = rng.random(200) < 0.5
  >>> result = one_run_epsilon_from_scores(rng.normal(2.0 * member, 1.0), member,
  ...                                      num_guesses=[20, 50, 100])
  >>> round(float(result.epsilon), 4), int(result.num_guesses), int(result.num_correct)
  (1.7724, 100, 93)
  """
  grid, per_test = _guess_grid_and_level(scores, is_member, delta, significance, num_guesses,
                                         mode, correction)
  dtype = per_test.dtype
  m = int(np.shape(scores)[0])
  delta = _compile.argument(delta, dtype)
  scores, is_member = _compile.argument(scores), _compile.argument(is_member)
  with_delta = not _delta_is_zero(delta)
  if not _validate.is_concrete((scores, is_member, delta)):
    # Inside a caller's trace the shapes are the caller's: no padding, no host path.
    out = _from_scores(scores, is_member, np.int32(m), grid.astype(np.int32), delta, per_test,
                       mode=mode, with_delta=with_delta)
    return OneRunResult(*out, optimistic=correction == "none")
  size = _compile.bucket_size(m)
  args = (_compile.pad_edge(scores, size), _compile.pad_edge(is_member, size), np.int32(m),
          _compile.pad_edge(grid.astype(np.int32), grid_bucket(len(grid))), delta, per_test,
          mode, with_delta)
  host = _host_path(_host_from_scores, with_delta, np.full(2 * len(args[3]), m))
  out = _compile.first_call(_from_scores_program, host, args, size)
  n = len(grid)
  # The per-grid outputs cut on the host and sent back in one transfer (one per array cost
  # about 0.25 ms each, a quarter of a call on 1e3 canaries).
  out = out[:5] + tuple(jax.device_put([np.asarray(x)[:n] for x in out[5:]]))
  return OneRunResult(*out, optimistic=correction == "none")


GRID_BUCKET = 32
"""The smallest bucket of a guess grid (the default grid has at most 30 points)."""


def grid_bucket(n: int) -> int:
  """The padded length of a grid of ``n`` guess counts: the least power of two >= ``n`` and
  >= :data:`GRID_BUCKET`. The grid is a traced argument padded with its last point (whose bound
  repeats; the first maximiser is kept), so grids of one bucket share a program."""
  return max(GRID_BUCKET, 1 << max(0, n - 1).bit_length())


@_compile.jit(static_argnames=("mode", "with_delta"),
              fusion_emitters=_compile.fusion_below(_compile.SMALL_ELEMENTS + 1),
              tree_reductions=False)
def _from_scores(scores, is_member, num_examples, grid, delta, per_test, mode: str,
                 with_delta: bool):
  dtype = per_test.dtype
  correct = _correct_counts(scores, is_member, grid, mode, num_examples)
  n = grid.shape[0]
  grid_f = grid.astype(dtype)
  # One solve for the bounds (v = correct) and the ceilings (v = r) of every grid point.
  both = _epsilon_jit(*_as_float(num_examples, jnp.concatenate([grid_f, grid_f]),
                                 jnp.concatenate([correct, grid_f]), delta, per_test),
                      with_delta=with_delta)
  grid_eps, grid_ceiling = both[:n], both[n:]
  # With delta = 0 and every guess right, Pr[W >= r] = q^r: the ceiling is logit(beta^(1/r)).
  ceiling_without_delta = grid_ceiling
  if with_delta:
    ceiling_without_delta = _epsilon_ceiling(grid_f, grid_f, per_test)
  best = jnp.argmax(grid_eps)
  return (grid_eps[best], grid_f[best], correct[best], grid_ceiling[best], per_test, grid_f,
          correct, grid_eps, grid_ceiling, ceiling_without_delta)


def _from_scores_program(scores, is_member, num_examples, grid, delta, per_test, mode: str,
                         with_delta: bool):
  """:func:`_from_scores` with its static arguments passed by position (for
  :func:`dpaudit.estimators._compile.first_call`)."""
  return _from_scores(scores, is_member, num_examples, grid, delta, per_test, mode=mode,
                      with_delta=with_delta)


_P_VALUE_PROGRAMS = {w: functools.partial(_p_value_jit, with_delta=w) for w in (False, True)}
_EPSILON_PROGRAMS = {w: functools.partial(_epsilon_jit, with_delta=w) for w in (False, True)}


# --- Exact NumPy/scipy paths for first calls on small inputs ---------------------------------
#
# The same equations as the compiled programs, evaluated with scipy's binomial tails
# (``scipy.special.bdtrc``) and a log-scale cumulative sum of the pmf for alpha, and inverted by
# a bracketing root search to the compiled solver's tolerance. They answer a first call while
# its program compiles (:func:`dpaudit.estimators._compile.first_call`) and agree with the
# programs to about 1e-10 relative (tests/estimators/test_one_run.py).

HOST_ALPHA_ELEMENTS = 1 << 19
"""Most pmf terms one evaluation of alpha may take on the host (elements times the largest
correct count v); larger problems wait for the compiled program."""


def _host_log_choose(k, n):
  from scipy import special
  return special.gammaln(n + 1.0) - special.gammaln(k + 1.0) - special.gammaln(n - k + 1.0)


def _host_log_pmf(k, n, log_q, log_1mq, log_choose=None):
  if log_choose is None:
    log_choose = _host_log_choose(k, n)
  return log_choose + k * log_q + (n - k) * log_1mq


def _host_window(r, v):
  """The counts k = v - i (i = 1..max v) of alpha's windows, per row, and their log binomial
  coefficients (which do not depend on epsilon: a root search computes them once)."""
  top = int(np.max(v, initial=0.0))
  k = v[:, None] - np.arange(1, top + 1, dtype=np.float64)[None, :]
  with np.errstate(invalid="ignore"):
    return k, _host_log_choose(np.maximum(k, 0.0), r[:, None])


def _host_beta_alpha(r, v, epsilon, window=None):
  r"""Eqs. 8-9 on the host: :math:`\beta = \Pr[\check W \ge v]` and
  :math:`\alpha = \max_i \frac2i \Pr[v - i \le \check W < v]`, the latter from the running
  log-sums of the pmf at v - 1, v - 2, ..., 0 (1-D arrays of one length); also alpha's first
  maximiser i* and the log densities D_v, D_{v - i*} of :func:`_p_value_and_slope`
  (:math:`D_k = k (1 - q) \Pr[\check W = k]`, -inf at k = 0)."""
  from scipy import special
  q = special.expit(epsilon)
  beta = np.where(v <= 0, 1.0, special.bdtrc(_whole(v - 1.0), _whole(r), q))
  log_q, log_1mq = -np.logaddexp(0.0, -epsilon), -np.logaddexp(0.0, epsilon)

  def log_density(k):
    with np.errstate(divide="ignore", invalid="ignore"):
      return np.where(k >= 1.0, np.log(np.maximum(k, 1.0)) + log_1mq
                      + _host_log_pmf(np.maximum(k, 0.0), r, log_q, log_1mq), -np.inf)
  top = int(np.max(v, initial=0.0))
  if top == 0:
    zeros = np.zeros_like(beta)
    return beta, zeros, zeros, log_density(v), np.full_like(beta, -np.inf)
  i = np.arange(1, top + 1, dtype=np.float64)
  k, log_choose = _host_window(r, v) if window is None else (w[:, :top] for w in window)
  with np.errstate(invalid="ignore", divide="ignore"):
    log_s = np.where(k >= 0.0, _host_log_pmf(np.maximum(k, 0.0), r[:, None], log_q[:, None],
                                             log_1mq[:, None], log_choose), -np.inf)
  log_mean = np.logaddexp.accumulate(log_s, axis=1) - np.log(i)[None, :]
  star = np.argmax(log_mean, axis=1)
  alpha = 2.0 * np.exp(log_mean[np.arange(v.size), star])
  i_star = i[star]
  return (beta, np.where(v <= 0.0, 0.0, alpha), i_star, log_density(v),
          log_density(v - i_star))


def _host_p_value_values(m, r, v, epsilon, delta, with_delta: bool):
  if not with_delta:
    from scipy import special
    q = special.expit(epsilon)
    return np.where(v <= 0.0, 1.0, special.bdtrc(_whole(v - 1.0), _whole(r), q))
  beta, alpha = _host_beta_alpha(r, v, epsilon)[:2]
  return np.minimum(beta + alpha * m * delta, 1.0)


def _host_path(host, with_delta: bool, num_correct):
  """``host``, or None (the compiled program) where alpha's pmf terms on the host (elements
  times the largest ``num_correct``) would exceed :data:`HOST_ALPHA_ELEMENTS`."""
  if not with_delta or isinstance(num_correct, jax.core.Tracer):
    return host
  v = np.asarray(num_correct)
  return host if v.size * float(np.max(v, initial=0.0)) <= HOST_ALPHA_ELEMENTS else None


def _host_p_value(with_delta: bool):
  def run(m, r, v, epsilon, delta):
    m, r, v, epsilon, delta = np.broadcast_arrays(
        *(np.asarray(x, np.float64) for x in (m, r, v, epsilon, delta)))
    return _host_p_value_values(m, r, v, epsilon, delta, with_delta)
  return run


def _host_epsilon_ceiling(r, v, significance):
  rate = np.where(v >= r, np.exp(np.log(significance) / np.maximum(r, 1.0)),
                  v / np.maximum(r, 1.0))
  rate = np.clip(rate, 0.5, 1.0 - 1e-300)
  return np.log(rate) - np.log1p(-rate)


def _host_epsilon_values(m, r, v, delta, significance, with_delta: bool):
  """One-run epsilon bounds on the host: the delta-free closed form, or the largest epsilon
  with p-value <= significance by the compiled solver's method (Newton's method on the log
  p-value with its analytic slope inside a bracket from 0 to the delta-free bound, bisection
  where a step leaves it, each point moved half the tolerance towards the far side), to the
  same tolerance; the lower end is returned."""
  from scipy import special
  with np.errstate(invalid="ignore"):
    limit = special.betaincinv(np.maximum(v, 1.0), r - v + 1.0, significance)
  positive = (v > 0.0) & (limit > 0.5)
  safe = np.where(positive, limit, 0.75)
  delta_free = np.where(positive, np.log(safe) - np.log1p(-safe), 0.0)
  if not with_delta:
    return delta_free
  log_sig = np.log(significance)

  window = _host_window(r, v)

  def f_and_slope(idx, eps):
    beta, alpha, i_star, log_d_v, log_d_star = _host_beta_alpha(
        r[idx], v[idx], eps, tuple(w[idx] for w in window))
    md = m[idx] * delta[idx]
    p = np.minimum(beta + alpha * md, 1.0)
    rate_v = np.exp(log_d_v - np.log(p))
    slope = rate_v + 2.0 * md / np.maximum(i_star, 1.0) * (np.exp(log_d_star - np.log(p))
                                                            - rate_v)
    return np.log(p) - log_sig[idx], np.where((p < 1.0) & (v[idx] > 0.0), slope, 0.0)

  tol = 1e-10
  lo = np.zeros_like(r)
  hi = np.minimum(_host_epsilon_ceiling(r, v, significance), delta_free)
  every = np.arange(r.size)
  f_lo = f_and_slope(every, lo)[0]
  f_hi, slope = f_and_slope(every, hi)
  result = np.where(f_lo > 0.0, 0.0, hi)  # p(0) > significance: 0; p(hi) <= significance: hi
  open_ = (f_lo <= 0.0) & (f_hi > 0.0)
  x, f_x = hi.copy(), f_hi
  for _ in range(200):
    idx = np.flatnonzero(open_ & (hi - lo > tol * np.maximum(hi, 1.0)))
    if idx.size == 0:
      break
    a, b, fx, sx = lo[idx], hi[idx], f_x[idx], slope[idx]
    newton = x[idx] - fx / np.where(sx > 0.0, sx, 1.0)
    newton = newton - np.sign(fx) * 0.5 * tol * np.maximum(b, 1.0)
    inside = (sx > 0.0) & (newton > a) & (newton < b)
    step = np.where(inside, newton, 0.5 * (a + b))
    value, step_slope = f_and_slope(idx, step)
    rejected = value <= 0.0
    lo[idx], hi[idx] = np.where(rejected, step, a), np.where(rejected, b, step)
    x[idx], f_x[idx], slope[idx] = step, value, step_slope
  return np.where(open_, lo, result)


def _host_epsilon(with_delta: bool):
  def run(m, r, v, delta, significance):
    arrays = np.broadcast_arrays(*(np.asarray(x, np.float64)
                                   for x in (m, r, v, delta, significance)))
    return _host_epsilon_values(*(np.array(a) for a in arrays), with_delta)
  return run


def _host_from_scores(scores, is_member, num_examples, grid, delta, per_test, mode: str,
                      with_delta: bool):
  """:func:`_from_scores` on the host (padded arguments as the program takes them)."""
  m = int(num_examples)
  scores, member = np.asarray(scores)[:m], np.asarray(is_member)[:m] != 0
  top = np.concatenate([[0], np.cumsum(member[np.argsort(-scores, kind="stable")])])
  grid = np.asarray(grid, np.int64)
  if mode == "top":
    correct = top[grid]
  else:
    n_bottom = grid // 2
    correct = top[(grid + 1) // 2] + n_bottom - (top[m] - top[m - n_bottom])
  grid_f, correct = grid.astype(np.float64), correct.astype(np.float64)
  n = grid.size
  both = _host_epsilon_values(np.full(2 * n, float(m)), np.concatenate([grid_f, grid_f]),
                              np.concatenate([correct, grid_f]), np.full(2 * n, float(delta)),
                              np.full(2 * n, float(per_test)), with_delta)
  grid_eps, grid_ceiling = both[:n], both[n:]
  without = (_host_epsilon_ceiling(grid_f, grid_f, float(per_test)) if with_delta
             else grid_ceiling)
  best = int(np.argmax(grid_eps))
  return (grid_eps[best], grid_f[best], correct[best], grid_ceiling[best],
          np.asarray(per_test, np.float64), grid_f, correct, grid_eps, grid_ceiling, without)


_HOST_P_VALUE = {w: _host_p_value(w) for w in (False, True)}
_HOST_EPSILON = {w: _host_epsilon(w) for w in (False, True)}


def _flat_size(arrays) -> int:
  """Elements of the largest of ``arrays`` (the batch :func:`_compile.elementwise` passes)."""
  return max(math.prod(np.shape(a)) for a in arrays)


def _whole(x):
  """Counts as int64 (scipy's binomial tails refuse float counts), negatives as 0."""
  return np.maximum(np.rint(x), 0.0).astype(np.int64)
