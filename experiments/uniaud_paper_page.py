"""UniAud's Table IV at the paper's canary shape: the kept JSON and the tables rendered from it
(flag-free; the CLI is :mod:`experiments.uniaud_paper_docs`). Per cell and seed, from one set of
scores: Steinke et al.'s one-run bound (valid, Bonferroni), the same uncorrected (optimistic, as
the paper reports it) and the f-DP one-run bounds (Mahloujifar, Melis & Chaudhuri, ICML 2025),
median [min, max] over seeds beside the paper's values (Liu & Xiong, Table IV, 2-layer ReLU MLP),
rendered into the README's and docs/dpsgd.md's blocks (tests check it)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from dpaudit import results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JSON_PATH = os.path.join(ROOT, "docs", "results", "uniaud_paper.json")
EPSILONS = (1.0, 2.0, 4.0, 8.0, math.inf)
AUDITS = (("uniaud", "gaussian", "gaussian, w/ comparison"),
          ("one_run", "gaussian", "gaussian, w/o comparison"),
          ("uniaud", "orthogonal", "orthogonal, w/ comparison"),
          ("one_run", "orthogonal", "orthogonal, w/o comparison"))
# Table IV, 2-layer MLP, best r uncorrected: eps 1, 8, inf; gaussian w/o, w/, orth. w/o, w/.
_PAPER_ROWS = {
    2000: ((0.322, 2.362, 6.395), (0.620, 2.707, 6.449), (0.447, 3.032, 6.395),
           (1.089, 3.059, 6.449)),
    10000: ((0.207, 2.096, 7.816), (0.771, 3.780, 7.829), (0.501, 3.191, 7.503),
            (0.623, 3.270, 7.834))}
PAPER = {m: {audit: dict(zip((1.0, 8.0, math.inf), row)) for audit, row in zip(
    (("one_run", "gaussian"), ("uniaud", "gaussian"), ("one_run", "orthogonal"),
     ("uniaud", "orthogonal")), rows)} for m, rows in _PAPER_ROWS.items()}
BOUNDS = (("steinke", "Steinke, valid"), ("steinke_optimistic", "Steinke, optimistic"),
          ("fdp_gaussian", "f-DP Gaussian, valid"), ("fdp_run", "f-DP run curve, valid"))
SETTINGS = ("canary_dim", "num_canary_classes", "canaries_only", "hidden_sizes", "epochs",
            "learning_rate", "l2_clip_norm", "delta", "significance", "correction")

# A kept row's figures: (row key, where in a cell's result: "name" or "details.name").
ROW_FIELDS = (("steinke", "epsilon_lower_bound"), ("fdp_gaussian", "epsilon_fdp_gaussian"),
              ("fdp_run", "epsilon_fdp_run"), ("ceiling", "epsilon_ceiling"),
              ("epsilon_theory", "epsilon_theory"), ("noise_multiplier", "noise_multiplier"),
              ("num_steps", "num_steps"), ("sampling_rate", "sampling_rate"),
              *((f"{k}_optimistic", f"details.optimistic_epsilon_{k}")
                for k in ("steinke", "fdp_gaussian", "ceiling")),
              *((k, f"details.{k}") for k in ("mu_lower_bound", "noise_multiplier_upper_bound")))


def _row(cell: Mapping[str, Any]) -> dict[str, Any]:
  config, r = cell["config"], cell["result"]
  row = {"game": config["game"], "canary": config["canary"], "epsilon": config["epsilon"],
         "m": config["num_canaries"], "seed": cell["seed"]}
  for key, where in ROW_FIELDS:
    source, name = (r["details"], where[8:]) if where.startswith("details.") else (r, where)
    row[key] = source.get(name, math.nan)
  return row


def _command(stored: str) -> str:
  """A stored command as ``python -m experiments.dpsgd_audit FLAGS``, less ``--output_dir``."""
  flags = [f for f in stored.split()[1:] if not f.startswith("--output_dir")]
  return " ".join(["python -m experiments.dpsgd_audit", *flags])


def collect(runs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
  """The kept JSON from the ``results.json`` of Bonferroni-corrected runs (later runs' cells
  replace earlier ones of the same audit, epsilon, m and seed): ``commands``, the shared
  ``settings`` and one row per finished cell. ValueError when a run is not of the paper's
  shape (canaries alone, d = C = 1000) or not corrected."""
  rows: dict[tuple, dict[str, Any]] = {}
  commands, settings = [], None
  for run in runs:
    config = run["config"]
    shape = tuple(config.get(k) for k in ("canary_dim", "num_canary_classes", "correction"))
    if shape != (1000, 1000, "bonferroni"):
      raise ValueError(f"a run of the UniAud paper table must have canary_dim=1000, "
                       f"num_canary_classes=1000, correction='bonferroni'; got {shape}")
    shared = {name: config.get(name) for name in SETTINGS}
    if settings is not None and shared != settings:
      raise ValueError(f"the runs differ in their settings: {settings} and {shared}")
    settings = shared
    commands.append(_command(run["command"]))
    for cell in run["cells"]:
      if cell["status"] == "done":
        row = _row(cell)
        rows[(row["game"], row["canary"], row["epsilon"], row["m"], row["seed"])] = row
  order = {(g, c): i for i, (g, c, _) in enumerate(AUDITS)}
  kept = sorted(rows.values(), key=lambda r: (r["m"], order.get((r["game"], r["canary"]), 9),
                                               r["epsilon"], r["seed"]))
  return {"settings": settings, "commands": commands, "rows": kept}


def _points(record: Mapping[str, Any], epsilons) -> list[tuple]:
  """``(m, label, epsilon, paper, rows)`` per grid point with rows, in table order."""
  out = []
  for m in sorted({r["m"] for r in record["rows"]}):
    for game, canary, label in AUDITS:
      for epsilon in epsilons:
        rows = [r for r in record["rows"] if (r["game"], r["canary"], r["epsilon"], r["m"])
                == (game, canary, epsilon, m)]
        paper = PAPER.get(m, {}).get((game, canary), {}).get(epsilon)
        out += [(m, label, epsilon, paper, rows)] if rows else []
  return out


def _show(rows, key: str) -> str:
  values = [r[key] for r in rows]
  return "-" if all(math.isnan(v) for v in values) else results.format_spread(
      results.spread(values), 2)


def _eps(epsilon: float) -> str:
  return "inf" if math.isinf(epsilon) else f"{epsilon:g}"


def _table(record: Mapping[str, Any], epsilons, extra: bool) -> list[str]:
  head = ["m", "canaries", "eps", "seeds", *(h for _, h in BOUNDS), "paper (optimistic)"]
  if extra:
    head += ["ceiling valid / optimistic", "accountant eps (w/: replace-one)"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for m, label, epsilon, paper, rows in _points(record, epsilons):
    cells = [str(m), label, _eps(epsilon), str(len(rows)),
             *(_show(rows, key) for key, _ in BOUNDS), "-" if paper is None else f"{paper:.2f}"]
    if extra:
      cells += [f"{rows[0]['ceiling']:.2f} / {rows[0]['ceiling_optimistic']:.2f}",
                f"{rows[0]['epsilon_theory']:.2f}"]
    lines.append("| " + " | ".join(cells) + " |")
  return lines


def _settings_line(record: Mapping[str, Any]) -> str:
  s = record["settings"]
  widths = ",".join(str(w) for w in s["hidden_sizes"])
  rates = ", ".join(map("{:g}".format, sorted({round(r["sampling_rate"], 6)
                                                for r in record["rows"]})))
  return (f"Case I (canaries only), d = {s['canary_dim']}, C = {s['num_canary_classes']}, "
          f"q = {rates}, MLP hidden {widths} (the paper's: 1e5), {s['epochs']:g} epochs, SGD lr "
          f"{s['learning_rate']:g}, clip {s['l2_clip_norm']:g}, delta = {s['delta']:g}, 95%.")


# Targets for a valid bound of gaussian canaries w/ comparison at m = 2000.
TARGETS = ((8.0, 4.0), (math.inf, 6.0))
VALID = (("fdp_run", "f-DP run curve"), ("fdp_gaussian", "f-DP Gaussian"), ("steinke", "Steinke"))


def targets_line(record: Mapping[str, Any]) -> str:
  """Whether the targets (:data:`TARGETS`) were met, by which valid bound's median over seeds,
  and by how much they were missed."""
  parts = []
  for epsilon, target in TARGETS:
    rows = [r for r in record["rows"] if (r["game"], r["canary"], r["epsilon"], r["m"])
            == ("uniaud", "gaussian", epsilon, 2000)]
    if not rows:
      parts.append(f"eps = {_eps(epsilon)}: not run")
      continue
    medians = {key: results.spread([r[key] for r in rows])["median"] for key, _ in VALID}
    shown = ", ".join(f"{name} {medians[key]:.2f}" for key, name in VALID
                      if not math.isnan(medians[key]))
    best = max((v for v in medians.values() if not math.isnan(v)), default=math.nan)
    verdict = (f"met ({target:g})" if best >= target
               else f"not met ({target:g}; short by {target - best:.2f})")
    parts.append(f"eps = {_eps(epsilon)}, {verdict}: {shown}")
  return ("Targets for a valid bound (gaussian w/ comparison, m = 2000, medians over seeds): "
          + "; ".join(parts) + ".")


def readme_table(record: Mapping[str, Any]) -> str:
  """The README's table (m = 2000; eps = 8, inf; median [min, max]) and its command."""
  record = {**record, "rows": [r for r in record["rows"] if r["m"] == 2000], "commands": [
      c for c in record["commands"] if "--num_canaries=" not in c or "--num_canaries=2000 " in c]}
  commands = "; ".join(f"`{c}`" for c in record["commands"])
  return "\n".join([f"Made by {commands}. {_settings_line(record)}", "",
                    *_table(record, (8.0, math.inf), extra=False)])


def docs_table(record: Mapping[str, Any]) -> str:
  """docs/dpsgd.md's table (every epsilon, ceilings, accountant's epsilon), targets line."""
  commands = "\n".join(f"    {c}" for c in record["commands"])
  return "\n".join(["Commands:", "", commands, "", _settings_line(record), "",
                    *_table(record, EPSILONS, extra=True), "", targets_line(record)])


def _markers(name: str) -> tuple[str, str]:
  return (f"<!-- {name}: generated by python -m experiments.uniaud_paper_docs from "
          "docs/results/uniaud_paper.json -->", f"<!-- /{name} -->")


def block(text: str, name: str) -> str | None:
  """The generated block ``name`` of a page's ``text`` (between its markers), or None."""
  found = re.search(r"\n(.*?)\n".join(map(re.escape, _markers(name))), text, re.S)
  return None if found is None else found.group(1)


def replace_block(text: str, name: str, content: str) -> str:
  """``text`` with block ``name`` set to ``content``; ValueError without its markers."""
  begin, end = _markers(name)
  if block(text, name) is None:
    raise ValueError(f"the page has no block {name!r}: add the lines {begin!r} and {end!r}")
  return re.sub(re.escape(begin) + r"\n.*?\n" + re.escape(end),
                lambda _: f"{begin}\n{content}\n{end}", text, count=1, flags=re.S)
