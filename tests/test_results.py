"""Strict JSON and the cell store (dpaudit.results)."""

import json
import math
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
  with pytest.warns(results.DamagedCellWarning, match="not strict JSON"):
    assert store.load(config, "s1") is None
  with pytest.warns(results.DamagedCellWarning):
    store.get_or_compute(config, compute, "s1")
  assert len(calls) == 2
  # A foreign cell under the same name (another config's content) is not reused.
  other = json.loads(open(path).read())
  other["config"]["seed"] = 5
  with open(path, "w") as f:
    json.dump(other, f)
  with pytest.warns(results.DamagedCellWarning, match="another configuration"):
    assert store.load(config, "s1") is None
  # resume=False recomputes and overwrites; the scratch directory starts empty and goes.
  fresh = results.CellStore(str(tmp_path / "cells"), resume=False)
  scratch = fresh.scratch_dir(config, "s1")
  open(os.path.join(scratch, "checkpoint"), "w").close()
  assert fresh.get_or_compute(config, compute, "s1")[1] is False and len(calls) == 3
  assert not os.path.exists(scratch)
  assert store.load(config, "s1") == {"value": math.inf}


# ------------------------------------------------------------------------ damaged cells


def _whole(result):
  """A validator: a dict with a finite value not above its ceiling."""
  results.check_fields("cell", result, {"value": float, "ceiling": float})
  if not math.isfinite(result["value"]) or result["value"] > result["ceiling"]:
    raise ValueError(f"value={result['value']} must be finite and <= ceiling")


def _rewrite(path, edit):
  cell = json.loads(open(path).read())
  edit(cell)
  with open(path, "w") as f:
    json.dump(cell, f)


def _damaged_store(tmp_path):
  store = results.CellStore(str(tmp_path / "cells"))
  config = {"sigma": 2.0, "seed": 3}
  calls = []

  def compute():
    calls.append(1)
    return {"value": 0.5, "ceiling": 1.0}

  store.get_or_compute(config, compute, "c", validate=_whole)
  return store, config, compute, calls


def _set_result(value, digest=False):
  def edit(cell):
    cell["result"] = value
    if digest:
      cell["result_sha256"] = results.result_digest(value)
  return edit


DAMAGE = {
    "empty result": (_set_result({}), "does not match its digest"),
    "edited number": (lambda c: c["result"].update(value=2.5), "does not match its digest"),
    "invalid, digest matches": (_set_result({"value": 2.5, "ceiling": 1.0}, digest=True),
                                "not whole (ValueError: value=2.5"),
    "emptied, digest matches": (_set_result({}, digest=True), "not whole (KeyError"),
    "list, digest matches": (_set_result([1], digest=True), "not whole (TypeError"),
    "old format": (lambda c: (c.update(format="dpaudit-cell/1"), c.pop("result_sha256")),
                   "older dpaudit"),
    "no digest": (lambda c: c.pop("result_sha256"), "no digest"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_cell_is_recomputed_with_one_warning(tmp_path, damage):
  store, config, compute, calls = _damaged_store(tmp_path)
  path = store.path(config, "c")
  whole = open(path).read()
  edit, reason = DAMAGE[damage]
  _rewrite(path, edit)
  assert store.damage(config, "c", _whole) is not None
  with pytest.warns(results.DamagedCellWarning) as caught:
    assert store.get_or_compute(config, compute, "c", validate=_whole) == (
        {"value": 0.5, "ceiling": 1.0}, False)
  assert len(caught) == 1 and path in str(caught[0].message), [str(w.message) for w in caught]
  assert reason in str(caught[0].message)
  assert len(calls) == 2 and open(path).read() == whole  # overwritten: as if never damaged
  assert store.get_or_compute(config, compute, "c", validate=_whole)[1] is True


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage", "directory", "array"])
def test_unreadable_cell_is_recomputed(tmp_path, damage):
  store, config, compute, calls = _damaged_store(tmp_path)
  path = store.path(config, "c")
  whole = open(path).read()
  os.remove(path)
  if damage == "directory":
    os.makedirs(os.path.join(path, "inside"))
  else:
    text = {"truncated": whole[:len(whole) // 2], "empty": "", "garbage": "\x00\xff{{",
            "array": "[1, 2]"}[damage]
    with open(path, "w", errors="surrogateescape") as f:
      f.write(text)
  with pytest.warns(results.DamagedCellWarning, match="recomputing it"):
    assert store.load(config, "c", _whole) is None
  with pytest.warns(results.DamagedCellWarning):
    assert store.get_or_compute(config, compute, "c", _whole)[1] is False
  assert os.path.isfile(path) and open(path).read() == whole


def test_fresh_result_that_fails_validation_is_a_bug_and_not_stored(tmp_path):
  store = results.CellStore(str(tmp_path / "cells"))
  with pytest.raises(RuntimeError, match="fails its own validation.*this is a bug"):
    store.get_or_compute({"a": 1}, lambda: {"value": math.nan, "ceiling": 1.0}, "c", _whole)
  assert not os.path.exists(store.path({"a": 1}, "c"))


def test_damaged_cell_warning_is_one_line_in_a_cli(tmp_path):
  store, config, _, _ = _damaged_store(tmp_path)
  _rewrite(store.path(config, "c"), _set_result({}))
  code = ("import sys; from dpaudit import results; "
          f"s = results.CellStore({str(tmp_path / 'cells')!r}); "
          f"assert s.load({config!r}, 'c') is None")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
  assert out.returncode == 0, out.stderr
  assert out.stderr == (f"warning: {store.path(config, 'c')}: its result does not match its "
                        "digest (edited or damaged); recomputing it\n")


def test_recovered_cells_equal_an_uninterrupted_run(tmp_path):
  """Three cells, one damaged in each way between two runs: the second run's cells and
  results equal those of a run that never saw damage."""
  configs = [{"sigma": s} for s in (1.0, 2.0, 3.0, 4.0)]

  def compute(config):
    return lambda: {"value": 1.0 / config["sigma"], "ceiling": 1.0}

  def run(directory):
    store = results.CellStore(directory)
    return [store.get_or_compute(c, compute(c), "c", _whole)[0] for c in configs]

  clean = run(str(tmp_path / "clean"))
  run(str(tmp_path / "damaged"))
  store = results.CellStore(str(tmp_path / "damaged"))
  paths = [store.path(c, "c") for c in configs]
  _rewrite(paths[0], _set_result({}))
  _rewrite(paths[1], _set_result({"value": 9.0, "ceiling": 1.0}, digest=True))
  with open(paths[2], "w") as f:
    f.write("{")
  os.remove(paths[3])
  os.makedirs(paths[3])
  with pytest.warns(results.DamagedCellWarning) as caught:
    again = run(str(tmp_path / "damaged"))
  assert len(caught) == 4
  assert results.dumps(again) == results.dumps(clean)
  for config in configs:
    assert (open(store.path(config, "c")).read()
            == open(results.CellStore(str(tmp_path / "clean")).path(config, "c")).read())


def test_scratch_dir_survives_concurrent_removal(tmp_path, monkeypatch):
  store = results.CellStore(str(tmp_path / "cells"), resume=False)
  config = {"a": 1}
  scratch = store.path(config, "c")[:-len(".json")] + ".partial"
  os.makedirs(os.path.join(scratch, "deep"))
  real_rmtree = results.shutil.rmtree

  def racing_rmtree(path, ignore_errors=False, **kwargs):  # another process got there first
    real_rmtree(path)
    real_rmtree(path, ignore_errors=ignore_errors, **kwargs)

  monkeypatch.setattr(results.shutil, "rmtree", racing_rmtree)
  assert store.scratch_dir(config, "c") == scratch and os.listdir(scratch) == []
  with open(scratch + ".tmp", "w"):
    pass
  os.rmdir(scratch)
  with open(scratch, "w") as f:  # a file in its place
    f.write("x")
  assert os.path.isdir(store.scratch_dir(config, "c"))
  store.save(config, {"value": 0.0, "ceiling": 1.0}, "c")  # removes it; already gone is fine
  assert not os.path.exists(scratch)
  store.save(config, {"value": 0.0, "ceiling": 1.0}, "c")


NPZ_DAMAGE = {
    "truncated": lambda p, whole: open(p, "wb").write(whole[:len(whole) // 2]),
    "cut at the end": lambda p, whole: open(p, "wb").write(whole[:-10]),
    "empty": lambda p, whole: open(p, "wb").close(),
    "garbage": lambda p, whole: open(p, "wb").write(b"PK\x03\x04" + bytes(range(256)) * 4),
    "corrupt member": lambda p, whole: open(p, "wb").write(
        whole[:60] + bytes(b ^ 0xFF for b in whole[60:90]) + whole[90:]),
    "directory": lambda p, whole: (os.remove(p), os.makedirs(p)),
    "pickled": lambda p, whole: np.savez(open(p, "wb"), fingerprint=np.asarray("f"),
                                         counts=np.asarray([{"a": 1}], dtype=object)),
    "missing fingerprint": lambda p, whole: np.savez(open(p, "wb"), counts=np.arange(3)),
}


@pytest.mark.parametrize("damage", sorted(NPZ_DAMAGE))
def test_load_arrays_returns_none_for_a_damaged_checkpoint(tmp_path, damage):
  path = str(tmp_path / "checkpoint.npz")
  results.save_arrays(path, "f", {"counts": np.arange(1000), "done": np.int64(3)})
  whole = open(path, "rb").read()
  assert results.load_arrays(path, "f")["counts"].tolist() == list(range(1000))
  NPZ_DAMAGE[damage](path, whole)
  assert results.load_arrays(path, "f") is None
  results.save_arrays(path, "f", {"counts": np.arange(4)})  # replaces it, directory included
  assert results.load_arrays(path, "f")["counts"].tolist() == [0, 1, 2, 3]
  assert os.listdir(tmp_path) == ["checkpoint.npz"]  # no temporary file left


def test_monte_carlo_ignores_a_damaged_or_inconsistent_checkpoint(tmp_path):
  """montecarlo.count_outcomes through a checkpoint that was truncated, or whose counts do not
  add up to its finished chunks, gives the counts of an uninterrupted run."""
  import jax

  from dpaudit import montecarlo
  from dpaudit.mechanisms import noisy_argmax
  key, path = jax.random.key(5), str(tmp_path / "mc.npz")
  kwargs = dict(args=(jnp.array([3.0, 2.0, 1.0]), 1.0), chunk_size=512)
  full = montecarlo.count_outcomes(noisy_argmax, key, 2000, 3, **kwargs)
  montecarlo.count_outcomes(noisy_argmax, key, 2000, 3, checkpoint_path=path, **kwargs)
  plan = montecarlo.make_plan(2000, 512, 1, None)
  fingerprint = montecarlo._fingerprint(key, plan, 3, "")  # pylint: disable=protected-access
  assert montecarlo.load_checkpoint(path, fingerprint, plan, 3).chunks_done == plan.num_chunks
  for chunks_done, counts in ((1, [600, 0, 0, 0]), (9, [2000, 0, 0, 0]), (1, [512, 0, 0]),
                              (1, [-1, 513, 0, 0])):
    results.save_arrays(path, fingerprint, {"chunks_done": np.int64(chunks_done),
                                            "counts": np.asarray(counts, np.int64)})
    assert montecarlo.load_checkpoint(path, fingerprint, plan, 3) is None
    np.testing.assert_array_equal(
        montecarlo.count_outcomes(noisy_argmax, key, 2000, 3, checkpoint_path=path, **kwargs),
        full)
  whole = open(path, "rb").read()
  with open(path, "wb") as f:
    f.write(whole[:len(whole) // 3])
  np.testing.assert_array_equal(
      montecarlo.count_outcomes(noisy_argmax, key, 2000, 3, checkpoint_path=path, **kwargs), full)


# ------------------------------------------------- validators of the stored result types


def _dpsgd_result(**changes):
  from dpaudit.audits import dpsgd
  fields = dict(game="one_run", canary="mislabelled", adjacency="add_or_remove_one",
                epsilon_lower_bound=1.5, epsilon_ceiling=3.0, epsilon_theory=8.0,
                epsilon_theory_pld=7.5, noise_multiplier=0.9, sampling_rate=0.1, num_steps=50,
                num_training_examples=500, test_accuracy=0.8, num_observations=100,
                details={"num_guesses": 10}, wall_time_s=1.0)
  return results.loads(results.dumps(dpsgd.DPSGDAuditResult(**{**fields, **changes}).to_dict()))


def _grid_cell(**changes):
  from dpaudit.audits import dpsgd
  config = dpsgd.DPSGDAuditConfig(game="one_run", canary="mislabelled")
  cell = {"status": "done", "config": config.to_dict(), "result": _dpsgd_result()}
  return results.loads(results.dumps({**cell, **changes})), config


def _tradeoff_run(**changes):
  import dataclasses

  from experiments import tradeoff
  run = tradeoff.RunResult(
      target_epsilon=8.0, seed=0, noise_multiplier=0.9, l2_clip_norm=1.0, epsilon_rdp=7.9,
      epsilon_pld=7.5, num_steps=5, sampling_rate=0.1, eval_accuracy=0.7, train_accuracy=0.8,
      final_loss=0.5, final_clipped_fraction=0.3, mean_batch_size=32.0,
      loss_curve_steps=(2, 5), loss_curve=(0.9, 0.5), clipping_strategy="vmap",
      wall_time_s=1.0, resumed_from_step=0)
  return {**results.loads(results.dumps(dataclasses.asdict(run))), **changes}


def _ngram_point(**changes):
  from dpaudit.audits import reconstruction
  config = reconstruction.NgramCanaryConfig(noise_multipliers=(2.0,), num_models=8,
                                            num_steps=3)
  log_p1 = -10.0
  point = dict(noise_multiplier=2.0, learning_rate=config.learning_rate_scale / 2.0,
               log_p1=log_p1, log_p1_se=0.1, effective_sample_size=5.0, reliable=False,
               leakage=log_p1 - config.log_p0, leakage_bound=1.0, bound_order=4.0,
               traditional_bound=2.0, traditional_order=8.0, mean_log_f=-11.0, std_log_f=1.0,
               canary_probability_median=1e-5)
  point["reliable"] = point["effective_sample_size"] >= config.min_effective_sample_size
  return {**point, **changes}, config


def _gnmax_cell(**changes):
  cell = {"orders": [2.0, 8.0], "divergence": [0.25, 1.0], "histogram": [[2, 1], [3, 0]],
          "neighbor": [[1, 2], [2, 1]], "two_level": [0.25, 0.9],
          "data_independent": [0.5, 2.0], "ratio": [0.5, 0.5], "evaluations": 7,
          "seconds": 0.1}
  return {**cell, **changes}


def _domias_cell(**changes):
  metrics = {"auc": 0.6, "accuracy": 0.55, "tpr_at_fpr": {"0.01": 0.02, "0.1": 0.2},
             "precision_at_top": {"0.01": 1.0, "0.1": 0.7}, "epsilon_per_record": 0.0,
             "epsilon_one_run": math.nan}
  cell = {"attacks": {"domias": metrics, "eq1": metrics}, "groups": {"minority": {}},
          "quality": 0.3, "claimed_epsilon": math.inf, "num_members": 100,
          "wall_time_s": {"generator": 1.0}, "seconds": 2.0}
  return {**cell, **changes}


def _validators():
  from dpaudit.accounting import gnmax_worst_case
  from dpaudit.audits import dpsgd, reconstruction
  from experiments import tradeoff

  def grid(changes):
    cell, config = _grid_cell(**changes)
    dpsgd.check_grid_cell(cell, config)

  def ngram(changes):
    point, config = _ngram_point(**changes)
    reconstruction.NgramCanaryPoint.from_dict(point, config)

  return {
      "dpsgd": lambda c: dpsgd.DPSGDAuditResult.from_dict(_dpsgd_result(**c)),
      "dpsgd raw": lambda c: dpsgd.DPSGDAuditResult.from_dict({**_dpsgd_result(), **c}),
      "grid": grid,
      "tradeoff": lambda c: tradeoff.run_from_dict(_tradeoff_run(**c)),
      "ngram": ngram,
      "gnmax": lambda c: gnmax_worst_case.check_stored(_gnmax_cell(**c), 3, 2, 2.0,
                                                       [2.0, 8.0]),
  }


BROKEN = [  # (validator, changes to a whole result, what breaks)
    ("dpsgd", {"epsilon_lower_bound": 3.5}, "above its own ceiling"),
    ("dpsgd", {"epsilon_lower_bound": math.nan}, "must not be NaN"),
    ("dpsgd", {"test_accuracy": 1.5}, "outside"),
    ("dpsgd", {"sampling_rate": 0.0}, "sampling_rate"),
    ("dpsgd", {"game": "uniaud"}, "not an audit"),
    ("dpsgd raw", {"warnings": ["made up"]}, "warnings"),
    ("dpsgd raw", {"epsilon_optimistic": 1.0}, "unexpected keys"),
    ("dpsgd raw", {"num_steps": 2.5}, "must be int"),
    ("dpsgd raw", {"details": []}, "must be dict"),
    ("grid", {"status": "running"}, "neither"),
    ("grid", {"result": {}}, "has no"),
    ("grid", {"config": {"game": "many_run"}}, "another audit configuration"),
    ("tradeoff", {"eval_accuracy": -0.1}, "[0, 1]"),
    ("tradeoff", {"loss_curve": [0.5]}, "loss curve"),
    ("tradeoff", {"loss_curve_steps": [2, 4]}, "loss curve"),
    ("tradeoff", {"extra": 1}, "unexpected keys"),
    ("tradeoff", {"seed": True}, "must be int"),
    ("ngram", {"log_p1": 0.5}, "log_p1 <= 0"),
    ("ngram", {"leakage": 99.0}, "leakage == log_p1 - log_p0"),
    ("ngram", {"reliable": True}, "reliable =="),
    ("ngram", {"leakage_bound": 1e3}, "leakage_bound <= log(1/p0)"),
    ("gnmax", {"divergence": [0.25, 2.5], "ratio": [0.5, 1.25]}, "above its bound"),
    ("gnmax", {"ratio": [0.5, 0.4]}, "ratio"),
    ("gnmax", {"histogram": [[2, 1], [2, 0]]}, "votes"),
    ("gnmax", {"neighbor": [[1, 2], [3, 0]]}, "neighbour"),
    ("gnmax", {"divergence": [0.25]}, "2 orders"),
    ("gnmax", {"two_level": [0.3, 0.9]}, "two-level above"),
]


def test_validators_accept_whole_results():
  for validate in _validators().values():
    validate({})  # raises if the whole result is refused


@pytest.mark.parametrize("name,changes,message", BROKEN,
                         ids=[f"{n}-{m}" for n, _, m in BROKEN])
def test_validators_refuse_broken_results(name, changes, message):
  with pytest.raises(results.VALIDATION_ERRORS) as caught:
    _validators()[name](changes)
  assert message in str(caught.value)


DOMIAS_BROKEN = [
    ({"attacks": {"domias": {}}}, "hold ['domias'], not ['domias', 'eq1']"),
    ({"groups": {"minority": {"domias": {}, "eq1": {}}}}, "has no 'auc'"),
    ({"num_members": 1.5}, "must be int"),
    ({"seconds": "1"}, "must be float"),
]


def test_domias_game_validator():
  """dpaudit.audits.domias_studies.check_game_cell (the DOMIAS experiment's cell validator)."""
  from dpaudit.audits import domias_studies  # pylint: disable=g-import-not-at-top
  metrics = _domias_cell()["attacks"]["domias"]
  cases = [_domias_cell()] + [_domias_cell(**changes) for changes, _ in DOMIAS_BROKEN] + [
      _domias_cell(attacks={"domias": {**metrics, "auc": 1.5}, "eq1": metrics}),
      _domias_cell(attacks={"domias": {**metrics, "epsilon_per_record": -1.0}, "eq1": metrics})]
  lines = []
  for cell in results.loads(results.dumps(cases)):
    try:
      domias_studies.check_game_cell(cell, ("domias", "eq1"))
      lines.append("whole")
    except results.VALIDATION_ERRORS as e:
      lines.append(f"{type(e).__name__} {e}")
  assert len(lines) == len(cases) and lines[0] == "whole", lines
  for line, (_, message) in zip(lines[1:], DOMIAS_BROKEN):
    assert message in line, line
  assert "rate outside [0, 1]" in lines[-2] and "negative epsilon bound" in lines[-1]


def test_an_experiment_recomputes_edited_cells(tmp_path):
  """The issue's case: a stored GNMax cell whose divergence was edited above its own bound
  (digest updated to match) and one emptied to {} are recomputed by a rerun, one warning line
  each, and results.json is that of the first run (the cells' timings aside)."""
  flags = [f"--output_dir={tmp_path}", "--num_teachers=4", "--num_classes=3",
           "--noise_multipliers=1,2",
           "--orders=2", "--max_steps=2", "--num_random_starts=0", "--noplot"]

  def run():
    out = subprocess.run([sys.executable, "-m", "experiments.gnmax_worst_case", *flags],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    cells = results.read_json(tmp_path / "results.json")["cells"]
    return out.stderr, {name: {k: v for k, v in cell.items() if k != "seconds"}
                        for name, cell in cells.items()}

  _, first = run()
  paths = sorted(str(p) for p in (tmp_path / "cells").glob("*.json"))
  assert len(paths) == 2
  edited = {**first["k=4, sigma=1"], "divergence": [5.0], "ratio": [2.5], "seconds": 1.0}
  _rewrite([p for p in paths if "sigma1-" in p][0], _set_result(edited, digest=True))
  _rewrite([p for p in paths if "sigma2-" in p][0], _set_result({}))
  stderr, again = run()
  warnings_ = [line for line in stderr.splitlines() if line.startswith("warning: ")]
  assert len(warnings_) == 2 and "Traceback" not in stderr, stderr
  assert "a divergence above its bound" in warnings_[0] and paths[0] in warnings_[0]
  assert "does not match its digest" in warnings_[1] and paths[1] in warnings_[1]
  assert "[reused]" not in stderr
  assert results.dumps(again) == results.dumps(first)
