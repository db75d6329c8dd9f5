"""Image and tabular classifiers for DP-SGD, usable on one example or on a batch.

Every model takes inputs of shape ``(*batch, *example_shape)`` where ``batch`` may be empty: a
single example is given a batch axis of one and returned without it, so the same module serves
per-example gradients (``vmap`` over single examples) and batched training. All layers are
standard flax ``Dense``, ``Conv`` and ``GroupNorm`` (no batch statistics, which DP-SGD cannot
use because they mix examples), so the ghost clipping of :mod:`dpaudit.dpsgd.clipping` supports
every model here.

* :class:`MLP`: the 784-512-256-10 network of the DP-SGD benchmark (and any widths).
* :class:`LeNet5`: LeNet-5-style CNN (LeCun et al., 1998) with ReLU and max pooling.
* :class:`WideResNet`: WRN-d-k (Zagoruyko and Komodakis, 2016) with pre-activation blocks and
  group normalisation in place of batch normalisation, the WRN-16-4 that De et al. (2022) use
  for DP-SGD on CIFAR-10 and that the UniAud paper audits.
* :class:`ResNet18`: ResNet-18 (He et al., 2016) for small images, with group normalisation,
  the ResNet-18 DP target of PANORAMIA's Tables 5, 7 and 8 (Kazmi et al., 2024).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from dpaudit import _validate

MODEL_NAMES = ("mlp", "lenet5", "wrn16_4", "logistic", "resnet18")


def _with_batch(x: jax.Array, example_ndim: int) -> tuple[jax.Array, tuple[int, ...]]:
  """Flattens leading batch axes into one (adding it for a single example)."""
  if x.ndim < example_ndim:
    raise ValueError(f"input of shape {x.shape} has fewer than example_ndim={example_ndim} axes")
  batch_shape = x.shape[:x.ndim - example_ndim]
  return x.reshape((-1,) + x.shape[x.ndim - example_ndim:]), batch_shape


class MLP(nn.Module):
  """Fully connected ReLU network; inputs are flattened over their ``example_ndim`` axes.

  Attributes:
    hidden_sizes: widths of the hidden layers (empty: multinomial logistic regression).
    num_classes: number of output logits.
    example_ndim: number of trailing axes forming one example (3 for HWC images, 1 for
      tabular rows).
  """
  hidden_sizes: Sequence[int] = (512, 256)
  num_classes: int = 10
  example_ndim: int = 3

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    x, batch_shape = _with_batch(x, self.example_ndim)
    x = x.reshape((x.shape[0], -1))
    for width in self.hidden_sizes:
      x = nn.relu(nn.Dense(width)(x))
    logits = nn.Dense(self.num_classes)(x)
    return logits.reshape(batch_shape + (self.num_classes,))


class TwoHeadMLP(nn.Module):
  r"""An MLP encoder with two linear heads: the main task and UniAud++'s tag task.

  The multi-task model of Sec. VI-A of Liu & Xiong, UniAud: a shared encoder, the main head
  :math:`f_\theta` (``num_classes`` logits) and the membership-encoding head :math:`f_\phi`
  (``num_tags`` logits), trained with Eq. (12) (:func:`dpaudit.data.multi_task_loss`).
  Returns ``(main_logits, tag_logits)``.

  Attributes:
    hidden_sizes: widths of the shared hidden layers (at least one).
    num_classes: main-task classes.
    num_tags: size of the tag space :math:`C_e`.
    example_ndim: trailing axes forming one example.
  """
  hidden_sizes: Sequence[int] = (256,)
  num_classes: int = 10
  num_tags: int = 100
  example_ndim: int = 3

  @nn.compact
  def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    x, batch_shape = _with_batch(x, self.example_ndim)
    x = x.reshape((x.shape[0], -1))
    for width in self.hidden_sizes:
      x = nn.relu(nn.Dense(width)(x))
    main = nn.Dense(self.num_classes, name="main_head")(x)
    tag = nn.Dense(self.num_tags, name="tag_head")(x)
    return (main.reshape(batch_shape + (self.num_classes,)),
            tag.reshape(batch_shape + (self.num_tags,)))


class LeNet5(nn.Module):
  """LeNet-5-style CNN: conv 6@5x5 (same) - pool - conv 16@5x5 (valid) - pool - 120 - 84 - out.

  On 28x28 inputs this is the classic 400-120-84 head; on smaller inputs (8x8 digits) the
  second convolution uses same padding so that the spatial size stays positive.
  """
  num_classes: int = 10

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    x, batch_shape = _with_batch(x, 3)
    x = nn.relu(nn.Conv(6, (5, 5), padding="SAME")(x))
    x = nn.max_pool(x, (2, 2), strides=(2, 2))
    second_padding = "VALID" if min(x.shape[1:3]) >= 8 else "SAME"
    x = nn.relu(nn.Conv(16, (5, 5), padding=second_padding)(x))
    x = nn.max_pool(x, (2, 2), strides=(2, 2))
    x = x.reshape((x.shape[0], -1))
    x = nn.relu(nn.Dense(120)(x))
    x = nn.relu(nn.Dense(84)(x))
    logits = nn.Dense(self.num_classes)(x)
    return logits.reshape(batch_shape + (self.num_classes,))


class _WideBlock(nn.Module):
  """Pre-activation residual block: GN-ReLU-conv3x3-GN-ReLU-conv3x3 (+ 1x1 projection)."""
  width: int
  stride: int
  num_groups: int

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    h = nn.relu(nn.GroupNorm(num_groups=self.num_groups)(x))
    shortcut = x
    if self.stride != 1 or x.shape[-1] != self.width:
      shortcut = nn.Conv(self.width, (1, 1), strides=self.stride, use_bias=False)(h)
    h = nn.Conv(self.width, (3, 3), strides=self.stride, padding="SAME", use_bias=False)(h)
    h = nn.relu(nn.GroupNorm(num_groups=self.num_groups)(h))
    h = nn.Conv(self.width, (3, 3), padding="SAME", use_bias=False)(h)
    return h + shortcut


class WideResNet(nn.Module):
  """WRN-depth-widen_factor with group normalisation (WRN-16-4 by default).

  ``depth = 6 n + 4``: a 3x3 stem with 16 channels, three stages of ``n`` blocks with
  ``16 k``, ``32 k`` and ``64 k`` channels (strides 1, 2, 2), then GN-ReLU, global average
  pooling and a dense classifier.
  """
  depth: int = 16
  widen_factor: int = 4
  num_classes: int = 10
  num_groups: int = 16

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    if (self.depth - 4) % 6 or self.depth < 10:
      raise ValueError(f"depth={self.depth} must be 6n + 4 with n >= 1 (e.g. 16, 22, 28)")
    blocks = (self.depth - 4) // 6
    x, batch_shape = _with_batch(x, 3)
    x = nn.Conv(16, (3, 3), padding="SAME", use_bias=False)(x)
    for stage, stride in enumerate((1, 2, 2)):
      width = 16 * self.widen_factor * 2**stage
      for block in range(blocks):
        x = _WideBlock(width, stride if block == 0 else 1, self.num_groups)(x)
    x = nn.relu(nn.GroupNorm(num_groups=self.num_groups)(x))
    x = jnp.mean(x, axis=(1, 2))
    logits = nn.Dense(self.num_classes)(x)
    return logits.reshape(batch_shape + (self.num_classes,))


class _BasicBlock(nn.Module):
  """ResNet's basic block: conv3x3-GN-ReLU-conv3x3-GN, plus the shortcut (a 1x1 convolution
  and GN when the stride or the width changes), then ReLU."""
  width: int
  stride: int
  num_groups: int

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    groups = math.gcd(self.num_groups, self.width)
    h = nn.Conv(self.width, (3, 3), strides=self.stride, padding="SAME", use_bias=False)(x)
    h = nn.relu(nn.GroupNorm(num_groups=groups)(h))
    h = nn.Conv(self.width, (3, 3), padding="SAME", use_bias=False)(h)
    h = nn.GroupNorm(num_groups=groups)(h)
    shortcut = x
    if self.stride != 1 or x.shape[-1] != self.width:
      shortcut = nn.Conv(self.width, (1, 1), strides=self.stride, use_bias=False)(x)
      shortcut = nn.GroupNorm(num_groups=groups)(shortcut)
    return nn.relu(h + shortcut)


class ResNet18(nn.Module):
  """ResNet-18 (He, Zhang, Ren and Sun, Deep Residual Learning for Image Recognition, CVPR
  2016) for small images, with group normalisation in place of batch normalisation (DP-SGD's
  per-example gradients cannot use batch statistics).

  The small-image variant: a 3x3 stem convolution (stride 1, no max pooling) with ``width``
  channels and GN-ReLU, four stages of two basic blocks with ``width``, ``2 width``,
  ``4 width`` and ``8 width`` channels (strides 1, 2, 2, 2), global average pooling and a
  dense classifier. With ``width=64`` and 10 classes it has 11,173,962 parameters. GroupNorm
  uses ``gcd(num_groups, channels)`` groups, so a small ``width`` (for tests) also works.
  """
  num_classes: int = 10
  width: int = 64
  num_groups: int = 32

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    x, batch_shape = _with_batch(x, 3)
    x = nn.Conv(self.width, (3, 3), padding="SAME", use_bias=False)(x)
    x = nn.relu(nn.GroupNorm(num_groups=math.gcd(self.num_groups, self.width))(x))
    for stage, stride in enumerate((1, 2, 2, 2)):
      for block in range(2):
        x = _BasicBlock(self.width * 2**stage, stride if block == 0 else 1,
                        self.num_groups)(x)
    x = jnp.mean(x, axis=(1, 2))
    logits = nn.Dense(self.num_classes)(x)
    return logits.reshape(batch_shape + (self.num_classes,))


def make_model(name: str, example_shape: Sequence[int], num_classes: int) -> nn.Module:
  """The model called ``name`` for examples of ``example_shape`` and ``num_classes`` classes.

  Args:
    name: one of ``MODEL_NAMES``: "mlp" (hidden 512, 256), "lenet5", "wrn16_4", "logistic"
      (multinomial logistic regression), "resnet18".
    example_shape: shape of one example, e.g. (28, 28, 1) or (30,).
    num_classes: number of classes, >= 2.
  """
  _validate.check_choice("model", name, MODEL_NAMES)
  _validate.check_range("num_classes", num_classes, 2)
  example_ndim = len(tuple(example_shape))
  if name in ("lenet5", "wrn16_4", "resnet18") and example_ndim != 3:
    raise ValueError(f"model={name!r} needs image examples (H, W, C); got example_shape="
                     f"{tuple(example_shape)}")
  if name == "mlp":
    return MLP((512, 256), num_classes, example_ndim)
  if name == "logistic":
    return MLP((), num_classes, example_ndim)
  if name == "lenet5":
    return LeNet5(num_classes)
  if name == "resnet18":
    return ResNet18(num_classes)
  return WideResNet(16, 4, num_classes)
