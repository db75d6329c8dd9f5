"""The train_dpsgd sweep's settings (:class:`TradeoffConfig`), data, schedule and noise
calibration: everything :mod:`experiments.tradeoff` fixes before the first run trains."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from dpaudit import _validate, accounting, data, models, prng
from dpaudit.accounting.dpsgd import ACCOUNTANTS, quiet_accountant
from dpaudit.dpsgd import clipping
from dpaudit.dpsgd import spec as dpsgd_spec
from dpaudit.dpsgd.training import OPTIMIZERS

IMAGE_MODELS = ("lenet5", "wrn16_4")


@dataclasses.dataclass(frozen=True)
class TradeoffConfig(dpsgd_spec.DPSGDSettings, epochs=30.0, batch_size=64,
                     learning_rate=3e-3):
  """Settings of an accuracy-vs-epsilon sweep (``python -m experiments.train_dpsgd --help``
  explains each one; the field names are the flag names).

  ``target_epsilons`` are > 0 (``inf`` trains without clipping or noise); ``delta`` should be
  well below 1 / N_train; ``epochs`` and ``batch_size`` (the expected Poisson batch) fix the
  sampling rate and step count (:func:`schedule`); ``seed`` seeds the data split and the first
  of the ``repetitions`` runs per target epsilon, the others use ``seed + 1``, ... (the field
  was ``num_seeds``; it is not part of a run's key, so stored runs stay valid); ``clipping``,
  ``physical_batch_size`` and ``data_dir`` change how a run is computed, not its result.
  ``delta``, ``epochs``, ``batch_size``, ``learning_rate`` and ``l2_clip_norm`` are the fields
  of :class:`~dpaudit.dpsgd.spec.DPSGDSettings` (keyword-only).
  """
  dataset: str = "digits"
  model: str = "mlp"
  target_epsilons: tuple[float, ...] = (1.0, 4.0, 8.0, math.inf)
  optimizer: str = "adam"
  accountant: str = "rdp"
  test_fraction: float = 0.2
  validation_fraction: float = 0.0
  standardize: bool = True
  seed: int = 0
  repetitions: int = 3
  clipping: str = "auto"
  physical_batch_size: int = 128
  data_dir: str | None = None
  prng_impl: str = "threefry2x32"

  def __post_init__(self):
    _validate.check_choice("dataset", self.dataset, data.DATASETS)
    _validate.check_choice("model", self.model, models.MODEL_NAMES)
    object.__setattr__(self, "target_epsilons", tuple(float(e) for e in self.target_epsilons))
    _validate.check_nonempty("target_epsilons", self.target_epsilons)
    _validate.check_range("target_epsilons", self.target_epsilons, 0.0, None, low_open=True)
    if len(set(self.target_epsilons)) != len(self.target_epsilons):
      raise ValueError(f"target_epsilons={list(self.target_epsilons)} has repeated values")
    super().__post_init__()  # delta, epochs, batch_size, learning_rate, l2_clip_norm
    _validate.check_choice("optimizer", self.optimizer, OPTIMIZERS)
    _validate.check_choice("accountant", self.accountant, ACCOUNTANTS)
    _validate.check_range("test_fraction", self.test_fraction, 0.0, 1.0, low_open=True,
                          high_open=True)
    _validate.check_range("validation_fraction", self.validation_fraction, 0.0, 1.0,
                          high_open=True)
    _validate.check_integer("repetitions", self.repetitions, 1)
    _validate.check_integer("seed", self.seed, 0)
    if self.seed + self.repetitions > 2**63:
      raise ValueError(f"seed={self.seed} + repetitions={self.repetitions} exceeds 2^63")
    _validate.check_choice("clipping", self.clipping, clipping.STRATEGIES)
    _validate.check_integer("physical_batch_size", self.physical_batch_size, 1)
    _validate.check_choice("prng_impl", self.prng_impl, prng.PRNG_IMPLS)


# ---------------------------------------------------------------------------------- data


@dataclasses.dataclass(frozen=True, eq=False)
class PreparedData:
  """Training set and evaluation set (test, or validation carved from train), as arrays."""
  train_features: Any
  train_labels: Any
  eval_features: Any
  eval_labels: Any
  eval_split: str  # "test" or "validation"
  num_classes: int


def prepare_data(config: TradeoffConfig) -> PreparedData:
  """Loads, splits and standardizes ``config.dataset`` (statistics of the training set only)."""

  if config.dataset in data.LOCAL_DATASETS:
    train, test = data.train_test_split(data.load(config.dataset, "train", config.data_dir),
                                        config.test_fraction, config.seed, stratify=True)
  else:
    train = data.load(config.dataset, "train", config.data_dir)
    test = data.load(config.dataset, "test", config.data_dir)
  eval_split, evaluation = "test", test
  if config.validation_fraction > 0:
    train, evaluation = data.train_test_split(train, config.validation_fraction, config.seed,
                                              stratify=True)
    eval_split = "validation"
  if config.standardize:
    train, evaluation, _ = data.standardize(train, evaluation)
  return PreparedData(train.features, train.labels, evaluation.features, evaluation.labels,
                      eval_split, train.num_classes)


def make_model(config: TradeoffConfig, example_shape: Sequence[int], num_classes: int):
  if config.model in IMAGE_MODELS and len(example_shape) != 3:
    raise ValueError(f"model={config.model!r} needs image data (H, W, C) but dataset="
                     f"{config.dataset!r} has examples of shape {tuple(example_shape)}; use "
                     "--model=mlp or --model=logistic")
  return models.make_model(config.model, example_shape, num_classes)


def schedule(config: TradeoffConfig, num_train: int) -> tuple[float, int]:
  """Sampling rate q = batch_size / N and steps T = ceil(epochs / q)."""
  if config.batch_size > num_train:
    raise ValueError(f"batch_size={config.batch_size} exceeds the {num_train} training examples "
                     f"of {config.dataset!r}")
  return dpsgd_spec.schedule(config.epochs, config.batch_size, num_train)


@dataclasses.dataclass(frozen=True)
class Accounting:
  """Noise of one target epsilon and the epsilon both accountants give it."""
  target_epsilon: float
  noise_multiplier: float
  epsilon_rdp: float
  epsilon_pld: float


def account(config: TradeoffConfig, target_epsilon: float, sampling_rate: float,
            num_steps: int) -> Accounting:
  """Calibrated noise multiplier and the epsilon of both accountants at ``config.delta``."""
  with quiet_accountant():
    sigma = dpsgd_spec.noise_multiplier(target_epsilon, sampling_rate, num_steps, config.delta,
                                        config.accountant)
    eps = {name: accounting.dpsgd_epsilon(sigma, sampling_rate, num_steps, config.delta,
                                          accountant=name) for name in ("rdp", "pld")}
  return Accounting(target_epsilon, sigma, eps["rdp"], eps["pld"])
