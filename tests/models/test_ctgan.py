"""CTGAN and the vanilla GAN (dpaudit.models.ctgan): mode-specific normalisation, the
conditional vector's training-by-sampling, tiny fits against untrained networks, the registry
signatures and argument checks."""

import jax
import numpy as np
import pytest

from dpaudit.models import ctgan
from dpaudit.models import tabular_generators as tg

# The code is the same for every PRNG implementation; XLA's RngBitGenerator keys compile the
# training programs about a third faster than threefry on CPU (the suite's time is compiling).
KEY = jax.random.key(0, impl="unsafe_rbg")


def _key(seed):
  return jax.random.key(seed, impl="unsafe_rbg")


# One fit of each, shared by the tests below (compilation dominates their time).
SMALL_CTGAN = ctgan.CtganConfig(epochs=100, batch_size=50, noise_dim=8, generator_hidden=(32,),
                                discriminator_hidden=(32,), pac=5, generator_lr=1e-3,
                                discriminator_lr=1e-3)
SMALL_GAN = ctgan.GanVanillaConfig(iterations=1000, batch_size=50, noise_dim=8,
                                   generator_hidden=(32,), discriminator_hidden=(32,),
                                   learning_rate=1e-3)
PROBS = np.array([0.7, 0.2, 0.1])


def _toy(seed=0, n=200):
  """A bimodal continuous column (80% at -5, 20% at 5) and a 3-category column (0.7/0.2/0.1)."""
  rng = np.random.default_rng(seed)
  x = np.where(rng.random(n) < 0.8, rng.normal(-5.0, 1.0, n), rng.normal(5.0, 0.5, n))
  return np.c_[x, rng.choice(3, n, p=PROBS).astype(float)]


def _w1(a, b):
  """Wasserstein-1 distance between two 1-D samples (quantile functions on a common grid)."""
  q = np.linspace(0.005, 0.995, 199)
  return float(np.mean(np.abs(np.quantile(a, q) - np.quantile(b, q))))


def _tv(samples, probs):
  return 0.5 * float(np.abs(np.bincount(samples.astype(int), minlength=3) / len(samples)
                            - probs).sum())


@pytest.fixture(scope="module")
def fits():
  """Registers CTGAN and the vanilla GAN as "ctgan" and "gan" (the signatures of
  tabular_generators.GeneratorSpec), fits each once through tg.fit_generator on the toy data,
  and restores the registry afterwards."""
  saved = {name: tg.GENERATORS.get(name) for name in ("ctgan", "gan")}
  tg.register_generator("ctgan", ctgan.CtganConfig, ctgan.fit_ctgan, ctgan.sample_ctgan,
                        replace=True)
  tg.register_generator("gan", ctgan.GanVanillaConfig, ctgan.fit_vanilla_gan,
                        ctgan.sample_vanilla_gan, replace=True)
  data = _toy()
  yield data, tg.fit_generator(KEY, "ctgan", data, SMALL_CTGAN), tg.fit_generator(
      KEY, "gan", data, SMALL_GAN)
  for name, spec in saved.items():
    if spec is None:
      del tg.GENERATORS[name]
    else:
      tg.GENERATORS[name] = spec


# ---------------------------------------------------------------- mode-specific normalisation


def test_transform_finds_modes_and_round_trips_exactly():
  rng = np.random.default_rng(1)
  data = np.c_[_toy(1, 300), rng.lognormal(3.0, 1.0, 300), rng.integers(0, 2, 300)]
  transform = ctgan.fit_ctgan_transform(KEY, data)
  assert transform.base.continuous_columns == (0, 2)
  assert transform.base.discrete_columns == (1, 3)
  means = np.sort(transform.mode_means[0])
  assert len(means) >= 2 and means[0] < -4 and means[-1] > 4
  for weights in transform.mode_weights:
    assert np.all(weights > 0.005) and np.isclose(weights.sum(), 1.0)
  layout = transform.layout
  modes = tuple(len(m) for m in transform.mode_means)
  assert layout == tg.Layout(2, modes + (3, 2)) and transform.cond_width == 5
  encoded = transform.encode(_key(3), data)
  assert encoded.shape == (300, layout.width) and encoded.dtype == np.float64
  assert np.all(np.abs(encoded[:, :2]) <= 1.0)
  np.testing.assert_array_equal(encoded[:, 2:].sum(axis=1), len(layout.block_sizes))
  np.testing.assert_allclose(transform.decode(encoded), data, rtol=1e-6, atol=1e-6)
  # The sampled modes follow the posterior: the column-0 values near -5 take a mode near -5.
  first = 2 + np.argmin(np.abs(transform.mode_means[0] + 5.0))
  assert encoded[np.abs(data[:, 0] + 5.0) < 1.0, first].mean() > 0.9


def test_condition_frequencies_follow_log_frequency():
  counts = ([120, 60, 15, 5], [190, 10])
  data = np.c_[np.repeat(np.arange(4.0), counts[0]), np.repeat([0.0, 1.0], counts[1])]
  transform = ctgan.fit_ctgan_transform(KEY, data)
  assert transform.layout == tg.Layout(0, (4, 2))
  n = 40_000
  for log_frequency in (True, False):
    cond, columns = ctgan.sample_condition(_key(4), transform, n, log_frequency)
    assert cond.shape == (n, 6) and cond.dtype == np.float32
    np.testing.assert_array_equal(cond.sum(axis=1), 1.0)
    np.testing.assert_array_equal(columns, np.where(cond[:, :4].sum(axis=1) == 1, 0, 1))
    # Naive: a column with probability 1/2, a category by log(1 + count) (or count) within it.
    naive = []
    for c in counts:
      mass = np.log(1.0 + np.array(c)) if log_frequency else np.array(c, float)
      naive.append(0.5 * mass / mass.sum())
    naive = np.concatenate(naive)
    sigma = np.sqrt(naive * (1 - naive) / n)
    assert np.all(np.abs(cond.mean(axis=0) - naive) < 4 * sigma), (cond.mean(axis=0), naive)


# ---------------------------------------------------------------------------------- CTGAN fit


N = 2000  # every sample below has this size (one sampling program per model)


def _untrained(model):
  inputs = np.zeros((1, model.config.noise_dim + model.transform.cond_width), np.float32)
  return model._replace(variables=model.generator.init(_key(9), inputs, False))


def test_ctgan_samples_shapes_categories_and_range(fits):
  data, generator, _ = fits
  model = generator.model
  assert isinstance(model, ctgan.CtganModel) and model.transform.base.discrete_columns == (1,)
  assert model.history.shape == (100 * 4, 2) and np.all(np.isfinite(model.history))
  samples = generator.sample(_key(1), N)
  assert samples.shape == (N, 2) and samples.dtype == np.float64
  assert set(np.unique(samples[:, 1])) <= {0.0, 1.0, 2.0}
  means, stds = model.transform.mode_means[0], model.transform.mode_stds[0]
  low, high = np.min(means - 4 * stds), np.max(means + 4 * stds)
  assert np.all((samples[:, 0] >= low) & (samples[:, 0] <= high))
  np.testing.assert_array_equal(samples, ctgan.sample_ctgan(_key(1), model, N))


def test_ctgan_training_moves_marginals_toward_data(fits):
  # Over fit keys 0-2 the trained model's category TV distance was 0.04 against 0.43-0.52
  # untrained, the continuous column's W1 0.5-1.6 against 4.2-6.8.
  data, generator, _ = fits
  key = _key(2)
  trained = ctgan.sample_ctgan(key, generator.model, N)
  untrained = ctgan.sample_ctgan(key, _untrained(generator.model), N)
  assert _tv(trained[:, 1], PROBS) < 0.5 * _tv(untrained[:, 1], PROBS)
  assert _w1(trained[:, 0], data[:, 0]) < 0.5 * _w1(untrained[:, 0], data[:, 0])


def test_ctgan_without_discrete_columns_traces():
  """No discrete column: no conditional vector, real rows drawn uniformly. Traced only (the
  shapes of the training and sampling programs), not compiled, to keep the file fast."""
  data = _toy()[:, :1]
  config = ctgan.CtganConfig(epochs=2, batch_size=10, noise_dim=4, generator_hidden=(4,),
                             discriminator_hidden=(4,))
  transform, run, args = ctgan._ctgan_program(KEY, np.c_[data, np.abs(data)], config, None)
  assert transform.cond_width == 0 and transform.layout.num_continuous == 2
  variables, history = jax.eval_shape(run, *args)
  assert history.shape == (40, 2)
  sample = ctgan._ctgan_sample_fn(ctgan._networks(transform.layout, config)[0],
                                  transform.layout, 4, 0.2, 0, 7)
  encoded = jax.eval_shape(sample, KEY, variables, *args[2:4])
  assert encoded.shape == (7, transform.layout.width)


# -------------------------------------------------------------------------------- vanilla GAN


def test_vanilla_gan_samples_and_learns(fits):
  # Over fit keys 0-2 the trained model's category TV distance was 0.01-0.06 against 0.48
  # untrained, W1 1.6 against 2.7 (the small GAN bridges the two modes).
  data, _, generator = fits
  model = generator.model
  assert isinstance(model, tg.GanModel) and model.history.shape == (1000, 2)
  assert np.all(np.isfinite(model.history))
  key = _key(2)
  trained = generator.sample(key, N)
  assert trained.shape == (N, 2) and trained.dtype == np.float64
  assert set(np.unique(trained[:, 1])) <= {0.0, 1.0, 2.0}
  params = model.generator.init(_key(9), np.zeros((1, 8), np.float32))["params"]
  untrained = ctgan.sample_vanilla_gan(key, model._replace(params=params), N)
  assert _tv(trained[:, 1], PROBS) < 0.5 * _tv(untrained[:, 1], PROBS)
  assert _w1(trained[:, 0], data[:, 0]) < 0.8 * _w1(untrained[:, 0], data[:, 0])
  scores = tg.critic_scores(model, data[:5])
  assert scores.shape == (5,) and np.all(np.isfinite(scores))


# -------------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("kwargs, name", [
    (dict(batch_size=55), "batch_size"), (dict(pac=0), "pac"), (dict(betas=(0.5,)), "betas"),
    (dict(betas=(0.5, 1.0)), "betas"), (dict(dropout=1.0), "dropout"),
    (dict(log_frequency="yes"), "log_frequency"), (dict(generator_hidden=()), "generator_hidden"),
    (dict(generator_lr=0.0), "generator_lr"), (dict(weight_threshold=1.0), "weight_threshold"),
    (dict(max_modes=0), "max_modes"), (dict(epochs=2.0), "epochs")])
def test_ctgan_config_rejects(kwargs, name):
  with pytest.raises(ValueError, match=name):
    ctgan.CtganConfig(**kwargs)


@pytest.mark.parametrize("kwargs, name", [
    (dict(iterations=0), "iterations"), (dict(beta2=1.0), "beta2"),
    (dict(discriminator_hidden=(0,)), "discriminator_hidden"),
    (dict(learning_rate=float("nan")), "learning_rate"), (dict(gumbel_tau=-1.0), "gumbel_tau")])
def test_vanilla_config_rejects(kwargs, name):
  with pytest.raises(ValueError, match=name):
    ctgan.GanVanillaConfig(**kwargs)


def test_functions_reject_bad_arguments(fits):
  data, model = fits[0], fits[1].model
  continuous = ctgan.fit_ctgan_transform(KEY, data[:, :1] * np.r_[1.0])
  cases = [
      (lambda: ctgan.fit_ctgan(0, data), "key"),
      (lambda: ctgan.fit_ctgan(KEY, data, SMALL_GAN), "config"),
      (lambda: ctgan.fit_ctgan(KEY, np.where(data == data[3, 0], np.nan, data)), "data"),
      (lambda: ctgan.fit_ctgan(KEY, data, SMALL_CTGAN, discrete_columns=[2]),
       "discrete_columns"),
      (lambda: ctgan.fit_ctgan(KEY, np.c_[data, np.ones(len(data))]), "column 2"),
      (lambda: ctgan.sample_ctgan(KEY, model, 0), "n"),
      (lambda: ctgan.sample_ctgan(KEY, "model", 3), "model"),
      (lambda: ctgan.fit_ctgan_transform(KEY, data, max_modes=1.5), "max_modes"),
      (lambda: ctgan.fit_ctgan_transform(KEY, data, weight_threshold=-0.1), "weight_threshold"),
      (lambda: ctgan.sample_condition(KEY, continuous, 3), "transform"),
      (lambda: ctgan.sample_condition(KEY, model.transform, 2.5), "n"),
      (lambda: ctgan.sample_condition(KEY, model.transform, 3, log_frequency=1), "log_frequency"),
      (lambda: model.transform.encode(KEY, np.c_[data[:, :1], np.full(len(data), 7.0)]),
       "data"),
      (lambda: model.transform.decode(np.zeros((2, 3))), "encoded"),
      (lambda: ctgan.fit_vanilla_gan(KEY, data, SMALL_CTGAN), "config"),
      (lambda: ctgan.fit_vanilla_gan(KEY, data[:1]), "data"),
      (lambda: ctgan.sample_vanilla_gan(KEY, model, 3), "model"),
      (lambda: ctgan.sample_vanilla_gan(KEY, "model", 3), "model"),
  ]
  for call, name in cases:
    with pytest.raises(ValueError, match=name):
      call()
