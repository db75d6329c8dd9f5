"""The training workloads of :mod:`experiments.benchmarks.accelerator`: DP-SGD steps of each
model, many vmapped DP-SGD runs, n-gram training and DOMIAS's density models."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpaudit.prng import make_key
from experiments.benchmarks import hot_paths
from experiments.benchmarks import timing as run_timing
from experiments.benchmarks.accelerator_context import Context, both, row, timed, x64

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

    (acc, _), (cpu, _) = both(ctx, measure)
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

  (acc, _), (cpu, _) = both(ctx, measure)
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

  (acc, _), (cpu, _) = both(ctx, measure)
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

  (acc, _), (cpu, _) = both(ctx, measure)
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
