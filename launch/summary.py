"""The summary table of a sweep: one row per job, as CSV and Markdown."""

from __future__ import annotations

import csv
import json
import os
from typing import Any

from launch import sweep as sweep_lib


def summary_row(record: dict[str, Any], job: sweep_lib.Job, sweep: sweep_lib.Sweep
                 ) -> dict[str, Any]:
  row = dict(record)
  varying = {k for point in sweep.grid for k in point}
  row.update({f"--{k}": v for k, v in job.flags.items() if k in varying})
  try:
    with open(os.path.join(job.output_dir, "results.json")) as f:
      result = json.load(f)
  except (OSError, ValueError):
    return row
  if record["status"] != "pending" and isinstance(result, dict):
    for key, value in result.items():
      if key not in ("command", "experiment") and isinstance(value, (int, float, str, bool)):
        row[key] = value
  return row


def write_summary(rows: list[dict[str, Any]], directory: str) -> tuple[str, str]:
  """``summary.csv`` and ``summary.md`` with one row per job (columns: the union of keys)."""
  os.makedirs(directory, exist_ok=True)
  columns: list[str] = []
  for row in rows:
    columns += [k for k in row if k not in columns]
  csv_path, md_path = os.path.join(directory, "summary.csv"), os.path.join(directory, "summary.md")
  with open(csv_path, "w", newline="") as f:
    writer = csv.DictWriter(f, columns)
    writer.writeheader()
    writer.writerows(rows)

  def cell(value):
    if isinstance(value, float):
      return f"{value:.4g}"
    return "" if value is None else str(value).replace("|", "\\|")

  lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
  lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
  with open(md_path, "w") as f:
    f.write("\n".join(lines) + "\n")
  return csv_path, md_path
