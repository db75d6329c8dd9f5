"""The statistics workloads of :mod:`experiments.benchmarks.accelerator`: the Monte Carlo
engine (noisy argmax and PATE trials, against NumPy on the host) and the estimators (binomial,
approx-DP, one-run, Renyi cuts: float32 and float64 against float64 on the CPU)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit.prng import make_key
from experiments.benchmarks import hot_paths
from experiments.benchmarks.accelerator_context import Context, both, max_rel_err, row, timed, x64
from experiments.benchmarks.estimator_inputs import count_pairs, tail_probabilities

NOISY_ARGMAX_TARGET = 1e9
"""Noisy-argmax trials per second asked of a GPU (the accelerator issue's target)."""


# ----------------------------------------------------------------------------- Monte Carlo


def montecarlo(ctx: Context) -> list[dict]:
  """Noisy-argmax trials (C = 10, sigma = 2, as ``benchmarks.montecarlo``) and PATE trials
  (k = 250 votes, C = 10, sigma = 40, Dirichlet profile, as ``benchmarks.private_prediction``)
  through :func:`dpaudit.montecarlo.count_outcomes`, against NumPy on the host."""
  import scipy.stats

  from dpaudit import montecarlo as mc
  from dpaudit.mechanisms import histograms, noisy_argmax
  classes, sigma = 10, 2.0
  histogram = np.arange(classes, dtype=np.float32)
  p = hot_paths.pate_profiles(classes)["dirichlet"]
  p_neighbor = np.roll(p, 1)
  rows = []
  impls = ("threefry_unrolled",) if ctx.tiny else ("threefry_unrolled", "rbg")

  def pate_trial(key, model):
    return histograms.noisy_argmax_of(histograms.PATE, key, model, False, 40.0)

  cases = [(f"noisy argmax C=10, {impl} keys", impl, noisy_argmax,
            lambda: (jnp.asarray(histogram), sigma), 2**30, 2**22, NOISY_ARGMAX_TARGET)
           for impl in impls]
  cases.append(("PATE votes k=250 C=10 sigma=40", "threefry_unrolled", pate_trial,
                lambda: (histograms.pate_model(p, p_neighbor, 250),), 2**28, 2**20, None))
  for i, (name, impl, sample_fn, make_args, full, cpu_full, target) in enumerate(cases):
    if i and ctx.past_deadline(f"montecarlo {name}"):
      continue

    def measure(device, on_accel, impl=impl, sample_fn=sample_fn, make_args=make_args,
                full=full, cpu_full=cpu_full):
      n = ctx.size(full, 2**14) if on_accel else ctx.cpu_size(cpu_full, 2**14)
      chunk = 2**20 if device.platform != "cpu" else 2**16
      with jax.default_device(device):
        key, args = make_key(0, impl), make_args()
        timing, counts = timed(lambda: mc.count_outcomes(
            sample_fn, key, n, classes, args=args, chunk_size=min(chunk, n),
            chunks_per_call=(max(min(n, 2**30) // min(chunk, n), 1) if device.platform != "cpu"
                         else None),
            devices=[device]), ctx)
      return {**timing, "trials": n, "rate": n / timing["median_s"]}, counts

    (acc, acc_counts), (cpu, cpu_counts) = both(ctx, measure)
    seen = (acc_counts + cpu_counts) > 0
    same_law = (float(scipy.stats.chi2_contingency(np.stack([acc_counts[seen],
                                                             cpu_counts[seen]]))[1])
                if not ctx.same_device and seen.sum() > 1 else None)
    rows.append(row("montecarlo", name, "trials/s", acc["rate"], cpu["rate"], target=target,
                    details={"accelerator": acc, "cpu": cpu, "same_law_p_value": same_law}))
    ctx.progress(f"montecarlo {name}: {acc['rate']:.3g} trials/s (CPU {cpu['rate']:.3g})")
  # The NumPy code a user would write, on one host core.
  n = ctx.cpu_size(2**21, 2**14)
  rng = np.random.default_rng(0)
  peers = [(rows[0], lambda: hot_paths.numpy_noisy_argmax(rng, histogram, sigma, n))]
  if rows[-1]["name"].startswith("PATE"):
    peers.append((rows[-1], lambda: hot_paths.numpy_pate(rng, p, p_neighbor, 250, 40.0, n,
                                                         False)))
  for r, fn in peers:
    timing, _ = timed(fn, ctx)
    rate = n / timing["median_s"]
    r.update(peer="NumPy (float32, one core)", peer_rate=rate,
             accelerator_over_peer=r["accelerator"] / rate)
  return rows


# ----------------------------------------------------------------------------- estimators


def _estimator_cases():
  """``(name, unit, full sizes, cpu size, tiny size, draw(rng, size) -> inputs, call)``."""
  from dpaudit import estimators as est
  orders = np.array([1.5, 2.0, 4.0, 8.0, 16.0])

  def pairs(rng, size):
    return count_pairs(rng, size, 1e6)  # n below 2^24: exact in float32 too

  def tails(rng, size):
    k, n = pairs(rng, size)
    return k, n, tail_probabilities(rng, k, n)

  def scores(rng, size):
    return rng.normal(1.0, 1.0, size), rng.normal(0.0, 1.0, size)

  def canaries(rng, size):
    member = rng.random(size) < 0.5
    return rng.normal(0.5 * member, 1.0), member

  def two_cut(rng, size):
    trials = rng.integers(1000, 10**6, size).astype(np.float64)
    return (rng.binomial(trials.astype(np.int64), 0.6).astype(np.float64), trials,
            rng.binomial(trials.astype(np.int64), 0.4).astype(np.float64), trials)

  def k_cut(rng, size):
    p = rng.dirichlet(np.ones(10), size)
    q = 0.8 * p + 0.2 * rng.dirichlet(np.ones(10), size)
    return (np.stack([rng.multinomial(10**5, x) for x in p]).astype(np.float64),
            np.stack([rng.multinomial(10**5, x) for x in q]).astype(np.float64))

  def guesses(rng, size):  # one-run games: m canaries, r guesses, v right (about 90%)
    m = rng.integers(1000, 10_001, size)
    r = rng.integers(10, 301, size)
    return m.astype(np.float64), r.astype(np.float64), rng.binomial(r, 0.9).astype(np.float64)

  def cp(k, n):
    out = est.clopper_pearson(k, n, 0.05)
    return jnp.stack([out.lower, out.upper])

  return [
      ("clopper_pearson", "pairs/s", (1e6, 1e7, 1e8), 1e6, 1e3, pairs, cp),
      ("binomial_sf", "pairs/s", (1e6, 1e7, 1e8), 1e6, 1e3, tails, est.binomial_sf),
      ("epsilon_from_scores[bonferroni]", "scores/s", (1e6, 1e7), 1e6, 1e3, scores,
       lambda i, o: est.epsilon_from_scores(i, o, 0.0, 0.05, "bonferroni").epsilon),
      ("one_run_epsilon_from_scores", "canaries/s", (1e6, 1e7), 1e6, 1e3, canaries,
       lambda s, m: est.one_run_epsilon_from_scores(s, m, 1e-5, 0.05).epsilon),
      ("fdp_one_run_mu", "triples/s", (1e4, 1e5), 1e4, 10, guesses,
       lambda m, r, v: est.fdp_one_run_mu(m, r, v, 0.05)),
      ("renyi_two_cut_lower_bound", "count pairs/s", (1e6, 1e7), 1e6, 1e3, two_cut,
       lambda *a: est.renyi_two_cut_lower_bound(*a, orders, 0.05)),
      ("renyi_k_cut_lower_bound[sison-glaz]", "histograms/s", (1e3, 1e4), 100, 10, k_cut,
       lambda p, q: est.renyi_k_cut_lower_bound(p, q, orders, 0.05, "sison-glaz")),
  ]


def _put(inputs, size, dtype, device):
  """The first ``size`` elements of each input on ``device``, floats as ``dtype``."""
  return tuple(jax.device_put(x[:size] if x.dtype == bool else x[:size].astype(dtype), device)
               for x in inputs)


def estimators(ctx: Context) -> list[dict]:
  """Each estimator at 1e6-1e8 elements on the accelerator in float64 and float32, against the
  same call on the host CPU; ``max_rel_err`` is against the float64 CPU result on the CPU's
  inputs (the first ``cpu size`` elements, the same draw)."""
  rows = []
  for name, unit, fulls, cpu_full, tiny, draw, call in _estimator_cases():
    sizes = sorted({ctx.size(f, tiny) for f in fulls})
    cpu_n = min(ctx.cpu_size(cpu_full, tiny), sizes[0])
    inputs = draw(np.random.default_rng(0), sizes[-1])
    elementwise = name not in ("epsilon_from_scores[bonferroni]", "one_run_epsilon_from_scores")
    cpu_runs = {}
    for precision in ("float64", "float32"):
      with x64(precision == "float64"), jax.default_device(ctx.cpu):
        args = _put(inputs, cpu_n, np.dtype(precision), ctx.cpu)
        cpu_runs[precision] = timed(lambda args=args: call(*args), ctx)
    reference = np.asarray(cpu_runs["float64"][1])
    for precision in ("float64", "float32"):
      dtype = np.dtype(precision)
      cpu_t = cpu_runs[precision][0]
      with x64(precision == "float64"):
        for size in sizes:
          if size != sizes[0] and ctx.past_deadline(f"estimators {name} {size:.0e} {precision}"):
            continue
          if ctx.same_device and size == cpu_n:
            acc_t, out = cpu_runs[precision]  # no accelerator: the CPU's call is the figure
          else:
            with jax.default_device(ctx.accelerator):
              args = _put(inputs, size, dtype, ctx.accelerator)
              acc_t, out = timed(lambda args=args: call(*args), ctx)
              del args
          out = np.asarray(out)
          if elementwise:
            err = max_rel_err(out[..., :cpu_n] if name == "clopper_pearson" else out[:cpu_n],
                              reference, dtype)
          else:
            err = max_rel_err(out, reference, dtype) if size == cpu_n else None
          del out
          rows.append(row(
              "estimators", f"{name} {size:.0e} {precision}", unit, size / acc_t["median_s"],
              cpu_n / cpu_t["median_s"], max_rel_err=err,
              note=f"CPU at {cpu_n:.0e}",
              details={"accelerator": {**acc_t, "size": size},
                       "cpu": {**cpu_t, "size": cpu_n}, "precision": precision}))
          ctx.progress(f"estimators {rows[-1]['name']}: {rows[-1]['accelerator']:.3g} {unit}"
                       f", max rel err {err if err is None else f'{err:.2g}'}")
  return rows
