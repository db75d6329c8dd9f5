"""The vectorised logarithms of dpaudit.estimators._elementary against numpy and mpmath."""

import math

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

from dpaudit.estimators import _compile, _elementary

TINY = np.finfo(np.float64).tiny


def _ulps(got, want):
  return np.abs(got - want) / np.spacing(np.abs(want))


@pytest.fixture(autouse=True)
def _float64():
  with jax.enable_x64(True):
    yield


def _run(fn, x):
  return np.asarray(_compile.jit(fn)(jnp.asarray(x, jnp.float64)))


def test_log_within_two_ulps_over_the_whole_range_and_near_one():
  rng = np.random.default_rng(0)
  x = np.concatenate([np.exp(rng.uniform(-707.0, 709.0, 200_000)), rng.uniform(0.3, 3.0, 100_000),
                      1.0 + rng.uniform(-1e-6, 1e-6, 20_000), [1.0, 2.0, 0.5, np.finfo(float).max,
                                                            TINY]])
  got = _run(_elementary.log, x)
  assert _ulps(got, np.log(x)).max() <= 2.0
  assert got[-5] == 0.0


def test_log1mexp_within_four_ulps_of_mpmath():
  rng = np.random.default_rng(2)
  v = np.concatenate([-np.exp(rng.uniform(-40.0, 6.5, 3000)), rng.uniform(-1.0, 0.0, 1000),
                      [-math.log(2.0), -0.5, -1e-300]])
  with mpmath.workdps(400):
    want = np.array([float(mpmath.log(-mpmath.expm1(mpmath.mpf(x)))) for x in v])
  keep = np.abs(want) > 1e-280
  assert _ulps(_run(_elementary.log1mexp, v)[keep], want[keep]).max() <= 4.0


@pytest.mark.parametrize("fn, x, want", [
    (_elementary.log, [0.0, -1.0, np.inf, np.nan], [-np.inf, np.nan, np.inf, np.nan]),
    (_elementary.log1mexp, [0.0, -np.inf, 1.0, np.nan], [-np.inf, 0.0, np.nan, np.nan]),
])
def test_limits_and_domain(fn, x, want):
  np.testing.assert_array_equal(_run(fn, x), np.asarray(want))


def test_float32_takes_jax_numpy():
  x = jnp.asarray([0.5, 2.0], jnp.float32)
  np.testing.assert_array_equal(_elementary.log(x), jnp.log(x))
  np.testing.assert_allclose(_elementary.log1mexp(-x), jnp.log(-jnp.expm1(-x)), rtol=1e-6)


def test_quotient_within_two_ulps_of_the_division():
  rng = np.random.default_rng(0)
  x, y = (rng.normal(size=10_000) * 10.0 ** rng.uniform(-100, 100, 10_000) for _ in range(2))
  got = np.asarray(jax.jit(_elementary.quotient)(x, y))
  assert _ulps(got, x / y).max() <= 2.0
  np.testing.assert_array_equal(_elementary.quotient(jnp.asarray([1.0, -1.0, 0.0]), 0.0),
                                [np.inf, -np.inf, np.nan])


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's fusion")
def test_a_shared_quotient_fuses_into_its_users_where_a_division_does_not():
  # Why quotient exists: a division of two arrays with two users becomes a kernel of its own
  # (with the fusion emitters, which the large batches take; the suite's default is the loop
  # emitters, tests/conftest.py).
  options = {**_compile.CPU_COMPILER_OPTIONS,  # jaxlib 0.11 has the fusion emitters alone
             **({"xla_cpu_use_fusion_emitters": True} if _compile.LOOP_EMITTERS_AVAILABLE
                else {})}

  def kernels(divide):
    program = jax.jit(lambda x, y: (lambda v: v * v + jnp.exp(v))(divide(x, y)))
    x = jnp.ones((1000,), jnp.float64)
    return program.lower(x, x).compile(options).as_text().count(" fusion(")
  assert kernels(_elementary.quotient) == 1
  assert kernels(jnp.divide) == 2
