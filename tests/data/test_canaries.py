"""dpaudit.data.canaries: canary samplers of UniAud (Algs. 1 and 3), Dirac canary, inclusion."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpaudit.data import canaries as cn

KEY = jax.random.key(0)


def pool(n=200, d=6, num_classes=5, seed=0):
  rng = np.random.default_rng(seed)
  features = rng.normal(size=(n, d)).astype(np.float32)  # distinct rows almost surely
  labels = (np.arange(n) % num_classes).astype(np.int32)
  return features, labels


def chi2_pvalue(values, num_categories):
  counts = np.bincount(np.asarray(values).reshape(-1), minlength=num_categories)
  return stats.chisquare(counts).pvalue


# ---------------------------------------------------------------- in-distribution

def test_in_distribution_draws_distinct_pool_rows_with_their_labels():
  features, labels = pool()
  c = cn.in_distribution_canaries(KEY, features, labels, 50)
  assert c.kind == "in_distribution" and len(c) == 50
  assert c.features.shape == (50, 6) and c.features.dtype == jnp.float32
  assert c.labels.shape == (50,) and c.labels.dtype == jnp.int32
  idx = np.asarray(c.source_indices)
  assert len(set(idx.tolist())) == 50 and idx.min() >= 0 and idx.max() < 200
  np.testing.assert_array_equal(c.features, features[idx])
  np.testing.assert_array_equal(c.labels, labels[idx])


def test_in_distribution_whole_pool_is_a_permutation():
  features, labels = pool(n=30)
  c = cn.in_distribution_canaries(KEY, features, labels, 30)
  np.testing.assert_array_equal(np.sort(c.source_indices), np.arange(30))


def test_same_key_same_draw_other_key_other_draw():
  features, labels = pool()
  a = cn.in_distribution_canaries(KEY, features, labels, 20)
  b = cn.in_distribution_canaries(KEY, features, labels, 20)
  c = cn.in_distribution_canaries(jax.random.key(1), features, labels, 20)
  np.testing.assert_array_equal(a.source_indices, b.source_indices)
  assert not np.array_equal(a.source_indices, c.source_indices)


def test_in_distribution_rows_are_uniform_over_the_pool():
  """400 keys x 5 of 20 rows: each row expected 100 times; chi-square at a fixed seed."""
  features, labels = pool(n=20)
  keys = jax.random.split(KEY, 400)
  draw = jax.vmap(lambda k: cn.in_distribution_canaries(k, features, labels, 5).source_indices)
  assert chi2_pvalue(draw(keys), 20) > 1e-3


# ---------------------------------------------------------------- mislabelled

def test_mislabelled_labels_always_differ_and_are_uniform_over_the_others():
  num_classes = 4
  features = np.zeros((5000, 3), np.float32)
  labels = np.zeros(5000, np.int32)  # every true label is 0: new ones uniform over {1, 2, 3}
  c = cn.mislabelled_canaries(KEY, features, labels, 3000, num_classes)
  assert c.kind == "mislabelled" and c.labels.dtype == jnp.int32
  new = np.asarray(c.labels)
  assert np.all(new != 0) and new.max() < num_classes
  counts = np.bincount(new, minlength=num_classes)[1:]
  assert stats.chisquare(counts).pvalue > 1e-3


def test_mislabelled_keeps_features_and_changes_every_label():
  features, labels = pool(num_classes=5)
  c = cn.mislabelled_canaries(KEY, features, labels, 100, 5)
  idx = np.asarray(c.source_indices)
  np.testing.assert_array_equal(c.features, features[idx])
  assert np.all(np.asarray(c.labels) != labels[idx])
  assert np.all((np.asarray(c.labels) >= 0) & (np.asarray(c.labels) < 5))


def test_mislabelled_two_classes_flips():
  features, labels = pool(num_classes=2)
  c = cn.mislabelled_canaries(KEY, features, labels, 100, 2)
  np.testing.assert_array_equal(c.labels, 1 - labels[np.asarray(c.source_indices)])


# ---------------------------------------------------------------- poisoned (UniAud Sec. VIII-A)

def test_poisoned_canaries_are_true_labelled_pool_rows_apart_from_the_warmup_set():
  features, labels = pool(n=60)
  drawn = cn.poisoned_canaries(KEY, features, labels, 20, num_warmup=30)
  c = drawn.canaries
  assert c.kind == "poisoned" and len(c) == 20
  assert c.features.shape == (20, 6) and c.features.dtype == jnp.float32
  assert drawn.warmup_features.shape == (30, 6) and drawn.warmup_features.dtype == jnp.float32
  assert drawn.warmup_labels.shape == (30,) and drawn.warmup_labels.dtype == jnp.int32
  # Recomputed from the rows: each set is its pool rows with their own (true) labels, and no
  # canary is among the rows the initialisation is warmed up on.
  rows, warm = np.asarray(c.source_indices), np.asarray(drawn.warmup_indices)
  np.testing.assert_array_equal(c.features, features[rows])
  np.testing.assert_array_equal(c.labels, labels[rows])
  np.testing.assert_array_equal(drawn.warmup_features, features[warm])
  np.testing.assert_array_equal(drawn.warmup_labels, labels[warm])
  assert len(set(rows.tolist())) == 20 and len(set(warm.tolist())) == 30
  assert not set(rows.tolist()) & set(warm.tolist())
  # num_warmup=0: every other pool row warms the model up.
  rest = cn.poisoned_canaries(KEY, features, labels, 20)
  both = np.concatenate([rest.canaries.source_indices, rest.warmup_indices])
  np.testing.assert_array_equal(np.sort(both), np.arange(60))


def test_poisoned_canaries_are_deterministic_per_key():
  features, labels = pool(n=60)
  a, b = (cn.poisoned_canaries(KEY, features, labels, 10, 20) for _ in range(2))
  other = cn.poisoned_canaries(jax.random.key(1), features, labels, 10, 20)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(x, y)
  assert not np.array_equal(a.canaries.source_indices, other.canaries.source_indices)


# ---------------------------------------------------------------- synthetic (Alg. 1)

def test_gaussian_features_have_mean_zero_and_std_sigma0():
  """N = 64,000 values: the mean's standard error is sigma0 / 253 and the sample std's is about
  sigma0 / 358; tolerances are five of those."""
  sigma0 = 0.3
  c = cn.synthetic_canaries(KEY, 1000, (8, 8), 10, mode="gaussian", sigma0=sigma0)
  assert c.kind == "gaussian" and c.features.shape == (1000, 8, 8)
  assert c.features.dtype == jnp.float32 and c.labels.dtype == jnp.int32
  x = np.asarray(c.features, np.float64)
  n = x.size
  assert abs(x.mean()) < 5 * sigma0 / math.sqrt(n)
  assert abs(x.std() - sigma0) < 5 * sigma0 / math.sqrt(2 * n)


def test_synthetic_labels_are_uniform_and_in_range():
  for mode in cn.SYNTHETIC_MODES:
    c = cn.synthetic_canaries(KEY, 5000, 4, 7, mode=mode)
    labels = np.asarray(c.labels)
    assert labels.min() >= 0 and labels.max() < 7
    assert chi2_pvalue(labels, 7) > 1e-3


def test_orthogonal_features_are_orthonormal_when_m_at_most_d():
  c = cn.synthetic_canaries(KEY, 40, (8, 8), 3, mode="orthogonal")
  x = np.asarray(c.features, np.float64).reshape(40, 64)
  np.testing.assert_allclose(x @ x.T, np.eye(40), atol=1e-5)
  square = np.asarray(cn.synthetic_canaries(KEY, 16, 16, 3, mode="orthogonal").features)
  np.testing.assert_allclose(square @ square.T, np.eye(16), atol=1e-5)
  assert cn.orthogonal_cosine_bound(40, 64) == 0.0


def test_orthogonal_features_are_nearly_orthogonal_when_m_exceeds_d():
  m, d = 300, 100
  c = cn.synthetic_canaries(KEY, m, d, 3, mode="orthogonal")
  x = np.asarray(c.features, np.float64)
  np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
  cos = x @ x.T
  off = np.abs(cos[~np.eye(m, dtype=bool)])
  bound = cn.orthogonal_cosine_bound(m, d, 1e-3)
  assert 0.0 < bound < 1.0 and off.max() <= bound
  # uniform on the sphere: E[cos^2] = 1/d
  assert abs(np.mean(off ** 2) * d - 1.0) < 0.1
  # not all orthogonal (impossible for m > d): the bound is not vacuous
  assert off.max() > 0.1


def test_orthogonal_directions_are_not_axis_aligned_and_vary_with_key():
  a = np.asarray(cn.synthetic_canaries(KEY, 5, 50, 3, mode="orthogonal").features)
  b = np.asarray(cn.synthetic_canaries(jax.random.key(7), 5, 50, 3, mode="orthogonal").features)
  assert np.max(np.abs(a)) < 0.9  # a random rotation, not the standard basis
  assert not np.allclose(a, b)


def test_synthetic_is_deterministic_per_key_and_jittable():
  f = jax.jit(lambda k: cn.synthetic_canaries(k, 12, (3, 4), 5, mode="gaussian"))
  a, b = f(KEY), f(KEY)
  c = f(jax.random.key(3))
  assert isinstance(a, cn.Canaries) and a.kind == "gaussian" and a.source_indices is None
  np.testing.assert_array_equal(a.features, b.features)
  np.testing.assert_array_equal(a.labels, b.labels)
  assert not np.array_equal(a.features, c.features)
  eager = cn.synthetic_canaries(KEY, 12, (3, 4), 5, mode="gaussian")
  np.testing.assert_allclose(a.features, eager.features, rtol=1e-6)


def test_float32_without_x64():
  with jax.enable_x64(False):
    features, labels = pool()
    for c in (cn.mislabelled_canaries(KEY, features.astype(np.float64), labels, 10, 5),):
      assert c.features.dtype == jnp.float32 and c.labels.dtype == jnp.int32


# ---------------------------------------------------------------- UniAud++ (Alg. 3)

def images(n=60, seed=0, size=16):
  rng = np.random.default_rng(seed)
  return (rng.uniform(size=(n, size, size, 3)).astype(np.float32),
          rng.integers(0, 10, n).astype(np.int32))


def test_uniaud_plus_plus_dataset_stamps_triggers_and_tags_only_canaries():
  x, y = images()
  out = cn.uniaud_plus_plus_dataset(KEY, x, y, 20, 12, num_tag_bits=3, patch_size=(4, 5),
                                    patch_origin=(2, 3))
  idx = np.asarray(out.audit_indices)
  assert idx.shape == (20,) and len(set(idx.tolist())) == 20 and np.all(np.diff(idx) > 0)
  canary = np.asarray(out.is_canary)
  assert canary.sum() == 20 and np.all(canary[idx])
  np.testing.assert_array_equal(out.labels, y)
  feats = np.asarray(out.features)
  np.testing.assert_array_equal(feats[~canary], x[~canary])
  colours = np.asarray(out.trigger_colours)
  assert colours.shape == (20, 3) and colours.min() >= 0 and colours.max() <= 1
  for row, colour in zip(idx, colours):
    np.testing.assert_array_equal(feats[row, 2:6, 3:8], np.broadcast_to(colour, (4, 5, 3)))
    outside = np.ones((16, 16), bool)
    outside[2:6, 3:8] = False
    np.testing.assert_array_equal(feats[row][outside], x[row][outside])
  tags = np.asarray(out.tags)
  assert tags.shape == (60, 3) and np.all(tags[~canary] == -1)
  for t in (tags[canary], np.asarray(out.comparison_tags)):
    assert t.shape == (20, 3) and t.min() >= 0 and t.max() < 12
    assert np.all(np.diff(t, axis=1) > 0)  # distinct, sorted


def test_uniaud_plus_plus_tags_are_uniform():
  """Five keys x 20 canaries x 3 tags (and as many comparison tags) over 12 tags: 25 expected
  per tag and kind; chi-square at fixed seeds (same shapes as above, so no recompilation)."""
  x, y = images()
  outs = [cn.uniaud_plus_plus_dataset(k, x, y, 20, 12, num_tag_bits=3, patch_size=(4, 5),
                                      patch_origin=(2, 3)) for k in jax.random.split(KEY, 5)]
  tags = np.concatenate([np.asarray(o.tags)[np.asarray(o.is_canary)] for o in outs])
  comp = np.concatenate([np.asarray(o.comparison_tags) for o in outs])
  assert chi2_pvalue(tags, 12) > 1e-3 and chi2_pvalue(comp, 12) > 1e-3
  assert not np.array_equal(tags, comp)
  assert not np.array_equal(outs[0].audit_indices, outs[1].audit_indices)


def test_multi_task_loss_is_eq_12():
  rng = np.random.default_rng(0)
  lm, lt = rng.normal(size=(6, 4)), rng.normal(size=(6, 5))
  labels = np.array([0, 1, 2, 3, 0, 1])
  tags = np.array([[1, 3], [-1, -1], [0, 4], [-1, -1], [2, 3], [-1, -1]])
  is_canary = tags[:, 0] >= 0
  got = np.asarray(cn.multi_task_loss(lm, lt, labels, tags, is_canary, 0.7))

  def ce(logits, target):
    return -(logits[target] - np.log(np.sum(np.exp(logits))))

  for i in range(6):
    want = ce(lm[i], labels[i])
    if is_canary[i]:
      want += 0.7 * np.mean([ce(lt[i], t) for t in tags[i]])
    assert got[i] == pytest.approx(want, rel=1e-6)
  single = cn.multi_task_loss(lm, lt, labels, tags[:, 0], is_canary, 1.0)
  assert float(single[0]) == pytest.approx(ce(lm[0], 0) + ce(lt[0], 1), rel=1e-6)


# ---------------------------------------------------------------- Dirac canary, inclusion

def test_dirac_canary_default_is_last_coordinate_of_last_leaf():
  params = {"a": {"w": jnp.ones((3, 4)), "b": jnp.ones(4)}, "z": jnp.ones((2, 2), jnp.float16)}
  g = cn.dirac_gradient_canary(params, value=2.5)
  assert jax.tree_util.tree_structure(g) == jax.tree_util.tree_structure(params)
  for leaf, ref in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(params)):
    assert leaf.shape == ref.shape and leaf.dtype == ref.dtype
  flat = np.concatenate([np.asarray(l, np.float64).ravel() for l in jax.tree_util.tree_leaves(g)])
  assert np.count_nonzero(flat) == 1 and flat[-1] == 2.5
  assert float(g["z"][1, 1]) == 2.5


def test_dirac_canary_at_a_given_coordinate():
  params = [jnp.zeros((3, 4)), jnp.zeros(5), np.zeros(2, np.int32)]
  g = cn.dirac_gradient_canary(params, coordinate=(0, 6))
  assert float(g[0][1, 2]) == 1.0
  flat = np.concatenate([np.asarray(l).ravel() for l in g])
  assert np.count_nonzero(flat) == 1
  assert g[2].dtype == jnp.float32  # integer leaves become float
  g = cn.dirac_gradient_canary(params, coordinate=(-2, -1), value=-3.0)
  assert float(g[1][4]) == -3.0


def test_include_mask_frequency_and_determinism():
  """m = 20,000: the share's standard deviation is at most 0.0036; tolerance five of those."""
  for p in (0.5, 0.2):
    mask = cn.include_mask(KEY, 20_000, p)
    assert mask.dtype == jnp.bool_ and mask.shape == (20_000,)
    assert abs(float(np.mean(mask)) - p) < 5 * math.sqrt(p * (1 - p) / 20_000)
  np.testing.assert_array_equal(cn.include_mask(KEY, 100), cn.include_mask(KEY, 100))
  assert not np.array_equal(cn.include_mask(KEY, 100), cn.include_mask(jax.random.key(1), 100))
  assert not np.any(cn.include_mask(KEY, 50, 0.0)) and np.all(cn.include_mask(KEY, 50, 1.0))


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("call, match", [
    (lambda f, l: cn.in_distribution_canaries(KEY, f, l, 201), r"m=201 .*\[1, 200\]"),
    (lambda f, l: cn.in_distribution_canaries(KEY, f, l, 0), "m=0"),
    (lambda f, l: cn.in_distribution_canaries(KEY, f, l[:5], 3), "labels has shape"),
    (lambda f, l: cn.in_distribution_canaries(0, f, l, 3), "key must be a jax PRNG key"),
    (lambda f, l: cn.mislabelled_canaries(KEY, f, l, 3, 1), "num_classes=1"),
    (lambda f, l: cn.poisoned_canaries(KEY, f, l, 200), r"m=200 .*\[1, 199\]"),
    (lambda f, l: cn.poisoned_canaries(KEY, f, l, 150, 51), r"num_warmup=51 .*\[0, 50\]"),
    (lambda f, l: cn.poisoned_canaries(KEY, f, l, 3, -1), "num_warmup=-1"),
    (lambda f, l: cn.poisoned_canaries(KEY, f, l, 3, 2.0), "num_warmup=2.0"),
    (lambda f, l: cn.poisoned_canaries(0, f, l, 3), "key must be a jax PRNG key"),
    (lambda f, l: cn.mislabelled_canaries(KEY, f, l, 3, 4), r"labels=4 .*\[0, 3\]"),
    (lambda f, l: cn.mislabelled_canaries(KEY, f, l.astype(float), 3, 5), "integers"),
    (lambda f, l: cn.synthetic_canaries(KEY, 3, 4, 5, mode="uniform"), "mode='uniform'"),
    (lambda f, l: cn.synthetic_canaries(KEY, 3, 4, 1), "num_classes=1"),
    (lambda f, l: cn.synthetic_canaries(KEY, 3, 4, 5, sigma0=0.0), "sigma0=0"),
    (lambda f, l: cn.synthetic_canaries(KEY, 3, (4, 0), 5), "example_shape"),
    (lambda f, l: cn.synthetic_canaries(KEY, 2.5, 4, 5), "m=2.5"),
    (lambda f, l: cn.include_mask(KEY, 10, 1.5), r"p=1.5 .*\[0, 1\]"),
    (lambda f, l: cn.include_mask(KEY, 0), "m=0"),
    (lambda f, l: cn.dirac_gradient_canary([jnp.zeros(3)], (1, 0)), "leaf_index=1"),
    (lambda f, l: cn.dirac_gradient_canary([jnp.zeros(3)], (0, 3)), "flat_index=3"),
    (lambda f, l: cn.dirac_gradient_canary({}), "no array leaves"),
    (lambda f, l: cn.orthogonal_cosine_bound(10, 5, 0.0), "failure_probability=0"),
    (lambda f, l: cn.multi_task_loss(jnp.zeros((1, 2)), jnp.zeros((1, 2)), jnp.zeros(1, int),
                                     jnp.zeros(1, int), jnp.ones(1, bool), -1.0), "weight=-1"),
])
def test_bad_input_raises(call, match):
  features, labels = pool()
  with pytest.raises(ValueError, match=match):
    call(features, labels)


@pytest.mark.parametrize("kwargs, match", [
    (dict(m=61), "m=61"),
    (dict(num_tags=1), "num_tags=1"),
    (dict(num_tag_bits=10), r"num_tag_bits=10 .*\[1, 9\]"),
    (dict(patch_size=(10, 10), patch_origin=(8, 0)), "does not fit"),
    (dict(colour_range=(1.0, 0.0)), "colour_range"),
])
def test_uniaud_plus_plus_bad_input(kwargs, match):
  x, y = images()
  args = dict(m=5, num_tags=10) | kwargs
  with pytest.raises(ValueError, match=match):
    cn.uniaud_plus_plus_dataset(KEY, x, y, **args)
  with pytest.raises(ValueError, match="images"):
    cn.uniaud_plus_plus_dataset(KEY, x.reshape(60, -1), y, 5, 10)
