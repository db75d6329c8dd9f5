"""Benchmark: DOMIAS's density fits vmapped over seeds against a loop, and one Fig. 3 game.

  python -m experiments.benchmarks.domias
  python -m experiments.benchmarks.domias --game    # also one full Fig. 3 game, BNAF

Three measurements on California Housing (standardised rows, ``--num_seeds`` datasets of
``--num_rows`` rows each, one per seed, as the games of a Fig. 3 setting have):

* ``kde``: :func:`dpaudit.attacks.density.fit_kde` and
  :func:`~dpaudit.attacks.density.kde_log_density` at ``--num_queries`` records,
  ``jit(vmap)`` over the seeds against the same jitted function called once per seed. Median of
  ``--num_repeats`` runs, compile excluded.
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

Prints one JSON object and writes it to ``--output_dir``/results.json.
"""

from __future__ import annotations

import math
import os
import sys
import time

import jax
import numpy as np
from absl import flags

from dpaudit import results
from experiments import common
from experiments.benchmarks import hot_paths, tables

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_seeds", 8, "Datasets (one per seed) fitted at once.")
flags.DEFINE_integer("num_rows", 10_000, "Rows of each dataset (D_syn / D_ref of a Fig. 3 game).")
flags.DEFINE_integer("num_queries", 1_000, "Records whose log-density the KDE evaluates.")
flags.DEFINE_integer("num_repeats", 3, "Timed repetitions of the KDE comparison.")
flags.DEFINE_integer("flow_rows", 2_000, "Rows of each dataset in the flow comparison.")
flags.DEFINE_integer("flow_hidden_dim", 8, "BNAF hidden units per dimension (paper: 32).")
flags.DEFINE_integer("flow_epochs", 5, "BNAF epochs (paper: 50).")
flags.DEFINE_bool("game", False, "Also time one full Fig. 3 game (minutes to hours).")
flags.DEFINE_integer("tvae_epochs", 2000, "TVAE epochs of the game.")
flags.DEFINE_string("output_dir", "out/benchmarks/domias", "Where results.json goes.")
common.deprecated_alias("seeds", "num_seeds")
common.deprecated_alias("repeats", "num_repeats")

PAPER_SECONDS_PER_SEED_BNAF = 2 * 3600.0  # App. A.3


_datasets = hot_paths.domias_datasets
bench_kde = hot_paths.time_kde
bench_flow = hot_paths.time_flow


def bench_game() -> dict:
  from dpaudit import data
  from dpaudit.audits import domias
  values = np.asarray(data.load("california_housing").features, np.float64)
  config = domias.DomiasConfig(
      num_members=500, num_reference=10_000, num_synthetic=10_000, num_holdout=0,
      generator_config={"epochs": FLAGS.tvae_epochs}, density="bnaf",
      flow_config={"hidden_dim": FLAGS.flow_hidden_dim, "max_epochs": FLAGS.flow_epochs})
  start = time.perf_counter()
  result = domias.run(jax.random.key(0), config, data=values,
                      progress=lambda _, __, line: print(line, file=sys.stderr, flush=True))
  seconds = time.perf_counter() - start
  return {"seconds": seconds, "phases_s": result.wall_time_s,
          "paper_seconds_per_seed": PAPER_SECONDS_PER_SEED_BNAF,
          "speedup_vs_paper": PAPER_SECONDS_PER_SEED_BNAF / seconds,
          "auc": {name: m["auc"] for name, m in result.attacks.items()},
          "flow_config": dict(config.flow_config), "tvae_epochs": FLAGS.tvae_epochs,
          "note": ("paper: 2 h per seed with BNAF on 8 K80 GPUs + 32 CPUs (App. A.3); ours: "
                   "this machine, same sizes, one seed, compile included")}


def table(out: dict) -> list[dict]:
  """The vmapped fits against the loop over seeds, seconds, and the game against the paper's
  time per seed (:mod:`~experiments.benchmarks.tables`; no targets)."""
  kde, flow = out["kde"], out["flow"]
  loop = "loop over seeds, one jitted fit each"
  rows = [tables.row(f"KDE fit + {out['num_queries']} log-densities, {out['num_rows']} rows x "
                     f"{out['seeds']} seeds, vmapped", kde["vmapped_median_s"], "s",
                     peer=kde["loop_median_s"], peer_name=loop),
          tables.row(f"BNAF fit (hidden {flow['hidden_dim']}, {flow['max_epochs']} epochs), "
                     f"{flow['rows']} rows x {out['seeds']} seeds, vmapped", flow["vmapped_s"],
                     "s", peer=flow["loop_s"], peer_name=loop)]
  if "game" in out:
    game = out["game"]
    rows.append(tables.row("one Fig. 3 game with BNAF, one seed", game["seconds"], "s",
                           peer=game["paper_seconds_per_seed"],
                           peer_name="the paper's time per seed (App. A.3, 8 K80 GPUs)"))
  return rows


@common.cli
def main(argv):
  del argv
  common.start_float64_experiment()
  from dpaudit.attacks import density
  for name in ("num_repeats", "flow_epochs", "tvae_epochs"):
    common.check_count(name, FLAGS[name].value)
  for name in ("num_rows", "num_queries", "flow_rows"):  # flow: at most num_rows are used
    common.check_count(name, FLAGS[name].value)
  # Each seed: a dataset and its queries of 8 float64 features (the rows are drawn without
  # replacement from California Housing's, which _datasets checks).
  common.check_memory("num_seeds", FLAGS.num_seeds, 8.0 * 8 * (FLAGS.num_rows + FLAGS.num_queries),
                      what="one dataset and its queries per seed")
  # BNAF's square weight blocks of width 8 * flow_hidden_dim (float32), one flow per seed.
  largest = math.isqrt(common.physical_memory_bytes() // (4 * 64 * FLAGS.num_seeds))
  common.check_count("flow_hidden_dim", FLAGS.flow_hidden_dim, 1, largest)
  common.claim_output_dir(FLAGS.output_dir)
  datas = _datasets(FLAGS.num_seeds, FLAGS.num_rows)
  queries = _datasets(FLAGS.num_seeds, FLAGS.num_queries, seed=1, flag="num_queries")
  out = {"benchmark": "domias", "seeds": FLAGS.num_seeds, "num_rows": FLAGS.num_rows,
         "num_queries": FLAGS.num_queries, "devices": str(jax.devices())}
  out["kde"] = bench_kde(datas, queries, FLAGS.num_repeats)
  print(f"kde: {out['kde']['speedup']:.2f}x", file=sys.stderr, flush=True)
  flow_config = density.FlowConfig(hidden_dim=FLAGS.flow_hidden_dim,
                                   max_epochs=FLAGS.flow_epochs)
  out["flow"] = {"rows": FLAGS.flow_rows, "hidden_dim": FLAGS.flow_hidden_dim,
                 "max_epochs": FLAGS.flow_epochs,
                 **bench_flow(datas[:, :FLAGS.flow_rows], flow_config)}
  print(f"flow: {out['flow']['speedup']:.2f}x", file=sys.stderr, flush=True)
  if FLAGS.game:
    out["game"] = bench_game()
  out.update(command=" ".join(sys.argv), machine=tables.machine(), versions=common.versions())
  out["table"] = table(out)
  results.write_json(os.path.join(FLAGS.output_dir, "results.json"), out)
  print(results.dumps(out))


if __name__ == "__main__":
  common.run(main)
