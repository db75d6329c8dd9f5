"""The Monte Carlo engine: counts, reproducibility, sharding, resumption, bad input."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from dpaudit import montecarlo
from dpaudit.mechanisms import noisy_argmax

HIST = jnp.array([14.0, 12.0, 10.0, 8.0, 6.0])


def test_counts_sum_to_num_trials_and_are_reproducible():
  key = jax.random.key(0)
  counts = montecarlo.count_outcomes(noisy_argmax, key, 100_003, 5, args=(HIST, 2.0),
                                     chunk_size=4096)
  assert counts.dtype == np.int64 and counts.sum() == 100_003
  again = montecarlo.count_outcomes(noisy_argmax, key, 100_003, 5, args=(HIST, 2.0),
                                    chunk_size=4096)
  np.testing.assert_array_equal(counts, again)
  other = montecarlo.count_outcomes(noisy_argmax, jax.random.key(1), 100_003, 5,
                                    args=(HIST, 2.0), chunk_size=4096)
  assert not np.array_equal(counts, other)


def test_counts_do_not_depend_on_calls_per_round():
  key = jax.random.key(7)
  a = montecarlo.count_outcomes(noisy_argmax, key, 50_000, 5, args=(HIST, 2.0), chunk_size=1024,
                                chunks_per_call=1)
  b = montecarlo.count_outcomes(noisy_argmax, key, 50_000, 5, args=(HIST, 2.0), chunk_size=1024,
                                chunks_per_call=13)
  np.testing.assert_array_equal(a, b)


def test_counts_follow_the_mechanism_distribution():
  """Chi-square goodness of fit against an independent NumPy simulation's frequencies."""
  n = 400_000
  counts = montecarlo.count_outcomes(noisy_argmax, jax.random.key(2), n, 5, args=(HIST, 2.0))
  rng = np.random.default_rng(0)
  reference = np.bincount(np.argmax(np.asarray(HIST) + 2.0 * rng.standard_normal((n, 5)), 1),
                          minlength=5)
  table = np.stack([counts, reference])
  keep = table.min(axis=0) > 5
  _, p_value, _, _ = scipy.stats.chi2_contingency(table[:, keep])
  assert p_value > 1e-3


def test_rbg_keys_work():
  counts = montecarlo.count_outcomes(noisy_argmax, jax.random.key(0, impl="rbg"), 10_000, 5,
                                     args=(HIST, 2.0))
  assert counts.sum() == 10_000


def test_resumes_from_checkpoint_after_interruption(tmp_path):
  key, path = jax.random.key(5), str(tmp_path / "mc.npz")
  kwargs = dict(args=(HIST, 2.0), chunk_size=1024, chunks_per_call=3)
  full = montecarlo.count_outcomes(noisy_argmax, key, 40_000, 5, **kwargs)

  class Interrupt(Exception):
    pass

  calls = []

  def stop_after_two(done, total):
    calls.append(done)
    if len(calls) == 2:
      raise Interrupt

  with pytest.raises(Interrupt):
    montecarlo.count_outcomes(noisy_argmax, key, 40_000, 5, progress=stop_after_two,
                              checkpoint_path=path, **kwargs)
  assert os.path.exists(path)
  seen = []
  resumed = montecarlo.count_outcomes(noisy_argmax, key, 40_000, 5, checkpoint_path=path,
                                      progress=lambda d, t: seen.append(d), **kwargs)
  np.testing.assert_array_equal(full, resumed)
  assert seen[0] > calls[1]  # the first report after resuming is past the finished work
  # A different run (another key) ignores the stale checkpoint instead of reusing it.
  fresh = montecarlo.count_outcomes(noisy_argmax, jax.random.key(6), 40_000, 5,
                                    checkpoint_path=path, **kwargs)
  np.testing.assert_array_equal(
      fresh, montecarlo.count_outcomes(noisy_argmax, jax.random.key(6), 40_000, 5, **kwargs))


_SHARDED_SCRIPT = """
import json, os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, jax.numpy as jnp
from dpaudit import montecarlo
from dpaudit.mechanisms import noisy_argmax
hist = jnp.array([14.0, 12.0, 10.0, 8.0, 6.0])
key = jax.random.key(11)
two = montecarlo.count_outcomes(noisy_argmax, key, 70_001, 5, args=(hist, 2.0), chunk_size=2048)
one = montecarlo.count_outcomes(noisy_argmax, key, 70_001, 5, args=(hist, 2.0), chunk_size=2048,
                                devices=jax.devices()[:1], chunks_per_call=18)
print(json.dumps({"devices": len(jax.devices()), "two": two.tolist(), "one": one.tolist()}))
"""


def test_sharded_over_two_devices_matches_one_device():
  out = subprocess.run([sys.executable, "-c", _SHARDED_SCRIPT], capture_output=True, text=True,
                       check=True, cwd=os.path.dirname(os.path.dirname(__file__)))
  result = json.loads(out.stdout.strip().splitlines()[-1])
  assert result["devices"] == 2
  assert result["two"] == result["one"] and sum(result["two"]) == 70_001


def test_out_of_range_outcomes_raise():
  with pytest.raises(ValueError, match="outside \\[0, 3\\)"):
    montecarlo.count_outcomes(noisy_argmax, jax.random.key(0), 1000, 3, args=(HIST, 2.0))


def test_non_scalar_sample_fn_raises():
  with pytest.raises(ValueError, match="one integer outcome per trial"):
    montecarlo.count_outcomes(lambda k: jnp.zeros(2, jnp.int32), jax.random.key(0), 10, 2)


@pytest.mark.parametrize("kwargs,match", [
    (dict(num_trials=0), "num_trials=0"),
    (dict(num_outcomes=0), "num_outcomes=0"),
    (dict(chunk_size=0), "chunk_size=0"),
])
def test_argument_validation(kwargs, match):
  call = dict(num_trials=10, num_outcomes=5, args=(HIST, 2.0))
  call.update(kwargs)
  with pytest.raises(ValueError, match=match):
    montecarlo.count_outcomes(noisy_argmax, jax.random.key(0), **call)


def test_plan_shrinks_chunks_for_small_runs():
  plan = montecarlo.make_plan(1000, 2**16, 1)
  assert plan.chunk_size == 1024 and plan.num_chunks == 1
  plan = montecarlo.make_plan(10**9, 2**16, 2)
  assert plan.chunk_size == 2**16 and plan.chunks_per_call * plan.chunk_size == 2**24


def test_noisy_argmax_mechanism():
  key = jax.random.key(0)
  assert int(noisy_argmax(key, jnp.array([1.0, 5.0, 2.0]), 0.0)) == 1
  batch = noisy_argmax(key, jnp.zeros((7, 4)), 1.0)
  assert batch.shape == (7,) and batch.dtype == jnp.int32
  with pytest.raises(ValueError, match="sigma=-1"):
    noisy_argmax(key, jnp.zeros(3), -1.0)
