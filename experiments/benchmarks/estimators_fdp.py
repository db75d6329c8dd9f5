"""f-DP one-run workloads of :mod:`experiments.benchmarks.estimators` (group ``fdp``):
dpaudit's :func:`~dpaudit.estimators.fdp_one_run_mu` / ``fdp_one_run_epsilon`` against the
grid method of Meta's PrivacyGuard (``privacy_guard/analysis/mia/fdp_analysis_node.py``, not on
PyPI: the PyPI package of that name is unrelated), written here from its description: a Python
loop over 1,000 noise levels sigma = 0.001 + 0.01 i (mu = 1 / sigma), running the recursion
of Mahloujifar, Melis & Chaudhuri (ICML 2025) at each, strongest curve first, and reporting the
first one rejected. Its value is a grid point at or below dpaudit's exact root; dpaudit's
epsilon must be at least the grid's and within one grid step of it."""

from __future__ import annotations

import math
import statistics

from experiments.benchmarks.estimators_timing import Settings, record, time_dpaudit, time_peer

GRID_SIGMAS = tuple(0.001 + 0.01 * i for i in range(1000))
"""The peer's grid of noise levels, strongest curve (smallest sigma) first."""
ISSUE_TRIPLES = ((1000, 100, 100), (1000, 100, 95), (10000, 1000, 950))
"""(m, r, v) of the three published PrivacyGuard values below (delta 1e-6, 95%)."""
ISSUE_EPSILONS = (6.13, 3.73, 4.25)
"""PrivacyGuard's epsilons on them (two decimals), which the reimplemented grid must give."""
DELTA, SIGNIFICANCE = 1e-6, 0.05
PEER_SUBSET = 8
"""Batch problems the peer is timed on (its time per problem is extrapolated to the batch)."""
_NORMAL = statistics.NormalDist()


def _f_bar(x: float, mu: float) -> float:
  if x >= 1.0:
    return 1.0
  return 0.5 * math.erfc(-(_NORMAL.inv_cdf(x) - mu) / math.sqrt(2.0))


def grid_rejects(m: int, r: int, v: int, mu: float, beta: float = SIGNIFICANCE) -> bool:
  """The recursion at gamma = beta, one step at a time (k = 2), and its test."""
  a, b = beta * v / m, beta * (r - v) / m
  for i in range(v - 1, -1, -1):
    b_next = max(b, _f_bar(a, mu))
    a += i / (r - i) * (b_next - b)
    b = b_next
    if a + b > r / m:
      return True
  return a + b > r / m


def grid_mu(m: int, r: int, v: int) -> float:
  """The peer's answer: 1 / sigma at the first (smallest) grid sigma rejected, else 0."""
  for sigma in GRID_SIGMAS:
    if grid_rejects(m, r, v, 1.0 / sigma):
      return 1.0 / sigma
  return 0.0


def draw_triples(rng, size: int, max_guesses: int):
  """m uniform in [1e3, 1e4]; r uniform in [max_guesses // 10, max_guesses] (at most m);
  v = floor(0.9 r) minus 0..r/10 (accuracies about 0.8-0.9)."""
  import numpy as np
  m = rng.integers(1000, 10001, size)
  r = np.minimum(rng.integers(max(max_guesses // 10, 10), max_guesses + 1, size), m)
  v = np.floor(0.9 * r) - rng.integers(0, r // 10 + 1)
  return m.astype(np.float64), r.astype(np.float64), v.astype(np.float64)


def bench_fdp(results, settings: Settings):
  import numpy as np

  from dpaudit import estimators
  triples = np.array(ISSUE_TRIPLES, np.float64).T

  def make_issue(seed):
    m, r, v = triples[0], triples[1], triples[2] - seed  # new values of the same shape
    return lambda: estimators.fdp_one_run_epsilon(m, r, v, DELTA, SIGNIFICANCE)

  ours, out = time_dpaudit(make_issue, settings)
  peer, grid = time_peer(lambda: [grid_mu(*t) for t in ISSUE_TRIPLES], settings)
  ours_eps = np.asarray(out, np.float64)
  grid_eps = np.asarray(estimators.gdp_epsilon(np.array(grid), DELTA), np.float64)
  mu = np.asarray(estimators.fdp_one_run_mu(*triples, SIGNIFICANCE), np.float64)
  # One grid step: the grid's sigma is the first at or above 1 / mu_L, within 0.01 of it.
  steps = [1.0 / g - 1.0 / u for g, u in zip(grid, mu)]
  checks = {"at_least_grid": bool(np.all(ours_eps >= grid_eps * (1 - 1e-12))),
            "within_one_grid_step": bool(all(0.0 <= s <= 0.01 + 1e-12 for s in steps)),
            "grid_reproduces_issue": bool(np.all(np.abs(grid_eps - ISSUE_EPSILONS) <= 0.006))}
  record(results, "fdp_one_run_epsilon on PrivacyGuard's 3 published (m, r, v)", "fdp", ours,
         {"privacyguard_grid_reimplemented": peer}, "ratio >= 1 vs the 1,000-point sigma grid", 1.0,
         extra={"epsilon": ours_eps.tolist(), "grid_epsilon": grid_eps.tolist(),
                "triples": [list(t) for t in ISSUE_TRIPLES], "checks": checks,
                "peer_note": "PrivacyGuard's grid method, reimplemented in Python (not its code)"})
  for max_guesses in (120, 1000):
    size = settings.size(1e4)

    def make(seed, size=size, max_guesses=max_guesses):
      m, r, v = draw_triples(np.random.default_rng(settings.seed + seed), size, max_guesses)
      return lambda: estimators.fdp_one_run_mu(m, r, v, SIGNIFICANCE)

    ours, out = time_dpaudit(make, settings)
    m, r, v = draw_triples(np.random.default_rng(settings.seed), size, max_guesses)
    subset = np.linspace(0, size - 1, min(PEER_SUBSET, size)).astype(int)
    peer, grid = time_peer(lambda: [grid_mu(int(m[i]), int(r[i]), int(v[i])) for i in subset],
                           settings)
    peer = dict(peer, median_s=peer["median_s"] * size / len(subset),
                extrapolated_from=len(subset))
    ours_mu = np.asarray(out, np.float64)[subset]
    record(results, f"fdp_one_run_mu {size:.0e} (m, r, v), r <= {max_guesses}", "fdp", ours,
           {"privacyguard_grid_reimplemented": peer}, "under 0.1 s", target_seconds=0.1,
           extra={"mean_correct": float(np.mean(v)), "max_correct": float(np.max(v)),
                  "checks": {"at_least_grid": bool(np.all(ours_mu >= np.array(grid)))},
                  "peer_note": f"grid method timed on {len(subset)} problems, extrapolated"})
