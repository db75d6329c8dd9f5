"""Sweeps: a grid over one experiment's flags, and the jobs it expands to.

A sweep file (``launch/sweeps/NAME.py``) defines ``SWEEP = Sweep(...)``: the experiment module
(``experiments.NAME``), flags every job shares, and a grid of the flags that vary, built with
:func:`product` (every combination) and :func:`zip_` (values taken together), e.g.::

    SWEEP = Sweep(
        name="uniaud_table",
        module="experiments.dpsgd_audit",
        fixed={"dataset": "digits", "epochs": 30},
        grid=product(audits=["many_run:in_distribution", "uniaud:ood"],
                     epsilons=["1", "2", "4", "8"]),
    )

Each point of the grid is one job: ``python -m MODULE --flag=value ... --output_dir=ROOT/NAME/JOB``
where ``JOB`` names the varying flags. This module knows nothing of dpaudit: it builds command
lines only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import itertools
import json
import os
import re
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Grid = tuple[dict[str, Any], ...]


def product(**values: Sequence[Any]) -> Grid:
  """Every combination of the given flag values (the first flag varies slowest)."""
  for name, options in values.items():
    _check_options(name, options)
  names = list(values)
  return tuple(dict(zip(names, combo)) for combo in itertools.product(*values.values()))


def zip_(**values: Sequence[Any]) -> Grid:
  """The i-th value of every flag together; all lists must have the same length."""
  lengths = {name: len(_check_options(name, options)) for name, options in values.items()}
  if len(set(lengths.values())) > 1:
    raise ValueError(f"zip_ needs lists of one length, got {lengths}")
  names = list(values)
  return tuple(dict(zip(names, combo)) for combo in zip(*values.values()))


def cross(*grids: Grid) -> Grid:
  """The product of grids (e.g. ``cross(zip_(...), product(...))``)."""
  out: Grid = ({},)
  for grid in grids:
    out = tuple({**a, **b} for a in out for b in grid)
  return out


def _check_options(name: str, options: Sequence[Any]) -> Sequence[Any]:
  if isinstance(options, (str, bytes)) or not isinstance(options, Sequence) or not options:
    raise ValueError(f"flag {name!r} needs a non-empty list of values, got {options!r}")
  return options


def flag_value(value: Any) -> str:
  """A flag value on the command line: lists joined by commas, booleans as true/false."""
  if isinstance(value, bool):
    return "true" if value else "false"
  if isinstance(value, (list, tuple)):
    return ",".join(flag_value(v) for v in value)
  return str(value)


@dataclasses.dataclass(frozen=True)
class Job:
  """One command of a sweep."""
  name: str
  module: str
  flags: Mapping[str, str]  # everything but --output_dir
  output_dir: str

  def argv(self, python: str) -> list[str]:
    return [python, "-m", self.module, *(f"--{k}={v}" for k, v in self.flags.items()),
            f"--output_dir={self.output_dir}"]

  def fingerprint(self) -> str:
    """Hash of the module and flags: a finished job is skipped only if it matches."""
    return fingerprint(self.module, self.flags)


MARKER = "job.json"  # written in a job's output_dir when it finished
LOG = "job.log"


def fingerprint(module: str, flags: Mapping[str, str]) -> str:
  text = json.dumps([module, dict(sorted(flags.items()))])
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def mark_finished(output_dir: str, module: str, flags: Mapping[str, str], seconds: float
                  ) -> None:
  """Records that the job ran to completion (exit 0 and a results.json)."""
  with open(os.path.join(output_dir, MARKER), "w") as f:
    json.dump({"fingerprint": fingerprint(module, flags), "exit_code": 0, "seconds": seconds,
               "module": module, "flags": dict(flags)}, f, indent=2)


def is_finished(job: Job) -> bool:
  """True when ``job`` (same module and flags) finished in an earlier run."""
  try:
    with open(os.path.join(job.output_dir, MARKER)) as f:
      marker = json.load(f)
  except (OSError, ValueError):
    return False
  return (marker.get("fingerprint") == job.fingerprint() and marker.get("exit_code") == 0
          and os.path.isfile(os.path.join(job.output_dir, "results.json")))


@dataclasses.dataclass(frozen=True)
class Sweep:
  name: str
  module: str
  grid: Grid = ({},)
  fixed: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  description: str = ""

  def __post_init__(self):
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.name):
      raise ValueError(f"sweep name {self.name!r} must be letters, digits, '_', '.', '-'")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", self.module):
      raise ValueError(f"module {self.module!r} is not a Python module path")
    if not self.grid:
      raise ValueError("the grid is empty")
    for point in self.grid:
      if "output_dir" in point or "output_dir" in self.fixed:
        raise ValueError("output_dir is set by the launcher, not by the sweep")

  def jobs(self, root: str) -> list[Job]:
    """The jobs, each writing to ``root/<sweep name>/<job name>``."""
    jobs, seen = [], set()
    for i, point in enumerate(self.grid):
      flags = {k: flag_value(v) for k, v in {**self.fixed, **point}.items()}
      name = job_name(point) or "job"
      if name in seen:
        name = f"{name}_{i}"
      seen.add(name)
      jobs.append(Job(name, self.module, flags, os.path.join(root, self.name, name)))
    return jobs


def job_name(point: Mapping[str, Any]) -> str:
  """A directory name from the varying flags, e.g. ``epsilons=8,audits=uniaud_ood``."""
  parts = []
  for key, value in point.items():
    text = re.sub(r"[^A-Za-z0-9.+=-]+", "_", flag_value(value)).strip("_")
    parts.append(f"{key}={text}")
  name = ",".join(parts)
  if len(name) > 120:  # long lists: keep it readable and unique
    name = name[:100] + "_" + hashlib.sha256(name.encode()).hexdigest()[:8]
  return name


def resolve(name: str) -> str:
  """A sweep file path, or ``launch/sweeps/NAME.py``."""
  if os.path.isfile(name):
    return name
  candidate = os.path.join(os.path.dirname(__file__), "sweeps",
                           name if name.endswith(".py") else name + ".py")
  if os.path.isfile(candidate):
    return candidate
  known = ", ".join(f[:-3] for f in available())
  raise ValueError(f"--sweep={name} is neither a file nor a sweep in launch/sweeps ({known})")


def load(path: str) -> Sweep:
  """The ``SWEEP`` defined by a sweep file. ValueError (one line naming the file, the line and
  the error) when the file cannot be read, does not compile, or raises while it runs."""
  if not os.path.isfile(path):
    raise ValueError(f"--sweep={path} is not a file")
  spec = importlib.util.spec_from_file_location(
      "dpaudit_sweep_" + re.sub(r"\W", "_", os.path.basename(path)), path)
  module = importlib.util.module_from_spec(spec)
  try:
    spec.loader.exec_module(module)
  except SyntaxError as e:
    raise ValueError(f"sweep file {path}, line {e.lineno}: {type(e).__name__}: {e.msg}"
                     ) from None
  except Exception as e:  # pylint: disable=broad-except  # anything the file's code raises
    lines = [frame.lineno for frame in traceback.extract_tb(e.__traceback__)
             if os.path.abspath(frame.filename) == os.path.abspath(path)]
    where = f", line {lines[-1]}" if lines else ""
    message = " ".join(str(e).split())[:300]
    raise ValueError(f"sweep file {path}{where} raised {type(e).__name__}"
                     + (f": {message}" if message else "")) from None
  sweep = getattr(module, "SWEEP", None)
  if not isinstance(sweep, Sweep):
    raise ValueError(f"{path} must define SWEEP = launch.sweep.Sweep(...)")
  return sweep


def available(directory: str | None = None) -> Iterable[str]:
  """The sweep files shipped under ``launch/sweeps``."""
  directory = directory or os.path.join(os.path.dirname(__file__), "sweeps")
  return sorted(f for f in os.listdir(directory) if f.endswith(".py") and f != "__init__.py")
