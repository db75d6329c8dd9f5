r"""Compile time of each public estimator's first call in a fresh process.

  python -m experiments.benchmarks.first_calls

``experiments.benchmarks.estimators`` measures compile times inside one long process, after
other programs have compiled. A user's script meets an estimator first in a fresh process, where
its first call also pays what that process has not yet done (about 0.1-0.5 s more for
``clopper_pearson`` on 2026-11-24). Here each workload runs in a subprocess of its own, once per
round, the workloads interleaved round by round so that a busy stretch of the shared machine
falls on all of them alike. For each workload the JSON gives the compile time JAX reports during
the first call (tracing, lowering and XLA, summed over every program the call compiles:
``jax.monitoring``), its median and range over ``--num_rounds``, the first call's wall time, and
whether the median is under the 2 s target. ``--emitters`` forces XLA:CPU's fusion or loop
emitters on every estimator program (``$DPAUDIT_CPU_EMITTERS``; the estimators' own choice by
program and batch size otherwise, ``dpaudit/estimators/_compile.py``), so the two can be
compared.

The workloads are those of ``experiments.benchmarks.estimators``, without the peers: the same
sizes and kinds of input (the counts and tail probabilities drawn by the same functions,
:mod:`experiments.benchmarks.estimator_inputs`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from absl import flags

from experiments import common
from experiments.benchmarks import tables
from experiments.benchmarks.estimator_inputs import count_pairs, scaled_size, tail_probabilities

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_rounds", 3, "Fresh processes per workload (median and range reported).")
flags.DEFINE_list("only", [], "Run only the workloads named here (default: all); names as in "
                  "the JSON, e.g. clopper_pearson_1e4.")
flags.DEFINE_enum("emitters", "auto", ["auto", "fusion", "loop"],
                  "XLA:CPU emitters for every estimator program: the estimators' own choice "
                  "(auto), or forced ($DPAUDIT_CPU_EMITTERS): fusion or loop emitters for all.")
flags.DEFINE_float("scale", 1.0, "Multiplies every workload size (0.001 for a smoke test); the "
                   "target is judged only at scale 1.")
flags.DEFINE_string("output_dir", "out/benchmarks/first_calls", "Where results.json goes.")
flags.DEFINE_string("worker", "", "Internal: run this one workload and print its JSON line.")
common.deprecated_alias("rounds", "num_rounds")

COMPILE_TARGET_S = 2.0


def _size(count: float) -> int:
  return scaled_size(count, FLAGS.scale)


def _workloads() -> dict[str, Callable[[Any], Callable[[], Any]]]:
  """Name -> ``build(rng)``, which draws the inputs and returns the call to time."""
  import numpy as np

  from dpaudit import estimators

  def clopper_pearson(count, max_trials):
    def build(rng):
      k, n = count_pairs(rng, _size(count), max_trials)
      return lambda: estimators.clopper_pearson(k, n, 0.05)
    return build

  def binomial_sf(count, max_trials):
    def build(rng):
      k, n = count_pairs(rng, _size(count), max_trials)
      p = tail_probabilities(rng, k, n)
      return lambda: estimators.binomial_sf(k, n, p)
    return build

  def error_counts(count):
    def build(rng):
      neg, pos = rng.integers(100, 100_000, _size(count)), rng.integers(100, 100_000, _size(count))
      fp, fn = rng.binomial(neg, 0.05), rng.binomial(pos, 0.3)
      return lambda: estimators.epsilon_from_error_counts(fp, neg, fn, pos, 1e-5, 0.05)
    return build

  def scores(count, method):
    def build(rng):
      ins, outs = rng.normal(1.0, 1.0, _size(count)), rng.normal(0.0, 1.0, _size(count))
      return lambda: estimators.epsilon_from_scores(ins, outs, 0.0, 0.05, method)
    return build

  def panoramia(count):
    def build(rng):
      member = rng.random(_size(count)) < 0.5
      baseline, mia = rng.normal(0.3 * member, 1.0), rng.normal(0.6 * member, 1.0)
      return lambda: estimators.panoramia_bounds(baseline, mia, member, 0.05)
    return build

  def one_run_scores(count):
    def build(rng):
      member = rng.random(_size(count)) < 0.5
      canary_scores = rng.normal(0.5 * member, 1.0)
      return lambda: estimators.one_run_epsilon_from_scores(canary_scores, member, 1e-5, 0.05)
    return build

  def one_run(m, r, v):
    def build(rng):
      del rng
      m_s, r_s, v_s = (_size(x) for x in (m, r, v))
      return lambda: estimators.one_run_epsilon(m_s, r_s, min(v_s, r_s), 1e-8, 0.05)
    return build

  def two_cut(count):
    def build(rng):
      trials = rng.integers(1000, 10**6, _size(count))
      cp, cq = rng.binomial(trials, 0.6), rng.binomial(trials, 0.4)
      orders = np.array([1.5, 2.0, 4.0, 8.0, 16.0])
      return lambda: estimators.renyi_two_cut_lower_bound(cp, trials, cq, trials, orders, 0.05)
    return build

  def k_cut(method):
    def build(rng):
      rows, total = 100, _size(1e4)
      p = rng.multinomial(total, rng.dirichlet(np.ones(10), rows))
      q = rng.multinomial(total, rng.dirichlet(np.ones(10), rows))
      orders = np.array([2.0, 4.0])
      return lambda: estimators.renyi_k_cut_lower_bound(p, q, orders, 0.05, method)
    return build

  return {
      "clopper_pearson_1e5": clopper_pearson(1e5, 1e3),
      "clopper_pearson_1e4": clopper_pearson(1e4, 1e6),
      "clopper_pearson_1e3": clopper_pearson(1e3, 1e9),
      "clopper_pearson_1e6": clopper_pearson(1e6, 1e3),
      "binomial_sf_1e5": binomial_sf(1e5, 1e3),
      "binomial_sf_1e6": binomial_sf(1e6, 1e9),
      "error_counts_1e4": error_counts(1e4),
      "error_counts_1e6": error_counts(1e6),
      "scores_bonferroni_1e4": scores(1e4, "bonferroni"),
      "scores_split_1e4": scores(1e4, "split"),
      "scores_bonferroni_1e6": scores(1e6, "bonferroni"),
      "panoramia_1e4": panoramia(1e4),
      "panoramia_1e6": panoramia(1e6),
      "one_run_scores_1e4": one_run_scores(1e4),
      "one_run_scores_1e6": one_run_scores(1e6),
      "one_run_m1e7_r100": one_run(1e7, 100, 95),
      "two_cut_1e4": two_cut(1e4),
      "two_cut_1e6": two_cut(1e6),
      "k_cut_sison_glaz_1e4": k_cut("sison-glaz"),
      "k_cut_goodman_1e4": k_cut("goodman"),
  }


def run_worker(name: str) -> dict[str, Any]:
  """The first call of one workload in this (fresh) process."""
  import jax
  import numpy as np
  seconds = [0.0]

  def listen(event: str, duration: float, **kwargs) -> None:
    del kwargs
    if event in common.JAX_COMPILE_EVENTS:
      seconds[0] += duration

  call = _workloads()[name](np.random.default_rng(0))
  jax.monitoring.register_event_duration_secs_listener(listen)
  start = time.perf_counter()
  jax.block_until_ready(call())
  first = time.perf_counter() - start
  start = time.perf_counter()
  jax.block_until_ready(call())
  return {"compile_s": seconds[0], "first_call_s": first,
          "second_call_s": time.perf_counter() - start}


def _spawn(name: str) -> dict[str, Any]:
  from dpaudit.estimators import _compile
  env = {**os.environ, _compile.EMITTERS_VARIABLE: FLAGS.emitters}
  done = subprocess.run(
      [sys.executable, "-m", "experiments.benchmarks.first_calls", f"--worker={name}",
       f"--scale={FLAGS.scale}"],
      capture_output=True, text=True, env=env, check=False)
  if done.returncode != 0:
    raise RuntimeError(f"workload {name} failed: {done.stderr.strip().splitlines()[-1:]}")
  return json.loads(done.stdout.strip().splitlines()[-1])


def summarize(name: str, runs: list[dict[str, Any]], full_scale: bool) -> dict[str, Any]:
  compile_s = [r["compile_s"] for r in runs]
  median = statistics.median(compile_s)
  return {"name": name, "compile_s": compile_s, "compile_median_s": median,
          "compile_range_s": [min(compile_s), max(compile_s)],
          "first_call_s": [r["first_call_s"] for r in runs],
          "second_call_s": [r["second_call_s"] for r in runs],
          "target_met": median < COMPILE_TARGET_S if full_scale else None}


def config_from_flags() -> dict[str, Any]:
  # A fresh process per round and workload.
  common.check_count("num_rounds", FLAGS.num_rounds, 1, 1000)
  common.check_float("scale", FLAGS.scale, 0.0, 1.0, low_open=True)
  names = list(_workloads())
  unknown = [n for n in FLAGS.only if n not in names]
  if unknown:
    raise ValueError(f"--only={','.join(FLAGS.only)} names unknown workloads {unknown}; "
                     f"valid: {', '.join(names)}")
  return {"rounds": FLAGS.num_rounds,  # (results.json keeps the key)
           "emitters": FLAGS.emitters, "scale": FLAGS.scale,
          "workloads": list(FLAGS.only) or names}


@common.cli
def main(argv) -> None:
  del argv
  common.enable_x64()
  common.quiet_logging()
  if FLAGS.worker:
    if FLAGS.worker not in _workloads():
      raise ValueError(f"--worker={FLAGS.worker} is not a workload; valid: "
                       + ", ".join(_workloads()))
    print(json.dumps(run_worker(FLAGS.worker)))
    return
  config = config_from_flags()
  common.claim_output_dir(FLAGS.output_dir)
  runs: dict[str, list] = {name: [] for name in config["workloads"]}
  with common.Timer() as timer:
    for round_index in range(config["rounds"]):
      for name in config["workloads"]:
        runs[name].append(_spawn(name))
        print(f"round {round_index + 1}/{config['rounds']} {name}: compile "
              f"{runs[name][-1]['compile_s']:.2f} s", file=sys.stderr)
  full_scale = config["scale"] == 1.0
  rows = [summarize(name, r, full_scale) for name, r in runs.items()]
  report = {"compile_target_s": COMPILE_TARGET_S, "workloads": rows,
            "machine": tables.machine(),
            "table": [tables.goal_row(f"{r['name']}: compile time of the first call (median of "
                                      f"{config['rounds']} fresh processes)",
                                      r["compile_median_s"], "s", COMPILE_TARGET_S, full_scale)
                      for r in rows],
            "all_targets_met": all(r["target_met"] for r in rows) if full_scale else None,
            "unmet": [r["name"] for r in rows if r["target_met"] is False]}
  path = common.write_results(FLAGS.output_dir, "benchmarks.first_calls", config, report,
                              timer.seconds)
  with open(path) as f:
    print(f.read())


if __name__ == "__main__":
  common.run(main)
