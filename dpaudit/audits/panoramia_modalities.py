r"""PANORAMIA's three modalities: generators, helper/target trainers and encoders.

Kazmi et al., PANORAMIA, Sec. 5 (images, tabular data, text) on data dpaudit has offline:

* **image**: a class-conditional convolutional VAE (:mod:`dpaudit.models.vae`) trained on
  :math:`D_G` generates labelled non-members (labels drawn from :math:`D_G`'s class
  frequencies; the paper labels StyleGAN2 samples with a separate classifier instead); target
  and helper are any image classifier (:func:`image_classifier`: a
  :func:`dpaudit.models.make_model` name such as ``"lenet5"`` (default), ``"resnet18"`` or
  ``"wrn16_4"`` (the DP targets of Tables 5, 7 and 8), or a flax module); the classifiers'
  encoder is a small CNN.
* **tabular**: MST (McKenna et al. 2021, :mod:`dpaudit.mechanisms.mst`) with a large epsilon
  generates Adult records, the income being the label; target and helper are MLPs with 4
  hidden layers (Table 2; App. B.3's widths 150-100-50-10 are :data:`PAPER_TABULAR_HIDDEN`) on
  the one-hot/log-scaled row (:class:`TabularMLP`); the paper's baseline and MIA are
  gradient-boosted trees (:class:`~dpaudit.attacks.panoramia.GBTConfig`, with
  :func:`categorical_columns`).
* **text**: a character n-gram language model (:class:`dpaudit.models.CharNGramLM`) trained on
  :math:`D_G` continues held-out prompts (the first characters of lines it was not trained
  on) with top-k and top-p sampling (Sec. 5, App. B.2); target and helper are character LMs,
  their loss the line's summed negative log-likelihood; the encoder is a bag of characters.

Targets and helpers are trained with dpaudit's DP-SGD engine (:func:`train_model`): without
noise or clipping for the E20/E50/E100 targets, with noise calibrated by the accountant for
the DP targets.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate
from dpaudit.attacks import panoramia as classifiers
from dpaudit.audits.panoramia import Examples, LossFn, Modality, Sampler
from dpaudit.data import sources
from dpaudit.dpsgd import clipping, training
from dpaudit.dpsgd.spec import DPSGDSettings
from dpaudit.mechanisms import mst
from dpaudit.models import classifiers as models
from dpaudit.models import ngram, vae

MODALITIES = ("image", "tabular", "text")


@dataclasses.dataclass(frozen=True)
class TrainSpec(DPSGDSettings, epochs=20.0, batch_size=64, learning_rate=1e-3):
  """How a target or helper model is trained.

  Attributes:
    epochs: expected passes over the data (> 0); DP-SGD runs ``ceil(epochs / q)`` steps.
    batch_size: expected (Poisson) batch size; q = batch_size / N.
    learning_rate: Adam's step size.
    epsilon: the DP-SGD target epsilon (noise calibrated by the RDP accountant at ``delta``);
      inf trains without clipping or noise.
    delta: the DP target delta, in (0, 1).
    l2_clip_norm: the clipping norm C of a DP run.

  All but ``epsilon`` are the fields of :class:`~dpaudit.dpsgd.spec.DPSGDSettings`.
  """
  epsilon: float = math.inf

  def __post_init__(self):
    super().__post_init__()  # epochs, batch_size, learning_rate, l2_clip_norm, delta
    _validate.check_range("epsilon", self.epsilon, 0.0, None, low_open=True)

  def train_config(self, num_examples: int) -> training.TrainConfig:
    """The engine's :class:`~dpaudit.dpsgd.training.TrainConfig` for ``num_examples``."""
    return self.dpsgd_spec(
        epsilon=self.epsilon, optimizer="adam",
        l2_clip_norm=math.inf if math.isinf(self.epsilon) else self.l2_clip_norm,
    ).resolve(num_examples).train_config


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  """A supervised model and how examples feed it: ``features(examples)`` and
  ``targets(examples)`` are the engine's inputs and labels, ``loss`` its per-example loss."""
  module: nn.Module
  features: Callable[[Examples], Any]
  targets: Callable[[Examples], Any]
  loss: clipping.LossFn = clipping.softmax_cross_entropy


def _check_shape(name: str, shape: Any) -> tuple[int, ...]:
  if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
    raise ValueError(f"{name}={shape!r} must be a sequence of positive integers")
  return tuple(_validate.check_integer(name, d, 1) for d in shape)


def _check_binnings(binnings: Any) -> tuple[mst.Binning, ...]:
  if isinstance(binnings, (str, bytes)) or not hasattr(binnings, "__iter__"):
    raise ValueError(f"binnings must be a sequence of mst.Binning, got {type(binnings).__name__}")
  binnings = tuple(binnings)
  _validate.check_nonempty("binnings", binnings)
  for i, column in enumerate(binnings):
    _validate.check_instance(f"binnings[{i}]", column, mst.Binning)
  return binnings


def _check_vocab(vocab: Any) -> None:
  _validate.check_instance("vocab", vocab, ngram.CharVocab)


@functools.lru_cache(maxsize=16)
def _loss_apply(spec: ModelSpec):
  return jax.jit(lambda params, x, y: spec.loss(spec.module.apply({"params": params}, x), y))


def loss_function(spec: ModelSpec, params: Any, batch_size: int = 512) -> LossFn:
  """The trained model as a PANORAMIA target: examples to per-example losses (float64)."""
  _validate.check_instance("spec", spec, ModelSpec)
  _validate.check_integer("batch_size", batch_size, 1)
  apply = _loss_apply(spec)

  def loss_fn(examples: Examples) -> np.ndarray:
    x, y = jnp.asarray(spec.features(examples)), jnp.asarray(spec.targets(examples))
    parts = [np.asarray(apply(params, x[i:i + batch_size], y[i:i + batch_size]))
             for i in range(0, x.shape[0], batch_size)]
    return np.concatenate(parts).astype(np.float64) if parts else np.zeros(0)
  return loss_fn


def train_model(key: jax.Array, spec: ModelSpec, examples: Examples, train: TrainSpec,
                checkpoint_dir: str | None = None) -> tuple[Any, training.TrainConfig]:
  """Trains ``spec``'s model on ``examples`` with the DP-SGD engine; returns the parameters
  and the engine config (whose noise multiplier the accountant chose)."""
  _validate.check_key(key)
  _validate.check_instance("spec", spec, ModelSpec)
  _validate.check_instance("examples", examples, Examples)
  _validate.check_instance("train", train, TrainSpec)
  config = train.train_config(len(examples))
  result = training.train(key, spec.module, spec.features(examples), spec.targets(examples),
                          config, loss_fn=spec.loss, checkpoint_dir=checkpoint_dir)
  return result.state.params, config


def _trainer(spec: ModelSpec, train: TrainSpec) -> Callable[[jax.Array, Examples], LossFn]:
  def train_helper(key: jax.Array, examples: Examples) -> LossFn:
    params, _ = train_model(key, spec, examples, train)
    return loss_function(spec, params)
  return train_helper


# ---------------------------------------------------------------------------------- images
def image_classifier(model: Any, example_shape: Sequence[int], num_classes: int) -> nn.Module:
  """The image classifier ``model``: a name of :data:`dpaudit.models.MODEL_NAMES` (built by
  :func:`dpaudit.models.make_model` for ``example_shape`` and ``num_classes``) or a flax module
  mapping a batch of images ``[N, H, W, C]`` to ``num_classes`` logits, used as it is."""
  example_shape = _check_shape("example_shape", example_shape)
  _validate.check_integer("num_classes", num_classes, 2)
  if isinstance(model, nn.Module):
    return model
  if not isinstance(model, str):
    raise ValueError(f"model must be a model name ({', '.join(models.MODEL_NAMES)}) or a flax "
                     f"module, got {type(model).__name__}")
  return models.make_model(model, tuple(example_shape), num_classes)


def image_spec(example_shape: Sequence[int], num_classes: int, model: Any = "lenet5"
               ) -> ModelSpec:
  """The image classifier ``model`` (:func:`image_classifier`: a name or a flax module) on
  ``Examples`` of images."""
  return ModelSpec(image_classifier(model, example_shape, num_classes), _inputs, _labels)


def _inputs(examples: Examples) -> np.ndarray:
  return np.asarray(examples.inputs)


def _labels(examples: Examples) -> np.ndarray:
  return np.asarray(examples.labels)


@functools.lru_cache(maxsize=16)
def _sharpened_sampler(module: vae.ConditionalVAE, logit_scale: float):
  r"""Jitted ``(key, params, labels) -> sigmoid(logit_scale * decoder logits)`` for latents
  :math:`z \sim \mathcal{N}(0, I)`."""
  def sample(key, params, labels):
    z = jax.random.normal(key, (labels.shape[0], module.latent_dim), jnp.float32)
    logits = module.apply({"params": params}, z, labels, method=vae.ConditionalVAE.decode)
    return jax.nn.sigmoid(logit_scale * logits).astype(jnp.float32)
  return jax.jit(sample)


def image_generator(num_classes: int, config: vae.VaeConfig, logit_scale: float = 1.0
                    ) -> Callable[[jax.Array, Examples], Sampler]:
  r"""Fits a class-conditional VAE on :math:`D_G`; samples draw a label from :math:`D_G`'s
  class frequencies, then an image of that class: :math:`\sigma(s\,\ell(z, y))` for the
  decoder's per-pixel logits :math:`\ell`, :math:`z \sim \mathcal{N}(0, I)` and
  ``logit_scale`` s. At s = 1 these are the decoder's Bernoulli means
  (:func:`dpaudit.models.vae.sample_vae`), blurrier than real digits; s > 1 lowers each
  pixel's temperature, sharpening the strokes (s = 2 gives ``mnist_subset``'s share of grey
  pixels, docs/panoramia.md)."""
  _validate.check_integer("num_classes", num_classes, 2)
  _validate.check_instance("config", config, vae.VaeConfig)
  _validate.check_range("logit_scale", logit_scale, 0.0, None, low_open=True, finite=True)
  logit_scale = float(logit_scale)

  def fit(key: jax.Array, d_g: Examples) -> Sampler:
    fitted = vae.fit_vae(key, np.asarray(d_g.inputs), np.asarray(d_g.labels), num_classes,
                         config)
    freq = np.bincount(np.asarray(d_g.labels), minlength=num_classes) / len(d_g)

    def sample(key: jax.Array, n: int) -> Examples:
      key_label, key_image = jax.random.split(key)
      labels = np.asarray(jax.random.choice(key_label, num_classes, (n,), p=jnp.asarray(freq)),
                          np.int32)
      if logit_scale == 1.0:
        images = vae.sample_vae(key_image, fitted, labels)
      else:
        images = _sharpened_sampler(fitted.module, logit_scale)(key_image, fitted.params,
                                                                jnp.asarray(labels))
      return Examples(np.asarray(images, np.float32), labels)
    return sample
  return fit


def image_modality(example_shape: Sequence[int], num_classes: int, generator: vae.VaeConfig,
                   helper: TrainSpec, model: Any = "lenet5", encoder_width: int = 16,
                   logit_scale: float = 1.0) -> Modality:
  """PANORAMIA on images: conditional VAE generator (samples sharpened by ``logit_scale``,
  :func:`image_generator`), helper of architecture ``model`` (a name or a flax module,
  :func:`image_classifier`; usually the target's), CNN encoder of ``encoder_width`` channels
  for the baseline and the MIA."""
  _validate.check_instance("helper", helper, TrainSpec)
  _validate.check_integer("encoder_width", encoder_width, 1)
  return Modality("image", image_generator(num_classes, generator, logit_scale),
                  _trainer(image_spec(example_shape, num_classes, model), helper),
                  functools.partial(classifiers.ImageEncoder, encoder_width))


# --------------------------------------------------------------------------------- tabular
ADULT_BINNINGS = {
    "age": mst.Binning("age", edges=tuple(range(15, 100, 5)), integer=True),
    "fnlwgt": mst.Binning("fnlwgt", edges=(1e4, 5e4, 1e5, 1.25e5, 1.5e5, 1.75e5, 2e5, 2.25e5,
                                           2.5e5, 3e5, 4e5, 6e5, 1.5e6), integer=True),
    "education_num": mst.Binning("education_num", edges=tuple(range(1, 18)), integer=True),
    "capital_gain": mst.Binning("capital_gain", edges=(0, 1, 2000, 4000, 6000, 8000, 15000,
                                                       100000), integer=True),
    "capital_loss": mst.Binning("capital_loss", edges=(0, 1, 1500, 1800, 2000, 2500, 4500),
                                integer=True),
    "hours_per_week": mst.Binning("hours_per_week", edges=(1, 10, 20, 30, 35, 40, 41, 45, 50,
                                                           60, 80, 100), integer=True),
}
"""Public bin edges of Adult's numeric columns (from the census documentation's ranges, never
from the data): MST's domain, and the log scales of :class:`TabularMLP`."""


def adult_binnings() -> tuple[mst.Binning, ...]:
  """MST's columns for an Adult record: the 14 features of :data:`sources.ADULT_COLUMNS`,
  then the income label."""
  columns = [ADULT_BINNINGS[c.name] if not c.is_categorical
             else mst.Binning(c.name, num_categories=len(c.categories))
             for c in sources.ADULT_COLUMNS]
  return (*columns, mst.Binning("income", num_categories=2))


def encode_rows(rows: jax.Array, binnings: Sequence[mst.Binning]) -> jax.Array:
  r"""A table row as network input: categorical codes one-hot, numeric values as
  :math:`\log(1 + \max(x - lo, 0)) / \log(1 + hi - lo)` over the column's public range."""
  binnings = _check_binnings(binnings)
  _validate.check_real_array("rows", rows, ndim=2, nonempty=False)
  if np.shape(rows)[1] != len(binnings):
    raise ValueError(f"rows has {np.shape(rows)[1]} columns but binnings describes "
                     f"{len(binnings)}; one binning per column")
  parts = []
  for i, column in enumerate(binnings):
    value = rows[:, i]
    if column.edges is None:
      parts.append(jax.nn.one_hot(value.astype(jnp.int32), column.size))
    else:
      low, high = column.edges[0], column.edges[-1]
      parts.append((jnp.log1p(jnp.maximum(value - low, 0.0)) / math.log1p(high - low))[:, None])
  return jnp.concatenate(parts, axis=1)


PAPER_TABULAR_HIDDEN = (150, 100, 50, 10)
"""The hidden widths of the paper's Adult target and helper (App. B.3: four hidden layers of
150, 100, 50 and 10 units)."""
WIDE_TABULAR_HIDDEN = (256, 256, 128, 64)
"""The wider MLP :class:`TabularMLP` keeps as its default (the tightness study's target)."""


class TabularMLP(nn.Module):
  """Table 2's tabular target: :func:`encode_rows`, then an MLP with ``hidden_sizes`` (4
  hidden layers; the paper's widths are :data:`PAPER_TABULAR_HIDDEN`)."""
  binnings: tuple[mst.Binning, ...]
  hidden_sizes: tuple[int, ...] = WIDE_TABULAR_HIDDEN
  num_classes: int = 2

  @nn.compact
  def __call__(self, rows: jax.Array) -> jax.Array:
    batch_shape = rows.shape[:-1]
    x = encode_rows(rows.reshape((-1, rows.shape[-1])), self.binnings)
    for width in self.hidden_sizes:
      x = nn.relu(nn.Dense(width)(x))
    return nn.Dense(self.num_classes)(x).reshape(batch_shape + (self.num_classes,))


class TabularEncoder(nn.Module):
  """The classifiers' encoder for table rows: :func:`encode_rows` then an MLP."""
  binnings: tuple[mst.Binning, ...]
  hidden_sizes: tuple[int, ...] = (64, 64)

  @nn.compact
  def __call__(self, rows: jax.Array) -> jax.Array:
    return classifiers.VectorEncoder(self.hidden_sizes)(encode_rows(rows, self.binnings))


def tabular_spec(binnings: Sequence[mst.Binning], num_classes: int = 2,
                 hidden_sizes: Sequence[int] = WIDE_TABULAR_HIDDEN) -> ModelSpec:
  """:class:`TabularMLP` of ``hidden_sizes`` on table rows described by ``binnings``,
  ``num_classes`` classes."""
  binnings = _check_binnings(binnings)
  _validate.check_integer("num_classes", num_classes, 2)
  hidden_sizes = _check_shape("hidden_sizes", hidden_sizes)
  return ModelSpec(TabularMLP(tuple(binnings), hidden_sizes, num_classes), _inputs, _labels)


def categorical_columns(binnings: Sequence[mst.Binning]) -> tuple[bool, ...]:
  """Which columns of a row are categorical codes (for
  :class:`~dpaudit.attacks.panoramia.GBTConfig`'s ``categorical``)."""
  return tuple(column.edges is None for column in _check_binnings(binnings))


def tabular_generator(binnings: Sequence[mst.Binning], config: mst.MstConfig
                      ) -> Callable[[jax.Array, Examples], Sampler]:
  """Fits MST on :math:`D_G`'s records (features and label as one table)."""
  binnings = _check_binnings(binnings)
  _validate.check_instance("config", config, mst.MstConfig)

  def fit(key: jax.Array, d_g: Examples) -> Sampler:
    table = np.column_stack([np.asarray(d_g.inputs, np.float64), np.asarray(d_g.labels)])
    fitted = mst.fit_mst(key, table, (*binnings, mst.Binning("label", num_categories=int(
        np.max(d_g.labels)) + 1)), config)

    def sample(key: jax.Array, n: int) -> Examples:
      rows = mst.sample_mst(key, fitted, n)
      return Examples(rows[:, :-1].astype(np.float32), rows[:, -1].astype(np.int32))
    return sample
  return fit


def tabular_modality(generator: mst.MstConfig, helper: TrainSpec,
                     binnings: Sequence[mst.Binning] | None = None,
                     hidden_sizes: Sequence[int] = WIDE_TABULAR_HIDDEN) -> Modality:
  """PANORAMIA on table rows (default: Adult's 14 features, label = income); the helper is a
  :class:`TabularMLP` of ``hidden_sizes`` (the target's)."""
  _validate.check_instance("generator", generator, mst.MstConfig)
  _validate.check_instance("helper", helper, TrainSpec)
  binnings = tuple(binnings) if binnings is not None else adult_binnings()[:-1]
  return Modality("tabular", tabular_generator(binnings, generator),
                  _trainer(tabular_spec(binnings, hidden_sizes=hidden_sizes), helper),
                  functools.partial(TabularEncoder, binnings))


# ------------------------------------------------------------------------------------ text
def text_examples(vocab: ngram.CharVocab, lines: Sequence[str], max_length: int) -> Examples:
  """Lines as ``Examples``: inputs the ids ``[N, max_length]`` (line, eos, then padding -1),
  labels zero."""
  _check_vocab(vocab)
  if isinstance(lines, (str, bytes)) or not all(isinstance(line, str) for line in lines):
    raise ValueError("lines must be a sequence of strings")
  _validate.check_integer("max_length", max_length, 1)
  _, targets = ngram.line_examples(vocab, lines, 1, max_length)
  return Examples(targets, np.zeros(len(lines), np.int32))


def text_spec(vocab: ngram.CharVocab, context_size: int = 6, hidden_size: int = 256
              ) -> ModelSpec:
  """A :class:`~dpaudit.models.CharNGramLM` on line ids; loss: the line's summed NLL."""
  _check_vocab(vocab)
  _validate.check_integer("context_size", context_size, 1)
  _validate.check_integer("hidden_size", hidden_size, 1)

  def contexts(examples: Examples) -> np.ndarray:
    ids = np.asarray(examples.inputs)
    return ngram.contexts_of(np.where(ids >= 0, ids, vocab.eos), context_size, vocab.bos)
  return ModelSpec(ngram.CharNGramLM(vocab.size, context_size, hidden_size), contexts,
                   _inputs, ngram.sequence_nll)


def top_p_logits(logits: jax.Array, top_p: float) -> jax.Array:
  """Nucleus (top-p) filtering (Holtzman et al. 2020): keeps the fewest most likely tokens
  whose probabilities sum to at least ``top_p``; the others get -inf."""
  _validate.check_real_array("logits", logits, nonempty=False, neg_inf=True)
  _validate.check_range("top_p", top_p, 0.0, 1.0, low_open=True)
  ordered = jnp.sort(logits, axis=-1)[..., ::-1]
  probs = jax.nn.softmax(ordered, axis=-1)
  before = jnp.cumsum(probs, axis=-1) - probs
  cutoff = jnp.min(jnp.where(before < top_p, ordered, jnp.inf), axis=-1, keepdims=True)
  return jnp.where(logits >= cutoff, logits, -jnp.inf)


def top_k_logits(logits: jax.Array, top_k: int) -> jax.Array:
  """Top-k filtering (Fan et al. 2018): keeps the ``top_k`` largest logits of each row (and
  any tied with the k-th largest); the others get -inf. ``top_k = 0`` or at least the
  vocabulary's size keeps everything.

  >>> import jax.numpy as jnp
  >>> top_k_logits(jnp.array([[1.0, 3.0, 2.0, 0.0]]), 2).tolist()
  [[-inf, 3.0, 2.0, -inf]]
  """
  _validate.check_real_array("logits", logits, nonempty=False, neg_inf=True)
  top_k = _validate.check_integer("top_k", top_k, 0)
  size = np.shape(logits)[-1] if np.ndim(logits) else 0
  if top_k == 0 or top_k >= size:
    return jnp.asarray(logits)
  kth = jnp.sort(logits, axis=-1)[..., size - top_k][..., None]
  return jnp.where(logits >= kth, logits, -jnp.inf)


def sample_continuations(key: jax.Array, next_logits: Callable[[jax.Array], jax.Array],
                         prompts: jax.Array, prompt_lengths: jax.Array, context_size: int,
                         bos: int, eos: int, top_p: float, top_k: int = 0) -> jax.Array:
  """Continues each prompt with top-k then top-p sampling until eos or the end of the row.

  Args:
    key: PRNG key.
    next_logits: contexts ``[n, context_size]`` (most recent last) to logits ``[n, V]``.
    prompts: ``[n, L]`` ids; the first ``prompt_lengths[i]`` of row i are kept as they are.
    prompt_lengths: ``[n]``, each below L.
    context_size, bos, eos: the model's context length and special ids.
    top_p: nucleus mass in (0, 1].
    top_k: keep the k most likely tokens (:func:`top_k_logits`) before the nucleus; 0: all.
      With top_p = 1 (the paper's setting) the order does not matter.

  Returns:
    ``[n, L]`` ids in the format of :func:`text_examples` (a row with no eos before its last
    position gets one there).
  """
  _validate.check_key(key)
  if not callable(next_logits):
    raise ValueError(f"next_logits must be a function, got {type(next_logits).__name__}")
  for name, value, ndim in (("prompts", prompts, 2), ("prompt_lengths", prompt_lengths, 1)):
    dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype
    if np.ndim(value) != ndim or np.dtype(dtype).kind not in "iu":
      raise ValueError(f"{name} must be a {ndim}-D integer array, got dtype {dtype} and shape "
                       f"{np.shape(value)}")
  if np.shape(prompt_lengths) != np.shape(prompts)[:1]:
    raise ValueError(f"prompt_lengths has shape {np.shape(prompt_lengths)} but prompts has "
                     f"{np.shape(prompts)[0]} rows; one length per row")
  _validate.check_range("prompt_lengths", prompt_lengths, 0, np.shape(prompts)[1] - 1)
  _validate.check_integer("context_size", context_size, 1)
  _validate.check_integer("bos", bos, 0)
  _validate.check_integer("eos", eos, 0)
  _validate.check_range("top_p", top_p, 0.0, 1.0, low_open=True)
  top_k = _validate.check_integer("top_k", top_k, 0)
  n, length = prompts.shape

  def step(carry, inputs):
    contexts, done = carry
    t, step_key = inputs
    z = top_p_logits(top_k_logits(next_logits(contexts), top_k), top_p)
    token = jax.random.categorical(step_key, z, axis=-1).astype(jnp.int32)
    token = jnp.where(t < prompt_lengths, prompts[:, t], token)
    token = jnp.where(t == length - 1, eos, token)
    out = jnp.where(done, ngram.PAD, token)
    contexts = jnp.concatenate([contexts[:, 1:], token[:, None]], axis=1)
    return (contexts, done | (token == eos)), out

  init = (jnp.full((n, context_size), bos, jnp.int32), jnp.zeros((n,), bool))
  _, tokens = jax.lax.scan(step, init, (jnp.arange(length), jax.random.split(key, length)))
  return tokens.T


def text_generator(spec: ModelSpec, train: TrainSpec, prompt_length: int = 8,
                   prompt_fraction: float = 0.2, top_p: float = 0.9, top_k: int = 0
                   ) -> Callable[[jax.Array, Examples], Sampler]:
  """Trains ``spec``'s character LM on part of :math:`D_G` and continues prompts (the first
  ``prompt_length`` characters, at most a line's length - 1) of the held-out
  ``prompt_fraction`` of :math:`D_G`, sampling with ``top_k`` then ``top_p`` filtering (the
  paper, App. B.2: 64-token prompts, top-k 200, top-p 1)."""
  _validate.check_instance("spec", spec, ModelSpec)
  _validate.check_instance("train", train, TrainSpec)
  _validate.check_integer("prompt_length", prompt_length, 0)
  _validate.check_integer("top_k", top_k, 0)
  module: ngram.CharNGramLM = spec.module  # type: ignore[assignment]
  _validate.check_range("top_p", top_p, 0.0, 1.0, low_open=True)
  _validate.check_range("prompt_fraction", prompt_fraction, 0.0, 1.0, low_open=True,
                        high_open=True)

  def fit(key: jax.Array, d_g: Examples) -> Sampler:
    key_split, key_train = jax.random.split(key)
    order = np.asarray(jax.random.permutation(key_split, len(d_g)))
    num_prompts = max(1, int(round(prompt_fraction * len(d_g))))
    held_out = d_g.take(order[:num_prompts])
    params, _ = train_model(key_train, spec, d_g.take(order[num_prompts:]), train)
    ids = np.asarray(held_out.inputs)
    lengths = np.minimum(np.sum(ids >= 0, axis=1) - 1, prompt_length).astype(np.int32)
    apply = jax.jit(lambda c: module.apply({"params": params}, c[:, None, :])[:, 0, :])

    @jax.jit
    def generate(key, rows):
      return sample_continuations(key, apply, jnp.asarray(ids)[rows],
                                  jnp.asarray(lengths)[rows], module.context_size,
                                  ngram.CharVocab.bos, ngram.CharVocab.eos, top_p, top_k)

    def sample(key: jax.Array, n: int) -> Examples:
      key_rows, key_text = jax.random.split(key)
      rows = jax.random.randint(key_rows, (n,), 0, num_prompts)
      return Examples(np.asarray(generate(key_text, rows)), np.zeros(n, np.int32))
    return sample
  return fit


def text_modality(vocab: ngram.CharVocab, generator: TrainSpec, helper: TrainSpec,
                  context_size: int = 6, hidden_size: int = 256, prompt_length: int = 8,
                  top_p: float = 0.9, top_k: int = 0) -> Modality:
  """PANORAMIA on lines of text: character-LM generator with top-k/top-p continuations of
  held-out prompts (:func:`text_generator`), character-LM helper, bag-of-characters encoder."""
  _validate.check_instance("generator", generator, TrainSpec)
  _validate.check_instance("helper", helper, TrainSpec)
  spec = text_spec(vocab, context_size, hidden_size)
  return Modality("text", text_generator(spec, generator, prompt_length, top_p=top_p,
                                         top_k=top_k),
                  _trainer(spec, helper),
                  functools.partial(classifiers.TokenEncoder, vocab.size))
