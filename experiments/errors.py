"""Clean failures of the experiments: one-line messages, exit statuses, and the messages for
OSError and running out of memory (see :mod:`experiments.common` for the rule). Flag-free: it
reads the flags' registry only to name the size flags to lower."""

from __future__ import annotations

import sys

import jax
from absl import flags

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
MAX_MESSAGE_CHARS = 1000


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
