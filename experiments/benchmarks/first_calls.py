r"""Each estimator's and front-door entry's first call in a fresh process, as a user's script
meets it: with an empty and with a warm persistent compilation cache, against the first call of
the peer a user would otherwise make (scipy, jax-privacy).

  python -m experiments.benchmarks.first_calls

Per workload and round, fresh processes, the workloads interleaved round by round so that a busy
stretch of the shared machine falls on all of them alike:

* ``cold``: an empty compilation cache (the library's defaults otherwise: a small input's first
  call answered by its exact host path while its program compiles in the background,
  :func:`dpaudit.estimators._compile.first_call`).
* ``warm``: a cache filled by an earlier process that compiled the program of the same bucket at
  another size (one more element), so the call meets a new size within a cached bucket.
* ``peer``: the peer's first call on the same inputs (imports done before the clock starts, as
  for dpaudit).

Each gives the first call's wall time (imports excluded), the compile time JAX reports while it
runs (``jax.monitoring``; a background compile started by an earlier part of the call included)
and whether a host path answered. Targets: warm first
calls <= 50 ms; cold first calls <= 0.2 s for inputs of up to 1e4 elements and <= 1 s above.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from absl import flags

from experiments import common
from experiments.benchmarks import tables
from experiments.benchmarks.first_call_workloads import PEERS, WORKLOADS

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_rounds", 3, "Fresh processes per workload and mode (median and range "
                     "reported).")
flags.DEFINE_list("only", [], "Run only the workloads named here (default: all); names as in "
                  "the JSON, e.g. clopper_pearson_1e4.")
flags.DEFINE_enum("emitters", "auto", ["auto", "fusion", "loop"],
                  "XLA:CPU emitters for every estimator program: the estimators' own choice "
                  "(auto), or forced ($DPAUDIT_CPU_EMITTERS): fusion or loop emitters for all.")
flags.DEFINE_float("scale", 1.0, "Multiplies every workload size (0.001 for a smoke test); the "
                   "targets are judged only at scale 1.")
flags.DEFINE_string("output_dir", "out/benchmarks/first_calls", "Where results.json goes.")
flags.DEFINE_string("worker", "", "Internal: run this one workload and print its JSON line.")
flags.DEFINE_enum("worker_mode", "dpaudit", ["dpaudit", "prime", "peer"],
                  "Internal: what the worker runs.")
common.deprecated_alias("rounds", "num_rounds")

WARM_TARGET_S = 0.05
COLD_SMALL_TARGET_S = 0.2
COLD_LARGE_TARGET_S = 1.0
SMALL_ELEMENTS = 1e4
MODES = ("cold", "warm", "peer")


def cold_target(name: str) -> float:
  return (COLD_SMALL_TARGET_S if WORKLOADS[name].elements <= SMALL_ELEMENTS
          else COLD_LARGE_TARGET_S)


def run_worker(name: str, mode: str, scale: float) -> dict[str, Any]:
  """The first call of one workload in this fresh process (the cache as the parent set it)."""
  import jax
  import numpy as np

  from dpaudit.estimators import _compile
  seconds = [0.0]

  def listen(event: str, duration: float, **kwargs) -> None:
    del kwargs
    if event in common.JAX_COMPILE_EVENTS:
      seconds[0] += duration

  rng = np.random.default_rng(0)
  build = PEERS[name][1] if mode == "peer" else WORKLOADS[name].build
  call = build(rng, 1 if mode == "prime" else 0, scale)
  jax.monitoring.register_event_duration_secs_listener(listen)
  start = time.perf_counter()
  jax.block_until_ready(call())
  first = time.perf_counter() - start
  return {"first_call_s": first, "compile_s": seconds[0],
          "host_path": _compile.host_calls[0] > 0}


def _spawn(name: str, mode: str, cache_dir: str | None) -> dict[str, Any]:
  from dpaudit import compilation_cache
  from dpaudit.estimators import _compile
  env = {**os.environ, _compile.EMITTERS_VARIABLE: FLAGS.emitters,
         _compile.FIRST_CALLS_VARIABLE: "compiled" if mode == "prime" else "auto",
         compilation_cache.SWITCH_VARIABLE: "on" if cache_dir else "off",
         compilation_cache.DIR_VARIABLE: cache_dir or "",
         compilation_cache.MIN_SECONDS_VARIABLE: "0"}
  done = subprocess.run(
      [sys.executable, "-m", "experiments.benchmarks.first_calls", f"--worker={name}",
       f"--worker_mode={'dpaudit' if mode in ('cold', 'warm') else mode}",
       f"--scale={FLAGS.scale}"],
      capture_output=True, text=True, env=env, check=False)
  if done.returncode != 0:
    raise RuntimeError(f"workload {name} ({mode}) failed: "
                       f"{done.stderr.strip().splitlines()[-1:]}")
  return json.loads(done.stdout.strip().splitlines()[-1])


def run_round(name: str) -> dict[str, dict[str, Any]]:
  """One fresh process per mode: cold (empty cache), then warm (a cache another size of the
  same bucket filled), then the peer's."""
  out = {}
  root = tempfile.mkdtemp(prefix="dpaudit-first-calls-")
  try:
    out["cold"] = _spawn(name, "cold", os.path.join(root, "cold"))
    _spawn(name, "prime", os.path.join(root, "warm"))
    out["warm"] = _spawn(name, "warm", os.path.join(root, "warm"))
  finally:
    shutil.rmtree(root, ignore_errors=True)
  if name in PEERS:
    out["peer"] = _spawn(name, "peer", None)
  return out


def _stats(values: list[float]) -> dict[str, Any]:
  return {"median": statistics.median(values), "range": [min(values), max(values)],
          "all": values}


def summarize(name: str, runs: list[dict[str, dict[str, Any]]],
              full_scale: bool) -> dict[str, Any]:
  out: dict[str, Any] = {"name": name, "elements": WORKLOADS[name].elements,
                         "peer_name": PEERS[name][0] if name in PEERS else None}
  for mode in MODES:
    if mode not in runs[0]:
      continue
    rows = [r[mode] for r in runs]
    out[mode] = {"first_call_s": _stats([r["first_call_s"] for r in rows]),
                 "compile_s": _stats([r["compile_s"] for r in rows]),
                 "host_path": [r["host_path"] for r in rows]}
  judged = full_scale or None
  out["cold_target_s"] = cold_target(name)
  out["cold_met"] = judged and out["cold"]["first_call_s"]["median"] <= cold_target(name)
  out["warm_met"] = judged and out["warm"]["first_call_s"]["median"] <= WARM_TARGET_S
  return out


def table(rows: list[dict[str, Any]], rounds: int, full_scale: bool) -> list[dict[str, Any]]:
  out = []
  for r in rows:
    for mode, goal in (("cold", r["cold_target_s"]), ("warm", WARM_TARGET_S)):
      seconds = r[mode]["first_call_s"]["median"]
      label = (f"{r['name']}: first call, {mode} cache (median of {rounds} fresh processes; "
               "host path" if any(r[mode]["host_path"]) else "compiled")
      out.append(tables.goal_row(label + ")", seconds * 1e3, "ms", goal * 1e3, full_scale))
    if "peer" in r:
      out.append(tables.row(f"{r['name']}: first call, cold cache, against the peer's first call",
                            r["cold"]["first_call_s"]["median"] * 1e3, "ms",
                            peer=r["peer"]["first_call_s"]["median"] * 1e3,
                            peer_name=r["peer_name"]))
  return out


def config_from_flags() -> dict[str, Any]:
  common.check_count("num_rounds", FLAGS.num_rounds, 1, 1000)
  common.check_float("scale", FLAGS.scale, 0.0, 1.0, low_open=True)
  unknown = [n for n in FLAGS.only if n not in WORKLOADS]
  if unknown:
    raise ValueError(f"--only={','.join(FLAGS.only)} names unknown workloads {unknown}; "
                     f"valid: {', '.join(WORKLOADS)}")
  return {"rounds": FLAGS.num_rounds, "emitters": FLAGS.emitters, "scale": FLAGS.scale,
          "workloads": list(FLAGS.only) or list(WORKLOADS)}


@common.cli
def main(argv) -> None:
  del argv
  common.enable_x64()
  common.quiet_logging()
  if FLAGS.worker:
    from dpaudit import compilation_cache
    if os.environ.get(compilation_cache.SWITCH_VARIABLE) == "on":  # (off for benchmarks)
      compilation_cache.enable()
    if FLAGS.worker not in WORKLOADS or (FLAGS.worker_mode == "peer"
                                         and FLAGS.worker not in PEERS):
      raise ValueError(f"--worker={FLAGS.worker} is not a workload (of --worker_mode="
                       f"{FLAGS.worker_mode}); valid: " + ", ".join(WORKLOADS))
    sys.stdout.write(json.dumps(run_worker(FLAGS.worker, FLAGS.worker_mode, FLAGS.scale)) + "\n")
    sys.stdout.flush()
    os._exit(0)  # not waiting for the background compile: the call has been timed
  config = config_from_flags()
  common.claim_output_dir(FLAGS.output_dir)
  runs: dict[str, list] = {name: [] for name in config["workloads"]}
  with common.Timer() as timer:
    for round_index in range(config["rounds"]):
      for name in config["workloads"]:
        runs[name].append(run_round(name))
        print(f"round {round_index + 1}/{config['rounds']} {name}: first call cold "
              f"{runs[name][-1]['cold']['first_call_s'] * 1e3:.0f} ms, warm "
              f"{runs[name][-1]['warm']['first_call_s'] * 1e3:.0f} ms", file=sys.stderr)
  full_scale = config["scale"] == 1.0
  rows = [summarize(name, r, full_scale) for name, r in runs.items()]
  report = {"targets_s": {"warm": WARM_TARGET_S, "cold_small": COLD_SMALL_TARGET_S,
                          "cold_large": COLD_LARGE_TARGET_S, "small_elements": SMALL_ELEMENTS},
            "workloads": rows, "machine": tables.machine(),
            "table": table(rows, config["rounds"], full_scale),
            "all_targets_met": (all(r["cold_met"] and r["warm_met"] for r in rows)
                                if full_scale else None),
            "unmet": [f"{r['name']} ({mode})" for r in rows for mode in ("cold", "warm")
                      if r[f"{mode}_met"] is False]}
  path = common.write_results(FLAGS.output_dir, "benchmarks.first_calls", config, report,
                              timer.seconds)
  with open(path) as f:
    print(f.read())


if __name__ == "__main__":
  common.run(main)
