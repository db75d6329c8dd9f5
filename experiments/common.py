"""Shared plumbing for experiment entry points (flags in, results.json out, clean errors).

Every experiment and benchmark ends in ``common.run(main)`` (:func:`run`), which parses the
flags and calls ``main`` through :func:`cli`. The rule for how a command ends:

* exit 0: it finished;
* exit 2, ONE line ``error: ...`` on stderr and no traceback: the command was refused or
  stopped because of what it was given or where it ran - a flag absl cannot parse or an
  unknown flag, a flag value outside its valid range (ValueError; the line names the flag, its
  value and the valid range), a path that cannot be created, read or written (OSError; the
  line names the path and the reason: an ``--output_dir`` that is a file or lies under one, a
  missing data file, a full disk), running out of memory (MemoryError or XLA
  RESOURCE_EXHAUSTED; the line names the size flags to lower), or an ``--output_dir`` that
  another live process holds;
* exit 130, one line: interrupted (Ctrl-C);
* exit 1 with a traceback: anything else, which is a bug to report.

Flags are checked before anything is written: each experiment validates its flags and builds
its configuration, then claims ``--output_dir`` with :func:`claim_output_dir` and only then
starts work. The claim is an exclusive lock on ``--output_dir/.lock`` held for the process's
lifetime (:func:`dpaudit.results.lock_directory`; the kernel releases it when the process ends
in any way, so a stale lock never blocks a rerun). A second run on the same directory while
the first is alive exits 2 with one line naming the first one's process id. In a multi-process
run only process 0 (the one that writes) claims it, and :func:`initialize_distributed` comes
before the validation (which may start the XLA backend, after which a process cannot join). A
run that fails with one of the errors above before writing anything removes the output
directory it created, so a refused command leaves nothing behind.

Sizes: counts are at most :data:`MAX_COUNT`, and what must be held in memory at once is checked
against the machine's physical memory (:func:`check_memory`, :func:`check_widths`), so that an
absurd size is a one-line refusal naming the flag and its valid range, not an allocation error
minutes into the run.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import math
import os
import platform
import shutil
import sys
import time
from typing import Any, Callable, Sequence

import jax
from absl import flags

from dpaudit.accounting.dpsgd import quiet_accountant  # re-exported for experiments
from dpaudit.prng import PRNG_IMPLS, make_key  # re-exported for experiments


def enable_x64() -> None:
  """Estimators and accounting run in float64; mechanisms choose their own (float32) noise."""
  jax.config.update("jax_enable_x64", True)
  # jax logs at INFO that it probed for a TPU on every start; that is noise for our users.
  logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)


def _default_cache_dir() -> str:
  return os.environ.get("DPAUDIT_COMPILATION_CACHE_DIR",
                        os.path.join("~", ".cache", "dpaudit", "jax_compilation_cache"))


flags.DEFINE_string(
    "compilation_cache_dir", _default_cache_dir(),
    "JAX persistent compilation cache of the experiments (default "
    "$DPAUDIT_COMPILATION_CACHE_DIR or ~/.cache/dpaudit/jax_compilation_cache): reruns, resumed "
    "runs and sweep cells load compiled programs instead of compiling again. Empty: off.")


flags.DEFINE_enum(
    "distributed", "auto", ["auto", "off"],
    "Multi-process runs (jax.distributed): auto initialises when launched as one of several "
    "processes (launch.multihost's DPAUDIT_* variables, JAX_COORDINATOR_ADDRESS, or a Slurm "
    "job step with several tasks; on Cloud TPU pods JAX detects the slice itself); off never.")

DISTRIBUTED_ENV = ("DPAUDIT_COORDINATOR_ADDRESS", "DPAUDIT_NUM_PROCESSES", "DPAUDIT_PROCESS_ID")

_process_index = 0  # set by initialize_distributed; read by claim_output_dir (no backend start)


def initialize_distributed() -> int:
  """Joins a multi-process run when this process was started as part of one; returns the
  process index (0 when alone). Then ``jax.devices()`` spans every process, and
  :func:`dpaudit.montecarlo.count_outcomes` shards its trials over all of them. On CPU the
  collectives go through Gloo. Only process 0 should write results (:func:`is_main_process`).
  """
  mode = flags.FLAGS.distributed if flags.FLAGS.is_parsed() else "auto"
  env = os.environ
  if mode == "off":
    return 0
  if all(name in env for name in DISTRIBUTED_ENV):
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=env["DPAUDIT_COORDINATOR_ADDRESS"],
                               num_processes=int(env["DPAUDIT_NUM_PROCESSES"]),
                               process_id=int(env["DPAUDIT_PROCESS_ID"]))
  elif "JAX_COORDINATOR_ADDRESS" in env or int(env.get("SLURM_STEP_NUM_TASKS", "1")) > 1:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize()  # reads the JAX_* variables or Slurm's own
  global _process_index
  _process_index = jax.process_index()
  return _process_index


def is_main_process() -> bool:
  return jax.process_index() == 0


def enable_compilation_cache() -> str | None:
  """Turns on JAX's persistent compilation cache at ``--compilation_cache_dir``, so that a rerun,
  a resumed run or the next cell of a sweep loads its compiled programs instead of compiling
  them again (seconds each on a CPU).

  Programs that took at least 0.5 s to compile (``$DPAUDIT_COMPILATION_CACHE_MIN_SECS`` to
  change it) are kept, keyed by JAX on the program, the JAX version and the device, so a stale
  entry is never used. Every experiment calls this; benchmarks do not (they time compilation).
  Returns the directory, or None when it is off."""
  path = flags.FLAGS.compilation_cache_dir if flags.FLAGS.is_parsed() else _default_cache_dir()
  if not path:
    return None
  path = os.path.expanduser(path)
  os.makedirs(path, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", path)
  minimum = os.environ.get("DPAUDIT_COMPILATION_CACHE_MIN_SECS", "0.5")
  try:
    minimum = float(minimum)
  except ValueError:
    raise ValueError(f"DPAUDIT_COMPILATION_CACHE_MIN_SECS={minimum!r} must be a number of "
                     "seconds") from None
  jax.config.update("jax_persistent_cache_min_compile_time_secs", minimum)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return path


def quiet_logging() -> None:
  """Silences jax's TPU probe and absl/tfds INFO lines unless the user passed --verbosity."""
  from absl import flags
  from absl import logging as absl_logging
  logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
  if not flags.FLAGS["verbosity"].present:
    absl_logging.set_verbosity(absl_logging.WARNING)


def start_float64_experiment() -> None:
  """The usual start of an experiment's ``main``: the persistent compilation cache, quiet
  logging and float64 (:func:`enable_compilation_cache`, :func:`quiet_logging`,
  :func:`enable_x64`)."""
  enable_compilation_cache()
  quiet_logging()
  enable_x64()


def parse_floats(name: str, values: Sequence[str]) -> tuple[float, ...]:
  """Parses a comma-separated absl list flag into floats, naming the flag on error."""
  try:
    return tuple(float(v) for v in values)
  except ValueError:
    raise ValueError(f"--{name}={','.join(values)} must be a comma-separated list of numbers"
                     ) from None


def parse_ints(name: str, values: Sequence[str]) -> tuple[int, ...]:
  """Parses a comma-separated absl list flag into integers, naming the flag on error."""
  try:
    return tuple(int(v) for v in values)
  except ValueError:
    raise ValueError(f"--{name}={','.join(values)} must be a comma-separated list of integers"
                     ) from None


def define_repetitions_flag(what: str) -> None:
  """Defines ``--repetitions``, the one flag by which every experiment repeats itself: N
  independent repetitions of ``what``, reported as the median and range over them
  (:func:`dpaudit.results.spread`). Each experiment's help says how repetition i derives its
  seed; a single run at that seed reproduces it."""
  flags.DEFINE_integer(
      "repetitions", 1,
      f"Independent repetitions of {what} (>= 1); tables show the median [min, max] over them "
      "and results.json each repetition and its spread.")


def repetition_seeds(seed: int, repetitions: int) -> tuple[int, ...]:
  """Seeds ``seed, seed + 1, ..., seed + repetitions - 1``: repetition i is the run at
  ``--seed=seed+i``. ValueError for ``repetitions < 1`` or a seed outside [0, 2^63)."""
  if isinstance(repetitions, bool) or not isinstance(repetitions, int) or repetitions < 1:
    raise ValueError(f"--repetitions={repetitions!r} must be an integer >= 1")
  if not 0 <= seed or seed + repetitions > 2**63:
    raise ValueError(f"--seed={seed} with --repetitions={repetitions} is outside the valid "
                     "range: seeds must lie in [0, 2^63)")
  return tuple(seed + i for i in range(repetitions))


def versions() -> dict[str, str]:
  out = {"python": platform.python_version()}
  for package in ("dpaudit", "jax", "jaxlib", "numpy", "scipy", "dp-accounting", "flax",
                  "optax", "matplotlib"):
    try:
      out[package] = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
      out[package] = "not installed"
  out["devices"] = ", ".join(f"{d.platform}:{d.device_kind}" for d in jax.devices())
  return out


def write_results(output_dir: str, name: str, config: dict[str, Any], result: dict[str, Any],
                  wall_time_s: float, extra: dict[str, Any] | None = None) -> str:
  """Writes ``results.json`` atomically, as strict JSON (non-finite numbers as the strings
  "Infinity", "-Infinity", "NaN": :mod:`dpaudit.results`), and returns its path.

  The result's keys are at the top level, next to ``experiment``, ``config`` (the full run
  configuration, seed included), ``versions``, ``wall_time_s`` and ``command``.
  """
  from dpaudit import results
  payload = {**result, "experiment": name, "config": config, "versions": versions(),
             "wall_time_s": wall_time_s, "command": " ".join(sys.argv)}
  if extra:
    payload.update(extra)
  return results.write_json(os.path.join(output_dir, "results.json"), payload)


# ------------------------------------------------------------------ clean failures, entry point

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
MAX_MESSAGE_CHARS = 1000

MAX_COUNT = 2**40
"""Largest count (trials, runs, models, resamples...) any experiment accepts: about 1.1e12, a
day of Monte Carlo at 10^7 trials per second. Counts that are held in memory are also checked
against the machine's memory (:func:`check_memory`)."""


def one_line(message: str) -> str:
  """``message`` on one line (newlines and runs of spaces become single spaces), at most
  :data:`MAX_MESSAGE_CHARS` characters."""
  text = " ".join(str(message).split())
  return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS - 3] + "..."


def fail(message: str, code: int = EXIT_USER_ERROR):
  """Prints ``error: <message>`` as one line on stderr and exits with ``code``."""
  sys.stdout.flush()
  print(f"error: {one_line(message)}", file=sys.stderr, flush=True)
  sys.exit(code)


def parse_flags(argv: Sequence[str]) -> list[str]:
  """absl's flag parser for :func:`absl.app.run`, but a flag that cannot be parsed (unknown
  flag, ``--num_trials=abc`` for an integer, a value a flag's own validator rejects) is one line
  on stderr and exit status 2, instead of absl's two-line "FATAL Flags parsing error". ``--help``
  and its relatives work as usual."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:
    fail(f"{error}; see --help")


def describe_os_error(error: OSError) -> str:
  """An OSError as "<reason>: <path>" (both paths of a rename or copy)."""
  reason = error.strerror or type(error).__name__
  if error.filename is None:
    return str(error) or reason
  paths = f"{error.filename}" + (f" -> {error.filename2}" if error.filename2 else "")
  return f"{reason}: {paths}"


def is_out_of_memory(error: BaseException) -> bool:
  """MemoryError (NumPy's failed allocations included), or an XLA runtime error that reports
  exhausted memory (RESOURCE_EXHAUSTED, "Out of memory", a failed allocation)."""
  if isinstance(error, MemoryError):
    return True
  runtime_error = getattr(jax.errors, "JaxRuntimeError", ())
  if not (isinstance(error, runtime_error)
          or type(error).__name__ in ("XlaRuntimeError", "JaxRuntimeError")):
    return False
  text = str(error)
  return any(marker in text for marker in ("RESOURCE_EXHAUSTED", "Out of memory",
                                           "out of memory", "llocat"))


def size_flags(module_name: str | None = None) -> tuple[list[str], list[str]]:
  """The flags to lower when a run runs out of memory: (the numeric and list flags given on the
  command line as ``--name=value``, or every integer flag of the experiment's module when none
  was given; the module's chunk-size flags not among them)."""
  given, defined, chunks = [], [], []
  module = sys.modules.get(module_name or "__main__")
  try:
    module_flags = flags.FLAGS.get_key_flags_for_module(module) if module else []
  except Exception:  # pylint: disable=broad-except
    module_flags = []
  for flag in module_flags:
    value = flag.value
    if flag.name == "seed" or isinstance(value, bool) or not isinstance(value, (int, float, list)):
      continue
    if flag.present:
      given.append(f"--{flag.name}=" + (",".join(value) if isinstance(value, list) else
                                         f"{value}"))
    elif isinstance(value, int):
      defined.append(f"--{flag.name}")
      if flag.name.endswith("chunk_size"):
        chunks.append(f"--{flag.name}")
  return (given, chunks) if given else (defined, [])


def out_of_memory_message(error: BaseException, module_name: str | None = None) -> str:
  """"out of memory: lower <the size flags>" and the first words of the error."""
  names, chunks = size_flags(module_name)
  hint = f"lower {', '.join(names[:8])}" if names else "lower the sizes of the run"
  if chunks:
    hint += f", or set {' or '.join(chunks)} to bound the memory of one call"
  return f"out of memory: {hint} [{one_line(str(error))[:200]}]"


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
  if _process_index != 0:
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


def run(main: Callable[[Sequence[str]], Any], argv: Sequence[str] | None = None) -> None:
  """The entry point of every experiment and benchmark: ``absl.app.run`` with :func:`cli`
  around ``main`` and the one-line flag parser :func:`parse_flags`. ``argv`` (default
  ``sys.argv``) lets a test drive a CLI in-process exactly as its command line does."""
  from absl import app
  app.run(cli(main), argv=None if argv is None else list(argv), flags_parser=parse_flags)


def check_count(flag: str, value: int, low: int = 1, high: int = MAX_COUNT) -> int:
  """``--flag`` is an integer in [low, high] (ValueError naming the flag and the range)."""
  if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
    raise ValueError(f"--{flag}={value} is outside the valid range [{low}, {high}]")
  return value


def check_counts(flag: str, values: Sequence[int], low: int = 1, high: int = MAX_COUNT
                 ) -> tuple[int, ...]:
  """A non-empty list flag of integers, each in [low, high]."""
  if not values:
    raise ValueError(f"--{flag} is empty; give at least one value")
  for value in values:
    if not low <= value <= high:
      raise ValueError(f"--{flag} contains {value}, outside the valid range [{low}, {high}]")
  return tuple(values)


def check_float(flag: str, value: float, low: float | None = None, high: float | None = None,
                *, low_open: bool = False, high_open: bool = False,
                allow_inf: bool = False) -> float:
  """``--flag`` is a number in the interval (NaN never; +-inf only with ``allow_inf`` and when
  the interval contains it)."""
  ok = not math.isnan(value) and (allow_inf or math.isfinite(value))
  if ok and low is not None:
    ok = value > low if low_open else value >= low
  if ok and high is not None:
    ok = value < high if high_open else value <= high
  if not ok:
    lo = "(-inf" if low is None else ("(" if low_open else "[") + f"{low:g}"
    hi = ("inf" + ("]" if allow_inf else ")")) if high is None else (
        f"{high:g}" + (")" if high_open else "]"))
    raise ValueError(f"--{flag}={value} is outside the valid range {lo}, {hi}")
  return value


def check_floats(flag: str, values: Sequence[float], low: float | None = None,
                 high: float | None = None, *, low_open: bool = False, high_open: bool = False,
                 allow_inf: bool = False) -> tuple[float, ...]:
  """A non-empty list flag of numbers, each as :func:`check_float`."""
  if not values:
    raise ValueError(f"--{flag} is empty; give at least one value")
  for value in values:
    check_float(flag, value, low, high, low_open=low_open, high_open=high_open,
                allow_inf=allow_inf)
  return tuple(values)


def check_seed(value: int, flag: str = "seed") -> int:
  """A PRNG seed in [0, 2^63)."""
  return check_count(flag, value, 0, 2**63 - 1)


def check_significance(value: float, flag: str = "significance") -> float:
  return check_float(flag, value, 0.0, 1.0, low_open=True, high_open=True)


def check_delta(value: float, flag: str = "delta") -> float:
  return check_float(flag, value, 0.0, 1.0, high_open=True)


def physical_memory_bytes() -> int:
  """The machine's physical memory (``os.sysconf``); 2^40 bytes when it cannot be read."""
  try:
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
  except (ValueError, OSError, AttributeError):
    return 2**40


def _bytes(n: float) -> str:
  for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
    if n < 1024 or unit == "EiB":
      return f"{n:.3g} {unit}"
    n /= 1024
  return f"{n:.3g} EiB"


def check_widths(flag: str, widths: Sequence[int], examples: int, inputs: int = 4,
                 outputs: int = 2) -> tuple[int, ...]:
  """Hidden widths of an MLP (each >= 1) whose float32 weights, optimizer state and per-example
  gradients over ``examples`` examples fit in the machine's memory (at least ``inputs``
  features and ``outputs`` classes around them)."""
  sizes = [inputs, *widths, outputs]
  for width in widths:
    if not 1 <= width <= MAX_COUNT:
      raise ValueError(f"--{flag} contains {width}, outside the valid range [1, {MAX_COUNT}]")
  params = sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))
  need, memory = 4.0 * params * (examples + 3), physical_memory_bytes()
  if need > memory:
    raise ValueError(f"--{flag}={','.join(str(w) for w in widths)} is too large: the model's "
                     f"weights and per-example gradients would need at least {_bytes(need)}, "
                     f"more than this machine's {_bytes(memory)}")
  return tuple(widths)


def check_memory(flag: str, value: int, bytes_each: float, low: int = 1,
                 what: str = "") -> int:
  """``--flag`` in [low, largest value whose ``value * bytes_each`` bytes fit in the machine's
  physical memory]: an upfront refusal of sizes that cannot fit, instead of an allocation
  failure deep in the run. ``bytes_each`` is a lower estimate of the memory per unit."""
  memory = physical_memory_bytes()
  high = max(low, int(memory // max(bytes_each, 1e-300)))
  if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
    need = ""
    if isinstance(value, int) and value > high:
      need = (f": it would need at least {_bytes(value * bytes_each)}"
              f"{' for ' + what if what else ''}, more than this machine's {_bytes(memory)}")
    raise ValueError(f"--{flag}={value} is outside the valid range [{low}, {high}]{need}")
  return value


JAX_BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
JAX_COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
                      "/jax/core/compile/jaxpr_to_mlir_module_duration", JAX_BACKEND_COMPILE_EVENT)
"""The ``jax.monitoring`` duration events of compiling a program: tracing it to a jaxpr,
lowering it to StableHLO, XLA's compile. Their sum is the compile time the benchmarks report."""


class Timer:
  def __enter__(self):
    self.start = time.perf_counter()
    return self

  def __exit__(self, *exc):
    self.seconds = time.perf_counter() - self.start
