"""PANORAMIA's pluggable image targets: a narrow ResNet-18 given as a flax module (or by name)
trains one DP-SGD step on tiny images in the PANORAMIA image path and gives per-example
losses; the study's config takes model names or modules for images only. The study itself runs
end to end (resume included) in tests/experiments/test_panoramia_cli.py."""

import math

import jax
import numpy as np
import pytest

from dpaudit import models
from dpaudit.audits import panoramia as pan
from dpaudit.audits import panoramia_modalities as mod
from dpaudit.audits import panoramia_study as study


def test_resnet18_target_trains_one_dp_step_and_gives_losses():
  rng = np.random.default_rng(0)
  examples = pan.Examples(rng.random((32, 8, 8, 1)).astype(np.float32),
                          rng.integers(0, 3, 32).astype(np.int32))
  spec = mod.image_spec((8, 8, 1), 3, models.ResNet18(num_classes=3, width=4))
  train = mod.TrainSpec(epochs=0.1, batch_size=8, epsilon=math.inf)  # one step: ceil(0.1 / q)
  params, engine = mod.train_model(jax.random.key(0), spec, examples, train)
  assert engine.num_steps == 1 and not engine.is_private
  losses = mod.loss_function(spec, params)(examples)
  assert losses.shape == (32,) and np.all(np.isfinite(losses)) and np.all(losses > 0)
  assert np.mean(losses) == pytest.approx(math.log(3), abs=1.0)
  named = mod.image_spec((8, 8, 1), 3, "resnet18")
  assert isinstance(named.module, models.ResNet18) and named.module.width == 64


def test_study_config_takes_image_models_by_name_or_module():
  module = models.ResNet18(num_classes=10, width=4)
  config = study.StudyConfig(target_model=module, helper_model="wrn16_4")
  assert config.target_model is module and config.train_spec("dp4").epsilon == 4.0
  assert study.StudyConfig(modality="text").target_model == "lenet5"
  with pytest.raises(ValueError, match="applies to modality='image' only"):
    study.StudyConfig(modality="tabular", target_model="resnet18")
  with pytest.raises(ValueError, match="target_model='resnet' is not one of"):
    study.StudyConfig(target_model="resnet")


def test_study_runs_from_its_seeds_key_and_its_result_round_trips():
  """run(key, config) on tiny images (a uniform 'generator', a logistic target): the key must
  be make_key(config.seed) (the cells are named by the seed), the progress ends at done ==
  total, and StudyResult.from_dict rebuilds to_dict's output (the cell store's validator)."""
  from dpaudit import results
  from dpaudit.attacks import panoramia as attacks
  rng = np.random.default_rng(0)
  examples = pan.Examples(rng.random((160, 4, 4, 1)).astype(np.float32),
                          rng.integers(0, 2, 160).astype(np.int32))

  def generator(key, d_g):
    return lambda key, n: pan.Examples(
        np.asarray(jax.random.uniform(key, (n, 4, 4, 1)), np.float32), np.zeros(n, np.int32))

  def no_helper(key, examples):
    raise AssertionError("baseline_helpers=('none',) trains no helper")
  modality = pan.Modality("image", generator, no_helper, lambda: attacks.ImageEncoder(2))
  data = study.StudyData(examples, mod.image_spec((4, 4, 1), 2, "logistic"), modality, None)
  config = study.StudyConfig(
      targets=("e1",), num_canaries=20, target_model="logistic", helper_model="logistic",
      target_batch_size=20, seed=3,
      panoramia=pan.PanoramiaConfig(
          num_audit=20, num_classifier_train=20, num_helper_train=2, baseline_helpers=("none",),
          null_samples=10, classifier=attacks.ClassifierConfig(epochs=1, batch_size=20)))
  assert study.Config is study.StudyConfig and study.Result is study.StudyResult
  with pytest.raises(ValueError, match=r"key must be dpaudit.prng.make_key\(config.seed=3\)"):
    study.run(study.make_key(0), config, data=data)
  reports = []
  result = study.run(study.make_key(3), config, data=data,
                     progress=lambda *report: reports.append(report))
  assert reports[-1][:2] == (2, 2) and result.config["seeds"] == [3]
  assert result.repetitions[0]["seed"] == 3 and list(result.cells) == ["e1"]
  cell = result.cells["e1"]  # O(1) RM/RN and beside it f-DP (delta = 0: its mu is the figure)
  assert cell["one_run_rm_rn_fdp_mu"] >= 0.0 and cell["one_run_rm_rn_fdp"] in (0.0, math.inf)
  assert "f-DP RM/RN" in result.tables() and "mu-GDP" in result.tables()
  # PANORAMIA RM;RN (rm_rn by default) on the 20 candidates: the MIA on half, 10 audited
  assert cell["panoramia_rm_rn"] >= 0.0 and 9 <= cell["panoramia_rm_rn_num_audit"] <= 11
  assert "PANORAMIA RM;RN" in result.tables()
  stored = results.loads(results.dumps(result.to_dict()))
  again = study.StudyResult.from_dict(stored, result.config)
  assert results.dumps(again.to_dict()) == results.dumps(result.to_dict())
  assert again.config == result.config
  with pytest.raises(ValueError):
    study.StudyResult.from_dict({**stored, "repetitions": [{"seed": 3, "cells": {"e1": {
        **stored["cells"]["e1"], "mia_auc": 1.5}}}]})
