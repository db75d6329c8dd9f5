"""Score-based workloads of :mod:`experiments.benchmarks.estimators`: epsilon from membership
scores (``scores``, against scipy, jax-privacy and tf-privacy), PANORAMIA's bounds
(``panoramia``) and the one-run bounds (``one_run``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from experiments.benchmarks.estimators_timing import (
  Settings,
  max_rel_diff,
  record,
  time_dpaudit,
  time_peer,
)


def _score_peers(ins, outs, method: str) -> dict[str, Callable[[], Any]]:
  peers = {}
  try:
    from jax_privacy import auditing
    strategy = (auditing.Bonferroni() if method == "bonferroni"
                else auditing.Split(threshold_estimation_frac=0.5, seed=0))
    peers["jax_privacy"] = lambda: auditing.CanaryScoreAuditor(ins, outs).epsilon_clopper_pearson(
        0.05, 0.0, one_sided=False, threshold_strategy=strategy)
  except ImportError:
    pass
  try:
    from tensorflow_privacy.privacy.privacy_tests import epsilon_lower_bound as elb
    if method == "bonferroni":
      peers["tf_privacy"] = lambda: elb.EpsilonLowerBound(
          ins, outs, alpha=0.05 / (len(ins) + len(outs) + 2)).compute_epsilon_lower_bound(
              elb.BoundMethod.CLOPPER_PEARSON, k=1)
  except ImportError:
    pass
  return peers


def draw_scores(seed: int, size: int):
  import numpy as np
  rng = np.random.default_rng(seed)
  return rng.normal(1.0, 1.0, size), rng.normal(0.0, 1.0, size)


def bench_scores(results, settings: Settings):
  import jax.numpy as jnp

  from dpaudit import estimators
  for count in (1e4, 1e6):
    size = settings.size(count)
    for method in ("bonferroni", "split"):

      def make(seed, size=size, method=method):
        ins, outs = (jnp.asarray(v) for v in draw_scores(settings.seed + seed, size))
        return lambda: estimators.epsilon_from_scores(ins, outs, 0.0, 0.05, method)

      ours, out = time_dpaudit(make, settings)
      ins, outs = draw_scores(settings.seed, size)
      peers, values = {}, {}
      for name, call in _score_peers(ins, outs, method).items():
        peers[name], values[name] = time_peer(call, settings)
      record(results, f"epsilon_from_scores[{method}] {size:.0e} scores per list", "scores",
             ours, peers, "ratio >= 1 vs the fastest of jax-privacy / tf-privacy", 1.0,
             extra={"epsilon": float(out.epsilon),
                    "peer_epsilon": {k: float(v if not hasattr(v, "__len__") else v[0])
                                     for k, v in values.items()},
                    "note": "the peers' bounds differ by design: jax-privacy applies its "
                            "Bonferroni factor to the thresholds on its ROC hull only"})


def scipy_panoramia(baseline, mia, member, significance):
  """PANORAMIA's c_lb and {c+eps}_lb over thresholds with scipy's Beta quantiles."""
  import numpy as np
  from scipy import stats
  out = []
  for scores in (baseline, mia):
    order = np.argsort(-scores, kind="stable")
    s = scores[order]
    tp = np.cumsum(member[order])
    r = np.arange(1, len(s) + 1)
    end = np.r_[s[:-1] > s[1:], True]
    level = significance / 2 / end.sum()
    p = np.where(tp > 0, stats.beta.ppf(level, np.maximum(tp, 1), r - tp + 1), 0.0)
    with np.errstate(divide="ignore"):
      bound = np.where(p > 0.5, np.log(p) - np.log1p(-p), 0.0)
    out.append(float(np.max(np.where(end, bound, 0.0))))
  return out


def bench_panoramia(results, settings: Settings):
  import jax.numpy as jnp
  import numpy as np

  from dpaudit import estimators
  for count in (1e4, 1e6):
    size = settings.size(count)

    def draw(seed, size=size):
      rng = np.random.default_rng(settings.seed + seed)
      member = rng.random(size) < 0.5
      return (rng.normal(0.3 * member, 1.0), rng.normal(0.6 * member, 1.0), member)

    def make(seed, draw=draw):
      b, m, s = (jnp.asarray(v) for v in draw(seed))
      return lambda: estimators.panoramia_bounds(b, m, s, 0.05)

    ours, out = time_dpaudit(make, settings)
    b, m, s = draw(0)
    peer_t, ref = time_peer(lambda: scipy_panoramia(b, m, s.astype(float), 0.05), settings)
    record(results, f"panoramia_bounds {size:.0e} points", "panoramia", ours,
           {"scipy": peer_t}, "ratio >= 1 vs scipy (no jax-/tf-privacy counterpart)", 1.0,
           extra={"max_rel_diff": max_rel_diff([out.c_lb, out.c_plus_eps_lb], ref)})


def bench_one_run(results, settings: Settings):
  import jax.numpy as jnp
  import numpy as np

  from dpaudit import estimators
  for count in (1e4, 1e6):
    size = settings.size(count)

    def draw(seed, size=size):
      rng = np.random.default_rng(settings.seed + seed)
      member = rng.random(size) < 0.5
      return rng.normal(0.5 * member, 1.0), member

    def make(seed, draw=draw):
      scores, member = (jnp.asarray(v) for v in draw(seed))
      return lambda: estimators.one_run_epsilon_from_scores(scores, member, 1e-5, 0.05)

    ours, out = time_dpaudit(make, settings)
    scores, member = draw(0)
    peers = {}
    try:
      from jax_privacy import auditing
      peers["jax_privacy"], _ = time_peer(
          lambda: auditing.CanaryScoreAuditor(scores[member], scores[~member]).epsilon_one_run(
              0.05, 1e-5), settings)
    except ImportError:
      pass
    record(results, f"one_run_epsilon_from_scores {size:.0e} canaries", "one_run", ours,
           peers, "ratio >= 1 vs jax-privacy epsilon_one_run", 1.0,
           extra={"epsilon": float(out.epsilon)})
  # Cost grows with the number of guesses r, not with the number of canaries m.
  for m, r, v, delta, limit in ((10**7, 100, 95, 1e-8, 0.1), (10**6, 10**6, 600_000, 1e-7, 2.0)):
    m_s, r_s, v_s = (max(int(x * settings.scale), 10) if settings.scale < 1 else x
                     for x in (m, r, v))

    def make(seed, m_s=m_s, r_s=r_s, v_s=v_s, delta=delta):
      return lambda: estimators.one_run_epsilon(m_s, r_s, v_s - seed, delta, 0.05)

    ours, out = time_dpaudit(make, settings)
    record(results, f"one_run_epsilon m={m_s:.0e} r={r_s:.0e}", "one_run", ours, {},
           f"under {limit:g} s", target_seconds=limit, extra={"epsilon": float(out)})
