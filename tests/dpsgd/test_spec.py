"""One DP-SGD schedule and noise for every user of DP-SGD (dpaudit.dpsgd.spec)."""

import fractions
import math

import numpy as np
import pytest

from dpaudit.accounting import dpsgd as accounting
from dpaudit.audits import dpsgd as dpsgd_audit
from dpaudit.audits import dpsgd_grid, lm_reconstruction, panoramia_modalities
from dpaudit.dpsgd import spec
from dpaudit.models import tabular_generators
from experiments import tradeoff


def test_schedule_is_the_exact_ceiling_of_epochs_over_q():
  rng = np.random.default_rng(0)
  for _ in range(2000):
    num_examples = int(rng.integers(1, 100_000))
    batch_size = int(rng.integers(1, 2 * num_examples + 1))
    epochs = float(rng.choice([rng.integers(1, 300), round(rng.uniform(0.01, 50), 2)]))
    q, steps = spec.schedule(epochs, batch_size, num_examples)
    exact_q = min(fractions.Fraction(batch_size, num_examples), fractions.Fraction(1))
    exact = max(1, math.ceil(fractions.Fraction(str(epochs)) / exact_q))
    assert (q, steps) == (float(exact_q), exact), (epochs, batch_size, num_examples)


@pytest.mark.parametrize("epochs,batch_size,num_examples", [(3.0, 64, 1438), (2.5, 100, 1000)])
def test_every_user_of_dpsgd_gets_the_same_steps_and_noise(epochs, batch_size, num_examples):
  epsilon, delta = 4.0, 1e-5
  expected = spec.DPSGDSpec(epochs=epochs, batch_size=batch_size, epsilon=epsilon,
                            delta=delta).resolve(num_examples)
  audit = dpsgd_audit._plan(dpsgd_audit.DPSGDAuditConfig(
      epochs=epochs, batch_size=batch_size, epsilon=epsilon, delta=delta,
      physical_batch_size=batch_size), num_examples)
  grid_cell, = dpsgd_grid.DPSGDGridConfig(
      audits=(("uniaud", "gaussian"),), epsilons=(epsilon,), num_canaries=(8,), epochs=epochs,
      batch_size=batch_size, delta=delta).cell_configs()
  grid_plan = dpsgd_audit._plan(grid_cell, num_examples)
  trade = tradeoff.TradeoffConfig(epochs=epochs, batch_size=batch_size, delta=delta,
                                  target_epsilons=(epsilon,))
  trade_q, trade_steps = tradeoff.schedule(trade, num_examples)
  trade_sigma = tradeoff.account(trade, epsilon, trade_q, trade_steps).noise_multiplier
  lm = lm_reconstruction.train_config(
      lm_reconstruction.LMReconstructionConfig(epochs=epochs, batch_size=batch_size),
      expected.noise_multiplier, num_examples)
  target = panoramia_modalities.TrainSpec(epochs=epochs, batch_size=batch_size,
                                          epsilon=epsilon, delta=delta)
  target_config = target.train_config(num_examples)
  tvae = tabular_generators.DpTvaeConfig(epsilon=epsilon, delta=delta, epochs=epochs,
                                         batch_size=batch_size)
  schedules = {
      "audits.dpsgd": (audit.train_config.sampling_rate, audit.train_config.num_steps),
      "audits.dpsgd_grid": (grid_plan.train_config.sampling_rate,
                            grid_plan.train_config.num_steps),
      "dpsgd.tradeoff": (trade_q, trade_steps),
      "audits.lm_reconstruction": (lm.sampling_rate, lm.num_steps),
      "audits.panoramia_modalities": (target_config.sampling_rate, target_config.num_steps),
      "models.tabular_generators": tvae.plan(num_examples),
  }
  assert set(schedules.values()) == {(expected.sampling_rate, expected.num_steps)}, schedules
  sigmas = {"audits.dpsgd": audit.noise_multiplier, "dpsgd.tradeoff": trade_sigma,
            "audits.dpsgd_grid": grid_plan.noise_multiplier,
            "audits.lm_reconstruction": lm.noise_multiplier,
            "dpsgd.spec.noise_multiplier": spec.noise_multiplier(
                epsilon, expected.sampling_rate, expected.num_steps, delta),
            "audits.panoramia_modalities": target_config.noise_multiplier,
            "models.tabular_generators": tvae.noise_multiplier(num_examples)}
  assert set(sigmas.values()) == {expected.noise_multiplier}, sigmas


def test_spec_takes_steps_or_epochs_and_sigma_or_epsilon():
  by_steps = spec.DPSGDSpec(num_steps=50, batch_size=10, noise_multiplier=1.5).resolve(100)
  assert (by_steps.sampling_rate, by_steps.num_steps, by_steps.noise_multiplier) == (0.1, 50, 1.5)
  with accounting.quiet_accountant():
    assert accounting.dpsgd_epsilon(by_steps.noise_multiplier, 0.1, 50, 1e-5) > 0
  no_noise = spec.DPSGDSpec(epochs=1, batch_size=10, epsilon=math.inf).resolve(100)
  assert no_noise.noise_multiplier == 0.0 and no_noise.train_config.physical_batch_size == 20
  for kwargs, match in ((dict(epochs=1, num_steps=3, epsilon=1.0), "exactly one of epochs"),
                        (dict(batch_size=4, epsilon=1.0), "exactly one of epochs"),
                        (dict(epochs=1, epsilon=1.0, noise_multiplier=1.0), "exactly one of eps"),
                        (dict(epochs=0.0, epsilon=1.0), "epochs"),
                        (dict(epochs=1, epsilon=1.0, accountant="gdp"), "accountant")):
    with pytest.raises(ValueError, match=match):
      spec.DPSGDSpec(**kwargs)
