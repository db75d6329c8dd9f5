r"""Reconstruction audits with Renyi DP: Stock et al., "Defending against Reconstruction Attacks
with Renyi Differential Privacy" (2022).

The leakage of a secret :math:`s` is :math:`\log(p_1/p_0)`, with :math:`p_1` (:math:`p_0`) the
probability that the reconstruction attack outputs :math:`s` from a model trained with (without)
it; RDP bounds it by :math:`L(p_0)` (Eqs. 2-3, :mod:`dpaudit.estimators.reconstruction`).

:func:`run` is the experiment of their Sec. 4.1 (Fig. 4): a random canary
:math:`c \in \{0..D-1\}^T`, the lazy n-gram model :class:`dpaudit.models.LazyNgram` trained on
:math:`c` alone by DP-SGD (:mod:`dpaudit.dpsgd`, sampling rate 1, clip :math:`C`, noise
:math:`\sigma`, learning rate :math:`0.5/\sigma`), :math:`N` models trained as one vmapped
program, and the Monte Carlo estimate of Eq. (4),

.. math:: \log p_1 \approx \log\frac1N\sum_{i=1}^N f_{\theta_i}(c)
   = \operatorname{logsumexp}_i \log f_{\theta_i}(c) - \log N,

with :math:`p_0 = D^{-T}` (the untrained problem is invariant under permutations of the
digits). The theory is the RDP curve of the same mechanism from dp-accounting.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate, accounting, distributed, results
from dpaudit.dpsgd import training
from dpaudit.estimators import reconstruction as bounds
from dpaudit.models import ngram
from dpaudit.results import to_plain

DEFAULT_ORDERS = tuple(np.round(np.concatenate([np.linspace(1.01, 2.0, 100),
                                                np.linspace(2.02, 63.0, 600)]), 6))


def _log_mean_exp(log_values: np.ndarray) -> tuple[float, float, float]:
  r"""``(log mean exp(x), delta-method standard error of it, effective sample size)``.

  With weights :math:`w_i = e^{x_i}`, the estimate is :math:`\log\bar w`, its standard error
  :math:`\mathrm{sd}(w) / (\sqrt N \bar w)` and the effective sample size
  :math:`(\sum w)^2/\sum w^2` (Kong 1992): about :math:`N` when the models contribute evenly,
  about 1 when the largest term dominates, in which case the estimate and its standard
  error are not to be trusted.
  """
  x = np.asarray(log_values, np.float64)
  top = np.max(x)
  w = np.exp(x - top)
  mean = np.mean(w)
  n = x.size
  se = np.std(w, ddof=1) / (math.sqrt(n) * mean) if n > 1 else math.inf
  return float(top + math.log(mean)), float(se), float(np.sum(w)**2 / np.sum(w**2))


@dataclasses.dataclass(frozen=True)
class NgramCanaryConfig:
  """The n-gram canary experiment of Stock et al., Sec. 4.1.

  Attributes:
    noise_multipliers: the :math:`\\sigma` values, each > 0 (the paper: [0.5, 10]).
    num_models: models :math:`N` trained per :math:`\\sigma` (10,000 in the paper).
    num_steps: DP-SGD steps per model.
    canary_length: :math:`T`.
    vocab_size: :math:`D`.
    l2_clip_norm: :math:`C`.
    learning_rate_scale: the learning rate is ``learning_rate_scale / sigma`` (0.5).
    chunk_size: models per vmapped call (0: all at once); bounds memory.
    orders: Renyi orders of the theoretical bound (the paper: [1.01, 63]).
    min_effective_sample_size: estimates whose effective sample size is below this are
      flagged ``reliable=False``.
  """
  noise_multipliers: tuple[float, ...] = (0.5, 0.75, 1.0, 1.5, 2.0, 2.875, 4.0, 6.0, 10.0)
  num_models: int = 10_000
  num_steps: int = 100
  canary_length: int = 10
  vocab_size: int = 10
  l2_clip_norm: float = 1.0
  learning_rate_scale: float = 0.5
  chunk_size: int = 0
  orders: tuple[float, ...] = DEFAULT_ORDERS
  min_effective_sample_size: float = 100.0

  def __post_init__(self):
    object.__setattr__(self, "noise_multipliers",
                       _validate.float_tuple("noise_multipliers", self.noise_multipliers))
    object.__setattr__(self, "orders", _validate.float_tuple("orders", self.orders))
    _validate.check_nonempty("noise_multipliers", self.noise_multipliers)
    _validate.check_range("noise_multipliers", self.noise_multipliers, 0.0, math.inf,
                          low_open=True, high_open=True)
    for name, low in (("num_models", 2), ("num_steps", 1), ("canary_length", 1),
                      ("vocab_size", 2), ("chunk_size", 0)):
      _validate.check_integer(name, getattr(self, name), low)
    # A vmapped chunk trains its models side by side: the logits, their gradients and the
    # optimiser's copies, float32 (the models' results, float64, are kept for all of them).
    per_model = 16 * self.canary_length * self.vocab_size + 64
    _validate.check_allocation("num_models", self.num_models, 8, what="model's result")
    _validate.check_allocation("chunk_size" if self.chunk_size else "num_models",
                               self.chunk_size or self.num_models, per_model, what="model")
    _validate.check_range("l2_clip_norm", self.l2_clip_norm, 0.0, math.inf,
                          low_open=True, high_open=True)
    _validate.check_range("learning_rate_scale", self.learning_rate_scale, 0.0, math.inf,
                          low_open=True, high_open=True)
    _validate.check_orders(np.asarray(self.orders))
    _validate.check_range("min_effective_sample_size", self.min_effective_sample_size, 1.0)

  @property
  def log_p0(self) -> float:
    """:math:`\\log p_0 = -T \\log D`."""
    return -self.canary_length * math.log(self.vocab_size)


@dataclasses.dataclass(frozen=True)
class NgramCanaryPoint:
  """One noise level of :func:`run`; all logs natural.

  Attributes:
    noise_multiplier, learning_rate: the run's :math:`\\sigma` and :math:`\\eta`.
    log_p1: Eq. (4), the log-mean-exp of :math:`\\log f_{\\theta_i}(c)`.
    log_p1_se: its delta-method standard error.
    effective_sample_size: of the Monte Carlo average (see ``reliable``).
    reliable: effective sample size >= the config's minimum.
    leakage: the empirical leakage :math:`\\log(p_1/p_0)`.
    leakage_bound, bound_order: :math:`L(p_0)` (Eq. 3) and the order attaining it.
    traditional_bound, traditional_order: :math:`\\min_\\alpha h(\\alpha, p_0)` (Eq. 2).
    mean_log_f, std_log_f: mean and standard deviation of :math:`\\log f_{\\theta_i}(c)` over
      the models (the concentration statistics of Sec. 3.2).
    canary_probability_median: median :math:`f_{\\theta_i}(c)`.
  """
  noise_multiplier: float
  learning_rate: float
  log_p1: float
  log_p1_se: float
  effective_sample_size: float
  reliable: bool
  leakage: float
  leakage_bound: float
  bound_order: float
  traditional_bound: float
  traditional_order: float
  mean_log_f: float
  std_log_f: float
  canary_probability_median: float

  def to_dict(self) -> dict[str, Any]:
    return to_plain(dataclasses.asdict(self))

  @classmethod
  def from_dict(cls, stored: Any, config: NgramCanaryConfig | None = None) -> NgramCanaryPoint:
    """The point whose :meth:`to_dict` (after a strict-JSON round trip) is ``stored``, checked
    to be whole (for :class:`dpaudit.results.CellStore`): every field with its type, a noise
    multiplier and learning rate > 0, :math:`\\log p_1 \\le 0`, a standard error, spread and
    effective sample size >= 0 (the latter >= 1), orders > 1 and a median probability in
    [0, 1]; given ``config``, also the leakage :math:`\\log p_1 - \\log p_0`, the learning rate
    ``scale / sigma``, ``reliable`` and :math:`L(p_0) \\le \\log(1/p_0)`. Raises KeyError,
    TypeError or ValueError."""
    fields = {f.name: (bool if f.name == "reliable" else float) for f in dataclasses.fields(cls)}
    results.check_fields("NgramCanaryPoint", stored, fields)
    if set(stored) != set(fields):
      raise KeyError(f"NgramCanaryPoint has unexpected keys {sorted(set(stored) - set(fields))}")
    p = cls(**stored)
    slack = 1e-6
    checks = (
        ("noise_multiplier > 0", p.noise_multiplier > 0),
        ("learning_rate > 0", p.learning_rate > 0),
        ("log_p1 <= 0", p.log_p1 <= slack),
        ("log_p1_se >= 0", p.log_p1_se >= 0),
        ("effective_sample_size >= 1", 1 - slack <= p.effective_sample_size < math.inf),
        ("mean_log_f <= 0", p.mean_log_f <= slack),
        ("std_log_f >= 0", p.std_log_f >= 0),
        ("canary_probability_median in [0, 1]", 0 <= p.canary_probability_median <= 1 + slack),
        ("bound_order > 1", p.bound_order > 1),
        ("traditional_order > 1", p.traditional_order > 1),
        ("leakage_bound is not NaN", not math.isnan(p.leakage_bound)))
    if config is not None:
      tol = slack * max(1.0, abs(config.log_p0))
      checks += (
          ("leakage == log_p1 - log_p0", abs(p.leakage - (p.log_p1 - config.log_p0)) <= tol),
          ("learning_rate == learning_rate_scale / noise_multiplier",
           math.isclose(p.learning_rate, config.learning_rate_scale / p.noise_multiplier,
                        rel_tol=1e-9)),
          ("reliable == effective_sample_size >= min_effective_sample_size",
           p.reliable == (p.effective_sample_size >= config.min_effective_sample_size)),
          ("leakage_bound <= log(1/p0)", p.leakage_bound <= -config.log_p0 + tol))
    for text, ok in checks:
      if not ok:
        raise ValueError(f"the stored NgramCanaryPoint breaks {text}: {stored}")
    return p


@dataclasses.dataclass(frozen=True)
class NgramCanaryResult:
  """:func:`run`'s output: the canary, :math:`\\log p_0` and one point per
  noise level."""
  canary: tuple[int, ...]
  log_p0: float
  points: tuple[NgramCanaryPoint, ...]

  def to_dict(self) -> dict[str, Any]:
    return {"canary": list(self.canary), "log_p0": self.log_p0,
            "points": [p.to_dict() for p in self.points]}

  @classmethod
  def from_dict(cls, stored: Any, config: NgramCanaryConfig | None = None
                ) -> NgramCanaryResult:
    """The result whose :meth:`to_dict` (after a strict-JSON round trip) is ``stored``: the
    canary (token ids >= 0), :math:`\\log p_0 \\le 0` and every point checked by
    :meth:`NgramCanaryPoint.from_dict` (against ``config`` when given, which must also match
    the canary's length and :math:`\\log p_0`). Raises KeyError, TypeError or ValueError."""
    results.check_fields("NgramCanaryResult", stored,
                         {"canary": list, "log_p0": float, "points": list})
    canary = stored["canary"]
    if not canary or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0
                             for c in canary):
      raise ValueError(f"the stored canary {canary!r} must be token ids >= 0")
    log_p0 = float(stored["log_p0"])
    if not log_p0 <= 0:
      raise ValueError(f"the stored log_p0={log_p0} must be <= 0")
    if config is not None and (len(canary) != config.canary_length
                               or max(canary) >= config.vocab_size
                               or abs(log_p0 - config.log_p0) > 1e-9 * abs(config.log_p0)):
      raise ValueError("the stored canary or log_p0 is not that of the config")
    return cls(tuple(int(c) for c in canary), log_p0,
               tuple(NgramCanaryPoint.from_dict(p, config) for p in stored["points"]))


def _check_level(config: Any, noise_multiplier: Any) -> None:
  """A :class:`NgramCanaryConfig` and a noise level sigma > 0 (finite): the learning rate is
  ``learning_rate_scale / sigma``."""
  if not isinstance(config, NgramCanaryConfig):
    raise ValueError(f"config must be an NgramCanaryConfig, got {type(config).__name__}")
  _validate.check_not_boolean("noise_multiplier", noise_multiplier, "noise multipliers")
  _validate.check_range("noise_multiplier", noise_multiplier, 0.0, low_open=True, finite=True)


def _check_canary(canary: Any, config: NgramCanaryConfig) -> None:
  dtype = canary.dtype if hasattr(canary, "dtype") else np.asarray(canary).dtype
  if np.shape(canary) != (config.canary_length,) or np.dtype(dtype).kind not in "iu":
    raise ValueError(f"canary must be {config.canary_length} integer token ids (shape "
                     f"({config.canary_length},)), got dtype {dtype} and shape "
                     f"{np.shape(canary)}")
  _validate.check_range("canary", canary, 0, config.vocab_size - 1)


def lazy_ngram_train_config(config: NgramCanaryConfig, noise_multiplier: float
                            ) -> training.TrainConfig:
  """DP-SGD of Sec. 4.1: sampling rate 1, clip C, noise sigma, SGD at ``scale / sigma``."""
  _check_level(config, noise_multiplier)
  return training.TrainConfig(
      num_steps=config.num_steps, sampling_rate=1.0, noise_multiplier=noise_multiplier,
      l2_clip_norm=config.l2_clip_norm,
      learning_rate=config.learning_rate_scale / noise_multiplier, optimizer="sgd",
      physical_batch_size=1, clipping="vmap")


def lazy_ngram_hyperparameters(config: NgramCanaryConfig, noise_multiplier: float
                               ) -> training.Hyperparameters:
  """sigma and the learning rate ``scale / sigma`` of :func:`lazy_ngram_train_config`, as
  float32 arguments (the dtype of the model) for the sigma-free program of
  :func:`_lazy_ngram_log_f`."""
  return training.hyperparameters(lazy_ngram_train_config(config, noise_multiplier))


def _lazy_ngram_log_f(config: NgramCanaryConfig) -> Callable:
  """``log_f(key, canary, hyper)``: :func:`lazy_ngram_run` with sigma and the learning rate
  as arguments (:class:`dpaudit.dpsgd.training.Hyperparameters`), so that every sigma of a
  sweep runs the same compiled program. The train config here only fixes the structure (a
  private run: noise is drawn); its sigma is replaced by ``hyper``."""
  model = ngram.LazyNgram(config.canary_length, config.vocab_size)
  features = jnp.zeros((1, 1), jnp.float32)
  run = training.make_run(model, lazy_ngram_train_config(config, 1.0), 1, features[0],
                          loss_fn=ngram.sequence_nll, strategy="vmap")

  def log_f(key, canary, hyper):
    out = run(key, features, canary[None], hyper=hyper)
    return -ngram.sequence_nll(out.params["logits"], canary)

  return log_f


def lazy_ngram_run(config: NgramCanaryConfig, noise_multiplier: float) -> Callable:
  """``run(key, canary) -> log f_theta(canary)``: one DP-SGD run of the lazy n-gram model on
  the canary alone (Sec. 4.1), un-jitted; vmap it over keys.

  It is :func:`dpaudit.dpsgd.training.make_run` with one example (the canary as targets of
  :func:`dpaudit.models.ngram.sequence_nll`) and :func:`lazy_ngram_train_config`; the noisy
  sum of the clipped gradient is divided by the expected batch size 1.
  """
  _check_level(config, noise_multiplier)
  log_f = _lazy_ngram_log_f(config)
  hyper = lazy_ngram_hyperparameters(config, noise_multiplier)
  return lambda key, canary: log_f(key, canary, hyper)


def _structure(config: NgramCanaryConfig) -> tuple:
  """The fields of ``config`` that shape the compiled training program."""
  return (config.num_steps, config.canary_length, config.vocab_size, config.l2_clip_norm)


@functools.lru_cache(maxsize=16)
def _compiled_lazy_ngram(structure: tuple) -> Callable:
  num_steps, canary_length, vocab_size, l2_clip_norm = structure
  config = NgramCanaryConfig(num_steps=num_steps, canary_length=canary_length,
                             vocab_size=vocab_size, l2_clip_norm=l2_clip_norm)
  return jax.jit(jax.vmap(_lazy_ngram_log_f(config), in_axes=(0, None, None)))


def canary_log_probabilities(key: jax.Array, canary: jax.Array, config: NgramCanaryConfig,
                             noise_multiplier: float) -> np.ndarray:
  r""":math:`\log f_{\theta_i}(c)` of ``config.num_models`` models (float64 NumPy), trained
  as vmapped chunks of ``config.chunk_size`` (chunk i's keys come from ``fold_in(key, i)``, so
  under ``jax.distributed`` the chunks are spread over the processes by
  :func:`dpaudit.distributed.map_chunks` and every process gets the one-process result).
  sigma and the learning rate are arguments of the compiled program, which is kept per
  training structure: every sigma of a sweep, and every later call with the same structure
  and chunk size, reuses one compilation."""
  _validate.check_key(key)
  _check_level(config, noise_multiplier)
  _check_canary(canary, config)
  n = config.num_models
  chunk = min(config.chunk_size or n, n)
  compiled = _compiled_lazy_ngram(_structure(config))
  hyper = lazy_ngram_hyperparameters(config, noise_multiplier)

  def compute_chunk(i):
    return compiled(jax.random.split(jax.random.fold_in(key, i), chunk), canary, hyper)

  out = distributed.map_chunks(compute_chunk, math.ceil(n / chunk))
  return np.concatenate([np.asarray(o, np.float64) for o in out])[:n]


def ngram_theory(config: NgramCanaryConfig, noise_multiplier: float) -> dict[str, float]:
  """:math:`L(p_0)` and :math:`\\min_\\alpha h(\\alpha, p_0)` from the dp-accounting RDP curve
  of the run (sampling rate 1, ``num_steps`` steps)."""
  _check_level(config, noise_multiplier)
  orders = np.asarray(config.orders)
  rdp = accounting.dpsgd_rdp(noise_multiplier, 1.0, config.num_steps, orders)
  ours = bounds.reconstruction_leakage_bound(rdp, orders, log_p0=config.log_p0)
  trad = bounds.traditional_reconstruction_bound(rdp, orders, log_p0=config.log_p0)
  return {"leakage_bound": float(ours.value), "bound_order": float(ours.order),
          "traditional_bound": float(trad.value), "traditional_order": float(trad.order)}


def ngram_point(key: jax.Array, canary: jax.Array, config: NgramCanaryConfig,
                noise_multiplier: float) -> NgramCanaryPoint:
  """Trains the models of one noise level and compares their leakage with the bounds."""
  _validate.check_key(key)
  _check_level(config, noise_multiplier)
  _check_canary(canary, config)
  log_f = canary_log_probabilities(key, canary, config, noise_multiplier)
  log_p1, se, ess = _log_mean_exp(log_f)
  return NgramCanaryPoint(
      noise_multiplier=noise_multiplier,
      learning_rate=config.learning_rate_scale / noise_multiplier,
      log_p1=log_p1, log_p1_se=se, effective_sample_size=ess,
      reliable=bool(ess >= config.min_effective_sample_size),
      leakage=log_p1 - config.log_p0, mean_log_f=float(np.mean(log_f)),
      std_log_f=float(np.std(log_f)), canary_probability_median=float(np.exp(np.median(log_f))),
      **ngram_theory(config, noise_multiplier))


def random_canary(key: jax.Array, config: NgramCanaryConfig) -> jax.Array:
  """A uniformly random canary in :math:`\\{0..D-1\\}^T` (int32)."""
  _validate.check_key(key)
  if not isinstance(config, NgramCanaryConfig):
    raise ValueError(f"config must be an NgramCanaryConfig, got {type(config).__name__}")
  return jax.random.randint(key, (config.canary_length,), 0, config.vocab_size, jnp.int32)


def noise_level_key(key: jax.Array, noise_multiplier: float) -> jax.Array:
  """The key of one noise level's models: ``key`` folded with the float32 bits of
  :math:`\\sigma`, so the models of a noise level do not depend on the other levels run."""
  _validate.check_key(key)
  _validate.check_not_boolean("noise_multiplier", noise_multiplier, "noise multipliers")
  _validate.check_range("noise_multiplier", noise_multiplier, 0.0, low_open=True, finite=True)
  return jax.random.fold_in(key, int(np.float32(noise_multiplier).view(np.uint32)))


def _cell_config(config: NgramCanaryConfig, noise_multiplier: float,
                 key_config: Mapping[str, Any]) -> dict[str, Any]:
  """What a stored noise level must match to be reused: the config but its other noise levels,
  the noise level and the key (``key_config``)."""
  spec = results.to_plain(dataclasses.asdict(config))
  del spec["noise_multipliers"]
  return {"config": spec, "noise_multiplier": noise_multiplier, **key_config}


def _cell_validator(config: NgramCanaryConfig, noise_multiplier: float) -> Callable:
  """Accepts a stored noise level ``{"point", "seconds"}`` only when whole (raises)."""

  def validate(cell):
    results.check_fields("noise-level cell", cell, {"point": dict, "seconds": float})
    if NgramCanaryPoint.from_dict(cell["point"], config).noise_multiplier != noise_multiplier:
      raise ValueError(f"the cell holds noise multiplier {cell['point']['noise_multiplier']}")

  return validate


def run(key: jax.Array, config: NgramCanaryConfig, *,
        progress: results.Progress | None = None, store: results.CellStore | None = None,
        key_config: Mapping[str, Any] | None = None) -> NgramCanaryResult:
  """The experiment of Stock et al., Sec. 4.1 / Fig. 4, at every noise level of ``config``.

  ``key`` is split into the canary's key and the models' key, which
  :func:`noise_level_key` specialises to each noise level, so a noise level's point does not
  depend on the other levels run.

  Args:
    key: PRNG key.
    config: the settings.
    progress: optional :class:`dpaudit.results.Progress`, told after each noise level (one
      unit each) its leakage against :math:`L(p_0)` and its time, or ``[reused]``.
    store: optional :class:`dpaudit.results.CellStore` holding one cell per noise level,
      labelled ``sigma_<sigma>``, with the point and its seconds; a whole stored cell is reused.
    key_config: plain values naming ``key`` in the stored cells (default
      ``{"key": dpaudit.results.key_data(key)}``); ``experiments.ngram_reconstruction`` passes
      its seed and PRNG implementation, the key's origin, so its cells keep resuming.

  Returns:
    :class:`NgramCanaryResult`, one point per noise level in the config's order.

  >>> config = NgramCanaryConfig(noise_multipliers=(2.0,), num_models=4, num_steps=2,
  ...                            canary_length=2, vocab_size=3)
  >>> result = run(jax.random.key(0), config)
  >>> len(result.points), len(result.canary)
  (1, 2)
  """
  _validate.check_key(key)
  if not isinstance(config, NgramCanaryConfig):
    raise ValueError(f"config must be an NgramCanaryConfig, got {type(config).__name__}")
  if progress is not None and not callable(progress):
    raise ValueError("progress must be a function progress(done, total, message)")
  if store is not None and not isinstance(store, results.CellStore):
    raise ValueError(f"store must be a dpaudit.results.CellStore, got {type(store).__name__}")
  if key_config is not None and not isinstance(key_config, Mapping):
    raise ValueError(f"key_config must be a mapping of plain values naming the key, got "
                     f"{type(key_config).__name__}")
  if key_config is None:
    key_config = {"key": results.key_data(key)}
  canary_key, models_key = jax.random.split(key)
  canary = random_canary(canary_key, config)
  points, total = [], len(config.noise_multipliers)
  for i, sigma in enumerate(config.noise_multipliers, 1):

    def compute(sigma=sigma):
      start = time.perf_counter()
      point = ngram_point(noise_level_key(models_key, sigma), canary, config, sigma)
      return {"point": point, "seconds": time.perf_counter() - start}

    if store is None:
      cell, reused = compute(), False
    else:
      cell, reused = store.get_or_compute(
          _cell_config(config, sigma, key_config),
          lambda compute=compute: _plain_cell(compute()), f"sigma_{sigma:g}",
          validate=_cell_validator(config, sigma))
      cell = {**cell, "point": NgramCanaryPoint.from_dict(cell["point"], config)}
    p = cell["point"]
    status = "reused" if reused else f"{cell['seconds']:.1f} s"
    results.report(progress, i, total,
                   f"sigma={sigma:g}: leakage {p.leakage:.2f} <= L(p0) {p.leakage_bound:.2f} "
                   f"(ESS {p.effective_sample_size:.0f}) [{status}]")
    points.append(p)
  return NgramCanaryResult(tuple(int(c) for c in np.asarray(canary)), config.log_p0,
                           tuple(points))


def _plain_cell(cell: Mapping[str, Any]) -> dict[str, Any]:
  return {"point": cell["point"].to_dict(), "seconds": cell["seconds"]}


Config = NgramCanaryConfig
Result = NgramCanaryResult
