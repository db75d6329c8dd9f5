"""Sorting for the estimators: XLA's comparator sort on a CPU is 10-25x slower than NumPy's.

Measured on the 2-core CPU: ``jnp.argsort`` of 2e6 float64 scores took 0.5-0.6 s, NumPy's
``argsort`` 0.045 s (introsort) or 0.2 s (stable). On a CPU the sort is therefore handed to
NumPy through ``jax.pure_callback`` (pure: same input, same output), so the estimators stay
jit- and vmap-able; on GPU and TPU the device's own sort runs. Which one is chosen by
:func:`dpaudit.estimators._compile.default_platform` (``jax.default_device`` first, then the
default backend).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit.estimators import _compile


def _host_argsort_descending(stable: bool):
  if stable:
    def argsort(x):
      return np.argsort(-np.asarray(x), axis=-1, kind="stable").astype(np.int32)
  else:  # ascending order reversed: ties come out in some order, which is all that is asked
    def argsort(x):
      return np.ascontiguousarray(np.argsort(np.asarray(x), axis=-1)[..., ::-1].astype(np.int32))
  return argsort


def argsort_descending(x: jax.Array, stable: bool = False) -> jax.Array:
  """Indices that sort ``x`` (last axis) from largest to smallest, as int32.

  With ``stable=True`` equal values keep their order (lower index first); otherwise their
  order is unspecified, which is enough wherever only the counts at the end of each group of
  ties are used.
  """
  if _compile.default_platform() != "cpu":
    return jnp.argsort(-x, axis=-1, stable=stable).astype(jnp.int32)
  shape = jax.ShapeDtypeStruct(x.shape, jnp.int32)
  return jax.pure_callback(_host_argsort_descending(stable), shape, x, vmap_method="expand_dims")


def _host_descending_cumulative(stable: bool):
  argsort = _host_argsort_descending(stable)

  def run(x, labels):
    # Under vmap either may carry a batch axis the other has as 1 (vmap_method="expand_dims").
    x, labels = np.asarray(x), np.asarray(labels)
    shape = np.broadcast_shapes(x.shape, labels.shape)
    order = np.ascontiguousarray(np.broadcast_to(argsort(x), shape))
    in_order = np.take_along_axis(np.broadcast_to(labels, shape), order, axis=-1)
    return order, np.cumsum(in_order, axis=-1, dtype=labels.dtype)
  return run


def descending_cumulative(x: jax.Array, labels: jax.Array,
                          stable: bool = False) -> tuple[jax.Array, jax.Array]:
  """``(order, cumsum(labels[order]))`` with ``order = argsort_descending(x, stable)``:
  how many of the highest scores carry each label, the count (or sum) of ``labels`` over
  the ``k + 1`` highest values of ``x`` at position ``k`` (last axis; ``labels`` numeric and
  broadcast to the shape of ``x``, the sums in its dtype; booleans are counted as int32; float
  labels are summed on the device).

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
    order = argsort_descending(x, stable)
    return order, jnp.cumsum(jnp.take_along_axis(labels, order, axis=-1), axis=-1,
                             dtype=labels.dtype)
  shapes = (jax.ShapeDtypeStruct(x.shape, jnp.int32),
            jax.ShapeDtypeStruct(x.shape, labels.dtype))
  return jax.pure_callback(_host_descending_cumulative(stable), shapes, x, labels,
                           vmap_method="expand_dims")
