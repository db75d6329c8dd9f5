"""Tabular generators for DOMIAS: the data transform, TVAE (fit, vmapped seeds, overfitting),
DP-TVAE's calibration, WGAN-GP / ADS-GAN, the additive-noise baseline, dispatch and argument
checks. Configurations are tiny (the whole file runs in about 20 s on 2 CPU cores)."""

import jax
import numpy as np
import pytest

from dpaudit import accounting
from dpaudit.models import tabular_generators as tg

# Learns the mixture below in about 1.5 s. Over keys 0-3 (600 rows of data seed 0) its samples
# had means within 0.07 standard deviations of the data's, variances 0.74-0.88 of the data's (a
# VAE's samples are narrower than its data: the aggregate posterior is wider than the N(0, I)
# prior it samples), correlation 0.67-0.77 against 0.80 (attenuated likewise), and the flag's
# frequency within 0.025.
SMALL_TVAE = tg.TvaeConfig(epochs=100, batch_size=50, latent_dim=4, hidden=(32, 32),
                           learning_rate=3e-3)
# Overfits 16 rows: 1,000 steps of a network far larger than the data.
OVERFIT_TVAE = tg.TvaeConfig(epochs=1000, batch_size=16, latent_dim=8, hidden=(64, 64),
                             learning_rate=3e-3)
SMALL_GAN = dict(iterations=300, batch_size=64, noise_dim=8, generator_hidden=(32, 32),
                 critic_hidden=(32, 32))


def _mixture(seed, n):
  """Two correlated Gaussian columns (corr 0.8; means 10 and -3, standard deviations 4 and
  0.5, so that a missed rescaling shows) and a Bernoulli(0.3) flag."""
  rng = np.random.default_rng(seed)
  x = rng.multivariate_normal([0.0, 0.0], [[1.0, 0.8], [0.8, 1.0]], size=n)
  x = x * np.array([4.0, 0.5]) + np.array([10.0, -3.0])
  return np.column_stack([x, (rng.random(n) < 0.3).astype(float)])


def _auc(members, non_members):
  """P(member score < non-member score), ties counted half: smaller distance = member."""
  less = members[:, None] < non_members[None, :]
  ties = members[:, None] == non_members[None, :]
  return float(np.mean(less) + 0.5 * np.mean(ties))


def _nearest_distance(points, rows):
  return np.sqrt(np.sum((points[:, None, :] - rows[None, :, :]) ** 2, axis=-1)).min(axis=1)


# ------------------------------------------------------------------------------ transform


def test_transform_round_trip_and_one_hot_blocks():
  rng = np.random.default_rng(0)
  n = 200
  data = np.column_stack([
      rng.normal(3.0, 2.0, n),                       # continuous
      rng.integers(0, 2, n),                         # binary -> one-hot of 2
      rng.choice([1.0, 2.0, 5.0], n),                # 3 categories -> one-hot of 3
      rng.integers(0, 100, n),                       # integer, > 20 values -> continuous
  ])
  transform = tg.fit_transform(data)
  assert transform.continuous_columns == (0, 3)
  assert transform.discrete_columns == (1, 2)
  assert transform.layout == tg.Layout(2, (2, 3))
  encoded = transform.encode(data)
  assert encoded.shape == (n, 7) and encoded.dtype == np.float32
  # asinh of the standardised values (heavy tails compressed)
  np.testing.assert_allclose(np.sinh(encoded[:, :2]).mean(axis=0), 0.0, atol=1e-5)
  np.testing.assert_allclose(np.sinh(encoded[:, :2]).std(axis=0), 1.0, atol=1e-5)
  for block in (encoded[:, 2:4], encoded[:, 4:7]):
    assert set(np.unique(block)) == {0.0, 1.0}
    np.testing.assert_array_equal(block.sum(axis=1), 1.0)
  np.testing.assert_array_equal(encoded[:, 4:7].argmax(axis=1), np.searchsorted([1, 2, 5],
                                                                                data[:, 2]))
  decoded = transform.decode(encoded)
  np.testing.assert_array_equal(decoded[:, 1:3], data[:, 1:3])
  np.testing.assert_allclose(decoded, data, rtol=1e-6, atol=1e-5)
  # Decoding scores (not one-hot) picks each block's largest entry.
  scores = encoded.copy()
  scores[:, 2:4] = [0.2, 0.7]
  np.testing.assert_array_equal(transform.decode(scores)[:, 1], 1.0)
  # Given discrete columns override detection: column 1 treated as continuous.
  assert tg.fit_transform(data, discrete_columns=[2]).layout == tg.Layout(3, (3,))
  with pytest.raises(ValueError, match="not one of discrete column 2's categories"):
    transform.encode(np.array([[0.0, 1.0, 3.0, 7.0]]))


def test_constant_column_and_bad_data_raise():
  data = _mixture(0, 50)
  data[:, 1] = 4.0
  with pytest.raises(ValueError, match="column 1 of data is constant"):
    tg.fit_transform(data)
  data = _mixture(0, 50)
  data[3, 0] = np.nan
  with pytest.raises(ValueError, match=r"data\[3, 0\]=nan is not finite"):
    tg.fit_transform(data)
  with pytest.raises(ValueError, match="discrete_columns holds 3"):
    tg.fit_transform(_mixture(0, 50), discrete_columns=[3])
  with pytest.raises(ValueError, match="rank 2"):
    tg.fit_transform(np.zeros(5))


# ------------------------------------------------------------------------------------ TVAE


def test_tvae_learns_the_mixture_through_dispatch():
  data = _mixture(0, 600)
  generator = tg.fit_generator(jax.random.key(0), "tvae", data, SMALL_TVAE)
  samples = generator.sample(jax.random.key(1), 20_000)
  assert samples.shape == (20_000, 3) and samples.dtype == np.float64
  np.testing.assert_array_equal(samples, tg.sample_tvae(jax.random.key(1), generator.model,
                                                        20_000))
  assert set(np.unique(samples[:, 2])) == {0.0, 1.0}
  # With 20,000 samples the Monte Carlo error is below 0.01; the bounds leave room for the
  # fit's shortfall measured over seeds (see SMALL_TVAE) and fail for a generator that ignores
  # the data's location (off by >= 0.3), collapses (variance ratio near 0), overdisperses,
  # drops the correlation (0 against 0.8) or misses the flag's frequency.
  std = data[:, :2].std(axis=0)
  assert np.all(np.abs(samples[:, :2].mean(axis=0) - data[:, :2].mean(axis=0)) < 0.15 * std)
  ratio = samples[:, :2].var(axis=0) / data[:, :2].var(axis=0)
  assert np.all((ratio > 0.55) & (ratio < 1.25)), ratio
  corr = np.corrcoef(samples[:, :2].T)[0, 1]
  assert abs(corr - np.corrcoef(data[:, :2].T)[0, 1]) < 0.2, corr
  assert abs(samples[:, 2].mean() - data[:, 2].mean()) < 0.06
  assert generator.model.history.shape == (SMALL_TVAE.epochs,)
  assert generator.model.history[-1] < generator.model.history[0]


def test_tvae_overfits_tiny_data_and_vmapped_seeds_equal_single_fits():
  rng = np.random.default_rng(1)
  datas = rng.normal(size=(2, 16, 4))
  keys = jax.random.split(jax.random.key(0), 2)
  models = tg.fit_tvae_seeds(keys, datas, OVERFIT_TVAE, method="vmap")
  single = tg.fit_tvae(keys[1], datas[1], OVERFIT_TVAE, transform=models[1].transform)
  # The same computation vmapped: equal up to rounding amplified by 1,000 Adam steps (over data
  # seeds 0-2, at most 0.005 on the samples, whose scale is 1, and 0.02 on the per-epoch losses;
  # a misrouted key or data set gives O(1)).
  # With the asinh encoding a few tail samples of 800 drift further (up to 0.24); the bulk agrees.
  diff = np.abs(tg.sample_tvae(jax.random.key(5), single, 200)
                - tg.sample_tvae(jax.random.key(5), models[1], 200))
  # (median 0.014 measured; a misrouted key or data set gives O(1))
  assert np.median(diff) < 0.05 and np.mean(diff < 0.1) > 0.95 and diff.max() < 0.5, diff.max()
  # Per-epoch losses: equal early on; rounding differences grow over 1,000 steps of an
  # overfitting fit, so later epochs are compared as a whole.
  np.testing.assert_allclose(single.history[:200], models[1].history[:200], rtol=1e-2, atol=0.1)
  assert abs(single.history[-100:].mean() - models[1].history[-100:].mean()) < 0.1 * abs(
      single.history[-100:].mean()) + 0.5
  # DOMIAS's signal: training rows have synthetic samples nearer than fresh rows of the same
  # law do. The AUC of "distance to the nearest sample" telling the 16 members from 500 fresh
  # rows was 0.83-0.89 over data seeds 0-3 (both models each); for samples of the true law, the
  # control, it is 0.5 up to the 16 members' randomness (0.47-0.58 over the same seeds).
  fresh = rng.normal(size=(500, 4))
  control = rng.normal(size=(2000, 4))
  for i, model in enumerate(models):
    samples = tg.sample_tvae(jax.random.key(10 + i), model, 2000)
    auc = _auc(_nearest_distance(datas[i], samples), _nearest_distance(fresh, samples))
    assert auc > 0.72, (i, auc)
    control_auc = _auc(_nearest_distance(datas[i], control), _nearest_distance(fresh, control))
    assert control_auc < 0.65, (i, control_auc)


# --------------------------------------------------------------------------------- DP-TVAE


def test_dp_tvae_calibrates_epsilon_and_trains():
  data = _mixture(2, 200)
  config = tg.DpTvaeConfig(epsilon=3.0, delta=1e-5, epochs=2, batch_size=50, latent_dim=4,
                           hidden=(16, 16), physical_batch_size=64)
  result = tg.fit_dp_tvae(jax.random.key(0), data, config)
  assert (result.sampling_rate, result.num_steps) == (0.25, 8)
  # The accountant's epsilon of the noise used is at most the target and within 0.1% of it
  # (the calibration's tolerance is 1e-6 on sigma).
  assert 0.999 * 3.0 <= result.epsilon <= 3.0
  assert result.epsilon == pytest.approx(
      accounting.dpsgd_epsilon(result.noise_multiplier, 0.25, 8, 1e-5), rel=1e-12)
  assert result.model.history.shape == (8,) and np.all(np.isfinite(result.model.history))
  samples = tg.sample_tvae(jax.random.key(1), result, 50)
  assert samples.shape == (50, 3) and np.all(np.isfinite(samples))
  # A smaller target needs more noise (same compiled program: sigma is a traced argument).
  strict = tg.fit_dp_tvae(jax.random.key(0), data,
                          tg.DpTvaeConfig(**{**config.__dict__, "epsilon": 1.0}))
  assert 0.999 <= strict.epsilon <= 1.0
  assert strict.noise_multiplier > result.noise_multiplier


# ------------------------------------------------------------------------ WGAN-GP, ADS-GAN


def test_wgan_gp_runs():
  data = _mixture(3, 300)
  model = tg.fit_wgan_gp(jax.random.key(0), data, tg.GanConfig(**SMALL_GAN))
  assert model.records is None
  assert model.history.shape == (300, 2) and np.all(np.isfinite(model.history))
  samples = tg.sample_gan(jax.random.key(1), model, 500)
  assert samples.shape == (500, 3) and np.all(np.isfinite(samples))
  assert set(np.unique(samples[:, 2])) <= {0.0, 1.0}
  with pytest.raises(ValueError, match="return_records=True needs an ADS-GAN"):
    tg.sample_gan(jax.random.key(1), model, 5, return_records=True)


def test_ads_gan_identifiability_pushes_samples_from_their_records():
  data = _mixture(3, 300)
  std = data[:, :2].std(axis=0)
  distances = {}
  for lam in (0.0, 3.0):
    model = tg.fit_ads_gan(jax.random.key(0), data,
                           tg.AdsGanConfig(identifiability=lam, **SMALL_GAN))
    samples, records = tg.sample_gan(jax.random.key(1), model, 1000, return_records=True)
    assert samples.shape == records.shape == (1000, 3) and np.all(np.isfinite(samples))
    # Every training row conditions the samples (1000 // 300 or one more times each).
    _, counts = np.unique(records, axis=0, return_counts=True)
    assert len(counts) == 300 and set(counts) <= {3, 4}
    distances[lam] = np.mean(np.linalg.norm((samples - records)[:, :2] / std, axis=1))
  # Measured over keys 0-2: 1.33-2.31 at lambda 0 against 2.21-3.15 at lambda 3 (ratios
  # 1.36-1.99); the regulariser's sign flipped brings samples nearer instead (checked).
  assert distances[3.0] > 1.15 * distances[0.0], distances


# --------------------------------------------------------------------------- additive noise


def test_additive_noise_adds_the_variance_and_keeps_discrete_columns():
  data = _mixture(4, 2000)
  noise = 1.5
  samples = tg.additive_noise(jax.random.key(0), data, 200_000, noise)
  assert samples.shape == (200_000, 3)
  # Resampling keeps the (ddof=0) variance s^2 in expectation; the noise adds noise^2 s^2. The
  # sample variance's relative standard error is about 0.4% here, so 3% is > 5 errors, and a
  # noise scale off by 10% moves the ratio by 14%.
  ratio = samples[:, :2].var(axis=0) / data[:, :2].var(axis=0)
  np.testing.assert_allclose(ratio, 1.0 + noise**2, rtol=0.03)
  shift = (samples[:, :2].mean(axis=0) - data[:, :2].mean(axis=0)) / data[:, :2].std(axis=0)
  np.testing.assert_allclose(shift, 0.0, atol=0.03)
  assert set(np.unique(samples[:, 2])) == {0.0, 1.0}
  assert abs(samples[:, 2].mean() - data[:, 2].mean()) < 0.01
  # Without noise the rows are copies of training rows.
  copies = tg.additive_noise(jax.random.key(1), data, 50, 0.0)
  assert np.all(_nearest_distance(copies, data) == 0.0)


# -------------------------------------------------------------------------------- dispatch


def test_fit_generator_dispatch_and_registry():
  data = _mixture(5, 100)
  # (other modules register more generators, e.g. dpaudit.audits.domias's 'nflow')
  with pytest.raises(ValueError, match="'vae' is not one of the generators 'additive_noise', "
                                       "'ads_gan', .*'ctgan', .*'tvae', 'wgan_gp'"):
    tg.fit_generator(jax.random.key(0), "vae", data)
  generator = tg.fit_generator(jax.random.key(0), "additive_noise", data, {"noise": 0.5})
  np.testing.assert_array_equal(generator.sample(jax.random.key(1), 10),
                                tg.additive_noise(jax.random.key(1), data, 10, 0.5))
  with pytest.raises(ValueError, match="config_or_kwargs must be a TvaeConfig"):
    tg.fit_generator(jax.random.key(0), "tvae", data, tg.GanConfig())
  with pytest.raises(ValueError, match="does not make a DpTvaeConfig.*'epsilon'"):
    tg.fit_generator(jax.random.key(0), "dp_tvae", data)  # epsilon has no default

  class MeanConfig:
    pass

  tg.register_generator("mean", MeanConfig, lambda key, x, config, dc: x.mean(axis=0),
                        lambda key, model, n: np.tile(model, (n, 1)))
  try:
    with pytest.raises(ValueError, match="already registered"):
      tg.register_generator("mean", MeanConfig, len, len)
    sample = tg.fit_generator(jax.random.key(0), "mean", data).sample(jax.random.key(0), 3)
    np.testing.assert_allclose(sample, np.tile(data.mean(axis=0), (3, 1)))
  finally:
    del tg.GENERATORS["mean"]


# -------------------------------------------------------------------------- argument checks


@pytest.mark.parametrize("make, message", [
    (lambda: tg.TvaeConfig(epochs=0), "epochs=0"),
    (lambda: tg.TvaeConfig(batch_size=2.5), "batch_size=2.5"),
    (lambda: tg.TvaeConfig(hidden=()), r"hidden=\(\)"),
    (lambda: tg.TvaeConfig(learning_rate=-1.0), r"learning_rate=-1.0 is outside the valid "
                                                r"range \(0, inf\)"),
    (lambda: tg.TvaeConfig(weight_decay=-1e-5), "weight_decay=-1e-05"),
    (lambda: tg.TvaeConfig(sigma_range=(0.5, 0.1)), "sigma_range"),
    (lambda: tg.TvaeConfig(sigma_init=2.0), "sigma_init=2.0"),
    (lambda: tg.DpTvaeConfig(epsilon=0.0), "epsilon=0.0"),
    (lambda: tg.DpTvaeConfig(epsilon=1.0, delta=1.0), "delta=1.0"),
    (lambda: tg.DpTvaeConfig(epsilon=1.0, l2_clip_norm=0.0), "l2_clip_norm=0.0"),
    (lambda: tg.DpTvaeConfig(epsilon=1.0, accountant="moments"), "accountant='moments'"),
    (lambda: tg.GanConfig(n_critic=0), "n_critic=0"),
    (lambda: tg.GanConfig(gp_weight=-10.0), "gp_weight=-10.0"),
    (lambda: tg.GanConfig(beta2=1.0), "beta2=1.0"),
    (lambda: tg.GanConfig(critic_hidden=(256, 0)), "critic_hidden=0"),
    (lambda: tg.AdsGanConfig(identifiability=-0.5), "identifiability=-0.5"),
    (lambda: tg.AdditiveNoiseConfig(noise=-1.0), "noise=-1.0"),
])
def test_bad_configs_name_the_argument(make, message):
  with pytest.raises(ValueError, match=message):
    make()


def test_bad_arguments_name_the_argument():
  data = _mixture(6, 20)
  key = jax.random.key(0)
  with pytest.raises(ValueError, match="noise=-1.0"):
    tg.additive_noise(key, data, 5, -1.0)
  with pytest.raises(ValueError, match="n=0 must be an integer >= 1"):
    tg.additive_noise(key, data, 0, 1.0)
  with pytest.raises(ValueError, match="config must be a TvaeConfig for fit_tvae"):
    tg.fit_tvae(key, data, tg.GanConfig())
  with pytest.raises(ValueError, match="config must be a GanConfig for fit_wgan_gp"):
    tg.fit_wgan_gp(key, data, tg.AdsGanConfig())
  with pytest.raises(ValueError, match="key must be a jax PRNG key"):
    tg.fit_tvae(0, data, SMALL_TVAE)
  with pytest.raises(ValueError, match="method='pmap' is not one of 'vmap', 'map'"):
    tg.fit_tvae_seeds(jax.random.split(key, 2), np.stack([data, data]), SMALL_TVAE,
                      method="pmap")
  with pytest.raises(ValueError, match="keys has shape"):
    tg.fit_tvae_seeds(jax.random.split(key, 3), np.stack([data, data]), SMALL_TVAE)
  with pytest.raises(ValueError, match="transform was fitted to 3 columns but data has 2"):
    tg.fit_tvae(key, data[:, :2], SMALL_TVAE, transform=tg.fit_transform(data))
  with pytest.raises(ValueError, match="model must be a TvaeModel"):
    tg.sample_tvae(key, "model", 5)


def test_registry_lists_every_generator_and_their_configs():
  from dpaudit.models import ctgan, pate_gan, privbayes
  assert {"additive_noise", "ads_gan", "ctgan", "dp_tvae", "gan", "pate_gan", "privbayes",
          "tvae", "wgan_gp"} <= set(tg.GENERATORS)
  assert tg.GENERATORS["ctgan"].config_type is ctgan.CtganConfig
  assert tg.GENERATORS["gan"].config_type is ctgan.GanVanillaConfig
  assert tg.GENERATORS["pate_gan"].fit is pate_gan.fit_pate_gan
  assert tg.GENERATORS["privbayes"].sample is privbayes.sample_privbayes
  with pytest.raises(ValueError, match="epsilon"):  # the DP generators need their epsilon
    tg.fit_generator(jax.random.key(0), "privbayes", np.zeros((4, 2)))
