r"""Membership inference against synthetic data: DOMIAS and the baselines it is compared with.

DOMIAS (van Breugel, Sun, Qian & van der Schaar, "Membership Inference Attacks against Synthetic
Data through Overfitting Detection", AISTATS 2023) sees only a published synthetic dataset
:math:`\mathcal{D}_{syn}` drawn from a generator :math:`G` fitted to the members
:math:`\mathcal{D}_{mem}`, and a reference sample :math:`\mathcal{D}_{ref}` of real data. It scores
a record by how much the generator *over*-represents it,

.. math:: A(x) = \frac{p_G(x)}{p_R(x)} \qquad\text{(Eq. 2)},

where earlier black-box attacks score by :math:`p_G(x)` alone (Eq. 1), which cannot tell an
overfitted record in a sparse region from a typical record in a dense one. Every function here
returns one score per record, higher meaning "more likely a member"; all scores are in log
space or are monotone transforms of the papers' scores (the ranking, hence every metric, is
the same).

* :func:`domias_scores` (Eq. 2) and :func:`eq1_scores` (Eq. 1, the ablation of Sec. 5.2),
  from log-densities of :mod:`dpaudit.attacks.density` fitted to the synthetic and reference
  data.
* :func:`gan_leaks_scores`: GAN-leaks 0 (Chen et al., "GAN-Leaks", CCS 2020, Sec. 5.1): the
  negative distance to the nearest synthetic record.
* :func:`gan_leaks_cal_scores`: GAN-leaks CAL (Chen et al., Sec. 5.5): the same distance
  calibrated by that to the nearest record of a *reference generator* fitted to
  :math:`\mathcal{D}_{ref}` (``squared=True`` with :math:`\mathcal{D}_{ref}` itself as the
  calibration set: the DOMIAS authors' code).
* :func:`mc_scores`: MC (Hilprecht, Härterich & Bernau, "Monte Carlo and Reconstruction
  Membership Inference Attacks against Generative Models", PoPETs 2019, Sec. 4.1): the share of
  synthetic records within a radius :math:`\epsilon` of the record (a Monte Carlo estimate of
  :math:`P_G(U_\epsilon(x))`), optionally after PCA; :math:`\epsilon` by their median
  heuristic, the median over the scored records of the distance to the nearest synthetic one.
* :func:`logan_d1_scores`: LOGAN D1 (Hayes et al., "LOGAN", PoPETs 2019, Sec. 4.1,
  discriminative setting 1): a classifier trained to tell synthetic from reference records,
  early-stopped; :func:`logan_d1_fixed_scores`: the same attack as the DOMIAS authors' code
  trains it (256-256, a fixed number of steps, :class:`LoganD1Config`).
* :func:`logan_0_scores`: LOGAN 0 (Hayes et al., Sec. 3): the critic of a GAN trained on the
  synthetic data alone: a WGAN-GP's, or (:class:`CtganCriticConfig`) the CTGAN-style
  discriminator the DOMIAS authors' code uses (:func:`fit_ctgan_critic`).

:data:`BASELINES` names the two forms of GAN-leaks CAL and LOGAN: ``"paper"`` (the attacks as
their own papers and DOMIAS's Sec. 4 describe them, the default) and ``"authors_code"`` (as the
DOMIAS authors' public code runs them).

Distances are Euclidean, on data standardised by the reference set's statistics (the attacker's
own real data): :func:`standardise`. Nearest-neighbour searches run in chunks of the scored
records, so ``[m, n]`` distance matrices never exist beyond one chunk.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpaudit import _validate
from dpaudit.attacks import panoramia as classifiers
from dpaudit.models import tabular_generators

ATTACKS = ("domias", "eq1", "logan_0", "logan_d1", "mc", "gan_leaks", "gan_leaks_cal")
BASELINES = ("paper", "authors_code")  # the forms of GAN-leaks CAL and LOGAN; the first is default


def check_rows(name: str, x: Any, num_columns: int | None = None) -> np.ndarray:
  """``x`` as a finite float ``[n, d]`` array with n >= 1 (and d == ``num_columns``)."""
  x = np.asarray(x)
  if x.ndim != 2 or x.shape[0] < 1 or x.dtype.kind not in "fiub":
    raise ValueError(f"{name} must be a non-empty numeric [n, d] array, got {x.dtype} of shape "
                     f"{x.shape}")
  if num_columns is not None and x.shape[1] != num_columns:
    raise ValueError(f"{name} has {x.shape[1]} columns; the other sets have {num_columns}")
  if not np.all(np.isfinite(x)):
    raise ValueError(f"{name} contains NaN or infinite values")
  return x


def standardise(reference: Any, *arrays: Any) -> tuple[np.ndarray, ...]:
  """Each of ``arrays`` centred and scaled column-wise by ``reference``'s mean and standard
  deviation. A column constant in ``reference`` raises ValueError naming it."""
  reference = check_rows("reference", reference)
  std = reference.std(0)
  if np.any(std == 0):
    raise ValueError(f"column {int(np.argmax(std == 0))} of the reference data is constant; "
                     "distances need a spread in every column")
  mean = reference.mean(0)
  return tuple((check_rows(f"arrays[{i}]", a, reference.shape[1]) - mean) / std
               for i, a in enumerate(arrays))


def _map_squared_distances(reduce, x: jax.Array, points: jax.Array,
                           chunk_size: int) -> jax.Array:
  """``reduce(squared distances [chunk, n]) -> [chunk]`` for each chunk of rows of ``x`` (padded
  to whole chunks), so an ``[m, n]`` matrix exists one chunk at a time."""
  squared_points = jnp.sum(points**2, axis=1)

  def chunk(rows):
    return reduce(jnp.sum(rows**2, axis=1)[:, None] - 2.0 * rows @ points.T
                  + squared_points[None, :])

  m = x.shape[0]
  padded = jnp.pad(x, ((0, -m % chunk_size), (0, 0)))
  out = jax.lax.map(chunk, padded.reshape((-1, chunk_size, x.shape[1])))
  return out.reshape(-1)[:m]


@functools.partial(jax.jit, static_argnames=("chunk_size",))
def _nearest_distances(x: jax.Array, points: jax.Array, chunk_size: int) -> jax.Array:
  """Distance from each row of ``x`` to its nearest row of ``points``."""
  return _map_squared_distances(
      lambda squared: jnp.sqrt(jnp.maximum(jnp.min(squared, axis=1), 0.0)), x, points,
      chunk_size)


@functools.partial(jax.jit, static_argnames=("chunk_size",))
def _share_within(x: jax.Array, points: jax.Array, radius: jax.Array,
                  chunk_size: int) -> jax.Array:
  """Share of ``points`` within ``radius`` of each row of ``x``."""
  return _map_squared_distances(lambda squared: jnp.mean(squared <= radius**2, axis=1), x,
                                points, chunk_size)


def nearest_distances(x: Any, points: Any, chunk_size: int = 256) -> np.ndarray:
  """Euclidean distance from each row of ``x`` ``[m, d]`` to its nearest row of ``points``
  ``[n, d]``, computed in float64 (when enabled) in chunks of ``chunk_size`` rows of x."""
  x = check_rows("x", x)
  points = check_rows("points", points, x.shape[1])
  _validate.check_integer("chunk_size", chunk_size, 1)
  return np.asarray(_nearest_distances(jnp.asarray(x), jnp.asarray(points),
                                       chunk_size=min(chunk_size, x.shape[0])))


def _log_densities(name: str, values: Any) -> np.ndarray:
  """1-D real log-densities as float64: infinities allowed (a density may underflow to 0 or be
  a point mass), NaN, booleans, complex numbers and strings not."""
  _validate.check_real_array(name, values, ndim=1, nonempty=False, neg_inf=True, pos_inf=True)
  return np.asarray(values, np.float64)


def domias_scores(log_p_synthetic: Any, log_p_reference: Any) -> np.ndarray:
  r"""DOMIAS, Eq. (2) of van Breugel et al.: :math:`\log p_G(x) - \log p_R(x)`, the log of the
  density ratio, from log-densities fitted to the synthetic and to the reference data.

  Where both log-densities are :math:`-\infty` (neither estimate puts mass on the record, e.g.
  after underflow far from all data) or both :math:`+\infty`, the ratio is 0/0 (or inf/inf)
  and the difference NaN; the score there is 0, the log of a ratio of 1: the generator neither
  over- nor under-represents the record relative to the real data, which is all Eq. (2)
  measures, so the record ranks between those it over-represents (score > 0) and those it
  under-represents (< 0). One infinite side gives :math:`\pm\infty` as the ratio does
  (:math:`p_R = 0 < p_G`: :math:`+\infty`).
  """
  log_g = _log_densities("log_p_synthetic", log_p_synthetic)
  log_r = _log_densities("log_p_reference", log_p_reference)
  _validate.check_same_shape("log_p_synthetic", log_g, "log_p_reference", log_r)
  same_infinity = np.isinf(log_g) & (log_g == log_r)
  with np.errstate(invalid="ignore"):
    return np.where(same_infinity, 0.0, log_g - log_r)


def eq1_scores(log_p_synthetic: Any) -> np.ndarray:
  r"""The ablation of Sec. 5.2 (Eq. 1 of van Breugel et al.): :math:`\log p_G(x)` alone."""
  return _log_densities("log_p_synthetic", log_p_synthetic)


def gan_leaks_scores(x: Any, synthetic: Any) -> np.ndarray:
  r"""GAN-leaks 0 (Chen et al. 2020, full black-box): :math:`-\min_j \|x - s_j\|_2` over the
  synthetic records :math:`s_j` (the paper's :math:`\exp(-L_2)` up to a monotone map)."""
  x = check_rows("x", x)
  return -nearest_distances(x, check_rows("synthetic", synthetic, x.shape[1]))


def gan_leaks_cal_scores(x: Any, synthetic: Any, reference_synthetic: Any,
                         squared: bool = False) -> np.ndarray:
  r"""GAN-leaks CAL (Chen et al. 2020, Sec. 5.5):
  :math:`-\min_j \|x - s_j\| + \min_j \|x - r_j\|`, where :math:`r_j` are drawn from a
  reference generator fitted to the reference data: records close to the synthetic data *more*
  than a generator that never saw them would put them score high.

  ``squared=True`` calibrates with squared distances,
  :math:`-\min_j \|x - s_j\|^2 + \min_j \|x - r_j\|^2` (a different ranking): the DOMIAS
  authors' code, which passes :math:`\mathcal{D}_{ref}` itself as the :math:`r_j` (no reference
  generator) and scores the sigmoid of this difference (the same ranking).
  """
  x = check_rows("x", x)
  synthetic = check_rows("synthetic", synthetic, x.shape[1])
  reference_synthetic = check_rows("reference_synthetic", reference_synthetic, x.shape[1])
  if not isinstance(squared, (bool, np.bool_)):
    raise ValueError(f"squared={squared!r} must be True or False")
  to_synthetic = nearest_distances(x, synthetic)
  to_reference = nearest_distances(x, reference_synthetic)
  if squared:
    return to_reference**2 - to_synthetic**2
  return to_reference - to_synthetic


def _pca_projection(data: np.ndarray, num_components: int) -> tuple[np.ndarray, np.ndarray]:
  """Mean and the top ``num_components`` principal axes ``[d, k]`` of ``data``."""
  mean = data.mean(0)
  _, _, vt = np.linalg.svd(data - mean, full_matrices=False)
  return mean, vt[:num_components].T


def mc_scores(x: Any, synthetic: Any, num_components: int | None = None,
              radius: float | None = None, chunk_size: int = 256) -> np.ndarray:
  r"""MC (Hilprecht et al. 2019, Eq. 4): the share of synthetic records in the
  :math:`\epsilon`-ball around each record,

  .. math:: \hat f(x) = \frac{1}{n} \sum_{j=1}^n \mathbb{1}[\|x - s_j\|_2 \le \epsilon],

  optionally in the space of the synthetic data's first ``num_components`` principal components
  (their PCA variant). ``radius`` None uses their median heuristic: the median, over the scored
  records, of the distance to the nearest synthetic record.
  """
  x = check_rows("x", x)
  synthetic = check_rows("synthetic", synthetic, x.shape[1])
  _validate.check_integer("chunk_size", chunk_size, 1)
  if radius is not None:
    _validate.check_range("radius", radius, 0.0, finite=True)
  if num_components is not None:
    _validate.check_integer("num_components", num_components, 1)
    if num_components > x.shape[1]:
      raise ValueError(f"num_components={num_components} exceeds the {x.shape[1]} columns")
    mean, axes = _pca_projection(synthetic, num_components)
    x, synthetic = (x - mean) @ axes, (synthetic - mean) @ axes
  if radius is None:
    radius = float(np.median(nearest_distances(x, synthetic, chunk_size)))
  return np.asarray(_share_within(jnp.asarray(x), jnp.asarray(synthetic), jnp.asarray(radius),
                                  chunk_size=min(chunk_size, x.shape[0])))


def _balanced(key: jax.Array, synthetic: np.ndarray, reference: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
  """Synthetic (label 1) and reference (0) rows, the larger set subsampled at random to the size
  of the smaller so that the classes are balanced: (inputs [2n, d] float32, labels [2n])."""
  key_syn, key_ref = jax.random.split(key)
  n = min(synthetic.shape[0], reference.shape[0])
  synthetic = synthetic[np.asarray(jax.random.permutation(key_syn, synthetic.shape[0]))[:n]]
  reference = reference[np.asarray(jax.random.permutation(key_ref, reference.shape[0]))[:n]]
  return (np.concatenate([synthetic, reference]).astype(np.float32),
          np.concatenate([np.ones(n), np.zeros(n)]))


def _d1_inputs(x, synthetic, reference):
  synthetic = check_rows("synthetic", synthetic)
  reference = check_rows("reference", reference, synthetic.shape[1])
  return check_rows("x", x, synthetic.shape[1]), synthetic, reference


def fit_logan_d1(key: jax.Array, synthetic: Any, reference: Any,
                 config: classifiers.ClassifierConfig = classifiers.ClassifierConfig(),
                 hidden_sizes: tuple[int, ...] = (64, 64)) -> classifiers.FittedClassifier:
  """LOGAN D1's classifier (Hayes et al. 2019, Sec. 4.1) as :func:`logan_d1_scores` trains it:
  :class:`dpaudit.attacks.panoramia.MembershipNet` on an MLP of ``hidden_sizes``, synthetic
  (1) against reference (0) rows, balanced, the best epoch on a validation split kept."""
  _validate.check_key(key)
  if not isinstance(config, classifiers.ClassifierConfig):
    raise ValueError(f"config must be a ClassifierConfig, got {type(config).__name__}")
  if isinstance(hidden_sizes, (str, bytes)) or not hasattr(hidden_sizes, "__iter__"):
    raise ValueError(f"hidden_sizes={hidden_sizes!r} must be a sequence of layer widths")
  for width in hidden_sizes:
    _validate.check_integer("hidden_sizes", width, 1)
  synthetic = check_rows("synthetic", synthetic)
  reference = check_rows("reference", reference, synthetic.shape[1])
  key_data, key_fit = jax.random.split(key)
  inputs, labels = _balanced(key_data, synthetic, reference)
  return classifiers.fit_classifier(key_fit, classifiers.VectorEncoder(tuple(hidden_sizes)),
                                    inputs, classifiers.no_side(inputs.shape[0]), labels, config)


def logan_d1_scores(key: jax.Array, x: Any, synthetic: Any, reference: Any,
                    config: classifiers.ClassifierConfig = classifiers.ClassifierConfig(),
                    hidden_sizes: tuple[int, ...] = (64, 64)) -> np.ndarray:
  """LOGAN D1 (Hayes et al. 2019, Sec. 4.1): an MLP trained to tell synthetic records (1) from
  reference records (0), with early stopping on a validation split; the score is its logit.
  The larger set is subsampled to the size of the smaller, so the classes are balanced
  (:func:`fit_logan_d1`)."""
  _validate.check_key(key)
  x, synthetic, reference = _d1_inputs(x, synthetic, reference)
  fitted = fit_logan_d1(key, synthetic, reference, config, hidden_sizes)
  return classifiers.classifier_scores(fitted, x.astype(np.float32),
                                       classifiers.no_side(x.shape[0])).astype(np.float64)


@dataclasses.dataclass(frozen=True)
class LoganD1Config:
  """LOGAN D1 as the DOMIAS authors' code trains it (:func:`logan_d1_fixed_scores`), but with
  minibatches drawn from both classes: the code draws its indices from the first half of the
  training rows only (the synthetic ones), so its classifier never sees the reference data.

  Attributes:
    hidden_sizes: widths of the ReLU layers (the code: 256, 256), then two logits.
    steps: Adam steps; None: the code's ``int(300 * m / batch_size)`` for m scored records
      (at least 1).
    batch_size: rows per step, drawn uniformly with replacement from the balanced set.
    learning_rate: Adam's step size.
  """
  hidden_sizes: tuple[int, ...] = (256, 256)
  steps: int | None = None
  batch_size: int = 256
  learning_rate: float = 1e-3

  def __post_init__(self):
    if isinstance(self.hidden_sizes, (str, bytes)) or not hasattr(self.hidden_sizes, "__iter__"):
      raise ValueError(f"hidden_sizes={self.hidden_sizes!r} must be a sequence of layer widths")
    object.__setattr__(self, "hidden_sizes", tuple(self.hidden_sizes))
    _validate.check_nonempty("hidden_sizes", self.hidden_sizes)
    for width in self.hidden_sizes:
      _validate.check_integer("hidden_sizes", width, 1)
    if self.steps is not None:
      _validate.check_integer("steps", self.steps, 1)
    _validate.check_integer("batch_size", self.batch_size, 1)
    _validate.check_range("learning_rate", self.learning_rate, 0.0, low_open=True, finite=True)

  def num_steps(self, num_scored: int) -> int:
    """Adam steps for ``num_scored`` scored records."""
    if self.steps is not None:
      return self.steps
    return max(1, int(300 * num_scored / self.batch_size))


class FixedStepClassifier(NamedTuple):
  """A classifier of :func:`fit_logan_d1_fixed`: ``module`` (an MLP with two outputs), its
  ``params`` and the cross-entropy of each step ``[steps]``."""
  module: nn.Module
  params: Any
  loss: np.ndarray


@functools.partial(jax.jit, static_argnums=0)
def _apply(module: nn.Module, params: Any, rows: jax.Array) -> jax.Array:
  """``module``'s output on ``rows`` (dropout, if any, off)."""
  return module.apply({"params": params}, rows)


@functools.partial(jax.jit, static_argnames=("module", "steps", "batch_size", "learning_rate"))
def _fit_fixed_steps(key, inputs, labels, module, steps, batch_size, learning_rate):
  """Adam on the mean cross-entropy of ``steps`` minibatches drawn with replacement."""
  key_init, key_steps = jax.random.split(key)
  params = module.init(key_init, inputs[:1])["params"]
  optimizer = optax.adam(learning_rate)

  def step(carry, key):
    params, state = carry
    index = jax.random.randint(key, (batch_size,), 0, inputs.shape[0])

    def loss_fn(params):
      logits = module.apply({"params": params}, inputs[index])
      return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels[index]))
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, state = optimizer.update(grads, state, params)
    return (optax.apply_updates(params, updates), state), loss

  (params, _), losses = jax.lax.scan(step, (params, optimizer.init(params)),
                                     jax.random.split(key_steps, steps))
  return params, losses


def fit_logan_d1_fixed(key: jax.Array, synthetic: Any, reference: Any,
                       config: LoganD1Config = LoganD1Config(),
                       num_scored: int = 1) -> FixedStepClassifier:
  """LOGAN D1's classifier as the DOMIAS authors' code trains it: an MLP of
  ``config.hidden_sizes`` (ReLU) with two logits, synthetic (1) against reference (0) rows
  (balanced), softmax cross-entropy, Adam for ``config.num_steps(num_scored)`` steps, no
  validation split and no early stopping."""
  _validate.check_key(key)
  if not isinstance(config, LoganD1Config):
    raise ValueError(f"config must be a LoganD1Config, got {type(config).__name__}")
  _validate.check_integer("num_scored", num_scored, 1)
  synthetic = check_rows("synthetic", synthetic)
  reference = check_rows("reference", reference, synthetic.shape[1])
  key_data, key_fit = jax.random.split(key)
  inputs, labels = _balanced(key_data, synthetic, reference)
  module = tabular_generators._Mlp(config.hidden_sizes, 2)  # pylint: disable=protected-access
  params, losses = _fit_fixed_steps(key_fit, jnp.asarray(inputs), jnp.asarray(labels, jnp.int32),
                                    module, config.num_steps(num_scored), config.batch_size,
                                    float(config.learning_rate))
  return FixedStepClassifier(module, params, np.asarray(losses))


def logan_d1_fixed_scores(key: jax.Array, x: Any, synthetic: Any, reference: Any,
                          config: LoganD1Config = LoganD1Config()) -> np.ndarray:
  """LOGAN D1 (Hayes et al. 2019, Sec. 4.1) as the DOMIAS authors' code runs it
  (:func:`fit_logan_d1_fixed`, ``num_scored`` = the rows of ``x``): the score is the network's
  logit of the synthetic class (as the code returns it; not the log-odds of the two logits)."""
  _validate.check_key(key)
  x, synthetic, reference = _d1_inputs(x, synthetic, reference)
  fitted = fit_logan_d1_fixed(key, synthetic, reference, config, x.shape[0])
  logits = _apply(fitted.module, fitted.params, jnp.asarray(x, jnp.float32))
  return np.asarray(logits[:, 1], np.float64)


@dataclasses.dataclass(frozen=True)
class CtganCriticConfig:
  """LOGAN 0's GAN as the DOMIAS authors' code trains it (a CTGAN with ``pac=1``), for
  :func:`fit_ctgan_critic`: WGAN-GP loss, one critic step per generator step, a critic of
  LeakyReLU(0.2) layers each followed by dropout, Adam with L2 weight decay.

  At the paper's sizes (2,000 epochs of 10,000 synthetic rows: 40,000 steps) one fit took 11 to
  29 minutes on 2 shared CPU cores.

  Attributes:
    epochs: passes of ``num_rows // batch_size`` steps (at least one step per epoch); the code
      uses the target generator's epoch count.
    batch_size, noise_dim, generator_hidden, critic_hidden: CTGAN's 500, 128, (256, 256),
      (256, 256).
    dropout: the critic's dropout rate (0.5), active while training; scoring runs without it.
    gp_weight: gradient-penalty coefficient (10).
    learning_rate, beta1, beta2, weight_decay: Adam's (2e-4, 0.5, 0.9, 1e-6), both networks.
    gumbel_tau: Gumbel-softmax temperature of one-hot blocks (0.2).
  """
  epochs: int = 300
  batch_size: int = 500
  noise_dim: int = 128
  generator_hidden: tuple[int, ...] = (256, 256)
  critic_hidden: tuple[int, ...] = (256, 256)
  dropout: float = 0.5
  gp_weight: float = 10.0
  learning_rate: float = 2e-4
  beta1: float = 0.5
  beta2: float = 0.9
  weight_decay: float = 1e-6
  gumbel_tau: float = 0.2

  def __post_init__(self):
    for name in ("epochs", "batch_size", "noise_dim"):
      _validate.check_integer(name, getattr(self, name), 1)
    for name in ("generator_hidden", "critic_hidden"):
      value = getattr(self, name)
      if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__") or not tuple(value):
        raise ValueError(f"{name}={value!r} must be a non-empty sequence of layer widths")
      object.__setattr__(self, name, tuple(value))
      for width in getattr(self, name):
        _validate.check_integer(name, width, 1)
    _validate.check_range("dropout", self.dropout, 0.0, 1.0, high_open=True)
    _validate.check_range("gp_weight", self.gp_weight, 0.0, finite=True)
    _validate.check_range("learning_rate", self.learning_rate, 0.0, low_open=True, finite=True)
    _validate.check_range("beta1", self.beta1, 0.0, 1.0, high_open=True)
    _validate.check_range("beta2", self.beta2, 0.0, 1.0, high_open=True)
    _validate.check_range("weight_decay", self.weight_decay, 0.0, finite=True)
    _validate.check_range("gumbel_tau", self.gumbel_tau, 0.0, low_open=True, finite=True)

  def num_steps(self, num_rows: int) -> int:
    return self.epochs * max(num_rows // self.batch_size, 1)


class _DropoutCritic(nn.Module):
  """Dense, LeakyReLU(0.2), dropout per hidden layer, then one linear output (CTGAN's)."""
  hidden: tuple[int, ...]
  dropout: float

  @nn.compact
  def __call__(self, x: jax.Array, deterministic: bool = True) -> jax.Array:
    for width in self.hidden:
      x = nn.leaky_relu(nn.Dense(width)(x), 0.2)
      x = nn.Dropout(self.dropout, deterministic=deterministic)(x)
    return nn.Dense(1)(x)[:, 0]


class CtganCritic(NamedTuple):
  """A critic of :func:`fit_ctgan_critic`: the ``transform`` of its rows, the ``critic`` module,
  its ``params`` and ``history`` ``[steps, 2]`` (critic loss, generator loss)."""
  transform: tabular_generators.TabularTransform
  critic: _DropoutCritic
  params: Any
  history: np.ndarray


@functools.lru_cache(maxsize=8)
def _ctgan_critic_run(layout: tabular_generators.Layout, config: CtganCriticConfig,
                      steps: int):
  """Jitted ``run(key, rows) -> (critic params, history)``."""
  # pylint: disable=protected-access
  generator = tabular_generators._Mlp(config.generator_hidden, layout.width)
  critic = _DropoutCritic(config.critic_hidden, config.dropout)
  bs = config.batch_size

  def optimizer():
    return optax.chain(optax.add_decayed_weights(config.weight_decay),
                       optax.adam(config.learning_rate, b1=config.beta1, b2=config.beta2))

  def fake(g_params, key):
    return tabular_generators._gan_generate(generator, layout, config.noise_dim,
                                            config.gumbel_tau, g_params, key, None, bs)

  def score(c_params, rows, key):
    return critic.apply({"params": c_params}, rows, deterministic=False, rngs={"dropout": key})

  def critic_loss(c_params, real, fakes, key):
    k_real, k_fake, k_mix, k_gp = jax.random.split(key, 4)
    u = jax.random.uniform(k_mix, (bs, 1))
    mixed = u * real + (1.0 - u) * fakes
    # Row-wise critic (dropout masks are per element): the gradient of the sum is per row.
    grads = jax.grad(lambda rows: jnp.sum(score(c_params, rows, k_gp)))(mixed)
    penalty = jnp.mean(jnp.square(jnp.sqrt(jnp.sum(grads**2, axis=1) + 1e-12) - 1.0))
    return (jnp.mean(score(c_params, fakes, k_fake)) - jnp.mean(score(c_params, real, k_real))
            + config.gp_weight * penalty)

  def run(key, rows):
    key_g, key_c, key_train = jax.random.split(key, 3)
    g_params = generator.init(key_g, jnp.zeros((1, config.noise_dim)))["params"]
    c_params = critic.init(key_c, jnp.zeros((1, layout.width)))["params"]
    g_opt, c_opt = optimizer(), optimizer()

    def step(carry, key):
      g_params, c_params, g_state, c_state = carry
      k_real, k_fake, k_critic, k_gen, k_drop = jax.random.split(key, 5)
      real = rows[jax.random.randint(k_real, (bs,), 0, rows.shape[0])]
      fakes = jax.lax.stop_gradient(fake(g_params, k_fake))
      c_loss, grads = jax.value_and_grad(critic_loss)(c_params, real, fakes, k_critic)
      updates, c_state = c_opt.update(grads, c_state, c_params)
      c_params = optax.apply_updates(c_params, updates)
      g_loss, grads = jax.value_and_grad(
          lambda p: -jnp.mean(score(c_params, fake(p, k_gen), k_drop)))(g_params)
      updates, g_state = g_opt.update(grads, g_state, g_params)
      g_params = optax.apply_updates(g_params, updates)
      return (g_params, c_params, g_state, c_state), jnp.stack([c_loss, g_loss])

    carry = (g_params, c_params, g_opt.init(g_params), c_opt.init(c_params))
    (_, c_params, _, _), history = jax.lax.scan(step, carry, jax.random.split(key_train, steps))
    return c_params, history

  return jax.jit(run), critic


def fit_ctgan_critic(key: jax.Array, synthetic: Any,
                     config: CtganCriticConfig = CtganCriticConfig()) -> CtganCritic:
  """Trains LOGAN 0's GAN on ``synthetic`` as the DOMIAS authors' code does (a CTGAN with
  ``pac=1``, :class:`CtganCriticConfig`) and returns its critic. The rows are encoded by
  :func:`dpaudit.models.tabular_generators.fit_transform` and the generator is that module's
  WGAN-GP generator (an MLP with Gumbel-softmax one-hot blocks): CTGAN's mode-specific
  normalisation, residual generator and conditional vectors are not reproduced."""
  _validate.check_key(key)
  if not isinstance(config, CtganCriticConfig):
    raise ValueError(f"config must be a CtganCriticConfig, got {type(config).__name__}")
  synthetic = check_rows("synthetic", synthetic)
  transform = tabular_generators.fit_transform(synthetic)
  rows = transform.encode(synthetic)
  steps = config.num_steps(rows.shape[0])
  run, critic = _ctgan_critic_run(transform.layout, config, steps)
  params, history = run(key, jnp.asarray(rows))
  return CtganCritic(transform, critic, params, np.asarray(history))


def ctgan_critic_scores(fitted: CtganCritic, x: Any) -> np.ndarray:
  """The critic's score of each row of ``x`` ``[m, d]`` (data units), dropout off."""
  if not isinstance(fitted, CtganCritic):
    raise ValueError(f"fitted must be a CtganCritic (fit_ctgan_critic), got "
                     f"{type(fitted).__name__}")
  rows = jnp.asarray(fitted.transform.encode(check_rows("x", x)))
  return np.asarray(_apply(fitted.critic, fitted.params, rows), np.float64)


def logan_0_scores(key: jax.Array, x: Any, synthetic: Any,
                   config: tabular_generators.GanConfig | CtganCriticConfig | None = None
                   ) -> np.ndarray:
  """LOGAN 0 (Hayes et al. 2019, Sec. 3, black box without auxiliary data): a GAN is trained on
  the synthetic data alone and its critic scores each record (higher: judged more "real", i.e.
  more like the data the generator reproduced). A :class:`GanConfig` (or None) trains a
  WGAN-GP (:func:`dpaudit.models.tabular_generators.fit_wgan_gp`); a
  :class:`CtganCriticConfig` the DOMIAS authors' CTGAN-style critic (:func:`fit_ctgan_critic`)."""
  _validate.check_key(key)
  if config is not None and not isinstance(config, (tabular_generators.GanConfig,
                                                    CtganCriticConfig)):
    raise ValueError(f"config must be a GanConfig, a CtganCriticConfig or None, got "
                     f"{type(config).__name__}")
  synthetic = check_rows("synthetic", synthetic)
  x = check_rows("x", x, synthetic.shape[1])
  if isinstance(config, CtganCriticConfig):
    return ctgan_critic_scores(fit_ctgan_critic(key, synthetic, config), x)
  gan = tabular_generators.fit_wgan_gp(key, synthetic, config or tabular_generators.GanConfig())
  return np.asarray(tabular_generators.critic_scores(gan, x), np.float64)


def gaussian_prior_log_density(x: Any, mean: Any, std: Any) -> np.ndarray:
  r"""The reference density of App. C of van Breugel et al. (no reference data, only
  population statistics): :math:`\log p_R(x) = \sum_j \log \mathcal{N}(x_j; \mu_j,
  \sigma_j^2)` over the ``k`` known columns (``x`` ``[m, k]``, ``mean`` and ``std`` ``[k]``),
  a uniform (constant) density on the others, which cancels from every ranking.

  >>> float(gaussian_prior_log_density([[0.0]], [0.0], [1.0])[0])  # doctest: +ELLIPSIS
  -0.918938...
  """
  x = check_rows("x", x)
  _validate.check_real_array("mean", mean, ndim=1)
  _validate.check_real_array("std", std, ndim=1)
  mean, std = np.asarray(mean, np.float64), np.asarray(std, np.float64)
  if mean.shape != (x.shape[1],) or std.shape != (x.shape[1],):
    raise ValueError(f"mean and std must hold one value per column of x ({x.shape[1]}), got "
                     f"shapes {mean.shape} and {std.shape}")
  _validate.check_range("std", std, 0.0, low_open=True)
  z = (x - mean) / std
  return np.sum(-0.5 * z**2 - np.log(std) - 0.5 * np.log(2.0 * np.pi), axis=1)
