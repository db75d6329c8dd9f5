"""First calls of dpaudit.estimators.fdp_one_run: the exact host path (NumPy/scipy) against the
compiled programs, and one compile per bucket of input sizes."""

import jax
import numpy as np
import pytest

from dpaudit.estimators import _compile, fdp_one_run
from tests.conftest import Lowerings


def _draw(rng, size):
  member = rng.random(size) < 0.5
  return rng.normal(2.0 * member, 1.0), member


M = np.array([1000.0, 100.0, 50.0, 200.0, 1000.0])
R = np.array([100.0, 100.0, 20.0, 40.0, 100.0])
V = np.array([95.0, 70.0, 20.0, 30.0, 50.0])
K = np.array([2.0, 2.0, 3.0, 4.0, 10.0])
SCORES, MEMBER = _draw(np.random.default_rng(1), 1000)  # the bucket of the compile count below
CALLS = {  # the epsilon bound's host path is the host mu's gdp_epsilon, both tested here
    "mu": lambda: fdp_one_run.fdp_one_run_mu(M, R, V, 0.05, K),
    "p_value": lambda: fdp_one_run.fdp_one_run_p_value(M[:2], R[:2], V[:2], 0.5),
    "from_scores": lambda: fdp_one_run.fdp_one_run_from_scores(SCORES, MEMBER, 1e-5,
                                                               num_guesses=[10, 20, 40]),
    "gdp": lambda: (fdp_one_run.gdp_epsilon([0.5, 2.0], 1e-5),
                    fdp_one_run.gdp_delta(1.0, [0.0, 1.0]),
                    fdp_one_run.gdp_tradeoff_curve(1.0, [0.0, 0.05, 1.0])),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_host_path_agrees_with_the_compiled_program(monkeypatch, name):
  compiled = CALLS[name]()
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, "host")
  before = _compile.host_calls[0]
  host = CALLS[name]()
  assert _compile.host_calls[0] - before == (name != "gdp")  # conversions are not counted
  for got, want in zip(jax.tree_util.tree_leaves(host), jax.tree_util.tree_leaves(compiled)):
    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=5e-9, atol=1e-12)
  if name in ("mu", "from_scores"):  # the bounds are not trivial
    assert np.max(jax.tree_util.tree_leaves(compiled)[0]) > 0.5


def test_host_path_only_for_few_recursion_steps(monkeypatch):
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, "host")
  monkeypatch.setattr(fdp_one_run, "HOST_STEPS", 50)
  before = _compile.host_calls[0]
  fdp_one_run.fdp_one_run_mu(1000, 100, 50)  # up to 50 steps: host
  fdp_one_run.fdp_one_run_mu(1000, 100, 51)  # 51: the compiled program
  assert _compile.host_calls[0] - before == 1


@pytest.mark.parametrize("kind", ["triples", "scores"])
def test_one_compile_for_sizes_in_a_bucket(kind):
  rng = np.random.default_rng(0)
  counts = []
  for size in (1000, 1001, 1002):  # one bucket (1024)
    if kind == "triples":
      r = rng.integers(10, 21, size).astype(float)
      args = (np.full(size, 100.0), r, np.floor(0.8 * r))
      call = lambda: fdp_one_run.fdp_one_run_mu(*args)
    else:
      scores, member = _draw(rng, size)
      call = lambda: fdp_one_run.fdp_one_run_from_scores(scores, member, 1e-5,
                                                         num_guesses=[10, 20, 40])
    with Lowerings() as lowerings:
      jax.block_until_ready(call())
    counts.append(lowerings.count)
  assert counts[0] <= 1 and counts[1:] == [0, 0]
