r"""Poisson subsampling for DP-SGD with static shapes: exact sampling, no recompilation.

The DP-SGD accountants (:mod:`dpaudit.accounting.dpsgd`; Abadi et al. 2016, Alg. 1: "take a
random sample :math:`L_t` with sampling probability :math:`q = L/N`"; Mironov, Talwar &
Zhang 2019) assume that each example joins each step's batch independently with probability
``sampling_rate`` :math:`q`, so the batch size is :math:`\mathrm{Binomial}(N, q)`. Shuffled
fixed-size batches, or Poisson batches truncated to a maximum size, are different mechanisms
that this accounting does not cover (Chua et al., "How Private are DP-SGD Implementations?",
ICML 2024).

A variable batch size would give every step a new array shape and a new compilation under
``jit``. Here the sample is a :class:`PoissonBatch` of static length :math:`N`: the sampled
indices first, in increasing order, then zero padding, and the traced number ``size`` of
sampled examples. A training step walks it in microbatches of a fixed physical size
:math:`P` (:func:`microbatch`), ``num_microbatches(batch, P)`` :math:`= \lceil
\mathrm{size}/P\rceil` of them (a traced trip count for ``lax.fori_loop`` /
``lax.while_loop``), each with a mask that zeroes the padding. Every sampled example is
visited exactly once, whatever the realised batch size, with one compilation::

    batch = poisson_sample(key, num_examples, sampling_rate)
    def body(j, grad_sum):
      idx, mask = microbatch(batch, j, physical_batch_size)
      return grad_sum + clipped_grad_sum(params, data[idx], mask)
    grad_sum = jax.lax.fori_loop(0, num_microbatches(batch, physical_batch_size), body, zeros)
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate


class PoissonBatch(NamedTuple):
  """A Poisson sample of examples, padded to a static length.

  Attributes:
    indices: int32 array of shape ``(num_examples,)``: the indices of the sampled examples in
      increasing order in positions ``[0, size)``, zeros after.
    size: int32 scalar, the number of sampled examples.
  """
  indices: jax.Array
  size: jax.Array


def _check_static_int(name: str, value: Any, low: int) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(f"{name} must be a Python int (it fixes a static shape), got {value!r}")
  if value < low:
    raise ValueError(f"{name}={value} is outside the valid range [{low}, inf)")
  return int(value)


def poisson_sample(key: jax.Array, num_examples: int, sampling_rate) -> PoissonBatch:
  r"""Poisson sample of :math:`\{0, \dots, N - 1\}`: each index kept independently w.p. :math:`q`.

  Memberships are independent Bernoulli(:math:`q`) and the size is
  :math:`\mathrm{Binomial}(N, q)`, as the sampled Gaussian mechanism assumes (Abadi et al.
  2016, Alg. 1; Mironov et al. 2019). Nothing is truncated: the output has room for all
  :math:`N` examples. Two exact samplers of this one distribution:

  * concrete :math:`q < 1/2` (the DP-SGD case): the gaps between consecutive kept indices of
    an i.i.d. Bernoulli(:math:`q`) sequence are i.i.d. Geometric(:math:`q`), drawn by
    inversion, :math:`G = 1 + \lfloor \log U / \log(1 - q) \rfloor`, in chunks of
    :math:`K \approx qN + 8\sqrt{qN} + 16` until the running position passes :math:`N - 1`
    (a ``while_loop`` that almost always stops after one chunk). This draws :math:`O(qN)`
    random numbers instead of :math:`N`, which dominates the cost of small models trained
    many times at once (:mod:`experiments.benchmarks.many_run`).
  * otherwise (traced or large :math:`q`): example :math:`i` is kept iff :math:`U_i < q`
    (``jax.random.bernoulli``).

  Args:
    key: PRNG key (typed or raw).
    num_examples: :math:`N \ge 1`, a static Python int.
    sampling_rate: :math:`q \in [0, 1]`; a float or a traced scalar (validated when concrete).

  Returns:
    :class:`PoissonBatch` with ``indices`` of shape ``(num_examples,)`` (sampled indices
    first, increasing, then zeros) and the int32 ``size``.
  """
  _validate.check_key(key)
  num_examples = _check_static_int("num_examples", num_examples, 1)
  if np.ndim(sampling_rate) != 0:
    raise ValueError(f"sampling_rate must be a scalar, got shape {np.shape(sampling_rate)}")
  _validate.check_range("sampling_rate", sampling_rate, 0.0, 1.0)
  return poisson_sample_impl(key, num_examples, sampling_rate)


def _gap_chunk(num_examples: int, sampling_rate) -> int:
  """Gaps drawn per chunk by the geometric sampler; 0 means: use the Bernoulli sampler."""
  if not _validate.is_concrete(sampling_rate):
    return 0
  q = float(sampling_rate)
  if not 0.0 < q < 0.5:
    return 0
  mean = q * num_examples
  chunk = int(min(num_examples, math.ceil(mean + 8.0 * math.sqrt(mean) + 16.0)))
  # Positions are int32 running sums of gaps capped at N + 1: keep them below 2^31.
  return chunk if chunk * (num_examples + 1.0) < 2.0**31 else 0


def poisson_sample_impl(key, num_examples: int, sampling_rate):
  """The sampler :func:`poisson_sample` uses, without argument checks (jit/vmap-able)."""
  chunk = _gap_chunk(num_examples, sampling_rate)
  if chunk == 0:
    return _bernoulli_sample(key, num_examples, sampling_rate)
  return _geometric_sample(key, num_examples, float(sampling_rate), chunk)


@functools.partial(jax.jit, static_argnames=("num_examples",))
def _bernoulli_sample(key, num_examples, sampling_rate):
  keep = jax.random.bernoulli(key, sampling_rate, (num_examples,))
  (indices,) = jnp.nonzero(keep, size=num_examples, fill_value=0)
  size = jnp.sum(keep, dtype=jnp.int32)
  return PoissonBatch(indices=indices.astype(jnp.int32), size=size)


@functools.partial(jax.jit, static_argnames=("num_examples", "sampling_rate", "chunk"))
def _geometric_sample(key, num_examples, sampling_rate, chunk):
  n = num_examples
  log_miss = jnp.log1p(jnp.float32(-sampling_rate))
  tiny = jnp.finfo(jnp.float32).tiny

  def draw(carry):
    key, last, size, indices = carry
    key, sub = jax.random.split(key)
    u = jax.random.uniform(sub, (chunk,), jnp.float32, minval=tiny, maxval=1.0)
    gaps = jnp.minimum(jnp.floor(jnp.log(u) / log_miss), n) + 1.0  # Geometric(q), capped
    positions = last + jnp.cumsum(gaps.astype(jnp.int32))
    kept = positions < n  # a prefix: positions increase
    slots = jnp.where(kept, size + jnp.arange(chunk, dtype=jnp.int32), n)
    indices = indices.at[slots].set(positions, mode="drop")
    return key, positions[-1], size + jnp.sum(kept, dtype=jnp.int32), indices

  init = (key, jnp.int32(-1), jnp.int32(0), jnp.zeros((n,), jnp.int32))
  _, _, size, indices = jax.lax.while_loop(lambda c: c[1] < n - 1, draw, init)
  return PoissonBatch(indices=indices, size=size)


def num_microbatches(batch: PoissonBatch, physical_batch_size: int) -> jax.Array:
  r""":math:`\lceil \mathrm{size} / P \rceil`, the number of microbatches of ``batch``.

  A traced int32 scalar: use it as the trip count of ``lax.fori_loop``/``lax.while_loop``.

  Args:
    batch: a :class:`PoissonBatch`.
    physical_batch_size: :math:`P \ge 1`, a static Python int.
  """
  p = _check_static_int("physical_batch_size", physical_batch_size, 1)
  size = jnp.asarray(batch.size, jnp.int32)
  return (size + (p - 1)) // p


def microbatch(batch: PoissonBatch, index, physical_batch_size: int
               ) -> tuple[jax.Array, jax.Array]:
  r"""The ``index``-th microbatch of fixed size :math:`P`: indices and validity mask.

  Position :math:`k \in [0, P)` of microbatch :math:`j` is position :math:`jP + k` of
  ``batch.indices``; it is real iff :math:`jP + k < \mathrm{size}`. The indices are gathered
  at those positions with the positions clipped into range, and masked entries are set to 0,
  so the last, partial microbatch never re-reads real examples (as a clamped
  ``lax.dynamic_slice`` would) and a microbatch past the end is all padding. Microbatches
  :math:`0, \dots, \lceil \mathrm{size}/P \rceil - 1` partition the sampled set.

  Args:
    batch: a :class:`PoissonBatch`.
    index: microbatch number :math:`j \ge 0`; a Python int or a traced integer scalar (e.g.
      a loop counter).
    physical_batch_size: :math:`P \ge 1`, a static Python int (may exceed ``num_examples``).

  Returns:
    ``(indices, mask)``: int32 indices of shape ``(P,)`` (0 where masked) and the bool mask of
    shape ``(P,)``, True for real examples.
  """
  p = _check_static_int("physical_batch_size", physical_batch_size, 1)
  if np.ndim(index) != 0:
    raise ValueError(f"index must be a scalar, got shape {np.shape(index)}")
  _validate.check_integer_valued("index", index)
  _validate.check_range("index", index, 0.0)
  return _microbatch(batch, jnp.asarray(index, jnp.int32), p)


@functools.partial(jax.jit, static_argnames=("physical_batch_size",))
def _microbatch(batch, index, physical_batch_size):
  num_examples = batch.indices.shape[0]
  positions = index * physical_batch_size + jnp.arange(physical_batch_size, dtype=jnp.int32)
  mask = positions < jnp.asarray(batch.size, jnp.int32)
  gathered = batch.indices[jnp.clip(positions, 0, num_examples - 1)]
  return jnp.where(mask, gathered, 0).astype(jnp.int32), mask
