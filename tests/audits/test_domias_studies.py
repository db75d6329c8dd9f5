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


def test_prior_and_shift_cells_build_and_a_shift_cell_plays():
  """App. C: |D_mem| x knowledge, DOMIAS and Eq. 1; App. E: one heart-failure setting per share,
  diabetes hidden. One shift cell plays through the game code (an additive-noise generator in
  place of TVAE, to stay quick)."""
  import jax
  config = studies.StudyConfig(members=(50,), shift_shares=(0.0, 0.6))
  prior = studies.study_cells(config, "prior")
  assert [label for label, _, _ in prior] == [
      "|D_mem|=50 reference", "|D_mem|=50 prior_first_column", "|D_mem|=50 prior_all_columns"]
  games = [domias.DomiasConfig(**kwargs) for _, kwargs, _ in prior]
  assert [(g.reference_density, g.prior_columns) for g in games] == [
      ("data", None), ("gaussian_prior", (0,)), ("gaussian_prior", None)]
  assert all(g.attacks == ("domias", "eq1") for g in games)
  shift = studies.study_cells(config, "shift")
  assert [(label, extra["x"]) for label, _, extra in shift] == [("p~(A=0)=0", 0.0),
                                                                ("p~(A=0)=0.6", 0.6)]
  _, kwargs, _ = shift[1]
  game = domias.DomiasConfig(**{**kwargs, "generator": "additive_noise",
                                "generator_config": None, "attacks": ("domias", "gan_leaks")})
  assert (game.shift_column, game.reference_shift) == (3, 0.6)  # diabetes
  values, _ = studies.load_data("heart_failure")
  result = domias.run(jax.random.key(0), game, data=values)
  assert result.num_members == 40 and set(result.attacks) == {"domias", "gan_leaks"}
  for name, value in (("knowledge", ("oracle",)), ("shift_shares", (1.5,)),
                      ("shift_column", "age_group")):
    with pytest.raises(ValueError, match=name):
      studies.StudyConfig(**{name: value})


def test_generators_study_takes_any_registered_generator():
  """Names come from GENERATORS when the config is built: a generator registered afterwards is
  accepted, with gan_iterations / generator_epochs / dp_epsilons given to the settings its
  config has; MST gets the data's public edges at run time."""
  import dataclasses as dc

  from dpaudit.models import tabular_generators

  @dc.dataclass(frozen=True)
  class LateConfig:
    epsilon: float = 1.0
    epochs: int = 300

  with pytest.raises(ValueError, match="generators='late_dp_for_tests' is not one of"):
    studies.StudyConfig(generators=("late_dp_for_tests",))
  tabular_generators.register_generator("late_dp_for_tests", LateConfig, lambda *a: None,
                                        lambda *a: None, replace=True)
  try:
    config = studies.StudyConfig(generators=("late_dp_for_tests", "mst", "wgan_gp"),
                                 dp_epsilons=(1.0, 8.0), generator_epochs=7, gan_iterations=9,
                                 ads_gan_lambdas=(), noise_levels=())
    settings = studies._generator_settings(config)  # pylint: disable=protected-access
  finally:
    del tabular_generators.GENERATORS["late_dp_for_tests"]
  assert settings == [
      ("late_dp_for_tests eps=1", "late_dp_for_tests", {"epsilon": 1.0, "epochs": 7}),
      ("late_dp_for_tests eps=8", "late_dp_for_tests", {"epsilon": 8.0, "epochs": 7}),
      ("mst eps=1", "mst", {"epsilon": 1.0, "delta": 1e-5}),
      ("mst eps=8", "mst", {"epsilon": 8.0, "delta": 1e-5}),
      ("wgan_gp", "wgan_gp", {"iterations": 9})]
  values = np.random.default_rng(0).normal(size=(50, 2))
  kwargs = {"generator": "mst", "generator_config": {"epsilon": 1.0}}
  with_edges = studies._with_edges(kwargs, values, 4)  # pylint: disable=protected-access
  assert with_edges["generator_config"]["edges"] == domias.public_binning(values, 4)
