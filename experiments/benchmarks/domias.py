"""Benchmark: DOMIAS's density fits vmapped over seeds against a loop, and one Fig. 3 game.

  python -m experiments.benchmarks.domias
  python -m experiments.benchmarks.domias --game    # also one full Fig. 3 game, BNAF

Three measurements on California Housing (standardised rows, ``--seeds`` datasets of
``--num_rows`` rows each, one per seed, as the games of a Fig. 3 setting have):

* ``kde``: :func:`dpaudit.attacks.density.fit_kde` and
  :func:`~dpaudit.attacks.density.kde_log_density` at ``--num_queries`` records,
  ``jit(vmap)`` over the seeds against the same jitted function called once per seed. Median of
  ``--repeats`` runs, compile excluded.
* ``flow``: :func:`~dpaudit.attacks.density.fit_flows` (one vmapped program, BNAF of
  ``--flow_hidden_dim`` units per dimension, ``--flow_epochs`` epochs at most) against
  :func:`~dpaudit.attacks.density.fit_flow` in a loop over the seeds; one timed repetition each
  (a fit is seconds to minutes), compile excluded (a first call on other data warms both).
  Both sides give the same parameters (the benchmark checks the held-out log-likelihoods agree).
* ``game`` (with ``--game``): one whole game of Fig. 3 at the paper's sizes (|D_mem| = 500,
  |D_ref| = |D_syn| = 10,000, TVAE ``--tvae_epochs`` epochs, every attack, BNAF with the paper's
  Table 3 settings unless ``--flow_hidden_dim`` / ``--flow_epochs`` say otherwise), against the
  2 hours per seed that App. A.3 reports for its implementation with BNAF (8 K80 GPUs and 32
  CPUs; ours: this machine). The comparison is of wall time for the same sizes, not of
  identical code.

Prints one JSON object and writes it to ``--output_dir``/benchmark.json.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time

from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import results
from experiments import common

FLAGS = flags.FLAGS
flags.DEFINE_integer("seeds", 8, "Datasets (one per seed) fitted at once.")
flags.DEFINE_integer("num_rows", 10_000, "Rows of each dataset (D_syn / D_ref of a Fig. 3 game).")
flags.DEFINE_integer("num_queries", 1_000, "Records whose log-density the KDE evaluates.")
flags.DEFINE_integer("repeats", 3, "Timed repetitions of the KDE comparison.")
flags.DEFINE_integer("flow_rows", 2_000, "Rows of each dataset in the flow comparison.")
flags.DEFINE_integer("flow_hidden_dim", 8, "BNAF hidden units per dimension (paper: 32).")
flags.DEFINE_integer("flow_epochs", 5, "BNAF epochs (paper: 50).")
flags.DEFINE_bool("game", False, "Also time one full Fig. 3 game (minutes to hours).")
flags.DEFINE_integer("tvae_epochs", 2000, "TVAE epochs of the game.")
flags.DEFINE_string("output_dir", "out/benchmarks/domias", "Where benchmark.json goes.")

PAPER_SECONDS_PER_SEED_BNAF = 2 * 3600.0  # App. A.3


def _datasets(num_seeds: int, num_rows: int, seed: int = 0, flag: str = "num_rows"
              ) -> np.ndarray:
  """``[seeds, rows, 8]`` random subsets of the standardised California Housing features;
  ValueError naming ``--flag`` when it asks for more rows than the data hold."""
  from dpaudit import data
  features = np.asarray(data.load("california_housing").features, np.float64)
  features = (features - features.mean(0)) / features.std(0)
  if num_rows > features.shape[0]:
    raise ValueError(f"--{flag}={num_rows} is outside the valid range [1, {features.shape[0]}]: "
                     "California Housing has that many rows")
  rng = np.random.default_rng(seed)
  return np.stack([features[rng.choice(features.shape[0], num_rows, replace=False)]
                   for _ in range(num_seeds)])


def bench_kde(datas: np.ndarray, queries: np.ndarray, repeats: int) -> dict:
  from dpaudit.attacks import density

  def one(data, x, chunk_size):
    return density.kde_log_density(density.fit_kde(data), x, chunk_size=chunk_size)

  # The same peak memory on both sides: 128 query rows per chunk alone, 128 / seeds vmapped.
  chunk = 128
  single = jax.jit(lambda d, x: one(d, x, chunk))
  batched = jax.jit(jax.vmap(lambda d, x: one(d, x, max(1, chunk // datas.shape[0]))))
  datas, queries = jnp.asarray(datas), jnp.asarray(queries)
  start = time.perf_counter()
  jax.block_until_ready(batched(datas, queries))
  compile_vmapped = time.perf_counter() - start
  start = time.perf_counter()
  jax.block_until_ready(single(datas[0], queries[0]))
  compile_loop = time.perf_counter() - start
  vmapped, loop = [], []
  for _ in range(repeats):
    start = time.perf_counter()
    out_v = jax.block_until_ready(batched(datas, queries))
    vmapped.append(time.perf_counter() - start)
    start = time.perf_counter()
    out_l = [jax.block_until_ready(single(d, q)) for d, q in zip(datas, queries)]
    loop.append(time.perf_counter() - start)
  np.testing.assert_allclose(np.asarray(out_v), np.stack(out_l), rtol=1e-6, atol=1e-6)
  return {"vmapped_median_s": statistics.median(vmapped), "loop_median_s": statistics.median(loop),
          "speedup": statistics.median(loop) / statistics.median(vmapped),
          "first_call_vmapped_s": compile_vmapped, "first_call_loop_s": compile_loop,
          "repeats": repeats, "query_rows_per_chunk": {"loop": chunk,
                                                       "vmapped": max(1, chunk // len(datas))}}


def bench_flow(datas: np.ndarray, config) -> dict:
  from dpaudit.attacks import density
  keys = jax.random.split(jax.random.key(0), datas.shape[0])
  warm = datas + 0.01  # other values, same shapes: compiles every program once
  start = time.perf_counter()
  jax.block_until_ready(density.fit_flows(keys, warm, config).params)
  first_vmapped = time.perf_counter() - start
  start = time.perf_counter()
  jax.block_until_ready(density.fit_flow(keys[0], warm[0], config).params)
  first_loop = time.perf_counter() - start
  start = time.perf_counter()
  batch = density.fit_flows(keys, datas, config)
  jax.block_until_ready(batch.params)
  vmapped = time.perf_counter() - start
  start = time.perf_counter()
  singles = [density.fit_flow(k, d, config) for k, d in zip(keys, datas)]
  jax.block_until_ready([s.params for s in singles])
  loop = time.perf_counter() - start
  held_out = jnp.asarray(datas[0, :200])
  agree = float(np.max(np.abs(
      np.asarray(density.flow_log_density(jax.tree.map(lambda a: a[0], batch), held_out))
      - np.asarray(density.flow_log_density(singles[0], held_out)))))
  return {"vmapped_s": vmapped, "loop_s": loop, "speedup": loop / vmapped,
          "first_call_vmapped_s": first_vmapped, "first_call_loop_s": first_loop,
          "max_log_density_difference_seed0": agree}


def bench_game() -> dict:
  from dpaudit import data
  from dpaudit.audits import domias
  values = np.asarray(data.load("california_housing").features, np.float64)
  config = domias.DomiasConfig(
      num_members=500, num_reference=10_000, num_synthetic=10_000, num_holdout=0,
      generator_config={"epochs": FLAGS.tvae_epochs}, density="bnaf",
      flow_config={"hidden_dim": FLAGS.flow_hidden_dim, "max_epochs": FLAGS.flow_epochs})
  start = time.perf_counter()
  result = domias.run_domias(jax.random.key(0), values, config,
                             progress=lambda line: print(line, file=sys.stderr, flush=True))
  seconds = time.perf_counter() - start
  return {"seconds": seconds, "phases_s": result.wall_time_s,
          "paper_seconds_per_seed": PAPER_SECONDS_PER_SEED_BNAF,
          "speedup_vs_paper": PAPER_SECONDS_PER_SEED_BNAF / seconds,
          "auc": {name: m["auc"] for name, m in result.attacks.items()},
          "flow_config": dict(config.flow_config), "tvae_epochs": FLAGS.tvae_epochs,
          "note": ("paper: 2 h per seed with BNAF on 8 K80 GPUs + 32 CPUs (App. A.3); ours: "
                   "this machine, same sizes, one seed, compile included")}


@common.cli
def main(argv):
  del argv
  common.start_float64_experiment()
  from dpaudit.attacks import density
  for name in ("repeats", "flow_epochs", "tvae_epochs"):
    common.check_count(name, FLAGS[name].value)
  for name in ("num_rows", "num_queries", "flow_rows"):  # flow: at most num_rows are used
    common.check_count(name, FLAGS[name].value)
  # Each seed: a dataset and its queries of 8 float64 features (the rows are drawn without
  # replacement from California Housing's, which _datasets checks).
  common.check_memory("seeds", FLAGS.seeds, 8.0 * 8 * (FLAGS.num_rows + FLAGS.num_queries),
                      what="one dataset and its queries per seed")
  # BNAF's square weight blocks of width 8 * flow_hidden_dim (float32), one flow per seed.
  largest = math.isqrt(common.physical_memory_bytes() // (4 * 64 * FLAGS.seeds))
  common.check_count("flow_hidden_dim", FLAGS.flow_hidden_dim, 1, largest)
  common.claim_output_dir(FLAGS.output_dir)
  datas = _datasets(FLAGS.seeds, FLAGS.num_rows)
  queries = _datasets(FLAGS.seeds, FLAGS.num_queries, seed=1, flag="num_queries")
  out = {"benchmark": "domias", "seeds": FLAGS.seeds, "num_rows": FLAGS.num_rows,
         "num_queries": FLAGS.num_queries, "devices": str(jax.devices())}
  out["kde"] = bench_kde(datas, queries, FLAGS.repeats)
  print(f"kde: {out['kde']['speedup']:.2f}x", file=sys.stderr, flush=True)
  flow_config = density.FlowConfig(hidden_dim=FLAGS.flow_hidden_dim,
                                   max_epochs=FLAGS.flow_epochs)
  out["flow"] = {"rows": FLAGS.flow_rows, "hidden_dim": FLAGS.flow_hidden_dim,
                 "max_epochs": FLAGS.flow_epochs,
                 **bench_flow(datas[:, :FLAGS.flow_rows], flow_config)}
  print(f"flow: {out['flow']['speedup']:.2f}x", file=sys.stderr, flush=True)
  if FLAGS.game:
    out["game"] = bench_game()
  results.write_json(os.path.join(FLAGS.output_dir, "benchmark.json"), out)
  print(results.dumps(out))


if __name__ == "__main__":
  common.run(main)
