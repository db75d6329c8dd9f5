"""One way to load every dataset dpaudit uses, as NumPy arrays, through tfds ``data_source``.

:func:`load` returns a classification :class:`Dataset` and :func:`load_text` the Shakespeare
:class:`TextCorpus`. Both read a tensorflow-datasets data directory: ``data_dir`` when given,
else ``$DPAUDIT_DATA_DIR``, else ``~/.cache/dpaudit/tensorflow_datasets``.

* ``digits``, ``breast_cancer``, ``wine``, ``mnist_subset``, ``adult`` and ``shakespeare`` are
  built from files of installed packages (:mod:`dpaudit.data.builders`). The first load
  prepares them in the data directory (seconds; Shakespeare about 10 s); later loads read the
  prepared copy. The sklearn sets and ``mnist_subset`` have one split, ``train``, holding the
  whole source set in the source's order: split it with :func:`dpaudit.data.train_test_split`
  and a seed, as does ``california_housing`` (a regression set: :attr:`Dataset.targets`
  holds the median house value, ``labels`` are all 0) and ``heart_failure`` (UCI's 299
  clinical records, 12 features in :data:`dpaudit.data.sources.HEART_FAILURE_COLUMNS`, label
  DEATH_EVENT). ``adult`` has UCI's ``train`` and
  ``test``; its features are the 6 numeric
  attributes as they are and the 8 categorical ones as category indices
  (:data:`dpaudit.data.sources.ADULT_COLUMNS` names them and their categories).
* ``mnist``, ``fashion_mnist`` and ``cifar10`` are the tfds catalog datasets, with their real
  ``train`` and ``test`` splits. They need downloads and TensorFlow to prepare, so dpaudit
  never prepares them: a user prepares them once in ``array_record`` format (see
  :func:`preparation_command`) and copies the directory over; until then :func:`load` raises
  a ``ValueError`` that says how.

Image features are float32 ``[N, H, W, C]`` scaled to ``[0, 1]`` (digits' 0..16 divided by
16, 8-bit pixels by 255); tabular features are the source's values as float32 ``[N, D]``.
Labels are int32 ``[N]``. ``split`` accepts tfds split expressions such as ``'train[:80%]'``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from dpaudit import _validate
from dpaudit.data import builders, sources

LOCAL_DATASETS = ("digits", "breast_cancer", "wine", "mnist_subset", "adult",
                  "california_housing", "heart_failure")
CATALOG_DATASETS = ("mnist", "fashion_mnist", "cifar10")
# tfds catalog names of the text classification sets (dpaudit.data.text_classification).
TEXT_CATALOG_DATASETS = ("glue/sst2", "ag_news_subset", "trec")
DATASETS = LOCAL_DATASETS + CATALOG_DATASETS
TEXT_DATASETS = ("shakespeare",)

# Divisor that maps each image set's stored integer pixels onto [0, 1] (None: tabular).
_SCALE = {"digits": 16.0, "breast_cancer": None, "wine": None, "mnist_subset": 255.0,
          "adult": None, "california_housing": None, "heart_failure": None,
          "mnist": 255.0, "fashion_mnist": 255.0, "cifar10": 255.0}


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
  """A labelled dataset held in memory, as read-only views of the given arrays (no copy).

  Attributes:
    name: the dpaudit name, e.g. ``'digits'``.
    split: the split it was read from (``'train'``, ``'train[:80%]'``, ...), with
      ``'/train'`` or ``'/test'`` appended by :func:`~dpaudit.data.train_test_split`.
    features: float32 ``[N, ...]``: ``[N, H, W, C]`` images in ``[0, 1]`` or ``[N, D]``
      tabular values.
    labels: int32 ``[N]`` in ``0 .. num_classes - 1``.
    num_classes: the number of classes of the whole dataset (some may be absent here).
    source: where the data come from.
    licence: the terms under which the data are distributed.
    targets: float32 ``[N]`` regression targets, for sets that have them
      (``california_housing``, whose ``labels`` are then all 0 with ``num_classes`` 1), else
      None.
  """
  name: str
  split: str
  features: np.ndarray
  labels: np.ndarray
  num_classes: int
  source: str = ""
  licence: str = ""
  targets: np.ndarray | None = None

  def __post_init__(self):
    features = np.asarray(self.features)
    labels = np.asarray(self.labels)
    if features.dtype != np.float32 or features.ndim < 2:
      raise ValueError(f"features must be a float32 array of shape [N, ...], got {features.dtype}"
                       f" of shape {features.shape}")
    if labels.dtype != np.int32 or labels.ndim != 1:
      raise ValueError(f"labels must be an int32 array of shape [N], got {labels.dtype} of "
                       f"shape {labels.shape}")
    if features.shape[0] != labels.shape[0]:
      raise ValueError(f"features hold {features.shape[0]} examples but labels hold "
                       f"{labels.shape[0]}; they must match")
    if not isinstance(self.num_classes, (int, np.integer)) or self.num_classes < 1:
      raise ValueError(f"num_classes={self.num_classes!r} must be an integer >= 1")
    _validate.check_range("labels", labels, 0, int(self.num_classes) - 1)
    object.__setattr__(self, "features", _read_only(features))
    object.__setattr__(self, "labels", _read_only(labels))
    object.__setattr__(self, "num_classes", int(self.num_classes))
    if self.targets is not None:
      targets = np.asarray(self.targets)
      if targets.dtype != np.float32 or targets.shape != labels.shape:
        raise ValueError(f"targets must be float32 of shape {labels.shape}, got "
                         f"{targets.dtype} of shape {targets.shape}")
      object.__setattr__(self, "targets", _read_only(targets))

  def __len__(self) -> int:
    return int(self.labels.shape[0])

  @property
  def num_examples(self) -> int:
    return len(self)

  def take(self, indices: Any, split: str | None = None) -> Dataset:
    """The examples at ``indices`` (integer array), as a new dataset named ``split``."""
    indices = np.asarray(indices)
    if indices.ndim != 1 or indices.dtype.kind not in "iu":
      raise ValueError(f"indices must be a 1-D integer array, got {indices.dtype} of shape "
                       f"{indices.shape}")
    _validate.check_range("indices", indices, 0, len(self) - 1)
    return dataclasses.replace(self, split=self.split if split is None else split,
                               features=self.features[indices], labels=self.labels[indices],
                               targets=None if self.targets is None else self.targets[indices])


@dataclasses.dataclass(frozen=True, eq=False)
class TextCorpus:
  """Lines of text with where each comes from; ``texts[i]`` was spoken by ``speakers[i]`` in
  ``plays[i]``.

  Attributes:
    name: the dpaudit name (``'shakespeare'``).
    split: the split it was read from.
    texts: one line of speech each, in the order of the plays.
    plays: the play of each line, e.g. ``'hamlet'``.
    speakers: the speaker of each line, e.g. ``'HAMLET'``.
    source: where the text comes from.
    licence: the terms under which the text is distributed.
  """
  name: str
  split: str
  texts: tuple[str, ...]
  plays: tuple[str, ...]
  speakers: tuple[str, ...]
  source: str = ""
  licence: str = ""

  def __post_init__(self):
    for field in ("texts", "plays", "speakers"):
      object.__setattr__(self, field, tuple(getattr(self, field)))
    if not len(self.texts) == len(self.plays) == len(self.speakers):
      raise ValueError(f"texts, plays and speakers have lengths {len(self.texts)}, "
                       f"{len(self.plays)}, {len(self.speakers)}; they must match")

  def __len__(self) -> int:
    return len(self.texts)


def _read_only(array: np.ndarray) -> np.ndarray:
  view = array.view()
  view.flags.writeable = False
  return view


def preparation_command(name: str, data_dir: str | os.PathLike | None = None) -> str:
  """The shell command that prepares catalog dataset ``name`` in the form :func:`load` reads.

  It needs internet access and TensorFlow (the tfds command line and tfds's image encoder
  import it), so run it on another machine and copy ``<data_dir>/<name>`` over.
  """
  _validate.check_choice("name", name, CATALOG_DATASETS + TEXT_CATALOG_DATASETS)
  data_dir = builders.resolve_data_dir(data_dir)
  return (f"pip install tensorflow tensorflow-datasets=={tfds.__version__} && "
          f"tfds build {name} --data_dir={data_dir} --file_format=array_record")


def _not_prepared_error(name: str, data_dir: str) -> ValueError:
  return ValueError(
      f"dataset {name!r} is not prepared in {data_dir}; prepare it once on a machine with "
      f"internet access: `{preparation_command(name, data_dir)}`, then copy "
      f"{os.path.join(data_dir, name)} to this machine (or pass data_dir= / set "
      f"${builders.DATA_DIR_ENV} to where it is)")


def _split_error(name: str, split: Any, error: Exception) -> ValueError:
  hint = (" (the whole source set is 'train'; split it with dpaudit.data.train_test_split)"
          if name in LOCAL_DATASETS else "")
  return ValueError(f"split={split!r} is not valid for dataset {name!r}: {error}{hint}")


def _check_split(split: Any) -> None:
  if not isinstance(split, str) or not split:
    raise ValueError(f"split={split!r} must be a non-empty tfds split string such as 'train', "
                     "'test' or 'train[:80%]'")


@contextlib.contextmanager
def _quiet_tfds_probe():
  """Silences tfds's warnings while it looks for a prepared set ("Variant folder ... has no
  dataset_info.json" for a set not prepared yet): the error raised after says what is wrong,
  in one line."""
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  level = absl_logging.get_verbosity()
  absl_logging.set_verbosity(absl_logging.ERROR)
  try:
    yield
  finally:
    absl_logging.set_verbosity(level)


def _catalog_source(name: str, split: str, data_dir: str) -> Sequence[dict[str, Any]]:
  """``tfds.data_source`` of a catalog dataset that must already be prepared in ``data_dir``."""
  with _quiet_tfds_probe():
    return _probe_catalog_source(name, split, data_dir)


def _probe_catalog_source(name: str, split: str, data_dir: str) -> Sequence[dict[str, Any]]:
  try:
    return tfds.data_source(name, split=split, data_dir=data_dir, download=False)
  except (AssertionError, NotImplementedError, FileNotFoundError, ValueError) as error:
    # tfds's own messages for a missing dataset name the wrong cause (a TFRECORD format), so
    # look at the data directory to say what is wrong.
    builder = tfds.builder(name, data_dir=data_dir)
    if not builder.is_prepared():
      raise _not_prepared_error(name, data_dir) from None
    file_format = builder.info.file_format
    if file_format not in tfds.core.FileFormat.with_random_access():
      raise ValueError(
          f"dataset {name!r} is prepared in {builder.data_dir} as {file_format.value}, which "
          f"has no random access; rebuild it as array_record: "
          f"`{preparation_command(name, data_dir)}`") from None
    if isinstance(error, ValueError):
      raise _split_error(name, split, error) from None
    raise


def _local_source(name: str, split: str, data_dir: str) -> Sequence[dict[str, Any]]:
  builder = builders.prepare(name, data_dir)
  try:
    return builder.as_data_source(split=split)
  except ValueError as error:
    raise _split_error(name, split, error) from None


def _read_all(source: Sequence[Any]) -> list[Any]:
  """Every example of a data source, read in one batched ``__getitems__`` call.

  ``tfds.testing.mock_data`` (tfds 4.9.10) installs a ``__getitems__`` that cannot be called
  (a ``functools.partial`` stored on the instance, so ``self`` is never passed) and raises
  TypeError; reading the same examples one at a time keeps :func:`load` usable under it.
  """
  keys = list(range(len(source)))
  try:
    return list(source.__getitems__(keys))
  except TypeError:
    return [source[key] for key in keys]


def load(name: str, split: str = "train", data_dir: str | os.PathLike | None = None
         ) -> Dataset:
  """A classification dataset as NumPy arrays; see the module docstring for the names.

  Args:
    name: one of :data:`DATASETS`.
    split: a tfds split expression: ``'train'`` for the bundled sets (the whole set; slices
      such as ``'train[:100]'`` work too), ``'train'`` or ``'test'`` for the catalog sets.
    data_dir: the tfds data directory; None for ``$DPAUDIT_DATA_DIR`` or
      ``~/.cache/dpaudit/tensorflow_datasets``. Bundled sets are prepared there on first use.

  Returns:
    The :class:`Dataset`, features float32 (images scaled to ``[0, 1]``), labels int32.

  Raises:
    ValueError: ``name`` is unknown, ``split`` is not one of its splits or selects no
      example, or a catalog dataset is not prepared in ``data_dir`` (the message gives the
      command that prepares it).
  """
  if name in TEXT_DATASETS:
    raise ValueError(f"name={name!r} is a text corpus; load it with dpaudit.data.load_text")
  _validate.check_choice("name", name, DATASETS)
  _check_split(split)
  data_dir = builders.resolve_data_dir(data_dir)
  if name in LOCAL_DATASETS:
    source = _local_source(name, split, data_dir)
  else:
    source = _catalog_source(name, split, data_dir)
  examples = _read_all(source)
  if not examples:
    raise ValueError(f"split={split!r} of dataset {name!r} holds no examples")
  input_key = "features" if _SCALE[name] is None else "image"
  features = np.stack([example[input_key] for example in examples]).astype(np.float32)
  if _SCALE[name] is not None:
    features /= np.float32(_SCALE[name])
  info = sources.SOURCES[name]
  if "target" in source.dataset_info.features:  # regression: one class, float targets
    targets = np.fromiter((example["target"] for example in examples), np.float64,
                          len(examples)).astype(np.float32)
    return Dataset(name=name, split=split, features=features,
                   labels=np.zeros(len(examples), np.int32), num_classes=1,
                   source=info.origin, licence=info.licence, targets=targets)
  labels = np.fromiter((example["label"] for example in examples), np.int32, len(examples))
  return Dataset(name=name, split=split, features=features, labels=labels,
                 num_classes=source.dataset_info.features["label"].num_classes,
                 source=info.origin, licence=info.licence)


def _parse_text_records(records: Sequence[bytes], keys: Sequence[str]) -> list[list[str]]:
  """Columns ``keys`` of serialized tf.train.Example records holding one string each.

  This is what tfds's NumPy decoder does for ``Text`` features, minus its generic per-feature
  machinery, which costs about 100 us per record (10 s for the 94,502 training lines).
  """
  from tensorflow_datasets.proto import tf_example_pb2  # pylint: disable=g-import-not-at-top
  parse = tf_example_pb2.Example.FromString
  columns = [[] for _ in keys]
  for record in records:
    feature = parse(record).features.feature
    for column, key in zip(columns, keys):
      column.append(feature[key].bytes_list.value[0].decode("utf-8"))
  return columns


def load_text(name: str = "shakespeare", split: str = "train",
              data_dir: str | os.PathLike | None = None) -> TextCorpus:
  """A text corpus, one line of speech per entry; see :mod:`dpaudit.data.builders`.

  Args:
    name: one of :data:`TEXT_DATASETS` (``'shakespeare'``).
    split: ``'train'`` (32 plays) or ``'test'`` (the 6 plays of
      :data:`dpaudit.data.sources.SHAKESPEARE_TEST_PLAYS`), or a tfds slice of them.
    data_dir: as for :func:`load`; the corpus is prepared there on first use (about 10 s).

  Returns:
    The :class:`TextCorpus`, lines in the order of the plays (sorted by genre, then play).
  """
  _validate.check_choice("name", name, TEXT_DATASETS)
  _check_split(split)
  builder = builders.prepare(name, builders.resolve_data_dir(data_dir))
  try:
    source = builder.as_data_source(
        split=split, deserialize_method=tfds.decode.DeserializeMethod.RAW_BYTES)
  except ValueError as error:
    raise ValueError(f"split={split!r} is not valid for dataset {name!r}: {error}") from None
  texts, plays, speakers = _parse_text_records(_read_all(source), ("text", "play", "speaker"))
  info = sources.SOURCES[name]
  return TextCorpus(name=name, split=split, texts=texts, plays=plays, speakers=speakers,
                    source=info.origin, licence=info.licence)
