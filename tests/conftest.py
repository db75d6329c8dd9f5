"""Test configuration: estimators are checked in float64 against float64 references.

Tests that exercise float32 behaviour wrap themselves in ``jax.enable_x64(False)``.
"""

import jax

jax.config.update("jax_enable_x64", True)
