"""dpaudit.data.text_classification: the offline VADER set and the tfds text sets (SST-2,
AG News, TREC) read under tfds.testing.mock_data, with the errors a user meets."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from dpaudit.data import text_classification as tc


def test_vader_is_a_shuffled_two_class_word_set():
  words = tc.load_text_classification("vader", seed=0)
  assert words.class_names == ("negative", "positive") and words.num_classes == 2
  assert len(words) > 1000 and words.labels.dtype == np.int32
  assert all(w.isalpha() for w in words.texts[:50])
  assert 0.3 < words.labels.mean() < 0.7
  assert words.item == "Word" and words.answer == "Sentiment"
  assert tc.load_text_classification("vader", seed=1).texts != words.texts
  half = words.take(range(10), "train[:10]")
  assert half.texts == words.texts[:10] and half.split == "train[:10]"
  with pytest.raises(ValueError, match="assignment destination is read-only"):
    words.labels[0] = 1


@pytest.mark.parametrize("name,num_classes", [("sst2", 2), ("ag_news", 4), ("trec", 6)])
def test_catalog_sets_under_mock_data(tmp_path, name, num_classes):
  with tfds.testing.mock_data(num_examples=6):
    train = tc.load_text_classification(name, "train", data_dir=tmp_path)
    test = tc.load_text_classification(name, "test[:4]", data_dir=tmp_path)
  # mock_data ignores slices; the name and the split mapping (SST-2's test is validation) hold
  assert len(train) == 6 and test.split == "test[:4]" and test.num_classes == num_classes
  assert train.num_classes == num_classes == len(set(train.class_names))
  assert all(isinstance(t, str) and t for t in train.texts)
  assert train.labels.dtype == np.int32 and train.labels.max() < num_classes
  if name == "ag_news":  # title and description, joined
    assert all(". " in t for t in train.texts)
  assert train.description and train.item and train.answer == "Answer"


def test_catalog_set_not_prepared_says_how(tmp_path):
  with pytest.raises(ValueError, match=r"not prepared.*tfds build glue/sst2"):
    tc.load_text_classification("sst2", data_dir=tmp_path)


@pytest.mark.parametrize("args,match", [
    (("dbpedia",), "no tensorflow-datasets builder"),
    (("imdb",), "name"),
    (("trec", "validation"), "split='validation' is not valid for 'trec'"),
    (("vader", "test"), "one split"),
])
def test_bad_names_and_splits(tmp_path, args, match):
  with pytest.raises(ValueError, match=match):
    tc.load_text_classification(*args, data_dir=tmp_path)
