"""Argument validation shared by every dpaudit layer.

Public functions call these helpers before doing any work so that bad input fails with a
``ValueError`` naming the argument, the offending value and the valid range (docs/design.md,
convention 6). Value checks only run on concrete inputs: inside ``jit``/``vmap`` the values
are abstract tracers, so only shapes can be checked there, and the caller is expected to have
validated at the boundary.
"""

from __future__ import annotations

import functools
import math
import numbers
import os
from collections.abc import Iterable
from typing import Any

import jax
import numpy as np


def is_concrete(value: Any) -> bool:
  """True when ``value`` holds data (not a tracer inside jit/vmap/grad)."""
  leaves = jax.tree_util.tree_leaves(value)
  return not any(isinstance(leaf, jax.core.Tracer) for leaf in leaves)


def _first_offender(values: np.ndarray, bad: np.ndarray) -> Any:
  flat = np.asarray(values).reshape(-1)
  idx = int(np.flatnonzero(np.asarray(bad).reshape(-1))[0])
  item = flat[idx].item()
  return item if values.ndim == 0 else f"{item} (at flat index {idx})"


def _as_array(name: str, value: Any) -> np.ndarray:
  """``np.asarray(value)``, with ragged or otherwise unconvertible input as a ValueError."""
  try:
    return np.asarray(value)
  except (TypeError, ValueError) as error:
    raise ValueError(f"{name} must be an array of numbers, got {type(value).__name__} that "
                     f"NumPy cannot convert ({error})") from None


def _describe(value: Any) -> str:
  text = repr(value)
  return text if len(text) <= 80 else text[:77] + "..."


def check_instance(name: str, value: Any, kind: type | tuple[type, ...],
                   what: str | None = None) -> None:
  """``value`` is an instance of ``kind``: ValueError naming ``name``, the type expected
  (``what``, default the class name) and the type given."""
  if not isinstance(value, kind):
    what = what or (kind.__name__ if isinstance(kind, type) else
                    " or ".join(k.__name__ for k in kind))
    article = "an" if what[0] in "AEIOU" else "a"
    raise ValueError(f"{name} must be {article} {what}, got {type(value).__name__}")


def describe(value: Any) -> str:
  """``repr(value)``, cut to 80 characters, for error messages."""
  return _describe(value)


def check_range(name: str, value: Any, low: float | None = None, high: float | None = None,
                *, low_open: bool = False, high_open: bool = False,
                finite: bool = False) -> None:
  """Raises ValueError unless every element of ``value`` lies in the given interval.

  NaN is always outside; ``finite=True`` puts -inf and +inf outside too (the range is then
  written with open ends at infinity). A boolean scalar (``True``) is rejected as not a
  number: it would silently read as 1; boolean arrays are accepted as 0/1 (labels).
  """
  if isinstance(value, (bool, np.bool_)):
    raise ValueError(f"{name}={value!r} is a boolean, not a number")
  if not is_concrete(value):
    return
  arr = _as_array(name, value)
  if arr.dtype.kind not in "biuf":
    raise ValueError(f"{name} must be numeric, got {_describe(value)} (dtype {arr.dtype})")
  bad = np.isnan(arr) if arr.dtype.kind == "f" else np.zeros(arr.shape, bool)
  if finite and arr.dtype.kind == "f":
    bad |= np.isinf(arr)
  if low is not None:
    bad |= (arr <= low) if low_open else (arr < low)
  if high is not None:
    bad |= (arr >= high) if high_open else (arr > high)
  if np.any(bad):
    lo = "(-inf" if low is None else ("(" if low_open else "[") + f"{low:g}"
    hi = "inf)" if high is None else f"{high:g}" + (")" if high_open else "]")
    if finite and (low is None or math.isinf(low)):
      lo = "(-inf"
    if finite and (high is None or math.isinf(high)):
      hi = "inf)"
    raise ValueError(f"{name}={_first_offender(arr, bad)} is outside the valid range {lo}, {hi}")


def check_real_array(name: str, value: Any, *, ndim: int | None = None, nonempty: bool = True,
                     neg_inf: bool = False, pos_inf: bool = False) -> None:
  """A real-valued finite array: integer or floating dtype (not boolean, complex, strings or
  objects), no NaN, and no infinities unless ``neg_inf``/``pos_inf`` allow that side.

  Booleans are refused rather than read as 0/1: for scores, ``True``/``False`` could mean
  either order, so the caller casts explicitly. ``ndim`` (when given) is the required number of
  axes and ``nonempty`` requires at least one element. Inside ``jit``/``vmap`` only the dtype
  and shape are checked.
  """
  if isinstance(value, (jax.Array, np.ndarray)):  # tracers included: no conversion
    dtype, shape = value.dtype, tuple(value.shape)
  else:
    arr = _as_array(name, value)
    dtype, shape = arr.dtype, arr.shape
  kind = getattr(dtype, "kind", "V")  # PRNG key arrays have no NumPy kind
  if kind == "b":
    raise ValueError(f"{name} is boolean; it must hold real numbers: cast it explicitly (e.g. "
                     f"{name}.astype(float)) so that the order of True and False is yours")
  if kind not in "iuf":
    what = {"c": "complex numbers", "U": "strings", "S": "bytes", "O": "Python objects"}.get(
        kind, "no numbers")
    raise ValueError(f"{name} has dtype {dtype} ({what}); it must hold real numbers (an "
                     "integer or floating array)")
  if ndim is not None and len(shape) != ndim:
    raise ValueError(f"{name} must be {ndim}-D, got shape {shape}")
  if nonempty and math.prod(shape) == 0:
    raise ValueError(f"{name} is empty (shape {shape}); need at least one element")
  if not is_concrete(value) or kind != "f":
    return
  arr = np.asarray(value)
  bad = np.isnan(arr)
  if np.any(bad):
    index = int(np.flatnonzero(bad.reshape(-1))[0])
    raise ValueError(f"{name}=nan (at flat index {index}): NaN is not a comparable real number")
  if not neg_inf:
    bad |= np.isneginf(arr)
  if not pos_inf:
    bad |= np.isposinf(arr)
  if np.any(bad):
    lo = "[-inf" if neg_inf else "(-inf"
    hi = "inf]" if pos_inf else "inf)"
    raise ValueError(f"{name}={_first_offender(arr, bad)} is outside the valid range {lo}, {hi}")


def float_tuple(name: str, values: Any, *, finite: bool = True) -> tuple[float, ...]:
  """A sequence of real numbers as a tuple of floats, for configuration fields (histograms,
  orders, noise levels): strings, booleans, complex numbers and non-sequences are refused
  rather than converted (``float("3")`` would silently accept a string); with ``finite``,
  NaN and infinities too."""
  if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
    raise ValueError(f"{name} must be a sequence of numbers, got {_describe(values)}")
  values = tuple(values)
  for i, v in enumerate(values):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.integer,
                                                            np.floating)):
      raise ValueError(f"{name}[{i}]={_describe(v)} is not a real number")
    if (finite and not math.isfinite(float(v))) or math.isnan(float(v)):
      raise ValueError(f"{name}[{i}]={float(v)} is not a finite number")
  return tuple(float(v) for v in values)


def check_binary(name: str, value: Any) -> None:
  """Membership labels and the like: a boolean array, or numbers that are all 0 or 1."""
  if not is_concrete(value):
    return
  arr = _as_array(name, value)
  if arr.dtype.kind not in "biuf" or not np.all((arr == 0) | (arr == 1)):
    shown = np.unique(arr)[:5] if arr.dtype.kind != "O" else arr.reshape(-1)[:5]
    raise ValueError(f"{name} must be boolean or 0/1, got values {shown!r} (dtype {arr.dtype})")


@functools.lru_cache(maxsize=1)
def _physical_memory_bytes() -> int:
  try:
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
  except (AttributeError, ValueError, OSError):
    return 1 << 40


@functools.lru_cache(maxsize=1)
def memory_limit_bytes() -> int:
  """The most memory any one array could get on this machine: the larger of the physical
  memory (``SC_PAGE_SIZE * SC_PHYS_PAGES``) and the first accelerator's memory limit. A request
  above it cannot fit, whatever else is running. (Asking for the accelerator's limit starts
  JAX's backend; :func:`check_allocation` asks only for requests above the physical memory, so
  validating a configuration before ``jax.distributed.initialize`` stays possible.)"""
  limit = _physical_memory_bytes()
  try:
    stats = jax.devices()[0].memory_stats() or {}
    limit = max(limit, int(stats.get("bytes_limit", 0)))
  except Exception:  # pylint: disable=broad-except  # no stats on this backend
    pass
  return int(limit)


def _bytes(n: float) -> str:
  for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
    if n < 1024 or unit == "EiB":
      return f"{n:.3g} {unit}"
    n /= 1024
  return f"{n:.3g} EiB"  # unreachable


def check_allocation(name: str, value: Any, bytes_per_unit: float, low: int = 1,
                     what: str = "") -> None:
  """Raises ValueError when ``value`` units of ``bytes_per_unit`` bytes each (one array, or the
  few a function allocates together) cannot fit in :func:`memory_limit_bytes`, before the
  allocation is tried (XLA would fail with RESOURCE_EXHAUSTED or a multi-PiB allocation
  error). ``what`` says what one unit is, for the message."""
  if not is_concrete(value):
    return
  need = float(value) * float(bytes_per_unit)
  if need <= _physical_memory_bytes():
    return
  limit = memory_limit_bytes()
  if need > limit:
    largest = max(low, int(limit // max(bytes_per_unit, 1)))
    per = f" ({_bytes(bytes_per_unit)} per {what})" if what else ""
    raise ValueError(f"{name}={value} would need {_bytes(need)} of memory{per}, more than this "
                     f"machine's {_bytes(limit)}; valid range [{low}, {largest}]")


def check_significance(significance: Any, name: str = "significance") -> None:
  """significance is the beta of a 1 - beta confidence level: must lie in (0, 1)."""
  check_range(name, significance, 0.0, 1.0, low_open=True, high_open=True)


def check_delta(delta: Any, name: str = "delta") -> None:
  check_range(name, delta, 0.0, 1.0, high_open=True)


def check_integer(name: str, value: Any, low: int, high: int | None = None) -> int:
  """A Python or NumPy integer (not a bool, a float or a string) in ``[low, high]``, returned
  as ``int``. Counts (trials, histograms, resamples, sizes) go through this: a float such as
  ``1e6`` or ``1000000.5`` is refused rather than truncated."""
  if (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral)
      or value < low or (high is not None and value > high)):
    valid = f">= {low}" if high is None else f"in [{low}, {high}]"
    integral = isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
    kind = "" if integral else f" (got {type(value).__name__})"
    raise ValueError(f"{name}={_describe(value)} must be an integer {valid}{kind}")
  return int(value)


def check_integer_valued(name: str, value: Any) -> None:
  """Counts may arrive as floats (e.g. from float64 arrays); they must be whole numbers."""
  if not is_concrete(value):
    return
  arr = np.asarray(value)
  if arr.dtype.kind == "f":
    bad = ~np.isfinite(arr) | (arr != np.round(arr))
    if np.any(bad):
      raise ValueError(f"{name}={_first_offender(arr, bad)} must be a whole number")


def check_not_boolean(name: str, value: Any, what: str = "counts") -> None:
  """Booleans are not numbers here: ``True`` as a number of trials (or a probability, an RDP
  value) is almost always a mistake. ``what`` ("counts" or e.g. "probabilities") words the
  message."""
  if isinstance(value, (bool, np.bool_)) or getattr(value, "dtype", None) == np.bool_ or (
      not hasattr(value, "dtype") and is_concrete(value) and np.asarray(value).dtype.kind == "b"):
    hint = ("counts must be whole numbers >= 0 (sum indicators first, or convert with "
            ".astype(int))") if what == "counts" else (
                f"{what} must be numbers (convert with .astype(float) if that is meant)")
    raise ValueError(f"{name}={_describe(value)} is boolean; {hint}")


def check_counts(name: str, counts: Any, trials: Any = None, trials_name: str = "trials") -> None:
  """Counts are whole numbers >= 0 (not booleans) and, when ``trials`` is given, <= trials."""
  check_not_boolean(name, counts)
  if trials is not None:
    check_not_boolean(trials_name, trials)
  check_integer_valued(name, counts)
  check_range(name, counts, 0)
  if trials is None:
    return
  check_integer_valued(trials_name, trials)
  check_range(trials_name, trials, 0)
  if is_concrete((counts, trials)):
    c, t = np.broadcast_arrays(np.asarray(counts), np.asarray(trials))
    bad = c > t
    if np.any(bad):
      idx = int(np.flatnonzero(bad.reshape(-1))[0])
      raise ValueError(f"{name}={c.reshape(-1)[idx].item()} exceeds {trials_name}="
                       f"{t.reshape(-1)[idx].item()}; need 0 <= {name} <= {trials_name}")


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> None:
  choices = tuple(choices)
  if value not in choices:
    raise ValueError(f"{name}={value!r} is not one of {', '.join(repr(c) for c in choices)}")


def check_orders(orders: Any, name: str = "orders") -> None:
  """Renyi orders alpha must be finite and > 1 (the audits and conversions here are stated for
  1 < alpha < inf; at alpha = inf their formulas give NaN)."""
  check_range(name, orders, 1.0, None, low_open=True)
  if is_concrete(orders):
    arr = np.asarray(orders)
    bad = ~np.isfinite(arr)
    if np.any(bad):
      raise ValueError(f"{name}={_first_offender(arr, bad)} is outside the valid range (1, inf): "
                       "Renyi orders must be finite")
  if is_concrete(orders) and np.ndim(orders) > 1:
    raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {np.shape(orders)}")


def check_nonempty(name: str, value: Any) -> None:
  if np.size(value) == 0:
    raise ValueError(f"{name} is empty; need at least one element")


def check_same_shape(name_a: str, a: Any, name_b: str, b: Any) -> None:
  if np.shape(a) != np.shape(b):
    raise ValueError(f"{name_a} has shape {np.shape(a)} but {name_b} has shape {np.shape(b)}; "
                     "they must match")


def check_broadcastable(name: str, value: Any, batch_shape: tuple[int, ...],
                        batch_name: str) -> None:
  """Raises unless ``value``'s shape broadcasts against ``batch_shape``."""
  try:
    np.broadcast_shapes(batch_shape, np.shape(value))
  except ValueError:
    raise ValueError(f"{name} has shape {np.shape(value)}, which does not broadcast against the "
                     f"{batch_name} {batch_shape}") from None


def check_key(key: Any, name: str = "key") -> None:
  """A typed PRNG key of shape () or a raw uint32 key array (1-D, e.g. shape (2,))."""
  import jax.numpy as jnp
  if not isinstance(key, (jax.Array, np.ndarray)):
    raise ValueError(f"{name} must be a jax PRNG key (jax.random.key(seed)), got "
                     f"{type(key).__name__}")
  if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
    if key.shape != ():
      raise ValueError(f"{name} must be a single PRNG key of shape (), got shape {key.shape}")
  elif key.dtype != np.uint32 or key.ndim != 1:
    raise ValueError(f"{name} must be a jax PRNG key (jax.random.key(seed)) or a raw uint32 key "
                     f"of shape (2,), got dtype {key.dtype} and shape {key.shape}")
