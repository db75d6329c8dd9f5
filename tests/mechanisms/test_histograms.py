"""Histogram models of PATE, CaPC and Private-kNN against NumPy, scipy and brute force."""

import functools

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
import scipy.stats

from dpaudit import accounting
from dpaudit.mechanisms import histograms as H

_DRAWS = 40_000


def _draw(fn, model, num, seed, *args):
  keys = jax.random.split(jax.random.key(seed), num)
  return np.asarray(jax.jit(jax.vmap(lambda k: fn(k, model, *args)))(keys))


def _same_distribution(a, b, min_expected=10):
  """Chi-square p-value that two samples of whole counts come from one distribution."""
  a, b = np.asarray(a).astype(int), np.asarray(b).astype(int)
  low = min(a.min(), b.min())
  ca = np.bincount(a - low, minlength=max(a.max(), b.max()) - low + 1)
  cb = np.bincount(b - low, minlength=ca.size)
  keep = (ca + cb) >= min_expected
  table = np.stack([np.append(ca[keep], ca[~keep].sum()), np.append(cb[keep], cb[~keep].sum())])
  table = table[:, table.sum(axis=0) > 0]
  if table.shape[1] < 2:
    return 1.0
  return scipy.stats.chi2_contingency(table)[1]


PROBABILITIES = [
    np.random.default_rng(0).dirichlet(np.full(10, 0.5)),
    np.array([0.85, 0.06, 0.03, 0.02, 0.01, 0.01, 0.01, 0.005, 0.005, 0.0]),
    np.array([0.5, 0.5]),
    np.array([0.0, 1.0, 0.0]),
]


@pytest.mark.parametrize("p", PROBABILITIES, ids=["dirichlet", "concentrated", "even", "certain"])
@pytest.mark.parametrize("k", [1, 250])
def test_votes_match_numpy_multinomial(p, k):
  table = H.vote_table(p, k)
  ours = _draw(H.sample_votes, table, _DRAWS, 1)
  assert np.all(ours.sum(axis=1) == k) and np.all(ours >= 0)
  ref = np.random.default_rng(2).multinomial(k, p, size=_DRAWS)
  p_values = [_same_distribution(ours[:, c], ref[:, c]) for c in range(p.size)]
  # 10 classes x 8 cases: Bonferroni at 1e-3 overall keeps the test from flaking
  assert min(p_values) > 1e-3 / 80, p_values
  # and the joint law: the count of the two likeliest classes together
  top = np.argsort(p)[-2:]
  assert _same_distribution(ours[:, top].sum(1), ref[:, top].sum(1)) > 1e-3 / 80


def test_vote_table_window_and_errors():
  p = np.array([0.2, 0.3, 0.5])
  window = H.required_window(p, 100)
  assert len(window) == 2 and all(w % 8 == 0 and 8 <= w <= 104 for w in window)
  assert window[0] < window[1]  # the stage of the smaller class needs a narrower row
  wide = H.vote_table(p, 100, window=104)
  narrow = H.vote_table(p, 100)
  assert [t.shape for t in narrow.thresholds] == [(101, w) for w in window]
  key = jax.random.split(jax.random.key(3), 1000)
  same = jax.vmap(H.sample_votes, (0, None))
  np.testing.assert_array_equal(same(key, wide), same(key, narrow))  # width changes nothing
  with pytest.raises(ValueError, match=r"window=\[8, 8\] is too narrow.*need at least"):
    H.vote_table(p, 100, window=8)
  with pytest.raises(ValueError, match="must be non-negative and sum to 1"):
    H.vote_table([0.5, 0.6], 10)
  with pytest.raises(ValueError, match="num_votes=0"):
    H.vote_table([0.5, 0.5], 0)
  with pytest.raises(ValueError, match="at least 2 class probabilities"):
    H.vote_table([1.0], 10)


def test_pate_model_moments_and_neighbor():
  p = np.array([0.6, 0.3, 0.1])
  p_neighbor = np.array([0.0, 0.0, 1.0])
  model = H.pate_model(p, p_neighbor, 50)
  h_s = _draw(H.pate_histogram, model, _DRAWS, 4, False)
  h_n = _draw(H.pate_histogram, model, _DRAWS, 5, True)
  assert np.all(h_s.sum(1) == 50) and np.all(h_n.sum(1) == 50)
  se = np.sqrt(50 * p * (1 - p) / _DRAWS)
  np.testing.assert_array_less(np.abs(h_s.mean(0) - 50 * p), 5 * se)
  np.testing.assert_array_less(np.abs(h_n.mean(0) - (49 * p + p_neighbor)), 5 * se)
  # H_S' - Mult(1, P') is Mult(49, P): its third class equals Bin(49, 0.1) in law
  ref = np.random.default_rng(6).binomial(49, 0.1, _DRAWS)
  assert _same_distribution(h_n[:, 2] - 1, ref) > 1e-4
  traced = jax.jit(lambda k, nb: H.pate_histogram(k, model, nb))
  np.testing.assert_array_equal(traced(jax.random.key(7), True),
                                H.pate_histogram(jax.random.key(7), model, True))


def test_capc_model_against_a_loop_over_teachers():
  rng = np.random.default_rng(8)
  teachers = np.zeros((6, 3))
  teachers[:, 0] = 1.0  # deterministic teachers ...
  teachers[1] = [0.2, 0.5, 0.3]  # ... and two random ones
  teachers[4] = [0.0, 0.9, 0.1]
  teachers[0] = [0.7, 0.3, 0.0]  # teacher 1
  first_neighbor = np.array([0.0, 0.0, 1.0])
  model = H.capc_model(teachers, first_neighbor, num_random=4)
  assert model.random.shape == (4, 3) and int(model.active.sum()) == 2
  np.testing.assert_array_equal(model.fixed, [3.0, 0.0, 0.0])
  for neighbor in (False, True):
    ours = _draw(H.capc_histogram, model, _DRAWS, 9 + neighbor, neighbor)
    assert np.all(ours.sum(1) == 6)
    rows = teachers.copy()
    if neighbor:
      rows[0] = first_neighbor
    loop = np.zeros((_DRAWS, 3))
    for row in rows:  # the naive model: one categorical vote per teacher
      loop[np.arange(_DRAWS), rng.choice(3, _DRAWS, p=row)] += 1
    for c in range(3):
      assert _same_distribution(ours[:, c], loop[:, c]) > 1e-4
  with pytest.raises(ValueError, match="num_random=1 is below the 2 teachers"):
    H.capc_model(teachers, first_neighbor, num_random=1)


@pytest.mark.parametrize("rank", [1, 7, 10, 11, 40, 400])
def test_knn_inclusion_probability_against_scipy_and_simulation(rank):
  k, gamma = 10, 0.3
  ours = float(H.knn_inclusion_probability(rank, k, gamma))
  assert ours == pytest.approx(gamma * scipy.stats.binom.cdf(k - 1, rank - 1, gamma), rel=1e-12)
  if rank <= 40:  # brute force: subsample the ranked points and look at the top k
    kept = np.random.default_rng(rank).random((100_000, rank)) < gamma
    in_top = kept[:, -1] & (kept[:, :-1].sum(axis=1) <= k - 1)
    se = np.sqrt(ours * (1 - ours) / kept.shape[0])
    assert abs(in_top.mean() - ours) < 5 * se + 1e-12
  # far ranks, where nu (~1e-750 here) underflows and scipy's logcdf gives -inf: mpmath
  with mpmath.workdps(30):
    g = mpmath.mpf(gamma)
    ref = mpmath.log(sum(mpmath.binomial(4999, i) * g ** (i + 1) * (1 - g) ** (4999 - i)
                         for i in range(k)))
  assert float(H.knn_log_inclusion_probability(5000, k, gamma)) == pytest.approx(float(ref),
                                                                                 rel=1e-12)


def test_knn_vote_model_against_simulated_subsampling():
  rng = np.random.default_rng(11)
  labels = rng.integers(0, 3, 30)
  k, gamma = 5, 0.4
  model = H.knn_vote_model(labels, k, gamma, 3)
  trials = 40_000
  kept = rng.random((trials, labels.size)) < gamma
  rank_kept = np.cumsum(kept, axis=1)
  in_top = kept & (rank_kept <= k)
  full = rank_kept[:, -1] >= k  # the model conditions on k neighbours being found
  votes = (in_top[full][:, :, None] * np.eye(3)[labels][None]).sum(axis=(0, 1))
  last = (kept & (rank_kept == k))[full] @ np.eye(3)[labels]
  np.testing.assert_allclose(model.probabilities, votes / votes.sum(), atol=0.01)
  np.testing.assert_allclose(model.last_probabilities, last.sum(0) / last.sum(), atol=0.01)
  with pytest.raises(ValueError, match="ranked_labels must lie in"):
    H.knn_vote_model([0, 5, 1, 1, 1, 1], k, gamma, 3)
  with pytest.raises(ValueError, match="sampling_rate=1.5"):
    H.knn_inclusion_probability(3, k, 1.5)


def test_knn_model_neighbor_adds_the_poison_with_probability_nu():
  votes = H.KnnVoteModel(np.array([0.7, 0.3, 0.0]), np.array([0.5, 0.5, 0.0]))
  model = H.knn_model(votes, 20, poison_label=2, inclusion=0.25)
  h_s = _draw(H.knn_histogram, model, _DRAWS, 12, False)
  h_n = _draw(H.knn_histogram, model, _DRAWS, 13, True)
  assert np.all(h_s[:, 2] == 0) and np.all(h_s.sum(1) == 20) and np.all(h_n.sum(1) == 20)
  share = np.mean(h_n[:, 2] == 1)
  assert abs(share - 0.25) < 5 * np.sqrt(0.25 * 0.75 / _DRAWS)
  with pytest.raises(ValueError, match="poison_label=3"):
    H.knn_model(votes, 20, poison_label=3, inclusion=0.25)


def test_noisy_argmax_of_a_certain_histogram_matches_equation_4():
  """P one-hot makes Mult(k, P) a fixed histogram, so the released classes must follow the
  exact class probabilities of Eq. (4) (quadrature in dpaudit.accounting)."""
  model = H.pate_model([0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], 6)
  sigma = 3.0
  release = functools.partial(H.noisy_argmax_of, H.PATE, sigma=sigma)
  n = 100_000
  for neighbor, hist in ((False, [0.0, 6.0, 0.0, 0.0]), (True, [1.0, 5.0, 0.0, 0.0])):
    keys = jax.random.split(jax.random.key(14 + neighbor), n)
    out = np.asarray(jax.jit(jax.vmap(lambda k: release(k, model, neighbor)))(keys))
    expected = np.asarray(accounting.noisy_argmax_class_probabilities(
        jnp.asarray(hist, jnp.float64), sigma))
    observed = np.bincount(out, minlength=4)
    assert scipy.stats.chisquare(observed, expected * n).pvalue > 1e-4
