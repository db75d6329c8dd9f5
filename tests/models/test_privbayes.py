"""PrivBayes (Zhang et al. 2017): the Laplace scale and the exponential mechanism against naive
recomputations of the paper's formulas, marginals at large and small epsilon, argument checks.
NumPy only: the file runs in about a second."""

import collections
import math

import jax
import numpy as np
import pytest

from dpaudit.models import privbayes as pb


def _table(seed=0, n=300):
  """Two dependent categorical columns (b copies a 80% of the time) and a continuous column
  whose mean follows a."""
  rng = np.random.default_rng(seed)
  a = rng.integers(0, 3, n)
  b = np.where(rng.random(n) < 0.8, a, rng.integers(0, 3, n))
  c = rng.normal(2.0 * a, 1.0)
  return np.column_stack([a, 10.0 + b, c])


def _tv(x, y, values):
  return 0.5 * sum(abs(np.mean(x == v) - np.mean(y == v)) for v in values)


def _naive_mi(x, y):
  """Mutual information (nats) from dictionaries of counts."""
  n = len(x)
  pxy = collections.Counter(zip(x, y))
  px, py = collections.Counter(x), collections.Counter(y)
  return sum(c / n * math.log((c / n) / (px[a] / n * py[b] / n)) for (a, b), c in pxy.items())


def _naive_sensitivity(n, binary):
  """Lemma 4.1 of Zhang et al. (2014), written out."""
  if binary:
    return (1 / n) * math.log(n) + ((n - 1) / n) * math.log(n / (n - 1))
  return (2 / n) * math.log((n + 1) / 2) + ((n - 1) / n) * math.log((n + 1) / (n - 1))


def test_large_epsilon_reproduces_the_marginals_and_the_network_is_valid():
  data = _table()
  model = pb.fit_privbayes(jax.random.key(0), data, pb.PrivBayesConfig(epsilon=1e4))
  samples = pb.sample_privbayes(jax.random.key(1), model, 3000)
  assert samples.shape == (3000, 3) and samples.dtype == np.float64
  assert _tv(samples[:, 0], data[:, 0], range(3)) < 0.1
  assert _tv(samples[:, 1], data[:, 1], (10.0, 11.0, 12.0)) < 0.1
  edges = np.asarray(model.binnings[2].edges)
  bins = lambda v: np.clip(np.searchsorted(edges[1:-1], v, side="right"), 0, 15)  # noqa: E731
  assert _tv(bins(samples[:, 2]), bins(data[:, 2]), range(16)) < 0.1
  assert data[:, 2].min() <= samples[:, 2].min() and samples[:, 2].max() <= data[:, 2].max()
  # The dependence survives: b equals a + 10 about as often as in the data (0.85).
  assert abs(np.mean(samples[:, 1] == samples[:, 0] + 10) - np.mean(data[:, 1] == data[:, 0] + 10)
             ) < 0.05
  seen = []
  for child, parents in model.network:
    assert set(parents) <= set(seen) and len(parents) == min(2, len(seen))
    seen.append(child)
  assert sorted(seen) == [0, 1, 2]
  for (child, parents), table in zip(model.network, model.conditionals):
    assert table.shape == tuple(model.sizes[p] for p in parents) + (model.sizes[child],)
    np.testing.assert_allclose(table.sum(axis=-1), 1.0)


def test_small_epsilon_gives_noisier_marginals():
  data = _table()
  joint = lambda x: (3 * x[:, 0] + (x[:, 1] - 10)).astype(int)  # noqa: E731  # (a, b) cell
  errors = {}
  for epsilon in (0.05, 1e4):
    model = pb.fit_privbayes(jax.random.key(3), data, pb.PrivBayesConfig(epsilon=epsilon))
    samples = pb.sample_privbayes(jax.random.key(4), model, 3000)
    errors[epsilon] = _tv(joint(samples), joint(data), range(9))
  assert errors[1e4] < 0.1
  assert errors[0.05] > errors[1e4] + 0.15, errors


def test_laplace_scale_is_the_papers_and_is_the_noise_used(monkeypatch):
  data = _table(n=200)
  drawn = []

  class Recording:
    """A NumPy generator that records the Laplace scales it is asked for."""

    def __init__(self, rng):
      self.rng = rng

    def __getattr__(self, name):
      return getattr(self.rng, name)

    def laplace(self, loc, scale, size):
      drawn.append((loc, scale, size))
      return self.rng.laplace(loc, scale, size)

  real = pb.prng.numpy_generator
  monkeypatch.setattr(pb.prng, "numpy_generator", lambda key: Recording(real(key)))
  for epsilon, beta, degree, columns in ((1.0, 0.3, 2, [0, 1, 2]), (0.5, 0.5, 1, [0, 1, 2]),
                                         (2.0, 0.3, 2, [0, 2])):
    drawn.clear()
    config = pb.PrivBayesConfig(epsilon=epsilon, beta=beta, degree=degree)
    model = pb.fit_privbayes(jax.random.key(0), data[:, columns], config)
    d, n = len(columns), 200
    tables = max(d - degree, 1)
    naive = 2.0 * tables / (n * (1.0 - beta) * epsilon)  # 4 (d - k) / (n eps) at beta = 1/2
    assert model.laplace_scale == pytest.approx(naive, rel=1e-12)
    assert model.selection_epsilon == pytest.approx(beta * epsilon / (d - 1), rel=1e-12)
    assert len(drawn) == tables and all(s == model.laplace_scale and loc == 0.0
                                        for loc, s, _ in drawn)
  # The draws are Laplace of that scale: mean absolute value = scale.
  noise = real(jax.random.key(5)).laplace(0.0, 0.3, 200_000)
  assert np.mean(np.abs(noise)) == pytest.approx(0.3, rel=0.01)


def test_exponential_mechanism_matches_a_naive_softmax():
  scores = np.array([0.1, 0.5, 0.3, 0.0])
  sens = np.array([0.02, 0.05, 0.05, 0.02])
  eps = 0.4
  naive = np.array([math.exp(eps * s / (2 * d)) for s, d in zip(scores, sens)])
  np.testing.assert_allclose(pb._selection_probabilities(scores, sens, eps), naive / naive.sum(),
                             rtol=1e-12)
  for n in (2, 10, 1000):
    for binary in (True, False):
      assert pb._mi_sensitivity(n, binary) == pytest.approx(_naive_sensitivity(n, binary),
                                                           rel=1e-12)
  # GreedyBayes on 3 columns with k = 1: the first column uniform, then the second pair by
  # the exponential mechanism on I(X; first) / Delta; empirical frequencies of the 6 outcomes.
  rng = np.random.default_rng(0)
  n = 60
  a = rng.integers(0, 2, n)
  b = np.where(rng.random(n) < 0.7, a, rng.integers(0, 2, n))
  c = rng.integers(0, 3, n)
  codes = np.column_stack([a, b, c])
  sizes = (2, 2, 3)
  epsilon = 3.0
  expected = {}
  for first in range(3):
    others = [x for x in range(3) if x != first]
    logits = [epsilon * _naive_mi(list(codes[:, x]), list(codes[:, first]))
              / (2 * _naive_sensitivity(n, sizes[x] == 2 or sizes[first] == 2))
              for x in others]
    weights = np.exp(logits)
    for x, w in zip(others, weights):
      expected[(first, x)] = w / weights.sum() / 3
  runs = 1500
  counts = collections.Counter()
  for seed in range(runs):
    network = pb._greedy_bayes(np.random.default_rng(seed), codes, sizes, 1, epsilon)
    counts[(network[0][0], network[1][0])] += 1
    assert network[1][1] == (network[0][0],)
  for outcome, p in expected.items():
    assert abs(counts[outcome] / runs - p) < 4 * math.sqrt(p * (1 - p) / runs) + 1e-3, (
        outcome, counts[outcome] / runs, p)
  assert max(expected.values()) > 0.2 > min(expected.values())  # the scores matter


def test_column_ranges_are_the_bins_and_degree_above_the_columns():
  data = _table(n=100)
  config = pb.PrivBayesConfig(epsilon=1e4, num_bins=4, degree=3,
                              column_ranges=(None, None, (0.0, 4.0)))
  model = pb.fit_privbayes(jax.random.key(0), data, config)
  np.testing.assert_allclose(model.binnings[2].edges, [0.0, 1.0, 2.0, 3.0, 4.0])
  samples = pb.sample_privbayes(jax.random.key(1), model, 500)
  assert samples[:, 2].min() >= 0.0 and samples[:, 2].max() <= 4.0
  assert model.network[2][1] == (model.network[0][0], model.network[1][0])
  assert model.laplace_scale == pytest.approx(2.0 / (100 * 0.7 * 1e4))


@pytest.mark.parametrize("kwargs, name", [
    ({"epsilon": 0.0}, "epsilon"), ({"epsilon": float("nan")}, "epsilon"),
    ({"epsilon": "1"}, "epsilon"), ({"epsilon": 1.0, "degree": 0}, "degree"),
    ({"epsilon": 1.0, "degree": 1.5}, "degree"), ({"epsilon": 1.0, "beta": 1.0}, "beta"),
    ({"epsilon": 1.0, "beta": 0.0}, "beta"), ({"epsilon": 1.0, "num_bins": 1}, "num_bins"),
    ({"epsilon": 1.0, "column_ranges": ((1.0, 0.0),)}, "column_ranges"),
    ({"epsilon": 1.0, "column_ranges": "0,1"}, "column_ranges"),
])
def test_bad_configs_name_the_argument(kwargs, name):
  with pytest.raises(ValueError, match=name):
    pb.PrivBayesConfig(**kwargs)


def test_bad_arguments_name_the_argument():
  data = _table(n=20)
  config = pb.PrivBayesConfig(epsilon=1.0)
  key = jax.random.key(0)
  for call, name in (
      (lambda: pb.fit_privbayes(0, data, config), "key"),
      (lambda: pb.fit_privbayes(key, data[:, 0], config), "data"),
      (lambda: pb.fit_privbayes(key, np.full((5, 2), np.nan), config), "data"),
      (lambda: pb.fit_privbayes(key, data, {"epsilon": 1.0}), "config"),
      (lambda: pb.fit_privbayes(key, data, config, discrete_columns=[7]), "discrete_columns"),
      (lambda: pb.fit_privbayes(key, data, pb.PrivBayesConfig(
          epsilon=1.0, column_ranges=((0.0, 1.0),))), "column_ranges"),
      (lambda: pb.sample_privbayes(key, "model", 3), "model"),
  ):
    with pytest.raises(ValueError, match=name):
      call()
  model = pb.fit_privbayes(key, data, config)
  for n in (0, 2.5, True):
    with pytest.raises(ValueError, match="n="):
      pb.sample_privbayes(key, model, n)
