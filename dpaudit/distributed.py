"""Work split over the processes of a ``jax.distributed`` run, with the result of one process.

Vmapped training runs (the many-run DP-SGD audit, the n-gram models of the reconstruction
experiment) are computed in chunks whose keys depend only on the chunk's index. Such a loop is
spread over processes by giving chunk ``i`` to process ``i mod P`` and gathering the outputs, so
every process ends with the same outputs, in the same order, as a one-process loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from dpaudit import _validate


def map_chunks(compute_chunk: Callable[[int], Any], num_chunks: int) -> list[Any]:
  """``[compute_chunk(i) for i in range(num_chunks)]``, split over every process.

  Alone (``jax.process_count() == 1``) this is the plain loop. With P processes, process p
  computes chunks p, p + P, p + 2P, ... (and repeats its last one where P does not divide
  ``num_chunks``, so that every process gathers arrays of one shape); the outputs are
  exchanged with :func:`jax.experimental.multihost_utils.process_allgather`. Every process
  must make the same call.

  Args:
    compute_chunk: chunk index -> pytree of arrays with the same shapes and dtypes for every
      index; it must depend on the index only (not on the process). Keep its dtypes ones JAX
      holds as they are (64-bit types only with ``jax_enable_x64``): the exchange goes through
      JAX arrays.
    num_chunks: number of chunks, >= 1.

  Returns:
    The outputs of every chunk, in order, as NumPy pytrees.
  """
  _validate.check_integer("num_chunks", num_chunks, 1)
  count, index = jax.process_count(), jax.process_index()
  if count == 1:
    return [jax.device_get(compute_chunk(i)) for i in range(num_chunks)]
  from jax.experimental import multihost_utils
  per_process = math.ceil(num_chunks / count)
  mine = [jax.device_get(compute_chunk(min(index + count * j, num_chunks - 1)))
          for j in range(per_process)]
  stacked = jax.tree.map(lambda *xs: np.stack(xs), *mine)
  gathered = multihost_utils.process_allgather(stacked)  # leaves: (P, per_process, ...)
  return [jax.tree.map(lambda x, i=i: np.asarray(x[i % count, i // count]), gathered)
          for i in range(num_chunks)]
