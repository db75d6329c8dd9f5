"""A fast CPU lowering of JAX's Threefry-2x32 PRNG, bit-identical to ``threefry2x32``.

Monte Carlo audits spend most of their time generating random bits. On CPU, JAX lowers its
Threefry-2x32 hash with rolled loops (to keep compile times short), which stops XLA from fusing
the 20 rounds: measured here at 8.6-12 ns per 32-bit word, against 2.1 ns for the same hash
written as straight-line ``jnp`` code (``experiments.benchmarks.montecarlo`` compares them).

This module registers that straight-line version as a JAX PRNG implementation,
:data:`threefry_unrolled`. It is *the same generator*, not a new one: the hash is Threefry-2x32
with 20 rounds (Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as easy as 1, 2, 3",
SC 2011), and seeding, splitting, folding in and bit generation follow JAX's original
(non-partitionable) ``threefry2x32`` layout, so keys and bits equal those of
``jax.random.key(seed, impl="threefry2x32")`` with ``jax_threefry_partitionable=False``
(tested bit for bit). Use it like any implementation::

    key = jax.random.key(seed, impl=dpaudit.prng.threefry_unrolled)
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import random as jex_random

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_KEY_PARITY = 0x1BD11BDA


def _rotate_left(x: jax.Array, distance: int) -> jax.Array:
  return (x << jnp.uint32(distance)) | (x >> jnp.uint32(32 - distance))


def threefry2x32(key: jax.Array, x0: jax.Array, x1: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The Threefry-2x32-20 block function, unrolled: ``(key, (x0, x1)) -> (y0, y1)``.

  Args:
    key: uint32 array of shape (2,).
    x0, x1: uint32 counter words of the same shape.
  """
  k0, k1 = key[0], key[1]
  schedule = (k0, k1, k0 ^ k1 ^ jnp.uint32(_KEY_PARITY))
  x0 = x0 + schedule[0]
  x1 = x1 + schedule[1]
  for block in range(5):  # 5 blocks of 4 rounds, a key injection after each block
    for distance in _ROTATIONS[block % 2]:
      x0 = x0 + x1
      x1 = _rotate_left(x1, distance) ^ x0
    x0 = x0 + schedule[(block + 1) % 3]
    x1 = x1 + schedule[(block + 2) % 3] + jnp.uint32(block + 1)
  return x0, x1


def _hash(key: jax.Array, counts: jax.Array) -> jax.Array:
  """JAX's ``threefry_2x32(key, counts)`` layout: the flat counts are cut into two halves that
  form the two counter words (an odd count is padded with one zero)."""
  flat = counts.reshape(-1).astype(jnp.uint32)
  odd = flat.size % 2
  if odd:
    flat = jnp.concatenate([flat, jnp.zeros((1,), jnp.uint32)])
  half = flat.size // 2
  y0, y1 = threefry2x32(key, flat[:half], flat[half:])
  out = jnp.concatenate([y0, y1])
  return (out[:-1] if odd else out).reshape(counts.shape)


def _seed(seed: jax.Array) -> jax.Array:
  seed = jnp.asarray(seed)
  if jnp.dtype(seed.dtype).itemsize == 8:
    high = (seed >> 32).astype(jnp.uint32)
  else:
    high = jnp.zeros((), jnp.uint32)
  low = (seed & 0xFFFFFFFF).astype(jnp.uint32) if seed.dtype.itemsize == 8 else seed.astype(
      jnp.uint32)
  return jnp.stack([high, low])


def _split(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
  num = math.prod(shape)
  counts = jax.lax.iota(jnp.uint32, num * 2)
  return _hash(key, counts).reshape(*shape, 2)


def _fold_in(key: jax.Array, data: jax.Array) -> jax.Array:
  return _hash(key, _seed(jnp.asarray(data, jnp.uint32)))


def _random_bits(key: jax.Array, bit_width: int, shape: tuple[int, ...]) -> jax.Array:
  if bit_width not in (8, 16, 32, 64):
    raise ValueError(f"bit_width={bit_width} is not one of 8, 16, 32, 64")
  size = math.prod(shape)
  dtype = {8: jnp.uint8, 16: jnp.uint16, 32: jnp.uint32, 64: jnp.uint64}[bit_width]
  if size == 0:  # no words to hash (64-bit draws would split one padding word in two)
    return jnp.zeros(shape, dtype)
  max_count = math.ceil(bit_width * size / 32)
  bits = _hash(key, jax.lax.iota(jnp.uint32, max_count))
  if bit_width == 64:
    high, low = jnp.split(bits, 2)
    bits = (high.astype(dtype) << dtype(32)) | low.astype(dtype)
  elif bit_width in (8, 16):
    per_word = 32 // bit_width
    shifts = jnp.uint32(bit_width) * jnp.arange(per_word, dtype=jnp.uint32)[:, None]
    parts = (bits[None, :] >> shifts) & jnp.uint32(np.iinfo(dtype).max)
    bits = parts.T.reshape(-1).astype(dtype)[:size]
  return bits[:size].reshape(shape)


threefry_unrolled = jex_random.define_prng_impl(
    key_shape=(2,), seed=_seed, split=_split, random_bits=_random_bits, fold_in=_fold_in,
    name="threefry_unrolled", tag="tfu")
"""Threefry-2x32-20 with an unrolled (fusible) lowering; bit-identical to JAX's
non-partitionable ``threefry2x32``."""


PRNG_IMPLS = ("threefry_unrolled", "threefry2x32", "rbg", "unsafe_rbg")


def make_key(seed: int, impl: str = "threefry_unrolled") -> jax.Array:
  """A PRNG key from a seed: the one way experiments and sweeps turn seed flags into keys
  (docs/design.md, convention 1).

  ``threefry_unrolled`` (default) is JAX's Threefry-2x32 generator with a lowering XLA can fuse
  (:mod:`dpaudit.prng`; bit-identical to ``threefry2x32`` without partitionable mode, and
  several times faster on CPU); the others are JAX's built-in implementations.
  """
  if impl not in PRNG_IMPLS:
    raise ValueError(f"prng_impl={impl!r} is not one of {', '.join(PRNG_IMPLS)}")
  if not 0 <= seed < 2**63:
    raise ValueError(f"seed={seed} is outside the valid range [0, 2^63)")
  if impl == "threefry_unrolled":
    return jax.random.key(seed, impl=threefry_unrolled)
  return jax.random.key(seed, impl=impl)


def numpy_generator(key: jax.Array) -> np.random.Generator:
  """A NumPy generator seeded by 128 bits drawn from ``key``: for the host-side (NumPy,
  scikit-learn) steps of an audit, so that they too follow one explicit JAX key.

  >>> int(numpy_generator(jax.random.key(0)).integers(10)) == int(
  ...     numpy_generator(jax.random.key(0)).integers(10))
  True
  """
  return np.random.default_rng(np.asarray(jax.random.bits(key, (4,), jnp.uint32)))
