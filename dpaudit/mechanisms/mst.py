r"""MST: differentially private synthetic tabular data from a maximum spanning tree of noisy
2-way marginals (McKenna, Miklau & Sheldon, "Winning the NIST Contest: A scalable and general
approach to differentially private synthetic data", 2021, Sec. 4), on private-pgm's JAX
estimator (the ``mbi`` package).

The mechanism, for a budget of :math:`\rho`-zCDP (from (epsilon, delta) by
:func:`zcdp_rho`), split in three equal parts:

1. measure every 1-way marginal with Gaussian noise (:math:`\rho/3` in all);
2. merge the values whose noisy count is below :math:`3\sigma` into one (domain compression,
   free: it reads only the noisy counts);
3. select the edges of a spanning tree over the attributes, one at a time, with the
   exponential mechanism (:math:`\rho/3` in all): a candidate pair scores the L1 distance
   between its true 2-way marginal and the one implied by the 1-way estimate, among the pairs
   that join two components;
4. measure the selected 2-way marginals (:math:`\rho/3`), fit a graphical model to every
   measurement (mirror descent), and sample records from it.

Each marginal has L2 sensitivity 1 under adding or removing a record, and each score has
sensitivity 1. Numeric columns are first cut into bins with fixed, data-independent edges
(:class:`Binning`), and come back as a uniform draw inside their bin.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate


@dataclasses.dataclass(frozen=True)
class Binning:
  """How one column becomes discrete: ``edges`` (increasing, fixed in advance: they must not
  depend on the private data) cut a numeric column into ``len(edges) - 1`` bins, values
  outside going to the end bins; ``edges=None`` keeps a categorical column's
  ``num_categories`` integer codes. ``integer=True`` marks a numeric column of whole numbers
  (its integer edges make bins of whole numbers, and decoding draws a whole number)."""
  name: str
  edges: tuple[float, ...] | None = None
  num_categories: int | None = None
  integer: bool = False

  def __post_init__(self):
    if (self.edges is None) == (self.num_categories is None):
      raise ValueError(f"column {self.name!r}: give exactly one of edges and num_categories")
    if self.edges is not None:
      edges = np.asarray(self.edges, np.float64)
      if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0):
        raise ValueError(f"column {self.name!r}: edges must be at least 2 increasing values, "
                         f"got {self.edges}")
      if self.integer and np.any(edges != np.round(edges)):
        raise ValueError(f"column {self.name!r}: an integer column needs integer edges, got "
                         f"{self.edges}")
    elif self.num_categories < 1:
      raise ValueError(f"column {self.name!r}: num_categories={self.num_categories} must be "
                       ">= 1")

  @property
  def size(self) -> int:
    return len(self.edges) - 1 if self.edges is not None else int(self.num_categories)

  def encode(self, values: np.ndarray) -> np.ndarray:
    values = np.asarray(values)
    if self.edges is None:
      codes = values.astype(np.int64)
      if np.any(codes != values) or codes.min(initial=0) < 0 or codes.max(
          initial=0) >= self.size:
        raise ValueError(f"column {self.name!r} holds values outside its {self.size} "
                         "category codes")
      return codes
    inner = np.asarray(self.edges[1:-1], np.float64)
    return np.searchsorted(inner, values, side="right").astype(np.int64)

  def decode(self, codes: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Codes back to values: the category, or a uniform draw inside the bin."""
    codes = np.asarray(codes, np.int64)
    if self.edges is None:
      return codes.astype(np.float64)
    edges = np.asarray(self.edges, np.float64)
    low, width = edges[codes], edges[codes + 1] - edges[codes]
    if self.integer:  # whole numbers low .. high - 1, uniformly
      return low + np.minimum(np.floor(uniforms * width), width - 1)
    return low + uniforms * width


def zcdp_rho(epsilon: float, delta: float) -> float:
  r"""The largest :math:`\rho` with :math:`\rho`-zCDP implying (epsilon, delta)-DP by
  Bun & Steinke (2016), Prop. 1.3: :math:`\epsilon = \rho + 2\sqrt{\rho\log(1/\delta)}`."""
  _validate.check_range("epsilon", epsilon, 0.0, None, low_open=True)
  _validate.check_delta(delta)
  log_inv = math.log(1.0 / delta)
  return (math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)) ** 2


@dataclasses.dataclass(frozen=True)
class MstConfig:
  """Privacy budget and fitting effort of :func:`mst`.

  Attributes:
    epsilon, delta: the (epsilon, delta)-DP guarantee of the whole mechanism.
    iters: mirror-descent iterations of the final fit (the reference code: 5,000).
    select_iters: iterations of the 1-way fit that scores the candidate pairs.
  """
  epsilon: float = 1.0
  delta: float = 1e-9
  iters: int = 3000
  select_iters: int = 500

  def __post_init__(self):
    _validate.check_range("epsilon", self.epsilon, 0.0, None, low_open=True)
    _validate.check_delta(self.delta)
    _validate.check_integer("iters", self.iters, 1)
    _validate.check_integer("select_iters", self.select_iters, 1)

  @property
  def rho(self) -> float:
    return zcdp_rho(self.epsilon, self.delta)


@dataclasses.dataclass(frozen=True)
class MstModel:
  """A fitted MST: the graphical model over the compressed domain and what undoes it."""
  model: object  # mbi.MarkovRandomField
  columns: tuple[Binning, ...]
  compression: tuple[np.ndarray | None, ...]  # per column: compressed code of each value
  edges: tuple[tuple[str, str], ...]  # the selected spanning tree
  sigma: float  # noise of each measurement set (before the 1/sqrt(count) weights)


def _names(columns: Sequence[Binning]) -> list[str]:
  return [c.name for c in columns]


def _measure(key, data, cliques, sigma):
  """Noisy marginals of ``cliques``, each with noise sigma * sqrt(len(cliques)) so that the set
  costs 1 / (2 sigma^2) zCDP in all."""
  import mbi  # pylint: disable=g-import-not-at-top
  scale = sigma * math.sqrt(len(cliques))
  out = []
  for i, clique in enumerate(cliques):
    x = np.asarray(data.project(clique).datavector(), np.float64)
    noise = np.asarray(jax.random.normal(jax.random.fold_in(key, i), x.shape, jnp.float64))
    out.append(mbi.LinearMeasurement(x + scale * noise, clique, stddev=scale))
  return out


def _compress(data, measurements, columns):
  """Merges each column's values with noisy count < 3 sigma into one value (MST's domain
  compression); returns the compressed data, measurements and the value maps."""
  import mbi  # pylint: disable=g-import-not-at-top
  maps, new_columns, new_measurements = [], {}, []
  for column, m in zip(columns, measurements):
    y = np.asarray(m.noisy_measurement)
    keep = y >= 3.0 * m.stddev
    codes = data.data[column.name]
    if keep.all() or keep.sum() >= keep.size - 1:
      maps.append(None)
      new_columns[column.name] = (codes, keep.size)
      new_measurements.append(m)
      continue
    mapping = np.where(keep, np.cumsum(keep) - 1, keep.sum())  # merged values -> last code
    maps.append(mapping)
    new_columns[column.name] = (mapping[codes], int(keep.sum()) + 1)
    merged = np.concatenate([y[keep], [y[~keep].sum()]])
    weights = np.concatenate([np.ones(keep.sum()), [1.0 / math.sqrt((~keep).sum())]])
    new_measurements.append(mbi.LinearMeasurement(
        merged * weights, m.clique, stddev=m.stddev,
        query=mbi.WeightedQuery(weights)))
  domain = mbi.Domain(list(new_columns), [size for _, size in new_columns.values()])
  compressed = mbi.Dataset({name: codes for name, (codes, _) in new_columns.items()}, domain)
  return compressed, new_measurements, tuple(maps)


def _select(key, data, rho, measurements, iters):
  """The spanning tree of Sec. 4: r - 1 exponential-mechanism picks, each at
  epsilon = sqrt(8 rho / (r - 1)) (an epsilon-DP exponential mechanism is epsilon^2 / 8-zCDP),
  scores = L1 error of the 1-way model's pair marginal (sensitivity 1)."""
  import mbi  # pylint: disable=g-import-not-at-top
  names = list(data.domain.attributes)
  model = mbi.estimation.MirrorDescent().estimate(data.domain, measurements, iters=iters)
  candidates = list(itertools.combinations(names, 2))
  scores = {}
  for a, b in candidates:
    x = np.asarray(data.project((a, b)).datavector(), np.float64)
    xhat = np.asarray(model.project((a, b)).datavector(), np.float64)
    scores[(a, b)] = float(np.abs(x - xhat).sum())
  component = {name: i for i, name in enumerate(names)}
  r = len(names)
  epsilon = math.sqrt(8.0 * rho / max(r - 1, 1))
  edges = []
  for step in range(r - 1):
    open_ = [e for e in candidates if component[e[0]] != component[e[1]]]
    utility = np.array([scores[e] for e in open_])
    # exponential mechanism, sensitivity 1: Gumbel-max over epsilon * u / 2
    gumbel = np.asarray(jax.random.gumbel(jax.random.fold_in(key, step), utility.shape,
                                          jnp.float64))
    a, b = open_[int(np.argmax(epsilon * utility / 2.0 + gumbel))]
    edges.append((a, b))
    old, new = component[b], component[a]
    component = {n: (new if c == old else c) for n, c in component.items()}
  return edges


def fit_mst(key: jax.Array, values: np.ndarray, columns: Sequence[Binning],
            config: MstConfig) -> MstModel:
  """Runs MST on a table (Sec. 4 of McKenna et al. 2021; see the module docstring).

  Args:
    key: PRNG key of every noise draw and selection.
    values: ``(N, D)`` float array, one column per entry of ``columns`` (numeric values, or
      integer category codes).
    columns: how each column is made discrete; their edges must be public.
    config: :class:`MstConfig`.

  Returns:
    :class:`MstModel`; draw records with :func:`sample_mst`.
  """
  import mbi  # pylint: disable=g-import-not-at-top
  values = np.asarray(values)
  columns = tuple(columns)
  if values.ndim != 2 or values.shape[1] != len(columns):
    raise ValueError(f"values must have shape (N, {len(columns)}), got {values.shape}")
  if len(columns) < 2:
    raise ValueError(f"columns has {len(columns)} entries; MST needs at least 2")
  if len(set(_names(columns))) != len(columns):
    raise ValueError(f"column names must be distinct, got {_names(columns)}")
  _validate.check_range("values", values)
  domain = mbi.Domain(_names(columns), [c.size for c in columns])
  data = mbi.Dataset({c.name: c.encode(values[:, i]) for i, c in enumerate(columns)}, domain)
  rho = config.rho
  sigma = math.sqrt(3.0 / (2.0 * rho))
  key_one, key_select, key_two = jax.random.split(key, 3)
  one_way = _measure(key_one, data, [(c.name,) for c in columns], sigma)
  data, one_way, maps = _compress(data, one_way, columns)
  edges = _select(key_select, data, rho / 3.0, one_way, config.select_iters)
  two_way = _measure(key_two, data, edges, sigma)
  model = mbi.estimation.MirrorDescent().estimate(data.domain, one_way + two_way,
                                                  iters=config.iters)
  return MstModel(model=model, columns=columns, compression=maps, edges=tuple(edges),
                  sigma=sigma)


def sample_mst(key: jax.Array, fitted: MstModel, num_rows: int) -> np.ndarray:
  """``num_rows`` synthetic records ``(num_rows, D)`` float64, in the columns' own terms:
  merged values are spread uniformly over the values they stand for, and numeric bins become
  uniform draws inside the bin."""
  # the module, not the function of the same name that mbi.extensions exports
  synthetic_data = importlib.import_module("mbi.extensions.synthetic_data")
  _validate.check_integer("num_rows", num_rows, 1)
  key_seed, key_undo, key_bins = jax.random.split(key, 3)
  seed = int(jax.random.randint(key_seed, (), 0, 2**31 - 1))
  synth = synthetic_data.synthetic_data(fitted.model, num_rows, seed=seed)
  out = np.empty((num_rows, len(fitted.columns)))
  for i, (column, mapping) in enumerate(zip(fitted.columns, fitted.compression)):
    codes = np.asarray(synth.data[column.name], np.int64)
    if mapping is not None:  # a merged code stands for every value mapped to it: uniform
      merged = np.flatnonzero(mapping == mapping.max())
      pick = np.asarray(jax.random.randint(jax.random.fold_in(key_undo, i), codes.shape, 0,
                                           merged.size))
      kept = np.flatnonzero(mapping != mapping.max())
      if kept.size:
        codes = np.where(codes == mapping.max(), merged[pick],
                         kept[np.minimum(codes, kept.size - 1)])
      else:  # every value was merged (all noisy counts small): each code is the merged one
        codes = merged[pick]
    uniforms = np.asarray(jax.random.uniform(jax.random.fold_in(key_bins, i), codes.shape,
                                             jnp.float64))
    out[:, i] = column.decode(codes, uniforms)
  return out
