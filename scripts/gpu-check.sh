#!/usr/bin/env bash
# The prepared GPU check (dg/bench/gpu_check.py): compiled kernel tests, fused vs torch sampling step,
# the full-size 26B-A4B sampler, its passes eager vs graphed, hybrid, a Ray Serve replica per GPU; writes
# OUT_DIR/gpu-check.json.
# Needs a CUDA GPU; at most 6 minutes.
#   bash scripts/gpu-check.sh OUT_DIR                     # exit 0: every part ok, 1: a part failed, 2: no CUDA
#   bash scripts/gpu-check.sh OUT_DIR --wheels DIR        # first install the wheels in DIR over the image's stack
#   bash scripts/gpu-check.sh OUT_DIR --smoke             # the same code on the CPU at tiny shapes
# DIR (or DG_WHEELS=DIR) comes from `bash scripts/gpu-wheels.sh DIR`: they go, without their dependencies and
# without the network, into a scratch folder put first on PYTHONPATH, so the image itself is left as it is.
set -euo pipefail
out="${1:?usage: bash scripts/gpu-check.sh OUT_DIR [--wheels DIR] [--smoke]}"
shift
out="$(realpath -m "$out")"  # relative to where it was called
wheels="${DG_WHEELS:-}"
args=()
while (($#)); do
  case "$1" in
    --wheels) wheels="${2:?--wheels needs a folder}"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
python="${PYTHON:-python3}"
if [[ -n "$wheels" ]]; then
  wheels="$(realpath "$wheels")"
  compgen -G "$wheels/*.whl" > /dev/null || { echo "no wheels in $wheels (make them: bash scripts/gpu-wheels.sh $wheels)" >&2; exit 2; }
  site="$(mktemp -d -t dg-gpu-check-site-XXXXXX)"
  trap 'rm -rf "$site"' EXIT
  "$python" -m pip install --quiet --no-index --no-deps --disable-pip-version-check --target "$site" "$wheels"/*.whl
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" DG_WHEELS="$wheels"
fi
cd "$(dirname "$0")/.."
"$python" -m dg.bench.gpu_check --out "$out" ${args[@]+"${args[@]}"}
