r"""CTGAN and a vanilla GAN for tabular data: two more generators of the DOMIAS paper's Fig. 6.

DOMIAS (van Breugel et al., AISTATS 2023, Sec. 5.4 and Fig. 6) places GAN (Goodfellow et al.
2014) and CTGAN (Xu et al. 2019) on its privacy-utility plot beside the generators of
:mod:`dpaudit.models.tabular_generators`. Both take float arrays ``[n, d]`` and return samples
in data units, with the ``fit(key, data, config, discrete_columns)`` / ``sample(key, model, n)``
signatures of :class:`dpaudit.models.tabular_generators.GeneratorSpec`.

* CTGAN (Xu, Skoularidou, Cuesta-Infante & Veeramachaneni, "Modeling Tabular Data using
  Conditional GAN", NeurIPS 2019): mode-specific normalisation of continuous columns
  (Sec. 4.2; :func:`fit_ctgan_transform`), the conditional vector with training-by-sampling
  (Sec. 4.3; :func:`sample_condition`), a residual generator and a PacGAN critic (Lin et al.
  2018, ``pac = 10``) trained by the WGAN-GP loss (Gulrajani et al. 2017) plus the generator's
  cross-entropy on the conditioned category (Sec. 4.4): :class:`CtganConfig`,
  :func:`fit_ctgan`, :func:`sample_ctgan`.
* A vanilla GAN (Goodfellow et al., "Generative Adversarial Nets", NeurIPS 2014, Alg. 1) on
  the encoding of the WGAN-GP there (standardised, asinh-compressed continuous columns,
  Gumbel-softmax one-hot blocks) with the non-saturating loss: :class:`GanVanillaConfig`,
  :func:`fit_vanilla_gan`, :func:`sample_vanilla_gan`.

Encoded CTGAN rows hold the continuous columns' scalars :math:`\alpha` first, then each
continuous column's one-hot mode indicator :math:`\beta`, then the discrete columns' one-hot
blocks: a fixed permutation of the paper's :math:`\alpha_1 \oplus \beta_1 \oplus \dots \oplus
d_{N_d}`, which lets the row reuse :class:`~dpaudit.models.tabular_generators.Layout`. Every
training loop is one jitted program (steps as ``lax.scan``); functions are pure in their PRNG
keys; networks run in float32.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpaudit import _validate
from dpaudit.models.tabular_generators import (
  GanModel,
  Layout,
  TabularTransform,
  _activate_blocks,
  _check_config,
  _check_data,
  _check_nonnegative,
  _check_positive,
  _check_widths,
  _gan_generate,
  _Mlp,
  fit_transform,
  register_generator,
  sample_gan,
)

PyTree = Any
# Mode-specific normalisation (Xu et al. 2019, Sec. 4.2): alpha = (x - eta_k) / (4 phi_k).
ALPHA_SCALE = 4.0
# Dirichlet-process concentration of the variational Gaussian mixture, as the authors' code.
WEIGHT_CONCENTRATION_PRIOR = 1e-3


def _check_unit(name: str, value: Any) -> float:
  """A real number in [0, 1)."""
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    raise ValueError(f"{name}={value!r} must be a real number")
  _validate.check_range(name, value, 0.0, 1.0, high_open=True)
  return float(value)


# ---------------------------------------------------------------- mode-specific normalisation


class CtganTransform(NamedTuple):
  r"""CTGAN's representation of a row (Xu et al. 2019, Sec. 4.2); build it with
  :func:`fit_ctgan_transform`.

  Continuous column :math:`C_i` has a Gaussian mixture with weights :math:`\mu_k`, means
  :math:`\eta_k` and standard deviations :math:`\phi_k` (the modes a variational Gaussian
  mixture kept). A value :math:`c` is encoded by a mode :math:`k` sampled with probability
  :math:`\rho_k \propto \mu_k \mathcal{N}(c; \eta_k, \phi_k)` as the one-hot :math:`\beta` of
  :math:`k` and the scalar :math:`\alpha = (c - \eta_k) / (4 \phi_k)`; decoding inverts this,
  :math:`c = \eta_k + 4 \phi_k \alpha` with :math:`\alpha` clipped to ``[-1, 1]``. Discrete
  columns are one-hot, as in ``base``.

  Attributes:
    base: the :class:`~dpaudit.models.tabular_generators.TabularTransform` of the same data
      (which columns are discrete, their categories; its continuous statistics are unused).
    mode_weights, mode_means, mode_stds: per continuous column, float64 ``[m_i]`` arrays of
      its kept modes (weights renormalised to sum 1).
    category_counts: per discrete column, int64 counts of its categories in the data.
  """
  base: TabularTransform
  mode_weights: tuple[np.ndarray, ...]
  mode_means: tuple[np.ndarray, ...]
  mode_stds: tuple[np.ndarray, ...]
  category_counts: tuple[np.ndarray, ...]

  @property
  def layout(self) -> Layout:
    """``num_continuous`` alphas, then the mode blocks, then the discrete blocks."""
    modes = tuple(len(m) for m in self.mode_means)
    return Layout(len(modes), modes + tuple(len(c) for c in self.base.categories))

  @property
  def cond_width(self) -> int:
    """Width of the conditional vector: the total number of discrete categories."""
    return int(sum(len(c) for c in self.base.categories))

  def encode(self, key: jax.Array, data: Any) -> np.ndarray:
    """Raw rows ``[n, d]`` -> float64 ``[n, layout.width]``, each value's mode sampled from
    its posterior :math:`\\rho` (restricted to the modes within 4 standard deviations of the
    value whenever there is one, so that :math:`|\\alpha| \\le 1` and decoding is exact).

    Raises:
      ValueError: as :meth:`TabularTransform.encode` (columns, finiteness, unseen categories).
    """
    _validate.check_key(key)
    data = _check_data(data, min_rows=1)
    discrete = self.base.encode(data)[:, self.base.layout.num_continuous:]
    keys = jax.random.split(key, max(1, len(self.mode_means)))
    alphas, blocks = [], []
    for j, column in enumerate(self.base.continuous_columns):
      weights, means, stds = self.mode_weights[j], self.mode_means[j], self.mode_stds[j]
      x = data[:, column][:, None]
      z = (x - means) / stds
      log_post = np.log(weights) - np.log(stds) - 0.5 * z**2
      inside = np.abs(z) <= ALPHA_SCALE
      log_post = np.where(inside | ~inside.any(axis=1, keepdims=True), log_post, -np.inf)
      log_post = log_post - log_post.max(axis=1, keepdims=True)
      mode = np.asarray(jax.random.categorical(keys[j], jnp.asarray(log_post, jnp.float32)))
      alphas.append(np.clip(z[np.arange(len(x)), mode] / ALPHA_SCALE, -1.0, 1.0))
      blocks.append(np.eye(len(weights))[mode])
    parts = [np.stack(alphas, axis=1)] if alphas else []
    return np.concatenate(parts + blocks + [discrete.astype(np.float64)], axis=1)

  def decode(self, encoded: Any) -> np.ndarray:
    """Encoded rows (or generator outputs: any scores in the one-hot blocks, argmax taken)
    ``[n, layout.width]`` -> float64 ``[n, d]`` in data units."""
    encoded = np.asarray(encoded, np.float64)
    layout = self.layout
    if encoded.ndim != 2 or encoded.shape[1] != layout.width:
      raise ValueError(f"encoded must have shape [n, {layout.width}], got {encoded.shape}")
    c = layout.num_continuous
    tail = layout.width - self.cond_width
    out = self.base.decode(np.concatenate([np.zeros((len(encoded), c)), encoded[:, tail:]], 1))
    start = c
    for j, column in enumerate(self.base.continuous_columns):
      mode = np.argmax(encoded[:, start:start + len(self.mode_means[j])], axis=1)
      alpha = np.clip(encoded[:, j], -1.0, 1.0)
      out[:, column] = self.mode_means[j][mode] + ALPHA_SCALE * self.mode_stds[j][mode] * alpha
      start += len(self.mode_means[j])
    return out


def _fit_modes(values: np.ndarray, max_modes: int, weight_threshold: float, seed: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """A variational (Dirichlet-process) Gaussian mixture of one column; the modes whose weight
  exceeds ``weight_threshold`` (the heaviest one at least), weights renormalised."""
  from sklearn.exceptions import ConvergenceWarning  # slow import, needed only here
  from sklearn.mixture import BayesianGaussianMixture
  mixture = BayesianGaussianMixture(
      n_components=min(max_modes, len(values)), weight_concentration_prior_type="dirichlet_process",
      weight_concentration_prior=WEIGHT_CONCENTRATION_PRIOR, n_init=1, random_state=seed)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    mixture.fit(values[:, None])
  keep = mixture.weights_ > weight_threshold
  keep[np.argmax(mixture.weights_)] = True
  weights = mixture.weights_[keep]
  return (weights / weights.sum(), mixture.means_[keep, 0],
          np.sqrt(mixture.covariances_.reshape(-1)[keep]))


def fit_ctgan_transform(key: jax.Array, data: Any, discrete_columns: Sequence[int] | None = None,
                        max_modes: int = 10, weight_threshold: float = 0.005) -> CtganTransform:
  r"""Fits CTGAN's mode-specific normalisation (Xu et al. 2019, Sec. 4.2) to ``data``.

  Each continuous column gets a variational Gaussian mixture with at most ``max_modes``
  components (scikit-learn's ``BayesianGaussianMixture``, Dirichlet-process prior 0.001);
  components of weight <= ``weight_threshold`` are dropped (10 and 0.005 are the values of the
  authors' implementation; the paper leaves them unstated).

  Args:
    key: PRNG key (the mixtures' initialisation).
    data: ``[n, d]`` finite numbers, ``n >= 2``, no constant column.
    discrete_columns: as in :func:`~dpaudit.models.tabular_generators.fit_transform` (default:
      whole-number columns with at most 20 distinct values).
    max_modes: most mixture components per column, >= 1.
    weight_threshold: smallest weight of a kept mode, in [0, 1).

  Returns:
    The :class:`CtganTransform`.

  >>> import jax, numpy as np
  >>> rng = np.random.default_rng(0)
  >>> data = np.c_[np.r_[rng.normal(-5, 1, 60), rng.normal(5, 1, 40)], rng.integers(0, 3, 100)]
  >>> t = fit_ctgan_transform(jax.random.key(0), data)
  >>> t.base.discrete_columns, len(t.mode_means[0]) >= 2
  ((1,), True)
  >>> bool(np.allclose(t.decode(t.encode(jax.random.key(1), data)), data))
  True
  """
  _validate.check_key(key)
  data = _check_data(data)
  max_modes = _validate.check_integer("max_modes", max_modes, 1)
  weight_threshold = _check_unit("weight_threshold", weight_threshold)
  base = fit_transform(data, discrete_columns)
  columns = base.continuous_columns
  seeds = np.asarray(jax.random.randint(key, (len(columns),), 0, 2**31 - 1))
  modes = [_fit_modes(data[:, c], max_modes, weight_threshold, int(s))
           for c, s in zip(columns, seeds)]
  counts = tuple(np.array([np.sum(data[:, c] == v) for v in values], np.int64)
                 for c, values in zip(base.discrete_columns, base.categories))
  return CtganTransform(base, tuple(m[0] for m in modes), tuple(m[1] for m in modes),
                        tuple(m[2] for m in modes), counts)


# ----------------------------------------------------------------- conditional vector (Sec. 4.3)


def _category_logits(counts: Sequence[np.ndarray], log_frequency: bool) -> np.ndarray:
  """``[N_d, K]`` log-probabilities of each column's categories (-inf padded): proportional to
  ``log(1 + count)`` (training-by-sampling) or to ``count`` (the data's frequencies)."""
  width = max((len(c) for c in counts), default=1)
  out = np.full((len(counts), width), -np.inf)
  for i, c in enumerate(counts):
    mass = np.log1p(c) if log_frequency else c.astype(np.float64)
    out[i, :len(c)] = np.log(mass / mass.sum())
  return out


def _draw_condition(key: jax.Array, logits: jax.Array, offsets: jax.Array, width: int, num: int
                    ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """``(cond [num, width], column [num], category [num])``: a discrete column uniformly, then
  one of its categories by ``logits``; ``cond`` is the one-hot of that category."""
  key_column, key_category = jax.random.split(key)
  column = jax.random.randint(key_column, (num,), 0, logits.shape[0])
  category = jax.random.categorical(key_category, logits[column])
  cond = jax.nn.one_hot(offsets[column] + category, width, dtype=jnp.float32)
  return cond, column, category


def _offsets(transform: CtganTransform) -> np.ndarray:
  """Start of each discrete column's mask in the conditional vector."""
  return np.cumsum([0] + [len(c) for c in transform.base.categories])[:-1].astype(np.int32)


def sample_condition(key: jax.Array, transform: CtganTransform, n: int,
                     log_frequency: bool = True) -> tuple[np.ndarray, np.ndarray]:
  r"""``n`` conditional vectors (Xu et al. 2019, Sec. 4.3, training-by-sampling).

  Each picks a discrete column :math:`i^*` uniformly and a category :math:`k^*` of it with
  probability proportional to the logarithm of its frequency, :math:`\log(1 + \text{count})`
  (the ``+1`` of the authors' code keeps categories seen once; ``log_frequency=False``: the
  frequency itself, as when sampling synthetic data); the vector is the concatenation of the
  discrete columns' masks :math:`m_1 \oplus \dots \oplus m_{N_d}`, one in place
  :math:`(i^*, k^*)`.

  Args:
    key: PRNG key.
    transform: a :class:`CtganTransform` with at least one discrete column.
    n: number of vectors, >= 1.
    log_frequency: log-frequency (training) or frequency (sampling) of the categories.

  Returns:
    ``(cond, columns)``: float32 ``[n, transform.cond_width]`` one-hot vectors and int
    ``[n]`` the chosen column (index into ``transform.base.discrete_columns``).
  """
  _validate.check_key(key)
  if not isinstance(transform, CtganTransform):
    raise ValueError(f"transform must be a CtganTransform (fit_ctgan_transform), got "
                     f"{type(transform).__name__}")
  if not transform.category_counts:
    raise ValueError("transform has no discrete column, so there is no conditional vector")
  n = _validate.check_integer("n", n, 1)
  if not isinstance(log_frequency, (bool, np.bool_)):
    raise ValueError(f"log_frequency={log_frequency!r} must be a bool")
  logits = jnp.asarray(_category_logits(transform.category_counts, bool(log_frequency)))
  cond, column, _ = _draw_condition(key, logits, jnp.asarray(_offsets(transform)),
                                    transform.cond_width, n)
  return np.asarray(cond), np.asarray(column)


class _RowIndex(NamedTuple):
  """Rows grouped by category, to draw a real row holding a given category: ``order[i]``
  sorts the rows by column ``i``'s category, ``start[i, k]`` / ``count[i, k]`` delimit
  category ``k``."""
  order: np.ndarray
  start: np.ndarray
  count: np.ndarray


def _row_index(encoded: np.ndarray, transform: CtganTransform) -> _RowIndex:
  counts = transform.category_counts
  tail = encoded.shape[1] - transform.cond_width
  shape = (len(counts), max((len(c) for c in counts), default=1))
  order, start, count = [], np.zeros(shape, np.int32), np.zeros(shape, np.int32)
  for i, offset in enumerate(_offsets(transform)):
    size = len(counts[i])
    codes = np.argmax(encoded[:, tail + offset:tail + offset + size], axis=1)
    order.append(np.argsort(codes, kind="stable"))
    count[i, :size] = counts[i]
    start[i, :size] = np.cumsum(np.r_[0, counts[i][:-1]])
  order = np.stack(order) if order else np.zeros((0, len(encoded)), np.int32)
  return _RowIndex(order.astype(np.int32), start, count)


def _draw_rows(key: jax.Array, index: _RowIndex, column: jax.Array, category: jax.Array
               ) -> jax.Array:
  """For each (column, category), a uniformly drawn row index holding that category."""
  count = index.count[column, category]
  pick = jnp.floor(jax.random.uniform(key, column.shape) * count).astype(jnp.int32)
  return index.order[column, index.start[column, category] + jnp.minimum(pick, count - 1)]


# ------------------------------------------------------------------------- networks (Sec. 4.4)


class _Generator(nn.Module):
  r"""CTGAN's generator: residual layers :math:`h_{l+1} = h_l \oplus
  \operatorname{ReLU}(\operatorname{BN}(\operatorname{FC}(h_l)))` from
  :math:`h_0 = z \oplus \text{cond}`, then one linear layer to the encoded row's width (the
  activations :math:`\tanh` / Gumbel-softmax are applied outside)."""
  hidden: tuple[int, ...]
  out_dim: int

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    for width in self.hidden:
      h = nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5)(
          nn.Dense(width)(x))
      x = jnp.concatenate([nn.relu(h), x], axis=-1)
    return nn.Dense(self.out_dim)(x)


class _PacCritic(nn.Module):
  """CTGAN's critic: ``pac`` consecutive rows (each with its cond) concatenated into one input
  (PacGAN, Lin et al. 2018), then LeakyReLU(0.2) layers with dropout and a linear score."""
  hidden: tuple[int, ...]
  pac: int
  dropout: float

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    x = x.reshape(x.shape[0] // self.pac, self.pac * x.shape[1])
    for width in self.hidden:
      x = nn.Dropout(self.dropout, deterministic=not train)(
          nn.leaky_relu(nn.Dense(width)(x), 0.2))
    return nn.Dense(1)(x)[:, 0]


def _activate(raw: jax.Array, layout: Layout, key: jax.Array, tau: float) -> jax.Array:
  r"""Generator outputs -> a row: :math:`\alpha = \tanh(\cdot)`; every one-hot block (modes
  and categories) a Gumbel-softmax with temperature ``tau`` (Sec. 4.4)."""
  gumbel = jax.random.gumbel(key, raw.shape, jnp.float32)
  blocks = _activate_blocks(raw + gumbel, layout, lambda b: jax.nn.softmax(b / tau, axis=-1))
  return jnp.concatenate([jnp.tanh(raw[:, :layout.num_continuous])] + blocks, axis=1)


def _cond_cross_entropy(raw: jax.Array, cond: jax.Array, discrete_sizes: tuple[int, ...]
                        ) -> jax.Array:
  """The generator's conditioning loss (Sec. 4.3): mean over rows of the cross-entropy between
  the softmax of its logits for the conditioned column and the chosen category (``cond`` is
  zero outside that column, so summing over all discrete blocks picks it out)."""
  start, log_probs = raw.shape[1] - sum(discrete_sizes), []
  for size in discrete_sizes:
    log_probs.append(jax.nn.log_softmax(raw[:, start:start + size], axis=-1))
    start += size
  return -jnp.mean(jnp.sum(cond * jnp.concatenate(log_probs, axis=1), axis=1))


# ---------------------------------------------------------------------------------- CTGAN fit


@dataclasses.dataclass(frozen=True)
class CtganConfig:
  r"""CTGAN's architecture and training (Xu et al. 2019, Sec. 4.4 and the authors' code).

  Every training step draws a batch of conditional vectors by training-by-sampling
  (:func:`sample_condition`), takes ``discriminator_steps`` critic steps (real rows drawn to
  hold each vector's category, fakes from the generator) and one generator step; an epoch is
  ``max(1, n // batch_size)`` steps.

  Attributes:
    epochs: passes over the data (300).
    batch_size: rows per step (500), a multiple of ``pac``.
    noise_dim: dimension of :math:`z \sim \mathcal{N}(0, I)` (128, "embedding_dim").
    generator_hidden: widths of the generator's residual layers ((256, 256)).
    discriminator_hidden: widths of the critic's layers ((256, 256)).
    generator_lr, discriminator_lr: Adam's step sizes (2e-4).
    betas: Adam's :math:`(\beta_1, \beta_2)` ((0.5, 0.9)).
    generator_decay, discriminator_decay: L2 weight decay added to the gradients (1e-6).
    discriminator_steps: critic steps per generator step (1).
    pac: rows per critic input (PacGAN, 10).
    gp_weight: gradient-penalty coefficient (10).
    dropout: the critic's dropout rate (0.5).
    gumbel_tau: Gumbel-softmax temperature of the one-hot blocks (0.2).
    log_frequency: train with log-frequency conditions (True) or plain frequencies.
    max_modes, weight_threshold: of the mode-specific normalisation
      (:func:`fit_ctgan_transform`; 10 and 0.005).
  """
  epochs: int = 300
  batch_size: int = 500
  noise_dim: int = 128
  generator_hidden: tuple[int, ...] = (256, 256)
  discriminator_hidden: tuple[int, ...] = (256, 256)
  generator_lr: float = 2e-4
  discriminator_lr: float = 2e-4
  betas: tuple[float, float] = (0.5, 0.9)
  generator_decay: float = 1e-6
  discriminator_decay: float = 1e-6
  discriminator_steps: int = 1
  pac: int = 10
  gp_weight: float = 10.0
  dropout: float = 0.5
  gumbel_tau: float = 0.2
  log_frequency: bool = True
  max_modes: int = 10
  weight_threshold: float = 0.005

  def __post_init__(self):
    for name in ("epochs", "batch_size", "noise_dim", "discriminator_steps", "pac",
                 "max_modes"):
      _validate.check_integer(name, getattr(self, name), 1)
    if self.batch_size % self.pac:
      raise ValueError(f"batch_size={self.batch_size} must be a multiple of pac={self.pac}")
    for name in ("generator_hidden", "discriminator_hidden"):
      object.__setattr__(self, name, _check_widths(name, getattr(self, name)))
    for name in ("generator_lr", "discriminator_lr", "gumbel_tau"):
      _check_positive(name, getattr(self, name))
    for name in ("generator_decay", "discriminator_decay", "gp_weight"):
      _check_nonnegative(name, getattr(self, name))
    betas = self.betas
    if isinstance(betas, (str, bytes)) or not isinstance(betas, Sequence) or len(betas) != 2:
      raise ValueError(f"betas={betas!r} must be a pair (beta1, beta2) in [0, 1)")
    object.__setattr__(self, "betas", tuple(_check_unit("betas", b) for b in betas))
    _check_unit("dropout", self.dropout)
    _check_unit("weight_threshold", self.weight_threshold)
    if not isinstance(self.log_frequency, (bool, np.bool_)):
      raise ValueError(f"log_frequency={self.log_frequency!r} must be a bool")


class CtganModel(NamedTuple):
  """A fitted CTGAN.

  Attributes:
    generator: the generator network (input ``[z, cond]``).
    variables: its flax variables (``params`` and the batch-norm ``batch_stats``; sampling
      uses the running averages). The critic is not kept.
    transform: the :class:`CtganTransform` of the data.
    config: the :class:`CtganConfig`.
    history: float ``[steps, 2]``: the last critic loss and the generator loss of each step.
  """
  generator: _Generator
  variables: PyTree
  transform: CtganTransform
  config: CtganConfig
  history: np.ndarray


def _networks(layout: Layout, config: CtganConfig) -> tuple[_Generator, _PacCritic]:
  return (_Generator(config.generator_hidden, layout.width),
          _PacCritic(config.discriminator_hidden, config.pac, config.dropout))


def _adam(lr: float, decay: float, betas: tuple[float, float]) -> optax.GradientTransformation:
  """PyTorch's ``Adam(weight_decay=decay)``: the L2 term is added to the gradient."""
  return optax.chain(optax.add_decayed_weights(decay), optax.adam(lr, b1=betas[0], b2=betas[1]))


@functools.lru_cache(maxsize=16)
def _ctgan_run(layout: Layout, config: CtganConfig, discrete_sizes: tuple[int, ...],
               num_rows: int, num_steps: int) -> Callable:
  """Jitted ``run(key, rows, logits, offsets, index) -> (variables, history [num_steps, 2])``."""
  generator, critic = _networks(layout, config)
  bs, pac, width = config.batch_size, config.pac, layout.width
  cond_width = sum(discrete_sizes)
  g_opt = _adam(config.generator_lr, config.generator_decay, config.betas)
  d_opt = _adam(config.discriminator_lr, config.discriminator_decay, config.betas)

  def generate(g_params, stats, key, cond):
    key_z, key_act = jax.random.split(key)
    z = jax.random.normal(key_z, (bs, config.noise_dim), jnp.float32)
    raw, new = generator.apply({"params": g_params, "batch_stats": stats},
                               jnp.concatenate([z, cond], axis=1), True, mutable=["batch_stats"])
    return raw, _activate(raw, layout, key_act, config.gumbel_tau), new["batch_stats"]

  def critic_loss(d_params, real, fake, key):
    keys = jax.random.split(key, 4)
    score = lambda x, k: critic.apply({"params": d_params}, x, True, rngs={"dropout": k})
    u = jnp.repeat(jax.random.uniform(keys[3], (bs // pac, 1), jnp.float32), pac, axis=0)
    grads = jax.grad(lambda x: jnp.sum(score(x, keys[2])))(u * real + (1.0 - u) * fake)
    norms = jnp.sqrt(jnp.sum(jnp.square(grads.reshape(bs // pac, -1)), axis=1) + 1e-12)
    penalty = jnp.mean(jnp.square(norms - 1.0))
    return (jnp.mean(score(fake, keys[0])) - jnp.mean(score(real, keys[1]))
            + config.gp_weight * penalty)

  def generator_loss(g_params, stats, d_params, key, cond):
    key_gen, key_drop = jax.random.split(key)
    raw, fake, stats = generate(g_params, stats, key_gen, cond)
    score = critic.apply({"params": d_params}, jnp.concatenate([fake, cond], axis=1), True,
                         rngs={"dropout": key_drop})
    loss = -jnp.mean(score)
    if discrete_sizes:
      loss = loss + _cond_cross_entropy(raw, cond, discrete_sizes)
    return loss, stats

  def run(key, rows, logits, offsets, index):
    rows = jnp.asarray(rows, jnp.float32)
    key_g, key_d, key_train = jax.random.split(key, 3)
    inputs = jnp.zeros((bs, config.noise_dim + cond_width), jnp.float32)
    variables = generator.init(key_g, inputs, False)
    d_params = critic.init(key_d, jnp.zeros((bs, width + cond_width), jnp.float32),
                           False)["params"]

    def conditions(key):
      if not discrete_sizes:
        return jnp.zeros((bs, 0), jnp.float32), None, None
      return _draw_condition(key, logits, offsets, cond_width, bs)

    def critic_step(carry, key):
      g_params, stats, d_params, d_state = carry
      k_cond, k_rows, k_fake, k_loss = jax.random.split(key, 4)
      cond, column, category = conditions(k_cond)
      # Training-by-sampling: each real row holds the category its fake's condition names.
      if discrete_sizes:
        real = rows[_draw_rows(k_rows, index, column, category)]
      else:
        real = rows[jax.random.randint(k_rows, (bs,), 0, num_rows)]
      _, fake, stats = generate(g_params, stats, k_fake, cond)
      real = jnp.concatenate([real, cond], axis=1)
      fake = jnp.concatenate([jax.lax.stop_gradient(fake), cond], axis=1)
      loss, grads = jax.value_and_grad(critic_loss)(d_params, real, fake, k_loss)
      updates, d_state = d_opt.update(grads, d_state, d_params)
      return (g_params, stats, optax.apply_updates(d_params, updates), d_state), loss

    def step(carry, key):
      g_params, stats, d_params, g_state, d_state = carry
      k_critic, k_cond, k_gen = jax.random.split(key, 3)
      (_, stats, d_params, d_state), d_losses = jax.lax.scan(
          critic_step, (g_params, stats, d_params, d_state),
          jax.random.split(k_critic, config.discriminator_steps))
      cond, _, _ = conditions(k_cond)
      (g_loss, stats), grads = jax.value_and_grad(generator_loss, has_aux=True)(
          g_params, stats, d_params, k_gen, cond)
      updates, g_state = g_opt.update(grads, g_state, g_params)
      carry = (optax.apply_updates(g_params, updates), stats, d_params, g_state, d_state)
      return carry, jnp.stack([d_losses[-1], g_loss])

    g_params, stats = variables["params"], variables["batch_stats"]
    carry = (g_params, stats, d_params, g_opt.init(g_params), d_opt.init(d_params))
    (g_params, stats, _, _, _), history = jax.lax.scan(
        step, carry, jax.random.split(key_train, num_steps))
    return {"params": g_params, "batch_stats": stats}, history

  return jax.jit(run)


def fit_ctgan(key: jax.Array, data: Any, config: CtganConfig = CtganConfig(),
              discrete_columns: Sequence[int] | None = None) -> CtganModel:
  r"""Fits CTGAN (Xu et al. 2019) to the rows of ``data``.

  The data are encoded once by :func:`fit_ctgan_transform` (modes sampled per value). Each
  step draws conditional vectors by training-by-sampling (:func:`sample_condition`), fakes
  from them, and for each vector a real row holding its category (Sec. 4.3). Critic loss, on
  packs of ``pac`` rows each concatenated with its conditional vector, is WGAN-GP's (Gulrajani
  et al. 2017, Eq. 3): :math:`\mathbb{E}[C(\hat r)] - \mathbb{E}[C(r)] + 10\,
  \mathbb{E}[(\lVert\nabla C(\tilde r)\rVert_2 - 1)^2]`, the gradient norm taken over a pack and
  the interpolation weight shared within it. Generator loss: :math:`-\mathbb{E}[C(\hat r)]` plus
  the cross-entropy between the conditioned column's generated distribution and the chosen
  category (Sec. 4.3). One jitted program per data shape and config.

  Args:
    key: PRNG key (mixtures, mode sampling, initialisation, training).
    data: ``[n, d]`` finite numbers, ``n >= 2``, no constant column.
    config: the :class:`CtganConfig`.
    discrete_columns: as in :func:`fit_ctgan_transform`.

  Returns:
    The fitted :class:`CtganModel`.
  """
  _validate.check_key(key)
  _check_config(config, CtganConfig, "fit_ctgan")
  transform, run, args = _ctgan_program(key, _check_data(data), config, discrete_columns)
  variables, history = run(*args)
  return CtganModel(_networks(transform.layout, config)[0], variables, transform, config,
                    np.asarray(history))


def _ctgan_program(key: jax.Array, data: np.ndarray, config: CtganConfig,
                   discrete_columns: Sequence[int] | None) -> tuple[CtganTransform, Callable,
                                                                    tuple]:
  """The transform, the jitted training program and its arguments (``run(*args)`` fits)."""
  key_transform, key_encode, key_train = jax.random.split(key, 3)
  transform = fit_ctgan_transform(key_transform, data, discrete_columns, config.max_modes,
                                  config.weight_threshold)
  rows = transform.encode(key_encode, data).astype(np.float32)
  sizes = tuple(len(c) for c in transform.category_counts)
  steps = config.epochs * max(1, len(rows) // config.batch_size)
  run = _ctgan_run(transform.layout, config, sizes, len(rows), steps)
  logits = _category_logits(transform.category_counts, config.log_frequency)
  index = _RowIndex(*(jnp.asarray(a) for a in _row_index(rows, transform)))
  return transform, run, (key_train, jnp.asarray(rows), jnp.asarray(logits, jnp.float32),
                          jnp.asarray(_offsets(transform)), index)


@functools.lru_cache(maxsize=32)
def _ctgan_sample_fn(generator: _Generator, layout: Layout, noise_dim: int, tau: float,
                     cond_width: int, num: int) -> Callable:
  def sample(key, variables, logits, offsets):
    key_cond, key_z, key_act = jax.random.split(key, 3)
    if cond_width:
      cond = _draw_condition(key_cond, logits, offsets, cond_width, num)[0]
    else:
      cond = jnp.zeros((num, 0), jnp.float32)
    z = jax.random.normal(key_z, (num, noise_dim), jnp.float32)
    raw = generator.apply(variables, jnp.concatenate([z, cond], axis=1), False)
    return _activate(raw, layout, key_act, tau)

  return jax.jit(sample)


def sample_ctgan(key: jax.Array, model: CtganModel, n: int) -> np.ndarray:
  """``n`` synthetic rows from a fitted CTGAN, in data units.

  Conditional vectors are drawn with the data's category frequencies (a discrete column
  uniformly, then a category by its frequency: Xu et al. 2019, Sec. 4.3, which recovers the
  data's marginals), the generator runs with its batch-norm running averages, and every
  one-hot block is sampled (Gumbel-max of its logits); continuous values are
  :math:`\\eta_k + 4 \\phi_k \\tanh(\\cdot)` of the sampled mode :math:`k`.

  Args:
    key: PRNG key.
    model: a :class:`CtganModel`.
    n: number of rows, >= 1.

  Returns:
    float64 ``[n, d]``.
  """
  _validate.check_key(key)
  if not isinstance(model, CtganModel):
    raise ValueError(f"model must be a CtganModel (fit_ctgan), got {type(model).__name__}")
  n = _validate.check_integer("n", n, 1)
  transform, config = model.transform, model.config
  fn = _ctgan_sample_fn(model.generator, transform.layout, config.noise_dim, config.gumbel_tau,
                        transform.cond_width, n)
  logits = _category_logits(transform.category_counts, log_frequency=False)
  encoded = fn(key, model.variables, jnp.asarray(logits, jnp.float32),
               jnp.asarray(_offsets(transform)))
  return transform.decode(np.asarray(encoded))


# -------------------------------------------------------------------------------- vanilla GAN


@dataclasses.dataclass(frozen=True)
class GanVanillaConfig:
  """A vanilla GAN (Goodfellow et al. 2014, Alg. 1) for :func:`fit_vanilla_gan`.

  The networks and the encoding are those of the WGAN-GP of
  :mod:`~dpaudit.models.tabular_generators` (ReLU generator with linear continuous outputs and
  Gumbel-softmax blocks; LeakyReLU(0.2) discriminator), the discriminator's output a logit.
  Adam with :math:`(\\beta_1, \\beta_2) = (0.5, 0.999)` (Radford et al. 2016) replaces the
  paper's momentum SGD. The default 5,000 iterations give the discriminator as many updates as
  the WGAN-GP's default critic (1,000 iterations of 5 steps). On 5,000 rows of California
  Housing the samples' marginals were 0.135 column standard deviations (mean Wasserstein-1
  over the columns) from held-out rows, against 0.50 with 1,000 iterations.

  Attributes:
    iterations: generator updates.
    batch_size: minibatch size of every step (real rows drawn uniformly with replacement).
    noise_dim: dimension of :math:`z \\sim \\mathcal{N}(0, I)`.
    generator_hidden, discriminator_hidden: hidden layer widths.
    discriminator_steps: discriminator steps per generator step (Alg. 1's :math:`k`, 1).
    learning_rate, beta1, beta2: Adam's, for both networks.
    gumbel_tau: Gumbel-softmax temperature of the one-hot blocks.
  """
  iterations: int = 5000
  batch_size: int = 256
  noise_dim: int = 128
  generator_hidden: tuple[int, ...] = (256, 256)
  discriminator_hidden: tuple[int, ...] = (256, 256)
  discriminator_steps: int = 1
  learning_rate: float = 2e-4
  beta1: float = 0.5
  beta2: float = 0.999
  gumbel_tau: float = 0.2

  def __post_init__(self):
    for name in ("iterations", "batch_size", "noise_dim", "discriminator_steps"):
      _validate.check_integer(name, getattr(self, name), 1)
    for name in ("generator_hidden", "discriminator_hidden"):
      object.__setattr__(self, name, _check_widths(name, getattr(self, name)))
    for name in ("learning_rate", "gumbel_tau"):
      _check_positive(name, getattr(self, name))
    for name in ("beta1", "beta2"):
      _check_unit(name, getattr(self, name))


def _vanilla_networks(layout: Layout, config: GanVanillaConfig) -> tuple[_Mlp, _Mlp]:
  return (_Mlp(config.generator_hidden, layout.width),
          _Mlp(config.discriminator_hidden, 1, leaky=True))


@functools.lru_cache(maxsize=16)
def _vanilla_run(layout: Layout, config: GanVanillaConfig, num_rows: int) -> Callable:
  """Jitted ``run(key, rows) -> (generator params, discriminator params, history
  [iterations, 2])``."""
  generator, discriminator = _vanilla_networks(layout, config)
  bs = config.batch_size
  optimizer = optax.adam(config.learning_rate, b1=config.beta1, b2=config.beta2)

  def generate(g_params, key):
    return _gan_generate(generator, layout, config.noise_dim, config.gumbel_tau, g_params, key,
                         None, bs)

  def logit(d_params, rows):
    return discriminator.apply({"params": d_params}, rows)[:, 0]

  def discriminator_loss(d_params, real, fake):
    # -log D(x) - log(1 - D(G(z))) with D = sigmoid(logit): softplus(-l) and softplus(l).
    return (jnp.mean(jax.nn.softplus(-logit(d_params, real)))
            + jnp.mean(jax.nn.softplus(logit(d_params, fake))))

  def generator_loss(g_params, d_params, key):
    # The non-saturating loss -log D(G(z)) (Sec. 3 of the paper).
    return jnp.mean(jax.nn.softplus(-logit(d_params, generate(g_params, key))))

  def run(key, rows):
    key_g, key_d, key_train = jax.random.split(key, 3)
    g_params = generator.init(key_g, jnp.zeros((1, config.noise_dim), jnp.float32))["params"]
    d_params = discriminator.init(key_d, jnp.zeros((1, layout.width), jnp.float32))["params"]

    def d_step(carry, key):
      g_params, d_params, d_state = carry
      key_real, key_fake = jax.random.split(key)
      real = rows[jax.random.randint(key_real, (bs,), 0, num_rows)]
      fake = jax.lax.stop_gradient(generate(g_params, key_fake))
      loss, grads = jax.value_and_grad(discriminator_loss)(d_params, real, fake)
      updates, d_state = optimizer.update(grads, d_state, d_params)
      return (g_params, optax.apply_updates(d_params, updates), d_state), loss

    def iteration(carry, key):
      g_params, d_params, g_state, d_state = carry
      key_d, key_g = jax.random.split(key)
      (_, d_params, d_state), d_losses = jax.lax.scan(
          d_step, (g_params, d_params, d_state),
          jax.random.split(key_d, config.discriminator_steps))
      g_loss, grads = jax.value_and_grad(generator_loss)(g_params, d_params, key_g)
      updates, g_state = optimizer.update(grads, g_state, g_params)
      carry = (optax.apply_updates(g_params, updates), d_params, g_state, d_state)
      return carry, jnp.stack([d_losses[-1], g_loss])

    carry = (g_params, d_params, optimizer.init(g_params), optimizer.init(d_params))
    (g_params, d_params, _, _), history = jax.lax.scan(
        iteration, carry, jax.random.split(key_train, config.iterations))
    return g_params, d_params, history

  return jax.jit(run)


def fit_vanilla_gan(key: jax.Array, data: Any, config: GanVanillaConfig = GanVanillaConfig(),
                    discrete_columns: Sequence[int] | None = None) -> GanModel:
  r"""Fits a vanilla GAN (Goodfellow et al. 2014, Alg. 1) to the rows of ``data``.

  The discriminator :math:`D = \sigma(\cdot)` ascends :math:`\mathbb{E}[\log D(x)] +
  \mathbb{E}[\log(1 - D(G(z)))]` (the value function of their Eq. 1); the generator minimises
  the non-saturating :math:`-\mathbb{E}[\log D(G(z))]` (their Sec. 3). No gradient penalty.
  Rows are encoded by :func:`~dpaudit.models.tabular_generators.fit_transform`.

  Args:
    key: PRNG key.
    data: ``[n, d]`` finite numbers, ``n >= 2``, no constant column.
    config: the :class:`GanVanillaConfig`.
    discrete_columns: as in :func:`~dpaudit.models.tabular_generators.fit_transform`.

  Returns:
    A :class:`~dpaudit.models.tabular_generators.GanModel` (``records`` None; ``critic`` the
    discriminator, whose logits :func:`~dpaudit.models.tabular_generators.critic_scores`
    returns).
  """
  _validate.check_key(key)
  _check_config(config, GanVanillaConfig, "fit_vanilla_gan")
  data = _check_data(data)
  transform = fit_transform(data, discrete_columns)
  rows = transform.encode(data)
  g_params, d_params, history = _vanilla_run(transform.layout, config, len(rows))(
      key, jnp.asarray(rows))
  generator, discriminator = _vanilla_networks(transform.layout, config)
  return GanModel(generator, g_params, transform, config, np.asarray(history), None,
                  discriminator, d_params)


def sample_vanilla_gan(key: jax.Array, model: GanModel, n: int) -> np.ndarray:
  """``n`` synthetic rows from :func:`fit_vanilla_gan`'s model, in data units (one-hot blocks
  sampled: :func:`~dpaudit.models.tabular_generators.sample_gan`).

  Returns:
    float64 ``[n, d]``.
  """
  if not isinstance(model, GanModel) or not isinstance(model.config, GanVanillaConfig):
    raise ValueError(f"model must be a GanModel from fit_vanilla_gan, got "
                     f"{type(model).__name__}")
  return sample_gan(key, model, n)


register_generator("ctgan", CtganConfig, fit_ctgan, sample_ctgan, replace=True)
register_generator("gan", GanVanillaConfig, fit_vanilla_gan, sample_vanilla_gan, replace=True)
