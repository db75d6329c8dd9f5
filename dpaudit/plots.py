"""Figures: the one library module that draws (every other ``dpaudit`` module computes).

Each function takes a finished result (or plain arrays) and a path and writes one PNG;
matplotlib is imported lazily inside the functions, with the non-interactive ``Agg`` backend, so
importing :mod:`dpaudit.plots` (or any other ``dpaudit`` module) never needs matplotlib.
The experiments in ``experiments/`` call these after writing their JSON results.

* :func:`dpsgd_grid`: the DP-SGD audit grid (bounds against target epsilon and test accuracy).
* :func:`tightness`: the tightness report (each audit's lower bound next to its reference).
* :func:`lm_at_risk`, :func:`lm_secrecy`: Figs. 5 and 6 of Stock et al. (LM reconstruction).
* :func:`save_image_grid`: images tiled by :func:`dpaudit.models.vae.image_grid` as a PNG.
* :func:`panoramia_precision_recall`, :func:`panoramia_samples`: PANORAMIA's Fig. 3 and the
  generator's samples.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # only for annotations: the figures import their audits lazily
  from dpaudit.audits.dpsgd_grid import DPSGDGridResult
  from dpaudit.audits.lm_reconstruction import LMReconstructionResult
  from dpaudit.tightness import TightnessResult


def _pyplot():
  """matplotlib.pyplot with the file-only ``Agg`` backend (no display needed)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def _save(fig, path, dpi: int = 120) -> None:
  """Lays out ``fig``, writes it as a PNG at ``path`` and closes it."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig.tight_layout()
  fig.savefig(os.fspath(path), dpi=dpi)
  plt.close(fig)


def dpsgd_grid(result: DPSGDGridResult, path: str) -> None:
  """Writes a PNG: the lower bounds (solid) and ceilings (dotted) of the finished grid points
  against the target epsilon (``inf`` drawn right of the largest finite one), and the bounds
  against test accuracy (the utility/auditing trade-off of Fig. 9 of UniAud). With several
  repetitions each point is the median, its bars the min and max over them."""
  from dpaudit.audits import dpsgd_grid as grid  # pylint: disable=g-import-not-at-top
  plt = _pyplot()

  done = [p for p in grid.summarise(result.cells) if p["status"] == "done"]
  repeated = any(p["spread"]["test_accuracy"]["n"] > 1 for p in done)
  fig, (ax_eps, ax_acc) = plt.subplots(1, 2, figsize=(12, 4.5))
  groups: dict[tuple, list] = {}
  for point in done:
    c = point["config"]
    key = (c["game"], c["canary"], c["num_canaries"] if c["game"] != "many_run" else None)
    groups.setdefault(key, []).append(point)
  finite = sorted({p["config"]["epsilon"] for p in done if math.isfinite(p["config"]["epsilon"])})
  inf_x = (max(finite) * 2 if finite else 1.0)

  def median_and_bar(summaries):
    medians = [s["median"] for s in summaries]
    bars = [[s["median"] - s["min"] for s in summaries],
            [s["max"] - s["median"] for s in summaries]]
    return medians, (np.nan_to_num(np.asarray(bars, float), nan=0.0, posinf=0.0)
                     if repeated else None)

  for i, (key, members) in enumerate(sorted(groups.items(), key=lambda kv: str(kv[0]))):
    members.sort(key=lambda p: p["config"]["epsilon"])
    xs = [p["config"]["epsilon"] if math.isfinite(p["config"]["epsilon"]) else inf_x
          for p in members]
    label = f"{key[0]}:{key[1]}" + (f", m={key[2]}" if key[2] else "")
    bounds, bound_bars = median_and_bar([grid.reported_epsilon(p["spread"]) for p in members])
    accuracies, accuracy_bars = median_and_bar([p["spread"]["test_accuracy"] for p in members])
    ax_eps.errorbar(xs, bounds, yerr=bound_bars, fmt="o-", color=f"C{i}", capsize=3,
                    label=label)
    ax_eps.plot(xs, [p["spread"]["epsilon_ceiling"]["median"] for p in members], ":",
                color=f"C{i}")
    ax_acc.errorbar(accuracies, bounds, xerr=accuracy_bars, yerr=bound_bars, fmt="o",
                    color=f"C{i}", capsize=3, label=label)
  if finite:
    ax_eps.plot(finite, finite, "k--", label="theory (target eps)")
  over = f", median [min, max] of {result.config.repetitions} seeds" if repeated else ""
  ax_eps.set(xlabel="target epsilon (rightmost: inf)", ylabel="epsilon lower bound",
             title=f"Audit bounds (dotted: ceiling eps_O){over}")
  ax_acc.set(xlabel="test accuracy", ylabel="epsilon lower bound",
             title=f"Utility / auditing trade-off{over}")
  for ax in (ax_eps, ax_acc):
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
  _save(fig, path)


def tightness(result: TightnessResult, path: str) -> None:
  """Horizontal bars: each audit's lower bound next to its reference (and ceiling, dashed)."""
  plt = _pyplot()

  rows = result.rows
  fig, axes = plt.subplots(1, 2, figsize=(12, 0.55 * len(rows) + 1.6),
                           gridspec_kw={"width_ratios": [3, 2]})
  ax, ax_ratio = axes
  y = np.arange(len(rows))[::-1]
  ax.barh(y + 0.2, [max(r.lower_bound, 0.0) for r in rows], height=0.4, color="C0",
          label="lower bound (1 - significance)")
  ax.barh(y - 0.2, [r.reference for r in rows], height=0.4, color="C1",
          label="exact / theory upper bound")
  for yi, r in zip(y, rows):
    if math.isfinite(r.ceiling):
      ax.plot([r.ceiling, r.ceiling], [yi - 0.4, yi + 0.4], "k--", lw=1)
  ax.plot([], [], "k--", lw=1, label="ceiling for the observations")
  ax.set_yticks(y, [f"{r.audit}\n[{r.quantity}]" for r in rows], fontsize=8)
  ax.set_xlabel("bound (each row in its own quantity)")
  ax.legend(fontsize=8, loc="upper right")
  ax.grid(True, axis="x", alpha=0.3)
  ax_ratio.barh(y, [0.0 if math.isnan(r.ratio) else r.ratio for r in rows], color="C2")
  ax_ratio.set_yticks(y, [""] * len(rows))
  ax_ratio.set_xlim(0, 1)
  ax_ratio.set_xlabel("tightness = lower / reference")
  ax_ratio.grid(True, axis="x", alpha=0.3)
  fig.suptitle("How tight is each audit?")
  _save(fig, path)


def lm_at_risk(result: LMReconstructionResult, path: str) -> None:
  """Fig. 5 of Stock et al. as a PNG at ``path``: histograms of the training and test lines'
  calibrated loss (left) and calibrated loss against :math:`\\log_{10}` probability of being
  generated for training, test and generated lines (right)."""
  plt = _pyplot()
  scores = result.at_risk_analysis.scores
  threshold = result.at_risk_analysis.memorised_threshold
  fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
  both = np.concatenate([scores["train"].calibrated_loss, scores["test"].calibrated_loss])
  lo, hi = np.quantile(both, [0.002, 0.998])  # memorised canary copies would squash the rest
  for name, color in (("train", "C0"), ("test", "C1")):
    ax.hist(np.clip(scores[name].calibrated_loss, lo, hi), bins=60, range=(lo, hi), alpha=0.5,
            color=color, label=name, density=True)
  ax.axvline(threshold, color="k", ls=":", label="memorised below")
  ax.set_xlabel("calibrated loss (nats; clipped to the 0.2-99.8% range)")
  ax.set_ylabel("density")
  ax.legend()
  for name, color in (("train", "C0"), ("test", "C1"), ("generated", "C2")):
    s = scores[name]
    finite = np.isfinite(s.log_lambda)
    ax2.scatter(s.log_lambda[finite] / np.log(10), s.calibrated_loss[finite], s=3,
                alpha=0.4, color=color, label=f"{name} ({finite.mean():.0%} possible)")
  ax2.axhline(threshold, color="k", ls=":")
  ax2.set_xlabel(r"$\log_{10}$ probability of being generated")
  ax2.set_ylabel("calibrated loss (nats)")
  ax2.legend(fontsize=8)
  _save(fig, path)


def lm_secrecy(result: LMReconstructionResult, path: str) -> None:
  """Fig. 6 of Stock et al. as a PNG at ``path``: the canary's secrecy, the RDP bound
  :math:`b_0 - L_2(b_0)`, the prior minus the exposure and the prior, against :math:`\\sigma`."""
  plt = _pyplot()
  points = result.secrecy
  fig, ax = plt.subplots(figsize=(6, 4))
  sig = [p.noise_multiplier for p in points]
  ax.plot(sig, [p.secrecy_bits for p in points], "o-", color="C3",
          label=r"canary secrecy $\log_2(1/p_1)$")
  ax.plot(sig, [p.secrecy_bound_bits for p in points], "s--", color="C0",
          label=r"RDP bound $b_0 - L_2(b_0)$")
  ax.plot(sig, [p.exposure_max_bits - p.exposure_extrapolated_bits for p in points],
          "^:", color="C2", label="prior minus exposure (extrapolated)")
  ax.axhline(points[0].prior_bits, color="gray", ls=":", label=r"prior $b_0$")
  ax.set_xlabel(r"noise multiplier $\sigma$ (0: non-private)")
  ax.set_ylabel("bits")
  ax.legend(fontsize=8)
  _save(fig, path)


def save_image_grid(path: str | os.PathLike, images: Any, columns: int) -> None:
  """Writes :func:`dpaudit.models.vae.image_grid` ``(images, columns)`` to ``path`` as a PNG,
  one file pixel per image pixel; grayscale grids are stored with equal red, green and blue
  values (exactly the grid's, which a colour map would round differently)."""
  import matplotlib.image  # pylint: disable=g-import-not-at-top

  from dpaudit.models import vae  # pylint: disable=g-import-not-at-top
  grid = vae.image_grid(images, columns)
  if grid.ndim == 2:
    grid = np.repeat(grid[..., None], 3, axis=-1)
  matplotlib.image.imsave(os.fspath(path), grid, format="png")


def panoramia_precision_recall(cells: Any, path: str | os.PathLike) -> None:
  """PANORAMIA's Fig. 3 (Kazmi et al.): precision (left) and the per-threshold lower bound
  (right) against recall, of the strongest baseline and of the MIA of each target; ``cells``
  maps target names to :meth:`dpaudit.audits.panoramia.PanoramiaResult.to_dict` dicts (the
  cells of :class:`dpaudit.audits.panoramia_study.StudyResult`)."""
  plt = _pyplot()
  fig, axes = plt.subplots(1, 2, figsize=(11, 4))
  first = next(iter(cells.values()))
  base = first["baseline_curve"]
  axes[0].plot(base["recall"], base["precision"], "k--", label="baseline b")
  axes[1].plot(base["recall"], base["lower_bound"], "k--", label="baseline: c_lb(t)")
  axes[1].axhline(first["c_lb"], color="k", lw=0.8, ls=":")
  for name, cell in cells.items():
    curve = cell["mia_curve"]
    line, = axes[0].plot(curve["recall"], curve["precision"], label=f"MIA, {name}")
    axes[1].plot(curve["recall"], curve["lower_bound"], color=line.get_color(),
                 label=f"{name}: {{c+eps}}_lb(t)")
    axes[1].axhline(cell["c_plus_eps_lb"], color=line.get_color(), lw=0.8, ls=":")
  axes[0].set(xlabel="recall", ylabel="precision", xscale="log")
  axes[1].set(xlabel="recall", ylabel="lower bound", xscale="log")
  for ax in axes:
    ax.legend(fontsize=7)
  _save(fig, path)


def panoramia_samples(preview: Any, vocab: Any, output_dir: str | os.PathLike,
                      images: bool) -> str:
  """PANORAMIA's generated non-members (``preview``, an ``Examples``): ``samples.png``, a
  grid (:func:`save_image_grid`) when ``images``, else ``samples.txt``, one line each (text
  decoded with ``vocab``; table rows as comma-separated values and the label). Returns the
  path."""
  if images:
    path = os.path.join(os.fspath(output_dir), "samples.png")
    save_image_grid(path, np.asarray(preview.inputs), columns=10)
    return path
  path = os.path.join(os.fspath(output_dir), "samples.txt")
  with open(path, "w", encoding="utf-8") as f:
    for inputs, label in zip(np.asarray(preview.inputs), np.asarray(preview.labels)):
      if vocab is not None:
        f.write(vocab.decode(inputs) + "\n")
      else:
        f.write(",".join(f"{v:g}" for v in inputs) + f",label={label}\n")
  return path


# ------------------------------------------------------------------ DOMIAS (experiments.domias)


def _domias_curves(ax, rows, label_of, xlabel, title) -> None:
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
  ax.set(xlabel=xlabel, ylabel="AUC", title=title, xscale="log")
  ax.legend(fontsize=6)


def domias_figures(studies: Any, output_dir: str | os.PathLike,
                   minority_column: str = "high_blood_pressure") -> list[str]:
  """Figs. 3-6 of van Breugel et al. from :func:`dpaudit.audits.domias_studies.run`'s studies
  (study -> rows): ``fig3.png`` (members, epochs), ``fig4.png`` (reference, synthetic),
  ``fig5.png`` (minority vs rest), ``fig6.png`` (quality vs DOMIAS AUC), for the studies
  present. Returns the paths written."""
  from dpaudit.audits.domias_studies import summarise  # pylint: disable=g-import-not-at-top
  plt = _pyplot()
  output_dir = os.fspath(output_dir)
  written = []

  def save(fig, name):
    fig.tight_layout()
    path = os.path.join(output_dir, f"{name}.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)

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
      _domias_curves(ax, studies[study], label_of, xlabel, study)
    save(fig, name)
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
    ax.set(ylabel="AUC", title=f"heart failure: {minority_column} = 1 vs rest")
    ax.legend()
    save(fig, "fig5")
  if "generators" in studies:
    fig, ax = plt.subplots(figsize=(6, 4.5))
    auc = summarise(studies["generators"])
    quality: dict[str, list[float]] = {}
    for row in studies["generators"]:
      quality.setdefault(row["setting"], []).append(row["quality"])
    families: dict[str, list[tuple[float, float]]] = {}
    for setting, by in auc.items():
      families.setdefault(setting.split(" ")[0], []).append(
          (np.mean(quality[setting]), by["domias"][0]))
    for family, points in families.items():
      points = sorted(points)
      ax.plot([p[0] for p in points], [p[1] for p in points],
              marker="o", ms=4, ls="-" if len(points) > 1 else "", label=family)
    ax.set(xlabel="Wasserstein distance to hold-out (lower: better quality)",
           ylabel="DOMIAS AUC", title="Fig. 6: quality vs vulnerability")
    ax.legend(fontsize=7)
    save(fig, "fig6")
  return written


# ---------------------------------------- private prediction (experiments.private_prediction)

_PP_CURVES = (("two_cut", "o-"), ("k_cut", "s-"), ("model_divergence", "-"),
              ("data_dependent", "--"), ("data_independent", ":"))
_PP_PLOT_LABELS = {"two_cut": "2-cut (lower bound)",
                   "k_cut": "k-cut (lower bound, asymptotic)",
                   "model_divergence": "model divergence (Monte Carlo)",
                   "data_dependent": "data-dependent (upper bound)",
                   "data_independent": "data-independent (upper bound)"}


def private_prediction_audit(cells: Any, orders: Any, path: str | os.PathLike) -> None:
  """Per-order RDP of the worst query of each cell of
  :func:`dpaudit.audits.private_prediction_study.run` (Chadha et al., App. F, worst case); the
  model divergence with a band of +- its Monte Carlo sd."""
  plt = _pyplot()
  fig, axes = plt.subplots(1, len(cells), figsize=(3.2 * len(cells), 3.2), squeeze=False)
  for ax, (name, cell) in zip(axes[0], cells.items()):
    worst = cell["worst_query"]
    for curve, style in _PP_CURVES:
      if curve == "data_dependent" and name.startswith("private_knn"):
        continue  # GNMax's data-dependent analysis does not cover subsampling
      label = _PP_PLOT_LABELS[curve]
      if curve == "model_divergence" and cell["model_divergence_method"] == "exact":
        label = "model divergence (exact)"
      ax.plot(orders, worst[curve], style, label=label, markersize=3)
    value = np.asarray(worst["model_divergence"], np.float64)
    sd = np.nan_to_num(np.asarray(worst["model_divergence_sd"], np.float64))
    ax.fill_between(orders, np.maximum(value - sd, 0.0), value + sd, alpha=0.25, lw=0)
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1e-4)
    ax.set_title(name, fontsize=9)
    ax.set_xlabel(r"order $\alpha$")
  axes[0][0].set_ylabel("RDP of one query (the worst)")
  axes[0][0].legend(fontsize=6)
  _save(fig, path, dpi=110)



def private_prediction_leakage(cells: Any, orders: Any, delta: float,
                               path: str | os.PathLike) -> None:
  """Analogues of Figs. 3-5 of Chadha et al.: epsilon against the number of queries
  (:func:`dpaudit.audits.private_prediction_study.leakage_vs_queries`), one panel per cell."""
  from dpaudit.audits.private_prediction_study import CURVE_LABELS as LABELS  # pylint: disable=g-import-not-at-top
  from dpaudit.audits.private_prediction_study import leakage_vs_queries
  plt = _pyplot()
  names = list(cells)
  algorithms = list(dict.fromkeys(n.split("/")[0] for n in names))
  adversaries = list(dict.fromkeys(n.split("/")[1] for n in names))
  fig, axes = plt.subplots(len(algorithms), len(adversaries), squeeze=False,
                           figsize=(3.3 * len(adversaries), 2.8 * len(algorithms) + 0.4))
  for name, cell in cells.items():
    alg, adv = name.split("/")
    ax = axes[algorithms.index(alg)][adversaries.index(adv)]
    total = cell["composed"]["num_queries"]
    counts = sorted({int(c) for c in np.unique(np.geomspace(1, total, 12).round())})
    curves = leakage_vs_queries(cell, orders, delta, counts)
    for curve, style in _PP_CURVES:
      if curve == "data_dependent" and alg.startswith("private_knn"):
        continue
      ax.plot(counts, curves[curve], style, markersize=3,
              label=LABELS[curve] + ("* (Thm. 1 image)" if curve in ("two_cut", "k_cut")
                                     else " (upper bound)"))
    ax.set(xscale="log", title=name, xlabel="queries")
    ax.grid(True, alpha=0.3)
  for row in axes:
    row[0].set_ylabel(f"epsilon at delta={delta:g}")
  axes[0][0].legend(fontsize=6)
  fig.suptitle("Leakage against queries, for comparison with the paper's figures (* Thm. 1 "
               "images of lower-bound curves, not lower bounds)\ncomposition assumes freshly "
               "trained teachers per query; one trained ensemble's joint leakage is capped by "
               "its training phase's", fontsize=8)
  _save(fig, path, dpi=110)
