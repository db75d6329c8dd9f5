r"""The DOMIAS studies of van Breugel et al. (AISTATS 2023): Figs. 3-6 and the epsilon table, as
grids of DOMIAS games (:func:`dpaudit.audits.domias.run`).

A :class:`StudyConfig` names the studies and their grids; :func:`study_cells` turns one study
into its settings (each a :class:`dpaudit.audits.domias.DomiasConfig`), and :func:`run` plays
``repetitions`` games of every setting through the one grid helper
(:func:`dpaudit.results.run_cells`): game i of a setting uses ``fold_in(key, i)``, and each
finished game is a cell of the :class:`dpaudit.results.CellStore` (labelled by generator and
game, so a game two studies share is computed once).

* ``members`` / ``epochs``: AUC of every attack against |D_mem| and against the TVAE epochs
  (Fig. 3; App. A.3's sizes);
* ``reference`` / ``synthetic``: DOMIAS and Eq. 1 with KDE and BNAF against |D_ref| and
  |D_syn| (Fig. 4);
* ``minority``: the UCI heart failure records, each attack's AUC on the patients with
  ``minority_column`` = 1 and on the rest (Fig. 5);
* ``generators``: Wasserstein distance of D_syn to a hold-out set against DOMIAS's AUC (Fig. 6),
  for any generator of :data:`dpaudit.models.tabular_generators.GENERATORS` (looked up when
  the config is built, so generators registered later are welcome);
* ``epsilon``: Bernoulli membership, so that the one-run bound (Steinke et al. 2023) of DOMIAS's
  scores is a valid lower bound on the epsilon of the generator's training;
* ``prior``: App. C (Fig. 12): the attacker's knowledge of p_R varied over ``knowledge`` (a
  KDE of D_ref; a Gaussian on the first column from population statistics, the paper's; a
  Gaussian on every column, the authors' code's) against |D_mem|, DOMIAS beside Eq. 1;
* ``shift``: App. E (Fig. 15): UCI heart failure, D_mem drawn from the records with
  ``shift_column`` = 1 (diabetes), D_ref with a share p~(A = 0) of the others
  (``shift_shares``), the column hidden; every attack's AUC against the share.

:func:`tables` prints the summaries (:func:`summarise`: mean and std over games);
:func:`dpaudit.plots.domias_figures` draws the figures.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import inspect
import math
import time
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from dpaudit import _validate, results
from dpaudit.attacks import domias as domias_attacks
from dpaudit.audits import domias
from dpaudit.data import HEART_FAILURE_COLUMNS
from dpaudit.models import tabular_generators

STUDIES = ("members", "epochs", "reference", "synthetic", "minority", "generators", "epsilon",
           "prior", "shift")
DATASETS = ("california_housing", "adult")
# App. C: what the attacker knows of p_R.
KNOWLEDGE = ("reference", "prior_first_column", "prior_all_columns")
# App. E on the 299 UCI heart failure records: 40 members and 40 non-members, 45 in D_ref
# (at p~(A = 0) = 0 with the paper's non-members this takes all 125 diabetics).
SHIFT_SIZES = {"num_members": 40, "num_reference": 45, "num_synthetic": 1000}
MAX_MST_BINS = 1000  # MST measures 2-way marginals of bins^2 cells
METRICS = ("auc", "accuracy", "epsilon_per_record", "epsilon_one_run")


def _positive_ints(name: str, values: Any) -> tuple[int, ...]:
  values = tuple(values)
  if not values:
    raise ValueError(f"{name} is empty; give at least one value")
  for value in values:
    _validate.check_integer(name, value, 1)
  return values


@dataclasses.dataclass(frozen=True)
class StudyConfig:
  """The studies to run and their settings (defaults: the paper's, App. A.3).

  Attributes: ``studies`` (of :data:`STUDIES`); ``dataset`` (of :data:`DATASETS`) or
  ``data_csv`` (a numeric CSV with a header row) for every study but minority and shift;
  ``repetitions`` games per setting; ``seed`` (recorded in each cell: the key given to
  :func:`run` must be its key); ``attacks``, ``density``, ``baselines`` (the form of
  GAN-leaks CAL and LOGAN, :data:`dpaudit.attacks.domias.BASELINES`) and the sizes of one game;
  the grids ``members``, ``epochs``, ``reference_sizes``, ``synthetic_sizes``,
  ``ads_gan_lambdas``, ``noise_levels``, ``knowledge`` (of :data:`KNOWLEDGE`),
  ``shift_shares`` (p~(A = 0) in [0, 1]); ``shift_column`` (a 0/1 heart failure column) and
  ``shift_non_members`` (:data:`dpaudit.audits.domias.SHIFT_NON_MEMBERS`); the generators of
  Fig. 6 and the epsilon table with their settings: ``dp_epsilons`` and ``dp_delta`` of every
  generator whose config has ``epsilon`` (and ``delta``), ``dp_epochs`` of DP-TVAE,
  ``gan_iterations`` of those with ``iterations``, ``generator_epochs`` of the others with
  ``epochs`` (0: their defaults), ``mst_bins`` of MST's public binning (:func:`run` cuts the
  whole data set's quantiles: :func:`dpaudit.audits.domias.public_binning`); ``significance``
  of the epsilon lower bounds.
  """
  studies: tuple[str, ...] = ("members",)
  dataset: str = "california_housing"
  data_csv: str | None = None
  repetitions: int = 8
  seed: int = 0
  attacks: tuple[str, ...] = ("domias", "eq1", "logan_0", "logan_d1", "mc", "gan_leaks",
                              "gan_leaks_cal")
  density: str = "kde"
  num_members: int = 500
  num_reference: int = 10_000
  num_synthetic: int = 10_000
  num_holdout: int = 2_000
  tvae_epochs: int = 2000
  reference_tvae_epochs: int = 0
  members: tuple[int, ...] = (50, 100, 200, 500, 1000, 2000)
  epochs: tuple[int, ...] = (50, 200, 500, 1000, 2000, 3000)
  reference_sizes: tuple[int, ...] = (100, 500, 1000, 2000, 5000, 10000)
  synthetic_sizes: tuple[int, ...] = (100, 500, 1000, 2000, 5000, 10000)
  minority_column: str = "high_blood_pressure"
  generators: tuple[str, ...] = ("tvae", "dp_tvae", "wgan_gp", "nflow")
  ads_gan_lambdas: tuple[float, ...] = (0.2, 0.5, 0.7, 1.0, 1.1, 1.3, 1.5)
  noise_levels: tuple[float, ...] = (0.7, 0.9, 1.1, 1.3, 1.5, 1.7, 1.9, 2.3, 2.5, 2.9, 3.5, 3.9)
  gan_iterations: int = 1000
  flow_epochs: int = 50
  dp_epsilons: tuple[float, ...] = (1.0, 4.0, 10.0)
  dp_delta: float = 1e-5
  dp_epochs: float = 300.0
  significance: float = 0.05
  baselines: str = "paper"
  knowledge: tuple[str, ...] = KNOWLEDGE
  shift_column: str = "diabetes"
  shift_shares: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8)
  shift_non_members: str = "reference"
  generator_epochs: int = 0
  mst_bins: int = 16

  def __post_init__(self):
    if isinstance(self.studies, str) or not self.studies:
      raise ValueError(f"studies={self.studies!r} must name at least one of {STUDIES}")
    for study in self.studies:
      _validate.check_choice("studies", study, STUDIES)
    for attack in self.attacks:
      _validate.check_choice("attacks", attack, domias_attacks.ATTACKS)
    _validate.check_choice("density", self.density, domias.DENSITIES)
    _validate.check_choice("dataset", self.dataset, DATASETS)
    for generator in self.generators:  # GENERATORS as it is now, registrations included
      _validate.check_choice("generators", generator, domias.generator_names())
    _validate.check_choice("baselines", self.baselines, domias_attacks.BASELINES)
    _validate.check_nonempty("knowledge", tuple(self.knowledge))
    for knowledge in self.knowledge:
      _validate.check_choice("knowledge", knowledge, KNOWLEDGE)
    _validate.check_choice("shift_column", self.shift_column, HEART_FAILURE_COLUMNS)
    _validate.check_choice("shift_non_members", self.shift_non_members,
                           domias.SHIFT_NON_MEMBERS)
    shares = _validate.float_tuple("shift_shares", self.shift_shares)
    _validate.check_nonempty("shift_shares", shares)
    _validate.check_range("shift_shares", np.asarray(shares), 0.0, 1.0)
    _validate.check_integer("generator_epochs", self.generator_epochs, 0)
    _validate.check_integer("mst_bins", self.mst_bins, 1, MAX_MST_BINS)
    for name in ("repetitions", "num_members", "num_reference", "num_synthetic",
                 "tvae_epochs", "gan_iterations", "flow_epochs"):
      _validate.check_integer(name, getattr(self, name), 1)
    for name in ("seed", "num_holdout", "reference_tvae_epochs"):
      _validate.check_integer(name, getattr(self, name), 0)
    for name in ("members", "epochs", "reference_sizes", "synthetic_sizes"):
      _positive_ints(name, getattr(self, name))
    _validate.check_range("dp_delta", self.dp_delta, 0.0, 1.0, low_open=True, high_open=True)
    _validate.check_range("dp_epochs", self.dp_epochs, 0.0, low_open=True, finite=True)
    _validate.check_significance(self.significance)
    for study in self.studies:  # every game's settings are valid before any game is played
      for _, kwargs, _ in study_cells(self, study):
        domias.DomiasConfig(**kwargs)


def _tvae(epochs: int) -> dict:
  return {"epochs": int(epochs)}


def _config_fields(config_type: type) -> set[str]:
  """The keyword arguments a generator's config class takes."""
  if dataclasses.is_dataclass(config_type):
    return {f.name for f in dataclasses.fields(config_type)}
  return set(inspect.signature(config_type).parameters)


def _generator_settings(config: StudyConfig) -> list[tuple[str, str, dict]]:
  """(label, generator, config kwargs) of Fig. 6 and the epsilon table: any registered
  generator; one setting per target epsilon for those whose config has ``epsilon``."""
  out = []
  for name in config.generators:
    fields = _config_fields(tabular_generators.GENERATORS[name].config_type)
    if name == "tvae":
      kwargs = _tvae(config.tvae_epochs)
    elif name == "nflow":
      kwargs = {"max_epochs": config.flow_epochs}
    elif name == "mst":
      kwargs = {}  # run() adds the public edges of the data (mst_bins)
    else:
      kwargs = {"iterations": config.gan_iterations} if "iterations" in fields else {}
      if name == "dp_tvae":
        kwargs["epochs"] = config.dp_epochs
      elif "epochs" in fields and config.generator_epochs:
        kwargs["epochs"] = config.generator_epochs
    if "epsilon" not in fields:
      out.append((name, name, kwargs))
      continue
    delta = {"delta": config.dp_delta} if "delta" in fields else {}
    out += [(f"{name} eps={eps:g}", name, {"epsilon": eps, **delta, **kwargs})
            for eps in config.dp_epsilons]
  return out


def _logan(config: StudyConfig, tvae_epochs: int) -> dict:
  """LOGAN 0's settings: the WGAN-GP's iterations, or (the authors' code) the CTGAN-style
  critic trained for as many epochs as the target TVAE."""
  if config.baselines == "paper":
    return {"iterations": config.gan_iterations}
  return {"epochs": int(tvae_epochs)}


def study_cells(config: StudyConfig, study: str) -> list[tuple[str, dict, dict]]:
  """(setting label, DomiasConfig kwargs, extra) of one study; extra holds the x value. MST's
  settings have no ``edges`` yet: :func:`run` adds them from the data."""
  _validate.check_choice("study", study, STUDIES)
  c = config
  base = dict(num_members=c.num_members, num_reference=c.num_reference,
              num_synthetic=c.num_synthetic, num_holdout=0, generator="tvae",
              generator_config=_tvae(c.tvae_epochs), density=c.density,
              attacks=tuple(c.attacks), significance=c.significance,
              flow_config={"max_epochs": c.flow_epochs}, baselines=c.baselines,
              logan_config=_logan(c, c.tvae_epochs),
              reference_generator_config=(_tvae(c.reference_tvae_epochs)
                                          if c.reference_tvae_epochs and c.baselines == "paper"
                                          else None))
  if study == "members":
    return [(f"|D_mem|={n}", {**base, "num_members": n}, {"x": n}) for n in c.members]
  if study == "epochs":
    return [(f"epochs={e}", {**base, "generator_config": _tvae(e), "logan_config": _logan(c, e)},
             {"x": e}) for e in c.epochs]
  if study in ("reference", "synthetic"):
    sizes = c.reference_sizes if study == "reference" else c.synthetic_sizes
    key = "num_reference" if study == "reference" else "num_synthetic"
    return [(f"{key}={n} {d}", {**base, key: n, "density": d, "attacks": ("domias", "eq1")},
             {"x": n, "density": d}) for n in sizes for d in ("kde", "bnaf")]
  if study == "minority":
    # 299 records: 100 members, 100 non-members, the other 99 the reference.
    return [("heart_failure", {**base, "num_members": 100, "num_reference": 99,
                               "num_synthetic": 1000}, {"dataset": "heart_failure"})]
  if study == "prior":
    priors = {"reference": {}, "prior_first_column": {"reference_density": "gaussian_prior",
                                                      "prior_columns": (0,)},
              "prior_all_columns": {"reference_density": "gaussian_prior"}}
    return [(f"|D_mem|={n} {k}", {**base, "num_members": n, "attacks": ("domias", "eq1"),
                                  **priors[k]}, {"x": n, "knowledge": k})
            for n in c.members for k in c.knowledge]
  if study == "shift":
    column = list(HEART_FAILURE_COLUMNS).index(c.shift_column)
    return [(f"p~(A=0)={share:g}", {**base, **SHIFT_SIZES, "shift_column": column,
                                    "reference_shift": float(share),
                                    "shift_non_members": c.shift_non_members},
             {"x": float(share), "dataset": "heart_failure"}) for share in c.shift_shares]
  base = {**base, "reference_generator_config": None}  # only DOMIAS runs below
  settings = [(label, {**base, "generator": g, "generator_config": kw})
              for label, g, kw in _generator_settings(c)]
  if study == "generators":
    settings += [(f"ads_gan lambda={lam:g}", {**base, "generator": "ads_gan", "generator_config":
                                              {"iterations": c.gan_iterations,
                                               "identifiability": lam}})
                 for lam in c.ads_gan_lambdas]
    settings += [(f"additive_noise {s:g}", {**base, "generator": "additive_noise",
                                            "generator_config": {"noise": s}})
                 for s in c.noise_levels]
    return [(label, {**kw, "num_holdout": c.num_holdout, "attacks": ("domias",)}, {})
            for label, kw in settings]
  return [(label, {**kw, "membership": "bernoulli", "attacks": ("domias",),
                   "delta": c.dp_delta}, {}) for label, kw in settings]


def _with_edges(kwargs: dict, values: np.ndarray, bins: int) -> dict:
  """MST's settings with the public edges of the whole data set (``bins`` quantile bins), the
  studies' public binning: fixed before any game draws its members."""
  if kwargs["generator"] != "mst" or (kwargs["generator_config"] or {}).get("edges"):
    return kwargs
  edges = domias.public_binning(values, bins)
  return {**kwargs, "generator_config": {**(kwargs["generator_config"] or {}), "edges": edges}}


def read_csv(path: str) -> tuple[np.ndarray, list[str]]:
  """A numeric CSV with a header row; a missing file, a non-numeric value, a ragged row or a
  constant column is a ValueError naming it."""
  if not isinstance(path, str) or not path:
    raise ValueError(f"data_csv={path!r} must be the path of a CSV file")
  try:
    with open(path, newline="", encoding="utf-8") as f:
      rows = [row for row in csv.reader(f) if row]
  except OSError as error:
    raise ValueError(f"data_csv={path}: {error.strerror}") from None
  if len(rows) < 3:
    raise ValueError(f"data_csv={path} needs a header row and at least 2 records")
  header = [h.strip() for h in rows[0]]
  values = np.empty((len(rows) - 1, len(header)))
  for i, row in enumerate(rows[1:]):
    if len(row) != len(header):
      raise ValueError(f"data_csv={path}: line {i + 2} has {len(row)} fields, the header "
                       f"{len(header)}")
    try:
      values[i] = [float(v) for v in row]
    except ValueError:
      raise ValueError(f"data_csv={path}: line {i + 2} holds a non-numeric value") from None
  if not np.all(np.isfinite(values)):
    raise ValueError(f"data_csv={path} holds NaN or infinite values")
  constant = np.flatnonzero(values.min(0) == values.max(0))
  if constant.size:
    raise ValueError(f"data_csv={path}: column {header[constant[0]]!r} is constant; every "
                     "column needs a spread (drop it)")
  return values, header


def load_data(name: str) -> tuple[np.ndarray, list[str]]:
  """(records ``[n, d]`` float64, column names) of ``heart_failure``, one of :data:`DATASETS`,
  or ``csv:<path>`` (:func:`read_csv`)."""
  from dpaudit import data
  if isinstance(name, str) and name.startswith("csv:"):
    return read_csv(name[len("csv:"):])
  _validate.check_choice("name", name, ("heart_failure",) + DATASETS)
  columns = {"heart_failure": list(data.HEART_FAILURE_COLUMNS),
             "california_housing": list(data.CALIFORNIA_FEATURES),
             "adult": [c.name for c in data.ADULT_COLUMNS]}[name]
  return np.asarray(data.load(name).features, np.float64), columns


def minority_groups(columns: list[str], column: str):
  """Fig. 5's groups: rows whose ``column`` is 1 (``minority``) and the rest."""
  if column not in columns:
    raise ValueError(f"minority_column={column!r} is not a heart_failure column; valid: "
                     + ", ".join(columns))
  index = columns.index(column)
  return {"minority": lambda x: x[:, index] == 1, "rest": lambda x: x[:, index] != 1}


def check_game_cell(cell, attacks) -> None:
  """Raises KeyError, TypeError or ValueError unless ``cell`` is a whole stored game
  (``DomiasResult.to_dict()`` and ``seconds``) that played ``attacks``: the fields with their
  types, every attack's metrics (AUC, accuracy, TPRs and precisions in [0, 1]; epsilon bounds
  numbers, not below 0), in every group too (a group may be empty: too few candidates)."""
  results.check_fields("DOMIAS game", cell, {
      "attacks": dict, "groups": dict, "quality": float, "claimed_epsilon": float,
      "num_members": int, "wall_time_s": dict, "seconds": float})
  for where, metrics in [("attacks", cell["attacks"])] + [
      (f"groups[{g!r}]", m) for g, m in cell["groups"].items()]:
    if set(metrics) != set(attacks) and not (where != "attacks" and metrics == {}):
      raise ValueError(f"the game's {where} hold {sorted(metrics)}, not {sorted(attacks)}")
    for name, m in metrics.items():
      results.check_fields(f"{where}[{name!r}]", m, {
          "auc": float, "accuracy": float, "tpr_at_fpr": dict, "precision_at_top": dict,
          "epsilon_per_record": float, "epsilon_one_run": float})
      rates = [m["auc"], m["accuracy"], *m["tpr_at_fpr"].values(),
               *m["precision_at_top"].values()]
      if not all(isinstance(r, (int, float)) and 0 <= r <= 1 for r in rates):
        raise ValueError(f"{where}[{name!r}] has a rate outside [0, 1]: {m}")
      if any(m.get(e, 0.0) < 0 for e in ("epsilon_per_record", "epsilon_one_run",
                                          "epsilon_one_run_fdp", "mu_one_run_fdp")):
        raise ValueError(f"{where}[{name!r}] has a negative epsilon bound: {m}")
  if cell["num_members"] < 1 or cell["seconds"] < 0:
    raise ValueError(f"num_members={cell['num_members']} and seconds={cell['seconds']} must be "
                     "positive")


@dataclasses.dataclass(frozen=True)
class StudyResult:
  """``studies``: study -> one row per game (setting label, game, the x value of the setting,
  and the game's :class:`dpaudit.audits.domias.DomiasResult` fields with its ``seconds``)."""
  studies: Mapping[str, list[dict[str, Any]]]

  def to_dict(self) -> dict[str, Any]:
    return {"studies": results.to_plain(self.studies)}

  @classmethod
  def from_dict(cls, value: Mapping[str, Any]) -> StudyResult:
    return cls(studies=dict(value["studies"]))


def _study_rows(key, config, study, values, dataset, fingerprint, groups, progress, store):
  """The games of one study through :func:`dpaudit.results.run_cells`, as result rows."""
  cells, extras, names = [], [], []
  for label, kwargs, extra in study_cells(config, study):
    game_config = domias.DomiasConfig(**_with_edges(kwargs, values, config.mst_bins))
    if game_config.records_needed() > values.shape[0]:
      raise ValueError(f"{study} / {label}: the game needs {game_config.records_needed()} "
                       "records (members + non-members + reference + hold-out) but "
                       f"{dataset} has {values.shape[0]}")
    for game in range(config.repetitions):
      cell_config = {"dataset": dataset, "data_sha256": fingerprint, "seed": config.seed,
                     "game": game, "domias": dataclasses.asdict(game_config),
                     "groups": config.minority_column if groups else None}
      name = f"{study} / {label} / game {game}"

      def compute(game_config=game_config, game=game, done=len(cells)):  # noqa: B008  # bound now
        start = time.perf_counter()
        result = domias.run(
            jax.random.fold_in(key, game), game_config, data=values, groups=groups,
            progress=lambda _, __, line: results.report(progress, done, total, f"  {line}"))
        return {**result.to_dict(), "seconds": time.perf_counter() - start}

      # Labelled by generator, not study: a game two studies share is computed once.
      cells.append(results.Cell(f"{game_config.generator}-{game}", cell_config, compute))
      extras.append({"setting": label, "game": game, **extra})
      names.append(name)

  total = len(cells)

  def report(done, total, message):
    results.report(progress, done, total, names[done - 1] + (
        " (reused)" if message.endswith("(reused)") else ""))

  attacks = cells[0].config["domias"]["attacks"] if cells else ()  # one set per study
  rows = results.run_cells(cells, store, report, lambda c: check_game_cell(c, attacks))
  return [{**extra, **row} for extra, row in zip(extras, rows)]


def run(key: jax.Array, config: StudyConfig, *, progress: results.Progress | None = None,
        store: results.CellStore | None = None) -> StudyResult:
  """Plays every game of every study of ``config`` (game i of a setting: ``fold_in(key, i)``).

  ``key`` must be ``dpaudit.prng.make_key(config.seed)``: stored cells are named by the seed.
  Whether the data hold enough records for a study's games is checked before its first game.
  """
  _validate.check_key(key)
  if not isinstance(config, StudyConfig):
    raise ValueError(f"config must be a StudyConfig, got {type(config).__name__}")
  datasets, out = {}, {}
  for study in config.studies:
    dataset = ("heart_failure" if study in ("minority", "shift") else
               f"csv:{config.data_csv}" if config.data_csv else config.dataset)
    if dataset not in datasets:
      datasets[dataset] = load_data(dataset)
    values, columns = datasets[dataset]
    fingerprint = hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()[:16]
    groups = minority_groups(columns, config.minority_column) if study == "minority" else None
    out[study] = _study_rows(key, config, study, values, dataset, fingerprint, groups,
                             progress, store)
  return StudyResult(out)


Config = StudyConfig
Result = StudyResult


# ------------------------------------------------------------------------------ summaries


def summarise(rows: list[dict], metric: str = "auc", group: str | None = None
              ) -> dict[str, dict[str, tuple[float, float]]]:
  """setting -> attack -> (mean, std over games) of ``metric`` (of the rows' attacks, or of
  their ``group``).

  >>> rows = [{"setting": "s", "groups": {}, "attacks": {"domias": {"auc": a}}} for a in (.5, .75)]
  >>> summarise(rows)
  {'s': {'domias': (0.625, 0.125)}}
  """
  _validate.check_choice("metric", metric, METRICS)
  table: dict[str, dict[str, list[float]]] = {}
  for row in rows:
    attacks = row["groups"].get(group, {}) if group else row["attacks"]
    for attack, metrics in attacks.items():
      table.setdefault(row["setting"], {}).setdefault(attack, []).append(metrics[metric])
  return {s: {a: (float(np.mean(v)), float(np.std(v))) for a, v in by.items()}
          for s, by in table.items()}


def _fmt(value: float) -> str:
  return "inf" if value == math.inf else ("nan" if math.isnan(value) else f"{value:.3f}")


def tables(studies: dict[str, list[dict]]) -> str:
  """The printed summary of :func:`run`'s studies: a table per study (AUC mean ± std over games
  per setting and attack; Fig. 6's quality; the epsilon table)."""
  for study in studies:
    _validate.check_choice("studies", study, STUDIES)
  lines = []
  for study, rows in studies.items():
    if study == "epsilon":
      lines += ["", "epsilon: generator, claimed eps, audited eps (one-run lower bound, any "
                "DP algorithm; max / mean over games), f-DP eps (one-run lower bound of the "
                "same guesses if the curve is Gaussian (mu-GDP); max / mean), per-record eps "
                "(mean), DOMIAS AUC (mean)"]
      by: dict[str, list[dict]] = {}
      for row in rows:
        by.setdefault(row["setting"], []).append(row)
      for setting, cells in by.items():
        one_run = [c["attacks"]["domias"]["epsilon_one_run"] for c in cells]
        fdp = [c["attacks"]["domias"].get("epsilon_one_run_fdp", math.nan) for c in cells]
        per_record = [c["attacks"]["domias"]["epsilon_per_record"] for c in cells]
        auc = [c["attacks"]["domias"]["auc"] for c in cells]
        lines.append(f"  {setting:<22} {_fmt(cells[0]['claimed_epsilon']):>7}  "
                     f"{max(one_run):.3f} / {np.mean(one_run):.3f}  "
                     f"{_fmt(float(np.max(fdp)))} / {_fmt(float(np.mean(fdp)))}  "
                     f"{np.mean(per_record):.3f}  {np.mean(auc):.3f}")
      continue
    if study == "generators":
      lines += ["", "generators: setting, Wasserstein distance to hold-out (mean), DOMIAS AUC"]
      auc = summarise(rows)
      quality: dict[str, list[float]] = {}
      for row in rows:
        quality.setdefault(row["setting"], []).append(row["quality"])
      for setting, by_attack in auc.items():
        mean, std = by_attack["domias"]
        lines.append(f"  {setting:<24} {np.mean(quality[setting]):7.3f}   {mean:.3f} ± {std:.3f}")
      continue
    groups = (None,) if study != "minority" else ("minority", "rest")
    for group in groups:
      summary = summarise(rows, group=group)
      attacks = sorted({a for by in summary.values() for a in by})
      title = f"{study}" + (f" ({group})" if group else "") + ": AUC mean ± std over games"
      width = max([24] + [len(setting) for setting in summary])
      lines += ["", title, "  setting".ljust(width + 2) + "".join(f"{a:>18}" for a in attacks)]
      for setting, by in summary.items():
        lines.append(f"  {setting:<{width}}" + "".join(
            f"{by[a][0]:>11.3f} ± {by[a][1]:.3f}" if a in by else " " * 18 for a in attacks))
  return "\n".join(lines).lstrip("\n")
