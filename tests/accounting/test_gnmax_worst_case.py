"""Tests for dpaudit.accounting.gnmax_worst_case: the search against brute force over every
neighbouring pair, against a scipy Bernoulli reference for two classes, and against the 2/pi
limit of a binary release."""

from __future__ import annotations

import itertools
import math

import jax
import numpy as np
import pytest
from scipy import stats

from dpaudit.accounting import gnmax_worst_case as wc
from dpaudit.accounting import noisy_argmax as na

ORDERS = [1.5, 3.0, 8.0, 32.0]


def _all_histograms(k, c):
  return np.array([h for h in itertools.product(range(k + 1), repeat=c) if sum(h) == k])


def _brute_force(k, c, sigma, orders):
  """max over every H and every move i -> j of D_alpha(M(H) || M(H - e_i + e_j)), computed with
  the public noisy_argmax_renyi (no symmetry used)."""
  pairs = []
  for h in _all_histograms(k, c):
    for i, j in itertools.permutations(range(c), 2):
      if h[i] >= 1:
        nbr = h.copy()
        nbr[i] -= 1
        nbr[j] += 1
        pairs.append((h, nbr))
  hist = np.array([p[0] for p in pairs], float)
  nbr = np.array([p[1] for p in pairs], float)
  return np.asarray(na.noisy_argmax_renyi(hist, nbr, sigma, orders).forward).max(axis=0)


@pytest.mark.parametrize("k,c,sigma", [(7, 3, 1.0), (5, 4, 0.7)])
def test_search_finds_the_brute_force_supremum(k, c, sigma):
  found = wc.worst_case_neighbors(k, c, sigma, ORDERS, key=jax.random.key(0))
  np.testing.assert_allclose(found.divergence, _brute_force(k, c, sigma, ORDERS), rtol=1e-9)
  assert np.all(found.divergence <= found.data_independent)


def _bernoulli_renyi(p, q, order):
  """D_alpha(Ber(p) || Ber(q)) from log-probabilities, in float64."""
  terms = np.array([order * p[0] + (1 - order) * q[0], order * p[1] + (1 - order) * q[1]])
  return np.logaddexp(terms[0], terms[1]) / (order - 1)


def test_two_classes_match_a_scipy_bernoulli_reference():
  k, sigma = 30, 3.0
  found = wc.worst_case_neighbors(k, 2, sigma, ORDERS, num_random_starts=0)
  scale = sigma * math.sqrt(2.0)
  for i, order in enumerate(ORDERS):
    best = -np.inf
    for a in range(1, k + 1):  # H = (a, k - a) -> H' = (a - 1, k - a + 1)
      d, d_nbr = (2 * a - k) / scale, (2 * a - 2 - k) / scale
      p = (stats.norm.logcdf(d), stats.norm.logsf(d))
      q = (stats.norm.logcdf(d_nbr), stats.norm.logsf(d_nbr))
      best = max(best, _bernoulli_renyi(p, q, order))
    np.testing.assert_allclose(found.divergence[i], best, rtol=1e-9)


def test_large_sigma_tends_to_two_over_pi_of_the_data_independent_bound():
  found = wc.worst_case_neighbors(200, 2, 100.0, [1.5, 2.0], num_random_starts=0)
  np.testing.assert_allclose(found.divergence / found.data_independent, 2 / math.pi, rtol=5e-3)


def test_reported_pairs_attain_the_reported_divergences():
  k, c, sigma = 9, 4, 2.0
  found = wc.worst_case_neighbors(k, c, sigma, ORDERS, key=jax.random.key(3),
                                  num_random_starts=2, max_steps=6)
  assert np.all(found.histogram.sum(axis=1) == k)
  assert np.all(found.histogram[:, 0] >= 1) and np.all(found.neighbor >= 0)
  np.testing.assert_array_equal(found.neighbor - found.histogram,
                                np.tile([-1, 1] + [0] * (c - 2), (len(ORDERS), 1)))
  again = na.noisy_argmax_renyi(found.histogram.astype(float), found.neighbor.astype(float),
                                sigma, ORDERS).forward
  np.testing.assert_allclose(np.diagonal(np.asarray(again)), found.divergence, rtol=1e-12)
  assert np.all(found.divergence >= found.two_level * (1 - 1e-12))


def test_two_level_family_is_every_spread_histogram():
  fam = wc.two_level_family(6, 4)
  assert np.all(fam.sum(axis=1) == 6) and np.all(fam[:, 0] >= 1)
  assert np.all(fam[:, 2:].max(axis=1) - fam[:, 2:].min(axis=1) <= 1)
  assert len(fam) == sum(1 for a in range(1, 7) for b in range(0, 7 - a))
  assert len(wc.two_level_family(6, 2)) == 6


@pytest.mark.parametrize("kwargs,match", [
    ({"num_teachers": 0}, "num_teachers"),
    ({"num_classes": 1}, "num_classes"),
    ({"sigma": 0.0}, "sigma"),
    ({"sigma": np.inf}, r"sigma=inf is outside the valid range \(0, inf\)"),
    ({"sigma": 2e4}, r"sigma=20000 is outside the valid range \[4e-12, 10000\]"),
    ({"sigma": 1e-13}, r"sigma=1e-13 is outside the valid range \[4e-12, 10000\]"),
    ({"sigma": True}, "sigma"),
    ({"num_teachers": 4.0}, "num_teachers"),
    ({"num_nodes": 2}, "num_nodes"),
    ({"key": 0}, "key"),
    ({"orders": [1.0]}, "orders"),
    ({"orders": []}, "orders"),
    ({"num_random_starts": -1}, "num_random_starts"),
    ({"max_steps": -2}, "max_steps"),
    ({"key": None}, "key"),
])
def test_bad_input_is_named(kwargs, match):
  args = {"num_teachers": 4, "num_classes": 3, "sigma": 1.0, "orders": [2.0],
          "key": jax.random.key(0), **kwargs}
  with pytest.raises(ValueError, match=match):
    wc.worst_case_neighbors(args.pop("num_teachers"), args.pop("num_classes"),
                            args.pop("sigma"), args.pop("orders"), **args)


@pytest.mark.parametrize("sigma", [4e-12, 1e-6, 1e-3])
def test_tiny_sigma_stays_finite_and_within_the_bound(sigma):
  """Every divergence in [0, alpha / sigma^2] and finite down to the smallest valid sigma. At
  sigma = 1e-6 the search returned 2.0026e12 at alpha = 2, above the bound 2e12 (log
  probabilities off by ~1e8 from a misplaced quadrature grid), and NaN at 1e-8."""
  out = wc.worst_case_neighbors(4, 3, sigma, [1.5, 2.0, 64.0], num_random_starts=0,
                                max_steps=0)
  assert np.all(np.isfinite(out.divergence)) and np.all(out.divergence >= 0)
  assert np.all(out.divergence <= out.data_independent)
  if sigma <= 1e-6:  # three classes: the worst pair nears the bound at alpha <= 2 as sigma -> 0
    np.testing.assert_allclose(out.divergence[:2] / out.data_independent[:2], 1.0, rtol=1e-9)


def test_one_vote_has_the_single_pair():
  """k = 1: H = e_0 and H' = e_1 (the family and the search, which has no move, agree)."""
  for c in (3,):
    out = wc.worst_case_neighbors(1, c, 1.0, ORDERS, key=jax.random.key(0),
                                  num_random_starts=2, max_steps=3)
    expected = np.zeros((len(ORDERS), c), int)
    expected[:, 0] = 1
    np.testing.assert_array_equal(out.histogram, expected)
    ref = np.asarray(na.noisy_argmax_renyi(expected[0].astype(float),
                                           np.roll(expected[0], 1).astype(float), 1.0,
                                           ORDERS).forward)
    np.testing.assert_allclose(out.divergence, ref, rtol=1e-12)


def test_local_search_moves_are_valid_canonical_neighbours():
  start = np.array([1, 3, 2, 0, 0])
  moves = wc._moves(start, num_teachers=6)
  assert np.all(moves.sum(axis=1) == 6) and np.all(moves >= 0) and np.all(moves[:, 0] >= 1)
  np.testing.assert_array_equal(moves, wc.canonical(moves))
  # one vote from class 1 to class 0, and two votes from class 1 to a class of the tail
  assert any((m == [2, 2, 2, 0, 0]).all() for m in moves)
  assert any((m == [1, 1, 2, 2, 0]).all() for m in moves)
  assert not any(m[0] == 0 for m in moves)  # class 0 keeps the vote that moves
