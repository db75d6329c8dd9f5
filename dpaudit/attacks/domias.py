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
  :math:`\mathcal{D}_{ref}`.
* :func:`mc_scores`: MC (Hilprecht, Härterich & Bernau, "Monte Carlo and Reconstruction
  Membership Inference Attacks against Generative Models", PoPETs 2019, Sec. 4.1): the share of
  synthetic records within a radius :math:`\epsilon` of the record (a Monte Carlo estimate of
  :math:`P_G(U_\epsilon(x))`), optionally after PCA; :math:`\epsilon` by their median
  heuristic, the median over the scored records of the distance to the nearest synthetic one.
* :func:`logan_d1_scores`: LOGAN D1 (Hayes et al., "LOGAN", PoPETs 2019, Sec. 4.1,
  discriminative setting 1): a classifier trained to tell synthetic from reference records.
* :func:`logan_0_scores`: LOGAN 0 (Hayes et al., Sec. 3): the critic of a WGAN-GP trained on
  the synthetic data alone.

Distances are Euclidean, on data standardised by the reference set's statistics (the attacker's
own real data): :func:`standardise`. Nearest-neighbour searches run in chunks of the scored
records, so ``[m, n]`` distance matrices never exist beyond one chunk.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate
from dpaudit.attacks import panoramia as classifiers
from dpaudit.models import tabular_generators

ATTACKS = ("domias", "eq1", "logan_0", "logan_d1", "mc", "gan_leaks", "gan_leaks_cal")


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


def gan_leaks_cal_scores(x: Any, synthetic: Any, reference_synthetic: Any) -> np.ndarray:
  r"""GAN-leaks CAL (Chen et al. 2020, Sec. 5.5):
  :math:`-\min_j \|x - s_j\| + \min_j \|x - r_j\|`, where :math:`r_j` are drawn from a
  reference generator fitted to the reference data: records close to the synthetic data *more*
  than a generator that never saw them would put them score high."""
  x = check_rows("x", x)
  synthetic = check_rows("synthetic", synthetic, x.shape[1])
  reference_synthetic = check_rows("reference_synthetic", reference_synthetic, x.shape[1])
  return -nearest_distances(x, synthetic) + nearest_distances(x, reference_synthetic)


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


def logan_d1_scores(key: jax.Array, x: Any, synthetic: Any, reference: Any,
                    config: classifiers.ClassifierConfig = classifiers.ClassifierConfig(),
                    hidden_sizes: tuple[int, ...] = (64, 64)) -> np.ndarray:
  """LOGAN D1 (Hayes et al. 2019, Sec. 4.1): an MLP trained to tell synthetic records (1) from
  reference records (0), with early stopping on a validation split; the score is its logit.
  The larger set is subsampled to the size of the smaller, so the classes are balanced."""
  _validate.check_key(key)
  if not isinstance(config, classifiers.ClassifierConfig):
    raise ValueError(f"config must be a ClassifierConfig, got {type(config).__name__}")
  if isinstance(hidden_sizes, (str, bytes)) or not hasattr(hidden_sizes, "__iter__"):
    raise ValueError(f"hidden_sizes={hidden_sizes!r} must be a sequence of layer widths")
  for width in hidden_sizes:
    _validate.check_integer("hidden_sizes", width, 1)
  synthetic = check_rows("synthetic", synthetic)
  reference = check_rows("reference", reference, synthetic.shape[1])
  x = check_rows("x", x, synthetic.shape[1])
  key_syn, key_ref, key_fit = jax.random.split(key, 3)
  n = min(synthetic.shape[0], reference.shape[0])
  synthetic = synthetic[np.asarray(jax.random.permutation(key_syn, synthetic.shape[0]))[:n]]
  reference = reference[np.asarray(jax.random.permutation(key_ref, reference.shape[0]))[:n]]
  inputs = np.concatenate([synthetic, reference]).astype(np.float32)
  labels = np.concatenate([np.ones(n), np.zeros(n)])
  fitted = classifiers.fit_classifier(key_fit, classifiers.VectorEncoder(tuple(hidden_sizes)),
                                      inputs, classifiers.no_side(2 * n), labels, config)
  return classifiers.classifier_scores(fitted, x.astype(np.float32),
                                       classifiers.no_side(x.shape[0])).astype(np.float64)


def logan_0_scores(key: jax.Array, x: Any, synthetic: Any,
                   config: tabular_generators.GanConfig | None = None) -> np.ndarray:
  """LOGAN 0 (Hayes et al. 2019, Sec. 3, black box without auxiliary data): a WGAN-GP is trained
  on the synthetic data alone and its critic scores each record (higher: judged more "real",
  i.e. more like the data the generator reproduced)."""
  _validate.check_key(key)
  if config is not None and not isinstance(config, tabular_generators.GanConfig):
    raise ValueError(f"config must be a GanConfig or None, got {type(config).__name__}")
  synthetic = check_rows("synthetic", synthetic)
  x = check_rows("x", x, synthetic.shape[1])
  gan = tabular_generators.fit_wgan_gp(key, synthetic, config or tabular_generators.GanConfig())
  return np.asarray(tabular_generators.critic_scores(gan, x), np.float64)
