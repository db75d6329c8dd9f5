"""The workloads and baselines shared by the benchmarks, free of absl flags so that several
benchmarks (and :mod:`experiments.benchmarks.accelerator`, which runs them all) can import them.

* :func:`numpy_noisy_argmax` and :func:`numpy_pate`: the vectorised NumPy a user would write for
  the Monte Carlo of a noisy argmax over a fixed histogram and over PATE's vote model;
* :func:`make_steps`: one non-private step and the DP-SGD steps of a model, jitted;
* :func:`make_run`: one whole DP-SGD run, the function the many-run audits vmap;
* :func:`domias_datasets`, :func:`time_kde` and :func:`time_flow`: DOMIAS's density fits
  vmapped over seeds against a loop over seeds.
"""

from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpaudit.dpsgd import clipping, noise, training
from dpaudit.prng import make_key

NUMPY_BLOCK = 2**18
"""Trials per block of the NumPy baselines (their memory stays a few tens of MB)."""

EXAMPLE_SHAPE = {"mlp": (28, 28, 1), "lenet5": (28, 28, 1), "wrn16_4": (32, 32, 3)}
"""Input shape of each model of the DP-SGD step benchmarks (MNIST for the MLP and LeNet-5,
CIFAR-10 for WRN-16-4)."""


def numpy_noisy_argmax(rng: np.random.Generator, histogram, sigma: float, num_trials: int,
                       dtype=np.float32) -> np.ndarray:
  """Outcome counts of ``num_trials`` noisy argmaxes of ``histogram`` (Eq. (2) of Chadha et al.)
  in NumPy: ``standard_normal`` noise, ``argmax``, ``bincount``, in blocks."""
  histogram = np.asarray(histogram, dtype)
  classes = histogram.size
  counts = np.zeros(classes, np.int64)
  for start in range(0, num_trials, NUMPY_BLOCK):
    n = min(NUMPY_BLOCK, num_trials - start)
    noisy = histogram + sigma * rng.standard_normal((n, classes), dtype=dtype)
    counts += np.bincount(np.argmax(noisy, axis=1), minlength=classes)
  return counts


def pate_profiles(num_classes: int) -> dict[str, np.ndarray]:
  """Class probabilities P of two teacher-vote profiles: Dirichlet(1/2) over the classes and a
  concentrated one (teachers mostly agree)."""
  dirichlet = np.random.default_rng(0).dirichlet(np.full(num_classes, 0.5))
  concentrated = np.full(num_classes, 0.1 / max(num_classes - 1, 1))
  concentrated[0] = 0.9
  return {"dirichlet": dirichlet, "concentrated": concentrated / concentrated.sum()}


def numpy_pate(rng, p, p_neighbor, k, sigma, num_trials, neighbor) -> np.ndarray:
  """Outcome counts of ``num_trials`` trials of PATE's parametric vote model (Sec. 5.1 of
  Chadha et al.: ``H_S = Mult(k, P)``, ``H_S' = Mult(k - 1, P) + Mult(1, P')``) through the
  noisy argmax, in vectorised NumPy (``Generator.multinomial``, float32 normals)."""
  counts = np.zeros(p.size, np.int64)
  done = 0
  while done < num_trials:
    n = min(NUMPY_BLOCK, num_trials - done)
    if neighbor:
      hist = rng.multinomial(k - 1, p, size=n) + rng.multinomial(1, p_neighbor, size=n)
    else:
      hist = rng.multinomial(k, p, size=n)
    noisy = hist + sigma * rng.standard_normal(hist.shape, dtype=np.float32)
    counts += np.bincount(np.argmax(noisy, axis=1), minlength=p.size)
    done += n
  return counts


def make_steps(model, params, example_shape, batch_size: int, noise_multiplier: float = 1.0,
               l2_clip_norm: float = 1.0, methods=("nonprivate", "dp_ghost", "dp_vmap")):
  """Jitted steps ``(params, opt_state) -> (params, opt_state)`` on one fixed random batch,
  with parameters and optimizer state donated, each with its initial optimizer state:

  * ``nonprivate``: ``grad`` of the mean loss, then SGD;
  * ``dp_ghost``: DP-SGD with ghost-norm clipping, Gaussian noise
    (:func:`dpaudit.dpsgd.noise.dp_aggregate`), then SGD;
  * ``dp_vmap``: the same with ``vmap`` per-example gradients.

  The arrays are made on JAX's default device (``jax.default_device`` chooses it)."""
  sgd = optax.sgd(0.1)
  # Bulk normal noise is ~6x faster from JAX's rolled threefry2x32 than from the unrolled
  # variant that wins inside fused Monte Carlo kernels (measured on a CPU), so the DP-SGD
  # steps use threefry2x32 keys.
  dp_tx = optax.chain(noise.dp_aggregate(noise_multiplier, l2_clip_norm, batch_size,
                                         make_key(1, "threefry2x32")), sgd)
  inputs = jax.random.uniform(jax.random.key(2), (batch_size,) + tuple(example_shape))
  labels = jax.random.randint(jax.random.key(3), (batch_size,), 0, 10)

  def nonprivate(p, s):
    def loss(q):
      return jnp.mean(clipping.softmax_cross_entropy(model.apply({"params": q}, inputs), labels))
    updates, s = sgd.update(jax.grad(loss)(p), s, p)
    return optax.apply_updates(p, updates), s

  def dp(strategy):
    def step(p, s):
      out = clipping.clipped_grad_sum(model, p, inputs, labels, l2_clip_norm=l2_clip_norm,
                                      strategy=strategy)
      updates, s = dp_tx.update(out.grad_sum, s, p)
      return optax.apply_updates(p, updates), s
    return step

  made = {"nonprivate": (nonprivate, sgd), "dp_ghost": (dp("ghost"), dp_tx),
          "dp_vmap": (dp("vmap"), dp_tx)}
  return {name: (jax.jit(made[name][0], donate_argnums=(0, 1)), made[name][1].init(params))
          for name in methods}


def make_run(model, config: training.TrainConfig, num_examples: int, example: jax.Array,
             strategy: str, loss_fn=clipping.softmax_cross_entropy):
  """``run(key, features, labels) -> (final params, per-step batch sizes)`` of one DP-SGD run:
  :func:`dpaudit.dpsgd.training.make_run` (the function the many-run audits vmap)."""
  full = training.make_run(model, config, num_examples, example, loss_fn=loss_fn,
                           strategy=strategy)

  def run(key, features, labels):
    out = full(key, features, labels)
    return out.params, out.batch_sizes

  return run


def domias_datasets(num_seeds: int, num_rows: int, seed: int = 0, flag: str = "num_rows"
                    ) -> np.ndarray:
  """``[seeds, rows, 8]`` random subsets of the standardised California Housing features;
  ValueError naming ``--flag`` when it asks for more rows than the data hold."""
  from dpaudit import data
  features = np.asarray(data.load("california_housing").features, np.float64)
  features = (features - features.mean(0)) / features.std(0)
  if num_rows > features.shape[0]:
    raise ValueError(f"--{flag}={num_rows} is outside the valid range [1, {features.shape[0]}]: "
                     "California Housing has that many rows")
  rng = np.random.default_rng(seed)
  return np.stack([features[rng.choice(features.shape[0], num_rows, replace=False)]
                   for _ in range(num_seeds)])


def time_kde(datas: np.ndarray, queries: np.ndarray, repeats: int) -> dict:
  """:func:`dpaudit.attacks.density.fit_kde` and its log-density at the queries, ``jit(vmap)``
  over the seeds against the same jitted function called once per seed (median of ``repeats``
  runs, compile excluded; both give the same values)."""
  from dpaudit.attacks import density

  def one(data, x, chunk_size):
    return density.kde_log_density(density.fit_kde(data), x, chunk_size=chunk_size)

  # The same peak memory on both sides: 128 query rows per chunk alone, 128 / seeds vmapped.
  chunk = 128
  single = jax.jit(lambda d, x: one(d, x, chunk))
  batched = jax.jit(jax.vmap(lambda d, x: one(d, x, max(1, chunk // datas.shape[0]))))
  datas, queries = jnp.asarray(datas), jnp.asarray(queries)
  start = time.perf_counter()
  jax.block_until_ready(batched(datas, queries))
  compile_vmapped = time.perf_counter() - start
  start = time.perf_counter()
  jax.block_until_ready(single(datas[0], queries[0]))
  compile_loop = time.perf_counter() - start
  vmapped, loop = [], []
  for _ in range(repeats):
    start = time.perf_counter()
    out_v = jax.block_until_ready(batched(datas, queries))
    vmapped.append(time.perf_counter() - start)
    start = time.perf_counter()
    out_l = [jax.block_until_ready(single(d, q)) for d, q in zip(datas, queries)]
    loop.append(time.perf_counter() - start)
  rtol = 1e-6 if datas.dtype == jnp.float64 else 1e-4
  np.testing.assert_allclose(np.asarray(out_v), np.stack(out_l), rtol=rtol, atol=rtol)
  return {"vmapped_median_s": statistics.median(vmapped), "loop_median_s": statistics.median(loop),
          "speedup": statistics.median(loop) / statistics.median(vmapped),
          "first_call_vmapped_s": compile_vmapped, "first_call_loop_s": compile_loop,
          "repeats": repeats, "query_rows_per_chunk": {"loop": chunk,
                                                       "vmapped": max(1, chunk // len(datas))}}


def time_flow(datas: np.ndarray, config) -> dict:
  """:func:`dpaudit.attacks.density.fit_flows` (one vmapped program over the seeds) against
  :func:`~dpaudit.attacks.density.fit_flow` in a loop over the seeds: one timed run each,
  compile excluded (a first call on other data warms both), and the largest difference of
  their held-out log-densities for seed 0."""
  from dpaudit.attacks import density
  keys = jax.random.split(jax.random.key(0), datas.shape[0])
  warm = datas + 0.01  # other values, same shapes: compiles every program once
  start = time.perf_counter()
  jax.block_until_ready(density.fit_flows(keys, warm, config).params)
  first_vmapped = time.perf_counter() - start
  start = time.perf_counter()
  jax.block_until_ready(density.fit_flow(keys[0], warm[0], config).params)
  first_loop = time.perf_counter() - start
  start = time.perf_counter()
  batch = density.fit_flows(keys, datas, config)
  jax.block_until_ready(batch.params)
  vmapped = time.perf_counter() - start
  start = time.perf_counter()
  singles = [density.fit_flow(k, d, config) for k, d in zip(keys, datas)]
  jax.block_until_ready([s.params for s in singles])
  loop = time.perf_counter() - start
  held_out = jnp.asarray(datas[0, :200])
  agree = float(np.max(np.abs(
      np.asarray(density.flow_log_density(jax.tree.map(lambda a: a[0], batch), held_out))
      - np.asarray(density.flow_log_density(singles[0], held_out)))))
  return {"vmapped_s": vmapped, "loop_s": loop, "speedup": loop / vmapped,
          "first_call_vmapped_s": first_vmapped, "first_call_loop_s": first_loop,
          "max_log_density_difference_seed0": agree}
