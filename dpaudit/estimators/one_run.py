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

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate
from dpaudit.estimators import binomial

EPSILON_BRACKET = (0.0, 64.0)
"""Bisection bracket for epsilon. The largest epsilon any test can reject (all r guesses
correct, delta = 0) is about log(r) - log(log(1 / significance)), below 30 for r <= 1e9 and
significance <= 0.99, so the upper end is never binding."""

MODES = ("symmetric", "top")
CORRECTIONS = ("bonferroni", "none")
DEFAULT_GRID_SIZE = 30


def _float_dtype():
  return jnp.result_type(float)


def _bisection_steps(dtype) -> int:
  # 64 / 2^50 ~ 6e-14 in float64; 64 / 2^30 ~ 6e-8 in float32.
  return 50 if dtype == jnp.float64 else 30


def _static_length(num_examples) -> int:
  """The pmf support 0..m needs a static m."""
  if not _validate.is_concrete(num_examples):
    raise TypeError("num_examples sets array lengths and must be static (a Python int or a "
                    "concrete array); mark it static under jit, e.g. static_argnums=0")
  arr = np.asarray(num_examples)
  return int(arr.max()) if arr.size else 0


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


def _log_binomial_coefficients(num_guesses, length: int):
  """``log C(r, k)`` for k = 0..length (-inf for k > r), by Loader's saddle point at p = 1/2."""
  r = num_guesses[..., None]
  k = jnp.arange(length + 1, dtype=r.dtype)
  return binomial.binomial_logpmf(k, r, 0.5) + r * jnp.log(2.0)


def _alpha(num_guesses, num_correct, epsilon, log_coefficients):
  r"""Eq. 9: :math:`\alpha = \max_{0 \le k < v} \frac{2}{v - k}\Pr[k \le \check W < v]`.

  Substituting k = v - i; terms with i > v equal the i = v term times v / i, so only
  k = 0..v-1 matter. The window sums are suffix sums of the pmf masked to k < v, so they are
  sums of non-negative terms accumulated from the small end of the upper tail (no cancellation).
  The pmf is ``exp(log C(r, k) + k log q + (r - k) log(1 - q))`` with the epsilon-free
  coefficients computed once per bisection; the sum of the three terms loses about
  ``r log(2) * 2^-52`` in relative accuracy (1e-13 for r = 1e3, 1e-10 for r = 1e6).
  """
  k = jnp.arange(log_coefficients.shape[-1], dtype=log_coefficients.dtype)
  r = num_guesses[..., None]
  v = num_correct[..., None]
  eps = epsilon[..., None]
  below = k < v
  log_pmf = log_coefficients + k * jax.nn.log_sigmoid(eps) + (r - k) * jax.nn.log_sigmoid(-eps)
  pmf = jnp.where(below, jnp.exp(jnp.where(below, log_pmf, -jnp.inf)), 0.0)
  window = jnp.flip(jnp.cumsum(jnp.flip(pmf, -1), axis=-1), -1)  # sum_{j=k}^{v-1} pmf_j
  ratio = jnp.where(below, 2.0 * window / jnp.where(below, v - k, 1.0), 0.0)
  return jnp.max(ratio, axis=-1, initial=0.0)


def _beta(num_guesses, num_correct, epsilon):
  r"""Eq. 8, :math:`\Pr[\mathrm{Bin}(r, q) \ge v] = I_q(v, r - v + 1)` as in
  :func:`binomial.binomial_sf`, but passing ``1 - q = sigmoid(-epsilon)`` exactly so that the
  tail keeps its relative accuracy for large epsilon."""
  inside = jnp.logical_and(num_correct >= 1.0, num_correct <= num_guesses)
  v = jnp.where(inside, num_correct, 1.0)
  r = jnp.where(inside, num_guesses, 1.0)
  tail = binomial.incomplete_beta_tails(v, r - v + 1.0, jax.nn.sigmoid(epsilon),
                                        jax.nn.sigmoid(-epsilon)).lower
  return jnp.where(num_correct <= 0.0, 1.0, jnp.where(num_correct > num_guesses, 0.0, tail))


def _p_value(num_examples, num_guesses, num_correct, epsilon, delta, log_coefficients=None):
  """Eqs. 7-9; the delta term is skipped when ``log_coefficients`` is None."""
  beta = _beta(num_guesses, num_correct, epsilon)
  if log_coefficients is None:
    return jnp.minimum(beta, 1.0)
  alpha = _alpha(num_guesses, num_correct, epsilon, log_coefficients)
  return jnp.minimum(beta + alpha * num_examples * delta, 1.0)


def _p_value_full(num_examples, num_guesses, num_correct, epsilon, delta, length: int,
                  with_delta: bool):
  m, r, v, eps, d = _broadcast_float(num_examples, num_guesses, num_correct, epsilon, delta)
  log_c = _log_binomial_coefficients(r, length) if with_delta else None
  return _p_value(m, r, v, eps, d, log_c)


def _as_float(*xs):
  """Strongly typed float arrays, so that jit caches on shapes only."""
  dtype = _float_dtype()
  return tuple(jnp.asarray(x, dtype) for x in xs)


def _broadcast_float(*xs):
  dtype = _float_dtype()
  return jnp.broadcast_arrays(*(jnp.asarray(x, dtype) for x in xs))


def _epsilon_bisection(num_examples, num_guesses, num_correct, delta, significance,
                       length: int, with_delta: bool):
  m, r, v, d, sig = _broadcast_float(num_examples, num_guesses, num_correct, delta,
                                     significance)
  log_c = _log_binomial_coefficients(r, length) if with_delta else None
  lo = jnp.full(r.shape, EPSILON_BRACKET[0], r.dtype)
  hi = jnp.full(r.shape, EPSILON_BRACKET[1], r.dtype)

  def body(_, bracket):
    lo, hi = bracket
    mid = 0.5 * (lo + hi)
    rejected = _p_value(m, r, v, mid, d, log_c) <= sig
    return jnp.where(rejected, mid, lo), jnp.where(rejected, hi, mid)

  lo, _ = jax.lax.fori_loop(0, _bisection_steps(r.dtype), body, (lo, hi))
  return lo


_p_value_jit = jax.jit(_p_value_full, static_argnames=("length", "with_delta"))
_epsilon_bisection_jit = jax.jit(_epsilon_bisection, static_argnames=("length", "with_delta"))


def one_run_p_value(num_examples, num_guesses, num_correct, epsilon,
                    delta=0.0) -> jax.Array:
  r"""p-value of "the training algorithm is (epsilon, delta)-DP" after one audited run.

  Thm. 2 (Eqs. 7-9) of Liu & Xiong, UniAud; after the main result of Steinke, Nasr & Jagielski
  (2023):

  .. math::
     p = \min\Big(1,\; \Pr[\check W \ge v]
       + m\,\delta \max_{1 \le i \le m} \frac{2}{i}\Pr[v > \check W \ge v - i]\Big),
     \qquad \check W \sim \mathrm{Bin}\big(r, e^\epsilon / (1 + e^\epsilon)\big).

  Args:
    num_examples: number m of canaries (static: it sets the length of the pmf 0..m that the
      delta term needs; a Python int, or a concrete array that broadcasts with the counts).
    num_guesses: number r of non-abstaining guesses, 0 <= r <= m; any shape.
    num_correct: number v of correct guesses, 0 <= v <= r; broadcasts with ``num_guesses``.
    epsilon: epsilon >= 0 of the null hypothesis; broadcasts.
    delta: delta in [0, 1) of the null hypothesis; broadcasts. When it is concretely 0 the
      O(m) delta term is skipped.

  Returns:
    The p-value, with the broadcast shape of the inputs.
  """
  _check_count_args(num_examples, num_guesses, num_correct)
  _validate.check_range("epsilon", epsilon, 0.0)
  _validate.check_delta(delta)
  length = _static_length(num_examples)
  return _p_value_jit(*_as_float(num_examples, num_guesses, num_correct, epsilon, delta),
                      length=length, with_delta=not _delta_is_zero(delta))


def one_run_epsilon(num_examples, num_guesses, num_correct, delta=0.0,
                    significance=0.05) -> jax.Array:
  r"""Lower confidence bound on epsilon from one audited training run.

  The largest :math:`\epsilon` whose p-value (:func:`one_run_p_value`; Thm. 2, Eqs. 7-9 of
  Liu & Xiong, UniAud, after Steinke, Nasr & Jagielski 2023) is at most ``significance``:

  .. math:: \epsilon_L = \sup\{\epsilon \ge 0 : p(\epsilon; m, r, v, \delta) \le \beta\},

  so that :math:`\Pr[\epsilon_L > \epsilon_{\text{true}}] \le \beta` for an
  (:math:`\epsilon_{\text{true}}`, delta)-DP algorithm whenever the guesses are computed from
  the training output alone (never from the memberships). Found by a fixed number of bisection steps on
  ``EPSILON_BRACKET = [0, 64]`` (resolution 6e-14 in float64), returning the lower end of the
  final bracket; 0 when no epsilon >= 0 is rejected (e.g. ``num_correct = 0`` or
  ``num_guesses = 0``). The returned value is always 0 or an epsilon whose p-value was checked
  to be <= ``significance``. Bisection presumes the p-value is non-decreasing in epsilon: the
  beta term is; the delta term is not in general (alpha can fall as epsilon grows), but the
  sum was non-decreasing wherever it is below 1 in every case checked (see the tests), and
  alpha >= 2 (1 - beta) / v makes the sum reach 1 when 2 m delta >= v.

  For ``delta = 0`` this equals ``logit`` of the one-sided Clopper-Pearson lower limit of
  ``v / r`` at level ``significance``.

  Args:
    num_examples: number m of canaries (static; see :func:`one_run_p_value`).
    num_guesses: number r of guesses, 0 <= r <= m; any shape.
    num_correct: number v of correct guesses, 0 <= v <= r; broadcasts with ``num_guesses``.
    delta: delta in [0, 1); broadcasts.
    significance: beta in (0, 1) of the 1 - beta confidence level; broadcasts.

  Returns:
    The lower bound on epsilon, with the broadcast shape of the inputs.
  """
  _check_count_args(num_examples, num_guesses, num_correct)
  _validate.check_delta(delta)
  _validate.check_significance(significance)
  length = _static_length(num_examples)
  return _epsilon_bisection_jit(
      *_as_float(num_examples, num_guesses, num_correct, delta, significance), length=length,
      with_delta=not _delta_is_zero(delta))


def one_run_epsilon_ceiling(num_examples, num_guesses, delta=0.0,
                            significance=0.05) -> jax.Array:
  r"""Largest bound the one-run audit can report with ``num_guesses`` guesses.

  :math:`\epsilon_O` of Liu & Xiong, UniAud (Sec. III-B/C): :func:`one_run_epsilon` with every
  guess correct (v = r). With delta = 0 it has the closed form
  :math:`\epsilon_O = \mathrm{logit}(\beta^{1/r})`, since :math:`\Pr[\check W \ge r] = q^r`.
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


def default_guess_grid(num_examples: int, size: int = DEFAULT_GRID_SIZE) -> np.ndarray:
  """About ``size`` guess counts geometrically spaced from min(10, m) to m, deduplicated."""
  m = int(num_examples)
  if m <= 0:
    return np.zeros((1,), np.int64)
  grid = np.round(np.geomspace(min(10, m), m, size)).astype(np.int64)
  return np.unique(np.clip(grid, 1, m))


def _correct_counts(scores, is_member, grid: np.ndarray, mode: str):
  """Correct guesses for each r in ``grid`` (one stable sort and cumulative counts)."""
  dtype = _float_dtype()
  scores = jnp.asarray(scores)
  m = scores.shape[-1]
  order = jnp.argsort(scores, descending=True, stable=True)  # ties: lower index first
  members = jnp.asarray(is_member)[order].astype(dtype)
  top_members = jnp.concatenate([jnp.zeros((1,), dtype), jnp.cumsum(members)])  # in top k
  if mode == "top":
    return top_members[grid]
  n_top = (grid + 1) // 2
  n_bottom = grid // 2
  bottom_nonmembers = n_bottom - (top_members[m] - top_members[m - n_bottom])
  return top_members[n_top] + bottom_nonmembers


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
  """
  _validate.check_choice("mode", mode, MODES)
  _validate.check_choice("correction", correction, CORRECTIONS)
  _validate.check_delta(delta)
  _validate.check_significance(significance)
  if np.ndim(scores) != 1:
    raise ValueError(f"scores must be 1-D, got shape {np.shape(scores)}")
  _validate.check_nonempty("scores", scores)
  _validate.check_same_shape("scores", scores, "is_member", is_member)
  _validate.check_range("scores", scores)
  if _validate.is_concrete(is_member):
    member_values = np.asarray(is_member)
    if member_values.dtype.kind not in "biuf" or not np.all(
        (member_values == 0) | (member_values == 1)):
      raise ValueError(f"is_member must be boolean or 0/1, got values "
                       f"{np.unique(member_values)[:5]!r}")
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

  dtype = _float_dtype()
  per_test = jnp.asarray(significance, dtype)
  if correction == "bonferroni":
    per_test = per_test / len(grid)
  correct = _correct_counts(scores, is_member, grid, mode)
  n = len(grid)
  grid_f = jnp.asarray(grid, dtype)
  # One bisection for the bounds (v = correct) and the ceilings (v = r) of every grid point.
  both = _epsilon_bisection_jit(
      *_as_float(m, jnp.concatenate([grid_f, grid_f]), jnp.concatenate([correct, grid_f]),
                 delta, per_test),
      length=m, with_delta=not _delta_is_zero(delta))
  grid_eps, grid_ceiling = both[:n], both[n:]
  best = jnp.argmax(grid_eps)
  return OneRunResult(epsilon=grid_eps[best], num_guesses=grid_f[best],
                      num_correct=correct[best], epsilon_ceiling=grid_ceiling[best],
                      per_test_significance=per_test, grid=grid_f, grid_correct=correct,
                      grid_epsilon=grid_eps, grid_epsilon_ceiling=grid_ceiling)
