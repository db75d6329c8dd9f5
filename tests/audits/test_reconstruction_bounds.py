"""Tests of dpaudit.audits.reconstruction_bounds (Stock et al. 2022, Figs. 1 and 2): the bounds
against closed forms for full-batch DP-SGD, the property check, the config's validation, and
run() against its building blocks and dp-accounting."""

import ast
import dataclasses
import inspect
import json
import math

import numpy as np
import pytest

from dpaudit import accounting
from dpaudit.audits import reconstruction_bounds as rb

LOG2 = math.log(2.0)
SMALL_ORDERS = (1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 32.0)


def _full_batch_reference(rho, bits, orders):
  """L_2 and h (bits) by brute force over ``orders`` for d_alpha = rho * alpha."""
  alpha = np.asarray(orders)[None, :]
  b = np.asarray(bits, np.float64)[:, None]
  l2 = np.minimum(b[:, 0], np.min(rho * (alpha - 1) / LOG2 + b / alpha, axis=1))
  h = np.min(rho * alpha + b * LOG2 / (alpha - 1), axis=1) / LOG2
  return l2, h


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
  np.testing.assert_allclose(got.leakage_bits, np.minimum(bits, l2), rtol=1e-10)
  h = np.min(rho * alpha + bits[:, None] * LOG2 / (alpha - 1), axis=1) / LOG2
  np.testing.assert_allclose(got.traditional_bits, h, rtol=1e-10)

  # ... and against the minimum over all alpha > 1: alpha* = sqrt(b log 2 / rho) (inside the
  # grid here), L_2 = 2 sqrt(b rho / log 2) - rho / log 2; alpha* - 1 = sqrt(b log 2 / rho)
  # for h, h = rho + 2 sqrt(rho b log 2) nats.
  a_star = np.sqrt(bits * LOG2 / rho)
  assert np.all(a_star > 1.01)
  l2_exact = 2 * np.sqrt(bits * rho / LOG2) - rho / LOG2
  np.testing.assert_allclose(got.leakage_bits, l2_exact, rtol=1e-4)
  np.testing.assert_allclose(got.leakage_order, a_star, atol=0.03)
  h_exact = (rho + 2 * np.sqrt(rho * bits * LOG2)) / LOG2
  np.testing.assert_allclose(got.traditional_bits, h_exact, rtol=1e-4)
  assert not rb.property_violations(bits, got.leakage_bits, got.traditional_bits)


def test_steps_curves_full_batch_match_closed_form():
  """Fig. 2 at q = 1: d_alpha = rho(T) alpha with rho(T) = T / (2 sigma^2), per step count."""
  sigma, secret_bits = 8.0, 12.0
  steps = np.array([1, 4, 16, 64])
  got = rb.steps_curves(sigma, 1.0, steps, secret_bits, SMALL_ORDERS)
  assert got.leakage_bits.shape == got.traditional_order.shape == (steps.size,)
  for i, t in enumerate(steps):
    l2, h = _full_batch_reference(t / (2 * sigma**2), [secret_bits], SMALL_ORDERS)
    assert got.leakage_bits[i] == pytest.approx(l2[0], rel=1e-10)
    assert got.traditional_bits[i] == pytest.approx(h[0], rel=1e-10)
  assert np.all(np.diff(got.leakage_bits) > 0) and np.all(got.leakage_bits <= secret_bits)


def test_bounds_in_bits_orders_and_trivial_term():
  """At b = 0 the trivial term b gives L_2 = 0 at order 1.0; an infinite RDP curve gives an
  infinite traditional bound with order NaN while L_2 stays at b."""
  rdp = np.stack([np.full(len(SMALL_ORDERS), 0.5), np.full(len(SMALL_ORDERS), np.inf)])
  got = rb.bounds_in_bits(rdp[:, None, :], SMALL_ORDERS, np.array([0.0, 10.0]))
  assert got.leakage_bits.shape == (2, 2)
  assert got.leakage_bits[0, 0] == 0.0 and got.leakage_order[0, 0] == 1.0
  np.testing.assert_array_equal(got.leakage_bits[1], [0.0, 10.0])
  assert np.all(np.isinf(got.traditional_bits[1])) and np.all(np.isnan(got.traditional_order[1]))
  assert set(got.to_dict()) == {"leakage_bits", "leakage_order", "traditional_bits",
                                "traditional_order"}


def test_property_check_flags_a_convex_curve():
  b = np.linspace(0.0, 10.0, 11)
  assert rb.property_violations(b, b**2 / 40, b**2) == ["leakage concave"]
  assert "leakage <= b" in rb.property_violations(b, 2 * b, 3 * b)
  assert rb.property_violations(b, b / 2, b) == []
  with pytest.raises(ValueError, match="shape"):
    rb.property_violations(b, b[:-1], b)


def test_default_orders_and_steps_grid():
  orders = rb.default_orders()
  assert orders[0] == 1.01 and orders[-1] == 256.0
  assert np.all(np.diff(orders) > 0)
  assert set(range(2, 65)) <= set(orders.tolist())
  np.testing.assert_array_equal(rb.steps_grid(100, 100_000, 4), [100, 1000, 10_000, 100_000])
  np.testing.assert_array_equal(rb.steps_grid(10, 20, 30), np.arange(10, 21))  # no duplicates
  np.testing.assert_array_equal(rb.steps_grid(7, 7, 1), [7])
  with pytest.raises(ValueError, match=r"max_steps=5 is outside the valid range \[10, inf\)"):
    rb.steps_grid(10, 5, 3)
  with pytest.raises(ValueError, match=r"num=0 is outside"):
    rb.steps_grid(1, 5, 0)


def test_config_defaults_are_the_paper_setting_and_to_dict_is_plain():
  config = rb.ReconstructionBoundsConfig()
  assert config.sigmas == (0.3, 0.4, 0.5, 1.0) and config.sampling_rate == 2.81e-4
  assert config.num_steps == 186_000 and config.delta == 3e-7
  assert config.fig2_bits == 40.0 and config.fig2_sigma == 0.4
  np.testing.assert_array_equal(config.orders, rb.default_orders())
  d = config.to_dict()
  assert list(d) == ["sigmas", "sampling_rate", "num_steps", "delta", "max_bits", "num_bits",
                     "fig2_bits", "fig2_sigma", "min_steps", "max_steps", "num_step_points",
                     "pld", "orders"]
  assert d["sigmas"] == [0.3, 0.4, 0.5, 1.0] and isinstance(d["orders"], list)
  json.dumps(d)  # plain Python values only
  with pytest.raises(dataclasses.FrozenInstanceError):
    config.num_steps = 1  # type: ignore[misc]


def test_config_normalises_orders_and_numbers():
  config = rb.ReconstructionBoundsConfig(sigmas=np.array([1, 2]), orders=[3, 1.5, 2, 2],
                                         num_steps=np.int64(20), max_steps=1000.0, pld=np.True_)
  assert config.sigmas == (1.0, 2.0) and config.orders == (1.5, 2.0, 3.0)
  assert config.num_steps == 20 and type(config.num_steps) is int
  assert config.max_steps == 1000 and type(config.max_steps) is int and config.pld is True


@pytest.mark.parametrize("kwargs, message", [
    (dict(sigmas=()), "sigmas is empty; need at least one noise multiplier"),
    (dict(sigmas=(0.5, -1.0)), "sigmas=0.5,-1 is outside the valid range (0, inf) for each"),
    (dict(sigmas=(math.nan,)), "sigmas=nan is outside the valid range (0, inf) for each"),
    (dict(sigmas=("a",)), "sigmas=('a',) must be a sequence of numbers"),
    (dict(sampling_rate=0.0), "sampling_rate=0.0 is outside the valid range (0, 1]"),
    (dict(sampling_rate=1.5), "sampling_rate=1.5 is outside the valid range (0, 1]"),
    (dict(num_steps=0), "num_steps=0 is outside the valid range [1, inf)"),
    (dict(num_steps=2.5), "num_steps=2.5 must be a whole number"),
    (dict(num_steps=True), "num_steps=True must be a number, not a boolean"),
    (dict(delta=1.0), "delta=1.0 is outside the valid range (0, 1)"),
    (dict(delta=math.nan), "delta=nan is outside the valid range (0, 1)"),
    (dict(max_bits=math.inf), "max_bits=inf is outside the valid range (0, inf)"),
    (dict(num_bits=1), "num_bits=1 is outside the valid range [2, inf)"),
    (dict(fig2_bits=-1.0), "fig2_bits=-1.0 is outside the valid range [0, inf)"),
    (dict(fig2_sigma=0.0), "fig2_sigma=0.0 is outside the valid range (0, inf)"),
    (dict(min_steps=0), "min_steps=0 is outside the valid range [1, inf)"),
    (dict(min_steps=10, max_steps=5), "max_steps=5 is outside the valid range [min_steps=10, inf)"),
    (dict(num_step_points=0), "num_step_points=0 is outside the valid range [1, inf)"),
    (dict(pld="yes"), "pld='yes' must be True or False"),
    (dict(orders=(1.0, 2.0)), "orders=1,2 is outside the valid range (1, inf) for each"),
    (dict(orders=(2.0, math.inf)), "orders=2,inf is outside the valid range (1, inf) for each"),
    (dict(orders=()), "orders is empty; need at least one element"),
    (dict(sampling_rate="x"), "sampling_rate='x' must be a number"),
])
def test_config_validation_names_the_argument_value_and_range(kwargs, message):
  with pytest.raises(ValueError) as info:
    rb.ReconstructionBoundsConfig(**kwargs)
  assert str(info.value) == message


def test_run_matches_its_building_blocks_and_dp_accounting():
  config = rb.ReconstructionBoundsConfig(
      sigmas=(0.8, 2.0), sampling_rate=0.01, num_steps=300, delta=1e-5, max_bits=30.0,
      num_bits=7, fig2_bits=20.0, fig2_sigma=1.0, min_steps=10, max_steps=1000,
      num_step_points=3, pld=True, orders=SMALL_ORDERS)
  result = rb.run(None, config)
  assert result.properties_hold and len(result.fig1) == 2
  for sigma, panel in zip(config.sigmas, result.fig1):
    assert panel.sigma == sigma and panel.property_violations == ()
    np.testing.assert_array_equal(panel.bits, np.linspace(0.0, 30.0, 7))
    rdp = accounting.dpsgd_rdp(sigma, 0.01, 300, np.asarray(SMALL_ORDERS))
    expected = rb.bounds_in_bits(rdp, SMALL_ORDERS, panel.bits)
    np.testing.assert_allclose(panel.bounds.leakage_bits, expected.leakage_bits, rtol=1e-12)
    np.testing.assert_allclose(panel.bounds.traditional_bits, expected.traditional_bits,
                               rtol=1e-12)
    at = rb.bounds_in_bits(rdp, SMALL_ORDERS, rb.TABLE_BITS)
    np.testing.assert_allclose(panel.at_bits.leakage_bits, at.leakage_bits, rtol=1e-12)
    np.testing.assert_array_equal(panel.table_bits, rb.TABLE_BITS)
    # dp-accounting's series at fractional orders is conservative: never a smaller bound.
    assert np.all(panel.at_bits_dp_accounting_series.leakage_bits
                  >= panel.at_bits.leakage_bits * (1 - 1e-12))
    assert panel.epsilon_rdp == pytest.approx(
        accounting.dpsgd_epsilon(sigma, 0.01, 300, 1e-5, accountant="rdp"), rel=1e-12)
    assert 0 < panel.epsilon_pld <= panel.epsilon_rdp
  assert result.fig1[0].epsilon_rdp > result.fig1[1].epsilon_rdp

  f2 = result.fig2
  np.testing.assert_array_equal(f2.num_steps, [10, 100, 1000])
  assert f2.sigma == 1.0 and f2.secret_bits == 20.0
  for i, t in enumerate(f2.num_steps):
    one = rb.bound_curves(1.0, 0.01, int(t), 20.0, SMALL_ORDERS)
    assert f2.bounds.leakage_bits[i] == pytest.approx(float(one.leakage_bits), rel=1e-12)
    assert f2.bounds.traditional_bits[i] == pytest.approx(float(one.traditional_bits),
                                                          rel=1e-12)
  assert np.all(np.diff(f2.epsilon_rdp) > 0)


def test_result_to_dict_has_the_results_json_keys():
  config = rb.ReconstructionBoundsConfig(
      sigmas=(1.0,), sampling_rate=0.05, num_steps=50, max_bits=10.0, num_bits=3,
      min_steps=5, max_steps=50, num_step_points=2, pld=False, orders=SMALL_ORDERS)
  d = rb.run(None, config).to_dict()
  assert list(d) == ["fig1", "fig2", "properties_hold"] and d["properties_hold"] is True
  bounds = ["leakage_bits", "leakage_order", "traditional_bits", "traditional_order"]
  row = d["fig1"][0]
  assert list(row) == ["sigma", "epsilon_rdp", "epsilon_pld", "bits", *bounds, "at_bits",
                       "at_bits_dp_accounting_series", "property_violations"]
  assert list(row["at_bits"]) == ["bits", *bounds]
  assert list(row["at_bits_dp_accounting_series"]) == bounds
  assert row["epsilon_pld"] is None and row["property_violations"] == []
  assert row["bits"] == [0.0, 5.0, 10.0] and isinstance(row["leakage_bits"], list)
  assert list(d["fig2"]) == ["sigma", "secret_bits", "num_steps", *bounds, "epsilon_rdp"]
  assert d["fig2"]["num_steps"] == [5, 50] and type(d["fig2"]["num_steps"][0]) is int
  json.dumps(d)  # plain Python values only


def test_run_rejects_a_dict_config():
  with pytest.raises(ValueError, match="config must be a ReconstructionBoundsConfig"):
    rb.run(None, {"sigmas": [1.0]})


def test_library_module_imports_neither_absl_nor_experiments():
  tree = ast.parse(inspect.getsource(rb))
  names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
           for alias in node.names]
  names += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
  assert names and not [n for n in names if n.split(".")[0] in ("absl", "experiments")]


def test_result_round_trips_and_is_reused_from_a_store(tmp_path):
  from dpaudit import results
  config = rb.Config(sigmas=(1.0, 2.0), sampling_rate=0.05, num_steps=50, max_bits=10.0,
                     num_bits=3, min_steps=5, max_steps=50, num_step_points=2, pld=False,
                     orders=SMALL_ORDERS)
  calls = []
  result = rb.run(None, config, progress=lambda done, total, message="": calls.append(done))
  assert calls[-1] == len(config.sigmas) + 1
  d = results.loads(results.dumps(result.to_dict()))
  again = rb.Result.from_dict(d)
  assert again.to_dict() == result.to_dict()
  assert again.fig2.num_steps.dtype == np.int64 and again.fig1[0].epsilon_pld is None
  for damage in ({"fig1": []}, {"properties_hold": False},
                 {"fig2": {**d["fig2"], "num_steps": [5.5, 50]}},
                 {"fig2": {**d["fig2"], "leakage_bits": [1.0]}}):
    with pytest.raises((ValueError, TypeError, KeyError)):
      rb.Result.from_dict({**d, **damage})
  store = results.CellStore(str(tmp_path))
  assert rb.run(None, config, store=store).to_dict() == result.to_dict()
  assert rb.run(None, config, store=store).to_dict() == result.to_dict()  # reused
  assert len(list(tmp_path.glob("reconstruction_bounds-*.json"))) == 1
