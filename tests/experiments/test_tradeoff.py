"""experiments.tradeoff without absl: schedule, config validation, and a tiny resumable sweep."""

import io
import math

import pytest

from experiments import tradeoff


def test_schedule_rounds_before_the_ceiling():
  config = tradeoff.TradeoffConfig(epochs=30.0, batch_size=1438)
  assert tradeoff.schedule(config, 1438) == (1.0, 30)
  q, steps = tradeoff.schedule(tradeoff.TradeoffConfig(epochs=2.0, batch_size=32), 142)
  assert q == 32 / 142 and steps == 9
  with pytest.raises(ValueError, match="batch_size=64 exceeds the 50 training examples"):
    tradeoff.schedule(tradeoff.TradeoffConfig(), 50)


@pytest.mark.parametrize("field, value, message", [
    ("target_epsilons", (1.0, 1.0), "repeated values"),
    ("target_epsilons", (0.0,), "target_epsilons"),
    ("delta", 1.0, "delta"),
    ("batch_size", 0, "batch_size=0 must be an integer >= 1"),
    ("repetitions", True, "repetitions=True"),
    ("repetitions", 0, "repetitions=0 must be an integer >= 1"),
    ("dataset", "imagenet", "dataset"),
    ("prng_impl", "mt19937", "prng_impl"),
])
def test_bad_config_names_the_field(field, value, message):
  with pytest.raises(ValueError, match=message):
    tradeoff.TradeoffConfig(**{field: value})


def test_tiny_sweep_is_reused_from_its_store(tmp_path):
  config = tradeoff.TradeoffConfig(dataset="wine", model="logistic", target_epsilons=(8, math.inf),
                                   epochs=1.0, batch_size=32, learning_rate=0.1, repetitions=1)
  first = tradeoff.run(config, runs_dir=str(tmp_path), progress_stream=io.StringIO())
  private, public = first.summaries
  assert private.noise_multiplier > 0 and 0 < private.epsilon_rdp <= 8.0
  assert public.noise_multiplier == 0.0 and public.epsilon_rdp == math.inf
  assert first.num_steps == 5 and not any(r.reused for r in first.runs)
  again = tradeoff.run(config, runs_dir=str(tmp_path), progress_stream=io.StringIO())
  assert all(r.reused for r in again.runs)
  assert [r.eval_accuracy for r in again.runs] == [r.eval_accuracy for r in first.runs]
  assert again.to_dict()["num_runs_reused"] == 2
  assert "target eps" in tradeoff.table(again)
