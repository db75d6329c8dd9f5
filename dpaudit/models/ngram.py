r"""n-gram language models for the reconstruction audits of Stock et al., "Defending against
Reconstruction Attacks with Renyi Differential Privacy" (2022).

* :class:`LazyNgram`: the lazily parameterised n-gram model of their Sec. 4.1. A full model over
  sequences of :math:`T` symbols from an alphabet of :math:`D` has about :math:`D^T` logits, but
  the probability of one canary :math:`c` only involves the :math:`D \times T` logits on its
  path, :math:`u_{t,i} = \mathrm{softmax}(\theta_t)_i`, and training on :math:`c` alone only
  moves those. So the model *is* that :math:`T \times D` table.
* :class:`CharNGramLM`: a neural character n-gram model (Bengio et al., 2003, with one-hot
  context slots): the previous ``context_size`` characters, one-hot encoded, go through one
  tanh hidden layer to next-character logits. Every parameter sits in a flax ``Dense`` applied
  at each position of a line, so DP-SGD's ghost clipping (:mod:`dpaudit.dpsgd.clipping`)
  clips whole lines (the privacy unit) at the cost of one forward and backward pass.
* :class:`CharVocab` and :func:`line_examples`: characters to ids, and lines to (contexts,
  targets) training examples, one line per example.

:func:`sequence_nll` is the loss of both models: the summed negative log-likelihood of the
targets, with negative targets marking padding.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate

PAD = -1  # target id of padding positions


def sequence_nll(logits: jax.Array, targets: jax.Array) -> jax.Array:
  r"""Summed negative log-likelihood :math:`-\sum_t \log \mathrm{softmax}(z_t)_{x_t}` (Sec. 4.1
  of Stock et al.: :math:`\mathcal L(\theta) = -\sum_{t} \log u_{t, c_t}`).

  Args:
    logits: ``(..., L, V)``.
    targets: ``(..., L)`` integer ids; positions with a negative id (:data:`PAD`) are skipped.

  Returns:
    ``(...)``, the loss of each sequence in nats.
  """
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  picked = jnp.take_along_axis(log_probs, jnp.maximum(targets, 0)[..., None], axis=-1)[..., 0]
  return -jnp.sum(jnp.where(targets >= 0, picked, 0.0), axis=-1)


class LazyNgram(nn.Module):
  r"""The canary-path logits :math:`\theta \in \mathbb R^{T \times D}` of Stock et al., Sec. 4.1.

  Initialised at zero, i.e. the uniform model: every sequence has probability
  :math:`D^{-T} = p_0`. The input only carries the batch shape (one dummy feature per example):
  ``(*batch, 1)`` gives logits ``(*batch, T, D)``, and the canary digits are the targets of
  :func:`sequence_nll`.

  Attributes:
    num_positions: canary length :math:`T`.
    vocab_size: alphabet size :math:`D` (10 digits in the paper).
  """
  num_positions: int = 10
  vocab_size: int = 10

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    logits = self.param("logits", nn.initializers.zeros_init(),
                        (self.num_positions, self.vocab_size), jnp.float32)
    return jnp.broadcast_to(logits, x.shape[:-1] + logits.shape)


class CharNGramLM(nn.Module):
  r"""Neural character n-gram model :math:`f_\theta(x_i \mid x_{i-n+1:i})`.

  Input: context ids ``(*batch, L, context_size)`` (the ``context_size`` previous characters of
  each of ``L`` positions, :data:`CharVocab.bos` before the start of a line). Output: logits
  ``(*batch, L, vocab_size)``. Each context slot has its own one-hot input block, so the first
  layer is a per-slot character embedding and the model is a (smoothed) n-gram model with
  :math:`n` = ``context_size + 1``.

  Attributes:
    vocab_size: number of token ids (:attr:`CharVocab.size`).
    context_size: :math:`n - 1`.
    hidden_size: width of the tanh hidden layer.
  """
  vocab_size: int
  context_size: int = 6
  hidden_size: int = 256

  @nn.compact
  def __call__(self, contexts: jax.Array) -> jax.Array:
    x = jax.nn.one_hot(contexts, self.vocab_size, dtype=jnp.float32)
    x = x.reshape(contexts.shape[:-1] + (self.context_size * self.vocab_size,))
    h = jnp.tanh(nn.Dense(self.hidden_size)(x))
    return nn.Dense(self.vocab_size)(h)


@dataclasses.dataclass(frozen=True)
class CharVocab:
  """Character vocabulary: ids 0, 1, 2 are beginning-of-line, end-of-line and unknown; then one
  id per character of :attr:`chars`.

  Attributes:
    chars: the known characters, in id order (each once).
  """
  chars: str

  bos = 0
  eos = 1
  unk = 2
  num_special = 3

  def __post_init__(self):
    if len(set(self.chars)) != len(self.chars) or not self.chars:
      raise ValueError("chars must be a non-empty string of distinct characters")

  @classmethod
  def from_texts(cls, texts: Sequence[str], extra: str = "0123456789") -> CharVocab:
    """Every character of ``texts`` plus ``extra`` (the digits of canary secrets), sorted."""
    return cls("".join(sorted(set("".join(texts)) | set(extra))))

  @property
  def size(self) -> int:
    return len(self.chars) + self.num_special

  def _lookup(self) -> dict[str, int]:
    return {c: i + self.num_special for i, c in enumerate(self.chars)}

  def encode(self, text: str) -> np.ndarray:
    """Character ids of ``text`` (unknown characters map to :attr:`unk`), no bos/eos."""
    table = self._lookup()
    return np.array([table.get(c, self.unk) for c in text], np.int32)

  def ids(self, chars: str) -> np.ndarray:
    """Ids of the given characters, which must all be known (e.g. the digits)."""
    table = self._lookup()
    missing = [c for c in chars if c not in table]
    if missing:
      raise ValueError(f"characters {missing!r} are not in the vocabulary")
    return np.array([table[c] for c in chars], np.int32)

  def decode(self, ids: Sequence[int]) -> str:
    """Text of ``ids``, stopping at the first eos or padding id; bos is skipped."""
    out = []
    for i in np.asarray(ids).tolist():
      if i == self.eos or i < 0:
        break
      if i >= self.num_special:
        out.append(self.chars[i - self.num_special])
      elif i == self.unk:
        out.append("\ufffd")
    return "".join(out)


def contexts_of(ids: np.ndarray, context_size: int, bos: int = CharVocab.bos) -> np.ndarray:
  """The ``context_size`` ids before each position of ``ids`` ``(..., L)``, bos-padded on the
  left: ``(..., L, context_size)``, most recent last."""
  ids = np.asarray(ids)
  padded = np.concatenate(
      [np.full(ids.shape[:-1] + (context_size,), bos, ids.dtype), ids], axis=-1)
  length = ids.shape[-1]
  return np.stack([padded[..., j:j + length] for j in range(context_size)], axis=-1)


def line_examples(vocab: CharVocab, lines: Sequence[str], context_size: int, max_length: int
                  ) -> tuple[np.ndarray, np.ndarray]:
  """One training example per line: ``contexts`` ``(N, max_length, context_size)`` and
  ``targets`` ``(N, max_length)`` (the line's ids, then eos, then :data:`PAD`).

  Raises:
    ValueError: if a line (plus its eos) is longer than ``max_length``.
  """
  _validate.check_range("context_size", context_size, 1)
  _validate.check_range("max_length", max_length, 1)
  targets = np.full((len(lines), max_length), PAD, np.int32)
  for row, line in enumerate(lines):
    ids = vocab.encode(line)
    if len(ids) + 1 > max_length:
      raise ValueError(f"line {row} has {len(ids)} characters; max_length={max_length} leaves "
                       f"room for at most {max_length - 1}")
    targets[row, :len(ids)] = ids
    targets[row, len(ids)] = vocab.eos
  history = np.where(targets >= 0, targets, vocab.eos)  # padding is never a target's context
  return contexts_of(history, context_size, vocab.bos), targets
