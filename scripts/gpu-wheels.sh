#!/usr/bin/env bash
# The wheels the GPU check carries onto a GPU machine whose image lacks them (its own torch and triton stay):
# transformers 5.23 and what it, pytest (the kernel tests) and Pillow (the tests' shared fixtures) need, each
# pinned to the version installed here, where the suite passes; never torch, triton, numpy or torch's own
# dependencies.
# Built for the device image's Python (3.12, manylinux x86_64); pure-Python wheels fit any.
#   bash scripts/gpu-wheels.sh wheels/gpu                   # then: bash scripts/gpu-check.sh OUT --wheels wheels/gpu
#   PYTHON_VERSION=3.13 bash scripts/gpu-wheels.sh DIR      # another image's Python
set -euo pipefail
dir="${1:?usage: bash scripts/gpu-wheels.sh DIR}"
py="${PYTHON_VERSION:-3.12}"
abi="cp${py/./}"
pins="$("${PYTHON:-python3}" - <<'PY'
import re
from importlib import metadata

def closure(*roots):
    """Installed distributions a root needs (its requirements without extras, recursively), by normalised name."""
    seen, todo = {}, list(roots)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        try:
            seen[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # not installed here: a marker for another platform or Python
        for requirement in metadata.requires(name) or []:
            if "extra ==" not in requirement:
                todo.append(re.match(r"[A-Za-z0-9._-]+", requirement).group(0))
    return seen

carried = closure("transformers", "pytest", "pillow")
image_has = closure("torch") | {"triton": None, "numpy": None}  # the image's torch brings these (numpy: its ABI)
print(" ".join(f"{name}=={version}" for name, version in sorted(carried.items()) if name not in image_has))
PY
)"
mkdir -p "$dir"
echo "downloading into $dir for Python $py: $pins"
# shellcheck disable=SC2086  # one argument per pin
"${PYTHON:-python3}" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
  --abi "$abi" --abi abi3 --abi none --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d "$dir" $pins
ls "$dir"
