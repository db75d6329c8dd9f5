"""Buckets and host paths of the binomial estimators (dpaudit.estimators.binomial): one compile
per bucket of sizes, and the exact scipy paths of first calls against the compiled programs."""

import jax
import numpy as np
import pytest

from dpaudit.estimators import _compile, binomial


def _pairs(rng, size, max_n=1e9):
  n = np.maximum(np.round(np.exp(rng.uniform(0.0, np.log(max_n), size))), 1.0)
  return rng.integers(0, n.astype(np.int64) + 1).astype(float), n


def _estimators(rng, size):
  """Each binomial estimator as a call on ``size`` random inputs, with its host path."""
  k, n = _pairs(rng, size)
  p = np.clip((k + rng.normal(0.0, 2.0, size) * np.sqrt(k + 1.0)) / n, 1e-12, 1.0 - 1e-12)
  p[::7] = rng.random(p[::7].size)  # far tails too
  beta = rng.choice([1e-6, 0.05, 0.3], size)
  a, b = k + 0.5, n - k + 1.0
  return {
      "cp": ((k, n, 0.05), binomial.clopper_pearson, binomial.host_clopper_pearson),
      "cp_less": ((k, n, beta, "less"), binomial.clopper_pearson, binomial.host_clopper_pearson),
      "sf": ((k, n, p), binomial.binomial_sf, binomial.host_binomial_sf),
      "cdf": ((k, n, p), binomial.binomial_cdf, binomial.host_binomial_cdf),
      "logpmf_q": ((k, n, p, 1.0 - p), binomial.binomial_logpmf, binomial.host_binomial_logpmf),
      "beta": ((a, b, p / 2.0), binomial.incomplete_beta_tails,
               binomial.host_incomplete_beta_tails),
  }


def test_sizes_in_one_bucket_compile_once(monkeypatch):
  """1000, 1001 and 1002 elements share the program of 1024: at most one compile (the program
  JAX lowers, cached on disk or not; none where an earlier test compiled it) per estimator, and
  none for the later sizes."""
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, "compiled")
  lowered = []

  def listen(event, duration, **kwargs):
    if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
      lowered.append(event)
  rng = np.random.default_rng(3)
  calls = {size: _estimators(rng, size) for size in (1000, 1001, 1002)}
  jax.monitoring.register_event_duration_secs_listener(listen)
  try:
    for name in ("cp", "sf", "logpmf_q", "beta"):
      counts = []
      for size in (1000, 1001, 1002):
        args, compiled, _ = calls[size][name]
        before = len(lowered)
        out = jax.tree.leaves(compiled(*args))
        assert all(v.shape == (size,) for v in out), name
        counts.append(len(lowered) - before)
      assert counts[0] <= 1 and counts[1:] == [0, 0], (name, counts)
  finally:
    jax.monitoring.unregister_event_duration_listener(listen)


def test_host_paths_agree_with_the_compiled_programs():
  """On random inputs (n log-uniform up to 1e9, p near k / n and anywhere), every host path
  agrees with its compiled estimator to 1e-9 relative, where the value is a normal double."""
  for name, (args, compiled, host) in _estimators(np.random.default_rng(5), 1000).items():
    for ours, theirs in zip(jax.tree.leaves(compiled(*args)), jax.tree.leaves(host(*args))):
      ours, theirs = np.asarray(ours), np.asarray(theirs)
      assert theirs.dtype == np.float64 and theirs.shape == ours.shape, name
      shown = np.abs(theirs) > 1e-300 if name != "logpmf_q" else np.isfinite(theirs)
      np.testing.assert_allclose(ours[shown], theirs[shown], rtol=1e-9, atol=0, err_msg=name)
      if name == "logpmf_q":
        assert np.all(ours[~shown] == -np.inf), name
      else:
        assert np.all(np.abs(ours[~shown]) < 1e-290), name


def test_host_paths_at_the_edges_and_in_float32(monkeypatch):
  """The closed forms and conventions outside 1 <= k <= n; first calls answered on the host
  (``DPAUDIT_FIRST_CALLS=host``) come back as JAX arrays of the default float dtype."""
  k, n = np.array([0.0, 10.0, 0.0, 3.0, -1.0, 11.0]), np.array([10.0, 10.0, 1.0, 10.0, 10.0, 10.0])
  p = np.array([0.3, 0.3, 0.0, 1.0, 0.5, 0.5])
  lower, upper = binomial.host_clopper_pearson(k[:4], n[:4], 0.1)
  np.testing.assert_allclose(lower, [0.0, 0.05 ** 0.1, 0.0, binomial.host_cp_lower_limit(
      3, 10, np.log(0.05))], rtol=1e-15)
  np.testing.assert_allclose(upper[[0, 1, 2]], [1 - 0.05 ** 0.1, 1.0, 0.95], rtol=1e-15)
  np.testing.assert_array_equal(binomial.host_binomial_sf(k, n, p), [1, 0.3 ** 10, 1, 1, 1, 0])
  np.testing.assert_allclose(np.exp(binomial.host_binomial_logpmf(k, n, p)),
                             [0.7 ** 10, 0.3 ** 10, 1, 0, 0, 0], rtol=1e-14, atol=0)
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, "host")
  for x64, dtype in ((True, np.float64), (False, np.float32)):
    with jax.enable_x64(x64):
      for out in (binomial.clopper_pearson(k[:4], n[:4], 0.1).upper,
                  binomial.binomial_cdf(k, n, p), binomial.binomial_logpmf(k, n, p),
                  binomial.incomplete_beta_tails(2.0, 3.0, p).lower):
        assert isinstance(out, jax.Array) and out.dtype == dtype
  with pytest.raises(ValueError, match="alternative"):
    binomial.host_clopper_pearson(1, 2, 0.05, "both")


def test_host_order_puts_the_padding_last(monkeypatch):
  """With ``rows``, the grouping order ranks the real pairs by the key and puts the padding of
  the bucket after them, in its order (the chunks of a padded batch visit the real rows only)."""
  monkeypatch.setattr(binomial, "_cpu_chunk_size", lambda: 1024)
  k, n = _pairs(np.random.default_rng(2), 3000, 1e6)
  padded = [_compile.pad_edge(v, 4096) for v in (k, n)]
  order = binomial._host_order(binomial._host_cp_key, *padded, 0.025, parts=2, rows=3000)
  first = binomial._host_cp_key(k, n, 0.025)
  assert 0 < first.sum() < 3000
  np.testing.assert_array_equal(order, np.concatenate(
      [np.flatnonzero(first), np.flatnonzero(~first), np.arange(3000, 4096)]))


@pytest.mark.parametrize("where, value, match", [
    ("k", 0.5, "successes=0.5 .* whole"), ("k", -1.0, "successes=-1.0 .* outside"),
    ("k", np.nan, "successes=nan"), ("n", np.inf, "trials=inf"),
    ("n", 0.0, "trials=0.0 .* outside")])
def test_large_batches_are_checked_as_small_ones(where, value, match):
  """The block-wise test of large batches (binomial._plainly_valid_pairs) passes valid pairs and
  hands any offence to the usual checks, which name it."""
  k, n = np.zeros(70_000), np.full(70_000, 10.0)
  assert binomial._plainly_valid_pairs(k, n)
  (k if where == "k" else n)[-3] = value
  assert not binomial._plainly_valid_pairs(k, n)
  with pytest.raises(ValueError, match=match):
    binomial.clopper_pearson(k, n)
