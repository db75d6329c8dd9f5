#!/usr/bin/env bash
# The one command a lent GPU machine (no network) runs, from the repository root:
#   bash tools/device_run.sh [flags for experiments.benchmarks.accelerator]
# (.whl/ is git-ignored: the device call must carry it, e.g. run(carry=[".whl"]); fill it first
# with tools/device_wheels.sh.) Installs those wheels into /tmp/site offline and without
# dependency resolution, so the device's preinstalled JAX/numpy/scipy/... are used, puts them
# first on PYTHONPATH so our pinned flax/optax/chex shadow the device's copies, and runs the
# accelerator suite, writing under $OUT. Exits with the suite's status.
set -euo pipefail
if python3 -m pip --version >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
else  # No pip there: none of these wheels has a .data/ folder, so unpacking them is the same.
  python3 -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall("/tmp/site") for w in sys.argv[1:]]' .whl/*.whl
fi
export PYTHONPATH="/tmp/site:$PWD"
export PYTHONUNBUFFERED=1
exec python3 -m experiments.benchmarks.accelerator --output_dir="${OUT:-out/benchmarks/accelerator}" "$@"
