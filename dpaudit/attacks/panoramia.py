r"""PANORAMIA's two classifiers: the baseline b and the membership inference attack.

Kazmi et al., "PANORAMIA: Privacy Auditing of Machine Learning Models without Retraining",
Alg. 1 (lines 2-3 of "measure privacy leakage") and Sec. 4.1. Both are binary classifiers of
"real member" against "generated non-member" that see the example x and one side-information
model's per-example loss:

* the baseline b sees x and the loss of the helper h (trained on generated data, or real data,
  or none at all: Table 3), never anything of the target;
* the MIA sees x and the loss of the target f.

The paper stacks an image module and a loss module with a logistic regression on top; here one
network does both: an ``encoder`` (a small CNN for images, an MLP for tabular rows, a
bag-of-tokens MLP for text) maps x to an embedding, an MLP maps the loss features to another,
and a last layer on their concatenation gives the logit. The loss features are
:math:`(\ell, \log(\ell + 10^{-6}))`, standardised with the training set's mean and standard
deviation. Training minimises the binary cross-entropy with Adam, and the epoch with the lowest
loss on a held-out validation part of the training set is kept (early stopping).

For tabular data the paper uses gradient-boosted trees with a hyper-parameter search instead
(App. B.3): :class:`GBTConfig` and :func:`fit_gbt` (scikit-learn's histogram gradient boosting,
a small grid of learning rates and depths and the number of iterations chosen on a validation
split). :func:`membership_scores` trains either kind from its config and scores new examples.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpaudit import _validate, prng

PyTree = Any


class ImageEncoder(nn.Module):
  """Two 3x3 convolutions with 2x2 average pooling and a dense layer: ``[B, H, W, C]`` to
  ``[B, features]``."""
  width: int = 16
  features: int = 64

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    for scale in (1, 2):
      x = nn.relu(nn.Conv(self.width * scale, (3, 3))(x))
      x = nn.avg_pool(x, (2, 2), strides=(2, 2))
    return nn.relu(nn.Dense(self.features)(x.reshape((x.shape[0], -1))))


class VectorEncoder(nn.Module):
  """An MLP on flattened rows: ``[B, ...]`` to ``[B, hidden_sizes[-1]]``."""
  hidden_sizes: Sequence[int] = (64, 64)

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    x = x.reshape((x.shape[0], -1)).astype(jnp.float32)
    for width in self.hidden_sizes:
      x = nn.relu(nn.Dense(width)(x))
    return x


class TokenEncoder(nn.Module):
  """Bag of tokens: the mean one-hot of a padded id sequence ``[B, L]`` (negative ids are
  padding), with its length, through an MLP."""
  vocab_size: int
  hidden_sizes: Sequence[int] = (64, 64)

  @nn.compact
  def __call__(self, ids: jax.Array) -> jax.Array:
    valid = (ids >= 0)[..., None]
    one_hot = jax.nn.one_hot(jnp.maximum(ids, 0), self.vocab_size) * valid
    length = jnp.sum(valid, axis=(1, 2)).astype(jnp.float32)
    x = jnp.concatenate([one_hot.sum(1) / jnp.maximum(length, 1.0)[:, None],
                         (length / ids.shape[1])[:, None]], axis=1)
    for width in self.hidden_sizes:
      x = nn.relu(nn.Dense(width)(x))
    return x


class MembershipNet(nn.Module):
  """``encoder(x)`` and an MLP of the side features, concatenated, to one logit per example."""
  encoder: nn.Module
  side_width: int = 16
  head_width: int = 64

  @nn.compact
  def __call__(self, x: jax.Array, side: jax.Array) -> jax.Array:
    parts = [self.encoder(x)]
    if side.shape[-1]:
      parts.append(nn.relu(nn.Dense(self.side_width)(side)))
    h = nn.relu(nn.Dense(self.head_width)(jnp.concatenate(parts, axis=-1)))
    return nn.Dense(1)(h)[:, 0]


@dataclasses.dataclass(frozen=True)
class ClassifierConfig:
  """How the baseline and the MIA are trained.

  Attributes:
    epochs: passes over the training part (>= 1); the best epoch on validation is kept.
    batch_size: minibatch size (>= 1; clamped to the training part's size).
    learning_rate: Adam's step size (> 0).
    validation_fraction: share of the training set held out for early stopping, in [0, 0.5].
  """
  epochs: int = 20
  batch_size: int = 64
  learning_rate: float = 1e-3
  validation_fraction: float = 0.2

  def __post_init__(self):
    _validate.check_integer("epochs", self.epochs, 1)
    _validate.check_integer("batch_size", self.batch_size, 1)
    _validate.check_range("learning_rate", self.learning_rate, 0.0, None, low_open=True)
    _validate.check_range("validation_fraction", self.validation_fraction, 0.0, 0.5)


class FittedClassifier(NamedTuple):
  """A trained membership classifier: the network, its parameters, the side features'
  standardisation and the per-epoch training/validation losses."""
  module: MembershipNet
  params: PyTree
  side_mean: np.ndarray
  side_std: np.ndarray
  train_loss: np.ndarray
  validation_loss: np.ndarray
  best_epoch: int


def loss_features(losses: Any) -> np.ndarray:
  r"""Side features of one per-example loss vector :math:`\ell` ``[N]``: ``[N, 2]`` holding
  :math:`\ell` and :math:`\log(\ell + 10^{-6})` (separates the tiny losses of memorised
  members)."""
  _validate.check_real_array("losses", losses, ndim=1, nonempty=False)
  losses = np.asarray(losses, np.float64)
  return np.stack([losses, np.log(np.maximum(losses, 0.0) + 1e-6)], axis=1)


def no_side(num_examples: int) -> np.ndarray:
  """No side information: an ``[N, 0]`` feature array (Table 3's baseline without helper)."""
  return np.zeros((_validate.check_integer("num_examples", num_examples, 0), 0))


def _bce(module, params, x, side, y):
  logits = module.apply({"params": params}, x, side)
  return optax.sigmoid_binary_cross_entropy(logits, y)


@functools.lru_cache(maxsize=16)
def _make_step(module: MembershipNet, learning_rate: float):
  """One jitted Adam step per (network, step size): fits of the same shapes share a
  compilation. A Python loop over steps, not ``lax.scan``: on CPU, convolution gradients in a
  loop body run several times slower than at top level."""
  optimizer = optax.adam(learning_rate)

  def batch_loss(params, x, side, y):
    return jnp.mean(_bce(module, params, x, side, y))

  @jax.jit
  def step(params, opt_state, x, side, y):
    loss, grads = jax.value_and_grad(batch_loss)(params, x, side, y)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss
  return step


def _mean_loss(module, params, x, side, y, batch_size=1024) -> float:
  total = 0.0
  for i in range(0, x.shape[0], batch_size):
    total += float(jnp.sum(_bce_jit(module, params, x[i:i + batch_size],
                                    side[i:i + batch_size], y[i:i + batch_size])))
  return total / max(x.shape[0], 1)


_bce_jit = jax.jit(_bce, static_argnums=0)


def _check_inputs(inputs, side, name_n: int | None = None) -> None:
  """Real finite ``inputs`` [N, ...] and ``side`` features [N, k] (and N == ``name_n``)."""
  if np.ndim(side) != 2:
    raise ValueError(f"side features must be 2-D [N, k], got shape {np.shape(side)}")
  n = np.shape(inputs)[0] if np.ndim(inputs) else None
  if n != np.shape(side)[0]:
    raise ValueError(f"inputs hold {n} examples but side features hold {np.shape(side)[0]}")
  if name_n is not None and n != name_n:
    raise ValueError(f"inputs hold {n} examples but is_member holds {name_n}")
  _validate.check_real_array("side", side, nonempty=False)
  _validate.check_real_array("inputs", inputs, nonempty=False)  # images, vectors or token ids


def fit_classifier(key: jax.Array, encoder: nn.Module, inputs: Any, side: Any, is_member: Any,
                   config: ClassifierConfig = ClassifierConfig()) -> FittedClassifier:
  """Trains a :class:`MembershipNet` to tell members (1) from generated non-members (0).

  Args:
    key: PRNG key (initialisation, validation split and minibatch order).
    encoder: the flax module embedding one batch of ``inputs``.
    inputs: ``[N, ...]`` examples.
    side: ``[N, k]`` side features (:func:`loss_features` of a model's losses, or
      :func:`no_side`).
    is_member: ``[N]`` 0/1 labels.
    config: :class:`ClassifierConfig`.

  Returns:
    :class:`FittedClassifier`; score new examples with :func:`classifier_scores`.
  """
  _validate.check_key(key)
  if not isinstance(config, ClassifierConfig):
    raise ValueError(f"config must be a ClassifierConfig, got {type(config).__name__}")
  _validate.check_binary("is_member", is_member)
  is_member = np.asarray(is_member)
  if is_member.ndim != 1:
    raise ValueError(f"is_member must be a 1-D array of 0/1 labels, got shape {is_member.shape}")
  _check_inputs(inputs, side, is_member.shape[0])
  if len(np.unique(is_member)) < 2:
    raise ValueError("is_member must hold both members (1) and non-members (0)")
  side = np.asarray(side, np.float64)
  n = is_member.shape[0]
  key_split, key_init, key_order = jax.random.split(key, 3)
  order = np.asarray(jax.random.permutation(key_split, n))
  num_val = int(round(config.validation_fraction * n))
  val, train = order[:num_val], order[num_val:]
  mean = side[train].mean(0) if side.shape[1] else np.zeros(0)
  std = side[train].std(0) + 1e-6 if side.shape[1] else np.ones(0)
  side = jnp.asarray((side - mean) / std, jnp.float32)
  x = jnp.asarray(inputs)
  y = jnp.asarray(is_member, jnp.float32)
  module = MembershipNet(encoder)
  params = module.init(key_init, x[:1], side[:1])["params"]
  opt_state = optax.adam(config.learning_rate).init(params)
  step = _make_step(module, config.learning_rate)
  batch = min(config.batch_size, train.size)
  num_batches = train.size // batch
  x_train, side_train, y_train = x[train], side[train], y[train]
  x_val, side_val, y_val = x[val], side[val], y[val]
  best, best_loss, best_epoch = params, np.inf, 0
  train_losses, val_losses = [], []
  for e in range(config.epochs):
    perm = np.asarray(jax.random.permutation(jax.random.fold_in(key_order, e), train.size))
    losses = []
    for b in range(num_batches):  # the ragged remainder sits out this epoch
      index = perm[b * batch:(b + 1) * batch]
      params, opt_state, loss = step(params, opt_state, x_train[index], side_train[index],
                                     y_train[index])
      losses.append(loss)
    train_losses.append(float(np.mean(jax.device_get(losses))))
    if num_val:
      val_losses.append(_mean_loss(module, params, x_val, side_val, y_val))
    criterion = val_losses[-1] if num_val else train_losses[-1]
    if criterion < best_loss:
      best, best_loss, best_epoch = params, criterion, e + 1
  return FittedClassifier(module, best, mean, std, np.asarray(train_losses),
                          np.asarray(val_losses), best_epoch)


@functools.partial(jax.jit, static_argnums=0)
def _logits(module, params, x, side):
  return module.apply({"params": params}, x, side)


def classifier_scores(fitted: FittedClassifier, inputs: Any, side: Any,
                      batch_size: int = 1024) -> np.ndarray:
  """The classifier's logit for each example ``[N]`` (higher: more likely a real member)."""
  _validate.check_integer("batch_size", batch_size, 1)
  _check_inputs(inputs, side)
  side = np.asarray(side, np.float64)
  if side.shape[1] != fitted.side_mean.shape[0]:
    raise ValueError(f"side features have {side.shape[1]} columns; the classifier was trained "
                     f"on {fitted.side_mean.shape[0]}")
  side = jnp.asarray((side - fitted.side_mean) / fitted.side_std, jnp.float32)
  x = jnp.asarray(inputs)
  out = [np.asarray(_logits(fitted.module, fitted.params, x[i:i + batch_size],
                            side[i:i + batch_size]))
         for i in range(0, x.shape[0], batch_size)]
  return np.concatenate(out) if out else np.zeros(0, np.float32)


# ------------------------------------------------------------------- gradient-boosted trees
@dataclasses.dataclass(frozen=True)
class GBTConfig:
  """Gradient-boosted trees for the baseline and the MIA: the paper's tabular classifier
  (Kazmi et al., App. B.3, "Baseline and MIA": a gradient boosting model with a grid search
  over its hyper-parameters), here scikit-learn's ``HistGradientBoostingClassifier``.

  :func:`fit_gbt` fits one model per (learning rate, maximum depth) of the grid on the
  training part, scores every number of boosting iterations up to ``max_iter`` on the held-out
  validation part (log loss), and refits the best (rate, depth, iterations) on all the data.

  Attributes:
    learning_rates: the grid's shrinkage values, each in (0, 1].
    max_depths: the grid's maximum tree depths, each >= 1.
    max_iter: the most boosting iterations (>= 1); the best number is chosen on validation.
    validation_fraction: share of each class held out for the choice, in (0, 0.5].
    categorical: one flag per column of the flattened inputs marking categorical codes
      (integers in [0, 254]); empty: every column numeric. Side features are always numeric.
    num_threads: OpenMP threads of each fit (>= 1). One by default: on a CPU shared with JAX
      (or other jobs) more threads ran up to 9 times slower (4,000 rows, 2 busy cores).
  """
  learning_rates: tuple[float, ...] = (0.05, 0.1, 0.3)
  max_depths: tuple[int, ...] = (3, 6)
  max_iter: int = 200
  validation_fraction: float = 0.2
  categorical: tuple[bool, ...] = ()
  num_threads: int = 1

  def __post_init__(self):
    for name in ("learning_rates", "max_depths", "categorical"):
      value = getattr(self, name)
      if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ValueError(f"{name}={value!r} must be a sequence")
      object.__setattr__(self, name, tuple(value))
    _validate.check_nonempty("learning_rates", self.learning_rates)
    _validate.check_nonempty("max_depths", self.max_depths)
    for rate in self.learning_rates:
      _validate.check_range("learning_rates", rate, 0.0, 1.0, low_open=True)
    for depth in self.max_depths:
      _validate.check_integer("max_depths", depth, 1)
    for flag in self.categorical:
      _validate.check_instance("categorical", flag, (bool, np.bool_), "bool")
    object.__setattr__(self, "categorical", tuple(bool(f) for f in self.categorical))
    _validate.check_integer("max_iter", self.max_iter, 1)
    _validate.check_integer("num_threads", self.num_threads, 1)
    _validate.check_range("validation_fraction", self.validation_fraction, 0.0, 0.5,
                          low_open=True)


class FittedGBT(NamedTuple):
  """A fitted :class:`GBTConfig` classifier: the refitted scikit-learn model, the chosen
  learning rate, depth and number of iterations, and the grid's best validation log loss per
  (learning rate, depth), ``[len(learning_rates), len(max_depths)]``."""
  model: Any
  learning_rate: float
  max_depth: int
  num_iter: int
  validation_loss: np.ndarray


def _gbt_features(inputs: Any, side: Any) -> np.ndarray:
  """``[N, D + k]``: the flattened inputs, then the side features."""
  inputs = np.asarray(inputs)
  return np.concatenate([inputs.reshape((inputs.shape[0], -1)).astype(np.float64),
                         np.asarray(side, np.float64)], axis=1)


def _stratified_split(rng: np.random.Generator, labels: np.ndarray, fraction: float
                      ) -> tuple[np.ndarray, np.ndarray]:
  """(train, validation) indices: ``round(fraction * n_c)`` of each class c (at least one, at
  most n_c - 1) held out, the order random."""
  train, val = [], []
  for c in (0, 1):
    index = rng.permutation(np.flatnonzero(labels == c))
    held = min(max(1, int(round(fraction * index.size))), index.size - 1)
    val.append(index[:held])
    train.append(index[held:])
  return np.concatenate(train), np.concatenate(val)


def _hgb(config: GBTConfig, num_features: int, rate: float, depth: int, num_iter: int,
         seed: int):
  from sklearn.ensemble import HistGradientBoostingClassifier  # pylint: disable=g-import-not-at-top
  mask = list(config.categorical) + [False] * (num_features - len(config.categorical))
  return HistGradientBoostingClassifier(
      learning_rate=rate, max_depth=depth, max_iter=num_iter, early_stopping=False,
      categorical_features=mask if any(mask) else None, random_state=seed)


def fit_gbt(key: jax.Array, inputs: Any, side: Any, is_member: Any,
            config: GBTConfig = GBTConfig()) -> FittedGBT:
  """Gradient-boosted trees telling members (1) from non-members (0) on the flattened inputs
  and the side features, hyper-parameters chosen on a stratified validation split
  (:class:`GBTConfig`).

  >>> import jax, numpy as np
  >>> x = np.random.default_rng(0).normal(size=(200, 3))
  >>> member = (x[:, 0] > 0).astype(int)
  >>> fitted = fit_gbt(jax.random.key(0), x, no_side(200), member,
  ...                  GBTConfig(learning_rates=(0.1,), max_depths=(2,), max_iter=20))
  >>> bool(np.mean((gbt_scores(fitted, x, no_side(200)) > 0) == member) > 0.9)
  True
  """
  _validate.check_key(key)
  _validate.check_instance("config", config, GBTConfig)
  is_member = _check_labels(is_member)
  _check_inputs(inputs, side, is_member.shape[0])
  features = _gbt_features(inputs, side)
  num_inputs = features.shape[1] - np.shape(side)[1]
  if config.categorical and len(config.categorical) != num_inputs:
    raise ValueError(f"config.categorical has {len(config.categorical)} flags but the inputs "
                     f"have {num_inputs} columns; one flag per column")
  cats = features[:, :len(config.categorical)][:, np.asarray(config.categorical, bool)]
  if cats.size and (np.any(cats < 0) or np.any(cats > 254) or np.any(cats != np.round(cats))):
    raise ValueError("inputs: the categorical columns must hold integer codes in [0, 254]")
  if min(np.sum(is_member == 0), np.sum(is_member == 1)) < 2:
    raise ValueError("is_member must hold at least 2 members and 2 non-members")
  # One draw from the key seeds NumPy (the trees run on the host; no program to compile).
  rng = prng.numpy_generator(key)
  seed = int(rng.integers(2**31 - 1))
  train, val = _stratified_split(rng, is_member, config.validation_fraction)
  # threadpoolctl (scikit-learn's own dependency) limits the OpenMP threads of the trees; it
  # sees only the libraries loaded when it is entered, so scikit-learn's first.
  import sklearn.ensemble  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  import threadpoolctl  # pylint: disable=g-import-not-at-top
  with threadpoolctl.threadpool_limits(limits=config.num_threads):
    return _fit_gbt_grid(features, is_member, train, val, config, seed)


def _fit_gbt_grid(features, is_member, train, val, config: GBTConfig, seed: int) -> FittedGBT:
  """The grid search of :func:`fit_gbt` and the refit of its best point."""
  from sklearn.metrics import log_loss  # pylint: disable=g-import-not-at-top
  losses = np.zeros((len(config.learning_rates), len(config.max_depths)))
  best = (np.inf, 0.0, 0, 0)
  for i, rate in enumerate(config.learning_rates):
    for j, depth in enumerate(config.max_depths):
      model = _hgb(config, features.shape[1], rate, depth, config.max_iter, seed)
      model.fit(features[train], is_member[train])
      stage = [log_loss(is_member[val], p[:, 1], labels=[0, 1])
               for p in model.staged_predict_proba(features[val])]
      losses[i, j] = min(stage)
      if losses[i, j] < best[0]:
        best = (losses[i, j], rate, depth, int(np.argmin(stage)) + 1)
  _, rate, depth, num_iter = best
  model = _hgb(config, features.shape[1], rate, depth, num_iter, seed)
  model.fit(features, is_member)
  return FittedGBT(model, float(rate), int(depth), num_iter, losses)


def gbt_scores(fitted: FittedGBT, inputs: Any, side: Any) -> np.ndarray:
  """The trees' log-odds of "member" for each example ``[N]`` (higher: more likely a member)."""
  _validate.check_instance("fitted", fitted, FittedGBT)
  _check_inputs(inputs, side)
  features = _gbt_features(inputs, side)
  expected = fitted.model.n_features_in_
  if features.shape[1] != expected:
    raise ValueError(f"inputs and side features give {features.shape[1]} columns; the trees "
                     f"were fitted on {expected}")
  if features.shape[0] == 0:
    return np.zeros(0)
  import threadpoolctl  # pylint: disable=g-import-not-at-top
  with threadpoolctl.threadpool_limits(limits=1):
    return np.asarray(fitted.model.decision_function(features), np.float64)


def membership_scores(key: jax.Array, encoder: Any, inputs: Any, side: Any, is_member: Any,
                      score_inputs: Any, score_side: Any,
                      config: ClassifierConfig | GBTConfig = ClassifierConfig()) -> np.ndarray:
  """Trains the classifier ``config`` describes on (``inputs``, ``side``, ``is_member``) and
  scores (``score_inputs``, ``score_side``): a :class:`MembershipNet` over ``encoder`` (a flax
  module) for a :class:`ClassifierConfig` (:func:`fit_classifier`), gradient-boosted trees for
  a :class:`GBTConfig` (:func:`fit_gbt`, ``encoder`` unused). Higher scores: more likely a
  member."""
  _validate.check_instance("config", config, (ClassifierConfig, GBTConfig))
  if isinstance(config, GBTConfig):
    return gbt_scores(fit_gbt(key, inputs, side, is_member, config), score_inputs, score_side)
  _validate.check_instance("encoder", encoder, nn.Module, "flax module")
  fitted = fit_classifier(key, encoder, inputs, side, is_member, config)
  return np.asarray(classifier_scores(fitted, score_inputs, score_side), np.float64)


def _check_labels(is_member: Any) -> np.ndarray:
  _validate.check_binary("is_member", is_member)
  is_member = np.asarray(is_member)
  if is_member.ndim != 1:
    raise ValueError(f"is_member must be a 1-D array of 0/1 labels, got shape {is_member.shape}")
  return is_member.astype(np.int32)
