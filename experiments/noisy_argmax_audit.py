r"""Renyi-DP audit of noisy argmax: Figs. 2 and 6 of Chadha et al., "Auditing Private Prediction".

  python -m experiments.noisy_argmax_audit --output_dir=out/noisy_argmax

Default: the pair of Fig. 6, H = [14,12,10,8,6] vs H' = [13,13,10,8,6], sigma = 2. Writes
``results.json`` and ``rdp_vs_order.png`` to ``--output_dir`` and prints a table. Monte Carlo
progress goes to stderr; rerunning the same command after an interruption resumes from the
checkpoints in ``--output_dir/checkpoints`` (``--noresume`` starts afresh).
"""

from __future__ import annotations

import os
import shutil
import sys

from absl import flags

from experiments import common

FLAGS = flags.FLAGS
flags.DEFINE_list("histogram", ["14", "12", "10", "8", "6"], "Vote histogram H.")
flags.DEFINE_list("neighbor", ["13", "13", "10", "8", "6"], "Neighbouring histogram H'.")
flags.DEFINE_float("noise_multiplier", 2.0, "Standard deviation sigma of the Gaussian noise.")
common.deprecated_alias("sigma", "noise_multiplier")
flags.DEFINE_integer("num_trials", 20_000_000, "Monte Carlo runs per histogram.")
flags.DEFINE_list("orders", ["1.1", "1.25", "1.5", "1.75", "2", "2.5", "3", "4", "5", "6", "8",
                             "10", "12", "16", "20", "24", "32", "48", "64"],
                  "Renyi orders alpha > 1, increasing.")
flags.DEFINE_float("significance", 0.05, "beta of the 1 - beta confidence of each bound.")
flags.DEFINE_enum("k_cut_method", "sison-glaz", ["sison-glaz", "goodman"],
                  "Simultaneous multinomial intervals for the k-cut audit.")
flags.DEFINE_integer("num_bootstrap", 1000, "Bootstrap resamples.")
flags.DEFINE_integer("num_queries", 1, "n_Q queries composed for the (eps, delta) display.")
flags.DEFINE_float("delta", 1e-6, "delta for the (eps, delta) display (Thm. 1).")
flags.DEFINE_integer("seed", 0, "PRNG seed.")
flags.DEFINE_enum("prng_impl", "threefry_unrolled", list(common.PRNG_IMPLS),
                  "PRNG implementation (threefry_unrolled: JAX's Threefry, fusible lowering).")
flags.DEFINE_integer("chunk_size", 2**16, "Monte Carlo trials per vmapped chunk.")
flags.DEFINE_string("output_dir", "out/noisy_argmax_audit", "Where results.json and plots go.")
flags.DEFINE_bool("resume", True, "Resume Monte Carlo runs from checkpoints in output_dir.")
flags.DEFINE_bool("plot", True, "Write rdp_vs_order.png.")


def config_from_flags():
  """The validated config (ValueError naming the flag): the library checks every field; the
  sizes are also checked here against the machine's memory and MAX_COUNT."""
  from dpaudit.audits import noisy_argmax as audit
  common.check_seed(FLAGS.seed)
  common.check_float("noise_multiplier", FLAGS.noise_multiplier, 0.0, low_open=True)
  common.check_count("num_trials", FLAGS.num_trials, 4)
  classes = max(len(FLAGS.histogram), 2)
  orders = max(len(FLAGS.orders), 1)
  common.check_memory("num_bootstrap", FLAGS.num_bootstrap, 8.0 * (classes + orders),
                      what="the bootstrap resamples")
  common.check_memory("chunk_size", FLAGS.chunk_size, 8.0 * classes,
                      what="one chunk of trials")
  return audit.NoisyArgmaxAuditConfig(
      histogram=common.parse_floats("histogram", FLAGS.histogram),
      neighbor=common.parse_floats("neighbor", FLAGS.neighbor),
      sigma=FLAGS.noise_multiplier, num_trials=FLAGS.num_trials,
      orders=common.parse_floats("orders", FLAGS.orders), significance=FLAGS.significance,
      k_cut_method=FLAGS.k_cut_method, num_bootstrap=FLAGS.num_bootstrap,
      num_queries=FLAGS.num_queries, delta=FLAGS.delta, chunk_size=FLAGS.chunk_size)


def plot(result, path: str) -> None:
  """RDP vs order as in Figs. 2 and 6 (audits below the exact divergence, theory above), plus
  each audit as a fraction of the exact divergence, where the curves can be told apart."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  import numpy as np

  orders = result.orders
  c = result.config
  fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
  same_theory = np.allclose(result.forward.data_dependent, result.data_independent_rdp)
  audits = (("two_cut", "C1o-", "2-cut audit (Clopper-Pearson)"),
            ("k_cut", "C2s-", f"k-cut audit ({c.k_cut_method})"),
            ("two_cut_bootstrap", "C3^--", "2-cut bootstrap (asymptotic)"),
            ("k_cut_bootstrap", "C4v--", "k-cut bootstrap (asymptotic)"))
  for ax, direction, title in ((axes[0], result.forward, "D(M(H) || M(H'))"),
                               (axes[1], result.reverse, "D(M(H') || M(H))")):
    ax.plot(orders, result.data_independent_rdp, "k:", lw=2.5, label="data-independent (GNMax)")
    dd_label = ("data-dependent (Papernot et al. Thm. 6; here = data-independent)"
                if same_theory else "data-dependent (Papernot et al. Thm. 6)")
    ax.plot(orders, direction.data_dependent, "k--", label=dd_label)
    ax.plot(orders, direction.exact, "C0-", lw=3, label="exact (Eq. 4)")
    for name, style, label in audits:
      ax.plot(orders, getattr(direction, name), style, ms=4, label=label)
    ax.set(xscale="log", yscale="log", xlabel="Renyi order alpha", title=title)
    ax.grid(True, which="both", alpha=0.3)
  axes[0].set_ylabel("RDP epsilon_alpha per query")
  axes[0].legend(fontsize=7, loc="upper left")
  ax = axes[2]
  for name, style, label in audits:
    ax.plot(orders, getattr(result.forward, name) / result.forward.exact, style, ms=4,
            label=label)
  ax.axhline(1.0, color="C0", lw=3, label="exact")
  lowest = min(np.nanmin(getattr(result.forward, name) / result.forward.exact)
               for name, _, _ in audits)
  ax.set(xscale="log", xlabel="Renyi order alpha", ylabel="audit / exact (forward)",
         title="Tightness of the audits", ylim=(max(0.0, lowest - 0.05), 1.02))
  ax.grid(True, which="both", alpha=0.3)
  ax.legend(fontsize=7, loc="lower right")
  as_list = lambda values: "[" + ", ".join(f"{v:g}" for v in values) + "]"
  fig.suptitle(f"Noisy argmax RDP audit, H={as_list(c.histogram)} vs "
               f"H'={as_list(c.neighbor)}, sigma={c.sigma:g}\n"
               f"{c.num_trials:,} trials per histogram, {100 * (1 - c.significance):g}% "
               "confidence per order")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def table(result) -> str:
  from dpaudit.audits import noisy_argmax as audit
  f, c = result.forward, result.config
  lines = ["lower bounds: 2-cut (finite-sample), k-cut (asymptotic); *-bs: asymptotic "
           "bootstrap estimates (? = not trusted); theory: upper bounds",
           f"{'alpha':>6} {'exact':>9} {'2-cut':>9} {'k-cut':>9} {'2cut-bs':>10} {'kcut-bs':>10}"
           f" {'data-dep':>9} {'data-ind':>9} {'2cut/exact':>10}"]
  mark = lambda trusted: " " if trusted else "?"
  for i, a in enumerate(result.orders):
    ratio = f.two_cut[i] / f.exact[i] if f.exact[i] > 0 else float("nan")
    lines.append(f"{a:6.2f} {f.exact[i]:9.4f} {f.two_cut[i]:9.4f} {f.k_cut[i]:9.4f} "
                 f"{f.two_cut_bootstrap[i]:9.4f}{mark(f.two_cut_bootstrap_trusted[i])} "
                 f"{f.k_cut_bootstrap[i]:9.4f}{mark(f.k_cut_bootstrap_trusted[i])} "
                 f"{f.data_dependent[i]:9.4f} {result.data_independent_rdp[i]:9.4f} {ratio:10.3f}")
  queries = f"{c.num_queries} quer{'y' if c.num_queries == 1 else 'ies'}"
  show = audit.format_epsilon  # 0 reads "0 (no leakage measured)", never Thm. 1's floor
  lines.append(f"upper bounds on epsilon at delta={c.delta:g} after {queries} (Thm. 1): "
               + ", ".join(f"{k}={show(v)}" for k, v in result.epsilon.items()))
  lines.append(f"Thm. 1 images of the audit curves at delta={c.delta:g}, for comparison with the "
               "paper's figures; not (eps, delta) lower bounds: "
               + ", ".join(f"{k}={show(v)}" for k, v in result.audit_curves_through_thm1.items()))
  return "\n".join(lines)


@common.cli
def main(argv):
  del argv
  common.enable_compilation_cache()
  common.enable_x64()
  from dpaudit import results
  from dpaudit.audits import noisy_argmax as audit

  common.initialize_distributed()  # several processes: trials spread over all their devices
  config = config_from_flags()  # (after joining: validation may start the XLA backend)
  common.claim_output_dir(FLAGS.output_dir)
  key = common.make_key(FLAGS.seed, FLAGS.prng_impl)
  checkpoint_dir = os.path.join(FLAGS.output_dir, "checkpoints")
  if not FLAGS.resume and os.path.isdir(checkpoint_dir) and common.is_main_process():
    shutil.rmtree(checkpoint_dir)
  with common.Timer() as timer:
    result = audit.run(key, config, progress=results.print_progress,
                       checkpoint_dir=checkpoint_dir)
  if not common.is_main_process():
    return  # every process computed the same result; process 0 writes it
  result_dict = result.to_dict()
  run_config = {"seed": FLAGS.seed, "prng_impl": FLAGS.prng_impl, **result_dict.pop("config")}
  path = common.write_results(FLAGS.output_dir, "noisy_argmax_audit", run_config, result_dict,
                              timer.seconds)
  if FLAGS.plot:
    plot(result, os.path.join(FLAGS.output_dir, "rdp_vs_order.png"))
  print(table(result))
  for line in result.warnings:
    print(f"warning: {line}", file=sys.stderr)
  print(f"wrote {path} in {timer.seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
  common.run(main)
