r"""Synthetic-data generators for tabular data: the generators DOMIAS audits.

DOMIAS (van Breugel, Sun, Qian & van der Schaar, "Membership Inference Attacks against
Synthetic Data through Overfitting Detection", AISTATS 2023) scores a record by the ratio of
the synthetic data's density to the reference data's density at it; the attack works because a
generator that overfits puts extra mass near its training records. Sec. 5.1 and 5.4 of that
paper audit TVAE (the main generator, trained up to 2,000 epochs on 500 rows of California
Housing, App. A.3); Fig. 6 compares WGAN-GP (gradient penalty 10), ADS-GAN over its privacy
parameter :math:`\lambda \in [0.2, 1.5]`, an additive-noise baseline and DP generators. This
module provides them on float arrays ``[n, d]``:

* :class:`TabularTransform` / :func:`fit_transform`: the representation the neural generators
  learn in. Continuous columns are standardised; discrete columns (integer-valued with at most
  ``DISCRETE_MAX_CATEGORIES`` distinct values, or given) are one-hot encoded.
* TVAE (Xu, Skoularidou, Cuesta-Infante & Veeramachaneni, "Modeling Tabular Data using
  Conditional GAN", NeurIPS 2019, the TVAE baseline of Sec. 4 and App.): :class:`TvaeConfig`,
  :func:`fit_tvae`, :func:`fit_tvae_seeds` (``jax.vmap`` over seeds), :func:`sample_tvae`.
* DP-TVAE: the same network trained by DP-SGD through :mod:`dpaudit.dpsgd.training`, with the
  noise multiplier calibrated to a target :math:`(\varepsilon, \delta)` by
  :func:`dpaudit.accounting.calibrate_noise_multiplier`: :class:`DpTvaeConfig`,
  :func:`fit_dp_tvae`.
* WGAN-GP (Gulrajani, Ahmed, Arjovsky, Dumoulin & Courville, "Improved Training of Wasserstein
  GANs", NeurIPS 2017, Alg. 1): :class:`GanConfig`, :func:`fit_wgan_gp`, :func:`sample_gan`.
* ADS-GAN (Yoon, Drumright & van der Schaar, "Anonymization through Data Synthesis using
  Generative Adversarial Networks", IEEE JBHI 2020): the WGAN-GP with a generator conditioned
  on a real record and the identifiability regulariser: :class:`AdsGanConfig`,
  :func:`fit_ads_gan`, :func:`sample_gan`.
* :func:`additive_noise`: the baseline of Fig. 6, resampled training rows plus Gaussian noise.
* :func:`fit_generator`: one entry point, ``fit_generator(key, name, data, config) ->``
  :class:`Generator` with ``.sample(key, n)``, dispatching through the registry
  :data:`GENERATORS` (:func:`register_generator` adds more, e.g. a normalizing flow).

Documented simplification: TVAE and CTGAN represent a continuous column by *mode-specific
normalisation* (a variational Gaussian mixture per column, each value encoded as a one-hot mode
indicator plus its offset from that mode's mean in units of four mode standard deviations,
squashed by ``tanh``). Here every continuous column is standardised by the training data's
mean and standard deviation and passed through :math:`\operatorname{asinh}` instead (identity
near the mean, logarithmic in the tails, so that heavy-tailed columns such as California
Housing's AveOccup, whose maximum lies 120 standard deviations out, do not dominate the
Gaussian likelihood: with plain standardisation TVAE's loss reached 4e10 there and its samples
went NaN), and the decoder's continuous outputs are linear rather than ``tanh``: one scalar per
column, no mixture fitting. Multi-modal columns are then harder for the generators to
reproduce, but the training objective (Gaussian likelihood with a learned
per-column :math:`\sigma`, cross-entropy per one-hot block, KL term) and its overfitting
behaviour, which is what DOMIAS detects, are TVAE's.

Every function is pure in its PRNG key (no global RNG); networks run in float32 whatever
``jax_enable_x64`` says, and samples come back as float64 NumPy arrays in data units.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpaudit import _validate, accounting
from dpaudit.accounting.dpsgd import quiet_accountant
from dpaudit.dpsgd import clipping, training
from dpaudit.dpsgd.spec import DPSGDSettings

PyTree = Any
DISCRETE_MAX_CATEGORIES = 20
ACCOUNTANTS = ("rdp", "pld")
SEED_METHODS = ("vmap", "map")  # how fit_tvae_seeds runs its fits
# The additive-noise grid of the DOMIAS paper's Fig. 6 (App. A.3), in standard deviations.
PAPER_NOISE_GRID = (0.7, 0.9, 1.1, 1.3, 1.5, 1.7, 1.9, 2.3, 2.5, 2.9, 3.5, 3.9)
# ADS-GAN's privacy parameter lambda in the same figure.
PAPER_ADSGAN_LAMBDAS = (0.2, 0.5, 0.7, 1.0, 1.1, 1.3, 1.5)


# ------------------------------------------------------------------------------------- checks


def _check_data(data: Any, name: str = "data", min_rows: int = 2) -> np.ndarray:
  """A finite numeric ``[n, d]`` array with ``n >= min_rows`` and ``d >= 1``, as float64."""
  arr = np.asarray(data)
  if arr.dtype.kind not in "biuf":
    raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
  if arr.ndim != 2:
    raise ValueError(f"{name} must have shape [n, d] (rank 2), got shape {arr.shape}")
  if arr.shape[0] < min_rows or arr.shape[1] < 1:
    raise ValueError(f"{name} has shape {arr.shape}; need at least {min_rows} rows and 1 column")
  arr = arr.astype(np.float64)
  bad = ~np.isfinite(arr)
  if np.any(bad):
    row, col = np.argwhere(bad)[0]
    raise ValueError(f"{name}[{row}, {col}]={arr[row, col]} is not finite")
  return arr


def _check_positive(name: str, value: Any) -> None:
  """A finite real number > 0."""
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    raise ValueError(f"{name}={value!r} must be a real number")
  _validate.check_range(name, value, 0.0, math.inf, low_open=True, high_open=True)


def _check_nonnegative(name: str, value: Any) -> None:
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    raise ValueError(f"{name}={value!r} must be a real number")
  _validate.check_range(name, value, 0.0, math.inf, high_open=True)


def _check_widths(name: str, value: Any) -> tuple[int, ...]:
  """A non-empty sequence of integers >= 1 (hidden layer widths), as a tuple."""
  if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
    raise ValueError(f"{name}={value!r} must be a non-empty sequence of layer widths >= 1")
  for width in value:
    _validate.check_integer(name, width, 1)
  return tuple(int(w) for w in value)


def _check_key_batch(keys: Any, num: int, name: str = "keys") -> jax.Array:
  """``num`` PRNG keys: typed ``[num]`` or raw uint32 ``[num, 2]``."""
  if not isinstance(keys, (jax.Array, np.ndarray)):
    raise ValueError(f"{name} must be an array of PRNG keys (jax.random.split(key, n)), got "
                     f"{type(keys).__name__}")
  keys = jnp.asarray(keys)
  if keys.ndim == 0 or keys.shape[0] != num:
    raise ValueError(f"{name} has shape {keys.shape}; need one key per data set ({num})")
  _validate.check_key(keys[0], name=f"{name}[0]")
  return keys


# ------------------------------------------------------------------------------ representation


class Layout(NamedTuple):
  """Static shape of an encoded row: ``num_continuous`` standardised columns first, then one
  one-hot block per discrete column of the given sizes."""
  num_continuous: int
  block_sizes: tuple[int, ...]

  @property
  def width(self) -> int:
    return self.num_continuous + sum(self.block_sizes)


class TabularTransform(NamedTuple):
  """Encoding of raw rows ``[n, d]`` for the neural generators.

  Encoded rows are ``[n, layout.width]`` float32: first the continuous columns (in column
  order) as :math:`\\operatorname{asinh}((x - \\mu) / s)` with the training data's mean
  :math:`\\mu` and standard deviation :math:`s` (``ddof=0``), then one one-hot block per
  discrete column, its entries in the order of ``categories``. Decoding inverts this
  (:math:`\\mu + s \\sinh(\\cdot)`) after clipping each encoded value to the training data's
  encoded range widened by 1 on each side, so a generator's outputs map to finite values. (A
  documented simplification of TVAE's mode-specific normalisation; see the module docstring.) Build
  it with :func:`fit_transform`.

  Attributes:
    num_columns: ``d``.
    continuous_columns: indices of the standardised columns.
    discrete_columns: indices of the one-hot encoded columns.
    mean, std: float64 ``[len(continuous_columns)]``.
    limits: float64 ``([c], [c])``: the training data's minimum and maximum of each continuous
      column (decoding clips to their encoded values widened by 1).
    categories: per discrete column, its sorted distinct values (float64).
  """
  num_columns: int
  continuous_columns: tuple[int, ...]
  discrete_columns: tuple[int, ...]
  mean: np.ndarray
  std: np.ndarray
  categories: tuple[np.ndarray, ...]
  limits: tuple[np.ndarray, np.ndarray]

  @property
  def layout(self) -> Layout:
    return Layout(len(self.continuous_columns), tuple(len(c) for c in self.categories))

  def encode(self, data: Any) -> np.ndarray:
    """Raw rows ``[n, d]`` -> float32 ``[n, layout.width]``.

    Raises:
      ValueError: if ``data`` has the wrong number of columns, is not finite, or a discrete
        column holds a value that is not one of its categories.
    """
    data = _check_data(data, min_rows=1)
    if data.shape[1] != self.num_columns:
      raise ValueError(f"data has {data.shape[1]} columns but the transform was fitted to "
                       f"{self.num_columns}")
    parts = [np.arcsinh((data[:, list(self.continuous_columns)] - self.mean) / self.std)]
    for column, values in zip(self.discrete_columns, self.categories):
      codes = np.searchsorted(values, data[:, column])
      codes = np.minimum(codes, len(values) - 1)
      unknown = values[codes] != data[:, column]
      if np.any(unknown):
        row = int(np.flatnonzero(unknown)[0])
        raise ValueError(f"data[{row}, {column}]={data[row, column]} is not one of discrete "
                         f"column {column}'s categories {values.tolist()}")
      parts.append(np.eye(len(values))[codes])
    return np.concatenate(parts, axis=1).astype(np.float32)

  def decode(self, encoded: Any) -> np.ndarray:
    """Encoded rows ``[n, layout.width]`` -> float64 ``[n, d]`` in data units.

    Continuous columns are un-standardised; each one-hot block (or any scores of its shape:
    probabilities, logits) becomes the category of its largest entry.
    """
    encoded = np.asarray(encoded, np.float64)
    layout = self.layout
    if encoded.ndim != 2 or encoded.shape[1] != layout.width:
      raise ValueError(f"encoded must have shape [n, {layout.width}], got {encoded.shape}")
    out = np.empty((encoded.shape[0], self.num_columns), np.float64)
    c = layout.num_continuous
    low, high = (np.arcsinh((limit - self.mean) / self.std) for limit in self.limits)
    clipped = np.clip(encoded[:, :c], low - 1.0, high + 1.0)
    out[:, list(self.continuous_columns)] = np.sinh(clipped) * self.std + self.mean
    start = c
    for column, values in zip(self.discrete_columns, self.categories):
      block = encoded[:, start:start + len(values)]
      out[:, column] = values[np.argmax(block, axis=1)]
      start += len(values)
    return out


def _discrete_candidates(data: np.ndarray) -> tuple[int, ...]:
  """Columns that are integer-valued with at most DISCRETE_MAX_CATEGORIES distinct values."""
  found = []
  for column in range(data.shape[1]):
    values = data[:, column]
    if np.all(values == np.round(values)) and len(np.unique(values)) <= DISCRETE_MAX_CATEGORIES:
      found.append(column)
  return tuple(found)


def _check_discrete_columns(discrete_columns: Any, num_columns: int) -> tuple[int, ...]:
  if isinstance(discrete_columns, (str, bytes)) or not isinstance(discrete_columns, Sequence):
    raise ValueError(f"discrete_columns={discrete_columns!r} must be a sequence of column "
                     "indices")
  columns = []
  for column in discrete_columns:
    if (isinstance(column, bool) or not isinstance(column, numbers.Integral)
        or not 0 <= column < num_columns):
      raise ValueError(f"discrete_columns holds {column!r}, outside the valid range "
                       f"[0, {num_columns - 1}] of column indices")
    columns.append(int(column))
  if len(set(columns)) != len(columns):
    raise ValueError(f"discrete_columns={list(discrete_columns)} repeats a column")
  return tuple(sorted(columns))


def _build_transform(data: np.ndarray, discrete: tuple[int, ...],
                     categories_from: np.ndarray) -> TabularTransform:
  """Continuous statistics from ``data``, category sets from ``categories_from``."""
  for column in range(data.shape[1]):
    if np.all(data[:, column] == data[0, column]):
      raise ValueError(f"column {column} of data is constant ({data[0, column]}); drop it "
                       "before fitting a generator (it carries no information and cannot be "
                       "standardised)")
  continuous = tuple(c for c in range(data.shape[1]) if c not in discrete)
  return TabularTransform(
      num_columns=data.shape[1], continuous_columns=continuous, discrete_columns=discrete,
      mean=data[:, list(continuous)].mean(axis=0), std=data[:, list(continuous)].std(axis=0),
      categories=tuple(np.unique(categories_from[:, c]) for c in discrete),
      limits=(data[:, list(continuous)].min(axis=0), data[:, list(continuous)].max(axis=0)))


def fit_transform(data: Any, discrete_columns: Sequence[int] | None = None
                  ) -> TabularTransform:
  """Fits the :class:`TabularTransform` of ``data``.

  Args:
    data: ``[n, d]`` finite numbers, ``n >= 2``.
    discrete_columns: indices of the one-hot encoded columns; default the columns that hold
      only whole numbers and at most ``DISCRETE_MAX_CATEGORIES`` (20) distinct values (binary
      flags, small category codes). Every other column is continuous.

  Returns:
    The transform; its ``encode``/``decode`` map between data and the generators' space.

  Raises:
    ValueError: for a constant column (named by its index), non-finite data or bad indices.
  """
  data = _check_data(data)
  if discrete_columns is None:
    discrete = _discrete_candidates(data)
  else:
    discrete = _check_discrete_columns(discrete_columns, data.shape[1])
  return _build_transform(data, discrete, data)


def _resolve_transform(data: np.ndarray, transform: TabularTransform | None
                       ) -> TabularTransform:
  if transform is None:
    return fit_transform(data)
  if not isinstance(transform, TabularTransform):
    raise ValueError(f"transform must be a TabularTransform (fit_transform), got "
                     f"{type(transform).__name__}")
  if transform.num_columns != data.shape[1]:
    raise ValueError(f"transform was fitted to {transform.num_columns} columns but data has "
                     f"{data.shape[1]}")
  return transform


def _activate_blocks(raw: jax.Array, layout: Layout, fn: Callable[[jax.Array], jax.Array]
                     ) -> list[jax.Array]:
  """``fn`` applied to each one-hot block of ``raw`` (last axis)."""
  out, start = [], layout.num_continuous
  for size in layout.block_sizes:
    out.append(fn(raw[..., start:start + size]))
    start += size
  return out


# ------------------------------------------------------------------------------------- TVAE


class _TvaeNet(nn.Module):
  r"""TVAE's encoder and decoder (Xu et al. 2019, TVAE baseline), as one flax module.

  ``__call__(inputs)`` takes ``[..., width + latent_dim]``: an encoded row followed by standard
  normal reparameterisation noise :math:`\varepsilon` (an explicit input, so that the DP-SGD
  engine, whose models see only ``features``, can train it; see :func:`fit_dp_tvae`). It
  returns ``[..., width + num_continuous + 2 * latent_dim]``: the decoder's outputs for
  :math:`z = \mu + e^{\log\sigma^2 / 2} \odot \varepsilon`, the per-column likelihood scales
  :math:`\sigma_j`, and the encoder's :math:`\mu` and :math:`\log\sigma^2`.

  The scales are the kernel of a bias-free dense layer applied to a constant 1, so that every
  parameter sits in a ``nn.Dense`` and the DP-SGD engine can use ghost clipping. Works on
  unbatched rows too (the engine's ``vmap`` clipping).
  """
  layout: Layout
  latent_dim: int
  hidden: tuple[int, ...]
  sigma_init: float = 0.1

  def setup(self):
    self.encoder_layers = [nn.Dense(w) for w in self.hidden]
    self.encoder_mean = nn.Dense(self.latent_dim)
    self.encoder_logvar = nn.Dense(self.latent_dim)
    self.decoder_layers = [nn.Dense(w) for w in self.hidden]
    self.decoder_out = nn.Dense(self.layout.width)
    if self.layout.num_continuous:
      self.sigma = nn.Dense(self.layout.num_continuous, use_bias=False,
                            kernel_init=nn.initializers.constant(self.sigma_init))

  def encode(self, rows: jax.Array) -> tuple[jax.Array, jax.Array]:
    h = rows
    for layer in self.encoder_layers:
      h = nn.relu(layer(h))
    return self.encoder_mean(h), self.encoder_logvar(h)

  def decode(self, z: jax.Array) -> jax.Array:
    h = z
    for layer in self.decoder_layers:
      h = nn.relu(layer(h))
    return self.decoder_out(h)

  def __call__(self, inputs: jax.Array) -> jax.Array:
    width = self.layout.width
    rows, eps = inputs[..., :width], inputs[..., width:]
    mean, logvar = self.encode(rows)
    outputs = self.decode(mean + jnp.exp(0.5 * logvar) * eps)
    parts = [outputs]
    if self.layout.num_continuous:
      parts.append(self.sigma(jnp.ones(rows.shape[:-1] + (1,), rows.dtype)))
    return jnp.concatenate(parts + [mean, logvar], axis=-1)


def tvae_loss(outputs: jax.Array, rows: jax.Array, layout: Layout, latent_dim: int,
              loss_factor: float = 2.0) -> jax.Array:
  r"""TVAE's per-example loss, ``loss_factor`` times the reconstruction term plus the KL term.

  For an encoded row with continuous part :math:`x_{1..c}` and one-hot blocks :math:`y_b`
  (the loss of the TVAE baseline of Xu et al. 2019, the negative ELBO of Kingma & Welling's
  Eq. (10) with a Gaussian/categorical decoder and the reconstruction reweighted):

  .. math::
     \ell = \rho \Big[\sum_{j \le c} \Big(\frac{(x_j - \hat x_j)^2}{2\sigma_j^2}
       + \log\sigma_j\Big) - \sum_b \log\operatorname{softmax}(\hat y_b)_{y_b}\Big]
       - \tfrac12 \sum_{k} \big(1 + \log s_k^2 - m_k^2 - s_k^2\big),

  with :math:`\rho` = ``loss_factor``, decoder outputs :math:`\hat x, \hat y`, learned scales
  :math:`\sigma`, and encoder mean :math:`m` and log-variance :math:`\log s^2`.

  Args:
    outputs: ``[..., width + num_continuous + 2 * latent_dim]`` from the network.
    rows: the encoded rows ``[..., width]``.
    layout: the rows' :class:`Layout`.
    latent_dim: dimension of the latent.
    loss_factor: :math:`\rho`, 2 in TVAE.

  Returns:
    ``[...]`` per-example losses (a scalar for one unbatched row).
  """
  width, c = layout.width, layout.num_continuous
  recon = outputs[..., :width]
  sigma = outputs[..., width:width + c]
  mean = outputs[..., width + c:width + c + latent_dim]
  logvar = outputs[..., width + c + latent_dim:]
  reconstruction = jnp.sum(jnp.square(rows[..., :c] - recon[..., :c]) / (2.0 * sigma**2)
                           + jnp.log(sigma), axis=-1)
  start = c
  for size in layout.block_sizes:
    log_probs = jax.nn.log_softmax(recon[..., start:start + size], axis=-1)
    reconstruction = reconstruction - jnp.sum(rows[..., start:start + size] * log_probs, axis=-1)
    start += size
  kl = -0.5 * jnp.sum(1.0 + logvar - jnp.square(mean) - jnp.exp(logvar), axis=-1)
  return loss_factor * reconstruction + kl


def _clamp_sigma(params: PyTree, sigma_range: tuple[float, float]) -> PyTree:
  """Projects the likelihood scales onto ``sigma_range`` (TVAE clamps them after each step)."""
  if "sigma" not in params:
    return params
  params = dict(params)
  kernel = params["sigma"]["kernel"]
  params["sigma"] = {"kernel": jnp.clip(kernel, sigma_range[0], sigma_range[1])}
  return params


def _check_tvae_architecture(config: Any) -> None:
  _validate.check_integer("latent_dim", config.latent_dim, 1)
  object.__setattr__(config, "hidden", _check_widths("hidden", config.hidden))
  _check_positive("loss_factor", config.loss_factor)
  rng = tuple(config.sigma_range) if isinstance(config.sigma_range, Sequence) else None
  if (rng is None or len(rng) != 2 or not all(isinstance(v, numbers.Real) for v in rng)
      or not 0 < rng[0] <= rng[1] < math.inf):
    raise ValueError(f"sigma_range={config.sigma_range!r} must be (low, high) with "
                     "0 < low <= high < inf")
  object.__setattr__(config, "sigma_range", (float(rng[0]), float(rng[1])))
  _check_positive("sigma_init", config.sigma_init)
  if not rng[0] <= config.sigma_init <= rng[1]:
    raise ValueError(f"sigma_init={config.sigma_init} is outside the valid range "
                     f"[{rng[0]:g}, {rng[1]:g}] (sigma_range)")


@dataclasses.dataclass(frozen=True)
class TvaeConfig:
  """Architecture and training of :func:`fit_tvae`; defaults are TVAE's (Xu et al. 2019, as in
  their released code): 300 epochs, batches of 500, 128-dimensional latent, (128, 128) MLPs,
  loss factor 2, Adam with step 1e-3 and L2 weight decay 1e-5.

  The DOMIAS paper trains 2,000 epochs on 500 rows for its overfitting experiments (App. A.3);
  that takes a few seconds here (see :func:`fit_tvae`).

  Attributes:
    epochs: passes over the data; each is a fresh permutation cut into ``ceil(n /
      batch_size)`` minibatches, the last one smaller (as a PyTorch ``DataLoader``).
    batch_size: minibatch size (clamped to ``n``).
    latent_dim: dimension of the latent :math:`z`.
    hidden: widths of the encoder's hidden layers; the decoder's are the same.
    learning_rate: Adam's step size.
    weight_decay: L2 penalty added to the gradient before Adam (PyTorch's ``Adam``
      ``weight_decay``, TVAE's ``l2scale``).
    loss_factor: weight of the reconstruction term (:func:`tvae_loss`).
    sigma_init: initial likelihood scale of every continuous column (standardised units).
    sigma_range: the scales are clamped to this interval after every step (TVAE: 0.01 to 1).
  """
  epochs: int = 300
  batch_size: int = 500
  latent_dim: int = 128
  hidden: tuple[int, ...] = (128, 128)
  learning_rate: float = 1e-3
  weight_decay: float = 1e-5
  loss_factor: float = 2.0
  sigma_init: float = 0.1
  sigma_range: tuple[float, float] = (0.01, 1.0)

  def __post_init__(self):
    _validate.check_integer("epochs", self.epochs, 1)
    _validate.check_integer("batch_size", self.batch_size, 1)
    _check_positive("learning_rate", self.learning_rate)
    _check_nonnegative("weight_decay", self.weight_decay)
    _check_tvae_architecture(self)


class TvaeModel(NamedTuple):
  """A fitted TVAE.

  Attributes:
    module: the network (only its decoder and ``sigma`` are needed to sample).
    params: its parameters (encoder included).
    transform: the :class:`TabularTransform` its data were encoded with.
    config: the :class:`TvaeConfig` (or :class:`DpTvaeConfig`) it was trained with.
    history: float ``[epochs]`` mean loss of each epoch (DP-TVAE: ``[num_steps]``, the mean
      loss of each step's Poisson batch).
  """
  module: _TvaeNet
  params: PyTree
  transform: TabularTransform
  config: Any
  history: np.ndarray


def _tvae_module(layout: Layout, config: Any) -> _TvaeNet:
  return _TvaeNet(layout, config.latent_dim, tuple(config.hidden), config.sigma_init)


@functools.lru_cache(maxsize=32)
def _tvae_run(layout: Layout, config: TvaeConfig, num_rows: int) -> Callable:
  """Pure ``run(key, rows [num_rows, width]) -> (params, history [epochs])``: the whole fit,
  epochs and minibatch steps as nested ``lax.scan``; jit it, or vmap it over seeds."""
  module = _tvae_module(layout, config)
  batch_size = min(config.batch_size, num_rows)
  num_batches = -(-num_rows // batch_size)
  padded = num_batches * batch_size
  latent = config.latent_dim
  optimizer = optax.chain(optax.add_decayed_weights(config.weight_decay),
                          optax.adam(config.learning_rate))

  def batch_loss(params, rows, eps, mask):
    outputs = module.apply({"params": params}, jnp.concatenate([rows, eps], axis=-1))
    losses = tvae_loss(outputs, rows, layout, latent, config.loss_factor)
    return jnp.sum(losses * mask) / jnp.sum(mask)

  def step(carry, batch):
    params, opt_state, rows_all = carry
    index, mask, eps = batch
    loss, grads = jax.value_and_grad(batch_loss)(params, rows_all[index], eps, mask)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = _clamp_sigma(optax.apply_updates(params, updates), config.sigma_range)
    return (params, opt_state, rows_all), loss * jnp.sum(mask)

  def epoch(carry, key):
    key_order, key_noise = jax.random.split(key)
    order = jax.random.permutation(key_order, num_rows)
    index = jnp.concatenate([order, jnp.zeros(padded - num_rows, order.dtype)])
    mask = (jnp.arange(padded) < num_rows).astype(jnp.float32)
    eps = jax.random.normal(key_noise, (num_batches, batch_size, latent), jnp.float32)
    carry, sums = jax.lax.scan(step, carry, (index.reshape(num_batches, batch_size),
                                             mask.reshape(num_batches, batch_size), eps))
    return carry, jnp.sum(sums) / num_rows

  def run(key, rows):
    rows = jnp.asarray(rows, jnp.float32)
    key_init, key_train = jax.random.split(key)
    params = module.init(key_init, jnp.zeros((1, layout.width + latent), jnp.float32))["params"]
    carry = (params, optimizer.init(params), rows)
    (params, _, _), history = jax.lax.scan(epoch, carry,
                                           jax.random.split(key_train, config.epochs))
    return params, history

  return run


@functools.lru_cache(maxsize=32)
def _tvae_fit_jit(layout: Layout, config: TvaeConfig, num_rows: int, method: str) -> Callable:
  """Jitted fit: ``"single"`` (one key, one data set), or over a leading seed axis by
  ``"vmap"`` (batched) or ``"map"`` (``lax.map``: one program, seeds one after another)."""
  run = _tvae_run(layout, config, num_rows)
  if method == "vmap":
    return jax.jit(jax.vmap(run))
  if method == "map":
    return jax.jit(lambda keys, rows: jax.lax.map(lambda args: run(*args), (keys, rows)))
  return jax.jit(run)


def _check_config(config: Any, wanted: type, function: str) -> None:
  if type(config) is not wanted:  # pylint: disable=unidiomatic-typecheck
    raise ValueError(f"config must be a {wanted.__name__} for {function}, got "
                     f"{type(config).__name__}")


def fit_tvae(key: jax.Array, data: Any, config: TvaeConfig = TvaeConfig(),
             transform: TabularTransform | None = None) -> TvaeModel:
  """Fits TVAE (Xu et al. 2019) to the rows of ``data`` with Adam.

  Minimises the mean of :func:`tvae_loss` over minibatches, one fresh reparameterisation draw
  per row and step, the scales clamped to ``config.sigma_range`` after each step. The whole fit
  is one jitted program (epochs and steps as ``lax.scan``), compiled once per data shape and
  config. With the default architecture, 2,000 epochs on 500 rows of 8 columns (the DOMIAS
  paper's setting) took 3.2 s on 2 CPU cores (jax 0.10.2; 7 s while other jobs shared the
  cores), plus about 5 s to compile.

  Args:
    key: PRNG key (initialisation, shuffling and reparameterisation noise derive from it).
    data: ``[n, d]`` finite numbers, ``n >= 2``.
    config: the :class:`TvaeConfig`.
    transform: the :class:`TabularTransform` to encode ``data`` with; default
      ``fit_transform(data)``.

  Returns:
    The fitted :class:`TvaeModel`.
  """
  _validate.check_key(key)
  _check_config(config, TvaeConfig, "fit_tvae")
  data = _check_data(data)
  transform = _resolve_transform(data, transform)
  rows = transform.encode(data)
  params, history = _tvae_fit_jit(transform.layout, config, rows.shape[0], "single")(key, rows)
  return TvaeModel(_tvae_module(transform.layout, config), params, transform, config,
                   np.asarray(history))


def _seed_transforms(datas: np.ndarray, discrete_columns: Sequence[int] | None
                     ) -> list[TabularTransform]:
  """One transform per data set with a common layout: discrete columns and category sets from
  all data sets together, means and standard deviations from each."""
  pooled = datas.reshape(-1, datas.shape[-1])
  if discrete_columns is None:
    discrete = _discrete_candidates(pooled)
  else:
    discrete = _check_discrete_columns(discrete_columns, datas.shape[-1])
  return [_build_transform(d, discrete, pooled) for d in datas]


def fit_tvae_seeds(keys: jax.Array, datas: Any, config: TvaeConfig = TvaeConfig(),
                   discrete_columns: Sequence[int] | None = None, method: str = "vmap"
                   ) -> list[TvaeModel]:
  """Fits one TVAE per (key, data set) pair as a single compiled program.

  The many-seed experiments of the DOMIAS paper (8 runs per setting) train the same
  architecture on equally sized data sets. ``method="vmap"`` batches the fits with
  ``jax.vmap`` (one compilation, batched matrix products: the fast choice on a GPU);
  ``method="map"`` runs them one after another inside one program with ``lax.map`` (one
  compilation, no batching). On 2 CPU cores neither is much faster than separate fits: 8 seeds
  of 2,000 epochs on 500 rows of 8 columns took 49 s vmapped and 54 s mapped against 7.1 s for
  one fit, all on a machine shared with other jobs (with 500 epochs and a quieter machine,
  mapping was the faster, 7.2 s against 12.2 s). Each data set gets its own
  :class:`TabularTransform` (its own
  means and standard deviations); the discrete columns and their category sets are taken from
  all data sets together so that every encoded row has the same width. Each returned model
  equals ``fit_tvae(keys[i], datas[i], config, transform=models[i].transform)`` up to
  floating-point rounding.

  Args:
    keys: ``[S]`` typed PRNG keys (``jax.random.split(key, S)``) or raw ``[S, 2]``.
    datas: ``[S, n, d]`` (or a sequence of ``S`` equal-shape ``[n, d]`` arrays).
    config: the :class:`TvaeConfig` shared by all fits.
    discrete_columns: as in :func:`fit_transform`; default detected on the pooled data.
    method: "vmap" or "map" (see above); the results agree up to rounding.

  Returns:
    A list of ``S`` :class:`TvaeModel`.
  """
  _validate.check_choice("method", method, SEED_METHODS)
  arr = np.asarray(datas) if not isinstance(datas, (list, tuple)) else None
  if arr is None:
    shapes = {np.shape(d) for d in datas}
    if len(shapes) != 1:
      raise ValueError(f"datas must share one shape [n, d], got shapes {sorted(shapes)}")
    arr = np.stack([np.asarray(d) for d in datas])
  if arr.ndim != 3 or arr.shape[0] < 1:
    raise ValueError(f"datas must have shape [S, n, d] with S >= 1, got {arr.shape}")
  _check_config(config, TvaeConfig, "fit_tvae_seeds")
  keys = _check_key_batch(keys, arr.shape[0])
  datas = np.stack([_check_data(d, name=f"datas[{i}]") for i, d in enumerate(arr)])
  transforms = _seed_transforms(datas, discrete_columns)
  rows = np.stack([t.encode(d) for t, d in zip(transforms, datas)])
  layout = transforms[0].layout
  params, history = _tvae_fit_jit(layout, config, rows.shape[1], method)(keys, rows)
  module = _tvae_module(layout, config)
  history = np.asarray(history)
  return [TvaeModel(module, jax.tree.map(lambda p, i=i: p[i], params), t, config, history[i])
          for i, t in enumerate(transforms)]


@functools.lru_cache(maxsize=32)
def _tvae_sample_fn(module: _TvaeNet, num: int) -> Callable:
  """Jitted ``(key, params) -> encoded samples [num, width]``."""
  layout = module.layout

  def sample(key, params):
    key_z, key_noise = jax.random.split(key)
    z = jax.random.normal(key_z, (num, module.latent_dim), jnp.float32)
    out = module.apply({"params": params}, z, method=_TvaeNet.decode)
    c = layout.num_continuous
    if c:
      sigma = params["sigma"]["kernel"][0]
      noisy = out[:, :c] + sigma * jax.random.normal(key_noise, (num, c), jnp.float32)
      out = jnp.concatenate([noisy, out[:, c:]], axis=1)
    return out

  return jax.jit(sample)


def sample_tvae(key: jax.Array, model: Any, n: int) -> np.ndarray:
  r"""``n`` synthetic rows from a fitted TVAE, in data units.

  As TVAE's sampler: :math:`z \sim \mathcal{N}(0, I)` through the decoder; each continuous
  column is the decoder's output plus Gaussian noise of its learned scale :math:`\sigma_j`;
  each discrete column is the category of the block's largest output.

  Args:
    key: PRNG key.
    model: a :class:`TvaeModel` (or the :class:`DpTvaeResult` of :func:`fit_dp_tvae`).
    n: number of rows, >= 1.

  Returns:
    float64 ``[n, d]``.
  """
  _validate.check_key(key)
  if isinstance(model, DpTvaeResult):
    model = model.model
  if not isinstance(model, TvaeModel):
    raise ValueError(f"model must be a TvaeModel (fit_tvae), got {type(model).__name__}")
  n = _validate.check_integer("n", n, 1)
  encoded = _tvae_sample_fn(model.module, n)(key, model.params)
  return model.transform.decode(np.asarray(encoded))


# ---------------------------------------------------------------------------------- DP-TVAE


@dataclasses.dataclass(frozen=True)
class DpTvaeConfig(DPSGDSettings, epochs=300.0, batch_size=500, learning_rate=1e-3):
  r"""DP-SGD training of TVAE (:func:`fit_dp_tvae`).

  Poisson sampling at rate :math:`q = \min(1, \text{batch\_size} / n)` for
  :math:`T = \lceil \text{epochs} / q \rceil` steps (``epochs`` expected passes), per-example
  clipping to ``l2_clip_norm`` and Gaussian noise whose multiplier is the smallest that makes
  the run :math:`(\varepsilon, \delta)`-DP by ``accountant`` (add-or-remove neighbours).

  Attributes:
    epsilon: target :math:`\varepsilon > 0`, finite.
    delta: :math:`\delta \in (0, 1)`.
    epochs: expected passes over the data, > 0.
    batch_size: expected Poisson batch size (sets the sampling rate), >= 1.
    l2_clip_norm: per-example gradient clipping norm C > 0.
    learning_rate: Adam's step size (no weight decay: an L2 term inside the clipped
      per-example gradients would change what clipping bounds).
    latent_dim, hidden, loss_factor, sigma_init, sigma_range: as in :class:`TvaeConfig`.
    physical_batch_size: microbatch size of the engine (memory only).
    clipping: the engine's strategy, "auto" (ghost norms: every parameter is in a dense
      layer), "ghost" or "vmap".
    accountant: "rdp" or "pld" (:func:`dpaudit.accounting.calibrate_noise_multiplier`).

  ``delta``, ``epochs``, ``batch_size``, ``l2_clip_norm`` and ``learning_rate`` are the fields
  of :class:`~dpaudit.dpsgd.spec.DPSGDSettings` (keyword-only).
  """
  epsilon: float
  latent_dim: int = 128
  hidden: tuple[int, ...] = (128, 128)
  loss_factor: float = 2.0
  sigma_init: float = 0.1
  sigma_range: tuple[float, float] = (0.01, 1.0)
  physical_batch_size: int = 256
  clipping: str = "auto"
  accountant: str = "rdp"

  def __post_init__(self):
    _check_positive("epsilon", self.epsilon)
    super().__post_init__()  # delta, epochs, batch_size, l2_clip_norm, learning_rate
    _validate.check_integer("physical_batch_size", self.physical_batch_size, 1)
    _validate.check_choice("clipping", self.clipping, clipping.STRATEGIES)
    _validate.check_choice("accountant", self.accountant, ACCOUNTANTS)
    _check_tvae_architecture(self)

  def plan(self, num_rows: int) -> tuple[float, int]:
    """``(sampling_rate, num_steps)`` for ``num_rows`` training rows."""
    resolved = self._resolve(num_rows)
    return resolved.sampling_rate, resolved.num_steps

  def noise_multiplier(self, num_rows: int) -> float:
    """The calibrated noise multiplier for ``num_rows`` training rows."""
    return self._resolve(num_rows).noise_multiplier

  def _resolve(self, num_rows: int):
    num_rows = _validate.check_integer("num_rows", num_rows, 1)
    return self.dpsgd_spec(epsilon=self.epsilon, accountant=self.accountant).resolve(num_rows)


class DpTvaeResult(NamedTuple):
  """What :func:`fit_dp_tvae` returns.

  Attributes:
    model: the :class:`TvaeModel` (sample it with :func:`sample_tvae`).
    epsilon: the accountant's :math:`\\varepsilon` at ``delta`` for the noise used
      (<= the target).
    delta: the :math:`\\delta` of the guarantee.
    noise_multiplier: the calibrated :math:`\\sigma`.
    sampling_rate: Poisson rate :math:`q`.
    num_steps: number of DP-SGD steps :math:`T`.
  """
  model: TvaeModel
  epsilon: float
  delta: float
  noise_multiplier: float
  sampling_rate: float
  num_steps: int


@functools.lru_cache(maxsize=16)
def _dp_tvae_run(layout: Layout, config: DpTvaeConfig, train_config: training.TrainConfig,
                 num_rows: int) -> Callable:
  """Jitted ``run(key, rows, hyper) -> (params, per-step losses)`` over the engine's step."""
  module = _tvae_module(layout, config)
  latent = config.latent_dim

  def loss_fn(outputs, rows):
    return tvae_loss(outputs, rows, layout, latent, config.loss_factor)

  example = jnp.zeros((1, layout.width + latent), jnp.float32)

  def run(key, rows, hyper):
    key_run, key_eps = jax.random.split(key)
    state, optimizer = training.init_state(key_run, module, example, train_config, num_rows,
                                           hyper)
    step = training.make_step(module, optimizer, train_config, num_rows, loss_fn)

    def body(state, t):
      eps = jax.random.normal(jax.random.fold_in(key_eps, t), (num_rows, latent), jnp.float32)
      state, metrics = step(state, jnp.concatenate([rows, eps], axis=1), rows)
      state = state._replace(params=_clamp_sigma(state.params, config.sigma_range))
      return state, metrics.mean_loss

    state, losses = jax.lax.scan(body, state, jnp.arange(train_config.num_steps))
    return state.params, losses

  return jax.jit(run)


def fit_dp_tvae(key: jax.Array, data: Any, config: DpTvaeConfig,
                transform: TabularTransform | None = None) -> DpTvaeResult:
  r"""Trains TVAE with DP-SGD (Abadi et al. 2016) through :mod:`dpaudit.dpsgd.training`.

  The noise multiplier is :meth:`DpTvaeConfig.noise_multiplier` (smallest :math:`\sigma` whose
  accountant :math:`\varepsilon` at ``delta`` is <= the target); every step is the engine's
  :func:`dpaudit.dpsgd.training.make_step`: a Poisson batch, per-example gradients of
  :func:`tvae_loss` clipped to ``l2_clip_norm``, Gaussian noise, Adam. Only the decoder (and
  the per-column scales) is needed to sample; the encoder is trained by the same private
  steps, so releasing all parameters is covered by the guarantee too.

  Reparameterisation noise: the engine's model sees only ``features``; each step here passes
  ``features = [rows, eps_t]`` with a fresh standard normal draw ``eps_t`` (one per row and
  step, from a key independent of the data). Why the accountant's guarantee still holds: the
  draws are independent of the data and of everything released, so, conditionally on them, step
  :math:`t` is the sampled Gaussian mechanism applied to the per-example loss
  :math:`\ell(\theta; x_i, \varepsilon_{t,i})` whose clipped gradients have norm <= C, chosen
  adaptively as DP-SGD's composition allows; and as the draws are i.i.d. across rows, which row
  position gets which draw is immaterial (adding or removing a record leaves the other records'
  draws identically distributed). The bound holds for every realisation of the draws, hence
  unconditionally. Clamping the scales after each step is post-processing.

  Caveat: the :class:`TabularTransform` (column means, standard deviations, category sets)
  fitted on ``data`` by default is *not* privatised; for an end-to-end guarantee pass a
  ``transform`` fitted on public data (or on known bounds).

  Args:
    key: PRNG key of the run.
    data: ``[n, d]`` training rows.
    config: the :class:`DpTvaeConfig`.
    transform: as in :func:`fit_tvae`.

  Returns:
    :class:`DpTvaeResult`: the model and the accountant's epsilon actually achieved.
  """
  _validate.check_key(key)
  _check_config(config, DpTvaeConfig, "fit_dp_tvae")
  data = _check_data(data)
  transform = _resolve_transform(data, transform)
  rows = transform.encode(data)
  num_rows = rows.shape[0]
  rate, steps = config.plan(num_rows)
  sigma = config.noise_multiplier(num_rows)
  with quiet_accountant():
    epsilon = accounting.dpsgd_epsilon(sigma, rate, steps, config.delta,
                                       accountant=config.accountant)
  # sigma and the learning rate go in as traced values (training.Hyperparameters), so runs that
  # differ only in epsilon share one compilation; the placeholder sigma only marks the run
  # private.
  train_config = training.TrainConfig(
      num_steps=steps, sampling_rate=rate, noise_multiplier=1.0,
      l2_clip_norm=config.l2_clip_norm, learning_rate=1.0, optimizer="adam",
      physical_batch_size=config.physical_batch_size, clipping=config.clipping)
  hyper = training.Hyperparameters(jnp.asarray(sigma, jnp.float32),
                                   jnp.asarray(config.learning_rate, jnp.float32))
  static_config = dataclasses.replace(config, epsilon=1.0, delta=0.5, learning_rate=1.0)
  run = _dp_tvae_run(transform.layout, static_config, train_config, num_rows)
  params, losses = run(key, jnp.asarray(rows), hyper)
  model = TvaeModel(_tvae_module(transform.layout, config), params, transform, config,
                    np.asarray(losses))
  return DpTvaeResult(model, float(epsilon), float(config.delta), float(sigma), float(rate),
                      int(steps))


# ------------------------------------------------------------------------ WGAN-GP and ADS-GAN


class _Mlp(nn.Module):
  """Dense layers of the given widths (ReLU, or LeakyReLU(0.2)), then a linear output."""
  hidden: tuple[int, ...]
  out_dim: int
  leaky: bool = False

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    for width in self.hidden:
      x = nn.Dense(width)(x)
      x = nn.leaky_relu(x, 0.2) if self.leaky else nn.relu(x)
    return nn.Dense(self.out_dim)(x)


@dataclasses.dataclass(frozen=True)
class GanConfig:
  r"""WGAN-GP (Gulrajani et al. 2017, Alg. 1) for :func:`fit_wgan_gp`.

  Each iteration takes ``n_critic`` critic steps (each on a fresh real minibatch, drawn
  uniformly with replacement, and fresh fakes) and then one generator step. Continuous columns
  are the generator's linear outputs; each one-hot block is a Gumbel-softmax relaxation
  (temperature ``gumbel_tau``, as CTGAN) so that the critic cannot tell fakes by their being
  soft. With the defaults, a fit to 10,000 rows of 8 columns took 12 to 22 s on 2 (shared) CPU
  cores, compilation (about 3 s) included.

  Attributes:
    iterations: generator updates.
    batch_size: minibatch size of every step.
    noise_dim: dimension of :math:`z \sim \mathcal{N}(0, I)`.
    generator_hidden: widths of the generator's ReLU layers.
    critic_hidden: widths of the critic's LeakyReLU(0.2) layers.
    n_critic: critic steps per generator step.
    gp_weight: gradient-penalty coefficient (10, Gulrajani et al. and DOMIAS App. A.3).
    learning_rate, beta1, beta2: Adam's, for both networks.
    gumbel_tau: Gumbel-softmax temperature of the one-hot blocks.
  """
  iterations: int = 1000
  batch_size: int = 256
  noise_dim: int = 128
  generator_hidden: tuple[int, ...] = (256, 256)
  critic_hidden: tuple[int, ...] = (256, 256)
  n_critic: int = 5
  gp_weight: float = 10.0
  learning_rate: float = 2e-4
  beta1: float = 0.5
  beta2: float = 0.9
  gumbel_tau: float = 0.2

  def __post_init__(self):
    _validate.check_integer("iterations", self.iterations, 1)
    _validate.check_integer("batch_size", self.batch_size, 1)
    _validate.check_integer("noise_dim", self.noise_dim, 1)
    object.__setattr__(self, "generator_hidden",
                       _check_widths("generator_hidden", self.generator_hidden))
    object.__setattr__(self, "critic_hidden", _check_widths("critic_hidden", self.critic_hidden))
    _validate.check_integer("n_critic", self.n_critic, 1)
    _check_nonnegative("gp_weight", self.gp_weight)
    _check_positive("learning_rate", self.learning_rate)
    for name in ("beta1", "beta2"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}={value!r} must be a real number")
      _validate.check_range(name, value, 0.0, 1.0, high_open=True)
    _check_positive("gumbel_tau", self.gumbel_tau)


@dataclasses.dataclass(frozen=True)
class AdsGanConfig(GanConfig):
  r"""ADS-GAN (Yoon et al. 2020) for :func:`fit_ads_gan`: :class:`GanConfig` plus
  ``identifiability``, the weight :math:`\lambda \ge 0` of the identifiability regulariser
  (the DOMIAS paper's Fig. 6 sweeps 0.2 to 1.5; 0 gives a conditional WGAN-GP). Runs that
  differ only in :math:`\lambda` share one compilation."""
  identifiability: float = 0.5

  def __post_init__(self):
    super().__post_init__()
    _check_nonnegative("identifiability", self.identifiability)


class GanModel(NamedTuple):
  """A fitted WGAN-GP or ADS-GAN generator.

  Attributes:
    generator: the generator network (input ``[z]`` or ``[z, record]``).
    params: its parameters (the critic is not kept).
    transform: the :class:`TabularTransform` of its data.
    config: the :class:`GanConfig` / :class:`AdsGanConfig`.
    history: float ``[iterations, 2]``: the last critic loss and the generator loss of each
      iteration (the critic loss's negative estimates the Wasserstein distance plus penalty).
    records: ADS-GAN: the encoded training rows it conditions on (the model holds the
      training data, by design); None for WGAN-GP.
    critic: the critic network at the end of training (LOGAN 0 scores records with it:
      :func:`critic_scores`).
    critic_params: its parameters.
  """
  generator: _Mlp
  params: PyTree
  transform: TabularTransform
  config: GanConfig
  history: np.ndarray
  records: np.ndarray | None
  critic: _Mlp | None = None
  critic_params: PyTree = None


def _gan_generate(generator: _Mlp, layout: Layout, noise_dim: int, tau: float, params: PyTree,
                  key: jax.Array, records: jax.Array | None, num: int) -> jax.Array:
  """Encoded fakes ``[num, width]``: linear continuous part, Gumbel-softmax blocks."""
  key_z, key_gumbel = jax.random.split(key)
  z = jax.random.normal(key_z, (num, noise_dim), jnp.float32)
  inputs = z if records is None else jnp.concatenate([z, records], axis=1)
  raw = generator.apply({"params": params}, inputs)
  gumbel = jax.random.gumbel(key_gumbel, raw.shape, jnp.float32)
  blocks = _activate_blocks(raw + gumbel, layout, lambda b: jax.nn.softmax(b / tau, axis=-1))
  return jnp.concatenate([raw[:, :layout.num_continuous]] + blocks, axis=1)


def _gan_networks(layout: Layout, config: GanConfig) -> tuple[_Mlp, _Mlp]:
  return (_Mlp(config.generator_hidden, layout.width),
          _Mlp(config.critic_hidden, 1, leaky=True))


@functools.lru_cache(maxsize=32)
def _gan_run(layout: Layout, config: GanConfig, num_rows: int, conditional: bool) -> Callable:
  """Jitted ``run(key, rows, lam) -> (generator params, critic params, history
  [iterations, 2])``."""
  generator, critic = _gan_networks(layout, config)
  bs, width = config.batch_size, layout.width
  optimizer = optax.adam(config.learning_rate, b1=config.beta1, b2=config.beta2)

  def generate(params, key, records):
    return _gan_generate(generator, layout, config.noise_dim, config.gumbel_tau, params, key,
                         records, bs)

  def critic_loss(c_params, real, fake, u):
    score = lambda x: critic.apply({"params": c_params}, x)[:, 0]  # noqa: E731
    mixed = u * real + (1.0 - u) * fake
    # The critic is row-wise, so the gradient of the summed scores is each row's own gradient.
    grads = jax.grad(lambda x: jnp.sum(score(x)))(mixed)
    penalty = jnp.mean(jnp.square(jnp.sqrt(jnp.sum(grads**2, axis=1) + 1e-12) - 1.0))
    return jnp.mean(score(fake)) - jnp.mean(score(real)) + config.gp_weight * penalty

  def generator_loss(g_params, c_params, key, records, lam):
    fake = generate(g_params, key, records)
    loss = -jnp.mean(critic.apply({"params": c_params}, fake))
    if conditional:  # ADS-GAN: push each fake away from the record it was generated from.
      loss = loss - lam * jnp.sqrt(jnp.mean(jnp.square(fake - records)) + 1e-12)
    return loss

  def draw(key, rows):
    return rows[jax.random.randint(key, (bs,), 0, num_rows)]

  def run(key, rows, lam):
    rows = jnp.asarray(rows, jnp.float32)
    key_g, key_c, key_train = jax.random.split(key, 3)
    g_inputs = config.noise_dim + (width if conditional else 0)
    g_params = generator.init(key_g, jnp.zeros((1, g_inputs), jnp.float32))["params"]
    c_params = critic.init(key_c, jnp.zeros((1, width), jnp.float32))["params"]

    def critic_step(carry, key):
      g_params, c_params, c_state = carry
      k_real, k_cond, k_fake, k_mix = jax.random.split(key, 4)
      records = draw(k_cond, rows) if conditional else None
      fake = jax.lax.stop_gradient(generate(g_params, k_fake, records))
      u = jax.random.uniform(k_mix, (bs, 1), jnp.float32)
      loss, grads = jax.value_and_grad(critic_loss)(c_params, draw(k_real, rows), fake, u)
      updates, c_state = optimizer.update(grads, c_state, c_params)
      return (g_params, optax.apply_updates(c_params, updates), c_state), loss

    def iteration(carry, key):
      g_params, c_params, g_state, c_state = carry
      k_critic, k_cond, k_fake = jax.random.split(key, 3)
      (_, c_params, c_state), c_losses = jax.lax.scan(
          critic_step, (g_params, c_params, c_state), jax.random.split(k_critic, config.n_critic))
      records = draw(k_cond, rows) if conditional else None
      g_loss, grads = jax.value_and_grad(generator_loss)(g_params, c_params, k_fake, records,
                                                         lam)
      updates, g_state = optimizer.update(grads, g_state, g_params)
      g_params = optax.apply_updates(g_params, updates)
      return (g_params, c_params, g_state, c_state), jnp.stack([c_losses[-1], g_loss])

    carry = (g_params, c_params, optimizer.init(g_params), optimizer.init(c_params))
    (g_params, c_params, _, _), history = jax.lax.scan(
        iteration, carry, jax.random.split(key_train, config.iterations))
    return g_params, c_params, history

  return jax.jit(run)


def _fit_gan(key, data, config, transform, conditional, lam) -> GanModel:
  data = _check_data(data)
  transform = _resolve_transform(data, transform)
  rows = transform.encode(data)
  layout = transform.layout
  # lambda is a traced argument: the static config drops it, so a lambda sweep compiles once.
  static = GanConfig(**{f.name: getattr(config, f.name) for f in dataclasses.fields(GanConfig)})
  run = _gan_run(layout, static, rows.shape[0], conditional)
  params, c_params, history = run(key, jnp.asarray(rows), jnp.asarray(lam, jnp.float32))
  generator, critic = _gan_networks(layout, config)
  return GanModel(generator, params, transform, config, np.asarray(history),
                  rows if conditional else None, critic, c_params)


@functools.lru_cache(maxsize=32)
def _critic_fn(critic: _Mlp) -> Callable:
  return jax.jit(lambda params, rows: critic.apply({"params": params}, rows)[:, 0])


def critic_scores(model: GanModel, data: Any) -> np.ndarray:
  """The trained critic's score ``D(x)`` of each row of ``data`` ``[m, d]`` (in the model's
  data units; higher: judged more like the training data). LOGAN 0 (Hayes et al. 2019)."""
  if not isinstance(model, GanModel) or model.critic is None:
    raise ValueError("model must be a GanModel from fit_wgan_gp / fit_ads_gan")
  data = _check_data(data, min_rows=1)
  rows = jnp.asarray(model.transform.encode(data))
  return np.asarray(_critic_fn(model.critic)(model.critic_params, rows), np.float64)


def fit_wgan_gp(key: jax.Array, data: Any, config: GanConfig = GanConfig(),
                transform: TabularTransform | None = None) -> GanModel:
  r"""Fits a WGAN-GP (Gulrajani et al. 2017, Alg. 1) to the rows of ``data``.

  Critic loss :math:`\mathbb{E}[D(\tilde x)] - \mathbb{E}[D(x)] + \lambda_{GP}
  \mathbb{E}[(\lVert\nabla_{\hat x} D(\hat x)\rVert_2 - 1)^2]` with :math:`\hat x` uniformly
  between a real row and a fake (their Eq. 3); generator loss
  :math:`-\mathbb{E}[D(G(z))]`. One jitted program (iterations and critic steps as
  ``lax.scan``).

  Args:
    key: PRNG key.
    data: ``[n, d]`` training rows.
    config: the :class:`GanConfig`.
    transform: as in :func:`fit_tvae`.

  Returns:
    The :class:`GanModel` (``records`` None).
  """
  _validate.check_key(key)
  _check_config(config, GanConfig, "fit_wgan_gp")
  return _fit_gan(key, data, config, transform, conditional=False, lam=0.0)


def fit_ads_gan(key: jax.Array, data: Any, config: AdsGanConfig = AdsGanConfig(),
                transform: TabularTransform | None = None) -> GanModel:
  r"""Fits ADS-GAN (Yoon, Drumright & van der Schaar 2020) to the rows of ``data``.

  The generator :math:`G(z, x)` is conditioned on a real training record :math:`x`; the critic
  and its gradient penalty are WGAN-GP's (unconditional, on rows). The generator loss subtracts
  the identifiability regulariser,

  .. math::
     L_G = -\mathbb{E}[D(G(z, x))] - \lambda \sqrt{\operatorname{mean}\big((G(z, x) - x)^2\big)},

  the root mean squared difference between fakes and their records over the minibatch and the
  encoded columns, so that larger :math:`\lambda` pushes synthetic records away from the real
  ones they came from (the paper's identifiability constraint). With :math:`\lambda = 0` the
  generator may simply learn to copy its record, the trivial optimum of a conditional GAN.

  Args:
    key: PRNG key.
    data: ``[n, d]`` training rows.
    config: the :class:`AdsGanConfig` (``identifiability`` is :math:`\lambda`).
    transform: as in :func:`fit_tvae`.

  Returns:
    The :class:`GanModel`, holding the encoded training rows as ``records``.
  """
  _validate.check_key(key)
  _check_config(config, AdsGanConfig, "fit_ads_gan")
  return _fit_gan(key, data, config, transform, conditional=True, lam=config.identifiability)


@functools.lru_cache(maxsize=32)
def _gan_sample_fn(generator: _Mlp, layout: Layout, noise_dim: int, tau: float, num: int,
                   conditional: bool) -> Callable:
  def sample(key, params, records):
    key_order, key_fake = jax.random.split(key)
    chosen = None
    if conditional:
      order = jax.random.permutation(key_order, records.shape[0])
      chosen = records[order[jnp.arange(num) % records.shape[0]]]
    return _gan_generate(generator, layout, noise_dim, tau, params, key_fake, chosen,
                         num), chosen

  return jax.jit(sample)


def sample_gan(key: jax.Array, model: GanModel, n: int, return_records: bool = False
               ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
  """``n`` synthetic rows from a fitted WGAN-GP or ADS-GAN, in data units.

  ADS-GAN conditions each row on a training record (the design of ADS-GAN: the released
  synthetic data are :math:`G(z, x)` for the real records :math:`x`): the records are taken in
  a random order, each used ``n // N`` or ``n // N + 1`` times for ``N`` training rows (once
  each for ``n = N``), with fresh :math:`z` every time. One-hot blocks are sampled (the
  category of the Gumbel-perturbed largest logit).

  Args:
    key: PRNG key.
    model: a :class:`GanModel`.
    n: number of rows, >= 1.
    return_records: ADS-GAN only: also return each row's conditioning record (data units).

  Returns:
    float64 ``[n, d]``, or ``(samples, records)`` when ``return_records``.
  """
  _validate.check_key(key)
  if not isinstance(model, GanModel):
    raise ValueError(f"model must be a GanModel (fit_wgan_gp / fit_ads_gan), got "
                     f"{type(model).__name__}")
  n = _validate.check_integer("n", n, 1)
  conditional = model.records is not None
  if return_records and not conditional:
    raise ValueError("return_records=True needs an ADS-GAN model (a WGAN-GP has no records)")
  fn = _gan_sample_fn(model.generator, model.transform.layout, model.config.noise_dim,
                      model.config.gumbel_tau, n, conditional)
  records = jnp.asarray(model.records) if conditional else None
  encoded, chosen = fn(key, model.params, records)
  samples = model.transform.decode(np.asarray(encoded))
  if return_records:
    return samples, model.transform.decode(np.asarray(chosen))
  return samples


# ----------------------------------------------------------------------------- additive noise


def additive_noise(key: jax.Array, data: Any, n: int, noise: float,
                   discrete_columns: Sequence[int] | None = None) -> np.ndarray:
  r"""The additive-noise baseline of the DOMIAS paper's Fig. 6: noisy copies of real rows.

  Draws ``n`` rows of ``data`` uniformly with replacement and adds
  :math:`\mathcal{N}(0, \text{noise}^2)` to every continuous column in standardised units, i.e.
  :math:`\mathcal{N}(0, (\text{noise} \cdot s_j)^2)` in data units for the column's standard
  deviation :math:`s_j` (``ddof=0``); a column's variance thus grows from :math:`s_j^2` to
  :math:`(1 + \text{noise}^2) s_j^2`. Discrete columns (as :func:`fit_transform` finds them)
  are copied unchanged: Gaussian noise would give values that are not categories. The paper's
  grid is :data:`PAPER_NOISE_GRID`.

  Args:
    key: PRNG key.
    data: ``[N, d]`` training rows.
    n: number of rows, >= 1.
    noise: noise standard deviation in standard deviations of each column, >= 0.
    discrete_columns: as in :func:`fit_transform`.

  Returns:
    float64 ``[n, d]``.
  """
  _validate.check_key(key)
  n = _validate.check_integer("n", n, 1)
  _check_nonnegative("noise", noise)
  data = _check_data(data)
  transform = fit_transform(data, discrete_columns)
  key_rows, key_noise = jax.random.split(key)
  index = np.asarray(jax.random.randint(key_rows, (n,), 0, data.shape[0]))
  out = data[index].copy()
  columns = list(transform.continuous_columns)
  draws = np.asarray(jax.random.normal(key_noise, (n, len(columns)), jnp.float32), np.float64)
  out[:, columns] += noise * transform.std * draws
  return out


@dataclasses.dataclass(frozen=True)
class AdditiveNoiseConfig:
  """The additive-noise "generator" of :func:`fit_generator`.

  Attributes:
    noise: noise standard deviation in standard deviations of each continuous column, >= 0
      (:func:`additive_noise`; the paper's grid is :data:`PAPER_NOISE_GRID`).
  """
  noise: float = 1.0

  def __post_init__(self):
    _check_nonnegative("noise", self.noise)


# ---------------------------------------------------------------------------------- dispatch


class GeneratorSpec(NamedTuple):
  """One entry of :data:`GENERATORS`.

  Attributes:
    config_type: the config class (built from keyword arguments when a dict is given).
    fit: ``fit(key, data, config, discrete_columns) -> model``.
    sample: ``sample(key, model, n) -> [n, d]`` rows in data units.
  """
  config_type: type
  fit: Callable[[jax.Array, np.ndarray, Any, Sequence[int] | None], Any]
  sample: Callable[[jax.Array, Any, int], np.ndarray]


class Generator(NamedTuple):
  """A fitted generator behind one interface: ``generator.sample(key, n) -> [n, d]``.

  Attributes:
    name: its registry name.
    model: the fitted model (:class:`TvaeModel`, :class:`DpTvaeResult`, :class:`GanModel`,
      ...).
    sample_fn: ``sample_fn(key, model, n)``.
  """
  name: str
  model: Any
  sample_fn: Callable[[jax.Array, Any, int], np.ndarray]

  def sample(self, key: jax.Array, n: int) -> np.ndarray:
    return np.asarray(self.sample_fn(key, self.model, n))


def _transform_of(data, discrete_columns):
  return None if discrete_columns is None else fit_transform(data, discrete_columns)


class _AdditiveNoiseModel(NamedTuple):
  data: np.ndarray
  noise: float
  discrete_columns: tuple[int, ...]


def _fit_additive(key, data, config, discrete_columns):
  del key
  data = _check_data(data)
  transform = fit_transform(data, discrete_columns)
  return _AdditiveNoiseModel(data, float(config.noise), transform.discrete_columns)


def _sample_additive(key, model, n):
  return additive_noise(key, model.data, n, model.noise, model.discrete_columns)


GENERATORS: dict[str, GeneratorSpec] = {
    "tvae": GeneratorSpec(
        TvaeConfig, lambda k, x, c, dc: fit_tvae(k, x, c, _transform_of(x, dc)), sample_tvae),
    "dp_tvae": GeneratorSpec(
        DpTvaeConfig, lambda k, x, c, dc: fit_dp_tvae(k, x, c, _transform_of(x, dc)),
        sample_tvae),
    "wgan_gp": GeneratorSpec(
        GanConfig, lambda k, x, c, dc: fit_wgan_gp(k, x, c, _transform_of(x, dc)), sample_gan),
    "ads_gan": GeneratorSpec(
        AdsGanConfig, lambda k, x, c, dc: fit_ads_gan(k, x, c, _transform_of(x, dc)),
        sample_gan),
    "additive_noise": GeneratorSpec(AdditiveNoiseConfig, _fit_additive, _sample_additive),
}
"""Name -> :class:`GeneratorSpec` of every generator :func:`fit_generator` knows: the ones above,
and from their own modules (registered when this one is imported) ``"ctgan"`` and ``"gan"``
(:mod:`dpaudit.models.ctgan`), ``"pate_gan"`` (:mod:`dpaudit.models.pate_gan`) and
``"privbayes"`` (:mod:`dpaudit.models.privbayes`). Extend it with :func:`register_generator`
(e.g. a normalizing flow, ``"nflow"``)."""


def register_generator(name: str, config_type: type, fit: Callable, sample: Callable,
                       replace: bool = False) -> None:
  """Adds a generator to :data:`GENERATORS`.

  Args:
    name: registry name (non-empty string).
    config_type: its config class; ``fit_generator`` builds it from a dict of keyword
      arguments or calls it with none.
    fit: ``fit(key, data, config, discrete_columns) -> model`` (ignore ``discrete_columns``
      if the generator has no use for it).
    sample: ``sample(key, model, n) -> [n, d]``.
    replace: allow overwriting an existing name.

  Example, the normalizing flow of :mod:`dpaudit.attacks.density` (DOMIAS's "NFlow")::

    from dpaudit.attacks import density
    register_generator("nflow", density.FlowConfig,
                       lambda key, data, config, discrete_columns:
                           density.fit_flow(key, data, config),
                       density.sample_flow)
  """
  if not isinstance(name, str) or not name:
    raise ValueError(f"name={name!r} must be a non-empty string")
  if name in GENERATORS and not replace:
    raise ValueError(f"name={name!r} is already registered; pass replace=True to overwrite")
  if not isinstance(config_type, type) or not callable(fit) or not callable(sample):
    raise ValueError("config_type must be a class and fit, sample callables")
  GENERATORS[name] = GeneratorSpec(config_type, fit, sample)


def fit_generator(key: jax.Array, name: str, data: Any,
                  config_or_kwargs: Any = None, *,
                  discrete_columns: Sequence[int] | None = None) -> Generator:
  """Fits the generator ``name`` of :data:`GENERATORS` and wraps it as a :class:`Generator`.

  Args:
    key: PRNG key of the fit.
    name: one of ``sorted(GENERATORS)`` ("additive_noise", "ads_gan", "ctgan", "dp_tvae",
      "gan", "pate_gan", "privbayes", "tvae", "wgan_gp", plus any registered later).
    data: ``[n, d]`` training rows.
    config_or_kwargs: an instance of the generator's config class, a mapping of keyword
      arguments for it, or None for its defaults ("dp_tvae", "pate_gan" and "privbayes" need
      at least ``epsilon``).
    discrete_columns: as in :func:`fit_transform` (default: detected).

  Returns:
    The :class:`Generator`; ``generator.sample(key, n)`` gives ``[n, d]`` rows in data units.
  """
  _validate.check_key(key)
  if name not in GENERATORS:
    raise ValueError(f"name={name!r} is not one of the generators "
                     f"{', '.join(repr(g) for g in sorted(GENERATORS))}")
  spec = GENERATORS[name]
  if config_or_kwargs is None or isinstance(config_or_kwargs, Mapping):
    kwargs = dict(config_or_kwargs or {})
    try:
      config = spec.config_type(**kwargs)
    except TypeError as error:  # a missing or unknown argument
      raise ValueError(f"config_or_kwargs={kwargs!r} does not make a "
                       f"{spec.config_type.__name__} for generator {name!r}: {error}") from None
  elif type(config_or_kwargs) is spec.config_type:  # pylint: disable=unidiomatic-typecheck
    config = config_or_kwargs
  else:
    raise ValueError(f"config_or_kwargs must be a {spec.config_type.__name__}, a dict of its "
                     f"arguments or None for generator {name!r}, got "
                     f"{type(config_or_kwargs).__name__}")
  return Generator(name, spec.fit(key, data, config, discrete_columns), spec.sample)


# The generators in modules of their own register themselves (they import this module's
# encodings and networks, so they are imported last).
from dpaudit.models import ctgan, pate_gan, privbayes  # noqa: E402, F401
