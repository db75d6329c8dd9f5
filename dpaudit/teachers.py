r"""Teacher ensembles of PATE and CaPC, trained as one compiled program (Chadha et al.,
Auditing Private Prediction, Secs. 5.1-5.2 and App. E.1).

PATE splits the training set S into k random partitions and trains one teacher on each; CaPC
does the same with fixed partitions. The parametric histogram models of
:mod:`dpaudit.mechanisms.histograms` need, per query q, the distribution :math:`P_q` of a
teacher's prediction and :math:`P'_q` of a teacher whose partition also holds the crafted point
:math:`(x', y')`, estimated by maximum likelihood over :math:`N_g` instantiations of the whole
training phase. Here one instantiation is k + 1 teachers: the k of S and an *extra* teacher
trained on one partition (a random one for PATE, the first for CaPC) plus :math:`(x', y')`.
Partitions are padded to a static width with a mask, so all teachers of all instantiations run
as one ``vmap`` (over instantiations, then teachers) of one training function: Adam on
minibatches drawn from the teacher's own partition (App. E.1: small batches, since a teacher
holds a few hundred examples).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpaudit import _validate

PARTITIONINGS = ("random", "fixed")


@dataclasses.dataclass(frozen=True)
class TeacherConfig:
  """How each teacher trains.

  Attributes:
    epochs: passes over the teacher's partition (in expectation: batches are drawn from it
      with replacement).
    batch_size: examples per step (App. E.1 uses 16).
    learning_rate: Adam's step size.
  """
  epochs: int = 40
  batch_size: int = 16
  learning_rate: float = 1e-3

  def __post_init__(self):
    _validate.check_range("epochs", self.epochs, 1)
    _validate.check_range("batch_size", self.batch_size, 1)
    _validate.check_range("learning_rate", self.learning_rate, 0.0, low_open=True)


class Partitions(NamedTuple):
  """Row ``i`` lists teacher i's example indices; ``mask`` marks the real ones."""
  indices: jax.Array  # int32 (k, width)
  mask: jax.Array  # bool (k, width)


def partition(key: jax.Array, num_examples: int, num_teachers: int, partitioning: str,
              width: int | None = None) -> Partitions:
  """Disjoint partitions of ``range(num_examples)`` into ``num_teachers`` parts of sizes
  differing by at most one: a uniformly random split ("random", PATE) or consecutive blocks
  ("fixed", CaPC; ``key`` unused). Padded to ``width`` columns (default ceil(n / k))."""
  _validate.check_choice("partitioning", partitioning, PARTITIONINGS)
  _validate.check_range("num_teachers", num_teachers, 1)
  if num_examples < num_teachers:
    raise ValueError(f"num_examples={num_examples} is below num_teachers={num_teachers}; each "
                     "teacher needs at least one example")
  per = -(-num_examples // num_teachers)
  width = per if width is None else int(width)
  if width < per:
    raise ValueError(f"width={width} is below the largest partition ({per} examples)")
  if partitioning == "fixed":  # consecutive blocks
    sizes = np.full(num_teachers, num_examples // num_teachers)
    sizes[:num_examples % num_teachers] += 1
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    cols = np.arange(width)
    block = cols[None, :] < sizes[:, None]
    return Partitions(jnp.asarray(np.where(block, starts[:, None] + cols[None, :], 0),
                                  jnp.int32), jnp.asarray(block))
  # random: teacher i takes positions i, i + k, i + 2k, ... of a random order (sizes differ
  # by at most 1)
  order = jax.random.permutation(key, num_examples)
  slots = jnp.arange(num_teachers)[:, None] + num_teachers * jnp.arange(width)[None, :]
  mask = slots < num_examples
  indices = jnp.where(mask, order[jnp.minimum(slots, num_examples - 1)], 0)
  return Partitions(indices.astype(jnp.int32), mask)


def make_train_teacher(model: nn.Module, example_shape, config: TeacherConfig,
                       width: int) -> Callable:
  """``train(key, features, labels, indices, mask) -> params``: one teacher, trained on the
  rows ``indices[mask]`` of ``features``/``labels`` for ``epochs * ceil(width / batch_size)``
  Adam steps. Pure; vmap it over teachers (and instantiations)."""
  steps = config.epochs * max(1, math.ceil(width / config.batch_size))
  optimizer = optax.adam(config.learning_rate)
  dummy = jnp.zeros((1,) + tuple(example_shape), jnp.float32)

  def loss_fn(params, x, y):
    logits = model.apply(params, x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

  def train(key, features, labels, indices, mask):
    key_init, key_steps = jax.random.split(key)
    params = model.init(key_init, dummy)
    state = optimizer.init(params)
    logits_mask = jnp.where(mask, 0.0, -jnp.inf)

    def step(i, carry):
      params, state = carry
      slots = jax.random.categorical(jax.random.fold_in(key_steps, i), logits_mask,
                                     shape=(config.batch_size,))
      rows = indices[slots]
      grads = jax.grad(loss_fn)(params, features[rows], labels[rows])
      updates, state = optimizer.update(grads, state, params)
      return optax.apply_updates(params, updates), state

    params, _ = jax.lax.fori_loop(0, steps, step, (params, state))
    return params

  return train


def predict(model: nn.Module, params, queries: jax.Array, batch_axes: int = 1) -> jax.Array:
  """Votes (argmax class) on every query of params stacked on ``batch_axes`` leading axes
  (teachers, or instantiations x teachers): int32, those axes + ``(num_queries,)``."""
  fn = lambda p: jnp.argmax(model.apply(p, queries), axis=-1).astype(jnp.int32)
  for _ in range(batch_axes):
    fn = jax.vmap(fn)
  return fn(params)


def make_ensemble(model: nn.Module, example_shape, num_examples: int, num_teachers: int,
                  partitioning: str, config: TeacherConfig, num_crafted: int = 1) -> Callable:
  """``instantiate(key, features, labels, queries) -> votes (k + M, Q)``: one instantiation of
  the training phase on S = ``features[:num_examples]`` and M = ``num_crafted`` crafted points,
  the rows ``num_examples .. num_examples + M - 1`` (so ``features`` has ``num_examples + M``
  rows). The k teachers of S are trained once; each crafted point j gets its own extra teacher
  (row k + j) on one partition plus that point: a random partition for PATE ("random"), the
  first for CaPC ("fixed"). Pure; vmap it over keys for several instantiations."""
  _validate.check_choice("partitioning", partitioning, PARTITIONINGS)
  _validate.check_range("num_crafted", num_crafted, 1)
  width = -(-num_examples // num_teachers) + 1  # room for a crafted point in an extra row
  train = make_train_teacher(model, example_shape, config, width)

  def instantiate(key, features, labels, queries):
    key_split, key_pick, key_train = jax.random.split(key, 3)
    parts = partition(key_split, num_examples, num_teachers, partitioning, width)
    chosen = (jax.random.randint(key_pick, (num_crafted,), 0, num_teachers)
              if partitioning == "random" else jnp.zeros((num_crafted,), jnp.int32))
    free = jnp.argmin(parts.mask[chosen], axis=1)  # first padded slot of each chosen row
    rows = jnp.arange(num_crafted, dtype=jnp.int32)
    extra_indices = parts.indices[chosen].at[rows, free].set(num_examples + rows)
    extra_mask = parts.mask[chosen].at[rows, free].set(True)
    indices = jnp.concatenate([parts.indices, extra_indices])
    mask = jnp.concatenate([parts.mask, extra_mask])
    keys = jax.random.split(key_train, num_teachers + num_crafted)
    params = jax.vmap(train, in_axes=(0, None, None, 0, 0))(keys, features, labels, indices,
                                                            mask)
    return predict(model, params, queries)

  return instantiate


class VoteCounts(NamedTuple):
  """Votes counted over the instantiations: ``teachers[i, q, c]`` for the k teachers of S and
  ``extra[j, q, c]`` for the teacher holding crafted point j."""
  teachers: np.ndarray  # int64 (k, Q, C)
  extra: np.ndarray  # int64 (M, Q, C)
  num_instantiations: int

  def pate_probabilities(self):
    """PATE's :math:`P_q` (the k teachers' votes pooled), ``(Q, C)``, and :math:`P'_q` of
    each crafted point's teacher, ``(M, Q, C)``."""
    pooled = self.teachers.sum(axis=0)
    return (pooled / pooled.sum(axis=-1, keepdims=True),
            self.extra / self.extra.sum(axis=-1, keepdims=True))

  def capc_probabilities(self):
    r"""CaPC's :math:`P^i_q`, ``(k, Q, C)``, and :math:`P^{1\prime}_q` per crafted point,
    ``(M, Q, C)``."""
    return (self.teachers / self.teachers.sum(axis=-1, keepdims=True),
            self.extra / self.extra.sum(axis=-1, keepdims=True))


def count_votes(votes: np.ndarray, num_teachers: int, num_classes: int) -> VoteCounts:
  """:class:`VoteCounts` from the votes of :func:`make_ensemble`, shape ``(G, k + M, Q)``."""
  votes = np.asarray(votes)
  onehot = np.eye(num_classes, dtype=np.int64)[votes]  # (G, k + M, Q, C)
  summed = onehot.sum(axis=0)
  return VoteCounts(summed[:num_teachers], summed[num_teachers:], votes.shape[0])
