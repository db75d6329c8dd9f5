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
