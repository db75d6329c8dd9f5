"""Tests for dpaudit.dpsgd.noise: the law of the added noise (chi-square interval on the
variance, normal interval on the mean, Kolmogorov-Smirnov), independence across steps and
leaves, determinism, the zero-noise identity, optax composition and jit."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

from dpaudit import dpsgd, prng
from dpaudit.dpsgd import noise

SIGNIFICANCE = 1e-6  # per statistical check, at a fixed seed


def _zeros(n=200_000, dtype=jnp.float64):
  return {"w": jnp.zeros((n,), dtype)}


def _noise_draws(noise_multiplier, l2_clip_norm, key, updates, num_steps=1):
  tx = noise.gaussian_noise(noise_multiplier, l2_clip_norm, key)
  state = tx.init(updates)
  out = []
  for _ in range(num_steps):
    noisy, state = tx.update(updates, state)
    out.append(noisy)
  return out, state


def test_noise_variance_mean_and_normality():
  sigma, clip = 1.3, 0.7
  std = sigma * clip
  (draw,), _ = _noise_draws(sigma, clip, jax.random.key(0), _zeros())
  x = np.asarray(draw["w"])
  n = x.size
  # (n - 1) s^2 / std^2 ~ chi^2(n - 1)
  stat = (n - 1) * np.var(x, ddof=1) / std ** 2
  lo, hi = stats.chi2.ppf([SIGNIFICANCE / 2, 1 - SIGNIFICANCE / 2], n - 1)
  assert lo <= stat <= hi
  # the interval is tight enough to tell sigma * C from sigma or C alone (a 1.5% band here)
  assert not lo <= (n - 1) * np.var(x, ddof=1) / sigma ** 2 <= hi
  z = stats.norm.isf(SIGNIFICANCE / 2)
  assert abs(np.mean(x)) <= z * std / math.sqrt(n)
  assert stats.kstest(x / std, "norm").pvalue > SIGNIFICANCE


def test_noise_is_added_to_the_updates_in_their_dtype():
  key = jax.random.key(1)
  g = {"a": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones((4,), jnp.float32),
       "c": jnp.ones((), jnp.bfloat16)}
  (noisy,), _ = _noise_draws(0.5, 2.0, key, g)
  (pure,), _ = _noise_draws(0.5, 2.0, key, jax.tree.map(jnp.zeros_like, g))
  for name in g:
    assert noisy[name].dtype == g[name].dtype and noisy[name].shape == g[name].shape
    np.testing.assert_array_equal(noisy[name], g[name] + pure[name])
    assert np.all(np.asarray(pure[name], np.float64) != 0)


def test_noise_differs_across_steps_and_leaves_and_is_uncorrelated():
  n = 50_000
  updates = {"a": jnp.zeros((n,)), "b": jnp.zeros((n,))}
  draws, _ = _noise_draws(1.0, 1.0, jax.random.key(2), updates, num_steps=2)
  series = [np.asarray(d[k]) for d in draws for k in ("a", "b")]
  bound = stats.norm.isf(SIGNIFICANCE / 2) / math.sqrt(n)  # |r| under independence
  for i in range(len(series)):
    for j in range(i + 1, len(series)):
      assert not np.array_equal(series[i], series[j])
      assert abs(np.corrcoef(series[i], series[j])[0, 1]) <= bound


def test_deterministic_given_the_key_and_different_for_other_keys():
  updates = {"w": jnp.zeros((5, 3)), "v": jnp.zeros((2,))}
  a, state_a = _noise_draws(1.0, 1.0, jax.random.key(3), updates, num_steps=3)
  b, state_b = _noise_draws(1.0, 1.0, jax.random.key(3), updates, num_steps=3)
  c, _ = _noise_draws(1.0, 1.0, jax.random.key(4), updates, num_steps=3)
  for x, y, z in zip(a, b, c):
    jax.tree.map(np.testing.assert_array_equal, x, y)
    assert not np.array_equal(x["w"], z["w"])
  np.testing.assert_array_equal(jax.random.key_data(state_a.key),
                                jax.random.key_data(state_b.key))


def test_key_types():
  """A raw uint32 key gives the same noise as the typed key of the same implementation; custom
  implementations (dpaudit.prng.threefry_unrolled) work too."""
  updates = _zeros(64)
  (typed,), _ = _noise_draws(1.0, 1.0, jax.random.key(5), updates)
  (raw,), _ = _noise_draws(1.0, 1.0, jax.random.PRNGKey(5), updates)
  np.testing.assert_array_equal(typed["w"], raw["w"])
  custom_key = jax.random.key(5, impl=prng.threefry_unrolled)
  (first, second), state = _noise_draws(1.0, 1.0, custom_key, updates, num_steps=2)
  assert np.all(np.isfinite(first["w"])) and np.std(first["w"]) > 0.5
  assert not np.array_equal(first["w"], second["w"])
  assert jax.random.key_impl(state.key) == jax.random.key_impl(custom_key)


@pytest.mark.parametrize("noise_multiplier,l2_clip_norm", [(0.0, 1.0), (2.0, 0.0)])
def test_zero_noise_is_the_identity(noise_multiplier, l2_clip_norm):
  key = jax.random.key(6)
  g = {"w": jnp.linspace(-1.0, 1.0, 7), "b": jnp.float32(3.0)}
  tx = noise.gaussian_noise(noise_multiplier, l2_clip_norm, key)
  state = tx.init(g)
  out, new_state = tx.update(g, state)
  jax.tree.map(np.testing.assert_array_equal, out, g)
  np.testing.assert_array_equal(jax.random.key_data(new_state.key), jax.random.key_data(key))
  out_jit, _ = jax.jit(tx.update)(g, state)
  jax.tree.map(np.testing.assert_array_equal, out_jit, g)


def test_composition_with_sgd_is_minus_lr_times_noisy_sum_over_batch():
  sigma, clip, batch, lr = 1.1, 0.5, 32.0, 0.1
  key = jax.random.key(7)
  params = {"w": jnp.ones((3, 4)), "b": jnp.zeros((4,))}
  grads = {"w": jnp.full((3, 4), 2.0), "b": jnp.arange(4.0)}  # the summed clipped gradients
  tx = optax.chain(noise.gaussian_noise(sigma, clip, key), optax.scale(1.0 / batch),
                   optax.sgd(lr))
  (pure,), _ = _noise_draws(sigma, clip, key, jax.tree.map(jnp.zeros_like, grads))
  update, _ = tx.update(grads, tx.init(params), params)
  expected = jax.tree.map(lambda g, z: -lr * (g + z) / batch, grads, pure)
  jax.tree.map(lambda u, e: np.testing.assert_allclose(u, e, rtol=1e-13), update, expected)
  # dp_aggregate is the same chain of noise and scaling
  agg = optax.chain(dpsgd.dp_aggregate(sigma, clip, batch, key), optax.sgd(lr))
  update_agg, _ = agg.update(grads, agg.init(params), params)
  jax.tree.map(np.testing.assert_array_equal, update_agg, update)


def test_jit_and_scan_with_adam():
  """The state carries the key through a jitted training loop; jit equals eager step by step."""
  key = jax.random.key(8)
  tx = optax.chain(dpsgd.dp_aggregate(1.0, 1.0, 16.0, key), optax.adam(1e-2))
  params = {"w": jnp.ones((5,))}

  def step(carry, _):
    p, s = carry
    grads = jax.tree.map(lambda x: 2.0 * x, p)
    upd, s = tx.update(grads, s, p)
    return (optax.apply_updates(p, upd), s), upd["w"]

  (_, _), jit_updates = jax.jit(lambda c: jax.lax.scan(step, c, length=4))(
      (params, tx.init(params)))
  carry = (params, tx.init(params))
  for t in range(4):
    carry, upd = step(carry, None)
    np.testing.assert_allclose(jit_updates[t], upd, rtol=1e-12)
  assert len({tuple(np.asarray(u)) for u in jit_updates}) == 4  # fresh noise at every step


def test_traced_noise_multiplier_under_vmap():
  key = jax.random.key(9)
  updates = {"w": jnp.zeros((10,))}

  def noisy(sigma):
    tx = noise.gaussian_noise(sigma, 0.5, key)
    return tx.update(updates, tx.init(updates))[0]["w"]

  out = jax.vmap(noisy)(jnp.array([0.0, 1.0, 3.0]))
  np.testing.assert_array_equal(out[0], 0.0)
  np.testing.assert_allclose(out[2], 3.0 * out[1], rtol=1e-14)


@pytest.mark.parametrize("call,match", [
    (lambda k: noise.gaussian_noise(-1.0, 1.0, k),
     r"noise_multiplier=-1.0 is outside the valid range \[0, inf\)"),
    (lambda k: noise.gaussian_noise(math.nan, 1.0, k), r"noise_multiplier=nan is outside"),
    (lambda k: noise.gaussian_noise(math.inf, 1.0, k), r"noise_multiplier=inf is outside"),
    (lambda k: noise.gaussian_noise(jnp.ones(2), 1.0, k), r"noise_multiplier must be a scalar"),
    (lambda k: noise.gaussian_noise(1.0, -0.5, k), r"l2_clip_norm=-0.5 is outside"),
    (lambda k: noise.gaussian_noise(1.0, 1.0, 0), r"key must be a jax PRNG key"),
    (lambda k: noise.gaussian_noise(1.0, 1.0, jax.random.split(k)),
     r"key must be a single PRNG key of shape \(\), got shape \(2,\)"),
    (lambda k: noise.gaussian_noise(1.0, 1.0, jnp.zeros(2)), r"raw uint32 key"),
    (lambda k: dpsgd.dp_aggregate(1.0, 1.0, 0.0, k),
     r"expected_batch_size=0.0 is outside the valid range \(0, inf\)"),
    (lambda k: dpsgd.dp_aggregate(1.0, 1.0, math.inf, k), r"expected_batch_size=inf"),
    (lambda k: dpsgd.dp_aggregate(-2.0, 1.0, 8.0, k), r"noise_multiplier=-2.0 is outside"),
])
def test_validation(call, match):
  with pytest.raises(ValueError, match=match):
    call(jax.random.key(0))


def test_integer_updates_are_rejected():
  tx = noise.gaussian_noise(1.0, 1.0, jax.random.key(0))
  updates = {"counts": jnp.arange(3)}
  with pytest.raises(ValueError, match=r"updates\['counts'\] has dtype int"):
    tx.update(updates, tx.init(updates))
