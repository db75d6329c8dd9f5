"""Labelled text classification sets for PromptPATE and Private-kNN on text (Chadha et al.,
"Auditing Private Prediction", Sec. 5.3 and App. E.2-E.3), with the task wording a teacher's
prompt needs.

* ``vader`` (offline): VADER's human-rated words, positive or negative
  (:mod:`dpaudit.data.lexicon`); one split, ``train``, shuffled by ``seed``.
* ``sst2``, ``ag_news`` and ``trec``: the tfds catalog sets ``glue/sst2``, ``ag_news_subset``
  and ``trec`` (coarse labels), read through ``tfds.data_source`` like the catalog image sets
  of :mod:`dpaudit.data.loading`: a user prepares them once (``tfds build <name>
  --file_format=array_record`` on a machine with internet access) and copies the directory
  over; until then :func:`load_text_classification` raises a ValueError that says how. SST-2's
  ``test`` split has no labels, so its ``validation`` split serves as ``test``.

The paper's fourth set, DBPedia, has no tensorflow-datasets builder, so it cannot be read this
way.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from dpaudit import _validate
from dpaudit.data import builders, loading


class _Catalog(NamedTuple):
  tfds_name: str
  text_keys: tuple[str, ...]  # joined with ". " when more than one
  label_key: str
  splits: dict[str, str]  # dpaudit split -> tfds split
  class_names: tuple[str, ...]  # the words a teacher answers with (distinct first tokens)
  description: str  # the task, as a teacher's prompt states it
  item: str  # what one example is called in a prompt ("Text", "Question", ...)
  origin: str
  licence: str
  module: str | None = None  # the tfds module that registers the builder, if not loaded lazily


_CATALOG = {
    "sst2": _Catalog(
        "glue/sst2", ("sentence",), "label", {"train": "train", "test": "validation"},
        ("negative", "positive"),
        "Classify the sentiment of the movie review sentence as negative or positive.",
        "Review", "Stanford Sentiment Treebank (Socher et al. 2013), via GLUE",
        "see https://nlp.stanford.edu/sentiment/ (research use)", "tensorflow_datasets.text.glue"),
    "ag_news": _Catalog(
        "ag_news_subset", ("title", "description"), "label", {"train": "train", "test": "test"},
        ("World", "Sports", "Business", "Science"),
        "Classify the news article by topic as World, Sports, Business or Science.",
        "Article", "AG's news corpus (Zhang et al. 2015)", "non-commercial research use"),
    "trec": _Catalog(
        "trec", ("text",), "label-coarse", {"train": "train", "test": "test"},
        ("Abbreviation", "Entity", "Description", "Person", "Location", "Number"),
        "Classify what the question asks for as Abbreviation, Entity, Description, Person, "
        "Location or Number.",
        "Question", "TREC question classification (Li & Roth 2002)", "research use"),
}
OFFLINE = ("vader",)
CATALOG = tuple(_CATALOG)
NAMES = OFFLINE + CATALOG


@dataclasses.dataclass(frozen=True, eq=False)
class TextClassification:
  """Texts with integer labels and the wording of the task.

  Attributes:
    name, split: as loaded (``split`` is dpaudit's: ``train`` or ``test``, or a slice).
    texts: one example each.
    labels: int32 ``(N,)`` in ``0 .. len(class_names) - 1``.
    class_names: the word of each class, as a teacher answers.
    description: the task, as the first line of a teacher's prompt.
    item: what one example is called in a prompt (``Word``, ``Review``, ``Question``, ...).
    answer: what precedes the class word in a prompt (``Answer``; ``Sentiment`` for VADER).
    source, licence: where the data come from and on what terms.
  """
  name: str
  split: str
  texts: tuple[str, ...]
  labels: np.ndarray
  class_names: tuple[str, ...]
  description: str
  item: str
  answer: str = "Answer"
  source: str = ""
  licence: str = ""

  def __post_init__(self):
    object.__setattr__(self, "texts", tuple(self.texts))
    labels = np.asarray(self.labels)
    if labels.dtype != np.int32 or labels.shape != (len(self.texts),):
      raise ValueError(f"labels must be int32 of shape ({len(self.texts)},), got {labels.dtype} "
                       f"of shape {labels.shape}")
    _validate.check_range("labels", labels, 0, len(self.class_names) - 1)
    labels = labels.view()
    labels.flags.writeable = False
    object.__setattr__(self, "labels", labels)

  def __len__(self) -> int:
    return len(self.texts)

  @property
  def num_classes(self) -> int:
    return len(self.class_names)

  def take(self, indices: Sequence[int], split: str | None = None) -> TextClassification:
    idx = np.asarray(indices, np.int64)
    return dataclasses.replace(self, split=self.split if split is None else split,
                               texts=tuple(self.texts[i] for i in idx),
                               labels=self.labels[idx])


def _vader(split: str, seed: int) -> TextClassification:
  from dpaudit.data import lexicon
  if split != "train":
    raise ValueError(f"split={split!r} is not valid for 'vader', which has one split, 'train' "
                     "(split it with TextClassification.take)")
  words = lexicon.load_vader_words(seed=seed)
  return TextClassification(
      name="vader", split=split, texts=words.words, labels=words.labels,
      class_names=lexicon.LABEL_WORDS,
      description="Is the sentiment of the word positive or negative?", item="Word",
      answer="Sentiment",
      source="VADER lexicon (Hutto & Gilbert 2014), PyPI vaderSentiment", licence="MIT")


def _text(value) -> str:
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def load_text_classification(name: str, split: str = "train",
                             data_dir: str | os.PathLike | None = None,
                             seed: int = 0) -> TextClassification:
  """A text classification set (see the module docstring).

  Args:
    name: one of :data:`NAMES`.
    split: ``train`` or ``test`` (``vader``: ``train`` only).
    data_dir: the tfds data directory of the catalog sets (as :func:`dpaudit.data.load`).
    seed: ``vader``'s shuffle.

  Raises:
    ValueError: an unknown name or split, or a catalog set that is not prepared (the message
      gives the command that prepares it).
  """
  if name == "dbpedia":
    raise ValueError("name='dbpedia' has no tensorflow-datasets builder, so dpaudit cannot read "
                     f"it; valid names: {', '.join(NAMES)}")
  _validate.check_choice("name", name, NAMES)
  if name == "vader":
    return _vader(split, seed)
  spec = _CATALOG[name]
  base = split.split("[", 1)[0]
  if base not in spec.splits:
    raise ValueError(f"split={split!r} is not valid for {name!r}; valid: "
                     f"{', '.join(spec.splits)} (tfds slices such as 'train[:1000]' work too)")
  tfds_split = spec.splits[base] + split[len(base):]
  if spec.module:  # tfds registers the GLUE builder only once its module is imported
    importlib.import_module(spec.module)
  data_dir = builders.resolve_data_dir(data_dir)
  # pylint: disable-next=protected-access
  source = loading._catalog_source(spec.tfds_name, tfds_split, data_dir)
  examples = loading._read_all(source)  # pylint: disable=protected-access
  if not examples:
    raise ValueError(f"split={split!r} of {name!r} holds no examples")
  texts = [". ".join(_text(e[key]).strip() for key in spec.text_keys) for e in examples]
  labels = np.fromiter((e[spec.label_key] for e in examples), np.int32, len(examples))
  return TextClassification(name=name, split=split, texts=texts, labels=labels,
                            class_names=spec.class_names, description=spec.description,
                            item=spec.item, source=spec.origin, licence=spec.licence)
