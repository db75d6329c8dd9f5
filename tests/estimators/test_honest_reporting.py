"""What the estimators' results say about themselves (issue 12): optimistic modes are marked,
and the one-run audit reports the power it lost to delta."""

import numpy as np
import pytest

from dpaudit import estimators


def _one_run_inputs(m=1000, seed=0):
  rng = np.random.default_rng(seed)
  member = rng.random(m) < 0.5
  return rng.normal(2.0 * member, 1.0), member


@pytest.mark.parametrize("correction,optimistic", [("bonferroni", False), ("none", True)])
def test_one_run_marks_the_uncorrected_maximum_optimistic(correction, optimistic):
  scores, member = _one_run_inputs()
  result = estimators.one_run_epsilon_from_scores(scores, member, correction=correction)
  assert result.optimistic is optimistic


def test_one_run_reports_the_ceiling_lost_to_delta():
  """m * delta = 0.5 (m = 1000, delta = 5e-4): the delta term leaves at most a small fraction
  of what the grid could certify with delta = 0; the two ceilings are exact one-run bounds at
  v = r."""
  scores, member = _one_run_inputs()
  free = estimators.one_run_epsilon_from_scores(scores, member, 0.0)
  costly = estimators.one_run_epsilon_from_scores(scores, member, 5e-4)
  grid = np.asarray(costly.grid)
  level = float(costly.per_test_significance)
  expected = np.max(np.asarray(estimators.one_run_epsilon(1000, grid, grid, 5e-4, level)))
  np.testing.assert_allclose(float(costly.max_epsilon_ceiling), expected, rtol=1e-9)
  np.testing.assert_allclose(float(costly.max_epsilon_ceiling_without_delta),
                             float(free.max_epsilon_ceiling), rtol=1e-9)
  assert float(costly.max_epsilon_ceiling) < 0.2 * float(free.max_epsilon_ceiling)
  assert float(costly.epsilon) <= float(costly.max_epsilon_ceiling) + 1e-12
  # With delta = 0 the two ceilings coincide.
  np.testing.assert_array_equal(np.asarray(free.grid_epsilon_ceiling),
                                np.asarray(free.grid_epsilon_ceiling_without_delta))


def test_one_run_with_delta_matches_the_bracketed_search():
  """The delta > 0 search agrees with the p-value crossing found by bisection on
  one_run_p_value."""
  m, r, v, delta, beta = 1000, 200, 170, 1e-5, 0.05
  bound = float(estimators.one_run_epsilon(m, r, v, delta, beta))
  lo, hi = 0.0, 10.0
  for _ in range(80):
    mid = 0.5 * (lo + hi)
    if float(estimators.one_run_p_value(m, r, v, mid, delta)) <= beta:
      lo = mid
    else:
      hi = mid
  np.testing.assert_allclose(bound, lo, rtol=1e-8)


@pytest.mark.parametrize("correction,optimistic", [("bonferroni", False), ("none", True)])
def test_panoramia_marks_the_uncorrected_maximum_optimistic(correction, optimistic):
  rng = np.random.default_rng(1)
  member = rng.random(500) < 0.5
  result = estimators.panoramia_bounds(rng.normal(member, 1.0), rng.normal(2.0 * member, 1.0),
                                       member, correction=correction)
  assert result.optimistic is optimistic
