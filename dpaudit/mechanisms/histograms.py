r"""Parametric models of the vote histograms of PATE, CaPC and Private-kNN (Chadha et al.,
Auditing Private Prediction, Secs. 5.1, 5.2 and 6), as pure sampling functions ``f(key, ...)``.

Auditing one query of a private prediction algorithm needs about 1e8 runs of its noisy argmax,
each on a fresh vote histogram. Training k teachers per run is out of the question, so the paper
models the histogram of the training phase parametrically:

* PATE (Sec. 5.1): :math:`H_S = \mathrm{Mult}(k, P_q)` and
  :math:`H_{S'} = \mathrm{Mult}(k-1, P_q) + \mathrm{Mult}(1, P'_q)`.
* CaPC (Sec. 5.2): :math:`H_S = \sum_{i=1}^k \mathrm{Mult}(1, P^i_q)` and
  :math:`H_{S'}` with teacher 1's :math:`P^{1\prime}_q` in place of :math:`P^1_q`.
* Private-kNN (Sec. 6): :math:`H_S = \mathrm{Mult}(k, P_q)` and
  :math:`H_{S'} = \mathrm{Mult}(k, P_q) + \mathrm{Ber}(\nu)\,(\mathbf 1\{y'\} -
  \mathrm{Mult}(1, P^{\mathrm{last}}_q))`.

**Sampling Mult(k, P) without a loop over votes.** A multinomial draw is a chain of conditional
binomials: the count of the s-th class is :math:`\mathrm{Bin}(m_s, q_s)` with :math:`m_s` the
votes not yet placed and :math:`q_s = p_s / \sum_{t \ge s} p_t`. :func:`vote_table` tabulates,
for every stage s and every m in 0..k, the binomial CDF as 32-bit thresholds; a draw is then one
random 32-bit word per stage and a count of the thresholds below it (inversion), so a trial
costs C - 1 table rows whatever k is. The classes are ordered by increasing probability, so
the most likely class takes the remainder and every other stage needs only a short window of
its row (``window`` columns, chosen so that the mass beyond it is below 2^-33). The tables are
exact up to the 32-bit quantisation of each CDF value (an error below 2^-32 per class).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate
from dpaudit.mechanisms.noisy_argmax import first_argmax

_ONE = 2**32 - 1  # the threshold of a CDF value of 1: no 32-bit word lies below it
_TAIL_MASS = 2.0**-33  # mass a window may leave out, per stage and count


class VoteTable(NamedTuple):
  r"""Inversion tables of :math:`\mathrm{Mult}(k, P)` (see the module docstring).

  Attributes:
    thresholds: one uint32 array ``(k + 1, window_s)`` per stage s = 0..C-2:
      ``thresholds[s][m, x]`` is :math:`\lfloor 2^{32} \Pr[\mathrm{Bin}(m, q_s) \le x] \rfloor`
      (``2^32 - 1`` where the CDF is 1, and in the last column).
    permutation: float32 ``(C, C)``: row s is the one-hot class of stage s (stage C - 1, the
      most likely class, takes the remaining votes).
  """
  thresholds: tuple
  permutation: jax.Array

  @property
  def num_votes(self) -> int:
    return self.thresholds[0].shape[0] - 1

  @property
  def num_stages(self) -> int:
    return len(self.thresholds)


def _check_probabilities(name: str, probabilities) -> np.ndarray:
  p = np.asarray(probabilities, np.float64)
  if p.ndim != 1 or p.size < 2:
    raise ValueError(f"{name} must be a 1-D vector of at least 2 class probabilities; got shape "
                     f"{p.shape}")
  if not np.all(np.isfinite(p)) or np.any(p < 0) or abs(p.sum() - 1.0) > 1e-6:
    raise ValueError(f"{name}={p.tolist()} must be non-negative and sum to 1 (within 1e-6)")
  return p / p.sum()


def _log_factorials(n: int) -> np.ndarray:
  return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])


def _binomial_cdf_rows(num_votes: int, q: float, width: int) -> np.ndarray:
  """``cdf[m, x] = Pr[Bin(m, q) <= x]`` for m in 0..k and x in 0..width-1 (float64)."""
  m = np.arange(num_votes + 1, dtype=np.float64)[:, None]
  x = np.arange(width, dtype=np.float64)[None, :]
  inside = x <= m
  if q <= 0.0 or q >= 1.0:
    point = m if q >= 1.0 else np.zeros_like(m)
    return np.where(x >= point, 1.0, 0.0)
  log_fact = _log_factorials(num_votes)
  mi, xi = m.astype(np.int64), np.minimum(x, m).astype(np.int64)
  log_pmf = (log_fact[mi] - log_fact[xi] - log_fact[mi - xi]
             + x * math.log(q) + (m - x) * math.log1p(-q))
  pmf = np.where(inside, np.exp(np.where(inside, log_pmf, -np.inf)), 0.0)
  return np.minimum(np.cumsum(pmf, axis=1), 1.0)


def _stage_probabilities(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Class order (increasing probability) and the conditional probability of each stage."""
  order = np.argsort(p, kind="stable")
  sorted_p = p[order]
  remaining = np.cumsum(sorted_p[::-1])[::-1]
  q = np.where(remaining > 0, sorted_p / np.where(remaining > 0, remaining, 1.0), 0.0)
  return order, np.clip(q, 0.0, 1.0)


def required_window(probabilities, num_votes: int) -> tuple[int, ...]:
  """Per stage, the smallest table width (a multiple of 8, at most k + 1 rounded up) that
  leaves out less than 2^-33 of the stage's binomial mass. To stack the tables of several
  queries, pass the elementwise maximum of their windows to :func:`vote_table`."""
  p = _check_probabilities("probabilities", probabilities)
  _validate.check_integer("num_votes", num_votes, 1)
  _, q = _stage_probabilities(p)
  full = -(-(num_votes + 1) // 8) * 8
  widths = []
  for qs in q[:-1]:
    tail = 1.0 - _binomial_cdf_rows(num_votes, float(qs), num_votes + 1)[num_votes]
    needed = int(np.argmax(tail < _TAIL_MASS)) + 1 if np.any(tail < _TAIL_MASS) else full
    widths.append(min(max(8, -(-needed // 8) * 8), full))
  return tuple(widths)


def vote_table(probabilities, num_votes: int, window=None) -> VoteTable:
  r"""Tables to draw :math:`\mathrm{Mult}(k, P)` with :func:`sample_votes`.

  Args:
    probabilities: class probabilities P (C >= 2 entries, summing to 1).
    num_votes: k >= 1 (at most 4095).
    window: table width per stage (default :func:`required_window`; one int applies to every
      stage); a wider one gives the same draws.

  Raises:
    ValueError: on bad arguments, or a ``window`` too narrow for P (it would drop mass).
  """
  p = _check_probabilities("probabilities", probabilities)
  _validate.check_integer("num_votes", num_votes, 1, 4095)
  needed = required_window(p, num_votes)
  if window is None:
    window = needed
  elif np.ndim(window) == 0:
    window = (window,) * len(needed)
  window = tuple(_validate.check_integer("window", w, 1) for w in window)
  if len(window) != len(needed) or any(w < n for w, n in zip(window, needed)):
    raise ValueError(f"window={list(window)} is too narrow for these probabilities and "
                     f"num_votes={num_votes}; need at least {list(needed)} (one per stage)")
  order, q = _stage_probabilities(p)
  rows = []
  for qs, width in zip(q[:-1], window):
    cdf = _binomial_cdf_rows(num_votes, float(qs), width)
    words = np.minimum(np.floor(cdf * 2.0**32), _ONE)
    words[:, -1] = _ONE  # the mass beyond the window (< 2^-33) joins the last column
    rows.append(jnp.asarray(words.astype(np.uint32)))
  permutation = np.eye(p.size, dtype=np.float32)[order]
  return VoteTable(tuple(rows), jnp.asarray(permutation))


def votes_from_words(words: jax.Array, table: VoteTable) -> jax.Array:
  r""":math:`\mathrm{Mult}(k, P)` from C - 1 uniform random 32-bit words: float32 counts per
  class (shape ``(C,)``, summing to k)."""
  remaining = jnp.int32(table.num_votes)
  counts = []
  for s, rows in enumerate(table.thresholds):
    row = jax.lax.dynamic_index_in_dim(rows, remaining, keepdims=False)
    x = jnp.sum(row < words[s], dtype=jnp.int32)
    counts.append(x)
    remaining = remaining - x
  counts.append(remaining)
  return jnp.stack(counts).astype(jnp.float32) @ table.permutation


def sample_votes(key: jax.Array, table: VoteTable) -> jax.Array:
  r"""One draw of :math:`\mathrm{Mult}(k, P)` from :func:`vote_table` (see
  :func:`votes_from_words`). Pure; vmap over keys for many trials."""
  return votes_from_words(jax.random.bits(key, (table.num_stages,), jnp.uint32), table)


def uniform_from_word(word: jax.Array) -> jax.Array:
  """A float32 uniform on (0, 1) from the top 24 bits of a random 32-bit word (centred in its
  cell of width 2^-24, so never 0 or 1)."""
  return (jnp.right_shift(word, 8).astype(jnp.float32) + 0.5) * (1.0 / (1 << 24))


def class_from_word(word: jax.Array, probabilities: jax.Array) -> jax.Array:
  r""":math:`\mathrm{Mult}(1, P)` as a float32 one-hot vector, by inversion of one word."""
  cumulative = jnp.cumsum(jnp.asarray(probabilities, jnp.float32))
  u = uniform_from_word(word) * cumulative[-1]
  index = jnp.minimum(jnp.sum(cumulative <= u, dtype=jnp.int32), cumulative.shape[0] - 1)
  return jax.nn.one_hot(index, cumulative.shape[0], dtype=jnp.float32)


def sample_class(key: jax.Array, probabilities: jax.Array) -> jax.Array:
  r"""One draw of :math:`\mathrm{Mult}(1, P)` as a float32 one-hot vector."""
  return class_from_word(jax.random.bits(key, (), jnp.uint32), probabilities)


def normals_from_words(words: jax.Array) -> jax.Array:
  """Standard normals, one per word, by the inverse CDF of :func:`uniform_from_word` (as
  ``jax.random.normal`` does; |z| < 5.4)."""
  return math.sqrt(2.0) * jax.lax.erf_inv(2.0 * uniform_from_word(words) - 1.0)


# ------------------------------------------------------------------------------------- PATE


class PateModel(NamedTuple):
  """PATE's histogram model for one query (Sec. 5.1): ``H_S = Mult(k, P)`` from ``table_k``;
  ``H_S' = Mult(k - 1, P) + Mult(1, P')`` from ``table_k_minus_1`` and ``neighbor_class``."""
  table_k: VoteTable
  table_k_minus_1: VoteTable
  neighbor_class: jax.Array  # P'_q, float32 (C,)


def pate_model(probabilities, neighbor_probabilities, num_teachers: int,
               window: int | None = None) -> PateModel:
  """Builds :class:`PateModel` from the maximum-likelihood estimates P_q and P'_q."""
  p = _check_probabilities("probabilities", probabilities)
  p_neighbor = _check_probabilities("neighbor_probabilities", neighbor_probabilities)
  if p_neighbor.size != p.size:
    raise ValueError(f"neighbor_probabilities has {p_neighbor.size} classes, probabilities "
                     f"{p.size}; they must match")
  _validate.check_integer("num_teachers", num_teachers, 2, 4095)
  if window is None:
    window = required_window(p, num_teachers)
  return PateModel(vote_table(p, num_teachers, window), vote_table(p, num_teachers - 1, window),
                   jnp.asarray(p_neighbor, jnp.float32))


def pate_words(model: PateModel) -> int:
  """Random words one PATE histogram consumes."""
  return model.table_k.num_stages + 1


def pate_from_words(words: jax.Array, model: PateModel, neighbor) -> jax.Array:
  """One histogram of PATE's model from :func:`pate_words` random words: ``H_S`` (``neighbor``
  False) or ``H_S'`` (True; may be a traced boolean)."""
  stages = model.table_k.num_stages

  def with_all():
    return votes_from_words(words[:stages], model.table_k)

  def with_one_replaced():
    return (votes_from_words(words[:stages], model.table_k_minus_1)
            + class_from_word(words[stages], model.neighbor_class))

  if isinstance(neighbor, bool):
    return with_one_replaced() if neighbor else with_all()
  return jnp.where(neighbor, with_one_replaced(), with_all())


def pate_histogram(key: jax.Array, model: PateModel, neighbor) -> jax.Array:
  """One histogram of PATE's model (see :func:`pate_from_words`)."""
  return pate_from_words(jax.random.bits(key, (pate_words(model),), jnp.uint32), model, neighbor)


# ------------------------------------------------------------------------------------- CaPC


class CapcModel(NamedTuple):
  """CaPC's histogram model for one query (Sec. 5.2). Teachers whose estimate is one class
  with probability 1 vote deterministically and are summed into ``fixed``; the others
  (``random``, padded with zero rows that ``active`` masks out) are drawn one class each.
  Teacher 1 is ``random[0]`` (or, if deterministic, ``fixed_first``) in ``H_S``, and is
  replaced by ``neighbor_first`` in ``H_S'``."""
  fixed: jax.Array  # float32 (C,): votes of the deterministic teachers other than teacher 1
  random: jax.Array  # float32 (R, C): P^i of the random teachers other than teacher 1
  active: jax.Array  # bool (R,)
  first: jax.Array  # float32 (C,): P^1
  neighbor_first: jax.Array  # float32 (C,): P^1'


def capc_model(teacher_probabilities, neighbor_first_probabilities,
               num_random: int | None = None) -> CapcModel:
  """Builds :class:`CapcModel` from the per-teacher estimates ``P^i_q`` (shape ``(k, C)``,
  teacher 1 first) and teacher 1's ``P^1'_q``. ``num_random`` pads the random teachers to a
  static count (default: as many as there are), so that models of many queries stack."""
  p = np.asarray(teacher_probabilities, np.float64)
  if p.ndim != 2 or p.shape[0] < 2 or p.shape[1] < 2:
    raise ValueError(f"teacher_probabilities must have shape (k >= 2, C >= 2); got {p.shape}")
  for i, row in enumerate(p):
    _check_probabilities(f"teacher_probabilities[{i}]", row)
  neighbor = _check_probabilities("neighbor_first_probabilities", neighbor_first_probabilities)
  if neighbor.size != p.shape[1]:
    raise ValueError(f"neighbor_first_probabilities has {neighbor.size} classes, the teachers "
                     f"{p.shape[1]}; they must match")
  others = p[1:]
  deterministic = np.isclose(others.max(axis=1), 1.0, rtol=0.0, atol=1e-12)
  fixed = np.eye(p.shape[1])[others[deterministic].argmax(axis=1)].sum(axis=0)
  random = others[~deterministic]
  count = random.shape[0] if num_random is None else int(num_random)
  if count < random.shape[0]:
    raise ValueError(f"num_random={count} is below the {random.shape[0]} teachers whose votes "
                     "are random")
  padded = np.zeros((max(count, 1), p.shape[1]))
  padded[:, 0] = 1.0
  padded[:random.shape[0]] = random
  active = np.arange(padded.shape[0]) < random.shape[0]
  as32 = lambda v: jnp.asarray(v, jnp.float32)
  return CapcModel(as32(fixed), as32(padded), jnp.asarray(active), as32(p[0]), as32(neighbor))


def capc_words(model: CapcModel) -> int:
  """Random words one CaPC histogram consumes."""
  return model.random.shape[0] + 1


def capc_from_words(words: jax.Array, model: CapcModel, neighbor) -> jax.Array:
  """One histogram of CaPC's model from :func:`capc_words` random words."""
  first = class_from_word(words[0], jnp.where(neighbor, model.neighbor_first, model.first))
  votes = jax.vmap(class_from_word)(words[1:], model.random)
  return model.fixed + jnp.sum(jnp.where(model.active[:, None], votes, 0.0), axis=0) + first


def capc_histogram(key: jax.Array, model: CapcModel, neighbor) -> jax.Array:
  """One histogram of CaPC's model: ``H_S`` (``neighbor`` False) or ``H_S'`` (True)."""
  return capc_from_words(jax.random.bits(key, (capc_words(model),), jnp.uint32), model, neighbor)


# ------------------------------------------------------------------------------ Private-kNN


def knn_inclusion_probability(rank, num_neighbors: int, sampling_rate: float) -> jax.Array:
  r""":math:`\nu` of Sec. 6: the probability that the training point of rank :math:`r_q` (1 =
  nearest to the query) is among the k nearest neighbours of a subsample that keeps every
  training point independently with probability :math:`\gamma`:

  .. math:: \nu = \sum_{i=0}^{k-1}\binom{r_q-1}{i}\gamma^{i+1}(1-\gamma)^{r_q-i-1}
     = \gamma\,\Pr[\mathrm{Bin}(r_q - 1, \gamma) \le k - 1],

  which is :math:`\gamma` for :math:`r_q \le k`. See :func:`knn_log_inclusion_probability`."""
  return jnp.exp(knn_log_inclusion_probability(rank, num_neighbors, sampling_rate))


def knn_log_inclusion_probability(rank, num_neighbors: int, sampling_rate: float) -> jax.Array:
  """``log nu`` (broadcasts over ``rank``): the sum of :func:`knn_inclusion_probability` taken
  term by term in log space (log-sum-exp), so far ranks, where nu underflows, keep their
  logarithm."""
  _validate.check_integer("num_neighbors", num_neighbors, 1)
  _validate.check_range("sampling_rate", sampling_rate, 0.0, 1.0, low_open=True)
  rank_np = np.asarray(rank, np.float64)
  if np.any(rank_np < 1) or np.any(rank_np != np.round(rank_np)):
    raise ValueError(f"rank must hold whole numbers >= 1; got {rank_np.tolist()}")
  dtype = jnp.result_type(float)
  r = jnp.asarray(rank_np, dtype)[..., None]
  i = jnp.arange(num_neighbors, dtype=dtype)
  failures = r - i - 1.0  # subsample misses among the r - 1 nearer points
  valid = failures >= 0.0
  if sampling_rate < 1.0:
    log_fail = failures * math.log1p(-sampling_rate)
  else:
    log_fail = jnp.where(failures > 0.0, -jnp.inf, 0.0)
  gammaln = jax.scipy.special.gammaln
  log_terms = (gammaln(r) - gammaln(i + 1.0) - gammaln(jnp.maximum(failures, 0.0) + 1.0)
               + (i + 1.0) * math.log(sampling_rate) + log_fail)
  return jax.scipy.special.logsumexp(jnp.where(valid, log_terms, -jnp.inf), axis=-1)


class KnnVoteModel(NamedTuple):
  """Private-kNN's vote distributions for one query: ``P_q`` (a vote among the top k of the
  subsample) and ``P_q^last`` (the k-th nearest of the subsample)."""
  probabilities: np.ndarray
  last_probabilities: np.ndarray


def knn_vote_model(ranked_labels, num_neighbors: int, sampling_rate: float,
                   num_classes: int) -> KnnVoteModel:
  r"""``P_q`` and ``P_q^last`` of Sec. 6, exactly, from the labels of the training points in
  order of distance to the query (nearest first). The point of rank r is in the top k with
  probability :math:`\nu_r` (:func:`knn_inclusion_probability`) and is the k-th with probability
  :math:`\gamma\Pr[\mathrm{Bin}(r-1, \gamma) = k-1]`; ``P_q`` weighs each label by the first,
  ``P_q^last`` by the second (each normalised)."""
  labels = np.asarray(ranked_labels)
  if labels.ndim != 1 or labels.size < num_neighbors:
    raise ValueError(f"ranked_labels must be 1-D with at least num_neighbors={num_neighbors} "
                     f"entries; got shape {labels.shape}")
  if np.any(labels < 0) or np.any(labels >= num_classes):
    raise ValueError(f"ranked_labels must lie in [0, {num_classes}); got values in "
                     f"[{labels.min()}, {labels.max()}]")
  rank = np.arange(1, labels.size + 1)
  log_in = np.asarray(knn_log_inclusion_probability(rank, num_neighbors, sampling_rate),
                      np.float64)
  log_fact = _log_factorials(labels.size)
  k1 = num_neighbors - 1
  misses = np.maximum(rank - 1 - k1, 0)
  if sampling_rate < 1.0:
    log_misses = misses * math.log1p(-sampling_rate)
  else:
    log_misses = np.where(misses > 0, -np.inf, 0.0)
  log_last = np.where(rank >= num_neighbors,
                      log_fact[rank - 1] - log_fact[k1] - log_fact[misses]
                      + num_neighbors * math.log(sampling_rate) + log_misses, -np.inf)
  weights = np.exp(log_in - log_in.max())
  last = np.exp(log_last - log_last.max())
  onehot = np.eye(num_classes)[labels]
  p = weights @ onehot
  p_last = last @ onehot
  return KnnVoteModel(p / p.sum(), p_last / p_last.sum())


class KnnModel(NamedTuple):
  """Private-kNN's histogram model for one query (Sec. 6)."""
  table_k: VoteTable  # Mult(k, P_q)
  last_class: jax.Array  # P_q^last, float32 (C,)
  poison_class: jax.Array  # one-hot of y', float32 (C,)
  inclusion: jax.Array  # nu, float32 ()


def knn_model(votes: KnnVoteModel, num_neighbors: int, poison_label: int, inclusion: float,
              window: int | None = None) -> KnnModel:
  r"""Builds :class:`KnnModel`: :math:`H_{S'} = \mathrm{Mult}(k, P_q) + \mathrm{Ber}(\nu)
  (\mathbf 1\{y'\} - \mathrm{Mult}(1, P^{last}_q))`. (As in the paper the model may then put
  -1 vote on a class that drew none; the noisy argmax is defined for any real histogram.)"""
  num_classes = np.asarray(votes.probabilities).size
  _validate.check_integer("poison_label", poison_label, 0, num_classes - 1)
  _validate.check_range("inclusion", inclusion, 0.0, 1.0)
  return KnnModel(vote_table(votes.probabilities, num_neighbors, window),
                  jnp.asarray(votes.last_probabilities, jnp.float32),
                  jax.nn.one_hot(int(poison_label), num_classes, dtype=jnp.float32),
                  jnp.asarray(inclusion, jnp.float32))


def knn_words(model: KnnModel) -> int:
  """Random words one Private-kNN histogram consumes."""
  return model.table_k.num_stages + 2


def knn_from_words(words: jax.Array, model: KnnModel, neighbor) -> jax.Array:
  """One histogram of Private-kNN's model from :func:`knn_words` random words."""
  stages = model.table_k.num_stages
  votes = votes_from_words(words[:stages], model.table_k)
  included = uniform_from_word(words[stages]) < model.inclusion
  swap = model.poison_class - class_from_word(words[stages + 1], model.last_class)
  return votes + jnp.where(jnp.logical_and(neighbor, included), 1.0, 0.0) * swap


def knn_histogram(key: jax.Array, model: KnnModel, neighbor) -> jax.Array:
  """One histogram of Private-kNN's model: ``H_S`` (``neighbor`` False) or ``H_S'`` (True)."""
  return knn_from_words(jax.random.bits(key, (knn_words(model),), jnp.uint32), model, neighbor)


# ------------------------------------------------------------------- noisy argmax on a model


class Family(NamedTuple):
  """A histogram model family: words per histogram, and the histogram from those words."""
  name: str
  num_words: object  # model -> int
  from_words: object  # (words, model, neighbor) -> float32 (C,)


PATE = Family("pate", pate_words, pate_from_words)
CAPC = Family("capc", capc_words, capc_from_words)
PRIVATE_KNN = Family("private_knn", knn_words, knn_from_words)


def noisy_argmax_of(family: Family, key: jax.Array, model, neighbor, sigma) -> jax.Array:
  """One release of the private prediction (Eq. (2)): a histogram of ``family``'s model through
  the noisy argmax. One call of the PRNG gives every random word the trial needs (the
  histogram's and one per class for the noise): splitting keys cost more than the sampling."""
  used = family.num_words(model)
  words = jax.random.bits(key, (used + num_classes(model),), jnp.uint32)
  histogram = family.from_words(words[:used], model, neighbor)
  noise = normals_from_words(words[used:])
  return first_argmax(histogram + jnp.asarray(sigma, jnp.float32) * noise)


def num_classes(model) -> int:
  if isinstance(model, PateModel):
    return model.neighbor_class.shape[-1]
  if isinstance(model, CapcModel):
    return model.first.shape[-1]
  return model.last_class.shape[-1]
