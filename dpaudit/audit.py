"""The front door: audit your own attack scores or black-box mechanism, one result type.

Each function returns :class:`AuditResult`: a lower bound on one privacy quantity, held at a
stated confidence, labelled with what kind of bound it is and what it could at most have shown
(its ceiling, set by the number of observations). A bound of 0.0 means no leakage was measured.

* :func:`from_scores`: membership (or canary) scores of any attack on any model, for examples
  that were in the training data and examples that were not: an (epsilon, delta) lower bound
  with an honest choice of threshold (Clopper-Pearson; Bonferroni over thresholds, or a split
  of the scores into choosing and evaluating halves).
* :func:`one_run_from_scores`: one training run with m canaries, half of them inserted at
  random (Steinke, Nasr & Jagielski 2023; UniAud Thm. 2): an epsilon lower bound from O(1)
  training runs, valid for any (epsilon, delta)-DP algorithm; beside it (``alternatives``) the
  f-DP one-run bound of the same guesses (Mahloujifar, Melis & Chaudhuri, ICML 2025), valid if
  the mechanism's trade-off curve is Gaussian (mu-GDP).
* :func:`dpsgd`: DP-SGD on your own flax model and data, with any of the DP-SGD games
  (many-run, one-run, UniAud, UniAud++; :mod:`dpaudit.audits.dpsgd`), held against the
  accountant's epsilon.
* :func:`private_prediction`: your own prediction service ``predict(key, dataset, query)``
  on two neighbouring datasets, as a black box; :func:`histogram_model`: PATE, CaPC or
  Private-kNN from the histogram model of its teachers' votes (Chadha et al., Secs. 4-5).
* :func:`domias`: synthetic data from any generator, DOMIAS's density-ratio membership scores
  (van Breugel et al. 2023) turned into an epsilon lower bound.
* :func:`black_box`: any ``mechanism(key, dataset) -> outcome`` and two neighbouring datasets:
  Monte Carlo over the mechanism, then (epsilon, delta) and Renyi 2-cut bounds on sets chosen on
  one part of the trials and evaluated on the other (Chadha et al., Auditing Private Prediction,
  Sec. 3), and the k-cut bound over all outcomes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate, estimators, montecarlo, results
from dpaudit.estimators import _compile

FINITE_SAMPLE = "finite-sample"
"""A lower bound that holds at its confidence for every number of observations."""

ASSUMES_ANY_DP = "any (eps, delta)-DP algorithm"
"""What the one-run bound of Steinke, Nasr & Jagielski assumes (``AuditResult.assumes``)."""
ASSUMES_GAUSSIAN = "if the trade-off curve is Gaussian (mu-GDP)"
"""What the f-DP one-run bound of the Gaussian family assumes (Mahloujifar, Melis & Chaudhuri,
ICML 2025): a 1 - beta lower bound only for a mechanism that is mu-GDP for some mu."""
ASSUMES_RUN_CURVE = "if the curve is this DP-SGD run's with some noise multiplier"
"""What the f-DP one-run bound within the audited DP-SGD run's own curve family assumes."""


@dataclasses.dataclass(frozen=True)
class AuditResult:
  """A lower bound on one privacy quantity from an audit.

  Attributes:
    quantity: what is bounded: ``"epsilon"`` (of (epsilon, delta)-DP at ``delta``) or
      ``"renyi divergence"`` (at ``order``).
    lower_bound: the bound (a Python float; 0.0 when no leakage was measured).
    confidence: the probability, over the audit's randomness, that the bound holds.
    kind: ``"finite-sample"`` (valid at every sample size), ``"asymptotic"``, or
      ``"measurement"`` (a number that is not a lower bound, e.g. PANORAMIA's eps~).
    method: how it was computed, in words.
    observations: how many observations it rests on (scores, canaries or trials).
    ceiling: the largest bound these observations could have given (a perfect attack).
    delta: delta of an epsilon bound.
    order: the Renyi order of a divergence bound.
    reference: a value to hold the bound against (e.g. the accountant's epsilon), if given.
    reference_kind: what ``reference`` is (e.g. ``"theoretical upper bound"``).
    details: method-specific figures (plain Python values).
    assumes: what the bound assumes about the mechanism beyond the observations, in words
      (:data:`ASSUMES_ANY_DP`, :data:`ASSUMES_GAUSSIAN`, :data:`ASSUMES_RUN_CURVE`); None
      where the method says it all.
    alternatives: bounds from the same observations under other assumptions (e.g. the f-DP
      one-run bound beside the Steinke one), each an :class:`AuditResult` with its own
      ``assumes``; they cost no further observations.
  """
  quantity: str
  lower_bound: float
  confidence: float
  kind: str
  method: str
  observations: int
  ceiling: float | None = None
  delta: float | None = None
  order: float | None = None
  reference: float | None = None
  reference_kind: str | None = None
  details: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  assumes: str | None = None
  alternatives: tuple[AuditResult, ...] = ()

  def __post_init__(self):
    object.__setattr__(self, "alternatives", tuple(self.alternatives))

  def summary(self) -> str:
    """One line: the bound, what it is, what it assumes and what it is held against; then one
    line per alternative (``"  beside it: "`` and its own summary).

    >>> AuditResult("epsilon", 1.25, 0.95, FINITE_SAMPLE, "scores", 2000, ceiling=6.1,
    ...             delta=1e-5).summary()  # doctest: +NORMALIZE_WHITESPACE
    'epsilon >= 1.25 at delta = 1e-05 (95% finite-sample lower bound; 2000 observations;
     ceiling 6.1; scores)'
    >>> fdp = AuditResult("epsilon", 2.5, 0.95, FINITE_SAMPLE, "f-DP", 2000, delta=1e-5,
    ...                   assumes=ASSUMES_GAUSSIAN)
    >>> steinke = AuditResult("epsilon", 1.25, 0.95, FINITE_SAMPLE, "Steinke", 2000,
    ...                       delta=1e-5, assumes=ASSUMES_ANY_DP, alternatives=(fdp,))
    >>> print(steinke.summary())  # doctest: +NORMALIZE_WHITESPACE
    epsilon >= 1.25 at delta = 1e-05 (95% finite-sample lower bound; 2000 observations;
      Steinke; valid for any (eps, delta)-DP algorithm)
      beside it: epsilon >= 2.5 at delta = 1e-05 (95% finite-sample lower bound; 2000
      observations; f-DP; valid if the trade-off curve is Gaussian (mu-GDP))
    """
    at = (f" at delta = {self.delta:g}" if self.delta is not None else
          f" at order {self.order:g}" if self.order is not None else "")
    parts = [f"{self.confidence:.0%} {self.kind}" + (" lower bound" if self.kind != "measurement"
                                                     else ", not a lower bound"),
             f"{self.observations} observations"]
    if self.ceiling is not None:
      parts.append(f"ceiling {self.ceiling:.3g}")
    parts.append(self.method)
    if self.assumes:
      parts.append(("valid " if self.assumes.startswith("if ") else "valid for ")
                   + self.assumes)
    relation = "=" if self.kind == "measurement" else ">="
    line = f"{self.quantity} {relation} {self.lower_bound:.3g}{at} ({'; '.join(parts)})"
    if self.reference is not None:
      line += f"; against {self.reference:.3g} ({self.reference_kind})"
    return "\n".join([line] + ["  beside it: " + alt.summary().replace("\n", "\n  ")
                               for alt in self.alternatives])

  def to_dict(self) -> dict[str, Any]:
    """Strict-JSON-ready dict (:func:`dpaudit.results.to_json_value`)."""
    return results.to_json_value(dataclasses.asdict(self))


def _confidence(confidence) -> float:
  """``confidence`` in (0, 1) as a float."""
  _validate.check_range("confidence", confidence, 0.0, 1.0, low_open=True, high_open=True)
  return float(confidence)


def _significance(confidence: float) -> float:
  """``1 - confidence`` to 12 significant digits: confidence 0.95 is significance 0.05 exactly
  (not 0.050000000000000044), so the bounds equal the estimators' at ``significance=0.05``."""
  return float(f"{1.0 - confidence:.12g}")


def _reference(reference, reference_kind) -> tuple[float | None, str | None]:
  if reference is None:
    return None, None
  _validate.check_range("reference", reference, 0.0)
  if not isinstance(reference_kind, str) or not reference_kind:
    raise ValueError(f"reference_kind must be a non-empty string, got {reference_kind!r}")
  return float(reference), reference_kind


def from_scores(in_scores, out_scores, *, delta: float = 0.0, confidence: float = 0.95,
                method: str = "split", reference: float | None = None,
                reference_kind: str = "theoretical upper bound") -> AuditResult:
  """(epsilon, delta) lower bound from any attack's scores (higher: more likely a member).

  ``in_scores`` are the attack's scores of examples in the training data (or canaries
  inserted), ``out_scores`` of examples that were not. Thresholding the scores is a test of
  membership; its error rates' Clopper-Pearson bounds give epsilon (Eq. (1) of Chadha et al.),
  with the threshold chosen honestly: ``"split"`` chooses it on half of each list and
  evaluates it on the other half, ``"bonferroni"`` takes the best over all thresholds at
  ``(1 - confidence) / (number of thresholds)``. Calls
  :func:`dpaudit.estimators.epsilon_from_scores`.

  >>> import numpy as np
  >>> rng = np.random.default_rng(0)
  >>> result = from_scores(rng.normal(2.0, 1.0, 5000), rng.normal(0.0, 1.0, 5000))
  >>> 3.0 < result.lower_bound < result.ceiling, result.kind
  (True, 'finite-sample')
  """
  confidence = _confidence(confidence)
  _validate.check_delta(delta)
  if method not in ("split", "bonferroni"):
    raise ValueError(f"method must be 'split' or 'bonferroni', got {method!r}")
  reference, reference_kind = _reference(reference, reference_kind)
  n_in, n_out = np.shape(in_scores)[-1], np.shape(out_scores)[-1]
  with _compile.compiles_after():  # the host paths of first calls run alone
    out = estimators.epsilon_from_scores(in_scores, out_scores, delta, _significance(confidence),
                                         method)
    perfect = estimators.epsilon_from_scores(np.ones(n_in), np.zeros(n_out), delta,
                                             _significance(confidence), method)
  name = ("threshold chosen on half the scores, evaluated on the other half"
          if method == "split" else "best threshold, Bonferroni over thresholds")
  return AuditResult(
      "epsilon", float(out.epsilon), confidence, FINITE_SAMPLE,
      f"attack scores, Clopper-Pearson error rates, {name}", int(n_in + n_out),
      ceiling=float(perfect.epsilon), delta=float(delta), reference=reference,
      reference_kind=reference_kind,
      details={"threshold": float(out.threshold),
               "false_positives": int(out.false_positives), "negatives": int(out.negatives),
               "false_negatives": int(out.false_negatives), "positives": int(out.positives)})


def one_run_from_scores(scores, is_member, *, delta: float = 0.0, confidence: float = 0.95,
                        reference: float | None = None,
                        reference_kind: str = "theoretical upper bound") -> AuditResult:
  """Epsilon lower bound from one training run with canaries (Steinke, Nasr & Jagielski 2023),
  and beside it the f-DP one-run bound of the same guesses (Mahloujifar, Melis & Chaudhuri,
  ICML 2025).

  ``scores[i]`` is the attack's score of canary i and ``is_member[i]`` whether it was inserted
  (each independently with probability 1/2, before training). The guesses are the highest and
  lowest scores; the number of guesses is chosen over a grid with Bonferroni correction. Calls
  :func:`dpaudit.estimators.one_run_epsilon_from_scores`: the bound returned holds for any
  (epsilon, delta)-DP algorithm (``assumes``). Its ``alternatives`` hold the f-DP one-run bound
  of :func:`dpaudit.estimators.fdp_one_run_from_scores` on the same scores, guesses and grid
  (float64): the epsilon at ``delta`` of the strongest mu-GDP curve the audit rejects, a
  1 - beta lower bound only *if the mechanism's trade-off curve is Gaussian* (mu-GDP for some
  mu); ``details["mu_lower_bound"]`` is its mu. At ``delta = 0`` a mu-GDP curve with mu > 0
  has no finite epsilon, so the alternative then bounds mu itself (quantity ``"GDP mu"``).

  >>> import numpy as np
  >>> rng = np.random.default_rng(0)
  >>> member = rng.random(10_000) < 0.5
  >>> result = one_run_from_scores(rng.normal(3.0 * member, 1.0), member, delta=1e-5)
  >>> result.lower_bound > 1.0, result.lower_bound <= result.ceiling, result.assumes
  (True, True, 'any (eps, delta)-DP algorithm')
  >>> fdp, = result.alternatives
  >>> fdp.lower_bound > result.lower_bound, fdp.assumes
  (True, 'if the trade-off curve is Gaussian (mu-GDP)')
  """
  confidence = _confidence(confidence)
  _validate.check_delta(delta)
  reference, reference_kind = _reference(reference, reference_kind)
  significance = _significance(confidence)
  with _compile.compiles_after():  # the host paths of first calls run alone
    out = estimators.one_run_epsilon_from_scores(scores, is_member, delta, significance)
    fdp = _fdp_gaussian(scores, is_member, delta=delta, confidence=confidence,
                        reference=reference, reference_kind=reference_kind)
  return AuditResult(
      "epsilon", float(out.epsilon), confidence, FINITE_SAMPLE,
      "one training run: guesses on the highest and lowest canary scores, Bonferroni over "
      "the number of guesses", int(np.shape(scores)[-1]),
      ceiling=float(np.max(np.asarray(out.grid_epsilon_ceiling))), delta=float(delta),
      reference=reference,
      reference_kind=reference_kind,
      details={"num_guesses": int(out.num_guesses), "num_correct": int(out.num_correct)},
      assumes=ASSUMES_ANY_DP, alternatives=(fdp,))


def _fdp_gaussian(scores, is_member, *, delta: float, confidence: float,
                  reference: float | None, reference_kind: str | None) -> AuditResult:
  """The f-DP one-run bound (Gaussian family) of :func:`one_run_from_scores`'s guesses, as an
  :class:`AuditResult` (arguments already checked)."""
  significance = _significance(confidence)
  with jax.enable_x64(True):
    out = estimators.fdp_one_run_from_scores(scores, is_member, delta, significance)
    grid = np.asarray(out.grid)
    perfect = float(np.max(np.asarray(estimators.fdp_one_run_mu(
        float(np.shape(scores)[-1]), grid, grid, float(out.per_test_significance)))))
    perfect_epsilon = float(estimators.gdp_epsilon(perfect, delta)) if delta > 0 else perfect
  mu = float(out.mu)
  at_delta = delta > 0
  return AuditResult(
      "epsilon" if at_delta else "GDP mu", float(out.epsilon) if at_delta else mu, confidence,
      FINITE_SAMPLE, "one training run, f-DP (Mahloujifar, Melis & Chaudhuri 2025): the "
      "strongest mu-GDP curve the same guesses reject, Bonferroni over the number of guesses",
      int(np.shape(scores)[-1]), ceiling=perfect_epsilon,
      delta=float(delta) if at_delta else None,
      reference=reference if at_delta else None,
      reference_kind=reference_kind if at_delta else None,
      details={"mu_lower_bound": mu, "num_guesses": int(out.num_guesses),
               "num_correct": int(out.num_correct)},
      assumes=ASSUMES_GAUSSIAN)


def _counts(mechanism, key, num_trials, num_outcomes, dataset, chunk_size):
  return montecarlo.count_outcomes(mechanism, key, num_trials, num_outcomes, args=(dataset,),
                                   chunk_size=chunk_size)


def black_box(key: jax.Array, mechanism: Callable[[jax.Array, Any], Any], dataset: Any,
              neighbor: Any, *, num_outcomes: int, num_trials: int = 1_000_000,
              orders=(2.0,), delta: float = 0.0, confidence: float = 0.95,
              selection_fraction: float = 0.5, chunk_size: int = 2**16,
              reference: float | None = None,
              reference_kind: str = "theoretical upper bound") -> tuple[AuditResult, ...]:
  """Lower bounds for a black-box mechanism on two neighbouring datasets.

  ``mechanism(key, dataset)`` is a pure JAX function returning one integer outcome in
  ``[0, num_outcomes)`` (jit- and vmap-able; ``dataset`` is any pytree of arrays, and
  ``neighbor`` has the same structure and shapes). It runs ``num_trials`` times on each dataset
  (:func:`dpaudit.montecarlo.count_outcomes`). The first ``selection_fraction`` of the trials
  choose, among the outcome sets ordered by likelihood ratio, the set whose bound is best; the
  rest evaluate it, so choosing cannot inflate the bound (Chadha et al., Sec. 3).

  Returns, each at ``confidence`` on its own: the (epsilon, ``delta``) lower bound of the
  chosen set's test (:func:`dpaudit.estimators.epsilon_from_error_counts`); per order, the Renyi
  2-cut lower bound on D_alpha(P || Q) (:func:`dpaudit.estimators.renyi_two_cut_lower_bound`);
  per order, the k-cut lower bound over all outcomes and trials
  (:func:`dpaudit.estimators.renyi_k_cut_lower_bound`, Sison-Glaz intervals).

  >>> import jax, jax.numpy as jnp
  >>> def randomized_response(key, bit):  # epsilon = 1
  ...   keep = jax.random.bernoulli(key, jnp.e / (1 + jnp.e))
  ...   return jnp.where(keep, bit, 1 - bit)
  >>> eps, two_cut, k_cut = black_box(jax.random.key(0), randomized_response, jnp.int32(1),
  ...                                 jnp.int32(0), num_outcomes=2, num_trials=200_000)
  >>> 0.9 < eps.lower_bound <= 1.0
  True
  """
  _validate.check_key(key)
  confidence = _confidence(confidence)
  _validate.check_delta(delta)
  _validate.check_integer("num_outcomes", num_outcomes, 2)
  _validate.check_integer("num_trials", num_trials, 4)
  _validate.check_range("selection_fraction", selection_fraction, 0.0, 1.0, low_open=True,
                        high_open=True)
  _validate.check_orders(orders)
  orders = tuple(float(o) for o in np.ravel(orders))
  if not orders:
    raise ValueError("orders is empty; give at least one Renyi order > 1")
  reference, reference_kind = _reference(reference, reference_kind)
  if jax.tree.structure(dataset) != jax.tree.structure(neighbor) or any(
      np.shape(a) != np.shape(b)
      for a, b in zip(jax.tree.leaves(dataset), jax.tree.leaves(neighbor))):
    raise ValueError("neighbor must have the structure and shapes of dataset")
  num_selection = max(1, min(num_trials - 1, round(selection_fraction * num_trials)))
  num_evaluation = num_trials - num_selection
  significance = _significance(confidence)
  keys = jax.random.split(key, 4)
  sel_p = _counts(mechanism, keys[0], num_selection, num_outcomes, dataset, chunk_size)
  sel_q = _counts(mechanism, keys[1], num_selection, num_outcomes, neighbor, chunk_size)
  eval_p = _counts(mechanism, keys[2], num_evaluation, num_outcomes, dataset, chunk_size)
  eval_q = _counts(mechanism, keys[3], num_evaluation, num_outcomes, neighbor, chunk_size)
  from dpaudit.audits import noisy_argmax  # the 2-cut set selection  # pylint: disable=g-import-not-at-top
  dtype = jnp.result_type(float)
  sel_p, sel_q, eval_p, eval_q = (jnp.asarray(c, dtype) for c in (sel_p, sel_q, eval_p, eval_q))

  # (epsilon, delta): the prefix set whose test bound is best on the selection trials.
  candidates = noisy_argmax.likelihood_ratio_prefix_sets(sel_p, sel_q).astype(dtype)
  in_p, in_q = candidates @ sel_p, candidates @ sel_q
  n_sel = float(num_selection)
  chosen = candidates[int(jnp.argmax(estimators.epsilon_from_error_counts(
      in_q, n_sel, n_sel - in_p, n_sel, delta, significance)))]
  n_eval = float(num_evaluation)
  in_p, in_q = float(chosen @ eval_p), float(chosen @ eval_q)
  epsilon = float(estimators.epsilon_from_error_counts(in_q, n_eval, n_eval - in_p, n_eval, delta,
                                                       significance))
  ceiling = float(estimators.epsilon_from_error_counts(0.0, n_eval, 0.0, n_eval, delta,
                                                       significance))
  out = [AuditResult(
      "epsilon", epsilon, confidence, FINITE_SAMPLE,
      "black box: outcome set chosen on the selection trials, its test's error rates "
      "(Clopper-Pearson) on the evaluation trials", 2 * num_trials, ceiling=ceiling,
      delta=float(delta), reference=reference, reference_kind=reference_kind,
      details={"set": np.flatnonzero(np.asarray(chosen)).tolist(),
               "in_set_dataset": in_p, "in_set_neighbor": in_q,
               "evaluation_trials": num_evaluation})]
  sets = noisy_argmax.select_two_cut_sets(sel_p, sel_q, jnp.asarray(orders), significance)
  in_p, in_q = sets.astype(dtype) @ eval_p, sets.astype(dtype) @ eval_q
  two_cut = jnp.diagonal(estimators.renyi_two_cut_lower_bound(
      in_p, n_eval, in_q, n_eval, jnp.asarray(orders), significance))
  k_cut = estimators.renyi_k_cut_lower_bound(sel_p + eval_p, sel_q + eval_q,
                                             jnp.asarray(orders), significance)
  for i, order in enumerate(orders):
    out.append(AuditResult(
        "renyi divergence", float(two_cut[i]), confidence, FINITE_SAMPLE,
        "black box: Renyi 2-cut of the outcome set chosen on the selection trials "
        "(Clopper-Pearson on the evaluation trials)", 2 * num_trials, order=float(order),
        details={"set": np.flatnonzero(np.asarray(sets[i])).tolist()}))
  for i, order in enumerate(orders):
    out.append(AuditResult(
        "renyi divergence", float(np.ravel(k_cut)[i]), confidence, FINITE_SAMPLE,
        "black box: Renyi k-cut over all outcomes (Sison-Glaz simultaneous intervals)",
        2 * num_trials, order=float(order)))
  return tuple(out)


def private_prediction(key: jax.Array, predict: Callable[[jax.Array, Any, Any], Any],
                       dataset: Any, neighbor: Any, query: Any, *, num_classes: int,
                       num_trials: int = 1_000_000, orders=(2.0,), delta: float = 0.0,
                       confidence: float = 0.95, chunk_size: int = 2**16,
                       reference: float | None = None,
                       reference_kind: str = "theoretical upper bound"
                       ) -> tuple[AuditResult, ...]:
  """Lower bounds for your own private prediction service on one query.

  ``predict(key, dataset, query)`` answers ``query`` with one class in ``[0, num_classes)``
  from the private ``dataset`` (a pure JAX function: e.g. teachers trained on ``dataset``
  voting, plus noise). ``neighbor`` is ``dataset`` with one record changed. The answers on both
  are audited as a black box (:func:`black_box`, Chadha et al., Auditing Private Prediction,
  Sec. 3): an (epsilon, ``delta``) bound, and per Renyi order a 2-cut and a k-cut bound on
  :math:`D_\\alpha` of one prediction. For PATE, CaPC and Private-kNN with teachers you have
  fitted, :func:`histogram_model` audits their histogram model instead.

  >>> import jax, jax.numpy as jnp
  >>> votes = jnp.array([60.0, 40.0]); neighbor = jnp.array([59.0, 41.0])
  >>> def noisy_argmax(key, votes, query):  # GNMax on a fixed vote histogram
  ...   return jnp.argmax(votes + 2.0 * jax.random.normal(key, votes.shape))
  >>> eps, two_cut, k_cut = private_prediction(jax.random.key(0), noisy_argmax, votes,
  ...                                          neighbor, None, num_classes=2,
  ...                                          num_trials=100_000)
  >>> 0.0 <= two_cut.lower_bound <= 2.0 / 2.0**2  # GNMax: D_2 <= alpha / sigma^2
  True
  """
  if not callable(predict):
    raise ValueError(f"predict must be a function (key, dataset, query) -> class, got "
                     f"{type(predict).__name__}")
  out = black_box(key, lambda k, d: predict(k, d, query), dataset, neighbor,
                  num_outcomes=num_classes, num_trials=num_trials, orders=orders, delta=delta,
                  confidence=confidence, chunk_size=chunk_size, reference=reference,
                  reference_kind=reference_kind)
  return tuple(dataclasses.replace(r, method=r.method.replace("black box", "private prediction",
                                                              1)) for r in out)


def histogram_model(key: jax.Array, model: Any, *, algorithm: str = "pate",
                    noise_multiplier: float, num_trials: int = 1_000_000, order: float = 2.0,
                    confidence: float = 0.95, num_histograms: int = 4096,
                    num_bootstrap: int = 200, sampling_rate: float | None = None
                    ) -> tuple[AuditResult, AuditResult]:
  """Renyi lower bounds on one query of PATE, CaPC or Private-kNN from its histogram model.

  ``model`` is a :class:`dpaudit.mechanisms.histograms.PateModel`, ``CapcModel`` or
  ``KnnModel`` (e.g. :func:`dpaudit.mechanisms.histograms.pate_model` from the teachers'
  class probabilities on the query), ``noise_multiplier`` the Gaussian noise of the noisy
  argmax. Runs :func:`dpaudit.audits.private_prediction.run` (Chadha et al., Secs. 4-5) and
  returns the 2-cut (finite-sample) and k-cut (asymptotic simultaneous intervals) lower bounds
  on :math:`D_\\alpha` at ``order``, each held against the algorithm's data-independent RDP
  (a theoretical upper bound); ``details`` hold the model divergence (an estimate of the true
  divergence, with its bootstrap standard deviation).

  >>> import jax
  >>> from dpaudit.mechanisms import histograms
  >>> model = histograms.pate_model([0.9, 0.1], [0.0, 1.0], num_teachers=10)
  >>> two_cut, k_cut = histogram_model(jax.random.key(0), model, noise_multiplier=2.0,
  ...                                  num_trials=20_000, num_histograms=64, num_bootstrap=8)
  >>> 0.0 <= two_cut.lower_bound <= two_cut.reference
  True
  """
  from dpaudit.audits import private_prediction as games  # pylint: disable=g-import-not-at-top
  confidence = _confidence(confidence)
  _validate.check_choice("algorithm", algorithm, games.ALGORITHMS)
  _validate.check_range("noise_multiplier", noise_multiplier, 0.0, np.inf, low_open=True,
                        high_open=True)
  _validate.check_range("order", order, 1.0, np.inf, low_open=True, high_open=True)
  if not isinstance(model, games.MODEL_TYPES[algorithm]):
    raise ValueError(f"model is a {type(model).__name__}; algorithm={algorithm!r} needs a "
                     f"dpaudit.mechanisms.histograms.{games.MODEL_TYPES[algorithm].__name__}")
  config = games.PredictionAuditConfig(
      algorithm=algorithm, sigma=noise_multiplier, num_trials=num_trials, orders=(order,),
      significance=_significance(confidence), num_histograms=num_histograms,
      num_bootstrap=num_bootstrap, sampling_rate=sampling_rate)
  result = games.run(key, config, models=[model])
  q = result.per_query
  reference = float(q.data_independent[0, 0])
  details = {"model_divergence": float(q.model_divergence[0, 0]),
             "model_divergence_sd": float(q.model_divergence_sd[0, 0]),
             "model_divergence_kind": "estimate of the true divergence (not a bound)",
             "noise_multiplier": float(noise_multiplier)}
  common = dict(quantity="renyi divergence", confidence=confidence,
                observations=2 * int(num_trials), order=float(order), reference=reference,
                reference_kind=f"{algorithm}'s data-independent RDP (theoretical upper bound)",
                details=details)
  return (AuditResult(lower_bound=max(float(q.two_cut[0, 0]), 0.0), kind=FINITE_SAMPLE,
                      method=f"{algorithm} histogram model: Renyi 2-cut, set chosen on half "
                             "the trials", **common),
          AuditResult(lower_bound=max(float(q.k_cut[0, 0]), 0.0), kind="asymptotic",
                      method=f"{algorithm} histogram model: Renyi k-cut "
                             f"({config.k_cut_method} intervals)", **common))


def domias(synthetic: Any, reference_data: Any, candidates: Any, is_member: Any, *,
           membership: str = "bernoulli", delta: float = 0.0, confidence: float = 0.95,
           reference: float | None = None,
           reference_kind: str = "the generator's claimed epsilon (theoretical upper bound)"
           ) -> AuditResult:
  """Membership inference against synthetic data from any generator (DOMIAS, van Breugel et
  al., AISTATS 2023, Eq. 2), turned into an epsilon lower bound.

  ``synthetic`` are the generator's records ``[n_syn, d]``, ``reference_data`` real records
  from the same population that the generator did not see ``[n_ref, d]``, ``candidates``
  records ``[m, d]`` of which ``is_member`` says which were in the generator's training data.
  DOMIAS scores each candidate by the density ratio :math:`p_{syn}(x) / p_{ref}(x)` (Gaussian
  KDEs, :func:`dpaudit.attacks.density.fit_kde`). With ``membership="bernoulli"`` (each candidate
  was put in the training data by an independent fair coin, before training) the one-run bound
  of Steinke et al. (:func:`one_run_from_scores`) is a valid lower bound on the epsilon of
  the generator's training; with ``"fixed"`` (members and non-members chosen otherwise) the
  threshold test of :func:`from_scores` bounds how distinguishable the two groups' records are.
  Under ``"bernoulli"`` the result is :func:`one_run_from_scores`'s, with its f-DP (Gaussian
  family) bound in ``alternatives``; under ``"fixed"`` there is none: the f-DP one-run bound
  needs the one-run game (each candidate a member by an independent fair coin) as much as the
  Steinke bound does, and the threshold test's premise (records as independent trials) is
  not one that a trade-off curve of the generator's training can be tested on.

  >>> import numpy as np
  >>> rng = np.random.default_rng(0)
  >>> candidates = rng.normal(size=(400, 2)); member = rng.random(400) < 0.5
  >>> synthetic = candidates[member][rng.integers(0, member.sum(), 2000)] + 0.05 * rng.normal(
  ...     size=(2000, 2))  # a generator that copies its training data
  >>> result = domias(synthetic, rng.normal(size=(2000, 2)), candidates, member)
  >>> result.lower_bound > 0.5, result.kind
  (True, 'finite-sample')
  """
  from dpaudit.attacks import density  # pylint: disable=g-import-not-at-top
  from dpaudit.attacks import domias as scores_of
  if membership not in ("bernoulli", "fixed"):
    raise ValueError(f"membership must be 'bernoulli' or 'fixed', got {membership!r}")
  candidates = scores_of.check_rows("candidates", candidates)
  d = candidates.shape[1]
  synthetic = scores_of.check_rows("synthetic", synthetic, d)
  reference_data = scores_of.check_rows("reference_data", reference_data, d)
  is_member = np.asarray(is_member)
  if is_member.shape != (candidates.shape[0],) or not np.isin(is_member, (0, 1)).all():
    raise ValueError(f"is_member must be {candidates.shape[0]} booleans (one per candidate), "
                     f"got shape {is_member.shape}")
  is_member = is_member.astype(bool)
  if is_member.all() or not is_member.any():
    raise ValueError("is_member must hold both members and non-members")
  scores = scores_of.domias_scores(
      density.kde_log_density(density.fit_kde(synthetic), candidates),
      density.kde_log_density(density.fit_kde(reference_data), candidates))
  if membership == "bernoulli":
    result = one_run_from_scores(scores, is_member, delta=delta, confidence=confidence,
                                 reference=reference, reference_kind=reference_kind)
  else:
    result = from_scores(scores[is_member], scores[~is_member], delta=delta,
                         confidence=confidence, reference=reference,
                         reference_kind=reference_kind)
  auc = float(estimators.roc_auc(scores[is_member], scores[~is_member]))
  prefix = "DOMIAS density-ratio scores (KDE), "
  return dataclasses.replace(
      result, method=prefix + result.method, details={**result.details, "auc": auc},
      alternatives=tuple(dataclasses.replace(alt, method=prefix + alt.method)
                         for alt in result.alternatives))


def dpsgd(key: jax.Array, data: Any, config: Any, *, model: Any = None) -> AuditResult:
  """Audits DP-SGD training of ``model`` on ``data`` with the game of ``config``.

  ``data`` is a :class:`dpaudit.audits.dpsgd.AuditData` (training, test and canary-pool
  examples with integer labels), ``config`` a :class:`dpaudit.audits.dpsgd.DPSGDAuditConfig`
  (the game: ``many_run``, ``one_run``, ``uniaud`` or ``uniaud_plus``; the canaries; the
  DP-SGD settings and the noise calibrated to ``epsilon``). ``model`` is any flax module
  mapping a batch of examples to logits, or the name of one of
  :data:`dpaudit.models.MODEL_NAMES` (default: ``config.model``, ``"mlp"``: the MLP of
  ``config.hidden_sizes``). The canaries' shape and UniAud's Case I are options of
  ``config``: ``canary_dim`` and ``num_canary_classes`` give the synthetic (gaussian,
  orthogonal) canaries of ``one_run`` and ``uniaud`` a dimension d and C classes of their own
  (UniAud's Table IV: d = C = 1000; the model then takes their shape), and
  ``canaries_only=True`` trains on the canaries alone (m = n), not appended to the data. The
  bound is held against the accountant's epsilon for the relation the game tests. A game
  reporting its best number of guesses without correction (``correction="none"``) is
  labelled ``"optimistic"``, not a valid lower bound. The one-run games (``one_run``,
  ``uniaud``, ``uniaud_plus``) report the Steinke bound (valid for any (epsilon, delta)-DP
  algorithm, ``assumes``) and in ``alternatives`` the f-DP one-run bounds of the same guesses
  (Mahloujifar, Melis & Chaudhuri, ICML 2025): the Gaussian family's
  (``epsilon_fdp_gaussian``; valid if the curve is mu-GDP) and, where computed, the run's own
  curve family's (``epsilon_fdp_run``; valid if the curve is this run's subsampled Gaussian
  composition with some noise multiplier).

  >>> import jax, numpy as np
  >>> from dpaudit.audits.dpsgd import AuditData, DPSGDAuditConfig
  >>> rng = np.random.default_rng(0)
  >>> x, y = rng.normal(size=(96, 4)).astype(np.float32), rng.integers(0, 2, 96)
  >>> data = AuditData(x[:64], y[:64], x[64:80], y[64:80], x[80:], y[80:], num_classes=2)
  >>> config = DPSGDAuditConfig(game="one_run", canary="gaussian", num_canaries=16,
  ...                           epochs=1, batch_size=16, hidden_sizes=(4,), epsilon=8.0)
  >>> result = dpsgd(jax.random.key(0), data, config)
  >>> 0.0 <= result.lower_bound <= result.reference, result.quantity
  (True, 'epsilon')
  >>> [alt.assumes for alt in result.alternatives][:1]
  ['if the trade-off curve is Gaussian (mu-GDP)']
  """
  from dpaudit.audits import dpsgd as games  # pylint: disable=g-import-not-at-top
  if isinstance(model, str):
    if not isinstance(config, games.DPSGDAuditConfig):
      raise ValueError(f"config must be a DPSGDAuditConfig, got {type(config).__name__}")
    config, model = dataclasses.replace(config, model=model), None
  result = games.run(key, config, data=data, model=model)
  kind = "optimistic (best of several tests, uncorrected)" if result.optimistic else FINITE_SAMPLE
  name = (type(model).__name__ if model is not None else
          f"MLP(hidden_sizes={tuple(config.hidden_sizes)})" if config.model == "mlp"
          else config.model)
  common = dict(quantity="epsilon", confidence=1.0 - float(config.significance), kind=kind,
                observations=int(result.num_observations), delta=float(config.delta),
                reference=float(result.epsilon_theory),
                reference_kind="the accountant's epsilon (theoretical upper bound)")
  method = f"DP-SGD, game {result.game} with {result.canary} canaries"
  alternatives = []
  if result.game != "many_run":
    for field, assumes, what, extra in (
        ("epsilon_fdp_gaussian", ASSUMES_GAUSSIAN, "the strongest mu-GDP curve rejected",
         "mu_lower_bound"),
        ("epsilon_fdp_run", ASSUMES_RUN_CURVE, "the strongest curve of the run's family "
         "rejected", "noise_multiplier_upper_bound")):
      value = float(getattr(result, field, math.nan))  # NaN: not computed
      if math.isnan(value):
        continue
      figures = {extra: float(result.details[extra])} if extra in result.details else {}
      alternatives.append(AuditResult(
          lower_bound=value, method=f"{method}, f-DP one run (Mahloujifar, Melis & Chaudhuri "
          f"2025): {what} by the same guesses", assumes=assumes, details=figures, **common))
  return AuditResult(
      lower_bound=float(result.epsilon_lower_bound), method=method,
      ceiling=float(result.epsilon_ceiling),
      details={"model": name, "test_accuracy": float(result.test_accuracy),
               "noise_multiplier": float(result.noise_multiplier),
               "num_steps": int(result.num_steps), "sampling_rate": float(result.sampling_rate)},
      assumes=ASSUMES_ANY_DP,
      alternatives=tuple(alternatives), **common)


MEASUREMENT = "measurement"
"""A number that is not a lower bound on a privacy parameter (PANORAMIA's eps~)."""


def _panoramia_sampler(generator, non_members, members):
  """The fitted generator: ``generator`` itself, or draws (without replacement) from the
  given generated ``non_members``."""
  from dpaudit.audits import panoramia as pan  # pylint: disable=g-import-not-at-top
  if (generator is None) == (non_members is None):
    raise ValueError("give exactly one of generator (a fitted generator (key, n) -> Examples) "
                     "and non_members (generated Examples), got "
                     f"generator={type(generator).__name__}, "
                     f"non_members={type(non_members).__name__}")
  if generator is not None:
    if not callable(generator):
      raise ValueError(f"generator must be a function (key, n) -> Examples, got "
                       f"{type(generator).__name__}")
    return generator
  pool = _panoramia_examples("non_members", non_members)
  pan.concatenate(members, pool)  # the same per-example shape and dtype as the members

  def sample(key, n):
    if n > len(pool):
      raise ValueError(f"non_members has {len(pool)} examples but the audit draws {n} (the "
                       "classifiers' training set, the audit set and the helper's)")
    return pool.take(np.asarray(jax.random.permutation(key, len(pool)))[:n])
  return sample


def _panoramia_examples(name, value):
  from dpaudit.audits import panoramia as pan  # pylint: disable=g-import-not-at-top
  if isinstance(value, tuple) and len(value) == 2 and not isinstance(value, pan.Examples):
    value = pan.Examples(np.asarray(value[0]), np.asarray(value[1]))
  if not isinstance(value, pan.Examples):
    raise ValueError(f"{name} must be an Examples(inputs, labels) or an (inputs, labels) "
                     f"pair, got {type(value).__name__}")
  return pan.concatenate(value)  # checked: labels 1-D, one per input


def panoramia(key: jax.Array, loss_fn: Callable[[Any], Any], members: Any, *,
              generator: Callable[[jax.Array, int], Any] | None = None,
              non_members: Any = None, helper: Callable[[jax.Array, Any], Any] | None = None,
              encoder: Any = None, config: Any = None,
              confidence: float = 0.95) -> AuditResult:
  r"""PANORAMIA (Kazmi et al., NeurIPS 2024, Alg. 1): measures a trained model's privacy
  leakage without retraining it, from examples it was trained on and generated non-members.

  ``loss_fn(examples)`` gives the model's per-example losses ``[N]`` of an
  :class:`dpaudit.audits.panoramia.Examples` ``(inputs, labels)``; ``members`` are real
  examples the model was trained on; ``generator(key, n)`` returns n generated examples (a
  generator fitted on data the audit does not use), or ``non_members`` are generated examples
  given directly. A MIA trained on the inputs and the model's loss is held against a baseline
  trained on the inputs only (and a ``helper``'s loss, when ``helper(key, examples)`` trains a
  model like the target on generated data and returns its ``loss_fn``): c_lb bounds how well
  the generated data can be told from the members at all, {c+eps}_lb how well the MIA does,
  both at ``confidence`` jointly (:func:`dpaudit.audits.panoramia.run`).

  The number returned is PANORAMIA's :math:`\tilde\epsilon = \max(0, \{c+\epsilon\}_{lb} -
  c_{lb})`: a **measurement relative to the baseline, not a lower bound on the model's DP
  epsilon** (the generated non-members are not drawn like the members, so no DP guarantee is
  being tested); ``kind`` is ``"measurement"``. ``details`` holds c_lb and {c+eps}_lb, the
  AUCs, and the p-value of eps~ against eps~ of a model that leaks nothing (its null
  reference); ``beyond_null`` says whether the measurement can be told apart from no
  leakage. ``ceiling`` is the eps~ a perfect MIA would get on this audit set.

  ``config`` (:class:`dpaudit.audits.panoramia.PanoramiaConfig`) sets the sizes and the
  classifiers (its significance is replaced by ``1 - confidence``); by default a third of the
  members each (at most 1000) train the classifiers and form the audit set, and the baseline
  is ``"generated"`` with a helper, ``"none"`` without. ``encoder`` is a flax module (or a
  function making one) embedding the inputs for the classifiers (default: a small CNN for
  images ``[H, W, C]``, an MLP on the flattened inputs otherwise).

  >>> import jax, numpy as np
  >>> from dpaudit.attacks.panoramia import ClassifierConfig
  >>> from dpaudit.audits.panoramia import Examples, PanoramiaConfig
  >>> rng = np.random.default_rng(0)
  >>> members = Examples(rng.normal(size=(300, 4)).astype(np.float32), np.zeros(300, int))
  >>> seen = {row.tobytes() for row in members.inputs}
  >>> def loss_fn(ex):  # a model that memorised its training data
  ...   return np.array([0.0 if r.tobytes() in seen else 1.0 for r in np.asarray(ex.inputs)])
  >>> def generator(key, n):  # a generator of the members' law, fitted elsewhere
  ...   return Examples(np.asarray(jax.random.normal(key, (n, 4)), np.float32),
  ...                   np.zeros(n, int))
  >>> config = PanoramiaConfig(num_audit=100, num_classifier_train=100, num_helper_train=2,
  ...                          baseline_helpers=("none",), null_samples=20,
  ...                          classifier=ClassifierConfig(epochs=10))
  >>> result = panoramia(jax.random.key(0), loss_fn, members, generator=generator,
  ...                    config=config)
  >>> result.kind, result.lower_bound > 1.0, result.details["beyond_null"]
  ('measurement', True, True)
  """
  import flax.linen as nn  # pylint: disable=g-import-not-at-top

  from dpaudit.attacks import panoramia as attacks  # pylint: disable=g-import-not-at-top
  from dpaudit.audits import panoramia as pan  # pylint: disable=g-import-not-at-top
  _validate.check_key(key)
  if not callable(loss_fn):
    raise ValueError(f"loss_fn must be a function of Examples to per-example losses, got "
                     f"{type(loss_fn).__name__}")
  members = _panoramia_examples("members", members)
  confidence = _confidence(confidence)
  sample = _panoramia_sampler(generator, non_members, members)
  if helper is not None and not callable(helper):
    raise ValueError(f"helper must be a function (key, examples) -> loss_fn or None, got "
                     f"{type(helper).__name__}")
  if encoder is None:
    image = np.ndim(members.inputs) == 4
    encoder = attacks.ImageEncoder() if image else attacks.VectorEncoder()
  if not (isinstance(encoder, nn.Module) or callable(encoder)):
    raise ValueError(f"encoder must be a flax module or a function making one, got "
                     f"{type(encoder).__name__}")
  make_encoder = (lambda: encoder) if isinstance(encoder, nn.Module) else encoder
  if config is None:
    third = min(1000, len(members) // 3)
    config = pan.PanoramiaConfig(
        num_audit=max(2, third), num_classifier_train=max(2, third),
        num_helper_train=min(2000, max(2, third)) if helper is not None else 2,
        baseline_helpers=("generated",) if helper is not None else ("none",))
  _validate.check_instance("config", config, pan.PanoramiaConfig)
  config = dataclasses.replace(config, significance=_significance(confidence))
  if helper is None and set(config.baseline_helpers) - {"none"}:
    raise ValueError(f"config.baseline_helpers={list(config.baseline_helpers)} need a helper "
                     "(helper=None allows only 'none')")
  config.split_sizes(len(members))

  def no_helper(key, examples):
    raise AssertionError("no helper was given")
  modality = pan.Modality("user", lambda key, d_g: sample, helper or no_helper, make_encoder)
  key_setup, key_mia = jax.random.split(key)
  setup = pan.prepare_audit(key_setup, modality, members, config)
  result = pan.measure_target(key_mia, setup, modality, loss_fn, config)
  stacked = np.stack([np.asarray(s, np.float64) for s in setup.baseline_scores.values()])
  perfect = estimators.panoramia_bounds(stacked, setup.is_member.astype(np.float64),
                                        setup.is_member, config.significance,
                                        correction=config.correction)
  null = result.null_eps_tilde
  return AuditResult(
      "PANORAMIA eps~ = {c+eps}_lb - c_lb", float(result.eps_tilde), confidence, MEASUREMENT,
      "PANORAMIA (Kazmi et al. 2024): MIA on the model's loss against a baseline, real "
      "members vs generated non-members; a measurement relative to the baseline, not a lower "
      "bound on epsilon", int(result.num_audit),
      ceiling=max(0.0, float(perfect.c_plus_eps_lb) - float(result.c_lb)),
      details={"c_lb": result.c_lb, "c_plus_eps_lb": result.c_plus_eps_lb,
               "confidence_of": "c_lb and c_plus_eps_lb jointly (eps~ is their difference)",
               "strongest_baseline": result.strongest_baseline,
               "baseline_c_lb": dict(result.baseline_c_lb),
               "baseline_auc": dict(result.baseline_auc), "mia_auc": result.mia_auc,
               "eps_tilde_p_value": result.eps_tilde_p_value,
               "beyond_null": result.beyond_null,
               "null_eps_tilde_q95": (None if null is None else
                                      float(np.quantile(null["values"], 0.95))),
               "num_members": result.num_members, "optimistic": result.optimistic,
               "one_run_rm_gn": result.one_run_rm_gn,
               "one_run_rm_gn_fdp": result.one_run_rm_gn_fdp,
               "one_run_rm_gn_fdp_mu": result.one_run_rm_gn_fdp_mu,
               "one_run_rm_gn_note": "O(1) audit with generated non-members (Steinke; and "
                                     "f-DP, Gaussian family, with its mu): not a valid "
                                     "lower bound (they are not drawn like the members)"})
