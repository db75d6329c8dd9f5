"""The noisy argmax mechanism of private prediction (Eq. (2) of Chadha et al.).

PATE, CaPC, PromptPATE and Private-kNN all answer a query by adding Gaussian noise to a vote
histogram and releasing the index of the largest noisy count. To the auditor the mechanism is a
black box: a sampling function ``f(key, histogram, sigma) -> class index``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpaudit import _validate


def noisy_argmax(key: jax.Array, histogram: jax.Array, sigma, dtype=jnp.float32) -> jax.Array:
  r"""One release of :math:`\arg\max_y \{H_y + \mathcal{N}(0, \sigma^2)\}` (Eq. (2)).

  Args:
    key: PRNG key.
    histogram: vote counts ``H`` with the classes on the last axis (leading axes are
      independent queries answered with independent noise).
    sigma: noise standard deviation (finite, > 0; 0 gives the plain argmax).
    dtype: float type of the noise. float32 (default) is what a deployed aggregator would
      use; exact float ties (probability ~1e-7 per pair of classes for counts in the tens)
      go to the lower index.

  Returns:
    int32 class index, shape ``histogram.shape[:-1]``.
  """
  _validate.check_range("sigma", sigma, 0.0, finite=True)  # inf noise: an undefined argmax
  histogram = jnp.asarray(histogram, dtype)
  noise = jax.random.normal(key, histogram.shape, dtype)
  return first_argmax(histogram + jnp.asarray(sigma, dtype) * noise)


_UNROLL_MAX_CLASSES = 64


def first_argmax(values: jax.Array) -> jax.Array:
  """Index of the largest entry on the last axis, the first one on ties (as ``jnp.argmax``).

  Written as a running maximum over the classes so that XLA keeps it elementwise across the
  batch: fused with random-number generation, ``jnp.argmax``'s reduction ran about 8x slower on
  CPU (``experiments.benchmarks.montecarlo``). Falls back to ``jnp.argmax`` beyond 64 classes.
  """
  num_classes = values.shape[-1]
  if num_classes > _UNROLL_MAX_CLASSES:
    return jnp.argmax(values, axis=-1).astype(jnp.int32)
  best = values[..., 0]
  index = jnp.zeros(best.shape, jnp.int32)
  for c in range(1, num_classes):
    better = values[..., c] > best
    best = jnp.where(better, values[..., c], best)
    index = jnp.where(better, jnp.int32(c), index)
  return index
