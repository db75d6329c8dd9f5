r"""The Gaussian noise of DP-SGD as an optax gradient transformation.

DP-SGD (Abadi et al., "Deep Learning with Differential Privacy", CCS 2016, Alg. 1) replaces
the mini-batch gradient by

.. math::
   \tilde g_t = \frac{1}{L}\Big(\sum_{i \in B_t} \bar g_t(x_i)
     + N(0, \sigma^2 C^2 I)\Big),
   \qquad \bar g_t(x_i) = g_t(x_i)\,\min\Big(1, \frac{C}{\|g_t(x_i)\|_2}\Big),

with clipping norm :math:`C` = ``l2_clip_norm``, noise multiplier :math:`\sigma` =
``noise_multiplier`` and, under Poisson sampling with rate :math:`q` from :math:`N` examples,
the *expected* batch size :math:`L = qN` as the normaliser (dividing by the realised batch size
would make the normaliser itself data-dependent). Eq. (2) of Liu & Xiong (UniAud) writes the
same update as a clipped mean plus :math:`\sigma R_g z`; there :math:`\sigma R_g` is the noise
on the *sum*, the convention used by the accountants in :mod:`dpaudit.accounting.dpsgd`.

:func:`gaussian_noise` adds the :math:`N(0, \sigma^2 C^2 I)` term to the summed clipped
gradients (the updates it receives) and :func:`dp_aggregate` follows it with the division by
:math:`L`; chain either with any optax optimiser::

    tx = optax.chain(dp_aggregate(noise_multiplier, l2_clip_norm, q * n, key), optax.adam(lr))

The PRNG key lives in the transformation's state, so the noise is a deterministic function of
the initial key, differs at every step and in every leaf, and the update is jittable.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpaudit import _validate


class GaussianNoiseState(NamedTuple):
  """State of :func:`gaussian_noise`: the PRNG key for the next step's noise."""
  key: jax.Array


def _check_scalar(name: str, value: Any) -> None:
  if np.ndim(value) != 0:
    raise ValueError(f"{name} must be a scalar, got shape {np.shape(value)}")


def gaussian_noise(noise_multiplier, l2_clip_norm, key: jax.Array
                   ) -> optax.GradientTransformation:
  r"""Adds :math:`N(0, (\sigma C)^2 I)` to every leaf of the updates (Abadi et al. 2016, Alg. 1).

  The updates are the *summed* clipped per-example gradients. At each ``update`` the key in
  the state is split in two: one half becomes the next state's key, the other is split once
  more into one key per leaf, and leaf :math:`j` receives
  ``noise_multiplier * l2_clip_norm * jax.random.normal(key_j, leaf.shape, leaf.dtype)``,
  in the leaf's own floating dtype. With ``noise_multiplier == 0`` (or a zero
  ``l2_clip_norm``, which clips every gradient to zero) the updates pass through unchanged.

  ``noise_multiplier`` and ``l2_clip_norm`` may also be traced scalars (e.g. under ``vmap``
  over a sweep); then they are not validated and the noise is always drawn.

  Args:
    noise_multiplier: :math:`\sigma \ge 0`.
    l2_clip_norm: :math:`C \ge 0`, the per-example L2 clipping norm.
    key: the PRNG key of the first step: a typed key (``jax.random.key``, any
      implementation, e.g. :data:`dpaudit.prng.threefry_unrolled`) or a raw uint32 key.

  Returns:
    An ``optax.GradientTransformation`` with state :class:`GaussianNoiseState`.

  Raises:
    ValueError: for invalid arguments; at ``update`` time, for updates with a non-floating leaf.
  """
  _check_scalar("noise_multiplier", noise_multiplier)
  _check_scalar("l2_clip_norm", l2_clip_norm)
  _validate.check_range("noise_multiplier", noise_multiplier, 0.0, math.inf, high_open=True)
  _validate.check_range("l2_clip_norm", l2_clip_norm, 0.0, math.inf, high_open=True)
  _validate.check_key(key)
  concrete = _validate.is_concrete((noise_multiplier, l2_clip_norm))
  noiseless = concrete and float(noise_multiplier) * float(l2_clip_norm) == 0.0

  def init_fn(params):
    del params
    return GaussianNoiseState(key=key)

  def update_fn(updates, state, params=None):
    del params
    if noiseless:
      return updates, state
    leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(updates)
    for path, leaf in leaves_with_path:
      if not jnp.issubdtype(jnp.result_type(leaf), jnp.floating):
        raise ValueError(f"updates{jax.tree_util.keystr(path)} has dtype "
                         f"{jnp.result_type(leaf)}; gaussian_noise needs floating-point updates")
    next_key, noise_key = jax.random.split(state.key)
    leaf_keys = jax.random.split(noise_key, max(len(leaves_with_path), 1))
    noisy = []
    for leaf_key, (_, leaf) in zip(leaf_keys, leaves_with_path):
      dtype = jnp.result_type(leaf)
      stddev = jnp.asarray(noise_multiplier, dtype) * jnp.asarray(l2_clip_norm, dtype)
      noisy.append(leaf + stddev * jax.random.normal(leaf_key, jnp.shape(leaf), dtype))
    return jax.tree_util.tree_unflatten(treedef, noisy), GaussianNoiseState(key=next_key)

  return optax.GradientTransformation(init_fn, update_fn)


def dp_aggregate(noise_multiplier, l2_clip_norm, expected_batch_size, key: jax.Array
                 ) -> optax.GradientTransformation:
  r"""Noisy mean of clipped gradients: :func:`gaussian_noise`, then division by :math:`L`.

  .. math:: \tilde g = \frac{1}{L}\Big(\sum_{i \in B} \bar g(x_i) + N(0, \sigma^2 C^2 I)\Big)

  (Abadi et al. 2016, Alg. 1) with :math:`L` = ``expected_batch_size``, for Poisson sampling
  the expected batch size :math:`qN` (a fixed, data-independent normaliser; it need not be an
  integer). Equal to ``optax.chain(gaussian_noise(...), optax.scale(1 / expected_batch_size))``.

  Args:
    noise_multiplier: :math:`\sigma \ge 0`.
    l2_clip_norm: :math:`C \ge 0`.
    expected_batch_size: :math:`L > 0`.
    key: the PRNG key of the first step (see :func:`gaussian_noise`).

  Returns:
    An ``optax.GradientTransformation``; its state is the tuple
    ``(GaussianNoiseState, optax.ScaleState)``.
  """
  _check_scalar("expected_batch_size", expected_batch_size)
  _validate.check_range("expected_batch_size", expected_batch_size, 0.0, math.inf,
                        low_open=True, high_open=True)
  noise = gaussian_noise(noise_multiplier, l2_clip_norm, key)
  return optax.chain(noise, optax.scale(1.0 / expected_batch_size))
