"""Deterministic train/test splits and train-only standardization of a :class:`Dataset`.

Data preparation happens once, outside any jitted code, so the splits draw their permutation
from ``numpy.random.default_rng(seed)`` (PCG64) with an explicit integer seed: the same seed
gives the same split on every machine and NumPy version that keeps PCG64's stream, and no
global random state is read or changed. Experiments take the seed from a flag, next to the
seed of their JAX keys.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dpaudit import _validate
from dpaudit.data.loading import Dataset


def _check_seed(seed: Any) -> int:
  if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
    raise ValueError(f"seed={seed!r} must be an integer >= 0")
  return int(seed)


def _num_test(test_fraction: float, count: int) -> int:
  """``test_fraction * count`` rounded half up (not to even, so 0.5 * 3 gives 2)."""
  return int(np.floor(test_fraction * count + 0.5))


def split_indices(num_examples: int, test_fraction: float, seed: int,
                  labels: Any = None) -> tuple[np.ndarray, np.ndarray]:
  """Indices of a random train/test partition of ``range(num_examples)``.

  The test part holds ``round(test_fraction * num_examples)`` indices drawn uniformly without
  replacement; with ``labels`` it is stratified: ``round(test_fraction * n_c)`` of the ``n_c``
  examples of each class ``c`` (so the total may differ from the unstratified size by up to
  half the number of classes).

  Args:
    num_examples: the number of examples N >= 2.
    test_fraction: the fraction in (0, 1) of examples to hold out.
    seed: integer >= 0 for ``numpy.random.default_rng``.
    labels: optional integer array [N] to stratify by.

  Returns:
    ``(train_indices, test_indices)``: sorted int64 arrays that partition ``range(N)``, both
    non-empty.
  """
  if isinstance(num_examples, bool) or not isinstance(num_examples, (int, np.integer)):
    raise ValueError(f"num_examples={num_examples!r} must be an integer >= 2")
  _validate.check_range("num_examples", num_examples, 2)
  _validate.check_range("test_fraction", test_fraction, 0.0, 1.0, low_open=True,
                        high_open=True)
  rng = np.random.default_rng(_check_seed(seed))
  if labels is None:
    test = rng.permutation(num_examples)[:_num_test(test_fraction, num_examples)]
  else:
    labels = np.asarray(labels)
    if labels.shape != (num_examples,) or labels.dtype.kind not in "iu":
      raise ValueError(f"labels must be an integer array of shape ({num_examples},), got "
                       f"{labels.dtype} of shape {labels.shape}")
    parts = []
    for label in np.unique(labels):
      members = rng.permutation(np.flatnonzero(labels == label))
      parts.append(members[:_num_test(test_fraction, members.size)])
    test = np.concatenate(parts)
  if not 0 < test.size < num_examples:
    raise ValueError(f"test_fraction={test_fraction} of num_examples={num_examples} leaves "
                     f"{test.size} test and {num_examples - test.size} training examples; "
                     "both need at least one")
  is_test = np.zeros(num_examples, bool)
  is_test[test] = True
  return np.flatnonzero(~is_test), np.flatnonzero(is_test)


def train_test_split(dataset: Dataset, test_fraction: float, seed: int, *,
                     stratify: bool = False) -> tuple[Dataset, Dataset]:
  """A random partition of ``dataset`` into a training and a test set.

  See :func:`split_indices` for the sizes; both parts keep the examples' original order and
  the dataset's ``num_classes``, and their ``split`` is the parent's with ``'/train'`` or
  ``'/test'`` appended.

  Args:
    dataset: the dataset to split.
    test_fraction: the fraction in (0, 1) of examples to hold out.
    seed: integer >= 0; the same seed gives the same split.
    stratify: keep each class's share (up to rounding) in both parts.

  Returns:
    ``(train, test)``.
  """
  train_idx, test_idx = split_indices(len(dataset), test_fraction, seed,
                                      dataset.labels if stratify else None)
  return (dataset.take(train_idx, f"{dataset.split}/train"),
          dataset.take(test_idx, f"{dataset.split}/test"))


@dataclasses.dataclass(frozen=True, eq=False)
class Standardization:
  """Per-feature statistics of a training set: ``x -> (x - mean) / std``.

  Attributes:
    mean: float32, shape of one example's features.
    std: float32, same shape; features that are constant on the training set have std 1,
      so they map to ``x - mean`` (0 on the training set) rather than to NaN.
  """
  mean: np.ndarray
  std: np.ndarray

  def apply(self, dataset: Dataset) -> Dataset:
    """``dataset`` with its features standardized by these statistics."""
    if dataset.features.shape[1:] != self.mean.shape:
      raise ValueError(f"dataset features have per-example shape {dataset.features.shape[1:]} "
                       f"but the statistics have shape {self.mean.shape}; they must match")
    features = ((dataset.features - self.mean) / self.std).astype(np.float32)
    return dataclasses.replace(dataset, features=features)


def fit_standardization(train: Dataset) -> Standardization:
  """Per-feature mean and standard deviation (ddof 0) of ``train``, computed in float64."""
  features = np.asarray(train.features, np.float64)
  mean = features.mean(axis=0)
  std = features.std(axis=0)
  std = np.where(std > 0, std, 1.0)
  return Standardization(mean=mean.astype(np.float32), std=std.astype(np.float32))


def standardize(train: Dataset, test: Dataset
                ) -> tuple[Dataset, Dataset, Standardization]:
  """Standardizes both sets with statistics of ``train`` only (``test`` never informs them).

  Returns:
    ``(train, test, statistics)``: the standardized sets and the :class:`Standardization`
    that produced them.
  """
  statistics = fit_standardization(train)
  return statistics.apply(train), statistics.apply(test), statistics
