r"""The worst-case neighbouring histograms of the Gaussian noisy argmax, found by search.

Chadha et al., "Auditing Private Prediction" (Sec. 4.2), compute the exact Renyi divergence
(their Eq. 4) between the noisy-argmax output laws on two given neighbouring histograms, and
note that its supremum over *all* neighbouring histograms "appears computationally
intractable"; the data-independent GNMax bound :math:`\alpha/\sigma^2` (Papernot et al. 2018,
Prop. 8) is what accounting uses instead. This module searches that supremum for given
``k`` (teachers, i.e. votes), ``C`` (classes) and :math:`\sigma`:

.. math::
   \varepsilon^*(\alpha) = \max_{H,\ i \ne j}
     D_\alpha\big(M(H) \,\|\, M(H - e_i + e_j)\big),\qquad
   H \in \mathbb{Z}_{\ge 0}^C,\ \textstyle\sum_c H_c = k,\ H_i \ge 1,

the neighbour relation of PATE, CaPC and PromptPATE (one teacher changes its vote). Every
value it reports is the exact divergence (quadrature to ~1e-14) of an explicit pair of
histograms, so it is a valid *lower* bound on :math:`\varepsilon^*(\alpha)`, which lies in
``[found, alpha / sigma^2]``.

The search uses two symmetries: the output law is equivariant under permuting classes, so the
moved vote can go from class 0 to class 1 (the reverse direction is the pair
``(H', H' - e_1 + e_0)``, the same form after swapping the two labels), and classes
``2..C-1`` are interchangeable, so a histogram is kept with them sorted. It then

1. evaluates exhaustively the two-level family: :math:`H_0 = a \ge 1`, :math:`H_1 = b`, and the
   other :math:`k - a - b` votes spread as evenly as possible over classes ``2..C-1``
   (:math:`O(k^2)` pairs; every pair when ``C = 2``);
2. runs, per order, a best-improvement local search from that family's best histogram and from
   ``num_random_starts`` uniform random histograms, whose moves shift ``s`` votes
   (``s`` = 1, 2, 4, ...) from any class to any other, until no move improves or ``max_steps``.

In every setting we tried (C up to 10, k up to 250, sigma from 0.5 to 40, orders 1.5 to 64) the
local search found nothing above the two-level family's best by more than 1e-14 relative:
the evidence is that the supremum lies in that family, but no proof is known.

For two classes the output is Bernoulli with :math:`\Pr[0] = \Phi((H_0 - H_1)/(\sigma\sqrt2))`;
as :math:`\sigma` grows the worst pair's divergence tends to :math:`(2/\pi)\,\alpha/\sigma^2`
(the Fisher information of the sign of a Gaussian is :math:`2/\pi` of the Gaussian's), i.e.
about 36% below the data-independent bound.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate, results
from dpaudit.accounting import noisy_argmax

# A move counts as an improvement only above quadrature rounding (~1e-14 relative): flat
# ridges (classes far below the top two barely matter) must not send the search wandering.
_IMPROVEMENT = 1e-12
MAX_SIGMA = 1e4
"""Largest sigma searched. The divergences are about alpha / sigma^2 / 2, computed from
log-probabilities whose rounding is absolute, so their relative accuracy falls as sigma grows:
against mpmath (two classes, one vote) 1e-10 at sigma = 1e3, 3e-8 at 1e4, 2e-6 at 1e5 and 1e-4 at
1e6, where the ratio to alpha / sigma^2 this search is for means little."""
MIN_SIGMA_PER_TEACHER = 1.0 / noisy_argmax.MAX_SPREAD_OVER_SIGMA
"""Smallest sigma per vote: the quadrature resolves (largest - smallest count) / sigma up to
:data:`dpaudit.accounting.noisy_argmax.MAX_SPREAD_OVER_SIGMA`, and the histograms' counts span
up to ``num_teachers``. Down to there the divergences match mpmath to 1e-15 relative."""
_BOUND_ROUNDING = 1e-12  # relative excess over alpha / sigma^2 that is rounding, not a bug


def sigma_range(num_teachers: int) -> tuple[float, float]:
  """The closed range of sigma :func:`worst_case_neighbors` computes reliably for
  ``num_teachers`` votes: ``[num_teachers * MIN_SIGMA_PER_TEACHER, MAX_SIGMA]``."""
  return num_teachers * MIN_SIGMA_PER_TEACHER, MAX_SIGMA


class WorstCase(NamedTuple):
  """Result of :func:`worst_case_neighbors`; arrays are indexed by order."""
  orders: np.ndarray  # (K,)
  divergence: np.ndarray  # (K,) largest D_alpha(M(H) || M(H')) found
  histogram: np.ndarray  # (K, C) int: H attaining it
  neighbor: np.ndarray  # (K, C) int: H' = H - e_0 + e_1
  two_level: np.ndarray  # (K,) best of the exhaustive two-level family (step 1)
  data_independent: np.ndarray  # (K,) alpha / sigma^2
  evaluations: int  # distinct pairs evaluated


@functools.partial(jax.jit, static_argnames=("num_nodes",))
def _moved_vote_divergences(hist, sigma, orders, num_nodes):
  """D_alpha(M(H) || M(H - e_0 + e_1)) for ``hist`` (S, C) float -> (S, K)."""
  nbr = hist.at[:, 0].add(-1.0).at[:, 1].add(1.0)
  both = jnp.concatenate([hist, nbr])
  logs = noisy_argmax._class_log_probabilities(  # pylint: disable=protected-access
      both, jnp.full(both.shape[:1], sigma, both.dtype), num_nodes)
  logs = logs - jax.nn.logsumexp(logs, axis=-1, keepdims=True)
  size = hist.shape[0]
  # pylint: disable-next=protected-access
  return noisy_argmax._renyi_from_logs(logs[:size], logs[size:], orders)


def canonical(histograms: np.ndarray) -> np.ndarray:
  """Histograms (..., C) with classes ``2..C-1`` sorted in decreasing order (the divergence of
  moving a vote 0 -> 1 does not depend on their order)."""
  h = np.array(histograms, dtype=np.int64, copy=True)
  h[..., 2:] = -np.sort(-h[..., 2:], axis=-1)
  return h


def two_level_family(num_teachers: int, num_classes: int) -> np.ndarray:
  r"""Every :math:`(a, b, \text{rest spread evenly})` histogram with ``a >= 1``, shape (N, C)."""
  k, c = num_teachers, num_classes
  a, b = np.meshgrid(np.arange(1, k + 1), np.arange(0, k + 1), indexing="ij")
  keep = (a + b <= k) if c > 2 else (a + b == k)
  a, b = a[keep], b[keep]
  out = np.zeros((a.size, c), np.int64)
  out[:, 0], out[:, 1] = a, b
  if c > 2:
    base, extra = np.divmod(k - a - b, c - 2)
    out[:, 2:] = base[:, None] + (np.arange(c - 2)[None, :] < extra[:, None])
  return out


def _moves(histogram: np.ndarray, num_teachers: int) -> np.ndarray:
  """All valid histograms one move away: ``s`` votes from class u to class v (canonical)."""
  c = histogram.shape[0]
  sizes = 2 ** np.arange(int(math.log2(max(num_teachers, 1))) + 1)
  u, v = np.nonzero(~np.eye(c, dtype=bool))
  s = np.repeat(sizes, u.size)
  u, v = np.tile(u, sizes.size), np.tile(v, sizes.size)
  floor = np.where(u == 0, 1, 0)  # class 0 keeps the vote that moves
  ok = histogram[u] - s >= floor
  out = np.repeat(histogram[None], int(ok.sum()), axis=0)
  rows = np.arange(out.shape[0])
  out[rows, u[ok]] -= s[ok]
  out[rows, v[ok]] += s[ok]
  return canonical(out)


class _Evaluator:
  """Divergences of canonical histograms, memoised, in fixed-size jitted chunks."""

  def __init__(self, sigma, orders, num_nodes, chunk_size, progress):
    self.sigma, self.orders = sigma, jnp.asarray(orders, jnp.float64)
    self.num_nodes, self.chunk_size, self.progress = num_nodes, chunk_size, progress
    self.cache: dict[bytes, np.ndarray] = {}

  def __call__(self, histograms: np.ndarray) -> np.ndarray:
    """Divergences (N, K) of canonical int histograms (N, C)."""
    if len(histograms) == 0:  # e.g. no move from (1, 0, ..., 0) with one vote
      return np.zeros((0, len(self.orders)))
    keys = [h.tobytes() for h in histograms]
    todo = np.array([h for h, key in zip(histograms, keys) if key not in self.cache])
    todo = np.unique(todo, axis=0) if todo.size else todo
    for start in range(0, len(todo), self.chunk_size):
      chunk = todo[start:start + self.chunk_size]
      # Pad to a power of two (at least 64): few shapes to compile, little wasted work.
      size = min(self.chunk_size, max(64, 1 << (len(chunk) - 1).bit_length()))
      pad = np.concatenate([chunk, np.repeat(chunk[:1], size - len(chunk), 0)])
      vals = np.asarray(_moved_vote_divergences(jnp.asarray(pad, jnp.float64), self.sigma,
                                                self.orders, self.num_nodes))[:len(chunk)]
      for h, val in zip(chunk, vals):
        self.cache[h.tobytes()] = val
      if self.progress is not None:
        self.progress(len(self.cache))
    return np.stack([self.cache[key] for key in keys])


def _random_starts(key: jax.Array, num_starts: int, num_teachers: int, num_classes: int):
  votes = jax.random.randint(key, (num_starts, num_teachers), 0, num_classes)
  hist = np.array(jax.nn.one_hot(votes, num_classes, dtype=jnp.int32).sum(axis=1), np.int64)
  empty = hist[:, 0] == 0  # class 0 must hold the vote that moves
  hist[empty, 0] += 1
  hist[empty, np.argmax(hist[empty, 1:], axis=1) + 1] -= 1
  return canonical(hist)


def worst_case_neighbors(num_teachers: int, num_classes: int, sigma: float, orders, *,
                         key: jax.Array | None = None, num_random_starts: int = 2,
                         max_steps: int = 100, chunk_size: int = 2048,
                         num_nodes: int | None = None,
                         progress: Callable[[int], None] | None = None) -> WorstCase:
  r"""Search the largest exact Renyi divergence of GNMax over neighbouring histograms.

  See the module docstring for the search (Chadha et al., Sec. 4.2, Eq. 4; the bound it is held
  against is Papernot et al. 2018, Prop. 8). Needs ``jax_enable_x64``.

  With one vote (``k = 1``) the only pair is ``H = e_0``, ``H' = e_1``: the family is that
  pair and the local search has no move.

  Args:
    num_teachers: votes ``k`` >= 1 in each histogram.
    num_classes: classes ``C`` >= 2.
    sigma: noise standard deviation in :func:`sigma_range` (``k * 1e-12`` to ``1e4``): outside
      it the divergences cannot be computed to the accuracy the comparison with
      :math:`\alpha/\sigma^2` needs (see :data:`MAX_SIGMA`, :data:`MIN_SIGMA_PER_TEACHER`).
    orders: Renyi orders > 1 (1-D).
    key: PRNG key of the random starts (required when ``num_random_starts`` > 0).
    num_random_starts: uniform random starting histograms per order, besides the two-level one.
    max_steps: local-search steps per start (0: the two-level family only).
    chunk_size: pairs per compiled evaluation.
    num_nodes: quadrature nodes per class; default
      :func:`dpaudit.accounting.noisy_argmax.default_num_nodes`.
    progress: called with the number of distinct pairs evaluated so far.

  Returns:
    :class:`WorstCase`; ``divergence <= data_independent`` always, and each ``divergence[i]`` is
    attained by ``(histogram[i], neighbor[i])``. (At small sigma the worst pairs come within a
    few units in the last place of :math:`\alpha/\sigma^2`; a computed value above it by less
    than 1e-12 relative is that rounding and is reported as the bound itself.)
  """
  _validate.check_integer("num_teachers", num_teachers, 1)
  _validate.check_integer("num_classes", num_classes, 2)
  _validate.check_not_boolean("sigma", sigma, "noise scales")
  low, high = sigma_range(num_teachers)
  _validate.check_range("sigma", sigma, 0.0, low_open=True, finite=True)
  if not low <= sigma <= high:
    raise ValueError(f"sigma={sigma:g} is outside the valid range [{low:g}, {high:g}] for "
                     f"num_teachers={num_teachers} (beyond it the exact divergences lose the "
                     "accuracy a comparison with alpha / sigma^2 needs)")
  _validate.check_orders(orders)
  _validate.check_nonempty("orders", orders)
  if np.ndim(orders) != 1:
    raise ValueError(f"orders must be 1-D, got shape {np.shape(orders)}")
  _validate.check_integer("num_random_starts", num_random_starts, 0)
  _validate.check_integer("max_steps", max_steps, 0)
  _validate.check_integer("chunk_size", chunk_size, 1)
  if num_random_starts and key is None:
    raise ValueError("key is required when num_random_starts > 0")
  if num_random_starts:
    _validate.check_key(key)
  if num_nodes is not None:
    _validate.check_integer("num_nodes", num_nodes, 3)
  if not jax.config.jax_enable_x64:
    raise ValueError("worst_case_neighbors needs jax_enable_x64 (the divergences are float64)")
  orders = np.asarray(orders, np.float64)
  if num_nodes is None:
    num_nodes = noisy_argmax.default_num_nodes(num_classes)
  evaluate = _Evaluator(float(sigma), orders, int(num_nodes), int(chunk_size), progress)

  family = two_level_family(num_teachers, num_classes)
  values = evaluate(family)
  first = family[np.argmax(values, axis=0)]  # (K, C)
  two_level = values.max(axis=0)
  starts = [first]
  if num_random_starts:
    randoms = _random_starts(key, num_random_starts, num_teachers, num_classes)
    starts.append(np.broadcast_to(randoms[None], (len(orders),) + randoms.shape)
                  .reshape(-1, num_classes))
  # One climber per (start, order); climber i climbs order i % K.
  current = np.concatenate([starts[0]] + starts[1:])
  order_of = np.arange(len(current)) % len(orders)
  if num_random_starts:
    order_of[len(orders):] = np.repeat(np.arange(len(orders)), num_random_starts)
  score = evaluate(current)[np.arange(len(current)), order_of]
  active = np.ones(len(current), bool)
  for _ in range(max_steps):
    if not active.any():
      break
    candidates = [_moves(current[i], num_teachers) if active[i] else None
                  for i in range(len(current))]
    stacked = np.concatenate([c for c in candidates if c is not None])
    vals = evaluate(stacked)
    offset = 0
    for i, cand in enumerate(candidates):
      if cand is None:
        continue
      mine = vals[offset:offset + len(cand), order_of[i]]
      offset += len(cand)
      best = int(np.argmax(mine)) if len(cand) else -1
      if best >= 0 and mine[best] > score[i] * (1 + _IMPROVEMENT) + 1e-300:
        current[i], score[i] = cand[best], mine[best]
      else:
        active[i] = False

  divergence = np.empty(len(orders))
  histogram = np.empty((len(orders), num_classes), np.int64)
  for j in range(len(orders)):
    mine = np.flatnonzero(order_of == j)
    best = mine[np.argmax(score[mine])]
    divergence[j], histogram[j] = score[best], current[best]
    if divergence[j] <= two_level[j] * (1 + _IMPROVEMENT):  # ties within rounding: step 1's
      divergence[j], histogram[j] = two_level[j], first[j]
  neighbor = histogram.copy()
  neighbor[:, 0] -= 1
  neighbor[:, 1] += 1
  bound = orders / float(sigma) ** 2
  excess = divergence > bound * (1.0 + _BOUND_ROUNDING)
  if np.any(excess) or not np.all(np.isfinite(divergence)):
    j = int(np.flatnonzero(excess | ~np.isfinite(divergence))[0])
    raise RuntimeError(f"the divergence {divergence[j]!r} at order {orders[j]:g} is not within "
                       f"[0, alpha / sigma^2 = {bound[j]:g}]: a numerical failure at "
                       f"sigma={sigma:g}, please report it")
  divergence = np.minimum(divergence, bound)
  two_level = np.minimum(two_level, bound)
  return WorstCase(orders=orders, divergence=divergence, histogram=histogram,
                   neighbor=neighbor, two_level=two_level, data_independent=bound,
                   evaluations=len(evaluate.cache))


def check_stored(cell, num_teachers: int, num_classes: int, sigma: float, orders) -> None:
  """Raises KeyError, TypeError or ValueError unless ``cell`` is a whole result of
  :func:`worst_case_neighbors` as ``experiments.gnmax_worst_case`` stores it (the
  :class:`WorstCase` fields as lists, ``ratio`` and ``seconds``) for these settings: one entry
  per order in every list, histograms of ``num_teachers`` votes over ``num_classes`` classes
  with the neighbour one vote from class 0 to class 1, the bound alpha / sigma^2 (Papernot et
  al. 2018, Prop. 8) at each order, 0 <= two-level <= found divergence <= that bound (relative
  slack 1e-9; the search starts from the two-level pair), and the ratio found / bound."""
  results.check_fields("worst-case cell", cell, {
      "orders": list, "divergence": list, "histogram": list, "neighbor": list,
      "two_level": list, "data_independent": list, "ratio": list, "evaluations": int,
      "seconds": float})
  k = len(orders)
  floats = {name: np.asarray(cell[name], np.float64) for name in (
      "orders", "divergence", "two_level", "data_independent", "ratio")}
  hist, nbr = np.asarray(cell["histogram"]), np.asarray(cell["neighbor"])
  if any(v.shape != (k,) for v in floats.values()) or hist.shape != (k, num_classes) \
      or nbr.shape != (k, num_classes) or hist.dtype.kind != "i" or nbr.dtype.kind != "i":
    raise ValueError(f"the cell's lists are not {k} orders of {num_classes} classes")
  moved = hist.copy()
  moved[:, 0] -= 1
  moved[:, 1] += 1
  bound = np.asarray(orders, np.float64) / sigma**2
  divergence, two_level = floats["divergence"], floats["two_level"]
  problems = (
      ("orders differ", not np.array_equal(floats["orders"], np.asarray(orders, np.float64))),
      ("histograms are not num_teachers votes", np.any(hist < 0) or hist[:, 0].min() < 1
       or np.any(hist.sum(axis=1) != num_teachers)),
      ("neighbour is not H - e_0 + e_1", not np.array_equal(nbr, moved)),
      ("bound is not alpha / sigma^2", not np.allclose(floats["data_independent"], bound,
                                                        rtol=1e-12, atol=0)),
      ("a divergence is negative or NaN", not (np.all(two_level >= 0)
                                               and np.all(divergence >= 0))),
      ("two-level above the found divergence", np.any(two_level > divergence * (1 + 1e-9))),
      ("a divergence above its bound", np.any(divergence > bound * (1 + 1e-9))),
      ("ratio is not divergence / bound", not np.allclose(floats["ratio"], divergence / bound,
                                                          rtol=1e-12, atol=0)),
      ("no pairs evaluated", cell["evaluations"] < 1))
  for text, bad in problems:
    if bad:
      raise ValueError(f"the stored worst-case cell is not whole: {text}")
