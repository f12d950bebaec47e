#!/usr/bin/env bash
# The prepared GPU check (dg/bench/gpu_check.py): compiled kernel tests, fused vs torch sampling step,
# the full-size 26B-A4B sampler; writes OUT_DIR/gpu-check.json. Needs a CUDA GPU; at most 8 minutes.
#   bash scripts/gpu-check.sh OUT_DIR            # exit 0: every part ok, 1: a part failed, 2: no CUDA
#   bash scripts/gpu-check.sh OUT_DIR --smoke    # the same code on the CPU at tiny shapes
set -euo pipefail
out="${1:?usage: bash scripts/gpu-check.sh OUT_DIR [--smoke]}"
shift
out="$(realpath -m "$out")"  # relative to where it was called
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" -m dg.bench.gpu_check --out "$out" "$@"
