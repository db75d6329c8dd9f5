"""dpaudit.data.builders: local tfds builders prepare offline as array_record and read back."""

import os

import numpy as np
import pytest
import tensorflow_datasets as tfds

from dpaudit.data import builders, sources

EXPECTED = {  # name: ({split: num_examples}, num_classes or None)
    "digits": ({"train": 1797}, 10),
    "breast_cancer": ({"train": 569}, 2),
    "wine": ({"train": 178}, 3),
    "mnist_subset": ({"train": 5000}, 10),
    "shakespeare": ({"train": 94502, "test": 15791}, None),
    "adult": ({"train": 32561, "test": 16281}, 2),
    "california_housing": ({"train": 20640}, None),
    "heart_failure": ({"train": 299}, 2),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_builder_prepares_with_info_and_splits(name, data_dir):
  builder = builders.prepare(name, data_dir)
  assert builder.is_prepared()
  assert builder.data_dir == os.path.join(data_dir, builder.name, "1.0.0")
  info = builder.info
  assert info.file_format == tfds.core.FileFormat.ARRAY_RECORD
  assert info.disable_shuffling
  assert info.citation and info.homepage and info.description
  assert info.redistribution_info.license == sources.SOURCES[name].licence
  splits, num_classes = EXPECTED[name]
  assert {split: info.splits[split].num_examples for split in info.splits} == splits
  if num_classes is not None:
    assert info.features["label"].num_classes == num_classes
  for split, count in splits.items():
    assert len(builder.as_data_source(split=split)) == count


def test_prepare_twice_reuses_the_prepared_copy(data_dir):
  first = builders.prepare("wine", data_dir)
  files = sorted(os.listdir(first.data_dir))
  stamp = os.path.getmtime(os.path.join(first.data_dir, "dataset_info.json"))
  second = builders.prepare("wine", data_dir)
  assert sorted(os.listdir(second.data_dir)) == files
  assert os.path.getmtime(os.path.join(second.data_dir, "dataset_info.json")) == stamp


def test_digits_records_equal_sklearn_in_order(data_dir):
  images, labels, _ = sources.read_sklearn("digits")
  source = builders.prepare("digits", data_dir).as_data_source(split="train")
  examples = source.__getitems__(list(range(len(source))))
  np.testing.assert_array_equal(np.stack([e["image"] for e in examples]), images)
  np.testing.assert_array_equal([e["label"] for e in examples], labels)


def test_shakespeare_splits_by_play(data_dir):
  builder = builders.prepare("shakespeare", data_dir)
  test = builder.as_data_source(split="test")
  test_plays = {test[i]["play"].decode() for i in range(0, len(test), 97)}
  assert test_plays == set(sources.SHAKESPEARE_TEST_PLAYS)
  first = builder.as_data_source(split="train")[0]
  assert {k: v.decode() for k, v in first.items()} == {
      "text": "Now, fair Hippolyta, our nuptial hour", "play": "a-midsummer-night-s-dream",
      "speaker": "THESEUS"}


def test_builders_are_registered_with_tfds(data_dir):
  builders.prepare("wine", data_dir)
  source = tfds.data_source("sklearn_wine", split="train", data_dir=data_dir, download=False)
  assert len(source) == 178


def test_data_dir_resolution(monkeypatch, tmp_path):
  monkeypatch.setenv(builders.DATA_DIR_ENV, str(tmp_path / "env"))
  assert builders.default_data_dir() == str(tmp_path / "env")
  assert builders.resolve_data_dir(None) == str(tmp_path / "env")
  monkeypatch.delenv(builders.DATA_DIR_ENV)
  assert builders.default_data_dir() == os.path.expanduser("~/.cache/dpaudit/tensorflow_datasets")
  assert builders.resolve_data_dir("~/x") == os.path.expanduser("~/x")
  with pytest.raises(ValueError, match="data_dir=''"):
    builders.resolve_data_dir("")
  with pytest.raises(ValueError, match="name='iris' is not one of"):
    builders.builder("iris", tmp_path)


def test_preparing_a_dataset_prints_nothing_on_stdout(tmp_path, capsys):
  """tfds' "Downloading and preparing dataset ..." lines go to stderr: stdout is the
  experiments' results, and nothing is downloaded."""
  builders.prepare("wine", tmp_path)
  out, err = capsys.readouterr()
  assert out == "" and "preparing dataset" in err
