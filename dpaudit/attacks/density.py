r"""Density estimators for DOMIAS: a Gaussian KDE and maximum-likelihood normalising flows.

van Breugel et al., "Membership Inference Attacks against Synthetic Data through Overfitting
Detection" (AISTATS 2023), score a record :math:`x` by :math:`p_G(x) / p_R(x)` (Eq. 2): the
density of the synthetic data over the density of a reference sample of real data. This module
gives the two log-densities :math:`\log p_G` and :math:`\log p_R` for tabular data:

* :func:`fit_kde` / :func:`kde_log_density`: the Gaussian kernel density estimate with Scott's
  bandwidth (the paper's Sec. 5.2 ablation; the same estimate as
  ``scipy.stats.gaussian_kde``), evaluated in chunks so memory stays bounded;
* :func:`fit_flow` / :func:`flow_log_density`: a normalising flow fitted by maximum likelihood
  with early stopping -- BNAF (De Cao et al., "Block Neural Autoregressive Flow", UAI 2019), the
  paper's deep density estimator with its Table 3 hyper-parameters, or a masked autoregressive
  flow (MAF, Papamakarios et al. 2017; with rational-quadratic splines it is the neural spline
  flow of Durkan et al. 2019), which :func:`sample_flow` also uses as the "NFlow" generator.
  :func:`fit_flows` fits several seeds (and datasets) in one vmapped program.

Everything is pure JAX: fitted states are NamedTuples of arrays, the fits are jit-compiled and
vmappable, and value checks run eagerly on concrete inputs only.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import paramax
from flowjax import flows as flowjax_flows
from flowjax.bijections import RationalQuadraticSpline
from flowjax.distributions import StandardNormal
from jax import lax

from dpaudit import _validate

PyTree = Any

_LOG_2PI = math.log(2 * math.pi)


# ------------------------------------------------------------------------------------------
# Input checks shared by both estimators.
# ------------------------------------------------------------------------------------------


def check_columns(data: Any, name: str = "data") -> None:
  """Raises ValueError unless ``data`` is a finite numeric ``[rows, columns]`` table, with at
  least two rows, in which every column varies.

  A constant column has zero variance: the KDE's kernel covariance would be singular, and the
  flows' standardisation would divide by zero. The error names the first such column so it can
  be dropped (it carries no membership signal either). Runs eagerly (NumPy); call it before
  vmapping a fit over a batch of datasets, which cannot check values under the trace.

  Args:
    data: ``[n, d]`` array.
    name: how the argument is called in error messages.
  """
  arr = np.asarray(data)
  if arr.ndim != 2:
    raise ValueError(f"{name} must be 2-D [rows, columns], got shape {arr.shape}")
  if arr.dtype.kind not in "biuf":
    raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
  n, d = arr.shape
  if d < 1:
    raise ValueError(f"{name} has shape {arr.shape}; need at least one column")
  if n < 2:
    raise ValueError(f"{name} has {n} row(s); need at least 2 to estimate a density")
  bad = ~np.isfinite(arr)
  if np.any(bad):
    row, col = np.argwhere(bad)[0]
    raise ValueError(f"{name}[{row}, {col}]={arr[row, col]} is not finite; every value must be "
                     "a finite number")
  constant = np.all(arr == arr[:1], axis=0)
  if np.any(constant):
    col = int(np.flatnonzero(constant)[0])
    raise ValueError(f"{name} column {col} is constant (every row is {arr[0, col].item()!r}); a "
                     "density over it is degenerate -- drop the column")


def _check_queries(x: Any, dim: int, name: str = "x") -> None:
  if np.ndim(x) < 2 or np.shape(x)[-1] != dim:
    raise ValueError(f"{name} must be [rows, {dim}] (the fitted data's columns), got shape "
                     f"{np.shape(x)}")
  if _validate.is_concrete(x):
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
      raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    if not np.all(np.isfinite(arr)):
      raise ValueError(f"{name} must be finite")


def _float_dtype(x: Any):
  """The array's dtype if it is floating, else the default float dtype (x64-aware)."""
  dtype = jnp.asarray(x).dtype
  return dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.result_type(float)


# ------------------------------------------------------------------------------------------
# Gaussian kernel density estimate.
# ------------------------------------------------------------------------------------------


class KdeModel(NamedTuple):
  r"""A fitted Gaussian KDE :math:`p(x) = \frac1n \sum_i N(x; x_i, H)` in whitened form.

  ``points[i] = (x_i - center) @ whitening`` with ``whitening @ whitening.T = H^{-1}``, so
  :math:`\log p(x) = \mathrm{log\_norm} + \log\sum_i \exp(-\frac12 \|z - \mathrm{points}_i\|^2)`
  with ``z = (x - center) @ whitening``. A batch of fits (from ``jax.vmap(fit_kde)``) has a
  leading axis on every field.

  Attributes:
    points: ``[n, d]`` whitened data points.
    center: ``[d]`` data mean (whitening is done about it, for accuracy).
    whitening: ``[d, d]`` the matrix W above.
    log_norm: ``[]`` :math:`-\log n - \frac d2\log 2\pi - \frac12\log\det H`.
    covariance: ``[d, d]`` the kernel covariance H (after the eigenvalue floor).
  """
  points: jax.Array
  center: jax.Array
  whitening: jax.Array
  log_norm: jax.Array
  covariance: jax.Array


def scott_factor(num_points: int, dim: int) -> float:
  r"""Scott's rule (Scott 1992, Eq. 6.42): the bandwidth factor :math:`n^{-1/(d+4)}`."""
  _validate.check_integer("num_points", num_points, 1)
  _validate.check_integer("dim", dim, 1)
  return float(num_points)**(-1.0 / (dim + 4))


@jax.jit
def _fit_kde(data: jax.Array, eigenvalue_floor: jax.Array) -> KdeModel:
  n, d = data.shape
  center = jnp.mean(data, axis=0)
  centered = data - center
  cov = centered.T @ centered / (n - 1)  # np.cov's unbiased estimate, as scipy
  std = jnp.sqrt(jnp.diag(cov))
  corr = cov / (std[:, None] * std[None, :])
  evals, evecs = jnp.linalg.eigh(corr)
  evals = jnp.maximum(evals, eigenvalue_floor)
  factor = jnp.asarray(scott_factor(n, d), data.dtype)
  # H = factor^2 D V diag(evals) V^T D with D = diag(std); W = D^-1 V diag(evals)^-1/2 / factor
  # satisfies W W^T = H^-1.
  whitening = evecs / jnp.sqrt(evals)[None, :] / std[:, None] / factor
  covariance = factor**2 * (std[:, None] * ((evecs * evals) @ evecs.T) * std[None, :])
  log_det = 2 * d * jnp.log(factor) + 2 * jnp.sum(jnp.log(std)) + jnp.sum(jnp.log(evals))
  log_norm = -jnp.log(n) - 0.5 * d * _LOG_2PI - 0.5 * log_det
  return KdeModel(centered @ whitening, center, whitening, log_norm.astype(data.dtype),
                  covariance)


def fit_kde(data: Any, *, eigenvalue_floor: float = 1e-6) -> KdeModel:
  r"""Fits the Gaussian KDE of ``data`` with Scott's bandwidth (the paper's Sec. 5.2 ablation).

  The kernel covariance is that of ``scipy.stats.gaussian_kde``: the data's (unbiased)
  covariance times :math:`\mathrm{scott\_factor}^2`, :math:`n^{-2/(d+4)}`.

  Singular covariances. Tabular data often has exactly collinear columns (a complete one-hot
  encoding sums to 1), and with :math:`n \le d` rows any covariance is singular; scipy then
  fails. Here the covariance is written as :math:`D R D` (``D`` the column standard deviations,
  ``R`` the correlation matrix) and the eigenvalues of ``R`` are floored at
  ``eigenvalue_floor``: a ridge in exactly the (near-)singular directions and nowhere else, so
  on non-degenerate data (every eigenvalue of ``R`` above the floor) the estimate is scipy's to
  rounding. Being relative to the column scales, the floor does not depend on units. In a
  floored direction the kernel is narrow (``sqrt(floor)`` of the column scale times Scott's
  factor): every data point sits on the degenerate subspace, so log-densities there carry the
  same large constant, which cancels in DOMIAS's ratio of two such estimates. Integer and
  binary columns need nothing special (their variance is positive); constant columns are
  rejected by :func:`check_columns`.

  Pure JAX: ``jax.vmap(fit_kde)(datas)`` fits a batch ``[b, n, d]`` of datasets (validate each
  with :func:`check_columns` first; value checks are skipped under a trace).

  Args:
    data: ``[n, d]`` rows, n >= 2, every column varying. Float64 stays float64 (under
      ``jax_enable_x64``); integers are converted to the default float type.
    eigenvalue_floor: smallest eigenvalue kept in the correlation matrix, in (0, 1).

  Returns:
    :class:`KdeModel`; evaluate with :func:`kde_log_density`.
  """
  _validate.check_range("eigenvalue_floor", eigenvalue_floor, 0.0, 1.0, low_open=True,
                        high_open=True)
  if _validate.is_concrete(data):
    check_columns(data)
  elif jnp.ndim(data) != 2:
    raise ValueError(f"data must be 2-D [rows, columns], got shape {jnp.shape(data)}")
  data = jnp.asarray(data, _float_dtype(data))
  return _fit_kde(data, jnp.asarray(eigenvalue_floor, data.dtype))


@functools.partial(jax.jit, static_argnames="chunk_size")
def _kde_log_density(model: KdeModel, x: jax.Array, chunk_size: int) -> jax.Array:
  m = x.shape[0]
  z = (x.astype(model.points.dtype) - model.center) @ model.whitening
  chunk = max(1, min(chunk_size, m))  # no query rows: no chunks, an empty result
  num_chunks = -(-m // chunk)
  z = jnp.pad(z, ((0, num_chunks * chunk - m), (0, 0))).reshape(num_chunks, chunk, z.shape[-1])
  point_sq = jnp.sum(model.points**2, axis=1)

  def one_chunk(zc):  # [chunk, d] -> [chunk]; the [chunk, n] distance block is the peak memory
    sq = jnp.sum(zc**2, axis=1)[:, None] + point_sq[None, :] - 2 * zc @ model.points.T
    return jax.nn.logsumexp(-0.5 * sq, axis=1)

  return lax.map(one_chunk, z).reshape(-1)[:m] + model.log_norm


def kde_log_density(model: KdeModel, x: Any, *, chunk_size: int = 128) -> jax.Array:
  """Log-density of a fitted KDE at each row of ``x``.

  Evaluates ``chunk_size`` query rows at a time (``lax.map``): memory is
  ``chunk_size * n`` distances, never ``m * n * d``. The squared Mahalanobis distances come from
  whitened coordinates by one matrix product per chunk; the sum over kernels is a logsumexp,
  so far-away queries get finite (very negative) log-densities. The default of 128 rows was
  three times faster than 512 on this project's 2-core CPU at n = 10,000 (the distance block
  stays in cache); under ``vmap`` over b fits, divide it by b for the same memory.

  Args:
    model: from :func:`fit_kde`, or a batch of them (leading axis on every field).
    x: ``[m, d]`` query rows; with a batched model also ``[b, m, d]`` (one query set per fit).
    chunk_size: query rows per chunk (>= 1).

  Returns:
    ``[m]`` log-densities (``[b, m]`` for a batched model).
  """
  _validate.check_integer("chunk_size", chunk_size, 1)
  if not isinstance(model, KdeModel):
    raise ValueError(f"model must be a KdeModel (from fit_kde), got {type(model).__name__}")
  dim = model.center.shape[-1]
  _check_queries(x, dim)
  dtype = model.points.dtype
  if model.center.ndim == 2:
    in_x = 0 if jnp.ndim(x) == 3 else None
    return jax.vmap(lambda mod, q: _kde_log_density(mod, q, chunk_size),
                    in_axes=(0, in_x))(model, jnp.asarray(x, dtype))
  if jnp.ndim(x) != 2:
    raise ValueError(f"x must be [rows, {dim}] for a single fit, got shape {jnp.shape(x)}")
  return _kde_log_density(model, jnp.asarray(x, dtype), chunk_size)


# ------------------------------------------------------------------------------------------
# Normalising flows fitted by maximum likelihood.
# ------------------------------------------------------------------------------------------

_FLOW_KINDS = ("bnaf", "maf")
_TRANSFORMERS = ("spline", "affine")


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class FlowConfig:
  """Architecture and training of a flow density estimator.

  Defaults are DOMIAS's BNAF settings (Table 3: batch-dim 50, n-layer 3, hidden-dim 32, flows
  5, learning rate 0.01, epochs 50) with the reference BNAF training code's gradient clipping
  (global norm 0.1), AMSGrad variant of Adam and Polyak averaging of the weights (0.998).
  Mapping to flowjax's
  ``block_neural_autoregressive_flow``: ``flow_layers`` BNAF layers (each followed by a
  permutation); ``nn_depth`` hidden layers in each (= n-layer: the reference code's network has
  n-layer tanh layers between its input and output masked linear maps); ``hidden_dim`` units
  *per data dimension* (= flowjax's ``nn_block_dim``, hidden width ``dim * hidden_dim``, as the
  reference code's ``n_dims * hidden_dim``). Departures from the reference implementation:
  flowjax's activation is ``tanh(x) + 0.01 x`` (not tanh), no gated residual connections, no
  learning-rate decay on plateaus, and early stopping after ``patience`` epochs (the reference
  stops after 100 stale epochs, i.e. never within 50).

  The paper-default BNAF is slow on CPU: about 4 s per epoch of 10,000 x 8 rows on two cores
  (about 3 minutes per 50-epoch fit, 10 s of it compiling); smaller ``hidden_dim`` /
  ``flow_layers`` trade fit for speed.

  Attributes:
    kind: "bnaf" (block neural autoregressive flow: density only) or "maf" (masked
      autoregressive flow: density and sampling, the NFlow generator).
    flow_layers: number of flow layers (>= 1).
    nn_depth: hidden layers per layer's network (>= 0; BNAF: n-layer, MAF: MADE depth).
    hidden_dim: hidden units per data dimension (>= 1): BNAF block size; MAF's MADE width is
      ``hidden_dim * dim``.
    transformer: MAF only: "spline" (rational-quadratic, i.e. a neural spline flow) or
      "affine" (the original MAF).
    spline_knots: MAF spline inner knots (>= 1).
    spline_interval: MAF spline support [-interval, interval] in standardised units (> 0);
      identity outside it.
    batch_size: minibatch rows (>= 1; clamped to the training part's size).
    learning_rate: Adam's step size (> 0).
    clip_norm: global gradient-norm clip (> 0), or None for no clipping.
    amsgrad: AMSGrad (as the reference BNAF code) instead of plain Adam.
    polyak: decay in [0, 1) of the exponential moving average of the weights that is validated
      and returned (the reference code's Polyak averaging, here debiased as Adam's moments:
      the reference starts it at zero without correction); 0 uses the raw weights.
    max_epochs: passes over the training part (>= 1).
    validation_fraction: share of rows held out for early stopping, in (0, 0.5].
    patience: stop after this many epochs without a new best validation loss (>= 1); the
      parameters of the best epoch are returned.
  """
  kind: str = "bnaf"
  flow_layers: int = 5
  nn_depth: int = 3
  hidden_dim: int = 32
  transformer: str = "spline"
  spline_knots: int = 8
  spline_interval: float = 4.0
  batch_size: int = 50
  learning_rate: float = 1e-2
  clip_norm: float | None = 0.1
  amsgrad: bool = True
  polyak: float = 0.998
  max_epochs: int = 50
  validation_fraction: float = 0.1
  patience: int = 10

  def __post_init__(self):
    _validate.check_choice("kind", self.kind, _FLOW_KINDS)
    _validate.check_integer("flow_layers", self.flow_layers, 1)
    _validate.check_integer("nn_depth", self.nn_depth, 0)
    _validate.check_integer("hidden_dim", self.hidden_dim, 1)
    _validate.check_choice("transformer", self.transformer, _TRANSFORMERS)
    _validate.check_integer("spline_knots", self.spline_knots, 1)
    _validate.check_range("spline_interval", self.spline_interval, 0.0, None, low_open=True,
                          finite=True)
    _validate.check_integer("batch_size", self.batch_size, 1)
    _validate.check_range("learning_rate", self.learning_rate, 0.0, None, low_open=True,
                          finite=True)
    if self.clip_norm is not None:
      _validate.check_range("clip_norm", self.clip_norm, 0.0, None, low_open=True, finite=True)
    if not isinstance(self.amsgrad, bool):
      raise ValueError(f"amsgrad={self.amsgrad!r} must be True or False")
    _validate.check_range("polyak", self.polyak, 0.0, 1.0, high_open=True)
    _validate.check_integer("max_epochs", self.max_epochs, 1)
    _validate.check_range("validation_fraction", self.validation_fraction, 0.0, 0.5,
                          low_open=True)
    _validate.check_integer("patience", self.patience, 1)


class FlowModel(NamedTuple):
  """A fitted flow. Every field but ``config`` is an array (``config`` is a static pytree
  node), so models pass through ``jit``/``vmap``; a batch of fits (:func:`fit_flows`) has a
  leading axis on every array, and ``jax.tree.map(lambda a: a[i], models)`` picks fit ``i``.

  Attributes:
    params: the array leaves of the flowjax flow, float32 (trainable weights and the fixed
      permutations); the rest of the flow is rebuilt from ``config``.
    mean: ``[d]`` column means (the flow models standardised data).
    std: ``[d]`` column standard deviations.
    dequant_width: ``[d]`` uniform dequantisation width per column (0: continuous column).
    low: ``[d]`` column minima (sampling rounds discrete columns into ``[low, high]``).
    high: ``[d]`` column maxima.
    train_loss: ``[max_epochs]`` mean training negative log-likelihood per epoch (nats per
      row, data units); NaN after the fit stopped.
    validation_loss: ``[max_epochs]`` the same on the validation rows.
    best_epoch: index of the epoch whose parameters are kept (-1 if none had a finite
      validation loss; then ``params`` are the initial ones).
    best_validation_loss: ``validation_loss[best_epoch]``.
    validation_rows: ``[n_val]`` indices of the held-out rows of the fitted data.
    config: the :class:`FlowConfig`.
  """
  params: PyTree
  mean: jax.Array
  std: jax.Array
  dequant_width: jax.Array
  low: jax.Array
  high: jax.Array
  train_loss: jax.Array
  validation_loss: jax.Array
  best_epoch: jax.Array
  best_validation_loss: jax.Array
  validation_rows: jax.Array
  config: FlowConfig


def _make_flow(key: jax.Array, config: FlowConfig, dim: int):
  base = StandardNormal((dim,))
  if config.kind == "bnaf":
    return flowjax_flows.block_neural_autoregressive_flow(
        key, base_dist=base, nn_depth=config.nn_depth, nn_block_dim=config.hidden_dim,
        flow_layers=config.flow_layers)
  transformer = (RationalQuadraticSpline(knots=config.spline_knots,
                                         interval=config.spline_interval)
                 if config.transformer == "spline" else None)  # None: flowjax's affine
  return flowjax_flows.masked_autoregressive_flow(
      key, base_dist=base, transformer=transformer, flow_layers=config.flow_layers,
      nn_width=config.hidden_dim * dim, nn_depth=config.nn_depth)


@functools.lru_cache(maxsize=32)
def _flow_static(config: FlowConfig, dim: int) -> PyTree:
  """The non-array part of the flow (structure, functions, shapes), built once per
  architecture; :attr:`FlowModel.params` holds the arrays.

  Its functions close over constant masks, which must be concrete arrays, not tracers of
  whatever jit/vmap trace first asks for them; and ``jax.ensure_compile_time_eval`` trips
  flowjax's construction-time ``equinox.error_if`` checks. So the flow is built in a fresh
  thread: JAX's trace state (and the x64 override) are thread-local, so it runs eagerly there.
  """
  def build():
    with jax.enable_x64(False):
      flow = _make_flow(jax.random.key(0), config, dim)
    return eqx.partition(flow, eqx.is_array)[1]

  with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
    return pool.submit(build).result()


def _combine(params: PyTree, config: FlowConfig, dim: int):
  return eqx.combine(params, _flow_static(config, dim))


def _is_non_trainable(leaf) -> bool:
  return isinstance(leaf, paramax.NonTrainable)


def _num_validation(num_rows: int, validation_fraction: float) -> int:
  return int(round(validation_fraction * num_rows))


def _dequant_widths(data: jax.Array, discrete: tuple[int, ...] | None) -> jax.Array:
  """Per-column dequantisation width: the smallest gap between distinct values for discrete
  columns (1 for integer codes), 0 for continuous ones."""
  d = data.shape[1]
  gaps = jnp.diff(jnp.sort(data, axis=0), axis=0)
  min_gap = jnp.min(jnp.where(gaps > 0, gaps, jnp.inf), axis=0)
  min_gap = jnp.where(jnp.isfinite(min_gap), min_gap, 0.0)
  if discrete is None:
    is_discrete = jnp.all(data == jnp.round(data), axis=0)
  else:
    is_discrete = jnp.zeros(d, bool)
    if discrete:
      is_discrete = is_discrete.at[jnp.asarray(discrete)].set(True)
  return jnp.where(is_discrete, min_gap, 0.0).astype(data.dtype)


def _chunked_log_prob(flow, x: jax.Array, chunk_size: int) -> jax.Array:
  m = x.shape[0]
  if m <= chunk_size:
    return flow.log_prob(x)
  chunk = chunk_size
  num_chunks = -(-m // chunk)
  xs = jnp.pad(x, ((0, num_chunks * chunk - m), (0, 0))).reshape(num_chunks, chunk, -1)
  return lax.map(flow.log_prob, xs).reshape(-1)[:m]


_EVAL_CHUNK = 1024


def _init_params(key: jax.Array, config: FlowConfig, dim: int) -> PyTree:
  """flowjax's initialisation of the flow's arrays (float32), run eagerly (milliseconds) and
  kept out of the compiled fit: flowjax checks its construction with ``equinox.error_if`` host
  callbacks, which triple the fit's compile time and keep it out of JAX's persistent
  compilation cache."""
  params = eqx.partition(_make_flow(key, config, dim), eqx.is_array)[0]
  return jax.tree.map(lambda a: a.astype(jnp.float32) if jnp.issubdtype(
      a.dtype, jnp.floating) else a, params)


def _fit_flow_core(key: jax.Array, data: jax.Array, params: PyTree, config: FlowConfig,
                   discrete: tuple[int, ...] | None) -> FlowModel:
  """One flow fit from initial ``params``; pure, float32, vmappable over (key, data, params).
  ``data`` is ``[n, d]`` float32."""
  n, d = data.shape
  num_val = _num_validation(n, config.validation_fraction)
  num_train = n - num_val
  batch = min(config.batch_size, num_train)
  num_batches = num_train // batch  # the ragged remainder sits out each epoch
  key_split, key_val_noise, key_loop = jax.random.split(key, 3)

  mean = jnp.mean(data, axis=0)
  std = jnp.std(data, axis=0)
  width = _dequant_widths(data, discrete)
  scaled_width = width / std
  log_std_sum = jnp.sum(jnp.log(std))
  standardised = (data - mean) / std
  order = jax.random.permutation(key_split, n)
  val_rows, train_rows = order[:num_val], order[num_val:]
  train = standardised[train_rows]
  # Validation rows get one fixed draw of dequantisation noise, so epochs compare alike.
  val = standardised[val_rows] + scaled_width * (
      jax.random.uniform(key_val_noise, (num_val, d), jnp.float32) - 0.5)

  static = _flow_static(config, d)
  trainable, frozen = eqx.partition(params, eqx.is_inexact_array, is_leaf=_is_non_trainable)

  def flow_of(trainable):
    return eqx.combine(trainable, frozen, static)

  def batch_nll(trainable, x):
    return -jnp.mean(flow_of(trainable).log_prob(x))

  def val_nll(trainable):
    return -jnp.mean(_chunked_log_prob(flow_of(trainable), val, _EVAL_CHUNK))

  adam = optax.amsgrad if config.amsgrad else optax.adam
  optimizer = adam(config.learning_rate)
  if config.clip_norm is not None:
    optimizer = optax.chain(optax.clip_by_global_norm(config.clip_norm), optimizer)

  def train_step(state, inputs):
    trainable, opt_state, average = state
    rows, noise = inputs
    x = train[rows] + scaled_width * noise
    loss, grads = jax.value_and_grad(batch_nll)(trainable, x)
    updates, opt_state = optimizer.update(grads, opt_state, trainable)
    trainable = optax.apply_updates(trainable, updates)
    average = jax.tree.map(lambda a, p: config.polyak * a + (1 - config.polyak) * p, average,
                           trainable)
    return (trainable, opt_state, average), loss

  nan_history = jnp.full((config.max_epochs,), jnp.nan, jnp.float32)
  init = dict(epoch=jnp.asarray(0), stale=jnp.asarray(0), key=key_loop, trainable=trainable,
              opt_state=optimizer.init(trainable), average=jax.tree.map(jnp.zeros_like, trainable),
              best=trainable,
              best_loss=jnp.asarray(jnp.inf, jnp.float32), best_epoch=jnp.asarray(-1),
              train_loss=nan_history, validation_loss=nan_history)

  def keep_going(c):
    return (c["epoch"] < config.max_epochs) & (c["stale"] < config.patience)

  def epoch(c):
    key, key_perm, key_noise = jax.random.split(c["key"], 3)
    rows = jax.random.permutation(key_perm, num_train)[:num_batches * batch]
    noise = jax.random.uniform(key_noise, (num_batches, batch, d), jnp.float32) - 0.5
    (trainable, opt_state, average), losses = lax.scan(
        train_step, (c["trainable"], c["opt_state"], c["average"]),
        (rows.reshape(num_batches, batch), noise))
    # The zero-initialised average, debiased: a weighted mean of the iterates so far.
    steps = ((c["epoch"] + 1) * num_batches).astype(jnp.float32)
    debias = 1 - jnp.power(jnp.float32(config.polyak), steps)
    averaged = jax.tree.map(lambda a: a / debias, average)
    loss = val_nll(averaged)
    better = loss < c["best_loss"]  # False for NaN: a diverged epoch is never kept
    pick = lambda new, old: jnp.where(better, new, old)
    return dict(
        epoch=c["epoch"] + 1, stale=jnp.where(better, 0, c["stale"] + 1), key=key,
        trainable=trainable, opt_state=opt_state, average=average,
        best=jax.tree.map(pick, averaged, c["best"]),
        best_loss=pick(loss, c["best_loss"]), best_epoch=pick(c["epoch"], c["best_epoch"]),
        train_loss=c["train_loss"].at[c["epoch"]].set(jnp.mean(losses) + log_std_sum),
        validation_loss=c["validation_loss"].at[c["epoch"]].set(loss + log_std_sum))

  final = lax.while_loop(keep_going, epoch, init)
  return FlowModel(
      params=eqx.combine(final["best"], frozen), mean=mean, std=std, dequant_width=width,
      low=jnp.min(data, axis=0), high=jnp.max(data, axis=0), train_loss=final["train_loss"],
      validation_loss=final["validation_loss"], best_epoch=final["best_epoch"],
      best_validation_loss=final["best_loss"] + log_std_sum, validation_rows=val_rows,
      config=config)


def _fit_one(key: jax.Array, data: jax.Array, config: FlowConfig,
             discrete: tuple[int, ...] | None) -> FlowModel:
  """The whole fit of one ``(key, data)``: pure and vmappable over both."""
  key_init, key_fit = jax.random.split(key)
  params = _init_params(key_init, config, data.shape[1])
  return _fit_flow_jit(key_fit, data, params, config, discrete)


_fit_flow_jit = jax.jit(_fit_flow_core, static_argnames=("config", "discrete"))


def _check_config(config: Any) -> FlowConfig:
  """The config as a plain :class:`FlowConfig`: a subclass (e.g. one with other defaults) is
  copied field by field, so it is a static pytree node and shares compiled programs."""
  if not isinstance(config, FlowConfig):
    raise ValueError(f"config must be a FlowConfig, got {type(config).__name__}")
  if type(config) is not FlowConfig:
    config = FlowConfig(**{f.name: getattr(config, f.name)
                           for f in dataclasses.fields(FlowConfig)})
  return config


def _check_discrete(discrete_columns: Sequence[int] | None, dim: int
                    ) -> tuple[int, ...] | None:
  if discrete_columns is None:
    return None
  if isinstance(discrete_columns, (str, bytes)) or not hasattr(discrete_columns, "__iter__"):
    raise ValueError(f"discrete_columns={discrete_columns!r} must be None or a sequence of "
                     "column indices")
  out = []
  for c in discrete_columns:
    c = _validate.check_integer("discrete_columns", c, -dim)
    if c >= dim:
      raise ValueError(f"discrete_columns holds {c}, outside the valid range [-{dim}, {dim}) "
                       f"for {dim} columns")
    out.append(c % dim)
  return tuple(sorted(set(out)))


def _check_flow_rows(num_rows: int, config: FlowConfig, name: str = "data") -> None:
  num_val = _num_validation(num_rows, config.validation_fraction)
  if num_val < 1 or num_rows - num_val < 2:
    raise ValueError(
        f"{name} has {num_rows} rows; validation_fraction={config.validation_fraction} holds "
        f"out {num_val}, leaving {num_rows - num_val} to train on: need at least 1 validation "
        "and 2 training rows")


def fit_flow(key: jax.Array, data: Any, config: FlowConfig = FlowConfig(), *,
             discrete_columns: Sequence[int] | None = None) -> FlowModel:
  r"""Fits a normalising flow to ``data`` by maximum likelihood with early stopping.

  Steps: standardise every column (the flow sees :math:`(x - \mu)/\sigma`; log-densities are
  returned in data units by subtracting :math:`\sum_j \log\sigma_j`); hold out a random
  ``validation_fraction`` of the rows; train with (AMS)Adam on shuffled minibatches (the
  ragged remainder of each epoch is dropped, keeping shapes static), tracking a Polyak
  (exponential moving) average of the weights; after each epoch compute the averaged weights'
  validation negative log-likelihood, keep those with the lowest one, and stop once
  ``patience`` epochs pass without improvement.

  Discrete columns and dequantisation. Maximum likelihood on values that sit on a lattice
  drives a flexible density towards spikes on the lattice points (unbounded likelihood); the
  validation rows sit on the same lattice, so early stopping does not prevent it. Discrete
  columns are therefore dequantised (Uria et al. 2013; Theis et al. 2016): every training
  minibatch adds fresh uniform noise ``U(-w/2, w/2)`` to them, ``w`` the smallest gap between
  the column's distinct values (1 for integer codes, so a binary column is spread over
  [-0.5, 1.5]), and the validation rows get one fixed draw. The flow then models the
  dequantised density, whose value at a lattice point is the (smoothed) probability mass of
  that point over ``w``. By default (``discrete_columns=None``) a column counts as discrete
  when all its values are whole numbers (binary, ordinal and count columns; checked in
  float32, so magnitudes above 2^24 always look whole); pass the indices explicitly for other
  codings (e.g. ``{0, 0.5, 1}``) or ``()`` to turn dequantisation off.

  The fit is pure and vmappable over ``(key, data)`` (:func:`fit_flows`): flowjax's
  initialisation, then one jit-compiled training program, in which epochs are a
  ``lax.while_loop`` (stop flag from the patience counter, so under ``vmap`` a stopped fit's
  state is masked while others go on) and each epoch a ``lax.scan`` over minibatches. It runs
  in float32 whatever ``jax_enable_x64`` says (flowjax would otherwise promote to float64).

  Args:
    key: PRNG key (initialisation, split, minibatch order, dequantisation noise).
    data: ``[n, d]`` rows, finite, every column varying (see :func:`check_columns`), with
      enough rows for the validation split.
    config: :class:`FlowConfig`.
    discrete_columns: column indices to dequantise; None: auto-detect whole-number columns.

  Returns:
    :class:`FlowModel`; evaluate with :func:`flow_log_density`, sample with
    :func:`sample_flow`.
  """
  _validate.check_key(key)
  config = _check_config(config)
  if _validate.is_concrete(data):
    check_columns(data)
  if jnp.ndim(data) != 2:
    raise ValueError(f"data must be 2-D [rows, columns], got shape {jnp.shape(data)}")
  n, d = jnp.shape(data)
  _check_flow_rows(n, config)
  discrete = _check_discrete(discrete_columns, d)
  data = jnp.asarray(data, jnp.float32)
  with jax.enable_x64(False):
    return _fit_one(key, data, config, discrete)


def fit_flows(keys: jax.Array, datas: Any, config: FlowConfig = FlowConfig(), *,
              discrete_columns: Sequence[int] | None = None) -> FlowModel:
  """Fits one flow per ``(keys[i], datas[i])`` in a single vmapped program.

  Equivalent to stacking ``fit_flow(keys[i], datas[i], config)`` for every ``i`` (to float32
  rounding of batched against unbatched arithmetic), but compiled once and batched: the
  epoch loop runs until the last fit stops, with stopped fits masked.

  Args:
    keys: ``[s]`` PRNG keys (``jax.random.split(key, s)``).
    datas: ``[s, n, d]`` datasets of equal shape (e.g. the same data repeated for seeds).
    config: :class:`FlowConfig`.
    discrete_columns: as :func:`fit_flow`; auto-detection runs per dataset.

  Returns:
    A batched :class:`FlowModel` (leading axis ``s`` on every array).
  """
  config = _check_config(config)
  if np.ndim(datas) != 3:
    raise ValueError(f"datas must be 3-D [fits, rows, columns], got shape {np.shape(datas)}")
  s, n, d = np.shape(datas)
  keys = jnp.asarray(keys)
  key_shape = keys.shape if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key) else keys.shape[:-1]
  if key_shape != (s,):
    raise ValueError(f"keys must hold one PRNG key per dataset ({s}), got shape {keys.shape}")
  _validate.check_key(keys[0])
  if _validate.is_concrete(datas):
    arr = np.asarray(datas)
    for i in range(s):
      check_columns(arr[i], name=f"datas[{i}]")
  _check_flow_rows(n, config, name="datas")
  discrete = _check_discrete(discrete_columns, d)
  datas = jnp.asarray(datas, jnp.float32)
  with jax.enable_x64(False):
    # What jax.vmap(_fit_one) computes, with flowjax's initialisation run eagerly per key
    # (vmapping it would trace and compile it) and only the training batched.
    split = [jax.random.split(keys[i]) for i in range(s)]
    params = [_init_params(k[0], config, d) for k in split]
    params = jax.tree.map(lambda *a: jnp.stack(a), *params)
    keys_fit = jnp.stack([k[1] for k in split])
    return jax.vmap(lambda k, x, p: _fit_flow_jit(k, x, p, config, discrete))(
        keys_fit, datas, params)


@functools.partial(jax.jit, static_argnames="chunk_size")
def _flow_log_density(model: FlowModel, x: jax.Array, chunk_size: int) -> jax.Array:
  flow = _combine(model.params, model.config, model.mean.shape[-1])
  log_p = _chunked_log_prob(flow, (x - model.mean) / model.std, chunk_size)
  return log_p - jnp.sum(jnp.log(model.std))


def flow_log_density(model: FlowModel, x: Any, *, chunk_size: int = 1024) -> jax.Array:
  """Log-density (data units, float32) of a fitted flow at each row of ``x``.

  For dequantised columns it is the density of the dequantised variable (see
  :func:`fit_flow`); evaluate both DOMIAS estimates on the same footing.

  Args:
    model: from :func:`fit_flow`, or a batch from :func:`fit_flows`.
    x: ``[m, d]`` rows; with a batched model also ``[s, m, d]`` (one query set per fit).
    chunk_size: rows per evaluation chunk (>= 1).

  Returns:
    ``[m]`` log-densities (``[s, m]`` for a batched model).
  """
  _validate.check_integer("chunk_size", chunk_size, 1)
  if not isinstance(model, FlowModel):
    raise ValueError(f"model must be a FlowModel (from fit_flow), got {type(model).__name__}")
  dim = model.mean.shape[-1]
  _check_queries(x, dim)
  x = jnp.asarray(x, jnp.float32)
  if model.mean.ndim == 1 and x.ndim != 2:
    raise ValueError(f"x must be [rows, {dim}] for a single fit, got shape {x.shape}")
  if x.shape[-2] == 0:  # no rows: nothing to pad or evaluate
    return jnp.zeros(model.mean.shape[:-1] + (0,) if x.ndim == 2 else x.shape[:-1],
                     jnp.float32)
  # Rows are padded (repeating the last) to a bucket: a power of two up to one chunk, whole
  # chunks beyond, so query sets of nearby sizes share one compiled program.
  m = x.shape[-2]
  padded = (chunk_size * -(-m // chunk_size) if m > chunk_size
            else min(chunk_size, 1 << max(m - 1, 0).bit_length()))
  x = jnp.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, padded - m), (0, 0)], mode="edge")
  with jax.enable_x64(False):
    if model.mean.ndim == 2:
      in_x = 0 if x.ndim == 3 else None
      return jax.vmap(lambda mod, q: _flow_log_density(mod, q, chunk_size),
                      in_axes=(0, in_x))(model, x)[..., :m]
    return _flow_log_density(model, x, chunk_size)[:m]


@functools.partial(jax.jit, static_argnames=("num_samples", "round_discrete"))
def _sample_flow(key: jax.Array, model: FlowModel, num_samples: int,
                 round_discrete: bool) -> jax.Array:
  flow = _combine(model.params, model.config, model.mean.shape[-1])
  x = flow.sample(key, (num_samples,)) * model.std + model.mean
  if round_discrete:
    width = jnp.where(model.dequant_width > 0, model.dequant_width, 1.0)
    snapped = jnp.clip(model.low + width * jnp.round((x - model.low) / width), model.low,
                       model.high)
    x = jnp.where(model.dequant_width > 0, snapped, x)
  return x


def sample_flow(key: jax.Array, model: FlowModel, num_samples: int, *,
                round_discrete: bool = True) -> jax.Array:
  """Draws ``num_samples`` rows (data units, float32) from a fitted flow: the NFlow generator.

  Only for ``kind="maf"``, which samples with one pass of its autoregressive network per
  dimension per layer. A BNAF has no analytic inverse; flowjax's numerical one (a bisection
  search per sample) does not converge in float32 for the paper's 5-layer BNAF (round trips
  off by up to several latent standard deviations), so BNAF models are refused rather than
  sampled wrongly.

  Args:
    key: PRNG key.
    model: a single fitted :class:`FlowModel` (index a batch first).
    num_samples: rows to draw (>= 1).
    round_discrete: snap dequantised columns back onto their lattice
      ``low + width * k``, clipped to the observed ``[low, high]`` (exact for integer codes).

  Returns:
    ``[num_samples, d]`` rows.
  """
  _validate.check_key(key)
  num_samples = _validate.check_integer("num_samples", num_samples, 1)
  if not isinstance(model, FlowModel):
    raise ValueError(f"model must be a FlowModel (from fit_flow), got {type(model).__name__}")
  # The samples and the flow's activations per sample (float32; hidden_dim units per column).
  _validate.check_allocation("num_samples", num_samples,
                             4 * model.mean.shape[-1] * (2 + model.config.hidden_dim),
                             what="sample")
  if model.mean.ndim != 1:
    raise ValueError(f"model must be a single fit (mean of shape [d]), got mean shape "
                     f"{model.mean.shape}; pick one with jax.tree.map(lambda a: a[i], model)")
  if model.config.kind != "maf":
    raise ValueError(f"model has kind={model.config.kind!r}; sample_flow needs kind='maf' (a "
                     "BNAF has no reliable inverse: fit the generator with FlowConfig(kind='maf'))")
  with jax.enable_x64(False):
    return _sample_flow(key, model, num_samples, bool(round_discrete))
