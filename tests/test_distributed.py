"""dpaudit.distributed.map_chunks in one process (two processes: tests/launch/test_multihost.py)."""

import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import distributed


def test_one_process_is_the_plain_loop_in_order():
  out = distributed.map_chunks(lambda i: {"x": jnp.arange(3) + 10 * i, "i": jnp.int32(i)}, 4)
  assert [int(o["i"]) for o in out] == [0, 1, 2, 3]
  np.testing.assert_array_equal(out[2]["x"], [20, 21, 22])
  assert isinstance(out[0]["x"], np.ndarray)


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_bad_chunk_count(bad):
  with pytest.raises(ValueError, match="num_chunks"):
    distributed.map_chunks(lambda i: jnp.zeros(1), bad)
