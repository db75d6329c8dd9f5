"""Timing helpers shared by the many-run benchmarks (:mod:`experiments.benchmarks.many_run`,
:mod:`experiments.benchmarks.ngram`): one vmapped program over many DP-SGD runs against the same
run in a Python loop over runs (one compiled scan per run) and against the step loop of
:func:`dpaudit.dpsgd.train` (one jitted step dispatched per step). The loops time a subset of
the runs and extrapolate; every result says so.
"""

from __future__ import annotations

import math
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit.dpsgd import clipping, training


def time_vmapped(run, keys, args, chunk_size: int, repeats: int):
  """Compiles ``jit(vmap(run))`` (keys batched, ``args`` shared) once and times all runs in
  chunks of ``chunk_size``; ``run(key, *args)`` returns ``(params, batch_sizes)``. Returns the
  timing dict, the stacked parameters and batch sizes (NumPy)."""
  num_runs = keys.shape[0]
  num_chunks = math.ceil(num_runs / chunk_size)
  padded = num_chunks * chunk_size
  if padded > num_runs:  # pad with spare keys so every chunk has one shape (one compilation)
    keys = jnp.concatenate([keys, jax.random.split(keys[-1], padded - num_runs)])
  chunks = [keys[i * chunk_size:(i + 1) * chunk_size] for i in range(num_chunks)]
  start = time.perf_counter()
  compiled = jax.jit(jax.vmap(run, in_axes=(0,) + (None,) * len(args))).lower(
      chunks[0], *args).compile()
  compile_s = time.perf_counter() - start

  def all_runs():
    outs = [compiled(chunk, *args) for chunk in chunks]
    jax.block_until_ready(outs)
    return outs

  start = time.perf_counter()
  outs = all_runs()  # warm-up (first execution); its outputs are the ones checked
  first_s = time.perf_counter() - start
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    all_runs()
    times.append(time.perf_counter() - start)
  params = jax.tree.map(lambda *xs: np.concatenate(xs)[:num_runs], *[o[0] for o in outs])
  batch_sizes = np.concatenate([np.asarray(o[1]) for o in outs])[:num_runs]
  timing = {"compile_s": compile_s, "first_call_s": first_s,
            "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
            "repeats": len(times), "chunk_size": chunk_size, "num_chunks": num_chunks,
            "padded_runs": padded - num_runs,
            "per_run_ms": 1e3 * statistics.median(times) / num_runs}
  return timing, params, batch_sizes


def time_sequential(run, keys, args, num_timed: int):
  """Compiles the single ``run(key, *args)`` once and calls it ``num_timed`` times in a Python
  loop."""
  start = time.perf_counter()
  compiled = jax.jit(run).lower(keys[0], *args).compile()
  compile_s = time.perf_counter() - start
  jax.block_until_ready(compiled(keys[0], *args))  # warm-up
  outs, times = [], []
  for i in range(num_timed):
    start = time.perf_counter()
    out = compiled(keys[i], *args)
    jax.block_until_ready(out)
    times.append(time.perf_counter() - start)
    outs.append(jax.device_get(out))
  mean_s = sum(times) / len(times)
  timing = {"compile_s": compile_s, "runs_timed": num_timed,
            "per_run_ms": 1e3 * mean_s, "per_run_median_ms": 1e3 * statistics.median(times),
            "per_run_min_ms": 1e3 * min(times), "per_run_max_ms": 1e3 * max(times),
            "extrapolated_total_s": mean_s * keys.shape[0], "extrapolated": True,
            "note": (f"{num_timed} of {keys.shape[0]} runs timed one after another; total = "
                     f"mean time per run x {keys.shape[0]}")}
  return timing, outs


def time_step_loop(model, config, num_examples, example, strategy, keys, features, labels,
                   num_timed: int, loss_fn=clipping.softmax_cross_entropy):
  """The training loop of :func:`dpaudit.dpsgd.train` (one jitted step, compiled once,
  dispatched from Python every step) run after run: how a run is executed one at a time."""
  state, optimizer = training.init_state(keys[0], model, example, config, num_examples)
  step = jax.jit(training.make_step(model, optimizer, config, num_examples, loss_fn,
                                    strategy=strategy))
  start = time.perf_counter()
  compiled = step.lower(state, features, labels).compile()
  compile_s = time.perf_counter() - start

  def one_run(key):
    state, _ = training.init_state(key, model, example, config, num_examples)
    sizes = []
    for _ in range(config.num_steps):
      state, metrics = compiled(state, features, labels)
      sizes.append(metrics.batch_size)
    jax.block_until_ready(state)
    return jax.device_get((state.params, jnp.stack(sizes)))

  one_run(keys[0])  # warm-up (init_state's own small programs)
  outs, times = [], []
  for i in range(num_timed):
    start = time.perf_counter()
    outs.append(one_run(keys[i]))
    times.append(time.perf_counter() - start)
  mean_s = sum(times) / len(times)
  timing = {"compile_s": compile_s, "runs_timed": num_timed,
            "per_run_ms": 1e3 * mean_s, "per_run_median_ms": 1e3 * statistics.median(times),
            "per_step_us": 1e6 * mean_s / max(config.num_steps, 1),
            "extrapolated_total_s": mean_s * keys.shape[0], "extrapolated": True,
            "note": (f"{num_timed} of {keys.shape[0]} runs timed one after another, each a "
                     "Python loop over steps of the jitted DP-SGD step (the loop of "
                     f"dpaudit.dpsgd.train); total = mean time per run x {keys.shape[0]}")}
  return timing, outs


def check_equal(vmapped_params, vmapped_sizes, sequential_outs, num_check: int,
                rtol: float = 1e-5, atol: float = 1e-5) -> dict:
  """Whether the first ``num_check`` vmapped runs end as their sequential twins."""
  max_abs, max_rel, allclose, sizes_equal = 0.0, 0.0, True, True
  for i in range(num_check):
    seq_params, seq_sizes = sequential_outs[i]
    for a, b in zip(jax.tree.leaves(seq_params), jax.tree.leaves(vmapped_params)):
      a, b = np.asarray(a), np.asarray(b[i])
      diff = np.abs(a - b)
      max_abs = max(max_abs, float(diff.max()))
      max_rel = max(max_rel, float((diff / np.maximum(np.abs(a), 1e-12)).max()))
      allclose &= bool(np.allclose(b, a, rtol=rtol, atol=atol))
    sizes_equal &= bool(np.array_equal(np.asarray(seq_sizes), vmapped_sizes[i]))
  return {"runs_compared": num_check, "final_params_allclose": allclose, "rtol": rtol,
          "atol": atol, "max_abs_diff": max_abs, "max_rel_diff": max_rel,
          "batch_sizes_equal": sizes_equal, "passed": allclose and sizes_equal}
