"""The estimators' compile options (dpaudit.estimators._compile) change speed, never values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import estimators
from dpaudit.estimators import _compile, approx_dp, binomial, multinomial, one_run, renyi_cuts


def test_cpu_options_leave_the_values_unchanged():
  rng = np.random.default_rng(0)
  n = np.round(np.exp(rng.uniform(0.0, np.log(1e9), 500)))
  k = rng.integers(0, n.astype(np.int64) + 1).astype(float)
  args = (jnp.asarray(k), jnp.asarray(n), jnp.asarray(0.05))
  tuned = binomial._clopper_pearson.tuned(*args, alternative="two-sided")
  plain = binomial._clopper_pearson.plain(*args, alternative="two-sided")
  for a, b in zip(tuned, plain):
    np.testing.assert_allclose(a, b, rtol=1e-14, atol=0)


def test_estimators_inside_a_callers_jit_and_vmap():
  k, n = np.array([0.0, 3.0, 10.0]), np.array([10.0, 10.0, 10.0])
  eager = estimators.clopper_pearson(k, n, 0.05)
  # Constant arguments inside a trace: JAX refuses compiler options on a nested jit, so the
  # estimator is traced into the caller's program with the caller's options.
  constant = jax.jit(lambda: estimators.clopper_pearson(k, n, 0.05))()
  traced = jax.jit(lambda k: estimators.clopper_pearson(k, n, 0.05))(jnp.asarray(k))
  mapped = jax.vmap(lambda k: estimators.clopper_pearson(k, 10.0, 0.05))(jnp.asarray(k))
  for other in (constant, traced, mapped):
    np.testing.assert_allclose(other.lower, eager.lower, rtol=1e-14)
    np.testing.assert_allclose(other.upper, eager.upper, rtol=1e-14)


def test_other_errors_are_not_swallowed():
  @_compile.jit
  def fails(x):
    raise ValueError("x is not allowed")

  with pytest.raises(ValueError, match="x is not allowed"):
    fails(1.0)


def test_emitters_chosen_per_program():
  # The solver-heavy programs keep the fusion emitters; the sort-and-scan ones take the loop
  # emitters, which compile faster (values: tests/estimators/test_production_compile.py).
  loop = (approx_dp._bonferroni, approx_dp._split, one_run._epsilon_jit, one_run._from_scores,
          multinomial._sison_glaz_core, renyi_cuts._k_cut_lower_bound)
  for program in loop:
    assert program.compiler_options == _compile.LOOP_EMITTER_OPTIONS
  for program in (binomial._clopper_pearson, binomial._binomial_tails, one_run._p_value_jit):
    assert program.compiler_options == _compile.CPU_COMPILER_OPTIONS
  assert _compile.LOOP_EMITTER_OPTIONS == {**_compile.CPU_COMPILER_OPTIONS,
                                           "xla_cpu_use_fusion_emitters": False}
