"""Runs one sweep job the way launch.local does, for launchers that start a plain command.

``python -m launch.job --launch_module=experiments.X --flag=value ... --output_dir=DIR`` runs
``python -m experiments.X`` with the other arguments, sends its output to ``DIR/job.log``,
and, when it exits 0 having written ``DIR/results.json``, marks the job finished
(``DIR/job.json``) so that a rerun of the sweep skips it. Exits with the experiment's status,
or 0 whenever ``DPAUDIT_JOB_EXIT_ZERO=1`` (set by launchers that would otherwise stop the other
jobs when one fails, such as xmanager's local executor; the marker tells them apart).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from launch import sweep as sweep_lib


def split_args(argv: list[str]) -> tuple[str, dict[str, str], str]:
  """(module, flags without output_dir, output_dir) from ``--k=v`` arguments."""
  module, flags, output_dir = None, {}, None
  for arg in argv:
    if not arg.startswith("--") or "=" not in arg:
      raise ValueError(f"expected --name=value arguments, got {arg!r}")
    name, value = arg[2:].split("=", 1)
    if name == "launch_module":
      module = value
    elif name == "output_dir":
      output_dir = value
    else:
      flags[name] = value
  if not module or not output_dir:
    raise ValueError("--launch_module and --output_dir are required")
  return module, flags, output_dir


def main(argv: list[str]) -> int:
  try:
    module, flags, output_dir = split_args(argv)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  os.makedirs(output_dir, exist_ok=True)
  marker = os.path.join(output_dir, sweep_lib.MARKER)
  if os.path.exists(marker):
    os.remove(marker)
  job = sweep_lib.Job("", module, flags, output_dir)
  start = time.perf_counter()
  with open(os.path.join(output_dir, sweep_lib.LOG), "w") as log:
    code = subprocess.call(job.argv(sys.executable), stdout=log, stderr=subprocess.STDOUT)
  seconds = time.perf_counter() - start
  if code == 0 and os.path.isfile(os.path.join(output_dir, "results.json")):
    sweep_lib.mark_finished(output_dir, module, flags, seconds)
    print(f"done {module} -> {output_dir} ({seconds:.1f} s)")
  else:
    print(f"FAILED {module} -> {output_dir}: exit code {code}; log: "
          f"{os.path.join(output_dir, sweep_lib.LOG)}", file=sys.stderr)
  return 0 if os.environ.get("DPAUDIT_JOB_EXIT_ZERO") == "1" else code


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
