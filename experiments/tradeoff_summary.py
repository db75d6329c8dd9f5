"""The train_dpsgd sweep's summaries: per target epsilon (:class:`EpsilonSummary`), the whole
sweep (:class:`TradeoffResult`, its JSON) and the printed :func:`table`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from experiments.tradeoff_runs import RunResult
from experiments.tradeoff_setup import TradeoffConfig


@dataclasses.dataclass(frozen=True)
class EpsilonSummary:
  """The runs of one target epsilon: accuracy mean and sample standard deviation over its
  ``repetitions`` (seeds)."""
  target_epsilon: float
  noise_multiplier: float
  epsilon_rdp: float
  epsilon_pld: float
  num_steps: int
  sampling_rate: float
  repetitions: int
  eval_accuracy_mean: float
  eval_accuracy_std: float | None  # None for one seed
  train_accuracy_mean: float
  train_accuracy_std: float | None
  wall_time_s_mean: float
  clipping_strategy: str

  @classmethod
  def of(cls, runs: Sequence[RunResult]) -> EpsilonSummary:

    def mean_std(values):
      values = np.asarray(values, np.float64)
      return float(values.mean()), (float(values.std(ddof=1)) if values.size > 1 else None)

    first = runs[0]
    eval_mean, eval_std = mean_std([r.eval_accuracy for r in runs])
    train_mean, train_std = mean_std([r.train_accuracy for r in runs])
    return cls(first.target_epsilon, first.noise_multiplier, first.epsilon_rdp,
               first.epsilon_pld, first.num_steps, first.sampling_rate, len(runs), eval_mean,
               eval_std, train_mean, train_std,
               float(np.mean([r.wall_time_s for r in runs])),
               ",".join(sorted({r.clipping_strategy for r in runs})))

  def to_dict(self, eval_split: str) -> dict[str, Any]:
    out = dataclasses.asdict(self)
    for stat in ("mean", "std"):
      out[f"{eval_split}_accuracy_{stat}"] = out.pop(f"eval_accuracy_{stat}")
    return out


@dataclasses.dataclass(frozen=True)
class TradeoffResult:
  config: TradeoffConfig
  num_train: int
  num_eval: int
  eval_split: str
  num_features: int
  sampling_rate: float
  num_steps: int
  summaries: tuple[EpsilonSummary, ...]
  runs: tuple[RunResult, ...]

  def to_dict(self) -> dict[str, Any]:
    return {
        "dataset": self.config.dataset,
        "model": self.config.model,
        "eval_split": self.eval_split,
        "num_train": self.num_train,
        f"num_{self.eval_split}": self.num_eval,
        "num_features": self.num_features,
        "delta": self.config.delta,
        "accountant": self.config.accountant,
        "sampling_rate": self.sampling_rate,
        "num_steps": self.num_steps,
        "target_epsilons": list(self.config.target_epsilons),
        "seeds": list(range(self.config.seed, self.config.seed + self.config.repetitions)),
        "summary": [s.to_dict(self.eval_split) for s in self.summaries],
        "runs": [r.to_dict(self.eval_split) for r in self.runs],
        "num_runs_reused": sum(r.reused for r in self.runs),
        "config": dataclasses.asdict(self.config),
    }


def _fmt_eps(value: float) -> str:
  return "inf" if math.isinf(value) else f"{value:.3f}"


def table(result: TradeoffResult) -> str:
  c = result.config
  name = f"{result.eval_split} acc"
  lines = [f"DP-SGD on {c.dataset} ({result.num_train} train / {result.num_eval} "
           f"{result.eval_split}), {c.model}, {c.optimizer} lr {c.learning_rate:g}, "
           f"C {c.l2_clip_norm:g}, q {result.sampling_rate:.4g} (batch {c.batch_size}), "
           f"{result.num_steps} steps ({c.epochs:g} epochs), delta {c.delta:g}, "
           f"calibrated with {c.accountant}, {c.repetitions} repetition"
           f"{'s' if c.repetitions > 1 else ''} (seed{'s' if c.repetitions > 1 else ''} "
           f"{c.seed}{f'-{c.seed + c.repetitions - 1}' if c.repetitions > 1 else ''})",
           f"{'target eps':>10} {'sigma':>8} {'eps RDP':>8} {'eps PLD':>8} {name:>17} "
           f"{'train acc':>17} {'s/run':>6}  clipping"]

  def mean_std(mean, std):
    return f"{mean:.4f}" + (f" ± {std:.4f}" if std is not None else " " * 9)

  for s in result.summaries:
    lines.append(f"{_fmt_eps(s.target_epsilon):>10} {s.noise_multiplier:8.4f} "
                 f"{_fmt_eps(s.epsilon_rdp):>8} {_fmt_eps(s.epsilon_pld):>8} "
                 f"{mean_std(s.eval_accuracy_mean, s.eval_accuracy_std):>17} "
                 f"{mean_std(s.train_accuracy_mean, s.train_accuracy_std):>17} "
                 f"{s.wall_time_s_mean:6.1f}  "
                 f"{s.clipping_strategy if math.isfinite(s.target_epsilon) else 'none'}")
  return "\n".join(lines)
