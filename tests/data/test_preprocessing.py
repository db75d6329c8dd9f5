"""dpaudit.data.preprocessing: seeded splits partition the data; standardization uses train only."""

import numpy as np
import pytest

from dpaudit import data


def toy(num_examples=100, num_classes=4, seed=0):
  rng = np.random.default_rng(seed)
  features = rng.normal(3.0, 2.0, (num_examples, 5)).astype(np.float32)
  labels = (np.arange(num_examples) % num_classes).astype(np.int32)
  return data.Dataset("toy", "train", features, labels, num_classes)


def test_split_is_a_deterministic_partition():
  train_idx, test_idx = data.split_indices(100, 0.25, seed=3)
  again = data.split_indices(100, 0.25, seed=3)
  np.testing.assert_array_equal(train_idx, again[0])
  np.testing.assert_array_equal(test_idx, again[1])
  assert (train_idx.size, test_idx.size) == (75, 25)
  assert not set(train_idx) & set(test_idx)
  np.testing.assert_array_equal(np.sort(np.concatenate([train_idx, test_idx])), np.arange(100))
  assert np.all(np.diff(train_idx) > 0) and np.all(np.diff(test_idx) > 0)


def test_other_seeds_give_other_splits():
  splits = {tuple(data.split_indices(100, 0.25, seed)[1]) for seed in range(20)}
  assert len(splits) == 20


def test_test_size_rounds_half_up():
  assert data.split_indices(3, 0.5, 0)[1].size == 2
  assert data.split_indices(10, 0.14, 0)[1].size == 1
  assert data.split_indices(10, 0.15, 0)[1].size == 2


def test_the_test_part_is_uniform_over_examples():
  """Over 2,000 seeds each index lands in the test part with probability 0.2 (binomial
  standard deviation 0.009 per index; the bound 0.05 is over five of those)."""
  counts = np.zeros(10)
  for seed in range(2000):
    counts[data.split_indices(10, 0.2, seed)[1]] += 1
  np.testing.assert_allclose(counts / 2000, 0.2, atol=0.05)


def test_train_test_split_of_a_dataset():
  dataset = toy()
  train, test = data.train_test_split(dataset, 0.2, seed=1)
  assert (len(train), len(test)) == (80, 20)
  assert (train.split, test.split) == ("train/train", "train/test")
  assert train.num_classes == test.num_classes == 4
  rows = {row.tobytes() for row in dataset.features}
  got = [row.tobytes() for row in np.concatenate([train.features, test.features])]
  assert sorted(got) == sorted(rows) and len(set(got)) == 100
  again, _ = data.train_test_split(dataset, 0.2, seed=1)
  np.testing.assert_array_equal(again.features, train.features)


def test_stratified_split_keeps_class_shares():
  digits_like = toy(num_examples=103, num_classes=3)  # class sizes 35, 34, 34
  train, test = data.train_test_split(digits_like, 0.3, seed=0, stratify=True)
  np.testing.assert_array_equal(np.bincount(test.labels), [11, 10, 10])
  np.testing.assert_array_equal(np.bincount(train.labels), [24, 24, 24])


def test_split_argument_errors():
  with pytest.raises(ValueError, match=r"test_fraction=1.0 is outside the valid range \(0, 1\)"):
    data.split_indices(10, 1.0, 0)
  with pytest.raises(ValueError, match="test_fraction=0.01 of num_examples=10 leaves 0 test"):
    data.split_indices(10, 0.01, 0)
  with pytest.raises(ValueError, match=r"seed=-1 must be an integer >= 0"):
    data.split_indices(10, 0.5, -1)
  with pytest.raises(ValueError, match=r"seed=0.5 must be an integer >= 0"):
    data.split_indices(10, 0.5, 0.5)
  with pytest.raises(ValueError, match=r"num_examples=1 is outside the valid range \[2, inf\)"):
    data.split_indices(1, 0.5, 0)
  with pytest.raises(ValueError, match=r"labels must be an integer array of shape \(10,\)"):
    data.split_indices(10, 0.5, 0, labels=np.zeros(9, int))


def test_standardize_uses_train_statistics_only():
  train, test = data.train_test_split(toy(200), 0.5, seed=0)
  shifted = data.Dataset("toy", "test", test.features + np.float32(10.0), test.labels, 4)
  train_std, test_std, stats = data.standardize(train, shifted)
  x = train.features.astype(np.float64)
  np.testing.assert_allclose(stats.mean, x.mean(axis=0), rtol=1e-6)
  np.testing.assert_allclose(stats.std, x.std(axis=0), rtol=1e-6)
  np.testing.assert_allclose(train_std.features.mean(axis=0), 0.0, atol=1e-5)
  np.testing.assert_allclose(train_std.features.std(axis=0), 1.0, rtol=1e-5)
  np.testing.assert_allclose(test_std.features, (shifted.features - stats.mean) / stats.std,
                             rtol=1e-6)
  assert np.all(test_std.features.mean(axis=0) > 3.0)  # the test shift is not removed
  np.testing.assert_array_equal(test_std.labels, shifted.labels)
  assert train_std.features.dtype == test_std.features.dtype == np.float32


def test_constant_features_do_not_give_nan(data_dir):
  digits = data.load("digits", data_dir=data_dir)
  train, test = data.train_test_split(digits, 0.25, seed=0, stratify=True)
  constant = train.features.std(axis=0) == 0  # e.g. the top-left pixel is always 0
  assert constant.any()
  train_std, test_std, stats = data.standardize(train, test)
  assert np.all(np.isfinite(train_std.features)) and np.all(np.isfinite(test_std.features))
  assert np.all(stats.std[constant] == 1.0)
  assert np.all(train_std.features[:, constant] == 0.0)


def test_standardize_rejects_mismatched_shapes():
  train = toy()
  other = data.Dataset("other", "test", np.zeros((4, 3), np.float32), np.zeros(4, np.int32), 1)
  with pytest.raises(ValueError, match=r"per-example shape \(3,\) but the statistics have "
                                       r"shape \(5,\)"):
    data.standardize(train, other)
