"""Corrections: LibreTranslate's `/suggest` through the real `libretranslate-aio` client
on a real uvicorn, the native `POST /corrections`, their plausibility checks, API keys
and rate limits, and the admin API (list, export, review, delete by key or domain)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import (
    BACKBONE,
    DOMAINS,
    SEEDS,
    admin_headers,
    make_settings,
    module_artifact,
    publish_module,
)
from conftest import publish_classifier as publish_router
from fastapi.testclient import TestClient
from libretranslate_aio import LibreTranslate
from libretranslate_aio.exceptions import BadRequestError, LibreTranslateError
from uvicorn_live import serving

from model_store import Store
from server.app import create_app
from tests.tiny import tiny_backbone_files

SOURCE = "The patient takes one tablet a day with a glass of water."
FIXED = "Le patient prend un comprimé par jour avec un verre d'eau."
MACHINE = "Le patient prend une tablette par jour avec un verre d'eau."


def build_store(root: Path) -> Path:
    with Store.open(root, builtin_dir=None) as store:
        files = tiny_backbone_files()
        manifest = store.publish("backbone", BACKBONE, files,
                                 config=json.loads(files["config.json"]),
                                 provenance={"languages": {"source": "en", "target": "fr"}})
        store.activate("backbone", BACKBONE, manifest.version)
        for name in DOMAINS:
            publish_module(store, name, SEEDS[name])
        publish_router(store)
    return root


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(build_store(tmp_path / "store")))) as client:
        yield client


def correct(client: TestClient, **fields: Any) -> Any:
    body = {"source": SOURCE, "corrected": FIXED, "machine": MACHINE, "domain": "medical"}
    return client.post("/corrections", json={**body, **fields})


def listed(client: TestClient, **query: str) -> list[dict[str, Any]]:
    answer = client.get("/admin/corrections", params=query, headers=admin_headers())
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["corrections"]
    return found


def test_the_aio_client_suggests_and_the_suggestion_is_stored(tmp_path: Path) -> None:
    """`suggest` of libretranslate-aio (a form POST to /suggest) answers success; the
    suggestion is a pending correction of the domain the router picks for its source, and
    the page settings say suggestions are on."""
    app = create_app(make_settings(build_store(tmp_path / "store")))
    with serving(app) as base, LibreTranslate(base + "/libretranslate", timeout=120) as lt:
        assert lt.frontend_settings().suggestions is True
        assert lt.suggest(SOURCE, FIXED, "en", "fr") is True
        with pytest.raises(BadRequestError, match="copy of the source"):
            lt.suggest(SOURCE, SOURCE, "en", "fr")
        with pytest.raises(BadRequestError, match="not supported"):
            lt.suggest(SOURCE, FIXED, "en", "de")
        with httpx.Client(base_url=base, timeout=120) as http:
            rows = http.get("/admin/corrections", headers=admin_headers()).json()
    [row] = rows["corrections"]
    assert (row["source"], row["corrected"], row["machine"]) == (SOURCE, FIXED, None)
    assert row["status"] == "pending" and row["key_id"] is None
    assert row["direction"] == "en-fr" and row["backbone"] == BACKBONE
    assert row["domain"] == "medical"  # "patient", "tablet": the tiny router's medical words


def test_suggestions_can_be_turned_off(tmp_path: Path) -> None:
    settings = make_settings(build_store(tmp_path / "store"), corrections={"enabled": False})
    with TestClient(create_app(settings)) as client:
        answer = client.post("/libretranslate/suggest",
                             data={"q": SOURCE, "s": FIXED, "source": "en", "target": "fr"})
        assert answer.status_code == 403
        assert answer.json() == {"error": "Suggestions are disabled on this server."}
        assert correct(client).status_code == 403
        settings_page = client.get("/libretranslate/frontend/settings").json()
        assert settings_page["suggestions"] is False


def test_a_native_correction_is_stored_with_its_routing(client: TestClient) -> None:
    answer = correct(client, domain=None, routing={"mode": "classifier", "domain": "law"})
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["status"] == "pending" and body["domain"] == "law"
    assert body["direction"] == "en-fr"
    [row] = listed(client)
    assert row["id"] == body["id"] and row["routed"] == "law" and row["machine"] == MACHINE
    # an ensemble's correction goes to the domain the corrector chose
    chosen = correct(client, source="Click the button to open the file in a new window.",
                     corrected="Cliquez sur le bouton pour ouvrir le fichier dans une "
                               "nouvelle fenêtre.", machine=None, domain="it",
                     routing={"mode": "ensemble", "domain": None})
    assert chosen.status_code == 201 and chosen.json()["domain"] == "it"
    assert listed(client, domain="it")[0]["routed"] == "ensemble"


@pytest.mark.parametrize(("fields", "reason"), [
    ({"corrected": "   "}, "is empty"),
    ({"corrected": SOURCE.upper()}, "copy of the source"),
    ({"corrected": MACHINE}, "machine translation unchanged"),
    ({"corrected": "Le patient."}, "times as long as the source"),
    ({"corrected": FIXED * 4}, "times as long as the source"),
    ({"corrected": "The patient takes one pill a day with a glass of water."},
     "reads as en"),
    ({"direction": "en-de"}, "direction 'en-de' is not served"),
])
def test_implausible_corrections_are_refused_with_the_reason(
        client: TestClient, fields: dict[str, Any], reason: str) -> None:
    answer = correct(client, **fields)
    assert answer.status_code == 422, answer.text
    assert reason in answer.json()["error"]["message"]
    assert listed(client) == []


def test_a_duplicate_is_refused_and_an_unknown_domain_is_named(client: TestClient) -> None:
    assert correct(client).status_code == 201
    again = correct(client, corrected=f"  {FIXED.lower()} ")  # same text, other case/spaces
    assert again.status_code == 422 and "duplicate" in again.json()["error"]["message"]
    unknown = correct(client, domain="cooking")
    assert unknown.status_code == 404 and "cooking" in unknown.json()["error"]["message"]
    assert len(listed(client)) == 1


def test_keys_tie_corrections_and_rate_limit_them(tmp_path: Path) -> None:
    settings = make_settings(build_store(tmp_path / "store"), access={"api_keys": True})
    with TestClient(create_app(settings)) as client:
        made = [client.post("/admin/keys", json={"name": name, "requests_per_minute": 2},
                            headers=admin_headers()).json() for name in ("alice", "bob")]
        alice, bob = ({"X-API-Key": key["key"]} for key in made)
        assert correct(client).status_code == 401
        first = client.post("/corrections", headers=alice, json={
            "source": SOURCE, "corrected": FIXED, "domain": "medical"})
        assert first.status_code == 201 and first.json()["status"] == "accepted"
        form = {"q": "The council adopted this regulation on member states.",
                "s": "Le conseil a adopté ce règlement sur les États membres.",
                "source": "en", "target": "fr", "api_key": made[0]["key"]}
        assert client.post("/libretranslate/suggest", data=form).status_code == 200
        limited = client.post("/corrections", headers=alice, json={
            "source": "Open the file.", "corrected": "Ouvrez le fichier.", "domain": "it"})
        assert limited.status_code == 429
        assert client.post("/corrections", headers=bob, json={
            "source": "Open the file.", "corrected": "Ouvrez le fichier.",
            "domain": "it"}).status_code == 201
        rows = listed(client)
        assert sorted(r["key_name"] for r in rows) == ["alice", "alice", "bob"]
        assert {r["status"] for r in rows} == {"accepted"}
        # a privacy request: every correction of alice's key at once
        gone = client.delete("/admin/corrections", params={"key_id": made[0]["id"]},
                             headers=admin_headers())
        assert gone.status_code == 200 and gone.json() == {"deleted": 2}
        assert [r["key_name"] for r in listed(client)] == ["bob"]


def test_admin_reviews_exports_counts_and_deletes(client: TestClient) -> None:
    texts = [("The patient must not take this medicine twice.",
              "Le patient ne doit pas prendre ce médicament deux fois.", "medical"),
             ("Children should take half the dose of this medicine.",
              "Les enfants doivent prendre la moitié de la dose de ce médicament.", "medical"),
             ("The council adopted the directive on member states.",
              "Le conseil a adopté la directive sur les États membres.", "law")]
    ids = [correct(client, source=s, corrected=c, machine=None, domain=d).json()["id"]
           for s, c, d in texts]
    headers = admin_headers()
    assert client.post("/admin/corrections/review", headers=headers,
                       json={"action": "approve"}).status_code == 422
    approved = client.post("/admin/corrections/review", headers=headers,
                           json={"action": "approve", "ids": ids[:1]})
    assert approved.json() == {"changed": 1}
    rejected = client.post("/admin/corrections/review", headers=headers,
                           json={"action": "reject", "domain": "medical"})
    assert rejected.json() == {"changed": 1}  # the approved one is no longer pending
    summary = client.get("/admin/corrections/summary", headers=headers).json()["domains"]
    assert summary["medical"] == {"accepted": 0, "pending": 0, "approved": 1, "rejected": 1,
                                  "new": 1}
    assert summary["law"]["pending"] == 1 and summary["law"]["new"] == 0
    exported = client.get("/admin/corrections/export", params={"domain": "medical"},
                          headers=headers)
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in exported.text.splitlines()]
    assert [line["id"] for line in lines] == ids[:2]
    assert lines == listed(client, domain="medical")  # the list's objects, field for field
    assert client.delete("/admin/corrections", headers=headers).status_code == 422
    gone = client.delete("/admin/corrections", params={"domain": "medical"}, headers=headers)
    assert gone.json() == {"deleted": 2}
    assert [r["domain"] for r in listed(client)] == ["law"]
    assert listed(client, offset=str(2**63 - 1)) == []  # the largest offset SQL takes
    too_far = client.get("/admin/corrections", params={"offset": 2**63}, headers=headers)
    assert too_far.status_code == 422 and "offset" in too_far.text
    assert client.get("/admin/corrections").status_code == 401


def test_the_libretranslate_suggest_errors_keep_its_shape(client: TestClient) -> None:
    missing = client.post("/libretranslate/suggest", json={"q": SOURCE, "source": "en",
                                                           "target": "fr"})
    assert missing.status_code == 400
    assert missing.json() == {"error": "Invalid request: missing s parameter"}
    wrong_language = client.post("/libretranslate/suggest", json={
        "q": SOURCE, "s": "The patient takes one pill a day with a glass of water.",
        "source": "en", "target": "fr"})
    assert wrong_language.status_code == 400
    assert "reads as en" in wrong_language.json()["error"]
    assert wrong_language.headers["access-control-allow-origin"] == "*"


def test_the_aio_client_error_type_for_a_refused_key(tmp_path: Path) -> None:
    settings = make_settings(build_store(tmp_path / "store"), access={"api_keys": True})
    app = create_app(settings)
    with serving(app) as base, LibreTranslate(base + "/libretranslate", timeout=120,
                                              api_key="nmt_unknown") as lt:
        with pytest.raises(LibreTranslateError):
            lt.suggest(SOURCE, FIXED, "en", "fr")


def test_admin_queues_a_refresh_of_a_domain_from_its_corrections(client: TestClient) -> None:
    headers = admin_headers()

    def refresh(**body: Any) -> httpx.Response:
        return client.post("/admin/corrections/refresh", headers=headers, json=body)

    unknown = refresh(domain="nope")
    assert unknown.status_code == 404 and "served: " in unknown.json()["error"]["message"]
    none_yet = refresh(domain="medical")
    assert none_yet.status_code == 422
    assert "no new usable corrections" in none_yet.json()["error"]["message"]
    correct(client)  # anonymous (keys off): pending, trains nothing until approved
    assert refresh(domain="medical").status_code == 422
    client.post("/admin/corrections/review", headers=headers,
                json={"action": "approve", "domain": "medical"})
    # The fixture's modules say nothing about the data they were trained on.
    unknown_data = refresh(domain="medical")
    assert unknown_data.status_code == 409
    assert "does not say what data" in unknown_data.json()["error"]["message"]
    store: Store = client.app.state.store  # type: ignore[attr-defined]
    config, files = module_artifact(SEEDS["medical"])
    shipped = store.publish("module", "medical", files, config=config,
                            backbone_fingerprint=store.record("backbone", BACKBONE).fingerprint,
                            provenance={"data": "shared/data en-fr/domains/medical/train"})
    store.activate("module", "medical", shipped.version)
    bad = refresh(domain="medical", options={"lr": -1, "max_epochs": 2})
    assert bad.status_code == 422 and "allowed: lr" in bad.json()["error"]["message"]
    queued = refresh(domain="medical", options={"max_epochs": 2})
    assert queued.status_code == 202, queued.text
    job = queued.json()
    assert queued.headers["Location"] == f"/admin/jobs/{job['id']}"
    assert job["state"] == "queued" and job["domain"] == "medical"
    assert job["config"]["refresh"] == {"base_version": shipped.version, "trigger": "admin",
                                        "original_data": {"path": "en-fr/domains/medical"}}
    assert job["config"]["training"]["max_epochs"] == 2
    busy = refresh(domain="medical")
    assert busy.status_code == 409 and job["id"] in busy.json()["error"]["message"]
    listed_job = client.get(f"/admin/jobs/{job['id']}", headers=headers).json()
    assert listed_job["config"]["refresh"]["base_version"] == shipped.version
