"""Tests of dpaudit.models.ngram: the sequence loss against a naive loop, the lazy n-gram model,
the character vocabulary and examples, and ghost clipping of the neural n-gram model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit.dpsgd import clipping
from dpaudit.models import ngram


def _naive_nll(logits, targets):
  """-sum_t log softmax(z_t)[x_t] over non-PAD targets, one sequence at a time."""
  logits = np.asarray(logits, np.float64)
  targets = np.asarray(targets)
  flat_logits = logits.reshape((-1,) + logits.shape[-2:])
  flat_targets = targets.reshape((-1, targets.shape[-1]))
  out = []
  for z, x in zip(flat_logits, flat_targets):
    total = 0.0
    for t in range(len(x)):
      if x[t] < 0:
        continue
      m = np.max(z[t])
      log_norm = m + np.log(np.sum(np.exp(z[t] - m)))
      total -= z[t, x[t]] - log_norm
    out.append(total)
  return np.array(out).reshape(targets.shape[:-1])


@pytest.mark.parametrize("batch", [(3,), ()])
def test_sequence_nll_matches_naive_loop(batch):
  rng = np.random.default_rng(0)
  length, vocab = 7, 5
  logits = rng.normal(scale=3.0, size=batch + (length, vocab))
  targets = rng.integers(0, vocab, size=batch + (length,))
  targets[..., -2:] = ngram.PAD  # trailing padding
  targets.reshape(-1, length)[0, 1] = ngram.PAD  # and one in the middle
  got = np.asarray(ngram.sequence_nll(jnp.asarray(logits), jnp.asarray(targets)))
  assert got.shape == batch
  # The loss is computed in float32.
  np.testing.assert_allclose(got, _naive_nll(logits, targets), rtol=1e-5, atol=1e-5)
  # All-padding sequences cost nothing.
  np.testing.assert_array_equal(
      ngram.sequence_nll(jnp.asarray(logits), jnp.full(batch + (length,), ngram.PAD)), 0.0)


def test_lazy_ngram_starts_uniform_and_broadcasts():
  model = ngram.LazyNgram(num_positions=4, vocab_size=10)
  params = model.init(jax.random.key(0), jnp.zeros((1,)))["params"]
  np.testing.assert_array_equal(params["logits"], np.zeros((4, 10)))
  out = model.apply({"params": params}, jnp.zeros((1,)))
  assert out.shape == (4, 10)
  out = model.apply({"params": params}, jnp.zeros((5, 1)))
  assert out.shape == (5, 4, 10)
  canary = jnp.array([3, 1, 4, 1])
  nll = ngram.sequence_nll(out, jnp.broadcast_to(canary, (5, 4)))
  np.testing.assert_allclose(nll, 4 * np.log(10), rtol=1e-6)
  # A non-zero table moves the loss as the naive loop says.
  theta = jnp.asarray(np.random.default_rng(1).normal(size=(4, 10)))
  got = ngram.sequence_nll(model.apply({"params": {"logits": theta}}, jnp.zeros((1,))), canary)
  np.testing.assert_allclose(got, _naive_nll(np.asarray(theta, np.float32), canary),
                             rtol=1e-5)


def test_char_vocab():
  vocab = ngram.CharVocab.from_texts(["hello world", "abc!"])
  for c in "helowrdabc! 0123456789":
    assert c in vocab.chars
  assert sorted(vocab.chars) == list(vocab.chars)
  assert len(set(vocab.chars)) == len(vocab.chars)
  assert vocab.size == len(vocab.chars) + 3
  ids = vocab.encode("hello 42!")
  assert ids.dtype == np.int32 and np.all(ids >= vocab.num_special)
  assert vocab.decode(ids) == "hello 42!"
  # Decoding stops at eos / padding and skips bos.
  assert vocab.decode([vocab.bos, *ids, vocab.eos, *ids]) == "hello 42!"
  assert vocab.decode([*ids[:2], ngram.PAD, *ids]) == "he"
  unknown = vocab.encode("h\u00e9")
  assert unknown[1] == vocab.unk and unknown[0] == vocab.ids("h")[0]
  assert vocab.decode(unknown) == "h\ufffd"
  np.testing.assert_array_equal(vocab.ids("0123"), vocab.encode("0123"))
  with pytest.raises(ValueError, match="not in the vocabulary"):
    vocab.ids("0\u00e9")
  with pytest.raises(ValueError, match="distinct"):
    ngram.CharVocab("abca")
  with pytest.raises(ValueError):
    ngram.CharVocab("")


def test_contexts_and_line_examples_match_naive_loop():
  vocab = ngram.CharVocab.from_texts(["abc"])
  context_size, max_length = 3, 8
  lines = ["abca", "", "c1"]
  contexts, targets = ngram.line_examples(vocab, lines, context_size, max_length)
  assert contexts.shape == (3, max_length, context_size) and targets.shape == (3, max_length)
  for row, line in enumerate(lines):
    ids = list(vocab.encode(line))
    expected_targets = ids + [vocab.eos] + [ngram.PAD] * (max_length - len(ids) - 1)
    np.testing.assert_array_equal(targets[row], expected_targets)
    history = [vocab.eos if t < 0 else t for t in expected_targets]
    for pos in range(max_length):
      expected = [history[pos - k] if pos - k >= 0 else vocab.bos
                  for k in range(context_size, 0, -1)]  # most recent last
      np.testing.assert_array_equal(contexts[row, pos], expected, err_msg=f"{row}, {pos}")
  # contexts_of alone, on a batch.
  ids = np.array([[5, 6, 7, 8]])
  np.testing.assert_array_equal(
      ngram.contexts_of(ids, 2, bos=0)[0], [[0, 0], [0, 5], [5, 6], [6, 7]])
  with pytest.raises(ValueError, match="max_length=4"):
    ngram.line_examples(vocab, ["ab", "abcc"], context_size, 4)
  ngram.line_examples(vocab, ["abc"], context_size, 4)  # exactly fits with its eos
  with pytest.raises(ValueError, match="context_size"):
    ngram.line_examples(vocab, ["ab"], 0, 4)


def test_char_ngram_lm_shape_and_ghost_clipping_matches_vmap():
  vocab = ngram.CharVocab.from_texts(["the cat sat", "on the mat"])
  context_size = 3
  contexts, targets = ngram.line_examples(
      vocab, ["the cat sat", "on the mat", "a", "tat 12"], context_size, 12)
  model = ngram.CharNGramLM(vocab.size, context_size=context_size, hidden_size=16)
  params = model.init(jax.random.key(0), jnp.asarray(contexts[:1]))["params"]
  logits = model.apply({"params": params}, jnp.asarray(contexts))
  assert logits.shape == (4, 12, vocab.size)
  assert clipping.ghost_supported(model, params, jnp.asarray(contexts))
  mask = jnp.array([1.0, 1.0, 0.0, 1.0])
  kwargs = dict(l2_clip_norm=0.5, loss_fn=ngram.sequence_nll)
  ghost = clipping.clipped_grad_sum(model, params, contexts, targets, mask, strategy="ghost",
                                    **kwargs)
  vmap = clipping.clipped_grad_sum(model, params, contexts, targets, mask, strategy="vmap",
                                   **kwargs)
  # Whole lines have gradient norms above 0.5, so clipping is active.
  assert np.all(np.asarray(vmap.grad_norms)[np.asarray(mask) > 0] > 0.5)
  np.testing.assert_allclose(ghost.grad_norms, vmap.grad_norms, rtol=1e-4)
  for g, v in zip(jax.tree.leaves(ghost.grad_sum), jax.tree.leaves(vmap.grad_sum)):
    np.testing.assert_allclose(g, v, rtol=1e-4, atol=1e-6)
  # Independent check: per-line gradients by jax.grad, clipped and summed in numpy.
  def loss(p, c, t):
    return ngram.sequence_nll(model.apply({"params": p}, c[None]), t[None])[0]
  grad = jax.jit(jax.grad(loss))
  expected = None
  for i in range(4):
    if mask[i] == 0:
      continue
    g = grad(params, jnp.asarray(contexts[i]), jnp.asarray(targets[i]))
    norm = np.sqrt(sum(float(np.sum(np.square(x))) for x in jax.tree.leaves(g)))
    g = jax.tree.map(lambda x: np.asarray(x) * min(1.0, 0.5 / norm), g)
    expected = g if expected is None else jax.tree.map(np.add, expected, g)
  for g, e in zip(jax.tree.leaves(ghost.grad_sum), jax.tree.leaves(expected)):
    np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-6)
