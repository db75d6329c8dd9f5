"""How :mod:`experiments.benchmarks.estimators` times and records a workload: the run's
:class:`Settings`, dpaudit's calls (:func:`time_dpaudit`: compile apart, no recompiles on new
values, timed before and after the peers'), a peer's (:func:`time_peer`), the compile-speed
gauge (:func:`calibration_compile_s`) and one workload's entry (:func:`record`)."""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from experiments import runtime
from experiments.benchmarks.estimator_inputs import scaled_size

PRECISIONS = ("float64", "float32")
COMPILE_TARGET_S = 2.0
SLOW_PEER_BUDGET_S = 20.0  # a peer slower than this per call is timed once


def _block(x):
  import jax
  return jax.block_until_ready(x)


MAX_REPEATS = 25
"""Calls faster than ``--min_timed_s`` in total are repeated beyond ``--repeats``, up to this
many: the median of three millisecond calls moved by 30-50% from run to run on the shared
2-core machine, and with 0.25 s (four calls of a million binomial tails) the median caught the
first calls after compiling (up to 130 ms against 53-78 ms later: glibc maps XLA's large
buffers afresh until its allocation thresholds settle, 6,000-16,000 page faults a call) in two
runs of five."""

CALIBRATION_PROGRAM = ("jax.jit(jax.scipy.special.betainc) on 10,000 float64 triples: trace, "
                       "lower and compile")


def calibration_compile_s() -> float:
  """Seconds to compile a fixed program that is not dpaudit's (:data:`CALIBRATION_PROGRAM`,
  a fresh function each time, so XLA compiles it anew): the machine's compile speed at the time.
  Compile times move by 20-50% with the load on this shared machine; this gauge, taken before
  the first group and after each, shows how busy it was during a run. It is itself noisy
  (0.29-0.51 s within one run on 2026-11-24), so ``compile_per_calibration`` (a workload's
  compile time over the run's median gauge) moves about as much as the compile time. The 2 s
  target is judged on ``compile_s`` alone."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  x = jnp.asarray(np.linspace(0.1, 10.0, 10_000))
  program = jax.jit(lambda a, b, x: jax.scipy.special.betainc(a, b, x / (1.0 + x)))
  start = time.perf_counter()
  program.trace(x, x, x).lower().compile()
  return time.perf_counter() - start


@dataclasses.dataclass(frozen=True)
class Settings:
  """One run's settings (the CLI's flags): ``repeats`` timed calls (more while under
  ``min_timed_s`` seconds in total), the NumPy ``seed`` of the random inputs, the size
  ``scale``, the throughput group's sizes (already scaled), precisions and reference size, and
  the :class:`CompileCounter` every timed workload uses."""
  repeats: int
  min_timed_s: float
  seed: int
  scale: float
  counter: Any = None
  throughput_sizes: tuple[int, ...] = ()
  throughput_precisions: tuple[str, ...] = ()
  throughput_reference: int = 100_000

  def size(self, n: float) -> int:
    """``n`` times ``scale`` (:func:`~experiments.benchmarks.estimator_inputs.scaled_size`)."""
    return scaled_size(n, self.scale)


def _timed_calls(fn: Callable[[], Any], repeats: int,
                 min_timed_s: float) -> tuple[list[float], Any]:
  """Wall times of ``repeats`` calls, or of more (up to :data:`MAX_REPEATS`) while their total
  is under ``min_timed_s`` (``--min_timed_s``), and the last call's value; dpaudit and the
  peers are timed alike."""
  times, out = [], None
  while len(times) < repeats or (sum(times) < min_timed_s
                                 and len(times) < MAX_REPEATS):
    start = time.perf_counter()
    out = _block(fn())
    times.append(time.perf_counter() - start)
  return times, out


def _median_time(fn: Callable[[], Any], repeats: int,
                 min_timed_s: float) -> tuple[float, Any, int]:
  """The median of :func:`_timed_calls`, the last value and the number of calls."""
  times, out = _timed_calls(fn, repeats, min_timed_s)
  return statistics.median(times), out, len(times)


class CompileCounter:
  """Counts XLA backend compilations and sums the time JAX spends compiling (tracing to a
  jaxpr, lowering it to StableHLO, XLA's compile; jax.monitoring) while a block runs."""

  def __init__(self):
    import jax
    self.count, self.seconds = 0, 0.0
    self._active = False
    jax.monitoring.register_event_duration_secs_listener(self._listen)

  def _listen(self, event: str, duration: float, **kwargs) -> None:
    del kwargs
    if not self._active:
      return
    if event in runtime.JAX_COMPILE_EVENTS:
      self.seconds += duration
    if event == runtime.JAX_BACKEND_COMPILE_EVENT:
      self.count += 1

  def __enter__(self):
    self.count, self.seconds, self._active = 0, 0.0, True
    return self

  def __exit__(self, *exc):
    self._active = False


def time_dpaudit(make_call: Callable[[int], Callable[[], Any]],
                 settings: Settings) -> dict[str, Any]:
  """``make_call(seed)`` returns a call on fresh data of the same shapes. The first call
  compiles; the timed calls reuse it; a call on new values must compile nothing.

  ``compile_s`` is the time JAX reports compiling during the first call (tracing, lowering and
  XLA, summed over every program it compiles); ``first_call_excess_s``, the first call's wall
  time beyond the median, also holds the first run's own extra cost (fresh buffers, cold
  caches)."""
  repeats, counter = settings.repeats, settings.counter
  call = make_call(0)
  start = time.perf_counter()
  with counter:
    out = _block(call())
  first = time.perf_counter() - start
  compile_s = counter.seconds
  times, out = _timed_calls(call, repeats, settings.min_timed_s)
  other = make_call(1)
  with counter:
    _block(other())
  median = statistics.median(times)
  timed = {"median_s": median, "first_call_s": first, "compile_s": compile_s,
           "first_call_excess_s": max(first - median, 0.0), "repeats": len(times),
           "recompiles_on_new_values": counter.count,
           AFTER_PEERS: (times, lambda: _timed_calls(call, repeats, settings.min_timed_s)[0])}
  return timed, out


AFTER_PEERS = "_after_peers"
"""The key under which :func:`time_dpaudit` leaves its timed calls so far and a function that
times as many again; :func:`record`, which runs after the peers have been timed, takes the
median over both.

So dpaudit's calls are timed on both sides of the peers' calls. The shared machine has slow
stretches of a second or two, in which the same program runs up to twice as slowly (on
2026-11-25 a million Clopper-Pearson pairs took 178 ms a call for six calls in a row, then 96
ms a call on the next two workloads). dpaudit's calls, tens of milliseconds each, took all
their samples within one second, and one such stretch could hold them all, where the peers'
calls, seconds each, average over it. Timed before and after, the median holds calls from
both sides."""


def time_peer(call: Callable[[], Any], settings: Settings) -> tuple[dict[str, Any], Any]:
  repeats = settings.repeats
  start = time.perf_counter()
  out = call()
  first = time.perf_counter() - start
  if first > SLOW_PEER_BUDGET_S or repeats <= 1:
    return {"median_s": first, "repeats": 1}, out
  median, out, timed = _median_time(call, repeats - 1, settings.min_timed_s)
  return {"median_s": statistics.median([first, median]), "repeats": timed + 1}, out


def max_rel_diff(a, b) -> float:
  import numpy as np
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  both = np.isfinite(a) & np.isfinite(b)
  if np.any(np.isfinite(a) != np.isfinite(b)):
    return float("inf")
  scale = np.maximum(np.abs(b[both]), 1e-300)
  return float(np.max(np.abs(a[both] - b[both]) / scale, initial=0.0))


def record(results: list, name: str, group: str, ours: dict, peers: dict, target: str,
           target_ratio: float | None = None, target_seconds: float | None = None,
           extra: dict | None = None) -> dict:
  """One workload's entry; ``ratio`` is fastest peer time / dpaudit time. dpaudit's calls are
  timed again here, after the peers' (:data:`AFTER_PEERS`), and its median is over all."""
  ours = dict(ours)
  if AFTER_PEERS in ours:
    times, again = ours.pop(AFTER_PEERS)
    times = times + again()
    ours["median_s"], ours["repeats"] = statistics.median(times), len(times)
    ours["first_call_excess_s"] = max(ours["first_call_s"] - ours["median_s"], 0.0)
  entry = {"name": name, "group": group, "dpaudit": ours, "peers": peers, "target": target,
           "target_ratio": target_ratio, "target_seconds": target_seconds}
  if peers:
    fastest = min(peers, key=lambda k: peers[k]["median_s"])
    entry["fastest_peer"] = fastest
    entry["ratio"] = peers[fastest]["median_s"] / ours["median_s"]
  met = ours["compile_s"] < COMPILE_TARGET_S and ours["recompiles_on_new_values"] == 0
  if target_ratio is not None:
    met = met and entry.get("ratio", 0.0) >= target_ratio
  if target_seconds is not None:
    met = met and ours["median_s"] < target_seconds
  entry["compile_target_met"] = ours["compile_s"] < COMPILE_TARGET_S
  entry["target_met"] = bool(met)
  entry.update(extra or {})
  results.append(entry)
  print(f"{name}: dpaudit {ours['median_s'] * 1e3:.2f} ms (compile {ours['compile_s']:.2f} s)"
        + "".join(f", {k} {v['median_s'] * 1e3:.2f} ms" for k, v in peers.items())
        + (f", ratio {entry['ratio']:.2f}" if "ratio" in entry else "")
        + f" -> {'met' if met else 'NOT met'} ({target})", file=sys.stderr)
  return entry
