r"""The DOMIAS audit of a synthetic-data generator, and the epsilon lower bound it certifies.

One run of the game of van Breugel et al., "Membership Inference Attacks against Synthetic
Data through Overfitting Detection" (AISTATS 2023, Sec. 5 and App. A.3):

1. :func:`split_data` shuffles the real data and cuts disjoint sets: the candidates, the
   reference set :math:`\mathcal{D}_{ref}` (the attacker's real data) and a hold-out set (for
   the quality of the synthetic data only). Membership of the candidates is

   * ``"fixed"`` (the paper): the first ``num_members`` candidates are :math:`\mathcal{D}_{mem}`,
     the other ``num_non_members`` are the test set's non-members;
   * ``"bernoulli"``: each of ``2 * num_members`` candidates joins :math:`\mathcal{D}_{mem}`
     independently with probability 1/2 (Steinke, Nasr & Jagielski 2023), which is what makes
     the one-run epsilon lower bound below valid.

   With a ``shift_column`` (App. E) the members come from the records with A = 1 and
   :math:`\mathcal{D}_{ref}` from a mixture with a share ``reference_shift`` of records with
   A = 0, column A hidden (:class:`DomiasConfig`).

2. The generator is fitted to :math:`\mathcal{D}_{mem}` and publishes
   :math:`\mathcal{D}_{syn}` (``num_synthetic`` records). Any generator of
   :data:`dpaudit.models.tabular_generators.GENERATORS` works; this module registers
   ``"nflow"`` and ``"mst"`` (MST on public bin edges: :class:`MstGeneratorConfig`,
   :func:`public_binning`).
3. Every attack of :mod:`dpaudit.attacks.domias` scores the candidates; the density-based ones
   (DOMIAS, Eq. 1) use :mod:`dpaudit.attacks.density` (Gaussian KDE or BNAF), fitted to
   :math:`\mathcal{D}_{syn}` and :math:`\mathcal{D}_{ref}` (or, App. C, p_R a Gaussian prior
   from population statistics: ``reference_density="gaussian_prior"``); the distance-based ones
   work on data standardised by :math:`\mathcal{D}_{ref}`. GAN-leaks CAL and LOGAN take the
   form ``baselines`` names: the papers' (default) or the DOMIAS authors' code's.
4. :func:`attack_metrics`: AUC, accuracy at the median score, TPR at low FPR, precision among
   the top-scored records (App. D), and two epsilon lower bounds at 1 - ``significance``:

   * ``epsilon_one_run``: :func:`dpaudit.estimators.one_run_epsilon_from_scores` (Steinke et
     al. 2023, Thm. 3.1 via UniAud's symmetric guesses, Bonferroni over the guess grid): a valid
     lower bound on the epsilon of the generator's training when membership is ``"bernoulli"``
     (NaN otherwise: with a fixed-size member set its premise does not hold).
   * ``epsilon_one_run_fdp`` (and ``mu_one_run_fdp``): the f-DP one-run bound of the same
     guesses (:func:`dpaudit.estimators.fdp_one_run_from_scores`, Mahloujifar, Melis &
     Chaudhuri, ICML 2025, Gaussian family): the epsilon at ``delta`` of the strongest mu-GDP
     curve the audit rejects, a valid lower bound only *if the generator's training has a
     Gaussian (mu-GDP) trade-off curve* (the Steinke bound assumes nothing of the kind). Like
     the one-run bound it needs Bernoulli membership (NaN otherwise). At ``delta = 0`` a
     mu-GDP curve with mu > 0 has no finite epsilon: the epsilon is then inf (mu > 0) or 0,
     and ``mu_one_run_fdp`` is the figure to read.
   * ``epsilon_per_record``: :func:`dpaudit.estimators.epsilon_from_scores` (threshold chosen on
     half of the records, evaluated on the other half), the issue's "members vs non-members"
     bound. It treats each record as an independent trial of the mechanism, which the records
     of one trained generator are not; it is reported beside, not instead of, the one-run bound.
     No f-DP bound is reported beside it: the f-DP one-run test is a test of the one-run game
     (every candidate a member by its own fair coin), which fixed membership is not, and
     treating the records as independent trials would rest on the same false premise.

Synthetic-data quality is App. A.3's: the Wasserstein distance (:func:`wasserstein_distance`,
exact W1 between equal-size samples by optimal assignment) from the synthetic data to the
hold-out set, both standardised by the hold-out set's statistics.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import numpy as np
from scipy import optimize

from dpaudit import _validate, estimators, results
from dpaudit.attacks import density
from dpaudit.attacks import domias as attacks
from dpaudit.mechanisms import mst
from dpaudit.models import tabular_generators

MEMBERSHIPS = ("fixed", "bernoulli")
DENSITIES = ("kde", "bnaf")
# How the attacker knows p_R: a density fitted to D_ref, or App. C's Gaussian prior.
REFERENCE_DENSITIES = ("data", "gaussian_prior")
SHIFT_NON_MEMBERS = ("reference", "population")  # App. E's non-members: as D_ref, or as the data
FPRS = (0.01, 0.1)
TOP_FRACTIONS = (0.01, 0.1, 0.2, 0.5)


@dataclasses.dataclass(frozen=True)
class NflowConfig(density.FlowConfig):
  """The NFlow generator of Fig. 6 (Durkan et al. 2019's family): a masked autoregressive flow
  fitted by maximum likelihood (:func:`dpaudit.attacks.density.fit_flow`) and sampled."""
  kind: str = "maf"


def _fit_nflow(key, data, config, discrete_columns):
  del discrete_columns  # the flow dequantises discrete columns itself
  return density.fit_flow(key, data, config)


if "nflow" not in tabular_generators.GENERATORS:
  tabular_generators.register_generator("nflow", NflowConfig, _fit_nflow, density.sample_flow)


def public_binning(data: Any, bins: int = 16, tail: float = 0.01
                   ) -> tuple[tuple[float, ...], ...]:
  """Bin edges of each column of ``data`` ``[n, d]`` for the ``"mst"`` generator. A
  whole-number column with at most ``bins`` distinct values gets one bin per value; any other
  column the quantiles at ``bins + 1`` equally spaced levels from ``tail`` to ``1 - tail``
  (repeated edges merged; whole-number columns get whole-number edges, the last one past the
  last quantile). Values beyond the end edges fall into the end bins and are drawn inside
  them, so the extreme tails are clipped rather than stretching a bin over the whole range
  (California Housing's AveOccup reaches 1,243 where 99% of it lies below 6).

  Compute the edges from data the generator's guarantee treats as public, never from its
  training rows: the DOMIAS studies use the whole data set, fixed before any game draws its
  members (the binning is then public knowledge of the population, not a private input).

  >>> public_binning(np.array([[0.0, 1.5], [1.0, 5.0], [2.0, 3.0]]), bins=2, tail=0.0)
  ((0.0, 1.0, 2.0, 3.0), (1.5, 3.0, 5.0))
  """
  data = attacks.check_rows("data", data)
  _validate.check_integer("bins", bins, 1)
  _validate.check_range("tail", tail, 0.0, 0.5, high_open=True)
  edges = []
  for j, column in enumerate(data.T):
    values = np.unique(column)
    if values.size < 2:
      raise ValueError(f"column {j} of data is constant; MST needs a spread in every column")
    whole = bool(np.all(column == np.round(column)))
    if whole and values.size <= bins:
      cut = np.append(values, values[-1] + 1.0)
    else:
      cut = np.unique(np.quantile(column, np.linspace(tail, 1.0 - tail, bins + 1)))
      if whole:
        cut = np.unique(np.round(cut))
        cut = np.append(cut, cut[-1] + 1.0)
      elif cut.size < 2:
        cut = values[[0, -1]]
    edges.append(tuple(float(e) for e in cut))
  return tuple(edges)


@dataclasses.dataclass(frozen=True)
class MstGeneratorConfig:
  """The ``"mst"`` generator: MST (McKenna, Miklau & Sheldon 2021, :mod:`dpaudit.mechanisms.mst`)
  on columns cut by public bin ``edges`` (one increasing tuple per column, e.g.
  :func:`public_binning` of public data; required to fit). A column whose edges are all whole
  numbers is decoded to whole numbers, any other uniformly inside its bin.

  Attributes: ``epsilon``, ``delta`` of the whole mechanism; ``iters`` and ``select_iters`` of
  its mirror-descent fits (:class:`dpaudit.mechanisms.mst.MstConfig`); ``edges``.
  """
  epsilon: float = 1.0
  delta: float = 1e-5
  iters: int = 1000
  select_iters: int = 300
  edges: tuple[tuple[float, ...], ...] | None = None

  def __post_init__(self):
    self.mst()  # checks epsilon, delta and the iterations
    if self.edges is not None:
      if isinstance(self.edges, (str, bytes)) or not hasattr(self.edges, "__iter__"):
        raise ValueError(f"edges={self.edges!r} must hold one sequence of bin edges per column")
      edges = tuple(_validate.float_tuple(f"edges[{j}]", e) for j, e in enumerate(self.edges))
      object.__setattr__(self, "edges", edges)
      self.binnings()

  def mst(self) -> mst.MstConfig:
    return mst.MstConfig(epsilon=self.epsilon, delta=self.delta, iters=self.iters,
                         select_iters=self.select_iters)

  def binnings(self) -> tuple[mst.Binning, ...]:
    """One :class:`dpaudit.mechanisms.mst.Binning` per column (names ``c0``, ``c1``, ...)."""
    if self.edges is None:
      raise ValueError("the mst generator needs public bin edges: generator_config={'edges': "
                       "...} (e.g. dpaudit.audits.domias.public_binning of public data)")
    whole = lambda e: all(v == round(v) for v in e)  # noqa: E731
    return tuple(mst.Binning(f"c{j}", edges=e, integer=whole(e))
                 for j, e in enumerate(self.edges))


class _MstGenerator(NamedTuple):
  fitted: mst.MstModel
  epsilon: float  # the claimed epsilon of the game's result


def _fit_mst(key, data, config, discrete_columns):
  del discrete_columns  # the binning says how every column is cut
  binnings = config.binnings()
  if len(binnings) != data.shape[1]:
    raise ValueError(f"generator_config has edges for {len(binnings)} columns; the data have "
                     f"{data.shape[1]}")
  return _MstGenerator(mst.fit_mst(key, data, binnings, config.mst()), float(config.epsilon))


def _sample_mst(key, model, n):
  return mst.sample_mst(key, model.fitted, n)


if "mst" not in tabular_generators.GENERATORS:
  tabular_generators.register_generator("mst", MstGeneratorConfig, _fit_mst, _sample_mst)


def generator_names() -> tuple[str, ...]:
  """Every generator a game can audit."""
  return tuple(sorted(tabular_generators.GENERATORS))


@dataclasses.dataclass(frozen=True)
class DomiasConfig:
  """One DOMIAS game.

  Attributes:
    num_members: |D_mem| (``"fixed"``), or half the candidates (``"bernoulli"``); >= 2.
    num_reference: |D_ref| >= 2.
    num_synthetic: |D_syn| >= 2.
    num_non_members: non-member candidates (``"fixed"``; default ``num_members``).
    num_holdout: real records kept out of everything for the quality metric (>= 0; 0 skips it).
    membership: ``"fixed"`` or ``"bernoulli"`` (see the module docstring).
    generator: one of :func:`generator_names` (the generators of
      :mod:`dpaudit.models.tabular_generators` and ``"nflow"``).
    generator_config: keyword arguments of its config class (None: its defaults).
    density: ``"kde"`` or ``"bnaf"``, for DOMIAS and Eq. 1.
    flow_config: keyword arguments of the BNAF's :class:`dpaudit.attacks.density.FlowConfig`
      (None: the defaults, App. A.3's Table 3).
    attacks: which of :data:`dpaudit.attacks.domias.ATTACKS` to run.
    mc_components: PCA components of the MC attack (None: no PCA).
    reference_generator_config: GAN-leaks CAL's reference generator (the same kind, fitted to
      D_ref): keyword arguments of its config (None: ``generator_config``).
    logan_config: keyword arguments of LOGAN 0's GAN (None: defaults):
      :class:`dpaudit.models.tabular_generators.GanConfig` (``baselines="paper"``) or
      :class:`dpaudit.attacks.domias.CtganCriticConfig` (``"authors_code"``).
    baselines: the form of GAN-leaks CAL and LOGAN (:data:`dpaudit.attacks.domias.BASELINES`):
      ``"paper"`` (default: CAL against a reference generator fitted to D_ref, Euclidean
      distances; LOGAN D1 a 64-64 MLP early-stopped on a validation split; LOGAN 0 a WGAN-GP's
      critic) or ``"authors_code"`` (as the DOMIAS authors' code: CAL against D_ref itself with
      squared distances; LOGAN D1 a 256-256 MLP for a fixed number of steps; LOGAN 0 a
      CTGAN-style critic with dropout).
    reference_density: ``"data"`` (p_R fitted to D_ref) or ``"gaussian_prior"`` (App. C: no
      reference data; p_R a product of normal densities on ``prior_columns`` with the whole
      data's mean and standard deviation, the attacker's population statistics; only the
      attacks ``domias`` and ``eq1``, which need no D_ref).
    prior_columns: the columns the prior knows (indices after any ``shift_column`` is hidden;
      None: every column).
    shift_column: App. E's distribution shift (None: none). The records with
      ``A = data[:, shift_column] > shift_threshold`` are the generator's population: D_mem is
      drawn from them, D_ref from a mixture holding a share ``reference_shift`` of records with
      ``A = 0`` (p~(A = 0) of the paper), and the column is hidden from every set (A is
      latent). Needs ``membership="fixed"``.
    shift_threshold: as above (0.5 for a 0/1 column).
    reference_shift: p~(A = 0) in [0, 1].
    shift_non_members: ``"reference"`` (the paper: test non-members follow D_ref's mixture) or
      ``"population"`` (the authors' code: drawn from all records); the hold-out set follows
      the members' population.

  The three configs are plain dicts so that a game's settings are JSON (a cell key); each is
  checked by building its config class here.
    significance, delta: of the epsilon lower bounds.
    quality_points: at most this many records of each side enter the Wasserstein distance.
  """
  num_members: int = 500
  num_reference: int = 10_000
  num_synthetic: int = 10_000
  num_non_members: int | None = None
  num_holdout: int = 2_000
  membership: str = "fixed"
  generator: str = "tvae"
  generator_config: Mapping[str, Any] | None = None
  density: str = "kde"
  flow_config: Mapping[str, Any] | None = None
  attacks: tuple[str, ...] = attacks.ATTACKS
  mc_components: int | None = None
  logan_config: Mapping[str, Any] | None = None
  reference_generator_config: Mapping[str, Any] | None = None
  significance: float = 0.05
  delta: float = 0.0
  quality_points: int = 2_000
  baselines: str = "paper"
  reference_density: str = "data"
  prior_columns: tuple[int, ...] | None = None
  shift_column: int | None = None
  shift_threshold: float = 0.5
  reference_shift: float = 0.0
  shift_non_members: str = "reference"

  def __post_init__(self):
    object.__setattr__(self, "attacks", tuple(self.attacks))
    _validate.check_integer("num_members", self.num_members, 2)
    _validate.check_integer("num_reference", self.num_reference, 2)
    _validate.check_integer("num_synthetic", self.num_synthetic, 2)
    if self.num_non_members is not None:
      _validate.check_integer("num_non_members", self.num_non_members, 2)
    _validate.check_integer("num_holdout", self.num_holdout, 0)
    _validate.check_choice("membership", self.membership, MEMBERSHIPS)
    _validate.check_choice("baselines", self.baselines, attacks.BASELINES)
    _validate.check_choice("generator", self.generator, generator_names())
    for name in ("generator_config", "flow_config", "logan_config",
                 "reference_generator_config"):
      value = getattr(self, name)
      if value is not None and not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a dict of keyword arguments or None, got "
                         f"{type(value).__name__}")
    config_type = tabular_generators.GENERATORS[self.generator].config_type
    for name in ("generator_config", "reference_generator_config"):
      value = getattr(self, name)
      if name == "reference_generator_config" and value is None:
        continue
      try:
        config_type(**(value or {}))
      except (TypeError, ValueError) as error:
        raise ValueError(f"{name}={dict(value or {})} does not fit {config_type.__name__}: "
                         f"{error}") from None
    self.flow()
    self.logan()
    _validate.check_choice("density", self.density, DENSITIES)
    _validate.check_nonempty("attacks", self.attacks)
    for name in self.attacks:
      _validate.check_choice("attacks", name, attacks.ATTACKS)
    if len(set(self.attacks)) != len(self.attacks):
      raise ValueError(f"attacks={list(self.attacks)} has repeated names")
    if self.mc_components is not None:
      _validate.check_integer("mc_components", self.mc_components, 1)
    _validate.check_significance(self.significance)
    _validate.check_delta(self.delta)
    _validate.check_integer("quality_points", self.quality_points, 2)
    self._check_prior()
    self._check_shift()

  def _check_prior(self) -> None:
    _validate.check_choice("reference_density", self.reference_density, REFERENCE_DENSITIES)
    if self.prior_columns is not None:
      if isinstance(self.prior_columns, (str, bytes)) or not hasattr(self.prior_columns,
                                                                     "__iter__"):
        raise ValueError(f"prior_columns={self.prior_columns!r} must be a sequence of column "
                         "indices or None")
      object.__setattr__(self, "prior_columns", tuple(self.prior_columns))
      _validate.check_nonempty("prior_columns", self.prior_columns)
      for column in self.prior_columns:
        _validate.check_integer("prior_columns", column, 0)
      if len(set(self.prior_columns)) != len(self.prior_columns):
        raise ValueError(f"prior_columns={list(self.prior_columns)} repeats a column")
    if self.reference_density == "gaussian_prior":
      extra = [a for a in self.attacks if a not in ("domias", "eq1")]
      if extra:
        raise ValueError(f"attacks={list(self.attacks)}: with reference_density="
                         f"'gaussian_prior' the attacker has no reference data; {extra} need "
                         "it (valid: 'domias', 'eq1')")

  def _check_shift(self) -> None:
    _validate.check_choice("shift_non_members", self.shift_non_members, SHIFT_NON_MEMBERS)
    _validate.check_range("shift_threshold", self.shift_threshold, finite=True)
    _validate.check_range("reference_shift", self.reference_shift, 0.0, 1.0)
    if self.shift_column is None:
      return
    _validate.check_integer("shift_column", self.shift_column, 0)
    if self.membership != "fixed":
      raise ValueError(f"membership={self.membership!r}: a shift_column needs the fixed member "
                       "set of App. E ('fixed')")

  def flow(self) -> density.FlowConfig:
    """The BNAF configuration of the density-based attacks."""
    try:
      return density.FlowConfig(**{"kind": "bnaf", **(self.flow_config or {})})
    except (TypeError, ValueError) as error:
      raise ValueError(f"flow_config={dict(self.flow_config or {})}: {error}") from None

  def logan(self) -> tabular_generators.GanConfig | attacks.CtganCriticConfig:
    """The configuration of LOGAN 0's GAN: a WGAN-GP (``baselines="paper"``) or the authors'
    CTGAN-style critic (``"authors_code"``)."""
    kind = (tabular_generators.GanConfig if self.baselines == "paper"
            else attacks.CtganCriticConfig)
    try:
      return kind(**(self.logan_config or {}))
    except (TypeError, ValueError) as error:
      raise ValueError(f"logan_config={dict(self.logan_config or {})}: {error}") from None

  @property
  def non_members(self) -> int:
    return self.num_members if self.num_non_members is None else self.num_non_members

  @property
  def num_candidates(self) -> int:
    return (self.num_members + self.non_members if self.membership == "fixed"
            else 2 * self.num_members)

  def records_needed(self) -> int:
    return self.num_candidates + self.num_reference + self.num_holdout


@dataclasses.dataclass(frozen=True)
class Split:
  """The real data of one game: candidates with their membership, reference and hold-out."""
  candidates: np.ndarray
  is_member: np.ndarray
  reference: np.ndarray
  holdout: np.ndarray
  candidate_rows: np.ndarray  # row indices of the candidates in the full data

  @property
  def members(self) -> np.ndarray:
    return self.candidates[self.is_member]


def split_data(key: jax.Array, data: Any, config: DomiasConfig) -> Split:
  """Disjoint random candidates / reference / hold-out of ``data`` ``[n, d]`` (module doc)."""
  _validate.check_key(key)
  if not isinstance(config, DomiasConfig):
    raise ValueError(f"config must be a DomiasConfig, got {type(config).__name__}")
  data = attacks.check_rows("data", data)
  constant = np.flatnonzero(data.min(0) == data.max(0))
  if constant.size:
    raise ValueError(f"column {int(constant[0])} of data is constant; every column needs a "
                     "spread (drop it)")
  needed = config.records_needed()
  if needed > data.shape[0]:
    raise ValueError(
        f"the game needs {needed} records (num_members + non-members = "
        f"{config.num_candidates}, num_reference = {config.num_reference}, num_holdout = "
        f"{config.num_holdout}) but the data hold {data.shape[0]}")
  if config.shift_column is not None:
    return _shifted_split(key, data, config)
  key_order, key_coins = jax.random.split(key)
  order = np.asarray(jax.random.permutation(key_order, data.shape[0]))
  c, r = config.num_candidates, config.num_reference
  rows = order[:c]
  if config.membership == "fixed":
    is_member = np.arange(c) < config.num_members
  else:
    is_member = np.asarray(jax.random.bernoulli(key_coins, 0.5, (c,)))
    if is_member.all() or not is_member.any():  # vanishing odds; keep both classes
      is_member[0] = not is_member[0]
  return Split(data[rows], is_member, data[order[c:c + r]],
               data[order[c + r:c + r + config.num_holdout]], rows)


def _shifted_split(key: jax.Array, data: np.ndarray, config: DomiasConfig) -> Split:
  """App. E's split (:class:`DomiasConfig`'s ``shift_column``): members and hold-out from the
  records with A = 1, D_ref (and, with ``shift_non_members="reference"``, the non-members)
  with a share ``reference_shift`` of records with A = 0; column A dropped from every set."""
  column, share = config.shift_column, config.reference_shift
  if column >= data.shape[1] or data.shape[1] < 2:
    raise ValueError(f"shift_column={column} must name one of the data's {data.shape[1]} "
                     "columns and leave at least one")
  order = np.asarray(jax.random.permutation(key, data.shape[0]))
  n = config.non_members
  non_members = order[:n] if config.shift_non_members == "population" else order[:0]
  rest = order[non_members.size:]
  is_a = data[rest, column] > config.shift_threshold
  ones, zeros = list(rest[is_a]), list(rest[~is_a])
  zeros_nm = 0 if non_members.size else int(round(share * n))
  zeros_ref = int(round(share * config.num_reference))
  need_ones = (config.num_members + config.num_reference - zeros_ref + config.num_holdout
               + (0 if non_members.size else n - zeros_nm))
  if need_ones > len(ones) or zeros_nm + zeros_ref > len(zeros):
    raise ValueError(
        f"the shifted game needs {need_ones} records with A = 1 (data[:, {column}] > "
        f"{config.shift_threshold:g}) and {zeros_nm + zeros_ref} with A = 0 (reference_shift="
        f"{share:g}); the data hold {len(ones)} and {len(zeros)}")

  def take(pool, k):
    out = np.asarray(pool[:k], np.int64)
    del pool[:k]
    return out

  members = take(ones, config.num_members)
  if not non_members.size:
    non_members = np.concatenate([take(zeros, zeros_nm), take(ones, n - zeros_nm)])
  reference = np.concatenate([take(zeros, zeros_ref),
                              take(ones, config.num_reference - zeros_ref)])
  holdout = take(ones, config.num_holdout)
  rows = np.concatenate([members, non_members]).astype(np.int64)
  visible = np.delete(data, column, axis=1)
  return Split(visible[rows], np.arange(rows.size) < members.size, visible[reference],
               visible[holdout], rows)


def wasserstein_distance(key: jax.Array, a: Any, b: Any, max_points: int = 2_000,
                         scale_by: Any = None) -> float:
  r"""Wasserstein-1 distance between the empirical distributions of ``a`` and ``b``.

  Both are subsampled (without replacement) to the same size
  :math:`n = \min(|a|, |b|, \text{max\_points})`; between two uniform measures on n points the
  optimal transport plan is a permutation, so W1 is the mean Euclidean cost of the optimal
  assignment (scipy's ``linear_sum_assignment``), exact for the subsamples. Columns are first
  scaled by the standard deviation of ``scale_by`` (default ``b``), as App. A.3 measures quality
  against a standardised hold-out set.
  """
  _validate.check_key(key)
  a = attacks.check_rows("a", a)
  b = attacks.check_rows("b", b, a.shape[1])
  _validate.check_integer("max_points", max_points, 1)
  if scale_by is not None:
    scale_by = attacks.check_rows("scale_by", scale_by, a.shape[1])
  else:
    scale_by = b
  mean, std = scale_by.mean(0), scale_by.std(0)
  std = np.where(std > 0, std, 1.0)
  n = min(a.shape[0], b.shape[0], max_points)
  key_a, key_b = jax.random.split(key)
  a = (a[np.asarray(jax.random.permutation(key_a, a.shape[0]))[:n]] - mean) / std
  b = (b[np.asarray(jax.random.permutation(key_b, b.shape[0]))[:n]] - mean) / std
  cost = np.sqrt(np.maximum(
      (a**2).sum(1)[:, None] - 2.0 * a @ b.T + (b**2).sum(1)[None, :], 0.0))
  rows, cols = optimize.linear_sum_assignment(cost)
  return float(cost[rows, cols].mean())


def attack_metrics(scores: Any, is_member: Any, *, significance: float = 0.05,
                   delta: float = 0.0, bernoulli: bool = False) -> dict[str, Any]:
  """AUC, accuracy, TPR at :data:`FPRS`, precision at :data:`TOP_FRACTIONS` and the two epsilon
  lower bounds (module docstring) of one attack's scores on the candidates."""
  _validate.check_real_array("scores", scores, ndim=1, neg_inf=True, pos_inf=True)
  _validate.check_same_shape("scores", scores, "is_member", is_member)
  _validate.check_binary("is_member", is_member)
  _validate.check_significance(significance)
  _validate.check_delta(delta)
  if not isinstance(bernoulli, (bool, np.bool_)):
    raise ValueError(f"bernoulli={bernoulli!r} must be True or False")
  scores = np.asarray(scores, np.float64)
  is_member = np.asarray(is_member, bool)
  if is_member.all() or not is_member.any():
    raise ValueError("is_member must hold both members and non-members")
  inside, outside = scores[is_member], scores[~is_member]
  median = np.median(scores)
  predicted = scores > median
  metrics = {
      "auc": float(estimators.roc_auc(inside, outside)),
      "accuracy": float(np.mean(predicted == is_member)),
      "tpr_at_fpr": {f"{f:g}": float(t) for f, t in zip(
          FPRS, np.asarray(estimators.tpr_at_fpr(inside, outside, np.asarray(FPRS))))},
      "precision_at_top": {f"{q:g}": float(p) for q, p in zip(
          TOP_FRACTIONS, np.asarray(estimators.precision_at_top(
              scores, is_member, np.asarray(TOP_FRACTIONS))))},
  }
  if inside.size >= 2 and outside.size >= 2:
    metrics["epsilon_per_record"] = float(estimators.epsilon_from_scores(
        inside, outside, delta=delta, significance=significance, method="split").epsilon)
  else:
    metrics["epsilon_per_record"] = math.nan
  metrics["epsilon_one_run"] = (
      float(estimators.one_run_epsilon_from_scores(
          scores, is_member, delta=delta, significance=significance).epsilon)
      if bernoulli else math.nan)
  metrics["epsilon_one_run_fdp"] = metrics["mu_one_run_fdp"] = math.nan
  if bernoulli:
    with jax.enable_x64(True):
      fdp = estimators.fdp_one_run_from_scores(scores, is_member, delta, significance)
    metrics["epsilon_one_run_fdp"] = float(fdp.epsilon)
    metrics["mu_one_run_fdp"] = float(fdp.mu)
  return metrics


def _log_densities(key, config: DomiasConfig, synthetic, reference, x, population):
  """log p_G(x) and log p_R(x): the chosen density estimator fitted to D_syn and to D_ref, or
  for p_R App. C's Gaussian prior with the ``population``'s statistics."""
  key_g, key_r = jax.random.split(key)
  if config.density == "kde":
    fit = lambda _, rows: density.fit_kde(rows)  # noqa: E731
    log_density = density.kde_log_density
  else:
    fit = lambda k, rows: density.fit_flow(k, rows, config.flow())  # noqa: E731
    log_density = density.flow_log_density
  log_g = np.asarray(log_density(fit(key_g, synthetic), x))
  if config.reference_density == "data":
    return log_g, np.asarray(log_density(fit(key_r, reference), x))
  columns = list(range(x.shape[1]) if config.prior_columns is None else config.prior_columns)
  if max(columns) >= x.shape[1]:
    raise ValueError(f"prior_columns={list(config.prior_columns)} name a column beyond the "
                     f"{x.shape[1]} the attacker sees")
  known = population[:, columns]
  return log_g, attacks.gaussian_prior_log_density(x[:, columns], known.mean(0), known.std(0))


# Fields added to DomiasConfig after games were first stored: left out of a game's cell while
# they hold their defaults, so that stored games are still found (and not played again).
_LATER_FIELDS = ("baselines", "reference_density", "prior_columns", "shift_column",
                 "shift_threshold", "reference_shift", "shift_non_members")


def _cell_config(config: DomiasConfig) -> dict[str, Any]:
  """``config`` as the stored game's cell names it (:data:`_LATER_FIELDS` at their defaults
  left out)."""
  defaults = {f.name: f.default for f in dataclasses.fields(DomiasConfig)}
  return {name: value for name, value in dataclasses.asdict(config).items()
          if not (name in _LATER_FIELDS and value == defaults[name])}


@dataclasses.dataclass(frozen=True)
class DomiasResult:
  """One game: the metrics of every attack, optionally per group, and the generator's side.

  Attributes:
    attacks: attack name -> :func:`attack_metrics`.
    groups: group name -> attack name -> :func:`attack_metrics` on the group's candidates.
    quality: Wasserstein distance of D_syn to the hold-out set (NaN without hold-out).
    claimed_epsilon: the generator's own DP epsilon (inf for non-private generators).
    num_members: |D_mem| actually drawn.
    wall_time_s: seconds per phase (generator, densities, attacks, ...).
  """
  attacks: dict[str, dict[str, Any]]
  groups: dict[str, dict[str, dict[str, Any]]]
  quality: float
  claimed_epsilon: float
  num_members: int
  wall_time_s: dict[str, float]

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, value: Mapping[str, Any]) -> DomiasResult:
    """Rebuilds the result from :meth:`to_dict`'s output (a stored cell); a damaged dict is a
    KeyError, TypeError or ValueError naming the field."""
    results.check_fields("DOMIAS result", value, {
        "attacks": dict, "groups": dict, "quality": float, "claimed_epsilon": float,
        "num_members": int, "wall_time_s": dict})
    groups = {}
    for group, by_attack in value["groups"].items():
      results.check_fields(f"groups[{group!r}]", by_attack, {})
      groups[str(group)] = {name: _metrics_from_dict(f"groups[{group!r}][{name!r}]", m)
                            for name, m in by_attack.items()}
    wall = results.check_fields("wall_time_s", value["wall_time_s"],
                                dict.fromkeys(value["wall_time_s"], float))
    return cls(attacks={name: _metrics_from_dict(f"attacks[{name!r}]", m)
                        for name, m in value["attacks"].items()},
               groups=groups, quality=float(value["quality"]),
               claimed_epsilon=float(value["claimed_epsilon"]),
               num_members=int(value["num_members"]),
               wall_time_s={str(k): float(v) for k, v in wall.items()})


def _metrics_from_dict(what: str, value: Any) -> dict[str, Any]:
  """One attack's :func:`attack_metrics` from plain values (checked field by field)."""
  results.check_fields(what, value, {
      "auc": float, "accuracy": float, "tpr_at_fpr": dict, "precision_at_top": dict,
      "epsilon_per_record": float, "epsilon_one_run": float})
  out = {}
  for name, item in value.items():
    if isinstance(item, Mapping):
      results.check_fields(f"{what}[{name!r}]", item, dict.fromkeys(item, float))
      out[name] = {str(k): float(v) for k, v in item.items()}
    else:
      results.check_fields(what, value, {name: float})
      out[name] = float(item)
  return out


def _phases(config: DomiasConfig) -> list[str]:
  """The timed phases of one game, in the order :func:`run` plays them (its progress units)."""
  phases = ["generator", "sample"]
  if {"domias", "eq1"} & set(config.attacks):
    phases.append("density")
  phases += [name for name in ("gan_leaks", "gan_leaks_cal", "mc", "logan_d1", "logan_0")
             if name in config.attacks]
  return phases + (["quality"] if config.num_holdout >= 2 else [])


def run(key: jax.Array, config: DomiasConfig, *, data: Any,
        groups: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None,
        progress: results.Progress | None = None,
        store: results.CellStore | None = None) -> DomiasResult:
  """Plays one DOMIAS game on ``data`` ``[n, d]`` (module docstring).

  Args:
    key: PRNG key of the game (split, generator, attacks).
    config: :class:`DomiasConfig`.
    data: the real records.
    groups: optional ``name -> rows -> bool mask``; each attack's metrics are also computed on
      the candidates the mask selects (Fig. 5's minority and the rest).
    progress: :class:`dpaudit.results.Progress`, called as each timed phase (generator fit,
      sampling, densities, each distance-based attack, quality) ends: ``done`` of ``total``
      phases, the message ``"<phase>: <seconds> s"``.
    store: optional :class:`dpaudit.results.CellStore`: the game's result is stored under the
      key, the config, a digest of ``data`` and the groups' names, and reused when whole
      (progress then reports every phase done, ``"reused"``).

  >>> import jax, numpy as np
  >>> rows = np.random.default_rng(0).normal(size=(60, 2))
  >>> config = DomiasConfig(num_members=10, num_reference=20, num_synthetic=40, num_holdout=0,
  ...                       generator="additive_noise", attacks=("domias", "gan_leaks"))
  >>> result = run(jax.random.key(0), config, data=rows)
  >>> sorted(result.attacks), result.num_members
  (['domias', 'gan_leaks'], 10)
  """
  _validate.check_key(key)
  if not isinstance(config, DomiasConfig):
    raise ValueError(f"config must be a DomiasConfig, got {type(config).__name__}")
  if groups is not None:
    if not isinstance(groups, Mapping) or not all(
        isinstance(name, str) and callable(fn) for name, fn in groups.items()):
      raise ValueError("groups must map names (strings) to functions rows -> boolean mask")
  if progress is not None and not callable(progress):
    raise ValueError(f"progress must be a function progress(done, total, message), got "
                     f"{type(progress).__name__}")
  if store is not None and not isinstance(store, results.CellStore):
    raise ValueError(f"store must be a dpaudit.results.CellStore or None, got "
                     f"{type(store).__name__}")
  data = attacks.check_rows("data", data)
  cell = {"key": results.key_data(key), "config": results.to_plain(_cell_config(config)),
          "data_sha256": hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest(),
          "data_shape": list(data.shape), "groups": sorted(groups or {})}
  played = []

  def play():
    played.append(True)
    return _play(key, config, data, groups, progress)

  result = results.stored_run(store, cell, f"domias-{config.generator}", play, DomiasResult)
  if not played:  # reused from the store
    total = len(_phases(config))
    results.report(progress, total, total, "reused")
  return result


def _play(key, config, data, groups, progress) -> DomiasResult:
  """One game (:func:`run` without the store)."""
  phases = _phases(config)
  keys = dict(zip(("split", "generator", "sample", "density", "reference_generator",
                   "reference_sample", "logan_0", "logan_d1", "quality"),
                  jax.random.split(key, 9)))
  split = split_data(keys["split"], data, config)
  timings = {}

  def timed(name, fn):
    start = time.perf_counter()
    out = fn()
    timings[name] = time.perf_counter() - start
    results.report(progress, len(timings), len(phases), f"{name}: {timings[name]:.1f} s")
    return out

  generator = timed("generator", lambda: tabular_generators.fit_generator(
      keys["generator"], config.generator, split.members, config.generator_config))
  synthetic = np.asarray(timed("sample", lambda: generator.sample(keys["sample"],
                                                                  config.num_synthetic)))
  x = split.candidates
  scores = {}
  if {"domias", "eq1"} & set(config.attacks):
    population = (data if config.shift_column is None
                  else np.delete(data, config.shift_column, axis=1))
    log_g, log_r = timed("density", lambda: _log_densities(
        keys["density"], config, synthetic, split.reference, x, population))
    if "domias" in config.attacks:
      scores["domias"] = attacks.domias_scores(log_g, log_r)
    if "eq1" in config.attacks:
      scores["eq1"] = attacks.eq1_scores(log_g)
  if set(config.attacks) - {"domias", "eq1"}:  # the others work on standardised data
    x_std, syn_std, ref_std = attacks.standardise(split.reference, x, synthetic,
                                                  split.reference)
  if "gan_leaks" in config.attacks:
    scores["gan_leaks"] = timed("gan_leaks", lambda: attacks.gan_leaks_scores(x_std, syn_std))
  paper = config.baselines == "paper"
  if "gan_leaks_cal" in config.attacks:
    def calibrated():
      if not paper:  # the authors' code: D_ref itself, squared distances
        return attacks.gan_leaks_cal_scores(x_std, syn_std, ref_std, squared=True)
      reference_generator = tabular_generators.fit_generator(
          keys["reference_generator"], config.generator, split.reference,
          config.generator_config if config.reference_generator_config is None
          else config.reference_generator_config)
      ref_syn = np.asarray(reference_generator.sample(keys["reference_sample"],
                                                      config.num_synthetic))
      (ref_syn_std,) = attacks.standardise(split.reference, ref_syn)
      return attacks.gan_leaks_cal_scores(x_std, syn_std, ref_syn_std)
    scores["gan_leaks_cal"] = timed("gan_leaks_cal", calibrated)
  if "mc" in config.attacks:
    scores["mc"] = timed("mc", lambda: attacks.mc_scores(x_std, syn_std,
                                                         config.mc_components))
  if "logan_d1" in config.attacks:
    scores["logan_d1"] = timed("logan_d1", lambda: (
        attacks.logan_d1_scores(keys["logan_d1"], x_std, syn_std, ref_std) if paper else
        attacks.logan_d1_fixed_scores(keys["logan_d1"], x_std, syn_std, ref_std)))
  if "logan_0" in config.attacks:
    scores["logan_0"] = timed("logan_0", lambda: attacks.logan_0_scores(
        keys["logan_0"], x_std, syn_std, config.logan()))

  bernoulli = config.membership == "bernoulli"
  metric = lambda s, m: attack_metrics(s, m, significance=config.significance,  # noqa: E731
                                       delta=config.delta, bernoulli=bernoulli)
  by_attack = {name: metric(scores[name], split.is_member) for name in config.attacks}
  group_results = {}
  for group, select in (groups or {}).items():
    mask = np.asarray(select(x), bool)
    if mask.shape != split.is_member.shape:
      raise ValueError(f"group {group!r} gave a mask of shape {mask.shape}; expected "
                       f"{split.is_member.shape}")
    members = split.is_member[mask]
    if members.all() or not members.any():
      group_results[group] = {}  # too few candidates in the group to measure
      continue
    group_results[group] = {name: metric(scores[name][mask], members)
                            for name in config.attacks}
  quality = math.nan
  if config.num_holdout >= 2:
    quality = timed("quality", lambda: wasserstein_distance(
        keys["quality"], synthetic, split.holdout, config.quality_points))
  if len(timings) != len(phases):  # every phase reports; this only keeps done == total at the end
    results.report(progress, len(phases), len(phases), "done")
  claimed = float(getattr(generator.model, "epsilon", math.inf))
  return DomiasResult(by_attack, group_results, quality, claimed, int(split.is_member.sum()),
                      timings)


Config = DomiasConfig
Result = DomiasResult
