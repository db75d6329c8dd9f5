"""VADER's sentiment lexicon as a human-labelled text classification set (offline).

The ``vaderSentiment`` package (MIT licence; Hutto & Gilbert, ICWSM 2014) ships
``vader_lexicon.txt``: about 7,500 tokens, each rated for valence by ten human raters on a
-4..4 scale. Words (alphabetic tokens) whose mean rating is at least ``min_abs_valence`` away
from 0 make a two-class set, positive (1) or negative (0): the offline default of PromptPATE's
text classification (Chadha et al., Sec. 5.3 use SST-2, AG News, TREC and DBPedia).
"""

from __future__ import annotations

import importlib.util
import os
from typing import NamedTuple

import numpy as np

from dpaudit import _validate

LABEL_WORDS = ("negative", "positive")


class WordSet(NamedTuple):
  words: tuple[str, ...]
  labels: np.ndarray  # int32: 1 positive, 0 negative
  valence: np.ndarray  # float64 mean human rating


def vader_lexicon_path() -> str:
  spec = importlib.util.find_spec("vaderSentiment")
  if spec is None or spec.origin is None:
    raise ValueError("the VADER lexicon comes from the PyPI package vaderSentiment, which is not "
                     "installed; run `pip install vaderSentiment==3.3.2`")
  return os.path.join(os.path.dirname(spec.origin), "vader_lexicon.txt")


def load_vader_words(min_abs_valence: float = 1.5, seed: int = 0) -> WordSet:
  """The lexicon's alphabetic words with ``|mean valence| >= min_abs_valence``, in an order
  shuffled by ``seed`` (so that a prefix is a random sample)."""
  _validate.check_range("min_abs_valence", min_abs_valence, 0.0, 4.0)
  words, valence = [], []
  with open(vader_lexicon_path(), encoding="utf-8") as f:
    for line in f:
      parts = line.rstrip("\n").split("\t")
      if len(parts) < 2 or not parts[0].isalpha():
        continue
      value = float(parts[1])
      if abs(value) >= min_abs_valence:
        words.append(parts[0])
        valence.append(value)
  order = np.random.default_rng(seed).permutation(len(words))
  valence_arr = np.asarray(valence)[order]
  return WordSet(tuple(words[i] for i in order), (valence_arr > 0).astype(np.int32), valence_arr)
