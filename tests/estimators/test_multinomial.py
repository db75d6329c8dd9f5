"""Tests for simultaneous multinomial confidence intervals (Goodman; Sison and Glaz).

References: statsmodels' ``multinomial_proportions_confint`` and an independent numpy/mpmath
re-implementation of Sison and Glaz's algorithm (pmfs summed over each window, two-pass central
moments, upward scan for ``c``). statsmodels forms central moments from factorial moments,
which cancels catastrophically for large counts in narrow windows, so it is compared at 1e-8
or 1e-5 according to a model of that error, and skipped where it is wrong; the
direct-summation reference is compared at 1e-10 everywhere.

Sison-Glaz cases of different k are evaluated in one batch padded with zero categories to
k = 10 (a zero count contributes a point mass: window probability 1 and zero moments, so the
intervals of the other categories are unchanged); this keeps the number of XLA compilations,
and so the run time, small.
"""

import math

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import multinomial_proportions_confint

from dpaudit.estimators import multinomial
from dpaudit.estimators.multinomial import goodman_intervals, sison_glaz_intervals

# ------------------------------------------------------------------------------------------------
# Reference implementation of Sison and Glaz by direct summation.
# ------------------------------------------------------------------------------------------------


def _log_pmf_window(lam, lo, hi):
  """log Poisson(lam) pmf on lo..hi, by log-ratio recurrence from an mpmath anchor."""
  x = np.arange(lo, hi + 1)
  m = int(min(max(round(lam), lo), hi))
  with mpmath.workdps(40):
    anchor = float(m * mpmath.log(lam) - lam - mpmath.loggamma(m + 1))
  out = np.empty(len(x))
  out[m - lo] = anchor
  up = np.arange(m + 1, hi + 1)
  out[m - lo + 1:] = anchor - np.cumsum(np.log1p((up - lam) / lam))
  down = np.arange(m, lo, -1)  # log p(j - 1) = log p(j) + log(j / lam)
  out[:m - lo][::-1] = anchor + np.cumsum(np.log1p((down - lam) / lam))
  return out


_REFERENCE_CACHE = {}


def _reference_nu(counts, c, cache):
  """Edgeworth coverage nu(c) by direct summation; NaN where the density is negative."""
  total = int(sum(counts))
  if c <= 0:
    return 0.0
  if c >= total:
    return 1.0
  if ("nu", c) in cache:
    return cache[("nu", c)]
  cache[("nu", c)] = _reference_nu_uncached(counts, c, cache)
  return cache[("nu", c)]


def _reference_nu_uncached(counts, c, cache):
  total = int(sum(counts))
  probs, shifts, variances, mu3s, mu4s = [], [], [], [], []
  for i, n in enumerate(counts):
    if n == 0:
      continue
    lo, hi = max(n - c, 0), min(n + c, total)
    key = (i, lo, hi)
    if key not in cache:
      w = np.exp(_log_pmf_window(float(n), lo, hi))
      x = np.arange(lo, hi + 1, dtype=float)
      s0 = w.sum()
      mean = (x * w).sum() / s0
      d = x - mean
      cache[key] = (s0, mean - n, (d**2 * w).sum() / s0, (d**3 * w).sum() / s0,
                    (d**4 * w).sum() / s0)
    for lst, val in zip((probs, shifts, variances, mu3s, mu4s), cache[key]):
      lst.append(val)
  var = sum(variances)
  x = -sum(shifts) / math.sqrt(var)
  g1 = sum(mu3s) / var**1.5
  g2 = sum(m4 - 3 * v**2 for m4, v in zip(mu4s, variances)) / var**2
  fe = math.exp(-x * x / 2) / math.sqrt(2 * math.pi) * (
      1 + g1 / 6 * (x**3 - 3 * x) + g2 / 24 * (x**4 - 6 * x**2 + 3)
      + g1**2 / 72 * (x**6 - 15 * x**4 + 45 * x**2 - 15))
  if fe <= 0:
    return math.nan
  with mpmath.workdps(40):
    log_scale = float(mpmath.loggamma(total + 1) - total * mpmath.log(total) + total)
  return math.exp(log_scale + sum(math.log(p) for p in probs) + math.log(fe) - 0.5 * math.log(var))


def _reference_sison_glaz(counts, beta, bisect_below=None):
  """Intervals for the first c with nu(c) <= 1 - beta < nu(c + 1) (upward scan), or, when
  ``bisect_below`` is given, by plain bisection on [0, bisect_below] (monotone regime)."""
  counts = [int(n) for n in counts]
  total = sum(counts)
  target = 1 - beta
  cache = _REFERENCE_CACHE.setdefault(tuple(counts), {})
  nu = lambda c: _reference_nu(counts, c, cache)
  if bisect_below is None:
    c, nu_c, nu_c1 = 0, 0.0, nu(1)
    while not (nu_c <= target < nu_c1):
      c, nu_c, nu_c1 = c + 1, nu_c1, nu(c + 2)
  else:
    lo, hi = 0, bisect_below
    assert nu(hi) > target
    while hi - lo > 1:
      mid = (lo + hi) // 2
      lo, hi = (lo, mid) if nu(mid) > target else (mid, hi)
    c, nu_c, nu_c1 = lo, nu(lo), nu(hi)
  gamma = (target - nu_c) / (nu_c1 - nu_c)
  n = np.asarray(counts, float)
  return np.clip((n - c) / total, 0, 1), np.clip((n + c + 2 * gamma) / total, 0, 1), c


def _statsmodels(counts, beta, method):
  ci = multinomial_proportions_confint(np.asarray(counts), alpha=beta, method=method)
  return ci[:, 0], ci[:, 1]


# ------------------------------------------------------------------------------------------------
# Cases.
# ------------------------------------------------------------------------------------------------

_K_MAX = 10


def _random_cases():
  rng = np.random.default_rng(20240601)
  cases = []
  for total, ks in ((20, (2, 5, 10)), (100, (3, 7)), (1000, (2, 4, 10)), (10_000, (3, 6)),
                    (100_000, (4,))):
    for k in ks:
      cases.append(rng.multinomial(total, rng.dirichlet(np.full(k, 0.7))).tolist())
  return cases


# Fixed patterns: balanced, zeros, very unbalanced, sparse.
_HAND_CASES = [
    [5, 5], [20, 0], [1, 19], [0, 3, 17], [3, 0, 0, 1, 16], [56, 72, 73, 59, 62, 87, 58],
    [100, 200, 300, 400], [1, 999], [0] * 9 + [20], [99, 1, 0, 0, 0], [999, 1, 0, 0, 0],
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 491], [2500, 2500, 5000],
]
# [9999, 1, ...] at beta = 0.2 crosses at c = 0, where narrow windows around 9999 need the
# direct summation branch; at beta = 0.05 it never crosses (c = N - 1), too slow to scan here.
_SG_CASES = ([(c, beta) for c in _HAND_CASES + _random_cases() for beta in (0.05, 0.2)]
             + [([9999, 1, 0, 0, 0], 0.2)])


@pytest.fixture(scope="module")
def sison_glaz_batch():
  """All Sison-Glaz cases in one padded batch with two leading axes; (lower, upper) per case,
  unpadded."""
  rows = len(_SG_CASES) + len(_SG_CASES) % 2
  padded = np.zeros((rows, _K_MAX))
  betas = np.full(rows, 0.5)
  for row, (counts, beta) in enumerate(_SG_CASES):
    padded[row, :len(counts)] = counts
    betas[row] = beta
  padded[len(_SG_CASES):, :2] = 1.0  # filler row, if any
  lower, upper = sison_glaz_intervals(padded.reshape(rows // 2, 2, _K_MAX),
                                      betas.reshape(rows // 2, 2))
  lower, upper = np.asarray(lower).reshape(rows, _K_MAX), np.asarray(upper).reshape(rows, _K_MAX)
  return [(lower[r, :len(c)], upper[r, :len(c)]) for r, (c, _) in enumerate(_SG_CASES)]


# ------------------------------------------------------------------------------------------------
# Goodman.
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("beta", [0.05, 0.2, 1e-6])
def test_goodman_matches_statsmodels(beta):
  for counts in _HAND_CASES + _random_cases():
    lower, upper = goodman_intervals(np.asarray(counts), beta)
    ref_lower, ref_upper = _statsmodels(counts, beta, "goodman")
    np.testing.assert_allclose(lower, ref_lower, rtol=1e-9, atol=1e-15, err_msg=str(counts))
    np.testing.assert_allclose(upper, ref_upper, rtol=1e-9, atol=1e-15, err_msg=str(counts))


def test_goodman_closed_form_and_range():
  counts = jnp.array([0.0, 7.0, 93.0])
  lower, upper = goodman_intervals(counts, 0.1)
  a = stats.norm.isf(0.1 / 6) ** 2
  n, total = np.asarray(counts), 100.0
  root = np.sqrt(a * (a + 4 * n * (total - n) / total))
  np.testing.assert_allclose(lower, (a + 2 * n - root) / (2 * (total + a)), rtol=1e-12,
                             atol=1e-16)
  np.testing.assert_allclose(upper, (a + 2 * n + root) / (2 * (total + a)), rtol=1e-12)
  assert float(lower[0]) == 0.0 and np.all(np.asarray(upper) <= 1.0)


# ------------------------------------------------------------------------------------------------
# Sison and Glaz against references.
# ------------------------------------------------------------------------------------------------


def test_sison_glaz_matches_direct_summation_reference(sison_glaz_batch):
  for (counts, beta), (lower, upper) in zip(_SG_CASES, sison_glaz_batch):
    ref_lower, ref_upper, _ = _reference_sison_glaz(counts, beta)
    msg = f"counts={counts}, beta={beta}"
    np.testing.assert_allclose(lower, ref_lower, rtol=1e-10, atol=1e-15, err_msg=msg)
    np.testing.assert_allclose(upper, ref_upper, rtol=1e-10, atol=1e-15, err_msg=msg)


@pytest.mark.filterwarnings("ignore:invalid value encountered in log:RuntimeWarning")
def test_sison_glaz_matches_statsmodels(sison_glaz_batch):
  """statsmodels builds central moments from factorial moments, with relative error about
  eps * (n_max / c)^4 at the chosen c; compare at 1e-8 where that is below 1e-10 and at 1e-5
  where it is below 1e-7. Elsewhere (e.g. counts [999, 1, 0, 0, 0]) it is wrong, and where
  nu never crosses 1 - beta before c = N its errors at small c can fake a crossing."""
  tight = loose = 0
  for (counts, beta), (lower, upper) in zip(_SG_CASES, sison_glaz_batch):
    if sum(counts) > 20_000:  # statsmodels takes seconds per call beyond this
      continue
    c = _reference_sison_glaz(counts, beta)[2]
    error_model = 2.2e-16 * (max(counts) / max(c, 1)) ** 4
    if error_model > 1e-7 or c == sum(counts) - 1:  # c = N - 1: nu never crossed below N
      continue
    rtol = 1e-8 if error_model <= 1e-10 else 1e-5
    tight, loose = (tight + 1, loose) if rtol == 1e-8 else (tight, loose + 1)
    ref_lower, ref_upper = _statsmodels(counts, beta, "sison-glaz")
    msg = f"counts={counts}, beta={beta}"
    np.testing.assert_allclose(lower, ref_lower, rtol=rtol, atol=1e-15, err_msg=msg)
    np.testing.assert_allclose(upper, ref_upper, rtol=rtol, atol=1e-15, err_msg=msg)
  assert tight >= 25 and loose >= 3, (tight, loose)


def test_sison_glaz_takes_first_crossing_for_unbalanced_counts(sison_glaz_batch):
  """nu(c) is not monotone here; the first crossing is c = 0 (as in statsmodels and R)."""
  row = _SG_CASES.index(([99, 1, 0, 0, 0], 0.2))
  lower, upper = sison_glaz_batch[row]
  np.testing.assert_allclose(lower, [0.99, 0.01, 0, 0, 0], atol=1e-15)
  assert upper[0] == 1.0 and np.all(upper[1:] < 0.03)


# ------------------------------------------------------------------------------------------------
# Poisson tails and truncated-Poisson moments.
# ------------------------------------------------------------------------------------------------


def _poisson_upper_tail_by_sum(s, x):
  """Pr[Poisson(x) >= s] for x well below s: mpmath anchor times a float64 ratio sum."""
  with mpmath.workdps(40):
    p0 = mpmath.exp(s * mpmath.log(x) - x - mpmath.loggamma(s + 1))
    ratios = np.cumprod(x / (s + np.arange(1, 2_000_000, dtype=float)))
    return float(p0 * (1 + mpmath.mpf(float(ratios.sum()))))


@mpmath.workdps(30)
def test_poisson_tails_against_mpmath():
  shapes, rates, ref_p, ref_q = [], [], [], []
  for s in (1.0, 2.0, 7.0, 60.0, 499.0, 500.0, 2000.0, 1e4):
    for z in (-25.0, -6.0, -1.0, 0.0, 0.4, 2.0, 6.0, 25.0):
      x = s + z * math.sqrt(s)
      if x <= 0:
        continue
      shapes.append(s)
      rates.append(x)
      ref_p.append(float(mpmath.gammainc(s, 0, x, regularized=True)))
      ref_q.append(float(mpmath.gammainc(s, x, mpmath.inf, regularized=True)))
  # Shape 1e9, where jax.scipy.special.gammaincc errs by ~1e-6, checked in the lower tail.
  for z in (-8.0, -3.0, -1.0):
    s = 1e9
    x = math.floor(s + z * math.sqrt(s))
    shapes.append(s)
    rates.append(x)
    ref_p.append(_poisson_upper_tail_by_sum(s, x))
    ref_q.append(1 - ref_p[-1])
  p, q = jax.jit(multinomial._poisson_tails)(np.array(shapes), np.array(rates))
  np.testing.assert_allclose(p, ref_p, rtol=1e-12, atol=1e-300)
  np.testing.assert_allclose(q, ref_q, rtol=1e-12, atol=1e-300)


@mpmath.workdps(30)
def _brute_force_moments(lam, lo, hi):
  lo = max(lo, 0)
  if lam == 0:
    return (1.0 if lo <= 0 <= hi else 0.0), 0.0, 0.0, 0.0, 0.0
  lam = mpmath.mpf(lam)
  xs = list(range(lo, hi + 1))
  w = [mpmath.exp(x * mpmath.log(lam) - lam - mpmath.loggamma(x + 1)) for x in xs]
  s0 = mpmath.fsum(w)
  mean = mpmath.fsum(x * p for x, p in zip(xs, w)) / s0
  central = [mpmath.fsum((x - mean)**j * p for x, p in zip(xs, w)) / s0 for j in (2, 3, 4)]
  return (float(s0), float(mean)) + tuple(float(m) for m in central)


def test_truncated_poisson_moments_against_brute_force():
  windows = [(0.0, 0, 5), (0.0, -3, 2), (2.5, -4, 3), (7.0, 0, 30), (40.0, 35, 45),
             (40.0, 38, 39), (3.0, 5, 12), (50.0, 2, 20), (600.0, 0, 3000), (1000.0, 950, 1060),
             (12345.0, 12000, 12400), (3e5, 3e5 - 70, 3e5 + 2)]
  lam, lo, hi = (np.array(v, float) for v in zip(*windows))
  got = jax.jit(multinomial.truncated_poisson_moments)(lam, lo, hi)
  for i, (rate, a, b) in enumerate(windows):
    prob, mean, var, mu3, mu4 = _brute_force_moments(rate, int(a), int(b))
    sd = math.sqrt(var)
    msg = f"window {windows[i]}"
    np.testing.assert_allclose(got.prob[i], prob, rtol=1e-12, err_msg=msg)
    np.testing.assert_allclose(got.mean[i], mean, rtol=1e-13, atol=1e-13, err_msg=msg)
    np.testing.assert_allclose(got.variance[i], var, rtol=1e-9, atol=1e-13, err_msg=msg)
    np.testing.assert_allclose(got.mu3[i], mu3, rtol=0, atol=1e-9 * sd**3 + 1e-13, err_msg=msg)
    np.testing.assert_allclose(got.mu4[i], mu4, rtol=1e-9, atol=1e-13, err_msg=msg)


# ------------------------------------------------------------------------------------------------
# Large totals, batching and transforms, float32.
# ------------------------------------------------------------------------------------------------

_P5 = np.array([0.1, 0.15, 0.2, 0.25, 0.3])
_LARGE_TOTALS = (1e6, 1e8, 1e9)


@pytest.fixture(scope="module")
def large_counts():
  return np.round(np.outer(_LARGE_TOTALS, _P5))


def test_large_totals_are_finite_and_shrink_like_root_n(large_counts):
  totals = np.array(_LARGE_TOTALS)[:, None]
  for fn in (sison_glaz_intervals, goodman_intervals):
    lower, upper = (np.asarray(v) for v in fn(large_counts, 0.05))
    assert np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))
    assert np.all(lower <= _P5) and np.all(_P5 <= upper)
    scaled = (upper - lower) * np.sqrt(totals)
    np.testing.assert_allclose(scaled[1:], np.broadcast_to(scaled[0], scaled[1:].shape),
                               rtol=2e-3, err_msg=fn.__name__)
  # Goodman's half-width tends to sqrt(A p (1 - p) / N).
  a = stats.norm.isf(0.05 / 10) ** 2
  lower, upper = goodman_intervals(large_counts[-1], 0.05)
  np.testing.assert_allclose((upper - lower) * np.sqrt(1e9), 2 * np.sqrt(a * _P5 * (1 - _P5)),
                             rtol=1e-4)


def test_sison_glaz_large_totals_match_direct_summation(large_counts):
  lower, upper = sison_glaz_intervals(large_counts, 0.05)
  for row, total in enumerate(_LARGE_TOTALS):
    ref_lower, ref_upper, _ = _reference_sison_glaz(large_counts[row], 0.05,
                                                    bisect_below=int(5 * math.sqrt(total)))
    np.testing.assert_allclose(lower[row], ref_lower, rtol=1e-10)
    np.testing.assert_allclose(upper[row], ref_upper, rtol=1e-10)


def test_batch_vmap_and_jit_agree_with_rows(large_counts):
  """Batched call (also the large-total test's call), per-row calls, jit(vmap(.)) and two
  leading batch axes (Goodman; Sison-Glaz gets them in the padded reference batch)."""
  counts = np.concatenate([large_counts[:2], [[60.0, 75.0, 100.0, 0.0, 140.0]]])
  betas = np.array([0.05, 0.1, 0.2])
  for fn in (sison_glaz_intervals, goodman_intervals):
    batched = fn(counts, betas)
    rows = [fn(counts[r], betas[r]) for r in range(len(counts))]
    transformed = jax.jit(jax.vmap(fn))(jnp.asarray(counts), jnp.asarray(betas))
    for got in (batched, transformed):
      for r, row in enumerate(rows):
        np.testing.assert_allclose(got.lower[r], row.lower, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got.upper[r], row.upper, rtol=1e-12, atol=1e-15)
  nested = goodman_intervals(counts.reshape(3, 1, 5), betas.reshape(3, 1))
  flat = goodman_intervals(counts, betas)
  np.testing.assert_allclose(nested.lower[:, 0], flat.lower, rtol=1e-15)
  np.testing.assert_allclose(nested.upper[:, 0], flat.upper, rtol=1e-15)


def test_float32_mode_agrees_loosely(large_counts):
  counts = np.concatenate([np.array([[60.0, 75.0, 100.0, 125.0, 140.0]]), large_counts[:2]])
  expected = [sison_glaz_intervals(counts, 0.05), goodman_intervals(counts, 0.05)]
  with jax.enable_x64(False):
    got = [sison_glaz_intervals(counts.astype(np.float32), 0.05),
           goodman_intervals(counts.astype(np.float32), 0.05)]
    assert got[0].lower.dtype == jnp.float32
  for g, e in zip(got, expected):
    np.testing.assert_allclose(np.asarray(g.lower), e.lower, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(g.upper), e.upper, rtol=1e-4)


# ------------------------------------------------------------------------------------------------
# Coverage by simulation.
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [sison_glaz_intervals, goodman_intervals])
def test_simultaneous_coverage_by_simulation(fn):
  reps, total, beta = 2000, 2000, 0.1
  rng = np.random.default_rng(7)
  draws = rng.multinomial(total, _P5, size=reps).astype(float)
  lower, upper = (np.asarray(v) for v in fn(draws, beta))
  miss = np.mean(np.any((lower > _P5) | (upper < _P5), axis=1))
  assert miss <= beta + 3 * math.sqrt(beta * (1 - beta) / reps), miss
  assert miss > beta / 4, miss  # not trivially wide


# ------------------------------------------------------------------------------------------------
# Validation.
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [sison_glaz_intervals, goodman_intervals])
@pytest.mark.parametrize("counts, significance, name", [
    ([3, -1, 4], 0.05, "counts"),
    ([3, 1.5, 4], 0.05, "counts"),
    ([7], 0.05, "counts"),
    (5, 0.05, "counts"),
    ([0, 0, 0], 0.05, "counts"),
    ([[1, 2], [0, 0]], 0.05, "counts"),
    ([3, 1, 4], 0.0, "significance"),
    ([3, 1, 4], 1.0, "significance"),
])
def test_invalid_arguments_raise(fn, counts, significance, name):
  with pytest.raises(ValueError, match=name):
    fn(np.asarray(counts), significance)


class _Recorded(Exception):
  pass


@pytest.mark.parametrize("rows, padded", [(1, 1), (3, 4), (5, 8), (200, 256)])
def test_sison_glaz_programs_take_power_of_two_rows_from_one(monkeypatch, rows, padded):
  """Each step of the Sison-Glaz search costs in proportion to the rows, so its programs are not
  padded to the usual 128 rows (3 rows of large totals took 4.2 s a call padded, 0.19 s now);
  Goodman's stay at 128. The program's arguments are recorded and nothing is compiled."""
  from dpaudit.estimators import _compile, renyi_cuts
  seen = []

  def record(program, host, args, size):
    del program, host, size
    seen.append(args[0].shape[0])
    raise _Recorded

  monkeypatch.setattr(_compile, "first_call", record)
  counts = np.full((rows, 4), 25.0)
  for call in (lambda: sison_glaz_intervals(counts),
               lambda: renyi_cuts.renyi_k_cut_lower_bound(counts, counts + 1.0, 2.0,
                                                    method="sison-glaz"),
               lambda: goodman_intervals(counts)):
    with pytest.raises(_Recorded):
      call()
  assert seen == [padded, padded, max(padded, 128)]
