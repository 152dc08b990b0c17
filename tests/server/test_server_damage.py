"""Damage stays local: a module that cannot be loaded takes out its own domain only, is
retried with backoff, and heals on a good re-upload; the registry poller survives any
exception; evicted modules are read back off the engine thread."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    DOMAINS,
    admin_headers,
    backbone_fingerprint,
    build_store,
    make_client,
    module_archive,
)
from fastapi.testclient import TestClient

from model_store import Store

TEXT = "The council adopted this regulation."


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def weights(root: Path, domain: str, version: int = 1) -> Path:
    return root / "modules" / domain / f"v{version}" / "module.safetensors"


def flip_a_byte(path: Path) -> bytes:
    """Flip one byte in the middle of `path`; returns the original bytes."""
    original = path.read_bytes()
    data = bytearray(original)
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    return original


def translate(client: TestClient, domain: str) -> Any:
    return client.post("/translate", json={"text": TEXT, "domain": domain})


def domain_status(client: TestClient) -> dict[str, str]:
    return {d["name"]: d["status"] for d in client.get("/domains").json()["domains"]}


def metric(client: TestClient, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", client.get("/metrics").text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def assert_law_broken(client: TestClient, store_root: Path) -> None:
    ready = client.get("/health/ready")
    assert ready.status_code == 200, ready.text  # ready: the damage is local
    checks = ready.json()["checks"]
    assert checks["broken"] == ["law"]
    assert checks["modules"]["law"].startswith("broken: version 1: ")
    assert domain_status(client)["law"].startswith("broken: ")
    refused = translate(client, "law")
    assert refused.status_code == 503, refused.text
    error = refused.json()["error"]
    assert error["code"] == "not_ready" and error["field"] == "domain"
    assert "domain 'law' is unavailable" in error["message"]
    assert str(store_root) not in refused.text
    for other in ("medical", "it", "generic"):
        assert translate(client, other).status_code == 200, other
    auto = client.post("/translate", json={"text": TEXT}).json()["routing"]
    assert auto["domain"] != "law"


def test_a_corrupt_module_at_start_breaks_only_its_domain_and_a_reupload_heals_it(
        store_root: Path, tmp_path: Path) -> None:
    flip_a_byte(weights(store_root, "law"))
    with make_client(store_root) as client:
        assert_law_broken(client, store_root)
        assert "sha256 mismatch" in domain_status(client)["law"]

        archive = module_archive(tmp_path / "scratch", "law", 7,
                                 fingerprint=backbone_fingerprint(store_root))
        uploaded = client.post("/admin/domains/law/versions?activate=true", content=archive,
                               headers={**admin_headers(), "content-type": "application/gzip"})
        assert uploaded.status_code == 201, uploaded.text

        assert translate(client, "law").json()["routing"]["module_version"] == 2
        assert domain_status(client)["law"] == "ready"
        assert "broken" not in client.get("/health/ready").json()["checks"]


def test_a_repaired_file_heals_by_the_retry_with_backoff(store_root: Path) -> None:
    original = flip_a_byte(weights(store_root, "law"))
    with make_client(store_root) as client:
        assert translate(client, "law").status_code == 503
        failures = metric(client, 'nmt_engine_load_failures_total{kind="module"}')
        assert failures >= 1

        weights(store_root, "law").write_bytes(original)  # repaired in place, no API call

        wait_for(lambda: translate(client, "law").status_code == 200)
        assert domain_status(client)["law"] == "ready"


def test_an_unreadable_weights_file_breaks_only_its_domain(store_root: Path) -> None:
    path = weights(store_root, "law")
    path.unlink()
    path.mkdir()  # reading it raises IsADirectoryError
    with make_client(store_root) as client:
        assert_law_broken(client, store_root)
        assert "IsADirectoryError" in domain_status(client)["law"] or \
            "missing" in domain_status(client)["law"]
    shutil.rmtree(path)


def test_the_poller_survives_any_exception(store_root: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with make_client(store_root) as client:
        registry = client.app.state.store.registry  # type: ignore[attr-defined]
        real = registry.latest_event_id
        calls = {"n": 0}

        def flaky() -> int:
            calls["n"] += 1
            if calls["n"] <= 3:
                raise OSError("disk I/O error")
            return int(real())

        monkeypatch.setattr(registry, "latest_event_id", flaky)
        wait_for(lambda: metric(client, "nmt_registry_poll_errors_total") >= 3)

        deleted = client.delete("/admin/domains/it", headers=admin_headers())
        assert deleted.status_code == 200
        with Store.open(store_root, builtin_dir=None) as store:
            store.activate("module", "it", 1)  # another replica re-activates it
        wait_for(lambda: "it" in domain_status(client))


def test_evicted_modules_are_read_back_off_the_engine_thread(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    tight = {"engine": {"slots_per_bank": 1, "host_capacity": 1}, "routing": {"top_k": 1}}
    with make_client(root) as roomy, make_client(root, **tight) as client:
        order = [*DOMAINS, *DOMAINS, "law"]
        expected = [translate(roomy, d).json()["translation"] for d in order]
        found = [translate(client, d).json()["translation"] for d in order]

        assert found == expected
        assert metric(client, 'nmt_engine_module_reloads_total{thread="worker"}') >= 4
        assert metric(client, 'nmt_engine_module_reloads_total{thread="engine"}') == 0
