r"""How tight is each audit? Every audit family of dpaudit at a small setting, side by side.

Each row sets an audit's lower bound, at its stated confidence, against the value it is held
against: the exact value where the mechanism's law is known (the Renyi divergence of noisy
argmax, Eq. (4) of Chadha et al., "Auditing Private Prediction"), otherwise the theoretical
upper bound (the DP-SGD accountant's epsilon; the RDP reconstruction bound :math:`L(p_0)`,
Eq. (3) of Stock et al., "Defending against Reconstruction Attacks through Differential
Privacy"). The ratio lower / reference is the audit's tightness: 1 is a perfectly tight audit,
0 an audit that certifies nothing.

The families:

* ``noisy_argmax``: the 2-cut (finite-sample Clopper-Pearson, the set chosen on held-out
  trials) and k-cut (asymptotic simultaneous multinomial intervals) lower bounds on
  :math:`D_\alpha(M(H) \| M(H'))` at one Renyi order (Sec. 4.2 and App. C of Chadha et al.),
  against the exact divergence; both come from one Monte Carlo run of
  :func:`dpaudit.audits.noisy_argmax.run`.
* ``dpsgd``: the four games of :mod:`dpaudit.audits.dpsgd` (many-run with a white-box Dirac
  canary, one-run of Steinke, Nasr and Jagielski with mislabelled canaries, UniAud with
  Gaussian canaries, UniAud++ with trigger canaries), each a 1 - significance lower bound on
  epsilon against the accountant's epsilon for the relation the game tests.
* ``ngram``: the empirical leakage :math:`\log(p_1 / p_0)` of a random canary in DP-SGD-trained
  n-gram models (Eq. (4) of Stock et al.), lowered by :math:`z_{1-\beta}` delta-method
  standard errors (an asymptotic one-sided bound), against :math:`L(p_0)`.
* ``lm_reconstruction``: the canary's leakage in bits in one DP-SGD-trained character LM
  (Stock et al., Sec. 4.3), the prior secrecy minus the measured one: a point estimate from one
  model (no confidence), against the RDP leakage bound :math:`L_2(b_0)`.
* ``private_prediction``: PATE on one query through :func:`dpaudit.audit.histogram_model`
  (2-cut and k-cut at order 2, Chadha et al. Sec. 5.1), against GNMax's data-independent RDP.
* ``panoramia``: PANORAMIA (Kazmi et al. 2024) on a DP-SGD-trained tabular target through
  :func:`dpaudit.audit.panoramia`: eps~, a measurement relative to a baseline (not a lower
  bound), against the target's DP epsilon.
* ``domias``: DOMIAS (van Breugel et al. 2023) against DP-TVAE through
  :func:`dpaudit.audit.domias`: the one-run bound of its scores, against the generator's epsilon.

**f-DP rows.** Each one-run bound (the one-run, UniAud and UniAud++ games; DOMIAS) is the
Steinke, Nasr and Jagielski bound, valid for any (epsilon, delta)-DP algorithm. Below it stand
the f-DP one-run bounds of the *same guesses* (Mahloujifar, Melis & Chaudhuri, ICML 2025; no
further training runs): ``... f-DP gaussian``, epsilon at delta of the strongest mu-GDP curve
the audit rejects, valid if the mechanism's trade-off curve is Gaussian (mu-GDP); and, for the
DP-SGD games where computed, ``... f-DP run curve``, the strongest curve of the run's own
family (its subsampled-Gaussian composition with some noise multiplier) rejected, valid if the
curve is of that family. They keep the kind ``finite-sample`` (how the confidence is held);
what they assume is the row's ``assumes`` (the Steinke rows: ``any (eps, delta)-DP
algorithm``), as in :attr:`dpaudit.audit.AuditResult.assumes`. PANORAMIA's row is its eps~
measurement; its O(1) audit uses generated non-members and is no lower bound, so it has no
Steinke row and no f-DP row (``python -m experiments.panoramia`` reports both beside its O(1)
RM/RN audit).

Every row records its kind (``finite-sample`` or ``asymptotic`` for bounds; an estimate or a
measurement where it is not a bound), the number of observations behind it and its wall time.
Seeds: the first three families' keys are split from ``seed``'s key, each later family folds
its index into it (so adding a family changes no other row).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from scipy import stats

from dpaudit import _validate, audit, prng
from dpaudit.accounting.dpsgd import quiet_accountant
from dpaudit.audits import dpsgd as dpsgd_audit
from dpaudit.audits import dpsgd_grid, lm_reconstruction, noisy_argmax, reconstruction

FAMILIES = ("noisy_argmax", "dpsgd", "ngram", "lm_reconstruction", "private_prediction",
            "panoramia", "domias")
_FIRST_FAMILIES = 3  # keys: the first three split from the report's key (as before the others
# existed, so their rows are unchanged); every later family folds its index into it
# Fixed order: each pair's position is folded into its game's key, so new pairs go last.
ALL_DPSGD_AUDITS = (
    ("many_run", "in_distribution"), ("many_run", "mislabelled"), ("many_run", "gaussian"),
    ("many_run", "orthogonal"), ("many_run", "dirac"), ("one_run", "in_distribution"),
    ("one_run", "mislabelled"), ("one_run", "gaussian"), ("one_run", "orthogonal"),
    ("one_run", "dirac"), ("uniaud", "gaussian"), ("uniaud", "orthogonal"),
    ("uniaud_plus", "trigger"), ("many_run", "poisoned"), ("one_run", "poisoned"))
DPSGD_AUDITS = (("many_run", "dirac"), ("one_run", "mislabelled"), ("uniaud", "gaussian"),
                ("uniaud_plus", "trigger"))


@dataclasses.dataclass(frozen=True)
class TightnessConfig:
  """Settings of the report (the defaults run in about a minute on 2 CPU cores).

  Attributes:
    families: which of ``FAMILIES`` to run.
    seed, prng_impl: the key of the report (:func:`dpaudit.prng.make_key`).
    significance: beta of every 1 - beta bound.
    noisy_argmax_noise_multiplier: Gaussian noise of noisy argmax on the Fig. 6 histograms.
    noisy_argmax_num_trials: Monte Carlo trials per histogram.
    noisy_argmax_order: the Renyi order alpha at which the cuts are reported (fixed in
      advance: choosing the best order after the fact would void the confidence).
    dataset, data_dir: data of the DP-SGD games (:func:`dpaudit.audits.dpsgd_grid.prepare_data`,
      20% test, the rest halved into training set and canary pool).
    dpsgd_audits: the (game, canary) pairs of the ``dpsgd`` family (default: the four games).
    dpsgd_epsilon: target epsilon the DP-SGD noise is calibrated to.
    dpsgd_delta: delta of the accountant and of the DP-SGD bounds.
    dpsgd_num_runs: T, runs per side of the many-run game.
    dpsgd_num_canaries: m, canaries of the one-run, UniAud and UniAud++ games (the mislabelled
      canaries come from the held-out pool: at most 721 on digits).
    dpsgd_epochs, dpsgd_batch_size, dpsgd_learning_rate, dpsgd_hidden_sizes: the training.
    ngram_noise_multiplier, ngram_num_models, ngram_num_steps: the n-gram canary experiment.
    dpsgd_chunk_size, ngram_chunk_size: runs (many-run game) and n-gram models per vmapped
      call (0: all at once); they bound memory, and under ``jax.distributed`` the chunks are
      what the processes share out (:func:`dpaudit.distributed.map_chunks`).
    noisy_argmax_chunk_size: Monte Carlo trials per vmapped chunk of the noisy-argmax cuts
      (memory; under ``jax.distributed`` the processes share out the chunks).
    lm_noise_multiplier, lm_num_lines, lm_epochs: the LM reconstruction's one target model.
    pate_noise_multiplier, pate_num_trials: PATE's GNMax noise and Monte Carlo trials per side.
    domias_epsilon, domias_num_candidates: DP-TVAE's epsilon and the DOMIAS candidates (each a
      member by a fair coin).
    panoramia_num_members: the PANORAMIA target's training records (a third of them audit it).
  """
  families: tuple[str, ...] = FAMILIES
  seed: int = 0
  prng_impl: str = "threefry2x32"
  significance: float = 0.05
  noisy_argmax_noise_multiplier: float = 2.0
  noisy_argmax_num_trials: int = 10**6
  noisy_argmax_order: float = 2.0
  dataset: str = "digits"
  data_dir: str | None = None
  dpsgd_audits: tuple[tuple[str, str], ...] = DPSGD_AUDITS
  dpsgd_epsilon: float = 8.0
  dpsgd_delta: float = 1e-5
  dpsgd_num_runs: int = 250
  dpsgd_num_canaries: int = 700
  dpsgd_epochs: float = 50.0
  dpsgd_batch_size: int = 128
  dpsgd_learning_rate: float = 0.5
  dpsgd_hidden_sizes: tuple[int, ...] = (64,)
  ngram_noise_multiplier: float = 2.0
  ngram_num_models: int = 2000
  ngram_num_steps: int = 100
  dpsgd_chunk_size: int = 0
  ngram_chunk_size: int = 0
  noisy_argmax_chunk_size: int = 2**16
  lm_noise_multiplier: float = 1.0
  lm_num_lines: int = 400
  lm_epochs: float = 2.0
  pate_noise_multiplier: float = 2.0
  pate_num_trials: int = 200_000
  domias_epsilon: float = 4.0
  domias_num_candidates: int = 400
  panoramia_num_members: int = 500

  def __post_init__(self):
    object.__setattr__(self, "families", tuple(self.families))
    object.__setattr__(self, "dpsgd_hidden_sizes", tuple(self.dpsgd_hidden_sizes))
    object.__setattr__(self, "dpsgd_audits", tuple(tuple(p) for p in self.dpsgd_audits))
    _validate.check_nonempty("families", self.families)
    for family in self.families:
      _validate.check_choice("families", family, FAMILIES)
    if len(set(self.families)) != len(self.families):
      raise ValueError(f"families={list(self.families)} has repeated values")
    _validate.check_integer("seed", self.seed, 0, 2**63 - 1)
    _validate.check_choice("prng_impl", self.prng_impl, prng.PRNG_IMPLS)
    _validate.check_significance(self.significance)
    # The audits' own configs validate the rest when they are built; build them now so that a
    # bad value fails before anything runs (the message names this config's field).
    if "noisy_argmax" in self.families:
      _renamed(self.noisy_argmax_config, _NOISY_ARGMAX_FIELDS)
    if "dpsgd" in self.families:
      _validate.check_nonempty("dpsgd_audits", self.dpsgd_audits)
      for pair in self.dpsgd_audits:
        if len(pair) != 2:
          raise ValueError(f"dpsgd_audits={list(self.dpsgd_audits)} must hold (game, canary) "
                           "pairs")
        _renamed(lambda pair=pair: self.dpsgd_config(*pair), _DPSGD_FIELDS)
    if "ngram" in self.families:
      _renamed(self.ngram_config, _NGRAM_FIELDS)
    if "lm_reconstruction" in self.families:
      _renamed(self.lm_config, _LM_FIELDS)
    _validate.check_range("pate_noise_multiplier", self.pate_noise_multiplier, 0.0, math.inf,
                          low_open=True, high_open=True)
    _validate.check_integer("pate_num_trials", self.pate_num_trials, 4)
    _validate.check_range("domias_epsilon", self.domias_epsilon, 0.0, math.inf, low_open=True,
                          high_open=True)
    _validate.check_integer("domias_num_candidates", self.domias_num_candidates, 20, 20_000)
    _validate.check_integer("panoramia_num_members", self.panoramia_num_members, 50, 60_000)

  def noisy_argmax_config(self) -> noisy_argmax.NoisyArgmaxAuditConfig:
    return noisy_argmax.NoisyArgmaxAuditConfig(
        sigma=self.noisy_argmax_noise_multiplier, num_trials=self.noisy_argmax_num_trials,
        orders=(self.noisy_argmax_order,), significance=self.significance, num_bootstrap=1,
        chunk_size=self.noisy_argmax_chunk_size)

  def dpsgd_config(self, game: str, canary: str) -> dpsgd_audit.DPSGDAuditConfig:
    return dpsgd_audit.DPSGDAuditConfig(
        game=game, canary=canary, num_canaries=self.dpsgd_num_canaries,
        num_runs=self.dpsgd_num_runs,
        epsilon=self.dpsgd_epsilon, delta=self.dpsgd_delta, significance=self.significance,
        epochs=self.dpsgd_epochs, batch_size=self.dpsgd_batch_size,
        learning_rate=self.dpsgd_learning_rate, hidden_sizes=self.dpsgd_hidden_sizes,
        num_tags=10, chunk_size=self.dpsgd_chunk_size)

  def ngram_config(self) -> reconstruction.NgramCanaryConfig:
    return reconstruction.NgramCanaryConfig(
        noise_multipliers=(self.ngram_noise_multiplier,), num_models=self.ngram_num_models,
        num_steps=self.ngram_num_steps, chunk_size=self.ngram_chunk_size)

  def lm_config(self) -> lm_reconstruction.LMReconstructionConfig:
    """The LM reconstruction's canary experiment at a small size: one target model."""
    return lm_reconstruction.LMReconstructionConfig(
        num_train=self.lm_num_lines, num_reference=1, num_test=2, num_generated=2,
        noise_multipliers=(self.lm_noise_multiplier,),
        analysis_noise_multiplier=self.lm_noise_multiplier, epochs=self.lm_epochs,
        batch_size=32, secret_digits=6, num_exposure_samples=1000, seed=self.seed)


_LM_FIELDS = {"noise_multipliers": "lm_noise_multiplier", "num_train": "lm_num_lines",
              "epochs": "lm_epochs"}
_NOISY_ARGMAX_FIELDS = {"sigma": "noisy_argmax_noise_multiplier",
                        "num_trials": "noisy_argmax_num_trials",
                        "orders": "noisy_argmax_order", "chunk_size": "noisy_argmax_chunk_size"}
_DPSGD_FIELDS = {"num_canaries": "dpsgd_num_canaries", "num_runs": "dpsgd_num_runs",
                 "epsilon": "dpsgd_epsilon", "delta": "dpsgd_delta", "epochs": "dpsgd_epochs",
                 "batch_size": "dpsgd_batch_size", "learning_rate": "dpsgd_learning_rate",
                 "hidden_sizes": "dpsgd_hidden_sizes", "chunk_size": "dpsgd_chunk_size"}
_NGRAM_FIELDS = {"noise_multipliers": "ngram_noise_multiplier", "num_models": "ngram_num_models",
                 "num_steps": "ngram_num_steps", "chunk_size": "ngram_chunk_size"}


def _renamed(build: Callable[[], Any], fields: dict[str, str]) -> Any:
  """``build()``, with a ValueError about one of the audit config's fields reworded to name
  the :class:`TightnessConfig` field it comes from (``num_trials=`` ->
  ``noisy_argmax_num_trials=``)."""
  try:
    return build()
  except ValueError as error:
    message = str(error)
    for inner, outer in fields.items():
      if message.startswith(inner) and message[len(inner):len(inner) + 1] in ("=", " ", "["):
        raise ValueError(outer + message[len(inner):]) from None
    raise


@dataclasses.dataclass(frozen=True)
class TightnessRow:
  """One audit.

  Attributes:
    audit: its name, e.g. ``dpsgd one_run:mislabelled``.
    quantity: what is bounded (``epsilon``, ``Renyi D_2``, ``leakage (nats)``).
    lower_bound: the audit's lower bound at ``confidence``.
    kind: ``finite-sample`` or ``asymptotic``: how the confidence is guaranteed.
    confidence: 1 - significance.
    reference: the value the bound is held against.
    reference_kind: ``exact`` or ``theory upper bound``.
    ceiling: the largest bound the audit could report with its observations (all of them
      classified correctly), where the game defines one; NaN otherwise.
    num_observations, unit: what the bound rests on (e.g. 2000000, ``trials``).
    wall_time_s: seconds the audit took (its share of a shared run for noisy argmax; an f-DP
      row repeats its Steinke row's: they share the run).
    note: anything to know when reading the row.
    assumes: what the bound assumes about the mechanism (:data:`dpaudit.audit.ASSUMES_ANY_DP`,
      :data:`dpaudit.audit.ASSUMES_GAUSSIAN`, :data:`dpaudit.audit.ASSUMES_RUN_CURVE`); empty
      where the kind and reference say it all.
  """
  audit: str
  quantity: str
  lower_bound: float
  kind: str
  confidence: float
  reference: float
  reference_kind: str
  ceiling: float
  num_observations: int
  unit: str
  wall_time_s: float
  note: str = ""
  assumes: str = ""

  @property
  def ratio(self) -> float:
    """lower_bound / reference: 1 is tight; NaN where the reference is 0 or infinite."""
    if not math.isfinite(self.reference) or self.reference <= 0:
      return math.nan
    return max(self.lower_bound, 0.0) / self.reference

  def to_dict(self) -> dict[str, Any]:
    return {**dataclasses.asdict(self), "ratio": self.ratio}


@dataclasses.dataclass(frozen=True)
class TightnessResult:
  config: TightnessConfig
  rows: tuple[TightnessRow, ...]

  def to_dict(self) -> dict[str, Any]:
    return {"rows": [row.to_dict() for row in self.rows],
            "config": dataclasses.asdict(self.config)}


def _check_call(key, config) -> None:
  """A PRNG key (unless None) and a :class:`TightnessConfig`."""
  if key is not None:
    _validate.check_key(key)
  if not isinstance(config, TightnessConfig):
    raise ValueError(f"config must be a TightnessConfig, got {type(config).__name__}")


def noisy_argmax_rows(key: jax.Array, config: TightnessConfig) -> list[TightnessRow]:
  """The 2-cut and k-cut lower bounds against the exact Renyi divergence (forward direction)."""
  _check_call(key, config)
  audit_config = config.noisy_argmax_config()
  start = time.perf_counter()
  with jax.enable_x64(True):
    result = noisy_argmax.run(key, audit_config)
  seconds = time.perf_counter() - start
  forward = result.forward
  order = f"D_{audit_config.orders[0]:g}"
  common = dict(quantity=f"Renyi {order}", confidence=1 - config.significance,
                reference=float(forward.exact[0]), reference_kind="exact",
                ceiling=math.nan, num_observations=audit_config.num_trials,
                unit="trials per side",
                wall_time_s=seconds)
  return [
      TightnessRow(audit="noisy_argmax 2-cut", lower_bound=float(forward.two_cut[0]),
                   kind="finite-sample",
                   note="set chosen on half the trials, bound on the other half", **common),
      TightnessRow(audit="noisy_argmax k-cut", lower_bound=float(forward.k_cut[0]),
                   kind="asymptotic", note=f"{audit_config.k_cut_method} intervals", **common),
  ]


def dpsgd_rows(key: jax.Array, config: TightnessConfig,
               progress: Callable[[str], None] | None = None) -> list[TightnessRow]:
  """The DP-SGD games, each against the accountant's epsilon for its relation."""
  _check_call(key, config)
  for game, canary in config.dpsgd_audits:  # every game's settings, before the data is loaded
    _renamed(lambda game=game, canary=canary: config.dpsgd_config(game, canary), _DPSGD_FIELDS)
  data = dpsgd_grid.prepare_data(config.dataset, test_fraction=0.2, pool_fraction=0.5,
                                 seed=config.seed, data_dir=config.data_dir)
  rows = []
  for game, canary in config.dpsgd_audits:
    # Each (game, canary) has its own key, whichever others run with it.
    game_key = jax.random.fold_in(key, ALL_DPSGD_AUDITS.index((game, canary)))
    audit_config = config.dpsgd_config(game, canary)
    start = time.perf_counter()
    with quiet_accountant():
      result = dpsgd_audit.run(game_key, audit_config, data=data)
    unit = "runs" if game == "many_run" else "canaries"
    steinke = TightnessRow(
        audit=f"dpsgd {game}:{canary}", quantity="epsilon",
        lower_bound=float(result.epsilon_lower_bound), kind="finite-sample",
        confidence=1 - config.significance, reference=float(result.epsilon_theory),
        reference_kind="theory upper bound", ceiling=float(result.epsilon_ceiling),
        num_observations=int(result.num_observations), unit=unit,
        wall_time_s=time.perf_counter() - start,
        note=f"{result.adjacency}, delta={audit_config.delta:g}, test accuracy "
             f"{result.test_accuracy:.2f}", assumes=audit.ASSUMES_ANY_DP)
    new = [steinke] + (_fdp_rows(steinke, result) if game != "many_run" else [])
    rows.extend(new)
    if progress is not None:
      for row in new:
        progress(_line(row))
  return rows


_FDP_ROWS = (("epsilon_fdp_gaussian", "f-DP gaussian", audit.ASSUMES_GAUSSIAN, "mu_lower_bound",
              "mu >= {:.3g}"),
             ("epsilon_fdp_run", "f-DP run curve", audit.ASSUMES_RUN_CURVE,
              "noise_multiplier_upper_bound", "noise multiplier <= {:.3g}"))


def _fdp_rows(steinke: TightnessRow, result: Any) -> list[TightnessRow]:
  """The f-DP one-run rows of a one-run DP-SGD game's result (its ``epsilon_fdp_gaussian`` and
  ``epsilon_fdp_run``; none where NaN or absent): the same guesses as ``steinke``'s bound, so
  the same observations, run and wall time; the ceiling is not computed (NaN)."""
  rows = []
  details = getattr(result, "details", None) or {}
  for field, suffix, assumes, extra, shown in _FDP_ROWS:
    value = float(getattr(result, field, math.nan))
    if math.isnan(value):
      continue
    figure = shown.format(float(details[extra])) + "; " if extra in details else ""
    rows.append(dataclasses.replace(
        steinke, audit=f"{steinke.audit} {suffix}", lower_bound=value, ceiling=math.nan,
        assumes=assumes, note=f"{figure}valid {assumes}; the guesses of the row above; "
                              f"{steinke.note}"))
  return rows


def ngram_rows(key: jax.Array, config: TightnessConfig) -> list[TightnessRow]:
  """The n-gram canary's leakage, minus z standard errors, against L(p0)."""
  _check_call(key, config)
  audit_config = config.ngram_config()
  start = time.perf_counter()
  with jax.enable_x64(True):
    point = reconstruction.run(key, audit_config).points[0]
  z = float(stats.norm.ppf(1 - config.significance))
  note = (f"sigma={point.noise_multiplier:g}, {audit_config.num_steps} steps; "
          f"effective sample size {point.effective_sample_size:.0f}")
  if not point.reliable:
    note += " (below the minimum: unreliable)"
  return [TightnessRow(
      audit="ngram canary reconstruction", quantity="leakage (nats)",
      lower_bound=float(point.leakage - z * point.log_p1_se), kind="asymptotic",
      confidence=1 - config.significance, reference=float(point.leakage_bound),
      reference_kind="theory upper bound", ceiling=float(-audit_config.log_p0),
      num_observations=audit_config.num_models, unit="models",
      wall_time_s=time.perf_counter() - start, note=note)]


def _front_door_row(name: str, result: audit.AuditResult, seconds: float, unit: str,
                    note: str = "") -> TightnessRow:
  """A row from the front door's :class:`dpaudit.audit.AuditResult`."""
  quantity = ("epsilon" if result.quantity == "epsilon"
              else f"Renyi D_{result.order:g}" if result.order is not None else result.quantity)
  return TightnessRow(
      audit=name, quantity=quantity, lower_bound=float(result.lower_bound), kind=result.kind,
      confidence=float(result.confidence), reference=float(result.reference),
      reference_kind="theory upper bound", ceiling=(math.nan if result.ceiling is None
                                                    else float(result.ceiling)),
      num_observations=int(result.observations), unit=unit, wall_time_s=seconds, note=note,
      assumes=result.assumes or "")


def _front_door_rows(name: str, result: audit.AuditResult, seconds: float, unit: str,
                     note: str = "") -> list[TightnessRow]:
  """The row of ``result`` and one per alternative bound of the same observations (the f-DP
  one-run bound beside the Steinke one: ``name`` + `` f-DP gaussian``), each with what it
  assumes. An alternative held against no reference (GDP mu at delta = 0) is left out."""
  rows = [_front_door_row(name, result, seconds, unit, note)]
  for alt in result.alternatives:
    if alt.reference is None:
      continue
    suffix = "f-DP gaussian" if alt.assumes == audit.ASSUMES_GAUSSIAN else "alternative"
    mu = alt.details.get("mu_lower_bound")
    figure = f"mu >= {mu:.3g}; " if mu is not None else ""
    rows.append(_front_door_row(f"{name} {suffix}", alt, seconds, unit,
                                f"{figure}valid {alt.assumes}; the guesses of the row above; "
                                f"{note}"))
  return rows


def lm_rows(key: jax.Array, config: TightnessConfig) -> list[TightnessRow]:
  """The canary's leakage in one DP-SGD-trained character LM (Stock et al., Sec. 4.3): the
  prior secrecy minus the secrecy measured on the trained model, against the RDP leakage bound
  :math:`L_2(b_0)` (Eq. 3 in bits), through :func:`dpaudit.audits.lm_reconstruction.run` at a
  small size. One trained model gives one draw of the leakage: a point estimate with no
  confidence (``confidence`` NaN), not a bound."""
  _check_call(key, config)
  lm_config = _renamed(config.lm_config, _LM_FIELDS)
  start = time.perf_counter()
  with quiet_accountant():
    point = lm_reconstruction.run(key, lm_config).secrecy[0]
  return [TightnessRow(
      audit="lm canary reconstruction", quantity="leakage (bits)",
      lower_bound=max(point.prior_bits - point.secrecy_bits, 0.0),
      kind="estimate (1 model)", confidence=math.nan,
      reference=float(point.bound_leakage_bits), reference_kind="theory upper bound",
      ceiling=float(point.prior_bits), num_observations=1, unit="model",
      wall_time_s=time.perf_counter() - start,
      note=f"sigma={point.noise_multiplier:g}, {point.num_steps} steps, "
           f"{lm_config.canary_repetitions} canary copies; exposure "
           f"{point.exposure_extrapolated_bits:.1f} bits")]


PATE_TEACHERS = 20
PATE_PROBABILITIES = (0.55, 0.45)  # the teachers' vote shares on the query (a close vote)


def private_prediction_rows(key: jax.Array, config: TightnessConfig) -> list[TightnessRow]:
  """PATE on one query (Chadha et al., Sec. 5.1): ``PATE_TEACHERS`` teachers voting
  ``PATE_PROBABILITIES``, the neighbour's first teacher always voting the runner-up; the 2-cut
  and k-cut bounds at order 2 (:func:`dpaudit.audit.histogram_model`) against GNMax's
  data-independent RDP."""
  _check_call(key, config)
  from dpaudit.mechanisms import histograms  # pylint: disable=g-import-not-at-top
  start = time.perf_counter()
  model = histograms.pate_model(PATE_PROBABILITIES, (0.0, 1.0), PATE_TEACHERS)
  with jax.enable_x64(True):
    two_cut, k_cut = audit.histogram_model(
        key, model, noise_multiplier=config.pate_noise_multiplier,
        num_trials=config.pate_num_trials,
        order=2.0, confidence=1 - config.significance, num_histograms=512, num_bootstrap=20)
  seconds = time.perf_counter() - start
  note = (f"{PATE_TEACHERS} teachers, sigma={config.pate_noise_multiplier:g}; model divergence "
          f"(estimate) {two_cut.details['model_divergence']:.3g}")
  return [_front_door_row("pate 2-cut", two_cut, seconds, "trials", note),
          _front_door_row("pate k-cut", k_cut, seconds, "trials", note)]


def domias_rows(key: jax.Array, config: TightnessConfig) -> list[TightnessRow]:
  """DOMIAS (van Breugel et al. 2023) against DP-TVAE on California Housing: candidates put in
  the training data by fair coins, the generator fitted with DP-SGD at ``domias_epsilon``, the
  one-run bound of DOMIAS's scores (:func:`dpaudit.audit.domias`) against that epsilon."""
  _check_call(key, config)
  from dpaudit import data  # pylint: disable=g-import-not-at-top
  from dpaudit.models import tabular_generators  # pylint: disable=g-import-not-at-top
  start = time.perf_counter()
  k_rows, k_coins, k_fit, k_sample = jax.random.split(key, 4)
  records = np.asarray(data.load("california_housing").features, np.float64)
  order = np.asarray(jax.random.permutation(k_rows, len(records)))
  m = config.domias_num_candidates
  candidates, reference = records[order[:m]], records[order[m:m + 2000]]
  is_member = np.asarray(jax.random.bernoulli(k_coins, 0.5, (m,)))
  with quiet_accountant():
    generator = tabular_generators.fit_generator(
        k_fit, "dp_tvae", candidates[is_member],
        {"epsilon": config.domias_epsilon, "delta": 1e-5, "epochs": 20, "batch_size": 64,
         "latent_dim": 16, "hidden": (64, 64)})
  synthetic = np.asarray(generator.sample(k_sample, 2000), np.float64)
  result = audit.domias(synthetic, reference, candidates, is_member, delta=1e-5,
                        confidence=1 - config.significance,
                        reference=float(generator.model.epsilon))
  return _front_door_rows("domias dp_tvae", result, time.perf_counter() - start, "candidates",
                          f"AUC {result.details['auc']:.2f}, delta=1e-05")


PANORAMIA_EPSILON = 8.0  # the DP-SGD epsilon of PANORAMIA's tabular target


def _marginals_generator(d_g):
  """A fast generator for the report: each column (and the label) drawn independently from
  its empirical distribution in ``d_g`` (MST without its pairwise marginals)."""
  from dpaudit.audits import panoramia as pan  # pylint: disable=g-import-not-at-top
  table = np.column_stack([np.asarray(d_g.inputs, np.float64), np.asarray(d_g.labels)])

  def sample(key, n):
    rows = np.asarray(jax.random.randint(key, (n, table.shape[1]), 0, len(table)))
    drawn = table[rows, np.arange(table.shape[1])]
    return pan.Examples(drawn[:, :-1].astype(np.asarray(d_g.inputs).dtype),
                        drawn[:, -1].astype(np.asarray(d_g.labels).dtype))
  return sample


def panoramia_rows(key: jax.Array, config: TightnessConfig) -> list[TightnessRow]:
  """PANORAMIA (Kazmi et al. 2024) on a tabular target: a TabularMLP trained with DP-SGD at
  ``PANORAMIA_EPSILON`` on ``panoramia_num_members`` Adult records, audited without retraining
  (:func:`dpaudit.audit.panoramia`) with generated non-members from a generator fitted on 2000
  other Adult records (the column marginals: fast; the paper's MST is
  ``python -m experiments.panoramia --modality=tabular``). Its eps~ is a measurement relative
  to a baseline classifier, not a lower bound on the target's epsilon: the row's kind says so."""
  _check_call(key, config)
  from dpaudit import data  # pylint: disable=g-import-not-at-top
  from dpaudit.attacks.panoramia import ClassifierConfig  # pylint: disable=g-import-not-at-top
  from dpaudit.audits import panoramia as pan  # pylint: disable=g-import-not-at-top
  from dpaudit.audits import panoramia_modalities as mod  # pylint: disable=g-import-not-at-top
  start = time.perf_counter()
  k_rows, k_target, k_audit = jax.random.split(key, 3)
  ds = data.load("adult", "train")
  order = np.asarray(jax.random.permutation(k_rows, len(ds.labels)))
  n = config.panoramia_num_members
  members = pan.Examples(ds.features[order[:n]], ds.labels[order[:n]])
  d_g = pan.Examples(ds.features[order[n:n + 2000]], ds.labels[order[n:n + 2000]])
  spec = mod.tabular_spec(mod.adult_binnings()[:-1])
  with quiet_accountant():
    params, _ = mod.train_model(k_target, spec, members,
                                mod.TrainSpec(epochs=10, epsilon=PANORAMIA_EPSILON))
  third = n // 3
  result = audit.panoramia(
      k_audit, mod.loss_function(spec, params), members, generator=_marginals_generator(d_g),
      confidence=1 - config.significance,
      config=pan.PanoramiaConfig(num_audit=third, num_classifier_train=third,
                                 num_helper_train=2, baseline_helpers=("none",),
                                 null_samples=0, classifier=ClassifierConfig(epochs=5)))
  return [TightnessRow(
      audit="panoramia tabular", quantity="eps~ (PANORAMIA)",
      lower_bound=float(result.lower_bound), kind="measurement (not a bound)",
      confidence=float(result.confidence), reference=PANORAMIA_EPSILON,
      reference_kind="theory upper bound", ceiling=float(result.ceiling),
      num_observations=int(result.observations), unit="audit examples",
      wall_time_s=time.perf_counter() - start,
      note=f"c_lb {result.details['c_lb']:.2f}, MIA AUC {result.details['mia_auc']:.2f}, "
           f"baseline AUC {max(result.details['baseline_auc'].values()):.2f}")]


_ROWS = {"noisy_argmax": noisy_argmax_rows, "ngram": ngram_rows, "lm_reconstruction": lm_rows,
         "private_prediction": private_prediction_rows, "panoramia": panoramia_rows,
         "domias": domias_rows}


def run(config: TightnessConfig,
        progress: Callable[[str], None] | None = None) -> TightnessResult:
  """Runs every family of ``config`` and returns one row per audit.

  Args:
    config: the report's settings.
    progress: optional callback receiving one line per finished audit.
  """
  _check_call(None, config)
  key = prng.make_key(config.seed, config.prng_impl)
  keys = dict(zip(FAMILIES, jax.random.split(key, _FIRST_FAMILIES)))
  keys.update({family: jax.random.fold_in(key, i)
               for i, family in enumerate(FAMILIES) if i >= _FIRST_FAMILIES})
  rows: list[TightnessRow] = []
  for family in config.families:
    if family == "dpsgd":
      new = dpsgd_rows(keys[family], config, progress)
    else:
      new = _ROWS[family](keys[family], config)
    if progress is not None and family != "dpsgd":
      for row in new:
        progress(_line(row))
    rows.extend(new)
  return TightnessResult(config, tuple(rows))


def _line(row: TightnessRow) -> str:
  return (f"{row.audit}: {row.lower_bound:.3f} <= {row.reference:.3f} ({row.reference_kind}) "
          f"in {row.wall_time_s:.1f} s")


def _num(value: float, digits: int = 3) -> str:
  if math.isnan(value):
    return "-"
  return "inf" if math.isinf(value) else f"{value:.{digits}f}"


def table(result: TightnessResult) -> str:
  """The report as a fixed-width table, one line per audit, and what its values are."""
  header = (f"{'audit':<40} {'quantity':<16} {'value':>7} {'conf':>5} {'kind':<26} "
            f"{'reference':>9} {'ref kind':<18} {'ratio':>6} {'ceiling':>7} "
            f"{'observations':>22} {'s':>6}")
  lines = [header]
  for r in result.rows:
    conf = f"{r.confidence:5.2f}" if math.isfinite(r.confidence) else f"{'-':>5}"
    lines.append(f"{r.audit:<40} {r.quantity:<16} {_num(r.lower_bound):>7} {conf} "
                 f"{r.kind:<26} {_num(r.reference):>9} {r.reference_kind:<18} "
                 f"{_num(r.ratio, 2):>6} {_num(r.ceiling, 2):>7} "
                 f"{f'{r.num_observations} {r.unit}':>22} {r.wall_time_s:6.1f}")
  lines.append("value: a lower bound at conf where the kind is finite-sample or asymptotic; an "
               "estimate or a measurement (no confidence) where the kind says so. "
               "0 = no leakage measured.")
  if any(r.assumes and r.assumes != audit.ASSUMES_ANY_DP for r in result.rows):
    lines.append("f-DP rows: the f-DP one-run bound of the same guesses as the row above "
                 "(Mahloujifar, Melis & Chaudhuri 2025); 'f-DP gaussian' is valid only if the "
                 "trade-off curve is Gaussian (mu-GDP), 'f-DP run curve' only if it is the "
                 "DP-SGD run's own with some noise multiplier; the rows above them hold for "
                 "any (eps, delta)-DP algorithm.")
  return "\n".join(lines)
