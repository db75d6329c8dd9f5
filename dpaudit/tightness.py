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

Every row records its kind of guarantee (``finite-sample``, ``asymptotic``), the number of
observations behind it (trials, runs, canaries or models) and its wall time. Seeds: one key
from ``seed`` is split into one key per family.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable

import jax
from scipy import stats

from dpaudit import _validate
from dpaudit import prng
from dpaudit.accounting.dpsgd import quiet_accountant
from dpaudit.audits import dpsgd as dpsgd_audit
from dpaudit.audits import dpsgd_grid
from dpaudit.audits import noisy_argmax
from dpaudit.audits import reconstruction

FAMILIES = ("noisy_argmax", "dpsgd", "ngram")
ALL_DPSGD_AUDITS = tuple((game, canary) for game in dpsgd_audit.GAMES
                         for canary in dpsgd_audit.GAME_CANARIES[game])
DPSGD_AUDITS = (("many_run", "dirac"), ("one_run", "mislabelled"), ("uniaud", "gaussian"),
                ("uniaud_plus", "trigger"))


@dataclasses.dataclass(frozen=True)
class TightnessConfig:
  """Settings of the report (the defaults run in about a minute on 2 CPU cores).

  Attributes:
    families: which of ``FAMILIES`` to run.
    seed, prng_impl: the key of the report (:func:`dpaudit.prng.make_key`).
    significance: beta of every 1 - beta bound.
    noisy_argmax_sigma: Gaussian noise of noisy argmax on the Fig. 6 histograms.
    noisy_argmax_trials: Monte Carlo trials per histogram.
    noisy_argmax_order: the Renyi order alpha at which the cuts are reported (fixed in
      advance: choosing the best order after the fact would void the confidence).
    dataset, data_dir: data of the DP-SGD games (:func:`dpaudit.audits.dpsgd_grid.prepare_data`,
      20% test, the rest halved into training set and canary pool).
    dpsgd_audits: the (game, canary) pairs of the ``dpsgd`` family (default: the four games).
    dpsgd_epsilon: target epsilon the DP-SGD noise is calibrated to.
    dpsgd_delta: delta of the accountant and of the DP-SGD bounds.
    dpsgd_runs: T, runs per side of the many-run game.
    dpsgd_canaries: m, canaries of the one-run, UniAud and UniAud++ games (the mislabelled
      canaries come from the held-out pool: at most 721 on digits).
    dpsgd_epochs, dpsgd_batch_size, dpsgd_learning_rate, dpsgd_hidden_sizes: the training.
    ngram_noise_multiplier, ngram_models, ngram_steps: the n-gram canary experiment.
    dpsgd_chunk_size, ngram_chunk_size: runs (many-run game) and n-gram models per vmapped
      call (0: all at once); they bound memory, and under ``jax.distributed`` the chunks are
      what the processes share out (:func:`dpaudit.distributed.map_chunks`).
    noisy_argmax_chunk_size: Monte Carlo trials per vmapped chunk of the noisy-argmax cuts
      (memory; under ``jax.distributed`` the processes share out the chunks).
  """
  families: tuple[str, ...] = FAMILIES
  seed: int = 0
  prng_impl: str = "threefry2x32"
  significance: float = 0.05
  noisy_argmax_sigma: float = 2.0
  noisy_argmax_trials: int = 10**6
  noisy_argmax_order: float = 2.0
  dataset: str = "digits"
  data_dir: str | None = None
  dpsgd_audits: tuple[tuple[str, str], ...] = DPSGD_AUDITS
  dpsgd_epsilon: float = 8.0
  dpsgd_delta: float = 1e-5
  dpsgd_runs: int = 250
  dpsgd_canaries: int = 700
  dpsgd_epochs: float = 50.0
  dpsgd_batch_size: int = 128
  dpsgd_learning_rate: float = 0.5
  dpsgd_hidden_sizes: tuple[int, ...] = (64,)
  ngram_noise_multiplier: float = 2.0
  ngram_models: int = 2000
  ngram_steps: int = 100
  dpsgd_chunk_size: int = 0
  ngram_chunk_size: int = 0
  noisy_argmax_chunk_size: int = 2**16

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

  def noisy_argmax_config(self) -> noisy_argmax.NoisyArgmaxAuditConfig:
    return noisy_argmax.NoisyArgmaxAuditConfig(
        sigma=self.noisy_argmax_sigma, num_trials=self.noisy_argmax_trials,
        orders=(self.noisy_argmax_order,), significance=self.significance, num_bootstrap=1,
        chunk_size=self.noisy_argmax_chunk_size)

  def dpsgd_config(self, game: str, canary: str) -> dpsgd_audit.DPSGDAuditConfig:
    return dpsgd_audit.DPSGDAuditConfig(
        game=game, canary=canary, num_canaries=self.dpsgd_canaries, num_runs=self.dpsgd_runs,
        epsilon=self.dpsgd_epsilon, delta=self.dpsgd_delta, significance=self.significance,
        epochs=self.dpsgd_epochs, batch_size=self.dpsgd_batch_size,
        learning_rate=self.dpsgd_learning_rate, hidden_sizes=self.dpsgd_hidden_sizes,
        num_tags=10, chunk_size=self.dpsgd_chunk_size)

  def ngram_config(self) -> reconstruction.NgramCanaryConfig:
    return reconstruction.NgramCanaryConfig(
        noise_multipliers=(self.ngram_noise_multiplier,), num_models=self.ngram_models,
        num_steps=self.ngram_steps, chunk_size=self.ngram_chunk_size)


_NOISY_ARGMAX_FIELDS = {"sigma": "noisy_argmax_sigma", "num_trials": "noisy_argmax_trials",
                        "orders": "noisy_argmax_order", "chunk_size": "noisy_argmax_chunk_size"}
_DPSGD_FIELDS = {"num_canaries": "dpsgd_canaries", "num_runs": "dpsgd_runs",
                 "epsilon": "dpsgd_epsilon", "delta": "dpsgd_delta", "epochs": "dpsgd_epochs",
                 "batch_size": "dpsgd_batch_size", "learning_rate": "dpsgd_learning_rate",
                 "hidden_sizes": "dpsgd_hidden_sizes", "chunk_size": "dpsgd_chunk_size"}
_NGRAM_FIELDS = {"noise_multipliers": "ngram_noise_multiplier", "num_models": "ngram_models",
                 "num_steps": "ngram_steps", "chunk_size": "ngram_chunk_size"}


def _renamed(build: Callable[[], Any], fields: dict[str, str]) -> Any:
  """``build()``, with a ValueError about one of the audit config's fields reworded to name
  the :class:`TightnessConfig` field it comes from (``num_trials=`` -> ``noisy_argmax_trials=``)."""
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
    wall_time_s: seconds the audit took (its share of a shared run for noisy argmax).
    note: anything to know when reading the row.
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
      result = dpsgd_audit.run(game_key, audit_config, data)
    unit = "runs" if game == "many_run" else "canaries"
    rows.append(TightnessRow(
        audit=f"dpsgd {game}:{canary}", quantity="epsilon",
        lower_bound=float(result.epsilon_lower_bound), kind="finite-sample",
        confidence=1 - config.significance, reference=float(result.epsilon_theory),
        reference_kind="theory upper bound", ceiling=float(result.epsilon_ceiling),
        num_observations=int(result.num_observations), unit=unit,
        wall_time_s=time.perf_counter() - start,
        note=f"{result.adjacency}, delta={audit_config.delta:g}, test accuracy "
             f"{result.test_accuracy:.2f}"))
    if progress is not None:
      progress(_line(rows[-1]))
  return rows


def ngram_rows(key: jax.Array, config: TightnessConfig) -> list[TightnessRow]:
  """The n-gram canary's leakage, minus z standard errors, against L(p0)."""
  _check_call(key, config)
  audit_config = config.ngram_config()
  start = time.perf_counter()
  with jax.enable_x64(True):
    point = reconstruction.ngram_canary_audit(key, audit_config).points[0]
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


def run(config: TightnessConfig,
        progress: Callable[[str], None] | None = None) -> TightnessResult:
  """Runs every family of ``config`` and returns one row per audit.

  Args:
    config: the report's settings.
    progress: optional callback receiving one line per finished audit.
  """
  _check_call(None, config)
  keys = dict(zip(FAMILIES, jax.random.split(prng.make_key(config.seed, config.prng_impl),
                                             len(FAMILIES))))
  rows: list[TightnessRow] = []
  for family in config.families:
    if family == "noisy_argmax":
      new = noisy_argmax_rows(keys[family], config)
    elif family == "dpsgd":
      new = dpsgd_rows(keys[family], config, progress)
    else:
      new = ngram_rows(keys[family], config)
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
  """The report as a fixed-width table, one line per audit."""
  header = (f"{'audit':<30} {'quantity':<15} {'lower':>7} {'conf':>5} {'kind':<13} "
            f"{'reference':>9} {'ref kind':<18} {'ratio':>6} {'ceiling':>7} "
            f"{'observations':>19} {'s':>6}")
  lines = [header]
  for r in result.rows:
    lines.append(f"{r.audit:<30} {r.quantity:<15} {_num(r.lower_bound):>7} {r.confidence:>5.2f} "
                 f"{r.kind:<13} {_num(r.reference):>9} {r.reference_kind:<18} "
                 f"{_num(r.ratio, 2):>6} {_num(r.ceiling, 2):>7} "
                 f"{f'{r.num_observations} {r.unit}':>19} {r.wall_time_s:6.1f}")
  return "\n".join(lines)
