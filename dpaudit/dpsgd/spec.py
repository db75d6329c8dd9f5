"""One DP-SGD specification for every user of DP-SGD: the schedule (epochs -> steps) and the
noise (target epsilon -> noise multiplier) are computed here and nowhere else, and the settings
every DP-SGD configuration carries (:class:`DPSGDSettings`) are declared and validated here once.

Every DP-SGD run of the project (the DP-SGD audits, the accuracy/epsilon trade-off, the
PANORAMIA targets, DP-TVAE, the language-model reconstruction) draws Poisson batches at rate
``q = min(1, batch_size / N)`` for ``T = ceil(epochs / q)`` steps (:func:`schedule`), so the
same settings give the same steps and, through one accountant call, the same noise.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from typing import Any, NamedTuple

import numpy as np

from dpaudit import _validate
from dpaudit.accounting import dpsgd as accounting
from dpaudit.dpsgd import training

ACCOUNTANTS = ("rdp", "pld")


def schedule(epochs: float, batch_size: int, num_examples: int) -> tuple[float, int]:
  """``(q, T)``: Poisson sampling rate ``q = min(1, batch_size / num_examples)`` and
  ``T = ceil(epochs / q)`` steps (at least 1), ``epochs`` being expected passes over the data.

  ``epochs / q`` is rounded to 9 decimals before the ceiling, so that a whole number of steps
  computed in floating point (e.g. 30 epochs at q = 64 / 1438 is 674.0625 steps, but 3 epochs at
  q = 1438 / 1438 must be 3 steps, not 4) is not pushed up by rounding error.

  >>> schedule(10, 128, 60_000)
  (0.0021333333333333334, 4688)
  >>> schedule(3, 2000, 1000)  # a batch larger than the data: every example, every step
  (1.0, 3)
  """
  _validate.check_range("epochs", epochs, 0.0, math.inf, low_open=True, high_open=True)
  batch_size = _validate.check_integer("batch_size", batch_size, 1)
  num_examples = _validate.check_integer("num_examples", num_examples, 1)
  q = min(1.0, batch_size / num_examples)
  return q, max(1, math.ceil(round(epochs / q, 9)))


def noise_multiplier(epsilon: float, sampling_rate: float, num_steps: int, delta: float,
                     accountant: str = "rdp") -> float:
  """The smallest noise multiplier sigma that makes ``num_steps`` Poisson-sampled steps at
  ``sampling_rate`` (epsilon, delta)-DP (add-or-remove adjacency) by ``accountant``
  (:func:`dpaudit.accounting.calibrate_noise_multiplier`, its warnings silenced); 0 for
  ``epsilon = inf`` (no noise). The one calibration of every DP-SGD run
  (:meth:`DPSGDSpec.resolve`); each setting is calibrated once per process (a grid, a sweep or
  a test that asks again gets the cached value).

  >>> round(noise_multiplier(8.0, 0.1, 20, 1e-5), 3)
  0.734
  >>> noise_multiplier(float("inf"), 0.1, 20, 1e-5)
  0.0
  """
  _validate.check_range("epsilon", epsilon, 0.0, low_open=True)
  _validate.check_choice("accountant", accountant, ACCOUNTANTS)
  if math.isinf(epsilon):
    return 0.0
  num_steps = _validate.check_integer("num_steps", num_steps, 1)
  return _calibrated(float(epsilon), float(sampling_rate), num_steps, float(delta), accountant)


@functools.lru_cache(maxsize=1024)
def _calibrated(epsilon: float, sampling_rate: float, num_steps: int, delta: float,
                accountant: str) -> float:
  with accounting.quiet_accountant():
    return float(accounting.calibrate_noise_multiplier(epsilon, sampling_rate, num_steps, delta,
                                                       accountant=accountant))


def _check_positive_finite(name: str, value: Any) -> None:
  if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
    raise ValueError(f"{name}={_validate.describe(value)} must be a real number in the valid "
                     "range (0, inf)")
  if not 0 < value < math.inf:
    raise ValueError(f"{name}={np.asarray(value).item()} must be > 0 and finite, in the valid "
                     "range (0, inf)")


def _check_delta(delta: Any) -> None:
  if isinstance(delta, (bool, np.bool_)) or not isinstance(delta, numbers.Real):
    raise ValueError(f"delta={_validate.describe(delta)} must be a real number in the valid "
                     "range (0, 1)")
  _validate.check_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)


class ResolvedDPSGD(NamedTuple):
  """What a :class:`DPSGDSpec` comes to for a dataset of a given size."""
  sampling_rate: float
  num_steps: int
  noise_multiplier: float
  train_config: training.TrainConfig


@dataclasses.dataclass(frozen=True)
class DPSGDSpec:
  """DP-SGD settings, before the dataset size is known.

  Attributes:
    epochs: expected passes over the data (:func:`schedule`); or give ``num_steps``.
    num_steps: steps T, instead of ``epochs``.
    batch_size: expected Poisson batch size qN.
    epsilon: target epsilon the noise is calibrated to (add-or-remove adjacency, at ``delta``,
      by ``accountant``); ``inf`` trains without noise (clipping kept). Or give
      ``noise_multiplier``.
    noise_multiplier: sigma, instead of ``epsilon``.
    delta: delta of the accountant, in (0, 1).
    l2_clip_norm: per-example clipping norm C.
    optimizer, learning_rate, physical_batch_size: as in :class:`~dpaudit.dpsgd.TrainConfig`
      (``physical_batch_size`` 0: twice ``batch_size``).
    accountant: ``"rdp"`` or ``"pld"`` (:func:`dpaudit.accounting.dpsgd_epsilon`).

  >>> spec = DPSGDSpec(epochs=2, batch_size=100, epsilon=8.0)
  >>> resolved = spec.resolve(1000)
  >>> resolved.sampling_rate, resolved.num_steps, round(resolved.noise_multiplier, 3)
  (0.1, 20, 0.734)
  """
  epochs: float | None = None
  num_steps: int | None = None
  batch_size: int = 128
  epsilon: float | None = None
  noise_multiplier: float | None = None
  delta: float = 1e-5
  l2_clip_norm: float = 1.0
  optimizer: str = "sgd"
  learning_rate: float = 0.1
  physical_batch_size: int = 0
  accountant: str = "rdp"

  def __post_init__(self):
    if (self.epochs is None) == (self.num_steps is None):
      raise ValueError(f"give exactly one of epochs and num_steps, got epochs={self.epochs!r} "
                       f"and num_steps={self.num_steps!r}")
    if (self.epsilon is None) == (self.noise_multiplier is None):
      raise ValueError(f"give exactly one of epsilon and noise_multiplier, got epsilon="
                       f"{self.epsilon!r} and noise_multiplier={self.noise_multiplier!r}")
    if self.epochs is not None:
      _validate.check_range("epochs", self.epochs, 0.0, math.inf, low_open=True,
                            high_open=True)
    else:
      _validate.check_integer("num_steps", self.num_steps, 1)
    _validate.check_integer("batch_size", self.batch_size, 1)
    if self.epsilon is not None:
      _validate.check_range("epsilon", self.epsilon, 0.0, low_open=True)
    else:
      _validate.check_range("noise_multiplier", self.noise_multiplier, 0.0, finite=True)
    _validate.check_range("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)
    _validate.check_range("l2_clip_norm", self.l2_clip_norm, 0.0, low_open=True)
    _validate.check_range("learning_rate", self.learning_rate, 0.0, math.inf, low_open=True,
                          high_open=True)
    _validate.check_integer("physical_batch_size", self.physical_batch_size, 0)
    _validate.check_choice("accountant", self.accountant, ACCOUNTANTS)

  def resolve(self, num_examples: int) -> ResolvedDPSGD:
    """Sampling rate, steps, noise multiplier and the engine's
    :class:`~dpaudit.dpsgd.TrainConfig` for ``num_examples`` training examples."""
    if self.epochs is not None:
      q, steps = schedule(self.epochs, self.batch_size, num_examples)
    else:
      num_examples = _validate.check_integer("num_examples", num_examples, 1)
      q, steps = min(1.0, self.batch_size / num_examples), int(self.num_steps)
    if self.noise_multiplier is not None:
      sigma = float(self.noise_multiplier)
    else:
      sigma = noise_multiplier(self.epsilon, q, steps, self.delta, self.accountant)
    config = training.TrainConfig(
        num_steps=steps, sampling_rate=q, noise_multiplier=sigma,
        l2_clip_norm=self.l2_clip_norm, learning_rate=self.learning_rate,
        optimizer=self.optimizer,
        physical_batch_size=self.physical_batch_size or 2 * self.batch_size)
    return ResolvedDPSGD(q, steps, sigma, config)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DPSGDSettings:
  """The DP-SGD settings that every DP-SGD configuration of the project carries (the DP-SGD
  audits and their grid, the accuracy/epsilon trade-off, the PANORAMIA targets, DP-TVAE, the
  language-model reconstruction), declared and validated once; :meth:`dpsgd_spec` makes them
  a :class:`DPSGDSpec`.

  A configuration inherits them, giving the defaults that differ as class keywords
  (``class Config(DPSGDSettings, epochs=30.0):``, see :meth:`__init_subclass__`); the fields
  are keyword-only, so a subclass may add fields without defaults; its ``__post_init__`` calls
  this one.

  Attributes:
    epochs: expected passes over the training set (:func:`schedule`), > 0 and finite.
    batch_size: expected Poisson batch size qN, an integer >= 1.
    learning_rate: the optimizer's step size, > 0 and finite.
    l2_clip_norm: per-example clipping norm C, > 0 and finite.
    delta: the delta of the accountant, in (0, 1).

  >>> settings = DPSGDSettings(epochs=2, batch_size=100)
  >>> settings.dpsgd_spec(epsilon=8.0).resolve(1000).num_steps
  20
  >>> DPSGDSettings(delta=1.0)
  Traceback (most recent call last):
  ...
  ValueError: delta=1.0 is outside the valid range (0, 1)
  >>> @dataclasses.dataclass(frozen=True)
  ... class Sweep(DPSGDSettings, epochs=30.0):
  ...   seed: int = 0
  >>> Sweep().epochs, Sweep(epochs=2.0).epochs
  (30.0, 2.0)
  """
  epochs: float = 10.0
  batch_size: int = 128
  learning_rate: float = 0.1
  l2_clip_norm: float = 1.0
  delta: float = 1e-5

  def __init_subclass__(cls, **defaults: Any):
    """Gives the subclass's own defaults of these fields (``class C(DPSGDSettings,
    epochs=30.0)``): each is re-declared on ``cls``, keyword-only, before ``cls`` is made a
    dataclass; a name that is not one of these fields is a TypeError."""
    super().__init_subclass__()
    annotations = cls.__dict__.get("__annotations__")
    if annotations is None:
      annotations = cls.__annotations__ = {}
    for name, default in defaults.items():
      if name not in DPSGDSettings.__annotations__:
        raise TypeError(f"{cls.__name__}: {name}={default!r} is not a field of DPSGDSettings "
                        f"({', '.join(DPSGDSettings.__annotations__)})")
      annotations[name] = DPSGDSettings.__annotations__[name]
      setattr(cls, name, dataclasses.field(default=default, kw_only=True))

  def __post_init__(self):
    _check_positive_finite("epochs", self.epochs)
    _validate.check_integer("batch_size", self.batch_size, 1)
    _check_positive_finite("learning_rate", self.learning_rate)
    _check_positive_finite("l2_clip_norm", self.l2_clip_norm)
    _check_delta(self.delta)

  def dpsgd_spec(self, *, epsilon: float | None = None, noise_multiplier: float | None = None,
                 **overrides: Any) -> DPSGDSpec:
    """The :class:`DPSGDSpec` of these settings with noise calibrated to ``epsilon`` or the
    given ``noise_multiplier`` (exactly one); ``overrides`` sets its other fields
    (``optimizer``, ``physical_batch_size``, ``accountant``, or ``l2_clip_norm=inf`` for a run
    without clipping)."""
    fields = dict(epochs=self.epochs, batch_size=self.batch_size,
                  learning_rate=self.learning_rate, l2_clip_norm=self.l2_clip_norm,
                  delta=self.delta)
    return DPSGDSpec(**{**fields, **overrides}, epsilon=epsilon,
                     noise_multiplier=noise_multiplier)
