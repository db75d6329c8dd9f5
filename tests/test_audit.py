"""The front door (dpaudit.audit): the same bounds as the estimators, as Python floats, and a
black-box audit of randomized response (known epsilon) that is valid and reaches the truth."""

import json
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import audit, estimators, results

EPSILON = 1.0
KEEP = math.exp(EPSILON) / (1.0 + math.exp(EPSILON))


def randomized_response(key, bit):
  """Reports ``bit`` with probability e^eps / (1 + e^eps): exactly eps-DP."""
  return jnp.where(jax.random.bernoulli(key, KEEP), bit, 1 - bit)


def rr_renyi(order: float) -> float:
  p, q = KEEP, 1.0 - KEEP
  return math.log(p**order * q**(1 - order) + q**order * p**(1 - order)) / (order - 1)


@pytest.mark.parametrize("method", ["split", "bonferroni"])
def test_from_scores_gives_python_floats_equal_to_the_estimator(method):
  rng = np.random.default_rng(1)
  ins, outs = rng.normal(1.0, 1.0, 3000), rng.normal(0.0, 1.0, 3000)
  result = audit.from_scores(ins, outs, delta=1e-5, confidence=0.9, method=method,
                             reference=2.0)
  direct = estimators.epsilon_from_scores(ins, outs, 1e-5, 0.1, method)
  assert type(result.lower_bound) is float and type(result.ceiling) is float
  assert result.lower_bound == float(direct.epsilon) > 0
  assert result.lower_bound < result.ceiling
  assert (result.quantity, result.kind, result.observations) == ("epsilon", "finite-sample", 6000)
  assert result.details["positives"] + result.details["negatives"] <= 6000
  text = results.dumps(result.to_dict())
  assert json.loads(text)["lower_bound"] == result.lower_bound
  assert result.summary().startswith(f"epsilon >= {result.lower_bound:.3g} at delta = 1e-05 (90% ")
  assert result.summary().endswith("against 2 (theoretical upper bound)")


def test_from_scores_reads_zero_when_nothing_leaks():
  rng = np.random.default_rng(2)
  result = audit.from_scores(rng.normal(size=2000), rng.normal(size=2000))
  assert result.lower_bound == 0.0


def test_one_run_from_scores_equals_the_estimator():
  rng = np.random.default_rng(3)
  member = rng.random(5000) < 0.5
  scores = rng.normal(2.0 * member, 1.0)
  result = audit.one_run_from_scores(scores, member, delta=1e-5)
  direct = estimators.one_run_epsilon_from_scores(scores, member, 1e-5, 0.05)
  assert result.lower_bound == float(direct.epsilon) > 0.5
  # the ceiling: the best any number of guesses could certify (a perfect attack)
  assert result.ceiling == float(np.max(direct.grid_epsilon_ceiling))
  assert result.ceiling >= float(direct.epsilon_ceiling)
  assert result.details == {"num_guesses": int(direct.num_guesses),
                            "num_correct": int(direct.num_correct)}
  # beside it, the f-DP (Gaussian family) bound of the same scores, labelled with its premise
  assert result.assumes == audit.ASSUMES_ANY_DP
  fdp, = result.alternatives
  with jax.enable_x64(True):
    gaussian = estimators.fdp_one_run_from_scores(scores, member, 1e-5, 0.05)
  assert fdp.lower_bound == float(gaussian.epsilon) > result.lower_bound
  assert fdp.details["mu_lower_bound"] == float(gaussian.mu)
  assert (fdp.assumes, fdp.quantity, fdp.delta) == (audit.ASSUMES_GAUSSIAN, "epsilon", 1e-5)
  assert fdp.lower_bound <= fdp.ceiling
  assert json.loads(results.dumps(result.to_dict()))["alternatives"][0]["lower_bound"] == (
      fdp.lower_bound)
  assert result.summary().splitlines()[1].startswith(
      f"  beside it: epsilon >= {fdp.lower_bound:.3g} at delta = 1e-05")
  # at delta = 0 a mu-GDP curve has no finite epsilon: the alternative bounds mu
  pure, = audit.one_run_from_scores(scores, member).alternatives
  assert (pure.quantity, pure.delta, pure.lower_bound) == ("GDP mu", None, float(gaussian.mu))


def test_black_box_randomized_response_is_below_the_truth_and_reaches_half_at_1e6_trials():
  orders = (2.0, 4.0)
  eps, *renyi = audit.black_box(jax.random.key(0), randomized_response, jnp.int32(1),
                                jnp.int32(0), num_outcomes=2, num_trials=1_000_000,
                                orders=orders, reference=EPSILON)
  assert EPSILON / 2 <= eps.lower_bound <= EPSILON
  assert eps.lower_bound <= eps.ceiling and eps.details["set"] in ([0], [1])
  two_cut, k_cut = renyi[:2], renyi[2:]
  for results_ in (two_cut, k_cut):
    for result, order in zip(results_, orders):
      assert result.order == order and result.quantity == "renyi divergence"
      assert rr_renyi(order) / 2 <= result.lower_bound <= rr_renyi(order)


def test_black_box_bound_exceeds_the_truth_no_more_often_than_its_confidence_allows():
  # 40 audits at 2,000 trials per side: at 95% confidence each, more than 5 exceedances would
  # have probability 0.048 if the level were exact (the bounds are conservative).
  exceed = 0
  for seed in range(40):
    eps, two_cut = audit.black_box(jax.random.key(seed), randomized_response, jnp.int32(1),
                                   jnp.int32(0), num_outcomes=2, num_trials=4_000,
                                   orders=(2.0,))[:2]
    exceed += eps.lower_bound > EPSILON
    exceed += two_cut.lower_bound > rr_renyi(2.0)
  assert exceed <= 5


def test_black_box_sees_nothing_in_a_mechanism_that_ignores_its_data():
  def coin(key, bit):
    del bit
    return jax.random.bernoulli(key, 0.5).astype(jnp.int32)
  eps, two_cut, k_cut = audit.black_box(jax.random.key(1), coin, jnp.int32(1), jnp.int32(0),
                                        num_outcomes=2, num_trials=20_000)
  assert eps.lower_bound == two_cut.lower_bound == k_cut.lower_bound == 0.0


class TinyCNN(nn.Module):
  """A model dpaudit does not ship: one 3x3 convolution, pooling, a dense layer."""
  num_classes: int = 10

  @nn.compact
  def __call__(self, x):
    x = nn.relu(nn.Conv(4, (3, 3))(x))
    x = nn.avg_pool(x, (2, 2), (2, 2))
    return nn.Dense(self.num_classes)(x.reshape(x.shape[0], -1))


@pytest.fixture(scope="module")
def digit_images():
  from dpaudit import data
  from dpaudit.audits import dpsgd as games
  train, test = data.train_test_split(data.load("digits"), 0.2, 0, stratify=True)
  train, test, _ = data.standardize(train, test)
  base, pool = data.train_test_split(train, 0.5, 1, stratify=True)
  image = lambda x: np.asarray(x, np.float32).reshape(-1, 8, 8, 1)
  return games.AuditData(image(base.features), base.labels, image(test.features), test.labels,
                         image(pool.features), pool.labels, 10)


@pytest.mark.parametrize("game,canary", [("one_run", "mislabelled"), ("uniaud", "gaussian")])
def test_dpsgd_audits_a_model_the_project_does_not_ship(digit_images, game, canary):
  from dpaudit.audits import dpsgd as games
  config = games.DPSGDAuditConfig(game=game, canary=canary, num_canaries=100, epsilon=8.0,
                                  epochs=2, batch_size=64, physical_batch_size=128)
  result = audit.dpsgd(jax.random.key(0), digit_images, config, model=TinyCNN())
  assert result.kind == "finite-sample" and result.quantity == "epsilon"
  assert 0.0 <= result.lower_bound <= result.ceiling and result.observations == 100
  assert result.reference_kind.startswith("the accountant's epsilon")
  assert 0.0 <= result.lower_bound <= result.reference  # one run: far below the accountant
  assert 0.0 <= result.details["test_accuracy"] <= 1.0 and result.details["num_steps"] >= 1
  assert result.details["model"] == "TinyCNN"
  assert result.assumes == audit.ASSUMES_ANY_DP
  fdp = {alt.assumes: alt for alt in result.alternatives}[audit.ASSUMES_GAUSSIAN]
  assert fdp.lower_bound >= 0.0 and fdp.details["mu_lower_bound"] >= 0.0
  assert (fdp.kind, fdp.observations, fdp.reference) == ("finite-sample", 100, result.reference)


def test_dpsgd_refuses_what_is_not_a_model(digit_images):
  from dpaudit.audits import dpsgd as games
  config = games.DPSGDAuditConfig(game="one_run", num_canaries=10, epochs=1)
  with pytest.raises(ValueError, match="model"):
    audit.dpsgd(jax.random.key(0), digit_images, config, model=lambda x: x)
  plus = games.DPSGDAuditConfig(game="uniaud_plus", canary="trigger", num_canaries=10,
                                epochs=1)
  with pytest.raises(ValueError, match="model must be None for game='uniaud_plus'"):
    audit.dpsgd(jax.random.key(0), digit_images, plus, model=TinyCNN())
