"""The grid of DP-SGD audits as a library call, without absl: the cells of a grid, a tiny run
that stores, skips and reuses cells, repetitions at consecutive seeds, the summary table, and
loud failures on bad settings."""

import dataclasses
import io
import math
import os

import jax
import pytest

from dpaudit import plots, results
from dpaudit.audits import dpsgd as audit
from dpaudit.audits import dpsgd_grid as grid

INF = math.inf


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp("tensorflow_datasets"))


def test_cells_vary_m_only_for_o1_games_and_lambda_only_for_uniaud_plus():
  config = grid.DPSGDGridConfig(
      audits=(("many_run", "dirac"), ("one_run", "gaussian"), ("uniaud_plus", "trigger")),
      epsilons=(1, INF), num_canaries=(10, 20), tag_weights=(1.0, 0.5))
  cells = config.cell_configs()
  assert len(cells) == 2 * 1 * 1 + 2 * 2 * 1 + 2 * 2 * 2
  many = [c for c in cells if c.game == "many_run"]
  assert {(c.num_canaries, c.tag_weight) for c in many} == {(10, 1.0)}
  one_run = [c for c in cells if c.game == "one_run"]
  assert {c.tag_weight for c in one_run} == {1.0}
  assert {(c.epsilon, c.num_canaries) for c in one_run} == {(1.0, 10), (1.0, 20), (INF, 10),
                                                            (INF, 20)}
  plus = [c for c in cells if c.game == "uniaud_plus"]
  assert len({(c.epsilon, c.num_canaries, c.tag_weight) for c in plus}) == 8
  assert all(c.epochs == config.epochs and c.hidden_sizes == (256,) for c in cells)
  assert [grid.cell_label(c) for c in cells[:2]] == ["many_run_dirac_eps1_m10",
                                                     "many_run_dirac_epsinf_m10"]


def test_config_records_shared_and_data_settings_and_normalises_numbers():
  config = grid.DPSGDGridConfig(epochs=2, epsilons=[4], data_dir="/nowhere")
  assert config.epochs == 2.0 and isinstance(config.epochs, float)
  assert config.epsilons == (4.0,)
  recorded = config.to_dict()
  # The options added later (model, canary shape, Case I) are recorded only when set, so the
  # records and cell keys of earlier grids are unchanged.
  earlier = [name for name in grid.SHARED_FIELDS if name not in audit.LATER_OPTIONS]
  assert list(recorded) == earlier + list(grid.DATA_FIELDS) + ["repetitions"]
  assert "data_dir" not in recorded and "audits" not in recorded
  case_one = grid.DPSGDGridConfig(audits=(("uniaud", "orthogonal"),), canary_dim=1000,
                                  num_canary_classes=1000, model="logistic")
  assert {k: case_one.to_dict()[k] for k in ("model", "canary_dim", "num_canary_classes")} == {
      "model": "logistic", "canary_dim": 1000, "num_canary_classes": 1000}
  assert case_one.cell_configs()[0].canary_dim == 1000
  assert "canaries_only" not in case_one.to_dict()
  # 2 and 2.0 name the same cell (its key is a hash of the strict JSON).
  same = grid.DPSGDGridConfig(epochs=2.0, epsilons=(4.0,))
  cell, = config.cell_configs()
  assert results.config_key(config.cell_key(cell)) == results.config_key(
      same.cell_key(same.cell_configs()[0]))


def test_poisoned_cells_beside_the_other_real_canaries_share_the_warmup_settings():
  # UniAud's Poisoned baseline is one more canary of the grid's vocabulary (many_run, one_run).
  config = grid.DPSGDGridConfig(
      audits=(("one_run", "mislabelled"), ("one_run", "poisoned"), ("many_run", "poisoned")),
      num_canaries=(10,), warmup_epochs=5, num_warmup_examples=100)
  cells = config.cell_configs()
  assert [grid.cell_label(c) for c in cells] == ["one_run_mislabelled_eps8_m10",
                                                  "one_run_poisoned_eps8_m10",
                                                  "many_run_poisoned_eps8_m10"]
  assert all((c.warmup_epochs, c.num_warmup_examples) == (5.0, 100) for c in cells)
  recorded = config.to_dict()
  assert (recorded["warmup_epochs"], recorded["num_warmup_examples"]) == (5.0, 100)
  assert isinstance(recorded["warmup_epochs"], float)  # 5 and 5.0 name the same cells
  assert "warmup_epochs" not in grid.DPSGDGridConfig().to_dict()  # earlier records unchanged


def test_repetitions_are_not_part_of_a_cell_key():
  # Repetition i is the single run at seed + i, cell for cell, key for key.
  config = grid.DPSGDGridConfig(seed=3, repetitions=4)
  assert config.seeds() == (3, 4, 5, 6)
  second = config.repetition(1)
  assert second == grid.DPSGDGridConfig(seed=4)
  cell, = config.cell_configs()
  assert second.cell_configs() == (cell,)
  assert second.cell_key(cell) == grid.DPSGDGridConfig(seed=4).cell_key(cell)
  assert config.cell_key(cell) == grid.DPSGDGridConfig(seed=3).cell_key(cell)
  assert "repetitions" not in config.cell_key(cell)
  with pytest.raises(ValueError, match=r"index=4 is outside the valid range \[0, 4\)"):
    config.repetition(4)


# Non-private (no accounting) and half an epoch: the time goes to compiling the game.
TINY = dict(audits=(("one_run", "in_distribution"),), epsilons=(INF,), num_canaries=(5000, 40),
            epochs=0.5, batch_size=64, hidden_sizes=(8,))


@pytest.fixture(scope="module")
def played(tmp_path_factory, data_dir):
  """One tiny grid played once at seed 0: (config, cells_dir, result, progress text)."""
  config = grid.DPSGDGridConfig(**TINY, data_dir=data_dir)
  cells_dir = str(tmp_path_factory.mktemp("grid") / "cells")
  progress = io.StringIO()
  result = grid.run(grid.seed_key(config), config, progress=_printer(progress),
                    store=results.CellStore(cells_dir))
  return config, cells_dir, result, progress.getvalue()


def _printer(stream):
  """A Progress that prints as dpaudit.results.print_progress does, to ``stream``."""
  return lambda done, total, message="": print(f"[{done}/{total}] {message}".rstrip(),
                                               file=stream)


def _run(config, cells_dir, key=None, progress=None):
  return grid.run(grid.seed_key(config) if key is None else key, config, progress=progress,
                  store=results.CellStore(cells_dir))


def test_run_stores_skips_and_reuses_cells(tmp_path, played):
  config, cells_dir, result, progress = played
  skipped, done = result.cells
  assert skipped["status"] == "skipped" and "num_canaries=5000" in skipped["reason"]
  assert done["status"] == "done" and not done["reused"]
  r = done["result"]
  assert 0.0 <= r["epsilon_lower_bound"] <= r["epsilon_ceiling"]
  assert r["epsilon_theory"] == INF and r["noise_multiplier"] == 0.0
  assert r["num_observations"] == 40 and 0.0 <= r["test_accuracy"] <= 1.0
  assert result.num_train + result.num_pool + result.num_test == 1797
  assert result.example_shape == (8, 8, 1)
  assert (done["repetition"], done["seed"]) == (0, 0)
  lines = progress.splitlines()
  assert lines[0].startswith("[1/2] one_run:in_distribution eps=inf m=5000 skipped")
  assert lines[1].startswith("[2/2] one_run:in_distribution eps=inf m=40 done eps_L=")
  names = sorted(os.listdir(cells_dir))
  assert [n.rsplit("-", 1)[0] for n in names] == ["one_run_in_distribution_epsinf_m40",
                                                  "one_run_in_distribution_epsinf_m5000"]
  plain = results.loads(results.dumps(result.to_dict()))
  assert plain["cells"] == results.loads(results.dumps(list(result.cells)))
  assert plain["data"]["example_shape"] == [8, 8, 1]
  rows = result.table().splitlines()
  assert len(rows) == 6 and "skipped: num_canaries=5000" in rows[1]
  assert rows[0].split() == ["audit", "eps", "m", "lambda", "eps_L", "fdp_gauss", "fdp_run",
                             "eps_O", "eps_theory", "test_acc", "sigma", "steps"]
  assert [row.split(":")[0] for row in rows[3:]] == ["eps_L", "fdp_gauss", "fdp_run"]
  assert "any (eps, delta)-DP" in rows[3] and "Gaussian (mu-GDP)" in rows[4]
  assert "[" not in result.table()  # one repetition: plain numbers, no spread
  assert float(rows[2].split()[4]) == pytest.approx(r["epsilon_lower_bound"], abs=0.005)
  assert float(rows[2].split()[5]) == pytest.approx(r["epsilon_fdp_gaussian"], abs=0.005)
  assert float(rows[2].split()[9]) == pytest.approx(r["test_accuracy"], abs=0.0005)
  point = result.summary()[1]
  assert point["spread"]["test_accuracy"]["values"] == [r["test_accuracy"]]
  plots.dpsgd_grid(result, str(tmp_path / "audit.png"))
  assert (tmp_path / "audit.png").stat().st_size > 0

  again = _run(config, cells_dir)
  assert [c["reused"] for c in again.cells] == [True, True]
  assert again.cells[1]["result"] == r
  # The game contract: Result.from_dict rebuilds the result from to_dict (strict JSON).
  assert grid.Result is grid.DPSGDGridResult and grid.Config is grid.DPSGDGridConfig
  back = grid.Result.from_dict(plain)
  assert back.to_dict() == result.to_dict()
  assert back == dataclasses.replace(  # data_dir: where the data was read, not a result
      result, config=dataclasses.replace(config, data_dir=None))
  for damage in ({"cells": plain["cells"][:1]}, {"summary": []}, {"data": {}},
                 {"config": {**plain["config"], "epsilons": [4.0]}}):
    with pytest.raises((ValueError, TypeError, KeyError)):
      grid.Result.from_dict({**plain, **damage})


def test_another_key_is_stored_under_its_own_name(tmp_path, played):
  config, cells_dir, result, _ = played
  heard = []
  other = _run(config, str(tmp_path), jax.random.key(5), lambda *a: heard.append(a))
  assert [h[:2] for h in heard] == [(1, 2), (2, 2)]
  assert [c["reused"] for c in other.cells] == [False, False]
  assert other.cells[1]["result"]["details"] != result.cells[1]["result"]["details"]
  # The seed's key finds the cells of the played grid under their old names.
  assert [c["reused"] for c in _run(config, cells_dir).cells] == [True, True]
  # Repetition keys: the seed's key gives the keys of consecutive seeds; another key folds in.
  twice = dataclasses.replace(config, repetitions=2)
  assert jax.random.key_data(grid.repetition_key(grid.seed_key(twice), twice, 1)).tolist() == \
      jax.random.key_data(grid.seed_key(dataclasses.replace(config, seed=1))).tolist()
  key = jax.random.key(5)
  assert grid.repetition_key(key, twice, 0) is key
  assert jax.random.key_data(grid.repetition_key(key, twice, 1)).tolist() == \
      jax.random.key_data(jax.random.fold_in(key, 1)).tolist()


def test_repetitions_play_consecutive_seeds_and_share_cells_with_single_runs(tmp_path, played):
  config, cells_dir, once, _ = played
  twice = dataclasses.replace(config, repetitions=2)
  progress = io.StringIO()
  result = _run(twice, cells_dir, progress=_printer(progress))
  assert [(c["repetition"], c["seed"], c["status"]) for c in result.cells] == [
      (0, 0, "skipped"), (0, 0, "done"), (1, 1, "skipped"), (1, 1, "done")]
  # Repetition 0 is the single run at seed 0 (reused from its store), repetition 1 is new.
  assert [c["reused"] for c in result.cells] == [True, True, False, False]
  assert result.cells[1]["result"] == once.cells[1]["result"]
  lines = progress.getvalue().splitlines()
  assert lines[3].startswith("[4/4] rep 2/2 (seed 1) one_run:in_distribution eps=inf m=40 done")
  # ... and the single run at seed 1 is repetition 1, read back without training.
  at_seed_1 = _run(dataclasses.replace(config, seed=1), cells_dir)
  assert [c["reused"] for c in at_seed_1.cells] == [True, True]
  assert at_seed_1.cells[1]["result"] == result.cells[3]["result"]
  again = _run(twice, cells_dir)
  assert all(c["reused"] for c in again.cells)

  skipped, point = result.summary()
  assert skipped["status"] == "skipped" and "num_canaries=5000" in skipped["reason"]
  assert point["status"] == "done" and point["seeds"] == [0, 1] and not point["optimistic"]
  first, second = (c["result"] for c in result.cells[1::2])
  for name in ("epsilon_lower_bound", "test_accuracy"):
    spread = point["spread"][name]
    assert spread["values"] == [first[name], second[name]] and spread["n"] == 2
    assert min(first[name], second[name]) <= spread["median"] <= max(first[name], second[name])
  assert grid.reported_epsilon(point["spread"]) is point["spread"]["epsilon_lower_bound"]

  rows = result.table().splitlines()
  assert rows[0].startswith("2 repetitions (seeds 0, 1): eps_L, fdp_gauss, fdp_run and "
                            "test_acc are median [min, ")
  assert len(rows) == 7 and "skipped: num_canaries=5000" in rows[2]
  assert results.format_spread(point["spread"]["epsilon_fdp_gaussian"], 2) in rows[3]
  assert results.format_spread(point["spread"]["test_accuracy"], 3) in rows[3]
  assert results.format_spread(point["spread"]["epsilon_lower_bound"], 2) in rows[3]
  assert "[" in rows[3]
  plain = results.loads(results.dumps(result.to_dict()))
  assert len(plain["cells"]) == 4 and plain["summary"][1]["spread"]["test_accuracy"][
      "values"] == [first["test_accuracy"], second["test_accuracy"]]
  plots.dpsgd_grid(result, str(tmp_path / "audit.png"))
  assert (tmp_path / "audit.png").stat().st_size > 0


def test_optimistic_cells_are_reported_by_their_own_key():
  result = {"epsilon_optimistic": 1.25, "epsilon_ceiling": 3.0, "epsilon_theory": 4.0,
            "test_accuracy": 0.9, "noise_multiplier": 1.1, "num_steps": 10, "optimistic": True,
            "wall_time_s": 0.5}
  cell = {"status": "done", "reused": False, "result": result,
          "config": {"game": "one_run", "canary": "gaussian", "epsilon": 4.0,
                     "num_canaries": 100, "tag_weight": 1.0}}
  assert grid.reported_epsilon(result) == 1.25
  assert grid.reported_epsilon({"epsilon_lower_bound": 0.5}) == 0.5
  assert grid.table([cell]).splitlines()[1].split()[4] == "1.25"
  config = grid.DPSGDGridConfig(audits=(("one_run", "gaussian"),), epsilons=(4.0,),
                                num_canaries=(100,)).cell_configs()[0]
  assert "eps_L*=1.250" in grid.progress_line(0, 1, config, cell)


def test_spread_table_of_optimistic_and_partly_skipped_points():
  # Hand-made cells (no training): an optimistic point at two seeds, and a point one of whose
  # repetitions was skipped.
  def cell(seed, m, bound=None, accuracy=0.5):
    config = {"game": "one_run", "canary": "gaussian", "epsilon": 4.0, "num_canaries": m,
              "tag_weight": 1.0}
    if bound is None:
      return {"status": "skipped", "reason": "too few", "config": config, "seed": seed}
    result = {"epsilon_optimistic": bound, "epsilon_ceiling": 3.0, "epsilon_theory": INF,
              "test_accuracy": accuracy, "noise_multiplier": 1.1, "num_steps": 10,
              "optimistic": True}
    return {"status": "done", "config": config, "result": result, "seed": seed}

  cells = [cell(4, 100, 1.5, 0.25), cell(4, 200, 0.5), cell(5, 100, 1.0, 0.75), cell(5, 200)]
  optimistic, partly = grid.summarise(cells)
  assert set(optimistic["spread"]) == {"epsilon_optimistic", *grid.SPREAD_FIELDS}
  assert grid.reported_epsilon(optimistic["spread"])["values"] == [1.5, 1.0]
  assert optimistic["spread"]["epsilon_theory"]["median"] == INF
  assert partly["status"] == "done" and partly["skipped"] == [{"seed": 5, "reason": "too few"}]
  assert partly["spread"]["test_accuracy"]["n"] == 1
  header, _, first, second, *legend = grid.table(cells).splitlines()
  assert header.startswith("2 repetitions (seeds 4, 5)")
  assert "1.25 [1.00, 1.50]" in first and "0.500 [0.250, 0.750]" in first
  # Results stored before the f-DP bounds existed show '-' there.
  assert first.split()[7:9] == ["-", "-"] and "fdp_gauss" not in optimistic["spread"]
  assert first.split()[10] == "inf"  # eps_theory: the median of inf, inf
  assert len(legend) == 4 and legend[-1].startswith("(*: correction=none, optimistic")
  assert "0.50" in second and "[" not in second and second.endswith("(1 of 2 skipped: too few)")


@pytest.mark.parametrize("settings, message", [
    (dict(pool_fraction=1.5), "pool_fraction=1.5 is outside the valid range (0, 1)"),
    (dict(test_fraction=0.0), "test_fraction=0.0 is outside the valid range (0, 1)"),
    (dict(epsilons=(0.0,)),
     "epsilons=0.0 (at flat index 0) is outside the valid range (0, inf)"),
    (dict(epsilons=(4.0, float("nan"))),
     "epsilons=nan (at flat index 1) is outside the valid range (0, inf)"),
    (dict(tag_weights=(-1.0,)),
     "tag_weights=-1.0 (at flat index 0) is outside the valid range [0, inf)"),
    (dict(epsilons=()), "epsilons is empty"),
    (dict(epsilons="4"), "epsilons='4' must be a sequence of numbers"),
    (dict(num_canaries=(1.5,)), "num_canaries=[1.5] must hold only integers"),
    (dict(num_canaries=(0,)), "num_canaries=0 must be an integer >= 1"),
    (dict(audits=(("uniaud", "mislabelled"),)),
     "canary='mislabelled' is not valid for game='uniaud'"),
    (dict(audits=(("uniaud", "poisoned"),)), "canary='poisoned' is not valid for game='uniaud'"),
    (dict(audits=(("one_run", "poisoned"),), warmup_epochs=0.0),
     "warmup_epochs=0.0 is outside the valid range (0, inf)"),
    (dict(num_warmup_examples=-1), "num_warmup_examples=-1 must be an integer >= 0"),
    (dict(audits=("one_run",)), "must be a (game, canary) pair"),
    (dict(seed=-1), "seed=-1 is outside the valid range [0, 2^63)"),
    (dict(repetitions=0), "repetitions=0 must be an integer >= 1"),
    (dict(repetitions=2.0), "repetitions=2.0 must be an integer >= 1"),
    (dict(seed=2**63 - 1, repetitions=2), "with repetitions=2 is outside the valid range"),
    (dict(dataset="imagenet"), "dataset='imagenet' is not one of"),
    (dict(prng_impl="mt19937"), "prng_impl='mt19937' is not one of"),
])
def test_bad_settings_raise_value_errors_naming_them(settings, message):
  with pytest.raises(ValueError) as error:
    grid.DPSGDGridConfig(**settings)
  assert message in str(error.value)


def test_prepare_data_rejects_a_bad_pool_fraction(data_dir):
  with pytest.raises(ValueError, match="pool_fraction=1.0 is outside the valid range"):
    grid.prepare_data("digits", 0.2, 1.0, 0, data_dir)
