"""The tightness report: every family at a tiny setting, rows that hold their promises."""

import math

import pytest

from dpaudit import plots, results, tightness

# Two DP-SGD games, a replace-one one and the many-run one (the noisy-argmax cuts and the n-gram
# row, one process against two: tests/launch/test_multihost.py; all four games:
# tests/experiments/test_dpsgd_audit_cli.py).
TINY = dict(families=("dpsgd",), dpsgd_audits=(("uniaud", "gaussian"), ("many_run", "dirac")),
            noisy_argmax_num_trials=4000, dpsgd_num_runs=4, dpsgd_num_canaries=20, dpsgd_epochs=1.0,
            dpsgd_batch_size=16, dpsgd_hidden_sizes=(4,), ngram_num_models=64, ngram_num_steps=5)


def test_tiny_report_rows_json_plot_and_keys(tmp_path):
  """One test (one report: the checks share its cost, whichever worker runs it)."""
  lines = []
  result = tightness.run(tightness.TightnessConfig(**TINY), progress=lines.append)
  names = [r.audit for r in result.rows]
  assert names[0] == "dpsgd uniaud:gaussian" and names[-1] == "dpsgd many_run:dirac"
  # between them, the f-DP rows of UniAud's guesses (their logic: the stubbed test below)
  assert all(name.startswith("dpsgd uniaud:gaussian f-DP ") for name in names[1:-1])
  assert len(lines) == len(result.rows)
  for row in result.rows:
    assert row.confidence == 0.95 and row.wall_time_s > 0 and row.num_observations > 0
    assert row.lower_bound <= row.reference + 1e-9, row  # fixed seed: no miss here
    if math.isfinite(row.ceiling):
      assert row.lower_bound <= row.ceiling + 1e-9, row
  uniaud = result.rows[0]
  assert uniaud.reference_kind == "theory upper bound" and uniaud.quantity == "epsilon"
  assert 5.0 < uniaud.reference < 16.0  # replace-one: the PLD epsilon of that relation
  assert "replace_one" in uniaud.note
  assert uniaud.unit == "canaries" and uniaud.num_observations == 20
  assert uniaud.assumes == "any (eps, delta)-DP algorithm"
  for fdp in result.rows[1:-1]:
    assert fdp.kind == "finite-sample" and fdp.num_observations == 20 and fdp.assumes
    assert fdp.wall_time_s == uniaud.wall_time_s and fdp.assumes in fdp.note
  many_run = result.rows[-1]
  assert many_run.unit == "runs" and many_run.num_observations == 8  # 2T, T = 4
  assert "add_or_remove_one" in many_run.note and many_run.kind == "finite-sample"
  assert abs(many_run.reference - 8.0) < 8e-3  # add-or-remove: the RDP target epsilon
  assert 0 <= many_run.lower_bound <= many_run.ceiling

  # strict JSON, table and plot
  back = results.loads(results.dumps(result.to_dict()))
  assert len(back["rows"]) == len(result.rows) and back["config"]["dpsgd_num_runs"] == 4
  assert "dpsgd uniaud:gaussian" in tightness.table(result)
  plots.tightness(result, str(tmp_path / "t.png"))
  assert (tmp_path / "t.png").stat().st_size > 10_000


def test_ratio_is_the_share_of_the_reference():
  row = tightness.TightnessRow("a", "epsilon", 2.0, "finite-sample", 0.95, 8.0,
                               "theory upper bound", math.nan, 10, "runs", 1.0)
  assert row.ratio == 0.25
  assert dataclass_replace(row, lower_bound=-1.0).ratio == 0.0
  assert math.isnan(dataclass_replace(row, reference=math.inf).ratio)


def dataclass_replace(row, **changes):
  import dataclasses
  return dataclasses.replace(row, **changes)


@pytest.mark.parametrize("changes, message", [
    (dict(families=("dpsgd", "gnmax")), "families"),
    (dict(families=()), "families"),
    (dict(families=("ngram", "ngram")), "repeated"),
    (dict(significance=1.5), "significance"),
    # The audits' own configs check these; the message names this config's field.
    (dict(noisy_argmax_num_trials=2), "^noisy_argmax_num_trials=2 must be an integer >= 4"),
    (dict(noisy_argmax_order=1.0), "^noisy_argmax_order=1.0 .*outside the valid range"),
    (dict(noisy_argmax_noise_multiplier=float("inf")),
     "^noisy_argmax_noise_multiplier=inf is outside"),
    (dict(dpsgd_num_runs=1), "^dpsgd_num_runs=1 must be an integer >= 2"),
    (dict(dpsgd_epsilon=0.0), "^dpsgd_epsilon=0.0 is outside"),
    (dict(ngram_num_models=1), "^ngram_num_models=1 must be an integer >= 2"),
    (dict(ngram_num_models=1.5), "^ngram_num_models=1.5 must be an integer"),
    (dict(dpsgd_audits=(("uniaud", "dirac"),)), "canary='dirac' is not valid"),
    (dict(dpsgd_audits=(("many_run",),)), "pairs"),
    (dict(dpsgd_audits=()), "dpsgd_audits"),
])
def test_bad_settings_fail_before_anything_runs(changes, message):
  with pytest.raises(ValueError, match=message):
    tightness.TightnessConfig(**changes)


def test_a_game_keeps_its_key_whichever_others_run(monkeypatch):
  """The DP-SGD games are stubbed: only the keys they are given matter here."""
  import types

  import jax

  seen = {}

  def fake_run(key, config, data):
    seen.setdefault((config.game, config.canary), []).append(
        tuple(int(v) for v in jax.random.key_data(key)))
    # The f-DP figures of the one-run games (NaN where not computed; many_run: none)
    return types.SimpleNamespace(epsilon_lower_bound=0.0, epsilon_theory=1.0,
                                 epsilon_ceiling=1.0, num_observations=1, adjacency="x",
                                 test_accuracy=0.5, epsilon_fdp_gaussian=0.25,
                                 epsilon_fdp_run=math.nan, details={"mu_lower_bound": 0.125})

  monkeypatch.setattr(tightness.dpsgd_audit, "run", fake_run)
  key = jax.random.key(0)
  for audits in (tightness.DPSGD_AUDITS, (("uniaud", "gaussian"), ("many_run", "dirac")),
                 (("uniaud", "orthogonal"),)):
    config = tightness.TightnessConfig(families=("dpsgd",), dpsgd_audits=audits)
    rows = tightness.dpsgd_rows(key, config)
    one_run = [a for a in audits if a[0] != "many_run"]
    assert len(rows) == len(audits) + len(one_run)  # one f-DP gaussian row each
    fdp = [r for r in rows if r.audit.endswith(" f-DP gaussian")]
    assert [r.audit for r in fdp] == [f"dpsgd {g}:{c} f-DP gaussian" for g, c in one_run]
    assert all(r.lower_bound == 0.25 and r.note.startswith("mu >= 0.125; valid if the trade-off")
               and math.isnan(r.ceiling) for r in fdp)
  assert "f-DP rows" in tightness.table(tightness.TightnessResult(config, tuple(rows)))
  assert len(seen[("uniaud", "gaussian")]) == len(seen[("many_run", "dirac")]) == 2
  assert all(len(set(keys)) == 1 for keys in seen.values())  # the same key every time
  assert len({keys[0] for keys in seen.values()}) == len(seen)  # and a different one per game


def test_the_other_families_through_the_front_door_at_a_tiny_size():
  """LM reconstruction, PATE, PANORAMIA and DOMIAS rows: each labelled with what its value is,
  below its reference, and strict JSON."""
  config = tightness.TightnessConfig(
      families=("lm_reconstruction", "private_prediction", "panoramia", "domias"),
      lm_num_lines=40, lm_epochs=1.0, pate_num_trials=4000, domias_num_candidates=60,
      panoramia_num_members=90)
  result = tightness.run(config)
  rows = {row.audit: row for row in result.rows}
  assert list(rows) == ["lm canary reconstruction", "pate 2-cut", "pate k-cut",
                        "panoramia tabular", "domias dp_tvae", "domias dp_tvae f-DP gaussian"]
  for row in result.rows:
    assert 0.0 <= row.lower_bound <= row.reference, row
    assert row.reference_kind == "theory upper bound" and row.num_observations > 0
  lm = rows["lm canary reconstruction"]
  assert lm.kind == "estimate (1 model)" and math.isnan(lm.confidence)
  assert lm.quantity == "leakage (bits)" and lm.ceiling == pytest.approx(6 * math.log2(10))
  assert rows["pate 2-cut"].kind == "finite-sample" and rows["pate k-cut"].kind == "asymptotic"
  assert rows["pate 2-cut"].reference == pytest.approx(2.0 / 2.0**2)  # GNMax: alpha / sigma^2
  assert rows["panoramia tabular"].kind == "measurement (not a bound)"
  assert rows["domias dp_tvae"].reference == pytest.approx(4.0)
  assert rows["domias dp_tvae"].num_observations == 60
  fdp = rows["domias dp_tvae f-DP gaussian"]  # the same scores' f-DP (Gaussian family) bound
  assert (fdp.assumes, fdp.kind) == ("if the trade-off curve is Gaussian (mu-GDP)",
                                     "finite-sample")
  assert rows["domias dp_tvae"].assumes == "any (eps, delta)-DP algorithm"
  back = results.loads(results.dumps(result.to_dict()))
  assert math.isnan(back["rows"][0]["confidence"])
  assert "estimate (1 model)" in tightness.table(result)


def test_every_game_and_canary_has_a_fixed_key_position():
  from dpaudit.audits import dpsgd as dpsgd_audit
  pairs = {(g, c) for g in dpsgd_audit.GAMES for c in dpsgd_audit.GAME_CANARIES[g]}
  assert set(tightness.ALL_DPSGD_AUDITS) == pairs
  assert len(tightness.ALL_DPSGD_AUDITS) == len(pairs)
  assert tightness.ALL_DPSGD_AUDITS[:5] == tuple(  # the positions the report's keys came from
      ("many_run", c) for c in ("in_distribution", "mislabelled", "gaussian", "orthogonal",
                                "dirac"))
