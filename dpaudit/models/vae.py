r"""A class-conditional convolutional variational autoencoder: PANORAMIA's image generator.

PANORAMIA (Kazmi et al., "PANORAMIA: Privacy Auditing of Machine Learning Models without
Retraining", 2024) audits a trained model by telling its members apart from *synthetic*
non-members drawn from a generator fitted to part of the same distribution. This module is a
small, CPU-trainable stand-in for the paper's image generator: a conditional VAE (Sohn, Lee &
Yan, "Learning Structured Output Representation using Deep Conditional Generative Models",
2015) in the variational autoencoder framework of Kingma & Welling, "Auto-Encoding Variational
Bayes" (ICLR 2014).

* :class:`ConditionalVAE`: flax module. The encoder :math:`q_\phi(z \mid x, y)` is two stride-2
  convolutions (``H x W -> H/2 x W/2 -> H/4 x W/4``) whose flattened features, concatenated
  with the one-hot label, give the mean and log-variance of a diagonal Gaussian; the decoder
  :math:`p_\theta(x \mid z, y)` maps ``[z, one_hot(y)]`` by a dense layer to an
  ``H/4 x W/4`` feature map and by two 2x upsamplings to per-pixel Bernoulli logits. Any image
  whose height and width are multiples of 4 works (28x28x1 MNIST, 32x32x3 CIFAR-10).
* :func:`vae_loss`: the per-example negative ELBO, Eq. (10) of Kingma & Welling.
* :func:`fit_vae`: Adam on shuffled minibatches, one jitted step of static shape.
* :func:`sample_vae`: class-conditional samples, the decoder's Bernoulli means for
  :math:`z \sim \mathcal{N}(0, I)`.
* :func:`image_grid`: tile images into one picture (:func:`dpaudit.plots.save_image_grid` writes it
  as a PNG).

The reparameterisation noise is an explicit argument of the module (no flax RNG streams), so
every function here is pure in its PRNG key.

The upsamplings are sub-pixel convolutions (Shi et al., "Real-Time Single Image and Video
Super-Resolution Using an Efficient Sub-Pixel Convolutional Neural Network", CVPR 2016) rather
than ``nn.ConvTranspose``: a 3x3 convolution to four times the channels, each group of four
becoming a 2x2 block of pixels. It can represent any 4x4 stride-2 transposed convolution (each
output pixel of which reads 2x2 input pixels inside the same 3x3 neighbourhood), and XLA's CPU
backend computes its weight gradient fast, whereas a transposed convolution's weight gradient
(a convolution with a dilated kernel) took 10 times longer than every other layer together at
the default optimisation level and 100 times longer at level 0 (jax 0.10.2, 2 cores).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpaudit import _validate

PyTree = Any


def _check_image_shape(image_shape: Sequence[int]) -> tuple[int, int, int]:
  """``(H, W, C)`` with positive entries and H, W multiples of 4, as a tuple of ints."""
  shape = tuple(image_shape)
  if (len(shape) != 3 or any(isinstance(s, bool) or not isinstance(s, (int, np.integer))
                             or s < 1 for s in shape)):
    raise ValueError(f"image_shape={shape} must be (height, width, channels) of positive "
                     "integers")
  if shape[0] % 4 or shape[1] % 4:
    raise ValueError(f"image_shape={shape}: height and width must be multiples of 4 (the "
                     "encoder halves them twice), e.g. (28, 28, 1) or (32, 32, 3)")
  return tuple(int(s) for s in shape)


class _SubPixelUpsample(nn.Module):
  """Doubles height and width: a 3x3 convolution to ``4 * features`` channels whose groups of
  four become 2x2 blocks of output pixels (sub-pixel convolution, Shi et al., CVPR 2016; see
  the module docstring for why not ``nn.ConvTranspose``)."""
  features: int

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    batch, height, width, _ = x.shape
    h = nn.Conv(4 * self.features, (3, 3), padding="SAME")(x)
    h = h.reshape((batch, height, width, 2, 2, self.features)).transpose((0, 1, 3, 2, 4, 5))
    return h.reshape((batch, 2 * height, 2 * width, self.features))


class ConditionalVAE(nn.Module):
  r"""Class-conditional convolutional VAE on ``[B, H, W, C]`` images in ``[0, 1]``.

  Methods: :meth:`encode` ``(images, labels) -> (mean, logvar)``, :meth:`decode`
  ``(z, labels) -> logits`` and ``__call__(images, labels, noise) -> (logits, mean, logvar)``
  with the reparameterised latent :math:`z = \mu + \sigma \odot \varepsilon` (Kingma & Welling,
  2014, Sec. 2.4) for the given standard normal ``noise`` ``[B, latent_dim]``. Call the
  methods through ``module.apply({"params": params}, ..., method=ConditionalVAE.decode)``;
  ``module.init(key, images, labels, noise)`` creates every parameter.

  Attributes:
    image_shape: ``(H, W, C)``; H and W multiples of 4.
    num_classes: number of labels the model is conditioned on (labels in
      ``0 .. num_classes - 1``).
    latent_dim: dimension of :math:`z`.
    width: channels of the first convolution (the second has ``2 * width``).
  """
  image_shape: tuple[int, int, int]
  num_classes: int
  latent_dim: int = 16
  width: int = 32

  def setup(self):
    _check_image_shape(self.image_shape)
    _validate.check_integer("num_classes", self.num_classes, 1)
    _validate.check_integer("latent_dim", self.latent_dim, 1)
    _validate.check_integer("width", self.width, 1)
    self.enc_conv1 = nn.Conv(self.width, (3, 3), strides=(2, 2), padding="SAME")
    self.enc_conv2 = nn.Conv(2 * self.width, (3, 3), strides=(2, 2), padding="SAME")
    self.enc_mean = nn.Dense(self.latent_dim)
    self.enc_logvar = nn.Dense(self.latent_dim)
    height, width, _ = self.image_shape
    self.dec_dense = nn.Dense((height // 4) * (width // 4) * 2 * self.width)
    self.dec_up1 = _SubPixelUpsample(self.width)
    self.dec_up2 = _SubPixelUpsample(self.image_shape[2])

  def _one_hot(self, labels: jax.Array, dtype: Any) -> jax.Array:
    return jax.nn.one_hot(labels, self.num_classes, dtype=dtype)

  def encode(self, images: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Mean and log-variance ``[B, latent_dim]`` of :math:`q_\\phi(z \\mid x, y)`."""
    h = nn.relu(self.enc_conv1(images))
    h = nn.relu(self.enc_conv2(h))
    h = jnp.concatenate([h.reshape((h.shape[0], -1)), self._one_hot(labels, h.dtype)], axis=-1)
    return self.enc_mean(h), self.enc_logvar(h)

  def decode(self, z: jax.Array, labels: jax.Array) -> jax.Array:
    """Bernoulli logits ``[B, H, W, C]`` of :math:`p_\\theta(x \\mid z, y)`."""
    height, width, _ = self.image_shape
    h = jnp.concatenate([z, self._one_hot(labels, z.dtype)], axis=-1)
    h = nn.relu(self.dec_dense(h)).reshape((z.shape[0], height // 4, width // 4, 2 * self.width))
    h = nn.relu(self.dec_up1(h))
    return self.dec_up2(h)

  def __call__(self, images: jax.Array, labels: jax.Array, noise: jax.Array
               ) -> tuple[jax.Array, jax.Array, jax.Array]:
    mean, logvar = self.encode(images, labels)
    z = mean + jnp.exp(0.5 * logvar) * noise
    return self.decode(z, labels), mean, logvar


def vae_loss(logits: jax.Array, images: jax.Array, mean: jax.Array, logvar: jax.Array
             ) -> jax.Array:
  r"""Per-example negative ELBO of a Bernoulli-decoder, Gaussian-encoder VAE.

  The negative of the SGVB estimator of Eq. (10) of Kingma & Welling, Auto-Encoding
  Variational Bayes (2014), with one latent sample (:math:`L = 1`) and the Bernoulli decoder
  of their Appendix C.1:

  .. math::
     -\mathcal{L}(x) = \sum_{p} \big[\operatorname{softplus}(\ell_p) - x_p \ell_p\big]
       - \tfrac12 \sum_{j=1}^{J} \big(1 + \log\sigma_j^2 - \mu_j^2 - \sigma_j^2\big),

  the first sum being the binary cross-entropy :math:`-x_p\log s(\ell_p) - (1 - x_p)
  \log(1 - s(\ell_p))` of pixel :math:`p` (intensity :math:`x_p \in [0, 1]`, logit
  :math:`\ell_p`, :math:`s` the sigmoid) and the second the KL divergence of
  :math:`\mathcal{N}(\mu, \operatorname{diag}\sigma^2)` from :math:`\mathcal{N}(0, I)`.

  Args:
    logits: decoder logits ``[B, ...]``.
    images: targets of the same shape, in ``[0, 1]``.
    mean, logvar: encoder outputs :math:`\mu` and :math:`\log\sigma^2`, ``[B, J]``.

  Returns:
    ``[B]`` negative ELBO in nats per example.
  """
  _validate.check_same_shape("logits", logits, "images", images)
  _validate.check_same_shape("mean", mean, "logvar", logvar)
  reconstruction = jax.nn.softplus(logits) - images * logits
  reconstruction = jnp.sum(reconstruction.reshape((reconstruction.shape[0], -1)), axis=-1)
  kl = -0.5 * jnp.sum(1.0 + logvar - jnp.square(mean) - jnp.exp(logvar), axis=-1)
  return reconstruction + kl


@dataclasses.dataclass(frozen=True)
class VaeConfig:
  """Architecture and training of :func:`fit_vae`.

  The defaults fit the 5,000 images of ``mnist_subset`` in about 25 s on 2 CPU cores, to a
  negative ELBO near 99 nats per image, with the mean sample of every class nearest that
  class's data mean. Small batches and a large step size matter more than width: the decoder
  learns to rely on the label (rather than on class information in :math:`z`) only after
  enough updates.

  Attributes:
    latent_dim: dimension of the latent :math:`z`.
    width: channels of the first convolution (the second has twice as many).
    epochs: passes over the data.
    batch_size: minibatch size (clamped to the number of images); each epoch is a fresh
      permutation cut into ``N // batch_size`` full batches, the ragged remainder being left
      out of that epoch.
    learning_rate: Adam's step size.
  """
  latent_dim: int = 16
  width: int = 32
  epochs: int = 20
  batch_size: int = 32
  learning_rate: float = 2e-3

  def __post_init__(self):
    _validate.check_integer("latent_dim", self.latent_dim, 1)
    _validate.check_integer("width", self.width, 1)
    _validate.check_integer("epochs", self.epochs, 1)
    _validate.check_integer("batch_size", self.batch_size, 1)
    _validate.check_range("learning_rate", self.learning_rate, 0.0, None, low_open=True)
    if not math.isfinite(self.learning_rate):
      raise ValueError(f"learning_rate={self.learning_rate} must be finite")


class VaeModel(NamedTuple):
  """A fitted :class:`ConditionalVAE`: the module, its parameters, the config it was trained
  with and ``history``, the mean negative ELBO (nats per image) of each epoch's minibatches."""
  module: ConditionalVAE
  params: PyTree
  config: VaeConfig
  history: np.ndarray


def _check_images(images: Any, divisible_by_4: bool = True) -> np.ndarray:
  """Numeric ``[N, H, W, C]`` in ``[0, 1]`` (H and W multiples of 4 if ``divisible_by_4``)."""
  images = np.asarray(images)
  if images.dtype.kind not in "biuf":
    raise ValueError(f"images must be numeric, got dtype {images.dtype}")
  if images.ndim != 4:
    raise ValueError(f"images must have shape [N, H, W, C] (rank 4), got shape {images.shape}")
  if divisible_by_4:
    _check_image_shape(images.shape[1:])
  bad = ~np.isfinite(images) | (images < 0) | (images > 1)
  if np.any(bad):
    value = images.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]].item()
    raise ValueError(f"images hold {value}, outside the valid range [0, 1] (scale 8-bit pixels "
                     "by 1/255)")
  return images


def _check_labels(labels: Any, num_classes: int, size: int | None = None) -> np.ndarray:
  labels = np.asarray(labels)
  if labels.ndim != 1 or labels.dtype.kind not in "iu":
    raise ValueError(f"labels must be a 1-D integer array, got {labels.dtype} of shape "
                     f"{labels.shape}")
  if size is not None and labels.shape[0] != size:
    raise ValueError(f"labels hold {labels.shape[0]} entries but images hold {size}; they "
                     "must match")
  _validate.check_range("labels", labels, 0, num_classes - 1)
  return labels


def _make_step(module: ConditionalVAE, optimizer: optax.GradientTransformation) -> Callable:
  """The pure update ``(params, opt_state, key, step, images, labels, indices) -> (params,
  opt_state, loss)`` on the minibatch ``images[indices]`` with the reparameterisation noise of
  ``fold_in(key, step)``; ``loss`` is the minibatch's mean negative ELBO.

  :func:`fit_vae` calls it from a Python loop rather than scanning it over an epoch with
  ``lax.scan``: XLA's CPU backend computes convolution weight gradients inside a loop body up
  to 80 times slower than at the top level (jax 0.10.2 on 2 cores; a scanned epoch ran 5 times
  slower than the same steps dispatched from Python), and a dispatch costs little beside a
  step.
  """

  def batch_loss(params, images, labels, noise):
    logits, mean, logvar = module.apply({"params": params}, images, labels, noise)
    return jnp.mean(vae_loss(logits, images, mean, logvar))

  def step(params, opt_state, key, step_index, images, labels, indices):
    batch_images, batch_labels = images[indices], labels[indices]
    noise = jax.random.normal(jax.random.fold_in(key, step_index),
                              (indices.shape[0], module.latent_dim), batch_images.dtype)
    loss, grads = jax.value_and_grad(batch_loss)(params, batch_images, batch_labels, noise)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  return step


@functools.partial(jax.jit, static_argnums=(2, 3))
def _epoch_plan(key: jax.Array, epoch: jax.Array, num_examples: int, batch_size: int
                ) -> tuple[jax.Array, jax.Array]:
  """Epoch ``epoch``'s minibatches, ``[num_examples // batch_size, batch_size]`` indices of a
  random permutation (the ragged remainder left out), and the key of its noise."""
  key_order, key_noise = jax.random.split(jax.random.fold_in(key, epoch))
  num_batches = num_examples // batch_size
  order = jax.random.permutation(key_order, num_examples)[:num_batches * batch_size]
  return order.reshape((num_batches, batch_size)), key_noise


def fit_vae(key: jax.Array, images: Any, labels: Any, num_classes: int, config: VaeConfig,
            progress: Callable[[int, float], None] | None = None) -> VaeModel:
  """Fits a :class:`ConditionalVAE` to labelled images by maximising the ELBO with Adam.

  Args:
    key: PRNG key (initialisation, shuffling and reparameterisation noise derive from it).
    images: ``[N, H, W, C]`` in ``[0, 1]``, H and W multiples of 4; computed in float32.
    labels: integer ``[N]`` in ``0 .. num_classes - 1``.
    num_classes: number of classes, >= 1.
    config: the :class:`VaeConfig`.
    progress: called as ``progress(epoch, mean_loss)`` after every epoch (1-based).

  Returns:
    :class:`VaeModel` with the trained parameters and the per-epoch mean negative ELBO.

  Each epoch draws a fresh permutation and runs one jitted step per full minibatch (static
  shapes: one compilation for the whole fit), the ``N mod batch_size`` left-over images sitting
  out that epoch.
  """
  _validate.check_key(key)
  num_classes = _validate.check_integer("num_classes", num_classes, 1)
  if not isinstance(config, VaeConfig):
    raise ValueError(f"config must be a VaeConfig, got {type(config).__name__}")
  images = _check_images(images)
  labels = _check_labels(labels, num_classes, images.shape[0])
  num_examples = images.shape[0]
  _validate.check_range("number of images", num_examples, 1)
  batch_size = min(config.batch_size, num_examples)

  module = ConditionalVAE(tuple(int(s) for s in images.shape[1:]), num_classes,
                          config.latent_dim, config.width)
  images = jnp.asarray(images, jnp.float32)
  labels = jnp.asarray(labels, jnp.int32)
  key_init, key_train = jax.random.split(key)
  # One compiled program instead of one per operation (seconds on CPU).
  params = jax.jit(module.init)(key_init, images[:1], labels[:1],
                                jnp.zeros((1, config.latent_dim), jnp.float32))["params"]
  optimizer = optax.adam(config.learning_rate)
  opt_state = jax.jit(optimizer.init)(params)
  step_fn = jax.jit(_make_step(module, optimizer), donate_argnums=(0, 1))
  history = []
  for epoch in range(config.epochs):
    batches, noise_key = _epoch_plan(key_train, np.int32(epoch), num_examples, batch_size)
    losses = []
    for step, batch in enumerate(np.asarray(batches)):
      params, opt_state, loss = step_fn(params, opt_state, noise_key, np.int32(step), images,
                                        labels, batch)
      losses.append(loss)
    history.append(float(np.mean(jax.device_get(losses))))
    if progress is not None:
      progress(epoch + 1, history[-1])
  return VaeModel(module, params, config, np.asarray(history))


def sample_vae(key: jax.Array, model: VaeModel, labels: Any) -> jax.Array:
  r"""Images drawn from the fitted generator for the given labels.

  For each label :math:`y` draws :math:`z \sim \mathcal{N}(0, I)` and returns the decoder's
  Bernoulli means :math:`\operatorname{sigmoid}(\ell(z, y))` (the usual VAE "sample": the
  mean image of :math:`p_\theta(x \mid z, y)`, not a binarised draw).

  Args:
    key: PRNG key of the latents.
    model: a :class:`VaeModel` from :func:`fit_vae`.
    labels: integer ``[M]`` in ``0 .. num_classes - 1``.

  Returns:
    float32 ``[M, H, W, C]`` in ``[0, 1]``.
  """
  _validate.check_key(key)
  module = model.module
  labels = jnp.asarray(labels)
  if labels.ndim != 1 or not jnp.issubdtype(labels.dtype, jnp.integer):
    raise ValueError(f"labels must be a 1-D integer array, got {labels.dtype} of shape "
                     f"{labels.shape}")
  _validate.check_range("labels", labels, 0, module.num_classes - 1)
  return _sample_fn(module)(key, model.params, labels)


@functools.lru_cache(maxsize=32)
def _sample_fn(module: ConditionalVAE) -> Callable:
  """Jitted ``(key, params, labels) -> Bernoulli means``, compiled once per module and shape
  (op by op, the decoder's dozens of operations would each compile on first use)."""

  def sample(key, params, labels):
    z = jax.random.normal(key, (labels.shape[0], module.latent_dim), jnp.float32)
    logits = module.apply({"params": params}, z, labels, method=ConditionalVAE.decode)
    return jax.nn.sigmoid(logits).astype(jnp.float32)

  return jax.jit(sample)


def image_grid(images: Any, columns: int) -> np.ndarray:
  """Tiles ``[N, H, W, C]`` images in ``[0, 1]`` row by row into one uint8 picture.

  Args:
    images: ``[N, H, W, C]`` with ``C`` 1 (grayscale) or 3 (RGB), values in ``[0, 1]``.
    columns: images per row (>= 1); the last row is padded with black cells.

  Returns:
    uint8 ``[rows * H, columns * W]`` for grayscale, ``[rows * H, columns * W, 3]`` for RGB,
    with ``rows = ceil(N / columns)``.
  """
  columns = _validate.check_integer("columns", columns, 1)
  images = _check_images(images, divisible_by_4=False)
  num, height, width, channels = images.shape
  if channels not in (1, 3):
    raise ValueError(f"images have {channels} channels; image_grid takes 1 (grayscale) or 3 "
                     "(RGB)")
  _validate.check_range("number of images", num, 1)
  rows = -(-num // columns)
  cells = np.zeros((rows * columns, height, width, channels), np.uint8)
  cells[:num] = np.round(images * 255.0).astype(np.uint8)
  grid = cells.reshape(rows, columns, height, width, channels).transpose(0, 2, 1, 3, 4)
  grid = grid.reshape(rows * height, columns * width, channels)
  return grid[..., 0] if channels == 1 else grid
