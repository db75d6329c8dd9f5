"""Bad input to the public functions of dpaudit.audits, dpaudit.attacks and dpaudit.estimators
fails at once with a ValueError that names the argument (issue 38, "hard edges").

Every public callable of those packages' modules is in :data:`CASES` (calls with bad input) or in
:data:`EXEMPT` (with the reason it takes no input to check);
:func:`test_table_covers_every_public_callable` fails when a new function is in neither, or when
an entry names a function that is gone. The inputs are NaN, infinities, empty and mismatched
arrays, booleans, strings and complex numbers where real numbers belong, negative, non-integer
and memory-exceeding counts, out-of-range significances. Data that a function must not touch
before its arguments are checked is a :class:`Tripwire`, so a case that trains or computes
before validating fails loudly instead of passing slowly. A gap that cannot be closed at once
goes into :data:`KNOWN_GAPS` (strict xfails, with owner and what is needed) or :data:`ABORTS`
(cases that would abort the process; skipped); both are empty: every case is a plain test.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import pytest

from dpaudit import audit as front
from dpaudit import tightness
from dpaudit.attacks import density
from dpaudit.attacks import domias as domias_attacks
from dpaudit.attacks import panoramia as panoramia_attacks
from dpaudit.attacks import reconstruction as lazy
from dpaudit.audits import domias as domias_audit
from dpaudit.audits import (
  domias_studies,
  dpsgd_grid,
  language_model,
  lm_reconstruction,
  panoramia_study,
  private_prediction,
  reconstruction,
  reconstruction_bounds,
)
from dpaudit.audits import dpsgd as dpsgd_audit
from dpaudit.audits import noisy_argmax as argmax_audit
from dpaudit.audits import panoramia as panoramia_audit
from dpaudit.audits import panoramia_modalities as modalities
from dpaudit.audits import private_prediction_study as pp_study
from dpaudit.dpsgd import training as _training
from dpaudit.estimators import (
  approx_dp,
  binomial,
  exposure,
  fdp_one_run,
  mia_metrics,
  multinomial,
  one_run,
  rdp,
  renyi_cuts,
)
from dpaudit.estimators import panoramia as panoramia_est
from dpaudit.estimators import reconstruction as reconstruction_est
from dpaudit.mechanisms import mst as _mst
from dpaudit.models import ctgan as _ctgan
from dpaudit.models import ngram as _ngram
from dpaudit.models import pate_gan as _pate_gan
from dpaudit.models import privbayes as _privbayes
from dpaudit.models import tabular_generators as _tabular_generators
from dpaudit.models import vae as _vae

PACKAGES = ("dpaudit.audits", "dpaudit.attacks", "dpaudit.estimators")
# Public modules outside those packages: the front door and the tightness report above it, and
# the DOMIAS study's generators in modules of their own.
MODULES = ("dpaudit.audit", "dpaudit.tightness", "dpaudit.models.ctgan",
           "dpaudit.models.pate_gan", "dpaudit.models.privbayes")


def public_callables() -> dict[str, Any]:
  """``module.name`` -> object for every public function and class defined in a public module
  of :data:`PACKAGES` or in :data:`MODULES` (names without a leading underscore, defined in
  that module)."""
  out = {}
  names = list(MODULES)
  for package_name in PACKAGES:
    package = importlib.import_module(package_name)
    names += [f"{package_name}.{info.name}" for info in pkgutil.iter_modules(package.__path__)
              if not info.name.startswith("_")]
  for module_name in names:
      module = importlib.import_module(module_name)
      for name, value in vars(module).items():
        if (not name.startswith("_") and callable(value)
            and getattr(value, "__module__", None) == module.__name__):
          out[f"{module.__name__}.{name}"] = value
  return out


class Tripwire:
  """Stands for data, a model or a callback that must not be used before the other arguments
  are validated: any use raises AssertionError (which the tests do not accept)."""

  def _touched(self, *args, **kwargs):
    raise AssertionError("a Tripwire was used before the arguments were validated")

  __getattr__ = __len__ = __iter__ = __getitem__ = __array__ = __call__ = _touched


@dataclasses.dataclass(frozen=True)
class Case:
  function: str  # module.name of the public callable
  label: str
  call: Callable[[], Any]
  match: str  # regex the ValueError's message must contain (the argument's name)


CASES: list[Case] = []


def bad(fn: Callable, label: str, match: str, *args, **kwargs) -> None:
  """Registers ``fn(*args, **kwargs)`` as a call that must raise ValueError matching ``match``."""
  name = f"{fn.__module__}.{fn.__qualname__}"
  CASES.append(Case(name, label, lambda: fn(*args, **kwargs), match))


def bad_call(fn: Callable, label: str, match: str, call: Callable[[], Any]) -> None:
  """Like :func:`bad`, with the call built lazily (arguments that are costly to make)."""
  CASES.append(Case(f"{fn.__module__}.{fn.__qualname__}", label, call, match))


BAD_SCORES = {
    "nan": np.array([0.1, np.nan, 0.3, 0.4]),
    "inf": np.array([0.1, np.inf, 0.3, 0.4]),
    "empty": np.zeros(0),
    "2d": np.zeros((4, 2)),
    "bool": np.array([True, False, True, False]),
    "str": np.array(["0.1", "0.2", "0.3", "0.4"]),
    "complex": np.array([0.1 + 1j, 0.2, 0.3, 0.4]),
}
BAD_COUNTS = {"fraction": 2.5, "bool": True, "str": "3", "negative": -1, "nan": float("nan")}
BAD_SIGNIFICANCE = {"1.5": 1.5, "0": 0.0, "nan": float("nan"), "str": "0.05"}
BAD_INTEGERS = {"fraction": 1000000.5, "float": 4.0, "bool": True, "str": "10", "negative": -1}
KEY = jax.random.key(0)
GOOD_SCORES = np.array([0.1, 0.2, 0.3, 0.4])
MEMBERS = np.array([True, False, True, False])


def score_cases(fn: Callable, argname: str, build: Callable[[Any], tuple[tuple, dict]],
                skip: tuple[str, ...] = ()) -> None:
  """The standard bad score arrays for argument ``argname``; ``build(v)`` -> (args, kwargs)."""
  for label, value in BAD_SCORES.items():
    if label in skip:
      continue
    args, kwargs = build(value)
    bad(fn, f"{argname}-{label}", argname, *args, **kwargs)


def significance_cases(fn: Callable, build: Callable[[Any], tuple[tuple, dict]],
                       argname: str = "significance") -> None:
  for label, value in BAD_SIGNIFICANCE.items():
    args, kwargs = build(value)
    bad(fn, f"{argname}-{label}", argname, *args, **kwargs)


def count_cases(fn: Callable, argname: str, build: Callable[[Any], tuple[tuple, dict]],
                values: dict[str, Any] = BAD_COUNTS, skip: tuple[str, ...] = ()) -> None:
  for label, value in values.items():
    if label in skip:
      continue
    args, kwargs = build(value)
    bad(fn, f"{argname}-{label}", argname, *args, **kwargs)


# Reasons a public callable takes no input that could be bad.
CONTAINER = "a result or data container (NamedTuple/dataclass) holding computed values"
MODULE = "a flax module: its fields are architecture constants, checked where it is built"
OUTPUT = "renders or formats a result the library computed (no user input beyond a path)"
EXEMPT: dict[str, str] = {}


def exempt(reason: str, *names: str) -> None:
  for name in names:
    EXEMPT[name] = reason


# ----------------------------------------------------------------------------------------------
# dpaudit.estimators
# ----------------------------------------------------------------------------------------------

exempt(CONTAINER, *(f"dpaudit.estimators.{n}" for n in (
    "approx_dp.ThresholdCounts", "approx_dp.ScoreEpsilon", "binomial.BetaTails",
    "binomial.LogBinomialTails", "binomial.Interval", "exposure.Exposure",
    "fdp_one_run.FdpOneRunResult", "fdp_one_run.FdpDpsgdBound", "fdp_one_run.FdpDpsgdResult",
    "mia_metrics.RocCurve", "multinomial.TruncatedPoissonMoments",
    "one_run.OneRunResult",
    "panoramia.ThresholdCurve", "panoramia.PanoramiaBounds", "rdp.EpsilonFromRdp",
    "reconstruction.BoundAtOrder", "renyi_cuts.BootstrapBound")))
exempt("a warning category", "dpaudit.estimators.renyi_cuts.BootstrapWarning")
exempt("an internal exact NumPy/scipy path (or its bucketing helper) behind a public estimator "
       "that validates the input before calling it",
       *(f"dpaudit.estimators.{n}" for n in (
           "binomial.host_binomial_cdf", "binomial.host_binomial_logpmf",
           "binomial.host_binomial_sf", "binomial.host_clopper_pearson",
           "binomial.host_cp_lower_limit", "binomial.host_cp_upper_limit",
           "binomial.host_incomplete_beta_tails", "multinomial.cut_rows",
           "multinomial.host_goodman", "multinomial.host_sison_glaz", "multinomial.on_real_rows",
           "multinomial.padded_rows", "multinomial.row_bucket", "one_run.grid_bucket",
           "rdp.on_host", "rdp.row_call")))

# approx_dp
for _name, _i in (("false_positives", 0), ("negatives", 1), ("false_negatives", 2),
                  ("positives", 3)):
  count_cases(approx_dp.epsilon_from_error_counts, _name,
              lambda v, i=_i: (tuple(v if j == i else 10 for j in range(4)), {}))
significance_cases(approx_dp.epsilon_from_error_counts,
                   lambda v: ((1, 10, 1, 10), {"significance": v}))
bad(approx_dp.epsilon_from_error_counts, "delta-1", "delta", 1, 10, 1, 10, delta=1.0)
# Scores may be infinite where only their order matters (not in the ROC metrics, whose first
# threshold is +inf).
ORDERED = ("inf",)
for _fn, _skip in ((approx_dp.epsilon_from_scores, ORDERED), (approx_dp.threshold_counts, ORDERED),
                   (mia_metrics.roc_curve, ()), (mia_metrics.roc_auc, ())):
  score_cases(_fn, "in_scores", lambda v: ((v, GOOD_SCORES), {}), skip=_skip)
  score_cases(_fn, "out_scores", lambda v: ((GOOD_SCORES, v), {}), skip=_skip)
significance_cases(approx_dp.epsilon_from_scores,
                   lambda v: ((GOOD_SCORES, GOOD_SCORES), {"significance": v}))
bad(approx_dp.epsilon_from_scores, "method", "method", GOOD_SCORES, GOOD_SCORES, method="best")
bad(approx_dp.epsilon_from_scores, "delta-nan", "delta", GOOD_SCORES, GOOD_SCORES,
    delta=float("nan"))

# mia_metrics
score_cases(mia_metrics.tpr_at_fpr, "in_scores", lambda v: ((v, GOOD_SCORES, 0.1), {}))
score_cases(mia_metrics.tpr_at_fpr, "out_scores", lambda v: ((GOOD_SCORES, v, 0.1), {}))
bad(mia_metrics.tpr_at_fpr, "fpr-1.5", "fpr", GOOD_SCORES, GOOD_SCORES, 1.5)
bad(mia_metrics.tpr_at_fpr, "fpr-complex", "fpr", GOOD_SCORES, GOOD_SCORES, 0.1 + 1j)
score_cases(mia_metrics.precision_at_top, "scores", lambda v: ((v, MEMBERS, 0.5), {}),
            skip=ORDERED)
bad(mia_metrics.precision_at_top, "is_member-shape", "is_member", GOOD_SCORES, MEMBERS[:3], 0.5)
bad(mia_metrics.precision_at_top, "is_member-str", "is_member", GOOD_SCORES,
    np.array(["a", "b", "a", "b"]), 0.5)
bad(mia_metrics.precision_at_top, "is_member-2", "is_member", GOOD_SCORES, np.array([0, 1, 2, 0]),
    0.5)
bad(mia_metrics.precision_at_top, "fraction-0", "fraction", GOOD_SCORES, MEMBERS, 0.0)

# one_run
score_cases(one_run.one_run_epsilon_from_scores, "scores", lambda v: ((v, MEMBERS), {}),
            skip=ORDERED)
bad(one_run.one_run_epsilon_from_scores, "is_member-shape", "is_member", GOOD_SCORES, MEMBERS[:3])
bad(one_run.one_run_epsilon_from_scores, "is_member-complex", "is_member", GOOD_SCORES,
    MEMBERS + 1j)
significance_cases(one_run.one_run_epsilon_from_scores,
                   lambda v: ((GOOD_SCORES, MEMBERS), {"significance": v}))
bad(one_run.one_run_epsilon_from_scores, "num_guesses-fraction", "num_guesses", GOOD_SCORES,
    MEMBERS, num_guesses=np.array([1.5, 2.0]))
bad(one_run.one_run_epsilon_from_scores, "mode", "mode", GOOD_SCORES, MEMBERS, mode="best")
for _fn, _nargs in ((one_run.one_run_p_value, 3), (one_run.one_run_epsilon, 3),
                    (one_run.one_run_epsilon_ceiling, 2)):
  for _name, _i in (("num_examples", 0), ("num_guesses", 1), ("num_correct", 2))[:_nargs]:
    _extra = (1.0,) if _fn is one_run.one_run_p_value else ()
    count_cases(_fn, _name, lambda v, i=_i, n=_nargs, e=_extra: (
        tuple(v if j == i else (100, 10, 5)[j] for j in range(n)) + e, {}))
significance_cases(one_run.one_run_epsilon, lambda v: ((100, 10, 5), {"significance": v}))
significance_cases(one_run.one_run_epsilon_ceiling, lambda v: ((100, 10), {"significance": v}))
bad(one_run.one_run_p_value, "epsilon-nan", "epsilon", 100, 10, 5, float("nan"))
bad(one_run.one_run_p_value, "epsilon-complex", "epsilon", 100, 10, 5, 1j)
count_cases(one_run.default_guess_grid, "num_examples", lambda v: ((v,), {}))
count_cases(one_run.default_guess_grid, "size", lambda v: ((100, v), {}))

# fdp_one_run
for _fn, _extra in ((fdp_one_run.fdp_one_run_mu, ()), (fdp_one_run.fdp_one_run_epsilon, (1e-6,)),
                    (fdp_one_run.fdp_one_run_p_value, (1.0,))):
  for _name, _i in (("num_examples", 0), ("num_guesses", 1), ("num_correct", 2)):
    count_cases(_fn, _name, lambda v, i=_i, e=_extra: (
        tuple(v if j == i else (100, 10, 5)[j] for j in range(3)) + e, {}))
  bad(_fn, "num_candidates-1", "num_candidates", 100, 10, 5, *_extra, num_candidates=1)
  bad(_fn, "num_candidates-fraction", "num_candidates", 100, 10, 5, *_extra, num_candidates=2.5)
  bad(_fn, "num_candidates-bool", "num_candidates", 100, 10, 5, *_extra, num_candidates=True)
  bad(_fn, "shapes", "shapes", np.ones(3), np.ones(2), 1, *_extra)
significance_cases(fdp_one_run.fdp_one_run_mu, lambda v: ((100, 10, 5), {"significance": v}))
significance_cases(fdp_one_run.fdp_one_run_epsilon,
                   lambda v: ((100, 10, 5, 1e-6), {"significance": v}))
bad(fdp_one_run.fdp_one_run_epsilon, "delta-1", "delta", 100, 10, 5, 1.0)
bad(fdp_one_run.fdp_one_run_epsilon, "delta-nan", "delta", 100, 10, 5, float("nan"))
bad(fdp_one_run.fdp_one_run_p_value, "mu-nan", "mu", 100, 10, 5, float("nan"))
bad(fdp_one_run.fdp_one_run_p_value, "mu-negative", "mu", 100, 10, 5, -0.5)
bad(fdp_one_run.fdp_one_run_p_value, "mu-complex", "mu", 100, 10, 5, 1j)
bad(fdp_one_run.gdp_delta, "mu-negative", "mu", -1.0, 1.0)
bad(fdp_one_run.gdp_delta, "epsilon-nan", "epsilon", 1.0, float("nan"))
bad(fdp_one_run.gdp_epsilon, "mu-inf", "mu", float("inf"), 1e-5)
bad(fdp_one_run.gdp_epsilon, "delta-1", "delta", 1.0, 1.0)
bad(fdp_one_run.gdp_tradeoff_curve, "alphas-1.5", "alphas", 1.0, [0.5, 1.5])
bad(fdp_one_run.gdp_tradeoff_curve, "mu-str", "mu", "1", [0.5])
score_cases(fdp_one_run.fdp_one_run_from_scores, "scores", lambda v: ((v, MEMBERS, 1e-5), {}),
            skip=ORDERED)
bad(fdp_one_run.fdp_one_run_from_scores, "is_member-shape", "is_member", GOOD_SCORES, MEMBERS[:3],
    1e-5)
bad(fdp_one_run.fdp_one_run_from_scores, "is_member-2", "is_member", GOOD_SCORES,
    np.array([0, 1, 2, 0]), 1e-5)
significance_cases(fdp_one_run.fdp_one_run_from_scores,
                   lambda v: ((GOOD_SCORES, MEMBERS, 1e-5), {"significance": v}))
bad(fdp_one_run.fdp_one_run_from_scores, "delta-1", "delta", GOOD_SCORES, MEMBERS, 1.0)
bad(fdp_one_run.fdp_one_run_from_scores, "num_guesses-fraction", "num_guesses", GOOD_SCORES,
    MEMBERS, 1e-5, num_guesses=np.array([1.5, 2.0]))
bad(fdp_one_run.fdp_one_run_from_scores, "num_guesses-too-many", "num_guesses", GOOD_SCORES,
    MEMBERS, 1e-5, num_guesses=np.array([5]))
bad(fdp_one_run.fdp_one_run_from_scores, "mode", "mode", GOOD_SCORES, MEMBERS, 1e-5, mode="best")
bad(fdp_one_run.fdp_one_run_from_scores, "correction", "correction", GOOD_SCORES, MEMBERS, 1e-5,
    correction="holm")

_RUN = {"sampling_rate": 0.1, "num_steps": 10}
for _name, _i in (("num_examples", 0), ("num_guesses", 1), ("num_correct", 2)):
  count_cases(fdp_one_run.fdp_one_run_dpsgd, _name, lambda v, i=_i: (
      tuple(v if j == i else (100, 10, 5)[j] for j in range(3)), {**_RUN, "delta": 1e-6}))
significance_cases(fdp_one_run.fdp_one_run_dpsgd,
                   lambda v: ((100, 10, 5), {**_RUN, "delta": 1e-6, "significance": v}))
significance_cases(fdp_one_run.fdp_one_run_dpsgd_from_scores,
                   lambda v: ((GOOD_SCORES, MEMBERS, 1e-5), {**_RUN, "significance": v}))
for _fn, _args in ((fdp_one_run.fdp_one_run_dpsgd, (100, 10, 5)),
                   (fdp_one_run.fdp_one_run_dpsgd_from_scores, (GOOD_SCORES, MEMBERS))):
  _delta = {"delta": 1e-6} if _fn is fdp_one_run.fdp_one_run_dpsgd else {}
  _args = _args if _delta else _args + (1e-6,)
  bad(_fn, "sampling_rate-0", "sampling_rate", *_args, **_delta, sampling_rate=0.0, num_steps=10)
  bad(_fn, "sampling_rate-nan", "sampling_rate", *_args, **_delta, sampling_rate=float("nan"),
      num_steps=10)
  bad(_fn, "num_steps-0", "num_steps", *_args, **_delta, sampling_rate=0.1, num_steps=0)
  bad(_fn, "num_steps-fraction", "num_steps", *_args, **_delta, sampling_rate=0.1,
      num_steps=2.5)
  bad(_fn, "num_steps-bool", "num_steps", *_args, **_delta, sampling_rate=0.1, num_steps=True)
  bad(_fn, "adjacency", "adjacency", *_args, **_delta, **_RUN, adjacency="swap")
  bad(_fn, "pld_discretization-0", "pld_discretization", *_args, **_delta, **_RUN,
      pld_discretization=0.0)
bad(fdp_one_run.fdp_one_run_dpsgd, "delta-1", "delta", 100, 10, 5, **_RUN, delta=1.0)
bad(fdp_one_run.fdp_one_run_dpsgd, "delta-array", "delta", 100, 10, 5, **_RUN, delta=[1e-6, 1e-5])
bad(fdp_one_run.fdp_one_run_dpsgd, "num_candidates-1", "num_candidates", 100, 10, 5, **_RUN,
    delta=1e-6, num_candidates=1)
bad(fdp_one_run.fdp_one_run_dpsgd, "shapes-2d", "dimension", 100, np.ones((2, 2)), 1, **_RUN,
    delta=1e-6)
score_cases(fdp_one_run.fdp_one_run_dpsgd_from_scores, "scores",
            lambda v: ((v, MEMBERS, 1e-5), _RUN), skip=ORDERED)
bad(fdp_one_run.fdp_one_run_dpsgd_from_scores, "delta-1", "delta", GOOD_SCORES, MEMBERS, 1.0,
    **_RUN)
bad(fdp_one_run.fdp_one_run_dpsgd_from_scores, "correction", "correction", GOOD_SCORES, MEMBERS,
    1e-5, **_RUN, correction="holm")

# binomial
count_cases(binomial.clopper_pearson, "successes", lambda v: ((v, 10), {}))
count_cases(binomial.clopper_pearson, "trials", lambda v: ((1, v), {}))
significance_cases(binomial.clopper_pearson, lambda v: ((1, 10), {"significance": v}))
bad(binomial.clopper_pearson, "alternative", "alternative", 1, 10, alternative="both")
for _fn in (binomial.binomial_sf, binomial.binomial_cdf, binomial.binomial_logpmf):
  count_cases(_fn, "k", lambda v: ((v, 10, 0.5), {}), skip=("negative",))
  count_cases(_fn, "n", lambda v: ((1, v, 0.5), {}))
  bad(_fn, "p-1.5", "p", 1, 10, 1.5)
  bad(_fn, "p-complex", "p", 1, 10, 0.5 + 1j)
for _fn in (binomial.incomplete_beta_tails, binomial.regularized_incomplete_beta):
  bad(_fn, "a-0", "a", 0.0, 1.0, 0.5)
  bad(_fn, "b-nan", "b", 1.0, float("nan"), 0.5)
  bad(_fn, "x-str", "x", 1.0, 1.0, "0.5")
  bad(_fn, "x-complex", "x", 1.0, 1.0, 0.5j)
for _fn in (binomial.log_binomial_tails, binomial.log_binomial_tails_and_density):
  bad(_fn, "k-fraction", "k", 2.5, 10, 0.5)
  bad(_fn, "n-bool", "n", 1, True, 0.5)
  bad(_fn, "p-1.5", "p", 1, 10, 1.5)
for _fn in (binomial.cp_lower_limit, binomial.cp_upper_limit):
  bad(_fn, "k-fraction", "k", 2.5, 10, -3.0)
  bad(_fn, "n-str", "n", 1, "10", -3.0)
  bad(_fn, "log_tail-positive", "log_tail", 1, 10, 1.0)
bad(binomial.stirling_remainder, "z-negative", "z", -1.0)
bad(binomial.stirling_remainder, "z-complex", "z", 1j)
bad(binomial.binomial_deviance, "k-nan", "k", float("nan"), 1.0)
bad(binomial.binomial_deviance, "m-0", "m", 1.0, 0.0)
bad(binomial.log_beta_prefactor, "a-0", "a", 0.0, 1.0, 0.5)
bad(binomial.log_beta_prefactor, "x-1.5", "x", 1.0, 1.0, 1.5)

# exposure
bad(exposure.exposure_exact, "canary-nan", "canary_log_prob", float("nan"), GOOD_SCORES)
bad(exposure.exposure_exact, "candidates-empty", "candidate_log_probs", -1.0, np.zeros(0))
bad(exposure.exposure_exact, "candidates-bool", "candidate_log_probs", -1.0, MEMBERS)
bad(exposure.exposure_exact, "candidates-complex", "candidate_log_probs", -1.0, GOOD_SCORES * 1j)
bad(exposure.exposure_sampled, "samples-str", "sample_log_probs", -1.0, BAD_SCORES["str"])
bad(exposure.exposure_sampled, "samples-inf", "sample_log_probs", -1.0, -BAD_SCORES["inf"])
significance_cases(exposure.exposure_sampled, lambda v: ((-1.0, -GOOD_SCORES), {"significance": v}))

# multinomial
for _fn in (multinomial.goodman_intervals, multinomial.sison_glaz_intervals,
            multinomial.check_interval_inputs):
  count_cases(_fn, "counts", lambda v: ((np.array([3, v, 2], dtype=object),
                                         *((0.05,) if _fn is multinomial.check_interval_inputs
                                           else ())), {}), skip=("nan",))
  bad(_fn, "counts-array-fraction", "counts", np.array([3.0, 2.5, 2.0]), 0.05)
  bad(_fn, "counts-array-bool", "counts", np.array([True, False, True]), 0.05)
  bad(_fn, "counts-one-cell", "counts", np.array([3]), 0.05)
  significance_cases(_fn, lambda v: ((np.array([3, 2, 1]), v), {}))
bad(multinomial.simultaneous_intervals, "method", "method", "wald", np.array([3, 2, 1]), 0.05)
bad(multinomial.simultaneous_intervals, "counts", "counts", "goodman", np.array([3, -2, 1]), 0.05)
bad(multinomial.truncated_poisson_moments, "rate-negative", "rate", -1.0, 0.0, 3.0)
bad(multinomial.truncated_poisson_moments, "lower-fraction", "lower", 1.0, 0.5, 3.0)
bad(multinomial.truncated_poisson_moments, "upper-nan", "upper", 1.0, 0.0, float("nan"))

# rdp
_RDP, _ORDERS = np.array([0.1, 0.2, 0.3]), np.array([2.0, 4.0, 8.0])
bad(rdp.check_rdp_curve, "rdp-nan", "rdp", np.array([0.1, np.nan, 0.3]), _ORDERS)
bad(rdp.check_rdp_curve, "orders-1", "orders", _RDP, np.array([1.0, 2.0, 3.0]))
bad(rdp.compose_rdp, "num_compositions-fraction", "num_compositions", _RDP, 2.5)
bad(rdp.compose_rdp, "num_compositions-bool", "num_compositions", _RDP, True)
bad(rdp.compose_rdp, "rdp-complex", "rdp", _RDP * 1j)
bad(rdp.compose_rdp, "rdp-str", "rdp", np.array(["0.1"]))
for _fn in (rdp.rdp_to_epsilon, rdp.balle_epsilon_per_order):
  bad(_fn, "rdp-negative", "rdp", -_RDP, _ORDERS, 1e-5)
  bad(_fn, "orders-shape", "orders", _RDP, _ORDERS[:2], 1e-5)
  bad(_fn, "delta-0", "delta", _RDP, _ORDERS, 0.0)
  bad(_fn, "delta-str", "delta", _RDP, _ORDERS, "1e-5")

# reconstruction
for _fn in (reconstruction_est.reconstruction_leakage_bound,
            reconstruction_est.traditional_reconstruction_bound,
            reconstruction_est.posterior_bound):
  bad(_fn, "p0-0", "p0", _RDP, _ORDERS, 0.0)
  bad(_fn, "p0-and-log_p0", "p0", _RDP, _ORDERS, 0.5, log_p0=-1.0)
  bad(_fn, "log_p0-positive", "log_p0", _RDP, _ORDERS, log_p0=1.0)
  bad(_fn, "rdp-bool", "rdp", _RDP > 0, _ORDERS, 0.5)
  bad(_fn, "orders-nan", "orders", _RDP, np.array([2.0, np.nan, 8.0]), 0.5)
bad(reconstruction_est.leakage_bits, "secret_bits-negative", "secret_bits", _RDP, _ORDERS, -1.0)
bad(reconstruction_est.leakage_bits, "secret_bits-inf", "secret_bits", _RDP, _ORDERS, np.inf)
bad(reconstruction_est.leakage_bits, "secret_bits-complex", "secret_bits", _RDP, _ORDERS, 1j)

# renyi_cuts
for _fn in (renyi_cuts.binary_renyi_divergence,):
  bad(_fn, "p1-1.5", "p1", 1.5, 0.5, 2.0)
  bad(_fn, "p2-nan", "p2", 0.5, float("nan"), 2.0)
  bad(_fn, "orders-1", "orders", 0.5, 0.5, 1.0)
bad(renyi_cuts.renyi_divergence, "p-negative", "p", np.array([-0.5, 1.5]), np.array([0.5, 0.5]),
    2.0)
bad(renyi_cuts.renyi_divergence, "q-shape", "q", np.array([0.5, 0.5]), np.array([0.2, 0.3, 0.5]),
    2.0)
bad(renyi_cuts.renyi_divergence, "q-str", "q", np.array([0.5, 0.5]), np.array(["a", "b"]), 2.0)
significance_cases(renyi_cuts.per_sample_significance, lambda v: ((v,), {}))
for _fn in (renyi_cuts.renyi_two_cut_lower_bound,):
  count_cases(_fn, "counts_p", lambda v: ((v, 10, 1, 10, 2.0), {}))
  count_cases(_fn, "trials_q", lambda v: ((1, 10, 1, v, 2.0), {}))
  significance_cases(_fn, lambda v: ((1, 10, 1, 10, 2.0), {"significance": v}))
  bad(_fn, "orders-inf", "orders", 1, 10, 1, 10, np.inf)
for _fn in (renyi_cuts.renyi_two_cut_bootstrap, renyi_cuts.renyi_two_cut_bootstrap_lower_bound):
  count_cases(_fn, "counts_q", lambda v, f=_fn: ((KEY, 1, 10, v, 10, 2.0), {}))
  count_cases(_fn, "num_bootstrap", lambda v: ((KEY, 1, 10, 1, 10, 2.0), {"num_bootstrap": v}),
              values={**BAD_INTEGERS, "huge": 2**62})
  significance_cases(_fn, lambda v: ((KEY, 1, 10, 1, 10, 2.0), {"significance": v}))
  bad(_fn, "key", "key", 0, 1, 10, 1, 10, 2.0)
for _fn in (renyi_cuts.renyi_k_cut_bootstrap, renyi_cuts.renyi_k_cut_bootstrap_lower_bound):
  count_cases(_fn, "counts_p", lambda v: ((KEY, np.array([3, v, 1], dtype=object),
                                           np.array([1, 2, 3]), 2.0), {}), skip=("nan",))
  count_cases(_fn, "num_bootstrap", lambda v: ((KEY, np.array([3, 2, 1]), np.array([1, 2, 3]),
                                                2.0), {"num_bootstrap": v}),
              values={**BAD_INTEGERS, "huge": 2**62})
  bad(_fn, "counts_q-cells", "counts", KEY, np.array([3, 2, 1]), np.array([1, 2]), 2.0)
bad(renyi_cuts.renyi_k_cut_lower_bound, "counts_q-fraction", "counts_q", np.array([3, 2, 1]),
    np.array([1.5, 2, 3]), 2.0)
bad(renyi_cuts.renyi_k_cut_lower_bound, "counts_p-bool", "counts_p", np.array([True, False]),
    np.array([1, 2]), 2.0)
bad(renyi_cuts.renyi_k_cut_lower_bound, "method", "method", np.array([3, 2, 1]),
    np.array([1, 2, 3]), 2.0, method="wald")
significance_cases(renyi_cuts.renyi_k_cut_lower_bound,
                   lambda v: ((np.array([3, 2, 1]), np.array([1, 2, 3]), 2.0), {"significance": v}))
bad(renyi_cuts.renyi_two_cut_from_intervals, "p_lower-nan", "p_lower", float("nan"), 0.5, 0.1,
    0.2, 2.0)
bad(renyi_cuts.renyi_two_cut_from_intervals, "q_upper-str", "q_upper", 0.1, 0.5, 0.1, "0.2", 2.0)
bad(renyi_cuts.renyi_two_cut_from_intervals, "p_upper-below-lower", "p_upper", 0.5, 0.1, 0.1, 0.2,
    2.0)
bad(renyi_cuts.empirical_bernstein_interval, "values-1.5", "values", np.array([0.5, 1.5]))
bad(renyi_cuts.empirical_bernstein_interval, "values-one", "values", np.array([0.5]))
bad(renyi_cuts.empirical_bernstein_interval, "values-str", "values", BAD_SCORES["str"])
significance_cases(renyi_cuts.empirical_bernstein_interval,
                   lambda v: ((np.array([0.5, 0.25]),), {"significance": v}))

# panoramia (the estimator; the lead's file)
score_cases(panoramia_est.panoramia_bounds, "baseline_scores",
            lambda v: ((v, GOOD_SCORES, MEMBERS), {}), skip=ORDERED + ("2d",))
score_cases(panoramia_est.panoramia_bounds, "mia_scores", lambda v: ((GOOD_SCORES, v, MEMBERS), {}),
            skip=ORDERED)
bad(panoramia_est.panoramia_bounds, "is_member-shape", "is_member", GOOD_SCORES, GOOD_SCORES,
    MEMBERS[:3])
significance_cases(panoramia_est.panoramia_bounds,
                   lambda v: ((GOOD_SCORES, GOOD_SCORES, MEMBERS), {"significance": v}))
count_cases(panoramia_est.panoramia_bounds, "min_predictions",
            lambda v: ((GOOD_SCORES, GOOD_SCORES, MEMBERS), {"min_predictions": v}),
            values=BAD_INTEGERS)


# ----------------------------------------------------------------------------------------------
# dpaudit.attacks
# ----------------------------------------------------------------------------------------------

exempt(CONTAINER, "dpaudit.attacks.density.KdeModel", "dpaudit.attacks.density.FlowModel",
       "dpaudit.attacks.panoramia.FittedClassifier",
       "dpaudit.attacks.reconstruction.GeneratedLines")
exempt(MODULE, *(f"dpaudit.attacks.panoramia.{n}" for n in (
    "ImageEncoder", "VectorEncoder", "TokenEncoder", "MembershipNet")))

ROWS = np.random.default_rng(0).normal(size=(12, 3))
BAD_ROWS = {
    "nan": np.where(np.arange(36).reshape(12, 3) == 4, np.nan, ROWS),
    "inf": np.where(np.arange(36).reshape(12, 3) == 4, np.inf, ROWS),
    "1d": ROWS[:, 0],
    "str": ROWS.astype(str),
    "complex": ROWS + 0j,
}


def rows_cases(fn: Callable, argname: str, build: Callable[[Any], tuple[tuple, dict]],
               skip: tuple[str, ...] = ()) -> None:
  for label, value in BAD_ROWS.items():
    if label not in skip:
      args, kwargs = build(value)
      bad(fn, f"{argname}-{label}", argname, *args, **kwargs)


rows_cases(density.check_columns, "data", lambda v: ((v,), {}))
bad(density.check_columns, "data-one-row", "data", ROWS[:1])
bad(density.check_columns, "data-constant-column", "column 1", np.c_[ROWS[:, :1], np.ones(12)])
count_cases(density.scott_factor, "num_points", lambda v: ((v, 3), {}))
count_cases(density.scott_factor, "dim", lambda v: ((10, v), {}))
rows_cases(density.fit_kde, "data", lambda v: ((v,), {}))
bad(density.fit_kde, "eigenvalue_floor-0", "eigenvalue_floor", ROWS, eigenvalue_floor=0.0)
bad(density.fit_kde, "eigenvalue_floor-str", "eigenvalue_floor", ROWS, eigenvalue_floor="1e-6")
_KDE = None


def _kde():
  global _KDE
  if _KDE is None:
    _KDE = density.fit_kde(ROWS)
  return _KDE


for _label, _value in BAD_ROWS.items():
  bad_call(density.kde_log_density, f"x-{_label}", "x",
           lambda v=_value: density.kde_log_density(_kde(), v))
bad_call(density.kde_log_density, "x-columns", "x",
         lambda: density.kde_log_density(_kde(), ROWS[:, :2]))
for _label, _value in BAD_INTEGERS.items():
  bad_call(density.kde_log_density, f"chunk_size-{_label}", "chunk_size",
           lambda v=_value: density.kde_log_density(_kde(), ROWS, chunk_size=v))
bad(density.FlowConfig, "kind", "kind", kind="realnvp")
count_cases(density.FlowConfig, "flow_layers", lambda v: ((), {"flow_layers": v}),
            values=BAD_INTEGERS)
count_cases(density.FlowConfig, "batch_size", lambda v: ((), {"batch_size": v}),
            values={**BAD_INTEGERS, "zero": 0})
bad(density.FlowConfig, "learning_rate-nan", "learning_rate", learning_rate=float("nan"))
bad(density.FlowConfig, "learning_rate-inf", "learning_rate", learning_rate=float("inf"))
bad(density.FlowConfig, "polyak-1", "polyak", polyak=1.0)
bad(density.FlowConfig, "amsgrad-str", "amsgrad", amsgrad="yes")
bad(density.FlowConfig, "validation_fraction-0.9", "validation_fraction", validation_fraction=0.9)
rows_cases(density.fit_flow, "data", lambda v: ((KEY, v), {}))
bad(density.fit_flow, "key", "key", 0, ROWS)
bad(density.fit_flow, "config", "config", KEY, ROWS, config="maf")
bad(density.fit_flow, "discrete_columns", "discrete_columns", KEY, ROWS, discrete_columns=[5])
bad(density.fit_flows, "datas-2d", "datas", jax.random.split(KEY, 2), ROWS)
bad(density.fit_flows, "keys-count", "keys", jax.random.split(KEY, 3), np.stack([ROWS, ROWS]))
bad(density.fit_flows, "datas-nan", "datas", jax.random.split(KEY, 2),
    np.stack([ROWS, BAD_ROWS["nan"]]))
bad(density.flow_log_density, "chunk_size", "chunk_size", Tripwire(), ROWS, chunk_size=0)
bad(density.flow_log_density, "model", "model", _kde, ROWS)
bad(density.sample_flow, "num_samples", "num_samples", KEY, Tripwire(), 2.5)
bad(density.sample_flow, "key", "key", "key", Tripwire(), 3)

rows_cases(domias_attacks.check_rows, "x", lambda v: (("x", v), {}), skip=("inf",))
bad(domias_attacks.check_rows, "x-inf", "x", "x", BAD_ROWS["inf"])
bad(domias_attacks.check_rows, "x-columns", "x", "x", ROWS, 2)
bad(domias_attacks.gan_leaks_cal_scores, "squared", "squared", ROWS, ROWS, ROWS, squared="yes")
bad(domias_attacks.fit_logan_d1, "key", "key", 0, ROWS, ROWS)
rows_cases(domias_attacks.fit_logan_d1, "reference", lambda v: ((KEY, ROWS, v), {}),
           skip=("1d",))
bad(domias_attacks.fit_logan_d1, "config", "config", KEY, ROWS, ROWS, config="adam")
count_cases(domias_attacks.LoganD1Config, "steps", lambda v: ((), {"steps": v}),
            values=BAD_INTEGERS)
bad(domias_attacks.LoganD1Config, "hidden_sizes", "hidden_sizes", hidden_sizes=(0,))
bad(domias_attacks.LoganD1Config, "learning_rate", "learning_rate", learning_rate=0.0)
bad(domias_attacks.fit_logan_d1_fixed, "config", "config", KEY, ROWS, ROWS, config="adam")
bad(domias_attacks.fit_logan_d1_fixed, "num_scored", "num_scored", KEY, ROWS, ROWS,
    num_scored=0)
rows_cases(domias_attacks.fit_logan_d1_fixed, "synthetic", lambda v: ((KEY, v, ROWS), {}))
bad(domias_attacks.logan_d1_fixed_scores, "key", "key", 0, ROWS, ROWS, ROWS)
rows_cases(domias_attacks.logan_d1_fixed_scores, "x", lambda v: ((KEY, v, ROWS, ROWS), {}),
           skip=("1d",))
count_cases(domias_attacks.CtganCriticConfig, "epochs", lambda v: ((), {"epochs": v}),
            values=BAD_INTEGERS)
bad(domias_attacks.CtganCriticConfig, "dropout", "dropout", dropout=1.0)
bad(domias_attacks.CtganCriticConfig, "critic_hidden", "critic_hidden", critic_hidden=())
bad(domias_attacks.fit_ctgan_critic, "key", "key", 0, ROWS)
bad(domias_attacks.fit_ctgan_critic, "config", "config", KEY, ROWS,
    _tabular_generators.GanConfig())
rows_cases(domias_attacks.fit_ctgan_critic, "synthetic", lambda v: ((KEY, v), {}))
bad(domias_attacks.ctgan_critic_scores, "fitted", "fitted", "critic", ROWS)
rows_cases(domias_attacks.gaussian_prior_log_density, "x",
           lambda v: ((v, np.zeros(3), np.ones(3)), {}), skip=("1d",))
bad(domias_attacks.gaussian_prior_log_density, "std-0", "std", ROWS, np.zeros(3),
    np.array([1.0, 0.0, 1.0]))
bad(domias_attacks.gaussian_prior_log_density, "mean-shape", "mean and std", ROWS,
    np.zeros(2), np.ones(2))
exempt(CONTAINER, "dpaudit.attacks.domias.FixedStepClassifier",
       "dpaudit.attacks.domias.CtganCritic")
bad(domias_audit.DomiasConfig, "baselines", "baselines", baselines="code")
bad(domias_audit.DomiasConfig, "reference_density", "reference_density",
    reference_density="flat")
bad(domias_audit.DomiasConfig, "prior-attacks", "no reference data",
    reference_density="gaussian_prior", attacks=("domias", "logan_d1"))
bad(domias_audit.DomiasConfig, "prior_columns", "prior_columns", prior_columns=(0, 0))
bad(domias_audit.DomiasConfig, "shift_column", "shift_column", shift_column=-1)
bad(domias_audit.DomiasConfig, "reference_shift", "reference_shift", reference_shift=1.5)
bad(domias_audit.DomiasConfig, "shift-bernoulli", "membership", shift_column=0,
    membership="bernoulli")
bad(domias_audit.DomiasConfig, "logan_config-authors", "logan_config", baselines="authors_code",
    logan_config={"iterations": 3})
bad(domias_audit.split_data, "shift-short", "records with A = 1", KEY,
    np.c_[ROWS, np.arange(12) % 2], domias_audit.DomiasConfig(
        num_members=4, num_reference=4, num_synthetic=4, num_holdout=0, shift_column=3))
rows_cases(domias_audit.public_binning, "data", lambda v: ((v,), {}))
bad(domias_audit.public_binning, "bins", "bins", ROWS, bins=0)
bad(domias_audit.public_binning, "tail", "tail", ROWS, tail=0.5)
bad(domias_audit.public_binning, "constant", "column 0", np.c_[np.ones(12), ROWS])
bad(domias_audit.MstGeneratorConfig, "epsilon", "epsilon", epsilon=0.0)
bad(domias_audit.MstGeneratorConfig, "edges", "edges", edges=((1.0, 0.0),))
bad(domias_audit.MstGeneratorConfig, "edges-str", "edges", edges="0,1")
for _name, _value in (("baselines", "code"), ("knowledge", ("oracle",)), ("knowledge", ()),
                      ("shift_column", "age_group"), ("shift_shares", (1.5,)),
                      ("shift_shares", ()), ("shift_non_members", "all"),
                      ("generator_epochs", -1), ("mst_bins", 0), ("generators", ("gpt",))):
  bad(domias_studies.StudyConfig, f"{_name}-{_value}", _name, **{_name: _value})
rows_cases(domias_attacks.standardise, "reference", lambda v: ((v, ROWS), {}))
bad(domias_attacks.standardise, "arrays-columns", r"arrays\[0\]", ROWS, ROWS[:, :2])
bad(domias_attacks.standardise, "reference-constant", "column 0", np.c_[np.ones(12), ROWS])
for _fn, _extra in ((domias_attacks.nearest_distances, ()), (domias_attacks.gan_leaks_scores, ()),
                    (domias_attacks.gan_leaks_cal_scores, (ROWS,)),
                    (domias_attacks.mc_scores, ())):
  rows_cases(_fn, "x", lambda v, e=_extra: ((v, ROWS) + e, {}))
  rows_cases(_fn, "synthetic" if _fn is not domias_attacks.nearest_distances else "points",
             lambda v, e=_extra: ((ROWS, v) + e, {}), skip=("1d",))
bad(domias_attacks.gan_leaks_cal_scores, "reference_synthetic-nan", "reference_synthetic", ROWS,
    ROWS, BAD_ROWS["nan"])
count_cases(domias_attacks.nearest_distances, "chunk_size", lambda v: ((ROWS, ROWS, v), {}),
            values=BAD_INTEGERS)
bad(domias_attacks.mc_scores, "num_components-4", "num_components", ROWS, ROWS, num_components=4)
bad(domias_attacks.mc_scores, "num_components-float", "num_components", ROWS, ROWS,
    num_components=2.0)
bad(domias_attacks.mc_scores, "radius-negative", "radius", ROWS, ROWS, radius=-1.0)
bad(domias_attacks.mc_scores, "radius-nan", "radius", ROWS, ROWS, radius=float("nan"))
bad(domias_attacks.mc_scores, "chunk_size-0", "chunk_size", ROWS, ROWS, chunk_size=0)
for _fn, _others in ((domias_attacks.domias_scores, (GOOD_SCORES,)),
                     (domias_attacks.eq1_scores, ())):
  score_cases(_fn, "log_p_synthetic", lambda v, o=_others: ((v,) + o, {}), skip=("inf", "empty"))
score_cases(domias_attacks.domias_scores, "log_p_reference", lambda v: ((GOOD_SCORES, v), {}),
            skip=("inf", "empty"))
bad(domias_attacks.domias_scores, "log_p_reference-shape", "log_p_reference", GOOD_SCORES,
    GOOD_SCORES[:3])
bad(domias_attacks.logan_d1_scores, "key", "key", 0, ROWS, ROWS, ROWS)
rows_cases(domias_attacks.logan_d1_scores, "reference", lambda v: ((KEY, ROWS, ROWS, v), {}),
           skip=("1d",))
bad(domias_attacks.logan_d1_scores, "hidden_sizes", "hidden_sizes", KEY, ROWS, ROWS, ROWS,
    hidden_sizes=(0,))
bad(domias_attacks.logan_d1_scores, "config", "config", KEY, ROWS, ROWS, ROWS, config="adam")
bad(domias_attacks.logan_0_scores, "key", "key", None, ROWS, ROWS)
rows_cases(domias_attacks.logan_0_scores, "synthetic", lambda v: ((KEY, ROWS, v), {}))
bad(domias_attacks.logan_0_scores, "config", "config", KEY, ROWS, ROWS, config="wgan")

count_cases(panoramia_attacks.ClassifierConfig, "epochs", lambda v: ((), {"epochs": v}),
            values=BAD_INTEGERS)
bad(panoramia_attacks.ClassifierConfig, "learning_rate-0", "learning_rate", learning_rate=0.0)
bad(panoramia_attacks.ClassifierConfig, "validation_fraction-nan", "validation_fraction",
    validation_fraction=float("nan"))
score_cases(panoramia_attacks.loss_features, "losses", lambda v: ((v,), {}), skip=("empty",))
count_cases(panoramia_attacks.no_side, "num_examples", lambda v: ((v,), {}), values=BAD_INTEGERS)
_IMAGES = np.zeros((4, 8, 8, 1), np.float32)
bad(panoramia_attacks.fit_classifier, "key", "key", 0, Tripwire(), _IMAGES,
    panoramia_attacks.no_side(4), MEMBERS)
bad(panoramia_attacks.fit_classifier, "is_member-2", "is_member", KEY, Tripwire(), _IMAGES,
    panoramia_attacks.no_side(4), np.array([0, 1, 2, 1]))
bad(panoramia_attacks.fit_classifier, "is_member-one-class", "is_member", KEY, Tripwire(),
    _IMAGES, panoramia_attacks.no_side(4), np.ones(4))
bad(panoramia_attacks.fit_classifier, "side-rows", "side", KEY, Tripwire(), _IMAGES,
    panoramia_attacks.no_side(3), MEMBERS)
bad(panoramia_attacks.fit_classifier, "side-nan", "side", KEY, Tripwire(), _IMAGES,
    np.full((4, 1), np.nan), MEMBERS)
bad(panoramia_attacks.fit_classifier, "inputs-nan", "inputs", KEY, Tripwire(),
    np.full((4, 8, 8, 1), np.nan), panoramia_attacks.no_side(4), MEMBERS)
bad(panoramia_attacks.fit_classifier, "config", "config", KEY, Tripwire(), _IMAGES,
    panoramia_attacks.no_side(4), MEMBERS, config="adam")
bad(panoramia_attacks.classifier_scores, "side-rows", "side", Tripwire(), _IMAGES,
    panoramia_attacks.no_side(3))
bad(panoramia_attacks.classifier_scores, "batch_size-0", "batch_size", Tripwire(), _IMAGES,
    panoramia_attacks.no_side(4), batch_size=0)

_LOGITS, _TARGETS = np.zeros((2, 5, 7)), np.zeros((2, 5), np.int32)
for _fn in (lazy.lazy_log_probs, lazy.sequence_log_prob):
  bad(_fn, "top_k-fraction", "top_k", _LOGITS, _TARGETS, top_k=1.5)
  bad(_fn, "top_k-negative", "top_k", _LOGITS, _TARGETS, top_k=-1)
  bad(_fn, "temperature-0", "temperature", _LOGITS, _TARGETS, temperature=0.0)
  bad(_fn, "temperature-inf", "temperature", _LOGITS, _TARGETS, temperature=np.inf)
  bad(_fn, "logits-nan", "logits", np.full((2, 5, 7), np.nan), _TARGETS)
  bad(_fn, "targets-float", "targets", _LOGITS, _TARGETS + 0.5)
  bad(_fn, "targets-vocabulary", "targets", _LOGITS, _TARGETS + 7)
  bad(_fn, "targets-shape", "targets", _LOGITS, _TARGETS[:, :4])
  bad(_fn, "allowed-shape", "allowed", _LOGITS, _TARGETS, allowed=np.ones(3, bool))
bad(lazy.sample_lines, "key", "key", 0, Tripwire(), 2, 5, 2, 0, 1)
count_cases(lazy.sample_lines, "num_samples", lambda v: ((KEY, Tripwire(), v, 5, 2, 0, 1), {}),
            values={**BAD_INTEGERS, "huge": 2**62})
count_cases(lazy.sample_lines, "max_length", lambda v: ((KEY, Tripwire(), 2, v, 2, 0, 1), {}),
            values=BAD_INTEGERS)
count_cases(lazy.sample_lines, "context_size", lambda v: ((KEY, Tripwire(), 2, 5, v, 0, 1), {}),
            values=BAD_INTEGERS)
bad(lazy.sample_lines, "bos-float", "bos", KEY, Tripwire(), 2, 5, 2, 0.5, 1)
bad(lazy.sample_lines, "eos-negative", "eos", KEY, Tripwire(), 2, 5, 2, 0, -1)
bad(lazy.sample_lines, "temperature-nan", "temperature", KEY, Tripwire(), 2, 5, 2, 0, 1,
    temperature=float("nan"))


# ----------------------------------------------------------------------------------------------
# dpaudit.audits (functions that train or run Monte Carlo are driven with bad settings only; the
# data they would use is a Tripwire, so validating after any work fails the case)
# ----------------------------------------------------------------------------------------------


def _audit(prefix: str, *names: str) -> tuple[str, ...]:
  return tuple(f"dpaudit.audits.{prefix}.{n}" for n in names)


exempt(CONTAINER, *_audit("domias", "Split", "DomiasResult"),
       *_audit("dpsgd", "AuditData", "DPSGDAuditResult"),
       *_audit("dpsgd_grid", "DPSGDGridResult"), *_audit("language_model", "ScoredLine"),
       *_audit("lm_reconstruction", "Lines", "SecrecyPoint", "LineScores", "SetSummary",
               "AtRiskAnalysis", "LMReconstructionResult"),
       *_audit("noisy_argmax", "DirectionResult", "NoisyArgmaxAuditResult"),
       *_audit("panoramia", "Examples", "Modality", "Curve", "PanoramiaResult", "AuditSetup",
               "OneRunBounds"),
       *_audit("panoramia_modalities", "ModelSpec"),
       *_audit("private_prediction", "QueryBounds", "PredictionAuditResult", "ModelDivergence",
               "RaoBlackwellTwoCut"),
       *_audit("reconstruction", "NgramCanaryPoint", "NgramCanaryResult"),
       *_audit("reconstruction_bounds", "BitsBounds", "SecretLengthCurves", "StepCountCurves",
               "ReconstructionBoundsResult"),
       "dpaudit.tightness.TightnessRow", "dpaudit.tightness.TightnessResult")
exempt(MODULE, *_audit("panoramia_modalities", "TabularMLP", "TabularEncoder"))
exempt(OUTPUT, *_audit("dpsgd_grid", "table", "cell_label", "progress_line", "cell_message",
                       "reported_epsilon", "summarise", "fdp_epsilon"),
       *_audit("lm_reconstruction", "table"),
       "dpaudit.tightness.table", *_audit("noisy_argmax", "format_epsilon"))
exempt("takes no arguments", *_audit("domias", "generator_names"),
       *_audit("panoramia_modalities", "adult_binnings"),
       *_audit("reconstruction_bounds", "default_orders"))

# noisy_argmax
for _label, _value in (("inf", np.inf), ("nan", float("nan")), ("0", 0.0), ("str", "2"),
                       ("bool", True)):
  bad(argmax_audit.NoisyArgmaxAuditConfig, f"sigma-{_label}", "sigma", sigma=_value)
  bad(argmax_audit.check_audit_settings, f"sigma-{_label}", "sigma", _value, 100, (2.0,), 0.05,
      "goodman")
count_cases(argmax_audit.NoisyArgmaxAuditConfig, "num_trials", lambda v: ((), {"num_trials": v}),
            values=BAD_INTEGERS)
count_cases(argmax_audit.NoisyArgmaxAuditConfig, "num_bootstrap",
            lambda v: ((), {"num_bootstrap": v}), values={**BAD_INTEGERS, "huge": 2**62})
count_cases(argmax_audit.NoisyArgmaxAuditConfig, "chunk_size", lambda v: ((), {"chunk_size": v}),
            values={**BAD_INTEGERS, "huge": 2**62})
significance_cases(argmax_audit.NoisyArgmaxAuditConfig, lambda v: ((), {"significance": v}))
bad(argmax_audit.NoisyArgmaxAuditConfig, "histogram-str", "histogram", histogram=("14", "12"),
    neighbor=(13.0, 13.0))
bad(argmax_audit.NoisyArgmaxAuditConfig, "histogram-complex", "histogram", histogram=(14j, 12.0),
    neighbor=(13.0, 13.0))
bad(argmax_audit.NoisyArgmaxAuditConfig, "neighbor-nan", "neighbor", histogram=(14.0, 12.0),
    neighbor=(np.nan, 13.0))
bad(argmax_audit.NoisyArgmaxAuditConfig, "orders-1", "orders", orders=(1.0, 2.0))
bad(argmax_audit.NoisyArgmaxAuditConfig, "k_cut_method", "k_cut_method", k_cut_method="wald")
count_cases(argmax_audit.check_audit_settings, "num_trials",
            lambda v: ((1.0, v, (2.0,), 0.05, "goodman"), {}), values=BAD_INTEGERS)
_COUNTS = np.array([5, 3, 2])
count_cases(argmax_audit.likelihood_ratio_prefix_sets, "counts_p",
            lambda v: ((np.array([5, v, 2], dtype=object), _COUNTS), {}),
            skip=("nan", "fraction"))  # expected counts may be fractional
bad(argmax_audit.likelihood_ratio_prefix_sets, "counts_p-inf", "counts_p",
    np.array([5.0, np.inf, 2.0]), _COUNTS)
bad(argmax_audit.likelihood_ratio_prefix_sets, "counts_q-shape", "counts_q", _COUNTS, _COUNTS[:2])
bad(argmax_audit.select_two_cut_sets, "sel_q-negative", "sel_q", _COUNTS, _COUNTS - 9,
    np.array([2.0]), 0.05)
bad(argmax_audit.select_two_cut_sets, "significance", "significance", _COUNTS, _COUNTS,
    np.array([2.0]), 1.5)
bad(argmax_audit.select_two_cut_sets, "orders", "orders", _COUNTS, _COUNTS, np.array([0.5]), 0.05)
bad(argmax_audit.data_independent_rdp, "histogram-str", "histogram", ("1", "2"), (2.0, 1.0), 1.0,
    (2.0,))
bad(argmax_audit.data_independent_rdp, "sigma-inf", "sigma", (1.0, 2.0), (2.0, 1.0), np.inf,
    (2.0,))
bad(argmax_audit.data_independent_rdp, "neighbor-length", "neighbor", (1.0, 2.0),
    (2.0, 1.0, 0.0), 1.0, (2.0,))
bad(argmax_audit.epsilon_table, "num_queries", "num_queries", {"a": np.zeros(2)}, (2.0, 3.0),
    1.5, 1e-5)
bad(argmax_audit.epsilon_table, "curves-nan", "curves", {"a": np.array([np.nan, 1.0])},
    (2.0, 3.0), 1, 1e-5)
bad(argmax_audit.epsilon_table, "delta", "delta", {"a": np.zeros(2)}, (2.0, 3.0), 1, 0.0)
bad(argmax_audit.thm1_epsilon, "num_queries", "num_queries", np.zeros(2), (2.0, 3.0), 1e-5, 0)
bad(argmax_audit.thm1_epsilon, "curves-negative", "curves", -np.ones(2), (2.0, 3.0), 1e-5)
bad(argmax_audit.thm1_floor, "orders-below-1", "orders", (0.5, 2.0), 1e-6)
bad(argmax_audit.thm1_floor, "orders-empty", "orders", (), 1e-6)
bad(argmax_audit.thm1_floor, "orders-str", "orders", (2.0, "x"), 1e-6)
bad(argmax_audit.thm1_floor, "delta-0", "delta", (2.0, 3.0), 0.0)
bad(argmax_audit.thm1_floor, "delta-nan", "delta", (2.0, 3.0), np.nan)
bad(argmax_audit.run, "key", "key", 7, argmax_audit.NoisyArgmaxAuditConfig())
bad(argmax_audit.run, "config", "config", KEY, {"sigma": 2.0})
bad(argmax_audit.run, "progress", "progress", KEY, argmax_audit.Config(), progress="stderr")
bad(argmax_audit.run, "store", "store", KEY, argmax_audit.Config(), store="cells")
exempt("the game contract's name for a class listed here (an alias)",
       *_audit("noisy_argmax", "Config", "Result"))

# tightness
bad(tightness.TightnessConfig, "noisy_argmax_noise_multiplier-inf", "noisy_argmax_noise_multiplier",
    noisy_argmax_noise_multiplier=np.inf)
count_cases(tightness.TightnessConfig, "noisy_argmax_num_trials", lambda v: ((), {
    "noisy_argmax_num_trials": v}), values=BAD_INTEGERS)
count_cases(tightness.TightnessConfig, "dpsgd_num_runs", lambda v: ((), {"dpsgd_num_runs": v}),
            values=BAD_INTEGERS)
count_cases(tightness.TightnessConfig, "ngram_num_models", lambda v: ((), {"ngram_num_models": v}),
            values={**BAD_INTEGERS, "huge": 2**62})
significance_cases(tightness.TightnessConfig, lambda v: ((), {"significance": v}))
bad(tightness.TightnessConfig, "seed", "seed", seed=1.5)
bad(tightness.TightnessConfig, "families", "families", families=("noisy_argmax", "bogus"))
for _fn in (tightness.noisy_argmax_rows, tightness.dpsgd_rows, tightness.ngram_rows,
            tightness.lm_rows, tightness.private_prediction_rows, tightness.panoramia_rows,
            tightness.domias_rows):
  bad(_fn, "key", "key", 3, tightness.TightnessConfig(families=("ngram",)))
  bad(_fn, "config", "config", KEY, {"seed": 0})
bad(tightness.dpsgd_rows, "dpsgd_epochs", "dpsgd_epochs", KEY, dataclasses.replace(
    tightness.TightnessConfig(families=("ngram",)), dpsgd_epochs=np.nan))
bad(tightness.run, "config", "config", {"seed": 0})
bad(tightness.TightnessConfig, "pate_noise_multiplier", "pate_noise_multiplier",
    pate_noise_multiplier=0.0)
bad(tightness.TightnessConfig, "pate_num_trials", "pate_num_trials", pate_num_trials=3)
bad(tightness.TightnessConfig, "domias_epsilon", "domias_epsilon", domias_epsilon=np.inf)
bad(tightness.TightnessConfig, "domias_num_candidates", "domias_num_candidates",
    domias_num_candidates=5)
bad(tightness.TightnessConfig, "panoramia_num_members", "panoramia_num_members",
    panoramia_num_members=10)
bad(tightness.TightnessConfig, "lm_noise_multiplier", "lm_noise_multiplier",
    families=("lm_reconstruction",), lm_noise_multiplier=-1.0)
bad(tightness.TightnessConfig, "lm_num_lines", "lm_num_lines", families=("lm_reconstruction",),
    lm_num_lines=0)

# reconstruction (n-gram canaries)
_NGRAM = reconstruction.NgramCanaryConfig(noise_multipliers=(1.0,), num_models=4, num_steps=2,
                                          canary_length=3, vocab_size=4)
bad(reconstruction.NgramCanaryConfig, "noise_multipliers-0", "noise_multipliers",
    noise_multipliers=(0.0,))
bad(reconstruction.NgramCanaryConfig, "noise_multipliers-str", "noise_multipliers",
    noise_multipliers=("1.0",))
count_cases(reconstruction.NgramCanaryConfig, "num_models", lambda v: ((), {"num_models": v}),
            values={**BAD_INTEGERS, "huge": 2**62})
count_cases(reconstruction.NgramCanaryConfig, "chunk_size", lambda v: ((), {"chunk_size": v}),
            values={**BAD_INTEGERS, "huge": 2**62}, skip=("float",))
bad(reconstruction.NgramCanaryConfig, "orders-inf", "orders", orders=(2.0, np.inf))
for _fn in (reconstruction.lazy_ngram_train_config, reconstruction.lazy_ngram_hyperparameters,
            reconstruction.lazy_ngram_run, reconstruction.ngram_theory):
  bad(_fn, "noise_multiplier-0", "noise_multiplier", _NGRAM, 0.0)
  bad(_fn, "noise_multiplier-inf", "noise_multiplier", _NGRAM, np.inf)
  bad(_fn, "config", "config", {"num_steps": 2}, 1.0)
_CANARY = np.array([0, 1, 2], np.int32)
for _fn in (reconstruction.canary_log_probabilities, reconstruction.ngram_point):
  bad(_fn, "key", "key", 0, _CANARY, _NGRAM, 1.0)
  bad(_fn, "canary-vocabulary", "canary", KEY, np.array([0, 1, 9], np.int32), _NGRAM, 1.0)
  bad(_fn, "canary-float", "canary", KEY, _CANARY + 0.5, _NGRAM, 1.0)
  bad(_fn, "canary-length", "canary", KEY, _CANARY[:2], _NGRAM, 1.0)
  bad(_fn, "noise_multiplier-nan", "noise_multiplier", KEY, _CANARY, _NGRAM, float("nan"))
bad(reconstruction.random_canary, "key", "key", "0", _NGRAM)
bad(reconstruction.random_canary, "config", "config", KEY, None)
bad(reconstruction.noise_level_key, "noise_multiplier-str", "noise_multiplier", KEY, "1")
bad(reconstruction.noise_level_key, "key", "key", 1, 1.0)
bad(reconstruction.run, "key", "key", None, _NGRAM)
bad(reconstruction.run, "config", "config", KEY, "config")
bad(reconstruction.run, "progress", "progress", KEY, _NGRAM, progress=3)
bad(reconstruction.run, "store", "store", KEY, _NGRAM, store="cells")
bad(reconstruction.run, "key_config", "key_config", KEY, _NGRAM, key_config=[0])
exempt("the game contract's name for a class listed here (an alias)",
       *_audit("reconstruction", "Config", "Result"))

# reconstruction_bounds
bad(reconstruction_bounds.ReconstructionBoundsConfig, "sigmas-inf", "sigmas", sigmas=(np.inf,))
bad(reconstruction_bounds.ReconstructionBoundsConfig, "sigmas-str", "sigmas", sigmas=("0.3",))
bad(reconstruction_bounds.ReconstructionBoundsConfig, "num_steps-fraction", "num_steps",
    num_steps=1.5)
bad(reconstruction_bounds.ReconstructionBoundsConfig, "num_steps-str", "num_steps",
    num_steps="100")
bad(reconstruction_bounds.ReconstructionBoundsConfig, "num_bits-huge", "num_bits",
    num_bits=2**62)
bad(reconstruction_bounds.ReconstructionBoundsConfig, "delta-1", "delta", delta=1.0)
bad(reconstruction_bounds.ReconstructionBoundsConfig, "pld-str", "pld", pld="yes")
for _fn in (reconstruction_bounds.rdp_curve, reconstruction_bounds.bound_curves):
  _extra = (10.0,) if _fn is reconstruction_bounds.bound_curves else ()
  bad(_fn, "noise_multiplier-nan", "noise_multiplier", float("nan"), 0.1, 10, *_extra, (2.0,))
  bad(_fn, "sampling_rate-1.5", "sampling_rate", 1.0, 1.5, 10, *_extra, (2.0,))
  bad(_fn, "num_steps-fraction", "num_steps", 1.0, 0.1, 2.5, *_extra, (2.0,))
  bad(_fn, "orders-1", "orders", 1.0, 0.1, 10, *_extra, (1.0,))
bad(reconstruction_bounds.bound_curves, "secret_bits-str", "secret_bits", 1.0, 0.1, 10, "10",
    (2.0,))
bad(reconstruction_bounds.bounds_in_bits, "secret_bits-negative", "secret_bits", np.zeros(1),
    (2.0,), -1.0)
bad(reconstruction_bounds.bounds_in_bits, "secret_bits-str", "secret_bits", np.zeros(1), (2.0,),
    "10")
bad(reconstruction_bounds.bounds_in_bits, "rdp-nan", "rdp", np.array([np.nan]), (2.0,), 10.0)
bad(reconstruction_bounds.steps_curves, "steps-fraction", "steps", 1.0, 0.1, [10, 2.5], 10.0,
    (2.0,))
bad(reconstruction_bounds.steps_curves, "steps-empty", "steps", 1.0, 0.1, [], 10.0, (2.0,))
bad(reconstruction_bounds.steps_grid, "min_steps-0", "min_steps", 0, 10, 3)
bad(reconstruction_bounds.steps_grid, "max_steps-below", "max_steps", 10, 5, 3)
bad(reconstruction_bounds.steps_grid, "num-bool", "num", 1, 10, True)
bad(reconstruction_bounds.steps_grid, "num-huge", "num", 1, 10, 2**62)
bad(reconstruction_bounds.property_violations, "bits-decreasing", "bits", np.array([2.0, 1.0]),
    np.zeros(2), np.zeros(2))
bad(reconstruction_bounds.property_violations, "leakage-nan", "leakage", np.array([1.0, 2.0]),
    np.array([np.nan, 0.0]), np.zeros(2))
bad(reconstruction_bounds.property_violations, "traditional-shape", "traditional",
    np.array([1.0, 2.0]), np.zeros(2), np.zeros(3))
bad(reconstruction_bounds.property_violations, "tol-negative", "tol", np.array([1.0, 2.0]),
    np.zeros(2), np.zeros(2), tol=-1.0)
bad(reconstruction_bounds.run, "config", "config", None, {"sigmas": (1.0,)})
bad(reconstruction_bounds.run, "key", "key", "key", reconstruction_bounds.Config())
bad(reconstruction_bounds.run, "progress", "progress", None, reconstruction_bounds.Config(),
    progress=3)
bad(reconstruction_bounds.run, "store", "store", None, reconstruction_bounds.Config(),
    store="cells")
exempt("the game contract's name for a class listed here (an alias)",
       *_audit("reconstruction_bounds", "Config", "Result"))

# language_model
bad(language_model.insert_canary, "repetitions-fraction", "repetitions", ["a"], "c", 1.5)
bad(language_model.insert_canary, "repetitions-huge", "repetitions", ["a"], "c", 2**62)
bad(language_model.insert_canary, "canary-int", "canary", ["a"], 3, 1)
bad(language_model.insert_canary, "lines-str", "lines", "abc", "c", 1)
bad(language_model.random_secret, "num_digits-float", "num_digits", KEY, 4.0)
bad(language_model.random_secret, "num_digits-huge", "num_digits", KEY, 2**62)
bad(language_model.random_secret, "key", "key", 0, 4)
_CONTEXTS, _LINE_TARGETS = np.zeros((2, 5, 3), np.int32), np.zeros((2, 5), np.int32)
_TRAIN = _training.TrainConfig(num_steps=1, sampling_rate=1.0, noise_multiplier=1.0,
                               l2_clip_norm=1.0, learning_rate=0.1)
bad(language_model.train_lm, "key", "key", 0, Tripwire(), _CONTEXTS, _LINE_TARGETS, _TRAIN)
bad(language_model.train_lm, "config", "config", KEY, Tripwire(), _CONTEXTS, _LINE_TARGETS,
    {"num_steps": 1})
bad(language_model.train_lm, "targets-float", "targets", KEY, Tripwire(), _CONTEXTS,
    _LINE_TARGETS + 0.5, _TRAIN)
bad(language_model.train_lm, "contexts-shape", "contexts", KEY, Tripwire(), _CONTEXTS[:1],
    _LINE_TARGETS, _TRAIN)
bad(language_model.line_scores, "batch_size", "batch_size", Tripwire(), Tripwire(), _CONTEXTS,
    _LINE_TARGETS, batch_size=0)
bad(language_model.line_scores, "top_k", "top_k", Tripwire(), Tripwire(), _CONTEXTS,
    _LINE_TARGETS, top_k=-1)
bad(language_model.line_scores, "temperature", "temperature", Tripwire(), Tripwire(), _CONTEXTS,
    _LINE_TARGETS, temperature=np.inf)
bad(language_model.line_scores, "targets-str", "targets", Tripwire(), Tripwire(), _CONTEXTS,
    _LINE_TARGETS.astype(str))
_VOCAB = _ngram.CharVocab("0123456789 abc")
bad(language_model.secret_examples, "secrets-int", "secrets", _VOCAB, "p", [123], 2)
bad(language_model.secret_examples, "secrets-empty", "secrets", _VOCAB, "p", [], 2)
bad(language_model.secret_examples, "context_size", "context_size", _VOCAB, "p", ["12"], 0)
bad(language_model.secret_examples, "prompt", "prompt", _VOCAB, None, ["12"], 2)
bad(language_model.secret_log_probs, "prompt", "prompt", Tripwire(), Tripwire(), _VOCAB, 5,
    ["12"])
bad(language_model.secret_log_probs, "batch_size", "batch_size", Tripwire(), Tripwire(), _VOCAB,
    "p", ["12"], batch_size=0)
bad(language_model.secrecy_bound, "noise_multiplier-nan", "noise_multiplier", float("nan"), 0.1,
    10, 10.0)
bad(language_model.secrecy_bound, "sampling_rate-2", "sampling_rate", 1.0, 2.0, 10, 10.0)
bad(language_model.secrecy_bound, "num_steps-fraction", "num_steps", 1.0, 0.1, 2.5, 10.0)
bad(language_model.secrecy_bound, "secret_bits-inf", "secret_bits", 1.0, 0.1, 10, np.inf)
bad(language_model.secrecy_bound, "repetitions-0", "repetitions", 1.0, 0.1, 10, 10.0, 0)
bad(language_model.secrecy_bound, "orders-1", "orders", 1.0, 0.1, 10, 10.0, orders=[1.0])
bad(language_model.at_risk_lines, "log_lambda-nan", "log_lambda", ["a", "b"],
    np.array([np.nan, 0.0]), np.zeros(2), 0.0)
bad(language_model.at_risk_lines, "calibrated-length", "calibrated", ["a", "b"], np.zeros(2),
    np.zeros(3), 0.0)
bad(language_model.at_risk_lines, "threshold-str", "threshold", ["a", "b"], np.zeros(2),
    np.zeros(2), "0")
bad(language_model.at_risk_lines, "count-negative", "count", ["a", "b"], np.zeros(2),
    np.zeros(2), 0.0, -1)

# lm_reconstruction
_LM = dict(num_train=4, num_reference=4, num_test=2, num_generated=2, num_exposure_samples=2)
for _name in ("num_train", "num_test", "num_generated", "top_k", "seed"):
  bad(lm_reconstruction.LMReconstructionConfig, f"{_name}-fraction", _name,
      **{**_LM, _name: 2.5})
bad(lm_reconstruction.LMReconstructionConfig, "num_exposure_samples-huge", "num_exposure_samples",
    **{**_LM, "num_exposure_samples": 2**62})
bad(lm_reconstruction.LMReconstructionConfig, "num_generated-huge", "num_generated",
    **{**_LM, "num_generated": 2**62})
bad(lm_reconstruction.LMReconstructionConfig, "noise_multipliers-str", "noise_multipliers",
    **_LM, noise_multipliers=("1.0",))
bad(lm_reconstruction.LMReconstructionConfig, "temperature-inf", "temperature", **_LM,
    temperature=np.inf)
bad(lm_reconstruction.LMReconstructionConfig, "delta-0", "delta", **_LM, delta=0.0)
_LMC = lm_reconstruction.LMReconstructionConfig(**_LM)
bad(lm_reconstruction.load_lines, "key", "key", 0, _LMC)
bad(lm_reconstruction.load_lines, "config", "config", KEY, dict(_LM))
bad(lm_reconstruction.train_config, "noise_multiplier-negative", "noise_multiplier", _LMC, -1.0,
    10)
bad(lm_reconstruction.train_config, "num_examples-0", "num_examples", _LMC, 1.0, 0)
bad(lm_reconstruction.train_config, "config", "config", None, 1.0, 10)
bad(lm_reconstruction.trained_params, "key", "key", 0, "m", Tripwire(), ["a"], _VOCAB, _TRAIN,
    10)
bad(lm_reconstruction.trained_params, "lines", "lines", KEY, "m", Tripwire(), [1, 2], _VOCAB,
    _TRAIN, 10)
bad(lm_reconstruction.trained_params, "max_length", "max_length", KEY, "m", Tripwire(), ["a"],
    _VOCAB, _TRAIN, 0)
bad(lm_reconstruction.trained_params, "config", "config", KEY, "m", Tripwire(), ["a"], _VOCAB,
    {"num_steps": 1}, 10)
bad(lm_reconstruction.trained_params, "progress", "progress", KEY, "m", Tripwire(), ["a"],
    _VOCAB, _TRAIN, 10, progress=3)
bad(lm_reconstruction.run, "key", "key", 0, _LMC)
bad(lm_reconstruction.run, "progress", "progress", None, _LMC, progress="stderr")
bad(lm_reconstruction.run, "store", "store", None, _LMC, store="cells")
exempt("the game contract's name for a class listed here (an alias)",
       *_audit("lm_reconstruction", "Config", "Result"))
bad(lm_reconstruction.secrecy_point, "secret", "secret", KEY, _LMC, Tripwire(), Tripwire(),
    _VOCAB, "12a", _TRAIN)
bad(lm_reconstruction.secrecy_point, "model_config", "model_config", KEY, _LMC, Tripwire(),
    Tripwire(), _VOCAB, "12", None)
bad(lm_reconstruction.secrecy_point, "key", "key", 0, _LMC, Tripwire(), Tripwire(), _VOCAB, "12",
    _TRAIN)
bad(lm_reconstruction.at_risk_analysis, "config", "config", KEY, None, Tripwire(), Tripwire(),
    Tripwire(), _VOCAB, ["a"], ["b"])
bad(lm_reconstruction.at_risk_analysis, "train", "train", KEY, _LMC, Tripwire(), Tripwire(),
    Tripwire(), _VOCAB, "abc", ["b"])
bad(lm_reconstruction.run, "config", "config", None, dict(_LM))

# panoramia_modalities
bad(modalities.TrainSpec, "epochs-inf", "epochs", epochs=np.inf)
bad(modalities.TrainSpec, "batch_size-fraction", "batch_size", batch_size=2.5)
bad(modalities.TrainSpec, "delta-1", "delta", delta=1.0)
bad(modalities.TrainSpec, "learning_rate-nan", "learning_rate", learning_rate=float("nan"))
bad(modalities.loss_function, "spec", "spec", Tripwire(), Tripwire())
bad(modalities.loss_function, "batch_size", "batch_size",
    modalities.ModelSpec(Tripwire(), Tripwire(), Tripwire()), Tripwire(), batch_size=0)
bad(modalities.train_model, "key", "key", 0, Tripwire(), Tripwire(), modalities.TrainSpec())
bad(modalities.train_model, "train", "train", KEY,
    modalities.ModelSpec(Tripwire(), Tripwire(), Tripwire()),
    panoramia_audit.Examples(np.zeros((2, 3)), np.zeros(2, int)), {"epochs": 1})
bad(modalities.image_spec, "example_shape", "example_shape", (28, 0, 1), 10)
bad(modalities.image_classifier, "model", "model", 3, (28, 28, 1), 10)
bad(modalities.image_classifier, "model-name", "model", "resnet", (28, 28, 1), 10)
bad(modalities.image_classifier, "example_shape", "example_shape", "lenet5", (28, 0, 1), 10)
bad(modalities.image_spec, "num_classes", "num_classes", (28, 28, 1), 1.5)
bad(modalities.image_generator, "num_classes", "num_classes", 1, _vae.VaeConfig())
bad(modalities.image_generator, "config", "config", 10, {"epochs": 1})
bad(modalities.image_modality, "helper", "helper", (28, 28, 1), 10, _vae.VaeConfig(), None)
bad(modalities.image_modality, "encoder_width", "encoder_width", (28, 28, 1), 10,
    _vae.VaeConfig(), modalities.TrainSpec(), encoder_width=0)
_BINNINGS = (_mst.Binning("a", num_categories=3), _mst.Binning("b", edges=(0.0, 1.0, 2.0)))
bad(modalities.encode_rows, "rows-columns", "rows", np.zeros((2, 3)), _BINNINGS)
bad(modalities.encode_rows, "rows-nan", "rows", np.full((2, 2), np.nan), _BINNINGS)
bad(modalities.encode_rows, "binnings", "binnings", np.zeros((2, 2)), ("a", "b"))
bad(modalities.tabular_spec, "binnings", "binnings", [1, 2])
bad(modalities.tabular_spec, "num_classes", "num_classes", _BINNINGS, 1)
bad(modalities.tabular_generator, "config", "config", _BINNINGS, None)
bad(modalities.tabular_generator, "binnings", "binnings", "ab", _mst.MstConfig())
bad(modalities.tabular_modality, "generator", "generator", None, modalities.TrainSpec())
bad(modalities.tabular_modality, "helper", "helper", _mst.MstConfig(), "adam")
bad(modalities.text_examples, "vocab", "vocab", "abc", ["a"], 5)
bad(modalities.text_examples, "max_length", "max_length", _VOCAB, ["a"], 0)
bad(modalities.text_examples, "lines", "lines", _VOCAB, [b"a"], 5)
bad(modalities.text_spec, "context_size", "context_size", _VOCAB, 0)
bad(modalities.text_spec, "hidden_size", "hidden_size", _VOCAB, 6, 2.5)
bad(modalities.top_p_logits, "top_p-0", "top_p", np.zeros((2, 5)), 0.0)
bad(modalities.top_p_logits, "logits-nan", "logits", np.full((2, 5), np.nan), 0.5)
_PROMPTS = np.zeros((2, 6), np.int32)
bad(modalities.sample_continuations, "key", "key", 0, Tripwire(), _PROMPTS, np.ones(2, np.int32),
    3, 0, 1, 0.9)
bad(modalities.sample_continuations, "prompts-float", "prompts", KEY, Tripwire(), _PROMPTS + 0.5,
    np.ones(2, np.int32), 3, 0, 1, 0.9)
bad(modalities.sample_continuations, "prompt_lengths-long", "prompt_lengths", KEY, Tripwire(),
    _PROMPTS, np.array([1, 6], np.int32), 3, 0, 1, 0.9)
bad(modalities.sample_continuations, "prompt_lengths-shape", "prompt_lengths", KEY, Tripwire(),
    _PROMPTS, np.ones(3, np.int32), 3, 0, 1, 0.9)
bad(modalities.sample_continuations, "top_p-2", "top_p", KEY, Tripwire(), _PROMPTS,
    np.ones(2, np.int32), 3, 0, 1, 2.0)
bad(modalities.sample_continuations, "context_size", "context_size", KEY, Tripwire(), _PROMPTS,
    np.ones(2, np.int32), 0, 0, 1, 0.9)
_SPEC = modalities.ModelSpec(Tripwire(), Tripwire(), Tripwire())
bad(modalities.text_generator, "spec", "spec", None, modalities.TrainSpec())
bad(modalities.text_generator, "prompt_length", "prompt_length", _SPEC, modalities.TrainSpec(),
    prompt_length=-1)
bad(modalities.text_generator, "top_p", "top_p", _SPEC, modalities.TrainSpec(), top_p=0.0)
bad(modalities.text_generator, "prompt_fraction", "prompt_fraction", _SPEC,
    modalities.TrainSpec(), prompt_fraction=1.0)
bad(modalities.text_modality, "generator", "generator", _VOCAB, None, modalities.TrainSpec())
bad(modalities.text_modality, "top_p", "top_p", _VOCAB, modalities.TrainSpec(),
    modalities.TrainSpec(), top_p=1.5)

# domias (the audit)
bad(domias_audit.NflowConfig, "flow_layers", "flow_layers", flow_layers=0)
count_cases(domias_audit.DomiasConfig, "num_members", lambda v: ((), {"num_members": v}),
            values=BAD_INTEGERS)
count_cases(domias_audit.DomiasConfig, "num_holdout", lambda v: ((), {"num_holdout": v}),
            values=BAD_INTEGERS, skip=("float", "fraction", "str", "bool"))
bad(domias_audit.DomiasConfig, "generator", "generator", generator="gpt")
bad(domias_audit.DomiasConfig, "attacks", "attacks", attacks=("domias", "bogus"))
significance_cases(domias_audit.DomiasConfig, lambda v: ((), {"significance": v}))
bad(domias_audit.DomiasConfig, "flow_config", "flow_config", flow_config={"flow_layers": 0})
_DOMIAS = domias_audit.DomiasConfig(num_members=4, num_reference=4, num_synthetic=4,
                                    num_holdout=0, attacks=("eq1",))
rows_cases(domias_audit.split_data, "data", lambda v: ((KEY, v, _DOMIAS), {}))
bad(domias_audit.split_data, "data-short", "records", KEY, ROWS[:5], _DOMIAS)
bad(domias_audit.split_data, "config", "config", KEY, ROWS, {"num_members": 4})
bad(domias_audit.split_data, "key", "key", 0, ROWS, _DOMIAS)
rows_cases(domias_audit.wasserstein_distance, "a", lambda v: ((KEY, v, ROWS), {}))
rows_cases(domias_audit.wasserstein_distance, "b", lambda v: ((KEY, ROWS, v), {}), skip=("1d",))
bad(domias_audit.wasserstein_distance, "max_points", "max_points", KEY, ROWS, ROWS, max_points=0)
bad(domias_audit.wasserstein_distance, "scale_by", "scale_by", KEY, ROWS, ROWS,
    scale_by=BAD_ROWS["nan"])
score_cases(domias_audit.attack_metrics, "scores", lambda v: ((v, MEMBERS), {}), skip=("inf",))
bad(domias_audit.attack_metrics, "is_member-shape", "is_member", GOOD_SCORES, MEMBERS[:3])
bad(domias_audit.attack_metrics, "is_member-2", "is_member", GOOD_SCORES, np.array([0, 1, 2, 1]))
bad(domias_audit.attack_metrics, "is_member-one-class", "is_member", GOOD_SCORES, np.ones(4))
significance_cases(domias_audit.attack_metrics, lambda v: ((GOOD_SCORES, MEMBERS),
                                                           {"significance": v}))
bad(domias_audit.attack_metrics, "delta", "delta", GOOD_SCORES, MEMBERS, delta=1.0)
bad(domias_audit.attack_metrics, "bernoulli", "bernoulli", GOOD_SCORES, MEMBERS, bernoulli="no")
rows_cases(domias_audit.run, "data", lambda v: ((KEY, _DOMIAS), {"data": v}))
bad(domias_audit.run, "config", "config", KEY, {"num_members": 4}, data=ROWS)
bad(domias_audit.run, "key", "key", 0, _DOMIAS, data=ROWS)
bad(domias_audit.run, "groups", "groups", KEY, _DOMIAS, data=ROWS, groups={"a": 3})
bad(domias_audit.run, "progress", "progress", KEY, _DOMIAS, data=ROWS, progress="stderr")
bad(domias_audit.run, "store", "store", KEY, _DOMIAS, data=ROWS, store="out")
exempt("the game contract's name for a class listed here (an alias)",
       *_audit("domias", "Config", "Result"), *_audit("domias_studies", "Config", "Result"))

# dpsgd
count_cases(dpsgd_audit.DPSGDAuditConfig, "num_runs", lambda v: ((), {"num_runs": v}),
            values={**BAD_INTEGERS, "huge": 2**62})
count_cases(dpsgd_audit.DPSGDAuditConfig, "num_canaries", lambda v: ((), {"num_canaries": v}),
            values={**BAD_INTEGERS, "huge": 2**62})
bad(dpsgd_audit.DPSGDAuditConfig, "include_data", "include_data", include_data="yes")
significance_cases(dpsgd_audit.DPSGDAuditConfig, lambda v: ((), {"significance": v}))
bad(dpsgd_audit.DPSGDAuditConfig, "epsilon-nan", "epsilon", epsilon=float("nan"))
_MLP = dpsgd_audit.models.MLP((2,), 2, example_ndim=1)
_WARM = dict(epochs=1.0, batch_size=1, learning_rate=0.1)
bad(dpsgd_audit.poisoned_initialisation, "model", "model", KEY, Tripwire(), np.zeros((2, 3)),
    np.zeros(2, np.int32), **_WARM)
bad(dpsgd_audit.poisoned_initialisation, "epochs-nan", "epochs", KEY, _MLP, np.zeros((2, 3)),
    np.zeros(2, np.int32), **{**_WARM, "epochs": float("nan")})
bad(dpsgd_audit.poisoned_initialisation, "features-empty", "features", KEY, _MLP,
    np.zeros((0, 3)), np.zeros(0, np.int32), **_WARM)
bad(dpsgd_audit.DPSGDAuditConfig, "warmup_epochs-0", "warmup_epochs", canary="poisoned",
    warmup_epochs=0.0)
bad(dpsgd_audit.DPSGDAuditConfig, "num_warmup_examples-negative", "num_warmup_examples",
    canary="poisoned", num_warmup_examples=-1)
bad(dpsgd_audit.DPSGDAuditConfig, "delta-0", "delta", delta=0.0)
bad(dpsgd_audit.DPSGDAuditConfig, "hidden_sizes", "hidden_sizes", hidden_sizes=(2.5,))
bad(dpsgd_audit.DPSGDAuditConfig, "canary", "canary", game="uniaud", canary="mislabelled")
bad(dpsgd_audit.DPSGDAuditConfig, "model", "model", model="vgg")
bad(dpsgd_audit.DPSGDAuditConfig, "model-uniaud_plus", "model", game="uniaud_plus",
    canary="trigger", model="lenet5")
bad(dpsgd_audit.DPSGDAuditConfig, "canary_dim-negative", "canary_dim", canary="gaussian",
    canary_dim=-1, canaries_only=True)
bad(dpsgd_audit.DPSGDAuditConfig, "canary_dim-with-data", "canary_dim", canary="gaussian",
    canary_dim=10)
bad(dpsgd_audit.DPSGDAuditConfig, "canary_dim-mislabelled", "canary_dim", canary="mislabelled",
    canary_dim=10, canaries_only=True)
bad(dpsgd_audit.DPSGDAuditConfig, "num_canary_classes-1", "num_canary_classes",
    canary="gaussian", num_canary_classes=1, canaries_only=True)
bad(dpsgd_audit.DPSGDAuditConfig, "canaries_only-str", "canaries_only", canaries_only="yes")
bad(dpsgd_audit.DPSGDAuditConfig, "canaries_only-many_run", "canaries_only", game="many_run",
    canary="gaussian", canaries_only=True)
bad(dpsgd_audit.canary_shape, "config", "config", {"canary_dim": 3}, Tripwire())
bad(dpsgd_audit.canary_shape, "data", "data", dpsgd_audit.DPSGDAuditConfig(), (np.zeros(3),))
bad(dpsgd_audit.settings_record, "settings", "settings", {"num_runs": 3}, ("num_runs",))
exempt("the fields DPSGDAuditConfig and DPSGDGridConfig share; they validate them",
       "dpaudit.audits.dpsgd.AuditSettings")
_DATA = dpsgd_audit.AuditData(np.zeros((4, 3)), np.zeros(4, np.int32), np.zeros((2, 3)),
                              np.zeros(2, np.int32), np.zeros((2, 3)), np.zeros(2, np.int32), 2)
_BAD_DATA = {
    "features-nan": _DATA._replace(train_features=np.full((4, 3), np.nan)),
    "labels-float": _DATA._replace(test_labels=np.zeros(2)),
    "labels-range": _DATA._replace(pool_labels=np.array([0, 5], np.int32)),
    "labels-length": _DATA._replace(train_labels=np.zeros(3, np.int32)),
    "num_classes": _DATA._replace(num_classes=1.5),
}
for _fn, _game in ((dpsgd_audit.many_run_audit, "many_run"), (dpsgd_audit.one_run_audit, "one_run"),
                   (dpsgd_audit.uniaud_audit, "uniaud"),
                   (dpsgd_audit.uniaud_plus_audit, "uniaud_plus"), (dpsgd_audit.run, None)):
  _config = dpsgd_audit.DPSGDAuditConfig(
      game=_game or "one_run", canary=dpsgd_audit.GAME_CANARIES[_game or "one_run"][0])
  # run takes its data keyword-only (the game contract); the games take it third.
  _bad = (lambda fn: lambda label, match, k, c, d: bad(fn, label, match, k, c, data=d))(_fn) \
      if _game is None else (lambda fn: lambda *a: bad(fn, *a))(_fn)
  _bad("key", "key", 0, _config, _DATA)
  _bad("config", "config", KEY, {"game": _game}, _DATA)
  _bad("data", "data", KEY, _config, (np.zeros((4, 3)), np.zeros(4)))
  for _label, _data in _BAD_DATA.items():
    _bad(f"data-{_label}", "data", KEY, _config, _data)
  if _game is not None:
    _other = "one_run" if _game != "one_run" else "many_run"
    _bad("config-game", "game", KEY, dpsgd_audit.DPSGDAuditConfig(game=_other,
                                                                  canary="gaussian"), _DATA)
bad(dpsgd_audit.run, "store", "store", KEY, dpsgd_audit.DPSGDAuditConfig(), data=_DATA,
    store="cells")
bad(dpsgd_audit.data_digest, "data", "data", (np.zeros(3),))
exempt("the game contract's alias of a class with its own cases (issue 40)",
       *_audit("dpsgd", "Config", "Result"), *_audit("dpsgd_grid", "Config", "Result"))
bad(dpsgd_audit.softmax_losses, "features-nan", "features", Tripwire(), Tripwire(),
    np.full((2, 3), np.nan), np.zeros(2, np.int32))
bad(dpsgd_audit.softmax_losses, "labels-float", "labels", Tripwire(), Tripwire(), np.zeros((2, 3)),
    np.zeros(2))
bad(dpsgd_audit.weakest_coordinates, "count", "count", Tripwire(), Tripwire(), np.zeros((2, 3)),
    np.zeros(2, np.int32), 1.5)
bad(dpsgd_audit.weakest_coordinates, "sample_size", "sample_size", Tripwire(), Tripwire(),
    np.zeros((2, 3)), np.zeros(2, np.int32), 1, sample_size=0)
bad(dpsgd_audit.run_many, "run", "run", None, jax.random.split(KEY, 2), Tripwire(), Tripwire())
bad(dpsgd_audit.run_many, "keys", "keys", Tripwire(), np.zeros(2), Tripwire(), Tripwire())
bad(dpsgd_audit.run_many, "chunk_size", "chunk_size", Tripwire(), jax.random.split(KEY, 2),
    Tripwire(), Tripwire(), chunk_size=-1)
bad(dpsgd_audit.pack_multi_task_labels, "tags-shape", "tags", np.zeros(2, int), np.zeros(3, int),
    np.zeros(2, int))
bad(dpsgd_audit.pack_multi_task_labels, "is_canary-2", "is_canary", np.zeros(2, int),
    np.zeros((2, 1), int), np.array([0, 2]))
bad(dpsgd_audit.pack_multi_task_labels, "labels-float", "labels", np.zeros(2) + 0.5,
    np.zeros((2, 1), int), np.zeros(2, int))
bad(dpsgd_audit.multi_task_loss_fn, "weight-negative", "weight", -1.0)
bad(dpsgd_audit.multi_task_loss_fn, "weight-nan", "weight", float("nan"))
bad(dpsgd_audit.tag_losses, "tags-float", "tags", Tripwire(), Tripwire(), np.zeros((2, 3)),
    np.zeros((2, 1)))
bad(dpsgd_audit.tag_losses, "features-str", "features", Tripwire(), Tripwire(),
    np.zeros((2, 3)).astype(str), np.zeros((2, 1), int))


# Validators of stored cells raise KeyError/TypeError for missing or mistyped fields by the
# convention of dpaudit.results.check_fields; they are tested with the results' from_dict.
exempt("validates a stored cell (KeyError/TypeError/ValueError by dpaudit.results' convention)",
       "dpaudit.audits.dpsgd.check_grid_cell", "dpaudit.audits.private_prediction.check_cell")
exempt(CONTAINER, "dpaudit.estimators.panoramia.PanoramiaNull")

bad(argmax_audit.check_resample_sizes, "num_bootstrap-fraction", "num_bootstrap", 2.5, 10, 3, 2)
bad(argmax_audit.check_resample_sizes, "num_bootstrap-huge", "num_bootstrap", 2**62, 10, 3, 2)
bad(argmax_audit.check_resample_sizes, "chunk_size-huge", "chunk_size", 10, 2**62, 3, 2)
bad(argmax_audit.check_resample_sizes, "chunk_size-0", "chunk_size", 10, 0, 3, 2)

# dpsgd_grid (helper E's file)
bad(dpsgd_grid.DPSGDGridConfig, "epsilons-nan", "epsilons", epsilons=(float("nan"),))
bad(dpsgd_grid.DPSGDGridConfig, "num_canaries-fraction", "num_canaries", num_canaries=(2.5,))
bad(dpsgd_grid.DPSGDGridConfig, "num_runs-str", "num_runs", num_runs="10")
bad(dpsgd_grid.DPSGDGridConfig, "significance-1.5", "significance", significance=1.5)
bad(dpsgd_grid.DPSGDGridConfig, "seed-fraction", "seed", seed=1.5)
bad(dpsgd_grid.DPSGDGridConfig, "repetitions-0", "repetitions", repetitions=0)
bad(dpsgd_grid.DPSGDGridConfig, "tag_weights-negative", "tag_weights", tag_weights=(1.0, -1.0))
bad(dpsgd_grid.prepare_data, "test_fraction-1", "test_fraction", "digits", 1.0, 0.5, 0)
bad(dpsgd_grid.prepare_data, "pool_fraction-nan", "pool_fraction", "digits", 0.2, float("nan"),
    0)
bad(dpsgd_grid.prepare_data, "dataset", "dataset", "imagenet", 0.2, 0.5, 0)
bad(dpsgd_grid.prepare_data, "seed-fraction", "seed", "digits", 0.2, 0.5, 1.5)
bad(dpsgd_grid.prepare_data, "data_dir", "data_dir", "digits", 0.2, 0.5, 0, data_dir=3)
bad(dpsgd_grid.run_cell, "config", "config", {"game": "one_run"}, dpsgd_grid.DPSGDGridConfig(),
    Tripwire())
bad(dpsgd_grid.run_cell, "grid", "grid", dpsgd_audit.DPSGDAuditConfig(), {"seed": 0}, Tripwire())
bad(dpsgd_grid.run_cell, "data", "data", dpsgd_audit.DPSGDAuditConfig(),
    dpsgd_grid.DPSGDGridConfig(), (np.zeros((4, 3)), np.zeros(4)))
bad(dpsgd_grid.run, "config", "config", KEY, {"audits": ()})
bad(dpsgd_grid.run, "key", "key", 0, dpsgd_grid.DPSGDGridConfig())
bad(dpsgd_grid.run, "store", "store", KEY, dpsgd_grid.DPSGDGridConfig(), store="cells")
bad(dpsgd_grid.run_cell, "key", "key", dpsgd_audit.DPSGDAuditConfig(),
    dpsgd_grid.DPSGDGridConfig(), _DATA, key=0)
bad(dpsgd_grid.seed_key, "grid", "grid", {"seed": 0})
bad(dpsgd_grid.repetition_key, "key", "key", 0, dpsgd_grid.DPSGDGridConfig(), 0)
bad(dpsgd_grid.repetition_key, "index", "index", KEY, dpsgd_grid.DPSGDGridConfig(), 1)

# panoramia (the audit; the lead's file)
count_cases(panoramia_audit.PanoramiaConfig, "num_audit", lambda v: ((), {"num_audit": v}),
            values=BAD_INTEGERS)
significance_cases(panoramia_audit.PanoramiaConfig, lambda v: ((), {"significance": v}))
bad(panoramia_audit.PanoramiaConfig, "baseline_helpers", "baseline_helpers",
    baseline_helpers=("oracle",))
bad(panoramia_audit.PanoramiaConfig, "delta-1", "delta", delta=1.0)
_EXAMPLES = panoramia_audit.Examples(np.zeros((4, 3)), np.zeros(4, np.int32))
bad(panoramia_audit.concatenate, "parts", "parts", _EXAMPLES, (np.zeros((2, 3)), np.zeros(2)))
bad(panoramia_audit.concatenate, "parts-empty", "parts")
bad(panoramia_audit.concatenate, "parts-shape", "parts", _EXAMPLES,
    panoramia_audit.Examples(np.zeros((2, 4)), np.zeros(2, np.int32)))
bad(panoramia_audit.checked_losses, "loss_fn", "loss_fn", "target", "loss", _EXAMPLES)
bad(panoramia_audit.checked_losses, "examples", "examples", "target", Tripwire(),
    (np.zeros((4, 3)), np.zeros(4)))
bad(panoramia_audit.checked_losses, "loss_fn-shape", "target", "target",
    lambda e: np.zeros(3), _EXAMPLES)
bad(panoramia_audit.checked_losses, "loss_fn-nan", "target", "target",
    lambda e: np.full(4, np.nan), _EXAMPLES)
bad(panoramia_audit.checked_losses, "loss_fn-str", "target", "target",
    lambda e: np.array(["a"] * 4), _EXAMPLES)
exempt("the game contract's name for a class listed here (an alias)",
       *_audit("panoramia", "Config", "Result"), *_audit("panoramia_study", "Config", "Result"))
_MODALITY = panoramia_audit.Modality("image", Tripwire(), Tripwire(), Tripwire())
_MEMBERS = panoramia_audit.Examples(np.zeros((3000, 3)), np.zeros(3000, np.int32))
bad(panoramia_audit.prepare_audit, "key", "key", 0, _MODALITY, _MEMBERS)
bad(panoramia_audit.prepare_audit, "config", "config", KEY, _MODALITY, _MEMBERS,
    config={"num_audit": 2})
_RUN_INPUTS = {"modality": _MODALITY, "target_loss": Tripwire(), "members": _MEMBERS}
bad(panoramia_audit.run, "key", "key", 0, panoramia_audit.Config(), **_RUN_INPUTS)
bad(panoramia_audit.run, "config", "config", KEY, {"num_audit": 2}, **_RUN_INPUTS)
bad(panoramia_audit.run, "modality", "modality", KEY, panoramia_audit.Config(),
    **{**_RUN_INPUTS, "modality": "image"})
bad(panoramia_audit.run, "members", "members", KEY, panoramia_audit.Config(),
    **{**_RUN_INPUTS, "members": np.zeros((3000, 3))})
bad(panoramia_audit.run, "progress", "progress", KEY, panoramia_audit.Config(), **_RUN_INPUTS,
    progress="stderr")
bad(panoramia_audit.run, "store", "store", KEY, panoramia_audit.Config(), **_RUN_INPUTS,
    store="out")
bad(panoramia_audit.prepare_audit, "modality", "modality", KEY, "image", _MEMBERS)
bad(panoramia_audit.prepare_audit, "members", "members", KEY, _MODALITY, np.zeros((3000, 3)))
bad(panoramia_audit.prepare_audit, "members-short", "members", KEY, _MODALITY, _EXAMPLES)
bad(panoramia_audit.prepare_audit, "modality-field", "fit_generator", KEY,
    panoramia_audit.Modality("image", None, Tripwire(), Tripwire()), _MEMBERS)
bad(panoramia_audit.prepare_audit, "progress", "progress", KEY, _MODALITY, _MEMBERS,
    progress="stderr")
bad(panoramia_audit.run, "target_loss", "target_loss", KEY, panoramia_audit.Config(),
    **{**_RUN_INPUTS, "target_loss": "loss"})
bad(panoramia_audit.measure_target, "key", "key", 0, Tripwire(), _MODALITY, Tripwire())
bad(panoramia_audit.measure_target, "setup", "setup", KEY, {"audit": 1}, _MODALITY, Tripwire())
bad(panoramia_audit.measure_target, "target_loss", "target_loss", KEY,
    panoramia_audit.AuditSetup(*(Tripwire(),) * 6), _MODALITY, None)
bad(panoramia_audit.measure_target, "config", "config", KEY,
    panoramia_audit.AuditSetup(*(Tripwire(),) * 6), _MODALITY, Tripwire(), config=None)
bad(panoramia_audit.one_run_real, "included-2", "included", Tripwire(), _EXAMPLES,
    np.array([0, 1, 2, 1]))
bad(panoramia_audit.one_run_real, "included-shape", "included", Tripwire(), _EXAMPLES,
    np.array([0, 1]))
bad(panoramia_audit.one_run_real, "significance", "significance", Tripwire(), _EXAMPLES,
    MEMBERS, significance=1.5)
bad(panoramia_audit.one_run_real, "delta", "delta", Tripwire(), _EXAMPLES, MEMBERS, delta=-0.1)
bad(panoramia_audit.one_run_real, "target_loss", "target_loss", "loss", _EXAMPLES, MEMBERS)
bad(panoramia_audit.one_run_real_bounds, "included-2", "included", Tripwire(), _EXAMPLES,
    np.array([0, 1, 2, 1]))
bad(panoramia_audit.one_run_real_bounds, "delta", "delta", Tripwire(), _EXAMPLES, MEMBERS,
    delta=1.0)
bad(panoramia_audit.one_run_real_bounds, "target_loss", "target_loss", "loss", _EXAMPLES,
    MEMBERS)

# panoramia's null reference (the lead's file)
bad(panoramia_est.bootstrap_within_classes, "num_samples", "num_samples", KEY, MEMBERS, 2.5)
bad(panoramia_est.bootstrap_within_classes, "num_samples-huge", "num_samples", KEY, MEMBERS, 2**62)
bad(panoramia_est.bootstrap_within_classes, "is_member-2", "is_member", KEY, np.array([0, 2]), 3)
bad(panoramia_est.bootstrap_within_classes, "key", "key", 0, MEMBERS, 3)
bad(panoramia_est.bootstrap_within_classes, "is_member-2d", "is_member", KEY, MEMBERS[None], 3)
score_cases(panoramia_est.null_mia_scores, "baseline_scores",
            lambda v: ((KEY, v, MEMBERS, 3), {}))
bad(panoramia_est.null_mia_scores, "num_samples", "num_samples", KEY, GOOD_SCORES, MEMBERS, 0)
bad(panoramia_est.null_p_value, "observed-nan", "observed", float("nan"), GOOD_SCORES)
bad(panoramia_est.null_p_value, "null_samples-empty", "null_samples", 1.0, np.zeros(0))
bad(panoramia_est.null_p_value, "null_samples-str", "null_samples", 1.0, BAD_SCORES["str"])
bad(panoramia_est.null_p_value, "null_samples-nan", "null_samples", 1.0, BAD_SCORES["nan"])
score_cases(panoramia_est.panoramia_null, "baseline_scores", lambda v: ((KEY, v, MEMBERS), {}))
significance_cases(panoramia_est.panoramia_null, lambda v: ((KEY, GOOD_SCORES, MEMBERS),
                                                            {"significance": v}))
bad(panoramia_est.panoramia_null, "num_samples", "num_samples", KEY, GOOD_SCORES, MEMBERS,
    num_samples=1.5)
bad(panoramia_est.panoramia_null, "key", "key", 0, GOOD_SCORES, MEMBERS)
score_cases(panoramia_est.silverman_bandwidths, "scores", lambda v: ((v, MEMBERS), {}),
            skip=("2d",))
bad(panoramia_est.silverman_bandwidths, "is_member-shape", "is_member", GOOD_SCORES, MEMBERS[:3])
bad(panoramia_est.smoothed_bootstrap, "key", "key", 0, GOOD_SCORES, MEMBERS,
    np.zeros((2, 4), int))
bad(panoramia_est.smoothed_bootstrap, "scores-nan", "scores", KEY, BAD_SCORES["nan"], MEMBERS,
    np.zeros((2, 4), int))
bad(panoramia_est.smoothed_bootstrap, "indices-range", "indices", KEY, GOOD_SCORES, MEMBERS,
    np.full((2, 4), 9))
bad(panoramia_est.smoothed_bootstrap, "indices-float", "indices", KEY, GOOD_SCORES, MEMBERS,
    np.zeros((2, 4)) + 0.5)
bad(panoramia_est.smoothed_bootstrap, "indices-shape", "indices", KEY, GOOD_SCORES, MEMBERS,
    np.zeros((2, 3), int))
bad(panoramia_est.smoothed_bootstrap, "is_member-shape", "is_member", KEY, GOOD_SCORES,
    MEMBERS[:3], np.zeros((2, 4), int))

# domias_studies (the DOMIAS studies of experiments.domias)

exempt(CONTAINER, "dpaudit.audits.domias_studies.StudyResult")
exempt("validates a stored cell (KeyError/TypeError/ValueError by dpaudit.results' convention)",
       "dpaudit.audits.domias_studies.check_game_cell")
for _name, _value in (("studies", ("nope",)), ("studies", "members"), ("repetitions", 0),
                      ("dp_delta", float("nan")), ("members", ()), ("attacks", ("spy",)),
                      ("significance", 1.5), ("num_holdout", -1)):
  bad(domias_studies.StudyConfig, f"{_name}-{_value}", _name, **{_name: _value})
bad_call(domias_studies.study_cells, "study", "study",
         lambda: domias_studies.study_cells(domias_studies.StudyConfig(), "nope"))
bad(domias_studies.read_csv, "data_csv-empty", "data_csv", "")
bad(domias_studies.read_csv, "data_csv-missing", "data_csv", "/nonexistent/d.csv")
bad(domias_studies.load_data, "name", "name", "mnist")
bad(domias_studies.minority_groups, "minority_column", "minority_column", ["a"], "b")
bad(domias_studies.run, "key", "key", 0, Tripwire())
bad(domias_studies.run, "config", "config", KEY, {"studies": ("members",)})
bad(domias_studies.summarise, "metric", "metric", [], metric="nope")
bad(domias_studies.tables, "studies", "studies", {"nope": []})
# private_prediction_study (the run of experiments.private_prediction)

exempt(CONTAINER, "dpaudit.audits.private_prediction_study.StudyResult")
exempt(OUTPUT, *_audit("private_prediction_study", "quantities", "spreads", "cells_orders",
                       "table"))
exempt("validates a stored cell (KeyError/TypeError/ValueError by dpaudit.results' convention)",
       "dpaudit.audits.private_prediction_study.check_stored_cell")


def _pp_study(**changes):
  ensemble = private_prediction.EnsembleAuditConfig()
  knn = private_prediction.KnnAuditConfig(adversary=ensemble.adversary)
  audits = {"pate": private_prediction.PredictionAuditConfig(num_trials=8, num_histograms=4,
                                                             orders=(2.0,))}
  return pp_study.StudyConfig({ensemble.adversary: ensemble}, {knn.adversary: knn}, audits,
                              **changes)


bad(pp_study.StudyConfig, "ensembles-empty", "ensembles", {}, {}, {})
bad_call(pp_study.StudyConfig, "public_fraction", "public_fraction",
         lambda: _pp_study(public_fraction=1.0))
bad_call(pp_study.StudyConfig, "text_dataset", "text_dataset", lambda: _pp_study(text_dataset="x"))
bad_call(pp_study.StudyConfig, "minq_prompts", "minq_prompts",
         lambda: _pp_study(minq_prompts=("nope",)))
bad(pp_study.load_splits, "config", "config", {"dataset": "digits"}, 0)
bad(pp_study.text_splits, "text_dataset", "text_dataset", "nope", 0)
bad(pp_study.run, "key", "key", 0, Tripwire())
bad(pp_study.run, "config", "config", KEY, {"audits": {}})
bad(pp_study.run_record, "runs", "runs", [], [], [2.0], 1e-3, "next")
bad(pp_study.run_config, "config", "config", {"dataset": "digits"}, 1, [0], [2.0])
bad(pp_study.leakage_vs_queries, "delta", "delta", Tripwire(), (2.0,), 0.0, [1])
bad(pp_study.leakage_vs_queries, "counts", "counts", Tripwire(), (2.0,), 1e-5, [0])
# private_prediction (helper D's file)
for _label, _value in (("inf", np.inf), ("0", 0.0), ("str", "40")):
  bad(private_prediction.PredictionAuditConfig, f"sigma-{_label}", "sigma", sigma=_value)
for _name in ("num_trials", "num_histograms", "num_bootstrap", "chunk_size"):
  count_cases(private_prediction.PredictionAuditConfig, _name, lambda v, n=_name: ((), {n: v}),
              values=BAD_INTEGERS)
significance_cases(private_prediction.PredictionAuditConfig, lambda v: ((), {"significance": v}))
bad(private_prediction.PredictionAuditConfig, "algorithm", "algorithm", algorithm="dp")
count_cases(private_prediction.EnsembleAuditConfig, "num_teachers",
            lambda v: ((), {"num_teachers": v}), values=BAD_INTEGERS)
count_cases(private_prediction.EnsembleAuditConfig, "query_repeats",
            lambda v: ((), {"query_repeats": v}), values=BAD_INTEGERS)
bad(private_prediction.EnsembleAuditConfig, "adversary", "adversary", adversary="oracle")
count_cases(private_prediction.KnnAuditConfig, "num_neighbors",
            lambda v: ((), {"num_neighbors": v}), values=BAD_INTEGERS)
bad(private_prediction.KnnAuditConfig, "sampling_rate-0", "sampling_rate", sampling_rate=0.0)
bad(private_prediction.KnnAuditConfig, "sampling_rate-nan", "sampling_rate",
    sampling_rate=float("nan"))
_PRED = private_prediction.PredictionAuditConfig(num_trials=8, num_histograms=4, orders=(2.0,),
                                                 num_bootstrap=2)
_ENSEMBLE = private_prediction.EnsembleAuditConfig()
_KNN = private_prediction.KnnAuditConfig(num_neighbors=2, num_queries=2)
_PRED_KNN = private_prediction.PredictionAuditConfig(algorithm="private_knn", sampling_rate=0.2,
                                                     num_trials=8, num_histograms=4,
                                                     orders=(2.0,), num_bootstrap=2)
_CURVES = {name: np.zeros(1) for name in private_prediction.CURVES}
bad(private_prediction.composition, "num_queries", "num_queries", _CURVES, (2.0,), 1e-5, 1.5,
    "repeated")
bad(private_prediction.composition, "delta", "delta", _CURVES, (2.0,), 0.0, 1, "repeated")
bad(private_prediction.composition, "curves-nan", "curves",
    {**_CURVES, "two_cut": np.array([np.nan])}, (2.0,), 1e-5, 1, "repeated")
bad(private_prediction.composition, "curves-missing", "curves", {"a": np.zeros(1)}, (2.0,), 1e-5,
    1, "repeated")
bad(private_prediction.composition, "kind", "kind", _CURVES, (2.0,), 1e-5, 1, "exact")
bad(private_prediction.composition, "curves-shape", "curves",
    {name: np.zeros(2) for name in private_prediction.CURVES}, (2.0,), 1e-5, 1, "repeated")
bad(private_prediction.composition, "replicates-shape", "replicates", _CURVES, (2.0,), 1e-5, 1,
    "repeated", np.zeros((3, 2)))
bad(private_prediction.composition, "orders-1", "orders", _CURVES, (1.0,), 1e-5, 1, "repeated")
bad(private_prediction.data_independent_rdp, "config", "config", {"sigma": 1.0})
bad_call(private_prediction.run, "key", "key",
         lambda: private_prediction.run(0, _PRED, models=[_pate()[1]]))
bad(private_prediction.run, "models-empty", "models", KEY, _PRED, models=[])
bad(private_prediction.run, "models-str", "models", KEY, _PRED, models="pate")
bad(private_prediction.run, "progress", "progress", KEY, _PRED, models=Tripwire(),
    progress="bar")
bad(private_prediction.run, "store", "store", KEY, _PRED, models=Tripwire(), store="out")
exempt("the game contract's name for a class listed here (an alias)",
       *_audit("private_prediction", "Config", "Result"),
       *_audit("private_prediction_study", "Config", "Result"))
bad(private_prediction.run, "checkpoint_dir", "checkpoint_dir", KEY, _PRED, models=Tripwire(),
    checkpoint_dir=3)
bad_call(private_prediction.run, "config", "config",
         lambda: private_prediction.run(KEY, {"sigma": 1.0}, models=[_pate()[1]]))
_PATE = None


def _pate():
  from dpaudit.mechanisms import histograms
  return histograms.PATE, histograms.pate_model(np.full(3, 1 / 3), np.full(3, 1 / 3), 4)


for _fn, _extra in ((private_prediction.mixture_class_probabilities, (False,)),
                    (private_prediction.rao_blackwell_two_cut, ()),
                    (private_prediction.model_divergence, ())):
  _orders = () if _fn is private_prediction.mixture_class_probabilities else ((2.0,),)
  for _label, _sigma, _n, _match in (("sigma-inf", np.inf, 8, "sigma"),
                                     ("num_histograms-fraction", 1.0, 8.5, "num_histograms"),
                                     ("num_histograms-huge", 1.0, 2**62, "num_histograms")):
    bad_call(_fn, _label, _match, lambda f=_fn, e=_extra, s=_sigma, n=_n, o=_orders: f(
        KEY, *_pate(), *e, s, n, *o))
  bad_call(_fn, "key", "key", lambda f=_fn, e=_extra, o=_orders: f(0, *_pate(), *e, 1.0, 8, *o))
bad_call(private_prediction.rao_blackwell_two_cut, "significance", "significance",
         lambda: private_prediction.rao_blackwell_two_cut(KEY, *_pate(), 1.0, 8, (2.0,), 1.5))
bad_call(private_prediction.model_divergence, "num_bootstrap", "num_bootstrap",
         lambda: private_prediction.model_divergence(KEY, *_pate(), 1.0, 8, (2.0,), 2.5))
bad_call(private_prediction.model_divergence, "num_bootstrap-huge", "num_bootstrap",
         lambda: private_prediction.model_divergence(KEY, *_pate(), 1.0, 8, (2.0,), 2**62))
bad_call(private_prediction.model_divergence, "orders-1", "orders",
         lambda: private_prediction.model_divergence(KEY, *_pate(), 1.0, 8, (1.0,)))
bad_call(private_prediction.mixture_class_probabilities, "neighbor", "neighbor",
         lambda: private_prediction.mixture_class_probabilities(KEY, *_pate(), "yes", 1.0, 8))
bad_call(private_prediction.mixture_class_probabilities, "family", "family",
         lambda: private_prediction.mixture_class_probabilities(KEY, "pate", _pate()[1], False,
                                                                1.0, 8))
bad_call(private_prediction.rao_blackwell_two_cut, "model", "model",
         lambda: private_prediction.rao_blackwell_two_cut(KEY, _capc(), _pate()[1], 1.0, 8,
                                                          (2.0,)))


def _capc():
  from dpaudit.mechanisms import histograms
  return histograms.CAPC


_X, _Y = np.zeros((6, 3)), np.array([0, 1, 2, 0, 1, 2])
bad(private_prediction.crafted_points, "adversary", "adversary", "oracle", _X, _Y, 2, 3)
bad(private_prediction.crafted_points, "num_queries", "num_queries", "pois_minq", _X, _Y, 1.5, 3)
bad(private_prediction.crafted_points, "test_features-nan", "test_features", "pois_minq",
    np.full((6, 3), np.nan), _Y, 2, 3)
bad(private_prediction.crafted_points, "test_labels-range", "test_labels", "pois_minq", _X,
    _Y + 3, 2, 3)
bad(private_prediction.crafted_points, "test_labels-length", "test_labels", "pois_minq", _X,
    _Y[:5], 2, 3)
bad(private_prediction.crafted_points, "poison-float", "poison", "pois_minq", _X, _Y, 2, 3,
    poison=[1.5])
bad(private_prediction.runner_up_labels, "votes-one-class", "votes", np.zeros((2, 1), int),
    np.array([0, 0]))
bad(private_prediction.runner_up_labels, "votes-float", "votes", np.zeros((2, 3)) + 0.5,
    np.array([0, 1]))
bad(private_prediction.runner_up_labels, "truth-shape", "truth", np.zeros((2, 3), int),
    np.array([0, 1, 2]))
bad(private_prediction.clean_votes, "key", "key", 0, Tripwire(), _X, _Y, _X[:2], _X[:2],
    "random", _ENSEMBLE)
bad(private_prediction.clean_votes, "config", "config", KEY, Tripwire(), _X, _Y, _X[:2], _X[:2],
    "random", {"num_teachers": 2})
bad(private_prediction.teacher_votes, "key", "key", 0, Tripwire(), _X, _Y, _X[:2], _Y[:2],
    _X[:2], "random", _ENSEMBLE)
bad(private_prediction.teacher_votes, "config", "config", KEY, Tripwire(), _X, _Y, _X[:2],
    _Y[:2], _X[:2], "random", None)
_LOGISTIC = None


def _logistic():
  global _LOGISTIC
  if _LOGISTIC is None:
    from dpaudit import models as models_lib
    _LOGISTIC = models_lib.make_model("logistic", (3,), 3)
  return _LOGISTIC


bad(private_prediction.teacher_votes, "model", "model", KEY, Tripwire(), _X, _Y, _X[:2], _Y[:2],
    _X[:2], "random", _ENSEMBLE)
_SMALL = private_prediction.EnsembleAuditConfig(num_teachers=2)
for _label, _args, _match in (
    ("partitioning", (_X, _Y, _X[:2], _Y[:2], _X[:2], "stratified"), "partitioning"),
    ("train_y-float", (_X, _Y + 0.5, _X[:2], _Y[:2], _X[:2], "random"), "train_y"),
    ("train_x-nan", (np.full((6, 3), np.nan), _Y, _X[:2], _Y[:2], _X[:2], "random"), "train_x"),
    ("crafted_x-columns", (_X, _Y, _X[:2, :2], _Y[:2], _X[:2], "random"), "crafted_x"),
    ("crafted_y-length", (_X, _Y, _X[:2], _Y[:1], _X[:2], "random"), "crafted_y"),
    ("queries-empty", (_X, _Y, _X[:2], _Y[:2], _X[:0], "random"), "queries")):
  bad_call(private_prediction.teacher_votes, _label, _match,
           lambda a=_args: private_prediction.teacher_votes(KEY, _logistic(), *a, _SMALL))
bad_call(private_prediction.teacher_votes, "train_x-few", "num_teachers",
         lambda: private_prediction.teacher_votes(KEY, _logistic(), _X, _Y, _X[:2], _Y[:2],
                                                  _X[:2], "random", _ENSEMBLE))
bad_call(private_prediction.clean_votes, "points-columns", "points",
         lambda: private_prediction.clean_votes(KEY, _logistic(), _X, _Y, _X[:2, :2], _X[:2],
                                                "random", _SMALL))
bad(private_prediction.histogram_models, "algorithm", "algorithm", np.zeros((2, 32, 3), int), "dp",
    _ENSEMBLE, 3)
bad(private_prediction.histogram_models, "votes-float", "votes", np.zeros((2, 32, 3)) + 0.5,
    "pate", _ENSEMBLE, 3)
bad(private_prediction.histogram_models, "votes-rows", "votes", np.zeros((2, 20, 3), int),
    "pate", _ENSEMBLE, 3)
bad(private_prediction.histogram_models, "votes-range", "votes", np.full((2, 32, 3), 3),
    "pate", _ENSEMBLE, 3)
bad(private_prediction.histogram_models, "num_classes", "num_classes", np.zeros((2, 32, 3), int),
    "pate", _ENSEMBLE, 1.5)
bad(private_prediction.model_fit, "num_teachers", "num_teachers", np.zeros((2, 32, 3), int), 1.5,
    3)
bad(private_prediction.model_fit, "votes-str", "votes", np.zeros((2, 32, 3)).astype(str), 20, 3)
bad(private_prediction.model_fit, "algorithm", "algorithm", np.zeros((2, 32, 3), int), 20, 3,
    "dp")
bad(private_prediction.model_fit, "votes-one-instantiation", "votes", np.zeros((1, 32, 3), int),
    20, 3)
bad(private_prediction.ensemble_audit, "key", "key", 0, Tripwire(), Tripwire(), "pate",
    _ENSEMBLE, _PRED)
bad(private_prediction.ensemble_audit, "algorithm", "algorithm", KEY, Tripwire(), Tripwire(),
    "dp", _ENSEMBLE, _PRED)
bad(private_prediction.ensemble_audit, "ensemble", "ensemble", KEY, Tripwire(), Tripwire(),
    "pate", {"num_teachers": 2}, _PRED)
bad(private_prediction.ensemble_audit, "audit", "audit", KEY, Tripwire(), Tripwire(), "pate",
    _ENSEMBLE, _PRED_KNN)
bad(private_prediction.ensemble_audit, "train", "train", KEY, (_X, _Y), Tripwire(), "pate",
    _ENSEMBLE, _PRED)
bad(private_prediction.embed, "features-nan", "features", Tripwire(), Tripwire(),
    np.full((2, 3), np.nan), "hidden")
bad(private_prediction.embed, "layer", "layer", Tripwire(), Tripwire(), _X, 3)
bad(private_prediction.embed, "model", "model", Tripwire(), Tripwire(), _X, "Dense_0")
bad(private_prediction.embedding_candidates, "top", "top", _X[:2], _Y[:2], _X, 3, 1.5)
bad(private_prediction.embedding_candidates, "train_x-nan", "train_x", _X[:2], _Y[:2],
    np.full((6, 3), np.nan), 3, 2)
bad(private_prediction.embedding_candidates, "query_labels-length", "query_labels", _X[:2],
    _Y[:3], _X, 3, 2)
bad(private_prediction.embedding_candidates, "top-large", "top", _X[:2], _Y[:2], _X, 3, 7)
bad(private_prediction.knn_models, "config", "config", _X, _Y, _X, _Y, 3, {"num_neighbors": 2})
bad(private_prediction.knn_models, "num_classes", "num_classes", _X, _Y, _X, _Y, 1.5, _KNN)
bad(private_prediction.knn_models, "test_x-columns", "test_x", _X, _Y, _X[:, :2], _Y, 3, _KNN)
bad(private_prediction.knn_models, "train_y-range", "train_y", _X, _Y + 1, _X, _Y, 3, _KNN)
bad(private_prediction.knn_audit_on_features, "key", "key", 0, _X, _Y, _X, _Y, 3, _KNN,
    _PRED_KNN)
bad(private_prediction.knn_audit_on_features, "audit", "audit", KEY, _X, _Y, _X, _Y, 3, _KNN,
    _PRED)
bad(private_prediction.knn_audit, "key", "key", 0, Tripwire(), Tripwire(), Tripwire(), _KNN,
    _PRED_KNN)
bad(private_prediction.knn_audit, "feature_epochs", "feature_epochs", KEY, Tripwire(), Tripwire(),
    Tripwire(), _KNN, _PRED_KNN, feature_epochs=0)
bad(private_prediction.knn_audit, "feature_model", "feature_model", KEY, Tripwire(), Tripwire(),
    Tripwire(), _KNN, _PRED_KNN, feature_model="resnet")
bad(private_prediction.knn_audit, "knn", "knn", KEY, Tripwire(), Tripwire(), Tripwire(),
    {"num_neighbors": 2}, _PRED_KNN)
bad(private_prediction.text_knn_audit, "key", "key", 0, Tripwire(), Tripwire(), Tripwire(), _KNN,
    _PRED_KNN)
bad(private_prediction.text_knn_audit, "llm", "llm", KEY, "llama", Tripwire(), Tripwire(), _KNN,
    _PRED_KNN)
bad(private_prediction.promptpate_prompt, "example", "example", Tripwire(), 3, 0, "q")
bad(private_prediction.promptpate_prompt, "example_label", "example_label", Tripwire(), "e", 1.5,
    "q")
bad(private_prediction.all_same_prompt, "target", "target", Tripwire(), 1.5, "q")
bad(private_prediction.all_same_prompt, "query", "query", Tripwire(), 0, None)
bad(private_prediction.mapping_description, "mapping", "mapping", Tripwire(), [0.5, 1.5])
bad(private_prediction.mapping_description, "mapping-str", "mapping", Tripwire(), "ab")
bad(private_prediction.minq_poisons, "hist-float", "hist", np.array([[3.5, 1.0, 0.0]]), 3)
bad(private_prediction.minq_poisons, "num_classes", "num_classes", np.array([[3, 1, 0]]), 1.5)
bad(private_prediction.minq_poisons, "hist-columns", "hist", np.array([[3, 1, 0]]), 4)
bad(private_prediction.promptpate_audit, "key", "key", 0, Tripwire(), Tripwire(), Tripwire(),
    "pois_minq", 4, 2, 10, argmax_audit.NoisyArgmaxAuditConfig())
bad(private_prediction.promptpate_audit, "num_teachers", "num_teachers", KEY, Tripwire(),
    Tripwire(), [1, 2, 3, 4, 5, 6], "pois_minq", 2.5, 2, 10,
    argmax_audit.NoisyArgmaxAuditConfig())
bad(private_prediction.promptpate_audit, "adversary", "adversary", KEY, Tripwire(), Tripwire(),
    [1, 2, 3, 4, 5, 6], "oracle", 4, 2, 10, argmax_audit.NoisyArgmaxAuditConfig())
bad(private_prediction.promptpate_audit, "query_repeats", "query_repeats", KEY, Tripwire(),
    Tripwire(), Tripwire(), "pois_miaq", 4, 2, 2.5, argmax_audit.NoisyArgmaxAuditConfig())
bad(private_prediction.promptpate_audit, "audit", "audit", KEY, Tripwire(), Tripwire(),
    Tripwire(), "pois_miaq", 4, 2, 10, {"sigma": 1.0})
bad(private_prediction.promptpate_audit, "minq_prompts-str", "minq_prompts", KEY, Tripwire(),
    Tripwire(), Tripwire(), "pois_minq", 4, 2, 10, argmax_audit.NoisyArgmaxAuditConfig(),
    minq_prompts="confident")
bad(private_prediction.promptpate_audit, "llm", "llm", KEY, None, Tripwire(), Tripwire(),
    "pois_minq", 4, 2, 10, argmax_audit.NoisyArgmaxAuditConfig())


# ----------------------------------------------------------------------------------------------
# Known gaps: case id -> who owns the file and what it needs. They run as strict xfails: once the
# check is added, the case passes, the xfail fails, and its entry is to be removed here. Empty:
# every case above runs as a plain test (issue 38 closed the last 80).
# ----------------------------------------------------------------------------------------------
KNOWN_GAPS: dict[str, str] = {}

# Cases that would abort the whole process (XLA aborts on a shape whose size overflows int64)
# until the size is checked: skipped, never run. Empty: every size is checked against memory
# first (check_allocation).
ABORTS: dict[str, str] = {}


# ----------------------------------------------------------------------------------------------
# The tests
# ----------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------
# dpaudit.audit (the front door)
# ----------------------------------------------------------------------------------------------

exempt(CONTAINER, "dpaudit.audit.AuditResult")
for _fn in (front.from_scores, front.one_run_from_scores):
  _args = (GOOD_SCORES, GOOD_SCORES) if _fn is front.from_scores else (GOOD_SCORES, MEMBERS)
  for _label, _value in {"1.5": 1.5, "0": 0.0, "1": 1.0, "nan": float("nan"),
                         "str": "0.95"}.items():
    bad(_fn, f"confidence-{_label}", "confidence", *_args, confidence=_value)
  bad(_fn, "delta-1", "delta", *_args, delta=1.0)
  bad(_fn, "reference-negative", "reference", *_args, reference=-1.0)
  bad(_fn, "reference_kind-empty", "reference_kind", *_args, reference=1.0, reference_kind="")
score_cases(front.from_scores, "in_scores", lambda v: ((v, GOOD_SCORES), {}), skip=ORDERED)
score_cases(front.from_scores, "out_scores", lambda v: ((GOOD_SCORES, v), {}), skip=ORDERED)
bad(front.from_scores, "method", "method", GOOD_SCORES, GOOD_SCORES, method="best")
score_cases(front.one_run_from_scores, "scores", lambda v: ((v, MEMBERS), {}), skip=ORDERED)
bad(front.one_run_from_scores, "is_member-shape", "is_member", GOOD_SCORES, MEMBERS[:3])


def _coin(key, bit):
  return jax.numpy.where(jax.random.bernoulli(key, 0.7), bit, 1 - bit)


_BIT, _OTHER = np.int32(1), np.int32(0)
for _label, _kwargs, _match in (
    ("num_outcomes-1", {"num_outcomes": 1}, "num_outcomes"),
    ("num_outcomes-float", {"num_outcomes": 2.0}, "num_outcomes"),
    ("num_trials-3", {"num_outcomes": 2, "num_trials": 3}, "num_trials"),
    ("num_trials-float", {"num_outcomes": 2, "num_trials": 1e6}, "num_trials"),
    ("orders-1", {"num_outcomes": 2, "orders": (1.0,)}, "orders"),
    ("orders-empty", {"num_outcomes": 2, "orders": ()}, "orders"),
    ("selection_fraction-1", {"num_outcomes": 2, "selection_fraction": 1.0},
     "selection_fraction"),
    ("confidence-0", {"num_outcomes": 2, "confidence": 0.0}, "confidence"),
    ("delta-nan", {"num_outcomes": 2, "delta": float("nan")}, "delta")):
  bad(front.black_box, _label, _match, KEY, _coin, _BIT, _OTHER, **_kwargs)
bad(front.black_box, "neighbor-shape", "neighbor", KEY, _coin, _BIT, np.zeros(2, np.int32),
    num_outcomes=2)
bad(front.black_box, "key", "key", 0, _coin, _BIT, _OTHER, num_outcomes=2)
bad(front.private_prediction, "predict", "predict", KEY, "argmax", _BIT, _OTHER, None,
    num_classes=2)
bad(front.private_prediction, "num_classes", "num_outcomes", KEY, lambda k, d, q: _coin(k, d),
    _BIT, _OTHER, None, num_classes=1)
_FRONT_PATE = []


def _front_pate():
  """A small PATE histogram model (built on first use)."""
  if not _FRONT_PATE:
    from dpaudit.mechanisms import histograms  # pylint: disable=g-import-not-at-top
    _FRONT_PATE.append(histograms.pate_model([0.9, 0.1], [0.0, 1.0], num_teachers=10))
  return _FRONT_PATE[0]


for _label, _kwargs, _match in (
    ("noise_multiplier-0", {"noise_multiplier": 0.0}, "noise_multiplier"),
    ("noise_multiplier-inf", {"noise_multiplier": float("inf")}, "noise_multiplier"),
    ("order-1", {"noise_multiplier": 2.0, "order": 1.0}, "order"),
    ("algorithm", {"noise_multiplier": 2.0, "algorithm": "gnmax"}, "algorithm"),
    ("model-capc", {"noise_multiplier": 2.0, "algorithm": "capc"}, "model"),
    ("num_trials-3", {"noise_multiplier": 2.0, "num_trials": 3}, "num_trials"),
    ("confidence-1", {"noise_multiplier": 2.0, "confidence": 1.0}, "confidence")):
  bad_call(front.histogram_model, _label, _match,
           lambda _kwargs=_kwargs: front.histogram_model(KEY, _front_pate(), **_kwargs))
bad(front.histogram_model, "model-array", "model", KEY, np.zeros(3), noise_multiplier=2.0)
_ROWS2 = np.random.default_rng(1).normal(size=(8, 2))
_MEMBER2 = np.arange(8) % 2 == 0
for _label, _args, _kwargs, _match in (
    ("membership", (_ROWS2, _ROWS2, _ROWS2, _MEMBER2), {"membership": "coin"}, "membership"),
    ("candidates-1d", (_ROWS2, _ROWS2, _ROWS2[:, 0], _MEMBER2), {}, "candidates"),
    ("synthetic-columns", (_ROWS2[:, :1], _ROWS2, _ROWS2, _MEMBER2), {}, "synthetic"),
    ("reference_data-nan", (_ROWS2, np.full((8, 2), np.nan), _ROWS2, _MEMBER2), {},
     "reference_data"),
    ("is_member-shape", (_ROWS2, _ROWS2, _ROWS2, _MEMBER2[:3]), {}, "is_member"),
    ("is_member-all", (_ROWS2, _ROWS2, _ROWS2, np.ones(8, bool)), {}, "is_member"),
    ("is_member-values", (_ROWS2, _ROWS2, _ROWS2, np.arange(8)), {}, "is_member"),
    ("delta-1", (_ROWS2, _ROWS2, _ROWS2, _MEMBER2), {"delta": 1.0}, "delta"),
    ("confidence-0", (_ROWS2, _ROWS2, _ROWS2, _MEMBER2), {"confidence": 0.0}, "confidence")):
  bad(front.domias, _label, _match, *_args, **_kwargs)
_ONE_RUN = dpsgd_audit.DPSGDAuditConfig(game="one_run", num_canaries=2, epochs=1)
bad(front.dpsgd, "key", "key", 0, _DATA, _ONE_RUN)
bad(front.dpsgd, "config", "config", KEY, _DATA, {"game": "one_run"})
bad(front.dpsgd, "data", "data", KEY, (np.zeros((4, 3)),), _ONE_RUN)
bad(front.dpsgd, "model-function", "model", KEY, _DATA, _ONE_RUN, model=lambda x: x)
bad(front.dpsgd, "model-name", "model", KEY, _DATA, _ONE_RUN, model="vgg")
bad(front.dpsgd, "model-name-config", "config", KEY, _DATA, {"game": "one_run"}, model="mlp")
bad(front.dpsgd, "model-uniaud_plus", "model", KEY, _DATA,
    dpsgd_audit.DPSGDAuditConfig(game="uniaud_plus", canary="trigger", num_canaries=2,
                                 epochs=1), model=Tripwire())


# --- the DOMIAS study's generators (dpaudit.models.ctgan, pate_gan, privbayes) ---------------
exempt(CONTAINER, "dpaudit.models.ctgan.CtganTransform", "dpaudit.models.ctgan.CtganModel",
       "dpaudit.models.pate_gan.PateGanModel", "dpaudit.models.privbayes.PrivBayesModel")
rows_cases(_ctgan.fit_ctgan_transform, "data", lambda v: ((KEY, v), {}))
bad(_ctgan.fit_ctgan_transform, "key", "key", 0, ROWS)
bad(_ctgan.fit_ctgan_transform, "max_modes-0", "max_modes", KEY, ROWS, max_modes=0)
bad(_ctgan.fit_ctgan_transform, "weight_threshold-1", "weight_threshold", KEY, ROWS,
    weight_threshold=1.0)
bad(_ctgan.fit_ctgan_transform, "discrete_columns", "discrete_columns", KEY, ROWS,
    discrete_columns=[5])
bad(_ctgan.sample_condition, "transform", "transform", KEY, ROWS, 3)
bad_call(_ctgan.sample_condition, "transform-no-discrete", "transform",
         lambda: _ctgan.sample_condition(KEY, _ctgan.fit_ctgan_transform(KEY, ROWS), 3))
bad(_ctgan.CtganConfig, "batch_size-pac", "batch_size", batch_size=55)
bad(_ctgan.CtganConfig, "betas-1", "betas", betas=(0.5, 1.0))
bad(_ctgan.CtganConfig, "betas-one", "betas", betas=(0.5,))
bad(_ctgan.CtganConfig, "dropout-1", "dropout", dropout=1.0)
bad(_ctgan.CtganConfig, "log_frequency-str", "log_frequency", log_frequency="yes")
bad(_ctgan.CtganConfig, "generator_lr-nan", "generator_lr", generator_lr=float("nan"))
count_cases(_ctgan.CtganConfig, "epochs", lambda v: ((), {"epochs": v}), values=BAD_INTEGERS)
rows_cases(_ctgan.fit_ctgan, "data", lambda v: ((KEY, v), {}))
bad(_ctgan.fit_ctgan, "key", "key", 0, ROWS)
bad(_ctgan.fit_ctgan, "config", "config", KEY, ROWS, _ctgan.GanVanillaConfig())
bad(_ctgan.fit_ctgan, "discrete_columns", "discrete_columns", KEY, ROWS, discrete_columns=[5])
bad(_ctgan.sample_ctgan, "key", "key", 0, Tripwire(), 3)
bad(_ctgan.sample_ctgan, "model", "model", KEY, "model", 3)
bad(_ctgan.GanVanillaConfig, "beta2-1", "beta2", beta2=1.0)
bad(_ctgan.GanVanillaConfig, "discriminator_hidden", "discriminator_hidden",
    discriminator_hidden=(0,))
count_cases(_ctgan.GanVanillaConfig, "iterations", lambda v: ((), {"iterations": v}),
            values=BAD_INTEGERS)
rows_cases(_ctgan.fit_vanilla_gan, "data", lambda v: ((KEY, v), {}))
bad(_ctgan.fit_vanilla_gan, "key", "key", 0, ROWS)
bad(_ctgan.fit_vanilla_gan, "config", "config", KEY, ROWS, _ctgan.CtganConfig())
bad(_ctgan.fit_vanilla_gan, "discrete_columns", "discrete_columns", KEY, ROWS,
    discrete_columns=[5])
bad(_ctgan.sample_vanilla_gan, "model", "model", KEY, "model", 3)
bad(_pate_gan.PateGanConfig, "epsilon-0", "epsilon", epsilon=0.0)
bad(_pate_gan.PateGanConfig, "noise_lambda-nan", "noise_lambda", epsilon=1.0,
    noise_lambda=float("nan"))
bad(_pate_gan.PateGanConfig, "generator_loss", "generator_loss", epsilon=1.0,
    generator_loss="wasserstein")
bad(_pate_gan.fit_pate_gan, "num_teachers-rows", "num_teachers", KEY, np.zeros((3, 2)),
    _pate_gan.PateGanConfig(epsilon=1.0, num_teachers=4))
bad(_pate_gan.fit_pate_gan, "config-dict", "config", KEY, Tripwire(), {"epsilon": 1.0})
bad(_pate_gan.sample_pate_gan, "model", "model", KEY, Tripwire(), 3)
bad(_pate_gan.pate_epsilon, "gap_counts-negative", "gap_counts", [1, -1], 1.0, 1e-5)
bad(_pate_gan.pate_epsilon, "delta-1", "delta", [1, 1], 1.0, 1.0)
bad(_privbayes.PrivBayesConfig, "beta-1", "beta", epsilon=1.0, beta=1.0)
bad(_privbayes.PrivBayesConfig, "column_ranges-order", "column_ranges", epsilon=1.0,
    column_ranges=((1.0, 0.0),))
bad(_privbayes.fit_privbayes, "column_ranges-length", "column_ranges", KEY, np.eye(4),
    _privbayes.PrivBayesConfig(epsilon=1.0, column_ranges=((0.0, 1.0),)))
bad(_privbayes.fit_privbayes, "config-dict", "config", KEY, Tripwire(), {"epsilon": 1.0})
bad(_privbayes.sample_privbayes, "model", "model", KEY, Tripwire(), 3)


# --- dpaudit.attacks.panoramia: gradient-boosted trees (after the fit_classifier rows)
exempt(CONTAINER, "dpaudit.attacks.panoramia.FittedGBT")
bad(panoramia_attacks.GBTConfig, "learning_rates-0", "learning_rates", learning_rates=(0.0,))
bad(panoramia_attacks.GBTConfig, "learning_rates-empty", "learning_rates", learning_rates=())
bad(panoramia_attacks.GBTConfig, "learning_rates-str", "learning_rates", learning_rates="0.1")
bad(panoramia_attacks.GBTConfig, "max_depths-0", "max_depths", max_depths=(0,))
bad(panoramia_attacks.GBTConfig, "categorical-int", "categorical", categorical=(1, 0))
bad(panoramia_attacks.GBTConfig, "validation_fraction-0", "validation_fraction",
    validation_fraction=0.0)
count_cases(panoramia_attacks.GBTConfig, "max_iter", lambda v: ((), {"max_iter": v}),
            values=BAD_INTEGERS)
bad(panoramia_attacks.GBTConfig, "num_threads-0", "num_threads", num_threads=0)
_ROWS4 = np.zeros((4, 3))
bad(panoramia_attacks.fit_gbt, "key", "key", 0, _ROWS4, panoramia_attacks.no_side(4), MEMBERS)
bad(panoramia_attacks.fit_gbt, "config", "config", KEY, _ROWS4, panoramia_attacks.no_side(4),
    MEMBERS, config="trees")
bad(panoramia_attacks.fit_gbt, "is_member-few", "is_member", KEY, np.zeros((6, 3)),
    panoramia_attacks.no_side(6), np.r_[np.ones(5), 0])
bad(panoramia_attacks.fit_gbt, "inputs-nan", "inputs", KEY, np.full((4, 3), np.nan),
    panoramia_attacks.no_side(4), MEMBERS)
bad(panoramia_attacks.fit_gbt, "side-rows", "side", KEY, _ROWS4, panoramia_attacks.no_side(3),
    MEMBERS)
bad(panoramia_attacks.fit_gbt, "categorical-codes", "categorical", KEY, np.full((4, 1), 0.5),
    panoramia_attacks.no_side(4), MEMBERS, panoramia_attacks.GBTConfig(categorical=(True,)))
bad(panoramia_attacks.gbt_scores, "fitted", "fitted", "trees", _ROWS4,
    panoramia_attacks.no_side(4))
bad(panoramia_attacks.gbt_scores, "side-rows", "side",
    panoramia_attacks.FittedGBT(Tripwire(), 0.1, 3, 10, np.zeros((1, 1))), _ROWS4,
    panoramia_attacks.no_side(3))
bad(panoramia_attacks.membership_scores, "config", "config", KEY, Tripwire(), _ROWS4,
    panoramia_attacks.no_side(4), MEMBERS, _ROWS4, panoramia_attacks.no_side(4), config="mlp")
bad(panoramia_attacks.membership_scores, "encoder", "encoder", KEY, "cnn", _ROWS4,
    panoramia_attacks.no_side(4), MEMBERS, _ROWS4, panoramia_attacks.no_side(4))

# --- dpaudit.audits.panoramia: the filter and RM;RN (after the one_run_real rows)
exempt(CONTAINER, *_audit("panoramia", "RealNonMemberResult"))
bad(panoramia_audit.PanoramiaConfig, "filter_fraction-1", "filter_fraction", filter_fraction=1.0)
bad(panoramia_audit.PanoramiaConfig, "filter_fraction-nan", "filter_fraction",
    filter_fraction=float("nan"))
bad(panoramia_audit.PanoramiaConfig, "classifier", "classifier", classifier="gbt")
bad(panoramia_audit.filter_generated, "key", "key", 0, _MODALITY, _EXAMPLES, Tripwire(), 10, 0.5)
bad(panoramia_audit.filter_generated, "modality", "modality", KEY, "image", _EXAMPLES, Tripwire(),
    10, 0.5)
bad(panoramia_audit.filter_generated, "real", "real", KEY, _MODALITY, np.zeros((4, 3)),
    Tripwire(), 10, 0.5)
bad(panoramia_audit.filter_generated, "sample", "sample", KEY, _MODALITY, _EXAMPLES, "vae", 10,
    0.5)
bad(panoramia_audit.filter_generated, "n-0", "n", KEY, _MODALITY, _EXAMPLES, Tripwire(), 0, 0.5)
bad(panoramia_audit.filter_generated, "fraction-0.99", "fraction", KEY, _MODALITY, _EXAMPLES,
    Tripwire(), 10, 0.99)
bad(panoramia_audit.filter_generated, "classifier", "classifier", KEY, _MODALITY, _EXAMPLES,
    Tripwire(), 10, 0.5, classifier="trees")
bad(panoramia_audit.filter_generated, "num_train", "num_train", KEY, _MODALITY, _EXAMPLES,
    Tripwire(), 10, 0.5, num_train=5)
bad(panoramia_audit.measure_real_nonmembers, "key", "key", 0, _MODALITY, Tripwire(), _EXAMPLES,
    MEMBERS)
bad(panoramia_audit.measure_real_nonmembers, "modality", "modality", KEY, "image", Tripwire(),
    _EXAMPLES, MEMBERS)
bad(panoramia_audit.measure_real_nonmembers, "included-2", "included", KEY, _MODALITY,
    Tripwire(), _EXAMPLES, np.array([0, 1, 2, 1]))
bad(panoramia_audit.measure_real_nonmembers, "included-few", "included", KEY, _MODALITY,
    lambda e: np.zeros(len(e)), _EXAMPLES, MEMBERS)
bad(panoramia_audit.measure_real_nonmembers, "target_loss", "target_loss", KEY, _MODALITY,
    "loss", _EXAMPLES, MEMBERS)
bad(panoramia_audit.measure_real_nonmembers, "config", "config", KEY, _MODALITY, Tripwire(),
    _EXAMPLES, MEMBERS, config={})

# --- dpaudit.audits.panoramia_modalities (after the text_modality rows)
bad(modalities.top_k_logits, "top_k-negative", "top_k", np.zeros((2, 5)), -1)
bad(modalities.top_k_logits, "top_k-fraction", "top_k", np.zeros((2, 5)), 2.5)
bad(modalities.top_k_logits, "logits-nan", "logits", np.full((2, 5), np.nan), 2)
bad(modalities.sample_continuations, "top_k", "top_k", KEY, Tripwire(), _PROMPTS,
    np.ones(2, np.int32), 3, 0, 1, 0.9, top_k=-1)
bad(modalities.text_generator, "top_k", "top_k", _SPEC, modalities.TrainSpec(), top_k=-1)
bad(modalities.text_modality, "top_k", "top_k", _VOCAB, modalities.TrainSpec(),
    modalities.TrainSpec(), top_k=1.5)
bad(modalities.tabular_spec, "hidden_sizes", "hidden_sizes", _BINNINGS, 2, (150, 0))
bad(modalities.tabular_modality, "hidden_sizes", "hidden_sizes", _mst.MstConfig(),
    modalities.TrainSpec(), _BINNINGS, ("a",))
bad(modalities.categorical_columns, "binnings", "binnings", ["age"])

# --- dpaudit.audits.panoramia_study (after the StudyConfig rows)
bad(panoramia_study.classifier_config, "modality", "modality", "audio")
bad(panoramia_study.classifier_config, "tabular_classifier", "tabular_classifier", "tabular",
    "xgb")
bad(panoramia_study.classifier_config, "epochs", "epochs", "image", "mlp", 0)
bad(panoramia_study.StudyConfig, "top_p-0", "top_p", top_p=0.0)
bad(panoramia_study.StudyConfig, "top_k-negative", "top_k", top_k=-1)
bad(panoramia_study.StudyConfig, "prompt_length-long", "prompt_length", prompt_length=65)
bad(panoramia_study.StudyConfig, "rm_rn-str", "rm_rn", rm_rn="yes")
bad(panoramia_study.StudyConfig, "tabular_hidden_sizes-empty", "tabular_hidden_sizes",
    tabular_hidden_sizes=())
bad(panoramia_study.StudyConfig, "tabular_hidden_sizes-0", "tabular_hidden_sizes",
    tabular_hidden_sizes=(150, 0))


def test_table_covers_every_public_callable():
  public = public_callables()
  covered = {case.function for case in CASES} | set(EXEMPT)
  missing = sorted(set(public) - covered)
  stale = sorted(covered - set(public))
  assert not missing, f"public callables with no bad-input case and no exemption: {missing}"
  assert not stale, f"table entries that name no public callable: {stale}"
  both = sorted({case.function for case in CASES} & set(EXEMPT))
  assert not both, f"exempt yet given cases: {both}"


def _case_id(case: Case) -> str:
  return f"{case.function.split('.', 1)[1]}-{case.label}"


def _params():
  for case in CASES:
    marks = []
    if _case_id(case) in ABORTS:
      marks.append(pytest.mark.skip(reason=ABORTS[_case_id(case)]))
    elif _case_id(case) in KNOWN_GAPS:
      marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[_case_id(case)]))
    yield pytest.param(case, marks=marks, id=_case_id(case))


def test_known_gaps_name_existing_cases():
  ids = [_case_id(case) for case in CASES]
  repeated = sorted({i for i in ids if ids.count(i) > 1})
  assert not repeated, f"case ids must be unique: {repeated}"
  ids = set(ids)
  stale = sorted((set(KNOWN_GAPS) | set(ABORTS)) - ids)
  assert not stale, f"KNOWN_GAPS/ABORTS entries that name no case: {stale}"


@pytest.mark.parametrize("case", list(_params()))
def test_bad_input_raises_value_error_naming_the_argument(case):
  with pytest.raises(ValueError) as info:
    case.call()
  message = str(info.value)
  assert re.search(case.match, message), (
      f"{case.function} ({case.label}): the message does not name {case.match!r}: {message}")
  assert "\n" not in message.strip(), f"{case.function}: a one-line message expected: {message}"


# ----------------------------------------------------------------------------------------------
# panoramia_study and the front door's panoramia (issue 40)
# ----------------------------------------------------------------------------------------------

exempt(CONTAINER, "dpaudit.audits.panoramia_study.StudyResult",
       "dpaudit.audits.panoramia_study.StudyData")
for _name, _value in (("modality", "audio"), ("targets", ()), ("targets", ("x5",)),
                      ("targets", "e20"), ("targets", ("e1", "e1")), ("dataset", "svhn"),
                      ("num_canaries", -1), ("repetitions", 0), ("seed", -1),
                      ("dp_epochs", float("inf")),
                      ("target_model", "resnet"), ("target_model", 3),
                      ("helper_model", "resnet18"), ("panoramia", {})):
  _kwargs = {_name: _value, **({"modality": "text"} if _name == "helper_model" else {})}
  bad(panoramia_study.StudyConfig, f"{_name}-{_value}", _name if _name != "targets" else "target",
      **_kwargs)
bad(panoramia_study.load, "config", "config", {"modality": "text"})
bad(panoramia_study.StudyConfig, "seed-repetitions", "seed", seed=2**63 - 1, repetitions=2)
_STUDY_KEY = panoramia_study.make_key(0)
bad(panoramia_study.run, "key", "key", 0, panoramia_study.StudyConfig())
bad(panoramia_study.run, "key-seed", "key", panoramia_study.make_key(1),
    panoramia_study.StudyConfig())
bad(panoramia_study.run, "key-impl", "key", KEY, panoramia_study.StudyConfig())
bad(panoramia_study.run, "config", "config", _STUDY_KEY, {"modality": "text"})
bad(panoramia_study.run, "store", "store", _STUDY_KEY, panoramia_study.StudyConfig(),
    store="out")
bad(panoramia_study.run, "data", "data", _STUDY_KEY, panoramia_study.StudyConfig(),
    data=(1, 2))
bad(panoramia_study.check_cell, "cell", "cell", [1, 2])

_PAN_MEMBERS = panoramia_audit.Examples(np.zeros((300, 3), np.float32), np.zeros(300, np.int32))
for _label, _args, _kwargs, _match in (
    ("key", (0, Tripwire(), _PAN_MEMBERS), {"generator": Tripwire()}, "key"),
    ("loss_fn", (KEY, "loss", _PAN_MEMBERS), {"generator": Tripwire()}, "loss_fn"),
    ("members", (KEY, Tripwire(), np.zeros((300, 3))), {"generator": Tripwire()}, "members"),
    ("members-labels", (KEY, Tripwire(), (np.zeros((300, 3)), np.zeros(299))),
     {"generator": Tripwire()}, "members"),
    ("generator-none", (KEY, Tripwire(), _PAN_MEMBERS), {}, "generator"),
    ("generator-both", (KEY, Tripwire(), _PAN_MEMBERS),
     {"generator": Tripwire(), "non_members": _PAN_MEMBERS}, "generator"),
    ("generator-str", (KEY, Tripwire(), _PAN_MEMBERS), {"generator": "vae"}, "generator"),
    ("non_members-shape", (KEY, Tripwire(), _PAN_MEMBERS),
     {"non_members": panoramia_audit.Examples(np.zeros((9, 4), np.float32),
                                              np.zeros(9, np.int32))}, "non_members"),
    ("helper", (KEY, Tripwire(), _PAN_MEMBERS), {"generator": Tripwire(), "helper": 3},
     "helper"),
    ("encoder", (KEY, Tripwire(), _PAN_MEMBERS), {"generator": Tripwire(), "encoder": 3},
     "encoder"),
    ("config", (KEY, Tripwire(), _PAN_MEMBERS), {"generator": Tripwire(), "config": {}},
     "config"),
    ("config-helpers", (KEY, Tripwire(), _PAN_MEMBERS),
     {"generator": Tripwire(), "config": panoramia_audit.PanoramiaConfig(
         num_audit=50, num_classifier_train=50)}, "helper"),
    ("config-sizes", (KEY, Tripwire(), _PAN_MEMBERS),
     {"generator": Tripwire(), "config": panoramia_audit.PanoramiaConfig(
         num_audit=500, num_classifier_train=50, baseline_helpers=("none",))}, "num_audit"),
    ("confidence-1", (KEY, Tripwire(), _PAN_MEMBERS),
     {"generator": Tripwire(), "confidence": 1.0}, "confidence"),
    ("confidence-str", (KEY, Tripwire(), _PAN_MEMBERS),
     {"generator": Tripwire(), "confidence": "0.95"}, "confidence")):
  bad(front.panoramia, _label, _match, *_args, **_kwargs)
