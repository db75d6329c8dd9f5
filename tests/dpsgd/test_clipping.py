"""Per-example clipping: ghost norms and vmap agree with an explicit per-example loop."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import models
from dpaudit.dpsgd import clipping


def _loop_reference(model, params, inputs, labels, mask, l2_clip_norm):
  """Independent reference: one gradient per example in a Python loop, clipped in NumPy."""
  total = jax.tree.map(lambda p: np.zeros(p.shape, np.float64), params)
  norms = []
  grad = jax.jit(jax.grad(lambda p, x, y: clipping.softmax_cross_entropy(
      model.apply({"params": p}, x), y)))
  for i in range(inputs.shape[0]):
    g = jax.tree.map(lambda leaf: np.asarray(leaf, np.float64),
                     grad(params, inputs[i], labels[i]))
    norm = np.sqrt(sum(np.sum(leaf**2) for leaf in jax.tree.leaves(g)))
    norms.append(norm * mask[i])
    scale = mask[i] * (min(1.0, l2_clip_norm / norm) if norm > 0 else 1.0)
    total = jax.tree.map(lambda t, leaf: t + scale * leaf, total, g)
  return total, np.array(norms)


def _assert_trees_close(actual, expected, rtol):
  for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected)):
    scale = np.max(np.abs(e)) + 1e-12
    np.testing.assert_array_less(np.max(np.abs(np.asarray(a, np.float64) - e)) / scale, rtol)


CASES = [("mlp", (28, 28, 1), 6, 0.5), ("mlp", (28, 28, 1), 6, np.inf),
         ("logistic", (13,), 6, 0.5), ("lenet5", (28, 28, 1), 5, 0.5),
         ("lenet5", (8, 8, 1), 6, 0.5), ("lenet5", (8, 8, 1), 6, np.inf),
         ("wrn16_4", (8, 8, 3), 2, 0.5)]


@pytest.mark.parametrize("name, example_shape, batch, l2_clip_norm", CASES)
def test_strategies_match_per_example_loop(name, example_shape, batch, l2_clip_norm):
  model = models.make_model(name, example_shape, 4)
  inputs = jax.random.normal(jax.random.key(1), (batch,) + example_shape, jnp.float32)
  labels = jnp.arange(batch) % 4
  params = jax.jit(model.init)(jax.random.key(0), inputs)["params"]
  mask = np.ones(batch, np.float32)
  mask[1] = 0.0  # a padding slot contributes nothing
  expected, expected_norms = _loop_reference(model, params, inputs, labels, mask, l2_clip_norm)
  assert clipping.resolve_strategy(model, params, inputs, "auto") == "ghost"
  runs = [("vmap", "auto"), ("ghost", "gram"), ("ghost", "per_layer")]
  for strategy, conv_norm in runs:
    out = jax.jit(lambda p, x, y, m, s=strategy, c=conv_norm: clipping.clipped_grad_sum(
        model, p, x, y, m, l2_clip_norm=l2_clip_norm, strategy=s, conv_norm=c))(
            params, inputs, labels, mask)
    _assert_trees_close(out.grad_sum, expected, rtol=2e-5)
    np.testing.assert_allclose(out.grad_norms, expected_norms, rtol=2e-5)
    assert out.losses[1] == 0.0 and out.grad_norms[1] == 0.0


def test_each_example_contributes_at_most_the_clip_norm():
  model = models.make_model("mlp", (10,), 3)
  inputs = 10.0 * jax.random.normal(jax.random.key(3), (5, 10))
  params = model.init(jax.random.key(0), inputs)["params"]
  clipped = jax.jit(lambda x, y: clipping.clipped_grad_sum(model, params, x, y,
                                                          l2_clip_norm=0.1, strategy="ghost"))
  for i in range(5):
    one = clipped(inputs[i:i + 1], jnp.array([i % 3]))
    norm = np.sqrt(sum(float(jnp.sum(g**2)) for g in jax.tree.leaves(one.grad_sum)))
    assert float(one.grad_norms[0]) > 0.1  # the example is clipped ...
    np.testing.assert_allclose(norm, 0.1, rtol=1e-5)  # ... to exactly C


def test_no_clipping_gives_the_sum_of_gradients():
  model = models.make_model("lenet5", (8, 8, 1), 10)
  inputs = jax.random.normal(jax.random.key(4), (7, 8, 8, 1))
  labels = jnp.arange(7)
  params = model.init(jax.random.key(0), inputs)["params"]
  # Jitted: one compilation each instead of one per operation (most of the test's time).
  mean_grad = jax.jit(jax.grad(lambda p: jnp.mean(clipping.softmax_cross_entropy(
      model.apply({"params": p}, inputs), labels))))(params)
  out = jax.jit(lambda p: clipping.clipped_grad_sum(model, p, inputs, labels,
                                                    l2_clip_norm=np.inf))(params)
  _assert_trees_close(out.grad_sum, jax.tree.map(lambda g: 7 * np.asarray(g, np.float64),
                                                 mean_grad), rtol=2e-5)


class _SharedLayer(nn.Module):
  """Applies one Dense layer twice: ghost norms would miss the cross term, so vmap is used."""

  @nn.compact
  def __call__(self, x):
    dense = nn.Dense(x.shape[-1])
    return nn.Dense(3)(dense(nn.relu(dense(x))))


class _RawParam(nn.Module):
  """A parameter outside any supported layer."""

  @nn.compact
  def __call__(self, x):
    scale = self.param("scale", nn.initializers.ones, (x.shape[-1],))
    return nn.Dense(3)(x * scale)


@pytest.mark.parametrize("module", [_SharedLayer(), _RawParam()])
def test_unsupported_models_fall_back_to_vmap(module):
  inputs = jax.random.normal(jax.random.key(5), (4, 6))
  labels = jnp.array([0, 1, 2, 0])
  params = module.init(jax.random.key(0), inputs)["params"]
  assert not clipping.ghost_supported(module, params, inputs)
  assert clipping.resolve_strategy(module, params, inputs, "auto") == "vmap"
  with pytest.raises(clipping.GhostUnsupportedError):
    clipping.clipped_grad_sum(module, params, inputs, labels, l2_clip_norm=1.0,
                              strategy="ghost")
  out = jax.jit(lambda p: clipping.clipped_grad_sum(module, p, inputs, labels,
                                                    l2_clip_norm=1.0))(params)
  expected, _ = _loop_reference(module, params, inputs, labels, np.ones(4), 1.0)
  _assert_trees_close(out.grad_sum, expected, rtol=2e-5)


def test_bad_arguments_raise_clear_errors():
  model = models.make_model("logistic", (4,), 2)
  inputs = jnp.ones((3, 4))
  params = model.init(jax.random.key(0), inputs)["params"]
  labels = jnp.zeros(3, jnp.int32)
  with pytest.raises(ValueError, match="l2_clip_norm=0.0 is outside"):
    clipping.clipped_grad_sum(model, params, inputs, labels, l2_clip_norm=0.0)
  with pytest.raises(ValueError, match="strategy='fast' is not one of"):
    clipping.clipped_grad_sum(model, params, inputs, labels, l2_clip_norm=1.0, strategy="fast")
  with pytest.raises(ValueError, match="conv_norm='x' is not one of"):
    clipping.clipped_grad_sum(model, params, inputs, labels, l2_clip_norm=1.0, conv_norm="x")
  with pytest.raises(ValueError, match="share one batch axis"):
    clipping.clipped_grad_sum(model, params, inputs, labels[:2], l2_clip_norm=1.0)
