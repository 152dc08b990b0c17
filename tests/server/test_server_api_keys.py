"""API keys and per-key rate limits (server/access): off by default; when on, managed
through /admin/keys, stored hashed in the registry, checked on the public endpoints; and
the optional admin listener on a port of its own."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import TOKEN, admin_headers, build_store, make_client
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from test_server_live import free_port, wait_for

from server.access.limiter import RateLimiter


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[TestClient]:
    root = build_store(tmp_path / "store", domains=("law",), classifier=False)
    with make_client(root, access={"api_keys": True, "requests_per_minute": 100,
                                   "chars_per_minute": 10_000}) as client:
        yield client


def create_key(client: TestClient, **limits: int) -> dict[str, Any]:
    answer = client.post("/admin/keys", json={"name": "team-a", **limits},
                         headers=admin_headers())
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def translate(client: TestClient, key: str | None, text_: str = "Hello.") -> Any:
    headers = {"X-API-Key": key} if key is not None else {}
    return client.post("/translate", json={"text": text_, "domain": "law"}, headers=headers)


def test_keys_are_off_by_default(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", domains=("law",), classifier=False)
    with make_client(root) as client:
        assert translate(client, None).status_code == 200
        assert translate(client, "anything").status_code == 200


def test_a_key_is_needed_and_must_be_known(keyed: TestClient) -> None:
    missing = translate(keyed, None)
    assert missing.status_code == 401 and missing.json()["error"]["field"] == "X-API-Key"
    assert translate(keyed, "nmt_made-up").status_code == 403
    key = create_key(keyed)["key"]
    assert translate(keyed, key).status_code == 200
    batch = keyed.post("/translate/batch", json={"items": [{"text": "A."}], "domain": "law"},
                       headers={"X-API-Key": key})
    assert batch.status_code == 200


def test_the_key_is_shown_once_and_stored_hashed(keyed: TestClient) -> None:
    created = create_key(keyed, requests_per_minute=5)
    key = created["key"]
    assert key.startswith("nmt_") and key.startswith(created["prefix"])
    listed = keyed.get("/admin/keys", headers=admin_headers()).json()["keys"]
    assert [k["id"] for k in listed] == [created["id"]]
    assert "key" not in listed[0] and listed[0]["requests_per_minute"] == 5
    assert key not in keyed.get("/admin/keys", headers=admin_headers()).text
    url = keyed.app.state.store.registry.url  # type: ignore[attr-defined]
    with create_engine(url).connect() as conn:
        rows = [tuple(row) for row in conn.execute(text("SELECT * FROM api_keys"))]
    assert rows and all(key not in str(value) for row in rows for value in row)
    assert hashlib.sha256(key.encode()).hexdigest() in rows[0]


def test_a_revoked_key_is_refused_at_once(keyed: TestClient) -> None:
    created = create_key(keyed)
    assert translate(keyed, created["key"]).status_code == 200
    revoked = keyed.delete(f"/admin/keys/{created['id']}", headers=admin_headers())
    assert revoked.status_code == 200 and revoked.json()["active"] is False
    assert translate(keyed, created["key"]).status_code == 403
    unknown = keyed.delete("/admin/keys/nope", headers=admin_headers())
    assert unknown.status_code == 404


def test_keys_need_the_admin_token(keyed: TestClient) -> None:
    assert keyed.post("/admin/keys", json={"name": "x"}).status_code == 401
    assert keyed.get("/admin/keys", headers=admin_headers("wrong")).status_code == 403


def test_requests_per_minute_is_429_with_retry_after(keyed: TestClient) -> None:
    key = create_key(keyed, requests_per_minute=2)["key"]
    assert [translate(keyed, key).status_code for _ in range(2)] == [200, 200]
    refused = translate(keyed, key)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
    assert int(refused.headers["retry-after"]) >= 1
    assert "2 requests per minute" in refused.json()["error"]["message"]


def test_characters_per_minute_is_429_and_one_oversized_request_is_413(
        keyed: TestClient) -> None:
    key = create_key(keyed, chars_per_minute=50)["key"]
    assert translate(keyed, key, "x" * 40).status_code == 200
    refused = translate(keyed, key, "y" * 40)
    assert refused.status_code == 429 and "50 characters per minute" in refused.text
    assert translate(keyed, key, "z" * 60).status_code == 413


def test_counts_carry_no_key(keyed: TestClient) -> None:
    created = create_key(keyed, requests_per_minute=1)
    translate(keyed, created["key"])
    translate(keyed, created["key"])
    translate(keyed, None)
    metrics = keyed.get("/metrics").text
    assert 'nmt_access_requests_total{outcome="accepted"} 1.0' in metrics
    assert 'nmt_access_requests_total{outcome="rate_limited"} 1.0' in metrics
    assert 'nmt_access_requests_total{outcome="missing"} 1.0' in metrics
    assert 'nmt_access_rate_limited_total{limit="requests"} 1.0' in metrics
    assert created["key"] not in metrics and created["id"] not in metrics
    assert created["prefix"] not in metrics


def test_buckets_refill_over_the_minute() -> None:
    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0])
    take = {"chars": 10, "requests_per_minute": 6, "chars_per_minute": 100}
    assert [limiter.take("k", **take) for _ in range(6)] == [None] * 6
    refused = limiter.take("k", **take)
    assert refused is not None and refused.limit == "requests" and refused.retry_after_s == 10
    now[0] = 10.0  # one request's worth refilled (6 per minute)
    assert limiter.take("k", **take) is None
    assert limiter.take("other", **take) is None  # every key has its own buckets
    refused = limiter.take("other", chars=95, requests_per_minute=6, chars_per_minute=100)
    assert refused is not None and refused.limit == "characters" and not refused.never


def test_the_admin_listener_serves_admin_alone(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", domains=("law",), classifier=False)
    port, admin_port = free_port(), free_port()
    env = {**os.environ, "NMT_BUILTIN_ARTIFACTS": "false", "NMT_BACKBONE": "tiny",
           "NMT_DECODING__BEAM_SIZE": "1", "NMT_DECODING__MAX_LENGTH": "8",
           "NMT_ADMIN_TOKEN": TOKEN, "NMT_ACCESS__API_KEYS": "true",
           "PYTHONPATH": str(Path.cwd())}
    command = [sys.executable, "-m", "server", "--host", "127.0.0.1", "--port", str(port),
               "--admin-port", str(admin_port), "--store-dir", str(root),
               "--log-level", "warning"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    try:
        public = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
        admin = httpx.Client(base_url=f"http://127.0.0.1:{admin_port}", timeout=10)

        def admin_up() -> bool:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            try:
                return admin.get("/admin/keys", headers=admin_headers()).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(admin_up, timeout=90)
        assert public.get("/admin/keys", headers=admin_headers()).status_code == 404
        assert admin.post("/translate", json={"text": "Hi."}).status_code == 404
        key = admin.post("/admin/keys", json={"name": "svc"}, headers=admin_headers()).json()
        answer = public.post("/translate", json={"text": "Hello.", "domain": "law"},
                             headers={"X-API-Key": key["key"]})
        assert answer.status_code == 200, answer.text
        public.close()
        admin.close()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    assert process.returncode in (0, -signal.SIGTERM)  # both listeners stopped
