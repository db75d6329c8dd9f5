"""Runtime set-up of the experiments: float64, the persistent compilation cache, multi-process
runs (jax.distributed), quiet logging, timing and the ``results.json`` writer.

Flag-free: the functions read the shared flags ``--compilation_cache_dir`` and ``--distributed``
(defined once in :mod:`experiments.common`) when they are defined and parsed, and use their
defaults otherwise.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import platform
import sys
import time
from typing import Any

import jax
from absl import flags

from dpaudit import compilation_cache


def _flag(name: str, default: Any) -> Any:
  """The parsed value of a shared flag, or ``default`` before parsing or when undefined."""
  values = flags.FLAGS
  return getattr(values, name) if name in values and values.is_parsed() else default


def enable_x64() -> None:
  """Estimators and accounting run in float64; mechanisms choose their own (float32) noise."""
  jax.config.update("jax_enable_x64", True)
  # jax logs at INFO that it probed for a TPU on every start; that is noise for our users.
  logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)


def default_cache_dir() -> str:
  """The library's cache directory (:func:`dpaudit.compilation_cache.default_dir`)."""
  return compilation_cache.default_dir()


DISTRIBUTED_ENV = ("DPAUDIT_COORDINATOR_ADDRESS", "DPAUDIT_NUM_PROCESSES", "DPAUDIT_PROCESS_ID")

_process_index = 0  # set by initialize_distributed; read through process_index()


def initialize_distributed() -> int:
  """Joins a multi-process run when this process was started as part of one; returns the
  process index (0 when alone). Then ``jax.devices()`` spans every process, and
  :func:`dpaudit.montecarlo.count_outcomes` shards its trials over all of them. On CPU the
  collectives go through Gloo. Only process 0 should write results (:func:`is_main_process`).
  """
  mode = _flag("distributed", "auto")
  env = os.environ
  if mode == "off":
    return 0
  if all(name in env for name in DISTRIBUTED_ENV):
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=env["DPAUDIT_COORDINATOR_ADDRESS"],
                               num_processes=int(env["DPAUDIT_NUM_PROCESSES"]),
                               process_id=int(env["DPAUDIT_PROCESS_ID"]))
  elif "JAX_COORDINATOR_ADDRESS" in env or int(env.get("SLURM_STEP_NUM_TASKS", "1")) > 1:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize()  # reads the JAX_* variables or Slurm's own
  global _process_index
  _process_index = jax.process_index()
  return _process_index


def process_index() -> int:
  """This process's index as :func:`initialize_distributed` set it (0 before or when alone),
  without starting the XLA backend."""
  return _process_index


def is_main_process() -> bool:
  return jax.process_index() == 0


def enable_compilation_cache() -> str | None:
  """Turns on JAX's persistent compilation cache at ``--compilation_cache_dir`` (importing dpaudit
  already turns it on at the default directory; the flag moves it, and an empty flag turns it
  off), so that a rerun, a resumed run or the next cell of a sweep loads its compiled programs
  instead of compiling them again (seconds each on a CPU). What is kept, and how concurrent
  processes share it: :mod:`dpaudit.compilation_cache`. Every experiment calls this; benchmarks
  do not (they time compilation). Returns the directory, or None when it is off."""
  path = _flag("compilation_cache_dir", default_cache_dir())
  if not path:
    compilation_cache.disable()
    return None
  return compilation_cache.enable(path)


def quiet_logging() -> None:
  """Silences jax's TPU probe and absl/tfds INFO lines unless the user passed --verbosity."""
  from absl import flags
  from absl import logging as absl_logging
  logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
  if not flags.FLAGS["verbosity"].present:
    absl_logging.set_verbosity(absl_logging.WARNING)


def start_float64_experiment() -> None:
  """The usual start of an experiment's ``main``: the persistent compilation cache, quiet
  logging and float64 (:func:`enable_compilation_cache`, :func:`quiet_logging`,
  :func:`enable_x64`)."""
  enable_compilation_cache()
  quiet_logging()
  enable_x64()


def versions() -> dict[str, str]:
  out = {"python": platform.python_version()}
  for package in ("dpaudit", "jax", "jaxlib", "numpy", "scipy", "dp-accounting", "flax",
                  "optax", "matplotlib"):
    try:
      out[package] = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
      out[package] = "not installed"
  out["devices"] = ", ".join(f"{d.platform}:{d.device_kind}" for d in jax.devices())
  return out


def write_results(output_dir: str, name: str, config: dict[str, Any], result: dict[str, Any],
                  wall_time_s: float, extra: dict[str, Any] | None = None) -> str:
  """Writes ``results.json`` atomically, as strict JSON (non-finite numbers as the strings
  "Infinity", "-Infinity", "NaN": :mod:`dpaudit.results`), and returns its path.

  The result's keys are at the top level, next to ``experiment``, ``config`` (the full run
  configuration, seed included), ``versions``, ``wall_time_s`` and ``command``.
  """
  from dpaudit import results
  payload = {**result, "experiment": name, "config": config, "versions": versions(),
             "wall_time_s": wall_time_s, "command": " ".join(sys.argv)}
  if extra:
    payload.update(extra)
  return results.write_json(os.path.join(output_dir, "results.json"), payload)


JAX_BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
JAX_COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
                      "/jax/core/compile/jaxpr_to_mlir_module_duration", JAX_BACKEND_COMPILE_EVENT)
"""The ``jax.monitoring`` duration events of compiling a program: tracing it to a jaxpr,
lowering it to StableHLO, XLA's compile. Their sum is the compile time the benchmarks report."""


class Timer:
  def __enter__(self):
    self.start = time.perf_counter()
    return self

  def __exit__(self, *exc):
    self.seconds = time.perf_counter() - self.start
