#!/usr/bin/env bash
# One call on a lent GPU machine, from the repository root (carry .whl/, see tools/device_run.sh):
#   bash tools/device_uniaud_paper.sh [ACCELERATOR_S] [TARGETS_S] [GRID_S]
# 1. the accelerator suite with a short budget (its results under $OUT/accelerator);
# 2. UniAud's Table IV cells (launch/sweeps/uniaud_paper.py's settings: Case I, d = C = 1000,
#    q = 0.1, m = 2000) at the paper's model width, a 2-layer ReLU MLP with 1e5 hidden units,
#    gaussian and orthogonal canaries with (uniaud) and without (one_run) comparison; cells are
#    stored as they finish, so a run cut at its limit keeps them. Logs, results and cells come
#    back as $OUT/uniaud_paper.tgz (a call returns few files, at most two folders down).
set -uo pipefail
source tools/device_install.sh
out="${OUT:-out/device}"
mkdir -p "$out/accelerator" "$out/uniaud_paper"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
timeout "${1:-200}"s python3 -m experiments.benchmarks.accelerator \
  --output_dir="$out/accelerator" --budget_s="$(( ${1:-200} - 40 ))" 2>&1 | tail -n 60
paper=(--canaries_only --canary_dim=1000 --num_canary_classes=1000 --hidden_sizes=100000
       --epochs=40 --learning_rate=1.0 --num_canaries=2000 --batch_size=200
       --physical_batch_size=200 --noplot)
# The targets' cells first (gaussian canaries at eps = 8 and inf, three seeds), then the rest of
# the grid at one seed, each run with its own limit and output folder.
timeout "${2:-220}"s python3 -m experiments.dpsgd_audit "${paper[@]}" --epsilons=8,inf \
  --audits=uniaud:gaussian,one_run:gaussian --num_repeats=3 \
  --output_dir="$out/uniaud_paper/targets" 2>&1 | tee "$out/uniaud_paper/targets.log" | tail -n 40
timeout "${3:-120}"s python3 -m experiments.dpsgd_audit "${paper[@]}" --epsilons=1,2,4,8,inf \
  --audits=uniaud:gaussian,one_run:gaussian,uniaud:orthogonal,one_run:orthogonal \
  --num_repeats=1 --output_dir="$out/uniaud_paper/grid" 2>&1 | tee "$out/uniaud_paper/grid.log" \
  | tail -n 40
tar -czf "$out/uniaud_paper.tgz" -C "$out" uniaud_paper && rm -rf "$out/uniaud_paper"
ls -la "$out" "$out/accelerator"
