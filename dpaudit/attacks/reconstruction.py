r"""The sampling attack on a language model and its exact ("lazy") probabilities: Sec. 3.2 of
Stock et al., "Defending against Reconstruction Attacks with Renyi Differential Privacy".

The attack of Carlini et al. (2021) generates text from the model :math:`f_\theta` with top-k
and/or temperature sampling. Its probability of emitting a sequence :math:`x_1..x_T` is
tractable, so instead of drawing :math:`\sim 1/p` samples to hit a secret one computes
:math:`p` directly (lazy sampling):

.. math::
   \lambda(x_i \mid x_{<i}) = \begin{cases}
     \dfrac{f_\theta(x_i \mid x_{<i})^{1/\beta_i}}
           {\sum_{y \in T_k(x_{<i})} f_\theta(y \mid x_{<i})^{1/\beta_i}}
       & x_i \in T_k(x_{<i}) \\ 0 & \text{otherwise,} \end{cases}
   \qquad \lambda(x_{1..T}) = \prod_i \lambda(x_i \mid x_{<i}),

with :math:`T_k` the k most likely next tokens and :math:`\beta_i` the temperatures. Since
:math:`f^{1/\beta} \propto e^{z/\beta}` for logits :math:`z`, :math:`\lambda` is the softmax of
:math:`z/\beta` over :math:`T_k`. Ties at the k-th largest logit are all kept (so
:math:`|T_k|` may exceed k); :func:`sample_lines` uses the same rule, so its samples follow
:math:`\lambda` exactly. An optional ``allowed`` mask restricts the attack's alphabet before
the top-k (e.g. to the ten digits of a secret number).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate


def _check_sampling(top_k, temperature) -> None:
  _validate.check_integer("top_k", top_k, 0)
  _validate.check_not_boolean("temperature", temperature, "temperatures")
  _validate.check_range("temperature", temperature, 0.0, low_open=True, finite=True)


def _check_allowed(allowed, vocab_size: int) -> None:
  if allowed is not None and np.shape(allowed) != (vocab_size,):
    raise ValueError(f"allowed must be a boolean mask of shape ({vocab_size},) (the vocabulary), "
                     f"got shape {np.shape(allowed)}")


def _check_logits_and_targets(logits, targets) -> None:
  """Logits (..., L, V): real, no NaN or +inf (-inf marks an impossible token); targets
  (..., L): integer ids below V (negative ones are padding)."""
  _validate.check_real_array("logits", logits, nonempty=False, neg_inf=True)
  if np.ndim(logits) < 1:
    raise ValueError(f"logits must have a vocabulary axis, got shape {np.shape(logits)}")
  if np.shape(targets) != np.shape(logits)[:-1]:
    raise ValueError(f"targets has shape {np.shape(targets)} but logits has shape "
                     f"{np.shape(logits)}; targets must have the shape of logits without its "
                     "last (vocabulary) axis")
  dtype = targets.dtype if hasattr(targets, "dtype") else np.asarray(targets).dtype
  if np.dtype(dtype).kind not in "iu":
    raise ValueError(f"targets must hold integer token ids, got dtype {dtype}")
  vocab = np.shape(logits)[-1]
  if _validate.is_concrete(targets) and np.any(np.asarray(targets) >= vocab):
    raise ValueError(f"targets holds token id {int(np.max(np.asarray(targets)))}, outside the "
                     f"valid range (-inf, {vocab - 1}] (the logits' vocabulary of {vocab})")


def _masked_logits(logits: jax.Array, top_k: int, temperature, allowed) -> jax.Array:
  """Logits of :math:`\\lambda` (``-inf`` outside the allowed top-k), before the softmax."""
  z = logits.astype(jnp.float32)
  if allowed is not None:
    z = jnp.where(jnp.asarray(allowed, bool), z, -jnp.inf)
  if top_k:
    kth = jax.lax.top_k(z, min(top_k, z.shape[-1]))[0][..., -1:]
    z = jnp.where(z >= kth, z, -jnp.inf)
  return z / jnp.asarray(temperature, jnp.float32)[..., None]


def lazy_log_probs(logits: jax.Array, targets: jax.Array, *, top_k: int = 0,
                   temperature: Any = 1.0, allowed: Any = None) -> jax.Array:
  r"""Per-position :math:`\log\lambda(x_i \mid x_{<i})` of Sec. 3.2 (Stock et al.).

  Args:
    logits: the model's next-token logits ``(..., L, V)`` along the sequence.
    targets: the tokens ``(..., L)``; negative ids mark padding (log-probability 0 there).
    top_k: keep the k most likely tokens at each position (0: all).
    temperature: :math:`\beta > 0`, a scalar or per position (broadcasts against
      ``targets``).
    allowed: optional boolean ``(V,)`` mask of the tokens the attack may emit.

  Returns:
    ``(..., L)`` log-probabilities, ``-inf`` where a token is outside the allowed top-k.
  """
  _check_sampling(top_k, temperature)
  _check_logits_and_targets(logits, targets)
  _check_allowed(allowed, np.shape(logits)[-1])
  _validate.check_broadcastable("temperature", temperature, np.shape(targets), "targets shape")
  targets = jnp.asarray(targets)
  z = _masked_logits(logits, top_k, jnp.broadcast_to(temperature, targets.shape), allowed)
  log_p = jax.nn.log_softmax(z, axis=-1)
  picked = jnp.take_along_axis(log_p, jnp.maximum(targets, 0)[..., None], axis=-1)[..., 0]
  return jnp.where(targets >= 0, picked, 0.0)


def sequence_log_prob(logits: jax.Array, targets: jax.Array, **kwargs) -> jax.Array:
  r""":math:`\log\lambda(x_1, \dots, x_T)`, the chain rule over :func:`lazy_log_probs`
  (same arguments); ``(...)``."""
  return jnp.sum(lazy_log_probs(logits, targets, **kwargs), axis=-1)


class GeneratedLines(NamedTuple):
  """Output of :func:`sample_lines`.

  Attributes:
    targets: ``(num_samples, max_length)`` token ids, the end token included, then -1.
    log_prob: ``(num_samples,)`` :math:`\\log\\lambda` of each line (of its prefix when it did
      not end within ``max_length``).
    finished: whether the line emitted the end token.
  """
  targets: jax.Array
  log_prob: jax.Array
  finished: jax.Array


def sample_lines(key: jax.Array, next_logits: Callable[[jax.Array], jax.Array],
                 num_samples: int, max_length: int, context_size: int, bos: int, eos: int, *,
                 top_k: int = 0, temperature: float = 1.0, allowed: Any = None
                 ) -> GeneratedLines:
  r"""Ancestral sampling of lines from an n-gram model under the attack's :math:`\lambda`.

  Args:
    key: PRNG key.
    next_logits: maps contexts ``(num_samples, context_size)`` (most recent id last) to
      next-token logits ``(num_samples, V)``.
    num_samples, max_length: how many lines, and at most how many tokens each.
    context_size: :math:`n - 1`; the first contexts are all ``bos``.
    bos, eos: the begin and end token ids.
    top_k, temperature, allowed: as in :func:`lazy_log_probs`.

  Returns:
    :class:`GeneratedLines`; their ``log_prob`` equals :func:`sequence_log_prob` of the
    targets (the test checks it).
  """
  _validate.check_key(key)
  _check_sampling(top_k, temperature)
  _validate.check_integer("num_samples", num_samples, 1)
  _validate.check_integer("max_length", max_length, 1)
  _validate.check_integer("context_size", context_size, 1)
  _validate.check_integer("bos", bos, 0)
  _validate.check_integer("eos", eos, 0)
  # Tokens (num_samples, max_length) and each step's contexts and logits; the vocabulary is not
  # known before next_logits is called, so a step's logits count as a few hundred floats.
  _validate.check_allocation("num_samples", num_samples, 4 * (max_length + context_size + 256),
                             what="line")
  if not callable(next_logits):
    raise ValueError(f"next_logits must be a function of the contexts, got "
                     f"{type(next_logits).__name__}")

  def step(carry, step_key):
    contexts, done, log_prob = carry
    z = _masked_logits(next_logits(contexts), top_k, jnp.asarray(temperature), allowed)
    token = jax.random.categorical(step_key, z, axis=-1).astype(jnp.int32)
    token_log_p = jnp.take_along_axis(jax.nn.log_softmax(z, -1), token[:, None], -1)[:, 0]
    log_prob = log_prob + jnp.where(done, 0.0, token_log_p)
    out = jnp.where(done, -1, token)
    contexts = jnp.concatenate([contexts[:, 1:], token[:, None]], axis=1)
    return (contexts, done | (token == eos), log_prob), out

  init = (jnp.full((num_samples, context_size), bos, jnp.int32),
          jnp.zeros((num_samples,), bool), jnp.zeros((num_samples,), jnp.float32))
  (_, done, log_prob), tokens = jax.lax.scan(step, init, jax.random.split(key, max_length))
  return GeneratedLines(tokens.T, log_prob, done)
