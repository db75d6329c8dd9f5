r"""PATE-GAN: a GAN whose discriminator learns only through noisy teacher votes (Jordon, Yoon &
van der Schaar, "PATE-GAN: Generating Synthetic Data with Differential Privacy Guarantees",
ICLR 2019), one of the DP generators of the DOMIAS paper's Fig. 6.

Algorithm 1 of the paper, as implemented by :func:`fit_pate_gan`:

* the training rows are split into ``k`` disjoint random partitions
  (:func:`dpaudit.teachers.partition`), and teacher discriminator :math:`T_i` only ever sees
  partition :math:`D_i`: each of its ``teacher_iters`` (:math:`n_T`) steps per iteration is
  a cross-entropy step on a real minibatch from :math:`D_i` against generated rows;
* the student discriminator :math:`S` sees no real row. Each of its ``student_iters``
  (:math:`n_S`) steps labels a batch of generated rows :math:`\hat u_j` by the noisy teacher vote
  (the paper's :math:`\text{PATE}_\lambda`, Papernot et al. 2017's noisy aggregation),

  .. math:: \text{PATE}_\lambda(\hat u) = \arg\max_{c \in \{0, 1\}}\, n_c(\hat u) + Y_c,
     \qquad Y_c \sim \text{Lap}(1/\lambda)\ \text{i.i.d.},

  where :math:`n_1` counts the teachers that call :math:`\hat u` real, and takes a
  cross-entropy step towards those labels;
* the generator takes one step against the student, on Algorithm 1's
  :math:`\frac1n\sum_j \log(1 - S(G(z_j)))` (``generator_loss="paper"``, the default) or on
  the non-saturating :math:`-\frac1n\sum_j \log S(G(z_j))` (Goodfellow et al. 2014, Sec. 3;
  the same fixed point);
* every vote is charged to the moments accountant, and training stops before the spent
  :math:`\hat\varepsilon` would pass the target (Algorithm 1's ``while`` condition).

Accounting (Algorithm 1's moments accountant; Papernot, Abadi, Erlingsson, Goodfellow &
Talwar, "Semi-supervised Knowledge Transfer for Deep Learning from Private Training Data",
ICLR 2017, Thms. 2-3: the data-independent and the data-dependent bound). One vote on a point
whose teacher counts differ by :math:`g = |n_0 - n_1|` (neighbouring data sets change one
teacher's vote, so the noisy argmax is :math:`2\lambda`-DP) has log moment at order :math:`l`

.. math::
   \alpha(l) \le \min\Big\{2\lambda^2 l(l+1),\; 2\lambda l,\;
     \log\Big((1 - q)\Big(\frac{1 - q}{1 - e^{2\lambda} q}\Big)^l + q\, e^{2\lambda l}\Big)\Big\},
   \qquad q = \frac{2 + \lambda g}{4 e^{\lambda g}},

with :math:`q` the exact probability that the noise flips the majority (two labels). The moments
add over votes, and :math:`\hat\varepsilon = \min_l (\alpha(l) + \log(1/\delta)) / l` over
:math:`l = 1..L` (Abadi et al. 2016, Thm. 2.2). Differences from the paper's Algorithm 1, all in
the direction of a valid bound:

* the data-dependent (third) term is used only for :math:`q \le 1/(1 + e^{2\lambda})`, where it
  is nondecreasing in :math:`q` (with :math:`a = e^{2\lambda}` and
  :math:`r = (1 - q)/(1 - aq)`, the derivative of the argument of the log is
  :math:`r^l(l(a - 1)/(1 - aq) - 1) + a^l \ge a^l - r^l \ge 0`, as :math:`r \le a` there), so
  that it bounds the moment of every mechanism whose flip probability is at most :math:`q`; it
  also keeps :math:`1 - aq > 0`, where Algorithm 1's formula can take the log of a negative
  number); elsewhere the data-independent terms apply;
* :math:`2\lambda l` (pure :math:`2\lambda`-DP) is added to the minimum;
* an iteration whose votes would take :math:`\hat\varepsilon` past the target is undone, so the
  released generator is within the target (Algorithm 1 tests the budget after the iteration and
  can overshoot by one iteration).

As in the paper, :math:`\hat\varepsilon` is *data dependent* (it depends on the teachers'
agreement), so its value is not itself differentially private (Papernot et al. 2018 add smooth
sensitivity for that). Like DP-TVAE's (:func:`dpaudit.models.tabular_generators.fit_dp_tvae`),
the data transform (column means, standard deviations, category sets) is fitted on the data and
not privatised. Rows are encoded as for dpaudit's other GANs
(:func:`~dpaudit.models.tabular_generators.fit_transform`): Gumbel-softmax one-hot blocks,
linear continuous columns; all networks are :class:`~dpaudit.models.tabular_generators._Mlp`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpaudit import _validate, teachers
from dpaudit.models.tabular_generators import (
    GanConfig,
    GanModel,
    Layout,
    _check_config,
    _check_data,
    _check_positive,
    _check_widths,
    _gan_generate,
    _gan_networks,
    fit_transform,
    register_generator,
    sample_gan,
)

# Relative margin under the target at which an iteration is still accepted: the in-program
# epsilon is a float32 dot product when x64 is off (relative error ~1e-6); the reported epsilon
# is recomputed in float64 on the host.
_EPSILON_SLACK = 1e-5
GENERATOR_LOSSES = ("paper", "non_saturating")


@dataclasses.dataclass(frozen=True)
class PateGanConfig:
  r"""PATE-GAN (Jordon et al. 2019, Algorithm 1) for :func:`fit_pate_gan`.

  Attributes:
    epsilon: target :math:`\varepsilon > 0`: training stops before the accountant's
      :math:`\hat\varepsilon` at ``delta`` would pass it.
    delta: :math:`\delta \in (0, 1)`.
    num_teachers: :math:`k`, the number of teacher discriminators (disjoint partitions), >= 1;
      the data need at least ``k`` rows.
    noise_lambda: :math:`\lambda > 0`; each vote count gets Laplace noise of scale
      :math:`1/\lambda`. Smaller is noisier and cheaper per vote.
    batch_size: :math:`n`, rows per step of every network (and votes per student step).
    teacher_iters: :math:`n_T`, teacher steps per iteration.
    student_iters: :math:`n_S`, student steps (vote batches) per iteration.
    max_iterations: generator updates at most (the loop also ends at the target epsilon).
    max_order: :math:`L`, the moments are tracked at orders :math:`l = 1..L`.
    noise_dim: dimension of :math:`z \sim \mathcal{N}(0, I)`.
    generator_hidden: widths of the generator's ReLU layers.
    discriminator_hidden: widths of each teacher's and the student's LeakyReLU(0.2) layers.
    learning_rate: Adam's step size, for every network.
    gumbel_tau: Gumbel-softmax temperature of the generated one-hot blocks.
    generator_loss: "paper" (Algorithm 1's :math:`\log(1 - S(G(z)))`) or "non_saturating"
      (:math:`-\log S(G(z))`).
  """
  epsilon: float
  delta: float = 1e-5
  num_teachers: int = 10
  noise_lambda: float = 1e-3
  batch_size: int = 64
  teacher_iters: int = 5
  student_iters: int = 5
  max_iterations: int = 1000
  max_order: int = 100
  noise_dim: int = 32
  generator_hidden: tuple[int, ...] = (128, 128)
  discriminator_hidden: tuple[int, ...] = (128, 128)
  learning_rate: float = 1e-4
  gumbel_tau: float = 0.2
  generator_loss: str = "paper"

  def __post_init__(self):
    _check_positive("epsilon", self.epsilon)
    _check_positive("delta", self.delta)
    _validate.check_range("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)
    _validate.check_integer("num_teachers", self.num_teachers, 1)
    _check_positive("noise_lambda", self.noise_lambda)
    for name in ("batch_size", "teacher_iters", "student_iters", "max_iterations", "max_order",
                 "noise_dim"):
      _validate.check_integer(name, getattr(self, name), 1)
    object.__setattr__(self, "generator_hidden",
                       _check_widths("generator_hidden", self.generator_hidden))
    object.__setattr__(self, "discriminator_hidden",
                       _check_widths("discriminator_hidden", self.discriminator_hidden))
    _check_positive("learning_rate", self.learning_rate)
    _check_positive("gumbel_tau", self.gumbel_tau)
    _validate.check_choice("generator_loss", self.generator_loss, GENERATOR_LOSSES)

  @property
  def laplace_scale(self) -> float:
    r"""Scale :math:`1/\lambda` of the Laplace noise on each vote count."""
    return 1.0 / self.noise_lambda

  def gan_config(self) -> GanConfig:
    """The :class:`~dpaudit.models.tabular_generators.GanConfig` of the same networks (what
    :func:`~dpaudit.models.tabular_generators.sample_gan` reads)."""
    return GanConfig(iterations=self.max_iterations, batch_size=self.batch_size,
                     noise_dim=self.noise_dim, generator_hidden=self.generator_hidden,
                     critic_hidden=self.discriminator_hidden,
                     learning_rate=self.learning_rate, gumbel_tau=self.gumbel_tau)


class PateGanModel(NamedTuple):
  """A fitted PATE-GAN (what :func:`fit_pate_gan` returns).

  Attributes:
    gan: the generator as a :class:`~dpaudit.models.tabular_generators.GanModel` (its
      ``critic`` is the student, which never saw a real row; ``history`` holds the student and
      generator losses of each accepted iteration).
    epsilon: the accountant's :math:`\\hat\\varepsilon` at ``delta`` for the votes actually
      cast (<= the target; 0 when no iteration fitted in the budget).
    delta: the :math:`\\delta` of the guarantee.
    order: the moment order :math:`l` attaining ``epsilon``.
    num_steps: accepted iterations (generator updates).
    num_queries: teacher votes cast, ``num_steps * student_iters * batch_size``.
    gap_counts: int64 ``[k + 1]``, how many votes had each teacher margin
      :math:`|n_0 - n_1| = 0..k` (all the accountant needs).
    epsilons: float64 ``[num_steps]``, :math:`\\hat\\varepsilon` after each iteration.
    config: the :class:`PateGanConfig`.
  """
  gan: GanModel
  epsilon: float
  delta: float
  order: int
  num_steps: int
  num_queries: int
  gap_counts: np.ndarray
  epsilons: np.ndarray
  config: PateGanConfig


# ------------------------------------------------------------------------------ accounting


def _log_moments(gaps: Any, noise_lambda: float, max_order: int) -> np.ndarray:
  """float64 ``[..., L]``: the bound on one vote's log moment at orders 1..L for each teacher
  margin in ``gaps`` (module docstring; Papernot et al. 2017, Thm. 3)."""
  lam = float(noise_lambda)
  gaps = np.asarray(gaps, np.float64)[..., None]
  orders = np.arange(1, max_order + 1, dtype=np.float64)
  eps0 = 2.0 * lam
  independent = np.minimum(2.0 * lam * lam * orders * (orders + 1.0), eps0 * orders)
  x = lam * gaps
  log_q = np.log(2.0 + x) - math.log(4.0) - x
  log_q_max = -np.logaddexp(0.0, eps0)  # q <= 1 / (1 + e^{2 lambda})
  valid = log_q <= log_q_max
  lq = np.minimum(log_q, log_q_max)
  q = np.exp(lq)
  with np.errstate(divide="ignore", over="ignore"):  # -inf / inf only where the bound is unused
    dependent = np.logaddexp((orders + 1.0) * np.log1p(-q)
                             - orders * np.log1p(-np.exp(eps0 + lq)), lq + orders * eps0)
  return np.where(valid, np.minimum(independent, dependent), independent)


def _epsilon_from_alpha(alpha: np.ndarray, delta: float) -> tuple[float, int]:
  orders = np.arange(1, alpha.shape[-1] + 1, dtype=np.float64)
  values = (alpha + math.log(1.0 / delta)) / orders
  best = int(np.argmin(values))
  return float(values[best]), best + 1


def pate_epsilon(gap_counts: Any, noise_lambda: float, delta: float, max_order: int = 100
                 ) -> tuple[float, int]:
  r"""The PATE-GAN accountant's :math:`(\hat\varepsilon, l^*)` for a set of votes.

  :math:`\alpha(l) = \sum_g c_g\, \alpha_g(l)` with :math:`c_g` votes of teacher margin
  :math:`g` and :math:`\alpha_g` the per-vote bound of the module docstring;
  :math:`\hat\varepsilon = \min_{1 \le l \le L} (\alpha(l) + \log(1/\delta))/l` (PATE-GAN's
  Algorithm 1; Abadi et al. 2016, Thm. 2.2). No votes give 0.

  Args:
    gap_counts: ``[k + 1]`` whole numbers >= 0: entry ``g`` counts the votes whose teacher
      counts differed by ``g``.
    noise_lambda: :math:`\lambda > 0` (Laplace scale :math:`1/\lambda`).
    delta: :math:`\delta \in (0, 1)`.
    max_order: :math:`L >= 1`.

  Returns:
    ``(epsilon, order)``.

  >>> eps, order = pate_epsilon([0, 0, 1000], noise_lambda=0.01, delta=1e-5)
  >>> round(eps, 3), order
  (3.239, 8)
  """
  counts = np.asarray(gap_counts)
  if counts.ndim != 1 or counts.size < 2:
    raise ValueError(f"gap_counts must have shape [k + 1] with k >= 1, got shape {counts.shape}")
  _validate.check_not_boolean("gap_counts", gap_counts)
  _validate.check_range("gap_counts", counts, 0.0, finite=True)
  _validate.check_integer_valued("gap_counts", counts)
  _check_positive("noise_lambda", noise_lambda)
  _check_positive("delta", delta)
  _validate.check_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
  max_order = _validate.check_integer("max_order", max_order, 1)
  if not np.any(counts > 0):
    return 0.0, 1
  table = _log_moments(np.arange(counts.size), noise_lambda, max_order)
  alpha = counts.astype(np.float64) @ table
  return _epsilon_from_alpha(alpha, delta)


# ------------------------------------------------------------------------------- training


def _noisy_vote(key: jax.Array, n0: jax.Array, n1: jax.Array, lam: jax.Array
                ) -> tuple[jax.Array, jax.Array]:
  """PATE_lambda: labels (1: real) of ``argmax(n_c + Lap(1/lam))`` and the margins |n0 - n1|."""
  noise = jax.random.laplace(key, (2,) + n0.shape, jnp.float32) / lam
  labels = (n1 + noise[1] > n0 + noise[0]).astype(jnp.float32)
  return labels, jnp.abs(n1 - n0)


def _static_config(config: PateGanConfig) -> PateGanConfig:
  """The config with the traced fields fixed, so that runs differing only in them compile
  once."""
  return dataclasses.replace(config, epsilon=1.0, delta=0.5, noise_lambda=1.0)


@functools.lru_cache(maxsize=16)
def _pate_gan_program(layout: Layout, config: PateGanConfig, num_rows: int) -> Callable:
  """Jitted ``run(key, rows, indices, sizes, lam, table, target, log_inv_delta) ->
  (generator params, student params, gap counts, steps, history [max_iterations, 3])``."""
  del num_rows  # part of the cache key: rows' shape is static
  generator, discriminator = _gan_networks(layout, config.gan_config())
  k, bs, width = config.num_teachers, config.batch_size, layout.width
  optimizer = optax.adam(config.learning_rate)
  dtype = jnp.result_type(float)
  orders = jnp.arange(1, config.max_order + 1, dtype=dtype)

  def generate(g_params, key):
    return _gan_generate(generator, layout, config.noise_dim, config.gumbel_tau, g_params, key,
                         None, bs)

  def disc(params, x):
    return discriminator.apply({"params": params}, x)[:, 0]

  def teacher_loss(params, real, fake):  # -[log T(u) + log(1 - T(G(z)))]
    return jnp.mean(jax.nn.softplus(-disc(params, real))) + jnp.mean(
        jax.nn.softplus(disc(params, fake)))

  def student_loss(params, fake, labels):  # -[r log S + (1 - r) log(1 - S)]
    s = disc(params, fake)
    return jnp.mean(labels * jax.nn.softplus(-s) + (1.0 - labels) * jax.nn.softplus(s))

  def generator_loss(g_params, s_params, key):
    s = disc(s_params, generate(g_params, key))
    if config.generator_loss == "paper":  # log(1 - S(G(z)))
      return jnp.mean(-jax.nn.softplus(s))
    return jnp.mean(jax.nn.softplus(-s))  # -log S(G(z))

  def iteration(state, key, rows, indices, sizes, lam):
    g_params, t_params, s_params, g_opt, t_opt, s_opt = state
    key_t, key_s, key_g = jax.random.split(key, 3)

    def teacher_step(carry, key):
      t_params, t_opt = carry
      key_z, key_r = jax.random.split(key)
      fake = jax.lax.stop_gradient(generate(g_params, key_z))
      slots = (jax.random.uniform(key_r, (k, bs)) * sizes[:, None]).astype(jnp.int32)
      real = rows[jnp.take_along_axis(indices, jnp.minimum(slots, sizes[:, None] - 1), axis=1)]
      grads = jax.vmap(jax.grad(teacher_loss), in_axes=(0, 0, None))(t_params, real, fake)
      updates, t_opt = jax.vmap(optimizer.update)(grads, t_opt, t_params)
      return (optax.apply_updates(t_params, updates), t_opt), None

    (t_params, t_opt), _ = jax.lax.scan(teacher_step, (t_params, t_opt),
                                        jax.random.split(key_t, config.teacher_iters))

    def student_step(carry, key):
      s_params, s_opt, counts = carry
      key_z, key_noise = jax.random.split(key)
      fake = jax.lax.stop_gradient(generate(g_params, key_z))
      n1 = jnp.sum(jax.vmap(disc, in_axes=(0, None))(t_params, fake) > 0.0, axis=0)
      labels, gaps = _noisy_vote(key_noise, (k - n1).astype(jnp.float32),
                                 n1.astype(jnp.float32), lam)
      counts = counts.at[gaps.astype(jnp.int32)].add(1)
      loss, grads = jax.value_and_grad(student_loss)(s_params, fake, labels)
      updates, s_opt = optimizer.update(grads, s_opt, s_params)
      return (optax.apply_updates(s_params, updates), s_opt, counts), loss

    (s_params, s_opt, counts), s_losses = jax.lax.scan(
        student_step, (s_params, s_opt, jnp.zeros(k + 1, jnp.int32)),
        jax.random.split(key_s, config.student_iters))
    g_loss, grads = jax.value_and_grad(generator_loss)(g_params, s_params, key_g)
    updates, g_opt = optimizer.update(grads, g_opt, g_params)
    g_params = optax.apply_updates(g_params, updates)
    return (g_params, t_params, s_params, g_opt, t_opt, s_opt), counts, s_losses[-1], g_loss

  def run(key, rows, indices, sizes, lam, table, target, log_inv_delta):
    key_g, key_t, key_s, key_train = jax.random.split(key, 4)
    g_params = generator.init(key_g, jnp.zeros((1, config.noise_dim), jnp.float32))["params"]
    init_disc = lambda kk: discriminator.init(kk, jnp.zeros((1, width), jnp.float32))["params"]  # noqa: E731
    t_params = jax.vmap(init_disc)(jax.random.split(key_t, k))
    s_params = init_disc(key_s)
    state = (g_params, t_params, s_params, optimizer.init(g_params),
             jax.vmap(optimizer.init)(t_params), optimizer.init(s_params))
    history = jnp.full((config.max_iterations, 3), jnp.nan, dtype)

    def cond(carry):
      _, _, step, done, _ = carry
      return (~done) & (step < config.max_iterations)

    def body(carry):
      state, counts, step, _, history = carry
      new_state, new_counts, s_loss, g_loss = iteration(
          state, jax.random.fold_in(key_train, step), rows, indices, sizes, lam)
      counts_after = counts + new_counts
      alpha = counts_after.astype(dtype) @ table
      eps = jnp.min((alpha + log_inv_delta) / orders)
      ok = eps <= target * (1.0 - _EPSILON_SLACK)
      state = jax.tree.map(lambda a, b: jnp.where(ok, a, b), new_state, state)
      row = jnp.stack([eps, s_loss.astype(dtype), g_loss.astype(dtype)])
      history = jnp.where(ok, history.at[step].set(row), history)
      return (state, jnp.where(ok, counts_after, counts), step + ok.astype(jnp.int32), ~ok,
              history)

    carry = (state, jnp.zeros(k + 1, jnp.int32), jnp.zeros((), jnp.int32),
             jnp.zeros((), bool), history)
    state, counts, steps, _, history = jax.lax.while_loop(cond, body, carry)
    return state[0], state[2], counts, steps, history

  return jax.jit(run)


def fit_pate_gan(key: jax.Array, data: Any, config: PateGanConfig,
                 discrete_columns: Sequence[int] | None = None) -> PateGanModel:
  r"""Fits PATE-GAN (Jordon et al. 2019, Algorithm 1; see the module docstring) to ``data``.

  The whole run, including the budget check after every iteration, is one jitted
  ``lax.while_loop``; :math:`\varepsilon`, :math:`\delta` and :math:`\lambda` enter it as
  traced values, so runs differing only in them share one compilation.

  Args:
    key: PRNG key (partitions, initialisation, minibatches, vote noise).
    data: ``[n, d]`` finite numbers with ``n >= num_teachers`` (and ``n >= 2``).
    config: the :class:`PateGanConfig` (``epsilon`` is required).
    discrete_columns: as in :func:`~dpaudit.models.tabular_generators.fit_transform`.

  Returns:
    The :class:`PateGanModel`, with the epsilon spent and the number of iterations.
  """
  _validate.check_key(key)
  _check_config(config, PateGanConfig, "fit_pate_gan")
  data = _check_data(data)
  if data.shape[0] < config.num_teachers:
    raise ValueError(f"num_teachers={config.num_teachers} exceeds the {data.shape[0]} rows of "
                     "data; valid range [1, number of rows] (each teacher needs a partition)")
  transform = fit_transform(data, discrete_columns)
  rows = jnp.asarray(transform.encode(data))
  key_split, key_run = jax.random.split(key)
  parts = teachers.partition(key_split, rows.shape[0], config.num_teachers, "random")
  sizes = jnp.sum(parts.mask, axis=1).astype(jnp.int32)
  dtype = jnp.result_type(float)
  table = jnp.asarray(_log_moments(np.arange(config.num_teachers + 1), config.noise_lambda,
                                   config.max_order), dtype)
  run = _pate_gan_program(transform.layout, _static_config(config), rows.shape[0])
  g_params, s_params, counts, steps, history = run(
      key_run, rows, parts.indices, sizes, jnp.asarray(config.noise_lambda, jnp.float32), table,
      jnp.asarray(config.epsilon, dtype), jnp.asarray(math.log(1.0 / config.delta), dtype))
  steps = int(steps)
  counts = np.asarray(counts, np.int64)
  epsilon, order = pate_epsilon(counts, config.noise_lambda, config.delta, config.max_order)
  history = np.asarray(history, np.float64)[:steps]
  generator, student = _gan_networks(transform.layout, config.gan_config())
  gan = GanModel(generator, g_params, transform, config.gan_config(), history[:, 1:], None,
                 student, s_params)
  return PateGanModel(gan, epsilon, float(config.delta), order, steps, int(counts.sum()), counts,
                      history[:, 0], config)


def sample_pate_gan(key: jax.Array, model: PateGanModel, n: int) -> np.ndarray:
  """``n`` synthetic rows ``[n, d]`` (float64, data units) from a fitted PATE-GAN: the
  generator's :math:`G(z)`, one-hot blocks sampled (as
  :func:`~dpaudit.models.tabular_generators.sample_gan`). Post-processing: no privacy cost.

  Args:
    key: PRNG key.
    model: a :class:`PateGanModel` from :func:`fit_pate_gan`.
    n: number of rows, >= 1.
  """
  _validate.check_key(key)
  if not isinstance(model, PateGanModel):
    raise ValueError(f"model must be a PateGanModel (fit_pate_gan), got {type(model).__name__}")
  return sample_gan(key, model.gan, n)


register_generator("pate_gan", PateGanConfig, fit_pate_gan, sample_pate_gan, replace=True)
