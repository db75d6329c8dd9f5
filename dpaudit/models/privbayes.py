r"""PrivBayes: differentially private synthetic data from a noisy Bayesian network (Zhang,
Cormode, Procopiuc, Srivastava & Xiao, "PrivBayes: Private Data Release via Bayesian Networks",
SIGMOD 2014; journal version ACM TODS 42(4), 2017), one of the generators of the DOMIAS
paper's Fig. 6.

The mechanism, on a table of ``n`` rows and ``d`` attributes, with budget :math:`\varepsilon`
split into :math:`\varepsilon_1 = \beta\varepsilon` for the network and
:math:`\varepsilon_2 = (1 - \beta)\varepsilon` for the distributions (the journal version's
split; :math:`\beta = 0.3` is its recommendation):

1. **Discretisation** (public, no privacy cost). Continuous columns are cut into ``num_bins``
   equal-width bins (:class:`dpaudit.mechanisms.mst.Binning`) over a range that must be public:
   ``PrivBayesConfig.column_ranges``, or by default the column's minimum and maximum in the data,
   a documented non-private step. Discrete columns keep their categories (found as in
   :func:`~dpaudit.models.tabular_generators.fit_transform`; the category sets are likewise taken
   as public).
2. **GreedyBayes** (Sec. 4). The first attribute is drawn uniformly; then, ``d - 1`` times, a pair
   :math:`(X, \Pi)` with :math:`X` not yet in the network and :math:`\Pi` one of the
   :math:`\min(k, |V|)`-subsets of the attributes :math:`V` already in it is chosen by the
   exponential mechanism (McSherry & Talwar 2007) with budget :math:`\varepsilon_1 / (d - 1)`
   on the mutual information :math:`I(X; \Pi)` of the discretised data:
   :math:`\Pr[(X, \Pi)] \propto \exp\big(\frac{\varepsilon_1}{d-1}
   \frac{I(X; \Pi)}{2 \Delta_I}\big)`. The sensitivity of :math:`I` under changing one row is
   (Lemma 4.1 of the conference paper)

   .. math::
      \Delta_I = \begin{cases}
        \frac1n \log n + \frac{n-1}{n}\log\frac{n}{n-1}
          & X \text{ or } \Pi \text{ binary}, \\
        \frac2n \log\frac{n+1}{2} + \frac{n-1}{n}\log\frac{n+1}{n-1} & \text{otherwise};
      \end{cases}

   each candidate is divided by its own :math:`\Delta_I` (a utility of sensitivity 1, so the
   mechanism stays :math:`\varepsilon_1/(d-1)`-DP). Natural logs throughout (the ratio
   :math:`I/\Delta_I` does not depend on the base).
3. **NoisyConditionals** (Sec. 3, Algorithm 1). The joint distributions
   :math:`\Pr[X_i, \Pi_i]` of the last ``d - k`` pairs (one pair when ``d <= k``) are
   materialised, Laplace noise of scale

   .. math:: b = \frac{2 (d - k)}{n\, \varepsilon_2}

   (L1 sensitivity :math:`2/n` for each of ``d - k`` tables, budget :math:`\varepsilon_2` over
   them; with :math:`\varepsilon_2 = \varepsilon/2` this is Algorithm 1's
   :math:`4(d-k)/(n\varepsilon)`) is added to every cell, negative cells are set to 0 and each
   table renormalised; the conditionals :math:`\Pr^*[X_i \mid \Pi_i]` follow, those of the first
   ``k`` attributes from the first noisy table (it holds them all). A parent configuration whose
   noisy mass is 0 gets the uniform conditional.
4. **Sampling**: ancestral, in network order; a continuous column's value is uniform within its
   sampled bin, a discrete column's is its category.

The guarantee is :math:`\varepsilon`-DP for neighbouring tables of the same size ``n`` (one row
changed), the setting of the paper (``n`` is public). Not implemented: the paper's alternative
score functions F and R for binary domains and its choice of ``k`` by
:math:`\theta`-usefulness; the degree ``k`` is a configuration field.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import numbers
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from dpaudit import _validate, prng
from dpaudit.mechanisms.mst import Binning
from dpaudit.models.tabular_generators import (
  _check_config,
  _check_data,
  _check_positive,
  fit_transform,
  register_generator,
)


@dataclasses.dataclass(frozen=True)
class PrivBayesConfig:
  r"""PrivBayes (Zhang et al. 2017) for :func:`fit_privbayes`.

  Attributes:
    epsilon: the total budget :math:`\varepsilon > 0` (pure DP).
    degree: :math:`k >= 1`, the most parents of an attribute.
    beta: :math:`\beta \in (0, 1)`, the share of :math:`\varepsilon` for the network (0.3, the
      paper's recommendation).
    num_bins: equal-width bins of each continuous column, >= 2.
    column_ranges: ``None`` (every continuous column binned over its range in the data: not
      private), or one entry per data column: ``(low, high)`` with ``low < high`` (public
      bounds; values outside go to the end bins) or ``None`` for the data's range; entries of
      discrete columns are ignored.
  """
  epsilon: float
  degree: int = 2
  beta: float = 0.3
  num_bins: int = 16
  column_ranges: tuple[tuple[float, float] | None, ...] | None = None

  def __post_init__(self):
    _check_positive("epsilon", self.epsilon)
    _validate.check_integer("degree", self.degree, 1)
    _check_positive("beta", self.beta)
    _validate.check_range("beta", self.beta, 0.0, 1.0, low_open=True, high_open=True)
    _validate.check_integer("num_bins", self.num_bins, 2)
    if self.column_ranges is not None:
      object.__setattr__(self, "column_ranges", _check_ranges(self.column_ranges))


def _check_ranges(ranges: Any) -> tuple[tuple[float, float] | None, ...]:
  if isinstance(ranges, (str, bytes)) or not isinstance(ranges, Sequence):
    raise ValueError(f"column_ranges={ranges!r} must be None or a sequence with one "
                     "(low, high) or None per column")
  out = []
  for entry in ranges:
    if entry is None:
      out.append(None)
      continue
    pair = tuple(entry) if isinstance(entry, Sequence) and not isinstance(entry, str) else ()
    if (len(pair) != 2 or not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                  and math.isfinite(v) for v in pair) or not pair[0] < pair[1]):
      raise ValueError(f"column_ranges holds {entry!r}; each entry must be None or (low, high) "
                       "with finite low < high")
    out.append((float(pair[0]), float(pair[1])))
  return tuple(out)


class PrivBayesModel(NamedTuple):
  """A fitted PrivBayes model (what :func:`fit_privbayes` returns).

  Attributes:
    network: ``((child, parents), ...)`` in sampling order; column indices, the parents a
      tuple.
    conditionals: per pair, float64 ``[*parent sizes, child size]``: each slice along the last
      axis is :math:`\\Pr^*[\\text{child} \\mid \\text{parents}]`.
    sizes: the discretised domain size of each column.
    binnings: per column, the :class:`~dpaudit.mechanisms.mst.Binning` of a continuous column,
      None for a discrete one.
    categories: per column, the sorted category values of a discrete column, None for a
      continuous one.
    epsilon: the total budget spent.
    selection_epsilon: the budget of each exponential-mechanism choice,
      :math:`\\beta\\varepsilon/(d-1)` (0 when ``d = 1``).
    laplace_scale: :math:`2(d-k)/(n(1-\\beta)\\varepsilon)`, the scale of the noise on each cell.
    num_rows: ``n``.
    config: the :class:`PrivBayesConfig`.
  """
  network: tuple[tuple[int, tuple[int, ...]], ...]
  conditionals: tuple[np.ndarray, ...]
  sizes: tuple[int, ...]
  binnings: tuple[Binning | None, ...]
  categories: tuple[np.ndarray | None, ...]
  epsilon: float
  selection_epsilon: float
  laplace_scale: float
  num_rows: int
  config: PrivBayesConfig


# ----------------------------------------------------------------------------- statistics


def _mi_sensitivity(num_rows: int, binary: bool) -> float:
  """Sensitivity of the mutual information under changing one of ``num_rows`` rows (Lemma 4.1
  of Zhang et al. 2014), in nats."""
  n = float(num_rows)  # >= 2 (fit_privbayes's data check)
  if binary:
    return math.log(n) / n + (n - 1.0) / n * math.log(n / (n - 1.0))
  return 2.0 / n * math.log((n + 1.0) / 2.0) + (n - 1.0) / n * math.log((n + 1.0) / (n - 1.0))


def _joint_codes(codes: np.ndarray, sizes: Sequence[int], columns: Sequence[int]) -> np.ndarray:
  """One integer per row for the configuration of ``columns`` (C order over their sizes)."""
  if not columns:
    return np.zeros(codes.shape[0], np.int64)
  return np.ravel_multi_index(tuple(codes[:, c] for c in columns),
                              tuple(sizes[c] for c in columns))


def _mutual_information(codes: np.ndarray, sizes: Sequence[int], child: int,
                        parents: Sequence[int]) -> float:
  """Empirical :math:`I(X_{child}; \\Pi)` of the discretised rows, in nats."""
  size_p = int(np.prod([sizes[p] for p in parents]))
  joint = np.bincount(codes[:, child] * size_p + _joint_codes(codes, sizes, parents),
                      minlength=sizes[child] * size_p).reshape(sizes[child], size_p)
  joint = joint / codes.shape[0]
  outer = joint.sum(axis=1, keepdims=True) * joint.sum(axis=0, keepdims=True)
  nonzero = joint > 0
  return float(np.sum(joint[nonzero] * np.log(joint[nonzero] / outer[nonzero])))


def _selection_probabilities(scores: np.ndarray, sensitivities: np.ndarray, epsilon: float
                             ) -> np.ndarray:
  """Exponential mechanism: :math:`p_r \\propto \\exp(\\varepsilon\\, u_r / (2\\Delta_r))`."""
  logits = epsilon * np.asarray(scores) / (2.0 * np.asarray(sensitivities))
  weights = np.exp(logits - logits.max())
  return weights / weights.sum()


def _greedy_bayes(rng: np.random.Generator, codes: np.ndarray, sizes: Sequence[int],
                  degree: int, epsilon: float) -> tuple[tuple[int, tuple[int, ...]], ...]:
  """GreedyBayes (Sec. 4): the network, each of its d - 1 choices epsilon-DP."""
  d, n = codes.shape[1], codes.shape[0]
  first = int(rng.integers(d))
  network = [(first, ())]
  chosen = [first]
  for _ in range(d - 1):
    candidates = [(x, parents) for x in range(d) if x not in chosen
                  for parents in itertools.combinations(chosen, min(degree, len(chosen)))]
    scores = np.array([_mutual_information(codes, sizes, x, p) for x, p in candidates])
    binary = [sizes[x] == 2 or int(np.prod([sizes[q] for q in p])) == 2 for x, p in candidates]
    sens = np.array([_mi_sensitivity(n, b) for b in binary])
    pick = candidates[int(rng.choice(len(candidates),
                                     p=_selection_probabilities(scores, sens, epsilon)))]
    network.append(pick)
    chosen.append(pick[0])
  return tuple(network)


def _laplace_scale(num_rows: int, num_columns: int, degree: int, epsilon2: float) -> float:
  """:math:`2 m / (n \\varepsilon_2)` for the :math:`m = \\max(d - k, 1)` noisy tables."""
  return 2.0 * max(num_columns - degree, 1) / (num_rows * epsilon2)


def _perturb(rng: np.random.Generator, joint: np.ndarray, scale: float) -> np.ndarray:
  """Laplace noise of ``scale`` on every cell, negatives to 0, renormalised (uniform if the
  whole table is 0)."""
  noisy = np.maximum(joint + rng.laplace(0.0, scale, joint.shape), 0.0)
  total = noisy.sum()
  return noisy / total if total > 0 else np.full(joint.shape, 1.0 / joint.size)


def _conditional(joint: np.ndarray) -> np.ndarray:
  """``joint[..., child]`` -> ``Pr[child | ...]`` along the last axis (uniform where 0)."""
  mass = joint.sum(axis=-1, keepdims=True)
  uniform = np.full(joint.shape, 1.0 / joint.shape[-1])
  return np.where(mass > 0, joint / np.where(mass > 0, mass, 1.0), uniform)


def _noisy_conditionals(rng: np.random.Generator, codes: np.ndarray, sizes: Sequence[int],
                        network: Sequence[tuple[int, tuple[int, ...]]], degree: int,
                        scale: float) -> tuple[np.ndarray, ...]:
  """NoisyConditionals (Sec. 3, Algorithm 1): one table per pair of ``network``."""
  d, n = codes.shape[1], codes.shape[0]
  start = min(degree, d - 1)  # first pair whose joint is materialised
  tables: list[np.ndarray | None] = [None] * d
  first_joint = None
  for i in range(start, d):
    child, parents = network[i]
    columns = list(parents) + [child]
    shape = tuple(sizes[c] for c in columns)
    counts = np.bincount(_joint_codes(codes, sizes, columns), minlength=int(np.prod(shape)))
    joint = _perturb(rng, counts.reshape(shape) / n, scale)
    if i == start:
      first_joint = joint
    tables[i] = _conditional(joint)
  # Pairs before `start`: parents are all earlier attributes, all inside the first noisy joint,
  # whose axes are network[0..start-1] then network[start]'s child.
  for i in range(start):
    marginal = first_joint.sum(axis=tuple(range(i + 1, start + 1)))
    tables[i] = _conditional(marginal)
  return tuple(tables)


# ------------------------------------------------------------------------------ interface


def _discretise(data: np.ndarray, discrete_columns, config: PrivBayesConfig):
  """Codes ``[n, d]``, sizes, binnings and categories of the columns."""
  transform = fit_transform(data, discrete_columns)
  d = data.shape[1]
  ranges = config.column_ranges
  if ranges is not None and len(ranges) != d:
    raise ValueError(f"column_ranges has {len(ranges)} entries; need one per column of data "
                     f"({d})")
  codes = np.empty(data.shape, np.int64)
  binnings: list[Binning | None] = [None] * d
  categories: list[np.ndarray | None] = [None] * d
  for j, column in enumerate(transform.continuous_columns):
    given = None if ranges is None else ranges[column]
    low, high = given if given is not None else (transform.limits[0][j], transform.limits[1][j])
    binnings[column] = Binning(str(column), edges=tuple(np.linspace(low, high,
                                                                    config.num_bins + 1)))
    codes[:, column] = binnings[column].encode(data[:, column])
  for column, values in zip(transform.discrete_columns, transform.categories):
    categories[column] = values
    codes[:, column] = np.searchsorted(values, data[:, column])
  sizes = tuple(b.size if b is not None else len(c) for b, c in zip(binnings, categories))
  return codes, sizes, tuple(binnings), tuple(categories)


def fit_privbayes(key: jax.Array, data: Any, config: PrivBayesConfig,
                  discrete_columns: Sequence[int] | None = None) -> PrivBayesModel:
  r"""Fits PrivBayes (Zhang et al. 2017; see the module docstring) to ``data``:
  :math:`\varepsilon`-DP for tables of ``n`` rows (public binning and categories).

  Args:
    key: PRNG key of the first attribute, the exponential mechanism and the Laplace noise (one
      NumPy generator seeded from it).
    data: ``[n, d]`` finite numbers, ``n >= 2``, no constant column.
    config: the :class:`PrivBayesConfig` (``epsilon`` is required).
    discrete_columns: as in :func:`~dpaudit.models.tabular_generators.fit_transform`.

  Returns:
    The :class:`PrivBayesModel`.

  >>> rows = np.random.default_rng(0).integers(0, 3, size=(300, 3)).astype(float)
  >>> model = fit_privbayes(jax.random.key(0), rows, PrivBayesConfig(epsilon=1.0))
  >>> sample_privbayes(jax.random.key(1), model, 5).shape
  (5, 3)
  """
  _validate.check_key(key)
  _check_config(config, PrivBayesConfig, "fit_privbayes")
  data = _check_data(data)
  codes, sizes, binnings, categories = _discretise(data, discrete_columns, config)
  n, d = codes.shape
  rng = prng.numpy_generator(key)
  eps1, eps2 = config.beta * config.epsilon, (1.0 - config.beta) * config.epsilon
  selection = eps1 / (d - 1) if d > 1 else 0.0
  network = _greedy_bayes(rng, codes, sizes, config.degree, selection)
  scale = _laplace_scale(n, d, config.degree, eps2)
  tables = _noisy_conditionals(rng, codes, sizes, network, config.degree, scale)
  return PrivBayesModel(network, tables, sizes, binnings, categories, float(config.epsilon),
                        float(selection), float(scale), int(n), config)


def sample_privbayes(key: jax.Array, model: PrivBayesModel, n: int) -> np.ndarray:
  """``n`` synthetic rows ``[n, d]`` (float64, data units) by ancestral sampling of a fitted
  PrivBayes network (Sec. 3): each column from its noisy conditional given its sampled parents;
  continuous columns uniform within the sampled bin. Post-processing: no privacy cost.

  Args:
    key: PRNG key.
    model: a :class:`PrivBayesModel` from :func:`fit_privbayes`.
    n: number of rows, >= 1.
  """
  _validate.check_key(key)
  if not isinstance(model, PrivBayesModel):
    raise ValueError(f"model must be a PrivBayesModel (fit_privbayes), got "
                     f"{type(model).__name__}")
  n = _validate.check_integer("n", n, 1)
  rng = prng.numpy_generator(key)
  codes = np.zeros((n, len(model.sizes)), np.int64)
  for (child, parents), table in zip(model.network, model.conditionals):
    probs = table[tuple(codes[:, p] for p in parents)] if parents else np.broadcast_to(
        table, (n, table.shape[-1]))
    cdf = np.cumsum(probs, axis=1)
    u = rng.random(n) * cdf[:, -1]
    codes[:, child] = np.minimum((cdf < u[:, None]).sum(axis=1), table.shape[-1] - 1)
  out = np.empty(codes.shape, np.float64)
  for column, (binning, values) in enumerate(zip(model.binnings, model.categories)):
    if binning is not None:
      out[:, column] = binning.decode(codes[:, column], rng.random(n))
    else:
      out[:, column] = values[codes[:, column]]
  return out


register_generator("privbayes", PrivBayesConfig, fit_privbayes, sample_privbayes, replace=True)
