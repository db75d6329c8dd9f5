"""Sorting for the estimators: XLA's comparator sort on a CPU is 10-25x slower than NumPy's.

Measured on the 2-core CPU: ``jnp.argsort`` of 2e6 float64 scores took 0.5-0.6 s, NumPy's
``argsort`` 0.045 s (introsort) or 0.2 s (stable). On a CPU the sort is therefore handed to
NumPy through ``jax.pure_callback`` (pure: same input, same output), so the estimators stay
jit- and vmap-able; on GPU and TPU the device's own sort runs. Which one is chosen by
:func:`dpaudit.estimators._compile.default_platform` (``jax.default_device`` first, then the
default backend).

The host sort uses every core the process may run on (at most :data:`MAX_THREADS`): from
:data:`PARALLEL_ELEMENTS` elements a row is cut into one piece per core, the pieces are sorted
on threads (NumPy releases the GIL while it sorts numbers), and the sorted pieces are merged by
one stable sort of their concatenation, which NumPy's timsort does as a linear merge of the
sorted runs it finds. Pieces are in index order and the merge is stable, so a stable sort stays
stable.

Padded inputs (a batch padded to its bucket, :func:`dpaudit.estimators._compile.bucket_size`)
carry a ``valid`` mask: the padding sorts after every real element and counts in no sum.
"""

from __future__ import annotations

import os
import threading

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit.estimators import _compile

PARALLEL_ELEMENTS = 1 << 16
"""Elements of a row from which the host sort splits it across threads (below, a thread's
start-up and the merge cost more than the second core saves)."""
MAX_THREADS = 4
_pool = None
_pool_lock = threading.Lock()


def sort_threads() -> int:
  """Threads a host sort of a large row uses: the cores this process may run on, at most
  :data:`MAX_THREADS`."""
  try:
    cores = len(os.sched_getaffinity(0))
  except AttributeError:  # not on Linux
    cores = os.cpu_count() or 1
  return max(1, min(cores, MAX_THREADS))


def _executor():
  global _pool
  with _pool_lock:
    if _pool is None:
      import concurrent.futures
      _pool = concurrent.futures.ThreadPoolExecutor(MAX_THREADS,
                                                    thread_name_prefix="dpaudit-sort")
  return _pool


def _ascending(keys: np.ndarray, stable: bool) -> np.ndarray:
  """``argsort(keys)`` (1-D) as int64, on :func:`sort_threads` threads from
  :data:`PARALLEL_ELEMENTS` elements: the pieces sorted apart and merged by a stable sort."""
  kind = "stable" if stable else None
  n = keys.shape[0]
  pieces = min(sort_threads(), n // (PARALLEL_ELEMENTS // 2))
  if pieces < 2:
    return np.argsort(keys, kind=kind)
  ends = np.linspace(0, n, pieces + 1).astype(np.int64)

  def piece(j):
    return np.argsort(keys[ends[j]:ends[j + 1]], kind=kind) + ends[j]
  orders = list(_executor().map(piece, range(pieces)))
  order = np.concatenate(orders)
  return order[np.argsort(keys[order], kind="stable")]


def _descending_row(x: np.ndarray, stable: bool, valid: np.ndarray | None) -> np.ndarray:
  """Indices sorting the 1-D ``x`` from largest to smallest (ties by index if ``stable``), the
  invalid elements (``valid`` False) last, in index order."""
  if valid is None or valid.all():
    return _ascending(-x, stable)
  real, padding = np.flatnonzero(valid), np.flatnonzero(~valid)
  return np.concatenate([real[_ascending(-x[real], stable)], padding])


def _host_argsort_descending(stable: bool):
  def argsort(x, valid=None):
    x = np.asarray(x)
    shape = x.shape if valid is None else np.broadcast_shapes(x.shape, np.shape(valid))
    x = np.broadcast_to(x, shape)
    rows = x.reshape(-1, shape[-1]) if shape[-1] else x.reshape(-1, 0)
    masks = (None if valid is None
             else np.broadcast_to(np.asarray(valid, bool), shape).reshape(rows.shape))
    out = np.empty(rows.shape, np.int32)
    for i, row in enumerate(rows):
      out[i] = _descending_row(row, stable, None if masks is None else masks[i])
    return out.reshape(shape)
  return argsort


def _device_argsort_descending(x, stable: bool, valid=None):
  """The device's sort: largest first, the invalid elements after every valid one."""
  if valid is None:
    return jnp.argsort(-x, axis=-1, stable=stable).astype(jnp.int32)
  x, valid = jnp.broadcast_arrays(x, valid)
  index = jax.lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
  *_, order = jax.lax.sort((jnp.logical_not(valid).astype(jnp.int32), -x, index), num_keys=2,
                           is_stable=True)
  return order


def argsort_descending(x: jax.Array, stable: bool = False, valid=None) -> jax.Array:
  """Indices that sort ``x`` (last axis) from largest to smallest, as int32.

  With ``stable=True`` equal values keep their order (lower index first); otherwise their
  order is unspecified, which is enough wherever only the counts at the end of each group of
  ties are used. ``valid`` (boolean, broadcast to ``x``) puts the invalid elements (padding)
  after all valid ones.
  """
  if _compile.default_platform() != "cpu":
    return _device_argsort_descending(x, stable, valid)
  shape = jax.ShapeDtypeStruct(x.shape, jnp.int32)
  operands = (x,) if valid is None else (x, jnp.asarray(valid, bool))
  return jax.pure_callback(_host_argsort_descending(stable), shape, *operands,
                           vmap_method="expand_dims")


def _host_descending_cumulative(stable: bool):
  argsort = _host_argsort_descending(stable)

  def run(x, labels, valid=None):
    # Under vmap either may carry a batch axis the other has as 1 (vmap_method="expand_dims").
    x, labels = np.asarray(x), np.asarray(labels)
    shapes = [x.shape, labels.shape] + ([] if valid is None else [np.shape(valid)])
    shape = np.broadcast_shapes(*shapes)
    order = np.ascontiguousarray(np.broadcast_to(argsort(x, valid), shape))
    in_order = np.take_along_axis(np.broadcast_to(labels, shape), order, axis=-1)
    if valid is not None:
      in_order = np.where(np.take_along_axis(np.broadcast_to(valid, shape), order, axis=-1),
                          in_order, 0)
    return order, np.cumsum(in_order, axis=-1, dtype=labels.dtype)
  return run


def descending_cumulative(x: jax.Array, labels: jax.Array, stable: bool = False,
                          valid=None) -> tuple[jax.Array, jax.Array]:
  """``(order, cumsum(labels[order]))`` with ``order = argsort_descending(x, stable, valid)``:
  how many of the highest scores carry each label, the count (or sum) of ``labels`` over
  the ``k + 1`` highest values of ``x`` at position ``k`` (last axis; ``labels`` numeric and
  broadcast to the shape of ``x``, the sums in its dtype; booleans are counted as int32; float
  labels are summed on the device). With ``valid``, the invalid elements come last and add 0.

  On a CPU both come from one NumPy callback. XLA:CPU compiles a cumulative sum over millions
  of elements as a tree of a dozen reduce-window, pad and slice kernels (about 20 ms of compile
  time each), where NumPy's takes a few milliseconds after the sort it already does. Elsewhere
  the device sorts and sums."""
  labels = jnp.asarray(labels)
  labels = jnp.broadcast_to(labels.astype(jnp.int32) if labels.dtype == bool else labels, x.shape)
  # Float sums come from the device: JAX checks a callback's outputs against the dtypes
  # canonicalised in the thread that runs it, so a float64 output fails where x64 is on only in
  # the caller's thread (``with jax.enable_x64(True)``) and the runtime calls back on another
  # (seen on a GPU machine's host CPU, jax 0.11). Integer counts are the same either way.
  if _compile.default_platform() != "cpu" or jnp.issubdtype(labels.dtype, jnp.floating):
    order = argsort_descending(x, stable, valid)
    if valid is not None:
      labels = jnp.where(valid, labels, jnp.zeros((), labels.dtype))
    return order, jnp.cumsum(jnp.take_along_axis(labels, order, axis=-1), axis=-1,
                             dtype=labels.dtype)
  shapes = (jax.ShapeDtypeStruct(x.shape, jnp.int32),
            jax.ShapeDtypeStruct(x.shape, labels.dtype))
  operands = (x, labels) if valid is None else (x, labels, jnp.asarray(valid, bool))
  return jax.pure_callback(_host_descending_cumulative(stable), shapes, *operands,
                           vmap_method="expand_dims")
