"""Tests for dpaudit.dpsgd.sampling: Poisson memberships (binomial intervals per example,
pairwise independence, Binomial(N, q) sizes by a chi-square test against scipy), the static
layout of PoissonBatch, exact microbatch coverage, and one jit trace for all batch sizes."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpaudit import dpsgd, prng
from dpaudit.dpsgd import sampling

SIGNIFICANCE = 1e-6  # per statistical check, at a fixed seed


def _many_batches(num_keys, num_examples, q, seed=0):
  keys = jax.random.split(jax.random.key(seed), num_keys)
  batch = jax.vmap(lambda k: sampling.poisson_sample(k, num_examples, q))(keys)
  return np.asarray(batch.indices), np.asarray(batch.size)


def _memberships(indices, sizes):
  """(K, N) bool: example i is in sample k iff it is among the first sizes[k] indices."""
  num_keys, num_examples = indices.shape
  member = np.zeros((num_keys, num_examples), bool)
  for k in range(num_keys):
    member[k, indices[k, :sizes[k]]] = True
  return member


def test_inclusion_frequency_and_independence():
  num_keys, n, q = 4000, 64, 0.3
  member = _memberships(*_many_batches(num_keys, n, q, seed=1))
  counts = member.sum(axis=0)
  # each example: Binomial(K, q); Bonferroni over the N examples
  lo = stats.binom.ppf(SIGNIFICANCE / (2 * n), num_keys, q)
  hi = stats.binom.isf(SIGNIFICANCE / (2 * n), num_keys, q)
  assert np.all((counts >= lo) & (counts <= hi)), counts
  # pooled: sum of squared standardised counts ~ chi^2(N)
  chi2 = np.sum((counts - num_keys * q) ** 2 / (num_keys * q * (1 - q)))
  assert stats.chi2.sf(chi2, n) > SIGNIFICANCE
  # memberships of different examples are uncorrelated
  corr = np.corrcoef(member.T.astype(float))
  off = np.abs(corr[~np.eye(n, dtype=bool)])
  pairs = n * (n - 1) // 2
  assert off.max() <= stats.norm.isf(SIGNIFICANCE / (2 * pairs)) / math.sqrt(num_keys)
  # and the pooled test does detect a rate off by 0.01
  chi2_wrong = np.sum((counts - num_keys * 0.31) ** 2 / (num_keys * 0.31 * 0.69))
  assert stats.chi2.sf(chi2_wrong, n) < SIGNIFICANCE


def test_size_is_binomial():
  num_keys, n, q = 6000, 40, 0.25
  _, sizes = _many_batches(num_keys, n, q, seed=2)
  support = np.arange(n + 1)
  expected = num_keys * stats.binom.pmf(support, n, q)
  observed = np.bincount(sizes, minlength=n + 1)
  # merge the tails into bins with expected count >= 5
  keep = expected >= 5
  lo, hi = support[keep][0], support[keep][-1]
  obs = np.concatenate([[observed[:lo + 1].sum()], observed[lo + 1:hi], [observed[hi:].sum()]])
  exp = np.concatenate([[expected[:lo + 1].sum()], expected[lo + 1:hi], [expected[hi:].sum()]])
  _, pvalue = stats.chisquare(obs, exp * obs.sum() / exp.sum())
  assert pvalue > SIGNIFICANCE
  z = stats.norm.isf(SIGNIFICANCE / 2)
  assert abs(sizes.mean() - n * q) <= z * math.sqrt(n * q * (1 - q) / num_keys)


def test_layout_sorted_unique_padded():
  n = 37
  indices, sizes = _many_batches(200, n, 0.4, seed=3)
  assert indices.dtype == np.int32 and sizes.dtype == np.int32 and indices.shape == (200, n)
  assert len(set(sizes.tolist())) > 5
  for idx, size in zip(indices, sizes):
    real = idx[:size]
    assert np.all(np.diff(real) > 0)  # increasing, hence unique
    assert np.all((real >= 0) & (real < n))
    np.testing.assert_array_equal(idx[size:], 0)


def test_rate_zero_and_one():
  key = jax.random.key(4)
  empty = sampling.poisson_sample(key, 10, 0.0)
  assert int(empty.size) == 0
  np.testing.assert_array_equal(empty.indices, 0)
  assert int(sampling.num_microbatches(empty, 4)) == 0
  idx, mask = sampling.microbatch(empty, 0, 4)
  assert not np.any(mask) and np.all(idx == 0)
  full = sampling.poisson_sample(key, 10, 1.0)
  assert int(full.size) == 10
  np.testing.assert_array_equal(full.indices, np.arange(10))


@pytest.mark.parametrize("physical_batch_size", [1, 3, 7, 30, 35])
def test_microbatches_cover_the_sample_exactly_once(physical_batch_size):
  n, p = 30, physical_batch_size
  keys = jax.random.split(jax.random.key(5), 20)
  for key in keys:
    batch = sampling.poisson_sample(key, n, 0.35)
    size = int(batch.size)
    count = int(sampling.num_microbatches(batch, p))
    assert count == math.ceil(size / p)
    seen = []
    for j in range(count + 2):  # two microbatches past the end are all padding
      idx, mask = sampling.microbatch(batch, j, p)
      assert idx.shape == (p,) and mask.shape == (p,) and idx.dtype == jnp.int32
      np.testing.assert_array_equal(mask, j * p + np.arange(p) < size)
      np.testing.assert_array_equal(np.asarray(idx)[~np.asarray(mask)], 0)
      if j >= count:
        assert not np.any(mask)
      seen.extend(np.asarray(idx)[np.asarray(mask)].tolist())
    np.testing.assert_array_equal(seen, np.asarray(batch.indices)[:size])


def test_one_trace_for_every_batch_size():
  n, p, q = 50, 8, 0.3
  data = jnp.arange(n, dtype=jnp.float64) ** 2
  traces = []

  @jax.jit
  def step(key):
    traces.append(1)
    batch = sampling.poisson_sample(key, n, q)

    def body(j, acc):
      idx, mask = sampling.microbatch(batch, j, p)
      return acc + jnp.sum(jnp.where(mask, data[idx], 0.0))

    total = jax.lax.fori_loop(0, sampling.num_microbatches(batch, p), body, 0.0)
    return total, batch

  sizes = set()
  for key in jax.random.split(jax.random.key(6), 12):
    total, batch = step(key)
    size = int(batch.size)
    sizes.add(size)
    assert float(total) == float(np.sum(np.asarray(data)[np.asarray(batch.indices)[:size]]))
    eager = sampling.poisson_sample(key, n, q)  # jit and eager sample the same examples
    np.testing.assert_array_equal(batch.indices, eager.indices)
  assert len(sizes) > 3
  assert len(traces) == 1


def test_key_types_and_traced_rate():
  typed = sampling.poisson_sample(jax.random.key(7), 100, 0.5)
  raw = sampling.poisson_sample(jax.random.PRNGKey(7), 100, 0.5)
  np.testing.assert_array_equal(typed.indices, raw.indices)
  custom = sampling.poisson_sample(jax.random.key(7, impl=prng.threefry_unrolled), 100, 0.5)
  assert 20 < int(custom.size) < 80
  sizes = jax.vmap(lambda q: sampling.poisson_sample(jax.random.key(8), 100, q).size)(
      jnp.array([0.0, 0.5, 1.0]))
  assert int(sizes[0]) == 0 and 20 < int(sizes[1]) < 80 and int(sizes[2]) == 100
  assert dpsgd.PoissonBatch is sampling.PoissonBatch


@pytest.mark.parametrize("call,match", [
    (lambda k: sampling.poisson_sample(k, 0, 0.1),
     r"num_examples=0 is outside the valid range \[1, inf\)"),
    (lambda k: sampling.poisson_sample(k, 10.0, 0.1), r"num_examples must be a Python int"),
    (lambda k: sampling.poisson_sample(k, True, 0.1), r"num_examples must be a Python int"),
    (lambda k: sampling.poisson_sample(k, 10, 1.5),
     r"sampling_rate=1.5 is outside the valid range \[0, 1\]"),
    (lambda k: sampling.poisson_sample(k, 10, -0.1), r"sampling_rate=-0.1 is outside"),
    (lambda k: sampling.poisson_sample(k, 10, math.nan), r"sampling_rate=nan is outside"),
    (lambda k: sampling.poisson_sample(k, 10, [0.1, 0.2]), r"sampling_rate must be a scalar"),
    (lambda k: sampling.poisson_sample(3, 10, 0.1), r"key must be a jax PRNG key"),
    (lambda k: sampling.poisson_sample(jax.random.split(k), 10, 0.1),
     r"key must be a single PRNG key"),
    (lambda k: sampling.microbatch(sampling.poisson_sample(k, 10, 0.5), 0, 0),
     r"physical_batch_size=0 is outside the valid range \[1, inf\)"),
    (lambda k: sampling.microbatch(sampling.poisson_sample(k, 10, 0.5), 0, 4.0),
     r"physical_batch_size must be a Python int"),
    (lambda k: sampling.microbatch(sampling.poisson_sample(k, 10, 0.5), -1, 4),
     r"index=-1 is outside the valid range \[0, inf\)"),
    (lambda k: sampling.microbatch(sampling.poisson_sample(k, 10, 0.5), 1.5, 4),
     r"index=1.5 must be a whole number"),
    (lambda k: sampling.num_microbatches(sampling.poisson_sample(k, 10, 0.5), -2),
     r"physical_batch_size=-2 is outside"),
])
def test_validation(call, match):
  with pytest.raises(ValueError, match=match):
    call(jax.random.key(0))


@pytest.mark.parametrize("chunk", [1, 3, 40])
def test_geometric_sampler_is_exact_poisson_whatever_the_chunk(chunk):
  # The gap sampler draws chunks of Geometric(q) gaps until it passes the end; tiny chunks
  # force many loop iterations. Sizes must be Binomial(N, q) (chi-square) and every index
  # kept with probability q (binomial z-scores), indices sorted and distinct.
  from dpaudit.dpsgd.sampling import _geometric_sample
  n, q, trials = 30, 0.2, 40000
  keys = jax.random.split(jax.random.key(7), trials)
  batch = jax.jit(jax.vmap(lambda k: _geometric_sample(k, n, q, chunk)))(keys)
  sizes, indices = np.asarray(batch.size), np.asarray(batch.indices)
  observed = np.bincount(sizes, minlength=n + 1)
  expected = stats.binom.pmf(np.arange(n + 1), n, q) * trials
  keep = expected > 5
  assert stats.chisquare(observed[keep],
                               expected[keep] * observed[keep].sum() / expected[keep].sum()
                               ).pvalue > 1e-3
  real = np.arange(n)[None, :] < sizes[:, None]
  counts = np.bincount(indices[real], minlength=n)
  z = (counts - trials * q) / np.sqrt(trials * q * (1 - q))
  assert np.max(np.abs(z)) < 4.5
  assert all(np.all(np.diff(indices[i, :sizes[i]]) > 0) for i in range(500))
  assert np.all(indices[~real] == 0)
