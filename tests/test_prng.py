"""dpaudit.prng reproduces JAX's Threefry-2x32 stream bit for bit; first_argmax == argmax."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import random as jex_random

from dpaudit import prng
from dpaudit.mechanisms.noisy_argmax import first_argmax


@pytest.fixture
def original_threefry():
  previous = jax.config.jax_threefry_partitionable
  jax.config.update("jax_threefry_partitionable", False)
  yield
  jax.config.update("jax_threefry_partitionable", previous)


def test_block_function_matches_jax_threefry():
  key = jnp.array([0x13198A2E, 0x03707344], jnp.uint32)
  for n in (1, 2, 7, 100):
    counts = jnp.arange(n, dtype=jnp.uint32) * jnp.uint32(2654435761)
    np.testing.assert_array_equal(prng._hash(key, counts),
                                  jex_random.threefry_2x32(key, counts))


def test_known_answer_vector():
  """Threefry-2x32-20 test vector of Salmon et al. (Random123 kat_vectors): key = counter = 0."""
  zero = jnp.zeros((1,), jnp.uint32)
  y0, y1 = prng.threefry2x32(jnp.zeros(2, jnp.uint32), zero, zero)
  assert (int(y0[0]), int(y1[0])) == (0x6B200159, 0x99BA4EFE)


@pytest.mark.parametrize("seed", [0, 7, 2**31 - 1, 2**40 + 5])
def test_stream_is_bit_identical_to_jax_threefry(original_threefry, seed):
  ours = jax.random.key(seed, impl=prng.threefry_unrolled)
  theirs = jax.random.key(seed, impl="threefry2x32")
  same = lambda f: np.testing.assert_array_equal(np.asarray(f(ours)), np.asarray(f(theirs)))
  same(jax.random.key_data)
  same(lambda k: jax.random.key_data(jax.random.split(k, 5)))
  same(lambda k: jax.random.key_data(jax.random.fold_in(k, 99)))
  for dtype in (jnp.uint8, jnp.uint16, jnp.uint32, jnp.uint64):
    same(lambda k: jax.random.bits(k, (13, 3), dtype))
  same(lambda k: jax.random.normal(k, (1001,)))
  same(lambda k: jax.vmap(lambda kk: jax.random.normal(kk, (10,)))(jax.random.split(k, 4)))


def test_first_argmax_matches_argmax_including_ties():
  rng = np.random.default_rng(0)
  values = rng.integers(0, 4, size=(500, 7)).astype(np.float32)  # many ties
  np.testing.assert_array_equal(first_argmax(jnp.asarray(values)), np.argmax(values, axis=-1))
  wide = rng.normal(size=(20, 100)).astype(np.float32)  # > 64 classes: jnp.argmax path
  np.testing.assert_array_equal(first_argmax(jnp.asarray(wide)), np.argmax(wide, axis=-1))


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 5)])
def test_zero_size_draws_are_empty_arrays(shape):
  """Zero-size draws of every width return empty arrays of the right shape and dtype (64-bit
  draws hashed one padding word and split it in two, which failed; e.g. PANORAMIA with no
  canaries)."""
  key = prng.make_key(0)
  reference = jax.random.key(0, impl="threefry2x32")
  for dtype in (jnp.uint8, jnp.uint16, jnp.uint32, jnp.uint64):
    got = jax.random.bits(key, shape, dtype)
    assert got.shape == shape and got.dtype == jax.random.bits(reference, shape, dtype).dtype
  for draw in (lambda k: jax.random.normal(k, shape, jnp.float64),
               lambda k: jax.random.uniform(k, shape, jnp.float32),
               lambda k: jax.random.randint(k, shape, 0, 9, jnp.int64)):
    got, want = draw(key), draw(reference)
    assert got.shape == want.shape == shape and got.dtype == want.dtype
