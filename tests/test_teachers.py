"""Teacher ensembles: partitions, one vmapped program equal to a loop, vote counts."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import models
from dpaudit import teachers as T


@pytest.mark.parametrize("partitioning", ["random", "fixed"])
def test_partitions_are_disjoint_and_cover_the_set(partitioning):
  parts = T.partition(jax.random.key(0), 23, 5, partitioning, width=6)
  indices, mask = np.asarray(parts.indices), np.asarray(parts.mask)
  assert indices.shape == (5, 6)
  chosen = indices[mask]
  assert sorted(chosen.tolist()) == list(range(23))
  assert sorted(mask.sum(axis=1).tolist()) == [4, 4, 5, 5, 5]
  if partitioning == "fixed":
    assert indices[0, :5].tolist() == [0, 1, 2, 3, 4]
  other = T.partition(jax.random.key(1), 23, 5, partitioning, width=6)
  same = np.array_equal(np.asarray(other.indices), indices)
  assert same == (partitioning == "fixed")
  with pytest.raises(ValueError, match="num_examples=3 is below num_teachers=5"):
    T.partition(jax.random.key(0), 3, 5, partitioning)
  with pytest.raises(ValueError, match="width=2 is below the largest partition"):
    T.partition(jax.random.key(0), 23, 5, partitioning, width=2)


def _toy(n=60, dim=5, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, dim)).astype(np.float32)
  y = (x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 1).astype(np.int32)
  return jnp.asarray(x), jnp.asarray(y)


def test_vmapped_teachers_equal_a_loop_over_teachers():
  x, y = _toy()
  model = models.make_model("mlp", (5,), 3)
  config = T.TeacherConfig(epochs=3, batch_size=4)
  parts = T.partition(jax.random.key(2), 60, 3, "random")
  train = T.make_train_teacher(model, (5,), config, parts.indices.shape[1])
  keys = jax.random.split(jax.random.key(3), 3)
  vmapped = jax.jit(jax.vmap(train, in_axes=(0, None, None, 0, 0)))(keys, x, y, parts.indices,
                                                                    parts.mask)
  for i in range(3):
    one = jax.jit(train)(keys[i], x, y, parts.indices[i], parts.mask[i])
    for a, b in zip(jax.tree_util.tree_leaves(one), jax.tree_util.tree_leaves(vmapped)):
      np.testing.assert_allclose(a, b[i], rtol=1e-5, atol=1e-6)
  votes = T.predict(model, vmapped, x[:7])
  assert votes.shape == (3, 7) and votes.dtype == jnp.int32


def test_a_teacher_learns_only_from_its_partition():
  """Rows outside the mask never reach the gradient: relabelling them changes nothing."""
  x, y = _toy()
  model = models.make_model("logistic", (5,), 3)
  parts = T.partition(jax.random.key(4), 60, 3, "fixed")
  train = jax.jit(T.make_train_teacher(model, (5,), T.TeacherConfig(epochs=2, batch_size=4),
                                       parts.indices.shape[1]))
  outside = ~np.isin(np.arange(60), np.asarray(parts.indices[0][parts.mask[0]]))
  y_other = jnp.where(jnp.asarray(outside), (y + 1) % 3, y)
  a = train(jax.random.key(5), x, y, parts.indices[0], parts.mask[0])
  b = train(jax.random.key(5), x, y_other, parts.indices[0], parts.mask[0])
  for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
    np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("partitioning", ["random", "fixed"])
def test_ensemble_instantiations_and_vote_counts(partitioning):
  x, y = _toy(n=62)
  y = y.at[60:].set((y[60:] + 1) % 3)  # two mislabelled crafted points
  model = models.make_model("logistic", (5,), 3)
  instantiate = T.make_ensemble(model, (5,), 60, 4, partitioning,
                                T.TeacherConfig(epochs=20, batch_size=4, learning_rate=0.05),
                                num_crafted=2)
  votes = jax.jit(jax.vmap(instantiate, in_axes=(0, None, None, None)))(
      jax.random.split(jax.random.key(6), 3), x, y, x[:10])
  assert votes.shape == (3, 6, 10)
  assert np.mean(np.asarray(votes[:, :4]) == np.asarray(y[:10])) > 0.6  # teachers learnt
  counts = T.count_votes(votes, 4, 3)
  assert counts.teachers.shape == (4, 10, 3) and counts.extra.shape == (2, 10, 3)
  assert np.all(counts.teachers.sum(-1) == 3) and counts.num_instantiations == 3
  p, p_extra = counts.pate_probabilities()
  np.testing.assert_allclose(p.sum(-1), 1.0)
  per_teacher, first_extra = counts.capc_probabilities()
  assert per_teacher.shape == (4, 10, 3)
  np.testing.assert_allclose(first_extra, p_extra)
