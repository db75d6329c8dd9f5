"""The calls whose first call in a fresh process ``experiments.benchmarks.first_calls`` times.

Each workload is ``build(rng, extra) -> call``: it draws its inputs (``extra`` more elements than
its nominal size, so that a run at ``extra=1`` fills the persistent cache with the program of
the same bucket at another size) and returns the call to time. :data:`PEERS` holds the first
call a user of scipy or jax-privacy would make instead, on the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from experiments.benchmarks.estimator_inputs import count_pairs, tail_probabilities

Build = Callable[[Any, int, float], Callable[[], Any]]


class Workload(NamedTuple):
  elements: float  # the largest input's nominal size (small: up to 1e4)
  build: Build


def _estimators():
  from dpaudit import estimators
  return estimators


def _size(count: float, scale: float, extra: int) -> int:
  return max(int(count * scale), 10) + extra


def _pairs(count: float, max_trials: float, fn: str) -> Workload:
  def build(rng, extra, scale):
    k, n = count_pairs(rng, _size(count, scale, extra), max_trials)
    if fn == "clopper_pearson":
      return lambda: _estimators().clopper_pearson(k, n, 0.05)
    p = tail_probabilities(rng, k, n)
    return lambda: getattr(_estimators(), fn)(k, n, p)
  return Workload(count, build)


def _error_counts(count: float) -> Workload:
  def build(rng, extra, scale):
    size = _size(count, scale, extra)
    neg, pos = rng.integers(100, 100_000, size), rng.integers(100, 100_000, size)
    fp, fn = rng.binomial(neg, 0.05), rng.binomial(pos, 0.3)
    return lambda: _estimators().epsilon_from_error_counts(fp, neg, fn, pos, 1e-5, 0.05)
  return Workload(count, build)


def draw_scores(rng, size: int):
  member = rng.random(size) < 0.5
  return rng.normal(0.6 * member, 1.0), member


def _scores(count: float, method: str) -> Workload:
  def build(rng, extra, scale):
    scores, member = draw_scores(rng, _size(count, scale, extra))
    return lambda: _estimators().epsilon_from_scores(scores[member], scores[~member], 0.0, 0.05,
                                                     method)
  return Workload(count, build)


def _one_run_scores(count: float, fn: str = "one_run_epsilon_from_scores") -> Workload:
  def build(rng, extra, scale):
    scores, member = draw_scores(rng, _size(count, scale, extra))
    if fn == "fdp_one_run_from_scores":
      return lambda: _estimators().fdp_one_run_from_scores(scores, member, 1e-5, 0.05)
    return lambda: _estimators().one_run_epsilon_from_scores(scores, member, 1e-5, 0.05)
  return Workload(count, build)


def _panoramia(count: float) -> Workload:
  def build(rng, extra, scale):
    member = rng.random(_size(count, scale, extra)) < 0.5
    baseline, mia = rng.normal(0.3 * member, 1.0), rng.normal(0.6 * member, 1.0)
    return lambda: _estimators().panoramia_bounds(baseline, mia, member, 0.05)
  return Workload(count, build)


def _one_run(m: float, r: int, v: int, fn: str = "one_run_epsilon") -> Workload:
  def build(rng, extra, scale):
    del rng
    m_s = _size(m, scale, extra)
    return lambda: getattr(_estimators(), fn)(m_s, r, v, 1e-8, 0.05)
  return Workload(1, build)


def _two_cut(count: float) -> Workload:
  def build(rng, extra, scale):
    import numpy as np
    trials = rng.integers(1000, 10**6, _size(count, scale, extra))
    cp, cq = rng.binomial(trials, 0.6), rng.binomial(trials, 0.4)
    orders = np.array([1.5, 2.0, 4.0, 8.0, 16.0])
    return lambda: _estimators().renyi_two_cut_lower_bound(cp, trials, cq, trials, orders, 0.05)
  return Workload(count, build)


def _k_cut(method: str, rows: int) -> Workload:
  def build(rng, extra, scale):
    import numpy as np
    total = _size(1e4, scale, 0)
    p = rng.multinomial(total, rng.dirichlet(np.ones(10), rows + extra))
    q = rng.multinomial(total, rng.dirichlet(np.ones(10), rows + extra))
    return lambda: _estimators().renyi_k_cut_lower_bound(p, q, np.array([2.0, 4.0]), 0.05,
                                                         method)
  return Workload(rows * 10, build)


def _roc_auc(count: float) -> Workload:
  def build(rng, extra, scale):
    scores, member = draw_scores(rng, _size(count, scale, extra))
    return lambda: _estimators().roc_auc(scores[member], scores[~member])
  return Workload(count, build)


def _front_door(count: float, fn: str) -> Workload:
  def build(rng, extra, scale):
    from dpaudit import audit
    scores, member = draw_scores(rng, _size(count, scale, extra))
    if fn == "from_scores":
      return lambda: audit.from_scores(scores[member], scores[~member], delta=1e-5)
    return lambda: audit.one_run_from_scores(scores, member, delta=1e-5)
  return Workload(count, build)


WORKLOADS: dict[str, Workload] = {
    "clopper_pearson_1e3": _pairs(1e3, 1e9, "clopper_pearson"),
    "clopper_pearson_1e4": _pairs(1e4, 1e6, "clopper_pearson"),
    "clopper_pearson_1e6": _pairs(1e6, 1e3, "clopper_pearson"),
    "binomial_sf_1e3": _pairs(1e3, 1e9, "binomial_sf"),
    "binomial_sf_1e6": _pairs(1e6, 1e9, "binomial_sf"),
    "error_counts_1e4": _error_counts(1e4),
    "error_counts_1e6": _error_counts(1e6),
    "scores_bonferroni_1e4": _scores(1e4, "bonferroni"),
    "scores_split_1e4": _scores(1e4, "split"),
    "scores_bonferroni_1e6": _scores(1e6, "bonferroni"),
    "panoramia_1e4": _panoramia(1e4),
    "panoramia_1e6": _panoramia(1e6),
    "one_run_scores_1e3": _one_run_scores(1e3),
    "one_run_scores_1e6": _one_run_scores(1e6),
    "one_run_m1e7_r100": _one_run(1e7, 100, 95),
    "fdp_one_run_epsilon_m1e4_r100": _one_run(1e4, 100, 95, "fdp_one_run_epsilon"),
    "fdp_one_run_scores_1e3": _one_run_scores(1e3, "fdp_one_run_from_scores"),
    "two_cut_1e4": _two_cut(1e4),
    "two_cut_1e6": _two_cut(1e6),
    "k_cut_sison_glaz_100x10": _k_cut("sison-glaz", 100),
    "k_cut_goodman_100x10": _k_cut("goodman", 100),
    "roc_auc_1e4": _roc_auc(1e4),
    "audit.from_scores_1e3": _front_door(1e3, "from_scores"),
    "audit.one_run_from_scores_1e3": _front_door(1e3, "one_run_from_scores"),
}


def _scipy_cp(rng, extra, scale):
  from experiments.benchmarks.estimators_counts import scipy_clopper_pearson
  k, n = count_pairs(rng, _size(1e3, scale, extra), 1e9)
  return lambda: scipy_clopper_pearson(k, n, 0.05)


def _scipy_sf(rng, extra, scale):
  from scipy import stats
  k, n = count_pairs(rng, _size(1e3, scale, extra), 1e9)
  p = tail_probabilities(rng, k, n)
  return lambda: stats.binom.sf(k - 1, n, p)


def _jax_privacy(method: str, count: float):
  def build(rng, extra, scale):
    from jax_privacy import auditing
    scores, member = draw_scores(rng, _size(count, scale, extra))
    auditor = auditing.CanaryScoreAuditor(scores[member], scores[~member])
    if method == "one_run":
      return lambda: auditor.epsilon_one_run(0.05, 1e-5)
    return lambda: auditor.epsilon_clopper_pearson(0.05, 1e-5, one_sided=False)
  return build


PEERS: dict[str, tuple[str, Build]] = {
    "clopper_pearson_1e3": ("scipy", _scipy_cp),
    "binomial_sf_1e3": ("scipy", _scipy_sf),
    "one_run_scores_1e3": ("jax-privacy", _jax_privacy("one_run", 1e3)),
    "audit.one_run_from_scores_1e3": ("jax-privacy", _jax_privacy("one_run", 1e3)),
    "audit.from_scores_1e3": ("jax-privacy", _jax_privacy("clopper_pearson", 1e3)),
}
"""The peer's first call on the same inputs (same draws), for the workloads that have one."""
