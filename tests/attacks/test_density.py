"""DOMIAS density estimators: the KDE against scipy, the flows against known densities."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from dpaudit.attacks import density

# ------------------------------------------------------------------------------------------
# Gaussian KDE.
# ------------------------------------------------------------------------------------------


def _correlated(rng, n, d, shift=3.0):
  mixing = rng.normal(size=(d, d)) + 2 * np.eye(d)
  return rng.normal(size=(n, d)) @ mixing + shift


@pytest.mark.parametrize("n,d", [(200, 3), (120, 9)])
def test_kde_matches_scipy_gaussian_kde(n, d):
  rng = np.random.default_rng(n + d)
  data = _correlated(rng, n, d)
  queries = np.concatenate([_correlated(rng, 40, d), data[:10]])
  got = np.asarray(density.kde_log_density(density.fit_kde(data), queries, chunk_size=16))
  want = scipy.stats.gaussian_kde(data.T).logpdf(queries.T)
  np.testing.assert_allclose(got, want, rtol=1e-5)


def test_kde_vmaps_over_datasets_and_chunking_changes_nothing():
  rng = np.random.default_rng(1)
  datas = np.stack([_correlated(rng, 60, 4, shift=i) for i in range(3)])
  queries = _correlated(rng, 23, 4)
  batched = jax.vmap(density.fit_kde)(jnp.asarray(datas))
  batched_log_p = np.asarray(density.kde_log_density(batched, queries, chunk_size=7))
  assert batched_log_p.shape == (3, 23)
  for i in range(3):
    single = density.fit_kde(datas[i])
    for a, b in zip(jax.tree.leaves(single), jax.tree.leaves(batched)):
      np.testing.assert_allclose(a, b[i], rtol=1e-10, atol=1e-12)
    unchunked = np.asarray(density.kde_log_density(single, queries, chunk_size=23))
    np.testing.assert_allclose(batched_log_p[i], unchunked, rtol=1e-10)
    np.testing.assert_allclose(
        np.asarray(density.kde_log_density(single, queries, chunk_size=5)), unchunked, rtol=1e-10)


def test_kde_discrete_and_collinear_columns():
  rng = np.random.default_rng(2)
  n = 150
  cont = rng.normal(size=(n, 2))
  binary = rng.integers(0, 2, size=(n, 1)).astype(float)
  # A binary column alone leaves the covariance regular: still exactly scipy's estimate.
  data = np.concatenate([cont, binary], axis=1)
  np.testing.assert_allclose(
      np.asarray(density.kde_log_density(density.fit_kde(data), data)),
      scipy.stats.gaussian_kde(data.T).logpdf(data.T), rtol=1e-5)
  # A complete one-hot pair (b, 1 - b) and a linear copy of a column: singular covariance.
  collinear = np.concatenate([cont, binary, 1 - binary, 2 * cont[:, :1] + 1], axis=1)
  # (scipy's gaussian_kde raises LinAlgError on it or not depending on how the CPU's BLAS
  # rounds the Cholesky factor of a singular matrix, so the test checks the rank itself.)
  assert np.linalg.matrix_rank(np.cov(collinear.T)) == 3
  model = density.fit_kde(collinear)
  log_p = np.asarray(density.kde_log_density(model, collinear))
  assert np.all(np.isfinite(log_p))
  assert np.all(np.isfinite(np.asarray(density.kde_log_density(model, collinear + 0.3))))
  # The floor acts only in the two degenerate directions: the kernel keeps the data's
  # variances along the columns up to Scott's factor (the floor adds < 1e-5 relative).
  factor = density.scott_factor(n, 5)
  np.testing.assert_allclose(np.diag(np.asarray(model.covariance)),
                             np.var(collinear, axis=0, ddof=1) * factor**2, rtol=1e-5)


def test_kde_rejects_constant_columns_and_bad_input():
  rng = np.random.default_rng(3)
  data = rng.normal(size=(30, 4))
  data[:, 2] = 1.5
  with pytest.raises(ValueError, match="column 2 is constant"):
    density.fit_kde(data)
  with pytest.raises(ValueError, match="must be 2-D"):
    density.fit_kde(np.ones(5))
  nan = rng.normal(size=(30, 2))
  nan[4, 1] = np.nan
  with pytest.raises(ValueError, match=r"data\[4, 1\]"):
    density.fit_kde(nan)
  with pytest.raises(ValueError, match="eigenvalue_floor"):
    density.fit_kde(rng.normal(size=(30, 2)), eigenvalue_floor=0.0)
  model = density.fit_kde(rng.normal(size=(30, 2)))
  with pytest.raises(ValueError, match="x must be"):
    density.kde_log_density(model, np.ones((4, 3)))
  with pytest.raises(ValueError, match="chunk_size"):
    density.kde_log_density(model, np.ones((4, 2)), chunk_size=0)


# ------------------------------------------------------------------------------------------
# Flows. One small BNAF architecture, fitted once vmapped (two seeds, two datasets) and once
# per seed, serves every BNAF check, so the suite compiles each program once.
# ------------------------------------------------------------------------------------------

_BNAF = density.FlowConfig(kind="bnaf", flow_layers=1, nn_depth=1, hidden_dim=4, batch_size=50,
                           polyak=0.9, max_epochs=20, patience=3)
# A correlated 2-D Gaussian with unequal scales: an independent fit loses
# -0.5 log(1 - 0.8^2) = 0.51 nats per row, a forgotten standardisation Jacobian
# sum(log std) = log 1.5 = 0.41 nats.
_MEAN = np.array([1.0, -2.0])
_COV = np.array([[9.0, 0.8 * 3.0 * 0.5], [0.8 * 3.0 * 0.5, 0.25]])
_TRUTH = scipy.stats.multivariate_normal(_MEAN, _COV)


@pytest.fixture(scope="module")
def bnaf():
  keys = jax.random.split(jax.random.key(0), 2)
  datas = _TRUTH.rvs(size=(2, 2000), random_state=1)
  return keys, datas, density.fit_flows(keys, datas, _BNAF)


def _pick(models, i):
  return jax.tree.map(lambda a: a[i], models)


def test_bnaf_density_integrates_to_one(bnaf):
  _, _, models = bnaf
  g1 = np.linspace(_MEAN[0] - 24, _MEAN[0] + 24, 241)  # +-8 sd
  g2 = np.linspace(_MEAN[1] - 4, _MEAN[1] + 4, 241)
  grid = np.stack(np.meshgrid(g1, g2, indexing="ij"), -1).reshape(-1, 2)
  p = np.exp(np.asarray(density.flow_log_density(_pick(models, 0), grid), np.float64))
  total = np.trapezoid(np.trapezoid(p.reshape(241, 241), g2, axis=1), g1)
  assert abs(total - 1) < 0.05


def test_bnaf_held_out_likelihood_near_the_truth(bnaf):
  """On held-out rows, mean log q - mean log p = -KL(p || q) + noise. A well-fitted flow has
  KL ~ 0.01-0.02 nats here; 0.15 fails the two gross errors named at _COV (0.41, 0.51 nats)
  and a flow that is not a density (the integral check above), while the sampling noise of
  the difference on 4000 rows is ~0.005."""
  _, _, models = bnaf
  test = _TRUTH.rvs(size=4000, random_state=2)
  truth = _TRUTH.logpdf(test).mean()
  for i in range(2):
    fitted = np.asarray(density.flow_log_density(_pick(models, i), test), np.float64).mean()
    assert abs(fitted - truth) < 0.15, (i, fitted, truth)


def test_vmapped_fit_equals_single_fits(bnaf):
  keys, datas, models = bnaf
  test = _TRUTH.rvs(size=250, random_state=3)
  for i in range(2):
    single = density.fit_flow(keys[i], datas[i], _BNAF)
    np.testing.assert_allclose(single.validation_loss, models.validation_loss[i], rtol=1e-5)
    np.testing.assert_allclose(single.train_loss, models.train_loss[i], rtol=1e-5)
    assert int(single.best_epoch) == int(models.best_epoch[i])
    np.testing.assert_array_equal(single.validation_rows, models.validation_rows[i])
    np.testing.assert_allclose(density.flow_log_density(single, test),
                               density.flow_log_density(_pick(models, i), test), rtol=1e-4)


def test_bnaf_is_not_sampled(bnaf):
  with pytest.raises(ValueError, match="kind='maf'"):
    density.sample_flow(jax.random.key(0), _pick(bnaf[2], 0), 10)
  with pytest.raises(ValueError, match="single fit"):
    density.sample_flow(jax.random.key(0), bnaf[2], 10)


def test_early_stopping_keeps_the_best_validation_parameters(bnaf):
  _, datas, models = bnaf
  stopped_early = False
  for i in range(2):
    model = _pick(models, i)
    history = np.asarray(model.validation_loss)
    ran = int(np.sum(~np.isnan(history)))
    assert np.all(np.isnan(history[ran:])) and np.all(np.isnan(model.train_loss[ran:]))
    best = int(model.best_epoch)
    assert best == int(np.nanargmin(history))
    assert float(model.best_validation_loss) == pytest.approx(np.nanmin(history), rel=1e-6)
    assert ran == min(_BNAF.max_epochs, best + 1 + _BNAF.patience)
    stopped_early |= ran < _BNAF.max_epochs
    # The returned parameters are the best epoch's: they reproduce its validation loss on the
    # held-out rows (continuous data: no dequantisation noise).
    held_out = datas[i][np.asarray(model.validation_rows)]
    assert held_out.shape[0] == 200
    loss = -np.mean(np.asarray(density.flow_log_density(model, held_out), np.float64))
    assert loss == pytest.approx(float(model.best_validation_loss), abs=1e-4)
  assert stopped_early


@dataclasses.dataclass(frozen=True)
class _NflowConfig(density.FlowConfig):
  """A subclass with other defaults, as a generator registry would define."""
  kind: str = "maf"


def test_maf_generator_dequantises_and_samples_discrete_columns():
  rng = np.random.default_rng(4)
  n = 600
  data = np.stack([rng.normal(size=n), rng.integers(0, 2, n), rng.integers(0, 5, n)], axis=1)
  data[:, 0] += data[:, 1]
  config = _NflowConfig(transformer="spline", flow_layers=1, nn_depth=1, hidden_dim=4,
                        batch_size=100, max_epochs=8, patience=3)
  model = density.fit_flow(jax.random.key(5), data, config)
  assert type(model.config) is density.FlowConfig and model.config.kind == "maf"
  np.testing.assert_array_equal(model.dequant_width, [0.0, 1.0, 1.0])
  assert int(model.best_epoch) >= 0 and np.isfinite(float(model.best_validation_loss))
  samples = np.asarray(density.sample_flow(jax.random.key(6), model, 400))
  assert samples.shape == (400, 3) and np.all(np.isfinite(samples))
  assert set(np.unique(samples[:, 1])) <= {0.0, 1.0}
  assert set(np.unique(samples[:, 2])) <= {0.0, 1.0, 2.0, 3.0, 4.0}
  assert len(np.unique(samples[:, 0])) == 400  # continuous column left alone
  assert abs(samples[:, 1].mean() - data[:, 1].mean()) < 0.15
  assert abs(samples[:, 2].mean() - data[:, 2].mean()) < 0.5


def test_dequantisation_widths():
  data = jnp.asarray([[0.0, 0.1, 2.0, 0.0], [1.0, 0.7, 4.0, 0.5], [1.0, 0.3, 8.0, 1.0]],
                     jnp.float32)
  np.testing.assert_allclose(density._dequant_widths(data, None), [1.0, 0.0, 2.0, 0.0])
  np.testing.assert_allclose(density._dequant_widths(data, (1, 3)), [0.0, 0.2, 0.0, 0.5],
                             rtol=1e-6)
  np.testing.assert_allclose(density._dequant_widths(data, ()), [0.0, 0.0, 0.0, 0.0])


@pytest.mark.parametrize("field,value", [
    ("kind", "realnvp"), ("flow_layers", 0), ("nn_depth", -1), ("hidden_dim", 0),
    ("transformer", "cubic"), ("spline_knots", 0), ("spline_interval", 0.0),
    ("batch_size", 0), ("learning_rate", 0.0), ("clip_norm", -1.0), ("amsgrad", 1),
    ("polyak", 1.0),
    ("max_epochs", 0), ("validation_fraction", 0.0), ("validation_fraction", 0.6),
    ("patience", 0)])
def test_flow_config_rejects_bad_values(field, value):
  with pytest.raises(ValueError, match=field):
    density.FlowConfig(**{field: value})


def test_kde_of_no_query_rows_is_empty():
  """Zero query rows give an empty result (the chunking divided by zero), batched or not."""
  data = np.random.default_rng(3).normal(size=(20, 3))
  model = density.fit_kde(data)
  out = density.kde_log_density(model, np.zeros((0, 3)))
  assert out.shape == (0,)
  batch = jax.vmap(density.fit_kde)(np.stack([data, data + 1.0]))
  assert density.kde_log_density(batch, np.zeros((2, 0, 3))).shape == (2, 0)


def test_fit_flow_rejects_bad_data():
  rng = np.random.default_rng(7)
  key = jax.random.key(0)
  with pytest.raises(ValueError, match="data must be 2-D"):
    density.fit_flow(key, rng.normal(size=(20, 2, 2)), _BNAF)
  bad = rng.normal(size=(40, 2))
  bad[3, 0] = np.nan
  with pytest.raises(ValueError, match=r"data\[3, 0\]"):
    density.fit_flow(key, bad, _BNAF)
  with pytest.raises(ValueError, match="validation_fraction"):
    density.fit_flow(key, rng.normal(size=(4, 2)), _BNAF)  # round(0.4) = 0 validation rows
  with pytest.raises(ValueError, match="column 1 is constant"):
    density.fit_flow(key, np.stack([rng.normal(size=40), np.ones(40)], axis=1), _BNAF)
  with pytest.raises(ValueError, match="discrete_columns"):
    density.fit_flow(key, rng.normal(size=(40, 2)), _BNAF, discrete_columns=(2,))
  with pytest.raises(ValueError, match="config"):
    density.fit_flow(key, rng.normal(size=(40, 2)), {"kind": "bnaf"})
  with pytest.raises(ValueError, match="key"):
    density.fit_flow(0, rng.normal(size=(40, 2)), _BNAF)
  with pytest.raises(ValueError, match="keys"):
    density.fit_flows(jax.random.split(key, 3), rng.normal(size=(2, 40, 2)), _BNAF)
  with pytest.raises(ValueError, match=r"datas\[1\]"):
    density.fit_flows(jax.random.split(key, 2), np.stack([rng.normal(size=(40, 2)), bad[:40]]),
                      _BNAF)
