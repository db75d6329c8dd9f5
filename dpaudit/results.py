"""Results on disk: strict JSON with one encoding of non-finite numbers, and one cell store.

Every ``results.json`` and every saved cell is strict JSON (RFC 8259: no ``Infinity`` or
``NaN`` literals), so any JSON parser reads it. A float that is not finite is written as the
string ``"Infinity"``, ``"-Infinity"`` or ``"NaN"`` (the spellings ``float()`` in Python and
``Number()`` in JavaScript accept); :func:`read_json` turns those three strings back into
floats wherever they occur as values. NumPy and JAX scalars and arrays become plain numbers
and lists.

A grid experiment keeps each finished cell in a :class:`CellStore`: one file per cell, named by
a stable hash of the cell's configuration, written atomically when the cell finishes, so an
interrupted run loses only the cells in progress and a rerun computes only what is missing.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
from typing import Any, Callable, Mapping

import numpy as np

NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}
_DECODE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}
CELL_FORMAT = "dpaudit-cell/1"


def to_json_value(value: Any) -> Any:
  """Nested containers of Python, NumPy and JAX values as strict-JSON-ready Python values.

  Non-finite floats become the strings ``"Infinity"``, ``"-Infinity"`` and ``"NaN"``; tuples
  become lists; mapping keys become strings; arrays become (nested) lists."""
  if isinstance(value, Mapping):
    return {str(k): to_json_value(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [to_json_value(v) for v in value]
  if hasattr(value, "__array__") and not isinstance(value, (str, bytes)):
    array = np.asarray(value)
    return to_json_value(array.tolist() if array.ndim else array.item())
  if isinstance(value, (bool, np.bool_)):
    return bool(value)
  if isinstance(value, (int, np.integer)):
    return int(value)
  if isinstance(value, (float, np.floating)):
    value = float(value)
    if math.isnan(value):
      return "NaN"
    return NON_FINITE.get(value, value)
  return value


def from_json_value(value: Any) -> Any:
  """Inverse of the non-finite encoding: the three strings become floats again."""
  if isinstance(value, dict):
    return {k: from_json_value(v) for k, v in value.items()}
  if isinstance(value, list):
    return [from_json_value(v) for v in value]
  if isinstance(value, str) and value in _DECODE:
    return _DECODE[value]
  return value


def dumps(value: Any, indent: int | None = 2) -> str:
  """Strict JSON text of ``value`` (see :func:`to_json_value`)."""
  return json.dumps(to_json_value(value), indent=indent, allow_nan=False)


def _strict_constant(name: str):
  raise ValueError(f"{name} is not strict JSON")


def loads(text: str) -> Any:
  """Parses strict JSON (``Infinity``/``NaN`` literals are an error) and decodes the
  non-finite strings."""
  return from_json_value(json.loads(text, parse_constant=_strict_constant))


def write_json(path: str, value: Any) -> str:
  """Writes ``value`` as strict JSON atomically (a temporary file, then a rename): a reader
  never sees half a file. Returns ``path``."""
  directory = os.path.dirname(path)
  if directory:
    os.makedirs(directory, exist_ok=True)
  tmp = f"{path}.tmp.{os.getpid()}"
  with open(tmp, "w") as f:
    f.write(dumps(value))
  os.replace(tmp, path)
  return path


def save_arrays(path: str, fingerprint: str, arrays: Mapping[str, Any]) -> None:
  """Writes ``arrays`` (and the ``fingerprint`` of the inputs that produced them) to an
  ``.npz`` file atomically: a checkpoint that :func:`load_arrays` returns only to a caller
  with the same fingerprint."""
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=directory, suffix=".npz")
  with os.fdopen(fd, "wb") as f:
    np.savez(f, fingerprint=np.asarray(fingerprint), **arrays)
  os.replace(tmp, path)


def load_arrays(path: str | None, fingerprint: str) -> dict[str, np.ndarray] | None:
  """The arrays :func:`save_arrays` wrote at ``path`` for this ``fingerprint``; None when there
  is no such file, it holds another fingerprint, or it cannot be read (recompute then)."""
  if path is None or not os.path.exists(path):
    return None
  try:
    with np.load(path) as stored:
      if str(stored["fingerprint"]) != fingerprint:
        return None
      return {name: stored[name] for name in stored.files if name != "fingerprint"}
  except (OSError, ValueError, KeyError):
    return None


def spread(values: Any) -> dict[str, Any]:
  """The summary of one quantity measured in independent repetitions (seeds): ``n``,
  ``median``, ``min``, ``max``, the quartiles ``q25`` and ``q75``, ``mean``, ``std`` (ddof 1;
  NaN for one value) and the ``values`` themselves, in repetition order. This is the one rule
  by which every experiment reports repetitions (shown by :func:`format_spread`).

  NaN values (a repetition that measured nothing) are kept in ``values`` and counted in
  ``n_nan`` but left out of the statistics; with no finite-or-infinite value left every
  statistic is NaN. ValueError for an empty or non-numeric ``values``.

  >>> s = spread([0.2, 0.0, 0.1])
  >>> s["median"], s["min"], s["max"], s["n"]
  (0.1, 0.0, 0.2, 3)
  """
  array = np.asarray(values)
  if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "biuf":
    raise ValueError(f"values={values!r} must be a non-empty 1-D sequence of numbers")
  array = array.astype(np.float64)
  kept = array[~np.isnan(array)]
  out: dict[str, Any] = {"n": int(array.size), "n_nan": int(array.size - kept.size)}
  if kept.size:
    finite_spread = kept.size > 1 and np.all(np.isfinite(kept))
    out.update(median=float(np.median(kept)), min=float(kept.min()), max=float(kept.max()),
               q25=float(np.quantile(kept, 0.25)), q75=float(np.quantile(kept, 0.75)),
               mean=float(kept.mean()),
               std=float(kept.std(ddof=1)) if finite_spread else math.nan)
  else:
    out.update({k: math.nan for k in ("median", "min", "max", "q25", "q75", "mean", "std")})
  out["values"] = [float(v) for v in array]
  return out


def format_spread(summary: Mapping[str, Any], digits: int = 3) -> str:
  """``median [min, max]`` of a :func:`spread` summary, e.g. ``0.100 [0.000, 0.200]``; a
  single repetition shows its value alone.

  >>> format_spread(spread([0.2, 0.0, 0.1]), 2)
  '0.10 [0.00, 0.20]'
  """
  show = lambda v: "nan" if math.isnan(v) else (  # noqa: E731
      ("inf" if v > 0 else "-inf") if math.isinf(v) else f"{v:.{digits}f}")
  if summary["n"] - summary.get("n_nan", 0) <= 1:
    return show(summary["median"])
  return f"{show(summary['median'])} [{show(summary['min'])}, {show(summary['max'])}]"


LOCK_FILE = ".lock"
_HELD_LOCKS: dict[str, int] = {}


class DirectoryInUseError(ValueError):
  """Another live process holds the directory (:func:`lock_directory`)."""


def lock_directory(directory: str) -> str:
  """Claims ``directory`` for this process until it exits: an exclusive ``flock`` on
  ``directory/.lock``, which also records this process's id. The kernel drops the lock when
  the process ends in any way (``kill -9`` included), so a stale lock never blocks a rerun.
  Claiming a directory this process already holds is a no-op. Creates the directory.

  Raises :class:`DirectoryInUseError` (a ValueError) naming the holder's process id when
  another live process holds it; OSError when the directory cannot be created or written.
  Returns the absolute path of the directory."""
  path = os.path.abspath(directory)
  if path in _HELD_LOCKS:
    return path
  os.makedirs(path, exist_ok=True)
  fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError as error:
    os.close(fd)
    if error.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
      raise
    holder = directory_holder(path)
    raise DirectoryInUseError(
        f"{directory} is in use by another process"
        + (f" (pid {holder})" if holder else "")
        + "; wait for it to finish, stop it, or use another directory") from None
  os.ftruncate(fd, 0)
  os.write(fd, f"{os.getpid()}\n".encode())
  _HELD_LOCKS[path] = fd
  return path


def unlock_directory(directory: str) -> None:
  """Releases a claim of :func:`lock_directory` made by this process (no-op otherwise)."""
  fd = _HELD_LOCKS.pop(os.path.abspath(directory), None)
  if fd is not None:
    os.close(fd)


def directory_holder(directory: str) -> int | None:
  """The process id of the live process that holds ``directory`` (:func:`lock_directory`),
  or None when no process does (no lock file, or its lock was released)."""
  path = os.path.join(os.path.abspath(directory), LOCK_FILE)
  if os.path.abspath(directory) in _HELD_LOCKS:
    return os.getpid()
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError:
    return None
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
      text = os.pread(fd, 32, 0).decode(errors="replace").strip()
      return int(text) if text.isdigit() else -1
    fcntl.flock(fd, fcntl.LOCK_UN)
    return None
  finally:
    os.close(fd)


def read_json(path: str) -> Any:
  """Reads a file written by :func:`write_json` (or any strict JSON file)."""
  with open(path) as f:
    return loads(f.read())


def config_key(config: Mapping[str, Any]) -> str:
  """A stable 16-hex-digit name for a configuration: the SHA-256 of its canonical strict JSON
  (keys sorted, tuples as lists, non-finite numbers encoded), so the same settings give the
  same name in every process and Python version."""
  canonical = json.dumps(to_json_value(config), sort_keys=True, separators=(",", ":"),
                         allow_nan=False)
  return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class CellStore:
  """Finished cells of a grid experiment, one strict-JSON file per cell in ``directory``.

  A cell is named ``<label>-<key>.json`` where ``key`` is :func:`config_key` of the cell's
  configuration (every setting that changes its result, seed included) and ``label`` a short
  human-readable prefix. The file holds ``{"format", "key", "config", "result"}`` and is
  written atomically once the cell has finished. A stored cell is reused only when its format,
  key and configuration all match the one asked for: a half-written file (from a crash during
  the rename's predecessor), a file from another configuration under the same name, or an
  unreadable one is recomputed and overwritten, never reused.

  ``resume=False`` recomputes every cell it is asked for (and overwrites the stored ones).
  :meth:`scratch_dir` gives a cell a directory for its own checkpoints, removed by :meth:`save`.
  """

  def __init__(self, directory: str, resume: bool = True):
    self.directory = directory
    self.resume = resume
    os.makedirs(directory, exist_ok=True)

  def path(self, config: Mapping[str, Any], label: str = "cell") -> str:
    return os.path.join(self.directory, f"{_safe(label)}-{config_key(config)}.json")

  def scratch_dir(self, config: Mapping[str, Any], label: str = "cell") -> str:
    """A directory for the cell's partial state (checkpoints) while it runs; call it once per
    cell and run. With ``resume=False`` it starts empty."""
    path = self.path(config, label)[:-len(".json")] + ".partial"
    if not self.resume and os.path.isdir(path):
      shutil.rmtree(path)
    os.makedirs(path, exist_ok=True)
    return path

  def load(self, config: Mapping[str, Any], label: str = "cell") -> Any | None:
    """The stored result of this exact configuration, or None (also when ``resume=False``)."""
    if not self.resume:
      return None
    path = self.path(config, label)
    try:
      cell = read_json(path)
    except (OSError, ValueError):
      return None
    if not isinstance(cell, dict) or cell.get("format") != CELL_FORMAT:
      return None
    if cell.get("key") != config_key(config) or cell.get("config") != loads(dumps(config)):
      return None
    return cell.get("result")

  def save(self, config: Mapping[str, Any], result: Any, label: str = "cell") -> str:
    """Stores a finished cell atomically and removes its scratch directory. In a
    multi-process run (``jax.distributed``) only process 0 writes; the others, which computed
    the same cell, return the path it is written to."""
    if not _is_writer():
      return self.path(config, label)
    path = write_json(self.path(config, label), {"format": CELL_FORMAT,
                                                 "key": config_key(config),
                                                 "config": config, "result": result})
    scratch = path[:-len(".json")] + ".partial"
    if os.path.isdir(scratch):
      shutil.rmtree(scratch)
    return path

  def get_or_compute(self, config: Mapping[str, Any], compute: Callable[[], Any],
                     label: str = "cell") -> tuple[Any, bool]:
    """``(result, reused)``: the stored result, or ``compute()`` stored as it finishes. The
    returned result is what a later :meth:`load` gives (strict-JSON round trip)."""
    stored = self.load(config, label)
    if stored is not None:
      return stored, True
    result = loads(dumps(compute()))
    self.save(config, result, label)
    return result, False


def _is_writer() -> bool:
  """True unless this is a non-zero process of a ``jax.distributed`` run."""
  jax = sys.modules.get("jax")
  return jax is None or jax.process_index() == 0


def _safe(label: str) -> str:
  return "".join(c if c.isalnum() or c in "._=+" else "_" for c in str(label))[:80] or "cell"
