#!/usr/bin/env bash
# The one command a lent GPU machine (no network) runs, from the repository root:
#   bash tools/device_run.sh [flags for experiments.benchmarks.accelerator]
# (.whl/ is git-ignored: the device call must carry it, e.g. run(carry=[".whl"]); fill it first
# with tools/device_wheels.sh.) Installs those wheels (tools/device_install.sh) and runs the
# accelerator suite, writing under $OUT. Exits with the suite's status.
set -euo pipefail
source tools/device_install.sh
exec python3 -m experiments.benchmarks.accelerator --output_dir="${OUT:-out/benchmarks/accelerator}" "$@"
