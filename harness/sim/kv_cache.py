"""Paged KV cache: a block allocator with vLLM V1-style prefix caching.

* Blocks hold `block_size` tokens. A request owns a list of block ids; blocks are reference
  counted so one cached prefix block can serve many running requests.
* A full block's hash chains its parent's hash with its tokens, so two requests share a block
  only when their whole prefix up to it is the same.
* Freed blocks keep their hash and go to the tail of an LRU free queue; allocation pops from the
  head, evicting (un-hashing) the least recently freed cached block. A request's blocks are freed
  tail first, so a prefix's last blocks are evicted before its first ones.
* Usage, as in vLLM, is 1 - free/total (cached but unreferenced blocks count as free).
"""

from __future__ import annotations

from collections import OrderedDict


def block_hash(parent: int | None, tokens: tuple[str, ...]) -> int:
    return hash((parent, tokens))


class BlockPool:
    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_caching = enable_caching
        self._ref = [0] * num_blocks
        self._hash: list[int | None] = [None] * num_blocks
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self._cached: dict[int, int] = {}  # hash -> block id

    @property
    def num_free(self) -> int:
        return len(self._free)

    def usage(self) -> float:
        return 1.0 - len(self._free) / self.num_blocks

    def lookup(self, hashes: list[int], max_blocks: int) -> list[int]:
        """Blocks for the longest cached prefix of `hashes`, at most `max_blocks` of them."""
        if not self.enable_caching:
            return []
        hits: list[int] = []
        cached = self._cached
        for h in hashes[:max_blocks]:
            b = cached.get(h)
            if b is None:
                break
            hits.append(b)
        return hits

    def num_evictable_needed(self, blocks: list[int]) -> int:
        """How many of `blocks` are currently free (touching them takes them out of the free queue)."""
        ref = self._ref
        return sum(1 for b in blocks if ref[b] == 0)

    def touch(self, blocks: list[int]) -> None:
        ref, free = self._ref, self._free
        for b in blocks:
            if ref[b] == 0:
                del free[b]
            ref[b] += 1

    def allocate(self, n: int) -> list[int] | None:
        if n > len(self._free):
            return None
        out: list[int] = []
        free, ref, hashes, cached = self._free, self._ref, self._hash, self._cached
        for _ in range(n):
            b, _ = free.popitem(last=False)
            h = hashes[b]
            if h is not None:  # evict a cached block
                if cached.get(h) == b:
                    del cached[h]
                hashes[b] = None
            ref[b] = 1
            out.append(b)
        return out

    def release(self, blocks: list[int]) -> None:
        ref, free = self._ref, self._free
        for b in reversed(blocks):
            ref[b] -= 1
            if ref[b] == 0:
                free[b] = None

    def cache_block(self, b: int, h: int) -> None:
        if not self.enable_caching or self._hash[b] is not None:
            return
        if h in self._cached:  # an identical block is already cached; keep the first one
            return
        self._cached[h] = b
        self._hash[b] = h

    def reset_prefix_cache(self) -> bool:
        """Forget every cached block that no running request holds. True when all were free."""
        all_free = True
        for h, b in list(self._cached.items()):
            if self._ref[b] == 0:
                del self._cached[h]
                self._hash[b] = None
            else:
                all_free = False
        return all_free
