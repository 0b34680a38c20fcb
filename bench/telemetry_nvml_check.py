"""Print what the telemetry NVML sampler reads, to check it on a GPU machine.

    python bench/telemetry_nvml_check.py [--samples 10] [--interval 0.1]

Loads harness/telemetry/nvml.py by path (only the standard library and nvidia-ml-py are needed,
not the rest of the harness), prints the driver, each GPU's name/UUID/memory, then samples like a
run's window would and prints the `gpu_memory` block and the cost of one sample. Exit 0 with
"available: false" on a machine without GPUs: that is the normal outcome there.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import sys
import time
from types import ModuleType

HERE = pathlib.Path(__file__).resolve().parent
GIB = 1 << 30


def load_nvml_module() -> ModuleType:
    path = HERE.parent / "harness" / "telemetry" / "nvml.py"
    spec = importlib.util.spec_from_file_location("harness_telemetry_nvml", path)
    assert spec is not None and spec.loader is not None  # a .py file path always has a spec
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--interval", type=float, default=0.1)
    args = ap.parse_args()
    nvml = load_nvml_module()
    sampler = nvml.NvmlSampler()
    reason = sampler.open()
    if reason:
        print(json.dumps({"available": False, "reason": reason}))
        return 0
    print(f"driver {sampler.driver}, {len(sampler.devices)} GPU(s)")
    for dev, cur in zip(sampler.devices, sampler.read(), strict=True):
        print(
            f"  [{dev['index']}] {dev['name']} {dev['uuid']}: used {cur['used_bytes'] / GIB:.2f} GiB"
            f" of {cur['total_bytes'] / GIB:.2f} GiB"
        )
    sampler.reset_window()
    costs = []
    for _ in range(args.samples):
        t = time.perf_counter()
        sampler.sample()
        costs.append((time.perf_counter() - t) * 1e3)
        time.sleep(args.interval)
    costs.sort()
    print(
        f"sample cost: median {costs[len(costs) // 2]:.3f} ms, max {costs[-1]:.3f} ms "
        f"({len(sampler.devices)} GPU(s) per sample)"
    )
    print(json.dumps(sampler.block(), indent=1))
    sampler.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
