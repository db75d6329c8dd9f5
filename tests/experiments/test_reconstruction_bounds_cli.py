"""`python -m experiments.reconstruction_bounds` (Stock et al., Figs. 1 and 2): a smoke run of
the CLI, the bounds against closed forms for full-batch DP-SGD, and the error path."""

import math
import os
import subprocess
import sys

import numpy as np

from experiments import reconstruction_bounds as rb
from dpaudit.results import read_json

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOG2 = math.log(2.0)


def _run(*flags):
  return subprocess.run([sys.executable, "-m", "experiments.reconstruction_bounds", *flags],
                        capture_output=True, text=True, cwd=ROOT)


def test_small_grid_writes_results_plots_and_bounds_have_their_properties(tmp_path):
  out = _run(f"--output_dir={tmp_path}", "--sigmas=0.5,1.0", "--num_steps=20000",
             "--max_bits=60", "--num_bits=13", "--min_steps=100", "--max_steps=100000",
             "--num_step_points=4", "--fig2_bits=40")
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


def test_full_batch_bounds_match_closed_forms():
  """q = 1: T Gaussian steps have d_alpha = rho * alpha with rho = T / (2 sigma^2) (nats), so
  L_2(b) = min(b, min_alpha rho (alpha - 1) / log 2 + b / alpha) and
  h(b) = min_alpha rho alpha + b log 2 / (alpha - 1), computed here without the library."""
  sigma, steps = 5.0, 10
  rho = steps / (2 * sigma**2)
  bits = np.linspace(0.5, 20.0, 40)
  orders = rb.default_orders()
  got = rb.bound_curves(sigma, 1.0, steps, bits, orders)

  # Brute force over the same orders (exact up to rounding) ...
  alpha = orders[None, :]
  l2 = np.min(rho * (alpha - 1) / LOG2 + bits[:, None] / alpha, axis=1)
  np.testing.assert_allclose(got["leakage_bits"], np.minimum(bits, l2), rtol=1e-10)
  h = np.min(rho * alpha + bits[:, None] * LOG2 / (alpha - 1), axis=1) / LOG2
  np.testing.assert_allclose(got["traditional_bits"], h, rtol=1e-10)

  # ... and against the minimum over all alpha > 1: alpha* = sqrt(b log 2 / rho) (inside the
  # grid here), L_2 = 2 sqrt(b rho / log 2) - rho / log 2; alpha* - 1 = sqrt(b log 2 / rho)
  # for h, h = rho + 2 sqrt(rho b log 2) nats.
  a_star = np.sqrt(bits * LOG2 / rho)
  assert np.all(a_star > 1.01)
  l2_exact = 2 * np.sqrt(bits * rho / LOG2) - rho / LOG2
  np.testing.assert_allclose(got["leakage_bits"], l2_exact, rtol=1e-4)
  np.testing.assert_allclose(got["leakage_order"], a_star, atol=0.03)
  h_exact = (rho + 2 * np.sqrt(rho * bits * LOG2)) / LOG2
  np.testing.assert_allclose(got["traditional_bits"], h_exact, rtol=1e-4)
  assert not rb.property_violations(bits, got["leakage_bits"], got["traditional_bits"])


def test_property_check_flags_a_convex_curve():
  b = np.linspace(0.0, 10.0, 11)
  assert rb.property_violations(b, b**2 / 40, b**2) == ["leakage concave"]
  assert "leakage <= b" in rb.property_violations(b, 2 * b, 3 * b)


def test_bad_flag_is_one_line_error():
  out = _run("--sigmas=-1", "--noplot")
  assert out.returncode == 2
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error:") and "--sigmas=-1" in lines[0], out.stderr
  assert "Traceback" not in out.stderr
  out = _run("--min_steps=10", "--max_steps=5")
  assert out.returncode == 2 and out.stderr.startswith("error: --max_steps=5")
