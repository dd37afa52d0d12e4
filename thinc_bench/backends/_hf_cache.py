"""Retained KV caches of finished requests, found again by the token prefix of a later request.

A trajectory's next turn sends its whole context again: the previous prompt, the ids the model wrote
and the interpreter's output. Its previous turn left the keys and values of every id it fed through
the model (all but the last sampled one), so the next turn only prefills what the harness added.
The match is by token prefix, not by a handle, so the rollout needs no change, and a request that
shares only its chat prompt with a retained entry (another sample of the same problem) reuses that.

Memory is bounded by a budget in cached tokens; the least recently used entries go first, and a
request whose entry was evicted simply prefills again (same tokens, more time).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

KV = list[tuple[torch.Tensor, torch.Tensor]]
"""One row's cache: per layer, keys and values of shape [1, kv_heads, tokens, head_dim]."""


@dataclass
class Entry:
    tokens: list[int]
    kv: KV


@dataclass
class CacheStats:
    """What the store saved: tokens prefilled vs taken from retained caches, and what it dropped."""

    prefilled_tokens: int = 0
    reused_tokens: int = 0
    hits: int = 0
    evictions: int = 0


class KVStore:
    """LRU store of per-row KV caches keyed by their token ids, bounded by `budget_tokens`."""

    def __init__(self, budget_tokens: int) -> None:
        self.budget_tokens = budget_tokens
        self._entries: OrderedDict[int, Entry] = OrderedDict()
        self._next = 0
        self.held_tokens = 0
        self.stats = CacheStats()

    def __len__(self) -> int:
        return len(self._entries)

    def take(self, prompt: list[int]) -> tuple[KV | None, int]:
        """The retained cache sharing the longest prefix with `prompt`, cut to what the prompt may reuse.

        At least the prompt's last id is left to prefill (its logits pick the first token). An entry the
        prompt extends whole is the same trajectory's previous turn: it leaves the store (the row's new
        cache supersedes it); an entry shared only in part stays for the others.
        """
        best_key, best = None, 0
        for key, entry in self._entries.items():
            shared = _common_prefix(entry.tokens, prompt)
            if shared > best:
                best_key, best = key, shared
        reuse = min(best, len(prompt) - 1)
        self.stats.prefilled_tokens += len(prompt) - max(reuse, 0)
        if best_key is None or reuse <= 0:
            return None, 0
        entry = self._entries[best_key]
        kv = [(k[:, :, :reuse], v[:, :, :reuse]) for k, v in entry.kv]
        if reuse == len(entry.tokens):
            self._remove(best_key)
        else:
            self._entries.move_to_end(best_key)
        self.stats.hits += 1
        self.stats.reused_tokens += reuse
        return kv, reuse

    def put(self, tokens: list[int], kv: KV) -> None:
        """Retain a finished row's cache (its tensors must not be views of a batch), evicting LRU entries."""
        if not tokens or len(tokens) > self.budget_tokens:
            return
        self._entries[self._next] = Entry(tokens, kv)
        self._next += 1
        self.held_tokens += len(tokens)
        while self.held_tokens > self.budget_tokens:
            self._remove(next(iter(self._entries)))
            self.stats.evictions += 1

    def clear(self) -> None:
        """Drop every entry (weights changed, or memory ran out)."""
        self._entries.clear()
        self.held_tokens = 0

    def _remove(self, key: int) -> None:
        self.held_tokens -= len(self._entries.pop(key).tokens)


def _common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix; slice comparisons run in C, so a binary search is fast."""
    n = min(len(a), len(b))
    if n == 0 or a[0] != b[0]:
        return 0
    if a[:n] == b[:n]:
        return n
    low, high = 1, n - 1  # a[:low] == b[:low] holds; a[:high + 1] != b[:high + 1]
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low
