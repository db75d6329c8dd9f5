"""The DOMIAS studies (dpaudit.audits.domias_studies) without playing games: the settings of each
study, the data readers, the summaries. The games run in tests/experiments/test_domias_cli.py."""

import numpy as np
import pytest

from dpaudit.audits import domias
from dpaudit.audits import domias_studies as studies


def test_study_cells_are_the_paper_grids():
  config = studies.StudyConfig(members=(50, 100), dp_epsilons=(4.0,), ads_gan_lambdas=(1.0,),
                               noise_levels=(0.7,))
  members = studies.study_cells(config, "members")
  assert [label for label, _, _ in members] == ["|D_mem|=50", "|D_mem|=100"]
  assert [extra["x"] for _, _, extra in members] == [50, 100]
  reference = studies.study_cells(config, "reference")
  assert len(reference) == 2 * len(config.reference_sizes)  # KDE and BNAF per size
  assert all(kw["attacks"] == ("domias", "eq1") for _, kw, _ in reference)
  generators = [label for label, _, _ in studies.study_cells(config, "generators")]
  assert generators == ["tvae", "dp_tvae eps=4", "wgan_gp", "nflow", "ads_gan lambda=1",
                        "additive_noise 0.7"]
  for label, kwargs, _ in studies.study_cells(config, "epsilon"):
    game = domias.DomiasConfig(**kwargs)
    assert game.membership == "bernoulli" and game.attacks == ("domias",), label
  [(_, minority, _)] = studies.study_cells(config, "minority")
  assert domias.DomiasConfig(**minority).records_needed() == 299  # every heart failure record


def test_read_csv_refuses_what_it_cannot_audit(tmp_path):
  good = tmp_path / "good.csv"
  good.write_text("a,b\n1,2\n3,4\n5,7\n")
  values, header = studies.read_csv(str(good))
  assert header == ["a", "b"] and values.shape == (3, 2)
  for text, message in (("a,b\n1,2\n3\n5,6\n", "line 3 has 1 fields"),
                        ("a,b\n1,x\n3,4\n", "non-numeric"),
                        ("a,b\n1,2\n3,2\n", "column 'b' is constant"),
                        ("a\n1\n", "at least 2 records")):
    bad = tmp_path / "bad.csv"
    bad.write_text(text)
    with pytest.raises(ValueError, match=message):
      studies.read_csv(str(bad))


def test_minority_groups_and_tables():
  groups = studies.minority_groups(["x", "flag"], "flag")
  rows = np.array([[0.0, 1.0], [2.0, 0.0]])
  assert groups["minority"](rows).tolist() == [True, False]
  assert groups["rest"](rows).tolist() == [False, True]
  metrics = lambda auc: {"auc": auc}  # noqa: E731
  rows = [{"setting": "|D_mem|=50", "game": g, "x": 50, "groups": {},
           "attacks": {"domias": metrics(a), "eq1": metrics(0.5)}} for g, a in enumerate((.6, .8))]
  assert studies.summarise(rows)["|D_mem|=50"]["domias"] == pytest.approx((0.7, 0.1))
  text = studies.tables({"members": rows})
  assert text.splitlines()[0] == "members: AUC mean ± std over games"
  assert "0.700 ± 0.100" in text and "0.500 ± 0.000" in text


def test_epsilon_table_shows_the_fdp_bound_beside_the_one_run_bound():
  def row(game, one_run, fdp=None):
    metrics = {"auc": 0.6, "epsilon_per_record": 0.1, "epsilon_one_run": one_run}
    if fdp is not None:
      metrics["epsilon_one_run_fdp"] = fdp
    return {"setting": "dp_tvae eps=4", "game": game, "claimed_epsilon": 4.0, "groups": {},
            "attacks": {"domias": metrics}}
  text = studies.tables({"epsilon": [row(0, 0.5, 1.0), row(1, 0.25, 0.5)]})
  assert "f-DP eps" in text.splitlines()[0] and "mu-GDP" in text.splitlines()[0]
  assert text.splitlines()[1].split()[2:9] == ["4.000", "0.500", "/", "0.375", "1.000", "/",
                                               "0.750"]
  old = studies.tables({"epsilon": [row(0, 0.5)]})  # a cell stored before the f-DP bound
  assert "nan / nan" in old


def test_a_tiny_study_result_round_trips(tmp_path):
  """One additive-noise game on a small CSV: ``Result.from_dict(to_dict())`` after strict JSON,
  and the game rows carry the game's fields."""
  import jax

  from dpaudit import results
  rng = np.random.default_rng(0)
  path = tmp_path / "rows.csv"
  path.write_text("a,b\n" + "\n".join(f"{x:.6f},{y:.6f}" for x, y in rng.normal(size=(80, 2))))
  config = studies.StudyConfig(studies=("generators",), data_csv=str(path), repetitions=1,
                               num_members=10, num_reference=20, num_synthetic=30,
                               num_holdout=10, generators=("additive_noise",),
                               ads_gan_lambdas=(), noise_levels=())
  result = studies.run(jax.random.key(0), config)
  (row,) = result.studies["generators"]
  assert row["setting"] == "additive_noise" and set(row["attacks"]) == {"domias"}
  plain = results.loads(results.dumps(result.to_dict()))
  assert studies.Result.from_dict(plain).to_dict() == plain
  with pytest.raises((KeyError, TypeError, ValueError)):
    studies.Result.from_dict({"rows": []})
