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
command-line entry point. This module drives the sweep (:func:`run`) and is its one namespace:
:mod:`experiments.tradeoff_setup` holds the settings, data and calibration,
:mod:`experiments.tradeoff_runs` one run, :mod:`experiments.tradeoff_summary` the summaries.
(It was ``dpaudit.dpsgd.tradeoff``: a sweep over models is no part of the DP-SGD library.)
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time

from dpaudit import results
from experiments.tradeoff_runs import (  # noqa: F401  (re-exported: the sweep's one namespace)
  LOSS_CURVE_POINTS,
  NUM_PROGRESS_LINES,
  ProgressPrinter,
  RunResult,
  run_from_dict,
  run_label,
  run_spec,
  train_one,
)
from experiments.tradeoff_setup import (  # noqa: F401
  IMAGE_MODELS,
  Accounting,
  PreparedData,
  TradeoffConfig,
  account,
  make_model,
  prepare_data,
  schedule,
)
from experiments.tradeoff_summary import EpsilonSummary, TradeoffResult, table  # noqa: F401


def _from_stored(stored) -> RunResult:
  return dataclasses.replace(run_from_dict(stored), reused=True)


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
