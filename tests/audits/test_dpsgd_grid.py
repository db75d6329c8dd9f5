"""The grid of DP-SGD audits as a library call, without absl: the cells of a grid, a tiny run
that stores, skips and reuses cells, the summary table, and loud failures on bad settings."""

import io
import math
import os

import pytest

from dpaudit import results
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
  assert list(recorded) == list(grid.SHARED_FIELDS) + list(grid.DATA_FIELDS)
  assert "data_dir" not in recorded and "audits" not in recorded
  # 2 and 2.0 name the same cell (its key is a hash of the strict JSON).
  same = grid.DPSGDGridConfig(epochs=2.0, epsilons=(4.0,))
  cell, = config.cell_configs()
  assert results.config_key(config.cell_key(cell)) == results.config_key(
      same.cell_key(same.cell_configs()[0]))


def test_run_stores_skips_and_reuses_cells(tmp_path, data_dir):
  # Non-private (no accounting) and half an epoch: the time goes to compiling the game.
  config = grid.DPSGDGridConfig(audits=(("one_run", "in_distribution"),), epsilons=(INF,),
                                num_canaries=(5000, 40), epochs=0.5, batch_size=64,
                                hidden_sizes=(8,), data_dir=data_dir)
  cells_dir = str(tmp_path / "cells")
  progress = io.StringIO()
  result = grid.run(config, cells_dir, progress_stream=progress)
  skipped, done = result.cells
  assert skipped["status"] == "skipped" and "num_canaries=5000" in skipped["reason"]
  assert done["status"] == "done" and not done["reused"]
  r = done["result"]
  assert 0.0 <= r["epsilon_lower_bound"] <= r["epsilon_ceiling"]
  assert r["epsilon_theory"] == INF and r["noise_multiplier"] == 0.0
  assert r["num_observations"] == 40 and 0.0 <= r["test_accuracy"] <= 1.0
  assert result.num_train + result.num_pool + result.num_test == 1797
  assert result.example_shape == (8, 8, 1)
  lines = progress.getvalue().splitlines()
  assert lines[0].startswith("[1/2] one_run:in_distribution eps=inf m=5000 skipped")
  assert lines[1].startswith("[2/2] one_run:in_distribution eps=inf m=40 done eps_L=")
  names = sorted(os.listdir(cells_dir))
  assert [n.rsplit("-", 1)[0] for n in names] == ["one_run_in_distribution_epsinf_m40",
                                                  "one_run_in_distribution_epsinf_m5000"]
  plain = results.loads(results.dumps(result.to_dict()))
  assert plain["cells"] == results.loads(results.dumps(list(result.cells)))
  assert plain["data"]["example_shape"] == [8, 8, 1]
  rows = result.table().splitlines()
  assert len(rows) == 3 and "skipped: num_canaries=5000" in rows[1]
  assert float(rows[2].split()[4]) == pytest.approx(r["epsilon_lower_bound"], abs=0.005)
  grid.plot(result, str(tmp_path / "audit.png"))
  assert (tmp_path / "audit.png").stat().st_size > 0

  again = grid.run(config, cells_dir, progress_stream=io.StringIO())
  assert [c["reused"] for c in again.cells] == [True, True]
  assert again.cells[1]["result"] == r


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


@pytest.mark.parametrize("settings, message", [
    (dict(pool_fraction=1.5), "pool_fraction=1.5 is outside the valid range (0, 1)"),
    (dict(test_fraction=0.0), "test_fraction=0.0 is outside the valid range (0, 1)"),
    (dict(epsilons=(0.0,)), "epsilon=0.0 is outside the valid range (0, inf)"),
    (dict(epsilons=()), "epsilons is empty"),
    (dict(epsilons="4"), "epsilons='4' must be a sequence of numbers"),
    (dict(num_canaries=(1.5,)), "num_canaries=[1.5] must hold only integers"),
    (dict(num_canaries=(0,)), "num_canaries=0 must be an integer >= 1"),
    (dict(audits=(("uniaud", "mislabelled"),)),
     "canary='mislabelled' is not valid for game='uniaud'"),
    (dict(audits=("one_run",)), "must be a (game, canary) pair"),
    (dict(seed=-1), "seed=-1 is outside the valid range [0, 2^63)"),
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
