r"""Auditing DP-SGD: many-run (O(T)) and one-run (O(1)) games, UniAud and UniAud++.

Four games, one engine (:mod:`dpaudit.dpsgd`), one estimator module (:mod:`dpaudit.estimators`):

* ``many_run`` (O(T)): ``num_runs`` models are trained on D' = D plus one canary and as many on
  D. All 2T runs are one compiled program: :func:`dpaudit.dpsgd.training.make_run` vmapped
  over run keys and over the canary's inclusion mask (a masked row is never sampled, which is
  the same mechanism as removing it). A score per run (the canary's negative loss, or for the
  white-box Dirac canary the parameter change along its coordinate) is turned into an epsilon
  lower bound by :func:`dpaudit.estimators.epsilon_from_scores` (Eq. (6) of Liu & Xiong,
  UniAud; Eq. (1) of Chadha et al.).
* ``one_run`` (O(1), Steinke, Nasr & Jagielski 2023): ``m`` canaries each included with
  probability 1/2, one training run, guesses with abstention on the top and bottom scores,
  bound by :func:`dpaudit.estimators.one_run_epsilon_from_scores` (Thm. 2, Eqs. 7-9 of
  UniAud). Black-box (loss) scores for example canaries, white-box scores for Dirac canaries.
  Both games also play UniAud's "Poisoned" baseline (Sec. VIII-A): real canaries with their
  true labels, the run starting from an initialisation the auditor warmed up on held-out
  in-distribution data (:func:`poisoned_initialisation`).
* ``uniaud`` (Alg. 2 and Thm. 3 of UniAud): synthetic canaries of Alg. 1 (uncorrelated
  features, uniform labels), *all* trained on; a comparison set with fresh labels; for each
  canary a fair coin decides whether the trained pair or the comparison pair is presented,
  the score is :math:`\mathcal{L}(f_\theta, \tilde z_i) - \mathcal{L}(f_\theta, z_i)` and the
  symmetric one-sided thresholding of Alg. 2 (line 8) makes the guesses.
* ``uniaud_plus`` (UniAud++, Alg. 3 and Eq. (12)): real images with trigger patches and random
  tags learnt by a second head (:class:`dpaudit.models.TwoHeadMLP`), the main task trained on
  every example; the self-comparison of Alg. 2 on the tag head's loss.

Every result reports the epsilon lower bound, the ceiling :math:`\epsilon_O` the game could
reach with its number of observations, the accountant's epsilon for the run, and the test
accuracy of the trained model(s). The O(1) games also report, from the same scores and guesses,
the f-DP one-run bounds of Mahloujifar, Melis & Chaudhuri (ICML 2025): ``epsilon_fdp_gaussian``
(valid if the trade-off curve is Gaussian, mu-GDP) and ``epsilon_fdp_run`` (valid if it is the
audited run's own subsampled-Gaussian curve with some noise multiplier), beside the Steinke
bound, which holds for any (eps, delta)-DP algorithm.

Neighbouring relations: ``many_run`` and ``one_run`` add or remove a canary, the relation
DP-SGD's accountant is stated for. ``uniaud`` and ``uniaud_plus`` present one of two
labellings (tags) of the same canary, so D and D' differ by a *replaced* record; their
``epsilon_theory`` is the replace-one epsilon of the same run
(:func:`dpaudit.accounting.dpsgd_epsilon_replace_one`), which UniAud's Thm. 3 leaves implicit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate, accounting, distributed, estimators, models, results
from dpaudit import data as data_lib
from dpaudit.data import canaries as canary_lib
from dpaudit.dpsgd import clipping, training
from dpaudit.dpsgd.spec import DPSGDSettings, DPSGDSpec, schedule
from dpaudit.results import to_plain

GAMES = ("many_run", "one_run", "uniaud", "uniaud_plus")
CANARY_TYPES = ("in_distribution", "mislabelled", "gaussian", "orthogonal", "dirac", "trigger",
                "poisoned")
GAME_CANARIES = {
    "many_run": ("in_distribution", "mislabelled", "gaussian", "orthogonal", "dirac", "poisoned"),
    "one_run": ("in_distribution", "mislabelled", "gaussian", "orthogonal", "dirac", "poisoned"),
    "uniaud": ("gaussian", "orthogonal"),
    "uniaud_plus": ("trigger",),
}
SCORE_METHODS = ("split", "bonferroni")


# Options added after audit records were first stored: a record (a grid cell's configuration,
# its key in a cell store) leaves them out at these defaults, so earlier records stay valid.
LATER_OPTIONS = {"model": "mlp", "canary_dim": 0, "num_canary_classes": 0,
                 "canaries_only": False, "num_warmup_examples": 0, "warmup_epochs": 50.0}
# The order of a record's keys (that of the configuration before AuditSettings existed; the
# grid's SHARED_FIELDS keep it too).
RECORD_ORDER = ("game", "canary", "num_canaries", "num_runs", "epsilon", "delta",
                "significance", "epochs", "batch_size", "learning_rate", "optimizer",
                "l2_clip_norm", "physical_batch_size", "hidden_sizes", "include_data", "sigma0",
                "num_tags", "num_tag_bits", "tag_weight", "patch_size", "correction", "method",
                "chunk_size", *LATER_OPTIONS)


def settings_record(settings: Any, names: Sequence[str]) -> dict[str, Any]:
  """``{name: settings.name}`` over ``names``, less the :data:`LATER_OPTIONS` at their
  defaults (the record of a configuration, see :meth:`DPSGDAuditConfig.to_dict`)."""
  _validate.check_instance("settings", settings, AuditSettings)
  return {name: getattr(settings, name) for name in names
          if name not in LATER_OPTIONS or getattr(settings, name) != LATER_OPTIONS[name]}


@dataclasses.dataclass(frozen=True)
class AuditSettings(DPSGDSettings):
  """The settings of a DP-SGD audit that a grid of audits shares (every field of
  :class:`DPSGDAuditConfig` but the grid's axes game, canary, epsilon, m and lambda); the
  grid (:class:`dpaudit.audits.dpsgd_grid.DPSGDGridConfig`) and one audit both take them from
  here, the DP-SGD ones (epochs, batch_size, learning_rate, l2_clip_norm, delta) from
  :class:`~dpaudit.dpsgd.spec.DPSGDSettings`. :class:`DPSGDAuditConfig` documents and
  validates them."""
  num_runs: int = 500
  significance: float = 0.05
  optimizer: str = "sgd"
  physical_batch_size: int = 256
  hidden_sizes: tuple[int, ...] = (256,)
  include_data: bool = False
  sigma0: float = 0.1
  num_tags: int = 100
  num_tag_bits: int = 1
  patch_size: int = 3
  correction: str = "bonferroni"
  method: str = "split"
  chunk_size: int = 0
  model: str = "mlp"
  canary_dim: int = 0
  num_canary_classes: int = 0
  canaries_only: bool = False
  num_warmup_examples: int = 0
  warmup_epochs: float = 50.0


@dataclasses.dataclass(frozen=True)
class DPSGDAuditConfig(AuditSettings):
  """One DP-SGD audit.

  Attributes:
    game: one of ``GAMES``.
    canary: one of ``GAME_CANARIES[game]``.
    num_canaries: m, the canaries of an O(1) game (ignored by ``many_run``, which has one).
    num_runs: T, runs per side of ``many_run`` (2T runs in all).
    epsilon: target epsilon the noise is calibrated to (RDP accountant, add-or-remove, at
      ``delta``); ``inf`` trains without noise (clipping kept).
    delta: the delta of the accountant and of the lower bounds, in (0, 1).
    significance: beta of the 1 - beta confidence of the lower bound.
    epochs: expected passes over the training set (steps and noise:
      :meth:`dpsgd_spec`, :meth:`dpaudit.dpsgd.spec.DPSGDSpec.resolve`).
    batch_size: expected Poisson batch size qN.
    learning_rate, optimizer, l2_clip_norm, physical_batch_size: as in
      :class:`dpaudit.dpsgd.TrainConfig`.
    hidden_sizes: hidden widths of the MLP (empty: logistic regression).
    include_data: ``uniaud`` only: also train on the real training set (Alg. 2 trains on the
      canaries alone, the data-independent setting).
    sigma0: feature scale of Gaussian synthetic canaries (Alg. 1).
    num_tags, num_tag_bits, tag_weight, patch_size: UniAud++ tag space C_e, tags per canary H,
      the lambda of Eq. (12) and the side of the square trigger patch.
    correction: ``"bonferroni"`` (valid over the guess grid) or ``"none"`` (the papers'
      best-r reporting; optimistic) for the O(1) games.
    method: threshold selection of ``many_run``: ``"split"`` or ``"bonferroni"``.
    chunk_size: runs per vmapped call of ``many_run`` (0: all 2T at once).
    model: the classifier trained when no flax module is passed to :func:`run`: one of
      :data:`dpaudit.models.MODEL_NAMES`; ``"mlp"`` is the MLP of ``hidden_sizes``
      (``"logistic"``: no hidden layer), any other name
      :func:`dpaudit.models.make_model`'s model. ``uniaud_plus`` trains its two-head MLP
      (``"mlp"`` only).
    canary_dim: d, the features of each data-independent synthetic canary (``gaussian``,
      ``orthogonal``: Alg. 1 of UniAud draws them in :math:`\\mathbb{R}^d`); 0: the data's
      example shape. Table IV of UniAud uses d = 1000.
    num_canary_classes: C, the classes of those canaries' uniform labels (0: the data's);
      Table IV uses C = 1000. A canary dimension or class count of their own needs a training
      set of canaries alone (the model takes their shape; its ``test_accuracy`` is NaN, there
      being no test set of that shape): ``one_run`` with ``canaries_only``, or ``uniaud``
      without ``include_data``.
    canaries_only: UniAud's Case I (m = n): train on the canaries alone, the dataset is not
      appended (``one_run`` with example canaries: the run trains on the included ones;
      ``uniaud`` does so unless ``include_data``). ``many_run`` (one canary), Dirac canaries
      (parameter coordinates) and ``uniaud_plus`` (Case II: triggers on the data) cannot.
    num_warmup_examples, warmup_epochs: the ``poisoned`` canary's warm-up (UniAud Sec. VIII-A,
      Fig. 1: 5,000 auxiliary examples, 50 epochs): the initialisation is trained without
      privacy for ``warmup_epochs`` (> 0) expected passes over ``num_warmup_examples`` held-out
      pool rows that are not canaries (0: all of them), with this audit's optimizer, learning
      rate and expected batch size (:func:`poisoned_initialisation`). Ignored by the other
      canaries.
  """
  game: str = "one_run"
  canary: str = "mislabelled"
  num_canaries: int = 1000
  epsilon: float = 8.0
  tag_weight: float = 1.0

  def __post_init__(self):
    _validate.check_choice("game", self.game, GAMES)
    if self.canary not in GAME_CANARIES[self.game]:
      raise ValueError(f"canary={self.canary!r} is not valid for game={self.game!r}; choose "
                       f"one of {', '.join(GAME_CANARIES[self.game])}")
    for name, low in (("num_canaries", 1), ("num_runs", 2), ("physical_batch_size", 1),
                      ("num_tags", 2), ("num_tag_bits", 1),
                      ("patch_size", 1), ("chunk_size", 0), ("num_warmup_examples", 0)):
      _validate.check_integer(name, getattr(self, name), low)
    # Held at once whatever the data: a key, masks and scores per run (2T runs), and a few
    # arrays per canary (its example, label, membership and score).
    _validate.check_allocation("num_runs", self.num_runs, 2 * 64, what="pair of runs")
    _validate.check_allocation("num_canaries", self.num_canaries, 256, what="canary")
    if not isinstance(self.include_data, (bool, np.bool_)):
      raise ValueError(f"include_data={self.include_data!r} must be True or False")
    _validate.check_range("epsilon", self.epsilon, 0.0, low_open=True)
    super().__post_init__()  # epochs, batch_size, learning_rate, l2_clip_norm, delta
    _validate.check_significance(self.significance)
    _validate.check_choice("optimizer", self.optimizer, training.OPTIMIZERS)
    if any(isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 1
           for w in self.hidden_sizes):
      raise ValueError(f"hidden_sizes={self.hidden_sizes!r} must be integers >= 1")
    # Each hidden-to-hidden weight matrix, with its gradient and the optimiser's state (float32),
    # must fit before XLA is asked for it (an absurd width hangs or aborts the compiler).
    for before, after in zip(self.hidden_sizes[:-1], self.hidden_sizes[1:]):
      _validate.check_allocation("hidden_sizes", int(before) * int(after), 16.0,
                                 what="weight of consecutive hidden layers")
    for width in self.hidden_sizes:
      _validate.check_integer("hidden_sizes", int(width), 1, 2**31 - 1)
    if self.game == "uniaud_plus" and not self.hidden_sizes:
      raise ValueError("game='uniaud_plus' needs at least one hidden layer (the shared encoder "
                       "of the two heads); hidden_sizes is empty")
    _validate.check_range("sigma0", self.sigma0, 0.0, math.inf, low_open=True, high_open=True)
    _validate.check_range("tag_weight", self.tag_weight, 0.0, math.inf, high_open=True)
    _validate.check_range("warmup_epochs", self.warmup_epochs, 0.0, math.inf, low_open=True,
                          high_open=True)
    if self.num_tag_bits >= self.num_tags:
      raise ValueError(f"num_tag_bits={self.num_tag_bits} is outside [1, num_tags - 1 = "
                       f"{self.num_tags - 1}]")
    _validate.check_choice("correction", self.correction, estimators.one_run.CORRECTIONS)
    _validate.check_choice("method", self.method, SCORE_METHODS)
    if self.canary == "dirac" and self.optimizer != "sgd":
      raise ValueError(f"canary='dirac' reads the canary off the parameter change, which "
                       f"needs optimizer='sgd', got optimizer={self.optimizer!r}")
    self._check_model_and_canary_shape()

  def _check_model_and_canary_shape(self) -> None:
    _validate.check_choice("model", self.model, models.MODEL_NAMES)
    if self.game == "uniaud_plus" and self.model != "mlp":
      raise ValueError(f"model={self.model!r} is not valid for game='uniaud_plus': it trains "
                       "its own two-head MLP (a class head and a tag head, Eq. (12)); choose "
                       "model='mlp' and set hidden_sizes")
    _validate.check_integer("canary_dim", self.canary_dim, 0, 2**31 - 1)
    _validate.check_integer("num_canary_classes", self.num_canary_classes, 0, 2**31 - 1)
    if self.num_canary_classes == 1:
      raise ValueError("num_canary_classes=1 is outside the valid range: 0 (the data's "
                       "classes) or [2, 2^31 - 1]")
    if not isinstance(self.canaries_only, (bool, np.bool_)):
      raise ValueError(f"canaries_only={self.canaries_only!r} must be True or False")
    # The canaries' features (float64, a few copies) and, for orthogonal ones, the d x d
    # Haar matrix they are drawn from.
    _validate.check_allocation("canary_dim", self.num_canaries * self.canary_dim, 32.0,
                               low=0, what="feature of the num_canaries canaries")
    if self.canary == "orthogonal":
      _validate.check_allocation("canary_dim", self.canary_dim ** 2, 32.0, low=0,
                                 what="entry of the d x d orthogonal matrix")
    if self.canaries_only:
      if self.game not in ("one_run", "uniaud") or self.canary == "dirac":
        raise ValueError(f"canaries_only=True (Case I) is not valid for game={self.game!r} "
                         f"with canary={self.canary!r}: only one_run with example canaries "
                         "and uniaud train on canaries alone")
      if self.include_data:
        raise ValueError("canaries_only=True contradicts include_data=True: choose one")
    for name in ("canary_dim", "num_canary_classes"):
      value = getattr(self, name)
      if value == 0:
        continue
      if self.canary not in ("gaussian", "orthogonal") or self.game not in ("one_run",
                                                                            "uniaud"):
        raise ValueError(f"{name}={value} is not valid for game={self.game!r} with canary="
                         f"{self.canary!r}: only the synthetic canaries (gaussian, orthogonal) "
                         "of one_run and uniaud have a shape of their own; set it to 0")
      if not self.trains_on_canaries_only:
        raise ValueError(f"{name}={value} gives the canaries a shape of their own, so the "
                         "model cannot also train on the data: set canaries_only=True"
                         + (" and include_data=False" if self.include_data else "")
                         + f" (Case I), or {name}=0")

  @property
  def adjacency(self) -> str:
    return "replace_one" if self.game in ("uniaud", "uniaud_plus") else "add_or_remove_one"

  @property
  def trains_on_canaries_only(self) -> bool:
    """Case I of UniAud (m = n): the training set is the canaries alone."""
    return self.canaries_only or (self.game == "uniaud" and not self.include_data)

  def dpsgd_spec(self, *, epsilon: float | None = None, noise_multiplier: float | None = None,
                 **overrides: Any) -> DPSGDSpec:
    """The DP-SGD of this audit: noise calibrated to its ``epsilon`` (unless another
    ``epsilon`` or a ``noise_multiplier`` is given) by the RDP accountant, with its optimizer
    and physical batch size (:meth:`dpaudit.dpsgd.spec.DPSGDSettings.dpsgd_spec`)."""
    if epsilon is None and noise_multiplier is None:
      epsilon = self.epsilon
    return super().dpsgd_spec(
        epsilon=epsilon, noise_multiplier=noise_multiplier,
        **{"optimizer": self.optimizer, "physical_batch_size": self.physical_batch_size,
           **overrides})

  def to_dict(self) -> dict[str, Any]:
    """The record of this audit (a grid cell's ``config``): every field, less the
    :data:`LATER_OPTIONS` at their defaults."""
    return settings_record(self, RECORD_ORDER)


class AuditData(NamedTuple):
  """Real data of an audit: the training set D, a test set and a held-out canary pool."""
  train_features: np.ndarray
  train_labels: np.ndarray
  test_features: np.ndarray
  test_labels: np.ndarray
  pool_features: np.ndarray
  pool_labels: np.ndarray
  num_classes: int


@dataclasses.dataclass(frozen=True)
class DPSGDAuditResult:
  """Result of :func:`run` (all plain Python numbers after :meth:`to_dict`).

  Attributes:
    epsilon_lower_bound: the audit's 1 - significance lower confidence bound on epsilon.
    epsilon_ceiling: :math:`\\epsilon_O`, the largest bound this game can report with its
      number of observations (every guess, or every run, classified correctly).
    epsilon_theory: the accountant's epsilon for the relation the game tests (add-or-remove:
      RDP, the calibration target; replace-one for the UniAud games: PLD).
    epsilon_theory_pld: add-or-remove epsilon from the PLD accountant.
    noise_multiplier, sampling_rate, num_steps: the DP-SGD run(s).
    test_accuracy: main-task test accuracy (mean over runs for ``many_run``); NaN when the
      canaries have a shape of their own (``canary_dim``, ``num_canary_classes``).
    num_observations: runs (many_run) or canaries (O(1) games) behind the bound.
    details: game-specific figures (guesses, correct guesses, threshold, error counts, ...).
    optimistic: True when ``correction="none"``: ``epsilon_lower_bound`` is the best of
      several tests chosen after seeing the outcome (the papers' numbers), NOT a valid
      1 - significance lower bound; so are ``epsilon_fdp_gaussian`` and ``epsilon_fdp_run``.
    epsilon_fdp_gaussian: the O(1) games' f-DP one-run bound (Mahloujifar, Melis & Chaudhuri,
      ICML 2025) on the same guesses: epsilon at ``delta`` of the strongest mu-GDP curve the
      audit rejects (``details["mu_lower_bound"]``). A lower bound *if the trade-off curve is
      Gaussian (mu-GDP)*, where ``epsilon_lower_bound`` holds for any (eps, delta)-DP
      algorithm. NaN for ``many_run`` (and in results stored before it existed).
    epsilon_fdp_run: the same within the audited run's own family (the subsampled-Gaussian
      composition at its sampling rate and step count, some noise multiplier
      ``details["noise_multiplier_upper_bound"]``): a lower bound *if the curve is this DP-SGD
      run's with some noise multiplier*. NaN for ``many_run``.
  """
  game: str
  canary: str
  adjacency: str
  epsilon_lower_bound: float
  epsilon_ceiling: float
  epsilon_theory: float
  epsilon_theory_pld: float
  noise_multiplier: float
  sampling_rate: float
  num_steps: int
  num_training_examples: int
  test_accuracy: float
  num_observations: int
  details: dict
  wall_time_s: float
  optimistic: bool = False
  epsilon_fdp_gaussian: float = math.nan
  epsilon_fdp_run: float = math.nan

  @property
  def warnings(self) -> list[str]:
    """One line per reason not to read ``epsilon_lower_bound`` at face value."""
    out = []
    if self.optimistic:
      out.append("correction='none': epsilon_lower_bound is optimistic (the best of several "
                 "tests, each at the full significance), not a valid lower bound")
      if not (math.isnan(self.epsilon_fdp_gaussian) and math.isnan(self.epsilon_fdp_run)):
        out.append("correction='none': epsilon_fdp_gaussian and epsilon_fdp_run are "
                   "optimistic too, not valid lower bounds")
    ceiling = self.details.get("max_epsilon_ceiling")
    free = self.details.get("max_epsilon_ceiling_without_delta")
    if ceiling is not None and free is not None and free > 0 and ceiling < 0.5 * free:
      out.append(f"delta makes the one-run bound {'vacuous' if ceiling <= 0 else 'weak'}: "
                 f"with every guess correct it could certify at most {ceiling:.3g} "
                 f"({free:.3g} with delta = 0); lower delta so that "
                 f"num_canaries * delta <= 0.01 or use fewer guesses")
    return out

  def to_dict(self) -> dict:
    """Plain values; an optimistic figure is keyed ``epsilon_optimistic``, never
    ``epsilon_lower_bound``, so that no one reads it as a valid bound."""
    out = to_plain(dataclasses.asdict(self))
    if self.optimistic:
      out["epsilon_optimistic"] = out.pop("epsilon_lower_bound")
    out["warnings"] = self.warnings
    return out

  @classmethod
  def from_dict(cls, stored: Any) -> DPSGDAuditResult:
    """The result whose :meth:`to_dict` (after a strict-JSON round trip) is ``stored``.

    Checks that it is whole (for :class:`dpaudit.results.CellStore`): every key with its type,
    a known game, canary and relation, the bound under the key its ``optimistic`` flag names,
    no NaN bound or ceiling, the bound not above its own ceiling :math:`\\epsilon_O` (relative
    slack 1e-9), a sampling rate in (0, 1], counts >= 1, accuracy in [0, 1] or NaN and the
    stored warnings equal to those the figures give. Raises KeyError, TypeError or
    ValueError."""
    bound = "epsilon_optimistic" if isinstance(stored, dict) and stored.get("optimistic") \
        else "epsilon_lower_bound"
    results.check_fields("DPSGDAuditResult", stored, {
        "game": str, "canary": str, "adjacency": str, bound: float, "epsilon_ceiling": float,
        "epsilon_theory": float, "epsilon_theory_pld": float, "noise_multiplier": float,
        "sampling_rate": float, "num_steps": int, "num_training_examples": int,
        "test_accuracy": float, "num_observations": int, "details": dict,
        "wall_time_s": float, "optimistic": bool, "warnings": list})
    fields = {f.name for f in dataclasses.fields(cls)} | {"epsilon_optimistic", "warnings"}
    extra = sorted(set(stored) - fields)
    if extra or ("epsilon_optimistic" in stored and "epsilon_lower_bound" in stored):
      raise KeyError(f"DPSGDAuditResult has unexpected keys {extra or ['epsilon_lower_bound']}")
    kwargs = {k: v for k, v in stored.items() if k not in ("epsilon_optimistic", "warnings")}
    kwargs["epsilon_lower_bound"] = stored[bound]
    for name in ("epsilon_fdp_gaussian", "epsilon_fdp_run"):  # absent from older results
      if name in stored:
        results.check_fields("DPSGDAuditResult", stored, {name: float})
    result = cls(**kwargs)
    if result.canary not in GAME_CANARIES.get(result.game, ()):
      raise ValueError(f"game={result.game!r} with canary={result.canary!r} is not an audit")
    adjacency = "replace_one" if result.game in ("uniaud", "uniaud_plus") else "add_or_remove_one"
    if result.adjacency != adjacency:
      raise ValueError(f"adjacency={result.adjacency!r} is not that of game={result.game!r}")
    lower, ceiling = result.epsilon_lower_bound, result.epsilon_ceiling
    if math.isnan(lower) or math.isnan(ceiling):
      raise ValueError(f"{bound}={lower} and epsilon_ceiling={ceiling} must not be NaN")
    if lower > ceiling + 1e-9 * max(1.0, abs(ceiling)):
      raise ValueError(f"{bound}={lower} is above its own ceiling epsilon_ceiling={ceiling}")
    fdp = (result.epsilon_fdp_gaussian, result.epsilon_fdp_run)
    if result.game == "many_run" and not all(math.isnan(e) for e in fdp):
      raise ValueError(f"epsilon_fdp_gaussian={fdp[0]} and epsilon_fdp_run={fdp[1]} must be "
                       "NaN for game='many_run' (it has no f-DP one-run bound)")
    if any(e < 0 for e in fdp):
      raise ValueError(f"epsilon_fdp_gaussian={fdp[0]} and epsilon_fdp_run={fdp[1]} must be "
                       ">= 0 or NaN")
    if not 0 < result.sampling_rate <= 1 or result.noise_multiplier < 0:
      raise ValueError(f"sampling_rate={result.sampling_rate} must lie in (0, 1] and "
                       f"noise_multiplier={result.noise_multiplier} be >= 0")
    if min(result.num_steps, result.num_training_examples, result.num_observations) < 1:
      raise ValueError("num_steps, num_training_examples and num_observations must be >= 1")
    if not (0 <= result.test_accuracy <= 1 or math.isnan(result.test_accuracy)):
      raise ValueError(f"test_accuracy={result.test_accuracy} is outside [0, 1] (or NaN: "
                       "canaries of a shape of their own)")
    if stored["warnings"] != result.warnings:
      raise ValueError("the stored warnings are not those of the stored figures")
    return result


def check_grid_cell(cell: Any, config: DPSGDAuditConfig | None = None) -> None:
  """Raises KeyError, TypeError or ValueError unless ``cell`` is a whole cell of
  :func:`dpaudit.audits.dpsgd_grid.run_cell`: ``{"status": "done", "config", "result"}`` with a
  result :meth:`DPSGDAuditResult.from_dict` accepts, or ``{"status": "skipped", "config",
  "reason"}``; given ``config``, the cell's configuration (and its result's game and canary)
  must be that one's."""
  results.check_fields("grid cell", cell, {"status": str, "config": dict})
  if cell["status"] == "done":
    result = DPSGDAuditResult.from_dict(results.check_fields("grid cell", cell,
                                                              {"result": dict})["result"])
  elif cell["status"] == "skipped":
    results.check_fields("grid cell", cell, {"reason": str})
    result = None
  else:
    raise ValueError(f"grid cell status={cell['status']!r} is neither 'done' nor 'skipped'")
  if config is not None:
    if results.canonical_json(cell["config"]) != results.canonical_json(config.to_dict()):
      raise ValueError("the grid cell holds another audit configuration")
    if result is not None and (result.game, result.canary) != (config.game, config.canary):
      raise ValueError(f"the grid cell's result is of {result.game}:{result.canary}, not "
                       f"{config.game}:{config.canary}")


# ------------------------------------------------------------------------------ building blocks

def _check_examples(features, labels, name: str = "") -> None:
  """Real finite ``features`` [n, ...] and integer ``labels`` [n]."""
  _validate.check_real_array(f"{name}features", features, nonempty=False)
  if np.ndim(features) < 1:
    raise ValueError(f"{name}features must have an example axis, got shape {np.shape(features)}")
  dtype = labels.dtype if hasattr(labels, "dtype") else np.asarray(labels).dtype
  if np.dtype(dtype).kind not in "iu" or np.ndim(labels) != 1:
    raise ValueError(f"{name}labels must be a 1-D integer array, got dtype {dtype} and shape "
                     f"{np.shape(labels)}")
  if np.shape(labels)[0] != np.shape(features)[0]:
    raise ValueError(f"{name}labels has {np.shape(labels)[0]} entries but {name}features has "
                     f"{np.shape(features)[0]} rows")


def _check_audit_call(key, config, data, game: str | None = None) -> None:
  """The arguments of an audit, before any training: a PRNG key, a :class:`DPSGDAuditConfig`
  (of ``game``), and :class:`AuditData` whose splits are real features with integer labels in
  ``[0, num_classes)``."""
  _validate.check_key(key)
  if not isinstance(config, DPSGDAuditConfig):
    raise ValueError(f"config must be a DPSGDAuditConfig, got {type(config).__name__}")
  if game is not None and config.game != game:
    raise ValueError(f"config.game={config.game!r} but this function plays {game!r}; call "
                     "dpaudit.audits.dpsgd.run to dispatch on the game")
  if not isinstance(data, AuditData):
    raise ValueError(f"data must be an AuditData, got {type(data).__name__}")
  num_classes = _validate.check_integer("data.num_classes", data.num_classes, 2)
  for split in ("train", "test", "pool"):
    features, labels = getattr(data, f"{split}_features"), getattr(data, f"{split}_labels")
    _check_examples(features, labels, f"data.{split}_")
    _validate.check_range(f"data.{split}_labels", labels, 0, num_classes - 1)


def softmax_losses(model, params, features, labels) -> jax.Array:
  """Per-example cross entropy of ``model`` at ``params`` (the black-box membership score)."""
  _check_examples(features, labels)
  return clipping.softmax_cross_entropy(model.apply({"params": params}, features), labels)


def weakest_coordinates(model, params, features, labels, count: int,
                        sample_size: int = 512) -> np.ndarray:
  """``count`` flat parameter indices where the data's per-example gradients are smallest.

  The white-box Dirac canaries go there (Nasr et al. 2023 place them in coordinates the real
  gradients do not touch): the per-example squared gradients at ``params`` are summed over up
  to ``sample_size`` training examples and the ``count`` smallest coordinates are returned,
  ties broken by index (for an MLP on images with always-blank pixels, these are the input
  weights of those pixels, whose gradient is exactly zero at every step). Depends on the
  data and the initialisation only, never on the canaries' membership.
  """
  _validate.check_integer("count", count, 0)
  _validate.check_integer("sample_size", sample_size, 1)
  _check_examples(features, labels)
  n = min(sample_size, features.shape[0])

  def flat_grad(x, y):
    grad = jax.grad(lambda p: clipping.softmax_cross_entropy(
        model.apply({"params": p}, x[None]), y[None])[0])(params)
    return jax.flatten_util.ravel_pytree(grad)[0]

  energy = jnp.sum(jax.vmap(flat_grad)(jnp.asarray(features[:n]),
                                       jnp.asarray(labels[:n])) ** 2, axis=0)
  if count > energy.shape[0]:
    raise ValueError(f"num_canaries={count} exceeds the {energy.shape[0]} model parameters "
                     "available as Dirac canary coordinates")
  return np.sort(np.argsort(np.asarray(energy), kind="stable")[:count])


def poisoned_initialisation(key: jax.Array, model: nn.Module, features, labels, *,
                            epochs: float, batch_size: int, learning_rate: float,
                            optimizer: str = "sgd", physical_batch_size: int = 256) -> Any:
  """The crafted initialisation of UniAud's "Poisoned" baseline: the model warmed up on
  auxiliary in-distribution data.

  Liu & Xiong, UniAud, Sec. VIII-A (baseline 3) and Fig. 1 ("the adversarial model
  initialization is warmed up on an extra auxiliary dataset with 5,000 samples and 50
  epochs"), after the privacy backdoors of Liu et al. (Precurious) and Wen et al.: ``model``
  is initialised from ``key`` and trained *without* privacy (no clipping, no noise) on
  (``features``, ``labels``) for ``epochs`` expected passes, with Poisson batches of expected
  size ``batch_size`` (:func:`dpaudit.dpsgd.spec.schedule`), ``optimizer`` and
  ``learning_rate``. The audited DP-SGD run then starts from the returned parameters instead of
  a random initialisation. The warm-up data must not contain the canaries
  (:func:`dpaudit.data.canaries.poisoned_canaries` draws them apart), so the initialisation is
  independent of which canaries are in, and the audit stays valid: DP-SGD's guarantee holds
  for any data-independent initialisation.

  Returns:
    The parameters (a pytree of ``model.init``'s ``"params"``).

  >>> import numpy as np
  >>> x = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
  >>> y = (x[:, 0] > 0).astype(np.int32)
  >>> model = models.MLP((8,), 2, example_ndim=1)
  >>> params = poisoned_initialisation(jax.random.key(0), model, x, y, epochs=20,
  ...                                  batch_size=8, learning_rate=0.5)
  >>> float(_accuracy(model, params, x, y)) > 0.8
  True
  """
  _validate.check_key(key)
  _validate.check_instance("model", model, nn.Module)
  _check_examples(features, labels)
  if np.shape(features)[0] < 1:
    raise ValueError("features has no rows: the warm-up needs at least one example")
  _validate.check_choice("optimizer", optimizer, training.OPTIMIZERS)
  spec = DPSGDSpec(epochs=epochs, batch_size=batch_size, noise_multiplier=0.0,
                   l2_clip_norm=math.inf, optimizer=optimizer, learning_rate=learning_rate,
                   physical_batch_size=physical_batch_size)
  train_config = spec.resolve(int(np.shape(features)[0])).train_config
  run = training.make_run(model, train_config, int(np.shape(features)[0]),
                          jnp.asarray(features[:1]))
  return jax.device_get(jax.jit(run)(key, jnp.asarray(features), jnp.asarray(labels)).params)


def _warm_run(model, train_config: training.TrainConfig, num_examples: int, example,
              initial_params, loss_fn=clipping.softmax_cross_entropy,
              dirac_coordinates=None) -> Callable:
  """:func:`dpaudit.dpsgd.training.make_run`'s run (same signature, same keys for noise and
  batches), started from ``initial_params`` instead of ``model.init``."""

  def run(key, features, labels, example_mask=None, dirac_mask=None, hyper=None):
    state, optimizer = training.init_state(key, model, example, train_config, num_examples,
                                           hyper)
    params = jax.tree.map(jnp.asarray, initial_params)
    state = state._replace(params=params, opt_state=optimizer.init(params))
    step = training.make_step(model, optimizer, train_config, num_examples, loss_fn,
                              dirac_coordinates=dirac_coordinates)

    def body(state, _):
      state, metrics = step(state, features, labels, example_mask, dirac_mask)
      return state, metrics.batch_size

    state, batch_sizes = jax.lax.scan(body, state, None, length=train_config.num_steps)
    return training.RunOutput(params, state.params, batch_sizes)

  return run


def _make_run(model, train_config, num_examples, example, initial_params=None,
              loss_fn=clipping.softmax_cross_entropy, dirac_coordinates=None) -> Callable:
  """A run from ``model.init`` (:func:`dpaudit.dpsgd.training.make_run`), or from
  ``initial_params`` where given (the poisoned baseline)."""
  if initial_params is None:
    return training.make_run(model, train_config, num_examples, example, loss_fn,
                             dirac_coordinates=dirac_coordinates)
  return _warm_run(model, train_config, num_examples, example, initial_params, loss_fn,
                   dirac_coordinates)


def run_many(run: Callable, keys: jax.Array, features, labels, example_masks=None,
             dirac_masks=None, chunk_size: int = 0,
             hyper: training.Hyperparameters | None = None) -> training.RunOutput:
  """All runs of ``run`` (from :func:`dpaudit.dpsgd.training.make_run`) as vmapped chunks.

  One compilation: the last chunk is padded with spare keys (and copies of the last masks)
  and the padding is dropped. Under ``jax.distributed`` the chunks are spread over the
  processes (:func:`dpaudit.distributed.map_chunks`) and every process gets every run, the
  same as one process computing them all. ``hyper`` (:func:`training.hyperparameters`) is
  passed to every run as an argument, so that the program holds no sigma or learning rate.
  Returns the stacked :class:`RunOutput` as NumPy arrays.
  """
  if not callable(run):
    raise ValueError(f"run must be a function (from training.make_run), got "
                     f"{type(run).__name__}")
  if np.ndim(keys) < 1 or np.shape(keys)[0] < 1:
    raise ValueError(f"keys must hold at least one PRNG key per run, got shape "
                     f"{np.shape(keys)}")
  _validate.check_key(keys[0], "keys[0]")
  _validate.check_integer("chunk_size", chunk_size, 0)
  num_runs = keys.shape[0]
  chunk = chunk_size or num_runs
  num_chunks = math.ceil(num_runs / chunk)
  padded = num_chunks * chunk
  extra = padded - num_runs

  def pad(x):
    if x is None or extra == 0:
      return x
    return jnp.concatenate([x, jnp.repeat(x[-1:], extra, axis=0)])

  if extra:
    keys = jnp.concatenate([keys, jax.random.split(keys[-1], extra)])
  example_masks, dirac_masks = pad(example_masks), pad(dirac_masks)
  in_axes = (0, None, None, None if example_masks is None else 0,
             None if dirac_masks is None else 0, None)
  vmapped = jax.jit(jax.vmap(run, in_axes=in_axes))
  features, labels = jnp.asarray(features), jnp.asarray(labels)

  def compute_chunk(i):
    part = slice(i * chunk, (i + 1) * chunk)
    return vmapped(keys[part], features, labels,
                   None if example_masks is None else example_masks[part],
                   None if dirac_masks is None else dirac_masks[part], hyper)

  outs = distributed.map_chunks(compute_chunk, num_chunks)
  return jax.tree.map(lambda *xs: np.concatenate(xs)[:num_runs], *outs)


def _accuracy(model, params, features, labels) -> float:
  """Main-task accuracy on ``features``; NaN where the model takes canaries of a shape of
  their own (``features`` is then ``None``: no test set has that shape)."""
  if features is None:
    return math.nan
  outputs = model.apply({"params": params}, jnp.asarray(features))
  main = outputs[0] if isinstance(outputs, tuple) else outputs
  return float(jnp.mean(jnp.argmax(main, axis=-1) == jnp.asarray(labels)))


def _flat(params) -> jax.Array:
  return jax.flatten_util.ravel_pytree(params)[0]


class _Plan(NamedTuple):
  """The DP-SGD run every game shares: its config, noise and accountant figures."""
  train_config: training.TrainConfig
  noise_multiplier: float
  epsilon_rdp: float
  epsilon_pld: float
  epsilon_replace: float


def _plan(config: DPSGDAuditConfig, num_examples: int) -> _Plan:
  if config.batch_size > num_examples:
    raise ValueError(f"batch_size={config.batch_size} exceeds the {num_examples} training "
                     "examples")
  q, steps, sigma, train_config = config.dpsgd_spec().resolve(num_examples)
  eps_rdp = accounting.dpsgd_epsilon(sigma, q, steps, config.delta)
  eps_pld = accounting.dpsgd_epsilon(sigma, q, steps, config.delta, accountant="pld")
  eps_replace = math.nan
  if config.adjacency == "replace_one":
    eps_replace = accounting.dpsgd_epsilon_replace_one(sigma, q, steps, config.delta)
  return _Plan(train_config, sigma, eps_rdp, eps_pld, eps_replace)


def canary_shape(config: DPSGDAuditConfig, data: AuditData) -> tuple[tuple[int, ...], int]:
  """``(example_shape, num_classes)`` of the examples the model is trained on: the synthetic
  canaries' own (``config.canary_dim``, ``config.num_canary_classes``) where set, else the
  data's."""
  _validate.check_instance("config", config, DPSGDAuditConfig)
  _validate.check_instance("data", data, AuditData)
  example_shape = (tuple(data.train_features.shape[1:]) if not config.canary_dim
                   else (int(config.canary_dim),))
  return example_shape, int(config.num_canary_classes or data.num_classes)


def _test_features(config: DPSGDAuditConfig, data: AuditData):
  """The test features the model's accuracy is measured on; None where the canaries have a
  shape (or classes) of their own, which no test example has."""
  return None if config.canary_dim or config.num_canary_classes else data.test_features


def _poisoned(key, config: DPSGDAuditConfig, data: AuditData, model, m: int):
  """UniAud's Poisoned baseline: ``(canaries, initial_params, details)``, the m real canaries
  and the initialisation warmed up on other held-out pool rows (Sec. VIII-A)."""
  pool = data.pool_features.shape[0]
  if m >= pool:
    raise ValueError(f"num_canaries={m} leaves none of the {pool} held-out real examples for "
                     f"the poisoned warm-up; valid range [1, {pool - 1}]")
  if config.num_warmup_examples > pool - m:
    raise ValueError(f"num_warmup_examples={config.num_warmup_examples} is outside the valid "
                     f"range [0, {pool - m}]: the pool of {pool} held-out examples keeps "
                     f"{pool - m} besides the num_canaries={m} canaries")
  draw_key, warmup_key = jax.random.split(key)
  drawn = canary_lib.poisoned_canaries(draw_key, data.pool_features, data.pool_labels, m,
                                       config.num_warmup_examples)
  params = poisoned_initialisation(
      warmup_key, model, np.asarray(drawn.warmup_features), np.asarray(drawn.warmup_labels),
      epochs=config.warmup_epochs, batch_size=config.batch_size,
      learning_rate=config.learning_rate, optimizer=config.optimizer,
      physical_batch_size=config.physical_batch_size)
  num_warmup = int(drawn.warmup_labels.shape[0])
  details = dict(num_warmup_examples=num_warmup, warmup_epochs=float(config.warmup_epochs),
                 warmup_steps=schedule(config.warmup_epochs, config.batch_size, num_warmup)[1],
                 warmup_test_accuracy=_accuracy(model, params, _test_features(config, data),
                                                data.test_labels))
  return drawn.canaries, params, details


def _example_canaries(key, config: DPSGDAuditConfig, data: AuditData, m: int
                      ) -> data_lib.Canaries:
  example_shape, num_classes = canary_shape(config, data)
  if config.canary in ("in_distribution", "mislabelled"):
    if m > data.pool_features.shape[0]:
      raise ValueError(f"num_canaries={m} exceeds the {data.pool_features.shape[0]} held-out "
                       f"real examples available as {config.canary} canaries")
    if config.canary == "in_distribution":
      return data_lib.in_distribution_canaries(key, data.pool_features, data.pool_labels, m)
    return data_lib.mislabelled_canaries(key, data.pool_features, data.pool_labels, m,
                                         data.num_classes)
  return data_lib.synthetic_canaries(key, m, example_shape, num_classes,
                                     mode=config.canary, sigma0=config.sigma0)


def _result(config, plan, num_examples, lower, ceiling, accuracy, observations, details,
            start, fdp=(math.nan, math.nan)) -> DPSGDAuditResult:
  theory = plan.epsilon_replace if config.adjacency == "replace_one" else plan.epsilon_rdp
  return DPSGDAuditResult(
      game=config.game, canary=config.canary, adjacency=config.adjacency,
      epsilon_lower_bound=float(lower), epsilon_ceiling=float(ceiling),
      epsilon_theory=float(theory), epsilon_theory_pld=float(plan.epsilon_pld),
      noise_multiplier=plan.noise_multiplier,
      sampling_rate=plan.train_config.sampling_rate, num_steps=plan.train_config.num_steps,
      num_training_examples=int(num_examples), test_accuracy=float(accuracy),
      num_observations=int(observations), details=details,
      wall_time_s=time.perf_counter() - start,
      optimistic=config.correction == "none" and config.game != "many_run",
      epsilon_fdp_gaussian=float(fdp[0]), epsilon_fdp_run=float(fdp[1]))


def _check_first_layer(config: DPSGDAuditConfig, example_shape, num_classes: int) -> None:
  """The input-to-first-layer weights (with gradient and optimiser state) fit in memory."""
  inputs = int(np.prod(example_shape))
  widths = (*config.hidden_sizes, num_classes)
  _validate.check_allocation("hidden_sizes", inputs * int(widths[0]), 16.0,
                             what=f"weight of the first layer ({inputs} inputs)")


def _model(config: DPSGDAuditConfig, data: AuditData, model: nn.Module | None):
  """The model a game trains: the caller's flax module (any architecture that maps a batch of
  examples to the classes' logits), else ``config.model`` by name: the MLP of
  ``config.hidden_sizes`` for ``"mlp"``, :func:`dpaudit.models.make_model`'s for the others;
  for the examples of :func:`canary_shape`."""
  if model is not None:
    _validate.check_instance("model", model, nn.Module)
    return model
  example_shape, num_classes = canary_shape(config, data)
  if config.model != "mlp":
    return models.make_model(config.model, example_shape, num_classes)
  _check_first_layer(config, example_shape, num_classes)
  return models.MLP(tuple(config.hidden_sizes), num_classes, example_ndim=len(example_shape))


# ------------------------------------------------------------------------------ the games

def many_run_audit(key: jax.Array, config: DPSGDAuditConfig, data: AuditData, *,
                   model: nn.Module | None = None) -> DPSGDAuditResult:
  """O(T) audit: ``num_runs`` runs with the canary and as many without, vmapped.

  Runs ``0..T-1`` include the canary (D'), runs ``T..2T-1`` do not (D); every run has its own
  key (initialisation, batches, noise). Scores (higher means "canary in"): the canary's
  negative cross entropy for an example canary; for the Dirac canary, the decrease of its
  coordinate over the run, :math:`\\theta_0[c] - \\theta_T[c]` (SGD moves the coordinate by
  ``-learning_rate / (qN)`` times the noisy gradient sum, to which the canary adds
  ``l2_clip_norm`` whenever it is sampled). Bound: :func:`dpaudit.estimators.epsilon_from_scores`
  with ``config.method``; ceiling: the same bound with no errors. A ``poisoned`` canary is a
  real one and every run starts from the same warmed-up initialisation
  (:func:`poisoned_initialisation`; each run's key still draws its batches and noise).
  """
  _check_audit_call(key, config, data, "many_run")
  start = time.perf_counter()
  canary_key, coordinate_key, run_key = jax.random.split(key, 3)
  model = _model(config, data, model)
  base_x, base_y = data.train_features, data.train_labels
  t = config.num_runs
  in_flags = np.concatenate([np.ones(t, bool), np.zeros(t, bool)])
  coordinates = initial_params = None
  details: dict[str, Any] = {}
  if config.canary == "dirac":
    features, labels = base_x, base_y
    example_masks = None
    dirac_masks = jnp.asarray(in_flags[:, None])
    params0 = model.init(coordinate_key, jnp.asarray(base_x[:1]))["params"]
    coordinates = weakest_coordinates(model, params0, base_x, base_y, 1)
    details["dirac_coordinate"] = int(coordinates[0])
  else:
    if config.canary == "poisoned":  # one warmed-up initialisation, shared by every run
      canary, initial_params, warmup = _poisoned(canary_key, config, data, model, 1)
      details.update(warmup)
    else:
      canary = _example_canaries(canary_key, config, data, 1)
    features = np.concatenate([base_x, np.asarray(canary.features)])
    labels = np.concatenate([base_y, np.asarray(canary.labels)])
    example_masks = jnp.asarray(np.concatenate(
        [np.ones((2 * t, base_x.shape[0]), bool), in_flags[:, None]], axis=1))
    dirac_masks = None
  num_examples = features.shape[0]
  plan = _plan(config, num_examples)
  run = _make_run(model, plan.train_config, num_examples, jnp.asarray(features[:1]),
                  initial_params, dirac_coordinates=coordinates)
  keys = jax.random.split(run_key, 2 * t)
  out = run_many(run, keys, features, labels, example_masks, dirac_masks, config.chunk_size,
                 training.hyperparameters(plan.train_config))
  if config.canary == "dirac":
    c = int(coordinates[0])
    initial = jax.vmap(_flat)(out.initial_params)[:, c]
    final = jax.vmap(_flat)(out.params)[:, c]
    scores = np.asarray(initial - final)
  else:
    x, y = jnp.asarray(features[-1:]), jnp.asarray(labels[-1:])
    scores = -np.asarray(jax.vmap(lambda p: softmax_losses(model, p, x, y)[0])(out.params))
  in_scores, out_scores = scores[:t], scores[t:]
  bound = estimators.epsilon_from_scores(in_scores, out_scores, config.delta,
                                         config.significance, method=config.method)
  if config.method == "split":
    n_in, n_out, level = t // 2, t // 2, config.significance  # the evaluation halves
  else:
    n_in, n_out, level = t, t, float(bound.significance)
  ceiling = estimators.epsilon_from_error_counts(0, n_out, 0, n_in, config.delta, level)
  accuracy_runs = min(2 * t, 32)
  accuracies = [_accuracy(model, jax.tree.map(lambda a: a[i], out.params), data.test_features,
                          data.test_labels) for i in range(accuracy_runs)]
  details.update(
      threshold=float(bound.threshold), false_positives=int(bound.false_positives),
      negatives=int(bound.negatives), false_negatives=int(bound.false_negatives),
      positives=int(bound.positives), method=config.method,
      per_test_significance=float(bound.significance),
      mean_score_in=float(np.mean(in_scores)), mean_score_out=float(np.mean(out_scores)),
      accuracy_runs=accuracy_runs, mean_batch_size=float(np.mean(out.batch_sizes)))
  return _result(config, plan, num_examples, bound.epsilon, ceiling, np.mean(accuracies),
                 2 * t, details, start)


def _fdp_bounds(scores, members, config: DPSGDAuditConfig, plan: _Plan | None,
                correction: str, run: bool = True) -> tuple[Any, Any]:
  """The f-DP one-run bounds (Mahloujifar, Melis & Chaudhuri, ICML 2025) on the guesses of
  the Steinke bound: Gaussian family, and (with ``run``) the run's own family (None where
  not asked for: its PLD search costs seconds)."""
  gaussian = estimators.fdp_one_run_from_scores(
      jnp.asarray(scores), jnp.asarray(members), config.delta, config.significance,
      mode="symmetric", correction=correction)
  run_family = None
  if run:
    run_family = estimators.fdp_one_run_dpsgd_from_scores(
        jnp.asarray(scores), jnp.asarray(members), config.delta, config.significance,
        sampling_rate=plan.train_config.sampling_rate, num_steps=plan.train_config.num_steps,
        mode="symmetric", correction=correction, adjacency=config.adjacency)
  return gaussian, run_family


def _steinke_bound(scores, members, config: DPSGDAuditConfig):
  """Steinke, Nasr & Jagielski's one-run bound (Thm. 2 of UniAud; any (eps, delta)-DP
  algorithm) with ``config.correction``: ``(epsilon, ceiling, details)``."""
  result = estimators.one_run_epsilon_from_scores(
      jnp.asarray(scores), jnp.asarray(members), config.delta, config.significance,
      mode="symmetric", correction=config.correction)
  m = int(np.shape(scores)[0])
  ceiling = estimators.one_run_epsilon_ceiling(m, m, config.delta,
                                               float(result.per_test_significance))
  details = dict(num_guesses=int(result.num_guesses), num_correct=int(result.num_correct),
                 accuracy_of_guesses=float(result.num_correct / max(float(result.num_guesses), 1)),
                 epsilon_ceiling_at_guesses=float(result.epsilon_ceiling),
                 max_epsilon_ceiling=float(result.max_epsilon_ceiling),
                 max_epsilon_ceiling_without_delta=float(
                     result.max_epsilon_ceiling_without_delta),
                 per_test_significance=float(result.per_test_significance),
                 correction=config.correction, num_members=int(np.sum(members)),
                 grid=np.asarray(result.grid).tolist(),
                 grid_epsilon=np.asarray(result.grid_epsilon).tolist())
  return float(result.epsilon), float(ceiling), details


def _one_run_bound(scores, members, config: DPSGDAuditConfig, plan: _Plan | None = None):
  """The O(1) games' bounds from one set of scores: Steinke, Nasr & Jagielski's
  (:func:`_steinke_bound`), and the f-DP one-run bounds of Mahloujifar, Melis & Chaudhuri
  (ICML 2025) under the Gaussian (mu-GDP) family and under the audited run's own family
  (subsampled Gaussian at the run's q and T, some noise multiplier), each with
  ``config.correction``. Under ``correction="bonferroni"`` the details also hold the
  uncorrected (optimistic, the papers' best-r) figures of the same scores,
  ``optimistic_epsilon_steinke``, ``optimistic_epsilon_fdp_gaussian`` and the ceiling
  ``optimistic_epsilon_ceiling``, so that one training run gives both.

  Returns ``(steinke, ceiling, (fdp_gaussian, fdp_run), details)``; ``fdp_run`` is NaN where
  no ``plan`` (the run's q and T) is given."""
  lower, ceiling, details = _steinke_bound(scores, members, config)
  gaussian, run_family = _fdp_bounds(scores, members, config, plan, config.correction,
                                     run=plan is not None)
  details.update(mu_lower_bound=float(gaussian.mu),
                 fdp_gaussian_num_guesses=int(gaussian.num_guesses),
                 fdp_gaussian_num_correct=int(gaussian.num_correct))
  fdp_run = math.nan
  if run_family is not None:
    fdp_run = float(run_family.epsilon)
    details.update(noise_multiplier_upper_bound=float(run_family.noise_multiplier_upper_bound),
                   fdp_run_num_guesses=int(run_family.num_guesses),
                   fdp_run_num_correct=int(run_family.num_correct),
                   fdp_run_at_search_limit=bool(run_family.at_search_limit))
  if config.correction == "bonferroni":
    best, _, _ = _steinke_bound(scores, members, dataclasses.replace(config, correction="none"))
    best_gaussian, _ = _fdp_bounds(scores, members, config, plan, "none", run=False)
    m = int(np.shape(scores)[0])
    details.update(
        optimistic_epsilon_steinke=best,
        optimistic_epsilon_fdp_gaussian=float(best_gaussian.epsilon),
        optimistic_epsilon_ceiling=float(estimators.one_run_epsilon_ceiling(
            m, m, config.delta, config.significance)))
  return lower, ceiling, (float(gaussian.epsilon), fdp_run), details


def _train_once(key, model, plan, features, labels, loss_fn=clipping.softmax_cross_entropy,
                example_mask=None, coordinates=None, dirac_mask=None, initial_params=None):
  run = _make_run(model, plan.train_config, features.shape[0], jnp.asarray(features[:1]),
                  initial_params, loss_fn, dirac_coordinates=coordinates)
  return jax.device_get(jax.jit(run)(key, jnp.asarray(features), jnp.asarray(labels),
                                     example_mask, dirac_mask,
                                     training.hyperparameters(plan.train_config)))


def one_run_audit(key: jax.Array, config: DPSGDAuditConfig, data: AuditData, *,
                  model: nn.Module | None = None) -> DPSGDAuditResult:
  """O(1) audit of Steinke, Nasr & Jagielski (2023): m canaries, each in with probability 1/2.

  Example canaries are appended to D and masked out when excluded (one static shape); Dirac
  canaries occupy the ``m`` weakest coordinates (:func:`weakest_coordinates`). Scores: the
  negative loss (black box) or the coordinate's decrease :math:`\\theta_0[c_i] - \\theta_T[c_i]`
  (white box). The guesses and the bound are those of
  :func:`dpaudit.estimators.one_run_epsilon_from_scores` (symmetric mode: "in" for the top
  scores, "out" for the bottom ones, abstention in between). ``poisoned`` canaries (UniAud's
  Poisoned baseline, Sec. VIII-A) are real canaries with their true labels, and the run starts
  from an initialisation warmed up on other held-out rows (:func:`poisoned_initialisation`).
  """
  _check_audit_call(key, config, data, "one_run")
  start = time.perf_counter()
  canary_key, member_key, run_key = jax.random.split(key, 3)
  m = config.num_canaries
  model = _model(config, data, model)
  members = np.asarray(data_lib.include_mask(member_key, m))
  base_x, base_y = data.train_features, data.train_labels
  details: dict[str, Any] = {}
  if config.canary == "dirac":
    features, labels = base_x, base_y
    plan = _plan(config, features.shape[0])
    params0 = model.init(canary_key, jnp.asarray(base_x[:1]))["params"]
    coordinates = weakest_coordinates(model, params0, base_x, base_y, m)
    out = _train_once(run_key, model, plan, features, labels, coordinates=coordinates,
                      dirac_mask=jnp.asarray(members))
    scores = np.asarray(_flat(out.initial_params)[coordinates] - _flat(out.params)[coordinates])
  else:
    initial_params = None
    if config.canary == "poisoned":
      canaries, initial_params, warmup = _poisoned(canary_key, config, data, model, m)
      details.update(warmup)
    else:
      canaries = _example_canaries(canary_key, config, data, m)
    if config.canaries_only:  # Case I: the run trains on the included canaries alone
      base_x, base_y = base_x[:0].reshape((0, *canaries.features.shape[1:])), base_y[:0]
    features = np.concatenate([base_x, np.asarray(canaries.features)])
    labels = np.concatenate([base_y, np.asarray(canaries.labels)])
    plan = _plan(config, features.shape[0])
    mask = jnp.asarray(np.concatenate([np.ones(base_x.shape[0], bool), members]))
    out = _train_once(run_key, model, plan, features, labels, example_mask=mask,
                      initial_params=initial_params)
    scores = -np.asarray(softmax_losses(model, out.params, jnp.asarray(canaries.features),
                                        jnp.asarray(canaries.labels)))
  lower, ceiling, fdp, bound_details = _one_run_bound(scores, members, config, plan)
  details.update(bound_details)
  details["mean_batch_size"] = float(np.mean(out.batch_sizes))
  accuracy = _accuracy(model, out.params, _test_features(config, data), data.test_labels)
  return _result(config, plan, features.shape[0], lower, ceiling, accuracy, m, details, start,
                 fdp)


def _self_comparison_scores(loss_fn: Callable, members: np.ndarray, labels, fresh_labels):
  """Alg. 2, lines 5-7: z_i is the trained pair if S_i = +1, the comparison pair otherwise;
  the score is L(z~_i) - L(z_i)."""
  presented = np.where(_expand(members, labels), labels, fresh_labels)
  other = np.where(_expand(members, labels), fresh_labels, labels)
  return np.asarray(loss_fn(other) - loss_fn(presented))


def _expand(members, labels):
  labels = np.asarray(labels)
  return np.asarray(members).reshape(members.shape + (1,) * (labels.ndim - 1))


def uniaud_audit(key: jax.Array, config: DPSGDAuditConfig, data: AuditData, *,
                 model: nn.Module | None = None) -> DPSGDAuditResult:
  """UniAud (Alg. 2, Thm. 3 of Liu & Xiong): synthetic canaries, all trained on, self-comparison.

  The m canaries of Alg. 1 (:func:`dpaudit.data.synthetic_canaries`, features independent of
  their uniform labels) form the training set (plus D when ``include_data``); the comparison
  set gives each canary a fresh uniform label. A fair coin per canary (the membership
  :math:`S_i`) decides which of the two pairs is presented as :math:`z_i`; the score
  :math:`\\mathcal{L}(f_\\theta, \\tilde z_i) - \\mathcal{L}(f_\\theta, z_i)` is high when
  :math:`z_i` is the trained pair. By label independence (Property 1) the two pairs are
  exchangeable, so this is a one-run game on a replaced record.
  """
  _check_audit_call(key, config, data, "uniaud")
  start = time.perf_counter()
  canary_key, fresh_key, member_key, run_key = jax.random.split(key, 4)
  m = config.num_canaries
  model = _model(config, data, model)
  example_shape, num_classes = canary_shape(config, data)
  canaries = data_lib.synthetic_canaries(canary_key, m, example_shape, num_classes,
                                         mode=config.canary, sigma0=config.sigma0)
  fresh = np.asarray(jax.random.randint(fresh_key, (m,), 0, num_classes, jnp.int32))
  members = np.asarray(data_lib.include_mask(member_key, m))
  cx, cy = np.asarray(canaries.features), np.asarray(canaries.labels)
  if config.include_data:
    features = np.concatenate([data.train_features, cx])
    labels = np.concatenate([data.train_labels, cy])
  else:
    features, labels = cx, cy
  plan = _plan(config, features.shape[0])
  out = _train_once(run_key, model, plan, features, labels)
  x = jnp.asarray(cx)
  scores = _self_comparison_scores(
      lambda y: softmax_losses(model, out.params, x, jnp.asarray(y)), members, cy, fresh)
  lower, ceiling, fdp, details = _one_run_bound(scores, members, config, plan)
  details.update(fresh_label_equal=int(np.sum(fresh == cy)), include_data=config.include_data,
                 mean_batch_size=float(np.mean(out.batch_sizes)))
  accuracy = _accuracy(model, out.params, _test_features(config, data), data.test_labels)
  return _result(config, plan, features.shape[0], lower, ceiling, accuracy, m, details, start,
                 fdp)


def pack_multi_task_labels(labels, tags, is_canary) -> np.ndarray:
  """``[n, 2 + H]`` int32 rows (label, H tags, is_canary): one array for the training loop."""
  for name, value, ndim in (("labels", labels, 1), ("tags", tags, 2), ("is_canary", is_canary, 1)):
    dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype
    if np.ndim(value) != ndim or np.dtype(dtype).kind not in "iub":
      raise ValueError(f"{name} must be a {ndim}-D integer array, got dtype {dtype} and shape "
                       f"{np.shape(value)}")
    if np.shape(value)[0] != np.shape(labels)[0]:
      raise ValueError(f"{name} has {np.shape(value)[0]} rows but labels has "
                       f"{np.shape(labels)[0]}")
  _validate.check_binary("is_canary", is_canary)
  return np.concatenate([np.asarray(labels)[:, None], np.asarray(tags),
                         np.asarray(is_canary, np.int32)[:, None]], axis=1).astype(np.int32)


def multi_task_loss_fn(weight: float) -> Callable:
  """``loss_fn(outputs, packed)`` for :func:`dpaudit.dpsgd.clipped_grad_sum`: Eq. (12) on
  :class:`dpaudit.models.TwoHeadMLP` outputs and :func:`pack_multi_task_labels` rows."""
  _validate.check_range("weight", weight, 0.0, finite=True)

  def loss_fn(outputs, packed):
    main, tag = outputs
    single = packed.ndim == 1
    if single:
      main, tag, packed = main[None], tag[None], packed[None]
    losses = data_lib.multi_task_loss(main, tag, packed[:, 0], packed[:, 1:-1],
                                      packed[:, -1].astype(bool), weight)
    return losses[0] if single else losses

  return loss_fn


def tag_losses(model, params, features, tags) -> jax.Array:
  """The membership-encoding loss :math:`\\mathcal{L}_{ME}` of each row (mean over its tags)."""
  _validate.check_real_array("features", features, nonempty=False)
  dtype = tags.dtype if hasattr(tags, "dtype") else np.asarray(tags).dtype
  if np.ndim(tags) != 2 or np.dtype(dtype).kind not in "iu":
    raise ValueError(f"tags must be a 2-D integer array [rows, tags], got dtype {dtype} and "
                     f"shape {np.shape(tags)}")
  _, logits = model.apply({"params": params}, features)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  return -jnp.take_along_axis(log_p, jnp.asarray(tags), axis=-1).mean(axis=-1)


def uniaud_plus_audit(key: jax.Array, config: DPSGDAuditConfig, data: AuditData, *,
                      model: None = None) -> DPSGDAuditResult:
  """UniAud++ (Alg. 3, Eq. (12) of Liu & Xiong): triggers and tags on a second head.

  :func:`dpaudit.data.uniaud_plus_plus_dataset` stamps a random-colour patch on m training
  images and gives each a random tag (multi-bit with ``num_tag_bits``) and a fresh comparison
  tag; the two-head model is trained with Eq. (12) on all n images (labels unchanged, so the
  main task keeps its data). The audit is Alg. 2 on the tag head: the presented tag is the
  trained one when :math:`S_i = +1` and the comparison one otherwise.
  """
  _check_audit_call(key, config, data, "uniaud_plus")
  if model is not None:
    raise ValueError("model must be None for game='uniaud_plus': it trains its own two-head "
                     "MLP (a class head and a tag head, Eq. (12)); set hidden_sizes instead")
  start = time.perf_counter()
  if data.train_features.ndim != 4:
    raise ValueError(f"game='uniaud_plus' needs image data [n, height, width, channels], got "
                     f"training features of shape {data.train_features.shape}")
  data_key, member_key, run_key = jax.random.split(key, 3)
  m = config.num_canaries
  height, width = data.train_features.shape[1:3]
  if config.patch_size > min(height, width):
    raise ValueError(f"patch_size={config.patch_size} does not fit images of size "
                     f"{(height, width)}")
  multi = data_lib.uniaud_plus_plus_dataset(
      data_key, data.train_features, data.train_labels, m, config.num_tags,
      num_tag_bits=config.num_tag_bits, patch_size=(config.patch_size, config.patch_size))
  _check_first_layer(config, data.train_features.shape[1:], data.num_classes)
  model = models.TwoHeadMLP(tuple(config.hidden_sizes), data.num_classes, config.num_tags,
                            example_ndim=3)
  packed = pack_multi_task_labels(multi.labels, multi.tags, multi.is_canary)
  features = np.asarray(multi.features)
  plan = _plan(config, features.shape[0])
  out = _train_once(run_key, model, plan, features, packed,
                    loss_fn=multi_task_loss_fn(config.tag_weight))
  members = np.asarray(data_lib.include_mask(member_key, m))
  x = jnp.asarray(features[np.asarray(multi.audit_indices)])
  trained_tags = np.asarray(multi.tags)[np.asarray(multi.audit_indices)]
  scores = _self_comparison_scores(lambda e: tag_losses(model, out.params, x, e), members,
                                   trained_tags, np.asarray(multi.comparison_tags))
  lower, ceiling, fdp, details = _one_run_bound(scores, members, config, plan)
  details.update(tag_weight=config.tag_weight, num_tags=config.num_tags,
                 num_tag_bits=config.num_tag_bits, patch_size=config.patch_size,
                 fresh_tag_equal=int(np.sum(np.all(trained_tags == np.asarray(
                     multi.comparison_tags), axis=1))),
                 mean_batch_size=float(np.mean(out.batch_sizes)))
  accuracy = _accuracy(model, out.params, data.test_features, data.test_labels)
  return _result(config, plan, features.shape[0], lower, ceiling, accuracy, m, details, start,
                 fdp)


GAME_FUNCTIONS = {"many_run": many_run_audit, "one_run": one_run_audit, "uniaud": uniaud_audit,
                  "uniaud_plus": uniaud_plus_audit}


def run(key: jax.Array, config: DPSGDAuditConfig, *, data: AuditData,
        model: nn.Module | None = None, progress: results.Progress | None = None,
        store: results.CellStore | None = None) -> DPSGDAuditResult:
  """Runs the game ``config.game`` on ``data`` with randomness from ``key``, training
  ``model`` (any flax module mapping examples to logits; default: ``config.model``, the MLP of
  ``config.hidden_sizes`` for ``"mlp"``; ``uniaud_plus`` always trains its two-head MLP).

  ``data`` (keyword-only, required) is the user's :class:`AuditData`: the configuration names
  no data set (:func:`dpaudit.audits.dpsgd_grid.prepare_data` loads and splits one of
  :data:`dpaudit.data.DATASETS`). ``progress`` (:class:`dpaudit.results.Progress`) hears of
  the one game when it ends (``1/1``). With a ``store`` (:class:`dpaudit.results.CellStore`)
  the result is kept under the configuration's record (:meth:`DPSGDAuditConfig.to_dict`), the
  key's data, a SHA-256 digest of ``data`` and the ``repr`` of a ``model`` passed as an object
  (a flax module's type and attributes), and reused when whole
  (:meth:`DPSGDAuditResult.from_dict`).

  >>> import numpy as np
  >>> rng = np.random.default_rng(0)
  >>> x, y = rng.normal(size=(64, 4)), rng.integers(0, 2, 64).astype(np.int32)
  >>> data = AuditData(x[:32], y[:32], x[32:48], y[32:48], x[48:], y[48:], 2)
  >>> config = Config(game="one_run", canary="gaussian", num_canaries=16, epsilon=8.0,
  ...                 epochs=1, batch_size=8, hidden_sizes=(4,))
  >>> result = run(jax.random.key(0), config, data=data)
  >>> result.num_observations, 0 <= result.epsilon_lower_bound <= result.epsilon_ceiling
  (16, True)
  """
  _check_audit_call(key, config, data)
  if store is not None:
    _validate.check_instance("store", store, results.CellStore)

  def compute() -> DPSGDAuditResult:
    return GAME_FUNCTIONS[config.game](key, config, data, model=model)

  record = None
  if store is not None:  # (the digest reads all of the data: only when it names a result)
    record = {**config.to_dict(), "key": results.key_data(key),
              "data_sha256": data_digest(data)}
    if model is not None:
      record["model_module"] = repr(model)
  result = results.stored_run(store, record, f"{config.game}_{config.canary}", compute,
                              DPSGDAuditResult)
  star = "*" if result.optimistic else ""
  fdp = "".join(f" {label}{star}={value:.3f}" for label, value in (
      ("eps_fdp_gauss", result.epsilon_fdp_gaussian), ("eps_fdp_run", result.epsilon_fdp_run))
      if not math.isnan(value))
  results.report(progress, 1, 1, f"{config.game}:{config.canary} eps_L{star}="
                 f"{result.epsilon_lower_bound:.3f} eps_O={result.epsilon_ceiling:.3f}{fdp}")
  return result


def data_digest(data: AuditData) -> str:
  """The SHA-256 (hex) of ``data``'s arrays (dtype, shape and bytes of each split) and class
  count: the name of the data in a stored result's record (:func:`run`'s ``store``)."""
  _validate.check_instance("data", data, AuditData)
  digest = hashlib.sha256(str(int(data.num_classes)).encode())
  for array in data[:-1]:
    array = np.ascontiguousarray(array)
    digest.update(f"{array.dtype.str}{array.shape}".encode())
    digest.update(array.tobytes())
  return digest.hexdigest()


# The game contract (issue 40): every module under dpaudit/audits/ has a Config and a Result.
Config = DPSGDAuditConfig
Result = DPSGDAuditResult
