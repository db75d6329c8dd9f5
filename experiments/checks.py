"""Flag checks of the experiments: every size, rate and list flag is validated before anything is
written, with a ValueError naming the flag, its value and the valid range (one line, exit 2
through :func:`experiments.cli.cli`).

Counts are at most :data:`MAX_COUNT`, and what must be held in memory at once is checked against
the machine's physical memory (:func:`check_memory`, :func:`check_widths`), so that an absurd
size is a one-line refusal, not an allocation error minutes into the run. Flag-free.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

MAX_COUNT = 2**40
"""Largest count (trials, runs, models, resamples...) any experiment accepts: about 1.1e12, a
day of Monte Carlo at 10^7 trials per second. Counts that are held in memory are also checked
against the machine's memory (:func:`check_memory`)."""


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


def repetition_seeds(seed: int, repetitions: int, flag: str = "repetitions"
                     ) -> tuple[int, ...]:
  """Seeds ``seed, seed + 1, ..., seed + repetitions - 1``: repetition i is the run at
  ``--seed=seed+i``. ValueError for ``repetitions < 1`` or a seed outside [0, 2^63), naming
  ``--flag`` (the count's flag: ``num_repeats``, or ``repetitions`` where not yet renamed)."""
  if isinstance(repetitions, bool) or not isinstance(repetitions, int) or repetitions < 1:
    raise ValueError(f"--{flag}={repetitions!r} must be an integer >= 1")
  if not 0 <= seed or seed + repetitions > 2**63:
    raise ValueError(f"--seed={seed} with --{flag}={repetitions} is outside the valid "
                     "range: seeds must lie in [0, 2^63)")
  return tuple(seed + i for i in range(repetitions))


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

