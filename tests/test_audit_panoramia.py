"""The front door's PANORAMIA (dpaudit.audit.panoramia): a model that memorised its members is
measured far above one that never saw them, the number is labelled a measurement (not a DP
lower bound), generated non-members can be given instead of a generator, a helper makes the
baseline 'generated', and the result is strict JSON."""

import json

import jax
import numpy as np
import pytest

from dpaudit import audit
from dpaudit.attacks.panoramia import ClassifierConfig
from dpaudit.audits.panoramia import Examples, PanoramiaConfig

DIM = 4
CONFIG = PanoramiaConfig(num_audit=100, num_classifier_train=100, num_helper_train=100,
                         baseline_helpers=("none",), null_samples=20,
                         classifier=ClassifierConfig(epochs=10))


def _examples(seed, n):
  x = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
  return Examples(x, np.zeros(n, np.int32))


def _generator(key, n):
  return Examples(np.asarray(jax.random.normal(key, (n, DIM)), np.float32),
                  np.zeros(n, np.int32))


def _distance_loss(examples):
  center = np.asarray(examples.inputs).mean(0)
  return lambda ex: np.sum((np.asarray(ex.inputs) - center) ** 2, axis=1)


def test_memorising_model_is_measured_and_labelled_a_measurement():
  members = _examples(0, 300)
  seen = {row.tobytes() for row in members.inputs}
  memorised = lambda ex: np.array([0.0 if r.tobytes() in seen else 3.0  # noqa: E731
                                   for r in np.asarray(ex.inputs)])
  result = audit.panoramia(jax.random.key(0), memorised, members, generator=_generator,
                           config=CONFIG)
  assert result.kind == audit.MEASUREMENT and "not a lower bound" in result.method
  assert result.lower_bound > 1.0 and result.lower_bound <= result.ceiling + 1e-9
  assert result.confidence == 0.95 and result.observations == 100
  d = result.details
  assert result.lower_bound == pytest.approx(max(0.0, d["c_plus_eps_lb"] - d["c_lb"]))
  assert d["beyond_null"] is True and d["mia_auc"] > 0.99
  assert " = " in result.summary() and "not a lower bound" in result.summary()
  assert json.loads(json.dumps(result.to_dict()))["kind"] == "measurement"

  # the same members, a model that never saw them, the generated non-members given as data
  unseen = _distance_loss(_examples(1, 300))
  pool = _generator(jax.random.key(5), 300)
  other = audit.panoramia(jax.random.key(0), unseen, (members.inputs, members.labels),
                          non_members=pool, config=CONFIG)
  assert other.lower_bound < 0.5 and other.details["beyond_null"] is False


def test_helper_gives_the_generated_baseline_and_default_sizes():
  members = _examples(2, 150)
  result = audit.panoramia(jax.random.key(1), _distance_loss(members), members,
                           generator=_generator, helper=lambda key, ex: _distance_loss(ex))
  assert result.details["strongest_baseline"] == "generated"
  assert result.observations == 50 and isinstance(result.lower_bound, float)


def test_bad_inputs_name_the_argument():
  members = _examples(0, 300)
  with pytest.raises(ValueError, match="exactly one of generator"):
    audit.panoramia(jax.random.key(0), _distance_loss(members), members)
  with pytest.raises(ValueError, match="non_members has 10 examples"):
    audit.panoramia(jax.random.key(0), _distance_loss(members), members,
                    non_members=_examples(1, 10), config=CONFIG)
  with pytest.raises(ValueError, match="need a helper"):
    audit.panoramia(jax.random.key(0), _distance_loss(members), members, generator=_generator,
                    config=PanoramiaConfig(num_audit=100, num_classifier_train=100))
