"""The entry point of every experiment and benchmark: :func:`run` (absl's ``app.run`` with the
one-line flag parser), :func:`cli` (user-caused failures in one line, exit 2) and the output
directory claim (:func:`claim_output_dir`). The rules are in :mod:`experiments.common`.
Flag-free: the shared flags are defined once in :mod:`experiments.common`."""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import Any

from absl import flags

from experiments import runtime
from experiments.errors import (
  EXIT_INTERRUPTED,
  describe_os_error,
  fail,
  is_out_of_memory,
  out_of_memory_message,
)

SHARED_FLAGS = ("compilation_cache_dir", "distributed")
"""Flags every CLI has (defined in :mod:`experiments.common`); :func:`run` makes them key flags
of the running program, so its ``--help`` lists them beside its own."""


DEPRECATED_ALIASES: dict[str, str] = {}
"""Old flag name -> new name, for every alias :func:`deprecated_alias` defined in this process."""

_warned: set[str] = set()  # the aliases warned about while parsing the current command line


def _defining_module() -> str:
  """The module that called into this one or :mod:`experiments.common` (``sys.argv[0]`` for a
  CLI run as ``__main__``, as absl names it), so that its ``--help`` lists the alias."""
  frame = sys._getframe(1)  # pylint: disable=protected-access
  while frame is not None and frame.f_globals.get("__name__") in (__name__, "experiments.common"):
    frame = frame.f_back
  name = frame.f_globals.get("__name__", "__main__") if frame is not None else "__main__"
  return sys.argv[0] if name == "__main__" else name


def deprecated_alias(old: str, new: str) -> None:
  """Defines ``--old`` as a deprecated alias of the already defined flag ``--new`` (kept for one
  release after a rename to the shared flag vocabulary). ``--old=value``, ``--old value`` and,
  for a boolean, ``--old``/``--noold`` set ``--new`` (same parser: a bad value is the usual
  one-line error, naming ``--new``), and print ``warning: --old is deprecated; use --new`` once
  on stderr. ``FLAGS.old`` reads ``FLAGS.new``; ``--help`` lists the alias as deprecated."""
  original = flags.FLAGS[new]

  class _DeprecatedAlias(flags.Flag):
    """Parses into ``--new`` (as absl's DEFINE_alias) and warns on first use."""

    def parse(self, argument):
      if old not in _warned:
        _warned.add(old)
        print(f"warning: --{old} is deprecated; use --{new}", file=sys.stderr, flush=True)
      original.parse(argument)
      self.present += 1

    def _parse_from_default(self, value):
      return value  # already parsed by --new

    @property
    def value(self):
      return original.value

    @value.setter
    def value(self, value):
      original.value = value

  flags.DEFINE_flag(
      _DeprecatedAlias(original.parser, original.serializer, old, original.default,
                       f"Deprecated (removed in the next release): use --{new}.",
                       boolean=original.boolean),
      flags.FLAGS, _defining_module())
  DEPRECATED_ALIASES[old] = new


def parse_flags(argv: Sequence[str]) -> list[str]:
  """absl's flag parser for :func:`absl.app.run`, but a flag that cannot be parsed (unknown
  flag, ``--num_trials=abc`` for an integer, a value a flag's own validator rejects) is one line
  on stderr and exit status 2, instead of absl's two-line "FATAL Flags parsing error". ``--help``
  and its relatives work as usual. A deprecated alias (:func:`deprecated_alias`) prints one
  warning line before that."""
  _warned.clear()
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:
    fail(f"{error}; see --help")


# Output directories this process claimed: (absolute path, topmost directory the claim created
# or None when it existed before).
_claimed_dirs: list[tuple[str, str | None]] = []


def claim_output_dir(path: str, flag: str = "output_dir") -> str | None:
  """Claims ``path`` (``--output_dir``) for this process's lifetime, creating it: an exclusive
  lock on ``path/.lock`` (:func:`dpaudit.results.lock_directory`). Call it after the flags are
  validated and before any work. Raises ValueError (exit 2, one line) when ``path`` is empty or
  a file, or when another live process holds the directory (naming its process id); OSError when
  it cannot be created. In a multi-process run only process 0 claims it (returns None
  elsewhere): it alone writes results. Returns the absolute path."""
  from dpaudit import results
  if not path:
    raise ValueError(f"--{flag} is empty; give a directory")
  if runtime.process_index() != 0:
    return None
  absolute = os.path.abspath(os.path.expanduser(path))
  if os.path.exists(absolute) and not os.path.isdir(absolute):
    raise ValueError(f"--{flag}={path} is a file, not a directory")
  top = None
  probe = absolute
  while not os.path.lexists(probe):
    top, probe = probe, os.path.dirname(probe)
  if os.path.lexists(probe) and not os.path.isdir(probe):
    raise ValueError(f"--{flag}={path} lies under {probe}, which is a file, not a directory")
  if any(absolute == claimed for claimed, _ in _claimed_dirs):
    return absolute
  results.lock_directory(absolute)
  _claimed_dirs.append((absolute, top))
  return absolute


def _release_claims() -> None:
  """After a clean failure: releases this process's claims, and removes each output directory
  a claim created if nothing but the lock file (and empty directories) was written there."""
  from dpaudit import results
  while _claimed_dirs:
    path, top = _claimed_dirs.pop()
    if top is not None:  # removed while still locked: no other process can have started there
      written = [os.path.join(root, name) for root, _, names in os.walk(top) for name in names]
      if not written or written == [os.path.join(path, results.LOCK_FILE)]:
        shutil.rmtree(top, ignore_errors=True)
    results.unlock_directory(path)


def cli(main: Callable[[Sequence[str]], Any]) -> Callable[[Sequence[str]], Any]:
  """Wraps an experiment's ``main`` so that what the user caused ends in one line and exit
  status 2 (ValueError, OSError, out of memory; see the module docstring) and Ctrl-C in one
  line and exit status 130. Other exceptions (bugs) keep their traceback. :func:`run` applies
  it; decorating ``main`` with it as well is harmless."""
  if getattr(main, "_dpaudit_cli", False):
    return main

  @functools.wraps(main)
  def wrapped(argv):
    if len(argv) > 1:
      fail(f"unexpected positional arguments {argv[1:]}; use --flag=value")
    try:
      return main(argv)
    except KeyboardInterrupt:
      _release_claims()
      fail("interrupted", EXIT_INTERRUPTED)
    except ValueError as error:  # DirectoryInUseError included
      message = str(error)
    except OSError as error:
      message = describe_os_error(error)
    except Exception as error:  # pylint: disable=broad-except
      if not is_out_of_memory(error):
        raise
      message = out_of_memory_message(error, getattr(main, "__module__", None))
    _release_claims()
    fail(message)

  wrapped._dpaudit_cli = True  # pylint: disable=protected-access
  return wrapped


def _is_benchmark(main: Callable) -> bool:
  """Whether ``main`` is a benchmark's (its module, or the ``-m`` module that runs it, is under
  ``experiments.benchmarks``)."""
  spec = getattr(sys.modules.get("__main__"), "__spec__", None)
  names = (getattr(main, "__module__", "") or "", getattr(spec, "name", "") or "")
  return any(name.startswith("experiments.benchmarks.") for name in names)


def run(main: Callable[[Sequence[str]], Any], argv: Sequence[str] | None = None) -> None:
  """The entry point of every experiment and benchmark: ``absl.app.run`` with :func:`cli`
  around ``main`` and the one-line flag parser :func:`parse_flags`. ``argv`` (default
  ``sys.argv``) lets a test drive a CLI in-process exactly as its command line does."""
  from absl import app

  from dpaudit import compilation_cache
  from dpaudit.estimators import _compile
  # Experiments take the compiled programs from the first call (bit-identical results on every
  # run and resume), not the exact host path that answers a library caller's first small call.
  os.environ.setdefault(_compile.FIRST_CALLS_VARIABLE, "compiled")
  if _is_benchmark(main):  # benchmarks time compilation: no persistent cache to hide it
    compilation_cache.disable()
  for name in SHARED_FLAGS:  # --help shows the key flags of sys.argv[0], the main module
    if name in flags.FLAGS:
      flags.FLAGS.register_key_flag_for_module(sys.argv[0], flags.FLAGS[name])
  app.run(cli(main), argv=None if argv is None else list(argv), flags_parser=parse_flags)

