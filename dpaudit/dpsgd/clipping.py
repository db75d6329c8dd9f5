"""Per-example gradient clipping for DP-SGD, by ``vmap`` or by ghost norms.

DP-SGD (Abadi et al., 2016; Eq. 2 of the UniAud paper; Sec. 2.2 of Stock et al.) replaces the
minibatch gradient by the sum of per-example gradients clipped to norm ``C = l2_clip_norm``:

.. math::

   \\bar g = \\sum_{i \\in B} g_i \\min\\left(1, \\frac{C}{\\lVert g_i \\rVert_2}\\right),
   \\qquad g_i = \\nabla_\\theta \\ell(\\theta; x_i, y_i).

Two strategies compute :math:`\\bar g` behind one interface, :func:`clipped_grad_sum`:

* ``"vmap"``: ``vmap`` of ``grad`` over single examples, then norms, weights and a weighted sum.
  Works for any model, but materialises a full gradient per example (B copies of the model).
* ``"ghost"``: per-example norms from each layer's inputs :math:`a_i` and output gradients
  :math:`b_i = \\partial \\ell_i / \\partial s_i` (Goodfellow, 2015; Li et al., 2022; Bu et al.,
  2023). For a dense layer applied once per example,
  :math:`\\lVert \\nabla W_i \\rVert_F^2 = \\lVert a_i \\rVert^2 \\lVert b_i \\rVert^2`; for a layer
  applied at T positions (a convolution, via its input patches, or a dense layer on a sequence)
  :math:`\\nabla W_i = \\sum_t a_{it} b_{it}^\\top` and either the Gram identity
  :math:`\\lVert \\nabla W_i \\rVert_F^2 = \\sum_{t,s} (a_{it}^\\top a_{is})(b_{it}^\\top b_{is})`
  or the layer's own per-example gradient is used, whichever costs fewer operations (only one
  layer's per-example gradient exists at a time, never the model's). Layers with few parameters
  (normalisation scales and offsets) get their per-example gradients by a per-layer ``vmap``.
  The clipped sum then comes from each layer's vector-Jacobian product with the output
  gradients reweighted by :math:`\\min(1, C / \\lVert g_i \\rVert)` ("book-keeping", Bu et al.,
  2023), or, where a convolution's per-example kernel gradient was formed for its norm, from
  reweighting that directly; the whole step costs about one forward and one backward pass,
  like non-private training.

``"auto"`` uses ghost clipping whenever every parameter belongs to a supported layer (flax
``Dense``, ``Conv``, ``GroupNorm``, ``LayerNorm``, ``Embed``-free models) called once per
forward pass, and ``vmap`` otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from dpaudit import _validate

PyTree = Any
LossFn = Callable[[jax.Array, jax.Array], jax.Array]
STRATEGIES = ("auto", "ghost", "vmap")
CONV_NORMS = ("auto", "gram", "per_layer")
_DENSE_LIKE = (nn.Dense, nn.Conv)
_SMALL_LAYERS = (nn.GroupNorm, nn.LayerNorm)


class ClippedGradients(NamedTuple):
  """Output of :func:`clipped_grad_sum`.

  Attributes:
    grad_sum: sum over unmasked examples of the clipped per-example gradients (params tree).
    losses: per-example losses, shape ``[B]`` (0 where masked).
    grad_norms: per-example gradient L2 norms before clipping, shape ``[B]`` (0 where masked).
  """
  grad_sum: PyTree
  losses: jax.Array
  grad_norms: jax.Array


class GhostUnsupportedError(ValueError):
  """The model has parameters outside the layers ghost clipping supports."""


def softmax_cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """Per-example cross-entropy of integer labels (the default DP-SGD loss)."""
  return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


def _clip_weights(sq_norms: jax.Array, l2_clip_norm: float, mask: jax.Array) -> jax.Array:
  norms = jnp.sqrt(sq_norms)
  scale = jnp.where(norms > l2_clip_norm, l2_clip_norm / jnp.where(norms > 0, norms, 1), 1.0)
  return scale * mask


def _validate_args(inputs, labels, mask, l2_clip_norm, strategy):
  _validate.check_range("l2_clip_norm", l2_clip_norm, 0.0, low_open=True)
  _validate.check_choice("strategy", strategy, STRATEGIES)
  if inputs.shape[0] != labels.shape[0] or mask.shape != (inputs.shape[0],):
    raise ValueError(f"inputs (batch {inputs.shape[0]}), labels (shape {labels.shape}) and mask "
                     f"(shape {mask.shape}) must share one batch axis")


# ------------------------------------------------------------------------------- vmap strategy


def _vmap_clipped_grad_sum(model, params, inputs, labels, mask, l2_clip_norm, loss_fn):
  def single_loss(p, x, y):
    return loss_fn(model.apply({"params": p}, x), y)

  losses, grads = jax.vmap(jax.value_and_grad(single_loss), in_axes=(None, 0, 0))(
      params, inputs, labels)
  sq_norms = sum(jnp.sum(g.reshape(g.shape[0], -1)**2, axis=1) for g in jax.tree.leaves(grads))
  weights = _clip_weights(sq_norms, l2_clip_norm, mask)
  grad_sum = jax.tree.map(lambda g: jnp.tensordot(weights.astype(g.dtype), g, axes=1), grads)
  return ClippedGradients(grad_sum, losses * mask, jnp.sqrt(sq_norms) * mask)


# ------------------------------------------------------------------------------ ghost strategy


class _Layer(NamedTuple):
  path: tuple[str, ...]
  module: nn.Module  # unbound clone: module.apply({"params": p}, x)


def _is_tapped(context) -> bool:
  return (context.method_name == "__call__"
          and isinstance(context.module, _DENSE_LIKE + _SMALL_LAYERS))


def _tapped_forward(model, params, inputs, perturbations, taps, layers=None):
  """Forward pass adding ``perturbations[path]`` to each tapped layer's output.

  Records each tapped layer's input in ``taps`` (and its unbound clone in ``layers``).
  """
  def interceptor(next_fun, args, kwargs, context):
    if not _is_tapped(context):
      return next_fun(*args, **kwargs)
    module = context.module
    path = tuple(module.path)
    if path in taps:
      raise GhostUnsupportedError(f"layer {'/'.join(path)} is called more than once per "
                                  "forward pass; ghost clipping needs one call per layer")
    if args[1:] or kwargs:
      raise GhostUnsupportedError(f"layer {'/'.join(path)} is called with extra arguments")
    taps[path] = args[0]
    if layers is not None:
      layers[path] = _Layer(path, module.clone(parent=None))
    out = next_fun(*args, **kwargs)
    return out if perturbations is None else out + perturbations[path]

  with nn.intercept_methods(interceptor):
    return model.apply({"params": params}, inputs)


def _subtree(params: PyTree, path: tuple[str, ...]) -> PyTree:
  for name in path:
    params = params[name]
  return params


def _discover_layers(model, params, inputs):
  """Shapes of the tapped layers' outputs, and the layers, from an abstract forward pass."""
  layers: dict = {}
  out_shapes: dict = {}

  def forward(p, x):
    taps: dict = {}
    _tapped_forward(model, p, x, None, taps, layers)
    return {path: _layer_apply(layers[path], _subtree(p, path), a) for path, a in taps.items()}

  out_shapes = jax.eval_shape(forward, params, inputs)
  covered = {path + tuple(str(k.key) for k in leaf_path)
             for path in layers
             for leaf_path, _ in jax.tree_util.tree_leaves_with_path(_subtree(params, path))}
  all_leaves = {tuple(str(k.key) for k in leaf_path)
                for leaf_path, _ in jax.tree_util.tree_leaves_with_path(params)}
  missing = sorted(all_leaves - covered)
  if missing:
    raise GhostUnsupportedError(
        f"parameters {['/'.join(m) for m in missing[:3]]} are not in a layer ghost clipping "
        f"supports ({', '.join(t.__name__ for t in _DENSE_LIKE + _SMALL_LAYERS)})")
  return layers, out_shapes


def _layer_apply(layer: _Layer, layer_params: PyTree, x: jax.Array) -> jax.Array:
  return layer.module.apply({"params": layer_params}, x)


def _positions(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Reshapes layer inputs/output gradients to [B, T, d] (T positions per example)."""
  return a.reshape(a.shape[0], -1, a.shape[-1]), b.reshape(b.shape[0], -1, b.shape[-1])


def _outer_sq_norms(a: jax.Array, b: jax.Array, method: str) -> jax.Array:
  """Per-example ||sum_t a_t b_t^T||_F^2 for a [B, T, p], b [B, T, q]."""
  _, t, p = a.shape
  q = b.shape[-1]
  if t == 1:
    return jnp.sum(a[:, 0]**2, axis=-1) * jnp.sum(b[:, 0]**2, axis=-1)
  use_gram = method == "gram" or (method == "auto" and t * t * (p + q) < t * p * q)
  if use_gram:
    gram_a = jnp.einsum("btp,bsp->bts", a, a)
    gram_b = jnp.einsum("btq,bsq->bts", b, b)
    return jnp.sum(gram_a * gram_b, axis=(1, 2))
  per_example = jnp.einsum("btp,btq->bpq", a, b)
  return jnp.sum(per_example**2, axis=(1, 2))


def _conv_geometry(module: nn.Conv, a: jax.Array):
  """(kernel, strides, dilation, explicit pads) of a plain 2-D convolution, or None."""
  padding = module.padding
  if (not isinstance(padding, str) or padding.upper() not in ("SAME", "VALID")
      or module.feature_group_count != 1 or a.ndim != 4 or len(module.kernel_size) != 2
      or module.input_dilation not in (None, 1, (1, 1))):
    return None

  def pair(value):
    value = value or 1
    return (value,) * 2 if isinstance(value, int) else tuple(value)

  kernel, strides, dilation = tuple(module.kernel_size), pair(module.strides), pair(
      module.kernel_dilation)
  dilated = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))
  pads = jax.lax.padtype_to_pads(a.shape[1:3], dilated, strides, padding.upper())
  return kernel, strides, dilation, tuple(pads)


def _conv_grads_by_offsets(a, b, kernel, strides, dilation, pads):
  """Per-example kernel gradients of a convolution, one kernel offset at a time.

  The gradient slice at offset (i, j) is :math:`\\sum_t a_{i,j}(t)\\, b(t)^\\top`, a
  ``[C_in, C_out]`` matrix per example from the input shifted by the offset; no patch tensor is
  formed. Faster than input patches once ``C_in`` is more than a few channels. Returns
  ``[B, kh, kw, C_in, C_out]`` (flax's kernel layout).
  """
  a = jnp.pad(a, ((0, 0),) + tuple(pads) + ((0, 0),))
  out_h, out_w = b.shape[1:3]
  slices = []
  for i in range(kernel[0]):
    for j in range(kernel[1]):
      start = (0, i * dilation[0], j * dilation[1], 0)
      limit = (a.shape[0], start[1] + (out_h - 1) * strides[0] + 1,
               start[2] + (out_w - 1) * strides[1] + 1, a.shape[3])
      shifted = jax.lax.slice(a, start, limit, (1, strides[0], strides[1], 1))
      slices.append(jnp.einsum("bhwc,bhwo->bco", shifted, b))
  return jnp.stack(slices, axis=1).reshape((a.shape[0],) + tuple(kernel) + slices[0].shape[1:])


def _conv_kernel_norms(module: nn.Conv, a, b, conv_norm):
  """(per-example squared norms, per-example kernel gradients or None) of a convolution's
  kernel; None altogether if the convolution is not a plain 2-D one."""
  geometry = _conv_geometry(module, a)
  if geometry is None:
    return None
  kernel, strides, dilation, pads = geometry
  positions = b.shape[1] * b.shape[2]
  patch_dim, out_dim = a.shape[-1] * kernel[0] * kernel[1], b.shape[-1]
  gram_cheaper = positions * (patch_dim + out_dim) < patch_dim * out_dim
  if a.shape[-1] >= 4 and not (conv_norm == "gram" or (conv_norm == "auto" and gram_cheaper)):
    grads = _conv_grads_by_offsets(a, b, kernel, strides, dilation, pads)
    return jnp.sum(grads.reshape(grads.shape[0], -1)**2, axis=1), grads
  patches = jax.lax.conv_general_dilated_patches(
      a, filter_shape=kernel, window_strides=strides, padding=pads, rhs_dilation=dilation,
      dimension_numbers=("NHWC", "HWIO", "NHWC"))
  pa, pb = _positions(patches, b)
  if conv_norm == "gram" or (conv_norm == "auto" and gram_cheaper):
    return _outer_sq_norms(pa, pb, "gram"), None
  # [B, C_out, C_in * kh * kw]; patch features are ordered (C_in, kh, kw).
  grads = jnp.einsum("btq,btp->bqp", pb, pa)
  sq = jnp.sum(grads**2, axis=(1, 2))
  grads = grads.reshape((grads.shape[0], out_dim, a.shape[-1]) + tuple(kernel))
  return sq, jnp.transpose(grads, (0, 3, 4, 2, 1))


def _per_layer_vmap_sq_norms(layer: _Layer, layer_params, a, b) -> jax.Array:
  """Per-example squared norm of one layer's gradient via a per-layer vmap of its VJP."""
  def one(a_i, b_i):
    _, vjp = jax.vjp(lambda p: _layer_apply(layer, p, a_i[None]), layer_params)
    (g,) = vjp(b_i[None])
    return sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(g))
  return jax.vmap(one)(a, b)


# Largest per-example kernel gradient tensor (elements) kept to form the clipped sum directly.
_MAX_KEPT_GRAD_ELEMENTS = 1 << 24


def _layer_norms(layer: _Layer, layer_params, a, b, conv_norm):
  """Per-example squared norm of one layer's gradient, and its per-example gradient when it
  was formed anyway (a convolution's kernel, by offsets or patches) and is small enough to
  reuse for the clipped sum; else None."""
  module = layer.module
  per_example = None
  if isinstance(module, nn.Dense):
    sq = _outer_sq_norms(*_positions(a, b), conv_norm)
  elif isinstance(module, nn.Conv) and (found := _conv_kernel_norms(module, a, b, conv_norm)):
    sq, kernel_grads = found
    if kernel_grads is not None and kernel_grads.size <= _MAX_KEPT_GRAD_ELEMENTS:
      per_example = {"kernel": kernel_grads}
  else:
    return _per_layer_vmap_sq_norms(layer, layer_params, a, b), None
  if module.use_bias:
    bias_grads = jnp.sum(b.reshape(b.shape[0], -1, b.shape[-1]), axis=1)
    sq = sq + jnp.sum(bias_grads**2, axis=-1)
    if per_example is not None:
      per_example["bias"] = bias_grads
  return sq, per_example


def _ghost_clipped_grad_sum(model, params, inputs, labels, mask, l2_clip_norm, loss_fn,
                            conv_norm):
  layers, out_shapes = _discover_layers(model, params, inputs)
  zeros = {path: jnp.zeros(s.shape, s.dtype) for path, s in out_shapes.items()}

  def total_loss(perturbations):
    taps: dict = {}
    logits = _tapped_forward(model, params, inputs, perturbations, taps)
    losses = loss_fn(logits, labels) * mask
    return jnp.sum(losses), (losses, taps)

  (_, (losses, taps)), out_grads = jax.value_and_grad(total_loss, has_aux=True)(zeros)
  norms = {path: _layer_norms(layer, _subtree(params, path), taps[path], out_grads[path],
                              conv_norm) for path, layer in layers.items()}
  sq_norms = sum(sq for sq, _ in norms.values())
  weights = _clip_weights(sq_norms, l2_clip_norm, mask)

  grad_sum: dict = {}
  for path, layer in layers.items():
    per_example = norms[path][1]
    if per_example is not None:  # formed for the norm: reweight it, no second VJP
      g = {name: jnp.tensordot(weights.astype(v.dtype), v, axes=1)
           for name, v in per_example.items()}
    else:
      b = out_grads[path]
      weighted = b * weights.astype(b.dtype).reshape((-1,) + (1,) * (b.ndim - 1))
      _, vjp = jax.vjp(lambda p, layer=layer, a=taps[path]: _layer_apply(layer, p, a),
                       _subtree(params, path))
      (g,) = vjp(weighted)
    node = grad_sum
    for name in path[:-1]:
      node = node.setdefault(name, {})
    node[path[-1]] = g
  grad_sum = jax.tree.map(lambda _, g: g, params, grad_sum)  # same container types as params
  return ClippedGradients(grad_sum, losses, jnp.sqrt(sq_norms) * mask)


def ghost_supported(model: nn.Module, params: PyTree, inputs: jax.Array) -> bool:
  """Whether ghost clipping covers every parameter of ``model`` (checked abstractly)."""
  try:
    _discover_layers(model, params, inputs)
  except GhostUnsupportedError:
    return False
  return True


def clipped_grad_sum(model: nn.Module, params: PyTree, inputs: jax.Array, labels: jax.Array,
                     mask: jax.Array | None = None, *, l2_clip_norm: float,
                     loss_fn: LossFn = softmax_cross_entropy, strategy: str = "auto",
                     conv_norm: str = "auto") -> ClippedGradients:
  """Sum of per-example gradients clipped to ``l2_clip_norm`` (Abadi et al. 2016, Alg. 1).

  Args:
    model: flax module mapping ``inputs`` ``[B, ...]`` to logits ``[B, K]``.
    params: its parameters (the ``"params"`` collection).
    inputs: a batch of examples, ``[B, ...]``.
    labels: their labels, ``[B]`` (whatever ``loss_fn`` takes).
    mask: ``[B]`` weights in {0, 1}; 0 marks padding (static-shape Poisson batches). Default
      all ones.
    l2_clip_norm: clipping bound C > 0 (``inf`` disables clipping).
    loss_fn: per-example loss ``loss_fn(logits [B, K], labels [B]) -> [B]``.
    strategy: "ghost", "vmap" or "auto" (ghost when every parameter is in a supported layer).
    conv_norm: for ghost norms of layers applied at several positions: "gram" (never forms a
      per-example gradient), "per_layer" (forms one layer's per-example gradient, for
      convolutions one kernel offset at a time or from input patches), or "auto" (the cheaper
      of the two in operations).

  Returns:
    ClippedGradients(grad_sum, losses, grad_norms).
  """
  inputs = jnp.asarray(inputs)
  labels = jnp.asarray(labels)
  mask = (jnp.ones(inputs.shape[0], inputs.dtype) if mask is None
          else jnp.asarray(mask).astype(inputs.dtype))
  _validate_args(inputs, labels, mask, l2_clip_norm, strategy)
  _validate.check_choice("conv_norm", conv_norm, CONV_NORMS)
  if strategy == "auto":
    strategy = "ghost" if ghost_supported(model, params, inputs) else "vmap"
  if strategy == "vmap":
    return _vmap_clipped_grad_sum(model, params, inputs, labels, mask, l2_clip_norm, loss_fn)
  return _ghost_clipped_grad_sum(model, params, inputs, labels, mask, l2_clip_norm, loss_fn,
                                 conv_norm)


def resolve_strategy(model: nn.Module, params: PyTree, inputs: jax.Array, strategy: str) -> str:
  """The strategy "auto" resolves to for this model ("ghost" or "vmap")."""
  _validate.check_choice("strategy", strategy, STRATEGIES)
  if strategy != "auto":
    return strategy
  return "ghost" if ghost_supported(model, params, inputs) else "vmap"

