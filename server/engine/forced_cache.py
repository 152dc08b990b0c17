"""A small bounded cache of forced memory pairs (server/engine/knn_store.py): the decoder's
final hidden states of a pair forced through one module slot of one backbone, so that a
pair retrieved again (the next request on the same text, a batch's repeated sentences)
is not forced again.

An entry is keyed by the pair's token ids, the module bank and slot it went through and
the bank's write count at the time: any write to the bank (a module loaded into or
evicted from one of its slots) makes the bank's older entries unreachable, so a changed
module never reuses keys forced through its predecessor. One cache per backbone object.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from weakref import WeakKeyDictionary

from torch import Tensor

from server.engine.slots import ModuleBank

CacheKey = tuple[Hashable, ...]
DEFAULT_BYTES = 32 * 2**20  # hidden states kept per backbone (float32)


class ForcedCache:
    """Least recently used (pair, slot) -> hidden states [target + 1, d], bounded in bytes."""

    def __init__(self, max_bytes: int = DEFAULT_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[CacheKey, Tensor] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(bank: ModuleBank | None, slot: int, pair: Hashable) -> CacheKey:
        return (bank, bank.writes if bank is not None else 0, slot, pair)

    def get(self, key: CacheKey) -> Tensor | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: CacheKey, hidden: Tensor) -> None:
        size = hidden.numel() * hidden.element_size()
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old.numel() * old.element_size()
            self._entries[key] = hidden
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self.bytes -= dropped.numel() * dropped.element_size()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)


_CACHES: WeakKeyDictionary[object, ForcedCache] = WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_of(model: object) -> ForcedCache:
    """The forced-pair cache of one backbone object (made on first use)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(model)
        if cache is None:
            cache = _CACHES[model] = ForcedCache()
        return cache
