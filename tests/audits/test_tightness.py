"""The tightness report: every family at a tiny setting, rows that hold their promises."""

import math

import pytest

from dpaudit import results
from dpaudit.audits import tightness

TINY = dict(noisy_argmax_trials=4000, dpsgd_runs=4, dpsgd_canaries=20, dpsgd_epochs=1.0,
            dpsgd_batch_size=16, dpsgd_hidden_sizes=(4,), ngram_models=64, ngram_steps=5)


@pytest.fixture(scope="module")
def report():
  lines = []
  return tightness.run(tightness.TightnessConfig(**TINY), progress=lines.append), lines


def test_every_audit_has_one_row_with_its_reference(report):
  result, lines = report
  assert [r.audit for r in result.rows] == [
      "noisy_argmax 2-cut", "noisy_argmax k-cut", "dpsgd many_run:dirac",
      "dpsgd one_run:mislabelled", "dpsgd uniaud:gaussian", "dpsgd uniaud_plus:trigger",
      "ngram canary reconstruction"]
  assert len(lines) == len(result.rows)
  two_cut, k_cut = result.rows[:2]
  assert two_cut.reference == k_cut.reference > 0 and two_cut.reference_kind == "exact"
  assert two_cut.kind == "finite-sample" and k_cut.kind == "asymptotic"
  for row in result.rows:
    assert row.confidence == 0.95 and row.wall_time_s > 0 and row.num_observations > 0
    assert row.lower_bound <= row.reference + 1e-9, row  # fixed seed: no miss here
    if math.isfinite(row.ceiling):
      assert row.lower_bound <= row.ceiling + 1e-9, row
  for row in result.rows[2:6]:
    assert row.reference_kind == "theory upper bound" and row.quantity == "epsilon"
    assert 5.0 < row.reference < 10.0  # replace-one games: the PLD epsilon of that relation
  for row in result.rows[2:4]:  # add-or-remove: the RDP epsilon the noise is calibrated to
    assert row.reference == pytest.approx(8.0, rel=1e-3)
  assert result.rows[2].unit == "runs" and result.rows[2].num_observations == 8
  assert result.rows[3].num_observations == 20
  ngram = result.rows[-1]
  assert ngram.ceiling == pytest.approx(10 * math.log(10))  # log(1/p0), T = 10, D = 10
  assert ngram.reference <= ngram.ceiling


def test_ratio_is_the_share_of_the_reference():
  row = tightness.TightnessRow("a", "epsilon", 2.0, "finite-sample", 0.95, 8.0,
                               "theory upper bound", math.nan, 10, "runs", 1.0)
  assert row.ratio == 0.25
  assert dataclass_replace(row, lower_bound=-1.0).ratio == 0.0
  assert math.isnan(dataclass_replace(row, reference=math.inf).ratio)


def dataclass_replace(row, **changes):
  import dataclasses
  return dataclasses.replace(row, **changes)


def test_report_is_strict_json_and_draws(report, tmp_path):
  result, _ = report
  text = results.dumps(result.to_dict())
  back = results.loads(text)
  assert len(back["rows"]) == 7 and back["config"]["dpsgd_runs"] == 4
  assert "noisy_argmax 2-cut" in tightness.table(result)
  tightness.plot(result, str(tmp_path / "t.png"))
  assert (tmp_path / "t.png").stat().st_size > 10_000


@pytest.mark.parametrize("changes, message", [
    (dict(families=("dpsgd", "panoramia")), "families"),
    (dict(families=()), "families"),
    (dict(families=("ngram", "ngram")), "repeated"),
    (dict(significance=1.5), "significance"),
    (dict(noisy_argmax_trials=2), "num_trials"),
    (dict(noisy_argmax_order=1.0), "orders"),
    (dict(dpsgd_runs=1), "num_runs"),
    (dict(dpsgd_epsilon=0.0), "epsilon"),
    (dict(ngram_models=1), "num_models"),
])
def test_bad_settings_fail_before_anything_runs(changes, message):
  with pytest.raises(ValueError, match=message):
    tightness.TightnessConfig(**changes)
