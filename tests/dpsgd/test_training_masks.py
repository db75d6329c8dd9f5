"""make_step's example mask and Dirac canaries, and make_run (alone and vmapped)."""

import functools

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dpaudit import models
from dpaudit.dpsgd import training as train

N, D, K = 24, 5, 3


def _toy_data(n=N, d=D, classes=K, seed=0):
  rng = np.random.default_rng(seed)
  features = rng.normal(size=(n, d)).astype(np.float32)
  labels = ((features[:, 0] > 0).astype(np.int32) + (features[:, 1] > 1)) % classes
  return features, labels.astype(np.int32)


def _model():
  return models.MLP((4,), K, example_ndim=1)


def _config(**kw):
  base = dict(num_steps=4, sampling_rate=0.5, noise_multiplier=0.7, l2_clip_norm=0.5,
              learning_rate=0.2, physical_batch_size=8)
  base.update(kw)
  return train.TrainConfig(**base)


def _flat(params):
  return np.asarray(jax.flatten_util.ravel_pytree(params)[0])


@functools.cache
def _jitted_run(config, num_examples, coordinates):
  run = train.make_run(_model(), config, num_examples, jnp.zeros((1, D), jnp.float32),
                       dirac_coordinates=None if coordinates is None else np.array(coordinates))
  return jax.jit(run)


def _make_and_run(config, features, labels, example_mask=None, dirac_mask=None, key=3,
                  dirac_coordinates=None):
  coordinates = None if dirac_coordinates is None else tuple(int(c) for c in dirac_coordinates)
  run = _jitted_run(config, features.shape[0], coordinates)
  return run(jax.random.key(key), jnp.asarray(features), jnp.asarray(labels), example_mask,
             dirac_mask)


def test_masked_rows_never_contribute():
  features, labels = _toy_data()
  mask = np.ones(N, bool)
  mask[[1, 5, 6, 17]] = False
  other = features.copy()
  other[~mask] = 1e3 * np.random.default_rng(1).normal(size=(int((~mask).sum()), D))
  other_labels = labels.copy()
  other_labels[~mask] = (labels[~mask] + 1) % K
  config = _config()
  a = _make_and_run(config, features, labels, jnp.asarray(mask))
  b = _make_and_run(config, other, other_labels, jnp.asarray(mask))
  np.testing.assert_allclose(_flat(a.params), _flat(b.params), rtol=1e-6, atol=1e-7)
  np.testing.assert_array_equal(a.batch_sizes, b.batch_sizes)
  # And they do contribute when unmasked (the test is not vacuous).
  c = _make_and_run(config, other, other_labels, jnp.asarray(np.ones(N, bool)))
  assert not np.allclose(_flat(a.params), _flat(c.params))


def test_all_true_mask_equals_no_mask():
  features, labels = _toy_data()
  config = _config()
  a = _make_and_run(config, features, labels)
  b = _make_and_run(config, features, labels, jnp.ones(N, bool))
  np.testing.assert_allclose(_flat(a.params), _flat(b.params), rtol=1e-6, atol=1e-7)
  np.testing.assert_array_equal(a.batch_sizes, b.batch_sizes)
  np.testing.assert_array_equal(_flat(a.initial_params), _flat(b.initial_params))


def test_batch_size_counts_only_unmasked_sampled_rows():
  features, labels = _toy_data()
  config = _config(num_steps=1, sampling_rate=1.0, noise_multiplier=0.0)
  mask = np.arange(N) % 3 != 0
  state, optimizer = train.init_state(jax.random.key(0), _model(), features[:1], config, N)
  step = jax.jit(train.make_step(_model(), optimizer, config, N))
  _, full = step(state, features, labels)
  _, masked = step(state, features, labels, jnp.asarray(mask))
  assert int(full.batch_size) == N
  assert int(masked.batch_size) == int(mask.sum())
  # q < 1: per step, batch size with the mask = sampled rows that are unmasked. The sampled
  # rows are the same with and without the mask (same key), so masked <= unmasked, and over
  # many steps the ratio is about the unmasked fraction.
  config = _config(num_steps=80, sampling_rate=0.5, noise_multiplier=0.0)
  plain = _make_and_run(config, features, labels)
  with_mask = _make_and_run(config, features, labels, jnp.asarray(mask))
  assert np.all(with_mask.batch_sizes <= plain.batch_sizes)
  assert float(np.sum(with_mask.batch_sizes)) == pytest.approx(
      float(np.sum(plain.batch_sizes)) * float(mask.mean()), rel=0.1)
  # All rows masked: nothing is sampled.
  none = _make_and_run(config, features, labels, jnp.zeros(N, bool))
  assert np.all(none.batch_sizes == 0)


def test_masked_loss_metric_ignores_masked_rows():
  features, labels = _toy_data()
  config = _config(num_steps=1, sampling_rate=1.0, noise_multiplier=0.0)
  mask = np.arange(N) < N // 2
  state, optimizer = train.init_state(jax.random.key(0), _model(), features[:1], config, N)
  step = jax.jit(train.make_step(_model(), optimizer, config, N))
  _, masked = step(state, features, labels, jnp.asarray(mask))
  logits = _model().apply({"params": state.params}, features[mask])
  expected = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[mask][:, None], 1))
  np.testing.assert_allclose(masked.mean_loss, expected, rtol=1e-5)


def test_dirac_canary_moves_its_coordinate_by_lr_clip_over_n():
  clip = 0.5
  # No noise, q = 1, SGD: the canary adds C to its coordinate of the clipped sum and the
  # update divides by the expected batch size qN = N, so after one step, relative to the same
  # run with the canary out, exactly the in-canaries' coordinates moved, by -eta * C / N.
  features, labels = _toy_data()
  eta = 0.3
  config = _config(num_steps=1, sampling_rate=1.0, noise_multiplier=0.0, l2_clip_norm=clip,
                   learning_rate=eta)
  num_params = _flat(_model().init(jax.random.key(0), features[:1])["params"]).size
  coordinates = np.array([0, 7, num_params - 1])  # two first-layer weights, one output bias
  dirac_in = jnp.asarray([True, False, True])
  w1 = _make_and_run(config, features, labels, dirac_mask=dirac_in, dirac_coordinates=coordinates)
  wo1 = _make_and_run(config, features, labels, dirac_mask=jnp.zeros(3, bool),
                      dirac_coordinates=coordinates)
  d1 = _flat(w1.params) - _flat(wo1.params)
  expected = np.zeros_like(d1)
  expected[coordinates[[0, 2]]] = -eta * clip / N
  np.testing.assert_allclose(d1, expected, atol=1e-7)
  # dirac_mask=None means every canary is in.
  all_in = _make_and_run(config, features, labels, dirac_coordinates=coordinates)
  d_all = _flat(all_in.params) - _flat(wo1.params)
  expected[coordinates[1]] = -eta * clip / N
  np.testing.assert_allclose(d_all, expected, atol=1e-7)


def test_dirac_canary_on_a_dead_coordinate_moves_exactly():
  # A coordinate whose data gradient is always zero (the first-layer weight of an input
  # feature that is zero in every example): over T steps it moves by exactly -T eta C / N.
  features, labels = _toy_data()
  features[:, 0] = 0.0
  eta, clip, steps = 0.25, 0.7, 5
  config = _config(num_steps=steps, sampling_rate=1.0, noise_multiplier=0.0, l2_clip_norm=clip,
                   learning_rate=eta)
  params = _model().init(jax.random.key(0), features[:1])["params"]
  # Position in the flat vector of kernel[0, 0] of the first Dense layer.
  flat, unravel = jax.flatten_util.ravel_pytree(params)
  marker = np.zeros(flat.size)
  marker_tree = unravel(jnp.asarray(marker))
  first = sorted(marker_tree.keys())[0]
  marker_tree[first]["kernel"] = marker_tree[first]["kernel"].at[0, 0].set(1.0)
  coordinate = int(np.argmax(_flat(marker_tree)))
  for mask_value in (True, False):
    out = _make_and_run(config, features, labels, dirac_mask=jnp.asarray([mask_value]),
                        dirac_coordinates=np.array([coordinate]))
    moved = _flat(out.params)[coordinate] - _flat(out.initial_params)[coordinate]
    expected = -steps * eta * clip / N if mask_value else 0.0
    np.testing.assert_allclose(moved, expected, rtol=1e-5, atol=1e-9)


def test_vmapped_runs_equal_single_runs():
  features, labels = _toy_data()
  config = _config(num_steps=5)
  run = train.make_run(_model(), config, N, jnp.asarray(features[:1]),
                       dirac_coordinates=np.array([2, 9]))
  keys = jax.random.split(jax.random.key(5), 4)
  masks = jnp.asarray(np.random.default_rng(0).random((4, N)) < 0.8)
  dirac = jnp.asarray([[True, False], [False, True], [True, True], [False, False]])
  batched = jax.jit(jax.vmap(run, in_axes=(0, None, None, 0, 0)))(
      keys, jnp.asarray(features), jnp.asarray(labels), masks, dirac)
  single = jax.jit(run)
  for i in range(4):
    one = single(keys[i], jnp.asarray(features), jnp.asarray(labels), masks[i], dirac[i])
    np.testing.assert_allclose(_flat(jax.tree.map(lambda a: a[i], batched.params)),
                               _flat(one.params), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_flat(jax.tree.map(lambda a: a[i], batched.initial_params)),
                               _flat(one.initial_params), rtol=1e-6)
    np.testing.assert_array_equal(batched.batch_sizes[i], one.batch_sizes)
  assert batched.batch_sizes.shape == (4, 5)
  # Different keys give different runs.
  assert not np.allclose(_flat(jax.tree.map(lambda a: a[0], batched.params)),
                         _flat(jax.tree.map(lambda a: a[1], batched.params)))


def test_make_run_matches_make_step_loop():
  features, labels = _toy_data()
  config = _config(num_steps=3)
  model = _model()
  key = jax.random.key(9)
  state, optimizer = train.init_state(key, model, features[:1], config, N)
  step = jax.jit(train.make_step(model, optimizer, config, N))
  sizes = []
  for _ in range(3):
    state, metrics = step(state, features, labels)
    sizes.append(int(metrics.batch_size))
  out = _make_and_run(config, features, labels, key=9)
  np.testing.assert_allclose(_flat(out.params), _flat(state.params), rtol=1e-5, atol=1e-7)
  np.testing.assert_array_equal(out.batch_sizes, sizes)


@pytest.mark.parametrize("coordinates", [np.array([1, 1]), np.array([-1, 2]),
                                         np.array([[0, 1]]), np.array([], int),
                                         np.array([0.5, 1.0])])
def test_make_step_rejects_bad_dirac_coordinates(coordinates):
  config = _config()
  with pytest.raises(ValueError, match="dirac_coordinates"):
    train.make_step(_model(), optax.sgd(0.1), config, N, dirac_coordinates=coordinates)


def test_dirac_coordinate_past_the_last_parameter_is_rejected_at_trace_time():
  # A scatter out of bounds would be silently dropped (the canary would vanish).
  x, y = _toy_data()
  run = train.make_run(_model(), _config(), N, x[:1], dirac_coordinates=np.array([10**6]))
  with pytest.raises(ValueError, match=r"dirac_coordinates has index 1000000, outside"):
    run(jax.random.key(0), x, y)
