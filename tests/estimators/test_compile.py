"""The estimators' compile options (dpaudit.estimators._compile) change speed, never values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import estimators
from dpaudit.estimators import (
  _compile,
  approx_dp,
  binomial,
  multinomial,
  one_run,
  panoramia,
  renyi_cuts,
)


@pytest.fixture(autouse=True)
def _own_emitter_choices(monkeypatch):
  """The programs' own emitter choices (tests/conftest.py forces the loop emitters)."""
  monkeypatch.delenv(_compile.EMITTERS_VARIABLE, raising=False)


def test_cpu_options_leave_the_values_unchanged():
  rng = np.random.default_rng(0)
  n = np.round(np.exp(rng.uniform(0.0, np.log(1e9), 500)))
  k = rng.integers(0, n.astype(np.int64) + 1).astype(float)
  args = (jnp.asarray(k), jnp.asarray(n), jnp.asarray(0.05))
  plain = binomial._clopper_pearson.plain(*args, alternative="two-sided")
  for program in (binomial._clopper_pearson.fusion, binomial._clopper_pearson.loop):
    for a, b in zip(program(*args, alternative="two-sided"), plain):
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
  # emitters above SMALL_ELEMENTS, which compile faster, and the fusion emitters up to it (their
  # first calls there come from the host paths while the program compiles); the error-count
  # bound takes the loop emitters (values: tests/estimators/test_production_compile.py).
  x, big = jnp.zeros(3), np.zeros(_compile.SMALL_ELEMENTS + 1)
  assert one_run._epsilon_jit.options_for(x) == _compile.CPU_COMPILER_OPTIONS
  assert one_run._epsilon_jit.options_for(big) == _compile.LOOP_EMITTER_OPTIONS
  # Those whose reductions are branch tests, integer counts, maxima, minima (and the
  # Sison-Glaz intervals' short sums) also leave out the tree rewriting of reductions.
  for program in (approx_dp._bonferroni, approx_dp._split, one_run._from_scores):
    assert program.options_for(x) == _compile.without_tree_reductions(
        _compile.CPU_COMPILER_OPTIONS)
    assert program.options_for(big) == _compile.without_tree_reductions(
        _compile.LOOP_EMITTER_OPTIONS)
  for program in (approx_dp._epsilon_from_error_counts, multinomial._sison_glaz_core,
                  renyi_cuts._k_cut_lower_bound):
    assert program.options_for(x) == _compile.without_tree_reductions(
        _compile.LOOP_EMITTER_OPTIONS)
  assert one_run._p_value_jit.options_for(x) == _compile.CPU_COMPILER_OPTIONS
  # The binomial tails' only reductions are branch tests: no tree rewriting.
  for program in (binomial._binomial_tails, binomial._binomial_sf, binomial._binomial_cdf):
    assert program.options_for(x) == _compile.without_tree_reductions(
        _compile.CPU_COMPILER_OPTIONS)
  loop = {"xla_cpu_use_fusion_emitters": False} if _compile.LOOP_EMITTERS_AVAILABLE else {}
  assert _compile.LOOP_EMITTER_OPTIONS == {**_compile.CPU_COMPILER_OPTIONS, **loop}
  # jaxlib 0.11 has no loop emitters and rejects their option.
  assert _compile.LOOP_EMITTERS_AVAILABLE == (jax.__version_info__ < (0, 11))


def test_tree_reductions_off_adds_one_disabled_pass_and_keeps_the_values():
  options = _compile.without_tree_reductions(_compile.LOOP_EMITTER_OPTIONS)
  assert options["xla_disable_hlo_passes"].split(",")[-1] == _compile.TREE_REDUCTION_PASS
  assert {**options, "xla_disable_hlo_passes": ""} == {
      **_compile.LOOP_EMITTER_OPTIONS, "xla_disable_hlo_passes": ""}
  rng = np.random.default_rng(3)
  x = jnp.asarray(rng.normal(size=(3, 70_000)) > 2.5)

  def tests(x):
    return jnp.any(x), jnp.all(x), jnp.any(x, axis=1), jnp.all(~x, axis=1)

  ours = _compile.jit(tests, tree_reductions=False)
  assert ours.options_for(x) == _compile.without_tree_reductions(_compile.CPU_COMPILER_OPTIONS)
  for a, b in zip(ours(x), tests(np.asarray(x))):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("size, fusion", [(1, False), (10**5, False),
                                          (_compile.LARGE_BATCH - 1, False),
                                          (_compile.LARGE_BATCH, True), (10**6, True)])
def test_clopper_pearson_takes_the_fusion_emitters_for_large_batches(size, fusion):
  # By the largest argument as passed (before broadcasting): here the counts; the scalar
  # significance counts one element.
  k = jax.ShapeDtypeStruct((size,), jnp.float64)
  options = binomial._clopper_pearson.options_for(k, k, jnp.float64(0.05),
                                                  alternative="two-sided")
  chosen = _compile.CPU_COMPILER_OPTIONS if fusion else _compile.LOOP_EMITTER_OPTIONS
  assert options == _compile.without_tree_reductions(chosen)


@pytest.mark.parametrize("program", [renyi_cuts._two_cut, panoramia._panoramia])
def test_two_cut_and_panoramia_take_the_loop_emitters_for_large_batches(program):
  # By the largest argument: 2^18 elements (the 2-cut's counts; PANORAMIA's stacked scores,
  # two rows of 2^17) and more take the loop emitters.
  small = jnp.zeros((2, 10))
  below, large = (jax.ShapeDtypeStruct((2, n), jnp.float64) for n in ((1 << 17) - 1, 1 << 17))
  fusion, loop = (_compile.without_tree_reductions(options) for options in (
      _compile.CPU_COMPILER_OPTIONS, _compile.LOOP_EMITTER_OPTIONS))
  assert program.options_for(small, small) == fusion
  assert program.options_for(below, small) == fusion
  assert program.options_for(large, small) == loop


def test_emitter_choice_counts_the_largest_argument():
  choice = _compile.fusion_from(100)
  assert not choice.fusion(99) and choice.fusion(100)
  choice = _compile.fusion_below(100)
  assert choice.fusion(99) and not choice.fusion(100)
  assert _compile._largest_size((jnp.zeros((3, 4)), 2.0), {"y": np.zeros(5)}) == 12
  assert _compile._largest_size((1.0,), {}) == 0


def test_emitters_forced_by_the_environment(monkeypatch):
  x = jax.ShapeDtypeStruct((10**6,), jnp.float64)
  monkeypatch.setenv(_compile.EMITTERS_VARIABLE, "loop")
  assert binomial._clopper_pearson.options_for(x, x, 0.05) == _compile.without_tree_reductions(
      _compile.LOOP_EMITTER_OPTIONS)
  monkeypatch.setenv(_compile.EMITTERS_VARIABLE, "Fusion")
  assert approx_dp._bonferroni.options_for(x) == _compile.without_tree_reductions(
      _compile.CPU_COMPILER_OPTIONS)
  monkeypatch.setenv(_compile.EMITTERS_VARIABLE, "auto")
  assert approx_dp._bonferroni.options_for(x) == _compile.without_tree_reductions(
      _compile.LOOP_EMITTER_OPTIONS)
  monkeypatch.setenv(_compile.EMITTERS_VARIABLE, "fastest")
  with pytest.raises(ValueError, match="DPAUDIT_CPU_EMITTERS='fastest' is not one of auto"):
    estimators.clopper_pearson(np.array([1.0]), np.array([3.0]), 0.05)


def test_program_arguments_stay_on_the_host_until_the_call():
  """_compile.argument: host values become NumPy arrays (cast to the dtype asked for), JAX
  arrays stay JAX arrays, and tracers pass through, so the estimators' programs take their
  host inputs in one transfer at the call."""
  for value in (0.05, [1, 2, 3], np.arange(4), np.float32(2.0), True):
    out = _compile.argument(value, jnp.float64)
    assert type(out) is np.ndarray and out.dtype == np.float64
    np.testing.assert_array_equal(out, np.asarray(value, np.float64))
  assert type(_compile.argument([1, 2])) is np.ndarray
  device = jnp.arange(3)
  assert _compile.argument(device) is device
  cast = _compile.argument(device, jnp.float64)
  assert isinstance(cast, jax.Array) and cast.dtype == jnp.float64
  seen = []
  jax.jit(lambda t: seen.append(_compile.argument(t, jnp.float64)) or t)(jnp.zeros(2))
  assert isinstance(seen[0], jax.core.Tracer) and seen[0].dtype == jnp.float64


def test_cpu_paths_follow_the_default_device_and_committed_arguments(monkeypatch):
  cpu = jax.devices("cpu")[0]
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")  # as on a machine with a GPU
  assert _compile.default_platform() == "gpu"
  with jax.default_device(cpu):
    assert _compile.default_platform() == "cpu"
  with jax.default_device("cpu"):
    assert _compile.default_platform() == "cpu"
  assert _compile.platform((jax.device_put(jnp.ones(2), cpu),)) == "cpu"
  assert _compile.platform((jnp.ones(2),)) == "gpu"  # uncommitted: where the default puts it
  assert _compile.platform((np.ones(2),), {"x": 1.0}) == "gpu"


def test_accelerator_paths_give_the_cpu_paths_values(monkeypatch):
  # The branches an accelerator takes (the device's sort and cumulative sum instead of NumPy
  # callbacks, one pass instead of CPU chunks, no XLA:CPU options), run here on the CPU with
  # the default backend reported as a GPU. Sizes no other test uses, so that every program is
  # traced afresh on the patched branch.
  rng = np.random.default_rng(7)
  size = 70_001  # over one CPU chunk (65,536) of the solvers
  n = np.round(np.exp(rng.uniform(0.0, np.log(1e6), size)))
  k = rng.integers(0, n.astype(np.int64) + 1).astype(float)
  ins, outs = rng.normal(1.0, 1.0, 3001), rng.normal(0.0, 1.0, 3001)
  scores, member = rng.normal(0.0, 1.0, 3003), rng.random(3003) < 0.5
  calls = {
      "clopper_pearson": lambda: estimators.clopper_pearson(k, n, 0.05),
      "binomial_sf": lambda: estimators.binomial_sf(k, n, np.clip(k / n, 1e-9, 1 - 1e-9)),
      "scores": lambda: estimators.epsilon_from_scores(ins, outs, 0.0, 0.05, "bonferroni"),
      "split": lambda: estimators.epsilon_from_scores(ins, outs, 0.0, 0.05, "split"),
      "one_run": lambda: estimators.one_run_epsilon_from_scores(scores, member, 1e-5, 0.05),
  }
  on_cpu = {name: jax.tree.map(np.asarray, call()) for name, call in calls.items()}
  # Patched, each call goes to the programs compiled without the CPU options, traced here for
  # the first time with these shapes, so on the accelerator's branches.
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  for name, call in calls.items():
    for a, b in zip(jax.tree.leaves(call()), jax.tree.leaves(on_cpu[name])):
      np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12, atol=0, err_msg=name)
