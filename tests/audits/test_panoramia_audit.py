"""PANORAMIA's pipeline (Alg. 1) on a cheap Gaussian modality: validity with a target that never
saw the members, detection of a memorising target, a baseline that sees nothing of the target,
bounds that the exact binomial tails allow, and bad input. The real modalities run in
tests/audits/test_panoramia_modalities.py."""

import dataclasses
import math

import jax
import numpy as np
import pytest
from scipy import special, stats

from dpaudit.attacks import panoramia as attacks
from dpaudit.audits import panoramia as pan

DIM = 4
CONFIG = pan.PanoramiaConfig(num_audit=300, num_classifier_train=200, num_generator_train=200,
                             num_helper_train=200, baseline_helpers=("generated", "real", "none"),
                             classifier=attacks.ClassifierConfig(epochs=3, batch_size=50))


ONE_BASELINE = dataclasses.replace(CONFIG, baseline_helpers=("generated",))


def _gaussian_generator(key, d_g):
  """Fits a diagonal Gaussian to D_G (a real, if simple, generator)."""
  del key
  mean, std = d_g.inputs.mean(0), d_g.inputs.std(0)

  def sample(key, n):
    x = mean + std * np.asarray(jax.random.normal(key, (n, DIM)))
    return pan.Examples(x.astype(np.float32), np.zeros(n, np.int32))
  return sample


def _distance_model(key, examples):
  """A 'model' trained on examples: loss = squared distance to their mean."""
  del key
  center = np.asarray(examples.inputs).mean(0)
  return lambda ex: np.sum((np.asarray(ex.inputs) - center) ** 2, axis=1)


MODALITY = pan.Modality("gaussian", _gaussian_generator, _distance_model,
                        lambda: attacks.VectorEncoder((16,)))


def _data(seed, n=1200):
  x = np.random.default_rng(seed).normal(1.0, 1.0, (n, DIM)).astype(np.float32)
  return pan.Examples(x, np.zeros(n, np.int32))


def test_target_that_never_saw_the_members_measures_about_zero():
  gaps, tildes = [], []
  for rep in range(3):
    members = _data(rep)
    disjoint = _data(100 + rep)  # the target was trained on other data of the same law
    target = _distance_model(None, disjoint)
    result = pan.run(jax.random.key(rep), ONE_BASELINE, modality=MODALITY, target_loss=target,
                     members=members)
    tildes.append(result.eps_tilde)
    gaps.append(result.c_plus_eps_lb - result.c_lb)
    assert result.num_audit == 300 and 100 < result.num_members < 200
    # The null reference does not call this target's eps~ leakage.
    assert result.beyond_null is False and result.eps_tilde_p_value > 0.05
    assert result.null_eps_tilde["n"] == ONE_BASELINE.null_samples
  assert max(tildes) < 0.3, tildes
  assert max(gaps) < 0.3, gaps


def test_memorising_target_is_detected_and_bounds_are_valid_binomial_inversions():
  members = _data(7)
  seen = {row.tobytes() for row in members.inputs}

  def memorising(ex):  # zero loss on its training data, high elsewhere
    return np.array([0.0 if row.tobytes() in seen else 5.0 for row in np.asarray(ex.inputs)])

  result = pan.run(jax.random.key(3), CONFIG, modality=MODALITY, target_loss=memorising,
                   members=members)
  assert result.mia_auc > 0.99
  assert result.c_plus_eps_lb > result.c_lb + 1.0
  # c_lb is the strongest of the three baselines, each tested at beta / 6.
  assert result.c_lb == max(result.baseline_c_lb.values())
  assert result.baseline_c_lb[result.strongest_baseline] == result.c_lb
  assert result.baseline_curve.per_test_significance == pytest.approx(
      CONFIG.significance / 6 / len(result.baseline_curve.lower_bound))
  assert result.beyond_null is True
  assert result.eps_tilde_p_value == pytest.approx(1 / (CONFIG.null_samples + 1))
  assert result.eps_tilde == pytest.approx(result.c_plus_eps_lb - result.c_lb)
  assert result.one_run_rm_gn > 0.5
  # f-DP (Gaussian family) on the same guesses; CONFIG has delta = 0: its epsilon is inf
  assert result.one_run_rm_gn_fdp_mu > 0.5 and result.one_run_rm_gn_fdp == math.inf
  for curve, best in ((result.baseline_curve, result.c_lb),
                      (result.mia_curve, result.c_plus_eps_lb)):
    assert np.max(curve.lower_bound) == pytest.approx(best)
    positive = curve.lower_bound > 0
    r, tp = curve.predictions[positive], curve.true_positives[positive]
    p = special.expit(curve.lower_bound[positive])
    # the exact tail at the reported bound is at most the per-test level (Cor. 1-2)
    tail = stats.binom.sf(tp - 1, r, p)
    assert np.all(tail <= curve.per_test_significance * (1 + 1e-6))
    # and the bound is not loose: slightly above it the test would not reject
    above = stats.binom.sf(tp - 1, r, special.expit(curve.lower_bound[positive] + 1e-3))
    assert np.all(above > curve.per_test_significance * (1 - 1e-6))


def test_baseline_sees_nothing_of_the_target():
  members = _data(11)
  rng = np.random.default_rng(0)
  noisy = [lambda ex: rng.exponential(size=len(ex)), lambda ex: rng.exponential(size=len(ex))]
  results = [pan.run(jax.random.key(5), CONFIG, modality=MODALITY, target_loss=t, members=members)
             for t in noisy]
  assert results[0].baseline_c_lb == results[1].baseline_c_lb
  assert results[0].baseline_auc == results[1].baseline_auc
  np.testing.assert_array_equal(results[0].baseline_curve.precision,
                                results[1].baseline_curve.precision)
  assert results[0].mia_auc != results[1].mia_auc  # the MIA does see the (noise) target
  assert set(results[0].baseline_c_lb) == {"generated", "real", "none"}
  assert set(results[0].to_dict()) >= {"c_lb", "c_plus_eps_lb", "eps_tilde", "mia_curve"}


def test_result_round_trips_and_a_damaged_one_is_refused(tmp_path):
  """PanoramiaResult.from_dict (the cell store's validator) rebuilds a stored result exactly
  and refuses one cut short or edited against its own invariants; run's store keeps the result
  (a rerun does not call the target) and its progress ends at done == total."""
  from dpaudit import results
  config, reports = dataclasses.replace(CONFIG, null_samples=20), []
  store = results.CellStore(str(tmp_path / "cells"))
  result = pan.run(jax.random.key(1), config, modality=MODALITY,
                   target_loss=_distance_model(None, _data(50)), members=_data(1),
                   progress=lambda *report: reports.append(report), store=store)
  assert reports[-1][:2] == (pan._stages(config),) * 2 == (8, 8)
  assert [r[0] for r in reports] == list(range(len(reports)))
  assert pan.Config is pan.PanoramiaConfig and pan.Result is pan.PanoramiaResult

  def untouched(examples):
    raise AssertionError("the stored result was not reused")
  reused = pan.run(jax.random.key(1), config, modality=MODALITY, target_loss=untouched,
                   members=_data(1), store=store)
  assert results.dumps(reused.to_dict()) == results.dumps(result.to_dict())
  stored = results.loads(results.dumps(result.to_dict()))
  again = pan.PanoramiaResult.from_dict(stored)
  assert results.dumps(again.to_dict()) == results.dumps(result.to_dict())
  with pytest.raises(KeyError):
    pan.PanoramiaResult.from_dict({})
  older = {k: v for k, v in stored.items() if not k.startswith("one_run_rm_gn_fdp")}
  assert math.isnan(pan.PanoramiaResult.from_dict(older).one_run_rm_gn_fdp)  # stored before
  for edit, match in ((dict(c_lb=result.c_lb + 1.0), "strongest|eps_tilde"),
                      (dict(eps_tilde=result.eps_tilde + 0.5), "eps_tilde"),
                      (dict(mia_auc=1.5), "mia_auc"),
                      (dict(c_plus_eps_lb=float("nan")), "c_plus_eps_lb"),
                      (dict(eps_tilde_p_value=None), "go together"),
                      (dict(num_members=10**6), "num_members"),
                      (dict(one_run_rm_gn_fdp_mu=-1.0), "one_run_rm_gn_fdp_mu")):
    with pytest.raises(ValueError, match=match):
      pan.PanoramiaResult.from_dict({**stored, **edit})
  short = {**stored, "mia_curve": {**stored["mia_curve"],
                                   "precision": stored["mia_curve"]["precision"][:-1]}}
  with pytest.raises(ValueError, match="mia_curve"):
    pan.PanoramiaResult.from_dict(short)


def test_one_run_real_members_and_non_members():
  candidates = _data(3, 400)
  included = (np.arange(400) % 2).astype(np.int32)
  perfect = lambda ex: np.where(included == 1, 0.0, 1.0)
  assert pan.one_run_real(perfect, candidates, included) > 1.0
  blind = lambda ex: np.zeros(len(ex))
  assert pan.one_run_real(blind, candidates, included) < 0.2
  bounds = pan.one_run_real_bounds(perfect, candidates, included, delta=1e-5)
  assert bounds.epsilon == pan.one_run_real(perfect, candidates, included, delta=1e-5)
  assert bounds.epsilon_fdp_gaussian > bounds.epsilon and bounds.mu_lower_bound > 1.0


@pytest.mark.parametrize("change,match", [
    (dict(num_audit=2000), "exceeds the 1200 known members"),
    (dict(baseline_helpers=("teacher",)), "baseline_helpers"),
    (dict(baseline_helpers=()), "at least one"),
    (dict(significance=1.5), "significance"),
    (dict(null_samples=-1), "null_samples=-1"),
    (dict(baseline_helpers=("real", "real")), "twice"),
])
def test_bad_config_is_a_clear_error(change, match):
  with pytest.raises(ValueError, match=match):
    config = pan.PanoramiaConfig(**{**CONFIG.__dict__, **change})
    config.split_sizes(1200)


def test_target_loss_of_the_wrong_shape_is_a_clear_error():
  with pytest.raises(ValueError, match=r"target loss must return one loss per example"):
    pan.run(jax.random.key(0), CONFIG, modality=MODALITY,
            target_loss=lambda ex: np.zeros((len(ex), 2)), members=_data(0))
  with pytest.raises(ValueError, match="members must be an Examples"):
    pan.run(jax.random.key(0), CONFIG, modality=MODALITY, target_loss=lambda ex: np.zeros(len(ex)),
            members=np.zeros((10, 4)))
