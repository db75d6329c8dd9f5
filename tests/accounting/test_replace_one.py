"""Tests for dpaudit.accounting.dpsgd_epsilon_replace_one: the q = 1 closed form (a Gaussian
mechanism of sensitivity 2C), the order against add-or-remove, limits and argument errors."""

from __future__ import annotations

import math

import pytest
from scipy import optimize, stats

from dpaudit import accounting

PLD_FAST = 1e-3


def _gaussian_epsilon(mu: float, delta: float) -> float:
  """Exact epsilon of a Gaussian mechanism with mu = sensitivity / std (Balle & Wang 2018):
  delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), decreasing in eps."""

  def delta_of(eps):
    return (stats.norm.cdf(-eps / mu + mu / 2)
            - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)) - delta

  if delta_of(0.0) <= 0:
    return 0.0
  return optimize.brentq(delta_of, 0.0, 200.0, xtol=1e-12)


@pytest.mark.parametrize("sigma,steps,delta", [(2.0, 1, 1e-5), (5.0, 10, 1e-5),
                                               (3.0, 4, 1e-3), (10.0, 50, 1e-6)])
def test_full_batch_is_gaussian_mechanism_with_sensitivity_two(sigma, steps, delta):
  # q = 1: T Gaussian steps of std sigma*C whose means differ by 2C under replace-one
  # (one record's clipped gradient swapped for another's) compose into one Gaussian with
  # mu = 2 sqrt(T) / sigma.
  expected = _gaussian_epsilon(2 * math.sqrt(steps) / sigma, delta)
  got = accounting.dpsgd_epsilon_replace_one(sigma, 1.0, steps, delta,
                                             pld_discretization=1e-4)
  assert got == pytest.approx(expected, rel=1e-3)
  assert got >= expected * (1 - 1e-9)  # the PLD accountant is pessimistic


@pytest.mark.parametrize("sigma,q,steps,delta", [(1.1, 0.01, 1000, 1e-5), (2.0, 0.1, 200, 1e-5),
                                                 (0.8, 0.05, 100, 1e-6), (3.0, 1.0, 5, 1e-5)])
def test_replace_one_is_at_least_add_or_remove(sigma, q, steps, delta):
  add_remove = accounting.dpsgd_epsilon(sigma, q, steps, delta, accountant="pld",
                                        pld_discretization=PLD_FAST)
  replace = accounting.dpsgd_epsilon_replace_one(sigma, q, steps, delta,
                                                 pld_discretization=PLD_FAST)
  assert replace >= add_remove - 1e-6
  # Group privacy of size 2 bounds replace-one by about twice add-or-remove (the delta side
  # grows too, so allow slack); a sanity check that it is not absurdly large.
  assert replace <= 2.5 * add_remove + 0.1


def test_replace_one_is_monotone_in_noise_and_steps():
  values = [accounting.dpsgd_epsilon_replace_one(s, 0.05, 100, 1e-5, pld_discretization=PLD_FAST)
            for s in (0.8, 1.0, 2.0, 4.0)]
  assert all(a > b for a, b in zip(values, values[1:]))
  by_steps = [accounting.dpsgd_epsilon_replace_one(1.0, 0.05, t, 1e-5,
                                                   pld_discretization=PLD_FAST)
              for t in (10, 100, 1000)]
  assert all(a < b for a, b in zip(by_steps, by_steps[1:]))


def test_limits():
  assert accounting.dpsgd_epsilon_replace_one(0.0, 0.1, 10, 1e-5) == math.inf
  assert accounting.dpsgd_epsilon_replace_one(1.0, 0.1, 0, 1e-5) == 0.0
  assert accounting.dpsgd_epsilon_replace_one(1.0, 0.1, 10, 0.0) == math.inf


@pytest.mark.parametrize("kwargs", [
    dict(noise_multiplier=-1.0),
    dict(sampling_rate=1.5),
    dict(sampling_rate=-0.1),
    dict(num_steps=-1),
    dict(num_steps=2.5),
    dict(delta=1.0),
    dict(delta=-1e-5),
    dict(delta=float("nan")),
    dict(pld_discretization=0.0),
    dict(pld_discretization=2.0),
])
def test_bad_arguments_raise(kwargs):
  args = dict(noise_multiplier=1.0, sampling_rate=0.1, num_steps=10, delta=1e-5)
  args.update(kwargs)
  with pytest.raises(ValueError):
    accounting.dpsgd_epsilon_replace_one(**args)
