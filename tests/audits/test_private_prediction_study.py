"""The private-prediction study's configuration and run record (dpaudit.audits.
private_prediction_study) without training; the cells run in
tests/experiments/test_private_prediction_cli.py."""

import pytest

from dpaudit.audits import noisy_argmax
from dpaudit.audits import private_prediction as pp
from dpaudit.audits import private_prediction_study as study


def _config(**changes):
  ensembles = {adv: pp.EnsembleAuditConfig(adversary=adv) for adv in ("nat_miaq", "pois_miaq")}
  knns = {adv: pp.KnnAuditConfig(adversary=adv) for adv in ensembles}
  audits = {"pate": pp.PredictionAuditConfig(orders=(2.0, 8.0)),
            "promptpate": noisy_argmax.NoisyArgmaxAuditConfig(orders=(2.0, 8.0))}
  return study.StudyConfig(ensembles, knns, audits, **changes)


def test_config_refuses_what_the_cells_cannot_run():
  config = _config(seed=3)
  with pytest.raises(ValueError, match="knns"):
    study.StudyConfig(config.ensembles, {"nat_miaq": config.knns["nat_miaq"]}, config.audits)
  with pytest.raises(ValueError, match=r"audits\['promptpate'\] must be a NoisyArgmaxAuditConfig"):
    study.StudyConfig(config.ensembles, config.knns,
                      {"promptpate": config.audits["pate"]})
  with pytest.raises(ValueError, match="audits"):
    study.StudyConfig(config.ensembles, config.knns, {"dp": config.audits["pate"]})


def test_run_config_and_cell_signatures():
  config = _config(seed=3)
  recorded = study.run_config(config, 2, [3, 4], [2.0])
  assert list(recorded) == ["dataset", "public_fraction", "test_fraction", "seed",
                            "repetitions", "seeds", "report_orders", "poison_label",
                            "ensembles", "knn", "feature_model", "feature_epochs", "audits"]
  assert recorded["seed"] == 3 and recorded["seeds"] == [3, 4]
  assert sorted(recorded["audits"]) == ["pate", "promptpate"]
  # the stored cells are named by these signatures: the data and seed, the audit, the setup
  pate = study._signature(config, "pate", "nat_miaq", 3)  # pylint: disable=protected-access
  assert list(pate) == ["dataset", "public_fraction", "test_fraction", "seed", "audit",
                        "ensemble"]
  prompt = study._signature(config, "promptpate", "nat_miaq", 3)  # pylint: disable=protected-access
  assert list(prompt) == ["seed", "audit", "llm", "promptpate"]
  assert prompt["llm"] == "smollm2-135m-instruct"


def test_study_result_round_trips_a_real_cell():
  """A cell made of a tiny real audit (no teachers): ``Result.from_dict(to_dict())``."""
  import jax

  from dpaudit import results
  from dpaudit.mechanisms import histograms
  model = histograms.pate_model([0.9, 0.1], [0.0, 1.0], num_teachers=10)
  config = pp.PredictionAuditConfig(sigma=2.0, num_trials=400, orders=(2.0,),
                                    num_histograms=16, num_bootstrap=4)
  cell = {**pp.run(jax.random.key(0), config, models=[model]).cell(),
          "teacher_accuracy": 0.5, "seconds": 1.0}
  study.check_stored_cell(cell)
  result = study.Result({"pate/nat_miaq": cell})
  plain = results.loads(results.dumps(result.to_dict()))
  assert study.Result.from_dict(plain).to_dict() == plain
  with pytest.raises((KeyError, TypeError, ValueError)):
    study.Result.from_dict({"rows": {}})
