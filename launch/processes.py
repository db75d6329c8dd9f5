"""Child processes that end with their launcher, stop cleanly, and leave nothing behind.

What the launchers (:mod:`launch.local`, :mod:`launch.job`, :mod:`launch.multihost`) guarantee
with these helpers, on Linux:

* a child started with ``preexec_fn=die_with_parent(sig)`` receives ``sig`` when its launcher
  dies in any way, ``kill -9`` included (``prctl(PR_SET_PDEATHSIG)``; a child whose launcher is
  already gone when it starts kills itself at once). The signal reaches that one process: a
  guard process (:mod:`launch.job`) passes it on to its experiment's whole process group;
* :func:`stop` ends a child's process group: SIGTERM, then SIGKILL after a grace period;
* :func:`reap` kills whatever is left in a finished child's process group before collecting
  the child (the group id cannot be reused while the child is unreaped, so no stranger is
  signalled);
* :class:`StopRequest` turns SIGTERM/SIGINT/SIGHUP into a flag that the launcher's loop polls:
  nothing is raised from a signal handler, so a signal cannot land inside ``logging``'s or any
  other lock and be swallowed.

Elsewhere (no ``prctl``) the parent-death signal is not available and only the rest holds.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable

PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _prctl():
  if not sys.platform.startswith("linux"):
    return None
  try:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return libc.prctl
  except (OSError, AttributeError):
    return None


_PRCTL = _prctl()


def die_with_parent(sig: int = signal.SIGTERM, cores: Iterable[int] | None = None,
                    new_group: bool = False) -> Callable[[], None]:
  """A ``preexec_fn`` for ``subprocess.Popen``: the child gets ``sig`` when this process dies
  (``PR_SET_PDEATHSIG``, Linux), optionally pinned to ``cores`` and in a process group of its
  own (``new_group``; use ``start_new_session=True`` for a session of its own instead). Runs
  between fork and exec, so it only makes system calls; call it from the thread that will
  outlive the child (the signal fires when the *thread* that forked ends)."""
  parent = os.getpid()
  cores = set(cores) if cores is not None else None

  def preexec() -> None:
    if new_group:
      os.setpgid(0, 0)
    if cores is not None:
      os.sched_setaffinity(0, cores)
    if _PRCTL is not None:
      _PRCTL(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the death signal was armed
      os.kill(os.getpid(), signal.SIGKILL)

  return preexec


def exited(process: subprocess.Popen) -> bool:
  """True once ``process`` has ended, without collecting it (``waitid(WNOWAIT)``): until
  :func:`reap`, its process id and group id stay reserved."""
  if process.returncode is not None:
    return True
  try:
    info = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
  except ChildProcessError:  # collected elsewhere
    return True
  return info is not None and info.si_pid == process.pid


def kill_group(pgid: int, sig: int) -> bool:
  """Sends ``sig`` to process group ``pgid``; False when the group no longer exists."""
  try:
    os.killpg(pgid, sig)
  except ProcessLookupError:
    return False
  except PermissionError:  # a member changed user: nothing this process may signal
    return False
  return True


def reap(process: subprocess.Popen) -> int:
  """Kills what is left of ``process``'s process group (when it leads one), then collects
  ``process`` and returns its exit status (negative: killed by that signal)."""
  if process.returncode is None:
    with contextlib.suppress(OSError):
      if os.getpgid(process.pid) == process.pid:
        kill_group(process.pid, signal.SIGKILL)
  return process.wait()


def stop(processes: Iterable[subprocess.Popen], grace: float = 10.0,
         poll: float = 0.05) -> None:
  """Stops each process's group: SIGTERM now, SIGKILL to those still running after ``grace``
  seconds. Each must lead its own process group (``start_new_session``); they are collected."""
  processes = [p for p in processes if p.returncode is None]
  for p in processes:
    if not exited(p):
      kill_group(p.pid, signal.SIGTERM)
  deadline = time.monotonic() + grace
  while time.monotonic() < deadline and not all(exited(p) for p in processes):
    time.sleep(poll)
  for p in processes:
    reap(p)


class Watch:
  """Whether process ``pid`` (not a child of this one) is still alive, without being fooled
  by the reuse of its id: a pidfd (Linux >= 5.3) becomes readable when it exits. Elsewhere,
  ``os.kill(pid, 0)``."""

  def __init__(self, pid: int):
    self.pid, self.fd = pid, None
    try:
      self.fd = os.pidfd_open(pid)
    except ProcessLookupError:
      self.gone = True
      return
    except (AttributeError, OSError):  # no pidfd_open: fall back to signal 0
      pass
    self.gone = False

  def alive(self) -> bool:
    if self.gone:
      return False
    if self.fd is not None:
      self.gone = bool(select.select([self.fd], [], [], 0)[0])
    else:
      try:
        os.kill(self.pid, 0)
      except ProcessLookupError:
        self.gone = True
      except PermissionError:
        pass
    return not self.gone


class StopRequest:
  """SIGTERM, SIGINT and SIGHUP set :attr:`signum` (the first one received) instead of raising;
  the owner polls :meth:`__bool__`. :meth:`restore` puts the previous handlers back."""

  def __init__(self, signals: Iterable[int] = STOP_SIGNALS):
    self.signum: int | None = None
    self._previous = {}
    for sig in signals:
      self._previous[sig] = signal.signal(sig, self._handle)

  def _handle(self, signum, frame) -> None:  # pylint: disable=unused-argument
    self.request(signum)

  def request(self, signum: int) -> None:
    """Requests a stop as if signal ``signum`` had arrived."""
    if self.signum is None:
      self.signum = signum

  def __bool__(self) -> bool:
    return self.signum is not None

  def sleep(self, seconds: float) -> None:
    """Sleeps up to ``seconds``, returning early once a stop is requested."""
    deadline = time.monotonic() + seconds
    while not self and time.monotonic() < deadline:
      time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

  def restore(self) -> None:
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)
    self._previous = {}


def check_directory(path: str, flag: str) -> str:
  """Raises ValueError (one line) unless ``path`` can become a writable directory: not empty,
  no component too long, no file where a directory must be, and the nearest existing ancestor
  a directory this process may write (``os.access``; root passes unless the file system is
  read-only). Creates nothing. Returns the absolute path."""
  if not path or "\0" in path:
    raise ValueError(f"--{flag}={path!r} is not a directory path")
  absolute = os.path.abspath(os.path.expanduser(path))
  limit = _name_max(absolute)
  if any(len(part.encode()) > limit for part in absolute.split(os.sep)) or len(
      absolute.encode()) >= 4096:
    raise ValueError(f"--{flag}={path[:60]}{'...' if len(path) > 60 else ''} is too long a "
                     "path")
  probe = absolute
  while not os.path.lexists(probe):
    probe = os.path.dirname(probe)
  if not os.path.isdir(probe):
    what = "is a file" if probe == absolute else f"lies under the file {probe}"
    raise ValueError(f"--{flag}={path} {what}, not a directory")
  if not os.access(probe, os.W_OK | os.X_OK):
    raise ValueError(f"--{flag}={path}: {probe} is not writable")
  return absolute


def _name_max(path: str) -> int:
  probe = path
  while not os.path.isdir(probe):
    probe = os.path.dirname(probe)
  try:
    return os.pathconf(probe, "PC_NAME_MAX")
  except (OSError, ValueError):
    return 255


def directory_holder(directory: str) -> int | None:
  """The process id of the live process that claimed ``directory`` (an experiment holds its
  ``--output_dir`` while it runs: :func:`dpaudit.results.lock_directory`), or None."""
  from dpaudit import results  # numpy only; imported when a launcher needs it
  return results.directory_holder(directory)


def lock_directory(directory: str) -> str:
  """:func:`dpaudit.results.lock_directory`: claims ``directory`` for this process's lifetime
  (ValueError naming the holder when another live process has it; OSError when it cannot be
  created)."""
  from dpaudit import results
  return results.lock_directory(directory)


def describe_os_error(error: OSError) -> str:
  """``strerror: filename`` of an OSError, on one line."""
  text = error.strerror or errno.errorcode.get(error.errno or 0, "") or str(error)
  return " ".join((f"{text}: {error.filename}" if error.filename else text).split())


def parse_flags(argv: list[str]) -> list[str]:
  """The ``flags_parser`` of ``absl.app.run`` for the launchers: a flag that cannot be parsed
  (unknown, ``--parallelism=abc``) is one line on stderr and exit status 2 instead of absl's
  two-line "FATAL Flags parsing error"."""
  from absl import flags
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:
    print(f"error: {' '.join(str(error).split())}; see --help", file=sys.stderr)
    sys.exit(2)
