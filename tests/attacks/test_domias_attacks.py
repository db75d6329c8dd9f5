"""DOMIAS and its baselines: each score against a naive NumPy computation, and what it detects."""

import jax
import numpy as np
import pytest
from scipy.spatial import distance

from dpaudit.attacks import domias
from dpaudit.attacks import panoramia as classifiers


def _data(seed, n, d=3):
  return np.random.default_rng(seed).normal(size=(n, d))


def test_nearest_distances_equal_brute_force_in_chunks():
  x, points = _data(0, 37), _data(1, 50)
  expected = distance.cdist(x, points).min(1)
  for chunk in (1, 8, 37, 100):
    np.testing.assert_allclose(domias.nearest_distances(x, points, chunk), expected,
                               rtol=1e-9, atol=1e-9)
  np.testing.assert_allclose(domias.gan_leaks_scores(x, points), -expected, rtol=1e-9,
                             atol=1e-9)
  ref = _data(2, 20)
  np.testing.assert_allclose(domias.gan_leaks_cal_scores(x, points, ref),
                             -expected + distance.cdist(x, ref).min(1), rtol=1e-9, atol=1e-9)
  # The DOMIAS authors' form: squared distances (their sigmoid is monotone: the same ranking).
  np.testing.assert_allclose(domias.gan_leaks_cal_scores(x, points, ref, squared=True),
                             -expected**2 + distance.cdist(x, ref).min(1)**2, rtol=1e-9,
                             atol=1e-9)


def test_mc_share_within_the_median_radius_and_pca():
  x, synthetic = _data(3, 25), _data(4, 60)
  dist = distance.cdist(x, synthetic)
  radius = np.median(dist.min(1))
  np.testing.assert_allclose(domias.mc_scores(x, synthetic), (dist <= radius).mean(1))
  np.testing.assert_allclose(domias.mc_scores(x, synthetic, radius=1.0), (dist <= 1.0).mean(1))
  # PCA variant: distances in the synthetic data's first 2 principal components.
  centred = synthetic - synthetic.mean(0)
  axes = np.linalg.svd(centred, full_matrices=False)[2][:2].T
  px, ps = (x - synthetic.mean(0)) @ axes, centred @ axes
  d2 = distance.cdist(px, ps)
  np.testing.assert_allclose(domias.mc_scores(x, synthetic, num_components=2),
                             (d2 <= np.median(d2.min(1))).mean(1))


def test_domias_ratio_finds_a_copied_record_in_a_sparse_region_where_eq1_cannot():
  """Eq. 2 vs Eq. 1 (Sec. 3): the generator copies an outlier member; a typical non-member in
  the dense centre has the higher p_G but the lower p_G / p_R."""
  from scipy import stats
  log_r = stats.norm.logpdf(np.array([3.0, 0.0]))  # the real data: N(0, 1)
  # p_G: the real density mixed with a spike of 1% mass on the copied outlier.
  log_g = np.log(0.99 * stats.norm.pdf([3.0, 0.0]) + 0.01 * stats.norm.pdf([3.0, 0.0], 3.0, 0.05))
  scores = domias.domias_scores(log_g, log_r)
  assert scores[0] > scores[1]  # DOMIAS ranks the copied outlier first
  assert domias.eq1_scores(log_g)[0] < domias.eq1_scores(log_g)[1]  # Eq. 1 does not


def test_logan_d1_scores_synthetic_like_records_higher():
  rng = np.random.default_rng(5)
  synthetic = rng.normal(1.5, 1.0, size=(200, 2))
  reference = rng.normal(-1.5, 1.0, size=(200, 2))
  x = np.array([[1.5, 1.5], [-1.5, -1.5]])
  scores = domias.logan_d1_scores(jax.random.key(0), x, synthetic, reference,
                                  classifiers.ClassifierConfig(epochs=3, batch_size=64),
                                  hidden_sizes=(16,))
  assert scores.shape == (2,) and scores[0] > scores[1] + 1.0


def _relu_mlp(x, layers, slope=0.0):
  """NumPy forward pass of Dense layers ``[(kernel, bias), ...]``, (leaky) ReLU between."""
  for i, (kernel, bias) in enumerate(layers):
    x = x @ np.asarray(kernel) + np.asarray(bias)
    if i < len(layers) - 1:
      x = np.where(x > 0, x, slope * x)
  return x


def _dense(params, names):
  return [(params[n]["kernel"], params[n]["bias"]) for n in names]


def test_logan_d1_scores_are_the_trained_networks_logits_in_both_forms():
  """Paper form: the early-stopped MLP's logit; authors' form: a 2-logit MLP trained for
  int(300 m / batch) steps, scored by its synthetic-class logit. Each equals a NumPy forward
  pass of the parameters its fit returns."""
  rng = np.random.default_rng(9)
  synthetic, reference, x = rng.normal(1, 1, (24, 2)), rng.normal(-1, 1, (30, 2)), _data(10, 3, 2)
  key = jax.random.key(2)
  config = classifiers.ClassifierConfig(epochs=1, batch_size=8)
  params = domias.fit_logan_d1(key, synthetic, reference, config, hidden_sizes=(4,)).params
  expected = _relu_mlp(_relu_mlp(x, _dense(params["encoder"], ["Dense_0"])).clip(0),
                       _dense(params, ["Dense_0", "Dense_1"]))[:, 0]
  np.testing.assert_allclose(domias.logan_d1_scores(key, x, synthetic, reference, config, (4,)),
                             expected, rtol=1e-5, atol=1e-5)
  authors = domias.LoganD1Config(hidden_sizes=(4,), batch_size=8)
  fitted = domias.fit_logan_d1_fixed(key, synthetic, reference, authors, num_scored=3)
  assert fitted.loss.shape == (int(300 * 3 / 8),)  # the code's fixed step count
  expected = _relu_mlp(x, _dense(fitted.params, ["Dense_0", "Dense_1"]))[:, 1]
  np.testing.assert_allclose(domias.logan_d1_fixed_scores(key, x, synthetic, reference, authors),
                             expected, rtol=1e-5, atol=1e-5)


def test_logan_0_in_the_authors_form_is_a_ctgan_style_critic():
  """The critic of fit_ctgan_critic (epochs x max(n // batch, 1) steps, dropout while training)
  scores rows as a NumPy LeakyReLU(0.2) MLP, dropout off, on asinh-standardised columns."""
  synthetic, x = _data(11, 40, 2), _data(12, 3, 2)
  config = domias.CtganCriticConfig(epochs=2, batch_size=16, noise_dim=4, generator_hidden=(8,),
                                    critic_hidden=(8,))
  key = jax.random.key(3)
  fitted = domias.fit_ctgan_critic(key, synthetic, config)
  assert fitted.history.shape == (2 * (40 // 16), 2) and np.all(np.isfinite(fitted.history))
  assert fitted.critic.dropout == 0.5
  encoded = np.arcsinh((x - synthetic.mean(0)) / synthetic.std(0))
  expected = _relu_mlp(encoded, _dense(fitted.params, ["Dense_0", "Dense_1"]), slope=0.2)[:, 0]
  np.testing.assert_allclose(domias.logan_0_scores(key, x, synthetic, config), expected,
                             rtol=1e-4, atol=1e-5)


def test_gaussian_prior_is_a_product_of_normal_densities():
  from scipy import stats
  x, mean, std = _data(13, 5, 2), np.array([0.5, -1.0]), np.array([2.0, 0.5])
  np.testing.assert_allclose(domias.gaussian_prior_log_density(x, mean, std),
                             stats.norm.logpdf(x, mean, std).sum(1), rtol=1e-12)
  with pytest.raises(ValueError, match="std=0.0"):
    domias.gaussian_prior_log_density(x, mean, [1.0, 0.0])


def test_standardise_uses_the_reference_statistics():
  ref = _data(6, 40) * [1.0, 2.0, 3.0] + 5.0
  (out,) = domias.standardise(ref, ref)
  np.testing.assert_allclose(out.mean(0), 0.0, atol=1e-12)
  np.testing.assert_allclose(out.std(0), 1.0)


def test_bad_inputs_name_the_argument():
  x = _data(7, 5)
  with pytest.raises(ValueError, match="column 1 of the reference data is constant"):
    domias.standardise(np.c_[x[:, :1], np.ones(5)], x[:, :2])
  with pytest.raises(ValueError, match="points has 2 columns"):
    domias.nearest_distances(x, x[:, :2])
  with pytest.raises(ValueError, match="x contains NaN"):
    domias.nearest_distances(np.full((2, 3), np.nan), x)
  with pytest.raises(ValueError, match="num_components=4 exceeds"):
    domias.mc_scores(x, x, num_components=4)
  with pytest.raises(ValueError, match="log_p_reference has shape .4,.; they must match"):
    domias.domias_scores(np.zeros(3), np.zeros(4))
  with pytest.raises(ValueError, match="log_p_synthetic is boolean"):
    domias.domias_scores(np.zeros(3, bool), np.zeros(3))


def test_domias_scores_of_zero_densities_are_the_neutral_ratio():
  """p_G = p_R = 0 (both log-densities -inf, e.g. underflow far from all data) and two point
  masses (+inf, +inf) score 0, the log of a ratio of 1, not NaN; one infinite side gives the
  ratio's infinity."""
  inf = np.inf
  log_g = np.array([-inf, inf, -inf, inf, 1.0, -2.0])
  log_r = np.array([-inf, inf, 0.0, 0.0, -inf, 1.0])
  np.testing.assert_array_equal(domias.domias_scores(log_g, log_r),
                                [0.0, 0.0, -inf, inf, inf, -3.0])


def test_logan_0_critic_prefers_records_like_the_synthetic_data():
  from dpaudit.models import tabular_generators
  synthetic = np.random.default_rng(8).normal(size=(400, 2))
  x = np.array([[0.0, 0.0], [6.0, -6.0]])
  config = tabular_generators.GanConfig(iterations=60, batch_size=64, noise_dim=8,
                                        generator_hidden=(32,), critic_hidden=(32,))
  scores = domias.logan_0_scores(jax.random.key(1), x, synthetic, config)
  assert scores.shape == (2,) and scores[0] > scores[1]
  # The paper's form: the WGAN-GP critic's LeakyReLU(0.2) MLP on asinh-standardised columns.
  gan = tabular_generators.fit_wgan_gp(jax.random.key(1), synthetic, config)
  encoded = np.arcsinh((x - synthetic.mean(0)) / synthetic.std(0))
  expected = _relu_mlp(encoded, _dense(gan.critic_params, ["Dense_0", "Dense_1"]), slope=0.2)
  np.testing.assert_allclose(scores, expected[:, 0], rtol=1e-4, atol=1e-5)
