r"""Accuracy of DP-SGD against its privacy budget: one run per (target epsilon, seed).

For each target :math:`\varepsilon` of ``TradeoffConfig.target_epsilons`` (``inf``:
non-private training, no clipping and no noise) the noise multiplier :math:`\sigma` is
calibrated (:func:`dpaudit.accounting.calibrate_noise_multiplier`) so that DP-SGD with Poisson
sampling rate :math:`q` = ``batch_size / N_train`` and :math:`T = \lceil \mathrm{epochs} / q
\rceil` steps is :math:`(\varepsilon, \delta)`-DP (Abadi et al., "Deep Learning with
Differential Privacy", 2016, Alg. 1, accounted with RDP or PLD through dp-accounting); the model
is trained ``repetitions`` times (repetition i at seed ``seed + i``) with
:func:`dpaudit.dpsgd.train` and evaluated, and the accuracy is summarised per target epsilon (mean
and sample standard deviation over the repetitions).

The run with seed ``s`` uses ``dpaudit.prng.make_key(s, prng_impl)`` for initialisation, batch
sampling and noise, the same key for every target epsilon (common random numbers). The data
split depends on ``seed`` only.

Runs are cells of a :class:`dpaudit.results.CellStore` (``runs_dir``): a finished run is reused,
an unfinished one continues from its checkpoint. ``python -m experiments.train_dpsgd`` is the
command-line entry point.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from dpaudit import _validate
from dpaudit import accounting
from dpaudit import data
from dpaudit import dpsgd
from dpaudit import models
from dpaudit import prng
from dpaudit import results
from dpaudit.accounting.dpsgd import ACCOUNTANTS, quiet_accountant
from dpaudit.dpsgd import clipping
from dpaudit.dpsgd import spec as dpsgd_spec
from dpaudit.dpsgd.training import OPTIMIZERS

IMAGE_MODELS = ("lenet5", "wrn16_4")
NUM_PROGRESS_LINES = 10
LOSS_CURVE_POINTS = 50


@dataclasses.dataclass(frozen=True)
class TradeoffConfig:
  """Settings of an accuracy-vs-epsilon sweep (``python -m experiments.train_dpsgd --help``
  explains each one; the field names are the flag names).

  ``target_epsilons`` are > 0 (``inf`` trains without clipping or noise); ``delta`` should be
  well below 1 / N_train; ``epochs`` and ``batch_size`` (the expected Poisson batch) fix the
  sampling rate and step count (:func:`schedule`); ``seed`` seeds the data split and the first
  of the ``repetitions`` runs per target epsilon, the others use ``seed + 1``, ... (the field
  was ``num_seeds``; it is not part of a run's key, so stored runs stay valid); ``clipping``,
  ``physical_batch_size`` and ``data_dir`` change how a run is computed, not its result.
  """
  dataset: str = "digits"
  model: str = "mlp"
  target_epsilons: tuple[float, ...] = (1.0, 4.0, 8.0, math.inf)
  delta: float = 1e-5
  epochs: float = 30.0
  batch_size: int = 64
  learning_rate: float = 3e-3
  optimizer: str = "adam"
  l2_clip_norm: float = 1.0
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
    _validate.check_range("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)
    _validate.check_range("epochs", self.epochs, 0.0, math.inf, low_open=True, high_open=True)
    _validate.check_integer("batch_size", self.batch_size, 1)
    _validate.check_range("learning_rate", self.learning_rate, 0.0, math.inf, low_open=True,
                          high_open=True)
    _validate.check_choice("optimizer", self.optimizer, OPTIMIZERS)
    _validate.check_range("l2_clip_norm", self.l2_clip_norm, 0.0, math.inf, low_open=True,
                          high_open=True)
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


# ---------------------------------------------------------------------------------- runs


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
    sigma = accounting.calibrate_noise_multiplier(target_epsilon, sampling_rate, num_steps,
                                                  config.delta, accountant=config.accountant)
    eps = {name: accounting.dpsgd_epsilon(sigma, sampling_rate, num_steps, config.delta,
                                          accountant=name) for name in ("rdp", "pld")}
  return Accounting(target_epsilon, sigma, eps["rdp"], eps["pld"])


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


def _from_stored(stored: dict[str, Any]) -> RunResult:
  return dataclasses.replace(run_from_dict(stored), reused=True)


# ---------------------------------------------------------------------------------- sweep


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


def run(config: TradeoffConfig, runs_dir: str | None = None, resume: bool = True,
        progress_stream=None) -> TradeoffResult:
  """Trains every (target epsilon, seed) pair of ``config`` and summarises them.

  Args:
    config: the sweep.
    runs_dir: the :class:`dpaudit.results.CellStore` of finished runs, which also keeps the
      checkpoints of unfinished ones (None: no checkpoints, no reuse).
    resume: reuse finished runs and checkpoints found in ``runs_dir``; otherwise the runs of
      this sweep are trained from scratch (and overwrite the stored ones).
    progress_stream: where progress lines go (default ``sys.stderr``).
  """
  stream = progress_stream or sys.stderr
  prepared = prepare_data(config)
  num_train = int(prepared.train_labels.shape[0])
  example_shape = prepared.train_features.shape[1:]
  model = make_model(config, example_shape, prepared.num_classes)
  sampling_rate, num_steps = schedule(config, num_train)
  if config.delta >= 1.0 / num_train:
    print(f"warning: delta={config.delta:g} >= 1/N_train = {1 / num_train:.3g}: a mechanism "
          "that publishes a random training example is (0, 1/N)-DP; use a smaller --delta",
          file=stream, flush=True)
  print(f"{config.dataset}: {num_train} training and {prepared.eval_labels.shape[0]} "
        f"{prepared.eval_split} examples; {config.model}; q = {sampling_rate:.4g}, "
        f"{num_steps} steps ({config.epochs:g} epochs of expected batch {config.batch_size})",
        file=stream, flush=True)
  store = results.CellStore(runs_dir, resume) if runs_dir else None
  runs, summaries = [], []
  for eps in config.target_epsilons:
    acc = None
    eps_runs = []
    for seed in range(config.seed, config.seed + config.repetitions):
      spec = run_spec(config, eps, seed)
      stored = store.load(spec, run_label(spec), run_from_dict) if store else None
      if stored is not None:
        finished = _from_stored(stored)
        print(f"[eps={eps:g} seed={seed}] reusing the finished run "
              f"{store.path(spec, run_label(spec))}: "
              f"{prepared.eval_split} accuracy {finished.eval_accuracy:.4f}", file=stream,
              flush=True)
        eps_runs.append(finished)
        continue
      if acc is None:
        start = time.perf_counter()
        acc = account(config, eps, sampling_rate, num_steps)
        print(f"[eps={eps:g}] noise_multiplier {acc.noise_multiplier:.4f} ({config.accountant}"
              f"); eps RDP {acc.epsilon_rdp:.4f}, PLD {acc.epsilon_pld:.4f} "
              f"(accounting {time.perf_counter() - start:.1f} s)", file=stream, flush=True)
      label = f"eps={eps:g} seed={seed}"
      run_dir = store.scratch_dir(spec, run_label(spec)) if store else None
      result = train_one(config, prepared, model, acc, sampling_rate, num_steps, seed,
                         run_dir, ProgressPrinter(label, num_steps, stream))
      print(f"[{label}] {prepared.eval_split} accuracy {result.eval_accuracy:.4f}, train "
            f"{result.train_accuracy:.4f} ({result.clipping_strategy} clipping, "
            f"{result.wall_time_s:.1f} s" +
            (f", resumed from step {result.resumed_from_step}" if result.resumed_from_step
             else "") + ")", file=stream, flush=True)
      if store:
        stored_run = results.loads(results.dumps(dataclasses.asdict(result)))
        run_from_dict(stored_run)  # a run that is not whole is a bug: raise, store nothing
        store.save(spec, stored_run, run_label(spec))  # drops the checkpoint
      eps_runs.append(result)
    runs.extend(eps_runs)
    summaries.append(EpsilonSummary.of(eps_runs))
  return TradeoffResult(config, num_train, int(prepared.eval_labels.shape[0]),
                          prepared.eval_split, int(math.prod(example_shape)), sampling_rate,
                          num_steps, tuple(summaries), tuple(runs))


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


