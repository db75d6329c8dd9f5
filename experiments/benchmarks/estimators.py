r"""Speed of dpaudit's estimators against the tools a user would otherwise call, same run.

  python -m experiments.benchmarks.estimators

For each workload the dpaudit estimator and each peer compute the same bound on the same random
input in this process; the median of ``--num_repeats`` timed calls is reported (compile excluded:
the first call is timed apart, and ``compile_s`` is the compile time JAX reports during it;
dpaudit's calls are timed before and after the peers', and the median is over both sets),
with the ratio ``peer median / dpaudit median`` and whether the target of the workload is met.
Peers:

* scipy (``scipy.stats.beta.ppf/isf``, ``binom.sf/cdf``): Clopper-Pearson limits and binomial
  tails, and a vectorised scipy version of each score-based bound (what a user would write);
* jax-privacy's ``auditing.CanaryScoreAuditor`` (optional: ``pip install jax-privacy``), timed
  with the construction of the auditor, which does its sorting;
* tf-privacy's ``privacy_tests.epsilon_lower_bound`` when importable (the PyPI wheel does not ship
  it and pins numpy < 2; see the README);
* statsmodels' ``multinomial_proportions_confint`` for the k-cut intervals (one row per call:
  timed on a subset and extrapolated, which the result says).
* PrivacyGuard's f-DP grid method (a loop over 1,000 noise levels; reimplemented, PrivacyGuard
  is not on PyPI) for ``fdp_one_run_mu`` / ``fdp_one_run_epsilon`` (group ``fdp``,
  :mod:`~experiments.benchmarks.estimators_fdp`; on the batches timed on a subset and
  extrapolated).

Also checked, per workload: the largest relative difference from the peer's values (accuracy
is kept), one-run cost at large m, and that calling again with new values of the same shape
compiles nothing. Prints one JSON object (also ``--output_dir/results.json``).
"""

from __future__ import annotations

import math
import os
import statistics
from typing import Any

from absl import flags

from experiments import common
from experiments.benchmarks import estimators_counts as counts
from experiments.benchmarks import estimators_fdp as fdp
from experiments.benchmarks import estimators_renyi as renyi
from experiments.benchmarks import estimators_scores as scores
from experiments.benchmarks import tables
from experiments.benchmarks.estimator_inputs import scaled_size
from experiments.benchmarks.estimators_timing import (
  CALIBRATION_PROGRAM,
  COMPILE_TARGET_S,
  PRECISIONS,
  CompileCounter,
  Settings,
  calibration_compile_s,
)

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_repeats", 3, "Timed calls per measurement (median reported).")
flags.DEFINE_float("min_timed_s", 1.0, "Fast calls are repeated beyond --num_repeats until their "
                   "total reaches this many seconds (at most 25 calls); 0 times exactly "
                   "--num_repeats calls.")
flags.DEFINE_integer("seed", 0, "Seed of the random workloads (NumPy generator).")
flags.DEFINE_float("scale", 1.0, "Multiplies every workload size (0.001 for a smoke test); "
                   "targets are judged only at scale 1.")
flags.DEFINE_list("only", [], "Run only the workload groups named here (cp, binomial, "
                  "error_counts, scores, panoramia, one_run, fdp, renyi, throughput); default all "
                  "but throughput (the accelerator workload, run only when named).")
flags.DEFINE_string("output_dir", "out/benchmarks/estimators", "Where results.json goes.")
common.deprecated_alias("repeats", "num_repeats")
flags.DEFINE_list("throughput_sizes", ["1e6", "1e7", "1e8"],
                  "throughput group: count pairs per call (times --scale).")
flags.DEFINE_list("throughput_precisions", ["float64", "float32"],
                  "throughput group: precisions timed (jax_enable_x64 on / off).")
flags.DEFINE_integer("throughput_reference", 100_000,
                     "throughput group: pairs of each call checked against scipy in float64.")

GROUPS = ("cp", "binomial", "error_counts", "scores", "panoramia", "one_run", "fdp", "renyi",
          "throughput")
DEFAULT_GROUPS = GROUPS[:-1]  # the CPU targets; throughput runs only when named


BENCHES = {"cp": counts.bench_cp, "binomial": counts.bench_binomial,
           "error_counts": counts.bench_error_counts, "scores": scores.bench_scores,
           "panoramia": scores.bench_panoramia, "one_run": scores.bench_one_run,
           "fdp": fdp.bench_fdp,
           "renyi": renyi.bench_renyi, "throughput": renyi.bench_throughput}
"""Each group's workload, ``(results, settings) -> None`` (appends its entries to ``results``)."""


def _throughput_sizes() -> list[int]:
  return [scaled_size(float(v), FLAGS.scale) for v in FLAGS.throughput_sizes]


def config_from_flags() -> dict[str, Any]:
  common.check_count("num_repeats", FLAGS.num_repeats)
  common.check_float("min_timed_s", FLAGS.min_timed_s, 0.0)
  common.check_float("scale", FLAGS.scale, 0.0, 1.0, low_open=True)
  common.check_seed(FLAGS.seed)
  unknown = [g for g in FLAGS.only if g not in GROUPS]
  if unknown:
    raise ValueError(f"--only={','.join(FLAGS.only)} names unknown groups {unknown}; valid: "
                     + ", ".join(GROUPS))
  bad = [v for v in FLAGS.throughput_precisions if v not in PRECISIONS]
  if bad:
    raise ValueError(f"--throughput_precisions={','.join(FLAGS.throughput_precisions)} names "
                     f"{bad}; valid: {', '.join(PRECISIONS)}")
  for value in FLAGS.throughput_sizes:
    try:
      size = float(value)
    except ValueError:
      size = float("nan")
    if not 1 <= size <= 1e10:
      raise ValueError(f"--throughput_sizes={','.join(FLAGS.throughput_sizes)}: {value!r} is "
                       "outside the valid range [1, 1e10]")
  common.check_memory("throughput_reference", FLAGS.throughput_reference, 64.0,
                      what="the reference workload's inputs")
  groups = list(FLAGS.only) or list(DEFAULT_GROUPS)
  if "throughput" in groups:
    for name in ("throughput_sizes", "throughput_precisions"):
      if not FLAGS[name].value:
        raise ValueError(f"--{name} is empty; the throughput group needs at least one value")
  config = {"repeats": FLAGS.num_repeats,  # (results.json keeps the key)
            "min_timed_s": FLAGS.min_timed_s, "seed": FLAGS.seed,
            "scale": FLAGS.scale, "groups": groups}
  if "throughput" in groups:
    config.update(throughput_sizes=_throughput_sizes(),
                  throughput_precisions=list(FLAGS.throughput_precisions),
                  throughput_reference=FLAGS.throughput_reference)
  return config


def _finite(value):
  """Non-finite numbers (an infinite relative difference) as None, so the JSON is strict."""
  if isinstance(value, dict):
    return {k: _finite(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_finite(v) for v in value]
  if isinstance(value, float) and not math.isfinite(value):
    return None
  return value


def peers_installed() -> dict[str, str | None]:
  import importlib.metadata
  out = {}
  for name in ("scipy", "statsmodels", "jax-privacy", "tensorflow-privacy"):
    try:
      out[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      out[name] = None
  return out


def table(workloads: list[dict], judged: bool) -> list[dict]:
  """Each workload's dpaudit median in ms against its fastest peer (target: the workload's
  ratio; no peer when none is installed), or against its time limit, or (throughput) against
  scipy on one core extrapolated; then the slowest first call's compile time against the 2 s
  goal (:mod:`~experiments.benchmarks.tables`). Targets only at full scale (``judged``)."""
  rows = []
  for w in workloads:
    ours = 1e3 * w["dpaudit"]["median_s"]
    if w["group"] == "throughput":
      rows.append(tables.row(w["name"], ours, "ms", peer=1e3 * w["scipy_one_core_s"],
                             peer_name="scipy, one core (extrapolated)"))
    elif w["peers"]:
      fastest = w["fastest_peer"]
      rows.append(tables.row(w["name"], ours, "ms", peer=1e3 * w["peers"][fastest]["median_s"],
                             peer_name=fastest.replace("_", "-"),
                             target=w["target_ratio"] if judged else None))
      if w["target_seconds"] is not None:  # a time goal as well (the f-DP batches)
        rows.append(tables.goal_row(w["name"], ours, "ms", 1e3 * w["target_seconds"], judged))
    elif w["target_seconds"] is not None:
      rows.append(tables.goal_row(w["name"], ours, "ms", 1e3 * w["target_seconds"], judged))
    else:  # its peers are optional and none is installed
      rows.append(tables.row(w["name"], ours, "ms",
                             peer_name=f"not installed: {w['target'].split(' vs ', 1)[-1]}",
                             target=w["target_ratio"] if judged else None))
  if workloads:
    slowest = max(workloads, key=lambda w: w["dpaudit"]["compile_s"])
    rows.append(tables.goal_row(f"compile time of the slowest first call ({slowest['name']})",
                                slowest["dpaudit"]["compile_s"], "s", COMPILE_TARGET_S, judged))
  return rows


@common.cli
def main(argv) -> None:
  del argv
  common.enable_x64()
  common.quiet_logging()
  config = config_from_flags()
  common.claim_output_dir(FLAGS.output_dir)
  import jax
  settings = Settings(
      repeats=config["repeats"], min_timed_s=FLAGS.min_timed_s, seed=FLAGS.seed,
      scale=FLAGS.scale, counter=CompileCounter(),
      throughput_sizes=tuple(_throughput_sizes()),
      throughput_precisions=tuple(FLAGS.throughput_precisions),
      throughput_reference=FLAGS.throughput_reference)
  results: list[dict] = []
  calibrations = [calibration_compile_s()]
  with common.Timer() as timer:
    for group in config["groups"]:
      BENCHES[group](results, settings)
      calibrations.append(calibration_compile_s())
  calibration = statistics.median(calibrations)
  for entry in results:
    entry["dpaudit"]["compile_per_calibration"] = entry["dpaudit"]["compile_s"] / calibration
  full_scale = config["scale"] == 1.0
  judged = [r for r in results if r["target_met"] is not None]  # throughput rows have no target
  report = {
      "device": f"{jax.devices()[0].platform}:{jax.devices()[0].device_kind}",
      "cpu_cores": os.cpu_count(), "peers_installed": peers_installed(),
      "compile_target_s": COMPILE_TARGET_S,
      "calibration": {"program": CALIBRATION_PROGRAM, "compile_s": calibrations,
                      "median_s": calibration},
      "workloads": results,
      "all_targets_met": (all(r["target_met"] for r in judged) if full_scale and judged
                          else None),
      "unmet": [r["name"] for r in judged if not r["target_met"]],
      "machine": tables.machine(),
      "table": table(results, full_scale and bool(judged)),
  }
  report = _finite(report)
  path = common.write_results(FLAGS.output_dir, "benchmarks.estimators", config, report,
                              timer.seconds)
  with open(path) as f:
    print(f.read())


if __name__ == "__main__":
  common.run(main)
