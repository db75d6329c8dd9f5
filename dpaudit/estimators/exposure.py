r"""Exposure of a canary secret: Carlini et al., "The Secret Sharer: Evaluating and Testing
Unintended Memorization in Neural Networks" (USENIX Security 2019), Sec. 4.

A canary secret :math:`s^\ast` is drawn uniformly from a space :math:`\mathcal R` of
:math:`|\mathcal R|` candidates (e.g. all :math:`10^{16}` digit strings) and inserted into the
training data; the trained model assigns every candidate :math:`r` a log-probability
:math:`\log p(r)` (higher = more likely; any score that orders candidates the same way, e.g.
minus the log-perplexity, works). The rank of the canary is its position when :math:`\mathcal R`
is sorted from most to least likely,

.. math::
   \mathrm{rank}(s^\ast) = \#\{r \in \mathcal R : \log p(r) \ge \log p(s^\ast)\}
     = 1 + \#\{r \ne s^\ast : \log p(r) \ge \log p(s^\ast)\},

with **ties counted against the canary** (a candidate exactly as likely as the canary ranks
before it: the pessimistic rank, which makes exposure a conservative measure of
memorisation), and its exposure (Carlini et al., Def. 4.3, in bits) is

.. math::
   \mathrm{exposure}(s^\ast) = \log_2|\mathcal R| - \log_2 \mathrm{rank}(s^\ast)
     = -\log_2 \Pr_{r \sim U(\mathcal R)}[\log p(r) \ge \log p(s^\ast)],

between 0 (the canary is the least likely candidate, or tied with all) and
:math:`\log_2|\mathcal R|` (the strictly most likely). The second form (Sec. 4.3) is what
:func:`exposure_sampled` estimates from uniform samples of :math:`\mathcal R` when the space
is too large to enumerate. Stock et al., "Defending against Reconstruction Attacks with Renyi
Differential Privacy" (2022), Sec. 4.3, relate the canary's secrecy :math:`\log_2(1/p_1)` to
exposure.

Log-probabilities may be ``-inf`` (probability-zero candidates) but not NaN or ``+inf``;
:func:`exposure_sampled` needs finite sample log-probabilities (the Gaussian fit is undefined
otherwise). All functions are pure JAX, jit- and vmap-able (validation runs only on concrete
inputs), broadcast a batch of canaries against leading axes of the candidates (the space /
the samples lie on the **last** axis), and compute in float64 when ``jax_enable_x64`` is on.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

from dpaudit import _validate
from dpaudit.estimators import _compile
from dpaudit.estimators import binomial as _binomial

_LOG2 = math.log(2.0)


def _float_dtype():
  return jnp.result_type(float)


def _check_log_probs(name, values, *, allow_neg_inf=True, need_axis=False):
  if need_axis:
    if np.ndim(values) < 1:
      raise ValueError(f"{name} must have at least one axis (the candidates), got a scalar")
    if np.shape(values)[-1] == 0:
      raise ValueError(f"{name} is empty along its last axis; need at least one candidate")
  _validate.check_real_array(name, values, nonempty=False, neg_inf=allow_neg_inf)


def _check_batch(canary_log_prob, candidates, cand_name):
  _validate.check_broadcastable("canary_log_prob", canary_log_prob, np.shape(candidates)[:-1],
                                f"batch shape of {cand_name}")


def exposure_exact(canary_log_prob, candidate_log_probs) -> jax.Array:
  r"""Exact exposure (Carlini et al. 2019, Def. 4.3) over an enumerated candidate space.

  .. math::
     \mathrm{exposure} = \log_2 N - \log_2 \#\{i : \ell_i \ge \ell^\ast\},

  with :math:`\ell_i` the log-probabilities of **all** :math:`N = |\mathcal R|` candidates
  (the last axis of ``candidate_log_probs``) and :math:`\ell^\ast` the canary's. The space
  must include the canary itself (its entry ties with ``canary_log_prob`` and is the "1" of
  the rank); ties count against the canary (see the module docstring). If the canary's value
  is larger than every candidate (the canary was left out by mistake) the rank is clamped to
  1, i.e. the exposure to :math:`\log_2 N`.

  Args:
    canary_log_prob: :math:`\ell^\ast`, scalar or batch (broadcasts against the leading axes
      of ``candidate_log_probs``); finite or ``-inf``.
    candidate_log_probs: log-probabilities of the whole space on the last axis (non-empty);
      finite or ``-inf``.

  Returns:
    Exposure in bits, in :math:`[0, \log_2 N]`, with the broadcast batch shape.

  >>> float(exposure_exact(-1.0, [-1.0, -2.0, -0.5, -3.0]))  # rank 2 of 4: log2(4) - log2(2)
  1.0
  """
  _check_log_probs("canary_log_prob", canary_log_prob)
  _check_log_probs("candidate_log_probs", candidate_log_probs, need_axis=True)
  _check_batch(canary_log_prob, candidate_log_probs, "candidate_log_probs")
  dtype = _float_dtype()
  if not _on_host(canary_log_prob, candidate_log_probs):
    n = np.shape(candidate_log_probs)[-1]
    return _exposure_exact(jnp.asarray(canary_log_prob, dtype),
                           jnp.asarray(candidate_log_probs, dtype), n, math.log(n))
  args = _padded(canary_log_prob, candidate_log_probs)
  return _compile.first_call(_exposure_exact, _host_exposure_exact, args, args[1].size)


def _on_host(*values) -> bool:
  """Whether a call takes the bucketed programs (and first calls on the host): concrete inputs
  computed on a CPU."""
  return _validate.is_concrete(values) and _compile.platform(values) == "cpu"


def _padded(canary, values) -> tuple:
  """``(canary, values, n, log(n))`` as program arguments: ``values`` padded along its last
  axis (the candidates or samples) to its :func:`_compile.bucket_size`, so that one program
  serves every number of candidates in a bucket; ``n`` (int32) of them are real (the programs
  mask the rest) and ``log(n)`` is formed on the host, as the constant it was."""
  dtype = _float_dtype()
  values = _compile.argument(values, dtype)
  n = np.shape(values)[-1]
  return (_compile.argument(canary, dtype),
          _compile.pad_edge(values, _compile.bucket_size(n), axis=-1), np.int32(n),
          np.asarray(math.log(n), dtype))


@_compile.jit
def _exposure_exact(canary, candidates, n, log_n):
  valid = jnp.arange(candidates.shape[-1]) < n
  rank = jnp.sum(jnp.logical_and(candidates >= canary[..., None], valid),
                 axis=-1).astype(candidates.dtype)
  rank = jnp.maximum(rank, 1.0)
  return (log_n - jnp.log(rank)) / _LOG2


def _host_exposure_exact(canary, candidates, n, log_n):
  """:func:`_exposure_exact` in NumPy (float64) on the ``n`` real candidates."""
  canary, candidates = np.asarray(canary, np.float64), np.asarray(candidates, np.float64)
  rank = np.sum(candidates[..., :n] >= canary[..., None], axis=-1).astype(np.float64)
  return (math.log(n) - np.log(np.maximum(rank, 1.0))) / _LOG2


class Exposure(NamedTuple):
  r"""Estimates of :func:`exposure_sampled`, in bits, with the batch shape of the canaries.

  Attributes:
    rank_estimate: :math:`-\log_2\frac{c + 1}{M + 1}`, with :math:`c` the number of the
      :math:`M` samples at least as likely as the canary: the sampling estimate of Carlini et
      al., Sec. 4.3, with the canary counted as one more sample so that it stays finite; at
      most :math:`\log_2(M + 1)` (reached when no sample is as likely as the canary).
    lower_bound: :math:`-\log_2 \bar p`, with :math:`\bar p` the one-sided
      :math:`1 - \beta` Clopper-Pearson upper confidence bound on the fraction
      :math:`\mathrm{rank}/|\mathcal R|` from :math:`c` of :math:`M`: the exposure is at least
      this with confidence :math:`1 - \beta` over the draw of the samples. At most
      :math:`\log_2(1/(1 - \beta^{1/M}))`, about :math:`\log_2(M/\log(1/\beta))`.
    extrapolated: :math:`-\log_2 \Pr[X \ge \ell^\ast]` for :math:`X \sim N(\hat\mu,
      \hat s^2)` fitted to the sample log-probabilities (mean and unbiased standard
      deviation): the distribution-fit extrapolation of Carlini et al., Sec. 4.3, with a
      **Gaussian** fit instead of their skew-normal one. Reaches far beyond
      :math:`\log_2 M` (computed with ``log_ndtr``), but is only as good as the Gaussian
      model of the tail. With :math:`\hat s = 0` it is ``inf`` above :math:`\hat\mu`, else 0.
    count: :math:`c`, the number of samples with log-probability :math:`\ge \ell^\ast`.

  >>> e = exposure_sampled(-0.5, [-2.1, -0.3, -1.7, -2.8, -1.2, -3.5, -2.4, -1.9])
  >>> e._fields
  ('rank_estimate', 'lower_bound', 'extrapolated', 'count')
  >>> int(e.count), round(float(e.rank_estimate), 4)  # one sample of 8 above: log2(9 / 2)
  (1, 2.1699)
  """
  rank_estimate: jax.Array
  lower_bound: jax.Array
  extrapolated: jax.Array
  count: jax.Array


def exposure_sampled(canary_log_prob, sample_log_probs, significance: float = 0.05
                     ) -> Exposure:
  r"""Exposure estimated from candidates sampled uniformly from the space (Carlini et al., 4.3).

  With :math:`M` candidates :math:`r_1, \dots, r_M` drawn independently and uniformly from
  :math:`\mathcal R` (with replacement; they need not exclude the canary), the count
  :math:`c = \#\{m : \log p(r_m) \ge \ell^\ast\}` is :math:`\mathrm{Binomial}(M, \pi)` with
  :math:`\pi = \mathrm{rank}(s^\ast)/|\mathcal R|` (ties counted against the canary, as in
  :func:`exposure_exact`), so :math:`c/M` estimates :math:`\pi` and the exposure is
  :math:`-\log_2\pi`. See :class:`Exposure` for the three estimates returned: the rank
  estimate, a Clopper-Pearson lower confidence bound and a Gaussian-fit extrapolation.

  Args:
    canary_log_prob: :math:`\ell^\ast`, scalar or batch (broadcasts against the leading axes
      of ``sample_log_probs``); finite or ``-inf``.
    sample_log_probs: log-probabilities of the :math:`M \ge 2` uniform samples on the last
      axis; finite.
    significance: :math:`\beta \in (0, 1)` of the :math:`1 - \beta` confidence of
      ``lower_bound``.

  Returns:
    :class:`Exposure` of arrays with the broadcast batch shape.

  >>> samples = [-2.1, -0.3, -1.7, -2.8, -1.2, -3.5, -2.4, -1.9]  # 8 uniform candidates
  >>> e = exposure_sampled(-0.5, samples)
  >>> int(e.count), [round(float(v), 4) for v in (e.rank_estimate, e.lower_bound, e.extrapolated)]
  (1, [2.1699, 1.0872, 3.9649])
  """
  _check_log_probs("canary_log_prob", canary_log_prob)
  _check_log_probs("sample_log_probs", sample_log_probs, allow_neg_inf=False, need_axis=True)
  if np.shape(sample_log_probs)[-1] < 2:
    raise ValueError(f"sample_log_probs has {np.shape(sample_log_probs)[-1]} sample(s) on its "
                     "last axis; need at least 2 (to fit a standard deviation)")
  _check_batch(canary_log_prob, sample_log_probs, "sample_log_probs")
  _validate.check_significance(significance)
  dtype = _float_dtype()
  if not _on_host(canary_log_prob, sample_log_probs, significance):
    m = np.shape(sample_log_probs)[-1]
    return _exposure_sampled(jnp.asarray(canary_log_prob, dtype),
                             jnp.asarray(sample_log_probs, dtype),
                             jnp.asarray(significance, dtype), m, math.log(m + 1.0))
  canary, samples, m, _ = _padded(canary_log_prob, sample_log_probs)
  args = (canary, samples, np.asarray(significance, dtype), m,
          np.asarray(math.log(int(m) + 1.0), dtype))
  return _compile.first_call(_exposure_sampled, _host_exposure_sampled, args, samples.size)


@_compile.jit
def _exposure_sampled(canary, samples, significance, m, log_m1):
  # Samples past the first m are padding (:func:`_padded`): counted in no sum.
  valid = jnp.arange(samples.shape[-1]) < m
  count = jnp.sum(jnp.logical_and(samples >= canary[..., None], valid),
                  axis=-1).astype(samples.dtype)
  count = jnp.broadcast_to(count, jnp.broadcast_shapes(count.shape, canary.shape))
  rank_estimate = (log_m1 - jnp.log(count + 1.0)) / _LOG2
  trials = jnp.full_like(count, 1.0) * m
  upper = _binomial.clopper_pearson(count, trials, significance, alternative="less").upper
  lower_bound = -jnp.log(upper) / _LOG2
  mean = jnp.sum(jnp.where(valid, samples, 0.0), axis=-1) / m
  centered = jnp.where(valid, samples - mean[..., None], 0.0)
  std = jnp.sqrt(jnp.sum(centered * centered, axis=-1) / (m - 1))
  return _gaussian_fit(canary, mean, std, rank_estimate, lower_bound, count)


def _gaussian_fit(canary, mean, std, rank_estimate, lower_bound, count, xp=jnp,
                  log_ndtr=jax.scipy.special.log_ndtr) -> Exposure:
  """The :class:`Exposure` with the Gaussian-fit extrapolation from the samples' mean and
  standard deviation."""
  gap = canary - mean
  safe_std = xp.where(std > 0.0, std, 1.0)
  log_tail = log_ndtr(-gap / safe_std)  # log Pr[X >= canary]
  degenerate = xp.where(gap > 0.0, xp.inf, 0.0)
  extrapolated = xp.where(std > 0.0, -log_tail / _LOG2, degenerate)
  extrapolated = xp.maximum(extrapolated, 0.0)
  return Exposure(rank_estimate, lower_bound, extrapolated, count)


def _host_exposure_sampled(canary, samples, significance, m, log_m1) -> Exposure:
  """:func:`_exposure_sampled` in NumPy and scipy (float64) on the ``m`` real samples; the
  one-sided Clopper-Pearson upper limit by scipy's Beta quantile (1 at c = m, the closed form
  ``-expm1(log(beta) / m)`` at c = 0)."""
  del log_m1
  canary = np.asarray(canary, np.float64)
  samples = np.asarray(samples, np.float64)[..., :m]
  significance = np.asarray(significance, np.float64)
  count = np.sum(samples >= canary[..., None], axis=-1).astype(np.float64)
  count = np.broadcast_to(count, np.broadcast_shapes(count.shape, canary.shape))
  rank_estimate = (math.log(m + 1.0) - np.log(count + 1.0)) / _LOG2
  inside = count < m
  with np.errstate(divide="ignore"):
    solved = scipy.special.betainccinv(np.where(inside, count + 1.0, 1.0),
                                       np.where(inside, m - count, 1.0), significance)
    upper = np.where(inside, np.where(count <= 0.0, -np.expm1(np.log(significance) / m),
                                      solved), 1.0)
    lower_bound = -np.log(upper) / _LOG2
  mean = np.mean(samples, axis=-1)
  std = np.std(samples, axis=-1, ddof=1)
  with np.errstate(divide="ignore"):
    return _gaussian_fit(canary, mean, std, rank_estimate, lower_bound, count, np,
                         scipy.special.log_ndtr)
