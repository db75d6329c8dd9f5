"""One run of the train_dpsgd sweep (one target epsilon, one seed): training and evaluation
(:func:`train_one`), its :class:`RunResult` and the strict reader of stored runs
(:func:`run_from_dict`) for :class:`dpaudit.results.CellStore`."""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from dpaudit import dpsgd, prng, results
from experiments.tradeoff_setup import Accounting, PreparedData, TradeoffConfig

NUM_PROGRESS_LINES = 10
LOSS_CURVE_POINTS = 50


@dataclasses.dataclass(frozen=True)
class RunResult:
  """One training run (one target epsilon, one seed)."""
  target_epsilon: float
  seed: int
  noise_multiplier: float
  l2_clip_norm: float
  epsilon_rdp: float
  epsilon_pld: float
  num_steps: int
  sampling_rate: float
  eval_accuracy: float
  train_accuracy: float
  final_loss: float
  final_clipped_fraction: float
  mean_batch_size: float
  loss_curve_steps: tuple[int, ...]
  loss_curve: tuple[float, ...]
  clipping_strategy: str
  wall_time_s: float
  resumed_from_step: int
  reused: bool = False

  def to_dict(self, eval_split: str) -> dict[str, Any]:
    out = dataclasses.asdict(self)
    out[f"{eval_split}_accuracy"] = out.pop("eval_accuracy")
    out["loss_curve_steps"] = list(self.loss_curve_steps)
    out["loss_curve"] = list(self.loss_curve)
    return out


def run_spec(config: TradeoffConfig, target_epsilon: float, seed: int) -> dict[str, Any]:
  """Every setting that changes the result of one run (not physical_batch_size, clipping,
  data_dir: they change how it is computed, not what)."""
  spec = dataclasses.asdict(config)
  for name in ("target_epsilons", "repetitions", "physical_batch_size", "clipping", "data_dir"):
    del spec[name]
  spec["split_seed"] = spec.pop("seed")
  return {**spec, "target_epsilon": target_epsilon, "seed": seed}


def run_label(spec: dict[str, Any]) -> str:
  return f"eps{spec['target_epsilon']:g}_seed{spec['seed']}"


class ProgressPrinter:
  """``progress(step, metrics)`` callback: ~10 lines per run with the windowed mean loss.

  The ETA extrapolates the steps after the first one (which includes compilation).
  """

  def __init__(self, label: str, num_steps: int, stream=None):
    self.label, self.num_steps, self.stream = label, num_steps, stream
    self.every = max(1, math.ceil(num_steps / NUM_PROGRESS_LINES))
    self.losses, self.clipped = [], []
    self.start = time.perf_counter()
    self.first = None  # (step, time) of the first call

  def __call__(self, step: int, metrics) -> None:
    now = time.perf_counter()
    if self.first is None:
      self.first = (step, now)
    self.losses.append(float(metrics.mean_loss))
    self.clipped.append(float(metrics.clipped_fraction))
    if step % self.every and step != self.num_steps:
      return
    elapsed = now - self.start
    first_step, first_time = self.first
    eta = ((now - first_time) / (step - first_step) * (self.num_steps - step)
           if step > first_step else float("nan"))
    print(f"[{self.label}] step {step}/{self.num_steps} ({100 * step / self.num_steps:3.0f}%) "
          f"loss {sum(self.losses) / len(self.losses):.4f} clipped "
          f"{sum(self.clipped) / len(self.clipped):.2f}, {elapsed:.1f} s, ETA {eta:.0f} s",
          file=self.stream or sys.stderr, flush=True)
    self.losses, self.clipped = [], []


def _loss_curve(losses, num_points: int = LOSS_CURVE_POINTS) -> tuple[tuple[int, ...],
                                                                      tuple[float, ...]]:
  """Mean loss over ``num_points`` equal windows of steps, at each window's last step."""
  losses = np.asarray(losses, np.float64)
  edges = np.unique(np.linspace(0, losses.size, min(num_points, losses.size) + 1).astype(int))
  steps = tuple(int(e) for e in edges[1:])
  means = tuple(float(losses[a:b].mean()) for a, b in zip(edges[:-1], edges[1:]))
  return steps, means


def train_one(config: TradeoffConfig, prepared: PreparedData, model, acc: Accounting,
              sampling_rate: float, num_steps: int, seed: int, checkpoint_dir: str | None,
              progress: Callable | None) -> RunResult:
  """Trains and evaluates one run."""

  private = math.isfinite(acc.target_epsilon)
  clip = config.l2_clip_norm if private else math.inf
  train_config = dpsgd.TrainConfig(
      num_steps=num_steps, sampling_rate=sampling_rate, noise_multiplier=acc.noise_multiplier,
      l2_clip_norm=clip, learning_rate=config.learning_rate, optimizer=config.optimizer,
      physical_batch_size=config.physical_batch_size, clipping=config.clipping,
      checkpoint_every=max(1, math.ceil(num_steps / NUM_PROGRESS_LINES)))
  start = time.perf_counter()
  result = dpsgd.train(prng.make_key(seed, config.prng_impl), model, prepared.train_features,
                       prepared.train_labels, train_config, checkpoint_dir=checkpoint_dir,
                       progress=progress)
  params = result.state.params
  eval_accuracy = dpsgd.accuracy(model, params, prepared.eval_features, prepared.eval_labels)
  train_accuracy = dpsgd.accuracy(model, params, prepared.train_features, prepared.train_labels)
  wall_time_s = time.perf_counter() - start
  history = result.history
  tail = slice(-max(1, num_steps // NUM_PROGRESS_LINES), None)
  steps, curve = _loss_curve(history["mean_loss"])
  return RunResult(
      target_epsilon=acc.target_epsilon, seed=seed, noise_multiplier=acc.noise_multiplier,
      l2_clip_norm=clip, epsilon_rdp=acc.epsilon_rdp, epsilon_pld=acc.epsilon_pld,
      num_steps=num_steps, sampling_rate=sampling_rate, eval_accuracy=eval_accuracy,
      train_accuracy=train_accuracy,
      final_loss=float(np.mean(history["mean_loss"][tail])),
      final_clipped_fraction=float(np.mean(history["clipped_fraction"][tail])),
      mean_batch_size=float(np.mean(history["batch_size"])),
      loss_curve_steps=steps, loss_curve=curve, clipping_strategy=result.strategy,
      wall_time_s=wall_time_s, resumed_from_step=result.resumed_from_step)


def run_from_dict(stored: Any) -> RunResult:
  """The :class:`RunResult` stored by :func:`run` (``dataclasses.asdict``, strict-JSON round
  trip), checked to be whole for :class:`dpaudit.results.CellStore`: every field with its type
  and nothing else, accuracies and the clipped fraction in [0, 1], a sampling rate in (0, 1],
  noise >= 0, ``num_steps`` >= 1, a loss curve of increasing steps ending at ``num_steps``
  with one loss per step (NaN allowed: a diverged run). Raises KeyError, TypeError or
  ValueError."""
  types = {"target_epsilon": float, "seed": int, "noise_multiplier": float,
           "l2_clip_norm": float, "epsilon_rdp": float, "epsilon_pld": float, "num_steps": int,
           "sampling_rate": float, "eval_accuracy": float, "train_accuracy": float,
           "final_loss": float, "final_clipped_fraction": float, "mean_batch_size": float,
           "loss_curve_steps": list, "loss_curve": list, "clipping_strategy": str,
           "wall_time_s": float, "resumed_from_step": int, "reused": bool}
  results.check_fields("RunResult", stored, types)
  if set(stored) != set(types):
    raise KeyError(f"RunResult has unexpected keys {sorted(set(stored) - set(types))}")
  fields = dict(stored)
  fields["loss_curve_steps"] = tuple(fields["loss_curve_steps"])
  fields["loss_curve"] = tuple(fields["loss_curve"])
  run = RunResult(**fields)
  steps, curve = np.asarray(run.loss_curve_steps), np.asarray(run.loss_curve, np.float64)
  if not all(0 <= v <= 1 for v in (run.eval_accuracy, run.train_accuracy,
                                    run.final_clipped_fraction)):
    raise ValueError("eval_accuracy, train_accuracy and final_clipped_fraction must lie in "
                     f"[0, 1], got {run.eval_accuracy}, {run.train_accuracy}, "
                     f"{run.final_clipped_fraction}")
  if not 0 < run.sampling_rate <= 1 or run.noise_multiplier < 0 or run.num_steps < 1:
    raise ValueError(f"sampling_rate={run.sampling_rate}, noise_multiplier="
                     f"{run.noise_multiplier}, num_steps={run.num_steps} are not a DP-SGD run")
  if (steps.size == 0 or steps.size != curve.size or steps.dtype.kind not in "iu"
      or curve.dtype.kind != "f" or np.any(np.diff(steps) <= 0) or steps[0] < 1
      or steps[-1] != run.num_steps):
    raise ValueError(f"the loss curve (steps {run.loss_curve_steps}, losses {run.loss_curve}) "
                     f"is not one loss per window of the {run.num_steps} steps")
  return run
