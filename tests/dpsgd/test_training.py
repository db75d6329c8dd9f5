"""The DP-SGD training loop: plain SGD as a limit case, resumption, metrics, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dpaudit import models
from dpaudit.dpsgd import clipping
from dpaudit.dpsgd import training as train


def _toy_data(n=40, d=6, classes=3, seed=0):
  rng = np.random.default_rng(seed)
  features = rng.normal(size=(n, d)).astype(np.float32)
  labels = (features[:, 0] > 0).astype(np.int32) + (features[:, 1] > 1)
  return features, labels % classes


def test_no_noise_no_clipping_full_batch_is_plain_sgd():
  features, labels = _toy_data()
  model = models.make_model("mlp", (6,), 3)
  config = train.TrainConfig(num_steps=1, sampling_rate=1.0, noise_multiplier=0.0,
                             l2_clip_norm=np.inf, learning_rate=0.3, physical_batch_size=16)
  key = jax.random.key(7)
  state, optimizer = train.init_state(key, model, features[:1], config, len(features))
  step = jax.jit(train.make_step(model, optimizer, config, len(features)))
  new_state, metrics = step(state, features, labels)

  def mean_loss(p):
    return jnp.mean(clipping.softmax_cross_entropy(model.apply({"params": p}, features), labels))

  grads = jax.grad(mean_loss)(state.params)
  sgd = optax.sgd(0.3)
  updates, _ = sgd.update(grads, sgd.init(state.params), state.params)
  expected = optax.apply_updates(state.params, updates)
  for a, e in zip(jax.tree.leaves(new_state.params), jax.tree.leaves(expected)):
    np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
  assert int(metrics.batch_size) == len(features)  # q = 1 takes every example, 3 microbatches
  np.testing.assert_allclose(metrics.mean_loss, mean_loss(state.params), rtol=1e-5)
  assert float(metrics.clipped_fraction) == 0.0


def test_noise_has_the_configured_scale():
  # With zero gradients (zero learning signal: C tiny, lr 1, sgd), the update is pure noise of
  # std sigma * C / (q N); a chi-square interval on the variance over all coordinates.
  features, labels = _toy_data(n=50)
  model = models.make_model("mlp", (6,), 3)
  sigma, clip, q = 2.0, 1e-6, 0.5
  config = train.TrainConfig(num_steps=1, sampling_rate=q, noise_multiplier=sigma,
                             l2_clip_norm=clip, learning_rate=1.0, physical_batch_size=64)
  state, optimizer = train.init_state(jax.random.key(3), model, features[:1], config, 50)
  new_state, _ = train.make_step(model, optimizer, config, 50)(state, features, labels)
  deltas = np.concatenate([np.ravel(a - b) for a, b in zip(jax.tree.leaves(new_state.params),
                                                           jax.tree.leaves(state.params))])
  expected_std = sigma * clip / (q * 50)
  n = deltas.size  # 6*512 + 512*256 + ... (about 135k coordinates)
  ratio = np.mean(deltas**2) / expected_std**2
  assert abs(ratio - 1) < 6 * np.sqrt(2 / n)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_sigma_and_learning_rate_as_arguments(optimizer):
  """A run given ``hyperparameters(config)`` trains as the run with them as constants (to the
  last float32 bits: XLA folds the constant scale factors in another order),
  and two configs that differ only in sigma and the learning rate lower to the same program
  (so one compilation, in memory or in the persistent cache, serves both)."""
  features, labels = _toy_data()
  model = models.make_model("logistic", (6,), 3)
  configs = [train.TrainConfig(num_steps=3, sampling_rate=0.5, noise_multiplier=sigma,
                               l2_clip_norm=1.0, learning_rate=lr, optimizer=optimizer,
                               physical_batch_size=16)
             for sigma, lr in ((0.7, 0.3), (2.5, 0.05))]
  key = jax.random.key(11)
  programs = []
  for config in configs:
    run = train.make_run(model, config, len(features), features[:1])
    hyper = train.hyperparameters(config)
    constant = jax.jit(run)(key, features, labels)
    traced = jax.jit(run)(key, features, labels, None, None, hyper)
    for a, b in zip(jax.tree.leaves(traced.params), jax.tree.leaves(constant.params)):
      np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    programs.append(jax.jit(run).lower(key, features, labels, None, None, hyper).as_text())
  assert programs[0] == programs[1]
  constants = [jax.jit(train.make_run(model, c, len(features), features[:1])).lower(
      key, features, labels).as_text() for c in configs]
  assert constants[0] != constants[1]  # the comparison above can tell programs apart


def test_resuming_from_a_checkpoint_gives_the_same_run(tmp_path):
  features, labels = _toy_data()
  model = models.make_model("logistic", (6,), 3)
  config = train.TrainConfig(num_steps=9, sampling_rate=0.3, noise_multiplier=1.0,
                             l2_clip_norm=0.5, learning_rate=0.2, checkpoint_every=4)
  key = jax.random.key(11)
  full = train.train(key, model, features, labels, config)
  first = train.train(key, model, features, labels,
                      train.TrainConfig(**{**config.__dict__, "num_steps": 5}),
                      checkpoint_dir=str(tmp_path))
  assert first.resumed_from_step == 0 and len(first.history["mean_loss"]) == 5
  steps_seen = []
  resumed = train.train(key, model, features, labels, config, checkpoint_dir=str(tmp_path),
                        progress=lambda step, metrics: steps_seen.append(step))
  assert resumed.resumed_from_step == 5
  assert steps_seen == [6, 7, 8, 9]  # finished steps are not redone
  for a, b in zip(jax.tree.leaves(resumed.state.params), jax.tree.leaves(full.state.params)):
    np.testing.assert_array_equal(a, b)
  for name in full.history:
    np.testing.assert_array_equal(resumed.history[name], full.history[name])
  with pytest.raises(ValueError, match="different config"):
    train.train(key, model, features, labels,
                train.TrainConfig(**{**config.__dict__, "learning_rate": 0.5}),
                checkpoint_dir=str(tmp_path))


def test_metrics_and_training_progress():
  features, labels = _toy_data(n=200)
  model = models.make_model("mlp", (6,), 3)
  config = train.TrainConfig(num_steps=60, sampling_rate=0.2, noise_multiplier=0.5,
                             l2_clip_norm=1.0, learning_rate=0.5, physical_batch_size=16)
  result = train.train(jax.random.key(0), model, features, labels, config)
  assert result.strategy == "ghost"
  sizes = result.history["batch_size"]
  assert abs(np.mean(sizes) - 40) < 5 * np.sqrt(200 * 0.2 * 0.8 / 60)  # Binomial(200, 0.2)
  assert np.all((result.history["clipped_fraction"] >= 0)
                & (result.history["clipped_fraction"] <= 1))
  assert np.mean(result.history["mean_loss"][-10:]) < np.mean(result.history["mean_loss"][:5])
  assert train.accuracy(model, result.state.params, features, labels) > 0.7


def test_bad_config_and_data_raise_clear_errors():
  with pytest.raises(ValueError, match="sampling_rate=0.0 is outside"):
    train.TrainConfig(num_steps=1, sampling_rate=0.0)
  with pytest.raises(ValueError, match="l2_clip_norm=inf needs noise_multiplier=0"):
    train.TrainConfig(num_steps=1, sampling_rate=0.1, l2_clip_norm=np.inf)
  with pytest.raises(ValueError, match="optimizer='lbfgs' is not one of"):
    train.TrainConfig(num_steps=1, sampling_rate=0.1, optimizer="lbfgs")
  with pytest.raises(ValueError, match="num_steps=-1 is outside"):
    train.TrainConfig(num_steps=-1, sampling_rate=0.1)
  features, labels = _toy_data()
  with pytest.raises(ValueError, match="same, non-zero number of rows"):
    train.train(jax.random.key(0), models.make_model("logistic", (6,), 3), features,
                labels[:5], train.TrainConfig(num_steps=1, sampling_rate=0.1))
