r"""PANORAMIA: audit a trained model without retraining (Kazmi et al., Alg. 1).

One code path for every modality. The target is only a function ``x -> per-example loss``
(:data:`LossFn`), so any model, JAX or not, can be audited. Given real examples known to be in
the target's training set (``members``), :func:`run` follows Alg. 1:

1. split the members into :math:`D_G` (the generator's training data), :math:`D_{in}^{tr}` and
   :math:`D_{in}^{te}` with :math:`|D_{in}^{te}| = m`;
2. train the generator on :math:`D_G` and generate :math:`D_{out}^{tr}` and
   :math:`D_{out}^{te}` (and the helper's training data), optionally dropping the most
   obviously generated samples first (:func:`filter_generated`, App. B.1 and B.3);
3. train the helper h on generated data (Table 3's winning design; "real" trains it on
   :math:`D_G`, "none" gives the baseline no side information);
4. train the baseline b on x and h's loss, and the MIA on x and the target's loss, both on
   :math:`D_{in}^{tr}` (members) against :math:`D_{out}^{tr}` (non-members): networks over the
   modality's encoder, or gradient-boosted trees (the paper's tabular classifier,
   :class:`~dpaudit.attacks.panoramia.GBTConfig`);
5. draw the audit set: point i is :math:`D_{in}^{te}[i]` if :math:`s_i = 1` and
   :math:`D_{out}^{te}[i]` if :math:`s_i = 0`, :math:`s \sim \mathrm{Bernoulli}(1/2)^m`;
6. :func:`dpaudit.estimators.panoramia_bounds` on the score vectors: :math:`c_{lb}` of the
   *strongest* baseline (the paper's choice, Sec. 5.1), :math:`\{c+\epsilon\}_{lb}` and
   :math:`\tilde\epsilon` at confidence 1 - beta (beta/2 per test, Cor. 2), with the honest
   choice of threshold and of baseline by default (Bonferroni over both);
7. the null reference (:func:`dpaudit.estimators.panoramia_null`): the distribution of
   :math:`\tilde\epsilon` on this audit set for a target that leaks nothing, and the p-value of
   the measured :math:`\tilde\epsilon` against it, which says whether the measurement can be
   told apart from no leakage.

Every component is replaceable through :class:`Modality`: the generator (``fit_generator``),
the helper (``train_helper``, the same trainer as the target's) and the classifiers' encoder.
Next to PANORAMIA the result holds the O(1) audit of Steinke et al. on the same audit set
with generated non-members (RM/GN, the loss attack); :func:`one_run_real` gives O(1) with
real non-members held out of training (RM/RN), which needs control over the training set, and
:func:`measure_real_nonmembers` PANORAMIA's own RM;RN variant on the same candidates (Table 4:
the MIA on real members against real non-members, no baseline, :math:`c_{lb} = 0`).
Beside each O(1) bound stands the f-DP one-run bound of the same guesses (Mahloujifar, Melis &
Chaudhuri, ICML 2025; :func:`dpaudit.estimators.fdp_one_run_from_scores`, Gaussian family):
the epsilon at ``delta`` of the strongest mu-GDP curve the guesses reject, valid only *if the
target's training has a Gaussian (mu-GDP) trade-off curve* (the Steinke bound holds for any
(epsilon, delta)-DP algorithm), and its mu. At ``delta = 0`` (the paper's setting) a mu-GDP
curve with mu > 0 has no finite epsilon: the f-DP epsilon is then inf (or 0) and its mu is
the figure to read. RM/GN's f-DP bound is no more valid than its Steinke bound.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import numpy as np

from dpaudit import _validate, estimators, results
from dpaudit.attacks import panoramia as classifiers
from dpaudit.estimators import panoramia as panoramia_estimators

HELPERS = ("generated", "real", "none")
MAX_FILTER_FRACTION = 0.95
"""The largest share of generated samples the filter may drop (it draws 1 / (1 - f) times as
many)."""


class Examples(NamedTuple):
  """A batch of examples: ``inputs`` ``[N, ...]`` (images, table rows or padded token ids)
  and integer ``labels`` ``[N]`` (the class each loss is computed against; zeros for text)."""
  inputs: np.ndarray
  labels: np.ndarray

  def __len__(self) -> int:  # pylint: disable=invalid-length-returned
    return int(np.shape(self.labels)[0])

  def take(self, indices: Any) -> Examples:
    indices = np.asarray(indices)
    return Examples(np.asarray(self.inputs)[indices], np.asarray(self.labels)[indices])


def concatenate(*parts: Examples) -> Examples:
  """The examples of ``parts``, in order (at least one; all with the inputs' dtype and
  per-example shape of the first)."""
  if not parts:
    raise ValueError("parts is empty; need at least one Examples to concatenate")
  first = _check_examples("parts[0]", parts[0])
  for i, part in enumerate(parts[1:], 1):
    _check_examples(f"parts[{i}]", part, like=first, like_name="parts[0]'s")
  return Examples(np.concatenate([np.asarray(p.inputs) for p in parts]),
                  np.concatenate([np.asarray(p.labels) for p in parts]))


LossFn = Callable[[Examples], np.ndarray]
"""A model under audit (or the helper): examples to their per-example losses ``[N]``."""
Sampler = Callable[[jax.Array, int], Examples]
"""A fitted generator: ``(key, n)`` to n generated examples."""


@dataclasses.dataclass(frozen=True)
class Modality:
  """The replaceable pieces of PANORAMIA for one kind of data.

  Attributes:
    name: e.g. ``"image"``.
    fit_generator: ``(key, D_G) -> Sampler``.
    train_helper: ``(key, examples) -> LossFn``, trained like the target on the same task.
    encoder: makes the flax module that embeds ``inputs`` for the baseline and the MIA.
  """
  name: str
  fit_generator: Callable[[jax.Array, Examples], Sampler]
  train_helper: Callable[[jax.Array, Examples], LossFn]
  encoder: Callable[[], nn.Module]


@dataclasses.dataclass(frozen=True)
class PanoramiaConfig:
  r"""Sizes and settings of one PANORAMIA audit.

  Attributes:
    num_audit: m, the size of :math:`D_{in}^{te}` (and of the audit set).
    num_classifier_train: members in :math:`D_{in}^{tr}`; as many generated non-members join
      them to train the baseline and the MIA.
    num_generator_train: :math:`|D_G|`; None takes every remaining member.
    num_helper_train: generated examples the helper is trained on.
    baseline_helpers: the baselines to train, each named by its helper (Table 3). :math:`c_{lb}`
      is that of the strongest; under ``correction="bonferroni"`` each of the B baselines is
      tested at beta / (2B), so choosing the strongest keeps the confidence.
    classifier: the baseline's and the MIA's classifier and its training: a
      :class:`~dpaudit.attacks.panoramia.ClassifierConfig` (a network over the modality's
      encoder) or a :class:`~dpaudit.attacks.panoramia.GBTConfig` (gradient-boosted trees, the
      paper's tabular classifier).
    filter_fraction: the synthetic-sample filter (App. B.1 and B.3: a classifier of real
      against generated drops the most obviously generated samples before the audit): the
      share of generated samples dropped, in [0, 0.95]; 0 turns it off. The filter is the
      same kind of classifier, trained on real examples of :math:`D_G` against fresh
      generated ones, neither of which enters the audit (:func:`filter_generated`).
    significance: beta; :math:`c_{lb}` and :math:`\{c+\epsilon\}_{lb}` hold jointly at 1 - beta.
    correction: "bonferroni" (valid maximum over thresholds and baselines) or "none" (the
      paper's).
    delta: delta of the O(1) audit.
    null_samples: null audits drawn for the reference distribution of :math:`\tilde\epsilon`
      without leakage (:func:`dpaudit.estimators.panoramia_null`); 0 skips it.
  """
  num_audit: int = 1000
  num_classifier_train: int = 1000
  num_generator_train: int | None = None
  num_helper_train: int = 2000
  baseline_helpers: tuple[str, ...] = ("generated",)
  classifier: classifiers.ClassifierConfig | classifiers.GBTConfig = (
      classifiers.ClassifierConfig())
  significance: float = 0.05
  correction: str = "bonferroni"
  delta: float = 0.0
  null_samples: int = 200
  filter_fraction: float = 0.0

  def __post_init__(self):
    _validate.check_integer("num_audit", self.num_audit, 2)
    _validate.check_integer("num_classifier_train", self.num_classifier_train, 2)
    if self.num_generator_train is not None:
      _validate.check_integer("num_generator_train", self.num_generator_train, 2)
    _validate.check_integer("num_helper_train", self.num_helper_train, 2)
    object.__setattr__(self, "baseline_helpers", tuple(self.baseline_helpers))
    if not self.baseline_helpers:
      raise ValueError("baseline_helpers must name at least one of " + ", ".join(HELPERS))
    for helper in self.baseline_helpers:
      _validate.check_choice("baseline_helpers", helper, HELPERS)
    _validate.check_significance(self.significance)
    _validate.check_choice("correction", self.correction, panoramia_estimators.CORRECTIONS)
    _validate.check_delta(self.delta)
    _validate.check_integer("null_samples", self.null_samples, 0)
    _validate.check_instance("classifier", self.classifier,
                             (classifiers.ClassifierConfig, classifiers.GBTConfig))
    _validate.check_range("filter_fraction", self.filter_fraction, 0.0, MAX_FILTER_FRACTION)
    if len(set(self.baseline_helpers)) != len(self.baseline_helpers):
      raise ValueError(f"baseline_helpers={list(self.baseline_helpers)} names a helper twice")

  def split_sizes(self, num_members: int) -> tuple[int, int, int]:
    """``(|D_G|, |D_in^tr|, |D_in^te|)`` for ``num_members`` known members; ValueError if
    they do not fit."""
    generator = (num_members - self.num_audit - self.num_classifier_train
                 if self.num_generator_train is None else self.num_generator_train)
    needed = self.num_audit + self.num_classifier_train + max(generator, 2)
    if generator < 2 or needed > num_members:
      most = num_members - self.num_classifier_train - max(generator, 2)
      advice = (f"use at most {most} audit points" if most >= 2 else
                f"need at least {needed} known members")
      raise ValueError(
          f"num_audit={self.num_audit} + num_classifier_train={self.num_classifier_train} + "
          f"num_generator_train={max(generator, 2)} = {needed} exceeds the {num_members} known "
          f"members; {advice}")
    return generator, self.num_classifier_train, self.num_audit


class Curve(NamedTuple):
  """Per-threshold statistics of one score vector (valid thresholds only, descending
  threshold), for Fig. 3-style plots: predictions r, true positives tp, precision, recall and
  the threshold's own lower bound, tested at ``per_test_significance``."""
  predictions: np.ndarray
  true_positives: np.ndarray
  precision: np.ndarray
  recall: np.ndarray
  lower_bound: np.ndarray
  per_test_significance: float


@dataclasses.dataclass(frozen=True)
class PanoramiaResult:
  """One PANORAMIA audit (Alg. 1), its null reference and the O(1) audit on the same audit set.

  Attributes:
    c_lb, c_plus_eps_lb, eps_tilde: PANORAMIA's measurement (Cor. 2, Alg. 1 line 8) against
      the strongest baseline; c_lb and c_plus_eps_lb are lower bounds holding jointly at
      1 - significance (unless ``optimistic``); eps_tilde is a measurement, not a bound.
    strongest_baseline: the helper of the baseline that gives c_lb.
    baseline_c_lb: c_lb of every baseline trained, by helper (Table 3), each at the level it
      was tested at (beta / (2B) under the Bonferroni correction).
    baseline_auc, mia_auc: ROC AUC of each classifier on the audit set (baselines by helper).
    null_eps_tilde: :func:`dpaudit.results.spread` of eps~ over ``null_samples`` audits of a
      target that leaks nothing (a MIA as strong as the strongest baseline), or None.
    eps_tilde_p_value: share of those null audits with an eps~ at least the measured one
      (:func:`dpaudit.estimators.null_p_value`); None without a null.
    beyond_null: the measured eps~ is above 0 and its p-value at most ``significance``: the
      measurement is distinguishable from no leakage (None without a null).
    one_run_rm_gn: the O(1) epsilon lower bound with real members vs generated non-members,
      from the target's loss (lower loss: guessed member), at ``significance`` and ``delta``
      (not a valid audit: the generated non-members are not drawn like the members).
    one_run_rm_gn_fdp, one_run_rm_gn_fdp_mu: the f-DP one-run bound (Gaussian family) of the
      same guesses, epsilon at ``delta`` (inf at ``delta = 0`` when mu > 0) and mu; as invalid
      as ``one_run_rm_gn`` here, and valid (with Bernoulli non-members) only if the curve is
      mu-GDP. NaN in results stored before it was computed.
    num_audit, num_members: m and the number of members drawn into the audit set.
    optimistic: True when ``correction="none"`` (the maxima over thresholds and baselines are
      then not valid at 1 - significance).
    baseline_curve, mia_curve: per-threshold curves for plotting (the strongest baseline's).
    mean_member_loss, mean_generated_loss: the target's mean loss on the audit set's members
      and generated non-members.
  """
  c_lb: float
  c_plus_eps_lb: float
  eps_tilde: float
  strongest_baseline: str
  baseline_c_lb: dict[str, float]
  baseline_auc: dict[str, float]
  mia_auc: float
  null_eps_tilde: dict[str, Any] | None
  eps_tilde_p_value: float | None
  beyond_null: bool | None
  one_run_rm_gn: float
  num_audit: int
  num_members: int
  optimistic: bool
  baseline_curve: Curve
  mia_curve: Curve
  mean_member_loss: float
  mean_generated_loss: float
  one_run_rm_gn_fdp: float = math.nan
  one_run_rm_gn_fdp_mu: float = math.nan

  def __post_init__(self):
    _check_result(self)

  def to_dict(self) -> dict[str, Any]:
    out = {}
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      if isinstance(value, Curve):
        value = {k: np.asarray(v).tolist() for k, v in value._asdict().items()}
      out[field.name] = value
    return out

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> PanoramiaResult:
    """The result :meth:`to_dict` wrote (after a strict-JSON round trip), checked whole:
    every field present, the curves of matching lengths, every bound finite and >= 0,
    eps~ = max(0, {c+eps}_lb - c_lb), c_lb the strongest baseline's. ValueError otherwise
    (KeyError or TypeError for a missing or mistyped field)."""
    names = [f.name for f in dataclasses.fields(cls)]
    optional = {f.name for f in dataclasses.fields(cls)  # added later: old results lack them
                if f.default is not dataclasses.MISSING}
    missing = [n for n in names if n not in values and n not in optional]
    if missing:
      raise KeyError(f"PanoramiaResult fields missing: {missing}")
    fields = {n: values[n] for n in names if n in values}
    for name in ("baseline_curve", "mia_curve"):
      fields[name] = Curve(**fields[name])
    return cls(**fields)


CURVE_ARRAYS = ("predictions", "true_positives", "precision", "recall", "lower_bound")


def _check_result(r: PanoramiaResult) -> None:
  """The invariants every PANORAMIA result satisfies (a stored one edited or cut short does
  not): ValueError naming the first that fails."""
  def bound(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not (
        math.isfinite(value) and value >= 0):
      raise ValueError(f"{name}={value!r} must be a finite number >= 0")
  for name in ("c_lb", "c_plus_eps_lb", "eps_tilde", "one_run_rm_gn"):
    bound(name, getattr(r, name))
  for name in ("one_run_rm_gn_fdp", "one_run_rm_gn_fdp_mu"):  # NaN: not computed; eps may be inf
    value = getattr(r, name)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not (
        math.isnan(value) or value >= 0) or (name.endswith("_mu") and math.isinf(value)):
      raise ValueError(f"{name}={value!r} must be NaN or a number >= 0")
  if abs(r.eps_tilde - max(0.0, r.c_plus_eps_lb - r.c_lb)) > 1e-9 * max(1.0, r.c_plus_eps_lb):
    raise ValueError(f"eps_tilde={r.eps_tilde} is not max(0, c_plus_eps_lb - c_lb) = "
                     f"{max(0.0, r.c_plus_eps_lb - r.c_lb)}")
  if not r.baseline_c_lb or set(r.baseline_c_lb) != set(r.baseline_auc):
    raise ValueError("baseline_c_lb and baseline_auc must name the same baselines")
  for helper, value in r.baseline_c_lb.items():
    bound(f"baseline_c_lb[{helper!r}]", value)
  if r.strongest_baseline not in r.baseline_c_lb or (
      r.baseline_c_lb[r.strongest_baseline] != r.c_lb
      or r.c_lb < max(r.baseline_c_lb.values())):
    raise ValueError(f"c_lb={r.c_lb} is not the strongest baseline's ({r.baseline_c_lb})")
  for name in ("mia_auc", *(f"baseline_auc[{h!r}]" for h in r.baseline_auc)):
    value = r.mia_auc if name == "mia_auc" else r.baseline_auc[name[14:-2]]
    if not 0.0 <= value <= 1.0:
      raise ValueError(f"{name}={value!r} must lie in [0, 1]")
  if not 0 <= r.num_members <= r.num_audit:
    raise ValueError(f"num_members={r.num_members} must lie in [0, num_audit={r.num_audit}]")
  if (r.null_eps_tilde is None) != (r.eps_tilde_p_value is None) or (
      (r.null_eps_tilde is None) != (r.beyond_null is None)):
    raise ValueError("null_eps_tilde, eps_tilde_p_value and beyond_null go together")
  if r.eps_tilde_p_value is not None and not 0.0 < r.eps_tilde_p_value <= 1.0:
    raise ValueError(f"eps_tilde_p_value={r.eps_tilde_p_value!r} must lie in (0, 1]")
  for name in ("baseline_curve", "mia_curve"):
    curve = getattr(r, name)
    lengths = {len(np.asarray(getattr(curve, k)).reshape(-1)) for k in CURVE_ARRAYS}
    if len(lengths) != 1 or next(iter(lengths)) > r.num_audit:
      raise ValueError(f"{name} arrays must share one length <= num_audit={r.num_audit}")


def _check_examples(name: str, examples: Any, like: Examples | None = None,
                    like_name: str = "the members") -> Examples:
  if not isinstance(examples, Examples):
    raise ValueError(f"{name} must be an Examples(inputs, labels), got {type(examples).__name__}")
  inputs, labels = np.asarray(examples.inputs), np.asarray(examples.labels)
  if labels.ndim != 1 or inputs.shape[:1] != labels.shape:
    raise ValueError(f"{name}: inputs of shape {inputs.shape} and labels of shape "
                     f"{labels.shape} must share their first axis, labels 1-D")
  if like is not None and (inputs.shape[1:] != np.shape(like.inputs)[1:]
                           or inputs.dtype != np.asarray(like.inputs).dtype):
    raise ValueError(f"{name}: inputs are {inputs.dtype}{list(inputs.shape[1:])} per example "
                     f"but {like_name} are {np.asarray(like.inputs).dtype}"
                     f"{list(np.shape(like.inputs)[1:])}")
  return Examples(inputs, labels)


def _check_callable(name: str, value: Any, what: str, optional: bool = False) -> None:
  if not (callable(value) or (optional and value is None)):
    raise ValueError(f"{name} must be {what}{' or None' if optional else ''}, got "
                     f"{type(value).__name__}")


def _check_modality(modality: Any) -> None:
  if not isinstance(modality, Modality):
    raise ValueError("modality must be a Modality(name, fit_generator, train_helper, encoder), "
                     f"got {type(modality).__name__}")
  for field in ("fit_generator", "train_helper", "encoder"):
    _check_callable(f"modality.{field}", getattr(modality, field), "callable")


def _check_encoder_of(modality: Any) -> None:
  """A :class:`Modality` whose encoder can be called (all the filter and RM;RN use of it)."""
  _validate.check_instance("modality", modality, Modality)
  _check_callable("modality.encoder", modality.encoder, "callable")


def _check_config(config: Any) -> None:
  if not isinstance(config, PanoramiaConfig):
    raise ValueError(f"config must be a PanoramiaConfig, got {type(config).__name__}")


def checked_losses(name: str, loss_fn: LossFn, examples: Examples) -> np.ndarray:
  """``loss_fn(examples)`` as float64 ``[N]``; ValueError naming ``name`` if it returns
  something other than real numbers, another shape or a non-finite entry."""
  if not isinstance(name, str):
    raise ValueError(f"name must be a str (what the losses are called), got "
                     f"{type(name).__name__}")
  _check_callable("loss_fn", loss_fn, "a function of Examples to per-example losses")
  examples = _check_examples("examples", examples)
  raw = loss_fn(examples)
  try:
    losses = np.asarray(raw)
  except (TypeError, ValueError):
    raise ValueError(f"{name} must return an array of losses, got {type(raw).__name__}") from None
  if losses.dtype.kind not in "iuf":
    raise ValueError(f"{name} must return real numbers (one loss per example), got dtype "
                     f"{losses.dtype}")
  losses = np.asarray(losses, np.float64)
  if losses.shape != (len(examples),):
    raise ValueError(f"{name} must return one loss per example, shape ({len(examples)},), "
                     f"got shape {losses.shape}")
  if not np.all(np.isfinite(losses)):
    raise ValueError(f"{name} returned non-finite losses")
  return losses


def _curve(curve) -> Curve:
  valid = np.asarray(curve.valid)
  return Curve(*(np.asarray(getattr(curve, k))[valid] for k in
                 ("predictions", "true_positives", "precision", "recall", "lower_bound")),
               float(curve.per_test_significance))


def _auc(scores: np.ndarray, is_member: np.ndarray) -> float:
  return float(estimators.roc_auc(scores[is_member == 1], scores[is_member == 0]))


class AuditSetup(NamedTuple):
  r"""Everything of one PANORAMIA audit that does not depend on the target (Alg. 1 up to the
  MIA): it serves every target trained on the same members, as the paper's Table 4 shares one
  baseline per dataset.

  Attributes:
    train_set: :math:`D_{in}^{tr} \cup D_{out}^{tr}` for the classifiers.
    train_member: 1 for the first half (members), 0 for the generated half.
    audit: the audit set (m examples).
    is_member: s, the audit set's membership.
    baseline_scores: per helper, the baseline's score of every audit point.
    generated_preview: up to 100 generated non-members of the audit set's pool, for figures.
  """
  train_set: Examples
  train_member: np.ndarray
  audit: Examples
  is_member: np.ndarray
  baseline_scores: dict[str, np.ndarray]
  generated_preview: Examples


def prepare_audit(key: jax.Array, modality: Modality, members: Examples,
                  config: PanoramiaConfig = PanoramiaConfig(),
                  progress: Callable[[str], None] | None = None) -> AuditSetup:
  """Alg. 1 of Kazmi et al. up to the MIA: splits, generator, helper(s), baseline(s), audit set.

  Args:
    key: PRNG key (splits, generator, helper, baseline, membership s).
    modality: the generator, helper trainer and encoder.
    members: real examples that were in the target's training set.
    config: :class:`PanoramiaConfig`.
    progress: called with a short message as each stage starts.
  """
  _validate.check_key(key)
  _check_modality(modality)
  members = _check_examples("members", members)
  _check_config(config)
  _check_callable("progress", progress, "callable", optional=True)
  num_gen, num_tr, num_te = config.split_sizes(len(members))
  say = progress or (lambda message: None)
  keys = jax.random.split(key, 6)
  order = np.asarray(jax.random.permutation(keys[0], len(members)))
  d_g = members.take(order[:num_gen])
  d_in_tr = members.take(order[num_gen:num_gen + num_tr])
  d_in_te = members.take(order[num_gen + num_tr:num_gen + num_tr + num_te])

  say(f"fitting the generator on {num_gen} members")
  sample = modality.fit_generator(keys[1], d_g)
  wanted = num_tr + num_te + config.num_helper_train
  if config.filter_fraction:
    say(f"filtering {config.filter_fraction:.0%} of the generated samples")
    generated = filter_generated(keys[2], modality, d_g, sample, wanted, config.filter_fraction,
                                 config.classifier, num_train=min(num_tr, num_gen))
  else:
    say(f"generating {wanted} non-members")
    generated = _sample_checked(sample, keys[2], wanted, members)
  d_out_tr = generated.take(np.arange(num_tr))
  d_out_te = generated.take(np.arange(num_tr, num_tr + num_te))
  d_helper = generated.take(np.arange(num_tr + num_te, wanted))

  is_member = np.asarray(jax.random.bernoulli(keys[3], 0.5, (num_te,))).astype(np.int32)
  pick = is_member.reshape((-1,) + (1,) * (d_in_te.inputs.ndim - 1)) == 1
  audit = Examples(np.where(pick, d_in_te.inputs, d_out_te.inputs),
                   np.where(is_member == 1, d_in_te.labels, d_out_te.labels))
  train_set = concatenate(d_in_tr, d_out_tr)
  train_member = np.concatenate([np.ones(num_tr, np.int32), np.zeros(num_tr, np.int32)])

  baseline_scores = {}
  for i, helper in enumerate(config.baseline_helpers):
    if helper == "none":
      side_train, side_audit = classifiers.no_side(len(train_set)), classifiers.no_side(num_te)
    else:
      say(f"training the helper on {helper} data")
      helper_loss = modality.train_helper(jax.random.fold_in(keys[4], i),
                                          d_helper if helper == "generated" else d_g)
      side_train = classifiers.loss_features(checked_losses("helper loss", helper_loss,
                                                            train_set))
      side_audit = classifiers.loss_features(checked_losses("helper loss", helper_loss, audit))
    say(f"training the baseline (helper: {helper})")
    baseline_scores[helper] = _classifier_scores(
        jax.random.fold_in(keys[5], i), modality, config, train_set.inputs, side_train,
        train_member, audit.inputs, side_audit)
  return AuditSetup(train_set, train_member, audit, is_member, baseline_scores,
                    d_out_te.take(np.arange(min(100, num_te))))


def _classifier_scores(key, modality: Modality, config: PanoramiaConfig, inputs, side,
                       is_member, score_inputs, score_side) -> np.ndarray:
  """The baseline's or the MIA's scores: ``config.classifier`` trained on the first three,
  applied to the last two."""
  encoder = (modality.encoder() if isinstance(config.classifier, classifiers.ClassifierConfig)
             else None)
  return classifiers.membership_scores(key, encoder, inputs, side, is_member, score_inputs,
                                       score_side, config.classifier)


def _sample_checked(sample: Sampler, key: jax.Array, n: int, like: Examples) -> Examples:
  """``sample(key, n)``, checked: n examples shaped like ``like``."""
  generated = _check_examples("generated examples", sample(key, n), like=like)
  if len(generated) != n:
    raise ValueError(f"the generator returned {len(generated)} examples, {n} were asked for")
  return generated


def filter_generated(key: jax.Array, modality: Modality, real: Examples, sample: Sampler,
                     n: int, fraction: float,
                     classifier: classifiers.ClassifierConfig | classifiers.GBTConfig = (
                         classifiers.ClassifierConfig()),
                     num_train: int | None = None) -> Examples:
  """The synthetic-sample filter of PANORAMIA (Kazmi et al., App. B.1 for CelebA, B.3 for
  Adult): a classifier trained to tell real examples from generated ones drops the generated
  samples it finds most obviously generated, before they enter the audit.

  Trains ``classifier`` (with no side information) on ``num_train`` examples of ``real``
  (default all; :math:`D_G` in :func:`prepare_audit`, never an audit member) against as many
  fresh generated ones, draws ``ceil(n / (1 - fraction))`` more and keeps the n the classifier
  scores most real, in the order drawn. The kept samples are a draw from a new generator (the
  generator followed by the filter), so the audit's c-closeness is that of the filtered
  generator; the filter's own training samples are discarded.

  Args:
    key: PRNG key (the filter's training samples, its training, the candidates).
    modality: supplies the encoder when ``classifier`` is a network.
    real: real examples for the filter's "real" class.
    sample: the fitted generator.
    n: how many samples to return (>= 1).
    fraction: the share of candidates dropped, in [0, :data:`MAX_FILTER_FRACTION`].
    classifier: the filter's classifier and its training.
    num_train: real (and generated) examples the filter is trained on, >= 2; None: all of
      ``real``.

  Returns:
    n generated :class:`Examples`.
  """
  _validate.check_key(key)
  _check_encoder_of(modality)
  real = _check_examples("real", real)
  _check_callable("sample", sample, "a Sampler (key, n) -> Examples")
  n = _validate.check_integer("n", n, 1)
  _validate.check_range("fraction", fraction, 0.0, MAX_FILTER_FRACTION)
  _validate.check_instance("classifier", classifier,
                           (classifiers.ClassifierConfig, classifiers.GBTConfig))
  size = len(real) if num_train is None else _validate.check_integer("num_train", num_train, 2)
  if size > len(real) or size < 2:
    raise ValueError(f"num_train={size} must lie in [2, {len(real)}] (the real examples given)")
  key_real, key_fake, key_fit, key_pool = jax.random.split(key, 4)
  real = real.take(np.sort(np.asarray(jax.random.permutation(key_real, len(real)))[:size]))
  fake = _sample_checked(sample, key_fake, size, real)
  pool_size = int(math.ceil(n / (1.0 - fraction) - 1e-9))
  pool = _sample_checked(sample, key_pool, pool_size, real)
  train = concatenate(real, fake)
  label = np.concatenate([np.ones(size, np.int32), np.zeros(size, np.int32)])
  config = PanoramiaConfig(classifier=classifier)
  realness = _classifier_scores(key_fit, modality, config, train.inputs,
                                classifiers.no_side(2 * size), label, pool.inputs,
                                classifiers.no_side(pool_size))
  keep = np.sort(np.argsort(-realness, kind="stable")[:n])
  return pool.take(keep)


class RealNonMemberResult(NamedTuple):
  r"""PANORAMIA's RM;RN variant (Kazmi et al., Sec. 5.2 and Table 4): the game with real
  non-members in place of generated ones.

  Attributes:
    eps_lb: the MIA's :math:`\{c+\epsilon\}_{lb}` with c = 0 known (real non-members are drawn
      like the members), so with c_lb = 0 it is both the paper's eps~ and a lower bound on
      epsilon (pure DP) at confidence 1 - significance / 2.
    mia_auc: the MIA's ROC AUC on its audit set.
    num_audit, num_members: the audit set's size and members.
    optimistic: True under ``correction="none"`` (the maximum over thresholds not valid).
    mia_curve: the MIA's per-threshold curve.
  """
  eps_lb: float
  mia_auc: float
  num_audit: int
  num_members: int
  optimistic: bool
  mia_curve: Curve


def measure_real_nonmembers(key: jax.Array, modality: Modality, target_loss: LossFn,
                            candidates: Examples, included: Any,
                            config: PanoramiaConfig = PanoramiaConfig()) -> RealNonMemberResult:
  r"""PANORAMIA RM;RN (Kazmi et al., Sec. 5.2, Table 4): the MIA trained and tested on real
  members against real non-members, with no baseline (:math:`c_{lb} = 0`).

  Each candidate went into the target's training set independently with probability 1/2
  (``included``), so the excluded ones are real non-members from the members' distribution and
  the generator's closeness is c = 0. The candidates are split in halves, stratified by
  ``included``: the MIA (``config.classifier``, on x and the target's loss, as in
  :func:`measure_target`) is trained on the first and scores the second, the audit set. The
  bound is Prop. 2 with c = 0: :func:`dpaudit.estimators.panoramia_bounds`' MIA test at
  ``config.significance / 2`` (Bonferroni over thresholds unless ``config.correction`` is
  "none"). Like the paper's RM;RN, the test counts true positives only (the one-sided game);
  the O(1) audit on the same candidates (:func:`one_run_real`) also uses guesses of
  "non-member".

  Args:
    key: PRNG key of the split and the MIA's training.
    modality: supplies the encoder of a network classifier.
    target_loss: the model under audit.
    candidates: real examples, each trained on with probability 1/2.
    included: ``[len(candidates)]`` 0/1, which were; at least 4 of each.
    config: the classifier, significance and correction.

  >>> import jax, numpy as np
  >>> from dpaudit.attacks.panoramia import ClassifierConfig, VectorEncoder
  >>> rng = np.random.default_rng(0)
  >>> candidates = Examples(rng.normal(size=(400, 2)).astype(np.float32), np.zeros(400, int))
  >>> included = rng.integers(0, 2, 400)
  >>> memorised = lambda ex: 5.0 - 5.0 * included[:len(ex)]  # zero loss on its members
  >>> modality = Modality("toy", None, None, lambda: VectorEncoder((8,)))
  >>> out = measure_real_nonmembers(jax.random.key(0), modality, memorised, candidates,
  ...                               included, PanoramiaConfig(classifier=ClassifierConfig(5)))
  >>> out.num_audit, out.eps_lb > 2.0  # the classes' halves rounded up
  (201, True)
  """
  _validate.check_key(key)
  _check_encoder_of(modality)
  _check_config(config)
  losses, included = _real_losses(target_loss, candidates, included, 0.0, 0.05)
  candidates = _check_examples("candidates", candidates)
  if min(np.sum(included == 0), np.sum(included == 1)) < 4:
    raise ValueError(f"included holds {int(np.sum(included == 1))} members and "
                     f"{int(np.sum(included == 0))} non-members; RM;RN needs at least 4 of each "
                     "(half train the MIA, half are audited)")
  key_split, key_mia = jax.random.split(key)
  train, audit = [], []
  for c in (0, 1):
    index = np.flatnonzero(included == c)
    index = index[np.asarray(jax.random.permutation(jax.random.fold_in(key_split, c),
                                                    index.size))]
    train.append(index[:index.size // 2])
    audit.append(index[index.size // 2:])
  train, audit = np.sort(np.concatenate(train)), np.sort(np.concatenate(audit))
  side = classifiers.loss_features(losses)
  scores = _classifier_scores(key_mia, modality, config, np.asarray(candidates.inputs)[train],
                              side[train], included[train],
                              np.asarray(candidates.inputs)[audit], side[audit])
  is_member = included[audit]
  bounds = estimators.panoramia_bounds(np.zeros(len(audit)), scores, is_member,
                                       config.significance, correction=config.correction)
  return RealNonMemberResult(float(bounds.c_plus_eps_lb), _auc(scores, is_member), len(audit),
                             int(is_member.sum()), config.correction == "none",
                             _curve(bounds.mia))


def measure_target(key: jax.Array, setup: AuditSetup, modality: Modality, target_loss: LossFn,
                   config: PanoramiaConfig = PanoramiaConfig(),
                   progress: Callable[[str], None] | None = None) -> PanoramiaResult:
  """Alg. 1 from the MIA on: trains the MIA on x and the target's loss, scores the audit set,
  computes the bounds of Cor. 2 against the strongest baseline of ``setup`` (Bonferroni over
  the baselines), the null reference of eps~, and the O(1) audit (RM/GN) on the same audit set.

  Args:
    key: PRNG key of the MIA's training and of the null reference's draws.
    setup: :func:`prepare_audit`'s output for the target's members.
    modality: as given to :func:`prepare_audit`.
    target_loss: the model under audit, ``Examples -> [N]`` per-example losses.
    config: as given to :func:`prepare_audit`.
    progress: called with a short message as each stage starts.
  """
  _validate.check_key(key)
  if not isinstance(setup, AuditSetup):
    raise ValueError(f"setup must be the AuditSetup of prepare_audit, got {type(setup).__name__}")
  _check_modality(modality)
  _check_callable("target_loss", target_loss, "a function of Examples to per-example losses")
  _check_config(config)
  _check_callable("progress", progress, "callable", optional=True)
  say = progress or (lambda message: None)
  key_mia, key_null = jax.random.split(key)
  say("training the MIA on the target's loss")
  target_train = checked_losses("target loss", target_loss, setup.train_set)
  target_audit = checked_losses("target loss", target_loss, setup.audit)
  mia_scores = _classifier_scores(key_mia, modality, config, setup.train_set.inputs,
                                  classifiers.loss_features(target_train), setup.train_member,
                                  setup.audit.inputs, classifiers.loss_features(target_audit))
  return _measure(key_null, setup, mia_scores, target_audit, config)


def _measure(key: jax.Array, setup: AuditSetup, mia_scores: np.ndarray,
             target_audit: np.ndarray, config: PanoramiaConfig) -> PanoramiaResult:
  """The bounds, the null reference and O(1) RM/GN from the MIA's scores of the audit set and
  the target's losses on it."""
  is_member = setup.is_member
  helpers = list(setup.baseline_scores)
  stacked = np.stack([np.asarray(setup.baseline_scores[h], np.float64) for h in helpers])
  bounds = estimators.panoramia_bounds(stacked, mia_scores, is_member, config.significance,
                                       correction=config.correction)
  null, p_value, beyond = None, None, None
  if config.null_samples:
    samples = estimators.panoramia_null(key, stacked, is_member, config.significance,
                                        num_samples=config.null_samples,
                                        correction=config.correction)
    null = results.spread(np.asarray(samples.eps_tilde))
    p_value = estimators.null_p_value(float(bounds.eps_tilde), samples.eps_tilde)
    beyond = bool(float(bounds.eps_tilde) > 0 and p_value <= config.significance)
  one_run = estimators.one_run_epsilon_from_scores(-target_audit, is_member, config.delta,
                                                   config.significance)
  fdp = _fdp_gaussian(-target_audit, is_member, config.delta, config.significance)
  return PanoramiaResult(
      c_lb=float(bounds.c_lb), c_plus_eps_lb=float(bounds.c_plus_eps_lb),
      eps_tilde=float(bounds.eps_tilde),
      strongest_baseline=helpers[int(bounds.best_baseline)],
      baseline_c_lb={h: float(v) for h, v in zip(helpers, np.asarray(bounds.baseline_c_lb))},
      baseline_auc={h: _auc(s, is_member) for h, s in setup.baseline_scores.items()},
      mia_auc=_auc(mia_scores, is_member), null_eps_tilde=null, eps_tilde_p_value=p_value,
      beyond_null=beyond, one_run_rm_gn=float(one_run.epsilon),
      num_audit=len(is_member), num_members=int(is_member.sum()),
      optimistic=config.correction == "none",
      baseline_curve=_curve(bounds.baseline), mia_curve=_curve(bounds.mia),
      mean_member_loss=float(target_audit[is_member == 1].mean()),
      mean_generated_loss=float(target_audit[is_member == 0].mean()),
      one_run_rm_gn_fdp=fdp.epsilon_fdp_gaussian, one_run_rm_gn_fdp_mu=fdp.mu_lower_bound)


def _fdp_gaussian(scores, is_member, delta: float, significance: float) -> OneRunBounds:
  """Steinke's bound left NaN: the f-DP one-run bound (Gaussian family, float64) of the
  guesses of :func:`dpaudit.estimators.one_run_epsilon_from_scores` on ``scores``."""
  with jax.enable_x64(True):
    out = estimators.fdp_one_run_from_scores(np.asarray(scores, np.float64), is_member, delta,
                                             significance)
  return OneRunBounds(math.nan, float(out.epsilon), float(out.mu))


def _stages(config: PanoramiaConfig) -> int:
  """The stages :func:`run` reports: the generator's fit and samples, each helper trained and
  each baseline, the MIA."""
  return 3 + len(config.baseline_helpers) + sum(h != "none" for h in config.baseline_helpers)


def _fingerprint(examples: Examples) -> str:
  """A short digest of the examples' values, shapes and dtypes (names them in a stored run)."""
  digest = hashlib.sha256()
  for array in (np.asarray(examples.inputs), np.asarray(examples.labels)):
    digest.update(f"{array.dtype}{array.shape}".encode())
    digest.update(np.ascontiguousarray(array).tobytes())
  return digest.hexdigest()[:16]


def run(key: jax.Array, config: PanoramiaConfig, *, modality: Modality, target_loss: LossFn,
        members: Examples, progress: results.Progress | None = None,
        store: results.CellStore | None = None) -> PanoramiaResult:
  """Audits ``target_loss``'s model with PANORAMIA (Alg. 1 of Kazmi et al.):
  :func:`prepare_audit` with ``split(key)[0]``, then :func:`measure_target` with
  ``split(key)[1]``.

  Args:
    key: PRNG key of the whole audit.
    config: :class:`PanoramiaConfig`.
    modality: the generator, helper trainer and encoder.
    target_loss: the model under audit, ``Examples -> [N]`` per-example losses.
    members: real examples that were in the target's training set.
    progress: :class:`dpaudit.results.Progress`; one unit per stage (the generator's fit, its
      samples, each helper and baseline, the MIA), the message says which starts.
    store: a :class:`dpaudit.results.CellStore` keeping the result, named by the key, the
      config, the modality's name and a digest of the members (not by the target, which is a
      function: keep each target's audits in a store of its own); None computes it.

  >>> import jax, numpy as np
  >>> from dpaudit.attacks.panoramia import ClassifierConfig, VectorEncoder
  >>> rng = np.random.default_rng(0)
  >>> members = Examples(rng.normal(size=(300, 2)).astype(np.float32), np.zeros(300, int))
  >>> def generator(key, d_g):  # the members' law, N(0, 1)
  ...   return lambda key, n: Examples(np.asarray(jax.random.normal(key, (n, 2)), np.float32),
  ...                                  np.zeros(n, int))
  >>> def no_helper(key, examples):  # baseline_helpers=("none",) trains no helper
  ...   raise AssertionError
  >>> modality = Modality("toy", generator, no_helper, lambda: VectorEncoder((8,)))
  >>> config = PanoramiaConfig(num_audit=100, num_classifier_train=100, num_helper_train=2,
  ...                          baseline_helpers=("none",), null_samples=20,
  ...                          classifier=ClassifierConfig(epochs=5))
  >>> blind = lambda examples: np.ones(len(examples))  # a model that learnt nothing
  >>> result = run(jax.random.key(0), config, modality=modality, target_loss=blind,
  ...              members=members)
  >>> result.num_audit, result.eps_tilde < 0.5, result.beyond_null
  (100, True, False)
  """
  _validate.check_key(key)
  _check_config(config)
  _check_modality(modality)
  _check_callable("target_loss", target_loss, "a function of Examples to per-example losses")
  members = _check_examples("members", members)
  _check_callable("progress", progress, "callable", optional=True)
  _validate.check_instance("store", store, (results.CellStore, type(None)))
  total, started = _stages(config), [0]

  def say(message: str) -> None:
    results.report(progress, started[0], total, message)
    started[0] += 1

  def compute() -> PanoramiaResult:
    key_setup, key_mia = jax.random.split(key)
    setup = prepare_audit(key_setup, modality, members, config, say)
    return measure_target(key_mia, setup, modality, target_loss, config, say)

  named = {"key": results.key_data(key), "config": dataclasses.asdict(config),
           "modality": modality.name, "members": _fingerprint(members)}
  result = results.stored_run(store, named, "panoramia", compute, PanoramiaResult)
  results.report(progress, total, total, "PANORAMIA audit done")
  return result


Config = PanoramiaConfig
Result = PanoramiaResult


class OneRunBounds(NamedTuple):
  """The O(1) bounds of one set of guesses: ``epsilon`` (Steinke, Nasr & Jagielski; any
  (epsilon, delta)-DP algorithm), ``epsilon_fdp_gaussian`` (f-DP one run, epsilon at delta of
  the strongest mu-GDP curve rejected; valid if the curve is Gaussian; inf at delta = 0 when
  mu > 0) and ``mu_lower_bound`` (that curve's mu)."""
  epsilon: float
  epsilon_fdp_gaussian: float
  mu_lower_bound: float


def one_run_real(target_loss: LossFn, candidates: Examples, included: Any, delta: float = 0.0,
                 significance: float = 0.05) -> float:
  """The O(1) audit of Steinke, Nasr & Jagielski (2023) with real members and real
  non-members (RM/RN): each candidate was put into the target's training set independently
  with probability 1/2 (``included``), and the loss attack guesses "member" for low losses.
  Returns the epsilon lower bound of :func:`dpaudit.estimators.one_run_epsilon_from_scores`
  (Bonferroni over its guess grid) at ``significance`` and ``delta``;
  :func:`one_run_real_bounds` adds the f-DP bound of the same guesses."""
  losses, included = _real_losses(target_loss, candidates, included, delta, significance)
  return float(estimators.one_run_epsilon_from_scores(-losses, included, delta,
                                                      significance).epsilon)


def one_run_real_bounds(target_loss: LossFn, candidates: Examples, included: Any,
                        delta: float = 0.0, significance: float = 0.05) -> OneRunBounds:
  """:func:`one_run_real` (RM/RN) and beside it the f-DP one-run bound of the same guesses
  (Mahloujifar, Melis & Chaudhuri, ICML 2025, Gaussian family,
  :func:`dpaudit.estimators.fdp_one_run_from_scores`), from one evaluation of the losses."""
  losses, included = _real_losses(target_loss, candidates, included, delta, significance)
  steinke = float(estimators.one_run_epsilon_from_scores(-losses, included, delta,
                                                         significance).epsilon)
  return _fdp_gaussian(-losses, included, delta, significance)._replace(epsilon=steinke)


def _real_losses(target_loss, candidates, included, delta, significance):
  """The checked arguments of :func:`one_run_real`: the target's losses and ``included``."""
  _check_callable("target_loss", target_loss, "a function of Examples to per-example losses")
  candidates = _check_examples("candidates", candidates)
  if np.shape(included) != (len(candidates),):
    raise ValueError(f"included must be 0/1 of shape ({len(candidates)},), one per candidate, "
                     f"got shape {np.shape(included)}")
  _validate.check_binary("included", included)
  included = np.asarray(included)
  _validate.check_delta(delta)
  _validate.check_significance(significance)
  return checked_losses("target loss", target_loss, candidates), included
