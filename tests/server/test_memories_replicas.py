"""Two server replicas on one PostgreSQL registry: a pair written through one answers on
the other as soon as PostgreSQL announces it (NOTIFY on the memories' channel), long
before the poll interval (60 s here) could have brought it; so do a replaced import and
a deleted memory. (With the default interval, 0.5 s, polling alone stays within a
second.) The wait is bounded generously, as the other replica tests': a loaded machine
must not fail it, and only an announcement can make it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import admin_headers, build_store, make_client
from fastapi.testclient import TestClient
from tmx_files import TOOLKIT_PAIRS, toolkit_tmx

from tests.postgres import PostgresServer

H = admin_headers()
POLL_INTERVAL_S = 600.0  # registry and memories (60 s, their most): only an announcement
# can make a replica see a change within a second
WITHIN_S = 30.0  # below the memories' poll interval: only an announcement is in time


def seen_within(predicate: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def replicas(tmp_path: Path, postgres: PostgresServer) -> Iterator[tuple[TestClient, ...]]:
    url = postgres.create_database()
    root = build_store(tmp_path / "store", registry_url=url)
    settings = {"registry_url": url, "poll_interval_s": POLL_INTERVAL_S,
                "memories": {"poll_interval_s": 60.0}}
    with make_client(root, **settings) as first, make_client(root, **settings) as second:
        yield first, second


def answer(client: TestClient, text: str) -> dict[str, object]:
    found: dict[str, object] = client.post("/translate", json={
        "text": text, "memory": "acme"}).json()
    return found


def test_a_pair_written_through_one_replica_answers_on_the_other_when_announced(
        replicas: tuple[TestClient, TestClient]) -> None:
    first, second = replicas
    created = first.post("/admin/memories", headers=H,
                         json={"name": "acme", "source": "en", "target": "fr"})
    assert created.status_code == 201
    assert seen_within(lambda: second.post("/translate", json={
        "text": "x", "memory": "acme"}).status_code == 200, WITHIN_S)

    added = first.post("/admin/memories/acme/pairs", headers=H, json={
        "source": "Open the file.", "target": "Ouvrez le fichier."})
    assert added.status_code == 201
    assert seen_within(lambda: answer(second, "Open the file.")["translation"] ==
                       "Ouvrez le fichier.", WITHIN_S)

    before = second.get("/admin/memories/acme", headers=H).json()["version"]
    imported = second.post("/admin/memories/acme/import", params={"mode": "replace"},
                           content=toolkit_tmx(),
                           headers={**H, "Content-Type": "application/x-tmx+xml"})
    assert imported.json()["state"] == "done"
    source, target = TOOLKIT_PAIRS[1]
    assert seen_within(lambda: answer(first, source)["translation"] == target, WITHIN_S)
    assert "match" not in answer(first, "Open the file.")
    # both replicas answer from the version the import made, as the registry has it
    version = first.get("/admin/memories/acme", headers=H).json()["version"]
    assert version == second.get("/admin/memories/acme", headers=H).json()["version"]
    assert version > before and all(
        answer(replica, source)["match"]["version"] == version  # type: ignore[index]
        for replica in replicas)

    assert first.delete("/admin/memories/acme", headers=H).status_code == 200
    assert seen_within(lambda: second.post("/translate", json={
        "text": source, "memory": "acme"}).status_code == 404, WITHIN_S)
