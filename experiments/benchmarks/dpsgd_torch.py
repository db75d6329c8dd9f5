r"""Optional PyTorch / Opacus baseline of the DP-SGD benchmark: wall time of one training step.

  python -m experiments.benchmarks.dpsgd_torch --model=mlp --batch_size=256 --num_steps=30 \
      --num_warmup=5 --threads=2

Builds the benchmark's models in PyTorch with the same architectures as the flax ones in
:mod:`dpaudit.models.classifiers`: ``mlp`` (784-512-256-10, ReLU) and ``cnn`` (alias ``lenet5``:
conv 6@5x5 same - ReLU - max pool 2 - conv 16@5x5 valid - ReLU - max pool 2 - 400-120-84-10),
trained with mean cross-entropy and SGD (``--learning_rate``, 0.1) on one fixed batch of random
inputs and labels (the data do not affect timing). For each method it times ``--num_steps``
steps after ``--num_warmup`` untimed ones, each step being ``zero_grad``, forward, backward and
``optimizer.step``:

* ``torch_nonprivate``: plain PyTorch, no clipping and no noise;
* ``opacus``: ``PrivacyEngine.make_private`` with the default ``grad_sample_mode="hooks"``
  (per-example gradients materialised by hooks), flat clipping to ``--max_grad_norm`` and
  Gaussian noise of multiplier ``--noise_multiplier`` added in ``optimizer.step``;
* ``opacus_ghost``: the same with ``grad_sample_mode="ghost"`` (per-example gradient norms
  without per-example gradients where Opacus has a norm sampler, i.e. for ``nn.Linear``; other
  layers fall back to fast gradient clipping) and its criterion wrapper, whose
  ``loss.backward()`` runs two backward passes. If it fails for the model, its entry holds the
  error.

The physical batch is always ``--batch_size`` (no Poisson sampling in the timed loop, and the
batch is not drawn from a ``DataLoader``), so every method sees the same work per step. Prints
one JSON object on stdout and nothing else: per method the median step time (and min, max, mean,
every step's time and the step count), plus versions, threads, batch size, model and its
parameter count. Without an importable ``torch`` or ``opacus`` it prints
``{"available": false, "reason": ...}`` and exits 0, since the JAX benchmark treats this
baseline as optional.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from absl import flags

from experiments import common

# torch and opacus are imported where they are used: they are optional, and importing them takes
# seconds, which a bad flag should not wait for.
if TYPE_CHECKING:
  import torch
  from torch import nn

FLAGS = flags.FLAGS
flags.DEFINE_enum("model", "mlp", ["mlp", "cnn", "lenet5"],
                  "mlp: 784-512-256-10; cnn (alias lenet5): LeNet-5-style CNN.")
flags.DEFINE_integer("batch_size", 256, "Physical batch size of every step.")
flags.DEFINE_integer("num_steps", 30, "Timed steps per method.")
flags.DEFINE_integer("num_warmup", 5, "Untimed steps per method before the timed ones.")
flags.DEFINE_integer("threads", 0, "torch.set_num_threads (0: every core this process may use).")
flags.DEFINE_float("noise_multiplier", 1.0, "Opacus noise multiplier.")
flags.DEFINE_float("max_grad_norm", 1.0, "Opacus per-example clipping norm.")
flags.DEFINE_float("learning_rate", 0.1, "SGD learning rate.")
flags.DEFINE_list("methods", ["torch_nonprivate", "opacus", "opacus_ghost"],
                  "Methods to time.")
flags.DEFINE_integer("seed", 0, "Seed of the initial weights, the batch and the noise.")

METHODS = ("torch_nonprivate", "opacus", "opacus_ghost")
NUM_CLASSES = 10
IMAGE_SHAPE = (1, 28, 28)  # NCHW for one example; flattened, the same 784 values as 28x28x1.


def build_model(name: str) -> nn.Module:
  """The benchmark's ``name`` model ("mlp", "cnn" or "lenet5") in PyTorch, float32.

  Weights come from PyTorch's default initialisation under the global seed; seed with
  ``torch.manual_seed`` first for reproducible weights.
  """
  from torch import nn
  if name == "mlp":
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(784, 512), nn.ReLU(),
        nn.Linear(512, 256), nn.ReLU(),
        nn.Linear(256, NUM_CLASSES))
  if name in ("cnn", "lenet5"):
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, NUM_CLASSES))
  raise ValueError(f"model={name!r} is not one of mlp, cnn, lenet5")


def parameter_count(module: nn.Module) -> int:
  return sum(p.numel() for p in module.parameters())


def make_batch(batch_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
  """Random N(0, 1) images of shape ``(batch_size, 1, 28, 28)`` and uniform labels in [0, 10)."""
  import torch
  generator = torch.Generator().manual_seed(seed)
  x = torch.randn((batch_size,) + IMAGE_SHAPE, generator=generator)
  y = torch.randint(0, NUM_CLASSES, (batch_size,), generator=generator)
  return x, y


def make_step(method: str, model: str, x: torch.Tensor, y: torch.Tensor, *, seed: int,
              learning_rate: float, noise_multiplier: float, max_grad_norm: float
              ) -> tuple[Callable[[], float], nn.Module]:
  """One training step of ``method`` on the fixed batch ``(x, y)``, and the module it trains.

  The model is built afresh under ``torch.manual_seed(seed)``, so every method starts from the
  same weights. The step returns the (mean) loss as a float.

  Args:
    method: one of ``METHODS``.
    model: model name for :func:`build_model`.
    x: inputs, batch first.
    y: integer labels.
    seed: seed of the initial weights and of Opacus's noise generator.
    learning_rate: SGD learning rate.
    noise_multiplier: Opacus noise multiplier (ignored by ``torch_nonprivate``).
    max_grad_norm: Opacus clipping norm (ignored by ``torch_nonprivate``).

  Returns:
    ``(step, module)``: ``step()`` runs zero_grad, forward, backward and optimizer.step;
    ``module`` is the trained module (an Opacus ``GradSampleModule`` for the private methods,
    whose ``_module`` is the plain model).
  """
  if method not in METHODS:
    raise ValueError(f"method={method!r} is not one of {', '.join(METHODS)}")
  import opacus
  import torch
  from torch import nn
  torch.manual_seed(seed)
  module = build_model(model)
  criterion = nn.CrossEntropyLoss()  # reduction="mean", as Opacus expects by default.
  optimizer = torch.optim.SGD(module.parameters(), lr=learning_rate)
  if method != "torch_nonprivate":
    # make_private wants a DataLoader to read the batch size from; with poisson_sampling=False
    # and a dataset of exactly one batch, the expected batch size (the divisor of the summed
    # clipped gradients) is batch_size. The timed loop uses (x, y) directly, not this loader.
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                         batch_size=x.shape[0])
    engine = opacus.PrivacyEngine()
    private = engine.make_private(
        module=module, optimizer=optimizer, criterion=criterion, data_loader=loader,
        noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm,
        poisson_sampling=False, noise_generator=torch.Generator().manual_seed(seed + 1),
        grad_sample_mode="ghost" if method == "opacus_ghost" else "hooks")
    if method == "opacus_ghost":
      module, optimizer, criterion, _ = private
    else:
      module, optimizer, _ = private
  module.train()

  def step() -> float:
    optimizer.zero_grad()
    loss = criterion(module(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()

  return step, module


def time_steps(step: Callable[[], Any], num_steps: int, num_warmup: int) -> dict[str, Any]:
  """Runs ``num_warmup`` untimed then ``num_steps`` timed calls of ``step``; wall-time summary."""
  for _ in range(num_warmup):
    step()
  times = []
  for _ in range(num_steps):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
  median = statistics.median(times)
  return {"median_s": median, "mean_s": statistics.fmean(times), "min_s": min(times),
          "max_s": max(times), "num_steps": len(times), "steps_per_s": 1.0 / median,
          "step_times_s": times}


def _available_cores() -> int:
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # Not on Linux.
    return os.cpu_count() or 1


def _check_flags() -> None:
  # The batch's per-example gradients (at least 4 KB each) must fit in memory.
  common.check_memory("batch_size", FLAGS.batch_size, 4096.0,
                      what="the batch's per-example gradients")
  common.check_count("num_steps", FLAGS.num_steps)
  common.check_count("num_warmup", FLAGS.num_warmup, 0)
  common.check_count("threads", FLAGS.threads, 0, 4096)
  common.check_float("noise_multiplier", FLAGS.noise_multiplier, 0.0)
  common.check_float("max_grad_norm", FLAGS.max_grad_norm, 0.0, low_open=True)
  common.check_float("learning_rate", FLAGS.learning_rate, 0.0, low_open=True)
  if not FLAGS.methods or any(m not in METHODS for m in FLAGS.methods):
    raise ValueError(f"--methods={','.join(FLAGS.methods)} must be a comma-separated subset of "
                     f"{','.join(METHODS)}")
  if not 0 <= FLAGS.seed < 2**63:
    raise ValueError(f"seed={FLAGS.seed} is outside the valid range [0, 2^63)")


def run_benchmark() -> dict[str, Any]:
  """Times every method of ``--methods`` and returns the report (see the module docstring)."""
  import opacus
  import torch
  threads = FLAGS.threads or _available_cores()
  torch.set_num_threads(threads)
  x, y = make_batch(FLAGS.batch_size, FLAGS.seed)
  report = {
      "available": True,
      "benchmark": "dpsgd_step_torch",
      "model": FLAGS.model,
      "num_parameters": parameter_count(build_model(FLAGS.model)),
      "batch_size": FLAGS.batch_size,
      "num_steps": FLAGS.num_steps,
      "num_warmup": FLAGS.num_warmup,
      "threads": threads,
      "torch_num_threads": torch.get_num_threads(),
      "noise_multiplier": FLAGS.noise_multiplier,
      "max_grad_norm": FLAGS.max_grad_norm,
      "learning_rate": FLAGS.learning_rate,
      "seed": FLAGS.seed,
      "versions": {"python": platform.python_version(), "torch": torch.__version__,
                   "opacus": opacus.__version__},
      "device": "cpu",
      "cpu_cores": _available_cores(),
  }
  for method in FLAGS.methods:
    try:
      step, _ = make_step(method, FLAGS.model, x, y, seed=FLAGS.seed,
                          learning_rate=FLAGS.learning_rate,
                          noise_multiplier=FLAGS.noise_multiplier,
                          max_grad_norm=FLAGS.max_grad_norm)
      report[method] = time_steps(step, FLAGS.num_steps, FLAGS.num_warmup)
    except Exception as e:  # pylint: disable=broad-except  # Reported, not fatal.
      report[method] = {"error": f"{type(e).__name__}: {e}"}
  return report


def _missing_backend() -> str | None:
  """Why torch or opacus cannot be imported, or None when both can."""
  try:
    importlib.import_module("torch")
    importlib.import_module("opacus")
  except Exception as e:  # pylint: disable=broad-except  # Anything that stops the import.
    return f"{type(e).__name__}: {e}"
  return None


def main(argv):
  del argv
  _check_flags()
  reason = _missing_backend()
  if reason is not None:
    print(json.dumps({"available": False, "reason": reason}))
    return
  # Stdout carries exactly one JSON line: anything a library prints goes to stderr instead.
  with contextlib.redirect_stdout(sys.stderr):
    report = run_benchmark()
  print(json.dumps(report))


if __name__ == "__main__":
  common.run(main)
