r"""Reconstruction-leakage bounds of DP-SGD in bits: Figs. 1 and 2 of Stock et al., "Defending
against Reconstruction Attacks with Renyi Differential Privacy" (2022).

A secret of :math:`b` bits has prior :math:`p_0 = 2^{-b}`. From the RDP curve :math:`d_\alpha`
of DP-SGD (:func:`dpaudit.accounting.dpsgd_rdp`) two upper bounds on the number of leaked bits
:math:`\log_2(p_1 / p_0)` are computed, both minimised over the given orders:

* theirs ("Length of the Secret", Sec. 3.1, i.e. Eq. (3) at :math:`p_0 = 2^{-b}`;
  :func:`dpaudit.estimators.reconstruction.leakage_bits`),

  .. math:: L_2(b) = \min\Big(b,\; \min_\alpha d_\alpha\frac{\alpha-1}{\alpha\log 2}
     + \frac{b}{\alpha}\Big);

* the traditional one (Eq. (2), "Comparison with traditional DP guarantees"; Mironov's
  RDP-to-DP epsilon at :math:`\delta = p_0`;
  :func:`dpaudit.estimators.reconstruction.traditional_reconstruction_bound`),

  .. math:: \frac{1}{\log 2}\min_\alpha h(\alpha, p_0), \qquad
     h(\alpha, p_0) = d_\alpha + \frac{\log(1/p_0)}{\alpha - 1}.

Fig. 1: both bounds against :math:`b` for each noise multiplier, in the setting of Sec. 4.3
(:math:`q = 2.81\times10^{-4}`, 186k steps), with :math:`\varepsilon` at ``delta`` from the RDP
accountant with the conversion of Balle et al. (2020), as the paper's titles (and the PLD
accountant's tighter epsilon). Fig. 2: both bounds at a fixed :math:`b` against the number of
steps (log grid). :func:`run` computes both from a :class:`ReconstructionBoundsConfig`
(no randomness: its key may be None).

Orders: by default a dense grid on [1.01, 256] (:func:`default_orders`) that contains every
integer order 2..64, where dp_accounting's RDP of the sampled Gaussian is exact; fractional
orders use the exact quadrature of :func:`dpaudit.accounting.dpsgd_rdp` (entries that cannot
be evaluated are ``+inf``, which the minimum over orders skips). Results are float64 when
``jax_enable_x64`` is on (float32 otherwise).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from dpaudit import _validate, accounting, results
from dpaudit.accounting.dpsgd import quiet_accountant
from dpaudit.estimators import reconstruction
from dpaudit.results import to_plain

# Secret lengths of the summary table; log2(1e16) = 53.15 is a 16-digit secret (credit card).
TABLE_BITS = (16.0, 40.0, math.log2(1e16))

_LOG2 = math.log(2.0)


def default_orders() -> np.ndarray:
  """Sorted, unique orders on [1.01, 256]: dense near 1 where the optimum of small secrets
  lies, every integer 2..64 (exact RDP of the sampled Gaussian), and a few large ones."""
  return np.unique(np.concatenate([np.linspace(1.01, 10.0, 400), np.linspace(10.1, 63.0, 200),
                                   np.arange(2, 65), [80, 96, 128, 256]]).astype(np.float64))


def rdp_curve(noise_multiplier: float, sampling_rate: float, num_steps: int, orders,
              fractional_orders: str = "quadrature") -> np.ndarray:
  """Composed RDP curve of DP-SGD, float64 (:func:`dpaudit.accounting.dpsgd_rdp`: exact at
  every order by default, or dp-accounting's conservative series at fractional orders with
  ``fractional_orders="dp_accounting"``); dp-accounting's convergence warnings are dropped."""
  with quiet_accountant():
    return np.asarray(accounting.dpsgd_rdp(noise_multiplier, sampling_rate, num_steps, orders,
                                           fractional_orders=fractional_orders), np.float64)


@dataclasses.dataclass(frozen=True)
class BitsBounds:
  """Both bounds in bits and the orders attaining them (1.0 for :math:`L_2`'s trivial term
  :math:`b`, NaN where a bound is infinite), arrays of one shape.

  Attributes:
    leakage_bits: :math:`L_2(b)` (Sec. 3.1, "Length of the Secret").
    leakage_order: the order attaining it.
    traditional_bits: :math:`\\min_\\alpha h(\\alpha, 2^{-b}) / \\log 2` (Eq. (2)).
    traditional_order: the order attaining it.
  """
  leakage_bits: np.ndarray
  leakage_order: np.ndarray
  traditional_bits: np.ndarray
  traditional_order: np.ndarray

  def to_dict(self) -> dict[str, Any]:
    return to_plain({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})

  @classmethod
  def from_dict(cls, stored: Mapping[str, Any], shape: tuple[int, ...] | None = None
                ) -> BitsBounds:
    """The bounds from :meth:`to_dict`'s keys in ``stored`` (extra keys are ignored): four
    float64 arrays of one shape (``shape`` when given). Raises KeyError, TypeError or
    ValueError on a damaged dict."""
    results.check_fields("BitsBounds", stored, dict.fromkeys(
        (f.name for f in dataclasses.fields(cls)), (list, float)))
    arrays = {f.name: _stored_array(stored, f.name, float) for f in dataclasses.fields(cls)}
    shapes = {a.shape for a in arrays.values()} | ({shape} if shape is not None else set())
    if len(shapes) != 1:
      raise ValueError(f"the stored bounds have shapes {sorted(shapes)}; they must be one")
    return cls(**arrays)


def _stored_array(stored: Mapping[str, Any], name: str, kind: type) -> np.ndarray:
  """``stored[name]`` (numbers, not booleans) as a float64 or int64 array."""
  if name not in stored:
    raise KeyError(f"the stored result has no {name!r}")
  array = np.asarray(stored[name])
  if array.dtype.kind not in ("iu" if kind is int else "iuf"):
    raise ValueError(f"the stored {name} must be {kind.__name__}s, got {array.dtype}")
  return array.astype(np.int64 if kind is int else np.float64)


def bounds_in_bits(rdp, orders, secret_bits) -> BitsBounds:
  r"""Both bounds in bits for RDP curve(s) ``rdp`` (nats, orders last) and secret length(s).

  :math:`L_2(b)` of Sec. 3.1 and :math:`\min_\alpha h(\alpha, 2^{-b}) / \log 2` of Eq. (2) of
  Stock et al.; batch axes of ``rdp`` broadcast against the shape of ``secret_bits``.

  Args:
    rdp: RDP curve(s) :math:`d_\alpha \ge 0`, shape ``(..., K)``.
    orders: the K orders :math:`\alpha > 1`, 1-D.
    secret_bits: secret length(s) :math:`b \ge 0` (bits).

  Returns:
    :class:`BitsBounds` of the broadcast shape.
  """
  _validate.check_not_boolean("secret_bits", secret_bits, "secret lengths")
  _validate.check_range("secret_bits", secret_bits, 0.0, finite=True)
  bits = np.asarray(secret_bits, np.float64)
  ours = reconstruction.leakage_bits(rdp, orders, bits)
  trad = reconstruction.traditional_reconstruction_bound(rdp, orders, log_p0=-bits * _LOG2)
  return BitsBounds(leakage_bits=np.asarray(ours.value, np.float64),
                    leakage_order=np.asarray(ours.order, np.float64),
                    traditional_bits=np.asarray(trad.value, np.float64) / _LOG2,
                    traditional_order=np.asarray(trad.order, np.float64))


def bound_curves(noise_multiplier: float, sampling_rate: float, num_steps: int, secret_bits,
                 orders) -> BitsBounds:
  """Fig. 1: both bounds (bits) against the secret lengths ``secret_bits`` for one DP-SGD
  setting (:func:`rdp_curve`, then :func:`bounds_in_bits`)."""
  rdp = rdp_curve(noise_multiplier, sampling_rate, num_steps, orders)
  return bounds_in_bits(rdp, orders, secret_bits)


def steps_curves(noise_multiplier: float, sampling_rate: float, steps, secret_bits: float,
                 orders) -> BitsBounds:
  """Fig. 2: both bounds (bits) at one secret length against the step counts ``steps``."""
  _validate.check_counts("steps", steps)
  _validate.check_nonempty("steps", steps)
  rdp = np.stack([rdp_curve(noise_multiplier, sampling_rate, int(t), orders)
                  for t in np.asarray(steps, np.int64).reshape(-1)])
  return bounds_in_bits(rdp, orders, secret_bits)


def steps_grid(min_steps: int, max_steps: int, num: int) -> np.ndarray:
  """Whole step counts on a log grid from ``min_steps`` to ``max_steps`` (duplicates dropped).

  Raises:
    ValueError: unless ``1 <= min_steps <= max_steps`` and ``num >= 1``.
  """
  for name, value, low in (("min_steps", min_steps, 1), ("max_steps", max_steps, min_steps),
                           ("num", num, 1)):
    _validate.check_not_boolean(name, value)
    _validate.check_integer_valued(name, value)
    _validate.check_range(name, value, low)
  _validate.check_allocation("num", num, 16, what="grid point")
  return np.unique(np.round(np.geomspace(min_steps, max_steps, int(num))).astype(np.int64))


def property_violations(bits, leakage, traditional, tol: float = 1e-9) -> list[str]:
  r"""Checks the properties of :math:`L_2` on an increasing grid of ``bits`` (Stock et al.,
  App. A.2 and Sec. 3.1): :math:`L_2 \le` traditional, :math:`L_2 \le b`, :math:`L_2`
  non-decreasing and concave, :math:`b - L_2(b)` non-decreasing.

  Args:
    bits: increasing secret lengths :math:`b`, 1-D.
    leakage: :math:`L_2(b)` on that grid.
    traditional: the traditional bound (bits) on that grid.
    tol: relative tolerance of the comparisons (rounding).

  Returns:
    The names of the properties that fail (empty when all hold).
  """
  for name, value in (("bits", bits), ("leakage", leakage), ("traditional", traditional)):
    _validate.check_real_array(name, value, ndim=1, pos_inf=name == "traditional")
  _validate.check_range("tol", tol, 0.0, finite=True)
  b, l2, h = (np.asarray(x, np.float64) for x in (bits, leakage, traditional))
  if np.any(np.diff(b) <= 0):
    raise ValueError("bits must be increasing (a grid of secret lengths)")
  _validate.check_same_shape("bits", b, "leakage", l2)
  _validate.check_same_shape("bits", b, "traditional", h)
  atol = tol * max(1.0, float(np.max(b)))
  slopes = np.diff(l2) / np.diff(b)
  checks = {
      "leakage <= traditional": np.all(l2 <= h + atol),
      "leakage <= b": np.all(l2 <= b + atol),
      "leakage non-decreasing": np.all(np.diff(l2) >= -atol),
      "leakage concave": np.all(np.diff(slopes) <= tol * max(1.0, float(np.max(np.abs(slopes))))),
      "b - leakage non-decreasing": np.all(np.diff(b - l2) >= -atol),
  }
  return [name for name, ok in checks.items() if not ok]


def _fail(name: str, value: Any, valid: str) -> None:
  raise ValueError(f"{name}={value} is outside the valid range {valid}")


def _floats(name: str, values: Any) -> tuple[float, ...]:
  if isinstance(values, (str, bytes)) or np.asarray(values).dtype.kind not in "biuf":
    raise ValueError(f"{name}={values!r} must be a sequence of numbers")
  if np.asarray(values).dtype.kind == "b":
    raise ValueError(f"{name}={values!r} must be numbers, not booleans")
  try:
    arr = np.atleast_1d(np.asarray(values, np.float64))
  except (TypeError, ValueError):
    raise ValueError(f"{name}={values!r} must be a sequence of numbers") from None
  if arr.ndim != 1:
    raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
  if arr.size == 0:
    raise ValueError(f"{name} is empty; need at least one element")
  return tuple(float(v) for v in arr)


def _number(name: str, value: Any, kind: type) -> float | int:
  if isinstance(value, (bool, np.bool_)):
    raise ValueError(f"{name}={value!r} must be a number, not a boolean")
  if isinstance(value, (str, bytes)):
    raise ValueError(f"{name}={value!r} must be a number")
  try:
    number = float(value)
  except (TypeError, ValueError):
    raise ValueError(f"{name}={value!r} must be a number") from None
  if kind is int:
    if not number.is_integer():
      raise ValueError(f"{name}={value} must be a whole number")
    return int(number)
  return number


@dataclasses.dataclass(frozen=True)
class ReconstructionBoundsConfig:
  r"""What :func:`run` computes; defaults are the setting of Stock et al., Sec. 4.3.

  Every ``ValueError`` raised here starts with the field name (e.g. ``"sigmas=-1 is outside
  the valid range (0, inf) for each"``), so a CLI can prefix ``--`` to name its flag.

  Attributes:
    sigmas: noise multipliers :math:`\sigma > 0` of Fig. 1 (one panel each).
    sampling_rate: Poisson sampling rate :math:`q \in (0, 1]`.
    num_steps: DP-SGD steps :math:`T \ge 1` of Fig. 1.
    delta: :math:`\delta \in (0, 1)` of the epsilon reported per noise multiplier.
    max_bits: Fig. 1: largest secret length :math:`b` (bits), finite and > 0.
    num_bits: Fig. 1: points (>= 2) of the uniform grid of :math:`b` on ``[0, max_bits]``.
    fig2_bits: Fig. 2: the secret length :math:`b \ge 0` (bits), finite.
    fig2_sigma: Fig. 2: the noise multiplier, finite and > 0.
    min_steps, max_steps: Fig. 2: the range ``1 <= min_steps <= max_steps`` of step counts.
    num_step_points: Fig. 2: points (>= 1) of the log grid of steps (:func:`steps_grid`).
    pld: also compute the PLD accountant's epsilon of each Fig. 1 noise multiplier.
    orders: Renyi orders :math:`\alpha > 1`, finite; stored sorted without duplicates. None:
      :func:`default_orders`.
  """
  sigmas: tuple[float, ...] = (0.3, 0.4, 0.5, 1.0)
  sampling_rate: float = 2.81e-4
  num_steps: int = 186_000
  delta: float = 3e-7
  max_bits: float = 100.0
  num_bits: int = 101
  fig2_bits: float = 40.0
  fig2_sigma: float = 0.4
  min_steps: int = 1000
  max_steps: int = 1_000_000
  num_step_points: int = 25
  pld: bool = True
  orders: tuple[float, ...] | None = None

  def __post_init__(self):
    put = lambda name, value: object.__setattr__(self, name, value)
    if np.size(self.sigmas) == 0:
      raise ValueError("sigmas is empty; need at least one noise multiplier")
    sigmas = _floats("sigmas", self.sigmas)
    if not all(math.isfinite(s) and s > 0 for s in sigmas):
      _fail("sigmas", ",".join(f"{s:g}" for s in sigmas), "(0, inf) for each")
    put("sigmas", sigmas)
    for name in ("sampling_rate", "delta", "max_bits", "fig2_bits", "fig2_sigma"):
      put(name, _number(name, getattr(self, name), float))
    for name in ("num_steps", "num_bits", "min_steps", "max_steps", "num_step_points"):
      put(name, _number(name, getattr(self, name), int))
    finite = math.isfinite
    ranges = (("sampling_rate", 0 < self.sampling_rate <= 1, "(0, 1]"),
              ("num_steps", self.num_steps >= 1, "[1, inf)"),
              ("delta", 0 < self.delta < 1, "(0, 1)"),
              ("max_bits", finite(self.max_bits) and self.max_bits > 0, "(0, inf)"),
              ("num_bits", self.num_bits >= 2, "[2, inf)"),
              ("fig2_bits", finite(self.fig2_bits) and self.fig2_bits >= 0, "[0, inf)"),
              ("fig2_sigma", finite(self.fig2_sigma) and self.fig2_sigma > 0, "(0, inf)"),
              ("min_steps", self.min_steps >= 1, "[1, inf)"),
              ("max_steps", self.max_steps >= self.min_steps,
               f"[min_steps={self.min_steps}, inf)"),
              ("num_step_points", self.num_step_points >= 1, "[1, inf)"))
    for name, ok, valid in ranges:
      if not ok:
        _fail(name, getattr(self, name), valid)
    # Each grid point of either figure holds a bound per order (several float64 arrays).
    num_orders = len(default_orders()) if self.orders is None else np.size(self.orders)
    for name in ("num_bits", "num_step_points"):
      _validate.check_allocation(name, getattr(self, name), 64 * max(1, num_orders),
                                 low=1, what="point")
    if not isinstance(self.pld, (bool, np.bool_)):
      raise ValueError(f"pld={self.pld!r} must be True or False")
    put("pld", bool(self.pld))
    if self.orders is None:
      orders = default_orders()
    else:
      raw = _floats("orders", self.orders)
      if not all(math.isfinite(a) and a > 1 for a in raw):
        _fail("orders", ",".join(f"{a:g}" for a in raw), "(1, inf) for each")
      orders = np.unique(np.asarray(raw, np.float64))
    put("orders", tuple(float(a) for a in orders))

  def to_dict(self) -> dict[str, Any]:
    """Plain Python values (tuples as lists), the ``config`` of ``results.json``."""
    return to_plain(dataclasses.asdict(self))


@dataclasses.dataclass(frozen=True)
class SecretLengthCurves:
  """One panel of Fig. 1: a noise multiplier's bounds against the secret length.

  Attributes:
    sigma: the noise multiplier :math:`\\sigma`.
    epsilon_rdp: :math:`\\varepsilon` at the config's delta, RDP accountant (Balle et al.
      2020 conversion, dp-accounting's orders).
    epsilon_pld: the PLD accountant's :math:`\\varepsilon` (None unless ``config.pld``).
    bits: the grid of secret lengths :math:`b`.
    bounds: both bounds on ``bits``.
    table_bits: :data:`TABLE_BITS`.
    at_bits: both bounds at ``table_bits``.
    at_bits_dp_accounting_series: the same from dp-accounting's conservative series at
      fractional orders (how much the exact RDP tightens the bounds).
    property_violations: :func:`property_violations` of ``bounds`` on ``bits``.
  """
  sigma: float
  epsilon_rdp: float
  epsilon_pld: float | None
  bits: np.ndarray
  bounds: BitsBounds
  table_bits: np.ndarray
  at_bits: BitsBounds
  at_bits_dp_accounting_series: BitsBounds
  property_violations: tuple[str, ...]

  def to_dict(self) -> dict[str, Any]:
    return {"sigma": self.sigma, "epsilon_rdp": self.epsilon_rdp,
            "epsilon_pld": self.epsilon_pld, "bits": to_plain(self.bits),
            **self.bounds.to_dict(),
            "at_bits": {"bits": to_plain(self.table_bits), **self.at_bits.to_dict()},
            "at_bits_dp_accounting_series": self.at_bits_dp_accounting_series.to_dict(),
            "property_violations": list(self.property_violations)}

  @classmethod
  def from_dict(cls, stored: Mapping[str, Any]) -> SecretLengthCurves:
    """The panel whose :meth:`to_dict` (after a strict-JSON round trip) is ``stored``."""
    results.check_fields("SecretLengthCurves", stored, {
        "sigma": float, "epsilon_rdp": float, "epsilon_pld": (float, None), "bits": list,
        "at_bits": dict, "at_bits_dp_accounting_series": dict, "property_violations": list})
    bits = _stored_array(stored, "bits", float)
    table_bits = _stored_array(stored["at_bits"], "bits", float)
    violations = stored["property_violations"]
    if not all(isinstance(v, str) for v in violations):
      raise TypeError(f"the stored property_violations {violations!r} must be strings")
    return cls(sigma=float(stored["sigma"]), epsilon_rdp=float(stored["epsilon_rdp"]),
               epsilon_pld=(None if stored["epsilon_pld"] is None
                            else float(stored["epsilon_pld"])),
               bits=bits, bounds=BitsBounds.from_dict(stored, bits.shape),
               table_bits=table_bits,
               at_bits=BitsBounds.from_dict(stored["at_bits"], table_bits.shape),
               at_bits_dp_accounting_series=BitsBounds.from_dict(
                   stored["at_bits_dp_accounting_series"], table_bits.shape),
               property_violations=tuple(violations))


@dataclasses.dataclass(frozen=True)
class StepCountCurves:
  """Fig. 2: the bounds at one secret length against the number of steps.

  Attributes:
    sigma: the noise multiplier :math:`\\sigma`.
    secret_bits: the secret length :math:`b`.
    num_steps: the grid of step counts (:func:`steps_grid`).
    bounds: both bounds at each step count.
    epsilon_rdp: :math:`\\varepsilon` at the config's delta (RDP accountant) per step count.
  """
  sigma: float
  secret_bits: float
  num_steps: np.ndarray
  bounds: BitsBounds
  epsilon_rdp: np.ndarray

  def to_dict(self) -> dict[str, Any]:
    return {"sigma": self.sigma, "secret_bits": self.secret_bits,
            "num_steps": to_plain(self.num_steps), **self.bounds.to_dict(),
            "epsilon_rdp": to_plain(self.epsilon_rdp)}

  @classmethod
  def from_dict(cls, stored: Mapping[str, Any]) -> StepCountCurves:
    """The curves whose :meth:`to_dict` (after a strict-JSON round trip) is ``stored``."""
    results.check_fields("StepCountCurves", stored, {
        "sigma": float, "secret_bits": float, "num_steps": list, "epsilon_rdp": list})
    steps = _stored_array(stored, "num_steps", int)
    epsilon = _stored_array(stored, "epsilon_rdp", float)
    if epsilon.shape != steps.shape:
      raise ValueError(f"the stored epsilon_rdp has shape {epsilon.shape}, num_steps "
                       f"{steps.shape}")
    return cls(sigma=float(stored["sigma"]), secret_bits=float(stored["secret_bits"]),
               num_steps=steps, bounds=BitsBounds.from_dict(stored, steps.shape),
               epsilon_rdp=epsilon)


@dataclasses.dataclass(frozen=True)
class ReconstructionBoundsResult:
  """:func:`run`'s output: one :class:`SecretLengthCurves` per Fig. 1 noise multiplier and
  the :class:`StepCountCurves` of Fig. 2."""
  fig1: tuple[SecretLengthCurves, ...]
  fig2: StepCountCurves

  @property
  def properties_hold(self) -> bool:
    """Whether every property of :math:`L_2` holds in every Fig. 1 panel."""
    return not any(panel.property_violations for panel in self.fig1)

  def to_dict(self) -> dict[str, Any]:
    """Plain Python values: ``fig1`` (list), ``fig2`` and ``properties_hold``."""
    return {"fig1": [panel.to_dict() for panel in self.fig1], "fig2": self.fig2.to_dict(),
            "properties_hold": self.properties_hold}

  @classmethod
  def from_dict(cls, stored: Mapping[str, Any]) -> ReconstructionBoundsResult:
    """The result whose :meth:`to_dict` (after a strict-JSON round trip) is ``stored`` (the
    validator of a stored run). Raises KeyError, TypeError or ValueError on a damaged dict."""
    results.check_fields("ReconstructionBoundsResult", stored,
                         {"fig1": list, "fig2": dict, "properties_hold": bool})
    result = cls(fig1=tuple(SecretLengthCurves.from_dict(p) for p in stored["fig1"]),
                 fig2=StepCountCurves.from_dict(stored["fig2"]))
    if not result.fig1 or result.properties_hold != stored["properties_hold"]:
      raise ValueError("the stored result has no Fig. 1 panel or a properties_hold that its "
                       "panels contradict")
    return result


def _epsilon(sigma: float, config: ReconstructionBoundsConfig, num_steps: int,
             accountant: str) -> float:
  return accounting.dpsgd_epsilon(sigma, config.sampling_rate, num_steps, config.delta,
                                  accountant=accountant)


def _panel(sigma: float, config: ReconstructionBoundsConfig) -> SecretLengthCurves:
  orders = np.asarray(config.orders, np.float64)
  q, steps = config.sampling_rate, config.num_steps
  bits = np.linspace(0.0, config.max_bits, config.num_bits)
  table_bits = np.asarray(TABLE_BITS)
  rdp = rdp_curve(sigma, q, steps, orders)
  bounds = bounds_in_bits(rdp, orders, bits)
  series = rdp_curve(sigma, q, steps, orders, "dp_accounting")
  return SecretLengthCurves(
      sigma=sigma, epsilon_rdp=_epsilon(sigma, config, steps, "rdp"),
      epsilon_pld=_epsilon(sigma, config, steps, "pld") if config.pld else None,
      bits=bits, bounds=bounds, table_bits=table_bits,
      at_bits=bounds_in_bits(rdp, orders, table_bits),
      at_bits_dp_accounting_series=bounds_in_bits(series, orders, table_bits),
      property_violations=tuple(property_violations(bits, bounds.leakage_bits,
                                                    bounds.traditional_bits)))


def run(key: Any, config: ReconstructionBoundsConfig, *,
        progress: results.Progress | None = None, store: results.CellStore | None = None
        ) -> ReconstructionBoundsResult:
  """All numbers of Figs. 1 and 2 of Stock et al. for ``config`` (see the module docstring).

  Deterministic: there is no randomness, so ``key`` is not used (pass None; a PRNG key is
  accepted for the game contract, ``run(key, config)``, and changes nothing).
  dp-accounting's convergence warnings are dropped
  (:func:`dpaudit.accounting.dpsgd.quiet_accountant`). Turn ``jax_enable_x64`` on for float64.

  Args:
    key: None (or a PRNG key, unused).
    config: the settings.
    progress: optional :class:`dpaudit.results.Progress`, told after each Fig. 1 panel and
      after Fig. 2 (``len(sigmas) + 1`` units).
    store: optional :class:`dpaudit.results.CellStore`: the result of this config is reused
      from it when whole, else computed and stored (:func:`dpaudit.results.stored_run`).

  >>> config = ReconstructionBoundsConfig(sigmas=(1.0,), num_steps=10, num_bits=2,
  ...                                     min_steps=10, max_steps=10, num_step_points=1,
  ...                                     pld=False, orders=(2.0, 4.0))
  >>> run(None, config).properties_hold
  True
  """
  if key is not None:
    _validate.check_key(key)
  if not isinstance(config, ReconstructionBoundsConfig):
    raise ValueError(f"config must be a ReconstructionBoundsConfig, got {type(config).__name__}")
  if progress is not None and not callable(progress):
    raise ValueError("progress must be a function progress(done, total, message)")
  if store is not None and not isinstance(store, results.CellStore):
    raise ValueError(f"store must be a dpaudit.results.CellStore, got {type(store).__name__}")
  total = len(config.sigmas) + 1
  result = results.stored_run(store, {"config": config.to_dict()}, "reconstruction_bounds",
                              lambda: _compute(config, progress), ReconstructionBoundsResult)
  results.report(progress, total, total, "Figs. 1 and 2 done")
  return result


def _compute(config: ReconstructionBoundsConfig,
             progress: results.Progress | None) -> ReconstructionBoundsResult:
  """The work of :func:`run` (arguments checked)."""
  orders = np.asarray(config.orders, np.float64)
  total = len(config.sigmas) + 1
  with quiet_accountant():
    fig1 = []
    for i, sigma in enumerate(config.sigmas, 1):
      fig1.append(_panel(sigma, config))
      results.report(progress, i, total, f"Fig. 1, sigma={sigma:g}")
    grid = steps_grid(config.min_steps, config.max_steps, config.num_step_points)
    fig2 = StepCountCurves(
        sigma=config.fig2_sigma, secret_bits=config.fig2_bits, num_steps=grid,
        bounds=steps_curves(config.fig2_sigma, config.sampling_rate, grid, config.fig2_bits,
                            orders),
        epsilon_rdp=np.asarray([_epsilon(config.fig2_sigma, config, int(t), "rdp")
                                for t in grid]))
  return ReconstructionBoundsResult(fig1=tuple(fig1), fig2=fig2)


Config = ReconstructionBoundsConfig
Result = ReconstructionBoundsResult
