"""The workloads of :mod:`experiments.benchmarks.accelerator`: each hot path of dpaudit timed on
the accelerator and, in the same process, on the host CPU (JAX's CPU backend); the Monte Carlo
also against the NumPy code a user would otherwise run there.

Every workload is a function ``(Context) -> list[row]``; a row (:func:`row`) holds one
measurement as a rate (higher is better) on each side. The accelerator's sizes fill an H100
(``--scale`` shrinks them); the CPU's are smaller, so the two are compared as rates. When the
"accelerator" is itself the CPU (no GPU), each measurement runs once and serves as both.

This module is the suite's namespace (:data:`WORKLOADS`, :func:`run_workload` and the report);
the shared measuring tools are in :mod:`~experiments.benchmarks.accelerator_context`, the
workloads in :mod:`~experiments.benchmarks.accelerator_statistics` (Monte Carlo, estimators)
and :mod:`~experiments.benchmarks.accelerator_training` (DP-SGD, many-run, n-gram, DOMIAS).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from experiments.benchmarks import tables
from experiments.benchmarks.accelerator_context import (  # noqa: F401  (the suite's namespace)
  Context,
  both,
  judge,
  max_rel_err,
  row,
  timed,
  x64,
)
from experiments.benchmarks.accelerator_statistics import (  # noqa: F401
  NOISY_ARGMAX_TARGET,
  estimators,
  montecarlo,
)
from experiments.benchmarks.accelerator_training import domias, dpsgd_steps, many_run, ngram

WORKLOADS: dict[str, Callable[[Context], list[dict]]] = {
    "montecarlo": montecarlo, "dpsgd": dpsgd_steps, "many_run": many_run, "ngram": ngram,
    "domias": domias, "estimators": estimators}
"""Every workload, in the order the suite runs them: the estimators last, since they alone can
shorten themselves (their larger sizes are left out past the time budget) and so fill the
time the others leave."""


def run_workload(name: str, ctx: Context) -> dict:
  """One workload's rows (with ``met`` judged), its wall time, and the error if it failed (the
  suite goes on with the next)."""
  start = time.perf_counter()
  ctx.skipped = []
  try:
    rows = judge(WORKLOADS[name](ctx), ctx.same_device)
    error = None
  except Exception as e:  # pylint: disable=broad-except  (reported; the suite goes on)
    rows, error = [], f"{type(e).__name__}: {e}"[:2000]
  return {"rows": rows, "wall_s": time.perf_counter() - start, "error": error,
          "skipped_parts": list(ctx.skipped)}


# ----------------------------------------------------------------------------- the report

COLUMNS = ("workload", "measurement", "unit", "accelerator", "CPU (JAX)", "accel/CPU",
           "peer on CPU", "accel/peer", "max rel. err vs f64 CPU", "target", "met", "note")


_number = tables.number


def table(report: dict) -> list[dict]:
  """The report's rows as :mod:`~experiments.benchmarks.tables` rows: each measurement's
  accelerator rate against the peer's on the host and against dpaudit on the host CPU (JAX),
  and against its goal where it has one; on a CPU-only run (the CPU is the accelerator) the
  rate alone or against the peer, with no goal judged."""
  on_cpu = report.get("platform") == "cpu"
  rows = []
  for name, entry in report["workloads"].items():
    for r in entry["rows"]:
      workload, rate, unit = f"{name}: {r['name']}", r["accelerator"], r["unit"]
      if rate is None:
        continue
      if r["peer"] is not None:
        rows.append(tables.row(workload, rate, unit, peer=r["peer_rate"],
                               peer_name=f"{r['peer']} on the host"))
      if not on_cpu and r["cpu"] is not None:
        rows.append(tables.row(workload, rate, unit, peer=r["cpu"],
                               peer_name="dpaudit on the host CPU (JAX)"))
      elif r["peer"] is None:
        rows.append(tables.row(workload, rate, unit))
      if not on_cpu and r["target"] is not None:
        rows.append(tables.goal_row(workload, rate, unit, r["target"]))
  return rows


def markdown(report: dict) -> str:
  """The report as one Markdown table, each workload's error or skip on its own line."""
  lines = [f"Device: {report['device']} ({report['device_kind']}); host CPU: "
           f"{report['cpu_cores']} cores. Rates: higher is better; median of timed calls after "
           "a compiling first call.", "",
           "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
  for name, entry in report["workloads"].items():
    for r in entry["rows"]:
      peer = (f"{_number(r['peer_rate'])} ({r['peer']})" if r["peer"] is not None else "-")
      lines.append("| " + " | ".join([
          name, r["name"], r["unit"], _number(r["accelerator"]), _number(r["cpu"]),
          _number(r["accelerator_over_cpu"]), peer, _number(r["accelerator_over_peer"]),
          _number(r["max_rel_err"]), _number(r["target"]), _number(r["met"]),
          (r["note"] or "").strip("; ")]) + " |")
  for name, entry in report["workloads"].items():
    if entry.get("error") or entry.get("skipped"):
      lines.append(f"\n{name}: {entry.get('error') or entry.get('skipped')}")
    if entry.get("skipped_parts"):
      lines.append(f"\n{name}: left out past the time budget: "
                   f"{', '.join(entry['skipped_parts'])}")
  return "\n".join(lines) + "\n"


COMPILE_COST = {"dpsgd": 35.0, "domias": 20.0, "estimators": 12.0, "many_run": 5.0,
                "ngram": 5.0, "montecarlo": 3.0}
"""Seconds each tiny workload took on 2 CPU cores, nearly all compiling: how
:func:`split_workloads` balances the worker processes."""


def split_workloads(names: list[str], processes: int) -> list[list[str]]:
  """``names`` in at most ``processes`` groups of about equal :data:`COMPILE_COST` (largest
  first, each to the lightest group), each in the suite's order."""
  groups: list[list[str]] = [[] for _ in range(min(processes, len(names)))]
  for name in sorted(names, key=lambda n: -COMPILE_COST.get(n, 1.0)):
    min(groups, key=lambda g: sum(COMPILE_COST.get(n, 1.0) for n in g)).append(name)
  return [[n for n in names if n in g] for g in groups if g]


def merge_reports(reports: list[dict]) -> dict:
  """One report from several runs on the same kind of device: the first's, with each
  workload taken from the last run that finished it (rows and no error); ``merged_from`` lists
  each run's command and wall time. ValueError if the runs' devices differ."""
  kinds = {(r["device_kind"], r["cpu_cores"]) for r in reports}
  if len(kinds) != 1:
    raise ValueError(f"--from_results mixes devices {sorted(kinds)}; merge runs of one kind")
  merged = {**reports[0], "workloads": dict(reports[0]["workloads"])}
  for report in reports[1:]:
    for name, entry in report["workloads"].items():
      if entry["rows"] and not entry["error"]:
        merged["workloads"][name] = entry
  merged["merged_from"] = [{"command": r["command"], "wall_time_s": r.get("wall_time_s"),
                            "workloads": list(r["workloads"])} for r in reports]
  merged["wall_time_s"] = None  # several runs: see merged_from
  return merged
