"""The estimators compiled as users get them, against scipy and numpy.

The suite compiles with ``XLA_FLAGS`` that make compiling cheaper (optimisation level 0, the
older loop emitters; see ``tests/conftest.py``). Users run XLA's defaults plus the estimators'
own options (``dpaudit.estimators._compile``), whose machine code for ``exp``, ``log`` and the
like may differ in the last bits. This test runs the hand-written numerics (the vectorised
logarithms, the incomplete beta function, binomial tails, Clopper-Pearson limits, in one batch
and in the CPU's grouped chunks) in a subprocess without those flags, at the tolerances of the
in-suite tests, and checks that both settings agree closely. The programs compiled with the loop
emitters (``_compile.jit(fusion_emitters=False)``, and Clopper-Pearson below 2^18 pairs) are
checked there against the same programs compiled with the fusion emitters, against scipy, or
(the error-count bound) against the suite's values.
"""

import os
import subprocess
import sys

import numpy as np
import scipy.special
import scipy.stats

from dpaudit.estimators import approx_dp, binomial
from tests.conftest import ROOT, TEST_XLA_FLAGS

_TEST_FLAG_NAMES = {f.split("=")[0] for f in TEST_XLA_FLAGS}

_SCRIPT = r"""
import os
import sys
import jax
import numpy as np
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_enable_compilation_cache", False)
from dpaudit.estimators import _compile, _elementary, binomial
data = np.load(sys.argv[1])
out = {"xla_flags": np.asarray(os.environ.get("XLA_FLAGS", ""))}
for name in ("pairs", "few"):
  k, n = data[name + "_k"], data[name + "_n"]
  lower, upper = binomial.clopper_pearson(k, n, 0.05)
  out[name + "_lower"], out[name + "_upper"] = np.asarray(lower), np.asarray(upper)

# Batches below 2^18 pairs take the loop emitters; the fusion emitters serve larger ones, which
# always go through the grouped chunks (as the 40,000 pairs do here).
k, n = data["pairs_k"], data["pairs_n"]
lower, upper = binomial._clopper_pearson.fusion(k, n, np.float64(0.05), alternative="two-sided")
out["pairs_fusion_lower"], out["pairs_fusion_upper"] = np.asarray(lower), np.asarray(upper)
k, n, p = data["tails_k"], data["tails_n"], data["tails_p"]
out["sf"] = np.asarray(binomial.binomial_sf(k, n, p))
out["cdf"] = np.asarray(binomial.binomial_cdf(k, n, p))
a, b, x = data["beta_a"], data["beta_b"], data["beta_x"]
tails = binomial.incomplete_beta_tails(a, b, x)
out["beta_lower"], out["beta_upper"] = np.asarray(tails.lower), np.asarray(tails.upper)
out["log"] = np.asarray(_compile.jit(_elementary.log)(data["log_x"]))
from dpaudit.estimators import approx_dp, one_run
counts = tuple(data["errors_" + name] for name in ("fp", "neg", "fn", "pos"))
out["error_counts"] = np.asarray(approx_dp.epsilon_from_error_counts(*counts, 1e-5, 0.05))
scores = (data["in_scores"], data["out_scores"], np.float64(1e-5), np.float64(0.05))
counts = tuple(data["one_run_" + name] for name in ("m", "r", "v", "delta", "significance"))
for name, program, args, static in (("bonferroni", approx_dp._bonferroni, scores, {}),
                                    ("one_run", one_run._epsilon_jit, counts,
                                     {"with_delta": True})):
  fusion = _compile.jit(program.__wrapped__, static_argnames=tuple(static))
  for emitters, fn in (("loop", program), ("fusion", fusion)):
    value = fn(*args, **static)
    out[name + "_" + emitters] = np.asarray(getattr(value, "epsilon", value))
np.savez(sys.argv[2], **out)
"""


def _inputs(rng):
  def pairs(size):
    n = np.maximum(np.round(np.exp(rng.uniform(0.0, np.log(1e9), size))), 1.0)
    return rng.integers(0, n.astype(np.int64) + 1).astype(float), n

  data = {}
  # 40,000 pairs are 80,000 limits: more than one chunk, so the grouped path; 2,000 are one.
  for name, size in (("pairs", 40_000), ("few", 2_000)):
    data[name + "_k"], data[name + "_n"] = pairs(size)
  k, n = pairs(70_000)  # more tails than one chunk
  near = np.clip((k + rng.normal(0, 2, k.size) * np.sqrt(k + 1)) / n, 1e-12, 1 - 1e-12)
  data["tails_k"], data["tails_n"] = k, n
  data["tails_p"] = np.where(rng.random(k.size) < 0.5, near, rng.random(k.size))
  data["beta_a"] = np.exp(rng.uniform(np.log(0.3), np.log(1e5), 2_000))
  data["beta_b"] = np.exp(rng.uniform(np.log(0.3), np.log(1e5), 2_000))
  data["beta_x"] = rng.uniform(0.0, 1.0, 2_000)
  data["log_x"] = np.concatenate([np.exp(rng.uniform(-707.0, 709.0, 50_000)),
                                  rng.uniform(0.3, 3.0, 20_000)])
  data["errors_neg"], data["errors_pos"] = (rng.integers(100, 100_000, 300) for _ in range(2))
  data["errors_fp"] = rng.binomial(data["errors_neg"], 0.05)
  data["errors_fn"] = rng.binomial(data["errors_pos"], 0.3)
  data["in_scores"], data["out_scores"] = rng.normal(0.5, 1.0, 3_000), rng.normal(0, 1.0, 3_000)
  r = np.round(np.exp(rng.uniform(np.log(10.0), np.log(1e5), 200)))
  data["one_run_m"], data["one_run_r"] = np.full(200, 1e6), r
  data["one_run_v"] = np.round(r * rng.uniform(0.8, 1.0, 200))
  data["one_run_delta"], data["one_run_significance"] = np.full(200, 1e-6), np.full(200, 0.05)
  return data


def _production(tmp_path, data):
  """The script's outputs, run with XLA_FLAGS stripped of the suite's flags."""
  np.savez(tmp_path / "in.npz", **data)
  flags = os.environ.get("XLA_FLAGS", "").split()
  env = {**os.environ, "XLA_FLAGS": " ".join(
      f for f in flags if f.split("=")[0] not in _TEST_FLAG_NAMES)}
  env.pop("DPAUDIT_CPU_EMITTERS", None)  # each program's own choice, as users get it
  done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path / "in.npz"),
                         str(tmp_path / "out.npz")], capture_output=True, text=True, cwd=ROOT,
                        env=env)
  assert done.returncode == 0, done.stderr
  return dict(np.load(tmp_path / "out.npz"))


def test_production_compile_settings_match_scipy_and_the_suite(tmp_path):
  # The suite compiles with its own flags; the subprocess with none of them.
  assert all(name in os.environ["XLA_FLAGS"] for name in _TEST_FLAG_NAMES)
  data = _inputs(np.random.default_rng(31))
  got = _production(tmp_path, data)
  assert not any(name in str(got["xla_flags"]) for name in _TEST_FLAG_NAMES)
  for name in ("pairs", "few"):
    k, n = data[name + "_k"], data[name + "_n"]
    ref_lower = np.where(k > 0, scipy.stats.beta.ppf(0.025, np.maximum(k, 1), n - k + 1), 0.0)
    ref_upper = np.where(k < n, scipy.stats.beta.isf(0.025, k + 1, np.maximum(n - k, 1)), 1.0)
    for emitters in ("", "_fusion") if name == "pairs" else ("",):
      np.testing.assert_allclose(got[name + emitters + "_lower"], ref_lower, rtol=1e-10, atol=0)
      np.testing.assert_allclose(got[name + emitters + "_upper"], ref_upper, rtol=1e-10, atol=0)
  k, n, p = data["tails_k"], data["tails_n"], data["tails_p"]
  # scipy's own tails go wrong below about 1e-200 (test_binomial.py says where).
  for ours, ref in ((got["sf"], scipy.stats.binom.sf(k - 1, n, p)),
                    (got["cdf"], scipy.stats.binom.cdf(k, n, p))):
    shown = ref > 1e-200
    np.testing.assert_allclose(ours[shown], ref[shown], rtol=1e-10, atol=0)
  a, b, x = data["beta_a"], data["beta_b"], data["beta_x"]
  for ours, ref in ((got["beta_lower"], scipy.special.betainc(a, b, x)),
                    (got["beta_upper"], scipy.special.betaincc(a, b, x))):
    shown = ref > 1e-200
    np.testing.assert_allclose(ours[shown], ref[shown], rtol=1e-10, atol=0)
  log_x = data["log_x"]
  assert (np.abs(got["log"] - np.log(log_x)) / np.spacing(np.abs(np.log(log_x)))).max() <= 1.0
  # The suite's settings give the same values to the last few bits.
  lower, upper = binomial.clopper_pearson(data["pairs_k"], data["pairs_n"], 0.05)
  np.testing.assert_allclose(lower, got["pairs_lower"], rtol=1e-13, atol=0)
  np.testing.assert_allclose(upper, got["pairs_upper"], rtol=1e-13, atol=0)
  np.testing.assert_allclose(binomial.binomial_sf(k, n, p), got["sf"], rtol=1e-12, atol=1e-300)
  # The error-count bound (loop emitters) gives the suite's values, which
  # tests/estimators/test_approx_dp.py checks against references.
  errors = tuple(data["errors_" + name] for name in ("fp", "neg", "fn", "pos"))
  suite = approx_dp.epsilon_from_error_counts(*errors, 1e-5, 0.05)
  assert np.count_nonzero(got["error_counts"]) >= 0.9 * got["error_counts"].size
  np.testing.assert_allclose(got["error_counts"], suite, rtol=1e-12, atol=0)
  # The loop emitters change the machine code only: the bounds agree with the fusion emitters'.
  for name in ("bonferroni", "one_run"):
    assert np.count_nonzero(got[name + "_fusion"]) >= 0.75 * got[name + "_fusion"].size
    np.testing.assert_allclose(got[name + "_loop"], got[name + "_fusion"], rtol=1e-12, atol=0)
