"""How the estimators are compiled: ``jax.jit`` plus XLA:CPU options measured to help them.

The estimators are long elementwise programs (the incomplete beta function, Taylor steps on
it) inside small while loops. Measured on the 2-core CPU of this project, on 2e4 and 2e6
Clopper-Pearson limits (``experiments.benchmarks.estimators``):

* ``xla_cpu_prefer_vector_width=512`` lets LLVM use 512-bit vectors where the CPU has them
  (AVX-512); the solvers run about 25% faster. Where the CPU has no such registers LLVM keeps
  the widths it has.
* Disabling XLA's while-loop invariant code motion keeps each solver step as one program: the
  pass hoists every part of a step that depends only on the counts (Stirling terms, series
  coefficients) out of the loop, as about 50 extra kernels and 40 loop-carried arrays. Without
  it compilation takes about 25% less time (1.04 s -> 0.79 s for ``clopper_pearson``) and the
  2-3 steps run no slower (the hoisted work is a few percent of a step).

A third option is chosen per program. XLA:CPU emits each fused kernel with its MLIR fusion
emitters by default, or with its older loop emitters (``xla_cpu_use_fusion_emitters=false``),
which compile faster (0.3-1.3 s per program here). The fusion emitters' kernels run the
incomplete beta function 1.5-2.7x faster (profiled per kernel on 2026-11-24: not in the series
or the fraction, which run as fast either way, but in the kernels whose output XLA places over
one of their inputs, the solver's state and the starts; the loop emitters vectorise their
loops behind a run-time check that output and inputs do not overlap, and these run the scalar
loop, 7-8x slower), so the programs built around it (Clopper-Pearson, the
binomial tails, PANORAMIA and 2-cut bounds) keep them (three of them only for some batch sizes,
below). The error-count bound takes the loop emitters: measured on 2026-11-24, first calls in
fresh processes on 1e6 tests compiled in 1.29-2.20 s (median 1.57 s) against 1.75-2.53 s (2.18 s)
with the fusion emitters, and its calls stay 5.6x (1e4 tests) and 12x (1e6) faster than scipy's
(``DPAUDIT_CPU_EMITTERS=loop python -m experiments.benchmarks.estimators --only=error_counts``),
where the fusion emitters were 9.5-12.5x and 12.7-19.2x. The programs whose time
goes to sorted scans and a few solver steps on small batches (the score bounds, the one-run
bounds, the Sison-Glaz intervals and the k-cut bound) take the loop emitters
(``jit(..., fusion_emitters=False)``): measured side by side
(``experiments.benchmarks.estimators``, both emitters in one session) they compile 0.4-1.3 s
faster and their calls take 0.73-1.14x the fusion emitters' time. The score and one-run bounds
keep the loop emitters only above :data:`SMALL_ELEMENTS`: below it their first calls come from
the host paths (:func:`first_call`) while the program compiles in the background, so its compile
time is hidden, and the fusion emitters' calls were 1.25x faster on 1e3 canaries.

Three programs choose by the size of the batch (:class:`Emitters`). Measured on 2026-11-24, on
a machine about 30% slower to compile than on earlier days, each first call in a fresh process
(as a user's script makes it), both emitters alternately, four rounds (medians, ranges;
``python -m experiments.benchmarks.first_calls`` measures every estimator this way):

| program, batch | compile, loop emitters | compile, fusion | call, loop | call, fusion |
|---|---|---|---|---|
| ``clopper_pearson``, 1e3 pairs | 1.60 s (1.39-1.75) | 2.14 s (2.04-2.31) | 1.1 ms | 0.7 ms |
| ``clopper_pearson``, 1e4 pairs | 1.70 s (1.53-1.72) | 2.08 s (2.02-2.39) | 6.8 ms | 2.7 ms |
| 2-cut, 1e6 count pairs | 1.52 s (1.47-1.61) | 1.97 s (1.86-2.14) | 589 ms | 339 ms |
| PANORAMIA, 1e6 points | 1.73 s (1.57-2.05) | 2.45 s (2.25-2.96) | 731 ms | 557 ms |

Measured the same way on 2026-11-24 (a second session, a busier machine), four rounds:

| program, batch | compile, loop emitters | compile, fusion | call, loop | call, fusion |
|---|---|---|---|---|
| ``clopper_pearson``, 1e5 pairs | 2.12 s (1.73-2.46) | 2.91 s (2.57-3.21) | 50 ms | 31 ms |

So ``clopper_pearson`` takes the loop emitters below :data:`LARGE_BATCH` pairs, where a call
takes at most tens of milliseconds either way (still 1.65-7.8x faster than scipy up to 1e5 pairs
in the day's full benchmark runs, whose target is 1x), and the fusion emitters from there on, where
calls are 2-2.5x faster (a million pairs, whose target is 10x scipy: 5.4-7.5x with the loop
emitters). The 2-cut and PANORAMIA bounds take the loop emitters from :data:`LARGE_BATCH` elements
on, where they stay 1.8-1.9x (PANORAMIA) and 5-7x (2-cut) faster than scipy, and the fusion emitters
below (PANORAMIA on 1e4 points is only 1.4-1.8x faster than scipy with them, 1.1x with the loop
emitters).

``clopper_pearson`` and the binomial tails also switch off XLA's tree rewriting of reductions
(``jit(tree_reductions=False)``). Their only reductions are the any/all tests that choose the
branches of a chunk, and the pass makes each of them three kernels (two reduce-windows and a
reduce) where one serves: 8 kernels fewer in the million-pair Clopper-Pearson program, whose
compile time goes mostly to a fixed cost per kernel (about 9 ms of MLIR lowering and 10 ms of
LLVM per kernel, from XLA's own timers, ``TF_CPP_VMODULE=fusion_compiler=1,ir_compiler=2``).
Measured on 2026-11-24 in fresh processes, six rounds interleaved with the code before: 2.11 s
median against 2.20 s; calls on a million pairs as fast, and bit-identical. The score, error
count, PANORAMIA, one-run (from scores) and 2-cut bounds do the same: besides those tests they
reduce only integer counts and take maxima and minima, whose values no order of reduction
changes (2-cut on a million count pairs: 95 kernels -> 83; PANORAMIA on 1e4 points: 91 -> 76).
The Sison-Glaz intervals and the k-cut bound built on them do it too (113 kernels -> 101 for
the k-cut bound on 100 rows of 10 cells). They also sum at most 64 Poisson weights per window,
whose order of summation then changes: on 40 random batches of 1-11 rows, 2-7 cells and totals
of 5 to 1,000, 410 of 2,658 interval ends moved, by at most 6.7e-15 relative, and 65 of 789
k-cut bounds, by at most 7.4e-14; on 40 batches of 50 rows of up to 29 cells with totals up to
1e7 nothing moved.

Two ways of writing the programs keep their kernels few, on the same grounds: XLA:CPU fuses an
expensive operation into its users only when it can fuse it into all of them, and a division
of two arrays with more than one user never, so the estimators write such quotients as
products by a reciprocal (:func:`dpaudit.estimators._elementary.quotient`: 112 kernels -> 78
for ``clopper_pearson`` on a million pairs, with the tail's branches forming their own
inputs); and a cumulative sum over millions of scores, which XLA:CPU compiles as a tree of a
dozen reduce-window, pad and slice kernels, comes from the host sort's callback instead
(:func:`dpaudit.estimators._sorting.descending_cumulative`).

The options apply only when the program is compiled for the CPU backend (accelerators compile
as usual), and only to the estimators' own top-level programs: inside a caller's ``jax.jit``
(where JAX refuses compiler options) the estimator is traced into the caller's program and
compiled with the caller's options.
Values are unchanged: no option alters the arithmetic (no fast-math).
``$DPAUDIT_CPU_EMITTERS`` (``fusion`` or ``loop``; ``auto`` or unset for the choices above)
forces one kind of emitter on every program (:func:`forced_emitters`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

CPU_COMPILER_OPTIONS: dict[str, Any] = {
    "xla_cpu_prefer_vector_width": 512,
    "xla_disable_hlo_passes": ("while-loop-invariant-code-motion,"
                               "while-loop-expensive-invariant-code-motion"),
}
LOOP_EMITTERS_AVAILABLE = jax.__version_info__ < (0, 11)
"""Whether XLA:CPU still has its loop emitters. jaxlib 0.11 removed them: it rejects the option
``xla_cpu_use_fusion_emitters`` ("No such compile option"), so there every program takes the
fusion emitters and :data:`LOOP_EMITTER_OPTIONS` is :data:`CPU_COMPILER_OPTIONS`."""
LOOP_EMITTER_OPTIONS: dict[str, Any] = (
    {**CPU_COMPILER_OPTIONS, "xla_cpu_use_fusion_emitters": False} if LOOP_EMITTERS_AVAILABLE
    else dict(CPU_COMPILER_OPTIONS))
TREE_REDUCTION_PASS = "tree_reduction_rewriter"
"""XLA's pass that splits each large reduction into reduce-windows and a final reduce (three
kernels instead of one), which ``jit(tree_reductions=False)`` disables."""


def without_tree_reductions(options: dict[str, Any]) -> dict[str, Any]:
  """``options`` with :data:`TREE_REDUCTION_PASS` disabled as well."""
  return {**options, "xla_disable_hlo_passes": (options["xla_disable_hlo_passes"] + ","
                                                + TREE_REDUCTION_PASS)}
LARGE_BATCH = 1 << 18
"""Elements (262,144) of the largest argument from which a batch is large for
:class:`Emitters` (1e6 count pairs or points are large, 1e4 are not)."""


def default_platform() -> str:
  """The platform JAX puts new computations on: that of ``jax.default_device`` when one is set
  (a device or a platform name), else the default backend's. The estimators choose their CPU
  paths (NumPy sorts in host callbacks, chunked solvers, the XLA:CPU options here) by it, so on
  a machine with a GPU a caller gets the CPU paths on the host inside
  ``with jax.default_device(jax.devices("cpu")[0])``, and the device's own elsewhere."""
  device = jax.config.jax_default_device
  if device is None:
    return jax.default_backend()
  return device if isinstance(device, str) else device.platform


def platform(args=(), kwargs=None) -> str:
  """The platform a program called on ``args`` runs on: the device of the first argument that
  is a JAX array committed to one (``jax.device_put(x, device)``), else
  :func:`default_platform`."""
  for leaf in jax.tree_util.tree_leaves((args, kwargs or {})):
    if (isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer)
        and leaf.committed):
      return next(iter(leaf.devices())).platform
  return default_platform()


def _traced(args, kwargs) -> bool:
  return any(isinstance(leaf, jax.core.Tracer)
             for leaf in jax.tree_util.tree_leaves((args, kwargs)))


def _largest_size(args, kwargs) -> int:
  """Elements of the largest array among the arguments (0 when there is none)."""
  return max((math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves((args, kwargs))
              if hasattr(leaf, "shape")), default=0)


class Emitters(NamedTuple):
  """A choice of emitters by batch size: the fusion emitters where the largest array argument
  has fewer than ``threshold`` elements (``fusion_below=True``) or at least that many
  (``fusion_below=False``), the loop emitters otherwise."""
  threshold: int
  fusion_below: bool

  def fusion(self, size: int) -> bool:
    return (size < self.threshold) == self.fusion_below


def fusion_from(threshold: int) -> Emitters:
  """The fusion emitters for batches of ``threshold`` elements or more (their run time
  matters more than the compile time), the loop emitters below."""
  return Emitters(threshold, fusion_below=False)


def fusion_below(threshold: int) -> Emitters:
  """The fusion emitters below ``threshold`` elements, the loop emitters from there on (for
  programs whose large batches keep their run-time target with the loop emitters, and whose
  small ones need the fusion emitters' speed)."""
  return Emitters(threshold, fusion_below=True)


EMITTERS_VARIABLE = "DPAUDIT_CPU_EMITTERS"
EMITTER_CHOICES = ("auto", "fusion", "loop")


def argument(x, dtype=None):
  """``x`` as an argument of a compiled estimator program: a JAX array (a tracer included) as
  it is (cast to ``dtype`` if given), anything else as a NumPy array. The program's call moves
  NumPy arguments to the device with the others in one step, where ``jnp.asarray`` dispatches
  a conversion of each first: measured on 2026-11-25, a small program's call with two arrays of
  1e4 floats and two scalars took 268 us with ``jnp.asarray`` arguments and 35 us with NumPy
  ones, against estimator calls of 0.3-3 ms on 1e3-1e4 elements."""
  if isinstance(x, jax.Array):
    return x if dtype is None else x.astype(dtype)
  return np.asarray(x) if dtype is None else np.asarray(x, dtype)


def float_arguments(*xs) -> tuple:
  """:func:`argument` of each of ``xs`` in the default float dtype (float64 with
  ``jax_enable_x64``, else float32)."""
  dtype = jnp.result_type(float)
  return tuple(argument(x, dtype) for x in xs)


def forced_emitters() -> str | None:
  """``"fusion"`` or ``"loop"`` when ``$DPAUDIT_CPU_EMITTERS`` forces one for every estimator
  program, None for the choice per program and batch size (unset, empty or ``"auto"``). Where
  run time matters more than compile time (long sweeps, whose programs a persistent
  compilation cache keeps), ``fusion`` gives every program the faster-running kernels."""
  value = os.environ.get(EMITTERS_VARIABLE, "").strip().lower()
  if value in ("", "auto"):
    return None
  if value not in EMITTER_CHOICES:
    raise ValueError(f"${EMITTERS_VARIABLE}={value!r} is not one of {', '.join(EMITTER_CHOICES)}")
  return value


def jit(fun: Callable | None = None, /, *, fusion_emitters: bool | Emitters = True,
        tree_reductions: bool = True, **jit_kwargs) -> Callable:
  """``jax.jit(fun, **jit_kwargs)``, compiled with :data:`CPU_COMPILER_OPTIONS` (loop
  emitters: :data:`LOOP_EMITTER_OPTIONS`) when the call runs on a CPU (:func:`platform`).
  ``fusion_emitters`` is True (fusion emitters), False (loop emitters) or an :class:`Emitters`
  choice by the size of the largest array argument (:func:`fusion_from`,
  :func:`fusion_below`). ``tree_reductions=False`` also disables XLA's tree rewriting of
  reductions (:func:`without_tree_reductions`), for programs whose only reductions are the
  any/all tests of branch skipping, integer sums, maxima and minima: each is then one kernel
  instead of three, and no value can change. Float sums keep the pass (the order of summation
  of a long sum is part of its accuracy), but for short ones (the Sison-Glaz intervals' sums
  of at most 64 weights, whose values move by a few units in the last place without it).
  Usable as ``@jit`` or ``@jit(static_argnames=...)``."""
  if fun is None:
    return functools.partial(jit, fusion_emitters=fusion_emitters,
                             tree_reductions=tree_reductions, **jit_kwargs)
  fusion_options, loop_options = CPU_COMPILER_OPTIONS, LOOP_EMITTER_OPTIONS
  if not tree_reductions:
    fusion_options = without_tree_reductions(fusion_options)
    loop_options = without_tree_reductions(loop_options)
  fusion = jax.jit(fun, compiler_options=fusion_options, **jit_kwargs)
  loop = jax.jit(fun, compiler_options=loop_options, **jit_kwargs)
  plain = jax.jit(fun, **jit_kwargs)

  def options_for(*args, **kwargs) -> dict[str, Any]:
    """The compiler options this call's CPU program takes."""
    forced = forced_emitters()
    if forced is not None:
      chosen = forced == "fusion"
    elif isinstance(fusion_emitters, Emitters):
      chosen = fusion_emitters.fusion(_largest_size(args, kwargs))
    else:
      chosen = fusion_emitters
    return fusion_options if chosen else loop_options

  def tuned(*args, **kwargs):
    """The CPU program with the options of :func:`options_for`."""
    chosen = fusion if options_for(*args, **kwargs) is fusion_options else loop
    return chosen(*args, **kwargs)

  @functools.wraps(fun)
  def call(*args, **kwargs):
    if _traced(args, kwargs) or platform(args, kwargs) != "cpu":
      return plain(*args, **kwargs)
    try:
      return tuned(*args, **kwargs)
    except ValueError as error:  # inside a caller's trace with constant arguments only
      if "compiler_options" not in str(error):
        raise
      return plain(*args, **kwargs)

  call.tuned, call.plain, call.fusion, call.loop = tuned, plain, fusion, loop
  call.options_for = options_for
  return call


# --- Bucketed sizes -------------------------------------------------------------------------
#
# XLA compiles one program per input shape. Padding each batch to a power of two lets one
# compiled program serve every size in its bucket: a script that calls an estimator on 1000,
# 1001 and 1002 pairs compiles once, not three times, and a persistent cache entry serves every
# later run whose sizes fall in the bucket. At most half of a padded batch is padding (on a
# million elements, 4.9%); below MIN_BUCKET every size shares one program.

MIN_BUCKET = 128
"""The smallest bucket: every batch of at most this many elements takes one program."""


def bucket_size(n: int) -> int:
  """The bucket of a batch of ``n`` elements: the least power of two ``>= max(n, MIN_BUCKET)``.

  >>> bucket_size(1000), bucket_size(1024), bucket_size(1025), bucket_size(3)
  (1024, 1024, 2048, 128)
  """
  return max(MIN_BUCKET, 1 << max(0, int(n) - 1).bit_length())


def _host_array(x) -> bool:
  """Whether ``x`` can be padded on the host without a device program: a NumPy value, a
  Python scalar, or a JAX array on a CPU (viewed in place)."""
  if isinstance(x, jax.core.Tracer):  # an output inside a caller's trace (constant inputs)
    return False
  return not isinstance(x, jax.Array) or next(iter(x.devices())).platform == "cpu"


def pad_edge(x, size: int, axis: int = -1):
  """``x`` padded along ``axis`` to ``size`` by repeating its last element there (a copy of a
  real input is always a valid input, whatever the estimator's domain). NumPy in, NumPy out
  (a CPU JAX array is viewed as NumPy); a JAX array on an accelerator is padded there."""
  axis = axis % max(np.ndim(x), 1)
  extra = size - np.shape(x)[axis]
  if extra < 0:
    raise ValueError(f"size={size} is smaller than the array's {np.shape(x)[axis]} elements")
  widths = [(0, 0)] * np.ndim(x)
  widths[axis] = (0, extra)
  if _host_array(x):
    x = np.asarray(x)
    return x if extra == 0 else np.pad(x, widths, mode="edge")
  return x if extra == 0 else jnp.pad(x, widths, mode="edge")


def _cut(y, size: int, shape: tuple):
  """The first ``size`` rows of ``y`` (a program's output over a padded batch) reshaped to
  ``shape`` plus ``y``'s trailing axes. On a CPU the cut is a NumPy view copied into a new
  array, so that no new size compiles a slicing program."""
  if _host_array(y):
    return to_device(np.asarray(y)[:size].reshape(shape + np.shape(y)[1:]))
  return y[:size].reshape(shape + y.shape[1:])


def elementwise(call: Callable, *arrays) -> Any:
  """``call(*arrays)`` for an elementwise program (each element's result depends only on its
  own inputs), with the arrays broadcast, flattened and padded to their :func:`bucket_size`,
  so that one compiled program serves every size in a bucket; the outputs (a pytree of arrays
  whose leading axis is the flat batch) are cut back and reshaped to the broadcast shape.
  Inside a trace ``call`` sees the arrays as they are (the caller's program fixes the shape).

  >>> import jax.numpy as jnp
  >>> elementwise(lambda a, b: a * b, jnp.arange(3.0), 2.0).tolist()
  [0.0, 2.0, 4.0]
  """
  if _traced(arrays, {}):
    return call(*arrays)
  shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
  size = math.prod(shape)
  flat = []
  for a in arrays:
    if _host_array(a):
      a = np.broadcast_to(np.asarray(a), shape).reshape(-1)
    else:
      a = jnp.broadcast_to(a, shape).reshape(-1)
    flat.append(pad_edge(a, bucket_size(size), axis=0))
  out = call(*flat)
  return jax.tree_util.tree_map(lambda y: _cut(y, size, shape), out)


# --- First calls on the host ----------------------------------------------------------------
#
# A compiled estimator program takes 1-2 s to compile on a CPU, and even a persistent cache
# entry takes 0.3-0.8 s to reach (JAX traces and lowers the program to find its key, then loads
# it). So the first call on a small input is answered by the estimator's exact NumPy/scipy path
# while the program compiles on a background thread; calls after the compile take the program.
# Both paths are exact (tested against each other and against the references), but not
# bit-identical: they agree to the estimators' documented accuracy. ``$DPAUDIT_FIRST_CALLS``:
# ``auto`` (default), ``compiled`` (always the program: bit-for-bit reproducible results, the
# tests' setting) or ``host`` (always the host path where one exists, and no background compile).

SMALL_ELEMENTS = 1 << 14
"""Largest input (elements of the largest array) whose first call the host path answers."""
FIRST_CALLS_VARIABLE = "DPAUDIT_FIRST_CALLS"
FIRST_CALLS_CHOICES = ("auto", "compiled", "host")
MAX_PENDING_COMPILES = 4
"""Background compiles queued at once; beyond these a first call is answered on the host and its
program compiled at a later call."""

_compiles: dict[Any, Any] = {}  # program key -> Future of its background compile
host_calls = [0]
"""How many calls the host paths answered in this process (read by the first-call benchmark)."""
_compile_lock = threading.Lock()
_executor = None
_deferred = threading.local()  # .requests: compiles asked for inside compiles_after(), or None


def first_calls_mode() -> str:
  """``$DPAUDIT_FIRST_CALLS``: ``auto`` (unset or empty), ``compiled`` or ``host``."""
  value = os.environ.get(FIRST_CALLS_VARIABLE, "").strip().lower() or "auto"
  if value not in FIRST_CALLS_CHOICES:
    raise ValueError(f"${FIRST_CALLS_VARIABLE}={value!r} is not one of "
                     f"{', '.join(FIRST_CALLS_CHOICES)}")
  return value


def _leaf_key(leaf) -> Any:
  """What of one argument decides its compiled program: an array's dtype and bucketed shape, a
  float's type (floats are passed traced), any other value itself (static or structural)."""
  if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
    return (str(leaf.dtype), tuple(bucket_size(d) for d in leaf.shape))
  if isinstance(leaf, float):
    return float
  return (type(leaf), leaf)


def program_key(compiled: Callable, args: tuple) -> Any:
  """The key under which :func:`first_call` tracks the program ``compiled(*args)`` compiles."""
  leaves, tree = jax.tree_util.tree_flatten(args)
  return (compiled, tree, tuple(_leaf_key(leaf) for leaf in leaves),
          bool(jax.config.jax_enable_x64), forced_emitters())


def _compile_in_background(compiled: Callable, args: tuple, x64: bool) -> None:
  with jax.enable_x64(x64):
    jax.block_until_ready(compiled(*args))


def _submit(key, compiled: Callable, args: tuple) -> None:
  global _executor
  import concurrent.futures
  with _compile_lock:
    if key in _compiles:
      return
    pending = sum(not f.done() for f in _compiles.values())
    if pending >= MAX_PENDING_COMPILES:
      return
    if _executor is None:
      _executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dpaudit-compile")
    _compiles[key] = _executor.submit(_compile_in_background, compiled, args,
                                      bool(jax.config.jax_enable_x64))


@contextlib.contextmanager
def compiles_after():
  """Background compiles asked for inside the block start when it ends, so that an entry point
  making several first calls (the front door; a host path calling other estimators) runs its host
  paths with the interpreter to itself: a compile traces its program in Python, and shares the
  interpreter lock with whatever runs beside it. Nested blocks defer to the outermost."""
  if getattr(_deferred, "requests", None) is not None:
    yield
    return
  _deferred.requests = []
  try:
    yield
  finally:
    requests, _deferred.requests = _deferred.requests, None
    for request in requests:
      _submit(*request)


def first_call(compiled: Callable, host: Callable | None, args: tuple, size: int) -> Any:
  """``compiled(*args)`` once its program is compiled in this process, ``host(*args)`` before.

  The host path (an exact NumPy/scipy implementation returning NumPy values) answers when
  ``size`` (elements of the largest input) is at most :data:`SMALL_ELEMENTS`, the call is not
  traced and runs on a CPU, and the program for these argument shapes (:func:`program_key`)
  has not finished compiling here; the call then starts that compile on a background thread
  (which also fills the persistent compilation cache), once the host path has answered
  (:func:`compiles_after`). ``$DPAUDIT_FIRST_CALLS`` overrides
  (:func:`first_calls_mode`). Host results come back as JAX arrays, as the program's do."""
  mode = first_calls_mode()
  if (host is None or mode == "compiled" or size > SMALL_ELEMENTS or _traced(args, {})
      or platform(args) != "cpu"):
    return compiled(*args)
  if mode == "host":
    host_calls[0] += 1
    return _as_jax(host(*args))
  key = program_key(compiled, args)
  future = _compiles.get(key)
  if future is not None and future.done():
    return compiled(*args)
  host_calls[0] += 1
  with compiles_after():  # the host path first (it may make first calls of its own)
    out = _as_jax(host(*args))
    if future is None:
      _deferred.requests.append((key, compiled, args))
  return out


def to_device(y) -> jax.Array:
  """A NumPy value as a JAX array on the default device, without compiling anything.
  (``jnp.asarray`` of a NumPy array compiles a small staging program for each new shape, in
  jax 0.10: a compile per call for inputs of new sizes.)"""
  return jax.device_put(np.asarray(y))


def _as_jax(out):
  """A host path's NumPy result as JAX arrays in the default float dtype where floating."""
  dtype = jnp.result_type(float)

  def convert(y):
    y = np.asarray(y)
    return to_device(y.astype(dtype) if np.issubdtype(y.dtype, np.floating) else y)
  return jax.tree_util.tree_map(convert, out)
