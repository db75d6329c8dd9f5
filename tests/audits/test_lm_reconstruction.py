"""The language-model reconstruction experiment as a library call (Secs. 4.2-4.3 of Stock et
al.): ``run(key, config)`` end to end on a tiny synthetic corpus, model reuse, the results.json
layout of ``to_dict()``, and config validation."""

import dataclasses
import io
import math
import types

import numpy as np
import pytest

from dpaudit import plots, prng, results
from dpaudit.audits import lm_reconstruction as lmr

WORDS = ("to", "be", "or", "not", "that", "is", "the", "question", "my", "lord", "sweet",
         "night", "good", "john", "doe", "card", "credit", "number", "what", "say", "you")


def _corpus(num_lines=200, seed=0):
  rng = np.random.default_rng(seed)  # test data only, never inside the library
  lines = [" ".join(rng.choice(WORDS, rng.integers(2, 6))).capitalize() + "."
           for _ in range(num_lines)]
  return types.SimpleNamespace(texts=lines + ["Say 1599, at 7 o'clock!"])


@pytest.fixture
def fake_corpus(monkeypatch):
  monkeypatch.setattr(lmr.data, "load_text", lambda name, split, data_dir=None: _corpus())


TINY = dict(num_train=60, num_reference=60, num_test=30, num_generated=12, context_size=3,
            hidden_size=8, max_length=48, prompt="John's number is ", secret_digits=4,
            canary_repetitions=2, noise_multipliers=(0.0, 2.0), analysis_noise_multiplier=2.0,
            batch_size=32, epochs=1.0, num_exposure_samples=50, top_k=0, num_at_risk=3)

RESULT_KEYS = ["canary", "secret", "vocab_size", "secrecy", "at_risk_analysis",
               "analysis_noise_multiplier"]
POINT_KEYS = ["noise_multiplier", "epsilon", "num_steps", "sampling_rate", "log_p1",
              "secrecy_bits", "prior_bits", "random_secret_mean_secrecy_bits",
              "secrecy_bound_bits", "bound_leakage_bits", "bound_order", "bound_holds",
              "exposure_rank_bits", "exposure_lower_bound_bits", "exposure_extrapolated_bits",
              "exposure_max_bits"]
SET_KEYS = ["count", "mean_calibrated_loss", "std_calibrated_loss", "mean_nll_per_line",
            "fraction_impossible_under_top_k", "median_log10_probability", "fraction_memorised"]


def test_tiny_run_scores_reuses_models_and_reports(fake_corpus, tmp_path):
  config = lmr.LMReconstructionConfig(**TINY)
  log = io.StringIO()
  progress = lambda done, total, message="": print(f"[{done}/{total}] {message}", file=log)
  result = lmr.run(None, config, model_dir=str(tmp_path / "models"), progress=progress)
  assert "reference: training" in log.getvalue() and "reused" not in log.getvalue()
  assert log.getvalue().splitlines()[-1].startswith("[4/4] at-risk analysis")
  assert len(result.secret) == 4 and result.secret.isdigit()
  assert result.canary == "John's number is " + result.secret

  public, private = result.secrecy
  prior = 4 * math.log2(10)
  assert public.noise_multiplier == 0.0 and public.epsilon == math.inf
  assert public.secrecy_bound_bits == 0.0 and math.isnan(public.bound_order)
  assert private.noise_multiplier == 2.0 and 0 < private.epsilon < math.inf
  assert 0 < private.secrecy_bound_bits < prior and private.bound_holds
  for p in result.secrecy:
    assert p.prior_bits == pytest.approx(prior) and p.exposure_max_bits == p.prior_bits
    assert p.secrecy_bits == pytest.approx(-p.log_p1 / math.log(2))
    assert p.num_steps == math.ceil(1 / p.sampling_rate)  # one epoch
    assert 0 <= p.exposure_lower_bound_bits <= p.exposure_rank_bits + 1e-9

  analysis = result.at_risk_analysis
  assert [analysis.sets[s].count for s in ("train", "test", "generated")] == [62, 30, 12]
  test_loss = analysis.scores["test"].calibrated_loss
  assert analysis.memorised_threshold == pytest.approx(np.quantile(test_loss, 0.05))
  assert analysis.sets["test"].fraction_memorised == pytest.approx(
      np.mean(test_loss < analysis.memorised_threshold))
  train = analysis.scores["train"]
  assert analysis.sets["train"].mean_calibrated_loss == pytest.approx(
      np.mean(train.calibrated_loss))
  memorised = (train.calibrated_loss < analysis.memorised_threshold) & np.isfinite(
      train.log_lambda)
  assert len(analysis.at_risk) == min(3, memorised.sum())
  probs = [r.log10_probability for r in analysis.at_risk]
  assert probs == sorted(probs, reverse=True)
  assert all(r.calibrated_loss < analysis.memorised_threshold for r in analysis.at_risk)

  out = result.to_dict()
  assert list(out) == RESULT_KEYS and out["analysis_noise_multiplier"] == 2.0
  assert [list(p) for p in out["secrecy"]] == [POINT_KEYS, POINT_KEYS]
  assert list(out["at_risk_analysis"]) == ["memorised_threshold", "sets", "at_risk",
                                           "generated_examples"]
  sets = out["at_risk_analysis"]["sets"]
  assert list(sets) == ["train", "test", "generated"]
  assert list(sets["train"]) == SET_KEYS and list(sets["generated"]) == SET_KEYS + [
      "fraction_finished"]
  assert list(out["at_risk_analysis"]["at_risk"][0]) == ["text", "log10_probability",
                                                         "calibrated_loss"]
  results.write_json(str(tmp_path / "r.json"), out)
  assert results.read_json(str(tmp_path / "r.json"))["secrecy"][1] == out["secrecy"][1]

  log = io.StringIO()
  again = lmr.run(prng.make_key(config.seed), config, model_dir=str(tmp_path / "models"),
                  progress=progress)
  assert log.getvalue().count("reused") == 3 and "training" not in log.getvalue()
  assert again.to_dict() == out

  # The result round-trips through from_dict (without its per-line scores) and a store.
  rebuilt = lmr.Result.from_dict(results.loads(results.dumps(out)), config)
  assert rebuilt.to_dict() == out and rebuilt.config == config
  assert rebuilt.at_risk_analysis.scores == {}
  assert lmr.table(rebuilt) == lmr.table(result)
  for damage in ({"secret": "x1"}, {"secrecy": []}, {"vocab_size": 2.5},
                 {"at_risk_analysis": {**out["at_risk_analysis"], "at_risk": [{"text": 1}]}}):
    with pytest.raises((ValueError, TypeError, KeyError)):
      lmr.Result.from_dict({**out, **damage})
  store = results.CellStore(str(tmp_path / "cells"))
  first = lmr.run(None, config, store=store, model_dir=str(tmp_path / "models"))
  reused = lmr.run(None, config, store=store)  # no models: the stored result
  assert first.to_dict() == reused.to_dict() == out and reused.config == config

  text = lmr.table(result)
  assert text.startswith(f"canary: {result.canary!r} (x2)") and "at-risk training" in text
  plots.lm_at_risk(result, str(tmp_path / "at_risk.png"))
  plots.lm_secrecy(result, str(tmp_path / "secrecy.png"))
  assert (tmp_path / "at_risk.png").stat().st_size > 0
  assert (tmp_path / "secrecy.png").stat().st_size > 0


def test_train_config_is_poisson_dp_sgd_for_the_epochs():
  config = lmr.LMReconstructionConfig(**TINY)
  private = lmr.train_config(config, 2.0, 64)
  assert private.sampling_rate == 0.5 and private.num_steps == 2
  assert private.l2_clip_norm == config.l2_clip_norm
  public = lmr.train_config(config, 0.0, 16)
  assert public.sampling_rate == 1.0 and public.l2_clip_norm == math.inf


def test_too_few_lines_name_the_sizes(fake_corpus):
  config = lmr.LMReconstructionConfig(**{**TINY, "num_train": 150})
  with pytest.raises(ValueError, match=r"num_train \+ num_reference \+ num_test = 240"):
    lmr.load_lines(lmr.prng.make_key(0), config)


@pytest.mark.parametrize("change,message", [
    (dict(num_test=1), "num_test=1 must be an integer >= 2"),
    (dict(num_train=2.5), "num_train=2.5 must be an integer >= 1"),
    (dict(epochs=math.inf), "epochs=inf must be > 0 and finite"),
    (dict(delta=1.0), r"delta=1.0 is outside the valid range \(0, 1\)"),
    (dict(memorised_quantile=0), "memorised_quantile=0 is outside the valid range"),
    (dict(noise_multipliers=(-1.0,)), "noise_multipliers=-1 must be one or more finite"),
    (dict(noise_multipliers=()), "noise_multipliers= must be one or more finite"),
    (dict(analysis_noise_multiplier=3.0), "analysis_noise_multiplier=3 is not one of "
                                          "noise_multipliers=0,2"),
    (dict(max_length=20), r"max_length=20 is too short for the canary \(17 \+ 4"),
    (dict(seed=-1), "seed=-1 must be an integer >= 0"),
])
def test_bad_config_raises_naming_the_field(change, message):
  with pytest.raises(ValueError, match=message):
    lmr.LMReconstructionConfig(**{**TINY, **change})


def test_config_normalises_noise_multipliers():
  config = lmr.LMReconstructionConfig(noise_multipliers=[0, 1], analysis_noise_multiplier=1)
  assert config.noise_multipliers == (0.0, 1.0) and config.analysis_noise_multiplier == 1.0
  with pytest.raises(dataclasses.FrozenInstanceError):
    config.seed = 1
