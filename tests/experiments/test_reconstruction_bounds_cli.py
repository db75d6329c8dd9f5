"""`python -m experiments.reconstruction_bounds` (Stock et al., Figs. 1 and 2): a smoke run of
the CLI and the error path. The library logic (dpaudit.audits.reconstruction_bounds) is tested
in tests/audits/test_reconstruction_bounds.py."""

import numpy as np
import pytest

from dpaudit.results import read_json
from tests.conftest import run_cli_cases


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_cases)."""
  grid, orders = (tmp_path_factory.mktemp(name) for name in ("grid", "orders"))
  cases = {
      "sigma": ("--noise_multipliers=-1", "--noplot"),
      "steps": ("--min_steps=10", "--max_steps=5"),
      "grid": (f"--output_dir={grid}", "--noise_multipliers=0.5,1.0", "--num_steps=20000",
               "--max_bits=60", "--num_bits=13", "--min_steps=100", "--max_steps=100000",
               "--num_step_points=4", "--fig2_bits=40"),
      "orders": (f"--output_dir={orders}", "--noise_multipliers=0.7", "--num_steps=500",
                 "--sampling_rate=0.01", "--orders=3,1.5,2,2,40", "--nopld", "--noplot",
                 "--max_bits=20", "--num_bits=5", "--min_steps=10", "--max_steps=20",
                 "--num_step_points=30", "--fig2_bits=0"),
  }
  outs = run_cli_cases("experiments.reconstruction_bounds", *cases.values())
  return {**dict(zip(cases, outs)), "grid_dir": grid, "orders_dir": orders}


def test_small_grid_writes_results_plots_and_bounds_have_their_properties(runs):
  tmp_path = runs["grid_dir"]
  out = runs["grid"]
  assert out.returncode == 0, out.stderr
  results = read_json(tmp_path / "results.json")
  for key in ("fig1", "fig2", "properties_hold", "experiment", "config", "versions",
              "wall_time_s", "command"):
    assert key in results, key
  assert results["experiment"] == "reconstruction_bounds" and results["properties_hold"]
  assert results["config"]["sigmas"] == [0.5, 1.0] and results["config"]["num_steps"] == 20000
  assert (tmp_path / "fig1_bits.png").stat().st_size > 10_000
  assert (tmp_path / "fig2_steps.png").stat().st_size > 10_000
  assert "eps_rdp" in out.stdout and "hold" in out.stdout

  eps = []
  for row in results["fig1"]:
    b = np.asarray(row["bits"])
    l2, trad = np.asarray(row["leakage_bits"]), np.asarray(row["traditional_bits"])
    assert b.shape == (13,) and b[0] == 0.0 and b[-1] == 60.0 and l2[0] == 0.0
    assert np.all(l2 <= trad + 1e-9) and np.all(l2 <= b + 1e-9)
    assert np.all(np.diff(l2) >= -1e-9) and np.all(np.diff(b - l2) >= -1e-9)
    assert np.all(np.diff(np.diff(l2)) <= 1e-9)  # concave (uniform grid)
    assert not row["property_violations"]
    assert 0 < row["epsilon_pld"] <= row["epsilon_rdp"]
    orders = np.asarray(row["leakage_order"])
    assert np.all((orders == 1.0) | ((orders >= 1.01) & (orders <= 256)))
    eps.append(row["epsilon_rdp"])
  assert eps[0] > eps[1]  # more noise, smaller epsilon

  f2 = results["fig2"]
  steps = np.asarray(f2["num_steps"])
  assert steps.tolist() == [100, 1000, 10000, 100000] and f2["secret_bits"] == 40.0
  l2, trad = np.asarray(f2["leakage_bits"]), np.asarray(f2["traditional_bits"])
  assert np.all(l2 <= trad) and np.all(l2 <= 40.0)
  assert np.all(np.diff(l2) > 0) and np.all(np.diff(trad) > 0)  # more steps, more leakage
  assert np.all(np.diff(f2["epsilon_rdp"]) > 0)


def test_bad_flag_is_one_line_error(runs):
  out = runs["sigma"]  # --noise_multipliers=-1 --noplot
  assert out.returncode == 2
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error:"), out.stderr
  assert "--noise_multipliers=-1" in lines[0], out.stderr
  assert "Traceback" not in out.stderr
  out = runs["steps"]  # --min_steps=10 --max_steps=5
  assert out.returncode == 2 and out.stderr.startswith("error: --max_steps=5")


def test_orders_pld_and_plot_flags_reach_the_config(runs):
  tmp_path = runs["orders_dir"]
  out = runs["orders"]  # --orders=3,1.5,2,2,40 --nopld --noplot ...
  assert out.returncode == 0, out.stderr
  results = read_json(tmp_path / "results.json")
  assert results["config"]["orders"] == [1.5, 2.0, 3.0, 40.0] and results["config"]["pld"] is False
  assert results["fig1"][0]["epsilon_pld"] is None and "None" in out.stdout
  assert results["fig2"]["num_steps"] == list(range(10, 21))
  assert results["fig2"]["leakage_bits"] == [0.0] * 11  # b = 0 leaks nothing
  assert not list(tmp_path.glob("*.png"))
