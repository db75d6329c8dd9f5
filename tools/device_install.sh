#!/usr/bin/env bash
# Sourced by the device scripts (tools/device_run.sh, tools/device_uniaud_paper.sh) on a lent GPU
# machine (no network), from the repository root: installs the wheels of .whl/ (filled by
# tools/device_wheels.sh, carried by the call) into /tmp/site offline and without dependency
# resolution, so the device's preinstalled JAX/numpy/scipy/... are used, and puts them first on
# PYTHONPATH so our pinned flax/optax/chex shadow the device's copies.
if python3 -m pip --version >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
else  # No pip there: none of these wheels has a .data/ folder, so unpacking them is the same.
  python3 -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall("/tmp/site") for w in sys.argv[1:]]' .whl/*.whl
fi
export PYTHONPATH="/tmp/site:$PWD"
export PYTHONUNBUFFERED=1
