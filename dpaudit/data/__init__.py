"""Datasets for audits: real data, offline, through tensorflow-datasets' ``data_source`` API.

::

  from dpaudit import data

  digits = data.load("digits")                       # prepared on first use, then cached
  train, test = data.train_test_split(digits, test_fraction=0.2, seed=0, stratify=True)
  train, test, stats = data.standardize(train, test)  # statistics of train only
  lines = data.load_text("shakespeare", split="train").texts

Bundled sets (built from installed packages, no download): ``digits``, ``breast_cancer``,
``wine``, ``mnist_subset``, the census tables ``adult`` (columns: :data:`ADULT_COLUMNS`) and
``california_housing`` (regression; :data:`CALIFORNIA_FEATURES`), the clinical table
``heart_failure`` (:data:`HEART_FAILURE_COLUMNS`) and the text corpus
``shakespeare``. Catalog sets ``mnist``,
``fashion_mnist`` and ``cifar10`` are read when a user has prepared them (see
:func:`preparation_command`). Sources and licences: :data:`SOURCES` and
:mod:`dpaudit.data.sources`.

Canaries for DP-SGD audits (:mod:`dpaudit.data.canaries`): in-distribution, mislabelled,
UniAud's synthetic Gaussian / orthogonal canaries (Alg. 1), the UniAud++ multi-task dataset
(Alg. 3, Eq. 12), a white-box Dirac gradient canary, UniAud's Poisoned baseline (true-labelled
canaries and a warm-up set, Sec. VIII-A) and the one-run inclusion mask.
"""

from dpaudit.data.builders import DATA_DIR_ENV, default_data_dir
from dpaudit.data.canaries import (
                                   SYNTHETIC_MODES,
                                   Canaries,
                                   MultiTaskDataset,
                                   PoisonedCanaries,
                                   dirac_gradient_canary,
                                   in_distribution_canaries,
                                   include_mask,
                                   mislabelled_canaries,
                                   multi_task_loss,
                                   orthogonal_cosine_bound,
                                   poisoned_canaries,
                                   synthetic_canaries,
                                   uniaud_plus_plus_dataset,
)
from dpaudit.data.loading import (
                                   CATALOG_DATASETS,
                                   DATASETS,
                                   LOCAL_DATASETS,
                                   TEXT_DATASETS,
                                   Dataset,
                                   TextCorpus,
                                   load,
                                   load_text,
                                   preparation_command,
)
from dpaudit.data.preprocessing import (
                                   Standardization,
                                   fit_standardization,
                                   split_indices,
                                   standardize,
                                   train_test_split,
)
from dpaudit.data.sources import (
                                   ADULT_COLUMNS,
                                   CALIFORNIA_FEATURES,
                                   HEART_FAILURE_COLUMNS,
                                   SHAKESPEARE_TEST_PLAYS,
                                   SOURCES,
                                   Column,
)

__all__ = [
    "ADULT_COLUMNS", "CALIFORNIA_FEATURES", "HEART_FAILURE_COLUMNS", "CATALOG_DATASETS", "Column",
    "DATASETS", "DATA_DIR_ENV", "Dataset", "LOCAL_DATASETS",
    "SHAKESPEARE_TEST_PLAYS", "SOURCES", "Standardization", "TEXT_DATASETS", "TextCorpus",
    "default_data_dir", "fit_standardization", "load", "load_text", "preparation_command",
    "split_indices", "standardize", "train_test_split",
    "Canaries", "MultiTaskDataset", "PoisonedCanaries", "SYNTHETIC_MODES", "dirac_gradient_canary",
    "in_distribution_canaries", "include_mask", "mislabelled_canaries", "multi_task_loss",
    "orthogonal_cosine_bound", "poisoned_canaries", "synthetic_canaries",
    "uniaud_plus_plus_dataset",
]
