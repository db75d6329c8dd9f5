"""Benchmark: a DP-SGD step against a non-private step (and Opacus), same run, same batch.

For each model (the MLP 784-512-256-10 and the LeNet-5 CNN, 28x28x1 inputs) at one batch size,
times one optimizer step of:

* ``nonprivate``: JAX ``grad`` of the mean loss, then SGD;
* ``dp_ghost``: DP-SGD with ghost-norm clipping (:mod:`dpaudit.dpsgd.clipping`), Gaussian noise
  (:func:`dpaudit.dpsgd.noise.dp_aggregate`) and SGD;
* ``dp_vmap``: the same with ``vmap`` per-example gradients;
* ``torch_nonprivate``, ``opacus`` and ``opacus_ghost`` from
  :mod:`experiments.benchmarks.dpsgd_torch` in a subprocess, when torch and opacus import
  (optional; a CPU torch wheel exists).

Every step is jitted once with its parameters and optimizer state donated; the JAX methods are
timed in interleaved rounds (so a noisy shared machine slows them alike) and the report gives
the median step time of each, the ratios to the non-private step and to Opacus, and the
targets (CPU: DP at most 1.5x non-private for the MLP and 1.3x for the CNN; at least 30x faster
than Opacus on the MLP). Prints one JSON object and writes it to ``--output_dir``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
from absl import flags

from dpaudit import models, results
from experiments import common
from experiments.benchmarks import hot_paths, tables

FLAGS = flags.FLAGS
flags.DEFINE_list("models", ["mlp", "lenet5"], "Models to time: mlp, lenet5 (and wrn16_4).")
flags.DEFINE_integer("batch_size", 256, "Examples per step (the same for every method).")
flags.DEFINE_integer("num_rounds", 5, "Interleaved timing rounds per method.")
flags.DEFINE_integer("steps_per_round", 10, "Timed steps per method in each round.")
flags.DEFINE_integer("vmap_steps_per_round", 2, "Timed steps of the slow vmap method per round.")
flags.DEFINE_integer("torch_steps", 30, "Timed steps of each torch/Opacus method.")
flags.DEFINE_integer("torch_threads", 0, "torch threads (0: every core).")
flags.DEFINE_bool("torch", True, "Also time the PyTorch/Opacus baseline when importable.")
flags.DEFINE_float("noise_multiplier", 1.0, "DP-SGD noise multiplier.")
flags.DEFINE_float("l2_clip_norm", 1.0, "DP-SGD clipping norm.")
flags.DEFINE_string("output_dir", "out/benchmarks/dpsgd", "Where results.json goes.")

TARGET_RATIO = {"mlp": 1.5, "lenet5": 1.3}
TARGET_SPEEDUP_VS_OPACUS = {"mlp": 30.0}
TORCH_PEERS = {"opacus": "Opacus step (hooks)", "opacus_ghost": "Opacus step (ghost clipping)",
               "torch_nonprivate": "PyTorch non-private step"}
TORCH_MODEL = {"mlp": "mlp", "lenet5": "cnn"}
EXAMPLE_SHAPE = hot_paths.EXAMPLE_SHAPE


def _steps(model, params, example_shape, batch_size):
  """The three jitted step functions ``(params, opt_state) -> (params, opt_state)``."""
  return hot_paths.make_steps(model, params, example_shape, batch_size,
                              FLAGS.noise_multiplier, FLAGS.l2_clip_norm)


def _time_jax(name: str) -> dict:
  model = models.make_model(name, EXAMPLE_SHAPE[name], 10)
  params = model.init(jax.random.key(0), jnp.zeros((1,) + EXAMPLE_SHAPE[name]))["params"]
  steps = _steps(model, params, EXAMPLE_SHAPE[name], FLAGS.batch_size)
  state = {}
  for method, (fn, opt_state) in steps.items():
    p, s = jax.tree.map(jnp.copy, (params, opt_state))  # donation must not free shared buffers
    p, s = fn(p, s)  # compile and warm up
    p, s = fn(p, s)
    jax.block_until_ready(p)
    state[method] = (p, s)
  times: dict[str, list[float]] = {method: [] for method in steps}
  for _ in range(FLAGS.num_rounds):
    for method, (fn, _) in steps.items():
      p, s = state[method]
      n = FLAGS.vmap_steps_per_round if method == "dp_vmap" else FLAGS.steps_per_round
      for _ in range(n):
        start = time.perf_counter()
        p, s = fn(p, s)
        jax.block_until_ready(p)
        times[method].append(time.perf_counter() - start)
      state[method] = (p, s)
  return {method: {"median_ms": 1e3 * statistics.median(t), "min_ms": 1e3 * min(t),
                   "max_ms": 1e3 * max(t), "num_steps": len(t)} for method, t in times.items()}


def _time_torch(name: str) -> dict:
  if name not in TORCH_MODEL:
    return {"available": False, "reason": f"no torch twin of {name}"}
  cmd = [sys.executable, "-m", "experiments.benchmarks.dpsgd_torch",
         f"--model={TORCH_MODEL[name]}", f"--batch_size={FLAGS.batch_size}",
         f"--num_steps={FLAGS.torch_steps}", f"--threads={FLAGS.torch_threads}",
         f"--noise_multiplier={FLAGS.noise_multiplier}", f"--max_grad_norm={FLAGS.l2_clip_norm}"]
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  out = subprocess.run(cmd, capture_output=True, text=True, cwd=root)
  if out.returncode != 0:
    lines = out.stderr.strip().splitlines()
    return {"available": False, "reason": lines[-1] if lines else f"exit {out.returncode}"}
  return json.loads(out.stdout.strip().splitlines()[-1])


def _torch_median_ms(torch_result: dict, method: str) -> float | None:
  entry = torch_result.get(method) if torch_result.get("available", True) else None
  if isinstance(entry, dict) and "median_ms" in entry:
    return entry["median_ms"]
  if isinstance(entry, dict) and "median_s" in entry:
    return 1e3 * entry["median_s"]
  return None


def _report(name: str) -> dict:
  jax_times = _time_jax(name)
  base = jax_times["nonprivate"]["median_ms"]
  ghost = jax_times["dp_ghost"]["median_ms"]
  vmap = jax_times["dp_vmap"]["median_ms"]
  report = {"jax": jax_times,
            "dp_ghost_over_nonprivate": ghost / base,
            "dp_vmap_over_nonprivate": vmap / base,
            "target_dp_over_nonprivate": TARGET_RATIO.get(name),
            "meets_ratio_target": (bool(ghost / base <= TARGET_RATIO[name])
                                   if name in TARGET_RATIO else None)}
  if FLAGS.torch:
    torch_result = _time_torch(name)
    report["torch"] = torch_result
    opacus = _torch_median_ms(torch_result, "opacus")
    if opacus is not None:
      report["opacus_over_dp_ghost"] = opacus / ghost
      opacus_ghost = _torch_median_ms(torch_result, "opacus_ghost")
      if opacus_ghost is not None:
        report["opacus_ghost_over_dp_ghost"] = opacus_ghost / ghost
      if name in TARGET_SPEEDUP_VS_OPACUS:
        report["target_speedup_vs_opacus"] = TARGET_SPEEDUP_VS_OPACUS[name]
        report["meets_opacus_target"] = bool(opacus / ghost >= TARGET_SPEEDUP_VS_OPACUS[name])
  return report


def table(result: dict) -> list[dict]:
  """Per model, the DP-SGD step (ghost clipping) in ms against the non-private JAX step (target:
  at most ``TARGET_RATIO`` times its time, so a ratio of at least the inverse), the vmap DP step
  and the torch steps (:mod:`~experiments.benchmarks.tables`)."""
  rows = []
  for name, report in result["models"].items():
    jax_times = report["jax"]
    ghost = jax_times["dp_ghost"]["median_ms"]
    workload = f"{name} DP-SGD step, ghost clipping, batch {result['batch_size']}"
    target = report["target_dp_over_nonprivate"]
    rows.append(tables.row(workload, ghost, "ms", peer=jax_times["nonprivate"]["median_ms"],
                           peer_name="JAX non-private step",
                           target=None if target is None else 1.0 / target))
    rows.append(tables.row(workload, ghost, "ms", peer=jax_times["dp_vmap"]["median_ms"],
                           peer_name="JAX DP-SGD step, vmap per-example gradients"))
    torch = report.get("torch")
    if torch is not None and not torch.get("available", True):
      rows.append(tables.row(workload, ghost, "ms", peer_name=f"Opacus: {torch['reason']}",
                             target=TARGET_SPEEDUP_VS_OPACUS.get(name)))
      continue
    for method, peer_name in TORCH_PEERS.items() if torch is not None else ():
      peer = _torch_median_ms(torch, method)
      error = (torch.get(method) or {}).get("error")
      rows.append(tables.row(
          workload, ghost, "ms", peer=peer, peer_name=f"{peer_name}: {error}" if error else
          peer_name, target=TARGET_SPEEDUP_VS_OPACUS.get(name) if method == "opacus" else None))
  return rows


@common.cli
def main(argv):
  del argv
  if not FLAGS.models:
    raise ValueError(f"--models is empty; name at least one of {', '.join(EXAMPLE_SHAPE)}")
  for name in FLAGS.models:
    if name not in EXAMPLE_SHAPE:
      raise ValueError(f"--models contains {name!r}; valid: {', '.join(EXAMPLE_SHAPE)}")
  # A batch's per-example gradients: at least 4 KB per example for the smallest model.
  common.check_memory("batch_size", FLAGS.batch_size, 4096.0,
                      what="the batch's per-example gradients")
  for name in ("num_rounds", "steps_per_round", "vmap_steps_per_round", "torch_steps"):
    common.check_count(name, FLAGS[name].value)
  common.check_count("torch_threads", FLAGS.torch_threads, 0, 4096)
  common.check_float("noise_multiplier", FLAGS.noise_multiplier, 0.0)
  common.check_float("l2_clip_norm", FLAGS.l2_clip_norm, 0.0, low_open=True)
  common.claim_output_dir(FLAGS.output_dir)
  start = time.perf_counter()
  result = {
      "benchmark": "dpsgd_step",
      "device": str(jax.devices()[0]), "cpu_cores": os.cpu_count(),
      "batch_size": FLAGS.batch_size, "noise_multiplier": FLAGS.noise_multiplier,
      "l2_clip_norm": FLAGS.l2_clip_norm,
      "models": {name: _report(name) for name in FLAGS.models},
      "versions": common.versions(), "machine": tables.machine(),
      "command": " ".join(sys.argv),
  }
  result["table"] = table(result)
  result["wall_time_s"] = time.perf_counter() - start
  results.write_json(os.path.join(FLAGS.output_dir, "results.json"), result)
  print(results.dumps(result))


if __name__ == "__main__":
  common.run(main)
