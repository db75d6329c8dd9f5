"""Benchmark: a DP-SGD step against a non-private step and Opacus, same run, same batch.

For each model (the MLP 784-512-256-10 and the LeNet-5 CNN on 28x28x1 inputs, WRN-16-4 with
group normalisation on 32x32x3 inputs) at one batch size, times one optimizer step of:

* ``nonprivate``: JAX ``grad`` of the mean loss, then SGD;
* ``dp_ghost``: DP-SGD with ghost-norm clipping (:mod:`dpaudit.dpsgd.clipping`), Gaussian noise
  (:func:`dpaudit.dpsgd.noise.dp_aggregate`) and SGD;
* ``dp_vmap``: the same with ``vmap`` per-example gradients;
* when torch and opacus import (optional, ``requirements-torch.txt``): ``torch_nonprivate`` and
  Opacus in each ``grad_sample_mode`` it can run on one process (``opacus``: hooks,
  ``opacus_functorch``, ``opacus_ew``: expanded weights, ``opacus_ghost``: ghost clipping), from
  :mod:`experiments.benchmarks.dpsgd_torch` in a worker process (``--serve``) with
  ``--torch_threads`` threads.

Every JAX step is jitted once with its parameters and optimizer state donated. All methods,
torch ones included, are timed in interleaved rounds (so a noisy shared machine slows them
alike); the slow ones (``dp_vmap`` and Opacus' per-example-gradient modes) run fewer steps per
round. The report gives the median step time of each, the ratios to the non-private step and to
the fastest Opacus mode, and the targets (CPU: DP at most 1.5x the non-private step for the MLP
and 1.3x for the CNNs; at least as fast as the fastest Opacus mode for every model). Prints one
JSON object and writes it to ``--output_dir``.
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
flags.DEFINE_list("models", ["mlp", "lenet5", "wrn16_4"], "Models to time: mlp, lenet5, wrn16_4.")
flags.DEFINE_integer("batch_size", 256, "Examples per step of the MLP and LeNet-5 (every method).")
flags.DEFINE_integer("wrn16_4_batch_size", 32, "Examples per step of WRN-16-4 (every method).")
flags.DEFINE_integer("num_rounds", 5, "Interleaved timing rounds per method.")
flags.DEFINE_integer("steps_per_round", 10, "Timed steps per fast method in each round.")
flags.DEFINE_integer("vmap_steps_per_round", 2,
                     "Timed steps per round of the slow methods (vmap, Opacus' per-example "
                     "gradient modes).")
flags.DEFINE_integer("wrn16_4_steps_per_round", 2,
                     "Timed steps per fast method in each round for WRN-16-4 (slow methods: 1).")
flags.DEFINE_integer("torch_threads", 0, "torch threads (0: every core).")
flags.DEFINE_bool("torch", True, "Also time PyTorch and Opacus when importable.")
flags.DEFINE_float("noise_multiplier", 1.0, "DP-SGD noise multiplier.")
flags.DEFINE_float("l2_clip_norm", 1.0, "DP-SGD clipping norm.")
flags.DEFINE_string("output_dir", "out/benchmarks/dpsgd", "Where results.json goes.")

TARGET_RATIO = {"mlp": 1.5, "lenet5": 1.3, "wrn16_4": 1.3}
TARGET_SPEEDUP_VS_OPACUS = 1.0
"""dp_ghost must be at least as fast as the fastest Opacus mode (its median step)."""
TORCH_PEERS = {"opacus_ghost": "Opacus step (ghost clipping)", "opacus": "Opacus step (hooks)",
               "opacus_functorch": "Opacus step (functorch)",
               "opacus_ew": "Opacus step (expanded weights)",
               "torch_nonprivate": "PyTorch non-private step"}
SLOW = ("dp_vmap", "opacus", "opacus_functorch", "opacus_ew")
TORCH_MODEL = {"mlp": "mlp", "lenet5": "cnn", "wrn16_4": "wrn16_4"}
EXAMPLE_SHAPE = hot_paths.EXAMPLE_SHAPE


def _batch_size(name: str) -> int:
  return FLAGS.wrn16_4_batch_size if name == "wrn16_4" else FLAGS.batch_size


def _steps_per_round(name: str, method: str) -> int:
  fast = FLAGS.wrn16_4_steps_per_round if name == "wrn16_4" else FLAGS.steps_per_round
  slow = 1 if name == "wrn16_4" else FLAGS.vmap_steps_per_round
  return slow if method in SLOW else fast


class _TorchWorker:
  """``python -m experiments.benchmarks.dpsgd_torch --serve`` for one model: its header (or why
  torch is unavailable) and, on request, the times of N steps of one method."""

  def __init__(self, name: str):
    cmd = [sys.executable, "-m", "experiments.benchmarks.dpsgd_torch", "--serve",
           f"--model={TORCH_MODEL[name]}", f"--batch_size={_batch_size(name)}",
           f"--threads={FLAGS.torch_threads}", f"--noise_multiplier={FLAGS.noise_multiplier}",
           f"--max_grad_norm={FLAGS.l2_clip_norm}", "--num_warmup=2",
           f"--num_steps={FLAGS.num_rounds}"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    self.process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, cwd=root)
    line = self.process.stdout.readline()
    if not line:
      lines = self.process.communicate()[1].strip().splitlines()
      self.header = {"available": False,
                     "reason": lines[-1] if lines else f"exit {self.process.returncode}"}
    else:
      self.header = json.loads(line)
    self.methods = [m for m in TORCH_PEERS if self.header.get("available") and
                    m not in self.header]

  def times(self, method: str, count: int) -> list[float]:
    self.process.stdin.write(f"{method} {count}\n")
    self.process.stdin.flush()
    return json.loads(self.process.stdout.readline())

  def close(self) -> None:
    if self.process.poll() is None:
      self.process.communicate()


def _summary(times: list[float]) -> dict:
  return {"median_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times),
          "max_ms": 1e3 * max(times), "num_steps": len(times)}


def _time(name: str) -> tuple[dict, dict | None]:
  """Median step times of the JAX methods and (when importable) the torch ones, interleaved."""
  model = models.make_model(name, EXAMPLE_SHAPE[name], 10)
  params = model.init(jax.random.key(0), jnp.zeros((1,) + EXAMPLE_SHAPE[name]))["params"]
  steps = hot_paths.make_steps(model, params, EXAMPLE_SHAPE[name], _batch_size(name),
                               FLAGS.noise_multiplier, FLAGS.l2_clip_norm)
  state = {}
  for method, (fn, opt_state) in steps.items():
    p, s = jax.tree.map(jnp.copy, (params, opt_state))  # donation must not free shared buffers
    p, s = fn(p, s)  # compile and warm up
    p, s = fn(p, s)
    jax.block_until_ready(p)
    state[method] = (p, s)
  worker = _TorchWorker(name) if FLAGS.torch else None
  times: dict[str, list[float]] = {m: [] for m in list(steps) + (worker.methods if worker else [])}
  try:
    for _ in range(FLAGS.num_rounds):
      for method, (fn, _) in steps.items():
        p, s = state[method]
        for _ in range(_steps_per_round(name, method)):
          start = time.perf_counter()
          p, s = fn(p, s)
          jax.block_until_ready(p)
          times[method].append(time.perf_counter() - start)
        state[method] = (p, s)
      for method in worker.methods if worker else ():
        times[method] += worker.times(method, _steps_per_round(name, method))
  finally:
    if worker is not None:
      worker.close()
  summaries = {m: _summary(t) for m, t in times.items()}
  if worker is None:
    return summaries, None
  torch_result = dict(worker.header)
  torch_result.update({m: summaries.pop(m) for m in worker.methods})
  return summaries, torch_result


def _torch_median_ms(torch_result: dict, method: str) -> float | None:
  entry = torch_result.get(method) if torch_result.get("available", True) else None
  return entry["median_ms"] if isinstance(entry, dict) and "median_ms" in entry else None


def fastest_opacus(torch_result: dict | None) -> tuple[str, float] | None:
  """(method, median ms) of the fastest Opacus mode that ran, or None."""
  medians = {m: _torch_median_ms(torch_result, m) for m in TORCH_PEERS
             if m.startswith("opacus")} if torch_result else {}
  medians = {m: t for m, t in medians.items() if t is not None}
  return min(medians.items(), key=lambda item: item[1]) if medians else None


def _report(name: str) -> dict:
  jax_times, torch_result = _time(name)
  base = jax_times["nonprivate"]["median_ms"]
  ghost = jax_times["dp_ghost"]["median_ms"]
  vmap = jax_times["dp_vmap"]["median_ms"]
  report = {"batch_size": _batch_size(name), "jax": jax_times,
            "dp_ghost_over_nonprivate": ghost / base,
            "dp_vmap_over_nonprivate": vmap / base,
            "target_dp_over_nonprivate": TARGET_RATIO[name],
            "meets_ratio_target": bool(ghost / base <= TARGET_RATIO[name])}
  if torch_result is not None:
    report["torch"] = torch_result
    fastest = fastest_opacus(torch_result)
    if fastest is not None:
      report["fastest_opacus"] = fastest[0]
      report["fastest_opacus_over_dp_ghost"] = fastest[1] / ghost
      report["target_speedup_vs_opacus"] = TARGET_SPEEDUP_VS_OPACUS
      report["meets_opacus_target"] = bool(fastest[1] / ghost >= TARGET_SPEEDUP_VS_OPACUS)
  return report


def table(result: dict) -> list[dict]:
  """Per model, the DP-SGD step (ghost clipping) in ms against the non-private JAX step (target:
  at most ``TARGET_RATIO`` times its time, so a ratio of at least the inverse), the vmap DP
  step, the fastest Opacus mode (target: at least as fast) and the other torch steps
  (:mod:`~experiments.benchmarks.tables`)."""
  rows = []
  for name, report in result["models"].items():
    jax_times = report["jax"]
    ghost = jax_times["dp_ghost"]["median_ms"]
    workload = f"{name} DP-SGD step, ghost clipping, batch {report['batch_size']}"
    rows.append(tables.row(workload, ghost, "ms", peer=jax_times["nonprivate"]["median_ms"],
                           peer_name="JAX non-private step",
                           target=1.0 / report["target_dp_over_nonprivate"]))
    rows.append(tables.row(workload, ghost, "ms", peer=jax_times["dp_vmap"]["median_ms"],
                           peer_name="JAX DP-SGD step, vmap per-example gradients"))
    torch = report.get("torch")
    if torch is None:
      continue
    if not torch.get("available", True):
      rows.append(tables.row(workload, ghost, "ms", peer_name=f"Opacus: {torch['reason']}",
                             target=TARGET_SPEEDUP_VS_OPACUS))
      continue
    fastest = report.get("fastest_opacus")
    for method in sorted(TORCH_PEERS, key=lambda m: m != fastest):
      error = (torch.get(method) or {}).get("error")
      peer_name = f"{TORCH_PEERS[method]}: {error}" if error else TORCH_PEERS[method]
      if method == fastest:
        peer_name = f"fastest Opacus mode: {peer_name}"
      rows.append(tables.row(
          workload, ghost, "ms", peer=_torch_median_ms(torch, method), peer_name=peer_name,
          target=TARGET_SPEEDUP_VS_OPACUS if method == fastest else None))
  return rows


@common.cli
def main(argv):
  del argv
  if not FLAGS.models:
    raise ValueError(f"--models is empty; name at least one of {', '.join(EXAMPLE_SHAPE)}")
  for name in FLAGS.models:
    if name not in EXAMPLE_SHAPE:
      raise ValueError(f"--models contains {name!r}; valid: {', '.join(EXAMPLE_SHAPE)}")
  # A batch's per-example gradients: at least 4 KB per example for the smallest model, 11 MB
  # for WRN-16-4.
  common.check_memory("batch_size", FLAGS.batch_size, 4096.0,
                      what="the batch's per-example gradients")
  common.check_memory("wrn16_4_batch_size", FLAGS.wrn16_4_batch_size, 1.1e7,
                      what="the batch's per-example gradients")
  for name in ("num_rounds", "steps_per_round", "vmap_steps_per_round",
               "wrn16_4_steps_per_round"):
    common.check_count(name, FLAGS[name].value)
  common.check_count("torch_threads", FLAGS.torch_threads, 0, 4096)
  common.check_float("noise_multiplier", FLAGS.noise_multiplier, 0.0)
  common.check_float("l2_clip_norm", FLAGS.l2_clip_norm, 0.0, low_open=True)
  common.claim_output_dir(FLAGS.output_dir)
  start = time.perf_counter()
  result = {
      "benchmark": "dpsgd_step",
      "device": str(jax.devices()[0]), "cpu_cores": os.cpu_count(),
      "batch_size": FLAGS.batch_size, "wrn16_4_batch_size": FLAGS.wrn16_4_batch_size,
      "noise_multiplier": FLAGS.noise_multiplier,
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
