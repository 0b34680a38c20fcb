"""Hold N GiB of GPU memory until killed: "another process on the GPU" for the tune's gpu-memory
case (guide 000: the fraction applies to the whole GPU, so 0.92 cannot start beside it).

    python3 bench/gpu/hog.py GIB [READY_FILE]     (writes READY_FILE once the memory is held)

Plain allocations (cudaMalloc through PyTorch's allocator), never managed memory. Without CUDA
(a dry run against the simulated engine) it holds nothing and says so; the READY_FILE still
carries GIB so the stand-in engine can simulate the same shortage.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    gib = float(argv[0])
    ready = Path(argv[1]) if len(argv) > 1 else None
    held = None
    try:
        import torch

        if torch.cuda.is_available():
            held = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda")
            held.fill_(1)  # touch it: the pages are really taken
            torch.cuda.synchronize()
    except ImportError:
        pass
    print(
        f"hog: holding {gib:g} GiB of GPU memory" if held is not None else f"hog: no CUDA here; simulating {gib:g} GiB",
        flush=True,
    )
    if ready is not None:
        ready.write_text(f"{gib:g}\n")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
