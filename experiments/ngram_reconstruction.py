r"""Leakage of a canary from DP-SGD-trained n-gram models vs the RDP bound: Sec. 4.1 and Fig. 4
of Stock et al., "Defending against Reconstruction Attacks with Renyi Differential Privacy".

  python -m experiments.ngram_reconstruction --output_dir=out/ngram_reconstruction

For each noise multiplier, ``--num_models`` lazy n-gram models (10 x T logits) are trained on
one random canary of T digits with DP-SGD (sampling rate 1, clip 1, learning rate
0.5/sigma, ``--num_steps`` steps) as one vmapped program; the empirical leakage
log(p1/p0) of Eq. (4) is set against L(p0) (Eq. 3) and the traditional bound (Eq. 2) from the
dp-accounting RDP curve. Writes ``results.json`` and ``fig4.png`` and prints a table. Each
noise level is saved in ``--output_dir/cells`` when it finishes and reused by a rerun of the
same configuration (``--noresume`` recomputes).
"""

from __future__ import annotations

import dataclasses
import os

from absl import flags

from dpaudit import results
from experiments import common

FLAGS = flags.FLAGS
flags.DEFINE_list("noise_multipliers", ["0.5", "0.75", "1", "1.5", "2", "2.875", "4", "6", "10"],
                  "Noise multipliers sigma > 0 (the paper: [0.5, 10]).")
flags.DEFINE_integer("num_models", 10_000, "Models N trained per noise multiplier.")
flags.DEFINE_integer("num_steps", 100, "DP-SGD steps per model.")
flags.DEFINE_integer("canary_length", 10, "Canary length T.")
flags.DEFINE_integer("vocab_size", 10, "Alphabet size D.")
flags.DEFINE_float("l2_clip_norm", 1.0, "Clipping norm C.")
flags.DEFINE_float("learning_rate_scale", 0.5, "Learning rate is this / sigma.")
flags.DEFINE_integer("chunk_size", 0, "Models per vmapped call (0: all); bounds memory.")
flags.DEFINE_float("min_effective_sample_size", 100.0,
                   "Estimates with a smaller effective sample size are flagged unreliable.")
flags.DEFINE_integer("seed", 0, "PRNG seed (canary and models).")
flags.DEFINE_enum("prng_impl", "threefry_unrolled", list(common.PRNG_IMPLS), "PRNG.")
flags.DEFINE_string("output_dir", "out/ngram_reconstruction", "Where results go.")
flags.DEFINE_bool("resume", True, "Reuse finished noise levels in output_dir/cells.")
flags.DEFINE_bool("plot", True, "Write fig4.png.")


def check_sizes() -> None:
  """The sizes against MAX_COUNT and the machine's memory (the config checks the rest)."""
  common.check_seed(FLAGS.seed)
  common.check_count("num_steps", FLAGS.num_steps)
  common.check_count("num_models", FLAGS.num_models)
  common.check_count("chunk_size", FLAGS.chunk_size, 0)
  # A lazy n-gram model: T x D float32 logits, their gradient and update, per model at once.
  common.check_memory("canary_length", FLAGS.canary_length, 12.0, what="one model")
  common.check_memory("vocab_size", FLAGS.vocab_size, 12.0 * FLAGS.canary_length,
                      what="one model")
  model_bytes = 12.0 * FLAGS.canary_length * FLAGS.vocab_size
  name = "chunk_size" if FLAGS.chunk_size else "num_models"
  common.check_memory(name, FLAGS[name].value, model_bytes,
                      what="the models trained at once")


def config_from_flags():
  from dpaudit.audits import reconstruction
  check_sizes()
  return reconstruction.NgramCanaryConfig(
      noise_multipliers=common.parse_floats("noise_multipliers", FLAGS.noise_multipliers),
      num_models=FLAGS.num_models, num_steps=FLAGS.num_steps,
      canary_length=FLAGS.canary_length, vocab_size=FLAGS.vocab_size,
      l2_clip_norm=FLAGS.l2_clip_norm, learning_rate_scale=FLAGS.learning_rate_scale,
      chunk_size=FLAGS.chunk_size, min_effective_sample_size=FLAGS.min_effective_sample_size)


def run_result(config):
  """Every noise level through ``reconstruction.run``, reusing the cells in output_dir/cells
  (named by the seed and PRNG, as before the game contract, so earlier cells resume)."""
  from dpaudit.audits import reconstruction
  key = common.make_key(FLAGS.seed, FLAGS.prng_impl)
  store = results.CellStore(os.path.join(FLAGS.output_dir, "cells"), FLAGS.resume)
  return reconstruction.run(key, config, progress=results.print_progress, store=store,
                            key_config={"seed": FLAGS.seed, "prng_impl": FLAGS.prng_impl})


def table(points, log_p0: float) -> str:
  lines = [f"log(1/p0) = {-log_p0:.2f} nats",
           f"{'sigma':>6} {'leakage':>8} {'+-se':>6} {'L(p0)':>7} {'trad':>7} {'mean logf':>9} "
           f"{'std':>6} {'ESS':>7}"]
  for p in points:
    flag = "" if p["reliable"] else "  (unreliable: low ESS)"
    lines.append(f"{p['noise_multiplier']:>6g} {p['leakage']:>8.2f} {p['log_p1_se']:>6.2f} "
                 f"{p['leakage_bound']:>7.2f} {p['traditional_bound']:>7.2f} "
                 f"{p['mean_log_f']:>9.2f} {p['std_log_f']:>6.2f} "
                 f"{p['effective_sample_size']:>7.0f}{flag}")
  return "\n".join(lines)


def plot(points, log_p0: float, num_steps: int, path: str) -> None:
  """Fig. 4: empirical leakage (error bars: 2 standard errors; hollow: unreliable) against
  L(p0), the traditional bound and total leakage log(1/p0); right: log f concentration."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  import numpy as np
  sig = np.array([p["noise_multiplier"] for p in points])
  get = lambda k: np.array([np.nan if p[k] is None else p[k] for p in points], float)
  ok = np.array([p["reliable"] for p in points])
  fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
  ax.plot(sig, get("leakage_bound"), "-", color="C0", label="our bound $L(p_0)$ (Eq. 3)")
  ax.plot(sig, get("traditional_bound"), "--", color="C1",
          label=r"traditional $\min_\alpha h(\alpha, p_0)$")
  ax.axhline(-log_p0, color="gray", ls=":", label=r"total leakage $\log(1/p_0)$")
  leak, se = get("leakage"), get("log_p1_se")
  ax.errorbar(sig[ok], leak[ok], yerr=2 * se[ok], fmt="o", color="C3",
              label=r"empirical $\log(p_1/p_0)$ (Eq. 4)")
  if (~ok).any():
    ax.plot(sig[~ok], leak[~ok], "o", mfc="none", color="C3", label="empirical, low ESS")
  ax.set_xscale("log")
  ax.set_ylim(0, 1.3 * -log_p0)
  ax.set_xlabel(r"noise multiplier $\sigma$")
  ax.set_ylabel("leakage (nats)")
  ax.set_title(f"n-gram canary, {num_steps} steps")
  ax.legend(fontsize=8)
  ax2.errorbar(sig, get("mean_log_f"), yerr=get("std_log_f"), fmt="s", color="C2",
               label=r"mean $\pm$ sd of $\log f_\theta(c)$")
  ax2.plot(sig, get("log_p1"), "o", color="C3", label=r"$\log p_1$")
  ax2.axhline(log_p0, color="gray", ls=":", label=r"$\log p_0$")
  ax2.set_xscale("log")
  ax2.set_xlabel(r"noise multiplier $\sigma$")
  ax2.set_ylabel("nats")
  ax2.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


@common.cli
def main(argv):
  del argv
  common.start_float64_experiment()
  common.initialize_distributed()  # several processes: the models spread over them all
  config = config_from_flags()  # (after joining: validation may start the XLA backend)
  common.claim_output_dir(FLAGS.output_dir)
  with common.Timer() as timer, common.quiet_accountant():
    result = run_result(config).to_dict()
  if not common.is_main_process():
    return  # every process has the same points; process 0 writes them
  points = result["points"]
  flat = dataclasses.asdict(config)
  flat.update(seed=FLAGS.seed, prng_impl=FLAGS.prng_impl)
  path = common.write_results(FLAGS.output_dir, "ngram_reconstruction", flat, result,
                              timer.seconds)
  if FLAGS.plot:
    plot(points, config.log_p0, config.num_steps, os.path.join(FLAGS.output_dir, "fig4.png"))
  print(table(points, config.log_p0))
  print(f"wrote {path}")


if __name__ == "__main__":
  common.run(main)
