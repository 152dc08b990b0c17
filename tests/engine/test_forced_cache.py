"""The forced-pair cache (server/engine/forced_cache.py): a pair forced again through the
same module slot comes from the cache with the very states forcing gives; a write to the
slot's bank (another module swapped in) forces it afresh (on the CPU, and on CUDA where one
is available); the cache stays within its byte bound, dropping the least recently used
pairs first."""

from __future__ import annotations

import pytest
import torch

from server.engine.engine import Engine, EngineOptions
from server.engine.forced_cache import ForcedCache, cache_of
from server.engine.knn_store import RowKey, force_pairs, row_key
from tests.engine.test_device_agreement import engine_with, modules

PAIR = ((5, 6, 7, 8, 3), (30, 31, 32, 33))
OTHER = ((9, 10, 3), (40, 41))
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def adapter_engine(device: str = "cpu") -> tuple[Engine, RowKey]:
    made = modules()
    engine = engine_with(EngineOptions(device=device), {"adapter0": made["adapter0"]})
    lease = engine.modules.acquire(["adapter0"])
    return engine, row_key(lease, "adapter0")


@pytest.mark.parametrize("device", DEVICES)
def test_a_pair_forced_again_comes_from_the_cache_unchanged(device: str) -> None:
    engine, key = adapter_engine(device)
    cache = cache_of(engine.model)
    cache.clear()
    first = force_pairs(engine, [(key, PAIR), (key, OTHER)])
    misses = cache.misses
    again = force_pairs(engine, [(key, OTHER), (key, PAIR)])
    assert cache.misses == misses and len(cache) == 2
    assert torch.equal(again[1], first[0]) and torch.equal(again[0], first[1])
    cache.clear()
    fresh = force_pairs(engine, [(key, PAIR)])
    assert cache.misses == misses + 1
    assert torch.equal(fresh[0], first[0])
    assert first[0].shape[0] == len(PAIR[1]) + 1


@pytest.mark.parametrize("device", DEVICES)
def test_a_write_to_the_bank_forces_the_pair_afresh(device: str) -> None:
    engine, key = adapter_engine(device)
    cache = cache_of(engine.model)
    cache.clear()
    before = force_pairs(engine, [(key, PAIR)])
    bank, slot = key
    assert bank is not None
    other = modules()["adapter0"][1]
    with torch.inference_mode():  # as the engine swaps modules in
        bank.write(slot, {name: tensor * 3 for name, tensor in other.items()})
    misses = cache.misses
    changed = force_pairs(engine, [(key, PAIR)])
    assert cache.misses == misses + 1
    assert changed[0].shape == before[0].shape
    assert not torch.equal(changed[0], before[0])  # the new module's states, not the old


def test_the_cache_keeps_within_its_bound_least_recently_used_out_first() -> None:
    cache = ForcedCache(max_bytes=3 * 4 * 8)  # three [2, 4] float32 entries
    for name in ("a", "b", "c"):
        cache.put((name,), torch.zeros(2, 4))
    assert cache.get(("a",)) is not None  # "b" is now the least recently used
    cache.put(("d",), torch.ones(2, 4))
    assert cache.get(("b",)) is None
    assert all(cache.get((name,)) is not None for name in ("a", "c", "d"))
    assert cache.bytes == 3 * 4 * 8 and len(cache) == 3
    cache.put(("huge",), torch.zeros(100, 4))  # larger than the bound: not kept
    assert cache.get(("huge",)) is None and len(cache) == 3
