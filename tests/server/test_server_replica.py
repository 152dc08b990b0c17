"""Every answer names the process that served it; readiness reports the registry revision
that process has applied."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from conftest import admin_headers, build_store, make_settings, publish_module
from fastapi.testclient import TestClient

from model_store import Store
from server.app import create_app

THIS_PROCESS = f"{socket.gethostname()}:{os.getpid()}"


def test_every_answer_names_the_replica(shared_client: TestClient) -> None:
    answers = [
        shared_client.post("/translate", json={"text": "Click the button."}),  # 200
        shared_client.get("/no/such/route"),  # 404 from the router
        shared_client.post("/translate", json={"text": 3}),  # 422 validation
        shared_client.post("/translate", json={"text": "x", "domain": "nope"}),  # 404 domain
        shared_client.get("/admin/domains"),  # 401
        shared_client.get("/health/ready"),
        shared_client.get("/metrics"),
    ]
    assert [a.status_code for a in answers] == [200, 404, 422, 404, 401, 200, 200]
    assert {a.headers["x-nmt-replica"] for a in answers} == {THIS_PROCESS}


def test_an_unexpected_error_names_the_replica_too(tmp_path: Path) -> None:
    app = create_app(make_settings(build_store(tmp_path / "store", domains=())))

    async def broken() -> None:
        raise RuntimeError("a bug")

    app.add_api_route("/broken", broken)
    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.get("/broken")
    assert answer.status_code == 500 and answer.json()["error"]["code"] == "internal"
    assert answer.headers["x-nmt-replica"] == THIS_PROCESS


def test_ready_reports_replica_and_the_revision_it_serves(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", domains=("law",))
    with Store.open(root, builtin_dir=None) as store, \
            TestClient(create_app(make_settings(root))) as client:
        ready = client.get("/health/ready").json()
        assert ready["replica"] == THIS_PROCESS
        assert ready["registry_revision"] == store.registry.latest_event_id() > 0
        publish_module(store, "it", 3)  # another writer (a sidecar, a replica) activates
        latest = store.registry.latest_event_id()
        assert latest > ready["registry_revision"]
        deadline = time.monotonic() + 10
        while (ready := client.get("/health/ready").json())["registry_revision"] != latest:
            assert time.monotonic() < deadline, ready
            time.sleep(0.05)
        assert ready["checks"]["modules"]["it"] == "loaded (v1)"
        # A write through this replica's own admin API moves its revision as well.
        removed = client.delete("/admin/domains/it", headers=admin_headers())
        assert removed.status_code == 200
        deadline = time.monotonic() + 10
        while (ready := client.get("/health/ready").json())["registry_revision"] <= latest:
            assert time.monotonic() < deadline, ready
            time.sleep(0.05)
        assert ready["registry_revision"] == store.registry.latest_event_id()
        assert "it" not in ready["checks"]["modules"]


def test_a_replica_that_is_not_ready_still_names_itself(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", domains=(), classifier=False, backbone=False)
    with TestClient(create_app(make_settings(root))) as client:
        answer = client.get("/health/ready")
    assert answer.status_code == 503
    assert answer.json()["replica"] == answer.headers["x-nmt-replica"] == THIS_PROCESS
    assert answer.json()["registry_revision"] >= 0
