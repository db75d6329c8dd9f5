r"""PANORAMIA's study (Kazmi et al. 2024, Tables 3-5, 7, 8): many targets, one audit setup each
repetition, side by side with the O(1) audit of Steinke et al.

The real data of one modality are split once per repetition: ``num_canaries`` candidates each
join the targets' training set with probability 1/2 (the O(1) audit with real members and real
non-members, RM/RN); every other example is a member. :func:`dpaudit.audits.panoramia.prepare_audit`
runs Alg. 1 up to the MIA once (generator on :math:`D_G`, helpers, the baselines of Table 3);
then each target of :attr:`StudyConfig.targets` is trained and audited
(:func:`~dpaudit.audits.panoramia.measure_target`): c_lb of the strongest baseline, {c+eps}_lb,
eps~ with its null reference, O(1) RM/GN and RM/RN, PANORAMIA's own RM;RN variant on the same
candidates (:func:`~dpaudit.audits.panoramia.measure_real_nonmembers`: real non-members, no
baseline, c_lb = 0; Table 4), and for DP targets the accountant's epsilon.
:func:`classifier_config` gives the paper's classifiers (gradient-boosted trees for tables).
Targets: ``eN`` trains N epochs without privacy (Table 4's E20/E50/E100), ``dpX`` trains
``dp_epochs`` epochs with DP-SGD at epsilon X (``dpinf``: the same schedule without clipping or
noise; Tables 5, 7, 8). Image targets and helpers are any classifier
(:func:`dpaudit.audits.panoramia_modalities.image_classifier`: LeNet-5 by default, ResNet-18 or
WRN-16-4 as in Tables 5, 7 and 8, or a flax module).

:func:`run` is the game contract's entry point; every finished stage is kept in a
:class:`dpaudit.results.CellStore` (the audit setup as an ``.npz``, each target as a cell through
:func:`dpaudit.results.run_cells`), so an interrupted study resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import numpy as np

from dpaudit import _validate, results
from dpaudit.accounting import dpsgd as accounting
from dpaudit.attacks import panoramia as attacks
from dpaudit.audits import panoramia as pan
from dpaudit.audits import panoramia_modalities as mod
from dpaudit.prng import make_key

DATASETS = ("mnist_subset", "mnist", "fashion_mnist", "cifar10")
DEFAULT_MAX_EXAMPLES = {"image": 0, "tabular": 12000, "text": 6000}
MEASUREMENT_FIELDS = ("significance", "correction", "delta", "null_samples")
"""PanoramiaConfig settings that change the bounds, not the audit setup: they key the target
cells only."""
TARGET_SUMMARY = ("c_lb", "c_plus_eps_lb", "eps_tilde", "eps_tilde_p_value", "mia_auc",
                  "one_run_rm_rn", "one_run_rm_gn", "one_run_rm_rn_fdp", "one_run_rm_rn_fdp_mu",
                  "one_run_rm_gn_fdp", "one_run_rm_gn_fdp_mu", "panoramia_rm_rn",
                  "panoramia_rm_rn_mia_auc")
"""The per-target numbers summarised over repetitions (:func:`dpaudit.results.spread`)."""
DEFAULT_MODEL = "lenet5"
TABULAR_CLASSIFIERS = ("gbt", "mlp")
"""The tabular baseline and MIA: gradient-boosted trees (the paper's, App. B.3) or the network
of :class:`~dpaudit.attacks.panoramia.ClassifierConfig`."""
TEXT_SAMPLER = (8, 0, 0.9)
"""The text generator's default (prompt length in characters, top-k, top-p); the paper's is
(64 tokens, 200, 1.0), see :class:`StudyConfig`."""
MIN_RM_RN_CANARIES = 8
"""Candidates the RM;RN variant needs at the least (half train its MIA, half are audited)."""


def _study_panoramia() -> pan.PanoramiaConfig:
  return pan.PanoramiaConfig(baseline_helpers=("generated", "real", "none"))


@dataclasses.dataclass(frozen=True)
class StudyConfig:
  """Settings of a PANORAMIA study (the defaults are ``experiments.panoramia``'s).

  Attributes:
    modality: "image", "tabular" (Adult) or "text" (Shakespeare lines).
    targets: names ``eN`` (N epochs, non-private) or ``dpX`` (DP-SGD at epsilon X; inf allowed).
    dataset: image data (:data:`DATASETS`); data_dir: where the data are.
    max_examples: at most this many real examples (0: all; -1: the modality's default).
    num_canaries: candidates of the O(1) RM/RN audit, each trained on w.p. 1/2 (0: none).
    generator_epochs, helper_epochs: epochs of the generator (VAE or LM) and of the helper.
    image_logit_scale: the image generator's samples are sigmoid(scale x the VAE decoder's
      logits) (:func:`~dpaudit.audits.panoramia_modalities.image_generator`): 1 gives its
      blurred Bernoulli means, 2 sharpens them to MNIST's share of grey pixels.
    mst_epsilon, mst_iters: the MST generator (tabular). The paper sets epsilon = 1000 (App.
      B.3; the authors' code uses 10000): MST without meaningful privacy.
    tabular_hidden_sizes: the tabular target's and helper's hidden widths (default the
      paper's 150-100-50-10, App. B.3).
    dp_epochs, dp_delta: epochs and accountant delta of the ``dpX`` targets.
    target_learning_rate, target_batch_size: Adam step size and expected batch size of
      targets and helpers.
    text_max_length, text_hidden_size: text lines and character LMs.
    prompt_length, top_k, top_p: the text generator's prompts (characters, at most a line's
      length - 1) and sampling filters (:func:`~dpaudit.audits.panoramia_modalities.
      text_generator`). The paper (App. B.2) prompts GPT-2 with 64 tokens and samples with
      top-k 200 and top-p 1; the defaults here (8 characters, no top-k, top-p 0.9) suit
      character lines shorter than ``text_max_length``, which a 64-character prompt would
      copy whole from :math:`D_G` (members).
    rm_rn: also run PANORAMIA's RM;RN variant (Sec. 5.2, Table 4) on the O(1) candidates:
      :func:`dpaudit.audits.panoramia.measure_real_nonmembers` (needs ``num_canaries`` >=
      :data:`MIN_RM_RN_CANARIES`).
    target_model, helper_model: image classifiers, a :data:`dpaudit.models.MODEL_NAMES` name or
      a flax module (only ``"lenet5"`` for the other modalities, whose models are fixed).
    seed: the first repetition's seed; :func:`run`'s key is ``make_key(seed)``.
    repetitions: repetition i is the study at seed ``seed + i`` (key ``make_key(seed + i)``).
    panoramia: sizes, baselines, classifier, significance, correction, delta, null samples.
  """
  modality: str = "image"
  targets: tuple[str, ...] = ("e20", "e50", "e100")
  dataset: str = "mnist_subset"
  data_dir: str | None = None
  max_examples: int = -1
  num_canaries: int = 1000
  generator_epochs: int = 30
  helper_epochs: int = 20
  image_logit_scale: float = 1.0
  mst_epsilon: float = 1000.0
  mst_iters: int = 1000
  tabular_hidden_sizes: tuple[int, ...] = mod.PAPER_TABULAR_HIDDEN
  dp_epochs: float = 20.0
  dp_delta: float = 1e-5
  target_learning_rate: float = 1e-3
  target_batch_size: int = 64
  text_max_length: int = 64
  text_hidden_size: int = 256
  prompt_length: int = TEXT_SAMPLER[0]
  top_k: int = TEXT_SAMPLER[1]
  top_p: float = TEXT_SAMPLER[2]
  rm_rn: bool = True
  target_model: Any = DEFAULT_MODEL
  helper_model: Any = DEFAULT_MODEL
  seed: int = 0
  repetitions: int = 1
  panoramia: pan.PanoramiaConfig = dataclasses.field(default_factory=_study_panoramia)

  def __post_init__(self):
    _validate.check_choice("modality", self.modality, mod.MODALITIES)
    _validate.check_choice("dataset", self.dataset, DATASETS)
    if isinstance(self.targets, str):
      raise ValueError(f"targets={self.targets!r} must be a sequence of target names")
    object.__setattr__(self, "targets", tuple(self.targets))
    _validate.check_nonempty("targets", self.targets)
    if len(set(self.targets)) != len(self.targets):
      raise ValueError(f"targets={list(self.targets)} names a target twice")
    for name in ("max_examples", "num_canaries", "generator_epochs", "helper_epochs",
                 "mst_iters", "target_batch_size", "text_max_length", "text_hidden_size",
                 "repetitions"):
      low = {"max_examples": -1, "num_canaries": 0, "text_max_length": 2}.get(name, 1)
      _validate.check_integer(name, getattr(self, name), low)
    _validate.check_integer("prompt_length", self.prompt_length, 0, self.text_max_length)
    _validate.check_integer("top_k", self.top_k, 0)
    _validate.check_range("top_p", self.top_p, 0.0, 1.0, low_open=True)
    _validate.check_instance("rm_rn", self.rm_rn, (bool, np.bool_), "bool")
    widths = self.tabular_hidden_sizes
    if isinstance(widths, (str, bytes)) or not hasattr(widths, "__iter__") or not len(widths):
      raise ValueError(f"tabular_hidden_sizes={widths!r} must be a non-empty sequence of widths")
    object.__setattr__(self, "tabular_hidden_sizes", tuple(
        _validate.check_integer("tabular_hidden_sizes", w, 1, 1 << 16) for w in widths))
    _validate.check_integer("seed", self.seed, 0, 2**63 - 1)
    if self.seed + self.repetitions > 2**63:
      raise ValueError(f"seed={self.seed} with repetitions={self.repetitions} is outside the "
                       "valid range: seeds must lie in [0, 2^63)")
    _validate.check_range("mst_epsilon", self.mst_epsilon, 0.0, None, low_open=True)
    _validate.check_range("image_logit_scale", self.image_logit_scale, 0.0, None,
                          low_open=True, finite=True)
    _validate.check_range("dp_epochs", self.dp_epochs, 0.0, None, low_open=True, finite=True)
    for name in ("target_model", "helper_model"):
      model = getattr(self, name)
      if not isinstance(model, (str, nn.Module)):
        raise ValueError(f"{name} must be a model name or a flax module, got "
                         f"{type(model).__name__}")
      if isinstance(model, str):
        _validate.check_choice(name, model, mod.models.MODEL_NAMES)
      if self.modality != "image" and model != DEFAULT_MODEL:
        raise ValueError(f"{name}={_model_name(model)!r} applies to modality='image' only "
                         f"(modality={self.modality!r} has its own models)")
    _validate.check_instance("panoramia", self.panoramia, pan.PanoramiaConfig)
    for name in self.targets:
      self.train_spec(name)

  def train_spec(self, name: str) -> mod.TrainSpec:
    """Target ``eN`` or ``dpX`` as a :class:`~dpaudit.audits.panoramia_modalities.TrainSpec`."""
    common = dict(batch_size=self.target_batch_size, learning_rate=self.target_learning_rate,
                  delta=self.dp_delta)
    try:
      if isinstance(name, str) and name.startswith("dp"):
        return mod.TrainSpec(epochs=self.dp_epochs, epsilon=float(name[2:]), **common)
      if isinstance(name, str) and name.startswith("e"):
        return mod.TrainSpec(epochs=float(name[1:]), **common)
    except ValueError as error:
      if "could not convert" not in str(error):
        raise ValueError(f"target={name}: {error}") from None
    raise ValueError(f"target={name!r} must be eN (N > 0 epochs) or dpX (epsilon X > 0 or inf)")

  def helper_spec(self) -> mod.TrainSpec:
    return mod.TrainSpec(epochs=self.helper_epochs, batch_size=self.target_batch_size,
                         learning_rate=self.target_learning_rate)


def _model_name(model: Any) -> str:
  """A model's name in cell keys: the name itself, or the module's repr (its attributes)."""
  return model if isinstance(model, str) else repr(model)


class StudyData(NamedTuple):
  """What :func:`load` gives: every real example, the target's model spec, the audit's
  modality and the text vocabulary (None for images and tables)."""
  examples: pan.Examples
  spec: mod.ModelSpec
  modality: pan.Modality
  vocab: Any


def load(config: StudyConfig) -> StudyData:
  """The modality's real examples, target spec and modality; ValueError (naming the setting)
  when the data are too few for ``num_canaries`` and the audit's splits, before any work."""
  _validate.check_instance("config", config, StudyConfig)
  _check_rm_rn(config)  # needs no data: before any is loaded or prepared
  from dpaudit import data  # pylint: disable=g-import-not-at-top
  from dpaudit.mechanisms import mst  # pylint: disable=g-import-not-at-top
  from dpaudit.models import ngram, vae  # pylint: disable=g-import-not-at-top
  helper = config.helper_spec()
  if config.modality == "image":
    ds = data.load(config.dataset, "train", data_dir=config.data_dir)
    examples = pan.Examples(ds.features, ds.labels)
    shape = ds.features.shape[1:]
    modality = mod.image_modality(shape, ds.num_classes,
                                  vae.VaeConfig(epochs=config.generator_epochs), helper,
                                  model=config.helper_model,
                                  logit_scale=config.image_logit_scale)
    spec, vocab = mod.image_spec(shape, ds.num_classes, config.target_model), None
  elif config.modality == "tabular":
    ds = data.load("adult", "train", data_dir=config.data_dir)
    examples = pan.Examples(ds.features, ds.labels)
    modality = mod.tabular_modality(mst.MstConfig(epsilon=config.mst_epsilon,
                                                  iters=config.mst_iters), helper,
                                    hidden_sizes=config.tabular_hidden_sizes)
    spec = mod.tabular_spec(mod.adult_binnings()[:-1], hidden_sizes=config.tabular_hidden_sizes)
    vocab = None
  else:
    corpus = data.load_text("shakespeare", "train", data_dir=config.data_dir)
    lines = sorted({t for t in corpus.texts if 8 <= len(t) < config.text_max_length})
    vocab = ngram.CharVocab.from_texts(lines)
    examples = mod.text_examples(vocab, lines, config.text_max_length)
    generator = dataclasses.replace(helper, epochs=config.generator_epochs)
    modality = mod.text_modality(vocab, generator, helper, hidden_size=config.text_hidden_size,
                                 prompt_length=config.prompt_length, top_p=config.top_p,
                                 top_k=config.top_k)
    spec = mod.text_spec(vocab, hidden_size=config.text_hidden_size)
  limit = _limit(config)
  size = min(limit, len(examples)) if limit else len(examples)
  if not config.num_canaries <= size - 2:
    raise ValueError(f"num_canaries={config.num_canaries} must be in [0, {size - 2}]")
  config.panoramia.split_sizes(size - config.num_canaries)
  return StudyData(examples, spec, modality, vocab)


def _check_rm_rn(config: StudyConfig) -> None:
  """RM;RN audits the O(1) candidates: ValueError when there are too few."""
  if config.rm_rn and config.num_canaries < MIN_RM_RN_CANARIES:
    raise ValueError(f"num_canaries={config.num_canaries}: the RM;RN variant needs at least "
                     f"{MIN_RM_RN_CANARIES} candidates (its real members and non-members); "
                     "add candidates or turn it off (rm_rn=False, --norm_rn)")


def classifier_config(modality: str, tabular_classifier: str = "gbt", epochs: int = 20
                      ) -> attacks.ClassifierConfig | attacks.GBTConfig:
  """The baseline's and the MIA's classifier for ``modality``: for tables the paper's
  gradient-boosted trees over Adult's columns (``tabular_classifier="gbt"``, App. B.3) or the
  network (``"mlp"``); for images and text the network over the modality's encoder, trained
  ``epochs`` epochs.

  >>> classifier_config("tabular").categorical[:3]
  (False, True, False)
  """
  _validate.check_choice("modality", modality, mod.MODALITIES)
  _validate.check_choice("tabular_classifier", tabular_classifier, TABULAR_CLASSIFIERS)
  epochs = _validate.check_integer("epochs", epochs, 1)
  if modality == "tabular" and tabular_classifier == "gbt":
    return attacks.GBTConfig(categorical=mod.categorical_columns(mod.adult_binnings()[:-1]))
  return attacks.ClassifierConfig(epochs=epochs)


def _limit(config: StudyConfig) -> int:
  return (config.max_examples if config.max_examples >= 0
          else DEFAULT_MAX_EXAMPLES[config.modality])


@dataclasses.dataclass(frozen=True)
class StudyResult:
  """A finished study.

  Attributes:
    config: the run's configuration as plain data (``results.json``'s ``config``).
    repetitions: ``[{"seed", "cells": {target: cell}}]``; a cell is
      :meth:`PanoramiaResult.to_dict` plus ``one_run_rm_rn`` and beside it the f-DP bound
      of the same guesses ``one_run_rm_rn_fdp`` and its ``one_run_rm_rn_fdp_mu``
      (:func:`dpaudit.audits.panoramia.one_run_real_bounds`), ``loss_gap_real`` (with
      canaries), with ``rm_rn`` PANORAMIA RM;RN's ``panoramia_rm_rn`` (its epsilon lower
      bound, c_lb = 0), ``panoramia_rm_rn_mia_auc`` and ``panoramia_rm_rn_num_audit``,
      ``noise_multiplier``, ``accountant_epsilon`` and ``seconds``.
    summary: per target and per baseline helper, the spread over repetitions (:meth:`tables`).
    preview: the first repetition's generated non-members (up to 100; None after
      :meth:`from_dict`), for :func:`dpaudit.plots.panoramia_samples`.
    vocab: the text vocabulary (None for images and tables, and after :meth:`from_dict`).
  """
  config: dict[str, Any]
  repetitions: list[dict[str, Any]]
  summary: dict[str, Any]
  preview: pan.Examples | None = dataclasses.field(default=None, compare=False)
  vocab: Any = dataclasses.field(default=None, compare=False)

  @property
  def cells(self) -> dict[str, Any]:
    """The first repetition's cells."""
    return self.repetitions[0]["cells"]

  def to_dict(self) -> dict[str, Any]:
    return {"cells": self.cells, "repetitions": self.repetitions, "summary": self.summary}

  @classmethod
  def from_dict(cls, values: dict[str, Any], config: dict[str, Any] | None = None
                ) -> StudyResult:
    """The result :meth:`to_dict` wrote, every cell checked (:func:`check_cell`)."""
    for repetition in values["repetitions"]:
      for cell in repetition["cells"].values():
        check_cell(cell)
    return cls(dict(config or {}), list(values["repetitions"]), dict(values["summary"]))

  def tables(self) -> str:
    """Table 3 (baselines by helper) and Table 4/5/7/8 (every target, its null reference and
    the O(1) audits side by side); each number the median [min, max] over the repetitions."""
    return _tables(self.repetitions, self.summary)


def check_cell(cell: Any) -> None:
  """A stored target cell is whole: :meth:`PanoramiaResult.from_dict` accepts it and the
  study's own entries are there and valid (ValueError, KeyError or TypeError otherwise: the
  cell store then computes it again)."""
  if not isinstance(cell, dict):
    raise ValueError(f"cell must be a dict, got {type(cell).__name__}")
  pan.PanoramiaResult.from_dict(cell)
  for name in ("noise_multiplier", "accountant_epsilon", "seconds"):
    value = cell[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or (
        value < 0):
      raise ValueError(f"{name}={value!r} must be a number >= 0")
  if "panoramia_rm_rn" in cell:
    for name, high in (("panoramia_rm_rn", math.inf), ("panoramia_rm_rn_mia_auc", 1.0)):
      value = cell[name]
      if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
          0 <= value <= high) or math.isinf(value):
        raise ValueError(f"{name}={value!r} must be a finite number in [0, {high}]")
    _validate.check_integer("panoramia_rm_rn_num_audit", cell["panoramia_rm_rn_num_audit"], 2)
  if "one_run_rm_rn" in cell:
    value = cell["one_run_rm_rn"]
    if not isinstance(value, (int, float)) or not 0 <= value < math.inf:
      raise ValueError(f"one_run_rm_rn={value!r} must be a finite number >= 0")
  for name, most in (("one_run_rm_rn_fdp", math.inf), ("one_run_rm_rn_fdp_mu", math.nan)):
    value = cell.get(name, 0.0)  # absent in cells stored before the f-DP bound
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value or (
        value == math.inf and most != math.inf):
      raise ValueError(f"{name}={value!r} must be a number >= 0"
                       + ("" if most == math.inf else " and finite"))


def _setup_arrays(setup: pan.AuditSetup) -> dict[str, np.ndarray]:
  arrays = {"train_inputs": setup.train_set.inputs, "train_labels": setup.train_set.labels,
            "train_member": setup.train_member, "audit_inputs": setup.audit.inputs,
            "audit_labels": setup.audit.labels, "is_member": setup.is_member,
            "preview_inputs": setup.generated_preview.inputs,
            "preview_labels": setup.generated_preview.labels}
  arrays.update({f"baseline_{h}": s for h, s in setup.baseline_scores.items()})
  return arrays


def _setup_from(arrays, config: pan.PanoramiaConfig) -> pan.AuditSetup | None:
  """The stored audit setup, or None when the file is not a whole setup of this configuration
  (a missing baseline, arrays of the wrong lengths: it is then prepared again)."""
  helpers = config.baseline_helpers
  try:
    num_train = 2 * config.num_classifier_train
    lengths = {"train_inputs": num_train, "train_labels": num_train, "train_member": num_train,
               "audit_inputs": config.num_audit, "audit_labels": config.num_audit,
               "is_member": config.num_audit,
               **{f"baseline_{h}": config.num_audit for h in helpers}}
    for name, length in lengths.items():
      if len(arrays[name]) != length:
        return None
    if not np.all(np.isin(arrays["is_member"], (0, 1))):
      return None
    return pan.AuditSetup(
        pan.Examples(arrays["train_inputs"], arrays["train_labels"]), arrays["train_member"],
        pan.Examples(arrays["audit_inputs"], arrays["audit_labels"]), arrays["is_member"],
        {h: arrays[f"baseline_{h}"] for h in helpers},
        pan.Examples(arrays["preview_inputs"], arrays["preview_labels"]))
  except (KeyError, TypeError):
    return None


def _signature(config: StudyConfig, seed: int, num_examples: int) -> dict[str, Any]:
  """What the audit setup depends on (the key of its ``.npz`` and part of every cell's)."""
  out = {"modality": config.modality,
         "dataset": config.dataset if config.modality == "image"
         else {"tabular": "adult", "text": "shakespeare"}[config.modality],
         "num_examples": num_examples, "max_examples": _limit(config),
         "num_canaries": config.num_canaries, "seed": seed,
         "generator_epochs": config.generator_epochs, "helper_epochs": config.helper_epochs,
         "mst_epsilon": config.mst_epsilon, "mst_iters": config.mst_iters,
         "text_max_length": config.text_max_length,
         "text_hidden_size": config.text_hidden_size,
         "target_learning_rate": config.target_learning_rate,
         "target_batch_size": config.target_batch_size,
         "panoramia": {k: v for k, v in dataclasses.asdict(config.panoramia).items()
                       if k not in MEASUREMENT_FIELDS and not (k == "filter_fraction" and not v)}}
  # Absent at their old values: older stores still resume.
  if config.helper_model != DEFAULT_MODEL:
    out["helper_model"] = _model_name(config.helper_model)
  if config.modality == "image" and config.image_logit_scale != 1.0:
    out["image_logit_scale"] = config.image_logit_scale
  if config.modality == "tabular" and config.tabular_hidden_sizes != mod.WIDE_TABULAR_HIDDEN:
    out["tabular_hidden_sizes"] = list(config.tabular_hidden_sizes)
  sampler = (config.prompt_length, config.top_k, config.top_p)
  if config.modality == "text" and sampler != TEXT_SAMPLER:
    out["text_sampler"] = list(sampler)
  return out


def _repetition(key: jax.Array, seed: int, config: StudyConfig, data: StudyData, say, tick,
                store):
  """One repetition at ``seed`` (``key`` is ``make_key(seed)``): the shared setup, then one
  cell per target. Returns (the run's configuration, the cells by target, the setup)."""
  pc = config.panoramia
  key_split, key_setup, key_targets = jax.random.split(key, 3)
  examples, limit = data.examples, _limit(config)
  if limit:  # a random subset: the text lines are sorted, the tables in file order
    pick = np.asarray(jax.random.permutation(jax.random.fold_in(key, 7), len(examples)))
    examples = examples.take(np.sort(pick[:limit]))
  order = np.asarray(jax.random.permutation(key_split, len(examples)))
  candidates = examples.take(order[:config.num_canaries])
  included = np.asarray(jax.random.bernoulli(jax.random.fold_in(key_split, 1), 0.5,
                                             (config.num_canaries,))).astype(np.int32)
  members = examples.take(order[config.num_canaries:])
  pc.split_sizes(len(members))
  training_set = pan.concatenate(members, candidates.take(np.flatnonzero(included)))

  signature = _signature(config, seed, len(examples))
  setup = None
  if store is not None:
    setup_path = store.path(signature, "setup")[:-len(".json")] + ".npz"
    fingerprint = results.config_key(signature)
    stored = results.load_arrays(setup_path, fingerprint) if store.resume else None
    setup = _setup_from(stored, pc) if stored is not None else None
  if setup is not None:
    tick("audit setup (reused)")
  else:
    start = time.perf_counter()
    setup = pan.prepare_audit(key_setup, data.modality, members, pc, say)
    if store is not None:
      results.save_arrays(setup_path, fingerprint, _setup_arrays(setup))
    tick(f"audit setup ({time.perf_counter() - start:.0f} s)")

  def compute(name: str, train: mod.TrainSpec, cell_config: dict, index: int):
    start = time.perf_counter()
    scratch = store.scratch_dir(cell_config, name) if store is not None else None
    say(f"{name}: training the target on {len(training_set)} examples")
    key_target = jax.random.fold_in(key_targets, index)
    params, engine = mod.train_model(key_target, data.spec, training_set, train, scratch)
    loss = mod.loss_function(data.spec, params)
    out = pan.measure_target(jax.random.fold_in(key_target, 1), setup, data.modality, loss,
                             pc, say).to_dict()
    if config.num_canaries:
      bounds = pan.one_run_real_bounds(loss, candidates, included, pc.delta, pc.significance)
      out["one_run_rm_rn"] = bounds.epsilon
      out["one_run_rm_rn_fdp"] = bounds.epsilon_fdp_gaussian
      out["one_run_rm_rn_fdp_mu"] = bounds.mu_lower_bound
      losses = loss(candidates)
      out["loss_gap_real"] = float(losses[included == 0].mean() - losses[included == 1].mean())
    if config.rm_rn:
      say(f"{name}: PANORAMIA RM;RN on the {len(candidates)} candidates")
      real = pan.measure_real_nonmembers(jax.random.fold_in(key_target, 2), data.modality,
                                         loss, candidates, included, pc)
      out["panoramia_rm_rn"] = real.eps_lb
      out["panoramia_rm_rn_mia_auc"] = real.mia_auc
      out["panoramia_rm_rn_num_audit"] = real.num_audit
    out["noise_multiplier"] = engine.noise_multiplier
    out["accountant_epsilon"] = (math.inf if not engine.is_private else float(
        accounting.dpsgd_epsilon(engine.noise_multiplier, engine.sampling_rate,
                                 engine.num_steps, config.dp_delta)))
    out["seconds"] = time.perf_counter() - start
    return out

  targets = {name: config.train_spec(name) for name in config.targets}
  cells = []
  for index, (name, train) in enumerate(targets.items()):
    cell_config = {**signature, "target": dataclasses.asdict(train),
                   "measurement": {k: getattr(pc, k) for k in MEASUREMENT_FIELDS}}
    if config.target_model != DEFAULT_MODEL:
      cell_config["target_model"] = _model_name(config.target_model)
    if config.rm_rn:
      cell_config["rm_rn"] = True
    cells.append(results.Cell(name, cell_config, lambda n=name, t=train, c=cell_config,
                              i=index: compute(n, t, c, i)))
  done = results.run_cells(cells, store, lambda d, t, m: tick(m), check_cell)
  run_config = {**signature, "targets": {n: dataclasses.asdict(t) for n, t in targets.items()},
                **{k: getattr(pc, k) for k in MEASUREMENT_FIELDS}}
  if config.target_model != DEFAULT_MODEL:
    run_config["target_model"] = _model_name(config.target_model)
  return run_config, dict(zip(targets, done)), setup


def run(key: jax.Array, config: StudyConfig, *, progress: results.Progress | None = None,
        store: results.CellStore | None = None, data: StudyData | None = None) -> StudyResult:
  """Every repetition of the study, then the summary over them: repetition 0 plays with
  ``key``, repetition i > 0 with :func:`dpaudit.prng.make_key` of seed ``config.seed + i``
  (as a run at that seed with one repetition, so the cells of both are shared).

  Args:
    key: must be ``make_key(config.seed)`` (ValueError otherwise): the stored setups and cells
      are named by the seed, so that a study's old result directories keep resuming.
    config: :class:`StudyConfig`.
    progress: :class:`dpaudit.results.Progress`; the units are the stages (each repetition's
      setup and its targets), the message says which.
    store: keeps the setups and target cells (and resumes them); None computes everything.
    data: :func:`load`'s output for ``config`` (loaded here when None).
  """
  _validate.check_key(key)
  _validate.check_instance("config", config, StudyConfig)
  expected = make_key(config.seed)
  if key.dtype != expected.dtype or results.key_data(key) != results.key_data(expected):
    raise ValueError(f"key must be dpaudit.prng.make_key(config.seed={config.seed}): the "
                     "study's stored setups and cells are named by the seed")
  _validate.check_instance("store", store, (results.CellStore, type(None)))
  if data is not None:
    _validate.check_instance("data", data, StudyData)
  data = load(config) if data is None else data
  _check_rm_rn(config)
  seed = config.seed
  seeds = [seed + i for i in range(config.repetitions)]
  total, done = len(seeds) * (1 + len(config.targets)), [0]
  repetitions, first_setup, run_config = [], None, {}
  for i, s in enumerate(seeds):
    def say(message, s=s):
      results.report(progress, done[0], total, f"seed {s}: {message}")

    def tick(message, s=s):
      done[0] += 1
      results.report(progress, done[0], total, f"seed {s}: {message}")
    run_config, cells, setup = _repetition(key if i == 0 else make_key(s), s, config, data,
                                           say, tick, store)
    repetitions.append({"seed": s, "cells": cells})
    first_setup = first_setup or setup
  run_config = {**run_config, "seed": seed, "repetitions": config.repetitions, "seeds": seeds}
  return StudyResult(run_config, repetitions, _summarize(repetitions),
                     first_setup.generated_preview, data.vocab)


Config = StudyConfig
Result = StudyResult


def _summarize(repetitions) -> dict:
  """Per target, the spread over repetitions of each number of :data:`TARGET_SUMMARY`, of the
  null's 95th percentile, and how many repetitions measured an eps~ beyond the null; per
  helper, the spread of the baseline's c_lb and how often it was the strongest."""
  first = repetitions[0]["cells"]
  out = {"targets": {}, "baselines": {}}
  for name in first:
    cells = [r["cells"][name] for r in repetitions]
    summary = {k: results.spread([c[k] for c in cells]) for k in TARGET_SUMMARY
               if all(c.get(k) is not None for c in cells)}
    if all(c["null_eps_tilde"] for c in cells):
      summary["null_eps_tilde_q95"] = results.spread(
          [float(np.quantile(c["null_eps_tilde"]["values"], 0.95)) for c in cells])
      summary["beyond_null"] = int(sum(bool(c["beyond_null"]) for c in cells))
    summary["repetitions"] = len(cells)
    out["targets"][name] = summary
  baselines = [next(iter(r["cells"].values())) for r in repetitions]
  for helper in baselines[0]["baseline_c_lb"]:
    out["baselines"][helper] = {
        "c_lb": results.spread([b["baseline_c_lb"][helper] for b in baselines]),
        "auc": results.spread([b["baseline_auc"][helper] for b in baselines]),
        "strongest": int(sum(b["strongest_baseline"] == helper for b in baselines))}
  return out


def _fmt(value) -> str:
  return "inf" if value == math.inf else f"{value:.3f}"


def _tables(repetitions, summary) -> str:
  show = lambda s: results.format_spread(s, 3)  # noqa: E731
  n = len(repetitions)
  over = f" over {n} repetitions, median [min, max]" if n > 1 else ""
  lines = [f"Table 3: baselines{over} (c_lb: lower bound on the generator's closeness c; "
           "each baseline at beta/(2B))",
           f"  {'helper':<10} {'c_lb':<24} {'AUC':<24} strongest"]
  for helper, b in summary["baselines"].items():
    lines.append(f"  {helper:<10} {show(b['c_lb']):<24} {show(b['auc']):<24} "
                 f"{b['strongest']}/{n}")
  lines += ["", f"Table 4: targets{over}",
            f"  {'target':<7} {'c_lb':<22} {'{c+eps}_lb':<22} {'eps~':<22} "
            f"{'null eps~ q95':<22} {'p':<22} {'beyond null':<11} {'MIA AUC':<22} "
            f"{'PANORAMIA RM;RN':<22} {'O(1) RM/RN':<22} {'f-DP RM/RN':<25} "
            f"{'O(1) RM/GN':<22} {'f-DP RM/GN':<25} "
            "accountant eps"]
  first = repetitions[0]["cells"]
  for name, t in summary["targets"].items():
    get = lambda k: show(t[k]) if k in t else "-"  # noqa: E731
    beyond = f"{t['beyond_null']}/{n}" if "beyond_null" in t else "-"
    lines.append(f"  {name:<7} {get('c_lb'):<22} {get('c_plus_eps_lb'):<22} "
                 f"{get('eps_tilde'):<22} {get('null_eps_tilde_q95'):<22} "
                 f"{get('eps_tilde_p_value'):<22} {beyond:<11} {get('mia_auc'):<22} "
                 f"{get('panoramia_rm_rn'):<22} {get('one_run_rm_rn'):<22} "
                 f"{_fdp(t, 'one_run_rm_rn', show):<25} "
                 f"{get('one_run_rm_gn'):<22} {_fdp(t, 'one_run_rm_gn', show):<25} "
                 f"{_fmt(first[name]['accountant_epsilon'])}")
  optimistic = any(c["optimistic"] for r in repetitions for c in r["cells"].values())
  lines += ["",
            "c_lb, {c+eps}_lb: lower bounds holding jointly at 1 - significance"
            + (" (NOT valid: correction=none, the paper's optimistic maximum)" if optimistic
               else "") + "; c_lb is the strongest baseline's.",
            "eps~ = max(0, {c+eps}_lb - c_lb): a measurement, not a lower bound on epsilon; "
            "null eps~ q95: its 95th percentile for a target that leaks nothing (a MIA as "
            "strong as the strongest baseline); p: the share of such null audits at least as "
            "large; beyond null: eps~ > 0 with p <= significance.",
            "PANORAMIA RM;RN: the same game with real non-members (the excluded O(1) "
            "candidates) and no baseline, c_lb = 0 (Table 4): its {c+eps}_lb is a lower bound "
            "on epsilon (pure DP) at 1 - significance/2; '-' when not run.",
            "O(1) RM/RN: lower bound on epsilon (Steinke et al., real non-members; any "
            "(eps, delta)-DP algorithm); O(1) RM/GN uses generated non-members and is not a "
            "valid audit (they are not drawn like the members).",
            "f-DP: the f-DP one-run bound of the same guesses (Mahloujifar et al. 2025), valid "
            "only if the trade-off curve is Gaussian (mu-GDP): epsilon at delta, or 'mu' and "
            "the curve's mu where epsilon is inf (delta = 0: a mu-GDP curve with mu > 0 has no "
            "finite epsilon); RM/GN's is as invalid as its O(1) bound."]
  return "\n".join(lines)


def _fdp(target: dict, name: str, show) -> str:
  """The f-DP column of ``name``: its epsilon's spread, or ``mu`` and mu's spread where an
  epsilon is inf (delta = 0); ``-`` where the cells lack it."""
  eps, mu = target.get(f"{name}_fdp"), target.get(f"{name}_fdp_mu")
  if eps is None or (eps["n"] == eps.get("n_nan", 0)):
    return "-"
  if math.isinf(eps["max"]) and mu is not None:
    return "mu " + show(mu)
  return show(eps)
