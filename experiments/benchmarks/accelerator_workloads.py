"""The workloads of :mod:`experiments.benchmarks.accelerator`: each hot path of dpaudit timed on
the accelerator and, in the same process, on the host CPU (JAX's CPU backend); the Monte Carlo
also against the NumPy code a user would otherwise run there.

Every workload is a function ``(Context) -> list[row]``; a row (:func:`row`) holds one
measurement as a rate (higher is better) on each side. The accelerator's sizes fill an H100
(``--scale`` shrinks them); the CPU's are smaller, so the two are compared as rates. When the
"accelerator" is itself the CPU (no GPU), each measurement runs once and serves as both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit.prng import make_key
from experiments.benchmarks import hot_paths
from experiments.benchmarks import timing as run_timing
from experiments.benchmarks.estimator_inputs import count_pairs, tail_probabilities

NOISY_ARGMAX_TARGET = 1e9
"""Noisy-argmax trials per second asked of a GPU (the accelerator issue's target)."""


@dataclasses.dataclass
class Context:
  """Where and how big: ``accelerator`` (JAX's default device) and ``cpu`` (the host), the
  ``tiny`` sizes or the full ones times ``scale``, ``measure_s`` seconds of timed repeats per
  measurement (at least one), and ``progress(line)``."""
  accelerator: jax.Device
  cpu: jax.Device
  tiny: bool = False
  scale: float = 1.0
  measure_s: float = 2.0
  max_repeats: int = 5
  progress: Callable[[str], None] = lambda line: None
  deadline: float = float("inf")
  skipped: list = dataclasses.field(default_factory=list)

  def past_deadline(self, what: str) -> bool:
    """True (and ``what`` noted in ``skipped``) once ``deadline`` (a ``time.perf_counter()``
    value: the suite's ``--budget_s``) has passed: the optional parts of a workload (larger
    sizes, more variants) are then left out rather than run past the budget."""
    if time.perf_counter() <= self.deadline:
      return False
    self.skipped.append(what)
    self.progress(f"skipped (past the time budget): {what}")
    return True

  @property
  def same_device(self) -> bool:
    """True when there is no accelerator: the CPU measurements are the accelerator's."""
    return self.accelerator.platform == "cpu"

  def size(self, full: float, tiny: float) -> int:
    """The accelerator's size: ``tiny`` in tiny mode, else ``full`` times ``scale``."""
    return max(int(tiny if self.tiny else full * self.scale), 1)

  def cpu_size(self, full: float, tiny: float) -> int:
    """The host CPU's size (not scaled: the baselines are small already)."""
    return max(int(tiny if self.tiny else full), 1)


def timed(fn: Callable[[], Any], ctx: Context) -> tuple[dict, Any]:
  """Calls ``fn`` once (compile and warm-up, timed apart as ``first_call_s``), then again until
  ``ctx.measure_s`` seconds or ``ctx.max_repeats`` calls; the median of the timed calls."""
  start = time.perf_counter()
  out = jax.block_until_ready(fn())
  first = time.perf_counter() - start
  times = []
  while len(times) < ctx.max_repeats and (not times or sum(times) < ctx.measure_s):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - start)
  return {"first_call_s": first, "median_s": statistics.median(times),
          "min_s": min(times), "max_s": max(times), "repeats": len(times)}, out


@contextlib.contextmanager
def x64(enabled: bool):
  """``jax_enable_x64`` set for the process, restored after. Not ``jax.enable_x64``, whose
  setting holds in the calling thread only, while the runtime may run host callbacks on
  another (the estimators' NumPy sorts on the CPU of a GPU machine)."""
  before = jax.config.jax_enable_x64
  jax.config.update("jax_enable_x64", enabled)
  try:
    yield
  finally:
    jax.config.update("jax_enable_x64", before)


def row(workload: str, name: str, unit: str, accelerator: float | None, cpu: float | None, *,
        peer: tuple[str, float] | None = None, target: float | None = None,
        max_rel_err: float | None = None, note: str = "", details: dict | None = None) -> dict:
  """One measurement: rates (``unit``, higher is better) on the accelerator, on the host CPU
  through JAX and, optionally, of a ``peer`` (name, rate) on the host; their ratios; the target
  (judged on the accelerator's rate, only when it is not the CPU)."""
  def ratio(a, b):
    return a / b if a is not None and b else None
  return {"workload": workload, "name": name, "unit": unit,
          "accelerator": accelerator, "cpu": cpu,
          "accelerator_over_cpu": ratio(accelerator, cpu),
          "peer": None if peer is None else peer[0],
          "peer_rate": None if peer is None else peer[1],
          "accelerator_over_peer": None if peer is None else ratio(accelerator, peer[1]),
          "max_rel_err": max_rel_err, "target": target, "met": None, "note": note,
          "details": details or {}}


def judge(rows: list[dict], on_cpu: bool) -> list[dict]:
  """Fills ``met`` where a row has a target and the accelerator is not the CPU."""
  for r in rows:
    if r["target"] is not None and not on_cpu and r["accelerator"] is not None:
      r["met"] = bool(r["accelerator"] >= r["target"])
  return rows


def _both(ctx: Context, measure: Callable[[jax.Device, bool], tuple[dict, Any]]):
  """``measure(device, on_accelerator)`` on the accelerator, then on the CPU (reused when the
  accelerator is the CPU)."""
  on_accel = measure(ctx.accelerator, True)
  return on_accel, on_accel if ctx.same_device else measure(ctx.cpu, False)


def max_rel_err(got, ref, dtype) -> float:
  """Largest ``|got - ref| / |ref|`` where ``|ref|`` is above ``tiny * 1e6`` of ``dtype``
  (relative accuracy is not asked of subnormals; elsewhere an exact 0 must match)."""
  got, ref = np.asarray(got, np.float64).ravel(), np.asarray(ref, np.float64).ravel()
  floor = np.finfo(dtype).tiny * 1e6
  both_inf = np.isinf(got) & np.isinf(ref) & (np.sign(got) == np.sign(ref))
  keep = (np.abs(ref) > floor) & ~both_inf
  err = np.abs(got[keep] - ref[keep]) / np.abs(ref[keep])
  zero = (np.abs(ref) <= floor) & ~both_inf
  err_zero = np.abs(got[zero]) > floor  # an exact 0 must stay (about) 0
  worst = float(err.max()) if err.size else 0.0
  return max(worst, 1.0 if err_zero.any() else 0.0)


# ----------------------------------------------------------------------------- Monte Carlo


def montecarlo(ctx: Context) -> list[dict]:
  """Noisy-argmax trials (C = 10, sigma = 2, as ``benchmarks.montecarlo``) and PATE trials
  (k = 250 votes, C = 10, sigma = 40, Dirichlet profile, as ``benchmarks.private_prediction``)
  through :func:`dpaudit.montecarlo.count_outcomes`, against NumPy on the host."""
  from dpaudit import montecarlo as mc
  from dpaudit.mechanisms import histograms, noisy_argmax
  import scipy.stats
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

    (acc, acc_counts), (cpu, cpu_counts) = _both(ctx, measure)
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


# ----------------------------------------------------------------------------- DP-SGD


def dpsgd_steps(ctx: Context) -> list[dict]:
  """One step of each model, non-private and DP-SGD with ghost clipping, on one batch
  (:func:`experiments.benchmarks.hot_paths.make_steps`), as examples per second."""
  from dpaudit import models
  rows = []
  batches = {"mlp": (4096, 256, 4), "lenet5": (1024, 256, 4), "wrn16_4": (256, 16, 2)}
  for name, (full, cpu_full, tiny) in batches.items():
    if rows and ctx.past_deadline(f"dpsgd {name}"):
      continue
    shape = hot_paths.EXAMPLE_SHAPE[name]

    def measure(device, on_accel, name=name, shape=shape, full=full, cpu_full=cpu_full,
                tiny=tiny):
      batch = ctx.size(full, tiny) if on_accel else ctx.cpu_size(cpu_full, tiny)
      with jax.default_device(device):
        model = models.make_model(name, shape, 10)
        params = model.init(jax.random.key(0), jnp.zeros((1,) + shape))["params"]
        steps = hot_paths.make_steps(model, params, shape, batch,
                                     methods=("nonprivate", "dp_ghost"))
        out = {}
        for method, (fn, opt_state) in steps.items():
          state = [jax.tree.map(jnp.copy, (params, opt_state))]

          def step(fn=fn, state=state):
            state[0] = fn(*state[0])  # donated: the state moves on with every step
            return state[0][0]

          timing, _ = timed(step, ctx)
          out[method] = {**timing, "batch": batch, "rate": batch / timing["median_s"]}
      return out, None

    (acc, _), (cpu, _) = _both(ctx, measure)
    for method, label in (("nonprivate", "non-private step"),
                          ("dp_ghost", "DP-SGD step (ghost clipping)")):
      ratio = acc["dp_ghost"]["median_s"] / acc["nonprivate"]["median_s"]
      notes = ([f"DP / non-private time {ratio:.2f}x"] if method == "dp_ghost" else []) + (
          [] if ctx.same_device else [f"CPU batch {cpu[method]['batch']}"])
      rows.append(row("dpsgd", f"{name} {label}, batch {acc[method]['batch']}", "examples/s",
                      acc[method]["rate"], cpu[method]["rate"], note="; ".join(notes),
                      details={"accelerator": acc[method], "cpu": cpu[method]}))
    ctx.progress(f"dpsgd {name}: DP {acc['dp_ghost']['rate']:.3g} examples/s, "
                 f"non-private {acc['nonprivate']['rate']:.3g}")
  return rows


def many_run(ctx: Context) -> list[dict]:
  """Many DP-SGD runs of multinomial logistic regression on the offline digits data (100
  steps, expected batch 64) as one vmapped program, against a loop of the same compiled run
  (:mod:`experiments.benchmarks.many_run`'s setting), as runs per second."""
  from dpaudit import data, models
  from dpaudit.dpsgd import training
  train, test = data.train_test_split(data.load("digits"), 0.2, 0, stratify=True)
  train, _, _ = data.standardize(train, test)
  steps = 10 if ctx.tiny else 100

  def measure(device, on_accel):
    runs = ctx.size(10_000, 32) if on_accel else ctx.cpu_size(1_000, 32)
    with jax.default_device(device):
      features, labels = jnp.asarray(train.features), jnp.asarray(train.labels)
      model = models.MLP((), train.num_classes, example_ndim=features.ndim - 1)
      config = training.TrainConfig(num_steps=steps, sampling_rate=64 / features.shape[0],
                                    noise_multiplier=1.0, l2_clip_norm=1.0, learning_rate=0.1,
                                    optimizer="sgd", physical_batch_size=128)
      run = hot_paths.make_run(model, config, features.shape[0], features[:1], "ghost")
      return _time_runs(ctx, run, jax.random.split(make_key(0), runs), (features, labels)), None

  (acc, _), (cpu, _) = _both(ctx, measure)
  rows = _vmapped_rows("many_run", f"logistic DP-SGD runs ({steps} steps)", "runs", acc, cpu)
  ctx.progress(f"many_run: {rows[0]['accelerator']:.3g} runs/s vmapped")
  return rows


def _time_runs(ctx: Context, run, keys, args) -> dict:
  """``run`` over all ``keys`` as one vmapped program and in a loop over a few of them
  (:mod:`experiments.benchmarks.timing`), and whether the first runs end alike both ways."""
  looped = 2 if ctx.tiny else 20
  vmapped, vparams, vsizes = run_timing.time_vmapped(run, keys, args, keys.shape[0],
                                                     1 if ctx.tiny else 3)
  sequential, souts = run_timing.time_sequential(run, keys, args, looped)
  return {"count": int(keys.shape[0]), "vmapped": vmapped, "loop": sequential,
          "check": run_timing.check_equal(vparams, vsizes, souts, min(2, looped))}


def _vmapped_rows(workload: str, what: str, noun: str, acc: dict, cpu: dict) -> list[dict]:
  """The vmapped and the looped rows of :func:`_time_runs` figures, as ``noun`` per second."""
  def rate(m, side):
    if side == "vmapped":
      return m["count"] / m["vmapped"]["median_s"]
    return 1e3 / m["loop"]["per_run_ms"]
  notes = {"vmapped": (f"vmapped / loop {rate(acc, 'vmapped') / rate(acc, 'loop'):.0f}x; "
                       f"equal to the loop: {acc['check']['passed']}"),
           "loop": f"{acc['loop']['runs_timed']} {noun} timed, extrapolated"}
  return [row(workload, f"{what}, {label}, {acc['count']} {noun}", f"{noun}/s",
              rate(acc, side), rate(cpu, side), note=notes[side],
              details={"accelerator": acc[side], "cpu": cpu[side],
                       "equality_check": acc["check"]})
          for side, label in (("vmapped", "vmapped"), ("loop", "loop of compiled runs"))]


def ngram(ctx: Context) -> list[dict]:
  """Lazy n-gram canary models (Stock et al., T = 10, sigma = 1) trained as one vmapped
  program (:func:`dpaudit.audits.reconstruction.lazy_ngram_run`'s training), against a loop
  of the compiled run, as models per second."""
  from dpaudit.audits import reconstruction
  from dpaudit.models import ngram as ngram_models
  steps = 10 if ctx.tiny else 100

  def measure(device, on_accel):
    count = ctx.size(100_000, 64) if on_accel else ctx.cpu_size(10_000, 64)
    config = reconstruction.NgramCanaryConfig(noise_multipliers=(1.0,), num_models=count,
                                              num_steps=steps)
    with jax.default_device(device):
      canary_key, models_key = jax.random.split(make_key(0))
      canary = reconstruction.random_canary(canary_key, config)
      keys = jax.random.split(models_key, count)
      model = ngram_models.LazyNgram(config.canary_length, config.vocab_size)
      train_config = reconstruction.lazy_ngram_train_config(config, 1.0)
      features = jnp.zeros((1, 1), jnp.float32)
      run = hot_paths.make_run(model, train_config, 1, features[0], "vmap",
                               loss_fn=ngram_models.sequence_nll)
      return _time_runs(ctx, run, keys, (features, canary[None])), None

  (acc, _), (cpu, _) = _both(ctx, measure)
  rows = _vmapped_rows("ngram", f"lazy n-gram models T=10 ({steps} steps)", "models", acc, cpu)
  ctx.progress(f"ngram: {rows[0]['accelerator']:.3g} models/s vmapped")
  return rows


def domias(ctx: Context) -> list[dict]:
  """DOMIAS's density fits on California Housing, vmapped over seeds: the Gaussian KDE
  (float64) and BNAF flows, against a loop over the seeds on the same device."""
  from dpaudit.attacks import density
  seeds = 2 if ctx.tiny else 16
  rows_kde, queries = (200, 50) if ctx.tiny else (10_000, 2_000)
  flow_seeds, flow_rows = (2, 100) if ctx.tiny else (8, 2_000)
  # Tiny: one BNAF layer of depth one (compiling the vmapped fit of the default three layers
  # takes 20-35 s on 2 CPU cores, most of the tiny suite).
  flow_config = (density.FlowConfig(hidden_dim=2, max_epochs=1, flow_layers=1, nn_depth=1)
                 if ctx.tiny else density.FlowConfig(hidden_dim=8, max_epochs=5))
  datas = hot_paths.domias_datasets(seeds, rows_kde)
  query_rows = hot_paths.domias_datasets(seeds, queries, seed=1)

  def measure(device, on_accel):
    with x64(True), jax.default_device(device):
      kde = hot_paths.time_kde(datas, query_rows, 1 if ctx.tiny else 3)
      flow = hot_paths.time_flow(datas[:flow_seeds, :flow_rows], flow_config)
    return {"kde": kde, "flow": flow}, None

  (acc, _), (cpu, _) = _both(ctx, measure)
  out = [
      row("domias", f"Gaussian KDE fit + log-density, {seeds} seeds x {rows_kde} rows x "
          f"{queries} queries, vmapped", "seeds/s", seeds / acc["kde"]["vmapped_median_s"],
          seeds / cpu["kde"]["vmapped_median_s"],
          note=f"vmapped / loop {acc['kde']['speedup']:.1f}x",
          details={"accelerator": acc["kde"], "cpu": cpu["kde"]}),
      row("domias", f"BNAF fit (hidden {flow_config.hidden_dim}, {flow_config.max_epochs} "
          f"epochs), {flow_seeds} seeds x {flow_rows} rows, vmapped", "seeds/s",
          flow_seeds / acc["flow"]["vmapped_s"], flow_seeds / cpu["flow"]["vmapped_s"],
          note=f"vmapped / loop {acc['flow']['speedup']:.1f}x",
          details={"accelerator": acc["flow"], "cpu": cpu["flow"]}),
  ]
  ctx.progress(f"domias: KDE {out[0]['accelerator']:.3g} seeds/s, flow "
               f"{out[1]['accelerator']:.3g} seeds/s")
  return out


WORKLOADS: dict[str, Callable[[Context], list[dict]]] = {
    "montecarlo": montecarlo, "dpsgd": dpsgd_steps, "many_run": many_run, "ngram": ngram,
    "domias": domias, "estimators": estimators}
"""Every workload, in the order the suite runs them: the estimators last, since they alone can
shorten themselves (their larger sizes are left out past the time budget) and so fill the
time the others leave."""


def run_workload(name: str, ctx: Context) -> dict:
  """One workload's rows (with ``met`` judged), its wall time, and the error if it failed (the
  suite goes on with the next)."""
  start = time.perf_counter()
  ctx.skipped = []
  try:
    rows = judge(WORKLOADS[name](ctx), ctx.same_device)
    error = None
  except Exception as e:  # pylint: disable=broad-except  (reported; the suite goes on)
    rows, error = [], f"{type(e).__name__}: {e}"[:2000]
  return {"rows": rows, "wall_s": time.perf_counter() - start, "error": error,
          "skipped_parts": list(ctx.skipped)}


# ----------------------------------------------------------------------------- the report

COLUMNS = ("workload", "measurement", "unit", "accelerator", "CPU (JAX)", "accel/CPU",
           "peer on CPU", "accel/peer", "max rel. err vs f64 CPU", "target", "met", "note")


def _number(value) -> str:
  if value is None:
    return "-"
  if isinstance(value, bool):
    return "yes" if value else "no"
  return f"{value:.3g}"


def markdown(report: dict) -> str:
  """The report as one Markdown table, each workload's error or skip on its own line."""
  lines = [f"Device: {report['device']} ({report['device_kind']}); host CPU: "
           f"{report['cpu_cores']} cores. Rates: higher is better; median of timed calls after "
           "a compiling first call.", "",
           "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
  for name, entry in report["workloads"].items():
    for r in entry["rows"]:
      peer = (f"{_number(r['peer_rate'])} ({r['peer']})" if r["peer"] is not None else "-")
      lines.append("| " + " | ".join([
          name, r["name"], r["unit"], _number(r["accelerator"]), _number(r["cpu"]),
          _number(r["accelerator_over_cpu"]), peer, _number(r["accelerator_over_peer"]),
          _number(r["max_rel_err"]), _number(r["target"]), _number(r["met"]),
          (r["note"] or "").strip("; ")]) + " |")
  for name, entry in report["workloads"].items():
    if entry.get("error") or entry.get("skipped"):
      lines.append(f"\n{name}: {entry.get('error') or entry.get('skipped')}")
    if entry.get("skipped_parts"):
      lines.append(f"\n{name}: left out past the time budget: "
                   f"{', '.join(entry['skipped_parts'])}")
  return "\n".join(lines) + "\n"


COMPILE_COST = {"dpsgd": 35.0, "domias": 20.0, "estimators": 12.0, "many_run": 5.0,
                "ngram": 5.0, "montecarlo": 3.0}
"""Seconds each tiny workload took on 2 CPU cores, nearly all compiling: how
:func:`split_workloads` balances the worker processes."""


def split_workloads(names: list[str], processes: int) -> list[list[str]]:
  """``names`` in at most ``processes`` groups of about equal :data:`COMPILE_COST` (largest
  first, each to the lightest group), each in the suite's order."""
  groups: list[list[str]] = [[] for _ in range(min(processes, len(names)))]
  for name in sorted(names, key=lambda n: -COMPILE_COST.get(n, 1.0)):
    min(groups, key=lambda g: sum(COMPILE_COST.get(n, 1.0) for n in g)).append(name)
  return [[n for n in names if n in g] for g in groups if g]


def merge_reports(reports: list[dict]) -> dict:
  """One report from several runs on the same kind of device: the first's, with each
  workload taken from the last run that finished it (rows and no error); ``merged_from`` lists
  each run's command and wall time. ValueError if the runs' devices differ."""
  kinds = {(r["device_kind"], r["cpu_cores"]) for r in reports}
  if len(kinds) != 1:
    raise ValueError(f"--from_results mixes devices {sorted(kinds)}; merge runs of one kind")
  merged = {**reports[0], "workloads": dict(reports[0]["workloads"])}
  for report in reports[1:]:
    for name, entry in report["workloads"].items():
      if entry["rows"] and not entry["error"]:
        merged["workloads"][name] = entry
  merged["merged_from"] = [{"command": r["command"], "wall_time_s": r.get("wall_time_s"),
                            "workloads": list(r["workloads"])} for r in reports]
  merged["wall_time_s"] = None  # several runs: see merged_from
  return merged
