"""Two server replicas on one store and one PostgreSQL registry: an admin write through
either reaches the other through NOTIFY, long before its poll interval would."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import admin_headers, build_store, make_client, publish_module
from fastapi.testclient import TestClient

from model_store import Store
from tests.postgres import PostgresServer

# Far longer than the test may wait: only an announcement can make a replica reload in time.
POLL_INTERVAL_S = 600.0
CONVERGE_TIMEOUT_S = 30.0


def wait_for(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + CONVERGE_TIMEOUT_S
    while not predicate():
        assert time.monotonic() < deadline, "the replicas did not converge"
        time.sleep(0.02)


@pytest.fixture
def replicas(tmp_path: Path, postgres: PostgresServer) -> Iterator[tuple[TestClient, ...]]:
    url = postgres.create_database()
    root = build_store(tmp_path / "store", registry_url=url)
    with Store.open(root, registry_url=url, builtin_dir=None) as store:
        publish_module(store, "medical", 21, activate=False)  # v2, not served yet
    settings = {"registry_url": url, "poll_interval_s": POLL_INTERVAL_S}
    with make_client(root, **settings) as first, make_client(root, **settings) as second:
        yield first, second


def served(client: TestClient) -> dict[str, int]:
    return {d["name"]: d["version"] for d in client.get("/domains").json()["domains"]}


def test_admin_writes_through_one_replica_reach_the_other(
        replicas: tuple[TestClient, TestClient]) -> None:
    first, second = replicas
    assert served(first)["medical"] == served(second)["medical"] == 1

    response = first.post("/admin/domains/medical/activate", json={"version": 2},
                          headers=admin_headers())
    assert response.status_code == 200, response.text
    wait_for(lambda: served(second).get("medical") == 2)
    routed = second.post("/translate", json={"text": "x", "domain": "medical"}).json()
    assert routed["routing"]["module_version"] == 2

    response = second.delete("/admin/domains/law", headers=admin_headers())
    assert response.status_code == 200, response.text
    wait_for(lambda: "law" not in served(first))
    assert first.post("/translate", json={"text": "x", "domain": "law"}).status_code == 404
