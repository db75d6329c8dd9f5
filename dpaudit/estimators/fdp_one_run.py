r"""Auditing f-differential privacy in one run (Mahloujifar, Melis & Chaudhuri, ICML 2025).

The game is that of :mod:`dpaudit.estimators.one_run`, with a trade-off curve in place of
(epsilon, delta). Each of ``m`` canaries gets a secret drawn uniformly from ``k`` candidates
(``k = 2``: membership, each canary included with probability 1/2; ``k > 2``: reconstruction,
one of ``k`` candidates planted); after the single run the auditor guesses the secret of
``r <= m`` canaries (abstaining on the rest), and ``v`` guesses are right.

**The bound** (the paper's recursion for guessing with abstentions). Let the mechanism be f-DP
for a symmetric trade-off function f and write :math:`\bar f(x) = f(1 - x)` (the least
probability an event can have under one secret when it has probability x under another). If
the auditor has at least v right guesses with probability :math:`\gamma`, the sequences

.. math::
   a_v = \gamma \frac{v}{m}, \quad b_v = \gamma \frac{r - v}{m}, \qquad
   b_i = \max\big(b_{i+1},\ (k - 1)\, \bar f(a_{i+1})\big), \quad
   a_i = a_{i+1} + \frac{i}{r - i}\,(b_i - b_{i+1}) \qquad (i = v-1, \dots, 0)

satisfy :math:`a_0 + b_0 \le r/m`. Here :math:`a_i` and :math:`b_i` are the least possible
expected numbers of right and wrong guesses, divided by m, on the event of at least i right
guesses: at i = 0 they add up to r/m exactly. The step from i + 1 to i is f-DP for one
canary: under another of its secrets (k - 1 of them), the event "its guess is the true
secret and at least i others are right" becomes "its guess is wrong and at least i others are
right", whose probability is therefore at least :math:`\bar f` of the former's;
:math:`\bar f` is convex, so the average over the m canaries keeps the bound. The ratio
:math:`i/(r - i)` converts wrong guesses into right ones on the event of exactly i right
guesses. So :math:`\Pr[\ge v \text{ right}] \le
\sup\{\gamma : a_0 + b_0 \le r/m\}` (:func:`fdp_one_run_p_value`), and f is rejected at level
beta when :math:`a_0 + b_0 > r/m` at :math:`\gamma = \beta`.

**Gaussian DP.** For :math:`\mu`-GDP, :math:`f_\mu(x) = \Phi(\Phi^{-1}(1 - x) - \mu)` and
:math:`\bar f(x) = \Phi(\Phi^{-1}(x) - \mu)`. The empirical privacy is the strongest curve of
the family that the audit rejects, :math:`\mu_L = \sup\{\mu : a_0 + b_0 > r/m\}` at
:math:`\gamma = \beta` (:func:`fdp_one_run_mu`; a smaller :math:`\mu` makes :math:`\bar f`
larger and every :math:`b_i` larger, so the rejected set is an interval :math:`[0, \mu_L)`),
reported as epsilon at a given delta through the GDP conversion (:func:`gdp_epsilon`). For a
mechanism that is :math:`\mu`-GDP, :math:`\Pr[\mu_L > \mu] \le \beta` whenever the guesses
are a function of the run's output alone.

**Numerics.** The recursion is computed on its increments :math:`D_i = b_i - b_{i+1}`
(the total :math:`a_0 + b_0 - \gamma r/m` is the sum of :math:`\frac{r}{r - i} D_i`), with
:math:`D_{v-1} = (k-1)\bar f(a_v) - b_v` given in closed form. Once the max picks its second
argument it keeps it (:math:`\bar f` increases and the :math:`a_i` do not decrease), and the
recursion can stop early: when the increments have died out (by convexity each next one is
at most :math:`(k - 1)\bar f'(a)\, \frac{i}{r-i}` times the last, a factor that falls with i
while a stands still: the lane stops once it is below 1/2 and the increment below 1/20 of an
ulp of the total) or when the total has passed a cap above the threshold (the test rejects;
totals only grow). The search for :math:`\mu_L` is a safeguarded Newton iteration on
:math:`q(\mu) = (r/m - \gamma r/m) / (a_0 + b_0 - \gamma r/m)` (the threshold over the
total increment, 1 at the root), with its derivative carried through the recursion. Far from
the root (q > 50) it steps in :math:`\log D_{v-1}`, in which :math:`\log q` has slope close to
-1. Nearer, it works in :math:`p = 1/D_{v-1}`, in which q is close to linear while the
recursion's gain varies slowly: a Newton step, then a quadratic :math:`p(q)` through the last
two points (which also follows a fold, where the growth stops being bounded and q has a
square-root point). A step that leaves the bracket, or one longer than a quarter of the step
before the last (Numerical Recipes' rtsafe rule, stricter), gives way to bisection. Near a
fold the root can sit within 1e-9 of a cliff of q, and the search then bisects: about 7-15
evaluations are typical, up to about 40. Each problem of a batch runs its own iteration: every
few recursion steps, the problems whose evaluation has ended take their next point, so a batch
costs about as much as its slowest problem, not the sum over iterations of the slowest
evaluation (and large batches go by chunks of similar v, :func:`_mu_batched`). The bracket is
closed to 1e-9 relative (float64) and its lower end, an evaluated point that the test
rejected (or 0), is returned. The cost of one evaluation grows with v (up to v steps, each
with a normal quantile and CDF): in batches on one CPU core, a problem with v about 100 takes
about 40 us, v about 1000 about 0.3 ms, v in the thousands milliseconds.

All functions broadcast, compute in ``jnp.result_type(float)`` (float64 with
``jax_enable_x64``; float32 is not accurate enough for the recursion's sums beyond a few
digits) and are jit/vmap-able. Their compiled programs serve every input size of a
power-of-two bucket; a first call on a small input (few recursion steps, :data:`HOST_STEPS`)
is answered by the same recursion and search run on NumPy/scipy in float64 while its program
compiles in the background (:func:`dpaudit.estimators._compile.first_call`), and the
Gaussian-DP conversions run on NumPy/scipy for concrete inputs; the results come back in the
same dtype, within the searches' tolerance of the compiled programs'.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy import special as jsp
from scipy import optimize, special

from dpaudit import _validate
from dpaudit.accounting import dpsgd
from dpaudit.estimators import _compile, one_run

_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_FAR = 50.0
"""Above this q the search steps in log D_{v-1} (slope -1 of log q), aiming at q = _FAR. The
linear model leaves out the recursion's nonlinear gain: with v in the hundreds the step lands
at q between about 1.3 and 50; in long recursions it can overshoot into the rejected side,
which then bounds the bracket."""
_SMOOTH = 0.8
"""A rejected point with q above this is on the smooth branch near the root and feeds the
model; below it the recursion may have escaped (q sits on a plateau set by the cap)."""
_CAP = 4.0
"""An evaluation stops once the total increment passes _CAP times the threshold."""
_STEPS_PER_UPDATE = 16
"""Recursion steps between two updates of the search: the update costs a few steps, and a
problem whose evaluation ends waits at most this many steps for its next point (on 1e4
problems with v <= 100, 8 and 16 ran about as fast, 4 and 64 up to 1.6x slower)."""
_MAX_EVALUATIONS = 100
"""Per problem (a safety net: the search needs about 7 to 40)."""
_START = 1e-6
"""The first point after mu = 0 has D_{v-1} = _START times its value at mu = 0."""
_CHUNK = 1024
"""Problems searched together (:func:`_mu_batched`)."""


class _Ops(NamedTuple):
  """What the computations below run on: JAX inside the compiled programs (:data:`_JAX`), or
  NumPy/scipy on the host (:data:`_HOST`, the exact path of a first call on a small input,
  :func:`dpaudit.estimators._compile.first_call`). The same code runs on both."""
  xp: Any
  ndtri: Callable
  erfc: Callable
  log_ndtr: Callable
  while_loop: Callable
  fori_loop: Callable


def _host_while(cond, body, state):
  while cond(state):
    state = body(state)
  return state


def _host_fori(lower, upper, body, state):
  for i in range(lower, upper):
    state = body(i, state)
  return state


_JAX = _Ops(jnp, jsp.ndtri, jax.lax.erfc, jsp.log_ndtr, jax.lax.while_loop, jax.lax.fori_loop)
_HOST = _Ops(np, special.ndtri, special.erfc, special.log_ndtr, _host_while, _host_fori)


def _ndtr(x, ops=_JAX):
  """Standard normal CDF as one ``erfc`` (``jax.scipy.special.ndtr`` evaluates both ``erf`` and
  ``erfc``); relative error below 1e-13 down to x = -37."""
  return 0.5 * ops.erfc(-x * _SQRT_HALF)


def _pdf(x, ops=_JAX):
  return _INV_SQRT_2PI * ops.xp.exp(-0.5 * x * x)


def _tolerance(dtype) -> float:
  return 1e-9 if jnp.finfo(dtype).bits >= 64 else 1e-5


def _stop(dtype) -> float:
  return float(jnp.finfo(dtype).eps) / 20.0


# ------------------------------------------------------------------------------ recursion
def _fresh(shape_like, mu, e0, de0, start, ops=_JAX):
  """Recursion state for a new evaluation at ``mu`` with first increment ``e0``
  (``de0`` = its mu-derivative), in the lanes where ``start`` holds."""
  xp = ops.xp
  z = xp.zeros_like(shape_like)
  return dict(mu=mu, e0=xp.maximum(e0, 0.0), de0=xp.where(e0 > 0.0, de0, 0.0), t=z, a_inc=z,
              b_inc=z, da_inc=z, db_inc=z, live=start)


def _gaussian_curve(a, mu, ops=_JAX):
  r""":math:`\bar f(a) = \Phi(\Phi^{-1}(a) - \mu)` of :math:`\mu`-GDP, its slope in a
  (:math:`e^{\mu z - \mu^2/2}`; 0 once a reaches 1, where :math:`\bar f` is 1 and flat) and
  its derivative in mu."""
  xp = ops.xp
  z = ops.ndtri(xp.minimum(a, 1.0))
  w = z - mu
  slope = xp.where(a < 1.0, xp.exp(xp.minimum(mu * z - 0.5 * mu * mu, 700.0)), 0.0)
  return _ndtr(w, ops), slope, -_pdf(w, ops)


def _step(s, num_guesses, num_correct, k, alpha, eta, cap, stop, curve=None, ops=_JAX):
  """One step of the recursion (i = v - 1 - t) in every lane where ``s["live"]``: adds
  :math:`D_i` to ``b_inc`` and :math:`\\frac{i}{r-i}D_i` to ``a_inc`` (the increments
  of b and a), with their mu-derivatives, and ends the lane's evaluation at i = 0, when the
  increments have died out or when the total passes ``cap``. ``curve(a, mu)`` gives
  :math:`\bar f(a)`, its slope in a and its derivative in the family's parameter
  (None: :func:`_gaussian_curve`; :func:`_piecewise_linear_curve` for a fixed curve)."""
  xp = ops.xp
  r, v, mu, t, live = num_guesses, num_correct, s["mu"], s["t"], s["live"]
  i = v - 1.0 - t
  a = alpha + s["a_inc"]
  value, slope, d_value = (curve or functools.partial(_gaussian_curve, ops=ops))(a, mu)
  f_bar = (k - 1.0) * value
  d_f_bar = (k - 1.0) * (slope * s["da_inc"] + d_value)
  first = t == 0.0
  gap = f_bar - eta - s["b_inc"]
  d = xp.where(first, s["e0"], xp.maximum(gap, 0.0))
  dd = xp.where(first, s["de0"], xp.where(gap > 0.0, d_f_bar - s["db_inc"], 0.0))
  c = xp.maximum(i, 0.0) / (r - i)
  a_inc, b_inc = s["a_inc"] + c * d, s["b_inc"] + d
  da_inc, db_inc = s["da_inc"] + c * dd, s["db_inc"] + dd
  total = a_inc + b_inc
  gain = (k - 1.0) * slope * c
  faded = ((gain < 0.5) & (d * (1.0 + c) <= stop * total)
           & (xp.abs(dd) * (1.0 + c) <= stop * xp.abs(da_inc + db_inc)))
  go_on = (i >= 1.0) & ~faded & (total <= cap)
  keep = lambda new, old: xp.where(live, new, old)
  return dict(s, t=keep(t + 1.0, t), a_inc=keep(a_inc, s["a_inc"]), b_inc=keep(b_inc, s["b_inc"]),
              da_inc=keep(da_inc, s["da_inc"]), db_inc=keep(db_inc, s["db_inc"]), live=live & go_on)


_HOST_STEPS_PER_UPDATE = 32
"""Host steps between two updates of the search (:func:`_mu_search`; measured on the 30-point
grid of a 1e3-score audit, 32 steps with checks every 8 took 0.6-0.8x the time of 16 and 4)."""
_HOST_CHECK = 8
"""On the host, an evaluation's ends (:func:`_host_steps`) are checked every this many steps."""


def _host_steps(s, count, num_guesses, num_correct, k, alpha, eta, cap, stop):
  """Up to ``count`` steps of :func:`_step` (Gaussian curve) on the host, in about half the
  NumPy operations (a host step costs its number of operations, not its lanes). The same sums;
  the first step's increment computed by the general formula (the same numbers as
  ``e0``/``de0``); the ends (i = 0, faded increments, the cap) checked every
  :data:`_HOST_CHECK` steps and after the last, so that a lane may take up to
  ``_HOST_CHECK - 1`` more steps than the compiled recursion: past i = 0 they add nothing, past
  the others only more of the same sums (totals only grow)."""
  r, mu, live = num_guesses, s["mu"], s["live"]
  last = num_correct - 1.0
  k1 = k - 1.0
  half_k1, k1_density, half_mu = 0.5 * k1, k1 * _INV_SQRT_2PI, 0.5 * mu
  i, a_inc, b_inc = last - s["t"], s["a_inc"].copy(), s["b_inc"].copy()
  da_inc, db_inc = s["da_inc"].copy(), s["db_inc"].copy()
  for step in range(1, count + 1):
    a = alpha + a_inc
    z = special.ndtri(np.minimum(a, 1.0))
    w = z - mu
    slope = np.where(a < 1.0, np.exp(np.minimum(mu * (z - half_mu), 700.0)), 0.0)
    gap = half_k1 * special.erfc(w * -_SQRT_HALF) - eta - b_inc
    on = (gap > 0.0) & live
    d = gap * on
    dd = (k1 * slope * da_inc - k1_density * np.exp(-0.5 * w * w) - db_inc) * on
    c = np.maximum(i, 0.0) / (r - i)
    a_inc += c * d
    b_inc += d
    da_inc += c * dd
    db_inc += dd
    if step % _HOST_CHECK == 0 or step == count:
      total = a_inc + b_inc
      faded = ((k1 * slope * c < 0.5) & (d * (1.0 + c) <= stop * total)
               & (np.abs(dd) * (1.0 + c) <= stop * np.abs(da_inc + db_inc)))
      ended = live & ((i < 1.0) | faded | (total > cap))
      i = i - live
      live = live & ~ended
      if not live.any():
        break
    else:
      i = i - live
  return dict(s, t=last - i, a_inc=a_inc, b_inc=b_inc, da_inc=da_inc, db_inc=db_inc, live=live)


def _run(s, num_guesses, num_correct, k, alpha, eta, cap, stop, curve=None, ops=_JAX):
  """Steps until every lane's evaluation has ended."""
  if ops is _HOST and curve is None:
    step = lambda s: _host_steps(s, _STEPS_PER_UPDATE, num_guesses, num_correct, k, alpha, eta,
                                 cap, stop)
  else:
    step = lambda s: _step(s, num_guesses, num_correct, k, alpha, eta, cap, stop, curve, ops)
  return ops.while_loop(lambda s: ops.xp.any(s["live"]), step, s)


def _first_increment(k, alpha, eta, z_alpha, mu, ops=_JAX):
  r""":math:`D_{v-1} = (k-1)\bar f(a_v) - b_v` and its mu-derivative."""
  return ((k - 1.0) * _ndtr(z_alpha - mu, ops) - eta, -(k - 1.0) * _pdf(z_alpha - mu, ops))


# ------------------------------------------------------------------------------ p-value
def _p_value_rejects(m, r, v, k, mu, gamma, ops=_JAX):
  """Whether the test rejects at level ``gamma`` (all arguments of one shape)."""
  xp = ops.xp
  alpha, eta = gamma * v / m, gamma * (r - v) / m
  threshold = (1.0 - gamma) * r / m
  e0, _ = _first_increment(k, alpha, eta, ops.ndtri(alpha), mu, ops)
  s = _fresh(m, mu, e0, xp.zeros_like(m), v >= 1.0, ops)
  s = _run(s, r, v, k, alpha, eta, _CAP * threshold, _stop(m.dtype), ops=ops)
  return (s["a_inc"] + s["b_inc"]) > threshold


def _p_value_bits(dtype) -> int:
  """Bisection steps of the p-value's search: to below 2^-40 in log(gamma)."""
  return 40 + int(math.ceil(math.log2(-math.log(float(np.finfo(dtype).tiny)))))


def _p_value(m, r, v, k, mu, ops=_JAX):
  r""":math:`\sup\{\gamma : a_0 + b_0 \le r/m\}` by bisection on :math:`\log\gamma` (the
  larger end, where the test rejects, is returned: an upper bound on the probability)."""
  xp = ops.xp
  rejects = lambda gamma: _p_value_rejects(m, r, v, k, mu, gamma, ops)
  at_one = rejects(xp.ones_like(m))  # gamma = 1: threshold 0, rejects if any increment
  lo, hi = xp.full_like(m, math.log(float(np.finfo(m.dtype).tiny))), xp.zeros_like(m)

  def bisect(_, bracket):
    lo, hi = bracket
    mid = 0.5 * (lo + hi)
    rej = rejects(xp.exp(mid))
    return xp.where(rej, lo, mid), xp.where(rej, mid, hi)

  lo, hi = ops.fori_loop(0, _p_value_bits(m.dtype), bisect, (lo, hi))
  p = xp.exp(hi)
  return xp.where((v <= 0.0) | ~at_one, 1.0, p)


_HOST_P_VALUE_BITS = 5
"""The host's p-value search tests 2^5 - 1 points of the bracket at once (one recursion over
all of them), so its 50 bisection steps take 10 recursions."""


def _host_p_value_search(m, r, v, k, mu):
  """:func:`_p_value` on the host (float64 NumPy arrays of one shape), the bisection done
  :data:`_HOST_P_VALUE_BITS` steps at a time: each round evaluates the bracket's points at
  j / 2^bits of its width, j = 1, ..., 2^bits - 1 (the points the bisection steps may visit)
  and keeps the two neighbours around the first that rejects. The same bracket as the
  bisection's up to rounding."""
  bits = _HOST_P_VALUE_BITS
  at_one = _p_value_rejects(m, r, v, k, mu, np.ones_like(m), _HOST)
  lo, hi = np.full_like(m, math.log(float(np.finfo(m.dtype).tiny))), np.zeros_like(m)
  fractions = np.arange(1, 1 << bits) / (1 << bits)
  wide = [np.repeat(x[..., None], fractions.size, axis=-1) for x in (m, r, v, k, mu)]
  for _ in range(-(-_p_value_bits(m.dtype) // bits)):
    points = lo[..., None] + (hi - lo)[..., None] * fractions
    rejected = _p_value_rejects(*wide, np.exp(points), _HOST)
    first = np.argmax(rejected, axis=-1)[..., None]  # the first rejected point (or 0: none)
    some = rejected.any(axis=-1)
    below = np.take_along_axis(points, np.maximum(first - 1, 0), axis=-1)[..., 0]
    at = np.take_along_axis(points, first, axis=-1)[..., 0]
    lo, hi = (np.where(~some, points[..., -1], np.where(first[..., 0] > 0, below, lo)),
              np.where(some, at, hi))
  return np.where((v <= 0.0) | ~at_one, 1.0, np.exp(hi))


@_compile.jit(fusion_emitters=False)
def _p_value_jit(m, r, v, mu, k):
  m, r, v, mu, k = jnp.broadcast_arrays(m, r, v, mu, k)
  return _p_value(m, r, v, k, mu)


# ------------------------------------------------------------------------------ mu search
def _mu_search(m, r, v, k, beta, state: bool = False, ops=_JAX):
  """The largest mu that the test rejects (module docstring: Numerics); with ``state``, also
  the search's final state (evaluations ``n`` per problem, bracket ``lo``/``hi``)."""
  xp = ops.xp
  dtype = m.dtype
  tol, stop = _tolerance(dtype), _stop(dtype)
  alpha, eta = beta * v / m, beta * (r - v) / m
  z_alpha = ops.ndtri(alpha)
  threshold = (1.0 - beta) * r / m
  cap = _CAP * threshold
  excess_max = (k - 1.0) * alpha - eta  # D_{v-1} at mu = 0
  trivial = (v <= 0.0) | (excess_max <= 0.0)  # no increment even at mu = 0: nothing rejected
  log_excess_max = xp.log(xp.where(trivial, 1.0, excess_max))
  tiny_log = math.log(float(xp.finfo(dtype).tiny)) + 1.0
  zero, no = xp.zeros_like(m), xp.zeros(m.shape, bool)
  inf = xp.full_like(m, xp.inf)
  # Beyond mu_0, (k - 1) f_bar(a_v) <= b_v: no increments, the test accepts.
  mu_0 = xp.where(eta > 0.0, z_alpha - ops.ndtri(eta / (k - 1.0)), inf)

  def mu_at(log_excess):
    """The mu at which D_{v-1} = exp(log_excess) (decreasing in log_excess)."""
    u = xp.clip(log_excess, tiny_log, log_excess_max)
    return xp.maximum(z_alpha - ops.ndtri((xp.exp(u) + eta) / (k - 1.0)), 0.0)

  def begin(s, mu, start):
    e0, de0 = _first_increment(k, alpha, eta, z_alpha, mu, ops)
    fresh = _fresh(m, mu, e0, de0, start & (v >= 1.0), ops)
    return dict(s, **{key: xp.where(start, val, s[key]) for key, val in fresh.items()})

  def update(s):
    """Lanes whose evaluation has ended: record it, pick the next point or finish."""
    ended = ~s["live"] & ~s["done"]
    n, mu = s["n"], s["mu"]
    total = s["a_inc"] + s["b_inc"]
    q = threshold / total
    dq = -threshold * (s["da_inc"] + s["db_inc"]) / (total * total)
    rejected = total > threshold
    lo = xp.where(ended & rejected, mu, s["lo"])
    hi = xp.where(ended & ~rejected, mu, s["hi"])
    usable = ended & (n > 0) & (~rejected | (q > _SMOOTH)) & (dq > 0.0)
    take = lambda new, old: xp.where(usable, new, old)
    # Model points in p = 1 / D_{v-1}(mu), in which q is close to linear (q = 1 / total
    # increment, and the total is D_{v-1} times a gain that varies slowly until the recursion
    # nears its fold): the point's p, q and dp/dq.
    excess, d_excess = _first_increment(k, alpha, eta, z_alpha, mu, ops)
    p = 1.0 / excess
    dp = -d_excess / (excess * excess) / dq
    mu1, q1 = take(mu, s["mu1"]), take(q, s["q1"])
    p1, s1 = take(p, s["p1"]), take(dp, s["s1"])
    p2, q2 = take(s["p1"], s["p2"]), take(s["q1"], s["q2"])
    points = s["points"] + usable.astype(xp.int32)
    log_start = xp.where(ended & rejected & (points == 0) & (n > 0), s["log_start"] - 15.0,
                          s["log_start"])
    width = hi - lo
    done = s["done"] | (ended & ((width <= tol * lo + 1e-3 * tol) | (~rejected & (n == 0))
                                 | (n + 1 >= _MAX_EVALUATIONS)))
    # The next point, chosen as a value of log D_{v-1} and mapped to mu once: the start point
    # (no model point yet), a far step, or the model's root.
    # Newton in p from the newest point; with an older one, a quadratic p(q) through both
    # (value and slope at the newest), which also follows a fold (p - p_c ~ (q - q_c)^2).
    newton = p1 + (1.0 - q1) * s1
    gap = q2 - q1
    quadratic = newton + (p2 - p1 - s1 * gap) / (gap * gap) * (1.0 - q1) ** 2
    model = xp.where((points >= 2) & (q2 < 4.0 * _FAR), quadratic, newton)
    target = xp.where(q1 > _FAR, xp.log(q1 / _FAR) - xp.log(p1),
                       xp.where(model > 0.0, -xp.log(xp.maximum(model, 1e-300)), xp.nan))
    nxt = mu_at(xp.where(points >= 1, target, log_start))
    # Converged from one side: step tol/4 past the predicted root, to close the bracket.
    close = (points >= 1) & (xp.abs(nxt - mu1) < 0.25 * tol * mu1)
    nxt = xp.where(close, nxt + xp.where(q1 >= 1.0, -0.25, 0.25) * tol * mu1, nxt)
    # As in Numerical Recipes' rtsafe, a model step that is not converging fast enough (here:
    # longer than a quarter of the step before the last) gives way to bisection, and so does
    # one that leaves the bracket (far steps and the start are not held to the first rule).
    slow = (xp.abs(nxt - mu1) > 0.25 * s["step_before"]) & (q1 <= _FAR) & (points >= 1)
    inside = xp.isfinite(nxt) & (nxt > lo) & (nxt < hi) & (close | ~slow)
    bisection = xp.where(xp.isfinite(hi), 0.5 * (lo + hi), 2.0 * lo + 1.0)
    nxt = xp.where(inside, nxt, bisection)
    moved = xp.abs(nxt - mu)
    s = dict(s, lo=lo, hi=hi, mu1=mu1, q1=q1, p1=p1, s1=s1, p2=p2, q2=q2, points=points,
             log_start=log_start, done=done, step=xp.where(ended, moved, s["step"]),
             step_before=xp.where(ended, s["step"], s["step_before"]),
             n=n + ended.astype(xp.int32))
    return begin(s, nxt, ended & ~done)

  def block(s):
    if ops is _HOST:
      s = _host_steps(s, _HOST_STEPS_PER_UPDATE, r, v, k, alpha, eta, cap, stop)
      return update(s) if (~s["live"] & ~s["done"]).any() else s  # else update changes nothing
    step = lambda _, s: _step(s, r, v, k, alpha, eta, cap, stop, ops=ops)
    return update(ops.fori_loop(0, _STEPS_PER_UPDATE, step, s))

  s = dict(lo=zero, hi=mu_0, mu1=zero, q1=inf, p1=zero, s1=zero, p2=zero, q2=inf,
           points=xp.zeros(m.shape, xp.int32), log_start=log_excess_max + math.log(_START),
           done=trivial, step=inf, step_before=inf, n=xp.zeros(m.shape, xp.int32),
           **_fresh(m, zero, zero, zero, no, ops))
  s = begin(s, zero, ~trivial)  # first evaluation: mu = 0 (answer 0 unless it rejects)
  s = ops.while_loop(lambda s: ~xp.all(s["done"]), block, s)
  mu = xp.where(trivial, 0.0, s["lo"])
  return (mu, s) if state else mu


def _mu_batched(m, r, v, k, beta):
  """:func:`_mu_search` on the broadcast inputs, by chunks of problems of similar size.

  A batch runs until its slowest problem is done, and a problem's cost grows with its number
  of right guesses (the recursion's growth phase is most of its v steps). So the problems are
  sorted by v and searched in chunks of :data:`_CHUNK`, one after the other: a batch then costs
  about the sum of its problems' costs instead of its size times the largest."""
  m, r, v, k, beta = jnp.broadcast_arrays(m, r, v, k, beta)
  shape, size = m.shape, m.size
  if size <= _CHUNK:
    return _mu_search(m, r, v, k, beta)
  order = jnp.argsort(v.reshape(-1))
  chunks = -(-size // _CHUNK)
  pad = chunks * _CHUNK - size
  def prepare(x, fill):
    x = x.reshape(-1)[order]
    return jnp.concatenate([x, jnp.full((pad,), fill, x.dtype)]).reshape(chunks, _CHUNK)
  # Padding: problems with no right guess, done at once.
  args = [prepare(x, fill) for x, fill in ((m, 1.0), (r, 0.0), (v, 0.0), (k, 2.0), (beta, 0.5))]
  found = jax.lax.map(lambda a: _mu_search(*a), tuple(args)).reshape(-1)[:size]
  return jnp.zeros_like(found).at[order].set(found).reshape(shape)


@_compile.jit
def _mu_jit(m, r, v, beta, k):
  return _mu_batched(m, r, v, k, beta)


# ------------------------------------------------------------------------------ Gaussian DP
def _gdp_log_delta(mu, epsilon, ops=_JAX):
  r""":math:`\log\delta(\epsilon)` of :math:`\mu`-GDP and :math:`d\log\delta/d\epsilon`, with
  :math:`\delta = \Phi(-\epsilon/\mu + \mu/2) - e^\epsilon\Phi(-\epsilon/\mu - \mu/2)` written
  as :math:`\Phi(a)(1 - e^{\epsilon + \log\Phi(b) - \log\Phi(a)})` so that it keeps its
  relative accuracy in the tail, and :math:`d\delta/d\epsilon = -e^\epsilon\Phi(b)`."""
  xp = ops.xp
  safe_mu = xp.maximum(mu, 1e-300)
  a = -epsilon / safe_mu + 0.5 * mu
  b = a - mu
  log_pa, log_pb = ops.log_ndtr(a), ops.log_ndtr(b)
  x = xp.minimum(epsilon + log_pb - log_pa, 0.0)
  log_delta = log_pa + xp.log(-xp.expm1(x))
  return log_delta, -xp.exp(epsilon + log_pb - log_delta)


def _gdp_delta(mu, epsilon, ops=_JAX):
  xp = ops.xp
  log_delta, _ = _gdp_log_delta(mu, epsilon, ops)
  return xp.where(mu > 0.0, xp.exp(log_delta), 0.0)


@_compile.jit
def _gdp_delta_jit(mu, epsilon):
  mu, epsilon = jnp.broadcast_arrays(mu, epsilon)
  return _gdp_delta(mu, epsilon)


def _gdp_epsilon(mu, delta, ops=_JAX):
  """Newton's method on log delta(epsilon) (decreasing in epsilon) inside the bracket
  [0, mu^2/2 - mu Phi^{-1}(delta)] (there Phi(a) <= delta), bisection when a step leaves it."""
  xp = ops.xp
  tol = _tolerance(mu.dtype)
  safe_delta = xp.clip(delta, xp.finfo(mu.dtype).tiny, 1.0)
  log_target = xp.log(safe_delta)
  zero_eps = (mu <= 0.0) | (_gdp_delta(mu, xp.zeros_like(mu), ops) <= delta)
  infinite = (delta <= 0.0) & ~zero_eps
  lo = xp.zeros_like(mu)
  hi = xp.maximum(0.5 * mu * mu - mu * ops.ndtri(safe_delta), 0.0)
  done = zero_eps | infinite

  def body(s):
    lo, hi, x, done, n = s
    f, df = _gdp_log_delta(mu, x, ops)
    f = f - log_target
    lo = xp.where(f > 0.0, x, lo)   # delta(x) > target: the root is to the right
    hi = xp.where(f > 0.0, hi, x)
    nxt = x - f / df
    nxt = xp.where(xp.isfinite(nxt) & (nxt > lo) & (nxt < hi), nxt, 0.5 * (lo + hi))
    done = done | (hi - lo <= tol * hi) | (xp.abs(nxt - x) <= 0.1 * tol * x)
    return lo, hi, xp.where(done, x, nxt), done, n + 1

  start = 0.5 * (lo + hi)
  lo, hi, x, done, _ = ops.while_loop(lambda s: ~xp.all(s[3]) & (s[4] < 200), body,
                                          (lo, hi, start, done, 0))
  return xp.where(zero_eps, 0.0, xp.where(infinite, xp.inf, x))


@_compile.jit
def _gdp_epsilon_jit(mu, delta):
  mu, delta = jnp.broadcast_arrays(mu, delta)
  return _gdp_epsilon(mu, delta)


@_compile.jit
def _epsilon_jit(m, r, v, delta, beta, k):
  mu = _mu_batched(m, r, v, k, beta)
  mu, delta = jnp.broadcast_arrays(mu, delta)
  return _gdp_epsilon(mu, delta)


# ------------------------------------------------------------------------------ first calls
# The compiled programs serve every size of a power-of-two bucket
# (:func:`dpaudit.estimators._compile.elementwise`). A first call on a small input is answered on
# the host, by the same code run on NumPy/scipy (:data:`_HOST`), while its program compiles in
# the background (:func:`dpaudit.estimators._compile.first_call`); the paths agree to the
# search's tolerance (1e-9 relative in float64), not bit for bit.

HOST_STEPS = 1 << 17
"""Most recursion steps (problems times the largest number of right guesses) a first call may
take on the host; larger ones wait for the compiled program."""


def _host_floats(*xs) -> tuple[np.ndarray, ...]:
  """``xs`` broadcast, as writable float64 NumPy arrays."""
  return tuple(np.array(x) for x in np.broadcast_arrays(*(np.asarray(x, np.float64) for x in xs)))


def _host_mu(m, r, v, beta, k):
  m, r, v, beta, k = _host_floats(m, r, v, beta, k)
  with np.errstate(all="ignore"):
    return _mu_search(m, r, v, k, beta, ops=_HOST)


def _host_gdp_epsilon(mu, delta):
  mu, delta = _host_floats(mu, delta)
  with np.errstate(all="ignore"):
    return _gdp_epsilon(mu, delta, ops=_HOST)


def _host_epsilon(m, r, v, delta, beta, k):
  return _host_gdp_epsilon(_host_mu(m, r, v, beta, k), delta)


def _host_p_value(m, r, v, mu, k):
  m, r, v, mu, k = _host_floats(m, r, v, mu, k)
  with np.errstate(all="ignore"):
    return _host_p_value_search(m, r, v, k, mu)


def _bucketed(program: Callable, fills: tuple) -> Callable:
  """``program`` on its arguments broadcast and padded to their bucket
  (:func:`dpaudit.estimators._compile.elementwise`), the padding on the host being a problem
  that is done at once (``fills``: no right guess) rather than copies of the last problem, which
  would cost as much as it does (the searches run until their slowest problem is done)."""
  def call(*args):
    size = math.prod(np.broadcast_shapes(*(np.shape(a) for a in args)))

    def refilled(*flat):
      if all(isinstance(x, np.ndarray) for x in flat) and flat[0].shape[0] > size:
        flat = tuple(np.concatenate([x[:size], np.full(x.shape[0] - size, fill, x.dtype)])
                     for x, fill in zip(flat, fills))
      return program(*flat)
    return _compile.elementwise(refilled, *args)
  return call


_mu_program = _bucketed(lambda *args: _mu_threads(*args),  # defined below
                        (1.0, 0.0, 0.0, 0.5, 2.0))  # m, r, v, beta, k
_epsilon_program = _bucketed(_epsilon_jit, (1.0, 0.0, 0.0, 0.5, 0.5, 2.0))  # m, r, v, delta, ...
_p_value_program = _bucketed(_p_value_jit, (1.0, 0.0, 0.0, 0.0, 2.0))  # m, r, v, mu, k


def _first_call(program, host, args):
  """``program(*args)`` (bucketed), or ``host(*args)`` while it compiles
  (:func:`dpaudit.estimators._compile.first_call`) when the recursion's steps are few
  (:data:`HOST_STEPS`; ``args[2]`` holds the numbers of right guesses)."""
  size = math.prod(np.broadcast_shapes(*(np.shape(a) for a in args)))
  if (not _validate.is_concrete(args)
      or size * float(np.max(np.asarray(args[2]), initial=0.0)) > HOST_STEPS):
    host = None
  return _compile.first_call(program, host, args, size)


def _gdp_call(program, computation, args):
  """A Gaussian-DP conversion: on the host (NumPy/scipy, float64, returned in the default float
  dtype) when the arguments are concrete and on a CPU, else ``program`` (bucketed), which
  ``$DPAUDIT_FIRST_CALLS=compiled`` also forces."""
  if (_compile.first_calls_mode() == "compiled" or not _validate.is_concrete(args)
      or _compile.platform(args) != "cpu"):
    return _compile.elementwise(program, *args)
  with np.errstate(all="ignore"):
    out = computation(*_host_floats(*args), ops=_HOST)
  return _device_array(np.asarray(out, jnp.result_type(float)))


def _device_array(x) -> jax.Array:
  """A NumPy value as a JAX array of JAX's canonical dtype, by a transfer: ``jnp.asarray``
  of a NumPy array runs a conversion program, compiled once per shape (40-120 ms each in a
  fresh process, measured on 2 busy cores)."""
  return jax.device_put(np.asarray(x))


# ------------------------------------------------------------------------------ validation
def _check_game(num_examples, num_guesses, num_correct, num_candidates, **others) -> None:
  one_run._check_shapes(num_examples=num_examples, num_guesses=num_guesses, num_correct=num_correct,
                        num_candidates=num_candidates, **others)
  _validate.check_counts("num_examples", num_examples)
  _validate.check_counts("num_guesses", num_guesses, num_examples, "num_examples")
  _validate.check_counts("num_correct", num_correct, num_guesses, "num_guesses")
  _validate.check_not_boolean("num_candidates", num_candidates)
  _validate.check_integer_valued("num_candidates", num_candidates)
  _validate.check_range("num_candidates", num_candidates, 2.0, finite=True)


# ------------------------------------------------------------------------------ public API
def fdp_one_run_p_value(num_examples, num_guesses, num_correct, mu,
                        num_candidates=2) -> jax.Array:
  r"""Upper bound on the probability of at least ``num_correct`` right guesses under
  :math:`\mu`-GDP.

  Mahloujifar, Melis & Chaudhuri (ICML 2025), the recursion of the module docstring with
  :math:`\bar f(x) = \Phi(\Phi^{-1}(x) - \mu)`:
  :math:`\sup\{\gamma \in (0, 1] : a_0 + b_0 \le r/m\}`, by bisection on
  :math:`\log\gamma` to below :math:`2^{-40}`; the end returned is the one where the test
  rejects (a p-value that is never too small). 1 when no increment arises even at
  :math:`\gamma = 1`.

  >>> round(float(fdp_one_run_p_value(1000, 100, 95, 0.5)), 6)  # 95 of 100 right at mu = 0.5
  0.000505
  >>> float(fdp_one_run_p_value(1000, 100, 40, 0.5))  # fewer than half right: no evidence
  1.0

  Args:
    num_examples: number m of canaries; any shape broadcasting with the others.
    num_guesses: number r of guesses, 0 <= r <= m.
    num_correct: number v of right guesses, 0 <= v <= r.
    mu: the GDP parameter of the null hypothesis, >= 0.
    num_candidates: k >= 2 candidates per canary (2: membership; more: reconstruction).

  Returns:
    The bound, with the broadcast shape of the inputs.
  """
  _check_game(num_examples, num_guesses, num_correct, num_candidates, mu=mu)
  _validate.check_range("mu", mu, 0.0, finite=True)
  args = _compile.float_arguments(num_examples, num_guesses, num_correct, mu, num_candidates)
  return _first_call(_p_value_program, _host_p_value, args)


def fdp_one_run_mu(num_examples, num_guesses, num_correct, significance=0.05,
                   num_candidates=2) -> jax.Array:
  r"""Lower confidence bound on the Gaussian-DP parameter from one audited run.

  :math:`\mu_L = \sup\{\mu \ge 0 : a_0 + b_0 > r/m \text{ at } \gamma = \beta\}`, the strongest
  :math:`\mu`-GDP curve that the f-DP one-run audit of Mahloujifar, Melis & Chaudhuri (ICML
  2025) rejects at level ``significance`` (module docstring): for a :math:`\mu`-GDP mechanism
  :math:`\Pr[\mu_L > \mu] \le \beta`. Found to 1e-9 relative (float64) by the safeguarded
  Newton search of the module docstring; the value returned is 0 or a :math:`\mu` at which the
  test was evaluated and rejected.

  >>> round(float(fdp_one_run_mu(1000, 100, 95)), 6)  # m, r, v
  0.786812
  >>> float(fdp_one_run_mu(1000, 100, 50))  # half right: nothing rejected
  0.0

  Args:
    num_examples: number m of canaries; any shape broadcasting with the others.
    num_guesses: number r of guesses, 0 <= r <= m.
    num_correct: number v of right guesses, 0 <= v <= r.
    significance: beta in (0, 1) of the 1 - beta confidence level.
    num_candidates: k >= 2 candidates per canary (2: membership; more: reconstruction).

  Returns:
    The bound on mu, with the broadcast shape of the inputs.
  """
  _check_game(num_examples, num_guesses, num_correct, num_candidates, significance=significance)
  _validate.check_significance(significance)
  args = _compile.float_arguments(num_examples, num_guesses, num_correct, significance,
                                  num_candidates)
  return _first_call(_mu_program, _host_mu, args)


_THREADS = 2
"""Host threads that share a large batch on CPU (:func:`_mu_threads`)."""
_POOL: list = []


def _mu_threads(*args) -> jax.Array:
  """:func:`_mu_jit`; a large concrete batch on CPU is cut into :data:`_THREADS` parts of equal
  work (problems dealt in turn by number of right guesses) searched in as many host threads:
  XLA:CPU runs each chunk's loop on one core, and the call releases the GIL."""
  shape = np.broadcast_shapes(*(np.shape(a) for a in args))
  size = math.prod(shape)
  if (_THREADS < 2 or size < 2 * _CHUNK or not _validate.is_concrete(args)
      or _compile.platform(args) != "cpu"):
    return _mu_jit(*args)
  if not _POOL:
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415
    _POOL.append(ThreadPoolExecutor(_THREADS, thread_name_prefix="fdp_one_run"))
  flat = [np.broadcast_to(np.asarray(a), shape).reshape(-1) for a in args]
  order = np.argsort(flat[2], kind="stable")
  parts = [order[i::_THREADS] for i in range(_THREADS)]
  x64 = jnp.result_type(float) == jnp.float64  # the caller's, maybe a thread-local setting

  def search(part):
    with jax.enable_x64(x64):  # worker threads do not inherit a thread-local jax.enable_x64
      return np.asarray(_mu_jit(*(x[part] for x in flat)))

  futures = [_POOL[0].submit(search, p) for p in parts]
  out = np.empty(size, flat[0].dtype)
  for p, future in zip(parts, futures):
    out[p] = future.result()
  return _device_array(out.reshape(shape))


def fdp_one_run_epsilon(num_examples, num_guesses, num_correct, delta, significance=0.05,
                        num_candidates=2) -> jax.Array:
  r"""Lower confidence bound on epsilon at ``delta`` from the f-DP one-run audit.

  :func:`gdp_epsilon` of :func:`fdp_one_run_mu`: the epsilon at ``delta`` of the strongest
  rejected :math:`\mu`-GDP curve (Mahloujifar, Melis & Chaudhuri, ICML 2025), the number to
  set beside :func:`dpaudit.estimators.one_run_epsilon` (Steinke, Nasr & Jagielski). It is a
  valid bound for mechanisms whose trade-off curve is of the Gaussian family; for others it
  is the epsilon of the GDP curve that the data reject.

  >>> round(float(fdp_one_run_epsilon(1000, 100, 95, 1e-6)), 4)
  3.7272

  Args:
    num_examples: number m of canaries; any shape broadcasting with the others.
    num_guesses: number r of guesses, 0 <= r <= m.
    num_correct: number v of right guesses, 0 <= v <= r.
    delta: delta in [0, 1) at which epsilon is read (0 gives inf for any mu > 0).
    significance: beta in (0, 1).
    num_candidates: k >= 2 candidates per canary.

  Returns:
    The bound on epsilon, with the broadcast shape of the inputs.
  """
  _check_game(num_examples, num_guesses, num_correct, num_candidates, delta=delta,
              significance=significance)
  _validate.check_delta(delta)
  _validate.check_significance(significance)
  args = _compile.float_arguments(num_examples, num_guesses, num_correct, delta, significance,
                                  num_candidates)
  return _first_call(_epsilon_program, _host_epsilon, args)


def gdp_delta(mu, epsilon) -> jax.Array:
  r""":math:`\delta(\epsilon)` of :math:`\mu`-GDP (Dong, Roth & Su 2022, Cor. 2.13):
  :math:`\Phi(-\epsilon/\mu + \mu/2) - e^\epsilon\,\Phi(-\epsilon/\mu - \mu/2)`, computed on
  the log scale so that small deltas keep their relative accuracy.

  >>> round(float(gdp_delta(1.0, 1.0)), 6)
  0.126937

  Args:
    mu: mu >= 0; broadcasts with ``epsilon``.
    epsilon: epsilon >= 0.

  Returns:
    delta, with the broadcast shape.
  """
  one_run._check_shapes(mu=mu, epsilon=epsilon)
  _validate.check_range("mu", mu, 0.0, finite=True)
  _validate.check_range("epsilon", epsilon, 0.0)
  return _gdp_call(_gdp_delta_jit, _gdp_delta, _compile.float_arguments(mu, epsilon))


def gdp_epsilon(mu, delta) -> jax.Array:
  r""":math:`\epsilon(\delta)` of :math:`\mu`-GDP: the root of :func:`gdp_delta` in epsilon
  (decreasing), by Newton's method on :math:`\log\delta` with a bisection safeguard, to 1e-9
  relative or better (float64). 0 where :math:`\delta \ge 2\Phi(\mu/2) - 1`; inf at
  delta = 0 (mu > 0).

  >>> round(float(gdp_epsilon(1.0, 1e-5)), 4)
  4.3772

  Args:
    mu: mu >= 0; broadcasts with ``delta``.
    delta: delta in [0, 1).

  Returns:
    epsilon, with the broadcast shape.
  """
  one_run._check_shapes(mu=mu, delta=delta)
  _validate.check_range("mu", mu, 0.0, finite=True)
  _validate.check_delta(delta)
  return _gdp_call(_gdp_epsilon_jit, _gdp_epsilon, _compile.float_arguments(mu, delta))


def gdp_tradeoff_curve(mu, alphas) -> jax.Array:
  r"""The trade-off function of :math:`\mu`-GDP, :math:`f_\mu(\alpha) =
  \Phi(\Phi^{-1}(1-\alpha) - \mu)` (the least type-II error of a test with type-I error
  alpha), for plots beside an audit's empirical curve.

  >>> [round(float(b), 4) for b in gdp_tradeoff_curve(1.0, [0.0, 0.05, 0.5, 1.0])]
  [1.0, 0.7405, 0.1587, 0.0]

  Args:
    mu: mu >= 0; broadcasts with ``alphas``.
    alphas: type-I errors in [0, 1].

  Returns:
    The type-II errors, with the broadcast shape.
  """
  one_run._check_shapes(mu=mu, alphas=alphas)
  _validate.check_range("mu", mu, 0.0, finite=True)
  _validate.check_range("alphas", alphas, 0.0, 1.0)
  return _gdp_call(_tradeoff_jit, _tradeoff, _compile.float_arguments(mu, alphas))


def _tradeoff(mu, alphas, ops=_JAX):
  return _ndtr(-ops.ndtri(alphas) - mu, ops)


@_compile.jit
def _tradeoff_jit(mu, alphas):
  return _tradeoff(mu, alphas)


class FdpOneRunResult(NamedTuple):
  """Result of :func:`fdp_one_run_from_scores`.

  Attributes:
    mu: best lower bound on mu over the guess grid (valid at level ``significance`` only with
      ``correction="bonferroni"``).
    epsilon: :func:`gdp_epsilon` of ``mu`` at the call's delta.
    num_guesses: the number of guesses r at the best grid point (first maximiser).
    num_correct: right guesses at that r.
    per_test_significance: level each grid point was tested at.
    grid: the guess counts r that were swept (sorted, deduplicated).
    grid_correct: right guesses at each grid point.
    grid_mu: lower bound on mu at each grid point (at ``per_test_significance``).
    optimistic: True with ``correction="none"``: ``mu`` is then the best of several tests each
      at ``significance``, chosen after seeing the outcome, and is NOT a valid
      1 - significance lower bound.
  """
  mu: jax.Array
  epsilon: jax.Array
  num_guesses: jax.Array
  num_correct: jax.Array
  per_test_significance: jax.Array
  grid: jax.Array
  grid_correct: jax.Array
  grid_mu: jax.Array
  optimistic: bool = False


def fdp_one_run_from_scores(scores, is_member, delta, significance=0.05, *, num_guesses=None,
                            mode: str = "symmetric",
                            correction: str = "bonferroni") -> FdpOneRunResult:
  r"""f-DP one-run bound (Gaussian family) from membership scores, sweeping the number of
  guesses.

  The guesses are those of :func:`dpaudit.estimators.one_run_epsilon_from_scores` (canaries
  sorted by score, ties by index; ``mode="symmetric"``: "member" for the top
  :math:`\lceil r/2 \rceil` and "non-member" for the bottom :math:`\lfloor r/2 \rfloor`;
  ``mode="top"``: "member" for the top r), on the membership game (k = 2). For each r of the
  grid, :func:`fdp_one_run_mu` (Mahloujifar, Melis & Chaudhuri, ICML 2025) is computed and the
  best one is reported, with its epsilon at ``delta``.

  Selection honesty: with ``correction="bonferroni"`` (default) every grid point is tested at
  ``significance / len(grid)``, so by a union bound the maximum over the grid is a valid
  1 - significance lower confidence bound. With ``correction="none"`` every grid point is
  tested at ``significance``: the maximum over r is then optimistic (the best r is chosen after
  seeing the outcome), and ``optimistic`` is True.

  >>> import numpy as np
  >>> rng = np.random.default_rng(0)
  >>> member = rng.random(1000) < 0.5
  >>> result = fdp_one_run_from_scores(rng.normal(2.0 * member, 1.0), member, 1e-5)
  >>> int(result.num_guesses), round(float(result.mu), 4), round(float(result.epsilon), 4)
  (174, 1.0483, 4.6231)

  Args:
    scores: 1-D array of m membership scores (higher = more likely member), no NaN.
    is_member: 1-D boolean (or 0/1) array of the m true memberships.
    delta: delta in [0, 1) at which epsilon is read.
    significance: beta in (0, 1).
    num_guesses: 1-D grid of guess counts r in 0..m (static); default
      :func:`dpaudit.estimators.one_run.default_guess_grid`. Sorted and deduplicated.
    mode: "symmetric" or "top".
    correction: "bonferroni" or "none".

  Returns:
    :class:`FdpOneRunResult`.
  """
  grid, per_test = one_run._guess_grid_and_level(scores, is_member, delta, significance,
                                                 num_guesses, mode, correction)
  m = int(np.shape(scores)[0])
  size = _compile.bucket_size(m)
  args = (_compile.pad_edge(_compile.argument(scores), size),
          _compile.pad_edge(_compile.argument(is_member), size), np.int32(m),
          _compile.pad_edge(grid.astype(np.int32), one_run.grid_bucket(len(grid))),
          _compile.argument(delta, per_test.dtype), per_test, mode)
  host = _host_from_scores if len(grid) * float(np.max(grid)) <= HOST_STEPS else None
  out = _compile.first_call(_from_scores, host, args, size)
  n = len(grid)
  out = tuple(x if i < 5 else _device_array(np.asarray(x)[:n]) for i, x in enumerate(out))
  return FdpOneRunResult(*out, optimistic=correction == "none")


@_compile.jit(static_argnames="mode")
def _from_scores(scores, is_member, num_examples, grid, delta, per_test, mode: str):
  """The bound of :func:`fdp_one_run_from_scores` on scores padded to their bucket (the first
  ``num_examples`` are real) and a grid padded with its last point (whose bound repeats; the
  first maximiser is kept)."""
  dtype = per_test.dtype
  correct = one_run._correct_counts(scores, is_member, grid, mode, num_examples)
  grid_f = grid.astype(dtype)
  m = jnp.full(grid_f.shape, num_examples, dtype)
  grid_mu = _mu_batched(m, grid_f, correct, jnp.full_like(m, 2.0), per_test)
  best = jnp.argmax(grid_mu)
  epsilon = _gdp_epsilon(grid_mu[best], delta)
  return (grid_mu[best], epsilon, grid_f[best], correct[best], per_test, grid_f, correct,
          grid_mu)


def _host_correct_counts(scores, is_member, grid: np.ndarray, mode: str) -> np.ndarray:
  """:func:`dpaudit.estimators.one_run._correct_counts` on the host (unpadded inputs)."""
  m = len(scores)
  order = np.argsort(-np.asarray(scores, np.float64), kind="stable")  # ties: lower index first
  top = np.concatenate([[0], np.cumsum(np.asarray(is_member)[order] != 0)])
  if mode == "top":
    return top[grid]
  n_bottom = grid // 2
  return top[(grid + 1) // 2] + n_bottom - (top[m] - top[m - n_bottom])


def _host_from_scores(scores, is_member, num_examples, grid, delta, per_test, mode: str):
  """:func:`_from_scores` on the host (its padded arguments; the grid's padding is dropped)."""
  m = int(num_examples)
  grid = np.asarray(grid, np.int64)
  grid = grid[:int(np.searchsorted(grid, grid[-1])) + 1]
  correct = _host_correct_counts(np.asarray(scores)[:m], np.asarray(is_member)[:m], grid, mode)
  grid_f, correct = grid.astype(np.float64), correct.astype(np.float64)
  grid_mu = _host_mu(float(m), grid_f, correct, float(per_test), 2.0)
  best = int(np.argmax(grid_mu))
  epsilon = _host_gdp_epsilon(grid_mu[best], delta)
  return (grid_mu[best], epsilon, grid_f[best], correct[best], np.asarray(per_test, np.float64),
          grid_f, correct, grid_mu)


# ------------------------------------------------------------------------------ DP-SGD curves
_NOISE_RANGE = (1e-2, 1e3)
"""Noise multipliers searched by :func:`fdp_one_run_dpsgd`."""
_NOISE_TOLERANCE = 1e-4
"""Relative width of the final bracket on the noise multiplier."""
_PROFILE_POINTS = 2048
"""At most this many (epsilon, delta) pairs of the privacy profile make the curve."""
_VERTICES = 2 * _PROFILE_POINTS + 2
"""Vertex arrays are padded to this length (the most a curve has): one compiled program for
every noise multiplier."""


def _profile_vertices(epsilons: np.ndarray, deltas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  r"""Vertices on [0, 1] of :math:`\bar f(x) = f(1 - x)` for the curve
  :math:`f(x) = \max_j \max(0, 1 - \delta_j - e^{\epsilon_j}x, e^{-\epsilon_j}(1 - \delta_j - x))`
  (at most :data:`_PROFILE_POINTS` pairs, evenly spaced in the profile's grid): the upper
  envelope of the lines :math:`e^{-\epsilon_j}(x - \delta_j)`,
  :math:`e^{\epsilon_j}x - (e^{\epsilon_j} - 1 + \delta_j)` and 0, in slope order."""
  if len(epsilons) > _PROFILE_POINTS:
    pick = np.unique(np.linspace(0, len(epsilons) - 1, _PROFILE_POINTS).round().astype(np.int64))
    epsilons, deltas = epsilons[pick], deltas[pick]
  small = epsilons <= 700.0  # e^{-eps} underflows beyond: those lines are 0 on [0, 1]
  steep = epsilons <= 30.0  # lines of slope e^eps > e^30 are positive only within e^-30 of 1
  slopes = np.concatenate([[0.0], np.exp(-epsilons[small]), np.exp(epsilons[steep])])
  heights = np.concatenate([[0.0], -np.exp(-epsilons[small]) * deltas[small],
                            -(np.expm1(epsilons[steep]) + deltas[steep])])
  order = np.lexsort((heights, slopes))
  slopes, heights = slopes[order], heights[order]
  last = np.append(slopes[1:] != slopes[:-1], True)  # of equal slopes, the highest line
  hull_a: list[float] = []
  hull_b: list[float] = []
  for a, b in zip(slopes[last].tolist(), heights[last].tolist()):
    while len(hull_a) >= 2:
      a1, b1, a2, b2 = hull_a[-2], hull_b[-2], hull_a[-1], hull_b[-1]
      if (b1 - b) * (a2 - a1) <= (b1 - b2) * (a - a1):  # the new line meets the first no later
        hull_a.pop()
        hull_b.pop()
      else:
        break
    hull_a.append(a)
    hull_b.append(b)
  a, b = np.array(hull_a), np.array(hull_b)
  breaks = (b[:-1] - b[1:]) / (a[1:] - a[:-1])
  inner = (breaks > 0.0) & (breaks < 1.0)
  xs = np.concatenate([[0.0], breaks[inner], [1.0]])
  line = np.searchsorted(breaks, xs, side="left")  # the line in force left of each vertex
  ys = np.maximum(a[line] * xs + b[line], 0.0)
  return xs, ys


def _piecewise_linear_curve(xs, ys):
  """A :func:`_step` curve for the fixed convex :math:`\\bar f` through the vertices
  ``(xs, ys)`` (no parameter: slope and derivative 0, so the early stop waits for an increment
  of exactly 0, after which all are 0)."""
  def curve(a, _):
    zero = jnp.zeros_like(a)
    return jnp.interp(jnp.minimum(a, 1.0), xs, ys), zero, zero
  return curve


@_compile.jit(fusion_emitters=False)
def _curve_ratio_jit(m, r, v, k, beta, xs, ys):
  """(a_0 + b_0 - beta r/m) / ((1 - beta) r/m) of the recursion with the curve through
  ``(xs, ys)`` at gamma = beta, per problem: above 1 where the test rejects."""
  alpha, eta = beta * v / m, beta * (r - v) / m
  threshold = (1.0 - beta) * r / m
  curve = _piecewise_linear_curve(xs, ys)
  zero = jnp.zeros_like(m)
  e0 = (k - 1.0) * curve(alpha, zero)[0] - eta
  s = _fresh(m, zero, e0, zero, (v >= 1.0) & (threshold > 0.0))
  s = _run(s, r, v, k, alpha, eta, _CAP * threshold, 0.0, _piecewise_linear_curve(xs, ys))
  total = s["a_inc"] + s["b_inc"]
  return jnp.where(threshold > 0.0, total / jnp.where(threshold > 0.0, threshold, 1.0), 0.0)


@functools.lru_cache(maxsize=256)
def _run_curve(noise_multiplier: float, sampling_rate: float, num_steps: int, adjacency: str,
               pld_discretization: float) -> tuple[np.ndarray, np.ndarray]:
  """Padded vertices of the DP-SGD run's :math:`\\bar f` (cached per noise multiplier)."""
  epsilons, deltas = dpsgd.dpsgd_privacy_profile(
      noise_multiplier, sampling_rate, num_steps, adjacency=adjacency,
      pld_discretization=pld_discretization)
  xs, ys = _profile_vertices(epsilons, deltas)
  pad = _VERTICES - len(xs)
  return (np.concatenate([xs, 2.0 + np.arange(pad)]), np.concatenate([ys, np.full(pad, ys[-1])]))


def _dpsgd_epsilon(noise_multiplier, sampling_rate, num_steps, delta, adjacency,
                   pld_discretization) -> float:
  if adjacency == "replace_one":
    return dpsgd.dpsgd_epsilon_replace_one(noise_multiplier, sampling_rate, num_steps, delta,
                                           pld_discretization=pld_discretization)
  return dpsgd.dpsgd_epsilon(noise_multiplier, sampling_rate, num_steps, delta, accountant="pld",
                             pld_discretization=pld_discretization)


class FdpDpsgdBound(NamedTuple):
  """Result of :func:`fdp_one_run_dpsgd`.

  Attributes:
    noise_multiplier_upper_bound: the least noise multiplier found rejected (every larger one
      is rejected too); inf when none in [1e-2, 1e3] is.
    epsilon: the PLD epsilon at delta of the run with that noise multiplier (0.0 when none is
      rejected).
    ratio: the recursion's statistic at that noise multiplier for each (r, v) (above 1:
      rejected).
    at_search_limit: True when even the least private noise multiplier searched (1e-2) is
      rejected: the bound is then the search's limit, not the data's.
  """
  noise_multiplier_upper_bound: float
  epsilon: float
  ratio: np.ndarray
  at_search_limit: bool


def _dpsgd_search(m, r, v, k, beta, sampling_rate, num_steps, delta, adjacency,
                  pld_discretization) -> FdpDpsgdBound:
  """Bracket then Brent's method on log sigma (module docstring of
  :func:`fdp_one_run_dpsgd`); returns the least rejected sigma evaluated."""
  m, r, v, k, beta = (np.asarray(x, np.float64).reshape(-1) for x in
                      np.broadcast_arrays(m, r, v, k, beta))
  dtype = jnp.result_type(float)
  args = tuple(np.asarray(x, dtype) for x in (m, r, v, k, beta))
  padded = tuple(_compile.pad_edge(x, _compile.bucket_size(x.size)) for x in args)
  seen: dict[float, np.ndarray] = {}

  def ratio(sigma: float) -> np.ndarray:
    if sigma not in seen:
      xs, ys = _run_curve(sigma, sampling_rate, num_steps, adjacency, pld_discretization)
      seen[sigma] = np.asarray(_curve_ratio_jit(*padded, np.asarray(xs, dtype),
                                                np.asarray(ys, dtype)))[:m.size]
    return seen[sigma]

  g = lambda log_sigma: float(np.max(ratio(math.exp(log_sigma)))) - 1.0
  low, high = (math.log(x) for x in _NOISE_RANGE)
  nothing = FdpDpsgdBound(math.inf, 0.0, np.zeros_like(m), False)
  # No GDP curve rejected, not even mu = 0 (the identity, above every curve): nothing is.
  mu = float(np.max(np.asarray(_first_call(_mu_program, _host_mu,
                                            (args[0], args[1], args[2], args[4], args[3])))))
  if mu <= 0.0:
    return nothing
  # Start: the noise whose CLT limit is mu-GDP (Dong, Roth & Su 2022, Thm. 3.18),
  # mu = q sqrt(T (e^{1/sigma^2} - 1)).
  x = math.log(1.0 / math.sqrt(max(math.log1p((mu / sampling_rate) ** 2 / num_steps), 1e-300)))
  x = min(max(x, low), high)
  step = math.log(1.5)
  if g(x) > 0.0:  # rejected: walk down to an accepted point
    hi = x
    while g(x) > 0.0 and x > low:
      hi, x = x, max(x - step, low)
      step *= 2.0
    lo = x
    if g(lo) > 0.0:
      sigma = _NOISE_RANGE[0]
      return FdpDpsgdBound(sigma, _dpsgd_epsilon(sigma, sampling_rate, num_steps, delta,
                                                 adjacency, pld_discretization),
                           ratio(sigma), True)
  else:
    lo = x
    while g(x) <= 0.0 and x < high:
      lo, x = x, min(x + step, high)
      step *= 2.0
    hi = x
    if g(hi) <= 0.0:
      return nothing
  optimize.brentq(g, lo, hi, xtol=0.25 * _NOISE_TOLERANCE, rtol=4.0 * np.finfo(float).eps)
  rejected = [s for s in seen if np.max(seen[s]) > 1.0]
  accepted = [s for s in seen if np.max(seen[s]) <= 1.0]
  sigma_hi, sigma_lo = min(rejected), max(accepted)
  while sigma_hi > sigma_lo * (1.0 + _NOISE_TOLERANCE):  # Brent ended on the accepted side
    mid = math.sqrt(sigma_hi * sigma_lo)
    if np.max(ratio(mid)) > 1.0:
      sigma_hi = mid
    else:
      sigma_lo = mid
  return FdpDpsgdBound(sigma_hi, _dpsgd_epsilon(sigma_hi, sampling_rate, num_steps, delta,
                                                adjacency, pld_discretization),
                       ratio(sigma_hi), False)


def _check_dpsgd_run(sampling_rate, num_steps, adjacency, pld_discretization) -> None:
  for name, value in (("sampling_rate", sampling_rate), ("num_steps", num_steps),
                      ("pld_discretization", pld_discretization)):
    if np.ndim(value) != 0:
      raise ValueError(f"{name} must be a scalar, got shape {np.shape(value)}")
    _validate.check_not_boolean(name, value)
  _validate.check_range("sampling_rate", sampling_rate, 0.0, 1.0, low_open=True)
  _validate.check_integer_valued("num_steps", num_steps)
  _validate.check_range("num_steps", num_steps, 1.0, finite=True)
  _validate.check_choice("adjacency", adjacency, dpsgd.ADJACENCIES)
  _validate.check_range("pld_discretization", pld_discretization, 0.0, 1.0, low_open=True)


def fdp_one_run_dpsgd(num_examples, num_guesses, num_correct, *, sampling_rate, num_steps, delta,
                      significance=0.05, num_candidates=2, adjacency: str = "add_or_remove_one",
                      pld_discretization: float = 1e-3) -> FdpDpsgdBound:
  r"""Upper confidence bound on the noise multiplier of a DP-SGD run from one audited run.

  The f-DP one-run test of Mahloujifar, Melis & Chaudhuri (ICML 2025; the recursion of the
  module docstring) applied to the audited run's own family of trade-off curves: DP-SGD
  (Abadi et al. 2016) with this ``sampling_rate`` q and ``num_steps`` T and a noise multiplier
  :math:`\sigma`. Each (r, v) pair of the inputs is one test at level ``significance`` (pass
  ``significance / len(grid)`` for a Bonferroni-corrected sweep); :math:`\sigma` is rejected
  when any of them rejects.

  **The curve.** For a candidate :math:`\sigma`, dp_accounting's PLD accountant gives the
  run's pessimistic privacy profile :math:`\delta(\epsilon_j)` on its loss grid
  (:func:`dpaudit.accounting.dpsgd.dpsgd_privacy_profile`; at most 2048 of its points, evenly
  spaced), and the test uses
  :math:`f(x) = \max_j \max(0, 1 - \delta_j - e^{\epsilon_j}x, e^{-\epsilon_j}(1 - \delta_j -
  x))` through :math:`\bar f(x) = f(1 - x)` (piecewise linear, the upper envelope of these
  lines). Why a rejection is valid for the true curve :math:`f^*` of the run: the mechanism is
  :math:`(\epsilon, \delta^*(\epsilon))`-DP for every epsilon with :math:`\delta^*` its exact
  profile, so :math:`f^* \ge \sup_\epsilon f_{\epsilon, \delta^*(\epsilon)}` (Dong, Roth & Su
  2022, Prop. 2.12); the PLD's :math:`\delta_j \ge \delta^*(\epsilon_j)` (pessimistic
  discretisation and tail truncation, the larger of both directions) and a finite subset of
  the epsilons only lower each term and drop terms. So :math:`f \le f^*` pointwise; f is a
  symmetric, convex trade-off function (a maximum of such), the recursion's bound on
  :math:`\Pr[\ge v \text{ right}]` holds for any mechanism that is f-DP, and every mechanism
  that is :math:`f^*`-DP is f-DP. Rejecting f at level beta therefore rejects the run with
  noise :math:`\sigma`.

  **The search.** A larger :math:`\sigma` makes the run more private, every
  :math:`\delta_j` smaller and f larger, so the rejected set is an interval
  :math:`[\sigma_U, \infty)`. It starts at the noise whose CLT limit (Dong, Roth & Su 2022,
  Thm. 3.18: :math:`\mu = q\sqrt{T(e^{1/\sigma^2} - 1)}`) is the strongest rejected
  :math:`\mu`-GDP curve (:func:`fdp_one_run_mu`), brackets by steps in
  :math:`\log\sigma`, then runs Brent's method on the largest statistic
  :math:`\max (a_0 + b_0 - \beta r/m) / ((1 - \beta) r/m)` minus 1, in :math:`\log\sigma`, until
  the bracket is 1e-4 relative; the least rejected :math:`\sigma` evaluated is returned, with
  the PLD epsilon at ``delta`` of that run (the accountant of
  :func:`dpaudit.accounting.dpsgd_epsilon`, same discretisation): every run of this q and T
  with at least that much noise is rejected at level beta. The PLD's discretisation sets the
  real accuracy: with the default ``pld_discretization`` 1e-3, the bound moved by about 1e-4
  relative against 1e-4 (which costs 5-10x more per evaluation). The search covers
  :math:`\sigma \in [10^{-2}, 10^3]`: when even :math:`10^3` is not rejected (or no GDP curve
  is), the bound is inf and epsilon 0.0; when :math:`10^{-2}` is, it is returned with
  ``at_search_limit`` True. Each evaluation builds one PLD (cached per :math:`\sigma`):
  about 10 evaluations, 1-2 s for q = 0.1 and T = 1000 after the first call's compilation.

  >>> bound = fdp_one_run_dpsgd(1000, 100, 95, sampling_rate=1.0, num_steps=1, delta=1e-6)
  >>> round(bound.noise_multiplier_upper_bound, 3), round(bound.epsilon, 3)  # one Gaussian step
  (1.271, 3.727)

  Args:
    num_examples: number m of canaries; scalar or 1-D, broadcasting with the others.
    num_guesses: numbers r of guesses, 0 <= r <= m (one test per entry).
    num_correct: numbers v of right guesses, 0 <= v <= r.
    sampling_rate: the run's Poisson sampling rate q in (0, 1].
    num_steps: the run's number of steps T >= 1.
    delta: delta in [0, 1) at which epsilon is read.
    significance: beta in (0, 1), the level of each test.
    num_candidates: k >= 2 candidates per canary (2: membership; more: reconstruction).
    adjacency: ``"add_or_remove_one"`` or ``"replace_one"``, the neighbouring relation of the
      accountant (the game's: membership is add-or-remove).
    pld_discretization: the PLD accountant's value discretisation interval, in (0, 1].

  Returns:
    :class:`FdpDpsgdBound`.
  """
  _check_game(num_examples, num_guesses, num_correct, num_candidates)
  if len(np.broadcast_shapes(*(np.shape(x) for x in (num_examples, num_guesses, num_correct,
                                                      num_candidates)))) > 1:
    raise ValueError("num_examples, num_guesses, num_correct and num_candidates must broadcast "
                     "to at most one dimension")
  for name, value in (("delta", delta), ("significance", significance)):
    if np.ndim(value) != 0:
      raise ValueError(f"{name} must be a scalar, got shape {np.shape(value)}")
  _validate.check_delta(delta)
  _validate.check_significance(significance)
  _check_dpsgd_run(sampling_rate, num_steps, adjacency, pld_discretization)
  return _dpsgd_search(num_examples, num_guesses, num_correct, num_candidates, significance,
                       float(sampling_rate), int(num_steps), float(delta), adjacency,
                       float(pld_discretization))


class FdpDpsgdResult(NamedTuple):
  """Result of :func:`fdp_one_run_dpsgd_from_scores`.

  Attributes:
    noise_multiplier_upper_bound: every DP-SGD run of this sampling rate and step count with a
      larger noise multiplier is rejected (valid at level ``significance`` only with
      ``correction="bonferroni"``); inf when none is.
    epsilon: the PLD epsilon at the call's delta of the run with that noise multiplier
      (``epsilon_fdp_run``; 0.0 when nothing is rejected).
    num_guesses: the grid point whose test rejects most strongly at that noise multiplier.
    num_correct: right guesses at that r.
    per_test_significance: level each grid point was tested at.
    grid: the guess counts r that were swept (sorted, deduplicated).
    grid_correct: right guesses at each grid point.
    optimistic: True with ``correction="none"`` (the bound is then not a valid 1 - significance
      bound).
    at_search_limit: True when the least private noise multiplier searched (1e-2) is rejected.
  """
  noise_multiplier_upper_bound: float
  epsilon: float
  num_guesses: jax.Array
  num_correct: jax.Array
  per_test_significance: jax.Array
  grid: jax.Array
  grid_correct: jax.Array
  optimistic: bool = False
  at_search_limit: bool = False


@_compile.jit(static_argnames="mode", fusion_emitters=False)
def _counts_jit(scores, is_member, num_examples, grid, mode: str):
  """Right guesses at each point of the grid, on scores padded to their bucket (the first
  ``num_examples`` are real) and a padded grid."""
  return one_run._correct_counts(scores, is_member, grid, mode, num_examples)


def fdp_one_run_dpsgd_from_scores(scores, is_member, delta, significance=0.05, *, sampling_rate,
                                  num_steps, num_guesses=None, mode: str = "symmetric",
                                  correction: str = "bonferroni",
                                  adjacency: str = "add_or_remove_one",
                                  pld_discretization: float = 1e-3) -> FdpDpsgdResult:
  r"""f-DP one-run bound within the audited DP-SGD run's own curve family, from membership
  scores.

  The guesses, grid and per-test level of :func:`fdp_one_run_from_scores` (and of
  :func:`dpaudit.estimators.one_run_epsilon_from_scores`); the whole grid is tested at once by
  :func:`fdp_one_run_dpsgd` (Mahloujifar, Melis & Chaudhuri, ICML 2025, with the run's
  PLD-derived curve): a noise multiplier is rejected when any grid point rejects it at
  ``significance / len(grid)`` (``correction="bonferroni"``, a union bound: valid at level
  ``significance``) or at ``significance`` (``correction="none"``: optimistic, flagged). The
  result's epsilon is ``epsilon_fdp_run``: valid if the trade-off curve is this DP-SGD run's
  with some noise multiplier.

  >>> import numpy as np
  >>> rng = np.random.default_rng(0)
  >>> member = rng.random(1000) < 0.5
  >>> result = fdp_one_run_dpsgd_from_scores(rng.normal(2.0 * member, 1.0), member, 1e-5,
  ...                                        sampling_rate=1.0, num_steps=1, num_guesses=[174])
  >>> round(result.noise_multiplier_upper_bound, 3), round(result.epsilon, 3)  # one Gaussian step
  (0.679, 6.894)

  Args:
    scores: 1-D array of m membership scores (higher = more likely member), no NaN.
    is_member: 1-D boolean (or 0/1) array of the m true memberships.
    delta: delta in [0, 1) at which epsilon is read.
    significance: beta in (0, 1).
    sampling_rate: the run's Poisson sampling rate q in (0, 1].
    num_steps: the run's number of steps T >= 1.
    num_guesses: 1-D grid of guess counts (static); default
      :func:`dpaudit.estimators.one_run.default_guess_grid`.
    mode: "symmetric" or "top".
    correction: "bonferroni" or "none".
    adjacency: ``"add_or_remove_one"`` or ``"replace_one"``.
    pld_discretization: the PLD accountant's value discretisation interval, in (0, 1].

  Returns:
    :class:`FdpDpsgdResult`.
  """
  grid, per_test = one_run._guess_grid_and_level(scores, is_member, delta, significance,
                                                 num_guesses, mode, correction)
  if np.ndim(delta) != 0:
    raise ValueError(f"delta must be a scalar, got shape {np.shape(delta)}")
  _check_dpsgd_run(sampling_rate, num_steps, adjacency, pld_discretization)
  m = int(np.shape(scores)[0])
  size = _compile.bucket_size(m)
  correct = _counts_jit(_compile.pad_edge(_compile.argument(scores), size),
                        _compile.pad_edge(_compile.argument(is_member), size), np.int32(m),
                        _compile.pad_edge(grid.astype(np.int32), one_run.grid_bucket(len(grid))),
                        mode=mode)
  correct = np.asarray(correct)[:len(grid)]  # cut on the host: no slicing program per size
  grid_f = np.asarray(grid, per_test.dtype)
  bound = _dpsgd_search(m, np.asarray(grid, np.float64), np.asarray(correct, np.float64), 2.0,
                        float(per_test), float(sampling_rate), int(num_steps), float(delta),
                        adjacency, float(pld_discretization))
  best = int(np.argmax(bound.ratio))
  return FdpDpsgdResult(bound.noise_multiplier_upper_bound, bound.epsilon,
                        _device_array(grid_f[best]), _device_array(correct[best]), per_test,
                        _device_array(grid_f), _device_array(correct), correction == "none",
                        bound.at_search_limit)
