"""The memories' calibrated gates in the registry, on SQLite and PostgreSQL: one row per
(memory, module, backbone fingerprint), replaced by a newer calibration, read by every
process that opens the registry, deleted with the memory, copied with the registry."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from model_store import GateRecord, Registry, Store
from model_store.transfer import copy_registry

FINGERPRINT, OTHER = "a" * 64, "b" * 64


def record(memory_id: int, module_id: str | None = "medical@1", gate: float = 2.0,
           fingerprint: str = FINGERPRINT, pairs: int = 100) -> GateRecord:
    return GateRecord(memory_id, module_id, fingerprint, version=7, pairs=pairs, gate=gate,
                      off=30.5, scores=((0.5, 31.0), (1.0, 32.25), (2.0, 33.5)),
                      held_out=48, seconds=1.25)


def test_a_calibration_is_stored_per_module_and_backbone_and_replaced(store: Store) -> None:
    registry = store.registry
    memory = registry.create_memory("acme", backbone="b")
    first = record(memory.id)
    assert registry.put_memory_gate(first)
    assert registry.put_memory_gate(record(memory.id, None, gate=0.5))  # the backbone alone
    assert registry.put_memory_gate(record(memory.id, fingerprint=OTHER, gate=1.0))
    found = registry.memory_gate(memory.id, "medical@1", FINGERPRINT)
    assert found is not None
    assert replace(found, created_at=first.created_at) == first  # every field kept
    assert found.created_at.tzinfo is not None
    alone = registry.memory_gate(memory.id, None, FINGERPRINT)
    assert alone is not None and alone.module_id is None and alone.gate == 0.5
    assert registry.memory_gate(memory.id, "medical@2", FINGERPRINT) is None
    # calibrated again (the memory grew): the row is replaced, not added
    assert registry.put_memory_gate(record(memory.id, gate=1.5, pairs=150))
    again = registry.memory_gate(memory.id, "medical@1", FINGERPRINT)
    assert again is not None and (again.gate, again.pairs) == (1.5, 150)
    assert [(r.module_id, r.backbone_fingerprint, r.gate)
            for r in registry.memory_gates(memory.id)] == [
        (None, FINGERPRINT, 0.5), ("medical@1", FINGERPRINT, 1.5), ("medical@1", OTHER, 1.0)]
    assert [(r.memory_id, r.module_id) for r in registry.backbone_memory_gates(OTHER)] == [
        (memory.id, "medical@1")]
    # another process (a replica) reads the same rows
    other = Registry(registry.url)
    try:
        seen = other.memory_gate(memory.id, "medical@1", FINGERPRINT)
        assert seen is not None and seen.gate == 1.5
    finally:
        other.close()


def test_deleting_a_memory_deletes_its_calibrations(store: Store) -> None:
    registry = store.registry
    memory = registry.create_memory("acme", backbone="b")
    kept = registry.create_memory("kept", backbone="b")
    registry.put_memory_gate(record(memory.id))
    registry.put_memory_gate(record(kept.id))
    assert registry.delete_memory(memory.id)
    assert registry.memory_gates(memory.id) == []
    assert [r.memory_id for r in registry.memory_gates(kept.id)] == [kept.id]
    # a calibration that finishes after its memory was deleted is not stored
    assert not registry.put_memory_gate(record(memory.id))
    assert registry.memory_gates(memory.id) == []


def test_a_copied_registry_keeps_the_calibrations(store: Store, tmp_path: Path) -> None:
    memory = store.registry.create_memory("acme", backbone="b")
    store.registry.put_memory_gate(record(memory.id))
    target = f"sqlite:///{tmp_path / 'copy.sqlite'}"
    assert copy_registry(store.registry.url, target)["memory_gates"] == 1
    copied = Registry(target)
    try:
        found = copied.memory_gate(memory.id, "medical@1", FINGERPRINT)
        assert found is not None and found.scores == record(memory.id).scores
    finally:
        copied.close()
