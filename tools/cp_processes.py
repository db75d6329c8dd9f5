"""Clopper-Pearson on a million count pairs, timed in fresh processes against scipy.

``python tools/cp_processes.py [--processes 10] [--pairs 1e6] [--max_n 1e6] [--calls 7]
[--norandom]`` (``--max_n 1e3`` is the benchmark's tightest case): each process draws the
pairs as the estimator benchmark does
(:func:`experiments.benchmarks.estimator_inputs.count_pairs`, float64), calls
``clopper_pearson`` once (compile or cache load) and then ``--calls`` more times, and reports
the median of those calls (wall and CPU time); scipy's ``beta.ppf``/``isf`` is timed once per
process (wall and CPU time: on a loaded machine the ratio of CPU times is the steadier
figure; the limits run on two cores, so on an idle machine the wall ratio can reach twice
it). ``--norandom`` runs each process under ``setarch -R`` (no address-space
randomisation). The processes use the persistent compilation cache of the experiments.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, os, sys, time
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", os.environ["CP_CACHE"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
from dpaudit import estimators
from experiments.benchmarks.estimator_inputs import count_pairs
from experiments.benchmarks.estimators_counts import scipy_clopper_pearson
pairs, max_n, calls = int(float(sys.argv[1])), float(sys.argv[2]), int(sys.argv[3])
k, n = count_pairs(np.random.default_rng(0), pairs, max_n)
kj, nj = jax.numpy.asarray(k), jax.numpy.asarray(n)
jax.block_until_ready(estimators.clopper_pearson(kj, nj, 0.05))
wall, cpu = [], []
for _ in range(calls):
  w, c = time.perf_counter(), time.process_time()
  jax.block_until_ready(estimators.clopper_pearson(kj, nj, 0.05))
  wall.append(time.perf_counter() - w)
  cpu.append(time.process_time() - c)
start, start_cpu = time.perf_counter(), time.process_time()
scipy_clopper_pearson(k, n, 0.05)
peer, peer_cpu = time.perf_counter() - start, time.process_time() - start_cpu
print(json.dumps({"wall": sorted(wall)[len(wall) // 2], "cpu": sorted(cpu)[len(cpu) // 2],
                  "scipy": peer, "scipy_cpu": peer_cpu}))
"""


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--processes", type=int, default=10)
  parser.add_argument("--pairs", default="1e6")
  parser.add_argument("--max_n", default="1e6")
  parser.add_argument("--calls", type=int, default=7)
  parser.add_argument("--norandom", action="store_true")
  args = parser.parse_args()
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = {**os.environ, "PYTHONPATH": root,
         "CP_CACHE": os.environ.get("DPAUDIT_COMPILATION_CACHE_DIR",
                                    os.path.expanduser("~/.cache/dpaudit/jax_compilation_cache"))}
  prefix = ["setarch", "-R"] if args.norandom else []
  rows = []
  for _ in range(args.processes):
    out = subprocess.run(prefix + [sys.executable, "-c", CHILD, args.pairs, args.max_n,
                                   str(args.calls)], env=env, cwd=root, check=True,
                         capture_output=True, text=True).stdout
    row = json.loads(out.strip().splitlines()[-1])
    row["ratio"] = row["scipy"] / row["wall"]
    rows.append(row)
    print(f"wall {row['wall'] * 1e3:7.1f} ms  cpu {row['cpu'] * 1e3:7.1f} ms  "
          f"scipy {row['scipy'] * 1e3:7.1f} ms (cpu {row['scipy_cpu'] * 1e3:7.1f})  "
          f"ratio {row['ratio']:5.1f} (cpu {row['scipy_cpu'] / row['cpu']:5.1f})", flush=True)
  ratios = [row["ratio"] for row in rows]
  print(f"median wall {statistics.median(r['wall'] for r in rows) * 1e3:.1f} ms, ratio median "
        f"{statistics.median(ratios):.1f} (min {min(ratios):.1f}); "
        f"{sum(r >= 10 for r in ratios)}/{len(ratios)} processes >= 10x scipy")


if __name__ == "__main__":
  main()
