"""Module residency at scale (server/engine/residency.py): a host tier bounded by bytes,
device slots under leases, prefetch into spare slots; outputs never depend on residency.
Each runs on the CPU, and on CUDA where one is available (the device slots a GPU serves
from)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from server.decoding.search import SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.engine.families import Params
from server.engine.residency import ResidencyError
from tests.tiny import random_module, tiny_backbone_files, tiny_config

COUNT = 12
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def modules() -> dict[str, tuple[dict[str, Any], Params]]:
    """Twelve distinct adapters: the "store" the engine's loader reads from."""
    return {f"m{seed}": random_module(tiny_config(), "adapter", seed=seed, bottleneck=8)
            for seed in range(COUNT)}


def module_bytes(params: Params) -> int:
    return sum(t.numel() * t.element_size() for t in params.values())


def make_engine(store: dict[str, tuple[dict[str, Any], Params]], *, slots: int,
                budget: int | None, reads: list[str] | None = None,
                device: str = "cpu") -> Engine:
    def loader(module_id: str) -> tuple[dict[str, Any], Params]:
        if reads is not None:
            reads.append(module_id)
        config, params = store[module_id]
        return dict(config), {name: tensor.clone() for name, tensor in params.items()}

    engine = build_engine(tiny_backbone_files(), EngineOptions(
        device=device, slots_per_bank=slots, host_capacity=1000, host_budget_bytes=budget),
        loader=loader)
    assert engine.device.type == device
    return engine


def mixed_batches(seed: int, batches: int = 6, rows: int = 5) -> list[list[SentenceJob]]:
    chooser = random.Random(seed)
    made = []
    for _ in range(batches):
        jobs = []
        for _ in range(rows):
            ids = [chooser.randrange(4, 60) for _ in range(chooser.randrange(3, 9))]
            module = f"m{chooser.randrange(COUNT)}"
            jobs.append(SentenceJob(ids, (Member(module),), 14))
        made.append(jobs)
    return made


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("beam", [1, 3])
def test_eviction_under_a_small_budget_gives_identical_outputs(beam: int, device: str) -> None:
    store = modules()
    size = module_bytes(store["m0"][1])
    reads: list[str] = []
    roomy = make_engine(store, slots=COUNT, budget=None, device=device)
    tight = make_engine(store, slots=5, budget=3 * size, reads=reads, device=device)
    options = SearchOptions(beam_size=beam, n_best=beam)
    for jobs in mixed_batches(seed=beam):
        expected = roomy.translate(jobs, options)
        found = tight.translate(jobs, options)
        assert [[h.tokens for h in r] for r in found] == [[h.tokens for h in r] for r in expected]
        assert tight.modules.host_bytes <= 3 * size
        assert len(tight.modules.host) <= 3
    assert all(t.device.type == device for bank in tight.modules.banks.values()
               for t in bank.tensors.values())  # the slots live on the engine's device
    assert len(reads) > COUNT // 2  # modules were evicted and read back, more than once each
    assert len(set(reads)) < len(reads)


def test_host_budget_counts_bytes_and_keeps_the_newest() -> None:
    store = modules()
    size = module_bytes(store["m0"][1])
    engine = make_engine(store, slots=2, budget=size // 2)  # below one module
    for name in ("m1", "m2", "m3"):
        engine.register_module(name, *store[name])
        assert list(engine.modules.host) == [name]  # alone over the budget: its user needs it
        assert engine.modules.host_bytes == size
    engine.modules.remove("m3")
    assert engine.modules.host_bytes == 0


@pytest.mark.parametrize("device", DEVICES)
def test_a_leased_slot_is_never_evicted_and_a_full_bank_refuses(device: str) -> None:
    store = modules()
    engine = make_engine(store, slots=2, budget=None, device=device)
    first = engine.modules.acquire(["m0", "m1"])
    with pytest.raises(ResidencyError, match="pinned or in use"):
        engine.modules.acquire(["m2"])
    assert engine.modules.prefetch(["m2", "m3"]) == []  # nothing spare: leases stay
    assert set(engine.modules.snapshot()["device"]) == {"m0", "m1"}
    engine.modules.release(first)
    engine.modules.acquire(["m2"])  # the least recently used of the two goes
    assert set(engine.modules.snapshot()["device"]) == {"m1", "m2"}


@pytest.mark.parametrize("device", DEVICES)
def test_prefetch_fills_spare_slots_from_host_memory_only(device: str) -> None:
    store = modules()
    events: list[str] = []
    engine = build_engine(tiny_backbone_files(), EngineOptions(device=device, slots_per_bank=3),
                          observer=lambda event, _family, _s: events.append(event))
    for name in ("m0", "m1", "m2", "m3"):
        engine.register_module(name, *store[name])
    lease = engine.modules.acquire(["m0"])
    # m9 is in no tier: prefetch never reads a file (the engine has no loader at all)
    assert engine.modules.prefetch(["m1", "m2", "m3", "m9"]) == ["m1", "m2"]
    engine.modules.release(engine.modules.acquire(["m1"]))  # m2 is now the older one
    # m3 takes a slot: neither leased m0 nor m2, which the same prefetch wants, goes
    assert engine.modules.prefetch(["m2", "m3"]) == ["m3"]
    assert set(engine.modules.snapshot()["device"]) == {"m0", "m2", "m3"}
    engine.modules.release(lease)
    events.clear()
    engine.modules.acquire(["m2", "m3"])
    assert events == ["hit", "hit"]


@pytest.mark.parametrize("device", DEVICES)
def test_a_prefetched_module_keeps_its_slot_until_its_batch_uses_it(device: str) -> None:
    store = modules()
    engine = make_engine(store, slots=2, budget=None, device=device)
    for name in ("m0", "m1", "m2", "m3"):
        engine.register_module(name, *store[name])
    assert engine.modules.prefetch(["m0"]) == ["m0"]  # its sentence waits for a batch
    for name in ("m1", "m2", "m3"):  # older than them all, m0 is not the one reused
        engine.modules.release(engine.modules.acquire([name]))
        assert set(engine.modules.snapshot()["device"]) == {"m0", name}
    engine.modules.release(engine.modules.acquire(["m0"]))  # used: an ordinary slot again
    engine.modules.release(engine.modules.acquire(["m1"]))
    assert set(engine.modules.snapshot()["device"]) == {"m0", "m1"}
    engine.modules.release(engine.modules.acquire(["m2"]))
    assert set(engine.modules.snapshot()["device"]) == {"m1", "m2"}
