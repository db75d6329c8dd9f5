"""dpaudit: empirical lower bounds on differential privacy, held against the theory.

Subpackages (each layer imports only those listed before it):

* ``dpaudit.estimators``: statistics of audits (confidence intervals, epsilon lower bounds,
  Renyi cuts, RDP conversion, reconstruction bounds, MIA metrics).
* ``dpaudit.accounting``: theoretical upper bounds (noisy argmax, GNMax).
* ``dpaudit.mechanisms``: randomized mechanisms as pure sampling functions ``f(key, ...)``.
* ``dpaudit.montecarlo``: outcome counts over very many trials in bounded memory.
* ``dpaudit.audits``: audit games joining mechanisms, Monte Carlo and estimators.

Importing dpaudit turns on a persistent compilation cache (:mod:`dpaudit.compilation_cache`:
its directory, the opt-out ``DPAUDIT_COMPILATION_CACHE=off``) as soon as JAX is imported;
modules that need no JAX (``dpaudit.results``) import none.
"""

from dpaudit import compilation_cache as _compilation_cache

_compilation_cache.enable_on_jax_import()

__version__ = "0.1.0"
