r"""Optional PyTorch / Opacus baseline of the DP-SGD benchmark: wall time of one training step.

  python -m experiments.benchmarks.dpsgd_torch --model=mlp --batch_size=256 --num_steps=30 \
      --num_warmup=5 --threads=2

Builds the benchmark's models in PyTorch with the same architectures as the flax ones in
:mod:`dpaudit.models.classifiers`: ``mlp`` (784-512-256-10, ReLU) and ``cnn`` (alias ``lenet5``:
conv 6@5x5 same - ReLU - max pool 2 - conv 16@5x5 valid - ReLU - max pool 2 - 400-120-84-10)
and ``wrn16_4`` (WRN-16-4 with group normalisation, 32x32x3 inputs), trained with mean
cross-entropy and SGD (``--learning_rate``, 0.1) on one fixed batch of random inputs and labels
(the data do not affect timing). For each method it times ``--num_steps`` steps after
``--num_warmup`` untimed ones, each step being ``zero_grad``, forward, backward and
``optimizer.step``:

* ``torch_nonprivate``: plain PyTorch, no clipping and no noise;
* ``opacus``: ``PrivacyEngine.make_private`` with the default ``grad_sample_mode="hooks"``
  (per-example gradients materialised by hooks), flat clipping to ``--max_grad_norm`` and
  Gaussian noise of multiplier ``--noise_multiplier`` added in ``optimizer.step``;
* ``opacus_functorch`` and ``opacus_ew``: the same with ``grad_sample_mode="functorch"``
  (per-example gradients by ``torch.func.vmap``) and ``"ew"`` (expanded weights);
* ``opacus_ghost``: the same with ``grad_sample_mode="ghost"`` (per-example gradient norms
  without per-example gradients where Opacus has a norm sampler, i.e. for ``nn.Linear`` and
  ``nn.Embedding``; other layers' norms come from their per-example gradients) and its criterion
  wrapper, whose ``loss.backward()`` runs two backward passes.

A method that fails for the model (e.g. expanded weights on a layer they do not cover) gets the
error in its entry instead of timings; ``ghost_fsdp`` (needs a distributed FSDP process group)
and ``no_op`` (no per-example clipping) are not timed.

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
flags.DEFINE_enum("model", "mlp", ["mlp", "cnn", "lenet5", "wrn16_4"],
                  "mlp: 784-512-256-10; cnn (alias lenet5): LeNet-5-style CNN; wrn16_4: "
                  "WRN-16-4 with group normalisation (32x32x3 inputs).")
flags.DEFINE_integer("batch_size", 256, "Physical batch size of every step.")
flags.DEFINE_integer("num_steps", 30, "Timed steps per method.")
flags.DEFINE_integer("num_warmup", 5, "Untimed steps per method before the timed ones.")
flags.DEFINE_integer("threads", 0, "torch.set_num_threads (0: every core this process may use).")
flags.DEFINE_float("noise_multiplier", 1.0, "Opacus noise multiplier.")
flags.DEFINE_float("max_grad_norm", 1.0, "Opacus per-example clipping norm.")
flags.DEFINE_float("learning_rate", 0.1, "SGD learning rate.")
flags.DEFINE_list("methods", ["torch_nonprivate", "opacus", "opacus_functorch", "opacus_ew",
                               "opacus_ghost"], "Methods to time.")
flags.DEFINE_integer("seed", 0, "Seed of the initial weights, the batch and the noise.")
flags.DEFINE_bool("serve", False, "Time steps on request (one 'METHOD N' line on stdin each), "
                  "for the interleaved rounds of experiments.benchmarks.dpsgd.")

METHODS = ("torch_nonprivate", "opacus", "opacus_functorch", "opacus_ew", "opacus_ghost")
OPACUS_MODES = {"opacus": "hooks", "opacus_functorch": "functorch", "opacus_ew": "ew",
                "opacus_ghost": "ghost"}
"""The Opacus ``grad_sample_mode`` of each private method (``ghost_fsdp`` needs a distributed
FSDP process group, and ``no_op`` does not clip per example, so neither is timed)."""
NUM_CLASSES = 10
IMAGE_SHAPE = {"mlp": (1, 28, 28), "cnn": (1, 28, 28), "lenet5": (1, 28, 28),
               "wrn16_4": (3, 32, 32)}
"""NCHW shape of one example per model (28x28x1 flattens to the MLP's 784 inputs)."""


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
  if name == "wrn16_4":
    return _wide_resnet(blocks=2, widen_factor=4, num_groups=16)
  raise ValueError(f"model={name!r} is not one of mlp, cnn, lenet5, wrn16_4")


def _wide_resnet(blocks: int, widen_factor: int, num_groups: int) -> nn.Module:
  """WRN-(6 blocks + 4)-widen_factor with group normalisation, the twin of
  :class:`dpaudit.models.classifiers.WideResNet` (pre-activation blocks GN-ReLU-conv3x3-GN-ReLU-
  conv3x3, a bias-free 1x1 projection on the normalised input where the shape changes)."""
  from torch import nn

  class Block(nn.Module):
    def __init__(self, width_in: int, width: int, stride: int):
      super().__init__()
      self.norm1 = nn.GroupNorm(num_groups, width_in)
      self.conv1 = nn.Conv2d(width_in, width, 3, stride, padding=1, bias=False)
      self.norm2 = nn.GroupNorm(num_groups, width)
      self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
      self.project = (nn.Conv2d(width_in, width, 1, stride, bias=False)
                      if stride != 1 or width_in != width else None)
      self.relu1, self.relu2 = nn.ReLU(), nn.ReLU()

    def forward(self, x):
      h = self.relu1(self.norm1(x))
      shortcut = x if self.project is None else self.project(h)
      h = self.conv2(self.relu2(self.norm2(self.conv1(h))))
      return h + shortcut

  layers, width_in = [nn.Conv2d(3, 16, 3, padding=1, bias=False)], 16
  for stage, stride in enumerate((1, 2, 2)):
    width = 16 * widen_factor * 2**stage
    for block in range(blocks):
      layers.append(Block(width_in, width, stride if block == 0 else 1))
      width_in = width
  layers += [nn.GroupNorm(num_groups, width_in), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
             nn.Flatten(), nn.Linear(width_in, NUM_CLASSES)]
  return nn.Sequential(*layers)


def parameter_count(module: nn.Module) -> int:
  return sum(p.numel() for p in module.parameters())


def make_batch(batch_size: int, seed: int, model: str = "mlp"
               ) -> tuple[torch.Tensor, torch.Tensor]:
  """Random N(0, 1) images of shape ``(batch_size,) + IMAGE_SHAPE[model]`` and uniform labels in
  [0, 10)."""
  import torch
  generator = torch.Generator().manual_seed(seed)
  x = torch.randn((batch_size,) + IMAGE_SHAPE[model], generator=generator)
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
        grad_sample_mode=OPACUS_MODES[method])
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


def _header() -> dict[str, Any]:
  """The report's settings and versions (sets torch's thread count)."""
  import opacus
  import torch
  threads = FLAGS.threads or _available_cores()
  torch.set_num_threads(threads)
  return {
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


def _warm_steps(report: dict[str, Any]) -> dict[str, Callable[[], float]]:
  """Each method of ``--methods`` built and run ``--num_warmup`` times; a method that fails gets
  ``{"error": ...}`` in ``report`` instead of a step."""
  x, y = make_batch(FLAGS.batch_size, FLAGS.seed, FLAGS.model)
  steps = {}
  for method in FLAGS.methods:
    try:
      step, _ = make_step(method, FLAGS.model, x, y, seed=FLAGS.seed,
                          learning_rate=FLAGS.learning_rate,
                          noise_multiplier=FLAGS.noise_multiplier,
                          max_grad_norm=FLAGS.max_grad_norm)
      time_steps(step, 1, FLAGS.num_warmup)
      steps[method] = step
    except Exception as e:  # pylint: disable=broad-except  # Reported, not fatal.
      report[method] = {"error": f"{type(e).__name__}: {e}"}
  return steps


def run_benchmark() -> dict[str, Any]:
  """Times every method of ``--methods`` and returns the report (see the module docstring)."""
  report = _header()
  for method, step in _warm_steps(report).items():
    report[method] = time_steps(step, FLAGS.num_steps, 0)
  return report


def serve(requests, replies) -> None:
  """Interleaved timing for :mod:`experiments.benchmarks.dpsgd`: writes the report's header
  (with the errors of methods that failed) as one JSON line, then answers each request line
  ``METHOD N`` with the JSON list of N step times in seconds, until end of input."""
  report = _header()
  steps = _warm_steps(report)
  print(json.dumps(report), file=replies, flush=True)
  for line in iter(requests.readline, ""):
    method, count = line.split()
    print(json.dumps(time_steps(steps[method], int(count), 0)["step_times_s"]), file=replies,
          flush=True)


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
  replies = sys.stdout
  # Stdout carries only JSON lines: anything a library prints goes to stderr instead.
  with contextlib.redirect_stdout(sys.stderr):
    if FLAGS.serve:
      serve(sys.stdin, replies)
      return
    report = run_benchmark()
  print(json.dumps(report))


if __name__ == "__main__":
  common.run(main)
