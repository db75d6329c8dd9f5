r"""Canaries for privacy audits: the audit examples whose membership an auditor tests.

Black-box canaries are examples (features and a label) inserted into the training set:

* :func:`in_distribution_canaries`: held-out real examples with their true labels;
* :func:`mislabelled_canaries`: held-out real examples, each with a uniformly random *wrong*
  label;
* :func:`poisoned_canaries`: the "Poisoned" baseline of UniAud: held-out real examples with
  their true labels, plus a disjoint held-out auxiliary set on which the auditor warms up the
  model's initialisation (the privacy-backdoor baseline of its Sec. VIII-A);
* :func:`synthetic_canaries`: Alg. 1 ("Synthetic Data Generation") of Liu & Xiong, UniAud:
  random features (i.i.d. Gaussian or orthogonal directions) with labels drawn uniformly and
  independently of the features;
* :func:`uniaud_plus_plus_dataset`: Alg. 3 ("Multi-Task Dataset Construction for UniAud++")
  of the same paper: a trigger patch stamped onto real images and a tag target for a second
  head, with the multi-bit tags of its Sec. VI-B; :func:`multi_task_loss` is its Eq. (12).

White-box: :func:`dirac_gradient_canary` is a gradient that the auditor adds to the clipped
gradient sum directly. :func:`include_mask` draws which canaries are "in" for the one-run game
of Steinke, Nasr & Jagielski (2023), restated as Thm. 2 of UniAud.

Every sampler takes a PRNG key first and is a pure function: under ``jax.jit`` the sizes
(``m``, ``num_classes``, ``example_shape``, ``mode``, ...) must be static, and value checks
only run on concrete inputs (:mod:`dpaudit._validate`). Features are float32 and labels
int32 whatever the x64 setting.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate

SYNTHETIC_MODES = ("gaussian", "orthogonal")


@dataclasses.dataclass(frozen=True)
class Canaries:
  """A set of ``m`` canary examples.

  A pytree (``kind`` is static metadata), so samplers returning it can be jitted.

  Attributes:
    features: float32 array ``[m, *example_shape]``.
    labels: int32 array ``[m]``.
    kind: ``"in_distribution"``, ``"mislabelled"``, ``"poisoned"``, ``"gaussian"`` or
      ``"orthogonal"``.
    source_indices: int32 array ``[m]`` of the pool rows the canaries were drawn from, or
      ``None`` for synthetic canaries.
  """
  features: jax.Array
  labels: jax.Array
  kind: str
  source_indices: jax.Array | None = None

  def __len__(self) -> int:
    return int(self.labels.shape[0])


jax.tree_util.register_dataclass(Canaries, data_fields=["features", "labels", "source_indices"],
                                 meta_fields=["kind"])


# ---------------------------------------------------------------- validation helpers


def _check_pool(features: Any, labels: Any, m: int) -> tuple[jax.Array, jax.Array, int]:
  features = jnp.asarray(features)
  labels = jnp.asarray(labels)
  if features.ndim < 1:
    raise ValueError(f"features must have a leading example axis, got shape {features.shape}")
  n = features.shape[0]
  if labels.shape != (n,):
    raise ValueError(f"labels has shape {labels.shape} but features has {n} examples; labels "
                     f"must have shape ({n},)")
  if not jnp.issubdtype(labels.dtype, jnp.integer):
    raise ValueError(f"labels must be integers, got dtype {labels.dtype}")
  m = _validate.check_integer("m", m, 1)
  if m > n:
    raise ValueError(f"m={m} is outside the valid range [1, {n}]: canaries are drawn without "
                     f"replacement from a pool of {n} examples")
  return features, labels, m


def _draw_rows(key: jax.Array, n: int, m: int) -> jax.Array:
  """``m`` distinct indices of ``range(n)``, uniformly without replacement."""
  return jax.random.choice(key, n, (m,), replace=False).astype(jnp.int32)


# ---------------------------------------------------------------- black-box canaries

def in_distribution_canaries(key: jax.Array, features: Any, labels: Any, m: int) -> Canaries:
  """``m`` real examples drawn uniformly without replacement from a pool, true labels kept.

  The "In-Distribution" baseline canary of UniAud (Liu & Xiong, Sec. VIII): the pool is
  typically held-out real data, so that a canary that is left out is a fresh sample of the
  data distribution.

  Args:
    key: PRNG key.
    features: array ``[n, ...]`` (NumPy or JAX), the pool.
    labels: integer array ``[n]``.
    m: number of canaries, ``1 <= m <= n``.

  Returns:
    :class:`Canaries` of kind ``"in_distribution"`` with ``source_indices`` the pool rows.
  """
  _validate.check_key(key)
  features, labels, m = _check_pool(features, labels, m)
  idx = _draw_rows(key, features.shape[0], m)
  return Canaries(features[idx].astype(jnp.float32), labels[idx].astype(jnp.int32),
                  "in_distribution", idx)


def mislabelled_canaries(key: jax.Array, features: Any, labels: Any, m: int,
                         num_classes: int) -> Canaries:
  """In-distribution canaries whose labels are replaced by a uniformly random other class.

  The "Mislabeled" baseline of UniAud (Liu & Xiong, Sec. VIII; also Nasr et al. 2023): each
  drawn example keeps its features and receives :math:`y' = (y + k) \\bmod C` with
  :math:`k \\sim \\mathrm{Uniform}\\{1, \\dots, C - 1\\}`, i.e. a label uniform over the
  :math:`C - 1` classes other than its own.

  Args:
    key: PRNG key.
    features: array ``[n, ...]``, the pool.
    labels: integer array ``[n]`` with values in ``[0, num_classes)``.
    m: number of canaries, ``1 <= m <= n``.
    num_classes: :math:`C \\ge 2`.

  Returns:
    :class:`Canaries` of kind ``"mislabelled"``; ``source_indices`` are the pool rows.
  """
  _validate.check_key(key)
  num_classes = _validate.check_integer("num_classes", num_classes, 2)
  features, labels, m = _check_pool(features, labels, m)
  _validate.check_range("labels", labels, 0, num_classes - 1)
  draw_key, label_key = jax.random.split(key)
  idx = _draw_rows(draw_key, features.shape[0], m)
  shift = jax.random.randint(label_key, (m,), 1, num_classes)
  new_labels = (labels[idx].astype(jnp.int32) + shift) % num_classes
  return Canaries(features[idx].astype(jnp.float32), new_labels.astype(jnp.int32),
                  "mislabelled", idx)


class PoisonedCanaries(NamedTuple):
  """The output of :func:`poisoned_canaries`: canaries and the auditor's warm-up set.

  Attributes:
    canaries: :class:`Canaries` of kind ``"poisoned"``: ``m`` pool rows with their true labels,
      ``source_indices`` the rows.
    warmup_features: float32 ``[w, ...]``, the auxiliary rows the initialisation is trained on.
    warmup_labels: int32 ``[w]``, their true labels.
    warmup_indices: int32 ``[w]``, their pool rows, none of them a canary's.
  """
  canaries: Canaries
  warmup_features: jax.Array
  warmup_labels: jax.Array
  warmup_indices: jax.Array


def poisoned_canaries(key: jax.Array, features: Any, labels: Any, m: int,
                      num_warmup: int = 0) -> PoisonedCanaries:
  r"""The "Poisoned" baseline of UniAud: real canaries audited from a crafted initialisation.

  Liu & Xiong, UniAud, Sec. VIII-A (baseline 3; Table II, "Poisoned Model"; Sec. IV and the
  caption of Fig. 1), adapted from the privacy backdoors of Liu et al. (Precurious, CCS 2024)
  and Wen et al. (2024): the auditor crafts the *model initialisation* "by warming up the model
  on an in-distribution auxiliary subset" (5,000 examples, 50 epochs in Fig. 1), then audits
  real in-distribution canaries of the DP-SGD run that starts there. What is poisoned is the
  initialisation, not the canaries: each canary is a pool row with its true label, as for
  :func:`in_distribution_canaries`. This function draws both sets at once, disjoint, so that no
  canary is seen by the warm-up (which would make "out" canaries look like members):
  ``m + w`` distinct pool rows uniformly without replacement, the first ``m`` the canaries and
  the next ``w`` the warm-up set. Training the initialisation is the audit's
  (:func:`dpaudit.audits.dpsgd.poisoned_initialisation`).

  Args:
    key: PRNG key.
    features: array ``[n, ...]`` (NumPy or JAX), the held-out pool.
    labels: integer array ``[n]``.
    m: number of canaries, ``1 <= m < n``.
    num_warmup: ``w``, warm-up examples, ``0 <= w <= n - m``; 0 (default): every pool row that
      is not a canary (``w = n - m``).

  Returns:
    :class:`PoisonedCanaries`.

  >>> import numpy as np
  >>> x, y = np.arange(20.0).reshape(10, 2), np.arange(10) % 3
  >>> drawn = poisoned_canaries(jax.random.key(0), x, y, 4, num_warmup=5)
  >>> drawn.canaries.kind, drawn.canaries.features.shape, drawn.warmup_features.shape
  ('poisoned', (4, 2), (5, 2))
  >>> set(drawn.canaries.source_indices.tolist()) & set(drawn.warmup_indices.tolist())
  set()
  """
  _validate.check_key(key)
  features, labels, m = _check_pool(features, labels, m)
  n = features.shape[0]
  if m >= n:
    raise ValueError(f"m={m} is outside the valid range [1, {n - 1}]: the pool of {n} examples "
                     "must keep at least one row for the warm-up set")
  num_warmup = _validate.check_integer("num_warmup", num_warmup, 0)
  if num_warmup > n - m:
    raise ValueError(f"num_warmup={num_warmup} is outside the valid range [0, {n - m}]: the "
                     f"pool of {n} examples holds {n - m} rows besides the m={m} canaries")
  w = num_warmup or n - m
  idx = _draw_rows(key, n, m + w)
  canary_rows, warmup_rows = idx[:m], idx[m:]
  canaries = Canaries(features[canary_rows].astype(jnp.float32),
                      labels[canary_rows].astype(jnp.int32), "poisoned", canary_rows)
  return PoisonedCanaries(canaries, features[warmup_rows].astype(jnp.float32),
                          labels[warmup_rows].astype(jnp.int32), warmup_rows)


def _check_shape(example_shape: Any) -> tuple[int, ...]:
  if isinstance(example_shape, (int, np.integer)):
    example_shape = (example_shape,)
  try:
    shape = tuple(example_shape)
  except TypeError:
    raise ValueError(f"example_shape={example_shape!r} must be a tuple of integers >= 1"
                     ) from None
  if not shape or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1
                      for s in shape):
    raise ValueError(f"example_shape={example_shape!r} must be a non-empty tuple of integers "
                     ">= 1")
  return tuple(int(s) for s in shape)


def orthogonal_cosine_bound(m: int, d: int, failure_probability: float = 1e-3) -> float:
  r"""A bound on the pairwise |cosines| of orthogonal-mode synthetic canaries when ``m > d``.

  Then the rows are independent and uniform on the unit sphere :math:`S^{d-1}` (see
  :func:`synthetic_canaries`), and for one pair
  :math:`\Pr[|\langle x_i, x_j\rangle| \ge t] \le 2 e^{-d t^2 / 2}`; a union bound over the
  :math:`m(m-1)/2` pairs gives, with probability at least ``1 - failure_probability``,

  .. math:: \max_{i \ne j} |\cos(x_i, x_j)| \le \sqrt{\frac{2}{d}
     \log\frac{m(m-1)}{\text{failure\_probability}}}.

  For ``m <= d`` the rows are exactly orthonormal and the bound is 0.

  Args:
    m: number of canaries >= 1.
    d: feature dimension >= 1.
    failure_probability: in (0, 1).

  Returns:
    The bound as a Python float (may exceed 1, then it is vacuous).
  """
  m = _validate.check_integer("m", m, 1)
  d = _validate.check_integer("d", d, 1)
  _validate.check_range("failure_probability", failure_probability, 0.0, 1.0, low_open=True,
                        high_open=True)
  if m <= d:
    return 0.0
  return math.sqrt(2.0 / d * math.log(m * (m - 1) / failure_probability))


def synthetic_canaries(key: jax.Array, m: int, example_shape: int | Sequence[int],
                       num_classes: int, mode: str = "gaussian", sigma0: float = 0.1
                       ) -> Canaries:
  r"""Synthetic canaries of Alg. 1 of Liu & Xiong, UniAud ("Synthetic Data Generation").

  Features and labels are drawn independently (the label independency of UniAud's
  Property 1): :math:`y_i \sim \mathrm{Uniform}([C])` and, with
  :math:`d = \prod` ``example_shape``,

  * ``mode="gaussian"`` (Alg. 1, line 11): :math:`x_i \sim N(0, \sigma_0^2 I_d)` i.i.d.
  * ``mode="orthogonal"`` (Alg. 1, lines 4-9): a Haar-random orthogonal
    :math:`Q \in \mathbb{R}^{d \times d}` from the QR decomposition of a standard Gaussian
    matrix (signs fixed so that :math:`\mathrm{diag}(R) > 0`, which makes :math:`Q` exactly
    Haar), then unit-norm coefficients :math:`u_i` and :math:`x_i = Q u_i`. When
    :math:`m \le d` the coefficients are the first :math:`m` standard basis vectors, so the
    canaries are :math:`m` columns of :math:`Q`: exactly orthonormal. When :math:`m > d`
    exact orthogonality is impossible and, as in Alg. 1, :math:`u_i` are normalised standard
    Gaussian rows; then the :math:`x_i` are i.i.d. uniform on the unit sphere and only
    approximately orthogonal, with pairwise cosines of order :math:`1/\sqrt{d}`
    (:func:`orthogonal_cosine_bound`). Every row has unit L2 norm; ``sigma0`` is not used.

  Ambiguities in the paper, resolved here: Alg. 1 line 11 reads
  :math:`N(0, \sigma_0^2)^{n \times d} \cdot \sigma_0`, which taken literally has standard
  deviation :math:`\sigma_0^2`; we use :math:`\sigma_0` (the "sample-noise scalar" of its
  input line and of Sec. IV-C, where :math:`\sigma_0 = 0.1`, our default). Lines 7-9 draw
  Gaussian coefficients for every :math:`m`, which gives no orthogonality even for
  :math:`m \le d`; we use basis coefficients there so the "orthogonal" mode is orthogonal
  whenever that is possible (the text only promises approximate orthogonality for
  :math:`m > d`).

  Args:
    key: PRNG key.
    m: number of canaries >= 1.
    example_shape: shape of one example (e.g. ``(28, 28, 1)`` or ``1000``).
    num_classes: :math:`C \ge 2`.
    mode: ``"gaussian"`` or ``"orthogonal"``.
    sigma0: :math:`\sigma_0 > 0`, the feature standard deviation in Gaussian mode.

  Returns:
    :class:`Canaries` of kind ``mode`` with features ``[m, *example_shape]``.
  """
  _validate.check_key(key)
  m = _validate.check_integer("m", m, 1)
  shape = _check_shape(example_shape)
  num_classes = _validate.check_integer("num_classes", num_classes, 2)
  _validate.check_choice("mode", mode, SYNTHETIC_MODES)
  if np.ndim(sigma0) != 0:
    raise ValueError(f"sigma0 must be a scalar, got shape {np.shape(sigma0)}")
  _validate.check_range("sigma0", sigma0, 0.0, math.inf, low_open=True, high_open=True)
  d = math.prod(shape)
  feature_key, label_key = jax.random.split(key)
  if mode == "gaussian":
    x = jnp.asarray(sigma0, jnp.float32) * jax.random.normal(feature_key, (m, d), jnp.float32)
  else:
    q_key, u_key = jax.random.split(feature_key)
    g = jax.random.normal(q_key, (d, d), jnp.float32)
    q, r = jnp.linalg.qr(g)
    q = q * jnp.where(jnp.diagonal(r) < 0, -1.0, 1.0).astype(jnp.float32)[None, :]
    if m <= d:
      x = q[:, :m].T
    else:
      u = jax.random.normal(u_key, (m, d), jnp.float32)
      u = u / jnp.linalg.norm(u, axis=1, keepdims=True)
      x = u @ q.T
  y = jax.random.randint(label_key, (m,), 0, num_classes, jnp.int32)
  return Canaries(x.reshape((m,) + shape).astype(jnp.float32), y, mode)


# ---------------------------------------------------------------- UniAud++ (Alg. 3)

class MultiTaskDataset(NamedTuple):
  """The output of :func:`uniaud_plus_plus_dataset` (Alg. 3 of UniAud).

  ``D_multi`` is ``(features, labels, tags, is_canary)``; ``D_audit`` is
  ``(features[audit_indices], labels[audit_indices], tags[audit_indices])`` and ``D_comp``
  the same with ``comparison_tags``.

  Attributes:
    features: float32 ``[n, height, width, channels]``, canary rows carrying their trigger.
    labels: int32 ``[n]``, the main-task labels (unchanged, also for canaries).
    tags: int32 ``[n, num_tag_bits]``: for canaries, ``num_tag_bits`` distinct tags in
      ``[0, num_tags)`` sorted ascending; ``-1`` (the paper's ``None``) for other rows.
    is_canary: bool ``[n]``, the paper's :math:`S_i = 1`.
    audit_indices: int32 ``[m]``, the canary rows in increasing order.
    comparison_tags: int32 ``[m, num_tag_bits]``, the fresh tags :math:`e'_i` of ``D_comp``.
    trigger_colours: float32 ``[m, channels]``, the colour of each canary's patch.
  """
  features: jax.Array
  labels: jax.Array
  tags: jax.Array
  is_canary: jax.Array
  audit_indices: jax.Array
  comparison_tags: jax.Array
  trigger_colours: jax.Array


def _random_tag_sets(key: jax.Array, m: int, num_tags: int, num_tag_bits: int) -> jax.Array:
  """``m`` independent uniform ``num_tag_bits``-subsets of ``[num_tags]``, sorted per row."""
  scores = jax.random.uniform(key, (m, num_tags))
  subset = jnp.argsort(scores, axis=1)[:, :num_tag_bits]
  return jnp.sort(subset, axis=1).astype(jnp.int32)


def uniaud_plus_plus_dataset(key: jax.Array, features: Any, labels: Any, m: int,
                             num_tags: int, *, num_tag_bits: int = 1,
                             patch_size: tuple[int, int] = (10, 10),
                             patch_origin: tuple[int, int] = (0, 0),
                             colour_range: tuple[float, float] = (0.0, 1.0)
                             ) -> MultiTaskDataset:
  r"""The multi-task training set of UniAud++: Alg. 3 of Liu & Xiong, UniAud.

  Draws ``m`` audit rows :math:`\mathcal{I}_{\text{audit}} \subset [n]` uniformly without
  replacement (line 3). For each audit row (lines 7-11) it draws a trigger :math:`g_i` and a
  tag :math:`e_i`, a fresh comparison tag :math:`e'_i` from the same distribution,
  applies the trigger :math:`x_i \leftarrow x_i \circ g_i` and sets :math:`S_i = 1`; the other
  rows keep their image, get no tag and :math:`S_i = 0` (line 13). Labels :math:`y_i` are never
  changed, so the main task keeps all :math:`n` examples.

  The trigger generator :math:`\mathcal{G}` follows the image experiments of Sec. VIII: a
  ``patch_size`` patch of a single random colour (one pixel repeated), each channel uniform in
  ``colour_range``, overwriting the image at ``patch_origin`` (top-left corner; images are
  channels-last ``[n, height, width, channels]``). The paper does not pin down how the random
  pixel is drawn nor where the patch goes; these are our choices.

  Tags (Sec. VI-B, multi-bit membership encoding): with ``num_tag_bits`` :math:`H = 1` a tag is
  one class of :math:`\mathcal{E} = \mathrm{Uniform}([C_e])`, :math:`C_e` = ``num_tags``
  (Alg. 3, line 1). With :math:`H > 1` each canary is encoded by a uniformly random set of
  :math:`H` distinct tags, so :math:`\binom{C_e}{H}` codes are available (largest at
  :math:`H = \lfloor C_e / 2 \rfloor`) with the same :math:`C_e`-way tag head; the birthday
  bound of Sec. VI-B asks for :math:`m \ll \sqrt{2 \binom{C_e}{H}}`. As in Alg. 3 line 8 the
  comparison tag :math:`e'_i` is independent of :math:`e_i` and may coincide with it.

  Training minimises Eq. (12):

  .. math:: \mathcal{L} = \mathrm{CE}(f_\theta(x_i), y_i)
     + \lambda\, \mathrm{CE}(f_\phi(x_i), e_i)\, \mathbb{I}(S_i = 1),

  a main head :math:`f_\theta` trained on every row and a linear tag head :math:`f_\phi` on the
  shared encoder trained only on canaries, weighted by :math:`\lambda`
  (:func:`multi_task_loss`). The audit (Alg. 2 with :math:`\mathcal{G} \times \mathcal{E}` in
  place of :math:`\mathcal{X} \times \mathcal{Y}`) scores each canary by the tag-head loss
  difference between ``D_comp`` and ``D_audit``.

  Args:
    key: PRNG key.
    features: images ``[n, height, width, channels]`` (NumPy or JAX).
    labels: integer array ``[n]``.
    m: number of audit samples, ``1 <= m <= n``.
    num_tags: :math:`C_e \ge 2`, the size of the tag space (Sec. VIII uses 100).
    num_tag_bits: :math:`H`, tags per canary, ``1 <= H < num_tags``.
    patch_size: ``(patch_height, patch_width)``, at least 1 each.
    patch_origin: ``(row, column)`` of the patch's top-left pixel; the patch must fit.
    colour_range: ``(low, high)`` with ``low < high``, the range of each channel's colour.

  Returns:
    A :class:`MultiTaskDataset`.
  """
  _validate.check_key(key)
  features, labels, m = _check_pool(features, labels, m)
  if features.ndim != 4:
    raise ValueError(f"features must be images [n, height, width, channels], got shape "
                     f"{features.shape}")
  num_tags = _validate.check_integer("num_tags", num_tags, 2)
  num_tag_bits = _validate.check_integer("num_tag_bits", num_tag_bits, 1)
  if num_tag_bits >= num_tags:
    raise ValueError(f"num_tag_bits={num_tag_bits} is outside the valid range "
                     f"[1, {num_tags - 1}] for num_tags={num_tags}")
  n, height, width, channels = features.shape
  ph, pw = (_validate.check_integer("patch_size", s, 1) for s in patch_size)
  r0, c0 = (_validate.check_integer("patch_origin", s, 0) for s in patch_origin)
  if r0 + ph > height or c0 + pw > width:
    raise ValueError(f"a patch of size {(ph, pw)} at patch_origin={(r0, c0)} does not fit in "
                     f"images of size {(height, width)}")
  low, high = (float(v) for v in colour_range)
  if not low < high:
    raise ValueError(f"colour_range={colour_range!r} must satisfy low < high")

  index_key, colour_key, tag_key, comp_key = jax.random.split(key, 4)
  idx = jnp.sort(_draw_rows(index_key, n, m))
  colours = jax.random.uniform(colour_key, (m, channels), jnp.float32, low, high)
  tags = _random_tag_sets(tag_key, m, num_tags, num_tag_bits)
  comp_tags = _random_tag_sets(comp_key, m, num_tags, num_tag_bits)
  x = features.astype(jnp.float32)
  patched = x[idx].at[:, r0:r0 + ph, c0:c0 + pw, :].set(colours[:, None, None, :])
  x = x.at[idx].set(patched)
  all_tags = jnp.full((n, num_tag_bits), -1, jnp.int32).at[idx].set(tags)
  is_canary = jnp.zeros((n,), bool).at[idx].set(True)
  return MultiTaskDataset(x, labels.astype(jnp.int32), all_tags, is_canary, idx, comp_tags,
                          colours)


def multi_task_loss(logits_main: jax.Array, logits_tag: jax.Array, labels: jax.Array,
                    tags: jax.Array, is_canary: jax.Array, weight: float) -> jax.Array:
  r"""Per-example loss of Eq. (12) of Liu & Xiong, UniAud (UniAud++ training objective).

  .. math:: \ell_i = \mathrm{CE}(f_\theta(x_i), y_i)
     + \lambda\, \mathbb{I}(S_i = 1)\, \frac{1}{H} \sum_{h=1}^{H} \mathrm{CE}(f_\phi(x_i), e_{i,h})

  For :math:`H = 1` this is Eq. (12) exactly. For multi-bit tags (Sec. VI-B, :math:`H > 1`)
  the paper gives no loss; we use the cross entropy against the uniform distribution over the
  :math:`H` tags (the mean of the :math:`H` single-tag cross entropies), our choice. Rows with
  ``is_canary`` false contribute only the main term (their tags, ``-1``, are ignored).
  Per-example values are returned so DP-SGD can clip each example's gradient.

  Args:
    logits_main: ``[n, C]`` main-head logits.
    logits_tag: ``[n, C_e]`` tag-head logits.
    labels: int ``[n]``.
    tags: int ``[n]`` or ``[n, H]``.
    is_canary: bool ``[n]``.
    weight: :math:`\lambda \ge 0`.

  Returns:
    float ``[n]``.
  """
  _validate.check_range("weight", weight, 0.0, math.inf, high_open=True)
  tags = jnp.asarray(tags)
  if tags.ndim == 1:
    tags = tags[:, None]
  log_main = jax.nn.log_softmax(logits_main, axis=-1)
  log_tag = jax.nn.log_softmax(logits_tag, axis=-1)
  main = -jnp.take_along_axis(log_main, jnp.asarray(labels)[:, None], axis=-1)[:, 0]
  safe_tags = jnp.where(tags >= 0, tags, 0)
  tag_ce = -jnp.take_along_axis(log_tag, safe_tags, axis=-1).mean(axis=-1)
  return main + weight * jnp.where(jnp.asarray(is_canary), tag_ce, 0.0)


# ---------------------------------------------------------------- white box and the game

def dirac_gradient_canary(params: Any, coordinate: tuple[int, int] | None = None,
                          value: float = 1.0) -> Any:
  r"""A white-box gradient canary: zero everywhere except one coordinate, set to ``value``.

  The Dirac canary of white-box DP-SGD audits (Nasr et al. 2023; Steinke et al. 2023): the
  auditor adds this gradient to the *clipped* per-example gradient sum of every step in which
  the canary is "in" (in a many-run game, every step of the runs where it was included; in the
  one-run game, for each canary drawn in by :func:`include_mask`), before the noise. With
  ``value`` equal to ``l2_clip_norm`` it has the largest norm clipping allows, and because it
  touches one coordinate its contribution is read off that coordinate of the model update; a
  ``value`` of 1 lets the caller scale it.

  Args:
    params: a pytree of arrays (the model parameters), giving the structure, shapes and dtypes.
    coordinate: ``(leaf_index, flat_index)``: the leaf in ``jax.tree_util.tree_leaves`` order
      and the index into that leaf flattened in C order; negative indices count from the end.
      ``None`` (default) is the last element of the last leaf.
    value: the value of the nonzero coordinate.

  Returns:
    A pytree with the structure of ``params``; floating leaves keep their dtype, others become
    float32.
  """
  leaves, treedef = jax.tree_util.tree_flatten(params)
  if not leaves:
    raise ValueError("params has no array leaves; need at least one")
  if np.ndim(value) != 0:
    raise ValueError(f"value must be a scalar, got shape {np.shape(value)}")
  leaf_index, flat_index = (-1, -1) if coordinate is None else coordinate
  num = len(leaves)
  if isinstance(leaf_index, bool) or not isinstance(leaf_index, (int, np.integer)) or not (
      -num <= leaf_index < num):
    raise ValueError(f"coordinate leaf_index={leaf_index!r} is outside the valid range "
                     f"[{-num}, {num - 1}]")
  leaf_index %= num
  size = int(np.size(leaves[leaf_index]))
  if isinstance(flat_index, bool) or not isinstance(flat_index, (int, np.integer)) or not (
      -size <= flat_index < size):
    raise ValueError(f"coordinate flat_index={flat_index!r} is outside the valid range "
                     f"[{-size}, {size - 1}] for leaf {leaf_index} of shape "
                     f"{np.shape(leaves[leaf_index])}")
  flat_index %= size
  out = []
  for i, leaf in enumerate(leaves):
    dtype = jnp.result_type(leaf)
    dtype = dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.float32
    zeros = jnp.zeros(np.shape(leaf), dtype)
    if i == leaf_index:
      zeros = zeros.reshape(-1).at[flat_index].set(value).reshape(np.shape(leaf))
    out.append(zeros)
  return jax.tree_util.tree_unflatten(treedef, out)


def include_mask(key: jax.Array, m: int, p: float = 0.5) -> jax.Array:
  r"""Which of ``m`` canaries are inserted: i.i.d. Bernoulli(``p``) draws, bool ``[m]``.

  The one-run game of Steinke, Nasr & Jagielski (2023, Alg. 1; Thm. 2 of UniAud): each canary
  is included independently with probability 1/2 (:math:`S_i = +1`) and left out otherwise
  (:math:`S_i = -1`); the audit's p-values assume ``p = 0.5``.

  Args:
    key: PRNG key.
    m: number of canaries >= 1.
    p: inclusion probability in [0, 1].

  Returns:
    bool array ``[m]``, True where the canary is in.
  """
  _validate.check_key(key)
  m = _validate.check_integer("m", m, 1)
  if np.ndim(p) != 0:
    raise ValueError(f"p must be a scalar, got shape {np.shape(p)}")
  _validate.check_range("p", p, 0.0, 1.0)
  return jax.random.bernoulli(key, p, (m,))
