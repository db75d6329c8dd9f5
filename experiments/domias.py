r"""DOMIAS (van Breugel et al., AISTATS 2023): Figs. 3-6 and the epsilon lower bounds of generators.

  python -m experiments.domias --study=members,epochs      # Fig. 3
  python -m experiments.domias --study=reference,synthetic # Fig. 4 (DOMIAS vs Eq. 1, BNAF vs KDE)
  python -m experiments.domias --study=minority            # Fig. 5 (heart failure)
  python -m experiments.domias --study=generators          # Fig. 6 (quality vs DOMIAS AUC)
  python -m experiments.domias --study=epsilon             # audited eps vs claimed eps

Each study is a grid of settings x ``--repetitions`` games of
:func:`dpaudit.audits.domias.run_domias` (game i of a setting uses ``fold_in(key(--seed), i)``)
(one generator fit, its synthetic data, every attack of ``--attacks``, the metrics and the epsilon
lower bounds). Every finished game is a cell of ``--output_dir``/cells, so an interrupted run
resumes where it stopped and games shared between studies (same settings) are computed once.

* ``members`` / ``epochs``: California Housing, TVAE, AUC of every attack against |D_mem|
  (``--members``, ``--tvae_epochs`` epochs) and against the TVAE epochs (``--epochs``,
  |D_mem| = ``--num_members``); |D_ref| = |D_syn| = 10,000 by default (App. A.3).
* ``reference`` / ``synthetic``: DOMIAS and Eq. 1 with KDE and BNAF against |D_ref|
  (``--reference_sizes``) and |D_syn| (``--synthetic_sizes``).
* ``minority``: the UCI heart failure records (``heart_failure``), each attack's AUC on the
  patients with ``--minority_column`` = 1 (default high_blood_pressure, 105 of 299) and on the
  rest.
* ``generators``: the Wasserstein distance of D_syn to a hold-out set (App. A.3's quality)
  against DOMIAS's AUC for TVAE, DP-TVAE, WGAN-GP, NFlow, ADS-GAN over ``--ads_gan_lambdas`` and
  additive noise over ``--noise_levels``.
* ``epsilon``: membership by independent coin flips, so that the one-run bound (Steinke et al.
  2023) of DOMIAS's scores is a valid lower bound on the epsilon of the generator's training;
  table of generator, claimed epsilon, audited epsilon (one-run, and per-record), AUC.

Writes ``results.json``, ``fig3.png`` / ``fig4.png`` / ``fig5.png`` / ``fig6.png`` for the studies
run, and prints a table per study.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import sys

from absl import flags
import numpy as np

from experiments import common

STUDIES = ("members", "epochs", "reference", "synthetic", "minority", "generators", "epsilon")
FLAGS = flags.FLAGS
flags.DEFINE_list("study", ["members"], f"Studies to run: {', '.join(STUDIES)}.")
flags.DEFINE_string("dataset", "california_housing",
                    "Data of every study but minority: california_housing or adult.")
flags.DEFINE_string("data_csv", None,
                    "Audit your own data instead of --dataset: a CSV file with a header row and "
                    "numeric columns (every study but minority).")
flags.DEFINE_integer("repetitions", 8, "Independent games per setting (the paper's 8 runs); "
                     "game i uses the key fold_in(key(--seed), i). Tables summarise them "
                     "(mean ± std; the epsilon table max / mean).")
flags.DEFINE_integer("seed", 0, "Base seed; game i uses fold_in(key(seed), i).")
flags.DEFINE_list("attacks", ["domias", "eq1", "logan_0", "logan_d1", "mc", "gan_leaks",
                              "gan_leaks_cal"], "Attacks of Figs. 3, 5 (Fig. 4: domias, eq1).")
flags.DEFINE_string("density", "kde", "Density estimator of DOMIAS / Eq. 1 outside Fig. 4: kde "
                    "or bnaf.")
flags.DEFINE_integer("num_members", 500, "|D_mem| (Fig. 3b, 4, 6, epsilon).")
flags.DEFINE_integer("num_reference", 10_000, "|D_ref|.")
flags.DEFINE_integer("num_synthetic", 10_000, "|D_syn|.")
flags.DEFINE_integer("num_holdout", 2_000, "Hold-out records for the quality metric (Fig. 6).")
flags.DEFINE_integer("tvae_epochs", 2000, "TVAE epochs (Fig. 3a, 4, 5, 6).")
flags.DEFINE_integer("reference_tvae_epochs", 0,
                     "Epochs of GAN-leaks CAL's reference TVAE on D_ref (0: as the target's); "
                     "fitted to 10,000 rows it dominates a game's time.")
flags.DEFINE_list("members", ["50", "100", "200", "500", "1000", "2000"], "Fig. 3a grid.")
flags.DEFINE_list("epochs", ["50", "200", "500", "1000", "2000", "3000"], "Fig. 3b grid.")
flags.DEFINE_list("reference_sizes", ["100", "500", "1000", "2000", "5000", "10000"],
                  "Fig. 4a grid.")
flags.DEFINE_list("synthetic_sizes", ["100", "500", "1000", "2000", "5000", "10000"],
                  "Fig. 4b grid.")
flags.DEFINE_string("minority_column", "high_blood_pressure",
                    "Fig. 5: binary heart-failure column whose value 1 defines the minority.")
flags.DEFINE_list("generators", ["tvae", "dp_tvae", "wgan_gp", "nflow"],
                  "Fig. 6 / epsilon: generators beside the ADS-GAN and additive-noise grids.")
flags.DEFINE_list("ads_gan_lambdas", ["0.2", "0.5", "0.7", "1.0", "1.1", "1.3", "1.5"],
                  "Fig. 6: ADS-GAN's lambda grid (App. A.3).")
flags.DEFINE_list("noise_levels", ["0.7", "0.9", "1.1", "1.3", "1.5", "1.7", "1.9", "2.3",
                                   "2.5", "2.9", "3.5", "3.9"],
                  "Fig. 6: additive noise grid (App. A.3), in units of each column's std.")
flags.DEFINE_integer("gan_iterations", 1000,
                     "Generator updates of WGAN-GP / ADS-GAN / LOGAN 0's GAN (5 critic steps "
                     "each, batch 256).")
flags.DEFINE_integer("flow_epochs", 50, "Maximum epochs of the BNAF and NFlow fits.")
flags.DEFINE_list("dp_epsilons", ["1", "4", "10"], "Epsilon of the DP-TVAE generators.")
flags.DEFINE_float("dp_delta", 1e-5, "delta of DP-TVAE's accountant and of the bounds.")
flags.DEFINE_float("dp_epochs", 300.0, "Expected epochs of DP-TVAE's DP-SGD.")
flags.DEFINE_float("significance", 0.05, "beta: epsilon lower bounds hold at 1 - beta.")
flags.DEFINE_string("output_dir", "out/domias", "Where results and figures go.")
flags.DEFINE_bool("resume", True, "Reuse finished games under output_dir/cells.")
flags.DEFINE_bool("plot", True, "Write the figures.")


def _ints(name: str) -> tuple[int, ...]:
  values = getattr(FLAGS, name)
  out = common.parse_ints(name, values)
  if not out or min(out) < 1:
    raise ValueError(f"--{name}={','.join(values)} must hold positive integers")
  return out


def _check_flags() -> None:
  from dpaudit import _validate
  from dpaudit.attacks import domias as attacks
  from dpaudit.audits import domias
  if not FLAGS.study:
    raise ValueError("--study must name at least one study")
  for study in FLAGS.study:
    _validate.check_choice("--study", study, STUDIES)
  for attack in FLAGS.attacks:
    _validate.check_choice("--attacks", attack, attacks.ATTACKS)
  _validate.check_choice("--density", FLAGS.density, domias.DENSITIES)
  _validate.check_choice("--dataset", FLAGS.dataset, ("california_housing", "adult"))
  for generator in FLAGS.generators:
    _validate.check_choice("--generators", generator, domias.generator_names())
  _validate.check_integer("--repetitions", FLAGS.repetitions, 1)


def check_flags() -> None:
  """Every flag that can be checked without the data, before anything is written: the choices,
  counts in their ranges (at most MAX_COUNT), finite rates, and every game's DomiasConfig.
  Whether the data hold enough records is checked in :func:`run`, before its first game."""
  from dpaudit.audits import domias
  _check_flags()
  for name, low in (("num_members", 1), ("num_reference", 1), ("num_synthetic", 1),
                    ("num_holdout", 0), ("tvae_epochs", 1), ("reference_tvae_epochs", 0),
                    ("gan_iterations", 1), ("flow_epochs", 1)):
    common.check_count(name, FLAGS[name].value, low)
  common.check_count("repetitions", FLAGS.repetitions)
  common.check_seed(FLAGS.seed)
  common.check_float("dp_delta", FLAGS.dp_delta, 0.0, 1.0, low_open=True, high_open=True)
  common.check_float("dp_epochs", FLAGS.dp_epochs, 0.0, low_open=True)
  common.check_significance(FLAGS.significance)
  for study in FLAGS.study:
    for _, kwargs, _ in study_cells(study):
      domias.DomiasConfig(**kwargs)


def _tvae(epochs: int) -> dict:
  return {"epochs": int(epochs)}


def _generator_settings() -> list[tuple[str, str, dict]]:
  """(label, generator, config kwargs) of Fig. 6 and the epsilon table."""
  out = []
  for name in FLAGS.generators:
    if name == "tvae":
      out.append(("tvae", "tvae", _tvae(FLAGS.tvae_epochs)))
    elif name == "dp_tvae":
      for eps in common.parse_floats("dp_epsilons", FLAGS.dp_epsilons):
        out.append((f"dp_tvae eps={eps:g}", "dp_tvae",
                    {"epsilon": eps, "delta": FLAGS.dp_delta, "epochs": FLAGS.dp_epochs}))
    elif name in ("wgan_gp", "ads_gan"):
      out.append((name, name, {"iterations": FLAGS.gan_iterations}))
    elif name == "nflow":
      out.append(("nflow", "nflow", {"max_epochs": FLAGS.flow_epochs}))
    else:
      out.append((name, name, {}))
  return out


def study_cells(study: str) -> list[tuple[str, dict, dict]]:
  """(setting label, DomiasConfig kwargs, extra) of one study; extra holds the x value."""
  base = dict(num_members=FLAGS.num_members, num_reference=FLAGS.num_reference,
              num_synthetic=FLAGS.num_synthetic, num_holdout=0, generator="tvae",
              generator_config=_tvae(FLAGS.tvae_epochs), density=FLAGS.density,
              attacks=tuple(FLAGS.attacks), significance=FLAGS.significance,
              flow_config={"max_epochs": FLAGS.flow_epochs},
              logan_config={"iterations": FLAGS.gan_iterations},
              reference_generator_config=(_tvae(FLAGS.reference_tvae_epochs)
                                          if FLAGS.reference_tvae_epochs else None))
  if study == "members":
    return [(f"|D_mem|={n}", {**base, "num_members": n}, {"x": n}) for n in _ints("members")]
  if study == "epochs":
    return [(f"epochs={e}", {**base, "generator_config": _tvae(e)}, {"x": e})
            for e in _ints("epochs")]
  if study in ("reference", "synthetic"):
    sizes = _ints("reference_sizes" if study == "reference" else "synthetic_sizes")
    key = "num_reference" if study == "reference" else "num_synthetic"
    return [(f"{key}={n} {d}", {**base, key: n, "density": d, "attacks": ("domias", "eq1")},
             {"x": n, "density": d}) for n in sizes for d in ("kde", "bnaf")]
  if study == "minority":
    # 299 records: 100 members, 100 non-members, the other 99 the reference.
    return [("heart_failure", {**base, "num_members": 100, "num_reference": 99,
                               "num_synthetic": 1000}, {"dataset": "heart_failure"})]
  base = {**base, "reference_generator_config": None}  # only DOMIAS runs below
  settings = [(label, {**base, "generator": g, "generator_config": c})
              for label, g, c in _generator_settings()]
  if study == "generators":
    settings += [(f"ads_gan lambda={lam:g}",
                  {**base, "generator": "ads_gan",
                   "generator_config": {"iterations": FLAGS.gan_iterations,
                                        "identifiability": lam}})
                 for lam in common.parse_floats("ads_gan_lambdas", FLAGS.ads_gan_lambdas)]
    settings += [(f"additive_noise {s:g}", {**base, "generator": "additive_noise",
                                            "generator_config": {"noise": s}})
                 for s in common.parse_floats("noise_levels", FLAGS.noise_levels)]
    return [(label, {**cfg, "num_holdout": FLAGS.num_holdout, "attacks": ("domias",)}, {})
            for label, cfg in settings]
  return [(label, {**cfg, "membership": "bernoulli", "attacks": ("domias",),
                   "delta": FLAGS.dp_delta}, {}) for label, cfg in settings]


def read_csv(path: str) -> tuple[np.ndarray, list[str]]:
  """A numeric CSV with a header row; a non-numeric value, a ragged row or a constant column
  is a ValueError naming it."""
  import csv
  try:
    with open(path, newline="", encoding="utf-8") as f:
      rows = [row for row in csv.reader(f) if row]
  except OSError as error:
    raise ValueError(f"--data_csv={path}: {error.strerror}") from None
  if len(rows) < 3:
    raise ValueError(f"--data_csv={path} needs a header row and at least 2 records")
  header = [h.strip() for h in rows[0]]
  values = np.empty((len(rows) - 1, len(header)))
  for i, row in enumerate(rows[1:]):
    if len(row) != len(header):
      raise ValueError(f"--data_csv={path}: line {i + 2} has {len(row)} fields, the header "
                       f"{len(header)}")
    try:
      values[i] = [float(v) for v in row]
    except ValueError:
      raise ValueError(f"--data_csv={path}: line {i + 2} holds a non-numeric value") from None
  if not np.all(np.isfinite(values)):
    raise ValueError(f"--data_csv={path} holds NaN or infinite values")
  constant = np.flatnonzero(values.min(0) == values.max(0))
  if constant.size:
    raise ValueError(f"--data_csv={path}: column {header[constant[0]]!r} is constant; every "
                     "column needs a spread (drop it)")
  return values, header


def load_data(name: str) -> tuple[np.ndarray, list[str]]:
  from dpaudit import data
  if name.startswith("csv:"):
    return read_csv(name[len("csv:"):])
  dataset = data.load(name)
  columns = {"heart_failure": list(data.HEART_FAILURE_COLUMNS),
             "california_housing": list(data.CALIFORNIA_FEATURES),
             "adult": [c.name for c in data.ADULT_COLUMNS]}[name]
  return np.asarray(dataset.features, np.float64), columns


def minority_groups(columns: list[str]):
  """Fig. 5's groups: ``--minority_column`` = 1 and the rest."""
  if FLAGS.minority_column not in columns:
    raise ValueError(f"--minority_column={FLAGS.minority_column!r} is not a heart_failure "
                     f"column; valid: {', '.join(columns)}")
  index = columns.index(FLAGS.minority_column)
  return {"minority": lambda x: x[:, index] == 1, "rest": lambda x: x[:, index] != 1}


def check_game_cell(cell, attacks) -> None:
  """Raises KeyError, TypeError or ValueError unless ``cell`` is a whole stored game
  (``DomiasResult.to_dict()`` and ``seconds``) that played ``attacks``: the fields with their
  types, every attack's metrics (AUC, accuracy, TPRs and precisions in [0, 1]; epsilon bounds
  numbers, not below 0), in every group too (a group may be empty: too few candidates)."""
  from dpaudit import results
  results.check_fields("DOMIAS game", cell, {
      "attacks": dict, "groups": dict, "quality": float, "claimed_epsilon": float,
      "num_members": int, "wall_time_s": dict, "seconds": float})
  for where, metrics in [("attacks", cell["attacks"])] + [
      (f"groups[{g!r}]", m) for g, m in cell["groups"].items()]:
    if set(metrics) != set(attacks) and not (where != "attacks" and metrics == {}):
      raise ValueError(f"the game's {where} hold {sorted(metrics)}, not {sorted(attacks)}")
    for name, m in metrics.items():
      results.check_fields(f"{where}[{name!r}]", m, {
          "auc": float, "accuracy": float, "tpr_at_fpr": dict, "precision_at_top": dict,
          "epsilon_per_record": float, "epsilon_one_run": float})
      rates = [m["auc"], m["accuracy"], *m["tpr_at_fpr"].values(),
               *m["precision_at_top"].values()]
      if not all(isinstance(r, (int, float)) and 0 <= r <= 1 for r in rates):
        raise ValueError(f"{where}[{name!r}] has a rate outside [0, 1]: {m}")
      if any(m[e] < 0 for e in ("epsilon_per_record", "epsilon_one_run")):
        raise ValueError(f"{where}[{name!r}] has a negative epsilon bound: {m}")
  if cell["num_members"] < 1 or cell["seconds"] < 0:
    raise ValueError(f"num_members={cell['num_members']} and seconds={cell['seconds']} must be "
                     "positive")


def run(progress):
  """Every game of every study. Returns (run config, {study: [cell, ...]})."""
  import jax
  from dpaudit import results
  from dpaudit.audits import domias
  _check_flags()
  store = results.CellStore(os.path.join(FLAGS.output_dir, "cells"), FLAGS.resume)
  base_key = common.make_key(FLAGS.seed)
  datasets = {}
  out = {}
  for study in FLAGS.study:
    cells = study_cells(study)
    dataset = ("heart_failure" if study == "minority" else
               f"csv:{FLAGS.data_csv}" if FLAGS.data_csv else FLAGS.dataset)
    if dataset not in datasets:
      datasets[dataset] = load_data(dataset)
    values, columns = datasets[dataset]
    fingerprint = hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()[:16]
    groups = minority_groups(columns) if study == "minority" else None
    rows = []
    for label, kwargs, extra in cells:
      config = domias.DomiasConfig(**kwargs)  # bad settings fail before any game
      if config.records_needed() > values.shape[0]:
        raise ValueError(f"{study} / {label}: the game needs {config.records_needed()} records "
                         f"(members + non-members + reference + hold-out) but {dataset} has "
                         f"{values.shape[0]}")
      for seed in range(FLAGS.repetitions):
        cell_config = {"dataset": dataset, "data_sha256": fingerprint,
                       "seed": FLAGS.seed, "game": seed,
                       "domias": dataclasses.asdict(config),
                       "groups": FLAGS.minority_column if groups else None}

        def compute(config=config, seed=seed, label=label):
          with common.Timer() as timer:
            result = domias.run_domias(jax.random.fold_in(base_key, seed), values, config,
                                       groups, lambda line: progress(f"  {line}"))
          return {**result.to_dict(), "seconds": timer.seconds}

        progress(f"{study} / {label} / game {seed}")
        # Labelled by generator, not study: a game two studies share is computed once.
        cell, reused = store.get_or_compute(
            cell_config, compute, f"{config.generator}-{seed}",
            validate=lambda c, attacks=config.attacks: check_game_cell(c, attacks))
        progress(f"{study} / {label} / game {seed}: "
                 + ("reused" if reused else f"{cell['seconds']:.1f} s"))
        rows.append({"setting": label, "game": seed, **extra, **cell})
    out[study] = rows
  run_config = {name: getattr(FLAGS, name) for name in (
      "study", "dataset", "data_csv", "repetitions", "seed", "attacks", "density", "num_members",
      "num_reference", "num_synthetic", "num_holdout", "tvae_epochs", "reference_tvae_epochs",
      "members", "epochs",
      "reference_sizes", "synthetic_sizes", "minority_column", "generators", "ads_gan_lambdas",
      "noise_levels", "gan_iterations", "flow_epochs", "dp_epsilons", "dp_delta", "dp_epochs",
      "significance")}
  return run_config, out


# ------------------------------------------------------------------------------ summaries


def summarise(rows: list[dict], metric: str = "auc", group: str | None = None
              ) -> dict[str, dict[str, tuple[float, float]]]:
  """setting -> attack -> (mean, std over games) of ``metric``."""
  table: dict[str, dict[str, list[float]]] = {}
  for row in rows:
    attacks = row["groups"].get(group, {}) if group else row["attacks"]
    for attack, metrics in attacks.items():
      table.setdefault(row["setting"], {}).setdefault(attack, []).append(metrics[metric])
  return {s: {a: (float(np.mean(v)), float(np.std(v))) for a, v in by.items()}
          for s, by in table.items()}


def _fmt(value: float) -> str:
  return "inf" if value == math.inf else ("nan" if math.isnan(value) else f"{value:.3f}")


def tables(studies: dict[str, list[dict]]) -> str:
  lines = []
  for study, rows in studies.items():
    if study == "epsilon":
      lines += ["", "epsilon: generator, claimed eps, audited eps (one-run, max / mean over "
                "games), per-record eps (mean), DOMIAS AUC (mean)"]
      by: dict[str, list[dict]] = {}
      for row in rows:
        by.setdefault(row["setting"], []).append(row)
      for setting, cells in by.items():
        one_run = [c["attacks"]["domias"]["epsilon_one_run"] for c in cells]
        per_record = [c["attacks"]["domias"]["epsilon_per_record"] for c in cells]
        auc = [c["attacks"]["domias"]["auc"] for c in cells]
        lines.append(f"  {setting:<22} {_fmt(cells[0]['claimed_epsilon']):>7}  "
                     f"{max(one_run):.3f} / {np.mean(one_run):.3f}  "
                     f"{np.mean(per_record):.3f}  {np.mean(auc):.3f}")
      continue
    if study == "generators":
      lines += ["", "generators: setting, Wasserstein distance to hold-out (mean), DOMIAS AUC"]
      auc = summarise(rows)
      quality: dict[str, list[float]] = {}
      for row in rows:
        quality.setdefault(row["setting"], []).append(row["quality"])
      for setting, by_attack in auc.items():
        mean, std = by_attack["domias"]
        lines.append(f"  {setting:<24} {np.mean(quality[setting]):7.3f}   {mean:.3f} ± {std:.3f}")
      continue
    groups = (None,) if study != "minority" else ("minority", "rest")
    for group in groups:
      summary = summarise(rows, group=group)
      attacks = sorted({a for by in summary.values() for a in by})
      title = f"{study}" + (f" ({group})" if group else "") + ": AUC mean ± std over games"
      lines += ["", title, "  setting".ljust(26) + "".join(f"{a:>18}" for a in attacks)]
      for setting, by in summary.items():
        lines.append(f"  {setting:<24}" + "".join(
            f"{by[a][0]:>11.3f} ± {by[a][1]:.3f}" if a in by else " " * 18 for a in attacks))
  return "\n".join(lines).lstrip("\n")


def _curves(ax, rows, label_of, xlabel, title, log=True):
  by: dict[str, dict[float, list[float]]] = {}
  for row in rows:
    for attack, metrics in row["attacks"].items():
      by.setdefault(label_of(row, attack), {}).setdefault(row["x"], []).append(metrics["auc"])
  for name, points in sorted(by.items()):
    xs = sorted(points)
    mean = np.array([np.mean(points[x]) for x in xs])
    std = np.array([np.std(points[x]) for x in xs])
    line, = ax.plot(xs, mean, marker="o", ms=3, label=name)
    ax.fill_between(xs, mean - std, mean + std, color=line.get_color(), alpha=0.15)
  ax.axhline(0.5, color="k", lw=0.6, ls=":")
  ax.set(xlabel=xlabel, ylabel="AUC", title=title, xscale="log" if log else "linear")
  ax.legend(fontsize=6)


def plot(studies: dict[str, list[dict]], output_dir: str) -> list[str]:
  """fig3.png (members, epochs), fig4.png (reference, synthetic), fig5.png, fig6.png."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  written = []
  for name, pair in (("fig3", ("members", "epochs")), ("fig4", ("reference", "synthetic"))):
    present = [s for s in pair if s in studies]
    if not present:
      continue
    fig, axes = plt.subplots(1, len(present), figsize=(5.5 * len(present), 4), squeeze=False)
    for ax, study in zip(axes[0], present):
      label_of = ((lambda r, a: a) if name == "fig3"
                  else (lambda r, a: f"{'DOMIAS' if a == 'domias' else 'Eq. 1'} ({r['density']})"))
      xlabel = {"members": "|D_mem|", "epochs": "TVAE epochs", "reference": "|D_ref|",
                "synthetic": "|D_syn|"}[study]
      _curves(ax, studies[study], label_of, xlabel, study)
    fig.tight_layout()
    path = os.path.join(output_dir, f"{name}.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)
  if "minority" in studies:
    fig, ax = plt.subplots(figsize=(7, 4))
    groups = ("minority", "rest")
    summaries = [summarise(studies["minority"], group=g) for g in groups]
    attacks = sorted({a for s in summaries for by in s.values() for a in by})
    width = 0.4
    for i, (group, summary) in enumerate(zip(groups, summaries)):
      by = next(iter(summary.values()), {})
      ax.bar(np.arange(len(attacks)) + (i - 0.5) * width,
             [by.get(a, (np.nan, 0))[0] for a in attacks], width,
             yerr=[by.get(a, (0, 0))[1] for a in attacks], label=group)
    ax.axhline(0.5, color="k", lw=0.6, ls=":")
    ax.set_xticks(np.arange(len(attacks)), attacks, rotation=30, fontsize=7)
    ax.set(ylabel="AUC", title=f"heart failure: {FLAGS.minority_column} = 1 vs rest")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(output_dir, "fig5.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)
  if "generators" in studies:
    fig, ax = plt.subplots(figsize=(6, 4.5))
    auc = summarise(studies["generators"])
    quality: dict[str, list[float]] = {}
    for row in studies["generators"]:
      quality.setdefault(row["setting"], []).append(row["quality"])
    families: dict[str, list[tuple[float, float]]] = {}
    for setting, by in auc.items():
      family = setting.split(" ")[0]
      families.setdefault(family, []).append((np.mean(quality[setting]), by["domias"][0]))
    for family, points in families.items():
      points = sorted(points)
      ax.plot([p[0] for p in points], [p[1] for p in points],
              marker="o", ms=4, ls="-" if len(points) > 1 else "", label=family)
    ax.set(xlabel="Wasserstein distance to hold-out (lower: better quality)",
           ylabel="DOMIAS AUC", title="Fig. 6: quality vs vulnerability")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(output_dir, "fig6.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)
  return written


@common.cli
def main(argv):
  del argv
  common.start_float64_experiment()
  check_flags()
  common.claim_output_dir(FLAGS.output_dir)
  progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
  with common.Timer() as timer, common.quiet_accountant():
    config, studies = run(progress)
  path = common.write_results(FLAGS.output_dir, "domias", config, {"studies": studies},
                              timer.seconds)
  if FLAGS.plot:
    plot(studies, FLAGS.output_dir)
  print(tables(studies))
  print(f"wrote {path} in {timer.seconds:.0f} s", file=sys.stderr)


if __name__ == "__main__":
  common.run(main)
