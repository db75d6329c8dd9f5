r"""Auditing DP-SGD: many-run, one-run, UniAud and UniAud++ games on offline real data.

  python -m experiments.dpsgd_audit --output_dir=out/dpsgd_audit
  python -m experiments.dpsgd_audit --game=uniaud --canary=gaussian --epsilons=1,4,inf
  python -m experiments.dpsgd_audit --game=many_run --canary=dirac --num_runs=500

Runs the games of :mod:`dpaudit.audits.dpsgd` over a grid: every audit of ``--audits`` (pairs
``game:canary``; default the single ``--game``/``--canary``) x every target epsilon of
``--epsilons`` x every ``--num_canaries`` (O(1) games) x every ``--tag_weights`` (UniAud++).
Each cell reports the epsilon lower bound (1 - ``--significance`` confidence), the ceiling
:math:`\epsilon_O` for its number of observations, the accountant's epsilon and the test
accuracy, and is saved in ``--output_dir/cells`` as soon as it finishes; a rerun reuses
finished cells (``--noresume`` recomputes them). ``results.json`` collects the cells and
``audit.png`` plots the lower bounds against the target epsilon and against test accuracy
(the utility/auditing trade-off of UniAud's Fig. 9).

Data: ``--dataset`` is split (stratified, ``--seed``) into a test set (``--test_fraction``)
and the rest, which is split in half into the training set D and a pool of held-out real
examples for in-distribution and mislabelled canaries (``--pool_fraction``); features are
standardised with D's statistics. UniAud trains on its synthetic canaries alone unless
``--include_data``; UniAud++ stamps its triggers on m examples of D.

The UniAud table of the README (the shape of Fig. 3 / Table IV of Liu & Xiong):

  python -m experiments.dpsgd_audit --dataset=mnist_subset --epsilons=1,2,4,8,inf \
    --num_canaries=2000,10000 --epochs=100 --learning_rate=0.5 \
    --audits=one_run:in_distribution,one_run:mislabelled,uniaud:gaussian,uniaud:orthogonal \
    --output_dir=out/dpsgd_audit_table
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from typing import Any

from absl import app
from absl import flags

from dpaudit import results
from experiments import common

FLAGS = flags.FLAGS
flags.DEFINE_enum("game", "one_run", ["many_run", "one_run", "uniaud", "uniaud_plus"],
                  "Audit game (used when --audits is empty).")
flags.DEFINE_enum("canary", "mislabelled", ["in_distribution", "mislabelled", "gaussian",
                                            "orthogonal", "dirac", "trigger"],
                  "Canary type (used when --audits is empty); uniaud: gaussian|orthogonal, "
                  "uniaud_plus: trigger, dirac: white-box gradient canary.")
flags.DEFINE_list("audits", [], "game:canary pairs to run, e.g. "
                  "one_run:mislabelled,uniaud:gaussian (overrides --game/--canary).")
flags.DEFINE_enum("dataset", "digits", ["digits", "mnist_subset", "breast_cancer", "wine",
                                        "mnist", "fashion_mnist", "cifar10"],
                  "Dataset (mnist, fashion_mnist, cifar10 must be prepared in --data_dir).")
flags.DEFINE_list("hidden_sizes", ["256"], "Hidden widths of the MLP (empty: logistic "
                  "regression).")
flags.DEFINE_list("epsilons", ["8"], "Target epsilons (> 0; inf: no noise, clipping kept).")
flags.DEFINE_list("num_canaries", ["500"], "m, canaries of the O(1) games.")
flags.DEFINE_integer("num_runs", 200, "T, runs per side of many_run (2T runs in all).")
flags.DEFINE_float("delta", 1e-5, "delta of the accountant and of the lower bounds.")
flags.DEFINE_float("significance", 0.05, "beta: the bounds hold with probability 1 - beta.")
flags.DEFINE_float("epochs", 30.0, "Expected passes over the training set.")
flags.DEFINE_integer("batch_size", 128, "Expected Poisson batch size.")
flags.DEFINE_float("learning_rate", 0.5, "SGD learning rate.")
flags.DEFINE_enum("optimizer", "sgd", ["sgd", "momentum", "adam"], "Optimizer.")
flags.DEFINE_float("l2_clip_norm", 1.0, "Per-example clipping norm C.")
flags.DEFINE_integer("physical_batch_size", 256, "Examples per microbatch (memory, speed).")
flags.DEFINE_bool("include_data", False, "uniaud: also train on the real training set.")
flags.DEFINE_float("sigma0", 0.1, "Feature scale of Gaussian synthetic canaries (Alg. 1).")
flags.DEFINE_integer("num_tags", 100, "UniAud++ tag space size C_e.")
flags.DEFINE_integer("num_tag_bits", 1, "UniAud++ tags per canary H (multi-bit, Sec. VI-B).")
flags.DEFINE_list("tag_weights", ["1"], "UniAud++ lambda of Eq. (12).")
flags.DEFINE_integer("patch_size", 3, "UniAud++ trigger patch side (pixels).")
flags.DEFINE_enum("correction", "bonferroni", ["bonferroni", "none"],
                  "O(1) games: bonferroni over the guess grid (valid) or none (the papers' "
                  "best-r reporting, optimistic).")
flags.DEFINE_enum("method", "split", ["split", "bonferroni"],
                  "many_run threshold selection: split halves or bonferroni over thresholds.")
flags.DEFINE_integer("chunk_size", 0, "many_run: runs per vmapped call (0: all at once).")
flags.DEFINE_float("test_fraction", 0.2, "Test share of the dataset.")
flags.DEFINE_float("pool_fraction", 0.5, "Share of the non-test data held out as canary pool.")
flags.DEFINE_integer("seed", 0, "Seed of the split and of every game's key.")
flags.DEFINE_enum("prng_impl", "threefry2x32", list(common.PRNG_IMPLS), "PRNG of the games.")
flags.DEFINE_string("data_dir", None, "tfds data directory (default: $DPAUDIT_DATA_DIR or "
                    "~/.cache/dpaudit/tensorflow_datasets).")
flags.DEFINE_string("output_dir", "out/dpsgd_audit", "Where results.json, audit.png, cells go.")
flags.DEFINE_bool("resume", True, "Reuse finished cells in output_dir/cells.")
flags.DEFINE_bool("plot", True, "Write audit.png.")



def _ints(name: str, values) -> tuple[int, ...]:
  try:
    return tuple(int(v) for v in values)
  except ValueError:
    raise ValueError(f"--{name}={','.join(values)} must be a comma-separated list of integers"
                     ) from None


def parse_audits(audits, game: str, canary: str) -> tuple[tuple[str, str], ...]:
  """``game:canary`` strings to pairs (validated by the config later)."""
  if not audits:
    return ((game, canary),)
  pairs = []
  for item in audits:
    parts = item.split(":")
    if len(parts) != 2:
      raise ValueError(f"--audits entry {item!r} must be game:canary, e.g. uniaud:gaussian")
    pairs.append((parts[0], parts[1]))
  return tuple(pairs)


def prepare_data(dataset: str, test_fraction: float, pool_fraction: float, seed: int,
                 data_dir: str | None):
  """Test split, then D and the canary pool; standardised with D's statistics."""
  from dpaudit import data
  from dpaudit.audits import dpsgd as audit
  from dpaudit import _validate
  _validate.check_range("test_fraction", test_fraction, 0.0, 1.0, low_open=True, high_open=True)
  _validate.check_range("pool_fraction", pool_fraction, 0.0, 1.0, low_open=True,
                        high_open=True)
  if dataset in data.LOCAL_DATASETS:
    rest, test = data.train_test_split(data.load(dataset, "train", data_dir), test_fraction,
                                       seed, stratify=True)
  else:
    rest, test = data.load(dataset, "train", data_dir), data.load(dataset, "test", data_dir)
  train, pool = data.train_test_split(rest, pool_fraction, seed + 1, stratify=True)
  statistics = data.fit_standardization(train)
  train, pool, test = (statistics.apply(s) for s in (train, pool, test))
  return audit.AuditData(train.features, train.labels, test.features, test.labels,
                         pool.features, pool.labels, train.num_classes)


def cell_configs(base: dict[str, Any], pairs, epsilons, num_canaries, tag_weights):
  """The grid: one DPSGDAuditConfig per cell (m only varies for O(1) games, lambda only for
  UniAud++)."""
  from dpaudit.audits import dpsgd as audit
  configs = []
  for game, canary in pairs:
    ms = (num_canaries[0],) if game == "many_run" else num_canaries
    weights = tag_weights if game == "uniaud_plus" else (tag_weights[0],)
    for eps in epsilons:
      for m in ms:
        for weight in weights:
          configs.append(audit.DPSGDAuditConfig(game=game, canary=canary, epsilon=eps,
                                                num_canaries=m, tag_weight=weight, **base))
  return configs


def cell_label(config) -> str:
  return f"{config.game}_{config.canary}_eps{config.epsilon:g}_m{config.num_canaries}"


def run_cell(config, data, spec: dict[str, Any], store) -> dict:
  """One game, reused from ``store`` when it finished before; a finished game (or why it was
  skipped) is stored as soon as it ends."""
  from dpaudit.audits import dpsgd as audit
  key = {**dataclasses.asdict(config), **spec}

  def compute():
    try:
      with common.quiet_accountant():
        result = audit.run(common.make_key(spec["seed"], spec["prng_impl"]), config,
                           data).to_dict()
      return {"status": "done", "config": dataclasses.asdict(config), "result": result}
    except ValueError as e:  # e.g. more canaries than the real pool holds: skip this cell only
      return {"status": "skipped", "reason": str(e), "config": dataclasses.asdict(config)}

  cell, reused = store.get_or_compute(key, compute, cell_label(config))
  return {**cell, "reused": reused}


def _num(value, width: int = 6, digits: int = 2) -> str:
  """Formats a result number (infinite ones as inf)."""
  return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}s}"


def table(cells) -> str:
  lines = [f"{'audit':28s} {'eps':>5s} {'m':>6s} {'lambda':>6s} {'eps_L':>6s} {'eps_O':>6s} "
           f"{'eps_theory':>10s} {'test_acc':>8s} {'sigma':>6s} {'steps':>6s}"]
  for cell in cells:
    c = cell["config"]
    head = (f"{c['game'] + ':' + c['canary']:28s} {c['epsilon']:5g} {c['num_canaries']:6d} "
            f"{c['tag_weight']:6g}")
    if cell["status"] != "done":
      lines.append(f"{head}  skipped: {cell['reason']}")
      continue
    r = cell["result"]
    lines.append(f"{head} {_num(_eps_l(r))} {_num(r['epsilon_ceiling'])} "
                 f"{_num(r['epsilon_theory'], 10)} {_num(r['test_accuracy'], 8, 3)} "
                 f"{_num(r['noise_multiplier'])} {r['num_steps']:6d}")
  return "\n".join(lines)


def _eps_l(result: dict):
  """The cell's bound: ``epsilon_lower_bound``, or the optimistic figure of correction=none."""
  return result.get("epsilon_lower_bound", result.get("epsilon_optimistic"))


def plot(cells, path: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  done = [c for c in cells if c["status"] == "done"]
  fig, (ax_eps, ax_acc) = plt.subplots(1, 2, figsize=(12, 4.5))
  groups: dict[tuple, list] = {}
  for cell in done:
    c = cell["config"]
    key = (c["game"], c["canary"], c["num_canaries"] if c["game"] != "many_run" else None)
    groups.setdefault(key, []).append(cell)
  finite = sorted({c["config"]["epsilon"] for c in done if math.isfinite(c["config"]["epsilon"])})
  inf_x = (max(finite) * 2 if finite else 1.0)
  for i, (key, members) in enumerate(sorted(groups.items(), key=lambda kv: str(kv[0]))):
    members.sort(key=lambda c: c["config"]["epsilon"])
    xs = [c["config"]["epsilon"] if math.isfinite(c["config"]["epsilon"]) else inf_x
          for c in members]
    label = f"{key[0]}:{key[1]}" + (f", m={key[2]}" if key[2] else "")
    ax_eps.plot(xs, [_eps_l(c["result"]) for c in members], "o-", color=f"C{i}",
                label=label)
    ax_eps.plot(xs, [c["result"]["epsilon_ceiling"] for c in members], ":", color=f"C{i}")
    ax_acc.plot([c["result"]["test_accuracy"] for c in members],
                [_eps_l(c["result"]) for c in members], "o", color=f"C{i}",
                label=label)
  if finite:
    ax_eps.plot(finite, finite, "k--", label="theory (target eps)")
  ax_eps.set(xlabel="target epsilon (rightmost: inf)", ylabel="epsilon lower bound",
             title="Audit bounds (dotted: ceiling eps_O)")
  ax_acc.set(xlabel="test accuracy", ylabel="epsilon lower bound",
             title="Utility / auditing trade-off")
  for ax in (ax_eps, ax_acc):
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


@common.cli
def main(argv):
  del argv
  common.enable_compilation_cache()
  common.quiet_logging()
  from dpaudit import _validate
  pairs = parse_audits(FLAGS.audits, FLAGS.game, FLAGS.canary)
  epsilons = common.parse_floats("epsilons", FLAGS.epsilons)
  num_canaries = _ints("num_canaries", FLAGS.num_canaries)
  tag_weights = common.parse_floats("tag_weights", FLAGS.tag_weights)
  hidden = _ints("hidden_sizes", FLAGS.hidden_sizes)
  for name, values in (("epsilons", epsilons), ("num_canaries", num_canaries),
                       ("tag_weights", tag_weights)):
    _validate.check_nonempty(name, values)
  if not 0 <= FLAGS.seed < 2**63:
    raise ValueError(f"--seed={FLAGS.seed} is outside the valid range [0, 2^63)")
  base = dict(num_runs=FLAGS.num_runs, delta=FLAGS.delta, significance=FLAGS.significance,
              epochs=FLAGS.epochs, batch_size=FLAGS.batch_size,
              learning_rate=FLAGS.learning_rate, optimizer=FLAGS.optimizer,
              l2_clip_norm=FLAGS.l2_clip_norm, physical_batch_size=FLAGS.physical_batch_size,
              hidden_sizes=hidden, include_data=FLAGS.include_data, sigma0=FLAGS.sigma0,
              num_tags=FLAGS.num_tags, num_tag_bits=FLAGS.num_tag_bits,
              patch_size=FLAGS.patch_size, correction=FLAGS.correction, method=FLAGS.method,
              chunk_size=FLAGS.chunk_size)
  configs = cell_configs(base, pairs, epsilons, num_canaries, tag_weights)
  spec = dict(dataset=FLAGS.dataset, test_fraction=FLAGS.test_fraction,
              pool_fraction=FLAGS.pool_fraction, seed=FLAGS.seed, prng_impl=FLAGS.prng_impl)
  with common.Timer() as timer:
    data = prepare_data(FLAGS.dataset, FLAGS.test_fraction, FLAGS.pool_fraction, FLAGS.seed,
                        FLAGS.data_dir)
    store = results.CellStore(os.path.join(FLAGS.output_dir, "cells"), FLAGS.resume)
    cells = []
    for i, config in enumerate(configs):
      cell = run_cell(config, data, spec, store)
      cells.append(cell)
      status = ("reused" if cell["reused"] else cell["status"])
      summary = ""
      if cell["status"] == "done":
        r = cell["result"]
        summary = (f"eps_L{'*' if r.get('optimistic') else ''}={_num(_eps_l(r), 0, 3)} "
                   f"eps_O={_num(r['epsilon_ceiling'], 0, 3)} "
                   f"eps={_num(r['epsilon_theory'], 0, 3)} "
                   f"acc={_num(r['test_accuracy'], 0, 3)} ({r['wall_time_s']:.1f} s)")
      print(f"[{i + 1}/{len(configs)}] {config.game}:{config.canary} eps={config.epsilon:g} "
            f"m={config.num_canaries} {status} {summary}", file=sys.stderr, flush=True)
      for line in (cell.get("result") or {}).get("warnings", []):
        print(f"  warning: {line}", file=sys.stderr, flush=True)
  data_info = {"num_train": int(data.train_features.shape[0]),
               "num_pool": int(data.pool_features.shape[0]),
               "num_test": int(data.test_features.shape[0]),
               "example_shape": list(data.train_features.shape[1:])}
  path = common.write_results(FLAGS.output_dir, "dpsgd_audit", {**base, **spec},
                              {"cells": cells, "data": data_info}, timer.seconds)
  if FLAGS.plot:
    plot(cells, os.path.join(FLAGS.output_dir, "audit.png"))
  print(table(cells))
  if FLAGS.correction == "none":
    print("correction=none: the O(1) games' eps_L are optimistic (best of the guess grid, each "
          "at the full significance), not valid lower bounds", file=sys.stderr)
  print(f"wrote {path} in {timer.seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
  app.run(main)
