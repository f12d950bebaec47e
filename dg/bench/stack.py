"""What the GPU check runs on: the device, every package version, and whether this Python has what a part imports.

    python -c "from dg.bench.stack import versions; print(versions())"

A GPU image brings its own torch and triton; `scripts/gpu-wheels.sh` makes the wheels of what else the check
needs, and `scripts/gpu-check.sh --wheels DIR` puts them first on PYTHONPATH (DG_WHEELS names the folder), so
the report records exactly the stack it ran with.
"""

import importlib.util
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import torch

from dg.bench.device import peak_bandwidth_gb_s

ROOT = Path(__file__).resolve().parents[2]
# What each part imports beyond torch (modules); a part this Python cannot run is recorded as "missing", not run.
PART_NEEDS = {"kernel_tests": ("pytest", "triton", "PIL", "transformers"), "sampling_step": ("triton",),
              "sampler": ("transformers",), "graphs": ("transformers",), "hybrid": ("transformers",),
              "embedded": ("transformers", "PIL"), "replicas": ("ray", "transformers")}
MIN_TRANSFORMERS = (5, 23)  # DiffusionGemma as dg drives it

def missing_needs(part: str) -> str | None:
    """One line when this Python lacks what `part` imports (or has too old a transformers), else None."""
    lacking = [module for module in PART_NEEDS[part] if importlib.util.find_spec(module) is None]
    if "transformers" in PART_NEEDS[part] and "transformers" not in lacking:
        version = metadata.version("transformers")
        if tuple(int(x) for x in version.split(".")[:2] if x.isdigit()) < MIN_TRANSFORMERS:
            lacking.append(f"transformers >= {'.'.join(map(str, MIN_TRANSFORMERS))} (this one is {version})")
    if not lacking:
        return None
    return (f"needs {', '.join(lacking)}, which this Python lacks: carry wheels "
            f"(bash scripts/gpu-wheels.sh DIR, then bash scripts/gpu-check.sh OUT --wheels DIR)")


def device_info(smoke: bool) -> dict:
    """The GPU the check runs on (the CPU in smoke mode): name, datasheet bandwidth, memory, SMs."""
    if smoke:
        return {"name": f"cpu ({platform.machine()})", "peak_bandwidth_gb_s": None, "peak_bandwidth_source": "unknown"}
    props = torch.cuda.get_device_properties(0)
    peak = peak_bandwidth_gb_s(props.name)
    return {"name": props.name, "peak_bandwidth_gb_s": peak,
            "peak_bandwidth_source": "datasheet" if peak else "unknown",
            "capability": f"{props.major}.{props.minor}", "memory_gib": props.total_memory / 2**30,
            "multiprocessors": props.multi_processor_count, "count": torch.cuda.device_count()}


def installed_packages() -> dict:
    """Every distribution this Python imports, by name: the first on sys.path wins, as an import does (carried
    wheels on PYTHONPATH come before the image's site-packages)."""
    found = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower() not in found:
            found[name.lower()] = dist.version
    return dict(sorted(found.items()))


def versions() -> dict:
    def version(package):
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None

    try:
        git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        commit = git.stdout.strip() if git.returncode == 0 else None
    except OSError:  # no git on the machine
        commit = None
    carried = os.environ.get("DG_WHEELS")
    return {"python": platform.python_version(), "torch": torch.__version__, "triton": version("triton"),
            "transformers": version("transformers"), "cuda": torch.version.cuda, "commit": commit,
            "carried_wheels": sorted(p.name for p in Path(carried).glob("*.whl")) if carried else None,
            "packages": installed_packages()}
