"""Argument validation shared by every dpaudit layer.

Public functions call these helpers before doing any work so that bad input fails with a
``ValueError`` naming the argument, the offending value and the valid range (DESIGN.md,
convention 6). Value checks only run on concrete inputs: inside ``jit``/``vmap`` the values
are abstract tracers, so only shapes can be checked there, and the caller is expected to have
validated at the boundary.
"""

from __future__ import annotations

import numbers

from typing import Any, Iterable

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


def check_range(name: str, value: Any, low: float | None = None, high: float | None = None,
                *, low_open: bool = False, high_open: bool = False) -> None:
  """Raises ValueError unless every element of ``value`` lies in the given interval."""
  if not is_concrete(value):
    return
  arr = np.asarray(value)
  if arr.dtype.kind not in "biuf":
    raise ValueError(f"{name} must be numeric, got {value!r}")
  bad = np.isnan(arr) if arr.dtype.kind == "f" else np.zeros(arr.shape, bool)
  if low is not None:
    bad |= (arr <= low) if low_open else (arr < low)
  if high is not None:
    bad |= (arr >= high) if high_open else (arr > high)
  if np.any(bad):
    lo = "(-inf" if low is None else ("(" if low_open else "[") + f"{low:g}"
    hi = "inf)" if high is None else f"{high:g}" + (")" if high_open else "]")
    raise ValueError(f"{name}={_first_offender(arr, bad)} is outside the valid range {lo}, {hi}")


def check_significance(significance: Any, name: str = "significance") -> None:
  """significance is the beta of a 1 - beta confidence level: must lie in (0, 1)."""
  check_range(name, significance, 0.0, 1.0, low_open=True, high_open=True)


def check_delta(delta: Any, name: str = "delta") -> None:
  check_range(name, delta, 0.0, 1.0, high_open=True)


def check_integer(name: str, value: Any, low: int) -> int:
  """A Python or NumPy integer (not a bool) >= ``low``, returned as ``int``."""
  if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
    raise ValueError(f"{name}={value!r} must be an integer >= {low}")
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


def check_not_boolean(name: str, value: Any) -> None:
  """Booleans are not counts: ``True`` as a number of trials is almost always a mistake."""
  if isinstance(value, (bool, np.bool_)) or (
      is_concrete(value) and np.asarray(value).dtype.kind == "b"):
    raise ValueError(f"{name}={value!r} is boolean; counts must be whole numbers >= 0 (sum "
                     "indicators first, or convert with .astype(int))")


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
