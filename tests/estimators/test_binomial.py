"""Binomial tails and Clopper-Pearson intervals against scipy and mpmath."""

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
import scipy.special
import scipy.stats

from dpaudit.estimators import binomial

BETA_CASES = [(5, 10, 0.3), (1e3, 2e3, 0.33), (1e5, 3e5, 0.2501), (1e6, 1e6, 0.5003),
              (3e7, 7e7, 0.30002), (1, 1e9, 1e-9), (1e8, 1, 1 - 1e-8), (2e9, 3e9, 0.40001),
              (0.5, 0.5, 0.2), (2, 3, 0.999), (40, 60, 1e-3), (1e4, 10, 0.9995)]


@pytest.mark.parametrize("a,b,x", BETA_CASES)
def test_incomplete_beta_tails_match_scipy(a, b, x):
  tails = binomial.incomplete_beta_tails(a, b, x)
  lower, upper = scipy.special.betainc(a, b, x), scipy.special.betaincc(a, b, x)
  np.testing.assert_allclose(float(tails.lower), lower, rtol=1e-10, atol=1e-300)
  np.testing.assert_allclose(float(tails.upper), upper, rtol=1e-10, atol=1e-300)


def test_jax_betainc_is_not_accurate_enough_here():
  """Documents why binomial.py exists: jax's betainc loses ~1e-7 relative at 1e9 trials."""
  a, b, x = 1.0, 1e9, 1e-9
  ours = float(binomial.regularized_incomplete_beta(a, b, x))
  theirs = float(jax.scipy.special.betainc(a, b, x))
  exact = -np.expm1(b * np.log1p(-x))
  assert abs(ours - exact) / exact < 1e-13
  assert abs(theirs - exact) / exact > 1e-9


def test_incomplete_beta_against_mpmath_small_parameters():
  rng = np.random.default_rng(1)
  with mpmath.workdps(40):
    for _ in range(20):
      a, b = rng.uniform(0.2, 40, 2)
      x = rng.uniform(0.01, 0.99)
      lower = float(mpmath.betainc(a, b, 0, x, regularized=True))
      upper = float(mpmath.betainc(a, b, x, 1, regularized=True))
      got = binomial.incomplete_beta_tails(a, b, x)
      assert abs(float(got.lower) - lower) <= 1e-13 * lower
      assert abs(float(got.upper) - upper) <= 1e-13 * upper


@pytest.mark.parametrize("n", [1, 7, 100, 10**4, 10**7])
def test_binomial_tails_and_pmf_match_scipy(n):
  k = np.unique(np.clip(np.array([0, 1, 2, n // 3, n // 2, n - 1, n]), 0, n))
  for p in (1e-6, 0.01, 0.3, 0.5, 0.97):
    np.testing.assert_allclose(binomial.binomial_sf(k, n, p), scipy.stats.binom.sf(k - 1, n, p),
                               rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(binomial.binomial_cdf(k, n, p), scipy.stats.binom.cdf(k, n, p),
                               rtol=1e-9, atol=1e-300)
    ref = scipy.stats.binom.logpmf(k, n, p)
    got = np.asarray(binomial.binomial_logpmf(k, n, p))
    finite = np.isfinite(ref)
    # scipy's logpmf itself drifts by ~2e-9 relative at n = 1e7; mpmath checks below.
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-8, atol=1e-11)
    assert np.all(got[~finite] == -np.inf)


def test_binomial_logpmf_against_mpmath():
  with mpmath.workdps(50):
    for n, k, p in ((10**7, 1, 1e-6), (10**7, 2, 1e-6), (10**9, 3, 4e-9), (1000, 500, 0.5),
                    (10**9, 10**9 - 2, 1 - 3e-9), (50, 0, 0.2)):
      exact = (mpmath.log(mpmath.binomial(n, k)) + k * mpmath.log(mpmath.mpf(p))
               + (n - k) * mpmath.log1p(-mpmath.mpf(p)))
      got = float(binomial.binomial_logpmf(k, n, p))
      assert abs(got - float(exact)) <= 1e-13 * max(1.0, abs(float(exact)))


def test_binomial_edges():
  assert float(binomial.binomial_sf(0, 10, 0.3)) == 1.0
  assert float(binomial.binomial_sf(11, 10, 0.3)) == 0.0
  assert float(binomial.binomial_cdf(-1, 10, 0.3)) == 0.0
  assert float(binomial.binomial_cdf(10, 10, 0.3)) == 1.0
  assert float(binomial.binomial_logpmf(0, 10, 0.0)) == 0.0
  assert float(binomial.binomial_logpmf(3, 10, 0.0)) == -np.inf


def _scipy_cp(k, n, beta, alternative):
  """Reference Clopper-Pearson limits from scipy's Beta quantiles (accurate to ~1e-15)."""
  k, n = np.asarray(k, float), float(n)
  if alternative == "two-sided":
    lo_tail = hi_tail = beta / 2
  else:
    lo_tail = hi_tail = beta
  lower = np.where(k > 0, scipy.stats.beta.ppf(lo_tail, np.maximum(k, 1), n - k + 1), 0.0)
  upper = np.where(k < n, scipy.stats.beta.isf(hi_tail, k + 1, np.maximum(n - k, 1)), 1.0)
  if alternative == "less":
    lower = np.zeros_like(k)
  if alternative == "greater":
    upper = np.ones_like(k)
  return lower, upper


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
@pytest.mark.parametrize("n", [1, 2, 10, 1000, 10**5, 10**7])
def test_clopper_pearson_matches_scipy_beta_quantiles(alternative, n):
  rng = np.random.default_rng(n)
  k = np.unique(np.clip(np.r_[0, 1, 2, n // 3, n // 2, n - 2, n - 1, n,
                              rng.integers(0, n + 1, 4)], 0, n))
  # scipy's Beta quantiles drift by ~1e-10 at n = 1e7 (mpmath shows ours at 1e-15 there).
  rtol = 1e-10 if n <= 10**5 else 5e-10
  for beta in (0.05, 1e-6):
    lower, upper = binomial.clopper_pearson(k, n, beta, alternative)
    ref_lower, ref_upper = _scipy_cp(k, n, beta, alternative)
    np.testing.assert_allclose(lower, ref_lower, rtol=rtol, atol=0)
    np.testing.assert_allclose(upper, ref_upper, rtol=rtol, atol=0)


def test_clopper_pearson_closed_forms_at_the_ends():
  n, beta = 10**9, 0.05
  lower, upper = binomial.clopper_pearson(np.array([0, n]), n, beta)
  np.testing.assert_allclose(float(upper[0]), -np.expm1(np.log(beta / 2) / n), rtol=1e-14)
  np.testing.assert_allclose(float(lower[1]), np.exp(np.log(beta / 2) / n), rtol=1e-14)
  assert float(lower[0]) == 0.0 and float(upper[1]) == 1.0


def _mp_binomial_cdf(k, n, p):
  return mpmath.fsum(mpmath.binomial(n, j) * p**j * (1 - p)**(n - j) for j in range(k + 1))


def _mp_bisect(f, lo, hi, steps=120):
  for _ in range(steps):
    mid = (lo + hi) / 2
    lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
  return (lo + hi) / 2


@pytest.mark.parametrize("k", [1, 2, 5, 30])
def test_clopper_pearson_poisson_regime_against_mpmath(k):
  """n = 1e9 with a handful of successes: where scipy drifts by ~1e-8, we hold 1e-10."""
  n, beta = 10**9, 0.05
  with mpmath.workdps(60):
    tail = mpmath.mpf(beta) / 2
    upper = _mp_bisect(lambda p: _mp_binomial_cdf(k, n, p) - tail, mpmath.mpf(0),
                       mpmath.mpf(100) / n)
    lower = _mp_bisect(lambda p: tail - (1 - _mp_binomial_cdf(k - 1, n, p)), mpmath.mpf(0),
                       mpmath.mpf(100) / n)
  got = binomial.clopper_pearson(k, n, beta)
  assert abs(float(got.upper) - float(upper)) <= 1e-10 * float(upper)
  assert abs(float(got.lower) - float(lower)) <= 1e-10 * float(lower)


def test_clopper_pearson_one_success_in_a_billion_against_mpmath():
  n, beta = 10**9, 0.05
  with mpmath.workdps(40):
    exact = -mpmath.expm1(mpmath.log(1 - mpmath.mpf(beta) / 2) / n)  # Pr[Bin >= 1] = beta/2
  lower = float(binomial.clopper_pearson(1, n, beta).lower)
  assert abs(lower - float(exact)) / float(exact) < 1e-12


def test_clopper_pearson_batches_jit_and_vmap():
  k = jnp.array([[0, 3, 7], [10, 2, 5]])
  n = jnp.array([10, 10, 10])
  direct = binomial.clopper_pearson(k, n, 0.1)
  jitted = jax.jit(lambda k, n: binomial.clopper_pearson(k, n, 0.1))(k, n)
  mapped = jax.vmap(lambda row: binomial.clopper_pearson(row, n, 0.1))(k)
  for a, b in ((direct, jitted), (direct, mapped)):
    np.testing.assert_allclose(a.lower, b.lower, rtol=1e-14)
    np.testing.assert_allclose(a.upper, b.upper, rtol=1e-14)
  assert direct.lower.shape == (2, 3)


def test_clopper_pearson_float32():
  with jax.enable_x64(False):
    lower, upper = binomial.clopper_pearson(np.array([0, 1, 50, 99, 100]), 100, 0.05)
    assert lower.dtype == jnp.float32
  ref_lower, ref_upper = _scipy_cp(np.array([0, 1, 50, 99, 100]), 100, 0.05, "two-sided")
  np.testing.assert_allclose(lower, ref_lower, rtol=2e-5, atol=1e-7)
  np.testing.assert_allclose(upper, ref_upper, rtol=2e-5, atol=1e-7)


def test_float32_limits_and_tails_match_scipy_on_random_pairs():
  """Without x64, as a GPU user would call them: n up to 1e6 (exact in float32). The fraction's
  recurrence used to underflow here for n above ~1e4 (NaN tails, limits off by 20x)."""
  rng = np.random.default_rng(7)
  n = np.maximum(np.round(np.exp(rng.uniform(0.0, np.log(1e6), 4000))), 1.0)
  k = rng.integers(0, n.astype(np.int64) + 1).astype(float)
  p = np.clip((k + rng.normal(0, 2, k.shape) * np.sqrt(k + 1)) / n, 1e-6, 1 - 1e-6)
  # and three pairs that failed before the fraction was rescaled (few random pairs do)
  k, n = np.append(k, [16.0, 619480.0, 8.0]), np.append(n, [54170.0, 621246.0, 15785.0])
  p = np.append(p, [3.9694688e-4, 0.99602842, 5e-4]).astype(np.float32).astype(float)
  k32, n32, p32 = (v.astype(np.float32) for v in (k, n, p))
  with jax.enable_x64(False):
    lower, upper = binomial.clopper_pearson(k32, n32, 0.05)
    sf, cdf = binomial.binomial_sf(k32, n32, p32), binomial.binomial_cdf(k32, n32, p32)
    assert lower.dtype == sf.dtype == jnp.float32
  ref_lower = np.where(k > 0, scipy.stats.beta.ppf(0.025, np.maximum(k, 1), n - k + 1), 0.0)
  ref_upper = np.where(k < n, scipy.stats.beta.isf(0.025, k + 1, np.maximum(n - k, 1)), 1.0)
  np.testing.assert_allclose(lower, ref_lower, rtol=5e-5, atol=0)
  np.testing.assert_allclose(upper, ref_upper, rtol=5e-5, atol=0)
  for ours, ref in ((sf, scipy.stats.binom.sf(k - 1, n, p)), (cdf, scipy.stats.binom.cdf(k, n, p))):
    normal = ref > 1e-30  # float32 keeps relative accuracy down to its normal numbers
    np.testing.assert_allclose(np.asarray(ours)[normal], ref[normal], rtol=2e-3, atol=0)
    assert np.all(np.isfinite(ours))


@pytest.mark.parametrize("n", [1e12, 1e14, 1e15])
def test_clopper_pearson_beyond_1e9_solves_its_tail_equations(n):
  """Counts far beyond 1e9 (the fraction's terms used to underflow from n ~ 1e14 on): each
  limit solves its tail equation, I_lower(k, n-k+1) = beta/2 = 1 - I_upper(k+1, n-k), checked
  in mpmath (scipy's quantile itself fails here: 1.5e-8 for k = 1000, n = 1e13)."""
  k = np.array([1.0, 16.0, 1000.0])
  lower, upper = binomial.clopper_pearson(k, n, 0.05)
  with mpmath.workdps(40):
    for ki, lo, up in zip(k, np.asarray(lower), np.asarray(upper)):
      low_tail = mpmath.betainc(ki, n - ki + 1, 0, mpmath.mpf(float(lo)), regularized=True)
      up_tail = mpmath.betainc(ki + 1, n - ki, mpmath.mpf(float(up)), 1, regularized=True)
      # a relative error e in a limit moves its tail by about k e (relative)
      assert abs(float(low_tail) / 0.025 - 1) < 1e-10 * (ki + 1) * 10
      assert abs(float(up_tail) / 0.025 - 1) < 1e-10 * (ki + 1) * 10


def test_clopper_pearson_coverage():
  """Exact intervals are conservative: misses at most beta (+ Monte Carlo tolerance)."""
  rng = np.random.default_rng(0)
  reps, beta = 4000, 0.1
  for n, p in ((30, 0.2), (500, 0.02)):
    k = rng.binomial(n, p, size=reps)
    lower, upper = binomial.clopper_pearson(k, n, beta)
    miss = np.mean((np.asarray(lower) > p) | (np.asarray(upper) < p))
    assert miss <= beta + 3 * np.sqrt(beta * (1 - beta) / reps)
    one_sided = binomial.clopper_pearson(k, n, beta, "less").upper
    assert np.mean(np.asarray(one_sided) < p) <= beta + 3 * np.sqrt(beta * (1 - beta) / reps)


@pytest.mark.parametrize("kwargs,match", [
    (dict(successes=5, trials=4), "successes=5 exceeds trials=4"),
    (dict(successes=-1, trials=4), "successes=-1"),
    (dict(successes=1.5, trials=4), "successes=1.5 must be a whole number"),
    (dict(successes=1, trials=4, significance=0.0), "significance=0.0"),
    (dict(successes=1, trials=4, significance=1.0), "significance=1.0"),
    (dict(successes=1, trials=4, alternative="both"), "alternative='both'"),
])
def test_clopper_pearson_validation(kwargs, match):
  with pytest.raises(ValueError, match=match):
    binomial.clopper_pearson(**kwargs)


# ----------------------------------------------------------------------------- bounded-cost paths


def test_clopper_pearson_matches_scipy_on_random_pairs_up_to_1e9():
  """1e4 random (k, n) pairs, n log-uniform up to 1e9 and k uniform on 0..n, at 1e-10."""
  rng = np.random.default_rng(2026)
  n = np.maximum(np.round(np.exp(rng.uniform(0.0, np.log(1e9), 10_000))), 1.0)
  k = rng.integers(0, n.astype(np.int64) + 1).astype(float)
  lower, upper = binomial.clopper_pearson(k, n, 0.05)
  ref_lower = np.where(k > 0, scipy.stats.beta.ppf(0.025, np.maximum(k, 1), n - k + 1), 0.0)
  ref_upper = np.where(k < n, scipy.stats.beta.isf(0.025, k + 1, np.maximum(n - k, 1)), 1.0)
  np.testing.assert_allclose(lower, ref_lower, rtol=1e-10, atol=0)
  np.testing.assert_allclose(upper, ref_upper, rtol=1e-10, atol=0)


def test_clopper_pearson_in_cpu_chunks_matches_scipy():
  """More limits than one chunk (binomial._cpu_chunk_size) go through the chunked map."""
  rng = np.random.default_rng(5)
  n = rng.integers(1, 1001, 40_000).astype(float)
  k = rng.integers(0, n.astype(np.int64) + 1).astype(float)
  lower, upper = binomial.clopper_pearson(k, n, 1e-6)
  assert 2 * k.size > binomial._cpu_chunk_size()
  np.testing.assert_allclose(lower, np.where(
      k > 0, scipy.stats.beta.ppf(5e-7, np.maximum(k, 1), n - k + 1), 0.0), rtol=1e-10, atol=0)
  np.testing.assert_allclose(upper, np.where(
      k < n, scipy.stats.beta.isf(5e-7, k + 1, np.maximum(n - k, 1)), 1.0), rtol=1e-10, atol=0)


def test_clopper_pearson_grouped_chunks_match_scipy(monkeypatch):
  """With small chunks, batches spanning many of them take the grouped path (partition,
  padding, per-chunk branch skipping) with a shared tail and with a tail per pair; n is
  log-uniform up to 1e9, so pure and mixed chunks both occur."""
  monkeypatch.setattr(binomial, "_cpu_chunk_size", lambda: 1024)
  jax.clear_caches()  # a program traced with the usual chunk size must not be reused
  rng = np.random.default_rng(11)
  n = np.maximum(np.round(np.exp(rng.uniform(0.0, np.log(1e9), 6_001))), 1.0)
  k = rng.integers(0, n.astype(np.int64) + 1).astype(float)
  significance = rng.choice([1e-6, 0.05, 0.3], n.size)
  for beta in (0.05, significance):
    lower, upper = binomial.clopper_pearson(k, n, beta)
    ref_lower = np.where(k > 0, scipy.stats.beta.ppf(beta / 2, np.maximum(k, 1), n - k + 1), 0.0)
    ref_upper = np.where(k < n, scipy.stats.beta.isf(beta / 2, k + 1, np.maximum(n - k, 1)), 1.0)
    np.testing.assert_allclose(lower, ref_lower, rtol=1e-10, atol=0)
    np.testing.assert_allclose(upper, ref_upper, rtol=1e-10, atol=0)
  jax.clear_caches()


def test_grouped_order_on_the_host_and_in_the_program_agree(monkeypatch):
  """The public clopper_pearson partitions large batches on the host (binomial._host_order);
  inside a caller's jit the program partitions them itself. Both put the same pairs first
  (the host's key is the program's), the order is a permutation with those pairs ahead in
  their order, and the limits agree either way to a few units in the last place (two
  programs, which XLA fuses differently), with batches that are not whole chunks (the last
  chunk repeats pairs of the one before), with one tail for all pairs and a tail per pair."""
  monkeypatch.setattr(binomial, "_cpu_chunk_size", lambda: 1024)
  jax.clear_caches()
  rng = np.random.default_rng(23)
  n = np.maximum(np.round(np.exp(rng.uniform(0.0, np.log(1e9), 5_003))), 1.0)
  k = rng.integers(0, n.astype(np.int64) + 1).astype(float)
  kj, nj = jnp.asarray(k), jnp.asarray(n)
  tails = rng.choice([1e-9, 0.025, 0.3], k.size)
  for tail in (0.025, 1e-9, tails):
    first = binomial._host_cp_key(k, n, 2.0 * tail, halve=True)
    in_program = binomial._cp_key(kj, nj, binomial._normal_quantile(jnp.log(tail)))
    np.testing.assert_array_equal(first, in_program)
    assert 0 < first.sum() < k.size
    order = binomial._host_order(binomial._host_cp_key, k, n, tail, parts=2)
    np.testing.assert_array_equal(np.sort(order), np.arange(k.size))
    np.testing.assert_array_equal(order[:first.sum()], np.flatnonzero(first))
  assert binomial._host_order(binomial._host_cp_key, k[:400], n[:400], 0.025, parts=2) is None
  for beta, alternative in ((0.05, "two-sided"), (0.05, "greater"), (2.0 * tails, "two-sided")):
    host = binomial.clopper_pearson(k, n, beta, alternative)
    inside = binomial._clopper_pearson(kj, nj, jnp.asarray(beta), alternative)
    for ours, theirs in zip(host, inside):
      np.testing.assert_allclose(ours, theirs, rtol=1e-14, atol=0)
  jax.clear_caches()


def test_grouping_order_in_the_program_puts_the_first_rows_ahead_under_jit_and_vmap():
  """binomial._grouping_order (the in-program permutation, from a host callback): the rows
  where ``first`` holds, then the others, each in their order, for one batch and a vmapped
  batch of them."""
  rng = np.random.default_rng(5)
  first = rng.random((3, 2_001)) < rng.random((3, 1))
  batched = jax.jit(jax.vmap(binomial._grouping_order))(jnp.asarray(first))
  single = jax.jit(binomial._grouping_order)(jnp.asarray(first[0]))
  np.testing.assert_array_equal(single, batched[0])
  for row, order in zip(first, np.asarray(batched)):
    assert order.dtype == np.int32
    np.testing.assert_array_equal(order, np.concatenate([np.flatnonzero(row),
                                                         np.flatnonzero(~row)]))


@pytest.mark.parametrize("chunk", [None, 1024])
def test_clopper_pearson_pairs_at_the_series_threshold(monkeypatch, chunk):
  """Pairs with min(k, n - k) from 17 to 22, around the grouping key's threshold of 20: below
  it both limits of a pair take the fraction, although one of them has min(a, b) = 20; from
  it both may take the series (near the bulk). At 1e-10 against scipy, in one batch and in
  grouped chunks."""
  if chunk is not None:
    monkeypatch.setattr(binomial, "_cpu_chunk_size", lambda: chunk)
  jax.clear_caches()
  n = np.unique(np.round(np.exp(np.linspace(np.log(40), np.log(1e6), 300))))
  m = np.arange(17, 23)
  k = np.concatenate([np.broadcast_to(m, (n.size, m.size)).ravel(),
                      (n[:, None] - m).ravel()])
  n = np.concatenate([np.repeat(n, m.size)] * 2)
  for beta in (1e-6, 0.05, 0.5):
    lower, upper = binomial.clopper_pearson(k, n, beta)
    np.testing.assert_allclose(lower, scipy.stats.beta.ppf(beta / 2, k, n - k + 1), rtol=1e-10,
                               atol=0)
    np.testing.assert_allclose(upper, scipy.stats.beta.isf(beta / 2, k + 1, n - k), rtol=1e-10,
                               atol=0)
  jax.clear_caches()


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_pack_keeps_the_flag_and_moves_w_by_at_most_one_ulp(dtype):
  rng = np.random.default_rng(2)
  w = jnp.asarray(np.concatenate([rng.normal(0, 30, 1000), [0.0, -745.0, 37.0, 1e-300]]),
                  dtype)
  flag = jnp.asarray(rng.random(w.size) < 0.5)
  packed, back = binomial._unpack(binomial._pack(w, flag))
  np.testing.assert_array_equal(back, flag)
  ulp = np.spacing(np.abs(np.asarray(w)))
  assert np.all(np.abs(np.asarray(packed) - np.asarray(w)) <= ulp)


def _mp_small_tail(a, b, x):
  """The tail of I_x(a, b) below the mean (the one computed directly), by mpmath quadrature of
  the integrand around the point, in 40 digits: a reference that needs no series and no
  continued fraction."""
  with mpmath.workdps(40):
    a, b, x = mpmath.mpf(a), mpmath.mpf(b), mpmath.mpf(x)
    below = x <= a / (a + b)
    if not below:
      a, b, x = b, a, 1 - x
    sd = mpmath.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
    log_beta = mpmath.loggamma(a) + mpmath.loggamma(b) - mpmath.loggamma(a + b)
    top = (a - 1) * mpmath.log(x) + (b - 1) * mpmath.log1p(-x)
    f = lambda t: mpmath.exp((a - 1) * mpmath.log(t) + (b - 1) * mpmath.log1p(-t) - top)
    points = sorted({mpmath.mpf(0)} | {x - j * sd for j in range(0, 60, 2) if x - j * sd > 0})
    return below, float(mpmath.exp(mpmath.log(mpmath.quad(f, points)) + top - log_beta))


# (a, b, x): each regime of incomplete_beta_tails. Uniform series: both parameters >= 20 near
# the mean; fixed fraction: small parameters, far tails, x close to 1 with b small; adaptive
# fraction: a parameter below 1 with the other large, near the mean (24 steps were 4e-7 off).
REGIME_CASES = [
    (45.0, 8.0e8, 7.8e-8), (3e4, 7e4, 0.301), (250.0, 750.0, 0.24), (25.0, 40.0, 0.45),
    (2.0, 3.0, 0.2), (7.0, 1e6, 2e-6), (1e4, 10.0, 0.9995), (5e5, 3.0, 1 - 1e-5),
    (120.0, 130.0, 0.2), (0.548, 15942.64, 3.843e-5), (0.3, 2e6, 1e-7), (1e3, 0.7, 0.9993),
]


@pytest.mark.parametrize("a,b,x", REGIME_CASES)
def test_incomplete_beta_regimes_against_quadrature(a, b, x):
  below, ref = _mp_small_tail(a, b, x)
  tails = binomial.incomplete_beta_tails(a, b, x)
  got = float(tails.lower if below else tails.upper)
  assert got == pytest.approx(ref, rel=1e-12)


def test_uniform_series_and_fraction_agree_where_both_apply():
  """Two independent evaluations of the same tail: Temme's series (20 terms) and the even
  continued fraction (run to convergence), for parameters >= 20 a few deviations out."""
  rng = np.random.default_rng(8)
  a = np.exp(rng.uniform(np.log(20.0), np.log(1e4), 200))
  b = np.exp(rng.uniform(np.log(20.0), np.log(1e4), 200))
  zeta = -rng.uniform(0.5, 2.5, 200)
  mean, sd = a / (a + b), np.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
  x = mean + zeta * sd
  a, b, x = (jnp.asarray(v) for v in (a, b, x))
  shape = binomial._beta_shape(a, b)
  o = binomial._orient(a, b, x, 1.0 - x)
  r = a + b
  dev = binomial.binomial_deviance(a, r * x) + binomial.binomial_deviance(b, r * (1 - x))
  log_density = shape.half_log_ratio - binomial._HALF_LOG_2PI + shape.log_gamma_star_ratio - dev
  omega = jnp.where(o.swapped, -shape.omega, shape.omega)
  series = (shape.log_gamma_star_ratio - binomial._HALF_LOG_2PI
            + jnp.log(binomial._uniform_series(-jnp.sqrt(2 * dev), omega, 1 / r)))
  fraction = binomial._adaptive_continued_fraction(o, jnp.ones(a.shape, bool), 100_000)
  log_fraction = log_density - jnp.log(o.a) + jnp.log(fraction)
  np.testing.assert_allclose(np.exp(series), np.exp(log_fraction), rtol=1e-12)


def test_series_coefficients_low_orders_and_normalisation():
  """phi_1 = -kappa/3 and phi_2 = 1/4 + kappa^2/12 by hand, and the even terms integrated over
  the whole line give Gamma*(a) Gamma*(b) / Gamma*(a + b) (the series of I_1(a, b) = 1)."""
  table = binomial._SERIES_TABLE
  np.testing.assert_allclose(table[1, :3], [0.0, -1.0 / 3.0, 0.0], atol=1e-16)
  np.testing.assert_allclose(table[2, :3], [0.25, 0.0, 1.0 / 12.0], atol=1e-16)
  for a, b in ((300.0, 500.0), (40.0, 1e5), (2e3, 2e3)):
    r = a + b
    kappa = (b - a) / np.sqrt(a * b)
    total = 0.0
    for j in range(0, table.shape[0], 2):
      phi = sum(table[j, i] * kappa ** i for i in range(j + 1))
      double_factorial = np.prod(np.arange(j - 1, 0, -2), initial=1.0)  # (j - 1)!!
      total += phi * double_factorial / r ** (j // 2)
    s = lambda z: float(binomial.stirling_remainder(z))
    assert total == pytest.approx(np.exp(s(a) + s(b) - s(r)), rel=1e-12)


@pytest.mark.parametrize("chunk", [None, 1024])
def test_binomial_tails_in_grouped_chunks_match_scipy(monkeypatch, chunk):
  """Tails of batches larger than a chunk go through the grouped path (tails by the series
  first, then by the fraction, each chunk computing only what its elements take): n
  log-uniform up to 1e9, p near k / n (the series) or anywhere (mostly the fraction), every
  tail not below 1e-200 within 1e-10 of scipy, in the original order. (Below that scipy's own
  tails go wrong: at k = 17, n = 190, p = 0.9857 its cdf is 2.4964e-296, 0.6% above the sum of
  the terms in 60-digit mpmath, which this function matches to 2e-14.)"""
  if chunk is not None:
    monkeypatch.setattr(binomial, "_cpu_chunk_size", lambda: chunk)
  jax.clear_caches()
  rng = np.random.default_rng(17)
  n = np.maximum(np.round(np.exp(rng.uniform(0.0, np.log(1e9), 8_000))), 1.0)
  k = rng.integers(0, n.astype(np.int64) + 1).astype(float)
  near = np.clip((k + rng.normal(0, 2, k.size) * np.sqrt(k + 1)) / n, 1e-12, 1 - 1e-12)
  p = np.where(rng.random(k.size) < 0.5, near, rng.random(k.size))
  upper, lower = binomial.binomial_sf(k, n, p), binomial.binomial_cdf(k, n, p)
  for ours, ref in ((upper, scipy.stats.binom.sf(k - 1, n, p)),
                    (lower, scipy.stats.binom.cdf(k, n, p))):
    shown = ref > 1e-200
    np.testing.assert_allclose(np.asarray(ours)[shown], ref[shown], rtol=1e-10, atol=0)
  jax.clear_caches()


def test_log_binomial_tails_against_scipy():
  k = np.array([-1, 0, 1, 2, 30, 50, 51, 99, 100, 101])
  n, p = 100, 0.3
  tails = binomial.log_binomial_tails(k, n, p)
  with np.errstate(divide="ignore"):
    np.testing.assert_allclose(np.exp(tails.upper), scipy.stats.binom.sf(k - 1, n, p),
                               rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(np.exp(tails.lower), scipy.stats.binom.cdf(k - 1, n, p),
                               rtol=1e-12, atol=1e-300)
  # Far in a tail the logs stay finite where the probabilities underflow.
  far = binomial.log_binomial_tails(900_000, 1_000_000, 0.5)
  assert -1e6 < float(far.upper) < -1e5 and float(far.lower) == 0.0


def test_tail_density_is_the_pmf_identity_against_mpmath():
  # D_k = p^k q^(n-k+1) / B(k, n-k+1) = (n-k+1) p Pr[Bin(n, p) = k-1], from the tails' own
  # evaluation; the one-run bound takes its pmf and slope from it.
  cases = ((100, 1, 0.3), (100, 30, 0.3), (100, 100, 0.3), (10**7, 2, 1e-6),
           (10**9, 10**9 - 2, 1 - 3e-9), (10**6, 600_000, 0.6), (10**6, 900_000, 0.5),
           (2000, 1999, 0.999))
  n, k, p = (np.array(c, float) for c in zip(*cases))
  tails, log_density = binomial.log_binomial_tails_and_density(k, n, p)
  np.testing.assert_array_equal(tails.upper, binomial.log_binomial_tails(k, n, p).upper)
  with mpmath.workdps(50):
    for (n_i, k_i, p_i), got in zip(cases, np.asarray(log_density)):
      p_m = mpmath.mpf(p_i)
      exact = (mpmath.log((n_i - k_i + 1) * p_m) + mpmath.log(mpmath.binomial(n_i, k_i - 1))
               + (k_i - 1) * mpmath.log(p_m) + (n_i - k_i + 1) * mpmath.log1p(-p_m))
      assert abs(got - float(exact)) <= 1e-12 * max(1.0, abs(float(exact))), (n_i, k_i, p_i)


@pytest.mark.parametrize("kwargs,match", [
    (dict(successes=0, trials=0), r"trials=0 is outside the valid range \[1"),
    (dict(successes=True, trials=4), "successes=True is boolean"),
    (dict(successes=np.array([1, 0]), trials=np.array([True, True])), "trials=.* is boolean"),
])
def test_clopper_pearson_rejects_zero_trials_and_booleans(kwargs, match):
  with pytest.raises(ValueError, match=match):
    binomial.clopper_pearson(**kwargs)


@pytest.mark.parametrize("b", [2.0, 5.0, 10.0, 19.0])
@pytest.mark.parametrize("tail", [0.025, 1e-3])
def test_gamma_limit_start_for_a_much_larger_than_b(b, tail):
  """Quantile starts for Beta(a, b) with a >= 4b (lower Clopper-Pearson limits with n - k small):
  the first mismatch |log I - log tau| of the gamma-limit start stays below 0.15 (the tail model
  it replaces there reached 1.5 on a million limits, and 5.3 at a = 1e7, b = 19)."""
  a = np.array([4.0 * b, 100.0, 1e3, 1e5, 1e8])
  z = -scipy.special.ndtri(tail)
  assert z <= binomial._GAMMA_LIMIT_MAX_Z
  with jax.enable_x64(True):
    w = np.asarray(binomial._gamma_limit_logit(jnp.asarray(a), jnp.full(a.shape, b),
                                               jnp.full(a.shape, z)))
  log_i = np.log(scipy.special.betaincc(b, a, scipy.special.expit(-w)))  # I_x(a, b) = 1 - I_y(b, a)
  assert np.max(np.abs(log_i - np.log(tail))) < 0.15


def _mp_quantile_logit(a, b, tail, upper, near):
  """logit(p) with I_p(a, b) = tail (lower) or 1 - I_p(a, b) = tail (upper), by mpmath's
  bracketing Illinois solver in 40 digits on the logit scale, within ``near +- 0.5`` (a
  bracket that must hold a sign change, so the reference does not rest on the solver's value)."""
  with mpmath.workdps(40):
    a, b, tail = mpmath.mpf(a), mpmath.mpf(b), mpmath.mpf(tail)

    def equation(w):
      p = 1 / (1 + mpmath.exp(-w))
      value = (mpmath.betainc(a, b, p, 1, regularized=True) if upper
               else mpmath.betainc(a, b, 0, p, regularized=True))
      return mpmath.log(value) - mpmath.log(tail)

    w = mpmath.findroot(equation, (mpmath.mpf(near) - 0.5, mpmath.mpf(near) + 0.5),
                        solver="illinois")
    return float(1 / (1 + mpmath.exp(-w)))


def test_clopper_pearson_where_one_count_is_small_against_mpmath():
  """Both limits where k or n - k is below 20 and n is up to 1e9 (the gamma-limit start), at
  1e-10 relative, against mpmath (scipy's quantiles are up to 7e-9 off here)."""
  rng = np.random.default_rng(11)
  n = np.round(np.exp(rng.uniform(np.log(100.0), np.log(1e9), 24)))
  k = n - rng.integers(1, 20, n.size)
  k = np.where(np.arange(n.size) % 2 == 0, k, n - k)
  lower, upper = (np.asarray(v) for v in binomial.clopper_pearson(k, n, 0.05))
  for i, (ki, ni) in enumerate(zip(k, n)):
    want_lower = _mp_quantile_logit(ki, ni - ki + 1, 0.025, False, scipy.special.logit(lower[i]))
    want_upper = _mp_quantile_logit(ki + 1, ni - ki, 0.025, True, scipy.special.logit(upper[i]))
    assert lower[i] == pytest.approx(want_lower, rel=1e-10, abs=0)
    assert upper[i] == pytest.approx(want_upper, rel=1e-10, abs=0)


@pytest.mark.parametrize("a,b,x", [(30.0, 50.0, 0.3), (5.0, 900.0, 0.002), (400.0, 3.0, 0.985),
                                   (2.0, 40.0, 0.01)])
def test_log_tail_taylor_coefficients_against_mpmath(a, b, x):
  """The scaled Taylor coefficients b_2..b_7 of log I in the logit (from g' alone, by
  power-series recursions) reproduce log I(w0 + s / g') - log I(w0) for |s| <= 0.3 against
  mpmath's incomplete beta in 40 digits, to within the truncation after s^7 (measured: at most
  3e-11 at s = 0.3, where one wrong coefficient would leave ~1e-3)."""
  with mpmath.workdps(40):
    mp_a, mp_b = mpmath.mpf(a), mpmath.mpf(b)

    def log_i(w):
      p = 1 / (1 + mpmath.exp(-w))
      return mpmath.log(mpmath.betainc(mp_a, mp_b, 0, p, regularized=True))

    w0 = mpmath.log(mpmath.mpf(x) / (1 - mpmath.mpf(x)))
    x0 = 1 / (1 + mpmath.exp(-w0))
    g1 = (x0 ** mp_a * (1 - x0) ** mp_b / mpmath.beta(mp_a, mp_b)
          / mpmath.betainc(mp_a, mp_b, 0, x0, regularized=True))
    with jax.enable_x64(True):
      scaled = binomial._log_tail_taylor(*(jnp.float64(float(v)) for v in (g1, x0, 1 - x0, a, b)),
                                         7)
    for s in (-0.3, -0.05, 0.05, 0.3):
      exact = float(log_i(w0 + s / g1) - log_i(w0))
      series = s + sum(float(c) * s ** k for k, c in enumerate(scaled, start=2))
      assert abs(series - exact) <= 1e-4 * s ** 8 + 1e-14, (s, series, exact)


def test_reverted_root_residual_falls_as_h_to_the_eighth():
  """The series reversion of s + sum_{k<=7} b_k s^k = h, for random coefficients: its residual
  falls as h^8 (a wrong reversion coefficient e_k would make it fall as h^k), and the last term
  it reports, which the quantile solver takes as its error, exceeds the residual."""
  rng = np.random.default_rng(3)
  with jax.enable_x64(True):
    for _ in range(5):
      b = rng.uniform(-1.0, 1.0, 6)
      residuals = {}
      for h in (1e-1, 2e-2):
        root, last = binomial._reverted_root(jnp.float64(h), [jnp.float64(v) for v in b])
        with mpmath.workdps(30):
          root_mp = mpmath.mpf(float(root))
          residual = abs(root_mp + sum(mpmath.mpf(c) * root_mp ** k
                                       for k, c in enumerate(b, start=2)) - mpmath.mpf(h))
        residuals[h] = float(residual)
        assert residuals[h] <= float(last)
      assert 2e5 < residuals[1e-1] / residuals[2e-2] < 8e5  # 5^8 = 3.9e5
