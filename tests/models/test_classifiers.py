"""Models: single example vs batch, the architectures' parameter counts, argument checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import models


def _num_params(params):
  return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(params))


@pytest.mark.parametrize("name, example_shape, expected_params", [
    ("mlp", (28, 28, 1), 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10),
    ("logistic", (30,), 30 * 2 + 2),
    # LeNet-5 on 28x28: conv 1->6 5x5, conv 6->16 5x5, 400-120-84-10 (the classic 61,706).
    ("lenet5", (28, 28, 1), 156 + 2416 + 48120 + 10164 + 850),
])
def test_parameter_counts(name, example_shape, expected_params):
  num_classes = 2 if name == "logistic" else 10
  model = models.make_model(name, example_shape, num_classes)
  params = model.init(jax.random.key(0), jnp.zeros(example_shape))["params"]
  assert _num_params(params) == expected_params


def test_wide_resnet_16_4_size_and_shapes():
  model = models.make_model("wrn16_4", (32, 32, 3), 10)
  x = jax.random.normal(jax.random.key(1), (2, 32, 32, 3))
  params = model.init(jax.random.key(0), x)["params"]
  # WRN-16-4 has about 2.75M parameters (Zagoruyko and Komodakis, 2016, Table 1).
  assert 2.7e6 < _num_params(params) < 2.8e6
  assert model.apply({"params": params}, x).shape == (2, 10)
  assert not any("BatchNorm" in "/".join(map(str, path))
                 for path, _ in jax.tree_util.tree_leaves_with_path(params))


@pytest.mark.parametrize("name, example_shape", [
    ("mlp", (28, 28, 1)), ("mlp", (13,)), ("lenet5", (28, 28, 1)), ("lenet5", (8, 8, 1)),
    ("wrn16_4", (16, 16, 3)), ("logistic", (64,)),
])
def test_single_example_equals_batch_row(name, example_shape):
  model = models.make_model(name, example_shape, 3)
  x = jax.random.normal(jax.random.key(2), (4,) + example_shape)
  params = model.init(jax.random.key(0), x)["params"]
  batch = model.apply({"params": params}, x)
  assert batch.shape == (4, 3)
  for i in range(4):
    single = model.apply({"params": params}, x[i])
    assert single.shape == (3,)
    np.testing.assert_allclose(single, batch[i], rtol=1e-5, atol=1e-6)
  # Extra leading axes are batch axes too.
  nested = model.apply({"params": params}, x.reshape((2, 2) + example_shape))
  np.testing.assert_allclose(nested.reshape(4, 3), batch, rtol=1e-5, atol=1e-6)


def test_make_model_rejects_bad_arguments():
  with pytest.raises(ValueError, match="model='resnet' is not one of"):
    models.make_model("resnet", (28, 28, 1), 10)
  with pytest.raises(ValueError, match="num_classes=1 is outside"):
    models.make_model("mlp", (28, 28, 1), 1)
  with pytest.raises(ValueError, match="needs image examples"):
    models.make_model("lenet5", (30,), 2)
  with pytest.raises(ValueError, match="depth=15"):
    models.WideResNet(depth=15).init(jax.random.key(0), jnp.zeros((1, 8, 8, 3)))


def test_resnet18_size_shapes_and_no_batch_norm():
  """ResNet-18 for small images: 11,173,962 parameters with 10 classes (He et al. 2016, the
  CIFAR variant with a 3x3 stem), the same count as with batch norm's scale and bias."""
  model = models.make_model("resnet18", (8, 8, 3), 10)
  params = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 8, 8, 3))))
  assert _num_params(params["params"]) == 11_173_962
  assert isinstance(model, models.ResNet18) and "BatchNorm" not in str(params)
  # a narrow one: one example vs a batch, four stages halving 8x8 down to 1x1
  small = models.ResNet18(num_classes=3, width=4)
  x = jax.random.normal(jax.random.key(2), (4, 8, 8, 1))
  params = small.init(jax.random.key(0), x)["params"]
  batch = small.apply({"params": params}, x)
  assert batch.shape == (4, 3) and np.all(np.isfinite(batch))
  np.testing.assert_allclose(small.apply({"params": params}, x[1]), batch[1], rtol=1e-5,
                             atol=1e-6)
  with pytest.raises(ValueError, match="needs image examples"):
    models.make_model("resnet18", (30,), 2)
