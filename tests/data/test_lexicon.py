"""The VADER lexicon as a labelled word set."""

import numpy as np
import pytest

from dpaudit.data import lexicon


def test_vader_words_are_alphabetic_and_labelled_by_their_valence():
  words = lexicon.load_vader_words(min_abs_valence=1.5, seed=0)
  assert len(words.words) == len(words.labels) == len(words.valence) > 3000
  assert all(w.isalpha() for w in words.words)
  assert np.all(np.abs(words.valence) >= 1.5)
  np.testing.assert_array_equal(words.labels, (words.valence > 0).astype(np.int32))
  index = {w: i for i, w in enumerate(words.words)}
  assert words.labels[index["congratulations"]] == 1 and words.labels[index["condemned"]] == 0
  other = lexicon.load_vader_words(min_abs_valence=1.5, seed=1)
  assert sorted(other.words) == sorted(words.words) and other.words != words.words
  assert len(lexicon.load_vader_words(min_abs_valence=3.0).words) < len(words.words)
  with pytest.raises(ValueError, match="min_abs_valence=5"):
    lexicon.load_vader_words(min_abs_valence=5)
