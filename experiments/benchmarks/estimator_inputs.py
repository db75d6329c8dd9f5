"""Sizes and random inputs shared by the estimator benchmarks
(``experiments.benchmarks.estimators``,
``experiments.benchmarks.first_calls``)."""

from __future__ import annotations

import math


def scaled_size(count: float, scale: float) -> int:
  """``count`` times the benchmarks' ``--scale``, at least 4."""
  return max(int(round(count * scale)), 4)


def count_pairs(rng, size: int, max_trials: float):
  """k uniform on 0..n; n uniform on 1..max_trials up to 1e3, log-uniform above (so that a
  range up to 1e9 covers every scale rather than only n ~ 5e8)."""
  import numpy as np
  if max_trials <= 1e3:
    n = rng.integers(1, int(max_trials) + 1, size)
  else:
    n = np.maximum(np.round(np.exp(rng.uniform(0.0, math.log(max_trials), size))), 1)
  return rng.integers(0, n.astype(np.int64) + 1).astype(np.float64), n.astype(np.float64)


def tail_probabilities(rng, k, n):
  """p near k / n (where binomial tails are neither 0 nor 1), within a few standard deviations."""
  import numpy as np
  return np.clip((k + rng.normal(0, 2, k.shape) * np.sqrt(k + 1)) / n, 1e-12, 1 - 1e-12)
