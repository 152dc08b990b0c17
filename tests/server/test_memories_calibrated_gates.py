"""Calibrated gates through HTTP on the tiny en->fr store: a memory in play is calibrated
in the background for the module that decodes with it, the answers then use its own gate
and say so, a memory grown past the threshold is calibrated again, a calibration one
replica made is used by another and after a restart without calibrating again (it is
kept in the registry), and with calibration off every answer decodes with the settings'
gate, as before calibration existed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from conftest import make_settings
from fastapi.testclient import TestClient
from test_corrections import build_store
from test_gate_calibration import PAIRS
from test_memories_api import add, client_for, create, translate

from server.app import create_app
from server.memories.book import MemoryBook

TEXT = "Take seven tablets a day with water."
WAIT_S = 60.0  # the background calibrator's turn comes every second; the tiny model is fast


def fill(client: TestClient, pairs: list[tuple[str, str]]) -> None:
    for source, target in pairs:
        add(client, "leaflets", source, target)


def guided(client: TestClient) -> dict[str, Any]:
    shown: dict[str, Any] = translate(client, TEXT, memory="leaflets",
                                      domain="medical")["retrieval"]
    return shown


def calibrated(client: TestClient) -> dict[str, Any]:
    """The first answer whose gate is calibrated (the calibrator works in the background)."""
    waited = time.monotonic() + WAIT_S
    while time.monotonic() < waited:
        shown = guided(client)
        if shown["calibrated"]:
            return shown
        time.sleep(0.1)
    raise AssertionError("the memory's gate was not calibrated")


def book_of(client: TestClient) -> MemoryBook:
    book: MemoryBook = client.app.state.translator.memories  # type: ignore[attr-defined]
    return book


def medical_module(client: TestClient) -> str:
    state = client.app.state  # type: ignore[attr-defined]
    module: str = state.runtime.state.domains["medical"].module_id
    return module


def test_serving_uses_the_memorys_calibrated_gate_until_it_grows(tmp_path: Path) -> None:
    with client_for(tmp_path) as client:
        memory_id = create(client, "leaflets")["id"]
        fill(client, PAIRS)
        first = guided(client)
        assert first["gates"] == [1.0] and not first["calibrated"]  # the settings' gate
        shown = calibrated(client)
        book = book_of(client)
        module = medical_module(client)
        found = book.gates.found(memory_id, module)
        assert found is not None and found.pairs == len(PAIRS)
        assert shown["gates"] == [found.gate]
        assert found.gate in book.settings.retrieval.calibration_gates
        # grown by more than a tenth: the settings' gate until calibrated again
        grow(client)
        assert not guided(client)["calibrated"]
        calibrated(client)
        again = book.gates.found(memory_id, module)
        assert again is not None and again.pairs == len(PAIRS) + 5


def pairs_loaded(client: TestClient, name: str) -> int:
    memory = book_of(client).view.by_name.get(name)
    return 0 if memory is None else len(memory.index)


def grow(client: TestClient) -> None:
    """More than a tenth more pairs: the memory's calibration no longer holds."""
    fill(client, [(f"Take {n} capsules a day.", f"Prenez {n} gélules par jour.")
                  for n in range(1, 6)])


def test_a_calibration_is_shared_by_replicas_and_kept_across_restarts(
        tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    with TestClient(create_app(make_settings(root))) as first, \
            TestClient(create_app(make_settings(root))) as second:
        memory_id = create(first, "leaflets")["id"]
        fill(first, PAIRS)
        shown = calibrated(first)
        made = book_of(first).gates.found(memory_id, medical_module(first))
        assert made is not None and book_of(first).gates.made == 1
        stored = book_of(first).registry.memory_gates(memory_id)
        assert [(r.module_id, r.pairs, r.gate) for r in stored] == [
            (medical_module(first), len(PAIRS), made.gate)]
        # the other replica (its memories in step through the registry) uses it as is
        waited = time.monotonic() + WAIT_S
        while pairs_loaded(second, "leaflets") < len(PAIRS):
            assert time.monotonic() < waited, "the replica did not sync the memory"
            time.sleep(0.05)
        assert calibrated(second)["gates"] == shown["gates"]
        gates = book_of(second).gates
        assert (gates.made, gates.reused) == (0, 1)
        assert gates.found(memory_id, medical_module(second)) == made
    # a restart: the registry's calibrations of the backbone are read once the engine is
    # loaded, and serve from the first request; grown past the threshold, the memory is
    # calibrated again and the registry's row replaced
    with TestClient(create_app(make_settings(root))) as restarted:
        waited = time.monotonic() + WAIT_S
        while book_of(restarted).gates.reused < 1:
            assert time.monotonic() < waited, "the stored calibration was not read"
            time.sleep(0.05)
        assert guided(restarted)["calibrated"]
        assert (book_of(restarted).gates.made, book_of(restarted).gates.reused) == (0, 1)
        grow(restarted)
        assert not guided(restarted)["calibrated"]
        calibrated(restarted)
        assert book_of(restarted).gates.made == 1
        [row] = book_of(restarted).registry.memory_gates(memory_id)
        assert row.pairs == len(PAIRS) + 5


def test_with_calibration_off_answers_use_the_settings_gate(tmp_path: Path) -> None:
    answers = []
    for calibrate in (False, True):
        with client_for(tmp_path / str(calibrate),
                        memories={"retrieval": {"calibrate": calibrate}}) as client:
            create(client, "leaflets")
            fill(client, PAIRS)
            answers.append(translate(client, TEXT, memory="leaflets", domain="medical"))
            if not calibrate:  # nothing is asked of the calibrator
                assert book_of(client).gates.take_wanted() == []
    off, before_calibration = answers
    assert off["retrieval"]["gates"] == [1.0] and not off["retrieval"]["calibrated"]
    assert off["translation"] == before_calibration["translation"]
    assert off["retrieval"] == before_calibration["retrieval"]
