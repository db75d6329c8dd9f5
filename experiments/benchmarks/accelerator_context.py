"""What every workload of :mod:`experiments.benchmarks.accelerator` shares: the
:class:`Context` (devices, sizes, time budget), :func:`timed` calls, :func:`x64`, one
measurement's :func:`row`, :func:`judge`, :func:`both` devices and :func:`max_rel_err`."""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np


@dataclasses.dataclass
class Context:
  """Where and how big: ``accelerator`` (JAX's default device) and ``cpu`` (the host), the
  ``tiny`` sizes or the full ones times ``scale``, ``measure_s`` seconds of timed repeats per
  measurement (at least one), and ``progress(line)``."""
  accelerator: jax.Device
  cpu: jax.Device
  tiny: bool = False
  scale: float = 1.0
  measure_s: float = 2.0
  max_repeats: int = 5
  progress: Callable[[str], None] = lambda line: None
  deadline: float = float("inf")
  skipped: list = dataclasses.field(default_factory=list)

  def past_deadline(self, what: str) -> bool:
    """True (and ``what`` noted in ``skipped``) once ``deadline`` (a ``time.perf_counter()``
    value: the suite's ``--budget_s``) has passed: the optional parts of a workload (larger
    sizes, more variants) are then left out rather than run past the budget."""
    if time.perf_counter() <= self.deadline:
      return False
    self.skipped.append(what)
    self.progress(f"skipped (past the time budget): {what}")
    return True

  @property
  def same_device(self) -> bool:
    """True when there is no accelerator: the CPU measurements are the accelerator's."""
    return self.accelerator.platform == "cpu"

  def size(self, full: float, tiny: float) -> int:
    """The accelerator's size: ``tiny`` in tiny mode, else ``full`` times ``scale``."""
    return max(int(tiny if self.tiny else full * self.scale), 1)

  def cpu_size(self, full: float, tiny: float) -> int:
    """The host CPU's size (not scaled: the baselines are small already)."""
    return max(int(tiny if self.tiny else full), 1)


def timed(fn: Callable[[], Any], ctx: Context) -> tuple[dict, Any]:
  """Calls ``fn`` once (compile and warm-up, timed apart as ``first_call_s``), then again until
  ``ctx.measure_s`` seconds or ``ctx.max_repeats`` calls; the median of the timed calls."""
  start = time.perf_counter()
  out = jax.block_until_ready(fn())
  first = time.perf_counter() - start
  times = []
  while len(times) < ctx.max_repeats and (not times or sum(times) < ctx.measure_s):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - start)
  return {"first_call_s": first, "median_s": statistics.median(times),
          "min_s": min(times), "max_s": max(times), "repeats": len(times)}, out


@contextlib.contextmanager
def x64(enabled: bool):
  """``jax_enable_x64`` set for the process, restored after. Not ``jax.enable_x64``, whose
  setting holds in the calling thread only, while the runtime may run host callbacks on
  another (the estimators' NumPy sorts on the CPU of a GPU machine)."""
  before = jax.config.jax_enable_x64
  jax.config.update("jax_enable_x64", enabled)
  try:
    yield
  finally:
    jax.config.update("jax_enable_x64", before)


def row(workload: str, name: str, unit: str, accelerator: float | None, cpu: float | None, *,
        peer: tuple[str, float] | None = None, target: float | None = None,
        max_rel_err: float | None = None, note: str = "", details: dict | None = None) -> dict:
  """One measurement: rates (``unit``, higher is better) on the accelerator, on the host CPU
  through JAX and, optionally, of a ``peer`` (name, rate) on the host; their ratios; the target
  (judged on the accelerator's rate, only when it is not the CPU)."""
  def ratio(a, b):
    return a / b if a is not None and b else None
  return {"workload": workload, "name": name, "unit": unit,
          "accelerator": accelerator, "cpu": cpu,
          "accelerator_over_cpu": ratio(accelerator, cpu),
          "peer": None if peer is None else peer[0],
          "peer_rate": None if peer is None else peer[1],
          "accelerator_over_peer": None if peer is None else ratio(accelerator, peer[1]),
          "max_rel_err": max_rel_err, "target": target, "met": None, "note": note,
          "details": details or {}}


def judge(rows: list[dict], on_cpu: bool) -> list[dict]:
  """Fills ``met`` where a row has a target and the accelerator is not the CPU."""
  for r in rows:
    if r["target"] is not None and not on_cpu and r["accelerator"] is not None:
      r["met"] = bool(r["accelerator"] >= r["target"])
  return rows


def both(ctx: Context, measure: Callable[[jax.Device, bool], tuple[dict, Any]]):
  """``measure(device, on_accelerator)`` on the accelerator, then on the CPU (reused when the
  accelerator is the CPU)."""
  on_accel = measure(ctx.accelerator, True)
  return on_accel, on_accel if ctx.same_device else measure(ctx.cpu, False)


def max_rel_err(got, ref, dtype) -> float:
  """Largest ``|got - ref| / |ref|`` where ``|ref|`` is above ``tiny * 1e6`` of ``dtype``
  (relative accuracy is not asked of subnormals; elsewhere an exact 0 must match)."""
  got, ref = np.asarray(got, np.float64).ravel(), np.asarray(ref, np.float64).ravel()
  floor = np.finfo(dtype).tiny * 1e6
  both_inf = np.isinf(got) & np.isinf(ref) & (np.sign(got) == np.sign(ref))
  keep = (np.abs(ref) > floor) & ~both_inf
  err = np.abs(got[keep] - ref[keep]) / np.abs(ref[keep])
  zero = (np.abs(ref) <= floor) & ~both_inf
  err_zero = np.abs(got[zero]) > floor  # an exact 0 must stay (about) 0
  worst = float(err.max()) if err.size else 0.0
  return max(worst, 1.0 if err_zero.any() else 0.0)
