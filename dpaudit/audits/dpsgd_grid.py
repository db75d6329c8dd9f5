r"""A grid of DP-SGD audits on one offline real data set, resumable cell by cell.

:func:`run` plays the games of :mod:`dpaudit.audits.dpsgd` over a grid: every audit of
``DPSGDGridConfig.audits`` (``(game, canary)`` pairs) x every target epsilon of ``epsilons`` x
every ``num_canaries`` (the m of the O(1) games; ``many_run`` uses the first) x every
``tag_weights`` (the :math:`\lambda` of Eq. (12) of Liu & Xiong, UniAud; ``uniaud_plus``
only, the other games use the first). Each cell reports the epsilon lower bound at
confidence 1 - ``significance``, the ceiling :math:`\epsilon_O` its number of observations
allows, the accountant's epsilon and the test accuracy: the rows of Table IV / Fig. 3 of
UniAud, and with :func:`dpaudit.plots.dpsgd_grid` the utility/auditing trade-off of its Fig. 9.

:func:`run` ``(key, config, *, progress=None, store=None)`` follows the game contract of
:mod:`dpaudit.audits`. Every cell plays the same key (common random numbers across cells);
``python -m experiments.dpsgd_audit`` passes :func:`seed_key`, i.e.
``dpaudit.prng.make_key(seed, prng_impl)``, as every cell used when the seed lived inside the
grid. With ``repetitions`` = N > 1 the whole grid is played N times, repetition i exactly as a
single run at ``seed + i`` (its data split and, given the seed's key, every game's key:
:func:`repetition_key`), and every grid point is summarised by :func:`dpaudit.results.spread`
over the repetitions (:func:`summarise`): a single run's eps_L is fragile (reruns of the UniAud
table differed by up to 0.13).

A cell is stored in a :class:`dpaudit.results.CellStore` as soon as it finishes, so an
interrupted grid loses only the cell in progress and a rerun reuses the finished ones; its key
holds the seed but not ``repetitions``, so repetition i reuses the cells of an earlier run at
``seed + i`` and vice versa. Played with the seed's key, a cell keeps the name it always had
(result directories of earlier runs resume); another key adds its data to the name. A cell the data
cannot support (e.g. more real canaries than the held-out pool holds) is recorded as ``skipped``
with the reason instead of stopping the grid.

Data (:func:`prepare_data`): the data set is split (stratified, ``seed``) into a test set
(``test_fraction``) and the rest, which is split (``seed + 1``) into the training set D and a
pool of held-out real examples (``pool_fraction``) for in-distribution, mislabelled and
poisoned canaries (the poisoned ones also warm the initialisation up on the pool's other rows:
UniAud's "Poisoned" baseline, Sec. VIII-A); features are standardised with D's statistics.

``python -m experiments.dpsgd_audit`` is the command-line entry point.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

import jax
import numpy as np

from dpaudit import _validate, prng, results
from dpaudit import data as data_lib
from dpaudit.accounting.dpsgd import quiet_accountant
from dpaudit.audits import dpsgd as audit

# Settings of DPSGDAuditConfig that every cell of a grid shares (the others are grid axes), in
# the order of an audit's record.
_SETTINGS = {f.name for f in dataclasses.fields(audit.AuditSettings)}
SHARED_FIELDS = tuple(name for name in audit.RECORD_ORDER if name in _SETTINGS)
# Settings of the data split that every cell's result depends on.
DATA_FIELDS = ("dataset", "test_fraction", "pool_fraction", "seed", "prng_impl")
_FLOAT_FIELDS = ("delta", "significance", "epochs", "learning_rate", "l2_clip_norm", "sigma0",
                 "test_fraction", "pool_fraction", "warmup_epochs")


@dataclasses.dataclass(frozen=True)
class DPSGDGridConfig(audit.AuditSettings, epochs=30.0, learning_rate=0.5):
  """A grid of DP-SGD audits (``python -m experiments.dpsgd_audit --help`` explains each
  setting; the field names are the flag names, the defaults the flags' defaults).

  Attributes:
    audits: ``(game, canary)`` pairs, each valid for
      :class:`dpaudit.audits.dpsgd.DPSGDAuditConfig`.
    epsilons: target epsilons, > 0 (``inf``: no noise, clipping kept).
    num_canaries: m of the O(1) games, integers >= 1.
    tag_weights: UniAud++ :math:`\\lambda` of Eq. (12), >= 0.
    dataset: one of :data:`dpaudit.data.DATASETS`.
    num_runs ... warmup_epochs (``SHARED_FIELDS``, from
      :class:`dpaudit.audits.dpsgd.AuditSettings`): as in
      :class:`dpaudit.audits.dpsgd.DPSGDAuditConfig`, shared by every cell (the grid's own
      defaults: ``num_runs=200``, ``epochs=30``, ``learning_rate=0.5``).
    test_fraction, pool_fraction: shares in (0, 1) of the test set and of the canary pool.
    seed: integer in [0, 2^63): the data split and every game's key (of the first
      repetition).
    repetitions: N >= 1 plays of the grid, repetition i at ``seed + i`` (``seed + N`` must
      not exceed 2^63); not part of a cell's key.
    prng_impl: one of :data:`dpaudit.prng.PRNG_IMPLS`.
    data_dir: tfds data directory (None: ``$DPAUDIT_DATA_DIR`` or the default); where the data
      is read from, not what it is, so it is not part of :meth:`to_dict` or of a cell's key.
  """
  audits: tuple[tuple[str, str], ...] = (("one_run", "mislabelled"),)
  epsilons: tuple[float, ...] = (8.0,)
  num_canaries: tuple[int, ...] = (500,)
  tag_weights: tuple[float, ...] = (1.0,)
  dataset: str = "digits"
  num_runs: int = 200
  test_fraction: float = 0.2
  pool_fraction: float = 0.5
  seed: int = 0
  prng_impl: str = "threefry2x32"
  data_dir: str | None = None
  repetitions: int = 1

  def __post_init__(self):
    set_ = functools.partial(object.__setattr__, self)  # the dataclass is frozen
    set_("audits", _pairs(self.audits))
    set_("epsilons", _sequence("epsilons", self.epsilons, float))
    set_("num_canaries", _sequence("num_canaries", self.num_canaries, int))
    set_("tag_weights", _sequence("tag_weights", self.tag_weights, float))
    # The grid's axes by their own names (each cell's config would name its scalar field).
    _validate.check_range("epsilons", self.epsilons, 0.0, low_open=True)
    _validate.check_range("tag_weights", self.tag_weights, 0.0, math.inf, high_open=True)
    set_("hidden_sizes", _sequence("hidden_sizes", self.hidden_sizes, int, allow_empty=True))
    for name in _FLOAT_FIELDS:  # 2 and 2.0 give one cell key (JSON writes them differently)
      value = getattr(self, name)
      if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        set_(name, float(value))
    _validate.check_choice("dataset", self.dataset, data_lib.DATASETS)
    if (isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer))
        or not 0 <= self.seed < 2**63):
      raise ValueError(f"seed={self.seed!r} is outside the valid range [0, 2^63)")
    _validate.check_integer("repetitions", self.repetitions, 1)
    if self.seed + self.repetitions > 2**63:
      raise ValueError(f"seed={self.seed} with repetitions={self.repetitions} is outside the "
                       "valid range: the seeds seed, ..., seed + repetitions - 1 must lie in "
                       "[0, 2^63)")
    _validate.check_choice("prng_impl", self.prng_impl, prng.PRNG_IMPLS)
    super().__post_init__()  # epochs, batch_size, learning_rate, l2_clip_norm, delta
    self.cell_configs()  # validates every cell's settings
    _validate.check_range("test_fraction", self.test_fraction, 0.0, 1.0, low_open=True,
                          high_open=True)
    _validate.check_range("pool_fraction", self.pool_fraction, 0.0, 1.0, low_open=True,
                          high_open=True)

  def shared_settings(self) -> dict[str, Any]:
    """The cell settings the whole grid shares (``SHARED_FIELDS``; the
    :data:`~dpaudit.audits.dpsgd.LATER_OPTIONS` only where not at their defaults)."""
    return audit.settings_record(self, SHARED_FIELDS)

  def data_settings(self) -> dict[str, Any]:
    """The data and key settings every cell's result depends on (``DATA_FIELDS``)."""
    return {name: getattr(self, name) for name in DATA_FIELDS}

  def cell_configs(self) -> tuple[audit.DPSGDAuditConfig, ...]:
    """The grid, one config per cell, in the order :func:`run` plays them: audits, then
    epsilons, then m (O(1) games only), then :math:`\\lambda` (``uniaud_plus`` only)."""
    configs = []
    for game, canary in self.audits:
      ms = self.num_canaries[:1] if game == "many_run" else self.num_canaries
      weights = self.tag_weights if game == "uniaud_plus" else self.tag_weights[:1]
      for epsilon in self.epsilons:
        for m in ms:
          for weight in weights:
            configs.append(audit.DPSGDAuditConfig(
                game=game, canary=canary, epsilon=epsilon, num_canaries=m, tag_weight=weight,
                **self.shared_settings()))
    return tuple(configs)

  def cell_key(self, config: audit.DPSGDAuditConfig) -> dict[str, Any]:
    """Everything the result of cell ``config`` depends on: its name in the cell store (the
    seed included, ``repetitions`` not: see :meth:`repetition`)."""
    return {**config.to_dict(), **self.data_settings()}

  def seeds(self) -> tuple[int, ...]:
    """The seeds of the repetitions: ``seed, seed + 1, ..., seed + repetitions - 1``."""
    return tuple(self.seed + i for i in range(self.repetitions))

  def repetition(self, index: int) -> DPSGDGridConfig:
    """Repetition ``index`` (0-based): this grid as a single run at ``seed + index``, whose
    cells (and cell keys) are exactly those of that run."""
    if (isinstance(index, bool) or not isinstance(index, (int, np.integer))
        or not 0 <= index < self.repetitions):
      raise ValueError(f"index={index!r} is outside the valid range [0, {self.repetitions})")
    return dataclasses.replace(self, seed=self.seed + index, repetitions=1)

  def to_dict(self) -> dict[str, Any]:
    """The run configuration ``results.json`` records: the shared and the data settings (the
    grid axes are in each cell's ``config``) and ``repetitions``."""
    return {**self.shared_settings(), **self.data_settings(), "repetitions": self.repetitions}

  def fields(self) -> dict[str, Any]:
    """Every field but ``data_dir`` (where the data is read from, not what it is) as plain
    values, axes included: what :meth:`from_fields` rebuilds the grid from."""
    return results.to_plain({f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                             if f.name != "data_dir"})

  @classmethod
  def from_fields(cls, fields: Mapping[str, Any]) -> DPSGDGridConfig:
    """The grid of :meth:`fields` (``data_dir`` None); ValueError for invalid settings,
    TypeError for a field the grid does not have."""
    if not isinstance(fields, Mapping):
      raise TypeError(f"the grid's fields must be a dict, got {type(fields).__name__}")
    return cls(**fields)


def _pairs(audits: Any) -> tuple[tuple[str, str], ...]:
  if isinstance(audits, (str, bytes)) or not isinstance(audits, Iterable):
    raise ValueError(f"audits={audits!r} must be a sequence of (game, canary) pairs")
  pairs = tuple(audits)
  _validate.check_nonempty("audits", pairs)
  for pair in pairs:
    if (isinstance(pair, (str, bytes)) or not isinstance(pair, Iterable) or len(tuple(pair)) != 2
        or not all(isinstance(p, str) for p in pair)):
      raise ValueError(f"audits entry {pair!r} must be a (game, canary) pair of strings, e.g. "
                       "('uniaud', 'gaussian')")
  return tuple((game, canary) for game, canary in pairs)


def _sequence(name: str, values: Any, kind: type, allow_empty: bool = False) -> tuple:
  """``values`` as a tuple of ``kind`` (int: integers only; float: any real number)."""
  accepted = (int, np.integer) if kind is int else (int, float, np.integer, np.floating)
  if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
    raise ValueError(f"{name}={values!r} must be a sequence of "
                     f"{'integers' if kind is int else 'numbers'}")
  values = tuple(values)
  for value in values:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, accepted):
      raise ValueError(f"{name}={list(values)!r} must hold only "
                       f"{'integers' if kind is int else 'numbers'}; got {value!r}")
  if not allow_empty:
    _validate.check_nonempty(name, values)
  return tuple(kind(v) for v in values)


@dataclasses.dataclass(frozen=True)
class DPSGDGridResult:
  """Result of :func:`run`.

  Attributes:
    config: the grid.
    cells: one dict per cell and repetition, in grid order within each repetition and
      repetition after repetition: ``status`` (``"done"`` or ``"skipped"``), ``config`` (the
      cell's :class:`~dpaudit.audits.dpsgd.DPSGDAuditConfig` as a dict), ``result``
      (:meth:`~dpaudit.audits.dpsgd.DPSGDAuditResult.to_dict`) or ``reason``, ``reused`` (read
      from the cell store rather than computed), ``repetition`` (0-based) and its ``seed``.
    num_train, num_pool, num_test: sizes of D, of the canary pool and of the test set (the
      same at every seed: the splits are stratified).
    example_shape: shape of one example's features.
  """
  config: DPSGDGridConfig
  cells: tuple[dict, ...]
  num_train: int
  num_pool: int
  num_test: int
  example_shape: tuple[int, ...]

  def table(self) -> str:
    """The summary table, one row per grid point (:func:`table`)."""
    return table(self.cells)

  def summary(self) -> list[dict[str, Any]]:
    """One dict per grid point: its spread over the repetitions (:func:`summarise`)."""
    return summarise(self.cells)

  def to_dict(self) -> dict[str, Any]:
    """``{"config": {...}, "cells": [...], "summary": [...], "data": {...}}`` in plain Python
    values (infinite floats kept; :func:`dpaudit.results.write_json` encodes them).
    ``config`` is the whole grid (:meth:`DPSGDGridConfig.fields`, axes included), which
    :meth:`from_dict` rebuilds; ``python -m experiments.dpsgd_audit`` writes its run record
    (:meth:`DPSGDGridConfig.to_dict`) under ``config`` in ``results.json`` instead."""
    return {"config": self.config.fields(), "cells": [dict(cell) for cell in self.cells],
            "summary": self.summary(),
            "data": {"num_train": self.num_train, "num_pool": self.num_pool,
                     "num_test": self.num_test, "example_shape": list(self.example_shape)}}

  @classmethod
  def from_dict(cls, stored: Any) -> DPSGDGridResult:
    """The result whose :meth:`to_dict` (after a strict-JSON round trip) is ``stored``.

    Checks that it is whole: the grid's settings valid (:class:`DPSGDGridConfig`), every cell
    a whole cell of one of the grid's configurations (:func:`dpaudit.audits.dpsgd.
    check_grid_cell`) with its ``reused``, ``repetition`` and ``seed``, as many cells as the
    grid has in all its repetitions, and the stored summary that of the cells. Raises
    KeyError, TypeError or ValueError."""
    results.check_fields("DPSGDGridResult", stored, {"config": dict, "cells": list,
                                                     "summary": list, "data": dict})
    sizes = results.check_fields("DPSGDGridResult data", stored["data"], {
        "num_train": int, "num_pool": int, "num_test": int, "example_shape": list})
    config = DPSGDGridConfig.from_fields(stored["config"])
    every = config.cell_configs()
    configs = {results.canonical_json(c.to_dict()): c for c in every}
    if len(stored["cells"]) != len(every) * config.repetitions:
      raise ValueError(f"DPSGDGridResult holds {len(stored['cells'])} cells, not the "
                       f"{len(every) * config.repetitions} of its grid")
    cells = []
    for cell in stored["cells"]:
      results.check_fields("grid cell", cell, {"config": dict, "reused": bool,
                                               "repetition": int, "seed": int})
      cell_config = configs.get(results.canonical_json(cell["config"]))
      if cell_config is None:
        raise ValueError("a grid cell's configuration is not one of its grid's")
      audit.check_grid_cell(cell, cell_config)
      cells.append(dict(cell))
    if results.canonical_json(summarise(cells)) != results.canonical_json(stored["summary"]):
      raise ValueError("the stored summary is not that of the stored cells")
    shape = sizes["example_shape"]
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
      raise TypeError(f"example_shape={shape!r} must be a list of integers")
    return cls(config, tuple(cells), sizes["num_train"], sizes["num_pool"], sizes["num_test"],
               tuple(shape))


# ------------------------------------------------------------------------------------ running

def prepare_data(dataset: str, test_fraction: float, pool_fraction: float, seed: int,
                 data_dir: str | None = None) -> audit.AuditData:
  """The test set, the training set D and the canary pool, standardised with D's statistics.

  Local data sets are split into test (``test_fraction``, stratified, ``seed``) and the rest;
  catalog ones use their own test split. The rest is split by ``pool_fraction`` (stratified,
  ``seed + 1``) into D and the pool. Raises ValueError for a dataset not in
  :data:`dpaudit.data.DATASETS`, fractions outside (0, 1) or a seed that is not an integer
  >= 0.
  """
  _validate.check_choice("dataset", dataset, data_lib.DATASETS)
  _validate.check_range("test_fraction", test_fraction, 0.0, 1.0, low_open=True, high_open=True)
  _validate.check_range("pool_fraction", pool_fraction, 0.0, 1.0, low_open=True,
                        high_open=True)
  _validate.check_integer("seed", seed, 0)
  if data_dir is not None and not isinstance(data_dir, (str, os.PathLike)):
    raise ValueError(f"data_dir must be a directory path (str) or None, got "
                     f"{type(data_dir).__name__}")
  if dataset in data_lib.LOCAL_DATASETS:
    rest, test = data_lib.train_test_split(data_lib.load(dataset, "train", data_dir),
                                           test_fraction, seed, stratify=True)
  else:
    rest = data_lib.load(dataset, "train", data_dir)
    test = data_lib.load(dataset, "test", data_dir)
  train, pool = data_lib.train_test_split(rest, pool_fraction, seed + 1, stratify=True)
  statistics = data_lib.fit_standardization(train)
  train, pool, test = (statistics.apply(s) for s in (train, pool, test))
  return audit.AuditData(train.features, train.labels, test.features, test.labels,
                         pool.features, pool.labels, train.num_classes)


def cell_label(config: audit.DPSGDAuditConfig) -> str:
  """The readable prefix of a cell's file name, e.g. ``uniaud_gaussian_eps4_m500``."""
  return f"{config.game}_{config.canary}_eps{config.epsilon:g}_m{config.num_canaries}"


def seed_key(grid: DPSGDGridConfig) -> jax.Array:
  """The key of ``grid``'s seed, ``dpaudit.prng.make_key(grid.seed, grid.prng_impl)``: the
  key :func:`run` is given by ``python -m experiments.dpsgd_audit`` (from ``--seed``), with
  which every cell keeps the name it had when the seed lived inside the grid."""
  _validate.check_instance("grid", grid, DPSGDGridConfig)
  return prng.make_key(grid.seed, grid.prng_impl)


def _same_key(a: jax.Array, b: jax.Array) -> bool:
  """Same key data and (for typed keys) the same PRNG implementation."""
  typed = [jax.dtypes.issubdtype(k.dtype, jax.dtypes.prng_key) for k in (a, b)]
  if typed[0] != typed[1] or (all(typed) and str(jax.random.key_impl(a))
                              != str(jax.random.key_impl(b))):
    return False
  return results.key_data(a) == results.key_data(b)


def repetition_key(key: jax.Array, grid: DPSGDGridConfig, index: int) -> jax.Array:
  """The games' key in repetition ``index`` of ``grid`` played with ``key``: given the key of
  the grid's seed (:func:`seed_key`), the key of seed ``seed + index`` (so that repetition i
  is the single run at ``seed + i``, cell for cell); any other key is repetition 0's own, and
  repetition i > 0 plays ``jax.random.fold_in(key, i)``."""
  _validate.check_key(key)
  single = grid.repetition(index)
  if _same_key(key, seed_key(grid)):
    return seed_key(single)
  return key if index == 0 else jax.random.fold_in(key, index)


def run_cell(config: audit.DPSGDAuditConfig, grid: DPSGDGridConfig, data: audit.AuditData,
             store: results.CellStore | None = None, *,
             key: jax.Array | None = None) -> dict[str, Any]:
  """Plays one cell of ``grid`` (reused from ``store`` when it finished before) and returns
  its dict (see :attr:`DPSGDGridResult.cells`); a finished cell, or why it was skipped, is
  stored as soon as it ends.

  ``key`` is the games' key (default: :func:`seed_key` of ``grid``). The cell's name in the
  store is :meth:`DPSGDGridConfig.cell_key` (settings, data settings and seed) when ``key`` is
  the seed's, as it always was; any other key adds its data (``"key"``) and implementation
  (``"key_impl"``) to it."""
  if not isinstance(config, audit.DPSGDAuditConfig):
    raise ValueError(f"config must be a DPSGDAuditConfig (one of grid.cell_configs()), got "
                     f"{type(config).__name__}")
  if not isinstance(grid, DPSGDGridConfig):
    raise ValueError(f"grid must be a DPSGDGridConfig, got {type(grid).__name__}")
  if not isinstance(data, audit.AuditData):
    raise ValueError(f"data must be an AuditData (prepare_data), got {type(data).__name__}")
  if store is not None and not isinstance(store, results.CellStore):
    raise ValueError(f"store must be a dpaudit.results.CellStore or None, got "
                     f"{type(store).__name__}")
  seeded = seed_key(grid)
  key = seeded if key is None else key
  _validate.check_key(key)

  def compute():
    try:
      with quiet_accountant():
        result = audit.run(key, config, data=data).to_dict()
      return {"status": "done", "config": config.to_dict(), "result": result}
    except ValueError as e:  # e.g. more canaries than the real pool holds: skip this cell only
      return {"status": "skipped", "reason": str(e), "config": config.to_dict()}

  if store is None:
    return {**results.loads(results.dumps(compute())), "reused": False}
  name = grid.cell_key(config)
  if not _same_key(key, seeded):
    name = {**name, "key": results.key_data(key),
            "key_impl": str(jax.random.key_impl(key)) if jax.dtypes.issubdtype(
                key.dtype, jax.dtypes.prng_key) else "raw"}
  cell, reused = store.get_or_compute(name, compute, cell_label(config),
                                      functools.partial(audit.check_grid_cell, config=config))
  return {**cell, "reused": reused}


def run(key: jax.Array, config: DPSGDGridConfig, *, progress: results.Progress | None = None,
        store: results.CellStore | None = None) -> DPSGDGridResult:
  """Plays every cell of ``config``, in every repetition, and collects them.

  Repetition i is :meth:`DPSGDGridConfig.repetition` ``(i)``: the grid at ``seed + i``, its
  data split prepared once (from that seed), its games played with
  :func:`repetition_key` ``(key, config, i)``.

  Args:
    key: the games' key. ``python -m experiments.dpsgd_audit`` passes :func:`seed_key`
      (``dpaudit.prng.make_key(seed, prng_impl)`` of ``--seed``): then repetition i plays the
      key of ``seed + i`` and its cells keep the names in the store they had when the seed
      drove the keys from inside the grid, so the result directories of earlier runs resume.
    config: the grid.
    progress: a :class:`dpaudit.results.Progress`, told of each finished (or reused, or
      skipped) cell: ``done`` of ``len(cell_configs()) * repetitions`` cells, the message
      :func:`cell_message` (and, on lines of their own, the cell's warnings).
    store: a :class:`dpaudit.results.CellStore` that keeps finished cells and reuses them
      (``CellStore(directory, resume=False)`` recomputes and overwrites them); None: nothing
      is stored or reused.

  >>> grid = Config(audits=(("one_run", "gaussian"),), epsilons=(math.inf,),
  ...               num_canaries=(16,), epochs=0.5, batch_size=32, hidden_sizes=(4,))
  >>> result = run(seed_key(grid), grid)
  >>> [cell["status"] for cell in result.cells], result.example_shape
  (['done'], (8, 8, 1))
  """
  if not isinstance(config, DPSGDGridConfig):
    raise ValueError(f"config must be a DPSGDGridConfig, got {type(config).__name__}")
  _validate.check_key(key)
  if store is not None and not isinstance(store, results.CellStore):
    raise ValueError(f"store must be a dpaudit.results.CellStore or None, got "
                     f"{type(store).__name__}")
  configs = config.cell_configs()
  total = len(configs) * config.repetitions
  cells, sizes = [], None
  for index in range(config.repetitions):
    single = config.repetition(index)
    data = prepare_data(single.dataset, single.test_fraction, single.pool_fraction, single.seed,
                        single.data_dir)
    if sizes is None:
      sizes = (int(data.train_features.shape[0]), int(data.pool_features.shape[0]),
               int(data.test_features.shape[0]),
               tuple(int(d) for d in data.train_features.shape[1:]))
    games_key = repetition_key(key, config, index)
    for cell_config in configs:
      cell = {**run_cell(cell_config, single, data, store, key=games_key), "repetition": index,
              "seed": single.seed}
      cells.append(cell)
      message = cell_message(cell_config, cell, (index, config.repetitions, single.seed))
      warned = "".join(f"\n  warning: {line}"
                       for line in (cell.get("result") or {}).get("warnings", []))
      results.report(progress, len(cells), total, message + warned)
  return DPSGDGridResult(config, tuple(cells), *sizes)


# --------------------------------------------------------------------------------- reporting

def reported_epsilon(result: Mapping[str, Any]) -> float | None:
  """A cell result's bound: ``epsilon_lower_bound``, or under ``correction="none"`` the
  ``epsilon_optimistic`` figure (not a valid lower bound)."""
  return result.get("epsilon_lower_bound", result.get("epsilon_optimistic"))


def _num(value, width: int = 6, digits: int = 2) -> str:
  """Formats a result number (infinite ones as inf, missing ones as -)."""
  return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}s}"


# Result numbers summarised per grid point besides the reported epsilon (the table's columns).
SPREAD_FIELDS = ("epsilon_ceiling", "epsilon_theory", "test_accuracy", "noise_multiplier",
                 "num_steps")
# The f-DP one-run bounds of the O(1) games, beside the reported (Steinke) one: summarised where
# a grid point's results hold them (not many_run, nor results stored before they existed).
FDP_FIELDS = ("epsilon_fdp_gaussian", "epsilon_fdp_run")
# What each bound of the table assumes (its footer).
BOUND_LABELS = (
    ("eps_L", "one-run (Steinke et al.) or many-run bound: any (eps, delta)-DP algorithm"),
    ("fdp_gauss", "f-DP one-run bound: if the trade-off curve is Gaussian (mu-GDP)"),
    ("fdp_run", "f-DP one-run bound: if the curve is this DP-SGD run's with some noise "
                "multiplier"))


def fdp_epsilon(result: Mapping[str, Any], name: str) -> float | None:
  """The f-DP bound ``name`` (one of ``FDP_FIELDS``) of a cell result, None where it has none
  (``many_run``, the run family's estimator unavailable, or a result stored before)."""
  value = result.get(name)
  return None if value is None or math.isnan(value) else value


def _legend(optimistic: bool) -> list[str]:
  """The table's footer: what each bound assumes, and (``optimistic``) that they are not."""
  star = ["(*: correction=none, optimistic: the best of several tests, not a valid lower bound)"]
  return [f"{name}: {what}" for name, what in BOUND_LABELS] + (star if optimistic else [])


def summarise(cells: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
  """One dict per grid point (cells with the same ``config``), in the order the points first
  appear: ``config``, ``repetitions`` (its cells), ``seeds``, ``status`` (``"done"`` when any
  repetition finished, else ``"skipped"`` with the first ``reason``), ``skipped`` (the
  ``{"seed", "reason"}`` of skipped repetitions) and, when done, ``optimistic`` and ``spread``:
  a :func:`dpaudit.results.spread` over the finished repetitions of the reported epsilon (under
  its result key, ``epsilon_lower_bound`` or ``epsilon_optimistic``, so that
  :func:`reported_epsilon` reads it), of every field of ``SPREAD_FIELDS`` and of each f-DP
  bound of ``FDP_FIELDS`` that some repetition has (:func:`fdp_epsilon`)."""
  groups: dict[str, list[Mapping[str, Any]]] = {}
  for cell in cells:
    groups.setdefault(results.dumps(cell["config"], indent=None), []).append(cell)
  points = []
  for members in groups.values():
    done = [c["result"] for c in members if c["status"] == "done"]
    skipped = [c for c in members if c["status"] != "done"]
    point: dict[str, Any] = {
        "config": dict(members[0]["config"]), "repetitions": len(members),
        "seeds": [c.get("seed") for c in members], "status": "done" if done else "skipped",
        "skipped": [{"seed": c.get("seed"), "reason": c.get("reason")} for c in skipped]}
    if not done:
      point["reason"] = skipped[0].get("reason")
      points.append(point)
      continue
    optimistic = any(r.get("optimistic") for r in done)
    eps_key = "epsilon_optimistic" if optimistic else "epsilon_lower_bound"
    bounds = [reported_epsilon(r) for r in done]
    point["optimistic"] = optimistic
    with np.errstate(invalid="ignore"):  # numpy's quantile of all-inf values (eps=inf) warns
      point["spread"] = {
          eps_key: results.spread([math.nan if b is None else b for b in bounds]),
          **{name: results.spread([r.get(name, math.nan) for r in done])
             for name in SPREAD_FIELDS},
          **{name: results.spread([r.get(name, math.nan) for r in done])
             for name in FDP_FIELDS if any(fdp_epsilon(r, name) is not None for r in done)}}
    points.append(point)
  return points


def cell_message(config: audit.DPSGDAuditConfig, cell: Mapping[str, Any],
                 repetition: tuple[int, int, int] | None = None) -> str:
  """``game:canary eps=.. m=.. status summary`` for a finished cell; an optimistic bound is
  starred. ``repetition`` = ``(index, repetitions, seed)`` puts ``rep i/N (seed s)`` first
  when there are several. The message :func:`run` gives its progress."""
  status = "reused" if cell["reused"] else cell["status"]
  summary = ""
  if cell["status"] == "done":
    r = cell["result"]
    star = "*" if r.get("optimistic") else ""
    fdp = "".join(f"{label}{star}={_num(fdp_epsilon(r, name), 0, 3)} " for label, name in (
        ("fdp_gauss", "epsilon_fdp_gaussian"), ("fdp_run", "epsilon_fdp_run"))
        if fdp_epsilon(r, name) is not None)
    summary = (f"eps_L{star}={_num(reported_epsilon(r), 0, 3)} {fdp}"
               f"eps_O={_num(r['epsilon_ceiling'], 0, 3)} "
               f"eps={_num(r['epsilon_theory'], 0, 3)} "
               f"acc={_num(r['test_accuracy'], 0, 3)} ({r['wall_time_s']:.1f} s)")
  rep = ""
  if repetition is not None and repetition[1] > 1:
    rep = f"rep {repetition[0] + 1}/{repetition[1]} (seed {repetition[2]}) "
  return (f"{rep}{config.game}:{config.canary} eps={config.epsilon:g} "
          f"m={config.num_canaries} {status} {summary}")


def progress_line(index: int, total: int, config: audit.DPSGDAuditConfig,
                  cell: Mapping[str, Any],
                  repetition: tuple[int, int, int] | None = None) -> str:
  """``[i/n] `` and :func:`cell_message` for cell ``index`` (0-based) of ``total``: the line
  :func:`dpaudit.results.print_progress` shows."""
  return f"[{index + 1}/{total}] {cell_message(config, cell, repetition)}"


def _head(c: Mapping[str, Any]) -> str:
  return (f"{c['game'] + ':' + c['canary']:28s} {c['epsilon']:5g} {c['num_canaries']:6d} "
          f"{c['tag_weight']:6g}")


def table(cells: Iterable[Mapping[str, Any]]) -> str:
  """The summary table of ``cells`` (dicts as in :attr:`DPSGDGridResult.cells`): audit,
  target epsilon, m, lambda, eps_L, the f-DP one-run bounds fdp_gauss and fdp_run (``-``
  where a cell has none), eps_O, the accountant's epsilon, test accuracy, noise multiplier and
  steps; a skipped cell shows its reason. A footer says what each bound assumes
  (``BOUND_LABELS``) and, under ``correction="none"``, that they are optimistic.

  When a grid point has several repetitions, one row per point: the bounds and test accuracy
  as ``median [min, max]`` (:func:`dpaudit.results.format_spread`), the other columns as medians,
  under a line saying how many repetitions (seeds) there are."""
  cells = list(cells)
  points = summarise(cells)
  if all(p["repetitions"] == 1 for p in points):
    return _single_table(cells)
  seeds = sorted({c["seed"] for c in cells if c.get("seed") is not None})
  lines = [f"{max(p['repetitions'] for p in points)} repetitions"
           + (f" (seeds {', '.join(map(str, seeds))})" if seeds else "")
           + ": eps_L, fdp_gauss, fdp_run and test_acc are median [min, max] over them, the "
           "other columns medians",
           f"{'audit':28s} {'eps':>5s} {'m':>6s} {'lambda':>6s} {'eps_L':>18s} "
           f"{'fdp_gauss':>18s} {'fdp_run':>18s} {'eps_O':>6s} "
           f"{'eps_theory':>10s} {'test_acc':>21s} {'sigma':>6s} {'steps':>6s}"]
  for point in points:
    head = _head(point["config"])
    if point["status"] != "done":
      lines.append(f"{head}  skipped: {point['reason']}")
      continue
    spread = point["spread"]
    note = (f"  ({len(point['skipped'])} of {point['repetitions']} skipped: "
            f"{point['skipped'][0]['reason']})" if point["skipped"] else "")
    fdp = [results.format_spread(spread[name], 2) if name in spread and not all(
        math.isnan(v) for v in spread[name]["values"]) else "-" for name in FDP_FIELDS]
    lines.append(f"{head} {results.format_spread(reported_epsilon(spread), 2):>18s} "
                 f"{fdp[0]:>18s} {fdp[1]:>18s} "
                 f"{_num(spread['epsilon_ceiling']['median'])} "
                 f"{_num(spread['epsilon_theory']['median'], 10)} "
                 f"{results.format_spread(spread['test_accuracy'], 3):>21s} "
                 f"{_num(spread['noise_multiplier']['median'])} "
                 f"{spread['num_steps']['median']:6.0f}{note}")
  return "\n".join(lines + _legend(any(p.get("optimistic") for p in points)))


def _single_table(cells: list[Mapping[str, Any]]) -> str:
  """:func:`table` of a grid played once: one row per cell."""
  lines = [f"{'audit':28s} {'eps':>5s} {'m':>6s} {'lambda':>6s} {'eps_L':>6s} "
           f"{'fdp_gauss':>9s} {'fdp_run':>7s} {'eps_O':>6s} "
           f"{'eps_theory':>10s} {'test_acc':>8s} {'sigma':>6s} {'steps':>6s}"]
  for cell in cells:
    head = _head(cell["config"])
    if cell["status"] != "done":
      lines.append(f"{head}  skipped: {cell['reason']}")
      continue
    r = cell["result"]
    lines.append(f"{head} {_num(reported_epsilon(r))} "
                 f"{_num(fdp_epsilon(r, 'epsilon_fdp_gaussian'), 9)} "
                 f"{_num(fdp_epsilon(r, 'epsilon_fdp_run'), 7)} {_num(r['epsilon_ceiling'])} "
                 f"{_num(r['epsilon_theory'], 10)} {_num(r['test_accuracy'], 8, 3)} "
                 f"{_num(r['noise_multiplier'])} {r['num_steps']:6d}")
  return "\n".join(lines + _legend(any((c.get("result") or {}).get("optimistic") for c in cells)))


# The game contract (issue 40): every module under dpaudit/audits/ has a Config and a Result.
Config = DPSGDGridConfig
Result = DPSGDGridResult
