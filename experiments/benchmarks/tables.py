"""The one table every benchmark adds to its ``results.json`` (key ``"table"``), and from which
:mod:`experiments.benchmarks.performance_docs` writes ``docs/performance.md``.

A row (:func:`row`) compares one measurement of dpaudit with the peer a user would otherwise
run (NumPy, scipy, statsmodels, jax-privacy, Opacus, or a loop over what dpaudit batches), both
medians of the same run, in one ``unit``:

* ``ratio`` is how many times better dpaudit is: ``peer / dpaudit`` for times and sizes (lower
  is better), ``dpaudit / peer`` for rates (units ending in ``/s``, higher is better); the row
  names its direction in ``ratio_of``;
* ``target`` is the ratio the benchmark aims at and ``met`` is ``ratio >= target`` (None when
  either is missing).

A goal stated as an absolute figure (a compile time under 2 s, 1e9 trials/s) is a row whose
peer is the goal itself (:func:`goal_row`): ratio ``goal / dpaudit`` (or ``dpaudit / goal`` for
a rate), target 1. :func:`number` is the one display rule of the benchmarks' tables.
"""

from __future__ import annotations

import math
import os
import platform
from typing import Any

KEYS = ("workload", "dpaudit", "peer", "peer_name", "unit", "ratio_of", "ratio", "target", "met")
"""Every row's keys, in order."""


def higher_is_better(unit: str) -> bool:
  """Rates (``trials/s``, ``pairs/s``) are better higher; times and sizes lower."""
  return unit.endswith("/s")


def row(workload: str, dpaudit: float, unit: str, *, peer: float | None = None,
        peer_name: str | None = None, target: float | None = None) -> dict[str, Any]:
  """One row of a benchmark's table (the module docstring says what each key holds)."""
  dpaudit = float(dpaudit)
  peer = None if peer is None else float(peer)
  if higher_is_better(unit):
    ratio_of = "dpaudit / peer"
    ratio = dpaudit / peer if peer else None
  else:
    ratio_of = "peer / dpaudit"
    ratio = peer / dpaudit if peer is not None and dpaudit > 0 else None
  if ratio is not None and not math.isfinite(ratio):
    ratio = None
  target = None if target is None else float(target)
  met = None if ratio is None or target is None else bool(ratio >= target)
  return {"workload": workload, "dpaudit": dpaudit, "peer": peer, "peer_name": peer_name,
          "unit": unit, "ratio_of": ratio_of, "ratio": ratio, "target": target, "met": met}


def goal_row(workload: str, dpaudit: float, unit: str, goal: float,
             judged: bool = True) -> dict[str, Any]:
  """A row judged against an absolute ``goal`` (at most ``goal`` for a time, at least for a
  rate): the goal stands in the peer's place, with target 1 (none unless ``judged``: a smoke
  run's sizes)."""
  words = "at least" if higher_is_better(unit) else "at most"
  return row(workload, dpaudit, unit, peer=goal, peer_name=f"goal: {words} {number(goal)} {unit}",
             target=1.0 if judged else None)


def number(value: Any) -> str:
  """How the benchmarks' tables show a value: three significant digits, ``-`` for none,
  ``yes``/``no`` for a boolean."""
  if value is None:
    return "-"
  if isinstance(value, bool):
    return "yes" if value else "no"
  return f"{value:.3g}"


def _cpu_model() -> str | None:
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or None


# The host's 1-minute load average when the benchmark started (this module is imported at its
# start): timings taken on a shared machine say so.
LOAD_AT_START = os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def machine(device: str | None = None) -> dict[str, Any]:
  """Where a benchmark ran: its JAX ``device`` (when not given, JAX's first device as
  ``platform:kind``, with `` x N`` for N devices), the host's CPU cores and CPU model, the
  operating system and the load average when the benchmark started."""
  if device is None:
    import jax
    devices = jax.devices()
    device = f"{devices[0].platform}:{devices[0].device_kind}" + (
        f" x {len(devices)}" if len(devices) > 1 else "")
  return {"device": device, "cpu_cores": os.cpu_count(), "cpu_model": _cpu_model(),
          "system": f"{platform.system()} {platform.machine()}",
          "load_average_at_start": None if LOAD_AT_START is None else round(LOAD_AT_START, 2)}


def check_table(table: Any) -> list[dict[str, Any]]:
  """``table`` if it is a list of well-formed rows; ValueError naming the first fault."""
  if not isinstance(table, list):
    raise ValueError(f"'table' is a {type(table).__name__}, not a list of rows")
  for i, r in enumerate(table):
    where = f"table row {i}"
    if not isinstance(r, dict) or set(KEYS) - set(r):
      missing = sorted(set(KEYS) - set(r)) if isinstance(r, dict) else "every key"
      raise ValueError(f"{where} lacks {missing}")
    if not isinstance(r["workload"], str) or not isinstance(r["unit"], str):
      raise ValueError(f"{where}: workload and unit must be strings")
    for key in ("dpaudit", "peer", "ratio", "target"):
      value = r[key]
      if value is None and key != "dpaudit":
        continue
      if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: {key}={value!r} is not a number")
    if r["peer_name"] is not None and not isinstance(r["peer_name"], str):
      raise ValueError(f"{where}: peer_name={r['peer_name']!r} is not a string")
    if r["met"] is not None and not isinstance(r["met"], bool):
      raise ValueError(f"{where}: met={r['met']!r} is not a boolean")
    if r["ratio"] is not None and r["target"] is not None and r["met"] != (
        r["ratio"] >= r["target"]):
      raise ValueError(f"{where}: met={r['met']} but ratio {r['ratio']} vs target {r['target']}")
  return table
