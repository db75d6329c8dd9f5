"""DP-SGD audit games (many-run, one-run, UniAud, UniAud++) on the digits data set.

Validity in the two limits the issue asks for: without noise the bounds climb towards the
ceiling epsilon_O of each game; with heavy noise no game reports more than the accountant's
epsilon (and, over repeated trials, the one-run bound exceeds it no more often than its
significance allows). Tiny configurations keep the module around a minute on two CPU cores.
"""

import dataclasses
import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpaudit import accounting, data, estimators, models, results
from dpaudit.audits import dpsgd as audit
from dpaudit.dpsgd import clipping, training

INF = math.inf


@pytest.fixture(scope="module")
def digits():
  train, test = data.train_test_split(data.load("digits"), 0.2, 0, stratify=True)
  train, test, _ = data.standardize(train, test)
  base, pool = data.train_test_split(train, 0.5, 1, stratify=True)
  return audit.AuditData(base.features, base.labels, test.features, test.labels,
                         pool.features, pool.labels, 10)


def _config(**kw):
  return audit.DPSGDAuditConfig(**kw)


# Non-private runs (epsilon = inf: clipping kept, no noise).
OPEN = {
    "one_run_dirac": dict(game="one_run", canary="dirac", num_canaries=200, epsilon=INF,
                          epochs=6, batch_size=128, hidden_sizes=(32,)),
    "uniaud_gaussian": dict(game="uniaud", canary="gaussian", num_canaries=200, epsilon=INF,
                            epochs=100, batch_size=64, learning_rate=0.5, hidden_sizes=(32,)),
    "many_run_dirac": dict(game="many_run", canary="dirac", num_runs=40, epsilon=INF,
                           epochs=6, batch_size=256, hidden_sizes=(8,)),
}
# Very noisy runs (target epsilon 0.2).
NOISY = {
    "one_run_dirac": dict(game="one_run", canary="dirac", num_canaries=200, epsilon=0.2,
                          epochs=2, batch_size=128, hidden_sizes=(32,)),
    "one_run_mislabelled": dict(game="one_run", canary="mislabelled", num_canaries=200,
                                epsilon=0.2, epochs=2, batch_size=128, hidden_sizes=(8,)),
    "uniaud_gaussian": dict(game="uniaud", canary="gaussian", num_canaries=200, epsilon=0.2,
                            epochs=5, batch_size=64, hidden_sizes=(8,)),
    "many_run_dirac": dict(game="many_run", canary="dirac", num_runs=4, epsilon=0.2,
                           epochs=1, batch_size=256, hidden_sizes=(4,)),
}


@pytest.fixture(scope="module")
def open_results(digits):
  return {name: audit.run(jax.random.key(0), _config(**kw), data=digits)
          for name, kw in OPEN.items()}


@pytest.fixture(scope="module")
def noisy_results(digits):
  return {name: audit.run(jax.random.key(0), _config(**kw), data=digits)
          for name, kw in NOISY.items()}


# ------------------------------------------------------------------------------ config checks


@pytest.mark.parametrize("kwargs,name", [
    (dict(game="two_run"), "game"),
    (dict(game="uniaud", canary="mislabelled"), "canary"),
    (dict(game="uniaud", canary="poisoned"), "canary='poisoned' is not valid"),
    (dict(canary="poisoned", warmup_epochs=0.0), "warmup_epochs"),
    (dict(canary="poisoned", warmup_epochs=math.inf), "warmup_epochs"),
    (dict(canary="poisoned", num_warmup_examples=-1), "num_warmup_examples"),
    (dict(game="uniaud_plus", canary="gaussian"), "canary"),
    (dict(game="one_run", canary="trigger"), "canary"),
    (dict(num_canaries=0), "num_canaries"),
    (dict(num_canaries=2.0), "num_canaries"),
    (dict(num_runs=1), "num_runs"),
    (dict(batch_size=0), "batch_size"),
    (dict(epsilon=0.0), "epsilon"),
    (dict(epsilon=-1.0), "epsilon"),
    (dict(delta=0.0), "delta"),
    (dict(delta=1.0), "delta"),
    (dict(epochs=0.0), "epochs"),
    (dict(learning_rate=0.0), "learning_rate"),
    (dict(optimizer="rmsprop"), "optimizer"),
    (dict(canary="dirac", optimizer="adam"), "optimizer"),
    (dict(game="uniaud_plus", canary="trigger", hidden_sizes=()), "hidden_sizes"),
    (dict(hidden_sizes=(0,)), "hidden_sizes"),
    (dict(hidden_sizes=(10**15,)), "hidden_sizes=1000000000000000 must be an integer in"),
    (dict(hidden_sizes=(10**7, 10**7)), "hidden_sizes=100000000000000 would need"),
    (dict(num_tags=4, num_tag_bits=4), "num_tag_bits"),
    (dict(correction="holm"), "correction"),
    (dict(method="median"), "method"),
    (dict(model="vgg"), "model"),
    (dict(game="uniaud_plus", canary="trigger", model="lenet5"), "model='lenet5'"),
    (dict(canary="gaussian", canary_dim=-1), "canary_dim"),
    (dict(canary="gaussian", num_canary_classes=1), "num_canary_classes=1"),
    (dict(canaries_only="yes"), "canaries_only"),
    (dict(game="many_run", canary="gaussian", canaries_only=True), "canaries_only"),
    (dict(canary="dirac", canaries_only=True), "canaries_only"),
    (dict(game="uniaud", canary="gaussian", canaries_only=True, include_data=True),
     "canaries_only"),
    (dict(canary="mislabelled", canary_dim=10, canaries_only=True), "canary_dim=10"),
    (dict(canary="gaussian", canary_dim=10), "canary_dim=10 gives the canaries"),
    (dict(game="uniaud", canary="gaussian", num_canary_classes=5, include_data=True),
     "num_canary_classes=5"),
    (dict(canary="orthogonal", canary_dim=10**9, canaries_only=True, num_canaries=1),
     "canary_dim=1000000000 would need"),
])
def test_config_validation_names_the_argument(kwargs, name):
  with pytest.raises(ValueError, match=name):
    _config(**kwargs)


def test_config_is_frozen_and_adjacency():
  config = _config()
  with pytest.raises(dataclasses.FrozenInstanceError):
    config.epsilon = 1.0  # type: ignore[misc]
  assert config.adjacency == "add_or_remove_one"
  assert _config(game="many_run", canary="dirac").adjacency == "add_or_remove_one"
  assert _config(game="uniaud", canary="gaussian").adjacency == "replace_one"
  assert _config(game="uniaud_plus", canary="trigger").adjacency == "replace_one"


def test_pool_too_small_for_real_canaries(digits):
  config = _config(game="one_run", canary="in_distribution",
                   num_canaries=digits.pool_features.shape[0] + 1, hidden_sizes=(4,))
  with pytest.raises(ValueError, match="num_canaries"):
    audit.run(jax.random.key(0), config, data=digits)


def test_poisoned_needs_pool_rows_besides_its_canaries(digits):
  pool = digits.pool_features.shape[0]
  for kwargs, match in ((dict(num_canaries=pool), f"num_canaries={pool} leaves none"),
                        (dict(num_canaries=10, num_warmup_examples=pool - 9),
                         f"num_warmup_examples={pool - 9} is outside the valid range")):
    config = _config(game="one_run", canary="poisoned", hidden_sizes=(4,), **kwargs)
    with pytest.raises(ValueError, match=match):
      audit.run(jax.random.key(0), config, data=digits)


def test_poisoned_one_run_end_to_end(digits):
  # UniAud's Poisoned baseline (Sec. VIII-A): real canaries, the run started from an
  # initialisation warmed up on 64 other pool rows; tiny warm-up and training.
  config = _config(game="one_run", canary="poisoned", num_canaries=20, epsilon=INF, epochs=1,
                   batch_size=128, hidden_sizes=(4,), num_warmup_examples=64,
                   warmup_epochs=2.0)
  result = audit.run(jax.random.key(0), config, data=digits)
  assert (result.game, result.canary, result.num_observations) == ("one_run", "poisoned", 20)
  assert result.num_training_examples == digits.train_features.shape[0] + 20
  assert 0 <= result.epsilon_lower_bound <= result.epsilon_ceiling
  details = result.details
  assert details["num_warmup_examples"] == 64 and details["warmup_steps"] == 2  # 2 / (128/64)
  assert 0 <= details["warmup_test_accuracy"] <= 1 and 0 <= result.test_accuracy <= 1
  assert audit.DPSGDAuditResult.from_dict(results.loads(results.dumps(result.to_dict()))
                                          ).canary == "poisoned"
  assert config.to_dict()["warmup_epochs"] == 2.0  # recorded where not at the default
  assert "warmup_epochs" not in _config(canary="poisoned").to_dict()


def test_warm_run_is_the_same_run_from_other_parameters():
  # From the parameters make_run would draw itself, the warm run is make_run's run: the same
  # batches, noise and updates; from other parameters it starts there.
  model = models.MLP((2,), 3, example_ndim=1)
  x = jax.random.normal(jax.random.key(2), (12, 3))
  y = jnp.arange(12) % 3
  config = training.TrainConfig(num_steps=1, sampling_rate=0.5, noise_multiplier=1.0,
                                learning_rate=0.3, physical_batch_size=16)
  key = jax.random.key(7)
  start = model.init(jax.random.split(key, 3)[0], x[:1])["params"]

  @jax.jit
  def both(params):
    return (training.make_run(model, config, 12, x[:1])(key, x, y),
            audit._make_run(model, config, 12, x[:1], params)(key, x, y))

  cold, warm = both(start)
  for a, b in zip(jax.tree.leaves(cold), jax.tree.leaves(warm)):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
  other = jax.tree.map(lambda p: p + 1.0, start)
  _, moved = both(other)
  for a, b in zip(jax.tree.leaves(moved.initial_params), jax.tree.leaves(other)):
    np.testing.assert_array_equal(a, b)
  assert not np.allclose(moved.params["Dense_0"]["kernel"], cold.params["Dense_0"]["kernel"])


def test_poisoned_initialisation_fits_the_warmup_data():
  model = models.MLP((4,), 2, example_ndim=1)
  x = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
  y = (x[:, 0] > 0).astype(np.int32)
  key = jax.random.key(3)
  params = audit.poisoned_initialisation(key, model, x, y, epochs=20, batch_size=8,
                                         learning_rate=0.5, physical_batch_size=16)
  start = model.init(jax.random.split(key, 3)[0], x[:1])["params"]
  before = float(jnp.mean(audit.softmax_losses(model, start, x, y)))
  after = float(jnp.mean(audit.softmax_losses(model, params, x, y)))
  assert after < 0.5 * before
  good = dict(epochs=1.0, batch_size=8, learning_rate=0.5)
  for kwargs, match in ((dict(epochs=0.0), "epochs"), (dict(batch_size=0), "batch_size"),
                        (dict(learning_rate=math.nan), "learning_rate"),
                        (dict(optimizer="rmsprop"), "optimizer")):
    with pytest.raises(ValueError, match=match):
      audit.poisoned_initialisation(key, model, x, y, **{**good, **kwargs})
  with pytest.raises(ValueError, match="model"):
    audit.poisoned_initialisation(key, "mlp", x, y, **good)
  with pytest.raises(ValueError, match="labels"):
    audit.poisoned_initialisation(key, model, x, y[:3], **good)


def test_batch_larger_than_data_is_rejected(digits):
  config = _config(game="one_run", canary="dirac", num_canaries=10, batch_size=10_000,
                   hidden_sizes=(4,))
  with pytest.raises(ValueError, match="batch_size"):
    audit.run(jax.random.key(0), config, data=digits)


# ------------------------------------------------------------------------------ validity


def test_non_private_bounds_approach_the_ceiling(open_results):
  one_run = open_results["one_run_dirac"]
  # Measured: 3.07 of a ceiling of 3.39 (147 of 147 guesses right at the best r).
  assert one_run.epsilon_lower_bound >= 0.8 * one_run.epsilon_ceiling
  uniaud = open_results["uniaud_gaussian"]
  # Measured: 2.10 of a ceiling of 3.39 (58 of 58 guesses right at the best r); a 32-unit MLP
  # memorises only part of the random labels, so the threshold leaves a wide margin.
  assert uniaud.epsilon_lower_bound > 0.3 * uniaud.epsilon_ceiling
  many = open_results["many_run_dirac"]
  # 17 steps at q = 0.36: a canary is missed in a run with probability 0.64^17 < 1e-3; measured:
  # every run classified correctly, bound 1.597 = the ceiling of the split method.
  assert many.epsilon_lower_bound >= 0.9 * many.epsilon_ceiling
  for result in open_results.values():
    assert result.noise_multiplier == 0.0 and result.epsilon_theory == INF
    assert 0 < result.epsilon_lower_bound <= result.epsilon_ceiling + 1e-9


def test_noisy_runs_stay_below_theory(noisy_results):
  for name, result in noisy_results.items():
    assert result.noise_multiplier > 1.0, name
    assert math.isfinite(result.epsilon_theory), name
    assert 0.0 <= result.epsilon_lower_bound <= result.epsilon_theory, (
        name, result.epsilon_lower_bound, result.epsilon_theory)


def test_repeated_one_run_dirac_rarely_exceeds_theory(digits):
  # The one-run Dirac game of one_run_audit, ten independent trials as one vmapped program
  # (the game's own pieces: weakest_coordinates, make_run, _steinke_bound). A bound valid at
  # level beta = 0.01 exceeds the true epsilon (<= epsilon_theory) in each trial with
  # probability <= 0.01, independently, so two or more exceedances out of 10 happen with
  # probability <= P[Binomial(10, 0.01) >= 2] ~ 0.4%: seeing two would be strong evidence of
  # an invalid bound. (Keys are fixed, so the test itself is deterministic.)
  trials, m = 10, 200
  config = _config(game="one_run", canary="dirac", num_canaries=m, epsilon=2.0, epochs=2,
                   batch_size=128, hidden_sizes=(32,), significance=0.01)
  assert stats.binom.sf(1, trials, config.significance) < 0.005
  model = models.MLP((32,), 10, example_ndim=3)
  x, y = digits.train_features, digits.train_labels
  plan = audit._plan(config, x.shape[0])
  params0 = model.init(jax.random.key(100), jnp.asarray(x[:1]))["params"]
  coordinates = audit.weakest_coordinates(model, params0, x, y, m)
  run = training.make_run(model, plan.train_config, x.shape[0], jnp.asarray(x[:1]),
                          dirac_coordinates=coordinates)
  members = np.stack([np.asarray(data.include_mask(k, m))
                      for k in jax.random.split(jax.random.key(1), trials)])
  out = audit.run_many(run, jax.random.split(jax.random.key(2), trials), x, y,
                       dirac_masks=jnp.asarray(members))
  initial = jax.vmap(audit._flat)(out.initial_params)[:, coordinates]
  final = jax.vmap(audit._flat)(out.params)[:, coordinates]
  scores = np.asarray(initial - final)
  bounds = np.array([audit._steinke_bound(scores[i], members[i], config)[0]
                     for i in range(trials)])
  # The game sees the canaries: in-canaries' scores are higher on average.
  assert np.mean(scores[members]) > np.mean(scores[~members])
  # Measured: nine bounds of 0 and one of 0.065, against epsilon_theory = 2.0.
  assert np.sum(bounds > plan.epsilon_rdp) <= 1, (bounds, plan.epsilon_rdp)


SIGNIFICANCE_FACTOR = float(os.environ.get("DPAUDIT_COVERAGE_SIGNIFICANCE_FACTOR", "1"))


def _randomized_response_scores(rng, m, epsilon):
  """Scores whose symmetric guesses are each right with probability e^eps / (1 + e^eps),
  independently: an eps-DP release of each membership bit (randomized response), so the true
  epsilon is known and the one-run bound is nearly tight."""
  member = rng.random(m) < 0.5
  right = rng.random(m) < math.exp(epsilon) / (1.0 + math.exp(epsilon))
  return np.where(right, member, ~member) + 1e-3 * rng.random(m), member


def test_one_run_game_handles_significance_on_a_known_epsilon():
  """The game's own bound function (``_steinke_bound``) on scores with a known epsilon = 1.

  Deterministic part: the reported bound is the best grid bound at ``significance / len(grid)``,
  recomputed here from the correct-guess counts (a factor-2 error in the level fails it).
  Coverage: the bound is far from 0 (mean 0.8 of the truth) and exceeds the truth in at most
  beta of 150 runs (measured 0.9% over 1,000); the negative control, the uncorrected maximum,
  exceeds it in about a quarter (measured 26%), so the test sees the difference the correction
  makes."""
  epsilon, m, reps, beta, delta = 1.0, 1000, 150, 0.05, 1e-6
  rng = np.random.default_rng(0)
  runs = [_randomized_response_scores(rng, m, epsilon) for _ in range(reps)]
  limit = beta + 3.0 * math.sqrt(beta * (1.0 - beta) / reps)
  rates = {}
  for correction in ("bonferroni", "none"):
    config = _config(game="one_run", canary="gaussian", num_canaries=m, delta=delta,
                     significance=beta * SIGNIFICANCE_FACTOR, correction=correction)
    bounds = []
    for i, (scores, member) in enumerate(runs):
      bound, _, details = audit._steinke_bound(scores, member, config)
      bounds.append(bound)
      if correction == "bonferroni" and i < 3:
        grid = np.asarray(details["grid"])
        level = beta / len(grid)
        np.testing.assert_allclose(details["per_test_significance"], level, rtol=1e-12)
        result = estimators.one_run_epsilon_from_scores(scores, member, delta, beta)
        expected = np.max(np.asarray(estimators.one_run_epsilon(
            m, grid, np.asarray(result.grid_correct), delta, level)))
        np.testing.assert_allclose(bound, expected, rtol=1e-9, atol=1e-12)
    bounds = np.asarray(bounds)
    rates[correction] = float(np.mean(bounds > epsilon))
    if correction == "bonferroni":
      assert np.mean(bounds) > 0.5 * epsilon
  assert rates["bonferroni"] <= limit, rates
  assert rates["none"] > limit, rates  # negative control


# ------------------------------------------------------------------------------ result fields


def test_result_fields(open_results, noisy_results, digits):
  for runs in (open_results, noisy_results):
    for name, r in runs.items():
      cfg = _config(**(OPEN if runs is open_results else NOISY)[name])
      assert r.game == cfg.game and r.canary == cfg.canary and r.adjacency == cfg.adjacency
      assert 0.0 <= r.test_accuracy <= 1.0
      assert r.num_steps == max(1, math.ceil(cfg.epochs * r.num_training_examples
                                             / cfg.batch_size - 1e-9))  # dpsgd.spec.schedule
      assert r.sampling_rate == pytest.approx(cfg.batch_size / r.num_training_examples)
      d = json.loads(json.dumps(r.to_dict(), allow_nan=True))
      assert d["epsilon_lower_bound"] == pytest.approx(r.epsilon_lower_bound)
      assert d["game"] == cfg.game and isinstance(d["details"], dict)
      if cfg.game == "many_run":
        assert math.isnan(r.epsilon_fdp_gaussian) and math.isnan(r.epsilon_fdp_run)
        assert r.num_observations == 2 * cfg.num_runs
        assert r.num_training_examples == digits.train_features.shape[0]
        continue
      m = cfg.num_canaries
      assert r.num_observations == m
      ceiling = estimators.one_run_epsilon_ceiling(
          m, m, cfg.delta, r.details["per_test_significance"])
      assert r.epsilon_ceiling == pytest.approx(float(ceiling), rel=1e-9)
      assert r.details["num_members"] <= m and r.details["num_correct"] <= r.details["num_guesses"]
      # The f-DP one-run bounds of the same scores, and the optimistic (uncorrected) figures.
      assert r.epsilon_fdp_gaussian >= 0 and r.details["mu_lower_bound"] >= 0
      assert r.details["fdp_gaussian_num_correct"] <= r.details["fdp_gaussian_num_guesses"]
      assert r.epsilon_fdp_run >= 0 and r.details["noise_multiplier_upper_bound"] > 0
      assert r.details["optimistic_epsilon_steinke"] >= r.epsilon_lower_bound
      assert r.details["optimistic_epsilon_fdp_gaussian"] >= r.epsilon_fdp_gaussian
      if cfg.game == "uniaud":
        expected = accounting.dpsgd_epsilon_replace_one(
            r.noise_multiplier, r.sampling_rate, r.num_steps, cfg.delta)
        assert r.num_training_examples == m  # Alg. 2 trains on the canaries alone
      else:
        expected = accounting.dpsgd_epsilon(r.noise_multiplier, r.sampling_rate, r.num_steps,
                                            cfg.delta)
      if math.isinf(expected):
        assert r.epsilon_theory == INF
      else:
        assert r.epsilon_theory == pytest.approx(expected, rel=1e-9)
  # The noise was calibrated to the configured epsilon (RDP, add-or-remove).
  for name in ("one_run_dirac", "one_run_mislabelled", "many_run_dirac"):
    assert noisy_results[name].epsilon_theory == pytest.approx(0.2, rel=0.02)
  # Replace-one is weaker than add-or-remove for the same run.
  uni = noisy_results["uniaud_gaussian"]
  assert uni.epsilon_theory >= uni.epsilon_theory_pld


def test_determinism(digits, noisy_results):
  config = _config(**NOISY["one_run_mislabelled"])
  again = audit.run(jax.random.key(0), config, data=digits).to_dict()
  first = noisy_results["one_run_mislabelled"].to_dict()
  first.pop("wall_time_s"), again.pop("wall_time_s")
  assert again == first
  other = audit.run(jax.random.key(1), config, data=digits).to_dict()
  other.pop("wall_time_s")
  assert other["details"] != first["details"]


def test_result_round_trips_through_its_dict(noisy_results, open_results):
  # The game contract: Result.from_dict rebuilds the result from to_dict (strict JSON).
  for result in (*noisy_results.values(), *open_results.values()):
    plain = results.loads(results.dumps(result.to_dict()))
    back = audit.Result.from_dict(plain)
    assert results.canonical_json(back.to_dict()) == results.canonical_json(result.to_dict())
    if not math.isnan(result.test_accuracy):
      assert back == audit.Result(**{**dataclasses.asdict(result),
                                     "details": results.loads(results.dumps(result.details))})
  assert audit.Config is audit.DPSGDAuditConfig and audit.Result is audit.DPSGDAuditResult


def test_run_reports_progress_and_reuses_a_stored_result(tmp_path, digits):
  config = _config(game="one_run", canary="gaussian", num_canaries=20, epsilon=INF,
                   epochs=0.5, batch_size=64, hidden_sizes=(4,))
  store = results.CellStore(str(tmp_path / "cells"))
  heard = []
  first = audit.run(jax.random.key(3), config, data=digits, store=store,
                    progress=lambda *a: heard.append(a))
  assert [h[:2] for h in heard] == [(1, 1)] and heard[0][2].startswith("one_run:gaussian ")
  assert len(os.listdir(tmp_path / "cells")) == 1
  again = audit.run(jax.random.key(3), config, data=digits, store=store)
  assert again.to_dict() == first.to_dict()  # read back: the same wall time too
  # Another key, other data or another model is another stored result.
  audit.run(jax.random.key(4), config, data=digits, store=store)
  audit.run(jax.random.key(3), config, data=digits._replace(num_classes=11), store=store)
  audit.run(jax.random.key(3), config, data=digits, store=store,
            model=models.MLP((3,), 10, example_ndim=digits.train_features.ndim - 1))
  assert len(os.listdir(tmp_path / "cells")) == 4
  with pytest.raises(ValueError, match="store must be a CellStore"):
    audit.run(jax.random.key(3), config, data=digits, store=str(tmp_path))


def test_run_rejects_raw_non_key(digits):
  with pytest.raises((ValueError, TypeError)):
    audit.run("not a key", _config(hidden_sizes=(4,)), data=digits)


# ------------------------------------------------------------------------------ helpers


def _naive_self_comparison(loss_fn, members, labels, fresh):
  scores = []
  for i in range(len(members)):
    trained, comparison = labels[i], fresh[i]
    z, z_tilde = (trained, comparison) if members[i] else (comparison, trained)
    scores.append(loss_fn(i, z_tilde) - loss_fn(i, z))
  return np.array(scores)


@pytest.mark.parametrize("label_shape", [(), (3,)])
def test_self_comparison_scores_match_alg2(label_shape):
  rng = np.random.default_rng(0)
  m, classes = 12, 5
  table = rng.normal(size=(m, classes))  # a fixed per-canary loss table
  members = rng.random(m) < 0.5
  labels = rng.integers(0, classes, (m,) + label_shape)
  fresh = rng.integers(0, classes, (m,) + label_shape)

  def loss_one(i, y):
    return float(np.mean(table[i, np.atleast_1d(y)]))

  def loss_batch(y):
    y = np.asarray(y)
    return np.array([loss_one(i, y[i]) for i in range(m)])

  got = audit._self_comparison_scores(loss_batch, members, labels, fresh)
  np.testing.assert_allclose(got, _naive_self_comparison(loss_one, members, labels, fresh))
  # A member's score is L(fresh) - L(trained); a non-member's the opposite.
  i = int(np.argmax(members))
  assert got[i] == pytest.approx(loss_one(i, fresh[i]) - loss_one(i, labels[i]))


def test_weakest_coordinates_have_zero_gradient(digits):
  x, y = jnp.asarray(digits.train_features), jnp.asarray(digits.train_labels)
  model = models.MLP((16,), 10, example_ndim=3)
  params = model.init(jax.random.key(0), jnp.asarray(x[:1]))["params"]
  flat_x = x.reshape(x.shape[0], -1)
  blank = np.flatnonzero(np.all(flat_x == 0, axis=0))
  assert 0 in blank  # digits' top-left pixel is always blank
  count = 16 * len(blank)
  coords = audit.weakest_coordinates(model, params, x, y, count)
  assert coords.shape == (count,) and np.all(np.diff(coords) > 0)

  def flat_grad(i):
    g = jax.grad(lambda p: clipping.softmax_cross_entropy(
        model.apply({"params": p}, x[i][None]), y[i][None])[0])(params)
    return audit._flat(g)

  grads = np.asarray(jax.vmap(flat_grad)(jnp.arange(512)))
  for i in (0, 5, 100, 400):
    np.testing.assert_array_equal(grads[i][coords], 0.0)
  # The coordinates with zero gradient on every sampled example, in index order (ties are
  # broken by index); they include the first-layer weights of the blank pixels.
  zero = np.flatnonzero(np.all(grads == 0, axis=0))
  marker = jax.tree.map(jnp.zeros_like, params)
  first = sorted(marker.keys())[0]
  kernel = np.zeros(marker[first]["kernel"].shape)
  kernel[blank, :] = 1.0
  marker[first]["kernel"] = jnp.asarray(kernel)
  blank_coords = np.flatnonzero(np.asarray(audit._flat(marker)))
  assert set(blank_coords) <= set(zero)
  np.testing.assert_array_equal(coords, zero[:count])
  with pytest.raises(ValueError, match="num_canaries"):
    audit.weakest_coordinates(model, params, x[:4], y[:4], 10**7)


# ------------------------------------------------------------------------------ UniAud++


def test_uniaud_plus_runs_on_digits(digits):
  config = _config(game="uniaud_plus", canary="trigger", num_canaries=200, num_tags=20,
                   patch_size=3, epsilon=4.0, epochs=1, batch_size=128, hidden_sizes=(8,))
  r = audit.run(jax.random.key(0), config, data=digits)
  assert r.adjacency == "replace_one" and r.num_observations == 200
  assert r.num_training_examples == digits.train_features.shape[0]
  assert 0.0 <= r.epsilon_lower_bound <= r.epsilon_theory
  assert 0.0 <= r.test_accuracy <= 1.0
  assert r.epsilon_theory == pytest.approx(accounting.dpsgd_epsilon_replace_one(
      r.noise_multiplier, r.sampling_rate, r.num_steps, config.delta), rel=1e-9)
  json.dumps(r.to_dict(), allow_nan=True)


def test_uniaud_plus_needs_images_that_fit_the_patch(digits):
  flat = digits._replace(
      train_features=digits.train_features.reshape(digits.train_features.shape[0], -1),
      test_features=digits.test_features.reshape(digits.test_features.shape[0], -1),
      pool_features=digits.pool_features.reshape(digits.pool_features.shape[0], -1))
  config = _config(game="uniaud_plus", canary="trigger", num_canaries=10, num_tags=20,
                   hidden_sizes=(4,))
  with pytest.raises(ValueError, match="image"):
    audit.run(jax.random.key(0), config, data=flat)
  big = _config(game="uniaud_plus", canary="trigger", num_canaries=10, num_tags=20,
                patch_size=9, hidden_sizes=(4,))
  with pytest.raises(ValueError, match="patch_size"):
    audit.run(jax.random.key(0), big, data=digits)


# ------------------------------------------------------------------------ what results say
def _bare_result(**overrides):
  fields = dict(game="one_run", canary="gaussian", adjacency="add_or_remove",
                epsilon_lower_bound=0.0, epsilon_ceiling=1.0, epsilon_theory=1.0,
                epsilon_theory_pld=1.0, noise_multiplier=1.0, sampling_rate=0.1, num_steps=10,
                num_training_examples=100, test_accuracy=0.5, num_observations=1000,
                details={"max_epsilon_ceiling": 5.0, "max_epsilon_ceiling_without_delta": 5.05},
                wall_time_s=0.0)
  fields.update(overrides)
  return audit.DPSGDAuditResult(**fields)


def test_results_say_when_the_bound_is_optimistic_or_weakened_by_delta():
  assert _bare_result().warnings == []
  optimistic = _bare_result(optimistic=True)
  record = optimistic.to_dict()
  assert record["optimistic"] is True and "epsilon_lower_bound" not in record
  assert record["epsilon_optimistic"] == 0.0  # never keyed as a lower bound
  assert any("optimistic" in line for line in record["warnings"])
  assert "epsilon_lower_bound" in _bare_result().to_dict()
  both = _bare_result(optimistic=True, epsilon_fdp_gaussian=0.5)
  assert len(both.warnings) == 2 and "epsilon_fdp_gaussian" in both.warnings[1]
  vacuous = _bare_result(details={"max_epsilon_ceiling": 0.0,
                                  "max_epsilon_ceiling_without_delta": 5.05})
  (line,) = vacuous.warnings
  assert "vacuous" in line and "num_canaries * delta <= 0.01" in line


def test_case_one_and_canaries_of_their_own_shape(digits):
  # UniAud's Case I (m = n: the canaries alone are the training set) with Table IV's kind of
  # canaries (a dimension d and C classes of their own; here d = 64, C = 20), one-run and
  # UniAud, and a model by name.
  small = dict(num_canaries=64, epsilon=INF, epochs=4, batch_size=16, hidden_sizes=(16,))
  one = audit.run(jax.random.key(1), _config(game="one_run", canary="orthogonal",
                                             canaries_only=True, canary_dim=64,
                                             num_canary_classes=20, **small), data=digits)
  assert one.num_training_examples == 64 and math.isnan(one.test_accuracy)
  assert 0 <= one.epsilon_lower_bound <= one.epsilon_ceiling
  config = _config(game="uniaud", canary="gaussian", canary_dim=32, num_canary_classes=20,
                   model="logistic", **small)
  uni = audit.run(jax.random.key(1), config, data=digits)
  assert uni.num_training_examples == 64 and math.isnan(uni.test_accuracy)
  assert audit.canary_shape(config, digits) == ((32,), 20)
  back = audit.DPSGDAuditResult.from_dict(results.loads(results.dumps(uni.to_dict())))
  assert math.isnan(back.test_accuracy)  # stored and read back whole
  assert {k: config.to_dict()[k] for k in ("model", "canary_dim", "num_canary_classes")} == {
      "model": "logistic", "canary_dim": 32, "num_canary_classes": 20}
  # Case I with real (mislabelled) canaries: trains on the included canaries only.
  real = audit.run(jax.random.key(1), _config(game="one_run", canary="mislabelled",
                                              canaries_only=True, **small), data=digits)
  assert real.num_training_examples == 64 and 0 <= real.test_accuracy <= 1
  # The default record is that of the configuration before these options existed.
  assert set(_config().to_dict()) == {f.name for f in dataclasses.fields(audit.DPSGDAuditConfig)
                                      } - set(audit.LATER_OPTIONS)


def test_results_stored_before_the_fdp_bounds_still_load():
  record = results.loads(results.dumps(_bare_result(
      adjacency="add_or_remove_one", epsilon_fdp_gaussian=1.5).to_dict()))
  assert audit.DPSGDAuditResult.from_dict(record).epsilon_fdp_gaussian == 1.5
  old = {k: v for k, v in record.items() if not k.startswith("epsilon_fdp")}
  back = audit.DPSGDAuditResult.from_dict(old)
  assert math.isnan(back.epsilon_fdp_gaussian) and math.isnan(back.epsilon_fdp_run)
  for bad in ({"epsilon_fdp_gaussian": -1.0}, {"epsilon_fdp_run": "x"}):
    with pytest.raises((ValueError, TypeError)):
      audit.DPSGDAuditResult.from_dict({**record, **bad})
