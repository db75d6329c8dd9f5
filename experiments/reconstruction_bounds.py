r"""Reconstruction-leakage bounds of DP-SGD: Figs. 1 and 2 of Stock et al., "Defending against
Reconstruction Attacks with Renyi Differential Privacy" (2022).

  python -m experiments.reconstruction_bounds --output_dir=out/reconstruction_bounds

A secret of :math:`b` bits has prior :math:`p_0 = 2^{-b}`. From the RDP curve :math:`d_\alpha`
of DP-SGD (:func:`dpaudit.accounting.dpsgd_rdp`) two upper bounds on the number of leaked bits
:math:`\log_2(p_1 / p_0)` are computed, both minimised over ``--orders``:

* ours, :math:`L_2(b) = \min(b, \min_\alpha d_\alpha\frac{\alpha-1}{\alpha\log 2} + \frac{b}
  {\alpha})` ("Length of the Secret", Sec. 3.1, i.e. Eq. (3) at :math:`p_0 = 2^{-b}`;
  :func:`dpaudit.estimators.reconstruction.leakage_bits`);
* the traditional one, :math:`\min_\alpha h(\alpha, p_0) / \log 2` with
  :math:`h(\alpha, p_0) = d_\alpha + \log(1/p_0)/(\alpha - 1)` (Eq. (2), "Comparison with
  traditional DP guarantees"; Mironov's RDP-to-DP epsilon at :math:`\delta = p_0`;
  :func:`dpaudit.estimators.reconstruction.traditional_reconstruction_bound`).

Fig. 1: both bounds and the total leakage :math:`y = b` against :math:`b` for each noise
multiplier in ``--sigmas``, in the setting of Sec. 4.3 (:math:`q = 2.81\times10^{-4}`, 186k
steps); the titles give :math:`\varepsilon` at ``--delta`` from the RDP accountant with the
conversion of Balle et al. (2020), as the paper (the PLD accountant's tighter epsilon is also
written to ``results.json``). Fig. 2: both bounds at ``--fig2_bits`` bits and
``--fig2_sigma`` against the number of steps (log grid).

Orders: by default a dense grid on [1.01, 256] (:func:`default_orders`) that contains every
integer order 2..64, where dp_accounting's RDP of the sampled Gaussian is exact (at fractional
orders it is a conservative upper bound; entries it cannot evaluate are ``+inf``, which the
minimum over orders skips). Writes ``results.json`` (non-finite numbers as null),
``fig1_bits.png`` and ``fig2_steps.png`` (unless ``--noplot``) to ``--output_dir`` and prints
a table.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any, Sequence

from absl import app
from absl import flags
import numpy as np

from experiments import common

FLAGS = flags.FLAGS


def define_flags() -> None:
  """Defines the flags; called only when run as a program, so that importing the helpers
  (as the tests do) cannot clash with another module's flag of the same name (--num_steps,
  --orders, --delta, ...) in one process."""
  flags.DEFINE_list("sigmas", ["0.3", "0.4", "0.5", "1.0"], "Noise multipliers of Fig. 1.")
  flags.DEFINE_float("sampling_rate", 2.81e-4, "Poisson sampling rate q (Sec. 4.3).")
  flags.DEFINE_integer("num_steps", 186_000, "DP-SGD steps of Fig. 1 (Sec. 4.3).")
  flags.DEFINE_float("delta", 3e-7, "delta of the epsilon in the plot titles.")
  flags.DEFINE_float("max_bits", 100.0, "Fig. 1: largest secret length b (bits).")
  flags.DEFINE_integer("num_bits", 101, "Fig. 1: points of the grid of b on [0, max_bits].")
  flags.DEFINE_float("fig2_bits", 40.0, "Fig. 2: secret length b (bits).")
  flags.DEFINE_float("fig2_sigma", 0.4, "Fig. 2: noise multiplier.")
  flags.DEFINE_integer("min_steps", 1000, "Fig. 2: fewest steps.")
  flags.DEFINE_integer("max_steps", 1_000_000, "Fig. 2: most steps.")
  flags.DEFINE_integer("num_step_points", 25, "Fig. 2: points of the log grid of steps.")
  flags.DEFINE_list("orders", None, "Renyi orders alpha > 1 (default: default_orders()).")
  flags.DEFINE_bool("pld", True, "Also record the PLD accountant's epsilon of each Fig. 1 sigma.")
  flags.DEFINE_string("output_dir", "out/reconstruction_bounds", "Where results.json and plots go.")
  flags.DEFINE_bool("plot", True, "Write fig1_bits.png and fig2_steps.png.")


# Secret lengths of the printed table; log2(1e16) = 53.15 is a 16-digit secret (credit card).
TABLE_BITS = (16.0, 40.0, math.log2(1e16))


def default_orders() -> np.ndarray:
  """Sorted, unique orders on [1.01, 256]: dense near 1 where the optimum of small secrets
  lies, every integer 2..64 (exact RDP of the sampled Gaussian), and a few large ones."""
  return np.unique(np.concatenate([np.linspace(1.01, 10.0, 400), np.linspace(10.1, 63.0, 200),
                                   np.arange(2, 65), [80, 96, 128, 256]]).astype(np.float64))


def rdp_curve(sigma: float, q: float, steps: int, orders,
              fractional_orders: str = "quadrature") -> np.ndarray:
  """Composed RDP curve of DP-SGD (:func:`dpaudit.accounting.dpsgd_rdp`: exact at every order by
  default, or dp-accounting's conservative series at fractional orders)."""
  from dpaudit import accounting
  with common.quiet_accountant():
    return np.asarray(accounting.dpsgd_rdp(sigma, q, steps, orders,
                                           fractional_orders=fractional_orders), np.float64)


def bounds_in_bits(rdp, orders, bits) -> dict[str, np.ndarray]:
  r"""Both bounds in bits for RDP curve(s) ``rdp`` (orders last) and secret length(s) ``bits``.

  ``leakage_bits``: :math:`L_2(b)` (Sec. 3.1, "Length of the Secret"); ``traditional_bits``:
  :math:`\min_\alpha h(\alpha, 2^{-b}) / \log 2` (Eq. (2)); each with its optimal order
  (1.0 for :math:`L_2`'s trivial term :math:`b`, NaN where the bound is infinite).
  """
  from dpaudit.estimators import reconstruction
  bits = np.asarray(bits, np.float64)
  ours = reconstruction.leakage_bits(rdp, orders, bits)
  trad = reconstruction.traditional_reconstruction_bound(rdp, orders, log_p0=-bits * math.log(2))
  return {"leakage_bits": np.asarray(ours.value, np.float64),
          "leakage_order": np.asarray(ours.order, np.float64),
          "traditional_bits": np.asarray(trad.value, np.float64) / math.log(2),
          "traditional_order": np.asarray(trad.order, np.float64)}


def bound_curves(sigma: float, q: float, steps: int, bits, orders) -> dict[str, np.ndarray]:
  """Fig. 1: both bounds (bits) against the secret length ``bits`` for one DP-SGD setting."""
  bits = np.asarray(bits, np.float64)
  return {"bits": bits, **bounds_in_bits(rdp_curve(sigma, q, steps, orders), orders, bits)}


def steps_curves(sigma: float, q: float, steps_grid, secret_bits: float, orders
                 ) -> dict[str, np.ndarray]:
  """Fig. 2: both bounds (bits) at a fixed secret length against the number of steps."""
  steps_grid = np.asarray(steps_grid, np.int64)
  rdp = np.stack([rdp_curve(sigma, q, int(t), orders) for t in steps_grid])
  return {"num_steps": steps_grid, **bounds_in_bits(rdp, orders, secret_bits)}


def epsilon(sigma: float, q: float, steps: int, delta: float, accountant: str = "rdp") -> float:
  """epsilon of DP-SGD at delta (RDP: Balle et al. 2020 conversion, dp_accounting's orders)."""
  from dpaudit import accounting
  with common.quiet_accountant():
    return accounting.dpsgd_epsilon(sigma, q, steps, delta, accountant=accountant)


def steps_grid(min_steps: int, max_steps: int, num: int) -> np.ndarray:
  """Whole step counts on a log grid from ``min_steps`` to ``max_steps`` (duplicates dropped)."""
  return np.unique(np.round(np.geomspace(min_steps, max_steps, num)).astype(np.int64))


def property_violations(bits, leakage, traditional, tol: float = 1e-9) -> list[str]:
  r"""Checks the properties of :math:`L_2` on an increasing grid of ``bits`` (App. A.2 and
  Sec. 3.1): :math:`L_2 \le` traditional, :math:`L_2 \le b`, :math:`L_2` non-decreasing and
  concave, :math:`b - L_2(b)` non-decreasing. Returns the names of those that fail."""
  b, l2, h = (np.asarray(x, np.float64) for x in (bits, leakage, traditional))
  atol = tol * max(1.0, float(np.max(b)))
  slopes = np.diff(l2) / np.diff(b)
  checks = {
      "leakage <= traditional": np.all(l2 <= h + atol),
      "leakage <= b": np.all(l2 <= b + atol),
      "leakage non-decreasing": np.all(np.diff(l2) >= -atol),
      "leakage concave": np.all(np.diff(slopes) <= tol * max(1.0, float(np.max(np.abs(slopes))))),
      "b - leakage non-decreasing": np.all(np.diff(b - l2) >= -atol),
  }
  return [name for name, ok in checks.items() if not ok]


def _check(name: str, value: Any, ok: bool, valid: str) -> None:
  if not ok:
    raise ValueError(f"--{name}={value} is outside the valid range {valid}")


def config_from_flags() -> dict[str, Any]:
  """Validated run configuration (ValueError naming the flag on bad input)."""
  sigmas = common.parse_floats("sigmas", FLAGS.sigmas)
  if not sigmas:
    raise ValueError("--sigmas is empty; need at least one noise multiplier")
  for s in sigmas:
    _check("sigmas", ",".join(FLAGS.sigmas), math.isfinite(s) and s > 0, "(0, inf) for each")
  finite = math.isfinite
  _check("sampling_rate", FLAGS.sampling_rate, 0 < FLAGS.sampling_rate <= 1, "(0, 1]")
  _check("num_steps", FLAGS.num_steps, FLAGS.num_steps >= 1, "[1, inf)")
  _check("delta", FLAGS.delta, 0 < FLAGS.delta < 1, "(0, 1)")
  _check("max_bits", FLAGS.max_bits, finite(FLAGS.max_bits) and FLAGS.max_bits > 0, "(0, inf)")
  _check("num_bits", FLAGS.num_bits, FLAGS.num_bits >= 2, "[2, inf)")
  _check("fig2_bits", FLAGS.fig2_bits, finite(FLAGS.fig2_bits) and FLAGS.fig2_bits >= 0,
         "[0, inf)")
  _check("fig2_sigma", FLAGS.fig2_sigma, finite(FLAGS.fig2_sigma) and FLAGS.fig2_sigma > 0,
         "(0, inf)")
  _check("min_steps", FLAGS.min_steps, FLAGS.min_steps >= 1, "[1, inf)")
  _check("max_steps", FLAGS.max_steps, FLAGS.max_steps >= FLAGS.min_steps,
         f"[min_steps={FLAGS.min_steps}, inf)")
  _check("num_step_points", FLAGS.num_step_points, FLAGS.num_step_points >= 1, "[1, inf)")
  if FLAGS.orders:
    orders = common.parse_floats("orders", FLAGS.orders)
    for a in orders:
      _check("orders", ",".join(FLAGS.orders), math.isfinite(a) and a > 1,
             "(1, inf) for each")
    orders = np.unique(np.asarray(orders, np.float64))
  else:
    orders = default_orders()
  return {"sigmas": list(sigmas), "sampling_rate": FLAGS.sampling_rate,
          "num_steps": FLAGS.num_steps, "delta": FLAGS.delta, "max_bits": FLAGS.max_bits,
          "num_bits": FLAGS.num_bits, "fig2_bits": FLAGS.fig2_bits,
          "fig2_sigma": FLAGS.fig2_sigma, "min_steps": FLAGS.min_steps,
          "max_steps": FLAGS.max_steps, "num_step_points": FLAGS.num_step_points,
          "pld": FLAGS.pld, "orders": orders.tolist()}


def compute(config: dict[str, Any]) -> dict[str, Any]:
  """All numbers of Figs. 1 and 2 (NumPy arrays; see the module docstring)."""
  orders = np.asarray(config["orders"], np.float64)
  q, steps, delta = config["sampling_rate"], config["num_steps"], config["delta"]
  bits = np.linspace(0.0, config["max_bits"], config["num_bits"])
  fig1 = []
  for sigma in config["sigmas"]:
    rdp = rdp_curve(sigma, q, steps, orders)
    row = {"sigma": sigma, "epsilon_rdp": epsilon(sigma, q, steps, delta, "rdp"),
           "epsilon_pld": epsilon(sigma, q, steps, delta, "pld") if config["pld"] else None,
           "bits": bits, **bounds_in_bits(rdp, orders, bits)}
    row["at_bits"] = {"bits": np.asarray(TABLE_BITS),
                      **bounds_in_bits(rdp, orders, np.asarray(TABLE_BITS))}
    # The same bounds from dp-accounting's series at fractional orders (the values before the
    # exact quadrature): how much the exact RDP tightens them.
    series = rdp_curve(sigma, q, steps, orders, "dp_accounting")
    row["at_bits_dp_accounting_series"] = bounds_in_bits(series, orders, np.asarray(TABLE_BITS))
    row["property_violations"] = property_violations(bits, row["leakage_bits"],
                                                     row["traditional_bits"])
    fig1.append(row)
  grid = steps_grid(config["min_steps"], config["max_steps"], config["num_step_points"])
  fig2 = {"sigma": config["fig2_sigma"], "secret_bits": config["fig2_bits"],
          **steps_curves(config["fig2_sigma"], q, grid, config["fig2_bits"], orders),
          "epsilon_rdp": np.asarray([epsilon(config["fig2_sigma"], q, int(t), delta, "rdp")
                                     for t in grid])}
  return {"fig1": fig1, "fig2": fig2,
          "properties_hold": not any(row["property_violations"] for row in fig1)}


def plot(result: dict[str, Any], config: dict[str, Any], output_dir: str) -> None:
  """fig1_bits.png (one panel per sigma) and fig2_steps.png, as Figs. 1 and 2 of the paper."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig1 = result["fig1"]
  top = 1.2 * config["max_bits"]
  fig, axes = plt.subplots(1, len(fig1), figsize=(4.2 * len(fig1), 3.8), squeeze=False)
  for ax, row in zip(axes[0], fig1):
    b = row["bits"]
    ax.plot(b, row["traditional_bits"], "C1--", label="min_a h(a, p0) (traditional)")
    ax.plot(b, row["leakage_bits"], "C0-", lw=2, label="L(p0) (ours)")
    ax.plot(b, b, "k:", label="y = b (total leakage)")
    ax.set(xlabel="secret length b (bits)", ylim=(0, top),
           title=f"sigma={row['sigma']:g}, eps={row['epsilon_rdp']:.3g} "
                 f"(delta={config['delta']:g})")
    ax.grid(True, alpha=0.3)
  axes[0][0].set_ylabel("leakage (bits)")
  axes[0][0].legend(fontsize=7, loc="lower right")
  fig.suptitle(f"DP-SGD, q={config['sampling_rate']:g}, {config['num_steps']:,} steps")
  fig.tight_layout()
  fig.savefig(os.path.join(output_dir, "fig1_bits.png"), dpi=120)
  plt.close(fig)

  f2 = result["fig2"]
  fig, ax = plt.subplots(figsize=(5.5, 4))
  ax.plot(f2["num_steps"], f2["traditional_bits"], "C1o--", ms=3,
          label="min_a h(a, p0) (traditional)")
  ax.plot(f2["num_steps"], f2["leakage_bits"], "C0o-", ms=3, lw=2, label="L(p0) (ours)")
  ax.axhline(f2["secret_bits"], color="k", ls=":", label=f"y = b = {f2['secret_bits']:g}")
  ax.set(xscale="log", xlabel="number of steps", ylabel="leakage (bits)",
         ylim=(0, 1.5 * max(f2["secret_bits"], 1.0)),
         title=f"b={f2['secret_bits']:g} bits, sigma={f2['sigma']:g}, "
               f"q={config['sampling_rate']:g}")
  ax.grid(True, which="both", alpha=0.3)
  ax.legend(fontsize=8, loc="upper left")
  fig.tight_layout()
  fig.savefig(os.path.join(output_dir, "fig2_steps.png"), dpi=120)
  plt.close(fig)


def table(result: dict[str, Any]) -> str:
  """Per sigma: epsilon and both bounds at TABLE_BITS; Fig. 2 at a few step counts."""
  fmt = lambda x: "None" if x is None else f"{x:.3f}"
  head = " ".join(f"{'L2/trad@' + format(b, '.4g'):>17}" for b in TABLE_BITS)
  lines = [f"{'sigma':>6} {'eps_rdp':>9} {'eps_pld':>9} {head}"]
  for row in result["fig1"]:
    at = row["at_bits"]
    cells = " ".join(f"{at['leakage_bits'][i]:8.2f}/{at['traditional_bits'][i]:<8.2f}"
                     for i in range(len(TABLE_BITS)))
    lines.append(f"{row['sigma']:6g} {fmt(row['epsilon_rdp']):>9} "
                 f"{fmt(row['epsilon_pld']):>9} {cells}")
  f2 = result["fig2"]
  lines.append("exact fractional orders vs dp-accounting's series (L2 bits at "
               + "/".join(format(b, ".4g") for b in TABLE_BITS) + "): "
               + "; ".join(f"sigma={r['sigma']:g}: " + "/".join(
                   f"{r['at_bits_dp_accounting_series']['leakage_bits'][i]:.3f}->"
                   f"{r['at_bits']['leakage_bits'][i]:.3f}" for i in range(len(TABLE_BITS)))
                   for r in result["fig1"]))
  lines.append(f"Fig. 2: b={f2['secret_bits']:g} bits, sigma={f2['sigma']:g} "
               "(bits leaked; RDP eps)")
  lines.append(f"{'steps':>9} {'eps_rdp':>9} {'L2':>8} {'trad':>8}")
  n = len(f2["num_steps"])
  for i in sorted(set(np.linspace(0, n - 1, min(n, 7)).round().astype(int))):
    lines.append(f"{f2['num_steps'][i]:9d} {f2['epsilon_rdp'][i]:9.3f} "
                 f"{f2['leakage_bits'][i]:8.2f} {f2['traditional_bits'][i]:8.2f}")
  bad = [f"sigma={r['sigma']:g}: {', '.join(r['property_violations'])}"
         for r in result["fig1"] if r["property_violations"]]
  lines.append("properties of L2 (App. A.2): " + ("hold" if not bad else "FAIL " + "; ".join(bad)))
  return "\n".join(lines)


@common.cli
def main(argv: Sequence[str]) -> None:
  del argv
  common.enable_compilation_cache()
  common.enable_x64()
  common.quiet_logging()
  from dpaudit.audits.noisy_argmax import to_plain

  config = config_from_flags()
  with common.Timer() as timer:
    result = compute(config)
  path = common.write_results(FLAGS.output_dir, "reconstruction_bounds", config,
                              to_plain(result), timer.seconds)
  if FLAGS.plot:
    plot(result, config, FLAGS.output_dir)
  print(table(result))
  print(f"wrote {path} in {timer.seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
  define_flags()
  app.run(main)
