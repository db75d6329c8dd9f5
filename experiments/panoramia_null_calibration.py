r"""Calibration of PANORAMIA's null reference: how often a target that leaks nothing looks leaky.

  python -m experiments.panoramia_null_calibration --output_dir=out/panoramia_null_calibration

PANORAMIA's eps~ (Kazmi et al., Alg. 1) is often above 0 for a target that leaks nothing, so
dpaudit reports each eps~ with a p-value against a null reference
(:func:`dpaudit.estimators.panoramia_null`, a smoothed bootstrap). This study checks that
p-value where the truth is known: in each simulated audit the B baselines and the MIA score
members N(signal, 1) and non-members N(0, 1), all with independent noise, so the MIA is no
stronger than a baseline (no leakage). Membership is a fair coin per point, as in the audit
set. Per setting (``--settings``: ``m:signal:B``, the audit size, the score gap and the
number of baselines) it runs ``--num_audits`` audits and reports:

* ``rejection_rate``: the share of audits with p <= ``--level`` (a valid null keeps it near or
  below the level), with a two-sided 95% Clopper-Pearson interval;
* the same at twice the level;
* the share of audits with eps~ > 0 and eps~'s mean, 90th percentile and maximum: what a
  reader would mistake for leakage without the null.

Each setting is stored in ``--output_dir/cells`` and reused by a rerun. Writes
``results.json`` and prints one line per setting.
"""

from __future__ import annotations

import os
import sys

from absl import flags

from dpaudit import results
from experiments import common

FLAGS = flags.FLAGS
flags.DEFINE_list("settings", ["300:1.5:1", "300:1.5:3", "1000:4:1", "1000:4:3", "1000:0.5:3"],
                  "Settings m:signal:B: audit size m >= 2, member score gap signal >= 0 "
                  "(finite), number of baselines B >= 1.")
flags.DEFINE_integer("num_audits", 200, "Simulated audits per setting (>= 1).")
flags.DEFINE_integer("null_samples", 100, "Null audits per simulated audit (>= 1).")
flags.DEFINE_float("level", 0.05, "A p-value at most this rejects 'no leakage', in (0, 0.5).")
flags.DEFINE_float("significance", 0.05,
                   "beta of the PANORAMIA bounds (c_lb, {c+eps}_lb jointly at 1 - beta).")
flags.DEFINE_integer("seed", 0, "PRNG seed.")
flags.DEFINE_string("output_dir", "out/panoramia_null_calibration", "Where results go.")
flags.DEFINE_bool("resume", True, "Reuse finished settings in output_dir/cells.")

MAX_SIGNAL = 50.0


def parse_setting(text: str) -> dict:
  """``"m:signal:B"`` as ``{"num_audit": m, "signal": signal, "num_baselines": B}``
  (ValueError naming --settings and the valid ranges)."""
  parts = text.split(":")
  valid = (f"m:signal:B with m an integer in [2, {common.MAX_COUNT}], signal a number in "
           f"[0, {MAX_SIGNAL:g}], B an integer >= 1")
  try:
    if len(parts) != 3:
      raise ValueError
    m, signal, baselines = int(parts[0]), float(parts[1]), int(parts[2])
  except ValueError:
    raise ValueError(f"--settings contains {text!r}; each setting is {valid}") from None
  if not (2 <= m <= common.MAX_COUNT and 0.0 <= signal <= MAX_SIGNAL and baselines >= 1):
    raise ValueError(f"--settings contains {text!r}, outside the valid range: {valid}")
  return {"num_audit": m, "signal": signal, "num_baselines": baselines}


def config_from_flags() -> dict:
  """The validated run configuration (ValueError naming the flag and its valid range)."""
  if not FLAGS.settings:
    raise ValueError("--settings is empty; give at least one m:signal:B")
  settings = [parse_setting(s) for s in FLAGS.settings]
  common.check_count("num_audits", FLAGS.num_audits)
  common.check_float("level", FLAGS.level, 0.0, 0.5, low_open=True, high_open=True)
  common.check_significance(FLAGS.significance)
  common.check_seed(FLAGS.seed)
  # One null: null_samples x (B + 1) score vectors of m float64, resampled and sorted.
  largest = max(s["num_audit"] * (s["num_baselines"] + 1) for s in settings)
  common.check_memory("null_samples", FLAGS.null_samples, 8.0 * 4 * largest,
                      what="the null audits of the largest setting")
  return {"settings": settings, "num_audits": FLAGS.num_audits,
          "null_samples": FLAGS.null_samples, "level": FLAGS.level,
          "significance": FLAGS.significance, "seed": FLAGS.seed}


def simulate_audit(key, num_audit: int, signal: float, num_baselines: int):
  """One audit of a target that leaks nothing: ``(baselines (B, m), mia (m,), member (m,))``,
  every score ``signal * member + N(0, 1)`` with its own noise."""
  import jax
  import jax.numpy as jnp
  key_member, key_base, key_mia = jax.random.split(key, 3)
  member = jax.random.bernoulli(key_member, 0.5, (num_audit,))
  gap = signal * member.astype(jnp.float64)
  baselines = gap + jax.random.normal(key_base, (num_baselines, num_audit), jnp.float64)
  mia = gap + jax.random.normal(key_mia, (num_audit,), jnp.float64)
  return baselines, mia, member


def study(key, setting: dict, config: dict) -> dict:
  """``num_audits`` simulated audits of one setting: each audit's eps~ and its null p-value,
  and the rates the module docstring lists."""
  import jax
  import numpy as np

  from dpaudit import estimators
  from dpaudit.estimators import panoramia

  beta, level = config["significance"], config["level"]
  eps, p_values = [], []
  for i in range(config["num_audits"]):
    key_data, key_null = jax.random.split(jax.random.fold_in(key, i))
    baselines, mia, member = simulate_audit(key_data, setting["num_audit"], setting["signal"],
                                            setting["num_baselines"])
    observed = float(panoramia.panoramia_bounds(baselines, mia, member, beta).eps_tilde)
    null = panoramia.panoramia_null(key_null, baselines, member, beta,
                                    num_samples=config["null_samples"])
    eps.append(observed)
    p_values.append(panoramia.null_p_value(observed, null.eps_tilde))
  eps, p_values = np.asarray(eps), np.asarray(p_values)
  out = {"eps_tilde": eps.tolist(), "p_value": p_values.tolist(),
         "positive_rate": float(np.mean(eps > 0)), "eps_tilde_mean": float(eps.mean()),
         "eps_tilde_q90": float(np.quantile(eps, 0.9)), "eps_tilde_max": float(eps.max())}
  for name, threshold in (("rejection_rate", level), ("rejection_rate_2x", 2 * level)):
    count = int(np.sum(p_values <= threshold))
    interval = estimators.clopper_pearson(count, eps.size, 0.05)
    out[name] = count / eps.size
    out[name + "_ci95"] = [float(interval.lower), float(interval.upper)]
  return out


def check_cell(cell, num_audits: int) -> None:
  """A stored setting is whole: every audit's eps~ >= 0 and p in (0, 1], rates in [0, 1]."""
  import numpy as np
  eps, p = np.asarray(cell["eps_tilde"], float), np.asarray(cell["p_value"], float)
  if eps.shape != (num_audits,) or p.shape != (num_audits,):
    raise ValueError(f"expected {num_audits} audits, got {eps.shape} and {p.shape}")
  if not (np.all(eps >= 0) and np.all(np.isfinite(eps)) and np.all((p > 0) & (p <= 1))):
    raise ValueError("eps~ must be finite and >= 0 and p-values in (0, 1]")
  for name in ("rejection_rate", "rejection_rate_2x", "positive_rate"):
    if not 0.0 <= cell[name] <= 1.0:
      raise ValueError(f"{name}={cell[name]} is outside [0, 1]")


def line(setting: dict, cell: dict, level: float) -> str:
  """One printed line per setting."""
  low, high = cell["rejection_rate_ci95"]
  return (f"m={setting['num_audit']:<6d} signal={setting['signal']:<5g} "
          f"B={setting['num_baselines']:<3d} p<={level:g}: {cell['rejection_rate']:.3f} "
          f"[{low:.3f}, {high:.3f}]  p<={2 * level:g}: {cell['rejection_rate_2x']:.3f}  "
          f"eps~>0: {cell['positive_rate']:.2f}  eps~ mean {cell['eps_tilde_mean']:.3f}, "
          f"q90 {cell['eps_tilde_q90']:.3f}, max {cell['eps_tilde_max']:.3f}")


@common.cli
def main(argv):
  del argv
  config = config_from_flags()
  common.claim_output_dir(FLAGS.output_dir)
  common.start_float64_experiment()
  import jax

  store = results.CellStore(os.path.join(FLAGS.output_dir, "cells"), FLAGS.resume)
  key = common.make_key(FLAGS.seed)
  cells = []
  with common.Timer() as timer:
    for index, setting in enumerate(config["settings"]):
      signature = {**setting, **{k: config[k] for k in ("num_audits", "null_samples", "level",
                                                        "significance", "seed")},
                   "index": index}
      label = (f"m{setting['num_audit']}_s{setting['signal']:g}_"
               f"b{setting['num_baselines']}")
      cell, reused = store.get_or_compute(
          signature, lambda s=setting, i=index: study(jax.random.fold_in(key, i), s, config),
          label, validate=lambda c: check_cell(c, config["num_audits"]))
      print(line(setting, cell, config["level"]) + ("  [reused]" if reused else ""),
            file=sys.stderr, flush=True)
      cells.append({**setting, **cell})
  meaning = {
      "rejection_rate": "share of simulated non-leaking audits whose eps~ has a null p-value "
                        "<= level: the null reference's false-alarm rate (valid when near or "
                        "below level), with a two-sided 95% Clopper-Pearson interval",
      "positive_rate": "share of those audits with eps~ > 0 (what a reader without the null "
                       "would read as leakage)"}
  path = common.write_results(FLAGS.output_dir, "panoramia_null_calibration", config,
                              {"settings": cells, "meaning": meaning}, timer.seconds)
  worst = max(c["rejection_rate"] for c in cells)
  print(f"largest false-alarm rate at p<={config['level']:g}: {worst:.3f} "
        f"(over {len(cells)} settings)")
  print(f"wrote {path} in {timer.seconds:.0f} s")


if __name__ == "__main__":
  common.run(main)
