"""Renyi-cut and throughput workloads of :mod:`experiments.benchmarks.estimators`: the 2-cut
and k-cut lower bounds (``renyi``, against scipy and statsmodels) and Clopper-Pearson/binomial
throughput per precision on the default device (``throughput``)."""

from __future__ import annotations

import math
import sys
import time

from experiments.benchmarks.estimator_inputs import count_pairs, tail_probabilities
from experiments.benchmarks.estimators_counts import scipy_clopper_pearson
from experiments.benchmarks.estimators_timing import (
  AFTER_PEERS,
  Settings,
  max_rel_diff,
  record,
  time_dpaudit,
  time_peer,
)


def statsmodels_rows(counts, method, rows_timed):
  from statsmodels.stats.proportion import multinomial_proportions_confint
  start = time.perf_counter()
  for row in counts[:rows_timed]:
    multinomial_proportions_confint(row, 0.05, method=method)
  return (time.perf_counter() - start) / rows_timed * len(counts)


def bench_renyi(results, settings: Settings):
  import jax.numpy as jnp
  import numpy as np

  from dpaudit import estimators
  orders = np.array([1.5, 2.0, 4.0, 8.0, 16.0])
  for count in (1e4, 1e6):
    size = settings.size(count)

    def draw(seed, size=size):
      rng = np.random.default_rng(settings.seed + seed)
      trials = rng.integers(1000, 10**6, size)
      return (rng.binomial(trials, 0.6), trials, rng.binomial(trials, 0.4), trials)

    def make(seed, draw=draw):
      cp, tp, cq, tq = (jnp.asarray(v) for v in draw(seed))
      return lambda: estimators.renyi_two_cut_lower_bound(cp, tp, cq, tq, orders, 0.05)

    ours, out = time_dpaudit(make, settings)
    cp, tp, cq, tq = draw(0)

    def scipy_two_cut():
      b = 1 - math.sqrt(0.95)
      pl, pu = scipy_clopper_pearson(cp.astype(float), tp.astype(float), b)
      ql, qu = scipy_clopper_pearson(cq.astype(float), tq.astype(float), b)
      x = np.where(pl > qu, pl, np.where(pu < ql, pu, 0.5))[:, None]
      y = np.where(pl > qu, qu, np.where(pu < ql, ql, 0.5))[:, None]
      value = np.log(x ** orders * y ** (1 - orders) + (1 - x) ** orders * (1 - y) ** (1 - orders))
      return np.where(((pl > qu) | (pu < ql))[:, None], np.maximum(value / (orders - 1), 0), 0)

    peer_t, ref = time_peer(scipy_two_cut, settings)
    record(results, f"renyi_two_cut_lower_bound {size:.0e} count pairs", "renyi", ours,
           {"scipy": peer_t}, "ratio >= 1 vs scipy (no jax-/tf-privacy counterpart)", 1.0,
           extra={"max_rel_diff": max_rel_diff(out, ref)})
  # k-cut: 100 histograms of 10 classes with 1e4 and 1e6 trials each (statsmodels computes the
  # simultaneous intervals one histogram per call).
  for total in (1e4, 1e6):
    rows = max(int(100 * min(settings.scale * 1000, 1.0)), 2)

    def draw(seed, total=total, rows=rows):
      rng = np.random.default_rng(settings.seed + seed)
      p = rng.dirichlet(np.ones(10), rows)
      q = 0.8 * p + 0.2 * rng.dirichlet(np.ones(10), rows)
      return (np.stack([rng.multinomial(int(total), x) for x in p]).astype(float),
              np.stack([rng.multinomial(int(total), x) for x in q]).astype(float))

    for method in ("sison-glaz", "goodman"):

      def make(seed, draw=draw, method=method):
        p, q = (jnp.asarray(v) for v in draw(seed))
        return lambda: estimators.renyi_k_cut_lower_bound(p, q, orders, 0.05, method)

      ours, _ = time_dpaudit(make, settings)
      p, q = draw(0)
      timed = min(rows, 2 if method == "sison-glaz" else rows)
      seconds = 2 * statsmodels_rows(p, method, timed)  # both distributions' intervals
      record(results, f"renyi_k_cut_lower_bound[{method}] {rows} histograms x {total:.0e} "
             "trials", "renyi", ours,
             {"statsmodels": {"median_s": seconds, "repeats": 1,
                              "extrapolated_from_rows": timed}},
             "ratio >= 1 vs statsmodels (per histogram)", 1.0)


def bench_throughput(results, settings: Settings):
  """Clopper-Pearson limits and binomial upper tails per second on the default device (the GPU
  when there is one) at each of ``--throughput_sizes`` count pairs, in each precision.

  float32 runs with ``jax_enable_x64`` off, as a user without x64 would call the estimators;
  counts above 2^24 are then rounded to float32, and the reference is scipy (float64) on the
  rounded counts, so ``max_rel_diff`` measures the arithmetic alone. scipy's time is for
  ``--throughput_reference`` pairs on one CPU core, scaled to the size (``pairs_per_s``)."""
  import jax
  import numpy as np
  from scipy import stats

  from dpaudit import estimators
  calls = {"clopper_pearson": lambda k, n, p: estimators.clopper_pearson(k, n, 0.05),
           "binomial_sf": lambda k, n, p: estimators.binomial_sf(k, n, p)}
  reference = max(settings.throughput_reference, 1)
  for max_n in (1e3, 1e6, 1e9):
    for size in settings.throughput_sizes:
      draws = {}
      for seed in (0, 1):
        rng = np.random.default_rng(settings.seed + seed)
        k, n = count_pairs(rng, size, max_n)
        draws[seed] = (k, n, tail_probabilities(rng, k, n))
      for precision in settings.throughput_precisions:
        jax.config.update("jax_enable_x64", precision == "float64")
        try:
          dtype = np.dtype(precision)
          for name, call in calls.items():

            def make(seed, call=call, dtype=dtype):
              k, n, p = (jax.device_put(v.astype(dtype)) for v in draws[seed])
              return lambda: call(k, n, p)

            ours, out = time_dpaudit(make, settings)
            del ours[AFTER_PEERS]  # no peer is timed here
            k, n, p = (v[:reference].astype(dtype).astype(np.float64) for v in draws[0])
            start = time.perf_counter()
            if name == "clopper_pearson":
              ref = scipy_clopper_pearson(k, n, 0.05)
              got = (np.asarray(out.lower[:reference]), np.asarray(out.upper[:reference]))
            else:
              ref = (stats.binom.sf(k - 1, n, p),)
              got = (np.asarray(out[:reference]),)
            scipy_s = (time.perf_counter() - start) * size / len(k)
            floor = np.finfo(dtype).tiny * 1e6  # relative accuracy is not asked of subnormals
            diff = max(max_rel_diff(g[r > floor], r[r > floor]) for g, r in zip(got, ref))
            entry = {"name": f"{name} {size:.0e} n<={max_n:.0e} {precision}",
                     "group": "throughput", "precision": precision, "pairs": size,
                     "max_trials": max_n, "dpaudit": ours,
                     "pairs_per_s": size / ours["median_s"],
                     "scipy_one_core_s": scipy_s, "ratio": scipy_s / ours["median_s"],
                     "max_rel_diff": diff, "checked_pairs": len(k),
                     "target": None, "target_met": None}
            results.append(entry)
            print(f"{entry['name']}: {ours['median_s'] * 1e3:.2f} ms "
                  f"({entry['pairs_per_s']:.3g} pairs/s, compile {ours['compile_s']:.2f} s), "
                  f"scipy one core {scipy_s:.3g} s, max rel diff {diff:.2g}", file=sys.stderr)
            del out
        finally:
          jax.config.update("jax_enable_x64", True)
