"""First calls of the Renyi-cut, multinomial, MIA-metric, RDP, reconstruction and exposure
estimators: their exact host paths agree with the compiled programs, eager functions compute in
NumPy as in ``jax.numpy``, and bucketed sizes compile one program."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit.estimators import (
  _compile,
  exposure,
  mia_metrics,
  multinomial,
  rdp,
  reconstruction,
  renyi_cuts,
)
from tests.conftest import Lowerings

ORDERS = np.array([1.5, 2.0, 4.0, 10.0, 32.0])  # as in test_renyi_cuts: programs shared


def _both(monkeypatch, call):
  """``call()`` with the host paths, then with the compiled programs, as NumPy leaves."""
  out = {}
  for mode in ("host", "compiled"):
    monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, mode)
    out[mode] = [np.asarray(v) for v in jax.tree_util.tree_leaves(call())]
  return out["host"], out["compiled"]


def _assert_agree(monkeypatch, call, rtol):
  host, compiled = _both(monkeypatch, call)
  assert len(host) == len(compiled)
  for h, c in zip(host, compiled):
    assert h.shape == c.shape
    np.testing.assert_allclose(h, c, rtol=rtol, atol=1e-300)


def test_two_cut_host_path_agrees_with_the_program(monkeypatch):
  rng = np.random.default_rng(0)
  n = rng.integers(1, 10**5, 40)
  kp, kq = rng.binomial(n, 0.5), rng.binomial(n, 0.45)
  kp[:3], kq[3:6], kp[6:9] = 0, n[3:6], n[6:9]  # the closed forms at k = 0 and k = n
  _assert_agree(monkeypatch, lambda: renyi_cuts.renyi_two_cut_lower_bound(kp, n, kq, n, ORDERS),
                rtol=1e-8)
  # An array of significances is one more elementwise argument (on the host path here).
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, "host")
  significance = np.array([0.01, 0.2])
  both = renyi_cuts.renyi_two_cut_lower_bound(kp[:2, None], n[:2, None], kq[:2], n[:2], ORDERS,
                                              significance)
  assert both.shape == (2, 2, len(ORDERS))
  for i, level in enumerate(significance):
    np.testing.assert_array_equal(both[:, i], renyi_cuts.renyi_two_cut_lower_bound(
        kp[:2], n[:2], kq[i], n[i], ORDERS, level))


def test_k_cut_and_goodman_host_paths_agree_with_the_programs(monkeypatch):
  rng = np.random.default_rng(1)
  p = rng.multinomial(1000, rng.dirichlet(np.ones(4)), 5)
  q = rng.multinomial(700, rng.dirichlet(np.ones(4)), 5)
  for args in [(p, q, ORDERS), (p[0], q, ORDERS), (p[:, None], q[None], ORDERS)]:
    _assert_agree(monkeypatch, lambda: renyi_cuts.renyi_k_cut_lower_bound(
        *args, method="goodman"), rtol=1e-12)
  _assert_agree(monkeypatch, lambda: multinomial.goodman_intervals(p, [0.05, 0.1, 0.2, 0.3, 0.4]),
                rtol=1e-12)


def test_sison_glaz_host_path_agrees_with_the_program(monkeypatch):
  # Small, sparse and unbalanced rows, and a total of 1e9 (Temme's tails, long windows); rows of
  # three cells, as the doctest's (one program for both).
  counts = np.array([[30.0, 50.0, 20.0], [5.0, 1.0, 94.0], [0.0, 7.0, 3.0], [1e8, 3e8, 6e8]])
  _assert_agree(monkeypatch, lambda: multinomial.sison_glaz_intervals(counts, 0.1), rtol=1e-12)
  # The k-cut's host path: the divergence between the host intervals' ends.
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, "host")
  each = 1.0 - np.sqrt(1.0 - 0.1)
  lower = multinomial.host_sison_glaz(counts[:2], np.full(2, each)).lower
  upper = multinomial.host_sison_glaz(counts[2:3], np.full(1, each)).upper
  np.testing.assert_allclose(renyi_cuts.renyi_k_cut_lower_bound(counts[:2], counts[2], ORDERS, 0.1),
                             renyi_cuts.renyi_divergence(lower, upper, ORDERS), rtol=1e-14)


def test_eager_functions_compute_in_numpy_as_in_jax_numpy():
  rng = np.random.default_rng(2)
  p, q = rng.dirichlet(np.ones(5), 3), rng.dirichlet(np.ones(5), 3)
  p[0, 1], q[1, 2] = 0.0, 0.0  # the conventions at 0: no term, and +inf
  lo, hi = np.sort(rng.uniform(size=(2, 6)), axis=0)
  values = rng.uniform(0.2, 0.4, (2, 50))
  cases = [(renyi_cuts.binary_renyi_divergence, (p[:, 0], q[:, 0], ORDERS)),
           (renyi_cuts.renyi_divergence, (p, q, ORDERS)),
           (renyi_cuts.renyi_divergence, (p, q, 3.0)),
           (renyi_cuts.renyi_two_cut_from_intervals, (lo, hi, lo[::-1], hi[::-1], ORDERS)),
           (renyi_cuts.empirical_bernstein_interval, (values, 0.1)),
           (rdp.compose_rdp, (np.array([[0.5, np.inf], [1.0, 2.0]]), 0)),
           (rdp.balle_epsilon_per_order, (np.array([0.5, 1.0]), np.array([2.0, 4.0]), 1e-5))]
  for fn, args in cases:
    host = jax.tree_util.tree_leaves(fn(*args))
    traced = jax.tree_util.tree_leaves(jax.jit(lambda *a, fn=fn: fn(*a))(*args))
    for h, t in zip(host, traced):
      assert isinstance(h, jax.Array) and h.dtype == t.dtype
      np.testing.assert_allclose(h, t, rtol=1e-13)


def test_mia_metrics_host_paths_agree_with_the_bucketed_programs(monkeypatch):
  rng = np.random.default_rng(3)
  for n_in, n_out in [(7, 3), (1, 1), (60, 45)]:
    x_in = np.round(rng.normal(0.5, 1.0, n_in) * 2.0)  # ties
    x_out = np.round(rng.normal(0.0, 1.0, n_out) * 2.0)
    x_in[0] = x_out[-1] = -np.inf  # padding sorts into the last tie group with these
    scores = np.concatenate([x_in, x_out])
    member = np.arange(scores.size) < n_in
    _assert_agree(monkeypatch, lambda: (
        mia_metrics.roc_auc(x_in, x_out), mia_metrics.roc_curve(x_in, x_out),
        mia_metrics.tpr_at_fpr(x_in, x_out, [0.0, 0.3, 1.0]),
        mia_metrics.precision_at_top(scores, member, [0.1, 0.5, 1.0])), rtol=1e-14)
    direct = mia_metrics._roc_curve(jnp.asarray(x_in), jnp.asarray(x_out))
    for got, want in zip(mia_metrics.roc_curve(x_in, x_out), direct):
      np.testing.assert_allclose(got, want, rtol=1e-15)
    direct = mia_metrics._precision_at_top(jnp.asarray(scores), jnp.asarray(member, float),
                                           jnp.asarray([0.1, 0.5, 1.0]))
    np.testing.assert_allclose(mia_metrics.precision_at_top(scores, member, [0.1, 0.5, 1.0]),
                               direct, rtol=1e-15)


def test_rdp_reconstruction_and_exposure_host_paths_agree_with_the_programs(monkeypatch):
  rng = np.random.default_rng(4)
  orders = np.array([1.5, 2.0, 4.0, 32.0])
  curves = rng.uniform(0.0, 3.0, (3, 1, 4))
  curves[0, 0, 1] = np.inf
  p0 = np.array([2.0**-10, 0.5])
  candidates = rng.normal(size=50)
  candidates[3] = -np.inf
  canaries = np.array([candidates[5], -np.inf, 10.0])
  _assert_agree(monkeypatch, lambda: (
      rdp.rdp_to_epsilon(curves, orders, np.array([1e-5, 1e-2])),
      reconstruction.reconstruction_leakage_bound(curves, orders, p0),
      reconstruction.reconstruction_leakage_bound(curves[1, 0], orders, log_p0=-2000.0),
      reconstruction.traditional_reconstruction_bound(curves, orders, p0),
      reconstruction.leakage_bits(curves, orders, np.array([0.0, 10.0])),
      reconstruction.posterior_bound(curves, orders, p0),
      exposure.exposure_exact(canaries, candidates),
      exposure.exposure_sampled(canaries, candidates[4:]),
      exposure.exposure_sampled(0.3, np.ones(10))), rtol=1e-12)


def test_two_cut_and_k_cut_compile_once_for_sizes_in_one_bucket(monkeypatch):
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, "compiled")
  rng = np.random.default_rng(5)
  orders = ORDERS
  for call in (lambda n: renyi_cuts.renyi_two_cut_lower_bound(
                   rng.integers(0, 50, n), 100, rng.integers(0, 50, n), 100, orders),
               lambda n: renyi_cuts.renyi_k_cut_lower_bound(
                   rng.integers(1, 50, (n, 3)), rng.integers(1, 50, (n, 3)), orders,
                   method="goodman")):
    with Lowerings() as lowerings:
      for n in (1000, 1001, 1002):
        assert call(n).shape == (n, len(orders))
    assert lowerings.count <= 1


@pytest.mark.parametrize("fn", [mia_metrics.roc_auc, mia_metrics.roc_curve])
def test_score_metrics_compile_once_for_sizes_in_one_bucket(monkeypatch, fn):
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, "compiled")
  rng = np.random.default_rng(6)
  with Lowerings() as lowerings:
    for n in (1000, 1001, 1002):
      jax.block_until_ready(fn(rng.normal(size=n), rng.normal(size=300)))
  assert lowerings.count <= 1
