"""Tests of the n-gram canary reconstruction audit (Stock et al. 2022, Sec. 4.1):
the Monte Carlo estimator, one DP-SGD step against its closed form, the p0 limit, validity
of the RDP bound, the theory against a closed form, determinism and input validation."""

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

from dpaudit.audits import reconstruction as rec
from dpaudit.dpsgd import training
from dpaudit.models import ngram

# ------------------------------------------------------------------------------ _log_mean_exp

def test_log_mean_exp_against_scipy_and_formulas():
  rng = np.random.default_rng(0)
  x = rng.normal(-30.0, 2.0, size=500)
  value, se, ess = rec._log_mean_exp(x)
  np.testing.assert_allclose(value, special.logsumexp(x) - np.log(x.size), rtol=1e-12)
  w = np.exp(x)  # exp(-30 +- 10) is far from underflow in float64
  np.testing.assert_allclose(se, np.std(w, ddof=1) / (np.sqrt(x.size) * np.mean(w)), rtol=1e-9)
  np.testing.assert_allclose(ess, np.sum(w)**2 / np.sum(w**2), rtol=1e-9)
  # Equal values: every model contributes evenly.
  value, se, ess = rec._log_mean_exp(np.full(64, -700.0))
  assert value == pytest.approx(-700.0, abs=1e-9) and se == 0.0
  assert ess == pytest.approx(64.0, rel=1e-12)
  # One term dominating (no underflow trouble thanks to the max shift).
  value, se, ess = rec._log_mean_exp(np.array([-1000.0] * 99 + [0.0]))
  assert ess == pytest.approx(1.0, abs=1e-9)
  assert value == pytest.approx(-np.log(100.0), rel=1e-9)
  w = np.array([0.0] * 99 + [1.0])
  assert se == pytest.approx(np.std(w, ddof=1) / (np.sqrt(100) * np.mean(w)), rel=1e-9)
  # A single value has no standard error.
  assert rec._log_mean_exp(np.array([-3.0]))[1] == math.inf


# ------------------------------------------------------------- one DP-SGD step: closed form

NUM_KEYS = 4000


def test_one_step_matches_closed_form():
  """theta_1 = -eta (clip_C(g0) + sigma C xi), g0 = softmax(0) - onehot(c), eta = 0.5 / sigma."""
  T, D, sigma, C = 2, 3, 0.25, 0.5
  config = rec.NgramCanaryConfig(noise_multipliers=(sigma,), num_models=2, num_steps=1,
                                 canary_length=T, vocab_size=D, l2_clip_norm=C)
  canary = jnp.array([2, 0], jnp.int32)
  train_config = rec.lazy_ngram_train_config(config, sigma)
  assert train_config.learning_rate == pytest.approx(0.5 / sigma)
  assert train_config.sampling_rate == 1.0 and train_config.l2_clip_norm == C
  model = ngram.LazyNgram(T, D)
  features = jnp.zeros((1, 1), jnp.float32)
  run = training.make_run(model, train_config, 1, features[0], loss_fn=ngram.sequence_nll,
                          strategy="vmap")
  log_f = rec.lazy_ngram_run(config, sigma)

  def both(key):
    return run(key, features, canary[None]).params["logits"], log_f(key, canary)

  keys = jax.random.split(jax.random.key(7), NUM_KEYS)
  theta, logf = jax.jit(jax.vmap(both))(keys)
  theta = np.asarray(theta, np.float64)
  assert theta.shape == (NUM_KEYS, T, D)
  # lazy_ngram_run is log f of the final table of this very run.
  picked = np.log(special.softmax(theta, axis=-1))[:, np.arange(T), np.asarray(canary)]
  np.testing.assert_allclose(np.asarray(logf), picked.sum(-1), rtol=1e-4, atol=1e-4)

  eta = 0.5 / sigma
  g0 = np.full((T, D), 1.0 / D)
  g0[np.arange(T), np.asarray(canary)] -= 1.0
  norm = np.sqrt(np.sum(g0**2))
  assert norm > C  # clipping is active (jointly over all T x D entries)
  expected_mean = -eta * g0 * min(1.0, C / norm)
  noise_sd = eta * sigma * C
  se = noise_sd / np.sqrt(NUM_KEYS)
  np.testing.assert_array_less(np.abs(theta.mean(0) - expected_mean), 4 * se)
  # The unclipped (or per-position clipped) mean would be far off: the test discriminates.
  assert np.max(np.abs(-eta * g0 - expected_mean)) > 20 * se
  # Per-entry std: relative SE of a sample sd is about 1/sqrt(2 n).
  rel = 5 / np.sqrt(2 * NUM_KEYS)
  np.testing.assert_allclose(theta.std(0, ddof=1), noise_sd, rtol=rel)
  # Independent noise across entries: correlations within 4 / sqrt(n).
  corr = np.corrcoef(theta.reshape(NUM_KEYS, -1), rowvar=False)
  off = corr[~np.eye(T * D, dtype=bool)]
  assert np.max(np.abs(off)) < 4.5 / np.sqrt(NUM_KEYS)


def test_one_compiled_program_serves_every_sigma():
  """sigma and the learning rate are traced: a second sigma compiles nothing, and each gives
  the values of the program with that sigma as a constant (the path before this change)."""
  config = rec.NgramCanaryConfig(num_models=64, num_steps=3, canary_length=2, vocab_size=3,
                                 chunk_size=32)
  canary = jnp.array([1, 2], jnp.int32)
  compiles = []
  listener = lambda event, duration, **kw: compiles.append(event) if (
      event == "/jax/core/compile/backend_compile_duration") else None
  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    values = {}
    for sigma in (0.75, 3.0):
      compiles.clear()
      values[sigma] = rec.canary_log_probabilities(jax.random.key(5), canary, config, sigma)
      if sigma == 3.0:
        assert compiles == [], "a new sigma recompiled the training program"
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)
  for sigma, traced in values.items():
    model = ngram.LazyNgram(2, 3)
    features = jnp.zeros((1, 1), jnp.float32)
    run = training.make_run(model, rec.lazy_ngram_train_config(config, sigma), 1, features[0],
                            loss_fn=ngram.sequence_nll, strategy="vmap")
    constant = jax.jit(jax.vmap(
        lambda k: -ngram.sequence_nll(run(k, features, canary[None]).params["logits"], canary)))
    keys = [jax.random.split(jax.random.fold_in(jax.random.key(5), i), 32) for i in range(2)]
    expected = np.concatenate([np.asarray(constant(k), np.float64) for k in keys])
    np.testing.assert_allclose(traced, expected, rtol=1e-6, atol=1e-6)
    assert not np.allclose(values[0.75], values[3.0])


def test_huge_noise_gives_p0():
  """Noise dominates: by symmetry of the noise over digits E f_theta(c) ~= p0 = 1/D^T."""
  config = rec.NgramCanaryConfig(noise_multipliers=(200.0,), num_models=NUM_KEYS, num_steps=2,
                                 canary_length=2, vocab_size=3)
  canary = jnp.array([1, 1], jnp.int32)
  log_f = rec.canary_log_probabilities(jax.random.key(3), canary, config, 200.0)
  assert log_f.shape == (NUM_KEYS,)
  f = np.exp(log_f)
  assert np.std(log_f) > 0.3  # the models are noisy, not untrained
  p0 = math.exp(config.log_p0)
  assert p0 == pytest.approx(1 / 9)
  assert abs(f.mean() - p0) < 4 * f.std(ddof=1) / np.sqrt(f.size)


# ------------------------------------------------------------------------ audit and validity

SIGMAS = (1.0, 2.0)


@pytest.fixture(scope="module")
def small_config():
  return rec.NgramCanaryConfig(noise_multipliers=SIGMAS, num_models=2000, num_steps=10,
                               canary_length=4, vocab_size=10)


@pytest.fixture(scope="module")
def audit(small_config):
  return rec.run(jax.random.key(11), small_config)


def test_audit_respects_rdp_bound(audit, small_config):
  assert len(audit.points) == len(SIGMAS)
  assert audit.log_p0 == pytest.approx(-4 * np.log(10))
  assert len(audit.canary) == 4 and all(0 <= c < 10 for c in audit.canary)
  reliable = [p for p in audit.points if p.reliable]
  assert reliable
  for p in audit.points:
    assert p.reliable == (p.effective_sample_size >= small_config.min_effective_sample_size)
    assert p.learning_rate == pytest.approx(0.5 / p.noise_multiplier)
    assert p.leakage == pytest.approx(p.log_p1 - audit.log_p0)
    assert p.leakage_bound <= p.traditional_bound + 1e-9
    assert p.leakage_bound <= -audit.log_p0 + 1e-9
    assert p.mean_log_f <= p.log_p1  # Jensen
    assert p.std_log_f > 0
    if p.reliable:
      assert p.leakage <= p.leakage_bound + 3 * p.log_p1_se, p
    # Training on the canary makes it more likely than chance.
    assert p.leakage > 3 * p.log_p1_se
  # At least one point has a non-trivial bound (below log 1/p0), so validity is not vacuous.
  assert any(p.reliable and p.bound_order > 1.0 for p in audit.points)
  leak = [p.leakage for p in audit.points]
  assert all(a > b for a, b in zip(leak, leak[1:]))


def test_ngram_theory_q1_closed_form(small_config):
  orders = np.linspace(1.05, 40.0, 400)
  config = dataclasses.replace(small_config, orders=tuple(orders))
  log_inv_p0 = -config.log_p0
  for sigma in (0.7, 2.0, 5.0):
    got = rec.ngram_theory(config, sigma)
    orders_np = np.asarray(config.orders)
    d = config.num_steps * orders_np / (2 * sigma**2)
    ours = d * (orders_np - 1) / orders_np + log_inv_p0 / orders_np
    expected = min(log_inv_p0, ours.min())
    np.testing.assert_allclose(got["leakage_bound"], expected, rtol=1e-6)
    if ours.min() < log_inv_p0:
      assert got["bound_order"] == pytest.approx(orders_np[np.argmin(ours)])
    else:
      assert got["bound_order"] == 1.0
    trad = d + log_inv_p0 / (orders_np - 1)
    np.testing.assert_allclose(got["traditional_bound"], trad.min(), rtol=1e-6)
    assert got["traditional_order"] == pytest.approx(orders_np[np.argmin(trad)])
  # Small sigma: the trivial bound log(1/p0) is the minimum.
  assert rec.ngram_theory(config, 0.7)["leakage_bound"] == pytest.approx(log_inv_p0)


def test_determinism_and_noise_level_keys(audit, small_config):
  key = jax.random.key(11)
  k1, k2 = rec.noise_level_key(key, 1.0), rec.noise_level_key(key, 2.0)
  assert not np.array_equal(jax.random.key_data(k1), jax.random.key_data(k2))
  np.testing.assert_array_equal(jax.random.key_data(k2),
                                jax.random.key_data(rec.noise_level_key(key, 2.0)))
  # Same key, sigma=2 alone: identical canary and identical point.
  alone = rec.run(key, dataclasses.replace(small_config, noise_multipliers=(2.0,)))
  assert alone.canary == audit.canary
  assert alone.points[0] == audit.points[1]


def test_progress_and_to_dict_is_plain_json(audit):
  d = audit.to_dict()
  text = json.dumps(d, allow_nan=False)
  assert json.loads(text) == d
  assert type(d["log_p0"]) is float and all(type(c) is int for c in d["canary"])
  for p, point in zip(d["points"], audit.points):
    for k, v in p.items():
      assert type(v) in (float, bool), (k, type(v))
    assert p["leakage"] == point.leakage and p["reliable"] == point.reliable


@pytest.mark.parametrize("field, value", [
    ("noise_multipliers", (1.0, 0.0)),
    ("noise_multipliers", (-1.0,)),
    ("noise_multipliers", ()),
    ("num_models", 1),
    ("vocab_size", 1),
    ("num_steps", 0),
    ("canary_length", 0),
    ("l2_clip_norm", 0.0),
    ("learning_rate_scale", -0.5),
    ("orders", (1.0, 2.0)),
    ("orders", (0.5,)),
    ("num_models", 2.5),
])
def test_config_validation(field, value):
  with pytest.raises(ValueError, match=field):
    rec.NgramCanaryConfig(**{field: value})


def test_audit_rejects_non_key():
  with pytest.raises((ValueError, TypeError)):
    rec.run("not a key", rec.NgramCanaryConfig(num_models=2, num_steps=1))


def test_result_round_trips_through_from_dict(audit, small_config):
  from dpaudit import results
  d = results.loads(results.dumps(audit.to_dict()))
  assert rec.Result.from_dict(d) == audit
  assert rec.Result.from_dict(d, small_config) == audit
  for damage in ({"canary": [-1, 2]}, {"log_p0": "x"}, {"points": [{"leakage": 1.0}]}):
    with pytest.raises((ValueError, TypeError, KeyError)):
      rec.Result.from_dict({**d, **damage})
  with pytest.raises(ValueError):
    rec.Result.from_dict(d, dataclasses.replace(small_config, canary_length=5))


def test_run_stores_one_cell_per_noise_level_and_reuses_it(tmp_path):
  from dpaudit import results
  config = rec.Config(noise_multipliers=(1.0, 3.0), num_models=8, num_steps=2, canary_length=2,
                      vocab_size=3)
  key = jax.random.key(4)
  calls = []
  progress = lambda done, total, message="": calls.append((done, total, message))
  store = results.CellStore(str(tmp_path))
  named = {"seed": 4, "prng_impl": "threefry2x32"}
  first = rec.run(key, config, progress=progress, store=store, key_config=named)
  assert first == rec.run(key, config)  # the store changes nothing
  assert [c[:2] for c in calls] == [(1, 2), (2, 2)] and "reused" not in calls[-1][2]
  # The cells are those experiments.ngram_reconstruction wrote before the game contract.
  spec = dataclasses.asdict(config)
  del spec["noise_multipliers"]
  spec["orders"] = list(spec["orders"])
  old = {"config": spec, "noise_multiplier": 3.0, **named}
  assert store.load(old, "sigma_3")["point"] == first.points[1].to_dict()
  calls.clear()
  assert rec.run(key, config, progress=progress, store=store, key_config=named) == first
  assert all(c[2].endswith("[reused]") for c in calls)
