"""Strict JSON and the cell store (dpaudit.results)."""

import json
import math
import os

import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import results


def _strict(text):
  def refuse(name):
    raise ValueError(name)
  return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_round_trip_through_strict_json():
  value = {"a": math.inf, "b": [-math.inf, math.nan, 1.5], "c": np.float32(np.inf),
           "d": jnp.asarray([1.0, jnp.inf]), "e": (np.int64(3), np.bool_(True)), 7: "x"}
  text = results.dumps(value)
  parsed = _strict(text)  # no Infinity/NaN literals
  assert parsed["a"] == "Infinity" and parsed["b"][:2] == ["-Infinity", "NaN"]
  back = results.loads(text)
  assert back["a"] == math.inf and back["b"][0] == -math.inf and math.isnan(back["b"][1])
  assert back["c"] == math.inf and back["d"] == [1.0, math.inf]
  assert back["e"] == [3, True] and back["7"] == "x"


def test_loads_refuses_non_strict_literals():
  with pytest.raises(ValueError, match="not strict JSON"):
    results.loads('{"a": Infinity}')


def test_config_key_is_stable_and_separates_configs():
  a = {"epsilon": math.inf, "orders": (2, 3), "seed": 0}
  assert results.config_key(a) == results.config_key({"seed": 0, "orders": [2, 3],
                                                       "epsilon": float("inf")})
  assert results.config_key(a) != results.config_key({**a, "seed": 1})
  # Pinned: the name of a cell must not change between versions of Python or dpaudit.
  assert results.config_key({"x": 1}) == "5041bf1f713df204"


def test_cell_store_reuses_only_finished_matching_cells(tmp_path):
  store = results.CellStore(str(tmp_path / "cells"))
  config = {"sigma": 1.0, "seed": 0}
  calls = []

  def compute():
    calls.append(1)
    return {"value": math.inf}

  assert store.get_or_compute(config, compute, "s1") == ({"value": math.inf}, False)
  assert store.get_or_compute(config, compute, "s1") == ({"value": math.inf}, True)
  assert len(calls) == 1
  path = store.path(config, "s1")
  assert os.path.basename(path).startswith("s1-") and _strict(open(path).read())
  # A half-written file is recomputed, not reused.
  with open(path, "w") as f:
    f.write('{"format": "dpaudit-cell/1", "key"')
  assert store.load(config, "s1") is None
  store.get_or_compute(config, compute, "s1")
  assert len(calls) == 2
  # A foreign cell under the same name (another config's content) is not reused.
  other = json.loads(open(path).read())
  other["config"]["seed"] = 5
  with open(path, "w") as f:
    json.dump(other, f)
  assert store.load(config, "s1") is None
  # resume=False recomputes and overwrites; the scratch directory starts empty and goes.
  fresh = results.CellStore(str(tmp_path / "cells"), resume=False)
  scratch = fresh.scratch_dir(config, "s1")
  open(os.path.join(scratch, "checkpoint"), "w").close()
  assert fresh.get_or_compute(config, compute, "s1")[1] is False and len(calls) == 3
  assert not os.path.exists(scratch)
  assert store.load(config, "s1") == {"value": math.inf}
