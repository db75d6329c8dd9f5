"""Lazy sampling (Sec. 3.2 of Stock et al.): exact probabilities under top-k and temperature,
checked against a naive loop and against the frequencies of the sampler."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit.attacks import reconstruction as attack


def _naive_lambda(logits, target, top_k, beta, allowed=None):
  """lambda(x | past) from the definition: f^(1/beta) normalised over the top-k of f."""
  f = np.exp(logits - logits.max())
  f = f / f.sum()
  ok = np.ones_like(f, bool) if allowed is None else np.asarray(allowed)
  ranked = sorted(np.flatnonzero(ok), key=lambda i: -f[i])
  if top_k:
    cutoff = f[ranked[min(top_k, len(ranked)) - 1]]
    keep = [i for i in ranked if f[i] >= cutoff]
  else:
    keep = ranked
  if target not in keep:
    return 0.0
  return f[target]**(1 / beta) / sum(f[i]**(1 / beta) for i in keep)


@pytest.mark.parametrize("top_k,beta", [(0, 1.0), (3, 1.0), (3, 0.5), (0, 2.0), (1, 0.7)])
def test_lazy_log_probs_match_the_definition(top_k, beta):
  rng = np.random.RandomState(0)
  logits = rng.normal(size=(4, 6, 8)) * 2
  targets = rng.randint(0, 8, size=(4, 6))
  targets[0, 4:] = -1  # padding
  got = np.asarray(attack.lazy_log_probs(jnp.asarray(logits), jnp.asarray(targets),
                                         top_k=top_k, temperature=beta))
  for b, i in itertools.product(range(4), range(6)):
    if targets[b, i] < 0:
      assert got[b, i] == 0.0
      continue
    want = _naive_lambda(logits[b, i], targets[b, i], top_k, beta)
    if want == 0.0:
      assert got[b, i] == -np.inf
    else:
      np.testing.assert_allclose(got[b, i], math.log(want), rtol=1e-5, atol=1e-5)
  total = np.asarray(attack.sequence_log_prob(jnp.asarray(logits), jnp.asarray(targets),
                                              top_k=top_k, temperature=beta))
  np.testing.assert_allclose(total, got.sum(-1), rtol=1e-6)


def test_allowed_mask_and_per_position_temperature():
  rng = np.random.RandomState(1)
  logits = rng.normal(size=(5, 10))
  targets = np.array([2, 3, 4, 5, 2])
  allowed = np.zeros(10, bool)
  allowed[2:6] = True
  betas = np.array([1.0, 0.5, 2.0, 1.0, 0.3])
  got = np.asarray(attack.lazy_log_probs(jnp.asarray(logits), jnp.asarray(targets), top_k=2,
                                         temperature=jnp.asarray(betas), allowed=allowed))
  for i in range(5):
    want = _naive_lambda(logits[i], targets[i], 2, betas[i], allowed)
    assert (got[i] == -np.inf) if want == 0 else np.isclose(got[i], math.log(want), atol=1e-5)
  # Probabilities over the allowed alphabet sum to one at every position.
  all_targets = np.broadcast_to(np.arange(2, 6), (5, 4)).T
  probs = np.exp(np.asarray(attack.lazy_log_probs(
      jnp.broadcast_to(jnp.asarray(logits), (4, 5, 10)), jnp.asarray(all_targets), top_k=2,
      temperature=jnp.asarray(betas), allowed=allowed)))
  np.testing.assert_allclose(probs.sum(0), 1.0, rtol=1e-5)


def test_sampler_frequencies_match_lazy_probabilities_and_its_log_probs():
  """A bigram model over 4 tokens (bos=0, eos=1): the frequency of each generated line over
  20,000 samples matches exp(log lambda) within 5 binomial standard errors, and every sample's
  log_prob equals sequence_log_prob of its tokens."""
  rng = np.random.RandomState(2)
  table = jnp.asarray(rng.normal(size=(4, 4)) * 1.5)

  def next_logits(contexts):
    return table[contexts[:, -1]]

  n = 20_000
  out = attack.sample_lines(jax.random.key(0), next_logits, n, 3, 1, 0, 1, top_k=3,
                            temperature=0.8)
  targets = np.asarray(out.targets)
  history = np.where(targets >= 0, targets, 1)
  contexts = np.concatenate([np.zeros((n, 1), int), history[:, :-1]], axis=1)
  logits = np.asarray(table)[contexts]
  again = np.asarray(attack.sequence_log_prob(jnp.asarray(logits), jnp.asarray(targets),
                                              top_k=3, temperature=0.8))
  np.testing.assert_allclose(np.asarray(out.log_prob), again, rtol=1e-5, atol=1e-5)
  lines, counts = np.unique(targets, axis=0, return_counts=True)
  top = np.argsort(-counts)[:6]
  for j in top:
    p = math.exp(again[np.flatnonzero((targets == lines[j]).all(1))[0]])
    se = math.sqrt(p * (1 - p) / n)
    assert abs(counts[j] / n - p) < 5 * se + 1e-4, (lines[j], counts[j] / n, p)
  finished = np.asarray(out.finished)
  assert finished.any() and not finished.all()
  # After the end token everything is padding.
  for row, done in zip(targets, finished):
    if done:
      end = list(row).index(1)
      assert (row[end + 1:] == -1).all()


@pytest.mark.parametrize("kwargs,message", [
    ({"top_k": -1}, "top_k"), ({"top_k": 1.5}, "top_k"), ({"temperature": 0.0}, "temperature")])
def test_bad_arguments(kwargs, message):
  with pytest.raises(ValueError, match=message):
    attack.lazy_log_probs(jnp.zeros((2, 3)), jnp.zeros((2,), int), **kwargs)
