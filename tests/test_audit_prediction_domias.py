"""The front door for private prediction and synthetic data (dpaudit.audit.private_prediction,
histogram_model, domias): valid against a mechanism of known divergence, equal to the games
they call, and 0 where nothing leaks."""

import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from dpaudit import audit
from dpaudit.audits import private_prediction as games
from dpaudit.mechanisms import histograms

SIGMA = 1.0
VOTES, NEIGHBOR_VOTES = jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0])


def gnmax(key, votes, query):
  del query
  return jnp.argmax(votes + SIGMA * jax.random.normal(key, votes.shape))


def gnmax_renyi(order: float) -> float:
  """Exact D_alpha between the two Bernoulli answers of :func:`gnmax`."""
  p = stats.norm.cdf(1.0 / (SIGMA * math.sqrt(2.0)))
  q = 1.0 - p
  return math.log(p**order * q**(1 - order) + q**order * p**(1 - order)) / (order - 1)


def test_private_prediction_is_below_the_exact_divergence_and_reaches_half():
  eps, two_cut, k_cut = audit.private_prediction(
      jax.random.key(3), gnmax, VOTES, NEIGHBOR_VOTES, None, num_classes=2,
      num_trials=200_000, orders=(2.0,), confidence=0.95)
  truth = gnmax_renyi(2.0)
  for bound in (two_cut, k_cut):
    assert 0.5 * truth <= bound.lower_bound <= truth
    assert bound.order == 2.0 and bound.method.startswith("private prediction")
  assert 0.0 < eps.lower_bound <= math.log(stats.norm.cdf(1 / math.sqrt(2)) /
                                           stats.norm.sf(1 / math.sqrt(2)))


def test_histogram_model_equals_the_game_and_holds_against_the_data_independent_bound():
  model = histograms.pate_model([0.9, 0.1], [0.0, 1.0], num_teachers=10)
  key = jax.random.key(0)
  two_cut, k_cut = audit.histogram_model(key, model, noise_multiplier=2.0, num_trials=20_000,
                                         num_histograms=64, num_bootstrap=8)
  config = games.PredictionAuditConfig(sigma=2.0, num_trials=20_000, orders=(2.0,),
                                       num_histograms=64, num_bootstrap=8)
  direct = games.run(key, config, models=[model]).per_query
  assert two_cut.lower_bound == max(float(direct.two_cut[0, 0]), 0.0)
  assert k_cut.lower_bound == max(float(direct.k_cut[0, 0]), 0.0)
  assert two_cut.reference == float(direct.data_independent[0, 0]) == 2.0 / 2.0**2
  assert (two_cut.kind, k_cut.kind) == ("finite-sample", "asymptotic")
  assert type(two_cut.details["model_divergence"]) is float


def _population(rng, n):
  return rng.normal(size=(n, 2))


def test_domias_sees_a_copying_generator_and_not_an_independent_one():
  rng = np.random.default_rng(0)
  candidates = _population(rng, 600)
  member = rng.random(600) < 0.5  # independent fair coins: the one-run bound is valid
  reference = _population(rng, 3000)
  copies = candidates[member][rng.integers(0, member.sum(), 3000)]
  leaky = audit.domias(copies + 0.05 * rng.normal(size=copies.shape), reference, candidates,
                       member, delta=1e-5, reference=math.inf)
  fresh = audit.domias(_population(rng, 3000), reference, candidates, member, delta=1e-5)
  assert leaky.lower_bound > 0.5 and leaky.details["auc"] > 0.6
  assert fresh.lower_bound == 0.0 and abs(fresh.details["auc"] - 0.5) < 0.1
  assert leaky.method.startswith("DOMIAS") and leaky.to_dict()["reference"] == "Infinity"
  fixed = audit.domias(copies, reference, candidates, member, membership="fixed")
  assert fixed.lower_bound >= 0.0 and fixed.observations == 600 and fixed.details["auc"] > 0.6
  # the f-DP (Gaussian family) bound beside the one-run bound; none for fixed membership
  fdp, = leaky.alternatives
  assert fdp.assumes == audit.ASSUMES_GAUSSIAN and fdp.method.startswith("DOMIAS")
  assert fdp.lower_bound >= leaky.lower_bound and fresh.alternatives[0].lower_bound == 0.0
  assert fixed.alternatives == () and fixed.assumes is None
