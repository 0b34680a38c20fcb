"""LoRA adapters in the simulated engine: GPU slots, a CPU cache, and what a load costs.

vLLM serves adapters by name (`--enable-lora --lora-modules name=path`): a batch may hold
requests of at most `--max-loras` distinct adapters (a waiting request whose adapter does not fit
is skipped, later ones may run), each active adapter occupies one of `max_loras` GPU slots, and
adapters are kept in an LRU cache of `--max-cpu-loras` in host memory. Activating an adapter
that is not in a GPU slot evicts the least recently used idle slot and costs a copy from host
memory (`--sim-lora-swap-ms`) or, when it is not in the host cache either, a load from disk
(`--sim-lora-load-ms`): the step that admits it takes that much longer, so cold loads and slot
thrashing show up in TTFT. `vllm:lora_requests_info` reports running and waiting adapters.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass
class LoraConfig:
    modules: dict[str, str]  # name -> path (the path is only echoed in /v1/models)
    max_loras: int = 1
    max_cpu_loras: int | None = None  # default: max_loras (vLLM)
    load_s: float = 0.05
    swap_s: float = 0.005

    @property
    def cpu_slots(self) -> int:
        return max(self.max_cpu_loras or self.max_loras, self.max_loras)


def parse_modules(items: list[str]) -> dict[str, str]:
    """`name=path` (vLLM's form; a JSON object per item is accepted too); ValueError naming the item."""
    import json

    out: dict[str, str] = {}
    flat: list[str] = []
    for item in items:  # a sweep file's list value arrives as one JSON array
        if item.lstrip().startswith("["):
            try:
                flat += [x if isinstance(x, str) else json.dumps(x) for x in json.loads(item)]
            except (ValueError, TypeError):
                raise ValueError(f"argument --lora-modules: {item!r} is not a JSON list of name=path") from None
        else:
            flat.append(item)
    for item in flat:
        if item.lstrip().startswith("{"):
            try:
                obj = json.loads(item)
            except ValueError:
                raise ValueError(f"argument --lora-modules: {item!r} is not name=path or a JSON object") from None
            name, path = obj.get("name"), obj.get("path")
        else:
            name, sep, path = item.partition("=")
            if not sep:
                raise ValueError(f"argument --lora-modules: {item!r} is not name=path")
        if not name or not path:
            raise ValueError(f"argument --lora-modules: {item!r} needs a name and a path")
        out[str(name)] = str(path)
    return out


class LoraSlots:
    """GPU slots (LRU over idle adapters) and the host-memory cache behind them."""

    def __init__(self, cfg: LoraConfig) -> None:
        self.cfg = cfg
        self.gpu: OrderedDict[str, None] = OrderedDict()
        self.cpu: OrderedDict[str, None] = OrderedDict()
        self.loads = 0  # from disk
        self.swaps = 0  # from host memory into a GPU slot

    def activate(self, name: str, active: set[str]) -> float:
        """Seconds this step spends making `name` resident (0 when it already is)."""
        if name in self.gpu:
            self.gpu.move_to_end(name)
            return 0.0
        if len(self.gpu) >= self.cfg.max_loras:
            for victim in self.gpu:  # least recently used adapter no running request needs
                if victim not in active:
                    del self.gpu[victim]
                    break
        self.gpu[name] = None
        if name in self.cpu:
            self.cpu.move_to_end(name)
            self.swaps += 1
            return self.cfg.swap_s
        self.cpu[name] = None
        while len(self.cpu) > self.cfg.cpu_slots:
            self.cpu.popitem(last=False)
        self.loads += 1
        return self.cfg.load_s
