r"""The worst-case neighbouring histograms of GNMax, searched: how far the supremum of the exact
Renyi divergence lies below the data-independent bound alpha / sigma^2.

  python -m experiments.gnmax_worst_case --output_dir=out/gnmax_worst_case

Chadha et al., "Auditing Private Prediction" (Sec. 4.2), call the supremum of their exact
divergence (Eq. 4) over all neighbouring histograms "computationally intractable"; this
experiment searches it (:func:`dpaudit.accounting.gnmax_worst_case.worst_case_neighbors`: an
exhaustive two-level family, then a local search from it and from random histograms) for every
``--num_teachers`` x ``--noise_multipliers`` with ``--num_classes`` classes. Every reported
value is the exact divergence of an explicit pair of histograms, so it is a lower bound on the
supremum; ``alpha / sigma^2`` (Papernot et al. 2018, Prop. 8) is the upper bound.

Writes ``results.json`` (per cell and order: the value found, the pair, the two-level
family's best, the data-independent bound and their ratio) and ``worst_case.png`` (the ratio
against the order, with the 2/pi limit of a binary release), and prints a table. Each cell is
saved in ``--output_dir/cells`` and reused by a rerun (``--noresume`` recomputes).
"""

from __future__ import annotations

import itertools
import math
import os
import sys

from absl import flags

from dpaudit import results
from experiments import common

FLAGS = flags.FLAGS
flags.DEFINE_list("num_teachers", ["20", "250"], "Votes k per histogram (the paper: 250).")
flags.DEFINE_integer("num_classes", 10, "Classes C.")
flags.DEFINE_list("noise_multipliers", ["4", "40"],
                  "Noise standard deviations sigma (the paper: 40 for k = 250).")
common.deprecated_alias("sigmas", "noise_multipliers")
flags.DEFINE_list("orders", ["1.5", "2", "4", "8", "16", "32", "64"], "Renyi orders.")
flags.DEFINE_integer("num_random_starts", 2, "Random starting histograms per order.")
flags.DEFINE_integer("max_steps", 100, "Local-search steps per start.")
flags.DEFINE_integer("seed", 0, "PRNG seed of the random starts.")
flags.DEFINE_string("output_dir", "out/gnmax_worst_case", "Where results go.")
flags.DEFINE_bool("resume", True, "Reuse finished cells in output_dir/cells.")
flags.DEFINE_bool("plot", True, "Write worst_case.png.")


def settings_from_flags() -> tuple[list[tuple[int, float]], tuple[float, ...]]:
  """[(k, sigma), ...] and the orders, validated (ValueError naming the flag)."""
  try:
    teachers = [int(v) for v in FLAGS.num_teachers]
  except ValueError:
    raise ValueError(f"--num_teachers={','.join(FLAGS.num_teachers)} must be a comma-separated "
                     "list of integers") from None
  sigmas = common.parse_floats("noise_multipliers", FLAGS.noise_multipliers)
  orders = common.parse_floats("orders", FLAGS.orders)
  checks = (("num_teachers", teachers, lambda v: 1 <= v <= common.MAX_COUNT,
             f"[1, {common.MAX_COUNT}]"),
            ("noise_multipliers", sigmas, lambda v: 0 < v < math.inf, "(0, inf)"),
            ("orders", orders, lambda v: v > 1 and math.isfinite(v), "(1, inf)"))
  for name, values, ok, valid in checks:
    if not values:
      raise ValueError(f"--{name} is empty; give at least one value")
    for v in values:
      if not ok(v):
        raise ValueError(f"--{name} contains {v}, outside the valid range {valid}")
  from dpaudit.accounting.gnmax_worst_case import sigma_range  # what the search computes
  for k in teachers:
    low, high = sigma_range(k)
    for v in sigmas:
      if not low <= v <= high:
        raise ValueError(f"--noise_multipliers contains {v:g}, outside the valid range "
                         f"[{low:g}, {high:g}] for --num_teachers={k}")
  for name, low in (("num_random_starts", 0), ("max_steps", 0)):
    common.check_count(name, getattr(FLAGS, name), low)
  common.check_seed(FLAGS.seed)
  # One compiled evaluation: 2048 pairs x C classes x ~200 quadrature nodes in float64.
  common.check_memory("num_classes", FLAGS.num_classes, 8.0 * 2048 * 200, low=2,
                      what="one evaluation of the search")
  return list(itertools.product(teachers, sigmas)), orders


def run_cells(settings, orders) -> dict:
  from dpaudit.accounting import gnmax_worst_case
  store = results.CellStore(os.path.join(FLAGS.output_dir, "cells"), FLAGS.resume)
  cells = {}
  for k, sigma in settings:
    signature = {"num_teachers": k, "num_classes": FLAGS.num_classes, "sigma": sigma,
                 "orders": list(orders), "num_random_starts": FLAGS.num_random_starts,
                 "max_steps": FLAGS.max_steps, "seed": FLAGS.seed}

    def compute(k=k, sigma=sigma):
      def progress(count):
        print(f"  k={k} sigma={sigma:g}: {count} pairs evaluated", file=sys.stderr, flush=True)
      with common.Timer() as timer:
        found = gnmax_worst_case.worst_case_neighbors(
            k, FLAGS.num_classes, sigma, orders, key=common.make_key(FLAGS.seed),
            num_random_starts=FLAGS.num_random_starts, max_steps=FLAGS.max_steps,
            progress=progress)
      return {"orders": list(orders), "divergence": found.divergence.tolist(),
              "histogram": found.histogram.tolist(), "neighbor": found.neighbor.tolist(),
              "two_level": found.two_level.tolist(),
              "data_independent": found.data_independent.tolist(),
              "ratio": (found.divergence / found.data_independent).tolist(),
              "evaluations": found.evaluations, "seconds": timer.seconds}

    cell, reused = store.get_or_compute(
        signature, compute, f"k{k}_sigma{sigma:g}",
        validate=lambda c, k=k, sigma=sigma: gnmax_worst_case.check_stored(
            c, k, FLAGS.num_classes, sigma, orders))
    status = "reused" if reused else f"{cell['seconds']:.0f} s"
    print(f"k={k} sigma={sigma:g}: done [{status}]", file=sys.stderr, flush=True)
    cells[f"k={k}, sigma={sigma:g}"] = cell
  return cells


def table(cells) -> str:
  lines = [f"{'cell':<18} {'order':>6} {'found':>10} {'alpha/s^2':>10} {'ratio':>6}  worst H "
           "(a vote moves from class 0 to class 1)"]
  for name, cell in cells.items():
    for i, order in enumerate(cell["orders"]):
      lines.append(f"{name:<18} {order:>6g} {cell['divergence'][i]:>10.4g} "
                   f"{cell['data_independent'][i]:>10.4g} {cell['ratio'][i]:>6.3f}  "
                   f"{cell['histogram'][i]}")
  return "\n".join(lines)


def plot(cells, path: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(5.5, 3.8))
  for name, cell in cells.items():
    ax.plot(cell["orders"], cell["ratio"], "o-", ms=3, label=name)
  ax.axhline(2 / math.pi, color="k", ls=":", label=r"$2/\pi$ (binary release, large $\sigma$)")
  ax.axhline(1.0, color="k", ls="--", lw=0.8, label=r"data-independent $\alpha/\sigma^2$")
  orders = next(iter(cells.values()))["orders"]
  ax.set_xscale("log")
  ax.set_xticks(orders, [f"{o:g}" for o in orders])
  ax.minorticks_off()
  ax.set(xlabel=r"order $\alpha$", ylim=(0, 1.05),
         ylabel=r"worst exact RDP found / $(\alpha/\sigma^2)$",
         title=f"GNMax, C={FLAGS.num_classes}: searched worst neighbouring pair")
  ax.grid(True, alpha=0.3)
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


@common.cli
def main(argv):
  del argv
  common.start_float64_experiment()
  settings, orders = settings_from_flags()
  common.claim_output_dir(FLAGS.output_dir)
  with common.Timer() as timer:
    cells = run_cells(settings, orders)
  config = {"num_teachers": [k for k, _ in settings], "sigmas": [s for _, s in settings],
            "num_classes": FLAGS.num_classes, "orders": list(orders),
            "num_random_starts": FLAGS.num_random_starts, "max_steps": FLAGS.max_steps,
            "seed": FLAGS.seed}
  path = common.write_results(FLAGS.output_dir, "gnmax_worst_case", config, {"cells": cells},
                              timer.seconds)
  if FLAGS.plot:
    plot(cells, os.path.join(FLAGS.output_dir, "worst_case.png"))
  print(table(cells))
  print(f"wrote {path}")


if __name__ == "__main__":
  common.run(main)
