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

The parts: :mod:`experiments.cli` (entry point, claims), :mod:`experiments.errors` (one-line
failures), :mod:`experiments.checks` (flag checks), :mod:`experiments.runtime` (float64, cache,
distributed runs, results.json); this module re-exports them and defines the shared flags.
"""

from __future__ import annotations

from absl import flags

# The parts, re-exported so that every ``common.X`` of the experiments keeps working.
from dpaudit.accounting.dpsgd import quiet_accountant  # noqa: F401
from dpaudit.prng import PRNG_IMPLS, make_key  # noqa: F401
from experiments import runtime
from experiments.checks import (  # noqa: F401
  MAX_COUNT,
  check_count,
  check_counts,
  check_delta,
  check_float,
  check_floats,
  check_memory,
  check_seed,
  check_significance,
  check_widths,
  parse_floats,
  parse_ints,
  physical_memory_bytes,
  repetition_seeds,
)
from experiments.cli import (  # noqa: F401
  DEPRECATED_ALIASES,
  SHARED_FLAGS,
  claim_output_dir,
  cli,
  deprecated_alias,
  parse_flags,
  run,
)
from experiments.errors import (  # noqa: F401
  EXIT_INTERRUPTED,
  EXIT_USER_ERROR,
  MAX_MESSAGE_CHARS,
  describe_os_error,
  fail,
  is_out_of_memory,
  one_line,
  out_of_memory_message,
  size_flags,
)
from experiments.runtime import (  # noqa: F401
  DISTRIBUTED_ENV,
  JAX_BACKEND_COMPILE_EVENT,
  JAX_COMPILE_EVENTS,
  Timer,
  enable_compilation_cache,
  enable_x64,
  initialize_distributed,
  is_main_process,
  quiet_logging,
  start_float64_experiment,
  versions,
  write_results,
)

# The shared flags (experiments.cli.SHARED_FLAGS), defined once here: every CLI imports this
# module, and experiments.cli.run lists them in the CLI's --help.
flags.DEFINE_string(
    "compilation_cache_dir", runtime.default_cache_dir(),
    "JAX persistent compilation cache of the experiments (default "
    "$DPAUDIT_COMPILATION_CACHE_DIR or ~/.cache/dpaudit/compilation_cache): reruns, resumed "
    "runs and sweep cells load compiled programs instead of compiling again. Empty: off.")
flags.DEFINE_enum(
    "distributed", "auto", ["auto", "off"],
    "Multi-process runs (jax.distributed): auto initialises when launched as one of several "
    "processes (launch.multihost's DPAUDIT_* variables, JAX_COORDINATOR_ADDRESS, or a Slurm "
    "job step with several tasks; on Cloud TPU pods JAX detects the slice itself); off never.")


def define_num_repeats_flag(what: str) -> None:
  """Defines ``--num_repeats``, the one flag by which every experiment repeats itself: N
  independent repetitions of ``what``, reported as the median and range over them
  (:func:`dpaudit.results.spread`), with ``--repetitions`` as its deprecated alias. Each
  experiment's help says how repetition i derives its seed; a single run at that seed
  reproduces it. Check it with ``repetition_seeds(FLAGS.seed, FLAGS.num_repeats,
  flag="num_repeats")``."""
  flags.DEFINE_integer(
      "num_repeats", 1,
      f"Independent repetitions of {what} (>= 1); tables show the median [min, max] over them "
      "and results.json each repetition and its spread.")
  deprecated_alias("repetitions", "num_repeats")
