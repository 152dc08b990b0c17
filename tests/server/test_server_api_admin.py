"""Admin endpoints: auth, listing, upload with verification, activation/rollback, delete."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    TOKEN,
    admin_headers,
    backbone_fingerprint,
    make_client,
    module_archive,
)
from fastapi.testclient import TestClient

TEXT = "The patient takes one tablet a day."
GZIP = {"content-type": "application/gzip"}
SCORED = {"beam_size": 2, "n_best": 2}  # scores tell module versions apart


def translate_medical(client: TestClient) -> dict[str, Any]:
    response = client.post("/translate", json={"text": TEXT, "domain": "medical",
                                               "options": SCORED})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


# -- authentication ----------------------------------------------------------------------
ADMIN_CALLS = [("GET", "/admin/domains", None), ("POST", "/admin/domains/law/activate",
                                                  {"version": 1}),
               ("DELETE", "/admin/domains/law", None),
               ("POST", "/admin/domains/law/versions", None)]


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_CALLS)
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Basic czNjcmV0"},
                                     {"Authorization": "Bearer"}, {"Authorization": TOKEN}])
def test_missing_or_malformed_token_is_401(shared_client: TestClient, method: str, path: str,
                                           body: Any, headers: dict[str, str]) -> None:
    response = shared_client.request(method, path, json=body, headers=headers)
    error = error_of(response, 401)
    assert error["code"] == "unauthorized"
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_CALLS)
def test_wrong_token_is_403(shared_client: TestClient, method: str, path: str,
                            body: Any) -> None:
    response = shared_client.request(method, path, json=body,
                                     headers=admin_headers(TOKEN + "x"))
    assert error_of(response, 403)["code"] == "forbidden"


@pytest.mark.parametrize("token", [None, ""])
def test_unset_token_disables_admin(store_root: Path, token: str | None) -> None:
    with make_client(store_root, admin_token=token) as client:
        for method, path, body in ADMIN_CALLS:
            response = client.request(method, path, json=body, headers=admin_headers())
            error = error_of(response, 403)
            assert "disabled" in error["message"] and "NMT_ADMIN_TOKEN" in error["message"]
        assert client.post("/translate", json={"text": TEXT}).status_code == 200


# -- listing ------------------------------------------------------------------------------
def test_list_domains_with_versions(shared_client: TestClient) -> None:
    response = shared_client.get("/admin/domains", headers=admin_headers())
    assert response.status_code == 200
    domains = {d["name"]: d for d in response.json()["domains"]}
    assert set(domains) == {"medical", "law", "it"}
    law = domains["law"]
    assert law["active_version"] == 1
    assert [(v["version"], v["active"], v["family"]) for v in law["versions"]] == [
        (1, True, "adapter")]


def test_list_domains_a_page_at_a_time(shared_client: TestClient) -> None:
    pages: list[list[str]] = []
    after: str | None = None
    while True:
        params: dict[str, str | int] = {"limit": 2, **({"after": after} if after else {})}
        body = shared_client.get("/admin/domains", params=params, headers=admin_headers()).json()
        pages.append([d["name"] for d in body["domains"]])
        after = body["next_after"]
        if after is None:
            break
        assert after == pages[-1][-1]
    assert pages == [["it", "law"], ["medical"]]
    whole = shared_client.get("/admin/domains", headers=admin_headers()).json()
    assert whole["next_after"] is None and len(whole["domains"]) == 3
    for bad in ({"limit": 0}, {"limit": 1001}, {"after": "x" * 200}):
        response = shared_client.get("/admin/domains", params=bad, headers=admin_headers())
        assert response.status_code == 422, bad


# -- upload ---------------------------------------------------------------------------------
def test_upload_then_activate_then_roll_back(client: TestClient, store_root: Path,
                                             tmp_path: Path) -> None:
    before = translate_medical(client)
    archive = module_archive(tmp_path / "scratch", "medical", 11,
                             fingerprint=backbone_fingerprint(store_root))
    response = client.post("/admin/domains/medical/versions", content=archive,
                           headers={**admin_headers(), **GZIP})
    assert response.status_code == 201, response.text
    assert response.json() == {"name": "medical", "version": 2, "active": False,
                               "family": "adapter", "size": None}
    still = translate_medical(client)
    assert still == before  # uploaded, not yet served

    response = client.post("/admin/domains/medical/activate", json={"version": 2},
                           headers=admin_headers())
    assert response.status_code == 200, response.text
    assert response.json()["version"] == 2 and response.json()["active"] is True
    after = translate_medical(client)
    assert after["routing"]["module_version"] == 2
    assert after["alternatives"] != before["alternatives"]
    listed = client.get("/admin/domains", headers=admin_headers()).json()["domains"]
    medical = next(d for d in listed if d["name"] == "medical")
    assert medical["active_version"] == 2 and len(medical["versions"]) == 2

    response = client.post("/admin/domains/medical/activate", json={"version": 1},
                           headers=admin_headers())
    assert response.status_code == 200
    assert translate_medical(client) == before


def test_multipart_upload_with_activate(client: TestClient, store_root: Path,
                                        tmp_path: Path) -> None:
    archive = module_archive(tmp_path / "scratch", "cooking", 5,
                             fingerprint=backbone_fingerprint(store_root))
    response = client.post("/admin/domains/cooking/versions?activate=true",
                           files={"file": ("cooking.tar.gz", archive, "application/gzip")},
                           headers=admin_headers())
    assert response.status_code == 201, response.text
    assert response.json()["active"] is True and response.json()["size"] > 0
    result = client.post("/translate", json={"text": TEXT, "domain": "cooking"}).json()
    assert result["routing"] == {"mode": "explicit", "domain": "cooking", "confidence": None,
                                 "weights": None, "module_version": 1,
                                 "module_versions": None}
    assert "cooking" in [d["name"] for d in client.get("/domains").json()["domains"]]


@pytest.mark.parametrize(("case", "expected"), [
    ("fingerprint", "backbone_fingerprint"),
    ("shapes", "has shape"),
    ("tampered", "sha256 mismatch"),
    ("name", "uploaded as 'medical'"),
    ("garbage", "not a readable tar.gz"),
])
def test_uploads_are_verified(client: TestClient, store_root: Path, tmp_path: Path, case: str,
                              expected: str) -> None:
    fingerprint = backbone_fingerprint(store_root)
    scratch = tmp_path / "scratch"
    archives: dict[str, Callable[[], bytes]] = {
        "fingerprint": lambda: module_archive(scratch, "medical", 3, fingerprint="0" * 64),
        "shapes": lambda: module_archive(scratch, "medical", 3, fingerprint=fingerprint,
                                         config={"family": "adapter", "bottleneck": 8}),
        "tampered": lambda: module_archive(scratch, "medical", 3, fingerprint=fingerprint,
                                           tamper=True),
        "name": lambda: module_archive(scratch, "law", 3, fingerprint=fingerprint),
        "garbage": lambda: b"not an archive at all",
    }
    response = client.post("/admin/domains/medical/versions", content=archives[case](),
                           headers={**admin_headers(), **GZIP})
    error = error_of(response, 422)
    assert error["code"] == "invalid_artifact" and expected in error["message"]
    listed = client.get("/admin/domains", headers=admin_headers()).json()["domains"]
    assert len(next(d for d in listed if d["name"] == "medical")["versions"]) == 1


def test_upload_limits_and_content_types(store_root: Path) -> None:
    with make_client(store_root, limits={"max_upload_bytes": 100}) as client:
        response = client.post("/admin/domains/medical/versions", content=b"x" * 101,
                               headers={**admin_headers(), **GZIP})
        assert error_of(response, 413)["code"] == "too_large"
        response = client.post("/admin/domains/medical/versions", json={"a": 1},
                               headers=admin_headers())
        assert error_of(response, 422)["field"] == "body"
        response = client.post("/admin/domains/medical/versions", content=b"",
                               headers={**admin_headers(), **GZIP})
        assert "empty" in error_of(response, 422)["message"]
        response = client.post("/admin/domains/Bad%20Name/versions", content=b"x",
                               headers={**admin_headers(), **GZIP})
        assert error_of(response, 422)["field"] == "name"


# -- activation errors ------------------------------------------------------------------------
def test_activate_unknown_version_or_domain_is_404(shared_client: TestClient) -> None:
    error = error_of(shared_client.post("/admin/domains/law/activate", json={"version": 9},
                                        headers=admin_headers()), 404)
    assert "9" in error["message"] and "1" in error["message"]
    error = error_of(shared_client.post("/admin/domains/cooking/activate", json={"version": 1},
                                        headers=admin_headers()), 404)
    assert "cooking" in error["message"] and "medical" in error["message"]
    error = error_of(shared_client.post("/admin/domains/law/activate", json={"version": "x"},
                                        headers=admin_headers()), 422)
    assert error["field"] == "version"


# -- delete ----------------------------------------------------------------------------------
def test_delete_stops_serving_and_keeps_the_artifacts(client: TestClient) -> None:
    response = client.delete("/admin/domains/law", headers=admin_headers())
    assert response.status_code == 200, response.text
    assert response.json() == {"name": "law", "deactivated_version": 1, "drained": True}
    error = error_of(client.post("/translate", json={"text": TEXT, "domain": "law"}), 404)
    assert "law" not in error["message"].split("known:")[1]
    assert "law" not in [d["name"] for d in client.get("/domains").json()["domains"]]
    listed = client.get("/admin/domains", headers=admin_headers()).json()["domains"]
    assert next(d for d in listed if d["name"] == "law")["active_version"] is None
    error_of(client.delete("/admin/domains/law", headers=admin_headers()), 404)
    restored = client.post("/admin/domains/law/activate", json={"version": 1},
                           headers=admin_headers())
    assert restored.status_code == 200
    assert client.post("/translate", json={"text": TEXT, "domain": "law"}).status_code == 200


def test_delete_waits_for_in_flight_requests(client: TestClient) -> None:
    engine_thread = client.app.state.engine_thread  # type: ignore[attr-defined]
    gate = threading.Event()
    engine_thread._executor.submit(gate.wait, 10)  # hold the engine: requests stay queued
    results: dict[str, Any] = {}

    def request() -> None:
        results["translate"] = client.post("/translate", json={"text": TEXT, "domain": "law"})

    def delete() -> None:
        results["delete"] = client.delete("/admin/domains/law", headers=admin_headers())

    sender = threading.Thread(target=request)
    sender.start()
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    _wait_for(lambda: runtime.in_flight("law"))
    deleter = threading.Thread(target=delete)
    deleter.start()
    deleter.join(0.3)
    assert deleter.is_alive()  # DELETE is waiting for the in-flight request
    gate.set()
    sender.join(10)
    deleter.join(10)
    assert results["translate"].status_code == 200
    assert results["translate"].json()["routing"]["module_version"] == 1
    assert results["delete"].json()["drained"] is True


def _wait_for(predicate: Any, timeout: float = 5.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)
