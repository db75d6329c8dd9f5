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
incomplete beta function 1.5-2.7x faster, so the programs built around it (Clopper-Pearson, the
binomial tails, the error-count, PANORAMIA and 2-cut bounds) keep them. The programs whose time
goes to sorted scans and a few solver steps on small batches (the score bounds, the one-run
bounds, the Sison-Glaz intervals and the k-cut bound) take the loop emitters
(``jit(..., fusion_emitters=False)``): measured side by side
(``experiments.benchmarks.estimators``, both emitters in one session) they compile 0.4-1.3 s
faster and their calls take 0.73-1.14x the fusion emitters' time.

The options apply only when the program is compiled for the CPU backend (accelerators compile
as usual), and only to the estimators' own top-level programs: inside a caller's ``jax.jit``
(where JAX refuses compiler options) the estimator is traced into the caller's program and
compiled with the caller's options.
Values are unchanged: no option alters the arithmetic (no fast-math).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax

CPU_COMPILER_OPTIONS: dict[str, Any] = {
    "xla_cpu_prefer_vector_width": 512,
    "xla_disable_hlo_passes": ("while-loop-invariant-code-motion,"
                               "while-loop-expensive-invariant-code-motion"),
}
LOOP_EMITTER_OPTIONS: dict[str, Any] = {**CPU_COMPILER_OPTIONS,
                                        "xla_cpu_use_fusion_emitters": False}


def _traced(args, kwargs) -> bool:
  return any(isinstance(leaf, jax.core.Tracer)
             for leaf in jax.tree_util.tree_leaves((args, kwargs)))


def jit(fun: Callable | None = None, /, *, fusion_emitters: bool = True,
        **jit_kwargs) -> Callable:
  """``jax.jit(fun, **jit_kwargs)``, compiled with :data:`CPU_COMPILER_OPTIONS` (with
  ``fusion_emitters=False``: :data:`LOOP_EMITTER_OPTIONS`) when the default backend is the CPU.
  Usable as ``@jit`` or ``@jit(static_argnames=...)``."""
  if fun is None:
    return functools.partial(jit, fusion_emitters=fusion_emitters, **jit_kwargs)
  options = CPU_COMPILER_OPTIONS if fusion_emitters else LOOP_EMITTER_OPTIONS
  tuned = jax.jit(fun, compiler_options=options, **jit_kwargs)
  plain = jax.jit(fun, **jit_kwargs)

  @functools.wraps(fun)
  def call(*args, **kwargs):
    if jax.default_backend() != "cpu" or _traced(args, kwargs):
      return plain(*args, **kwargs)
    try:
      return tuned(*args, **kwargs)
    except ValueError as error:  # inside a caller's trace with constant arguments only
      if "compiler_options" not in str(error):
        raise
      return plain(*args, **kwargs)

  call.tuned, call.plain, call.compiler_options = tuned, plain, options
  return call
