"""dpaudit's persistent compilation cache: compiled programs kept on disk between runs.

Importing dpaudit turns on JAX's persistent compilation cache in a per-user directory, so that
an estimator's program compiled by one script is loaded, not compiled again, by the next (on a
CPU a compile takes 1-2 s; a load 0.2-0.8 s). Inputs are padded to power-of-two sizes
(:func:`dpaudit.estimators._compile.bucket_size`), so one cached program serves every size in
its bucket.

* Directory: ``$DPAUDIT_COMPILATION_CACHE_DIR``, else ``$XDG_CACHE_HOME/dpaudit/
  compilation_cache``, else ``~/.cache/dpaudit/compilation_cache``. (JAX's bounded cache needs
  every entry's access-time file: a directory filled by an unbounded cache fails its writes, so
  dpaudit's is not the ``jax_compilation_cache`` directory older versions used.)
* Opt out: ``DPAUDIT_COMPILATION_CACHE=off`` (or ``0``/``false``/``no``) before importing
  dpaudit, or :func:`disable` afterwards. A cache directory the caller set in JAX
  (``jax.config.update("jax_compilation_cache_dir", ...)``) before importing dpaudit is kept.
* What is kept: programs that took at least ``$DPAUDIT_COMPILATION_CACHE_MIN_SECS`` (default
  0.1 s) to compile; JAX keys each on the program, the compiler options, the JAX version and the
  device, so a stale entry is never used. Programs with host callbacks are never written (JAX's
  rule).
* Concurrent processes: the cache is bounded (``$DPAUDIT_COMPILATION_CACHE_MAX_BYTES``, default
  2 GiB, least recently used entries evicted), which makes JAX take a file lock around every read
  and write, so processes sharing the directory never see each other's half-written entries. An
  entry left incomplete by a killed process fails JAX's integrity check on reading and is
  compiled again (with a warning), never used. ``-1`` (or ``0``) leaves the cache unbounded and
  unlocked: for one process at a time, such as a CI run, where the bounded cache's scan of the
  directory at every write costs more than it saves. JAX's bounded cache fails every write in a
  directory holding an entry without its access-time file (one written unbounded, or by a
  process killed between the two writes), so :func:`enable` gives each such entry the oldest
  access time (it is evicted first).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import os
import sys

DIR_VARIABLE = "DPAUDIT_COMPILATION_CACHE_DIR"
SWITCH_VARIABLE = "DPAUDIT_COMPILATION_CACHE"
MIN_SECONDS_VARIABLE = "DPAUDIT_COMPILATION_CACHE_MIN_SECS"
MAX_BYTES_VARIABLE = "DPAUDIT_COMPILATION_CACHE_MAX_BYTES"
DEFAULT_MIN_SECONDS = 0.1
DEFAULT_MAX_BYTES = 2 << 30
OFF_VALUES = ("off", "0", "false", "no")


def default_dir() -> str:
  """The cache directory dpaudit uses unless told otherwise (not expanded).

  >>> default_dir().endswith("compilation_cache") or DIR_VARIABLE in os.environ
  True
  """
  if os.environ.get(DIR_VARIABLE):
    return os.environ[DIR_VARIABLE]
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
  return os.path.join(base, "dpaudit", "compilation_cache")


def _number(variable: str, default: float, low: float) -> float:
  text = os.environ.get(variable, "").strip()
  if not text:
    return default
  try:
    value = float(text)
  except ValueError:
    raise ValueError(f"${variable}={text!r} must be a number >= {low}") from None
  if not value >= low:
    raise ValueError(f"${variable}={text!r} must be a number >= {low}")
  return value


def enable(path: str | None = None) -> str:
  """Turns the persistent compilation cache on at ``path`` (default :func:`default_dir`),
  creating the directory; returns it, expanded. Raises OSError if it cannot be created."""
  import jax  # pylint: disable=g-import-not-at-top
  path = os.path.abspath(os.path.expanduser(path or default_dir()))
  os.makedirs(path, exist_ok=True)
  _reset()
  jax.config.update("jax_compilation_cache_dir", path)
  jax.config.update("jax_persistent_cache_min_compile_time_secs",
                    _number(MIN_SECONDS_VARIABLE, DEFAULT_MIN_SECONDS, 0.0))
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  max_bytes = int(_number(MAX_BYTES_VARIABLE, DEFAULT_MAX_BYTES, -1)) or -1
  jax.config.update("jax_compilation_cache_max_size", max_bytes)
  if max_bytes > 0:
    _add_missing_access_times(path)
  return path


_ENTRY, _ACCESS_TIME = "-cache", "-atime"  # the suffixes of JAX's bounded (LRU) cache files


def _add_missing_access_times(path: str) -> None:
  """Writes the access-time file (time 0: least recently used) of every entry that lacks one,
  which would otherwise make each later write of JAX's bounded cache fail."""
  names = set(os.listdir(path))
  for name in names:
    key = name[:-len(_ENTRY)]
    if name.endswith(_ENTRY) and key + _ACCESS_TIME not in names:
      try:
        with open(os.path.join(path, key + _ACCESS_TIME), "xb") as f:
          f.write((0).to_bytes(8, "little"))
      except OSError:  # another process wrote it first, or the directory is read-only
        pass


def disable() -> None:
  """Turns the persistent compilation cache off for this process."""
  import jax  # pylint: disable=g-import-not-at-top
  _reset()
  jax.config.update("jax_compilation_cache_dir", None)


def _reset() -> None:
  """Lets a change of directory or settings take effect: JAX reads them once, at the first
  compile of the process, and keeps the cache it opened then (or none) until reset."""
  from jax.experimental.compilation_cache import compilation_cache as jax_cache
  logger = logging.getLogger("jax._src.compilation_cache")  # it logs every reset at INFO
  level = logger.level
  logger.setLevel(logging.WARNING)
  try:
    jax_cache.reset_cache()
  finally:
    logger.setLevel(level)


def directory() -> str | None:
  """The directory in use, or None when the cache is off."""
  import jax  # pylint: disable=g-import-not-at-top
  return jax.config.jax_compilation_cache_dir


def enable_by_default() -> str | None:
  """What importing dpaudit does: :func:`enable` unless ``$DPAUDIT_COMPILATION_CACHE`` opts
  out or the caller already chose a directory in JAX. A directory that cannot be created
  leaves the cache off (a read-only home must not stop an import); returns the directory."""
  if os.environ.get(SWITCH_VARIABLE, "").strip().lower() in OFF_VALUES:
    return None
  if directory():
    return directory()
  try:
    return enable()
  except OSError:
    return None


def enable_on_jax_import() -> None:
  """What ``import dpaudit`` runs: :func:`enable_by_default` now if JAX is imported already,
  else once JAX's own import has finished. dpaudit's modules that need no JAX (such as
  :mod:`dpaudit.results`, which the launchers use) thus do not pay JAX's 1-2 s import, and no
  program is compiled before the cache is on."""
  if "jax" in sys.modules:
    enable_by_default()
  elif not any(isinstance(f, _OnJaxImport) for f in sys.meta_path):
    sys.meta_path.insert(0, _OnJaxImport())


class _OnJaxImport(importlib.abc.MetaPathFinder):
  """Finds ``jax`` as the other finders do, once, with a loader that enables the cache after
  JAX's module has run."""

  def find_spec(self, name, path=None, target=None):
    del path, target
    if name != "jax":
      return None
    sys.meta_path.remove(self)  # once; also keeps find_spec below from coming back here
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.loader is not None:
      spec.loader = _ThenEnable(spec.loader)
    return spec


class _ThenEnable(importlib.abc.Loader):
  """``loader``, then :func:`enable_by_default`; the module keeps ``loader`` as its own."""

  def __init__(self, loader):
    self._loader = loader

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module):
    module.__loader__ = module.__spec__.loader = self._loader
    self._loader.exec_module(module)
    enable_by_default()
