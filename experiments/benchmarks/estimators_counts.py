"""Count-based workloads of :mod:`experiments.benchmarks.estimators`: Clopper-Pearson limits
(``cp``), binomial tails (``binomial``) and epsilon from error counts (``error_counts``), each
against scipy."""

from __future__ import annotations

from experiments.benchmarks.estimator_inputs import count_pairs, tail_probabilities
from experiments.benchmarks.estimators_timing import (
  Settings,
  max_rel_diff,
  record,
  time_dpaudit,
  time_peer,
)


def scipy_clopper_pearson(k, n, beta):
  import numpy as np
  from scipy import stats
  lower = np.where(k > 0, stats.beta.ppf(beta / 2, np.maximum(k, 1), n - k + 1), 0.0)
  upper = np.where(k < n, stats.beta.isf(beta / 2, k + 1, np.maximum(n - k, 1)), 1.0)
  return lower, upper


def bench_cp(results, settings: Settings):
  import jax.numpy as jnp
  import numpy as np

  from dpaudit import estimators
  cases = [(1e5, 1e3, 1.0), (1e4, 1e6, 1.0), (1e3, 1e9, 1.0),
           (1e6, 1e3, 10.0), (1e6, 1e6, 10.0), (1e6, 1e9, 10.0)]
  for pairs, max_n, target in cases:
    size = settings.size(pairs)

    def make(seed, size=size, max_n=max_n):
      k, n = count_pairs(np.random.default_rng(settings.seed + seed), size, max_n)
      kj, nj = jnp.asarray(k), jnp.asarray(n)
      return lambda: estimators.clopper_pearson(kj, nj, 0.05)

    ours, out = time_dpaudit(make, settings)
    k, n = count_pairs(np.random.default_rng(settings.seed), size, max_n)
    scipy_t, ref = time_peer(lambda: scipy_clopper_pearson(k, n, 0.05), settings)
    record(results, f"clopper_pearson {size:.0e} pairs n<={max_n:.0e}", "cp", ours,
           {"scipy": scipy_t}, f"ratio >= {target:g} vs scipy beta.ppf/isf", target,
           extra={"max_rel_diff": max(max_rel_diff(out.lower, ref[0]),
                                      max_rel_diff(out.upper, ref[1]))})


def bench_binomial(results, settings: Settings):
  import jax.numpy as jnp
  import numpy as np
  from scipy import stats

  from dpaudit import estimators
  for pairs, max_n, target in [(1e5, 1e3, 1.0), (1e4, 1e6, 1.0), (1e3, 1e9, 1.0),
                               (1e6, 1e9, 10.0)]:
    size = settings.size(pairs)
    for name, ours_fn, peer_fn in (
        ("binomial_sf", estimators.binomial_sf, lambda k, n, p: stats.binom.sf(k - 1, n, p)),
        ("binomial_cdf", estimators.binomial_cdf, stats.binom.cdf)):

      def draw(seed, size=size, max_n=max_n):
        rng = np.random.default_rng(settings.seed + seed)
        k, n = count_pairs(rng, size, max_n)
        return k, n, tail_probabilities(rng, k, n)

      def make(seed, draw=draw, ours_fn=ours_fn):
        k, n, p = (jnp.asarray(v) for v in draw(seed))
        return lambda: ours_fn(k, n, p)

      ours, out = time_dpaudit(make, settings)
      k, n, p = draw(0)
      peer_t, ref = time_peer(lambda: peer_fn(k, n, p), settings)
      # Relative agreement where the tail is not below 1e-300 (scipy underflows there).
      mask = np.asarray(ref) > 1e-300
      record(results, f"{name} {size:.0e} n<={max_n:.0e}", "binomial", ours,
             {"scipy": peer_t}, f"ratio >= {target:g} vs scipy binom", target,
             extra={"max_rel_diff": max_rel_diff(np.asarray(out)[mask], np.asarray(ref)[mask])})


def scipy_error_count_epsilon(fp, neg, fn, pos, delta, beta):
  import numpy as np
  from scipy import stats
  fpr = np.where(fp < neg, stats.beta.isf(beta / 2, fp + 1, np.maximum(neg - fp, 1)), 1.0)
  fnr = np.where(fn < pos, stats.beta.isf(beta / 2, fn + 1, np.maximum(pos - fn, 1)), 1.0)
  with np.errstate(divide="ignore", invalid="ignore"):
    one = np.where(1 - delta - fnr > 0, np.log(1 - delta - fnr) - np.log(fpr), -np.inf)
    two = np.where(1 - delta - fpr > 0, np.log(1 - delta - fpr) - np.log(fnr), -np.inf)
  return np.maximum(np.maximum(one, two), 0.0)


def bench_error_counts(results, settings: Settings):
  import jax.numpy as jnp
  import numpy as np

  from dpaudit import estimators
  for count in (1e4, 1e6):
    size = settings.size(count)

    def draw(seed, size=size):
      rng = np.random.default_rng(settings.seed + seed)
      neg = rng.integers(100, 100_000, size)
      pos = rng.integers(100, 100_000, size)
      return (rng.binomial(neg, 0.05), neg, rng.binomial(pos, 0.3), pos)

    def make(seed, draw=draw):
      fp, neg, fn, pos = (jnp.asarray(v) for v in draw(seed))
      return lambda: estimators.epsilon_from_error_counts(fp, neg, fn, pos, 1e-5, 0.05)

    ours, out = time_dpaudit(make, settings)
    args = draw(0)
    peer_t, ref = time_peer(lambda: scipy_error_count_epsilon(*args, 1e-5, 0.05), settings)
    # scipy's beta.ppf is itself wrong at some inputs (1.17.1: beta.ppf(0.975, 1000, 20175) is
    # 0.125, the binomial tail there is 0.0); such elements are counted and left out.
    wrong = scipy_inconsistent_error_counts(*args, 0.05)
    keep = ~wrong
    record(results, f"epsilon_from_error_counts {size:.0e} tests", "error_counts", ours,
           {"scipy": peer_t}, "ratio >= 1 vs scipy (no jax-/tf-privacy counterpart)", 1.0,
           extra={"max_rel_diff": max_rel_diff(np.asarray(out)[keep], ref[keep]),
                  "scipy_wrong_elements": int(np.sum(wrong))})


def scipy_inconsistent_error_counts(fp, neg, fn, pos, beta):
  """Elements where a scipy upper limit misses its own defining equation
  ``binom.cdf(k, n, limit) = beta / 2`` by more than 1e-6 relative."""
  import numpy as np
  from scipy import stats
  wrong = np.zeros(np.shape(fp), bool)
  for k, n in ((fp, neg), (fn, pos)):
    inside = k < n
    limit = stats.beta.isf(beta / 2, k + 1, np.maximum(n - k, 1))
    tail = stats.binom.cdf(k, n, limit)
    wrong |= inside & (np.abs(tail / (beta / 2) - 1.0) > 1e-6)
  return wrong
