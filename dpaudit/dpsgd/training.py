"""The DP-SGD training loop: one jitted step, Poisson batches, resumable checkpoints.

One step of DP-SGD (Abadi et al., 2016, Alg. 1; Eq. 2 of the UniAud paper; Sec. 2.2 of Stock
et al.) with Poisson sampling at rate q from N examples:

.. math::

   \\theta_{t+1} = \\mathrm{opt}\\Big(\\theta_t, \\frac{1}{qN}\\Big(\\sum_{i \\in B_t}
     \\mathrm{clip}_C(\\nabla \\ell(\\theta_t; x_i)) + N(0, \\sigma^2 C^2 I)\\Big)\\Big),
   \\qquad i \\in B_t \\text{ independently with probability } q.

The batch has a random size; :mod:`dpaudit.dpsgd.sampling` pads it to a static shape and the
step loops over a data-dependent number of fixed-size microbatches (``physical_batch_size``),
so no step recompiles and no example is dropped. The clipped sum comes from
:func:`dpaudit.dpsgd.clipping.clipped_grad_sum` (ghost norms where supported); the noise and the
division by qN are the optax transform :func:`dpaudit.dpsgd.noise.dp_aggregate`, whose state
carries its own PRNG key, chained with any optax optimizer.

With ``noise_multiplier=0`` and ``l2_clip_norm=inf`` the step is plain (non-private) SGD on
Poisson batches, normalised by the expected batch size.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from collections.abc import Callable
from typing import Any, NamedTuple

import flax.linen as nn
import flax.serialization
import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax

from dpaudit import _validate
from dpaudit.dpsgd import clipping, noise, sampling

PyTree = Any
OPTIMIZERS = ("sgd", "momentum", "adam")
CHECKPOINT_NAME = "train_state.msgpack"


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """Hyperparameters of one DP-SGD run.

  Attributes:
    num_steps: number of DP-SGD steps T >= 0.
    sampling_rate: Poisson sampling rate q in (0, 1].
    noise_multiplier: sigma >= 0 (noise std is ``noise_multiplier * l2_clip_norm``).
    l2_clip_norm: C > 0; ``inf`` disables clipping (then noise_multiplier must be 0).
    learning_rate: optimizer step size > 0.
    optimizer: "sgd", "momentum" (0.9) or "adam".
    physical_batch_size: microbatch size processed at once (memory), >= 1.
    clipping: "auto", "ghost" or "vmap" (see :mod:`dpaudit.dpsgd.clipping`).
    checkpoint_every: steps between checkpoints when a checkpoint directory is given.
  """
  num_steps: int
  sampling_rate: float
  noise_multiplier: float = 1.0
  l2_clip_norm: float = 1.0
  learning_rate: float = 0.1
  optimizer: str = "sgd"
  physical_batch_size: int = 256
  clipping: str = "auto"
  checkpoint_every: int = 200

  def __post_init__(self):
    _validate.check_range("num_steps", self.num_steps, 0)
    _validate.check_integer_valued("num_steps", self.num_steps)
    _validate.check_range("sampling_rate", self.sampling_rate, 0.0, 1.0, low_open=True)
    _validate.check_range("noise_multiplier", self.noise_multiplier, 0.0, math.inf,
                          high_open=True)
    _validate.check_range("l2_clip_norm", self.l2_clip_norm, 0.0, low_open=True)
    if math.isinf(self.l2_clip_norm) and self.noise_multiplier > 0:
      raise ValueError(f"l2_clip_norm=inf needs noise_multiplier=0 (noise std is "
                       f"noise_multiplier * l2_clip_norm), got {self.noise_multiplier}")
    _validate.check_range("learning_rate", self.learning_rate, 0.0, math.inf,
                          low_open=True, high_open=True)
    _validate.check_choice("optimizer", self.optimizer, OPTIMIZERS)
    _validate.check_range("physical_batch_size", self.physical_batch_size, 1)
    _validate.check_choice("clipping", self.clipping, clipping.STRATEGIES)
    _validate.check_range("checkpoint_every", self.checkpoint_every, 1)

  @property
  def is_private(self) -> bool:
    return self.noise_multiplier > 0 and math.isfinite(self.l2_clip_norm)


class TrainState(NamedTuple):
  """Everything a run needs to continue: step counter, parameters, optimizer state (which holds
  the noise key) and the key of the batch sampler."""
  step: jax.Array
  params: PyTree
  opt_state: PyTree
  sample_key: jax.Array


class StepMetrics(NamedTuple):
  """Per-step diagnostics (scalars)."""
  batch_size: jax.Array
  mean_loss: jax.Array
  mean_grad_norm: jax.Array
  clipped_fraction: jax.Array


class Hyperparameters(NamedTuple):
  """Values of a run that may be traced arguments instead of compile-time constants, so that
  one compiled program serves a sweep over them (e.g. the sigma grid of Fig. 4). Pass them in
  the parameters' dtype (float32 scalars for the float32 models here): a float64 array would
  promote the updates."""
  noise_multiplier: jax.Array
  learning_rate: jax.Array


def hyperparameters(config: TrainConfig) -> Hyperparameters:
  """``config``'s sigma and learning rate as float32 arguments for a ``run`` of
  :func:`make_run`: a jitted run then holds no sigma or learning rate in its program, and
  cells of a sweep that differ only in them share one compilation (in memory when the jitted
  function is reused, across processes through JAX's persistent compilation cache)."""
  return Hyperparameters(jnp.asarray(config.noise_multiplier, jnp.float32),
                         jnp.asarray(config.learning_rate, jnp.float32))


def make_optimizer(config: TrainConfig, expected_batch_size: float, noise_key: jax.Array,
                   hyper: Hyperparameters | None = None) -> optax.GradientTransformation:
  """The DP aggregation (noise, then division by qN) chained with the base optimizer.

  ``hyper`` replaces ``config.noise_multiplier`` and ``config.learning_rate`` by (possibly
  traced) values; whether noise is added at all still follows ``config.is_private``."""
  rate = config.learning_rate if hyper is None else hyper.learning_rate
  base = {"sgd": lambda: optax.sgd(rate),
          "momentum": lambda: optax.sgd(rate, momentum=0.9),
          "adam": lambda: optax.adam(rate)}[config.optimizer]()
  sigma = config.noise_multiplier if hyper is None else hyper.noise_multiplier
  clip = config.l2_clip_norm
  if not config.is_private:
    sigma, clip = 0.0, 0.0  # no noise at all (avoids 0 * inf)
  return optax.chain(noise.dp_aggregate(sigma, clip, expected_batch_size, noise_key), base)


def init_state(key: jax.Array, model: nn.Module, example: jax.Array, config: TrainConfig,
               num_examples: int, hyper: Hyperparameters | None = None
               ) -> tuple[TrainState, optax.GradientTransformation]:
  """Initial parameters, optimizer and state of a run; ``key`` is split three ways."""
  init_key, noise_key, sample_key = jax.random.split(key, 3)
  params = model.init(init_key, example)["params"]
  optimizer = make_optimizer(config, config.sampling_rate * num_examples, noise_key, hyper)
  state = TrainState(jnp.zeros((), jnp.int32), params, optimizer.init(params), sample_key)
  return state, optimizer


def make_step(model: nn.Module, optimizer: optax.GradientTransformation, config: TrainConfig,
              num_examples: int, loss_fn: clipping.LossFn = clipping.softmax_cross_entropy,
              strategy: str | None = None, dirac_coordinates: Any = None) -> Callable:
  """The pure DP-SGD step ``step(state, features, labels, example_mask, dirac_mask)``.

  Returns ``(state, StepMetrics)``. ``features``/``labels`` hold the whole training set
  (``num_examples`` rows, on device); the step draws its Poisson batch from them. Jit it once
  (the training loop does, with the state donated); vmap it over states for many runs at once.

  Two optional inputs serve the audit games of :mod:`dpaudit.audits.dpsgd`:

  * ``example_mask`` (bool ``[num_examples]``, default all True): rows set to False never
    contribute. Poisson sampling draws every row independently, so masking a row is the same
    mechanism as removing it from the data set (with ``sampling_rate`` and the normaliser
    :math:`qN` unchanged), and D and D' of an audit can share one static shape.
  * ``dirac_coordinates`` (static, int ``[k]``: positions in the flattened parameter vector of
    ``jax.flatten_util.ravel_pytree``) with ``dirac_mask`` (bool ``[k]``): white-box gradient
    canaries (:func:`dpaudit.data.dirac_gradient_canary`). Each canary whose mask is True is
    Poisson sampled like an example (probability ``sampling_rate`` per step) and, when
    sampled, adds ``l2_clip_norm`` to its coordinate of the clipped gradient sum, before the
    noise: a gradient of the largest norm clipping allows.
  """
  strategy = strategy or config.clipping
  size = config.physical_batch_size
  coordinates = None
  if dirac_coordinates is not None:
    coordinates = np.asarray(dirac_coordinates)
    if coordinates.ndim != 1 or coordinates.size == 0 or coordinates.dtype.kind not in "iu":
      raise ValueError(f"dirac_coordinates must be a non-empty 1-D integer array, got "
                       f"{dirac_coordinates!r}")
    if len(np.unique(coordinates)) != coordinates.size or coordinates.min() < 0:
      raise ValueError("dirac_coordinates must be distinct, non-negative flat parameter indices")
  canary_value = 0.0 if math.isinf(config.l2_clip_norm) else config.l2_clip_norm

  def step(state: TrainState, features: jax.Array, labels: jax.Array,
           example_mask: jax.Array | None = None, dirac_mask: jax.Array | None = None):
    features, labels = jnp.asarray(features), jnp.asarray(labels)
    batch_key, next_key = jax.random.split(state.sample_key)
    if coordinates is not None:
      batch_key, canary_key = jax.random.split(batch_key)
    batch = sampling.poisson_sample(batch_key, num_examples, config.sampling_rate)

    def body(j, carry):
      grad_sum, loss_sum, norm_sum, clipped = carry
      idx, mask = sampling.microbatch(batch, j, size)
      if example_mask is not None:
        mask = mask & example_mask[idx]
      out = clipping.clipped_grad_sum(
          model, state.params, features[idx], labels[idx], mask, loss_fn=loss_fn,
          l2_clip_norm=config.l2_clip_norm, strategy=strategy)
      grad_sum = jax.tree.map(jnp.add, grad_sum, out.grad_sum)
      return (grad_sum, loss_sum + jnp.sum(out.losses * mask),
              norm_sum + jnp.sum(out.grad_norms * mask),
              clipped + jnp.sum((out.grad_norms > config.l2_clip_norm) * mask))

    zeros = jax.tree.map(jnp.zeros_like, state.params)
    init = (zeros, jnp.zeros(()), jnp.zeros(()), jnp.zeros(()))
    grad_sum, loss_sum, norm_sum, clipped = jax.lax.fori_loop(
        0, sampling.num_microbatches(batch, size), body, init)
    size_in = batch.size
    if example_mask is not None:
      size_in = jnp.sum(example_mask[batch.indices] & (jnp.arange(num_examples) < batch.size),
                        dtype=jnp.int32)
    if coordinates is not None:
      in_canaries = jnp.ones(coordinates.shape, bool) if dirac_mask is None else dirac_mask
      sampled = jax.random.bernoulli(canary_key, config.sampling_rate, coordinates.shape)
      flat, unravel = jax.flatten_util.ravel_pytree(grad_sum)
      if coordinates.max() >= flat.shape[0]:
        raise ValueError(f"dirac_coordinates has index {int(coordinates.max())}, outside the "
                         f"valid range [0, {flat.shape[0] - 1}] of the {flat.shape[0]} model "
                         "parameters")
      flat = flat.at[coordinates].add(canary_value * (sampled & in_canaries).astype(flat.dtype))
      grad_sum = unravel(flat)
    updates, opt_state = optimizer.update(grad_sum, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    count = jnp.maximum(size_in, 1).astype(loss_sum.dtype)
    metrics = StepMetrics(size_in, loss_sum / count, norm_sum / count, clipped / count)
    return TrainState(state.step + 1, params, opt_state, next_key), metrics

  return step


class RunOutput(NamedTuple):
  """What :func:`make_run` returns for one run: initial and final parameters, batch sizes."""
  initial_params: PyTree
  params: PyTree
  batch_sizes: jax.Array


def make_run(model: nn.Module, config: TrainConfig, num_examples: int, example: jax.Array,
             loss_fn: clipping.LossFn = clipping.softmax_cross_entropy,
             strategy: str | None = None, dirac_coordinates: Any = None) -> Callable:
  """A whole DP-SGD run as one pure function, for ``jax.vmap`` over many runs.

  ``run(key, features, labels, example_mask=None, dirac_mask=None, hyper=None) -> RunOutput``:
  :func:`init_state` from ``key``, then ``lax.scan`` of :func:`make_step` over
  ``config.num_steps`` steps (same arguments as the step). Un-jitted: ``jax.jit(jax.vmap(run,
  in_axes=(0, None, None, 0)))`` trains one model per key as a single compiled program (the
  many-run audits of :mod:`dpaudit.audits.dpsgd`); a vmapped run gives the same parameters as
  the same run alone. ``hyper`` (:class:`Hyperparameters`) passes sigma and the learning rate
  as arguments, so that a jitted ``run`` is compiled once for every value of them.
  """

  def run(key, features, labels, example_mask=None, dirac_mask=None, hyper=None):
    state, optimizer = init_state(key, model, example, config, num_examples, hyper)
    step = make_step(model, optimizer, config, num_examples, loss_fn, strategy,
                     dirac_coordinates)

    def body(state, _):
      state, metrics = step(state, features, labels, example_mask, dirac_mask)
      return state, metrics.batch_size

    initial = state.params
    state, batch_sizes = jax.lax.scan(body, state, None, length=config.num_steps)
    return RunOutput(initial, state.params, batch_sizes)

  return run


# ------------------------------------------------------------------------------ checkpointing


def _to_raw(tree: PyTree) -> PyTree:
  """Typed PRNG keys -> their uint32 data (serialisable)."""
  return jax.tree.map(
      lambda x: jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x,
      tree)


def _from_raw(raw: PyTree, template: PyTree) -> PyTree:
  return jax.tree.map(
      lambda r, t: (jax.random.wrap_key_data(jnp.asarray(r), impl=jax.random.key_impl(t))
                    if jnp.issubdtype(t.dtype, jax.dtypes.prng_key) else jnp.asarray(r, t.dtype)),
      raw, template)


def save_checkpoint(path: str, state: TrainState, history: dict, config: TrainConfig) -> None:
  """Atomically writes the state, the metrics so far and the config to ``path``."""
  payload = {"state": flax.serialization.to_state_dict(_to_raw(jax.device_get(state))),
             "history": {k: np.asarray(v) for k, v in history.items()},
             "config": json.dumps(dataclasses.asdict(config), sort_keys=True)}
  tmp = f"{path}.tmp"
  with open(tmp, "wb") as f:
    f.write(flax.serialization.msgpack_serialize(payload))
  os.replace(tmp, path)


def load_checkpoint(path: str, template: TrainState, config: TrainConfig
                    ) -> tuple[TrainState, dict]:
  """Restores a state saved by :func:`save_checkpoint` for the same config."""
  with open(path, "rb") as f:
    payload = flax.serialization.msgpack_restore(f.read())
  saved = json.loads(payload["config"])
  current = json.loads(json.dumps(dataclasses.asdict(config), sort_keys=True))
  mismatched = {k for k in current if k != "num_steps" and saved.get(k) != current[k]}
  if mismatched:
    raise ValueError(f"checkpoint {path} was written with a different config "
                     f"({', '.join(f'{k}={saved.get(k)!r}' for k in sorted(mismatched))}); "
                     "use another checkpoint directory or the same settings")
  raw_template = _to_raw(template)
  raw = flax.serialization.from_state_dict(raw_template, payload["state"])
  history = {k: list(np.asarray(v)) for k, v in payload["history"].items()}
  return _from_raw(raw, template), history


# ------------------------------------------------------------------------------ training loop


class TrainResult(NamedTuple):
  """Final state and the per-step metrics (NumPy arrays of length ``num_steps``)."""
  state: TrainState
  history: dict[str, np.ndarray]
  strategy: str
  resumed_from_step: int


def train(key: jax.Array, model: nn.Module, features: Any, labels: Any, config: TrainConfig,
          *, loss_fn: clipping.LossFn = clipping.softmax_cross_entropy,
          checkpoint_dir: str | None = None,
          progress: Callable[[int, StepMetrics], None] | None = None) -> TrainResult:
  """Trains ``model`` with DP-SGD on (``features``, ``labels``).

  Args:
    key: PRNG key of the run (initialisation, noise and batch sampling all derive from it).
    model: flax module mapping ``[B, ...]`` inputs to logits.
    features, labels: the training set, ``[N, ...]`` and ``[N]``.
    config: the run's :class:`TrainConfig`.
    loss_fn: per-example loss of (logits, labels).
    checkpoint_dir: if given, the state and metrics are saved there every
      ``config.checkpoint_every`` steps and at the end, and a run with the same config resumes
      from the last checkpoint without redoing finished steps.
    progress: called as ``progress(step, metrics)`` after every step.

  Returns:
    TrainResult with the final state, per-step metrics, the clipping strategy used and the step
    the run resumed from (0 for a fresh run).
  """
  features = jnp.asarray(features)
  labels = jnp.asarray(labels)
  num_examples = features.shape[0]
  if labels.shape[:1] != (num_examples,) or num_examples == 0:
    raise ValueError(f"features ({num_examples} rows) and labels (shape {labels.shape}) must "
                     "have the same, non-zero number of rows")
  state, optimizer = init_state(key, model, features[:1], config, num_examples)
  strategy = clipping.resolve_strategy(
      model, state.params, features[:min(config.physical_batch_size, num_examples)],
      config.clipping)
  history: dict[str, list] = {name: [] for name in StepMetrics._fields}
  path = None
  resumed = 0
  if checkpoint_dir is not None:
    os.makedirs(checkpoint_dir, exist_ok=True)
    path = os.path.join(checkpoint_dir, CHECKPOINT_NAME)
    if os.path.exists(path):
      state, history = load_checkpoint(path, state, config)
      resumed = int(state.step)
  step_fn = jax.jit(make_step(model, optimizer, config, num_examples, loss_fn, strategy),
                    donate_argnums=0)
  for step in range(int(state.step), config.num_steps):
    state, metrics = step_fn(state, features, labels)
    for name, value in zip(StepMetrics._fields, jax.device_get(metrics)):
      history[name].append(value)
    if progress is not None:
      progress(step + 1, metrics)
    if path is not None and ((step + 1) % config.checkpoint_every == 0
                             or step + 1 == config.num_steps):
      save_checkpoint(path, state, history, config)
  arrays = {name: np.asarray(values) for name, values in history.items()}
  return TrainResult(state, arrays, strategy, resumed)


@functools.lru_cache(maxsize=32)
def _predict_fn(model: nn.Module) -> Callable:
  return jax.jit(lambda p, x: jnp.argmax(model.apply({"params": p}, x), axis=-1))


def predict(model: nn.Module, params: PyTree, features: Any, batch_size: int = 1024
            ) -> np.ndarray:
  """Predicted classes for ``features`` in batches of ``batch_size``."""
  features = jnp.asarray(features)
  apply = _predict_fn(model)
  return np.concatenate([np.asarray(apply(params, features[i:i + batch_size]))
                         for i in range(0, features.shape[0], batch_size)])


def accuracy(model: nn.Module, params: PyTree, features: Any, labels: Any,
             batch_size: int = 1024) -> float:
  """Fraction of ``features`` whose predicted class equals ``labels``."""
  return float(np.mean(predict(model, params, features, batch_size) == np.asarray(labels)))
