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

What is guaranteed about results on disk:

* a stored cell is reused only when it is whole: strict JSON of the current cell format whose
  key and configuration are the ones asked for, whose result matches the SHA-256 digest stored
  next to it, and which passes the caller's ``validate`` (the result type's own checks of keys,
  shapes and invariants). Anything else (a truncated, edited, emptied or foreign file, a cell
  of the older digest-less format, a directory or unreadable file in its place) is recomputed
  and overwritten, with one :class:`DamagedCellWarning` line naming the file and the reason;
* :func:`load_arrays` returns None (recompute) for a missing, foreign, truncated, empty or
  garbage ``.npz`` checkpoint, or a directory in its place; :func:`save_arrays` and
  :func:`write_json` replace files atomically (a reader sees the old file or the new one);
* :meth:`CellStore.scratch_dir` and :meth:`CellStore.save` tolerate another process removing
  or recreating a cell's scratch directory at the same time (two processes on one directory
  should still be prevented by :func:`lock_directory`, which the command-line tools take).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import math
import os
import pickle
import shutil
import struct
import sys
import tempfile
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, Protocol

import numpy as np

NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}
_DECODE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}
CELL_FORMAT = "dpaudit-cell/2"  # /1 had no digest of the result


def to_plain(value: Any) -> Any:
  """Nested containers of Python, NumPy and JAX values as plain Python values: floats stay
  floats (infinite and NaN ones included: :func:`write_json` encodes those for strict JSON),
  tuples become lists, mapping keys strings, arrays (nested) lists. The ``to_dict`` of every
  audit result goes through it.

  >>> import numpy as np
  >>> to_plain({"eps": np.float32(0.5), "bits": (np.int64(3), np.inf), 1: np.array([True])})
  {'eps': 0.5, 'bits': [3, inf], '1': [True]}
  """
  if isinstance(value, Mapping):
    return {str(k): to_plain(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [to_plain(v) for v in value]
  if hasattr(value, "__array__") and not isinstance(value, (str, bytes)):
    array = np.asarray(value)
    return to_plain(array.tolist() if array.ndim else array.item())
  if isinstance(value, (bool, np.bool_)):
    return bool(value)
  if isinstance(value, (int, np.integer)):
    return int(value)
  if isinstance(value, (float, np.floating)):
    return float(value)
  return value


def to_json_value(value: Any) -> Any:
  """Nested containers of Python, NumPy and JAX values as strict-JSON-ready Python values:
  :func:`to_plain`, with non-finite floats as the strings ``"Infinity"``, ``"-Infinity"`` and
  ``"NaN"``."""
  return _encode_non_finite(to_plain(value))


def _encode_non_finite(value: Any) -> Any:
  if isinstance(value, dict):
    return {k: _encode_non_finite(v) for k, v in value.items()}
  if isinstance(value, list):
    return [_encode_non_finite(v) for v in value]
  if isinstance(value, float) and not math.isfinite(value):
    return "NaN" if math.isnan(value) else NON_FINITE[value]
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
  text = dumps(value)
  tmp = f"{path}.tmp.{os.getpid()}"
  try:
    with open(tmp, "w") as f:
      f.write(text)
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    raise
  return path


def save_arrays(path: str, fingerprint: str, arrays: Mapping[str, Any]) -> None:
  """Writes ``arrays`` (and the ``fingerprint`` of the inputs that produced them) to an
  ``.npz`` file atomically (a temporary file in the same directory, then a rename; the
  temporary file is removed if writing fails): a checkpoint that :func:`load_arrays` returns
  only to a caller with the same fingerprint. A directory in ``path``'s place is replaced."""
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=directory, suffix=".npz")
  try:
    with os.fdopen(fd, "wb") as f:
      np.savez(f, fingerprint=np.asarray(fingerprint), **arrays)
    _clear_directory_in_place(path)
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    raise


def _clear_directory_in_place(path: str) -> None:
  """Removes a directory (not a symbolic link to one) where a file is about to be written."""
  if os.path.isdir(path) and not os.path.islink(path):
    shutil.rmtree(path, ignore_errors=True)


# Everything np.load and reading a member of a damaged or foreign .npz can raise: truncated or
# empty zip (BadZipFile, EOFError), corrupt members (zlib.error, BadZipFile on a CRC mismatch),
# garbage (ValueError: not a zip, pickled data refused; UnpicklingError), a directory or an
# unreadable file in its place (OSError), a missing member (KeyError), bad headers (struct.error).
_UNREADABLE_ARRAYS = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error,
                      pickle.UnpicklingError, struct.error, TypeError, IndexError)


def load_arrays(path: str | None, fingerprint: str) -> dict[str, np.ndarray] | None:
  """The arrays :func:`save_arrays` wrote at ``path`` for this ``fingerprint``; None when there
  is no such file, it holds another fingerprint, or it cannot be read: truncated, empty,
  garbage, pickled objects, a directory in its place (recompute then). Never raises for a
  damaged file."""
  if path is None or not os.path.exists(path):
    return None
  try:
    with np.load(path, allow_pickle=False) as stored:
      if str(stored["fingerprint"]) != fingerprint:
        return None
      return {name: np.asarray(stored[name]) for name in stored.files if name != "fingerprint"}
  except _UNREADABLE_ARRAYS:
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

    def quantile(q):  # infinite values: the nearest order statistic, never inf - inf
      with np.errstate(invalid="ignore"):
        value = np.quantile(kept, q)
      return float(value if not np.isnan(value) else np.quantile(kept, q, method="nearest"))
    with np.errstate(invalid="ignore"):
      mean = float(kept.mean())
    out.update(median=quantile(0.5), min=float(kept.min()), max=float(kept.max()),
               q25=quantile(0.25), q75=quantile(0.75), mean=mean,
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


def canonical_json(value: Any) -> str:
  """The canonical strict JSON text of ``value``: keys sorted, no spaces, tuples as lists,
  non-finite numbers encoded (:func:`to_json_value`); equal values give equal text in every
  process and Python version."""
  return json.dumps(to_json_value(value), sort_keys=True, separators=(",", ":"),
                    allow_nan=False)


def config_key(config: Mapping[str, Any]) -> str:
  """A stable 16-hex-digit name for a configuration: the SHA-256 of its canonical strict JSON
  (:func:`canonical_json`), so the same settings give the same name in every process and
  Python version."""
  return hashlib.sha256(canonical_json(config).encode()).hexdigest()[:16]


def result_digest(result: Any) -> str:
  """The full SHA-256 (64 hex digits) of ``result``'s :func:`canonical_json`: stored next to a
  cell's result, so that a result edited or damaged on disk is told from the one computed."""
  return hashlib.sha256(canonical_json(result).encode()).hexdigest()


class DamagedCellWarning(UserWarning):
  """A stored cell was not whole (see :meth:`CellStore.load`) and is recomputed. Shown as one
  line, ``warning: PATH: REASON; recomputing it``."""


_formatwarning = warnings.formatwarning


def _format_damaged_cell_warning(message, category, filename, lineno, line=None) -> str:
  if isinstance(category, type) and issubclass(category, DamagedCellWarning):
    return f"warning: {message}\n"
  return _formatwarning(message, category, filename, lineno, line)


warnings.formatwarning = _format_damaged_cell_warning

# What a validator raises for a result that is not whole (AttributeError: e.g. a list where a
# dict belongs).
VALIDATION_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError)

_NUMBER_TYPES = (int, float, np.integer, np.floating)


def check_fields(what: str, value: Any, fields: Mapping[str, Any]) -> Mapping[str, Any]:
  """Checks that ``value`` is a mapping holding every key of ``fields`` with a value of the
  given type, for validators of stored results (:meth:`CellStore.load`). A type is ``float``
  (any real number: int or float, not bool), ``int`` (not bool), ``bool``, ``str``, ``list``,
  ``dict``, ``None``, or a tuple of these. Raises TypeError (not a mapping, wrong type) or
  KeyError (missing key) naming ``what`` and the field; returns ``value``."""
  if not isinstance(value, Mapping):
    raise TypeError(f"{what} must be a dict, got {type(value).__name__}")
  for name, kinds in fields.items():
    if name not in value:
      raise KeyError(f"{what} has no {name!r}")
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if not any(_is_kind(value[name], kind) for kind in kinds):
      names = " or ".join("None" if k is None else k.__name__ for k in kinds)
      raise TypeError(f"{what}[{name!r}]={value[name]!r} must be {names}")
  return value


def _is_kind(item: Any, kind: Any) -> bool:
  if kind is None:
    return item is None
  if isinstance(item, (bool, np.bool_)):
    return kind is bool
  if kind is float:
    return isinstance(item, _NUMBER_TYPES)
  if kind is int:
    return isinstance(item, (int, np.integer))
  if kind is dict:
    return isinstance(item, Mapping)
  return isinstance(item, kind)


class CellStore:
  """Finished cells of a grid experiment, one strict-JSON file per cell in ``directory``.

  A cell is named ``<label>-<key>.json`` where ``key`` is :func:`config_key` of the cell's
  configuration (every setting that changes its result, seed included) and ``label`` a short
  human-readable prefix. The file holds ``{"format", "key", "config", "result",
  "result_sha256"}`` and is written atomically once the cell has finished.

  A stored cell is reused only when it is whole (:meth:`load`): its format, key and
  configuration match the one asked for, its result matches its digest
  (:func:`result_digest`), and the caller's ``validate(result)`` accepts it. A damaged cell (bad
  JSON, another format or configuration, a digest mismatch, a result ``validate`` refuses, a
  directory or an unreadable file in its place) is recomputed and overwritten, with one
  :class:`DamagedCellWarning` naming the file and the reason; a cell written before digests
  existed (format ``dpaudit-cell/1``) is recomputed once the same way.

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
    cell and run. With ``resume=False`` it starts empty. Does not fail when another process
    removes or recreates the directory at the same time (a file in its place is removed)."""
    path = self.path(config, label)[:-len(".json")] + ".partial"
    for _ in range(5):
      if os.path.lexists(path) and not os.path.isdir(path):
        with contextlib.suppress(FileNotFoundError):
          os.remove(path)
      elif not self.resume and os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
      try:
        os.makedirs(path, exist_ok=True)
      except (FileExistsError, FileNotFoundError):
        continue  # replaced or removed in between: look again
      if os.path.isdir(path):
        return path
    os.makedirs(path, exist_ok=True)  # the last word: raises OSError if it still cannot
    return path

  def load(self, config: Mapping[str, Any], label: str = "cell",
           validate: Callable[[Any], Any] | None = None) -> Any | None:
    """The stored result of this exact configuration when it is whole, or None (also when
    ``resume=False`` or when there is no stored cell).

    ``validate(result)`` is called on the decoded stored result and must raise (ValueError,
    TypeError, KeyError, IndexError) when it is not a whole result of its type, e.g.
    ``lambda d: SomeResult.from_dict(d)``. A damaged cell gives None and one
    :class:`DamagedCellWarning` (:meth:`damage` names the reason)."""
    if not self.resume:
      return None
    path = self.path(config, label)
    cell, reason = self._read(path, config, validate)
    if reason is not None:
      warnings.warn(DamagedCellWarning(f"{path}: {reason}; recomputing it"), stacklevel=2)
      return None
    return cell

  def damage(self, config: Mapping[str, Any], label: str = "cell",
             validate: Callable[[Any], Any] | None = None) -> str | None:
    """Why the stored cell of ``config`` would not be reused (None when it is whole or absent)."""
    return self._read(self.path(config, label), config, validate)[1]

  def _read(self, path: str, config: Mapping[str, Any],
            validate: Callable[[Any], Any] | None) -> tuple[Any | None, str | None]:
    """``(result, None)`` for a whole cell, ``(None, reason)`` for a damaged one and
    ``(None, None)`` when there is none."""
    if not os.path.lexists(path):
      return None, None
    if os.path.isdir(path):
      return None, "a directory is in the cell's place"
    try:
      cell = read_json(path)
    except OSError as e:
      return None, f"unreadable ({e.strerror or e})"
    except ValueError as e:  # also UnicodeDecodeError
      return None, f"not strict JSON ({_one_line(e)})"
    if not isinstance(cell, dict):
      return None, f"holds a JSON {type(cell).__name__}, not a cell"
    if cell.get("format") == "dpaudit-cell/1":
      return None, "written by an older dpaudit (format dpaudit-cell/1, no digest)"
    if cell.get("format") != CELL_FORMAT:
      return None, f"format {cell.get('format')!r} is not {CELL_FORMAT!r}"
    if (cell.get("key") != config_key(config)
        or canonical_json(cell.get("config")) != canonical_json(config)):
      return None, "holds the cell of another configuration"
    if "result" not in cell or not isinstance(cell.get("result_sha256"), str):
      return None, "has no result or no digest"
    result = cell["result"]
    if result_digest(result) != cell["result_sha256"]:
      return None, "its result does not match its digest (edited or damaged)"
    if validate is not None:
      try:
        validate(result)
      except VALIDATION_ERRORS as e:
        return None, f"its result is not whole ({type(e).__name__}: {_one_line(e)})"
    return result, None

  def save(self, config: Mapping[str, Any], result: Any, label: str = "cell") -> str:
    """Stores a finished cell (its result and the result's digest) atomically, replacing
    whatever is in its place, and removes its scratch directory. In a multi-process run
    (``jax.distributed``) only process 0 writes; the others, which computed the same cell,
    return the path it is written to."""
    path = self.path(config, label)
    if not _is_writer():
      return path
    _clear_directory_in_place(path)
    write_json(path, {"format": CELL_FORMAT, "key": config_key(config), "config": config,
                      "result": result, "result_sha256": result_digest(result)})
    scratch = path[:-len(".json")] + ".partial"
    if os.path.isdir(scratch) and not os.path.islink(scratch):
      shutil.rmtree(scratch, ignore_errors=True)  # may be gone already (another process)
    return path

  def get_or_compute(self, config: Mapping[str, Any], compute: Callable[[], Any],
                     label: str = "cell", validate: Callable[[Any], Any] | None = None
                     ) -> tuple[Any, bool]:
    """``(result, reused)``: the stored result when whole (:meth:`load` with ``validate``),
    or ``compute()`` stored as it finishes. The returned result is what a later :meth:`load`
    gives (strict-JSON round trip). A freshly computed result that ``validate`` refuses is a
    bug: RuntimeError, and nothing is stored."""
    stored = self.load(config, label, validate)
    if stored is not None:
      return stored, True
    result = loads(dumps(compute()))
    if validate is not None:
      try:
        validate(result)
      except VALIDATION_ERRORS as e:
        raise RuntimeError(f"the result just computed for {self.path(config, label)} fails "
                           f"its own validation ({type(e).__name__}: {e}); this is a bug"
                           ) from e
    self.save(config, result, label)
    return result, False


def _is_writer() -> bool:
  """True unless this is a non-zero process of a ``jax.distributed`` run."""
  jax = sys.modules.get("jax")
  return jax is None or jax.process_index() == 0


def _safe(label: str) -> str:
  return "".join(c if c.isalnum() or c in "._=+" else "_" for c in str(label))[:80] or "cell"


def _one_line(error: BaseException) -> str:
  text = " ".join(str(error).split())
  return text if len(text) <= 200 else text[:197] + "..."


# ------------------------------------------------------------------ one game contract

class Progress(Protocol):
  """What every game's ``run(key, config, *, progress=None, store=None)`` reports to.

  ``progress(done, total, message)``: ``done`` of ``total`` units of the game's work are
  finished (trials, runs, cells; the game's docstring says which) and ``message`` is one short
  human-readable line about the last unit. A game calls it at least once when it finishes
  (``done == total``). The experiments pass :func:`print_progress`; a caller that does not want
  progress passes None.
  """

  def __call__(self, done: int, total: int, message: str = "") -> None:
    ...


def print_progress(done: int, total: int, message: str = "") -> None:
  """The experiments' :class:`Progress`: one line ``[done/total] message`` on stderr.

  >>> print_progress(1, 2, "cell a")  # doctest: +SKIP
  [1/2] cell a
  """
  print(f"[{done}/{total}] {message}".rstrip(), file=sys.stderr, flush=True)


def report(progress: Progress | None, done: int, total: int, message: str = "") -> None:
  """Calls ``progress`` when there is one (the games' one way of reporting)."""
  if progress is not None:
    progress(done, total, message)


class Cell(NamedTuple):
  """One cell of a grid: a short ``label``, the ``config`` mapping that names its result (seed
  included; the :class:`CellStore` key) and ``compute()`` giving its result as plain data."""
  label: str
  config: Mapping[str, Any]
  compute: Callable[[], Any]


def run_cells(cells: Iterable[Cell], store: CellStore | None = None,
              progress: Progress | None = None,
              validate: Callable[[Any], Any] | None = None) -> list[Any]:
  """The one grid helper: computes each cell, or reuses it from ``store`` when it is whole
  (:meth:`CellStore.get_or_compute`), reporting ``[i/n] label (reused)`` to ``progress``;
  returns the results in order. Without a store every cell is computed (nothing is written).

  >>> run_cells([Cell("a", {"x": 1}, lambda: {"y": 2})])
  [{'y': 2}]
  """
  cells = list(cells)
  out = []
  for i, cell in enumerate(cells, 1):
    if store is None:
      result, reused = loads(dumps(cell.compute())), False
    else:
      result, reused = store.get_or_compute(cell.config, cell.compute, cell.label, validate)
    report(progress, i, len(cells), cell.label + (" (reused)" if reused else ""))
    out.append(result)
  return out


def stored_run(store: CellStore | None, config: Mapping[str, Any], label: str,
               compute: Callable[[], Any], result_type: Any) -> Any:
  """The games' ``store=`` argument: ``compute()`` (a result with ``to_dict()``), or, with a
  :class:`CellStore`, the stored result of this ``config`` when it is whole (rebuilt by
  ``result_type.from_dict``), else ``compute()`` stored as it finishes. ``config`` is the plain
  mapping that names the result (key and settings).

  >>> import dataclasses
  >>> @dataclasses.dataclass(frozen=True)
  ... class R:
  ...   x: float
  ...   def to_dict(self): return {"x": self.x}
  ...   @classmethod
  ...   def from_dict(cls, d): return cls(float(d["x"]))
  >>> stored_run(None, {"seed": 0}, "r", lambda: R(1.5), R)
  R(x=1.5)
  """
  if store is None:
    return compute()
  plain, _ = store.get_or_compute(config, lambda: compute().to_dict(), label,
                                  validate=result_type.from_dict)
  return result_type.from_dict(plain)


def key_data(key: Any) -> list[int]:
  """A PRNG key as plain integers (its raw data), for the ``config`` mapping of a stored run."""
  import jax  # pylint: disable=g-import-not-at-top
  data = jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) \
      else key
  return [int(v) for v in np.ravel(np.asarray(data))]
