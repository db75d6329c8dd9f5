"""First calls of the score bounds (approx_dp, one_run, panoramia): the exact host paths
(NumPy/scipy) against the compiled programs, one compile per bucket of input sizes, and the
threaded host sort (dpaudit.estimators._sorting)."""

import jax
import numpy as np
import pytest

from dpaudit.estimators import _sorting, approx_dp, one_run, panoramia
from tests.conftest import Lowerings


def _members(rng, n, shift):
  member = rng.random(n) < 0.5
  return rng.normal(shift * member, 1.0).round(2), member  # rounded: ties


CALLS = {
    "epsilon_from_scores[bonferroni]": lambda rng, n: approx_dp.epsilon_from_scores(
        rng.normal(1.0, 1.0, n).round(2), rng.normal(0.0, 1.0, n - 3).round(2), 1e-5, 0.05,
        "bonferroni"),
    "epsilon_from_scores[split]": lambda rng, n: approx_dp.epsilon_from_scores(
        rng.normal(1.0, 1.0, n - 5), rng.normal(0.0, 1.0, n), 0.0, 0.05, "split"),
    "epsilon_from_error_counts": lambda rng, n: approx_dp.epsilon_from_error_counts(
        rng.integers(0, 50, n), 1000, rng.integers(0, 500, n), 1000, 1e-5),
    "one_run_epsilon_from_scores": lambda rng, n: one_run.one_run_epsilon_from_scores(
        *_members(rng, n, 1.0), 1e-5),
    "one_run_epsilon_from_scores[top, delta=0]": lambda rng, n: (
        one_run.one_run_epsilon_from_scores(*_members(rng, n, 1.0), mode="top")),
    "one_run_epsilon": lambda rng, n: one_run.one_run_epsilon(
        1000, rng.integers(50, 100, n), rng.integers(30, 51, n), 1e-6),
    "one_run_p_value": lambda rng, n: one_run.one_run_p_value(
        1000, rng.integers(50, 100, n), rng.integers(30, 51, n), rng.uniform(0.0, 2.0, n), 1e-6),
    "one_run_epsilon_ceiling": lambda rng, n: one_run.one_run_epsilon_ceiling(
        1000, rng.integers(50, 100, n)),
    "panoramia_bounds": lambda rng, n: panoramia.panoramia_bounds(
        _members(rng, n, 0.3)[0], *_members(rng, n, 0.8)),
    "panoramia_null": lambda rng, n: panoramia.panoramia_null(
        jax.random.key(n), *_members(rng, n, 0.3), num_samples=2),
}


@pytest.mark.parametrize("name", CALLS)
def test_new_sizes_in_a_bucket_compile_nothing(name, monkeypatch):
  monkeypatch.setenv("DPAUDIT_FIRST_CALLS", "compiled")
  rng = np.random.default_rng(0)
  jax.block_until_ready(CALLS[name](rng, 1000))  # compiles (or loads) the bucket's programs
  with Lowerings() as lowered:
    for size in (1001, 1002):
      jax.block_until_ready(CALLS[name](rng, size))
  assert lowered.count == 0


def _assert_close(host, compiled):
  host, compiled = jax.tree_util.tree_leaves(host), jax.tree_util.tree_leaves(compiled)
  assert len(host) == len(compiled)
  for x, y in zip(host, compiled):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    assert x.shape == y.shape
    np.testing.assert_array_equal(np.isnan(x), np.isnan(y))
    x, y = np.nan_to_num(x), np.nan_to_num(y)
    # 1e-9 relative; the one-run solvers stop at 1e-10 of max(epsilon, 1).
    np.testing.assert_array_less(np.abs(x - y), 1e-9 * np.maximum(np.abs(y), 1.0) + 1e-300)


@pytest.mark.parametrize("name", CALLS)
def test_host_path_agrees_with_the_program(name, monkeypatch):
  for seed in (1, 2):
    size = 1000 + seed
    monkeypatch.setenv("DPAUDIT_FIRST_CALLS", "host")
    host = CALLS[name](np.random.default_rng(seed), size)
    monkeypatch.setenv("DPAUDIT_FIRST_CALLS", "compiled")
    _assert_close(host, CALLS[name](np.random.default_rng(seed), size))


def test_threaded_sort_is_numpys_sort(monkeypatch):
  monkeypatch.setattr(_sorting, "PARALLEL_ELEMENTS", 64)
  monkeypatch.setattr(_sorting, "sort_threads", lambda: 3)
  rng = np.random.default_rng(4)
  x = rng.normal(size=1001).round(1)  # many ties
  valid = rng.random(1001) < 0.9
  for stable in (False, True):
    order = _sorting._host_argsort_descending(stable)(x)
    assert np.all(np.diff(x[order]) <= 0) and sorted(order) == list(range(1001))
    if stable:
      np.testing.assert_array_equal(order, np.argsort(-x, kind="stable"))
    order = _sorting._host_argsort_descending(stable)(x, valid)
    real = int(valid.sum())
    np.testing.assert_array_equal(order[real:], np.flatnonzero(~valid))
    if stable:
      np.testing.assert_array_equal(order[:real],
                                    np.flatnonzero(valid)[np.argsort(-x[valid], kind="stable")])
