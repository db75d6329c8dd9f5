"""The noisy-argmax Renyi audit: validity (coverage), limits, and the result object."""

import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import accounting
from dpaudit.audits import noisy_argmax as audit
from dpaudit.estimators import renyi_cuts

H = (14.0, 12.0, 10.0, 8.0, 6.0)
H_PRIME = (13.0, 13.0, 10.0, 8.0, 6.0)
ORDERS = (1.5, 2.0, 4.0, 8.0, 16.0)


@pytest.fixture(scope="module")
def small_result():
  config = audit.NoisyArgmaxAuditConfig(num_trials=400_000, orders=ORDERS, num_bootstrap=200)
  return audit.run(jax.random.key(0), config)


def test_audit_bounds_sit_below_exact_and_theory_above(small_result):
  r = small_result
  for direction in (r.forward, r.reverse):
    assert np.all(direction.two_cut <= direction.exact + 1e-12)
    assert np.all(direction.k_cut <= direction.exact + 1e-12)
    assert np.all(direction.two_cut >= 0) and np.all(direction.k_cut >= 0)
    # The exact divergence is the tightest upper bound: the theory bounds lie above it.
    assert np.all(r.data_independent_rdp >= direction.exact)
    assert np.all(direction.data_dependent >= direction.exact - 1e-12)
  # 400k trials per histogram certify a good fraction of the divergence at moderate orders.
  assert r.forward.two_cut[1] > 0.3 * r.forward.exact[1]
  np.testing.assert_allclose(r.class_probabilities.sum(), 1.0, atol=1e-12)
  assert sum(r.counts["sel_p"]) + sum(r.counts["eval_p"]) == 400_000


def test_result_to_dict_is_json_ready(small_result):
  d = small_result.to_dict()
  for key in ("orders", "exact_renyi", "exact_renyi_reverse", "two_cut_lower_bound",
              "k_cut_lower_bound", "data_independent_rdp", "data_dependent_rdp", "num_trials",
              "config", "epsilon_upper_bound", "audit_curves_through_thm1",
              "two_cut_bootstrap_asymptotic", "k_cut_bootstrap_trusted", "meaning", "warnings"):
    assert key in d
  json.dumps(d, allow_nan=False)
  assert d["num_trials"] == 400_000 and len(d["two_cut_lower_bound"]) == len(ORDERS)
  assert d["audit_curves_through_thm1"]["two_cut"] <= d["epsilon_upper_bound"]["exact"] + 1e-9
  # Nothing asymptotic or converted by an upper-bound rule is keyed as a lower bound, and every
  # reported quantity says what it is.
  assert not any("bootstrap" in key and "lower_bound" in key for key in d)
  assert set(d["epsilon_upper_bound"]) == {"exact", "data_dependent", "data_independent"}
  assert "NOT a lower bound" in d["meaning"]["audit_curves_through_thm1"]
  assert "asymptotic" in d["meaning"]["k_cut_bootstrap_asymptotic"]


def test_untrusted_bootstraps_are_flagged_and_warned():
  """At 400,000 trials (200,000 per half) the bootstraps are trusted where the divergence is
  told apart from 0; at D = 0 never, and the result says so in one line per direction."""
  config = audit.NoisyArgmaxAuditConfig(histogram=H, neighbor=H, num_trials=400_000,
                                        orders=ORDERS, num_bootstrap=50)
  r = audit.run(jax.random.key(3), config)
  assert not np.any(r.forward.k_cut_bootstrap_trusted)
  assert not np.any(r.forward.two_cut_bootstrap_trusted)
  assert any(line.startswith("k_cut_bootstrap (forward)") for line in r.warnings)
  assert all("\n" not in line for line in r.warnings)


def test_identical_histograms_give_zero():
  config = audit.NoisyArgmaxAuditConfig(histogram=H, neighbor=H, num_trials=100_000,
                                        orders=ORDERS, num_bootstrap=50)
  r = audit.run(jax.random.key(1), config)
  np.testing.assert_allclose(r.forward.exact, 0.0, atol=1e-12)
  assert np.all(r.forward.two_cut == 0.0) and np.all(r.reverse.two_cut == 0.0)
  assert np.all(r.forward.k_cut == 0.0)


def _two_cut_pipeline(sel_p, eval_p, sel_q, eval_q, orders, beta):
  """Exactly the audit's 2-cut path: choose sets on the selection half, bound on the other."""
  sets = audit.select_two_cut_sets(sel_p, sel_q, orders, beta)
  in_p = sets.astype(eval_p.dtype) @ eval_p
  in_q = sets.astype(eval_q.dtype) @ eval_q
  return jnp.diagonal(renyi_cuts.renyi_two_cut_lower_bound(
      in_p, jnp.sum(eval_p), in_q, jnp.sum(eval_q), orders, beta))


def test_two_cut_coverage_against_exact_divergence():
  """Repeated small audits: the 2-cut bound exceeds the exact divergence in <= ~beta of them.

  The counts of the mechanism's Monte Carlo are multinomial with the exact class probabilities
  (Eq. (4)), so they are drawn directly to afford many repetitions.
  """
  reps, half, beta = 300, 20_000, 0.1
  orders = jnp.asarray(ORDERS)
  p = accounting.noisy_argmax_class_probabilities(jnp.asarray(H), 2.0)
  q = accounting.noisy_argmax_class_probabilities(jnp.asarray(H_PRIME), 2.0)
  exact = np.asarray(accounting.noisy_argmax_renyi(jnp.asarray(H), jnp.asarray(H_PRIME), 2.0,
                                                   orders).forward)
  keys = jax.random.split(jax.random.key(2), 4)
  draw = lambda k, probs: jax.random.multinomial(k, half, jnp.broadcast_to(probs, (reps, 5)))
  sel_p, eval_p, sel_q, eval_q = (draw(keys[0], p), draw(keys[1], p), draw(keys[2], q),
                                  draw(keys[3], q))
  bounds = np.asarray(jax.jit(jax.vmap(
      lambda a, b, c, d: _two_cut_pipeline(a, b, c, d, orders, beta)))(sel_p, eval_p, sel_q,
                                                                        eval_q))
  violations = np.mean(bounds > exact, axis=0)
  # The exact divergence is above the chosen set's 2-cut, so the sharp limit of the chosen-set
  # test below applies here too.
  assert np.all(violations <= _sharp_limit(beta, reps))
  assert np.mean(bounds[:, 1]) > 0.2 * exact[1]  # and the audit has power
  # Negative control: choosing the set and estimating on the same data, without confidence
  # intervals, overshoots the set's true 2-cut often; the harness can detect invalid audits.
  sets = jax.jit(jax.vmap(lambda a, c: audit.select_two_cut_sets(a, c, orders, beta)))(sel_p,
                                                                                       sel_q)
  frac_p = np.einsum("roc,rc->ro", np.asarray(sets, float), np.asarray(sel_p)) / half
  frac_q = np.einsum("roc,rc->ro", np.asarray(sets, float), np.asarray(sel_q)) / half
  true_p = np.einsum("roc,c->ro", np.asarray(sets, float), np.asarray(p))
  true_q = np.einsum("roc,c->ro", np.asarray(sets, float), np.asarray(q))
  plug = np.asarray(renyi_cuts.binary_renyi_divergence(frac_p, frac_q, orders))
  truth = np.asarray(renyi_cuts.binary_renyi_divergence(true_p, true_q, orders))
  diag = np.arange(len(ORDERS))
  assert np.mean(plug[:, diag, diag] > truth[:, diag, diag]) > 0.3


SIGNIFICANCE_FACTOR = float(os.environ.get("DPAUDIT_COVERAGE_SIGNIFICANCE_FACTOR", "1"))


def _chosen_set_violations(beta, reps=2000, half=20_000, big=10**9, seed=5):
  """Violation rates per order of the audit's 2-cut path against the true 2-cut divergence of
  the set it chose, with the neighbour's evaluation sample so large (1e9 trials) that its
  limit is exact: then a violation is (almost) exactly the event that the lower
  Clopper-Pearson limit of P(O) lies above P(O), of probability (1 - sqrt(1 - beta)) / 2."""
  orders = jnp.asarray(ORDERS)
  p = accounting.noisy_argmax_class_probabilities(jnp.asarray(H), 2.0)
  q = accounting.noisy_argmax_class_probabilities(jnp.asarray(H_PRIME), 2.0)
  keys = jax.random.split(jax.random.key(seed), 4)
  draw = lambda k, n, probs: jax.random.multinomial(k, n, jnp.broadcast_to(probs, (reps, 5)))
  sel_p, eval_p = draw(keys[0], half, p), draw(keys[1], half, p)
  sel_q, eval_q = draw(keys[2], half, q), draw(keys[3], big, q)

  def one(a, b, c, d):
    sets = audit.select_two_cut_sets(a, c, orders, beta)
    in_p, in_q = sets.astype(b.dtype) @ b, sets.astype(d.dtype) @ d
    bound = jnp.diagonal(renyi_cuts.renyi_two_cut_lower_bound(in_p, jnp.sum(b), in_q,
                                                              jnp.sum(d), orders, beta))
    chosen = sets.astype(p.dtype)
    truth = jnp.diagonal(renyi_cuts.binary_renyi_divergence(chosen @ p, chosen @ q, orders))
    return bound > truth * (1.0 + 1e-9)

  return np.mean(np.asarray(jax.jit(jax.vmap(one))(sel_p, eval_p, sel_q, eval_q)), axis=0)


def _sharp_limit(beta, reps=2000):
  rate = (1.0 - np.sqrt(1.0 - beta)) / 2.0
  return rate + 3.0 * np.sqrt(rate * (1.0 - rate) / reps)


def test_two_cut_coverage_is_sharp_for_the_chosen_set():
  """The violation rate sits at its exact size (2.55% measured vs 2.57% at beta = 0.1), so a
  factor-2 error in the significance handling (5.4% measured) fails the check; run with
  DPAUDIT_COVERAGE_SIGNIFICANCE_FACTOR=2 to see it fail."""
  beta = 0.1
  violations = _chosen_set_violations(beta * SIGNIFICANCE_FACTOR)
  assert np.all(violations <= _sharp_limit(beta)), violations
  assert np.all(violations >= 0.5 * (1.0 - np.sqrt(1.0 - beta)) / 2.0)  # not vacuous either


def test_two_cut_coverage_check_catches_a_doubled_significance():
  """Negative control: the same check on the audit run at twice the level must fail."""
  violations = _chosen_set_violations(0.2, reps=1000)
  assert np.all(violations > _sharp_limit(0.1)), violations


def test_likelihood_ratio_prefix_sets():
  sets = np.asarray(audit.likelihood_ratio_prefix_sets(jnp.array([10., 50, 5, 35]),
                                                       jnp.array([40., 20, 20, 20])))
  # ratios: 0.25, 2.5, 0.25, 1.75 -> order 1, 3, then 0 and 2 (stable)
  np.testing.assert_array_equal(sets[0], [False, True, False, False])
  np.testing.assert_array_equal(sets[1], [False, True, False, True])
  assert sets.shape == (3, 4) and np.all(sets.sum(1) == [1, 2, 3])


@pytest.mark.parametrize("kwargs,match", [
    (dict(histogram=(1.0,), neighbor=(1.0,)), "need at least 2"),
    (dict(neighbor=(1.0, 2.0)), "neighbor has 2 classes"),
    (dict(sigma=0.0), "sigma=0.0"),
    (dict(num_trials=3), "num_trials=3"),
    (dict(orders=(2.0, 1.0)), "orders=1.0"),
    (dict(orders=(3.0, 2.0)), "strictly increasing"),
    (dict(significance=0.0), "significance=0.0"),
    (dict(k_cut_method="wilson"), "k_cut_method='wilson'"),
    (dict(delta=0.0), "delta=0.0"),
    (dict(histogram=(1.0, float("nan"), 2.0, 3.0, 4.0)), "finite"),
])
def test_config_validation(kwargs, match):
  with pytest.raises(ValueError, match=match):
    audit.NoisyArgmaxAuditConfig(**kwargs)


def test_thm1_floor_is_the_conversion_of_a_vanishing_curve():
  """Thm. 1 of Chadha et al. with every RDP value 0, by a naive loop over the orders; every
  curve that is not 0 reads at least this floor, and one that tends to 0 tends to it."""
  orders, delta = [1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], 1e-6
  naive = min(math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1) for a in orders)
  floor = audit.thm1_floor(orders, delta)
  assert floor == pytest.approx(naive, rel=1e-12) and floor == pytest.approx(0.1375, abs=1e-4)
  for scale in (1e-14, 1e-6, 1e-2):
    eps, _ = audit.thm1_epsilon(np.full(len(orders), scale), orders, delta)
    assert float(eps) >= floor
  eps, _ = audit.thm1_epsilon(np.full(len(orders), 1e-14), orders, delta)
  assert float(eps) == pytest.approx(floor, rel=1e-9)
  zero, _ = audit.thm1_epsilon(np.zeros(len(orders)), orders, delta)
  assert float(zero) == 0.0 and audit.format_epsilon(zero) == audit.NO_LEAKAGE


def test_result_round_trips_through_from_dict(small_result):
  from dpaudit import results
  d = results.loads(results.dumps(small_result.to_dict()))
  again = audit.Result.from_dict(d)
  assert again.to_dict() == small_result.to_dict()
  assert again.config == small_result.config
  np.testing.assert_array_equal(again.forward.two_cut_sets, small_result.forward.two_cut_sets)
  assert again.forward.two_cut_sets.dtype == bool and again.counts["sel_p"].dtype == np.int64
  for damage in ({"orders": "x"}, {"two_cut_lower_bound": [0.1]},
                 {"two_cut_sets": [[0.5] * 5] * len(ORDERS)}, {"counts": {}}):
    with pytest.raises((ValueError, TypeError, KeyError)):
      audit.Result.from_dict({**d, **damage})
  with pytest.raises(KeyError):
    audit.Result.from_dict({k: v for k, v in d.items() if k != "k_cut_lower_bound_reverse"})


def test_run_reports_progress_and_reuses_a_stored_result(tmp_path):
  from dpaudit import results
  config = audit.Config(num_trials=2000, orders=(2.0, 4.0), num_bootstrap=20)
  calls = []
  store = results.CellStore(str(tmp_path))
  first = audit.run(jax.random.key(5), config, store=store,
                    progress=lambda done, total, message="": calls.append((done, total)))
  assert calls[-1] == (4000, 4000) and all(d <= t for d, t in calls)
  again = audit.run(jax.random.key(5), config, store=store)
  assert again.to_dict() == first.to_dict()
  assert audit.run(jax.random.key(5), config).to_dict() == first.to_dict()
  assert len(list(tmp_path.glob("noisy_argmax-*.json"))) == 1
