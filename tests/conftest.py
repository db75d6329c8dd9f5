"""Test configuration: estimators are checked in float64 against float64 references.

Tests that exercise float32 behaviour wrap themselves in ``jax.enable_x64(False)``.

In-process tests share the experiments' persistent compilation cache
(``$DPAUDIT_COMPILATION_CACHE_DIR`` or ``~/.cache/dpaudit/jax_compilation_cache``, as
:func:`experiments.common.enable_compilation_cache`): a program that both xdist workers, or a
library test and a CLI subprocess, compile is compiled once.
"""

import jax

from experiments import common

jax.config.update("jax_enable_x64", True)
common.enable_compilation_cache()
