"""Conditional VAE: samples look like their class, the ELBO against NumPy, sampling and PNG
grids, argument checks."""

import functools

import jax
import jax.numpy as jnp
import matplotlib.image
import numpy as np
import pytest

from dpaudit import data, plots
from dpaudit.models import vae

PER_CLASS = 100  # 1,000 training images
SAMPLES_PER_CLASS = 50
# Small enough to fit in about 4 s on 2 CPU cores. With keys 0 to 3 it put the mean sample of
# 9 or 10 classes nearest its own class's data mean (9 with key 0 under these tests' XLA
# settings), the samples' mean intensity within 0.017 of the data's, and the final loss near
# 106 nats per image, against 203 for the best independent-pixels model.
CONFIG = vae.VaeConfig(latent_dim=16, width=8, epochs=20, batch_size=16, learning_rate=4e-3)


@pytest.fixture(scope="module")
def mnist(tmp_path_factory):
  """The first ``PER_CLASS`` images of each digit of mnist_subset (features in [0, 1])."""
  dataset = data.load("mnist_subset", data_dir=str(tmp_path_factory.mktemp("tensorflow_datasets")))
  index = np.concatenate([np.flatnonzero(dataset.labels == c)[:PER_CLASS] for c in range(10)])
  return dataset.features[index], dataset.labels[index]


@pytest.fixture(scope="module")
def fitted(mnist):
  images, labels = mnist
  epochs_seen = []
  model = vae.fit_vae(jax.random.key(0), images, labels, 10, CONFIG,
                      progress=lambda epoch, loss: epochs_seen.append((epoch, loss)))
  return model, epochs_seen


def _class_means(images, labels):
  return np.stack([images[labels == c].mean(axis=0).reshape(-1) for c in range(10)])


def _nearest_class_mean(sample_means, data_means):
  distances = np.sum((sample_means[:, None, :] - data_means[None, :, :]) ** 2, axis=-1)
  return distances.argmin(axis=1)


def test_samples_resemble_their_class(mnist, fitted):
  images, labels = mnist
  model, _ = fitted
  wanted = np.repeat(np.arange(10), SAMPLES_PER_CLASS)
  samples = np.asarray(vae.sample_vae(jax.random.key(1), model, wanted))
  data_means = _class_means(images, labels)
  nearest = _nearest_class_mean(_class_means(samples, wanted), data_means)
  assert np.sum(nearest == np.arange(10)) >= 8, f"class means nearest to classes {nearest}"
  # Data mean intensity is 0.13; a generator ignoring or mis-scaling ink would be far off.
  assert abs(samples.mean() - images.mean()) < 0.03
  # Control: the same check fails when the samples' labels are shifted by one, so it tests
  # the conditioning and not only that samples look like some digit.
  shifted = np.asarray(vae.sample_vae(jax.random.key(1), model, (wanted + 1) % 10))
  nearest_shifted = _nearest_class_mean(_class_means(shifted, wanted), data_means)
  assert np.sum(nearest_shifted == np.arange(10)) <= 2


def test_elbo_improves_and_beats_independent_pixels(mnist, fitted):
  images, _ = mnist
  model, epochs_seen = fitted
  history = model.history
  assert history.shape == (CONFIG.epochs,) and np.all(np.isfinite(history))
  assert [epoch for epoch, _ in epochs_seen] == list(range(1, CONFIG.epochs + 1))
  np.testing.assert_allclose([loss for _, loss in epochs_seen], history)
  assert history[-1] < 0.5 * history[0]
  # The negative ELBO bounds the negative log-likelihood; it must beat the best model of
  # independent pixels (each Bernoulli with its mean intensity), which knows no digit shapes.
  p = np.clip(images.mean(axis=0), 1e-6, 1 - 1e-6)
  independent = -np.sum(images * np.log(p) + (1 - images) * np.log1p(-p), axis=(1, 2, 3))
  assert history[-1] < 0.75 * independent.mean()


def test_vae_loss_matches_a_naive_numpy_computation():
  rng = np.random.default_rng(0)
  images = rng.uniform(size=(3, 4, 4, 2))
  images[0] = np.round(images[0])  # binary pixels too
  logits = rng.normal(scale=3.0, size=images.shape)
  mean = rng.normal(size=(3, 5))
  logvar = rng.normal(size=(3, 5))
  expected = np.zeros(3)
  for b in range(3):
    for x, l in zip(images[b].ravel(), logits[b].ravel()):
      s = 1.0 / (1.0 + np.exp(-l))
      expected[b] -= x * np.log(s) + (1 - x) * np.log(1 - s)
    for mu, lv in zip(mean[b], logvar[b]):  # KL(N(mu, var) || N(0, 1))
      var = np.exp(lv)
      expected[b] += 0.5 * (var + mu ** 2 - 1.0 - np.log(var))
  np.testing.assert_allclose(vae.vae_loss(logits, images, mean, logvar), expected, rtol=1e-5)
  np.testing.assert_allclose(jax.jit(vae.vae_loss)(logits, images, mean, logvar), expected,
                             rtol=1e-5)
  # Limit case: the prior as posterior costs no KL, and confident correct logits on binary
  # pixels cost (almost) no reconstruction.
  binary = np.round(images)
  loss = vae.vae_loss(60.0 * (2 * binary - 1), binary, np.zeros((3, 5)), np.zeros((3, 5)))
  np.testing.assert_allclose(loss, 0.0, atol=1e-20)


def test_sampling_is_deterministic_and_grids_round_trip_as_png(fitted, tmp_path):
  model, _ = fitted
  labels = np.array([0, 1, 2, 3, 4, 5, 6])
  first = vae.sample_vae(jax.random.key(3), model, labels)
  assert first.shape == (7, 28, 28, 1) and first.dtype == jnp.float32
  assert float(first.min()) >= 0.0 and float(first.max()) <= 1.0
  np.testing.assert_array_equal(first, vae.sample_vae(jax.random.key(3), model, labels))
  assert not np.allclose(first, vae.sample_vae(jax.random.key(4), model, labels))

  grid = vae.image_grid(first, columns=3)
  assert grid.shape == (3 * 28, 3 * 28) and grid.dtype == np.uint8
  np.testing.assert_array_equal(grid[28:56, 28:56], np.round(np.asarray(first[4, ..., 0]) * 255))
  assert not grid[56:, 28:].any()  # two empty cells in the last row
  path = tmp_path / "samples.png"
  plots.save_image_grid(path, first, columns=3)
  assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  read = matplotlib.image.imread(path)
  assert read.shape[:2] == (84, 84)
  for channel in range(3):  # gray: R = G = B = the grid's pixel
    np.testing.assert_array_equal(np.round(read[..., channel] * 255), grid)

  colour = np.linspace(0.0, 1.0, 5 * 8 * 4 * 3).reshape(5, 8, 4, 3)
  plots.save_image_grid(tmp_path / "colour.png", colour, columns=2)
  read = matplotlib.image.imread(tmp_path / "colour.png")
  assert read.shape[:2] == (3 * 8, 2 * 4)
  np.testing.assert_array_equal(np.round(read[..., :3] * 255), vae.image_grid(colour, 2))


@pytest.mark.parametrize("image_shape", [(32, 32, 3), (8, 12, 2)])
def test_any_height_and_width_divisible_by_four(image_shape):
  # Shapes only (jax.eval_shape compiles nothing): CIFAR-10's 32x32x3 and a non-square shape.
  module = vae.ConditionalVAE(image_shape, num_classes=3, latent_dim=5, width=4)
  images = jax.ShapeDtypeStruct((2,) + image_shape, jnp.float32)
  labels = jax.ShapeDtypeStruct((2,), jnp.int32)
  noise = jax.ShapeDtypeStruct((2, 5), jnp.float32)
  params = jax.eval_shape(module.init, jax.random.key(0), images, labels, noise)
  logits, mean, logvar = jax.eval_shape(module.apply, params, images, labels, noise)
  assert logits.shape == (2,) + image_shape and mean.shape == logvar.shape == (2, 5)
  z = jax.ShapeDtypeStruct((7, 5), jnp.float32)
  assert jax.eval_shape(functools.partial(module.apply, method=vae.ConditionalVAE.decode),
                        params, z, jax.ShapeDtypeStruct((7,), jnp.int32)).shape == (
                            (7,) + image_shape)
  with pytest.raises(ValueError, match=r"image_shape=\(30, 32, 3\): height and width must be "
                                       "multiples of 4"):
    jax.eval_shape(vae.ConditionalVAE((30, 32, 3), 3).init, jax.random.key(0),
                   jax.ShapeDtypeStruct((1, 30, 32, 3), jnp.float32),
                   jax.ShapeDtypeStruct((1,), jnp.int32),
                   jax.ShapeDtypeStruct((1, 16), jnp.float32))


def test_bad_arguments_fail_with_clear_messages():
  # Arguments are checked before any parameter is used: an unfitted model will do.
  model = vae.VaeModel(vae.ConditionalVAE((28, 28, 1), 10), None, vae.VaeConfig(), np.zeros(0))
  key = jax.random.key(0)
  images = np.zeros((4, 28, 28, 1), np.float32)
  labels = np.array([0, 1, 2, 3])
  config = vae.VaeConfig(epochs=1)
  with pytest.raises(ValueError, match=r"labels=10 \(at flat index 2\) is outside the valid "
                                       r"range \[0, 9\]"):
    vae.fit_vae(key, images, np.array([0, 1, 10, 3]), 10, config)
  with pytest.raises(ValueError, match=r"labels=-1 .* outside the valid range \[0, 9\]"):
    vae.fit_vae(key, images, np.array([0, -1, 2, 3]), 10, config)
  with pytest.raises(ValueError, match=r"labels must be a 1-D integer array"):
    vae.fit_vae(key, images, labels.astype(np.float32), 10, config)
  with pytest.raises(ValueError, match="labels hold 3 entries but images hold 4"):
    vae.fit_vae(key, images, labels[:3], 10, config)
  with pytest.raises(ValueError, match=r"rank 4\), got shape \(4, 28, 28\)"):
    vae.fit_vae(key, images[..., 0], labels, 10, config)
  with pytest.raises(ValueError, match="multiples of 4"):
    vae.fit_vae(key, np.zeros((4, 30, 30, 1)), labels, 10, config)
  with pytest.raises(ValueError, match=r"images hold 255.0, outside the valid range \[0, 1\]"):
    vae.fit_vae(key, images + 255.0, labels, 10, config)
  with pytest.raises(ValueError, match="num_classes=0 must be an integer >= 1"):
    vae.fit_vae(key, images, labels, 0, config)
  with pytest.raises(ValueError, match="config must be a VaeConfig"):
    vae.fit_vae(key, images, labels, 10, {"epochs": 1})
  with pytest.raises(ValueError, match="epochs=0 must be an integer >= 1"):
    vae.VaeConfig(epochs=0)
  with pytest.raises(ValueError, match="batch_size=0 must be an integer >= 1"):
    vae.VaeConfig(batch_size=0)
  with pytest.raises(ValueError, match=r"learning_rate=0.0 is outside the valid range \(0, inf\)"):
    vae.VaeConfig(learning_rate=0.0)
  with pytest.raises(ValueError, match=r"learning_rate=-0.1 is outside the valid range"):
    vae.VaeConfig(learning_rate=-0.1)
  with pytest.raises(ValueError, match="learning_rate=inf must be finite"):
    vae.VaeConfig(learning_rate=float("inf"))
  with pytest.raises(ValueError, match="latent_dim=0 must be an integer >= 1"):
    vae.VaeConfig(latent_dim=0)
  with pytest.raises(ValueError, match=r"labels=10 \(at flat index 1\) is outside the valid "
                                       r"range \[0, 9\]"):
    vae.sample_vae(key, model, np.array([3, 10]))
  with pytest.raises(ValueError, match="columns=0 must be an integer >= 1"):
    vae.image_grid(images, 0)
  with pytest.raises(ValueError, match="2 channels"):
    vae.image_grid(np.zeros((2, 5, 5, 2)), 1)
