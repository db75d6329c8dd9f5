r"""Reconstruction-leakage bounds of DP-SGD: Figs. 1 and 2 of Stock et al., "Defending against
Reconstruction Attacks with Renyi Differential Privacy" (2022).

  python -m experiments.reconstruction_bounds --output_dir=out/reconstruction_bounds

A secret of b bits has prior p0 = 2^-b. From the RDP curve of DP-SGD, two upper bounds on the
number of leaked bits log2(p1 / p0) are computed, both minimised over ``--orders``: theirs,
L_2(b) ("Length of the Secret", Sec. 3.1, i.e. Eq. (3) at p0 = 2^-b), and the traditional
min_alpha h(alpha, p0) / log 2 (Eq. (2)); see :mod:`dpaudit.audits.reconstruction_bounds`,
whose :func:`~dpaudit.audits.reconstruction_bounds.run` does the work.

Fig. 1: both bounds and the total leakage y = b against b for each noise multiplier in
``--noise_multipliers``, in the setting of Sec. 4.3 (q = 2.81e-4, 186k steps); the titles give
epsilon at ``--delta`` from the RDP accountant with the conversion of Balle et al. (2020), as the
paper (the PLD accountant's tighter epsilon is also written to ``results.json``). Fig. 2: both
bounds at ``--fig2_bits`` bits and ``--fig2_sigma`` against the number of steps (log grid).

Orders: by default a dense grid on [1.01, 256] that contains every integer order 2..64
(:func:`~dpaudit.audits.reconstruction_bounds.default_orders`). Writes ``results.json``
(non-finite numbers as strings), ``fig1_bits.png`` and ``fig2_steps.png`` (unless
``--noplot``) to ``--output_dir`` and prints a table.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import numpy as np
from absl import flags

from experiments import common

FLAGS = flags.FLAGS


def define_flags() -> None:
  """Defines the flags (defaults: ReconstructionBoundsConfig's); called only when run as a
  program, so that importing this module cannot clash with another module's flag of the same
  name (--num_steps, --orders, --delta, ...) in one process."""
  from dpaudit.audits.reconstruction_bounds import ReconstructionBoundsConfig as D
  flags.DEFINE_list("noise_multipliers", [str(s) for s in D.sigmas], "Noise multipliers of Fig. 1.")
  common.deprecated_alias("sigmas", "noise_multipliers")
  flags.DEFINE_float("sampling_rate", D.sampling_rate, "Poisson sampling rate q (Sec. 4.3).")
  flags.DEFINE_integer("num_steps", D.num_steps, "DP-SGD steps of Fig. 1 (Sec. 4.3).")
  flags.DEFINE_float("delta", D.delta, "delta of the epsilon in the plot titles.")
  flags.DEFINE_float("max_bits", D.max_bits, "Fig. 1: largest secret length b (bits).")
  flags.DEFINE_integer("num_bits", D.num_bits, "Fig. 1: points of the grid of b on [0, max_bits].")
  flags.DEFINE_float("fig2_bits", D.fig2_bits, "Fig. 2: secret length b (bits).")
  flags.DEFINE_float("fig2_sigma", D.fig2_sigma, "Fig. 2: noise multiplier.")
  flags.DEFINE_integer("min_steps", D.min_steps, "Fig. 2: fewest steps.")
  flags.DEFINE_integer("max_steps", D.max_steps, "Fig. 2: most steps.")
  flags.DEFINE_integer("num_step_points", D.num_step_points,
                       "Fig. 2: points of the log grid of steps.")
  flags.DEFINE_list("orders", None, "Renyi orders alpha > 1 (default: default_orders()).")
  flags.DEFINE_bool("pld", D.pld, "Also record the PLD accountant's epsilon of each Fig. 1 sigma.")
  flags.DEFINE_string("output_dir", "out/reconstruction_bounds", "Where results.json and plots go.")
  flags.DEFINE_bool("plot", True, "Write fig1_bits.png and fig2_steps.png.")


def config_from_flags():
  """The validated ReconstructionBoundsConfig (ValueError naming the flag on bad input)."""
  from dpaudit.audits import reconstruction_bounds as rb
  sigmas = common.parse_floats("noise_multipliers", FLAGS.noise_multipliers)
  orders = common.parse_floats("orders", FLAGS.orders) if FLAGS.orders else None
  try:
    return rb.ReconstructionBoundsConfig(
        sigmas=sigmas, sampling_rate=FLAGS.sampling_rate, num_steps=FLAGS.num_steps,
        delta=FLAGS.delta, max_bits=FLAGS.max_bits, num_bits=FLAGS.num_bits,
        fig2_bits=FLAGS.fig2_bits, fig2_sigma=FLAGS.fig2_sigma, min_steps=FLAGS.min_steps,
        max_steps=FLAGS.max_steps, num_step_points=FLAGS.num_step_points, pld=FLAGS.pld,
        orders=orders)
  except ValueError as e:  # its messages start with the field name, which is the flag's
    message = str(e)
    if message.startswith("sigmas"):  # the field behind --noise_multipliers
      message = "noise_multipliers" + message[len("sigmas"):]
    raise ValueError(f"--{message}") from None


def check_sizes() -> None:
  """Step counts in [1, MAX_COUNT]; the grids' points within the machine's memory (one float64
  per order and point, a few arrays of them)."""
  for name in ("num_steps", "min_steps", "max_steps"):
    common.check_count(name, FLAGS[name].value)
  orders = len(FLAGS.orders) if FLAGS.orders else 400
  for name, low in (("num_bits", 2), ("num_step_points", 1)):
    common.check_memory(name, FLAGS[name].value, 8.0 * 4 * orders, low=low,
                        what="the bounds at every order")


def plot(result, config, output_dir: str) -> None:
  """fig1_bits.png (one panel per sigma) and fig2_steps.png, as Figs. 1 and 2 of the paper."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig1 = result.fig1
  top = 1.2 * config.max_bits
  fig, axes = plt.subplots(1, len(fig1), figsize=(4.2 * len(fig1), 3.8), squeeze=False)
  for ax, row in zip(axes[0], fig1):
    b = row.bits
    ax.plot(b, row.bounds.traditional_bits, "C1--", label="min_a h(a, p0) (traditional)")
    ax.plot(b, row.bounds.leakage_bits, "C0-", lw=2, label="L(p0) (ours)")
    ax.plot(b, b, "k:", label="y = b (total leakage)")
    ax.set(xlabel="secret length b (bits)", ylim=(0, top),
           title=f"sigma={row.sigma:g}, eps={row.epsilon_rdp:.3g} (delta={config.delta:g})")
    ax.grid(True, alpha=0.3)
  axes[0][0].set_ylabel("leakage (bits)")
  axes[0][0].legend(fontsize=7, loc="lower right")
  fig.suptitle(f"DP-SGD, q={config.sampling_rate:g}, {config.num_steps:,} steps")
  fig.tight_layout()
  fig.savefig(os.path.join(output_dir, "fig1_bits.png"), dpi=120)
  plt.close(fig)

  f2 = result.fig2
  fig, ax = plt.subplots(figsize=(5.5, 4))
  ax.plot(f2.num_steps, f2.bounds.traditional_bits, "C1o--", ms=3,
          label="min_a h(a, p0) (traditional)")
  ax.plot(f2.num_steps, f2.bounds.leakage_bits, "C0o-", ms=3, lw=2, label="L(p0) (ours)")
  ax.axhline(f2.secret_bits, color="k", ls=":", label=f"y = b = {f2.secret_bits:g}")
  ax.set(xscale="log", xlabel="number of steps", ylabel="leakage (bits)",
         ylim=(0, 1.5 * max(f2.secret_bits, 1.0)),
         title=f"b={f2.secret_bits:g} bits, sigma={f2.sigma:g}, q={config.sampling_rate:g}")
  ax.grid(True, which="both", alpha=0.3)
  ax.legend(fontsize=8, loc="upper left")
  fig.tight_layout()
  fig.savefig(os.path.join(output_dir, "fig2_steps.png"), dpi=120)
  plt.close(fig)


def table(result) -> str:
  """Per sigma: epsilon and both bounds at TABLE_BITS; Fig. 2 at a few step counts."""
  from dpaudit.audits.reconstruction_bounds import TABLE_BITS
  fmt = lambda x: "None" if x is None else f"{x:.3f}"
  head = " ".join(f"{'L2/trad@' + format(b, '.4g'):>17}" for b in TABLE_BITS)
  lines = [f"{'sigma':>6} {'eps_rdp':>9} {'eps_pld':>9} {head}"]
  for row in result.fig1:
    at = row.at_bits
    cells = " ".join(f"{at.leakage_bits[i]:8.2f}/{at.traditional_bits[i]:<8.2f}"
                     for i in range(len(TABLE_BITS)))
    lines.append(f"{row.sigma:6g} {fmt(row.epsilon_rdp):>9} {fmt(row.epsilon_pld):>9} {cells}")
  lines.append("exact fractional orders vs dp-accounting's series (L2 bits at "
               + "/".join(format(b, ".4g") for b in TABLE_BITS) + "): "
               + "; ".join(f"sigma={r.sigma:g}: " + "/".join(
                   f"{r.at_bits_dp_accounting_series.leakage_bits[i]:.3f}->"
                   f"{r.at_bits.leakage_bits[i]:.3f}" for i in range(len(TABLE_BITS)))
                   for r in result.fig1))
  f2 = result.fig2
  lines.append(f"Fig. 2: b={f2.secret_bits:g} bits, sigma={f2.sigma:g} (bits leaked; RDP eps)")
  lines.append(f"{'steps':>9} {'eps_rdp':>9} {'L2':>8} {'trad':>8}")
  n = len(f2.num_steps)
  for i in sorted(set(np.linspace(0, n - 1, min(n, 7)).round().astype(int))):
    lines.append(f"{f2.num_steps[i]:9d} {f2.epsilon_rdp[i]:9.3f} "
                 f"{f2.bounds.leakage_bits[i]:8.2f} {f2.bounds.traditional_bits[i]:8.2f}")
  bad = [f"sigma={r.sigma:g}: {', '.join(r.property_violations)}"
         for r in result.fig1 if r.property_violations]
  lines.append("properties of L2 (App. A.2): " + ("hold" if not bad else "FAIL " + "; ".join(bad)))
  return "\n".join(lines)


@common.cli
def main(argv: Sequence[str]) -> None:
  del argv
  common.start_float64_experiment()
  from dpaudit import results
  from dpaudit.audits import reconstruction_bounds as rb

  check_sizes()
  config = config_from_flags()
  common.claim_output_dir(FLAGS.output_dir)
  with common.Timer() as timer:
    result = rb.run(None, config, progress=results.print_progress)  # no randomness: no key
  path = common.write_results(FLAGS.output_dir, "reconstruction_bounds", config.to_dict(),
                              result.to_dict(), timer.seconds)
  if FLAGS.plot:
    plot(result, config, FLAGS.output_dir)
  print(table(result))
  print(f"wrote {path} in {timer.seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
  define_flags()
  common.run(main)
