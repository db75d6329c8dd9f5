r"""Coverage of the bootstrap 2-cut and k-cut bounds (App. C of Chadha et al.) with known truth.

  python -m experiments.bootstrap_coverage --output_dir=out/bootstrap_coverage

Repeats the audit of noisy argmax many times on outcome counts drawn from the exact class
probabilities (so the divergence being bounded is known exactly) and counts how often each
bootstrap bound exceeds it, overall and split by the trust rule of
:class:`dpaudit.estimators.BootstrapBound` (enough trials, plug-in divergence several bootstrap
deviations from 0, no empty cell under Q). Settings: the Fig. 6 pair at sigma = 2, 6 and 12,
and a pair at D = 0, each at several numbers of trials per histogram. For the 2-cut the set O
is the classes where P > Q (fixed, so the truth is the 2-cut divergence of that set). The
``by_signal`` table gives the violation rate among the bounds whose plug-in is at least c
bootstrap deviations from 0, for several c. Writes ``results.json`` and prints one line per
setting.
"""

from __future__ import annotations

import sys

from absl import flags

from experiments import common

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_audits", 1000, "Repeated audits per setting (>= 1).")
flags.DEFINE_integer("num_bootstrap", 500, "Bootstrap resamples per audit (>= 1).")
flags.DEFINE_list("num_trials", ["1000", "10000", "100000", "1000000"],
                  "Trials per histogram, whole numbers >= 1 (1e6 allowed).")
flags.DEFINE_list("orders", ["1.5", "2", "4", "8", "16", "32"], "Renyi orders alpha > 1.")
flags.DEFINE_float("significance", 0.05, "beta of each bound, in (0, 1).")
flags.DEFINE_integer("seed", 0, "PRNG seed.")
flags.DEFINE_string("output_dir", "out/bootstrap_coverage", "Where results.json goes.")

SIGNALS = (0.0, 2.0, 4.0, 6.0, 8.0)
PAIRS = {
    "fig6_sigma2": ((14.0, 12.0, 10.0, 8.0, 6.0), (13.0, 13.0, 10.0, 8.0, 6.0), 2.0),
    "fig6_sigma6": ((14.0, 12.0, 10.0, 8.0, 6.0), (13.0, 13.0, 10.0, 8.0, 6.0), 6.0),
    "fig6_sigma12": ((14.0, 12.0, 10.0, 8.0, 6.0), (13.0, 13.0, 10.0, 8.0, 6.0), 12.0),
    "zero_divergence": ((14.0, 12.0, 10.0, 8.0, 6.0), (14.0, 12.0, 10.0, 8.0, 6.0), 2.0),
}


def _rates(violated, plug_in, spread):
  """Violation rate among the bounds whose plug-in is at least c deviations from 0."""
  import numpy as np
  rows = []
  for signal in SIGNALS:
    kept = plug_in >= signal * spread
    count = int(np.sum(kept))
    rate = float(np.sum(violated & kept) / count) if count else None
    rows.append({"signal": signal, "kept": count, "violation_rate": rate})
  return rows


def study(key, probs_p, probs_q, num_trials: int, orders, config) -> dict:
  """Both bootstraps on ``num_audits`` independent count vectors of one setting."""
  import jax
  import jax.numpy as jnp
  import numpy as np

  from dpaudit import estimators

  key_p, key_q, key_k, key_two = jax.random.split(key, 4)
  shape = (config["num_audits"],)
  counts_p = jax.random.multinomial(key_p, num_trials, probs_p, shape=shape + probs_p.shape)
  counts_q = jax.random.multinomial(key_q, num_trials, probs_q, shape=shape + probs_q.shape)
  beta, boots = config["significance"], config["num_bootstrap"]
  out = {}
  truth_k = np.asarray(estimators.renyi_divergence(probs_p, probs_q, orders))
  k_cut = estimators.renyi_k_cut_bootstrap(key_k, counts_p, counts_q, orders, beta, boots)
  in_set = (probs_p > probs_q).astype(probs_p.dtype)
  if not np.any(np.asarray(in_set)):
    in_set = jnp.zeros_like(in_set).at[0].set(1.0)
  truth_two = np.asarray(estimators.binary_renyi_divergence(in_set @ probs_p, in_set @ probs_q,
                                                            orders))
  two_cut = estimators.renyi_two_cut_bootstrap(key_two, counts_p @ in_set, num_trials,
                                               counts_q @ in_set, num_trials, orders, beta, boots)
  for name, result, truth in (("k_cut", k_cut, truth_k), ("two_cut", two_cut, truth_two)):
    lower = np.asarray(result.lower_bound)
    violated = lower > truth[None, :] * (1.0 + 1e-9) + 1e-12
    plug_in, spread = np.asarray(result.plug_in), np.asarray(result.spread)
    trusted = np.asarray(result.trusted)
    out[name] = {
        "truth": truth,
        "violation_rate": float(np.mean(violated)),
        "violation_rate_per_order": np.mean(violated, axis=0),
        "trusted_fraction": float(np.mean(trusted)),
        "violation_rate_trusted": (float(np.sum(violated & trusted) / np.sum(trusted))
                                   if np.any(trusted) else None),
        "violation_rate_untrusted": (float(np.sum(violated & ~trusted) / np.sum(~trusted))
                                     if np.any(~trusted) else None),
        "by_signal": _rates(violated, plug_in, spread),
    }
  return out


def parse_trials(values) -> tuple[int, ...]:
  """--num_trials as whole numbers (``1e6`` allowed), each in [1, MAX_COUNT]."""
  trials = []
  for value in values:
    try:
      number = float(value)
    except ValueError:
      raise ValueError(f"--num_trials={','.join(values)} must be a comma-separated list of "
                       "whole numbers") from None
    if not number.is_integer():
      raise ValueError(f"--num_trials contains {value}, which is not a whole number")
    trials.append(int(number))
  return common.check_counts("num_trials", trials)


def config_from_flags() -> dict:
  """The validated run configuration (ValueError naming the flag and its valid range)."""
  orders = common.check_floats("orders", common.parse_floats("orders", FLAGS.orders), 1.0,
                               low_open=True)
  trials = parse_trials(FLAGS.num_trials)
  common.check_significance(FLAGS.significance)
  common.check_seed(FLAGS.seed)
  classes = len(next(iter(PAIRS.values()))[0])
  # Per audit the bootstrap keeps num_bootstrap resampled count vectors and divergences.
  common.check_memory("num_bootstrap", FLAGS.num_bootstrap, 8.0 * (classes + len(orders)),
                      what="the resamples of one audit")
  common.check_memory("num_audits", FLAGS.num_audits,
                      8.0 * FLAGS.num_bootstrap * (classes + len(orders)),
                      what=f"{FLAGS.num_bootstrap} bootstrap resamples per audit")
  return {"num_audits": FLAGS.num_audits, "num_bootstrap": FLAGS.num_bootstrap,
          "num_trials": list(trials), "orders": list(orders),
          "significance": FLAGS.significance, "seed": FLAGS.seed}


@common.cli
def main(argv):
  del argv
  config = config_from_flags()
  common.claim_output_dir(FLAGS.output_dir)
  common.enable_compilation_cache()
  common.enable_x64()
  import jax
  import jax.numpy as jnp

  from dpaudit import accounting
  from dpaudit.results import to_plain

  orders = jnp.asarray(config["orders"])
  trials = config["num_trials"]
  key = jax.random.key(FLAGS.seed)
  settings = []
  with common.Timer() as timer:
    for pair_index, (pair, (hist, neigh, sigma)) in enumerate(PAIRS.items()):
      probs_p = accounting.noisy_argmax_class_probabilities(jnp.asarray(hist), sigma)
      probs_q = accounting.noisy_argmax_class_probabilities(jnp.asarray(neigh), sigma)
      for trial_index, n in enumerate(trials):
        sub = jax.random.fold_in(key, 1000 * pair_index + trial_index)
        result = study(sub, probs_p, probs_q, n, orders, config)
        settings.append({"pair": pair, "sigma": sigma, "num_trials": n, **result})
        for cut in ("k_cut", "two_cut"):
          r = result[cut]
          untrusted = r["violation_rate_untrusted"]
          trusted_rate = r["violation_rate_trusted"]
          print(f"{pair:16s} n={n:>7d} {cut:8s} violations {r['violation_rate']:.3f}  "
                f"trusted {r['trusted_fraction']:.2f} -> "
                f"{'-' if trusted_rate is None else f'{trusted_rate:.3f}'}  untrusted -> "
                f"{'-' if untrusted is None else f'{untrusted:.3f}'}", file=sys.stderr)
  path = common.write_results(FLAGS.output_dir, "bootstrap_coverage", config,
                              to_plain({"settings": settings}), timer.seconds)
  print(f"wrote {path} in {timer.seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
  common.run(main)
