"""TwoHeadMLP: output shapes, parameter names, and per-example clipping of Eq. (12)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import models
from dpaudit.audits import dpsgd as audit
from dpaudit.dpsgd import clipping


def _model():
  return models.TwoHeadMLP(hidden_sizes=(16, 8), num_classes=5, num_tags=7, example_ndim=3)


def test_output_shapes_single_and_batch():
  model = _model()
  x = jnp.ones((4, 4, 1))
  params = model.init(jax.random.key(0), x)["params"]
  main, tag = model.apply({"params": params}, x)
  assert main.shape == (5,) and tag.shape == (7,)
  main_b, tag_b = model.apply({"params": params}, jnp.ones((3, 4, 4, 1)))
  assert main_b.shape == (3, 5) and tag_b.shape == (3, 7)
  # A batch row equals the same example alone.
  np.testing.assert_allclose(main_b[0], main, rtol=1e-6)
  np.testing.assert_allclose(tag_b[0], tag, rtol=1e-6)


def test_param_names_and_shared_encoder():
  model = _model()
  params = model.init(jax.random.key(0), jnp.ones((2, 4, 4, 1)))["params"]
  assert "main_head" in params and "tag_head" in params
  assert params["main_head"]["kernel"].shape == (8, 5)
  assert params["tag_head"]["kernel"].shape == (8, 7)
  assert len(params) == 4  # two hidden Dense layers + two heads


@pytest.mark.parametrize("tag_bits", [1, 3])
def test_ghost_and_vmap_clipping_agree_on_multi_task_loss(tag_bits):
  model = models.TwoHeadMLP(hidden_sizes=(16,), num_classes=4, num_tags=6, example_ndim=3)
  rng = np.random.default_rng(0)
  n = 10
  x = jnp.asarray(rng.normal(size=(n, 4, 4, 1)).astype(np.float32))
  labels = rng.integers(0, 4, n)
  is_canary = np.arange(n) % 3 == 0
  tags = np.where(is_canary[:, None], rng.integers(0, 6, (n, tag_bits)), -1)
  packed = audit.pack_multi_task_labels(labels, tags, is_canary)
  assert packed.shape == (n, 2 + tag_bits) and packed.dtype == np.int32
  np.testing.assert_array_equal(packed[:, 0], labels)
  np.testing.assert_array_equal(packed[:, -1], is_canary.astype(np.int32))
  params = model.init(jax.random.key(1), x)["params"]
  mask = jnp.asarray(np.arange(n) != 4)  # one padded row
  loss_fn = audit.multi_task_loss_fn(1.0)
  # Jitted: one compilation per strategy instead of one per operation.
  outs = {s: jax.jit(lambda p, s=s: clipping.clipped_grad_sum(
      model, p, x, jnp.asarray(packed), mask, l2_clip_norm=0.5, loss_fn=loss_fn, strategy=s))(
          params) for s in ("ghost", "vmap")}
  for a, b in zip(jax.tree.leaves(outs["ghost"].grad_sum), jax.tree.leaves(outs["vmap"].grad_sum)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(outs["ghost"].grad_norms, outs["vmap"].grad_norms, rtol=1e-4)
  # The tag head only learns from canaries.
  only_main = jax.jit(lambda p: clipping.clipped_grad_sum(
      model, p, x[~is_canary], jnp.asarray(packed[~is_canary]), l2_clip_norm=0.5,
      loss_fn=loss_fn, strategy="vmap"))(params)
  assert float(jnp.max(jnp.abs(only_main.grad_sum["tag_head"]["kernel"]))) == 0.0
  # The single-example form of the loss matches the batched one.
  logits = model.apply({"params": params}, x)
  batched = loss_fn(logits, jnp.asarray(packed))
  single = loss_fn((logits[0][0], logits[1][0]), jnp.asarray(packed[0]))
  np.testing.assert_allclose(single, batched[0], rtol=1e-6)
