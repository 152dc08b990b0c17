"""A memory's gate calibrated from its own pairs (server/serving/gate_calibration.py,
server/memories/calibrated_gates.py): the choice among the candidates (ties, the margin
over retrieval off), a calibration of the tiny en->fr model that is deterministic and
scores every candidate, and when a stored calibration holds (the memory's growth, the
module, the backbone) or the settings' gate serves instead."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace

import pytest
from conftest import make_settings
from fastapi.testclient import TestClient
from test_corrections import build_store

from server.app import create_app
from server.core.memory_settings import RetrievalSettings
from server.decoding.search import SearchOptions
from server.engine.engine import Engine
from server.memories.calibrated_gates import MIN_PAIRS, CalibratedGates, Calibration
from server.memories.index import PairIndex, entry
from server.serving.gate_calibration import (
    calibrate,
    choose,
    direct_decode,
    held_out,
    held_out_jobs,
)

AMOUNTS = [("one", "un"), ("two", "deux"), ("three", "trois"), ("four", "quatre"),
           ("five", "cinq"), ("six", "six")]
WITH = [("water", "de l'eau"), ("food", "un repas"), ("milk", "du lait"),
        ("juice", "du jus")]
# 24 pairs alike but for two words: each held-out pair retrieves neighbours
PAIRS = [(f"Take {a} tablets a day with {w}.", f"Prenez {b} comprimés par jour avec {v}.")
         for a, b in AMOUNTS for w, v in WITH]


def memory(pairs: list[tuple[str, str]] = PAIRS) -> PairIndex:
    return PairIndex(entry(i, s, t) for i, (s, t) in enumerate(pairs, 1))


def test_the_best_gate_wins_ties_go_to_the_smaller_and_no_gain_gives_the_smallest() -> None:
    assert choose(10.0, [(0.5, 11.0), (1.0, 12.0), (2.0, 11.5)], margin=0.5) == 1.0
    assert choose(10.0, [(0.5, 11.0), (1.0, 12.0), (2.0, 12.0)], margin=0.5) == 1.0
    assert choose(10.0, [(1.0, 10.4), (2.0, 10.3), (0.5, 9.0)], margin=0.5) == 0.5
    assert choose(10.0, [(1.0, 10.5), (2.0, 10.3)], margin=0.5) == 1.0


def test_the_held_out_sample_is_seeded_and_skips_empty_sides() -> None:
    index = memory(PAIRS + [("", "rien"), ("Nothing.", " ")])
    first = held_out(index, 10)
    assert first == held_out(memory(PAIRS + [("", "rien"), ("Nothing.", " ")]), 10)
    assert len(first) == 10 and all(e.source and e.target.strip() for e in first)
    assert [e.id for e in first] == sorted(e.id for e in first)
    assert len(held_out(index, 100)) == len(PAIRS)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, str]]:
    root = build_store(tmp_path_factory.mktemp("store"))
    with TestClient(create_app(make_settings(root))) as client:
        runtime = client.app.state.runtime  # type: ignore[attr-defined]
        yield runtime.engine, runtime.state.domains["medical"].module_id


def test_calibration_scores_every_candidate_and_is_deterministic(
        engine: tuple[Engine, str]) -> None:
    model, module = engine
    settings = RetrievalSettings(calibration_gates=(0.5, 1.0, 3.0))
    decode = direct_decode(model, SearchOptions(beam_size=1))
    found = asyncio.run(calibrate(model, memory(), module, settings, decode, memory_id=7,
                                  version=3))
    assert found.gate in settings.calibration_gates
    assert [gate for gate, _ in found.scores] == [0.5, 1.0, 3.0]
    assert (found.memory_id, found.module_id, found.version, found.pairs,
            found.held_out) == (7, module, 3, len(PAIRS), len(PAIRS))
    assert found.gate == choose(found.off, found.scores, settings.calibration_margin)
    # the tiny random model translates no held-out pair right, with or without its
    # neighbours: no gate gains the margin over retrieval off, so the smallest weighs in
    assert all(score < found.off + settings.calibration_margin for _, score in found.scores)
    assert found.gate == 0.5
    again = asyncio.run(calibrate(model, memory(), module, settings, decode, memory_id=7,
                                  version=3))
    assert replace(again, seconds=0.0) == replace(found, seconds=0.0)


def test_a_held_out_pair_retrieves_neither_itself_nor_its_duplicates(
        engine: tuple[Engine, str]) -> None:
    model, module = engine
    twice = PAIRS + [(PAIRS[0][0], "Une autre traduction.")]
    sample, jobs, found = held_out_jobs(model, memory(twice), module, RetrievalSettings())
    assert len(sample) == len(jobs) == len(found) == len(twice)
    for held, job, near in zip(sample, jobs, found, strict=True):
        assert near and len(near) <= RetrievalSettings().max_pairs  # alike pairs: some
        assert all(source != tuple(job.source_ids) for source, _ in near), held.source


def calibration(gate: float = 2.0, *, pairs: int = 100, version: int = 5,
                module: str | None = "medical@1") -> Calibration:
    return Calibration(memory_id=1, module_id=module, version=version, pairs=pairs,
                       gate=gate, off=10.0, scores=((1.0, 11.0), (gate, 12.0)),
                       held_out=48, seconds=1.0)


class Backbone:
    """Stands for an engine: calibrations are tied to the object's identity."""


def test_a_calibration_holds_until_the_memory_module_or_backbone_changes() -> None:
    gates = CalibratedGates(RetrievalSettings(gate=1.0, calibration_growth=0.1))
    first = Backbone()
    chosen = gates.gate(1, 5, 100, "medical@1", first)
    assert (chosen.gate, chosen.calibrated) == (1.0, False)  # none yet: the settings'
    taken = gates.take_wanted()
    assert [(w.memory_id, w.module_id) for w in taken] == [(1, "medical@1")]
    gates.gate(1, 5, 100, "medical@1", first)
    assert gates.take_wanted() == []  # asked again while it runs: once is enough
    gates.put(calibration(), first)
    gates.finished(taken[0])
    assert gates.gate(1, 5, 100, "medical@1", first).gate == 2.0
    assert gates.gate(1, 5, 100, "medical@1", first).calibrated
    assert gates.gate(1, 9, 110, "medical@1", first).calibrated  # grown 10%: holds
    assert not gates.gate(1, 9, 111, "medical@1", first).calibrated  # beyond: again
    assert not gates.gate(1, 9, 89, "medical@1", first).calibrated  # shrunk beyond
    assert [w.module_id for w in gates.take_wanted()] == ["medical@1"]
    assert not gates.gate(1, 5, 100, "medical@2", first).calibrated  # another module
    assert not gates.gate(1, 5, 100, None, first).calibrated  # the backbone alone
    gates.take_wanted()
    second = Backbone()
    assert not gates.gate(1, 5, 100, "medical@1", second).calibrated  # a new backbone
    gates.put(calibration(3.0), first)  # finished on the old backbone: dropped
    assert gates.found(1, "medical@1") is None


def test_small_memories_and_calibration_off_use_the_settings_gate() -> None:
    backbone = Backbone()
    gates = CalibratedGates(RetrievalSettings(gate=1.5))
    assert gates.gate(1, 5, MIN_PAIRS - 1, "medical@1", backbone).gate == 1.5
    off = CalibratedGates(RetrievalSettings(gate=1.5, calibrate=False))
    off.put(calibration(), backbone)
    chosen = off.gate(1, 5, 100, "medical@1", backbone)
    assert (chosen.gate, chosen.calibrated) == (1.5, False)
    assert gates.take_wanted() == [] and off.take_wanted() == []
