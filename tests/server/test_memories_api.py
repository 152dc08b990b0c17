"""Translation memories through HTTP on the tiny en->fr store: TMX files of two real
writers import with their pair counts, exact matches answer verbatim (markup kept,
glossaries untouched), fuzzy matches come back sorted, a domain's memory serves its
requests, single pairs and corrections change the next answer, hostile or broken files
import nothing and never answer 5xx, large files become jobs, export reads back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import admin_headers, make_settings
from fastapi.testclient import TestClient
from test_corrections import build_store
from tmx_files import (
    BILLION_LAUGHS,
    EXTERNAL_ENTITY,
    TOOLKIT_PAIRS,
    one_sided_unit,
    python_tmx_file,
    toolkit_tmx,
)

from server.app import create_app

H = admin_headers()
LEAFLET = [("Take two tablets a day with water.", "Prenez deux comprimés par jour avec de l'eau."),
           ("Take one tablet a day with water.", "Prenez un comprimé par jour avec de l'eau."),
           ("Take two tablets a day with food.", "Prenez deux comprimés par jour au repas."),
           ("Keep out of the reach of children.", "Tenir hors de la portée des enfants.")]


def client_for(tmp_path: Path, **settings: Any) -> TestClient:
    return TestClient(create_app(make_settings(build_store(tmp_path / "store"), **settings)))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with client_for(tmp_path) as client:
        yield client


def create(client: TestClient, name: str = "acme", **fields: Any) -> dict[str, Any]:
    answer = client.post("/admin/memories", json={"name": name, **fields}, headers=H)
    assert answer.status_code == 201, answer.text
    found: dict[str, Any] = answer.json()
    return found


def upload(client: TestClient, name: str, data: bytes, **query: str) -> Any:
    return client.post(f"/admin/memories/{name}/import", params=query, content=data,
                       headers={**H, "Content-Type": "application/x-tmx+xml"})


def add(client: TestClient, name: str, source: str, target: str, **extra: Any) -> Any:
    answer = client.post(f"/admin/memories/{name}/pairs",
                         json={"source": source, "target": target, **extra}, headers=H)
    assert answer.status_code == 201, answer.text
    return answer.json()


def translate(client: TestClient, text: str, **fields: Any) -> dict[str, Any]:
    answer = client.post("/translate", json={"text": text, **fields})
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def pairs_of(client: TestClient, name: str) -> int:
    found: int = client.get(f"/admin/memories/{name}", headers=H).json()["pairs"]
    return found


def test_tmx_files_of_two_real_writers_import_with_their_pair_counts(
        client: TestClient) -> None:
    memory = create(client)
    assert (memory["source"], memory["target"], memory["owner"]) == ("en", "fr", "shared")
    form = client.post("/admin/memories/acme/import", headers=H,
                       files={"file": ("toolkit.tmx", toolkit_tmx(), "application/xml")})
    assert form.status_code == 200, form.text
    job = form.json()
    assert (job["state"], job["filename"], job["format"]) == ("done", "toolkit.tmx", "tmx")
    assert job["report"]["pairs"] == len(TOOLKIT_PAIRS) and job["progress"] == 1.0
    utf16 = python_tmx_file(extra_units=[one_sided_unit("Alone.")])
    written = upload(client, "acme", utf16).json()
    assert written["state"] == "done" and written["report"]["pairs"] == 3
    assert written["report"]["skipped"] == {"no_target_segment": 1}
    assert pairs_of(client, "acme") == len(TOOLKIT_PAIRS) + 3
    create(client, "acme-utf8")
    utf8 = upload(client, "acme-utf8", python_tmx_file(encoding="UTF-8")).json()
    assert utf8["state"] == "done" and utf8["report"]["pairs"] == 3
    held = translate(client, "Delete {count} files?", memory="acme-utf8")
    assert held["translation"] == "Supprimer {count} fichiers ?"
    assert held["match"]["memory"] == "acme-utf8" and held["match"]["tuid"] == "ui-3"
    listed = client.get("/admin/memories/acme/pairs", params={"limit": 2}, headers=H).json()
    assert len(listed["pairs"]) == 2 and listed["next_after"] == listed["pairs"][1]["id"]
    assert listed["pairs"][0]["attributes"]["notes"] == ["checked by the reviewer"]


def test_an_exact_match_returns_the_memorys_target_verbatim_with_markup_kept(
        client: TestClient) -> None:
    create(client)
    upload(client, "acme", toolkit_tmx())
    source, target = TOOLKIT_PAIRS[0]
    for fmt in ("text", "html"):
        answer = translate(client, source, memory="acme", format=fmt)
        assert answer["translation"] == target
        assert answer["match"]["score"] == 100 and answer["match"]["memory"] == "acme"
        assert answer["match"]["origin"] == "import"
    # glossary rules apply to machine output, never to a human's exact match
    kept = translate(client, source, memory="acme", glossary={"Save": "Sauvegarder"})
    assert kept["translation"] == target
    assert kept["glossary"] == {"applied": [], "missed": []}  # no machine sentence held it
    # in a longer text, the sentence the memory holds is its target, the rest the engine's
    mixed = translate(client, f"{TOOLKIT_PAIRS[1][0]} Shake well.", memory=["acme"])
    assert mixed["translation"].startswith(TOOLKIT_PAIRS[1][1] + " ")
    assert [m["source"] for m in mixed["sentence_matches"]] == [TOOLKIT_PAIRS[1][0]]
    assert "match" not in mixed


def test_fuzzy_matches_come_back_best_first_beside_the_machine_translation(
        client: TestClient) -> None:
    create(client, "leaflets")
    for source, target in LEAFLET:
        add(client, "leaflets", source, target)
    answer = translate(client, "Take three tablets a day with water.", memory="leaflets")
    scores = [m["score"] for m in answer["matches"]]
    assert len(scores) >= 2 and scores == sorted(scores, reverse=True)
    assert all(75 <= s < 100 for s in scores)
    assert answer["matches"][0]["source"] == LEAFLET[0][0]
    assert answer["translation"] not in {target for _, target in LEAFLET}
    assert "match" not in answer
    batch = client.post("/translate/batch", json={"memory": "leaflets", "items": [
        {"text": LEAFLET[3][0]}, {"text": LEAFLET[3][0], "memory": False}]}).json()
    first, second = batch["results"]
    assert first["translation"] == LEAFLET[3][1] and "matches" not in second


def test_memory_false_names_and_unknown_memories(client: TestClient) -> None:
    create(client)
    add(client, "acme", "Open the file.", "Ouvrez le fichier.")
    off = translate(client, "Open the file.", memory=False)
    assert "match" not in off and "matches" not in off
    unknown = client.post("/translate", json={"text": "Open the file.", "memory": ["acme",
                                                                                  "nope"]})
    assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "memory"
    assert "acme" in unknown.json()["error"]["message"]
    bad = client.post("/translate", json={"text": "x", "memory": True})
    assert bad.status_code == 422


def test_a_renamed_memory_answers_by_its_new_name_and_names_are_not_shared(
        client: TestClient) -> None:
    created = create(client)
    create(client, "taken")
    add(client, "acme", "Open the file.", "Ouvrez le fichier.")
    renamed = client.patch("/admin/memories/acme", json={"name": "acme-legal"}, headers=H)
    assert renamed.status_code == 200, renamed.text
    assert (renamed.json()["id"], renamed.json()["name"], renamed.json()["pairs"]) == (
        created["id"], "acme-legal", 1)
    assert translate(client, "Open the file.", memory="acme-legal")["match"]["memory"] == \
        "acme-legal"
    assert client.post("/translate", json={"text": "x", "memory": "acme"}).status_code == 404
    taken = client.patch("/admin/memories/acme-legal", json={"name": "taken"}, headers=H)
    assert taken.status_code == 409 and taken.json()["error"]["field"] == "name"
    assert "'taken'" in taken.json()["error"]["message"]
    for body in ({"name": "no spaces"}, {"name": ""}, {"domain": "law"}):
        assert client.patch("/admin/memories/acme-legal", json=body,
                            headers=H).status_code == 422
    assert client.patch("/admin/memories/acme", json={"name": "x"},
                        headers=H).status_code == 404


def test_a_domains_memory_serves_the_requests_routed_to_it(client: TestClient) -> None:
    create(client, "medical-tm", domain="medical")
    conflict = client.post("/admin/memories", json={"name": "other", "domain": "medical"},
                           headers=H)
    assert conflict.status_code == 409
    add(client, "medical-tm", LEAFLET[3][0], LEAFLET[3][1])
    assert translate(client, LEAFLET[3][0], domain="medical")["match"]["memory"] == \
        "medical-tm"
    assert "match" not in translate(client, LEAFLET[3][0], domain="law")
    assert "match" not in translate(client, LEAFLET[3][0], domain="medical", memory=False)


def test_single_pairs_added_replaced_and_deleted_change_the_next_answer(
        client: TestClient) -> None:
    create(client)
    pair = add(client, "acme", "Open the file.", "Ouvrez le fichier.", tuid="ui-1")
    assert translate(client, "Open  the file.", memory="acme")["translation"] == \
        "Ouvrez le fichier."
    replaced = client.put(f"/admin/memories/acme/pairs/{pair['id']}", headers=H,
                          json={"source": "Open the file.", "target": "Ouvrir le fichier."})
    assert replaced.status_code == 200
    assert translate(client, "Open the file.", memory="acme")["translation"] == \
        "Ouvrir le fichier."
    again = add(client, "acme", "Open the file!", "Ouvrez le fichier !", tuid="ui-1",
                replace="tuid")
    assert pairs_of(client, "acme") == 1
    assert "match" not in translate(client, "Open the file.", memory="acme")
    gone = client.delete(f"/admin/memories/acme/pairs/{again['id']}", headers=H)
    assert gone.status_code == 204 and pairs_of(client, "acme") == 0
    empty = client.post("/admin/memories/acme/pairs", json={"source": " ", "target": "x"},
                        headers=H)
    assert empty.status_code == 422 and empty.json()["error"]["field"] == "source"
    assert client.delete("/admin/memories/acme", headers=H).status_code == 200
    assert client.post("/translate", json={"text": "x", "memory": "acme"}).status_code == 404


def test_a_posted_correction_changes_the_next_answer_for_the_same_sentence(
        tmp_path: Path) -> None:
    source = "The patient takes one tablet a day with a glass of water."
    fixed = "Le patient prend un comprimé par jour avec un verre d'eau."
    with client_for(tmp_path, access={"api_keys": True}) as client:
        key = client.post("/admin/keys", json={"name": "ana"}, headers=H).json()["key"]
        headers = {"X-API-Key": key}
        before = client.post("/translate", json={"text": source, "domain": "medical"},
                             headers=headers).json()
        assert before["translation"] != fixed and "match" not in before
        sent = client.post("/corrections", headers=headers, json={
            "source": source, "corrected": fixed, "machine": before["translation"],
            "domain": "medical"})
        assert sent.status_code == 201 and sent.json()["status"] == "accepted"
        after = client.post("/translate", json={"text": source, "domain": "medical"},
                            headers=headers).json()
        assert after["translation"] == fixed
        assert after["match"]["origin"] == "correction" and after["match"]["memory"] == \
            "medical"
        # the retraining path is unchanged: the correction waits for a refresh as before
        rows = client.get("/admin/corrections", headers=H).json()["corrections"]
        assert [(r["status"], r["used_in"]) for r in rows] == [("accepted", None)]


def test_an_anonymous_correction_reaches_the_memory_once_approved(
        client: TestClient) -> None:
    source = "Close the window before you leave the office today."
    fixed = "Fermez la fenêtre avant de quitter le bureau aujourd'hui."
    sent = client.post("/corrections", json={"source": source, "corrected": fixed,
                                              "domain": "it"})
    assert sent.json()["status"] == "pending"
    assert "match" not in translate(client, source, domain="it")
    reviewed = client.post("/admin/corrections/review", headers=H,
                           json={"action": "approve", "all": True})
    assert reviewed.json() == {"changed": 1}
    assert translate(client, source, domain="it")["translation"] == fixed


@pytest.mark.parametrize(("data", "error"), [
    (BILLION_LAUGHS, "declares entities"),
    (EXTERNAL_ENTITY, "declares entities"),
    (toolkit_tmx()[:-60], "not well-formed"),
    (python_tmx_file(codes=("de-DE", "it-IT")), "none of the file's 3 units"),
    (b"<tmx version='1.4'><body/></tmx>", "no translation unit"),
])
def test_hostile_or_broken_files_import_nothing_and_say_why(
        client: TestClient, data: bytes, error: str) -> None:
    create(client)
    add(client, "acme", "Open the file.", "Ouvrez le fichier.")
    answer = upload(client, "acme", data, mode="replace")
    assert answer.status_code == 200, answer.text
    job = answer.json()
    assert job["state"] == "failed" and error in job["error"] and job["report"]["pairs"] == 0
    assert pairs_of(client, "acme") == 1  # replace mode: the old pairs stay all the same
    assert translate(client, "Open the file.", memory="acme")["match"]["score"] == 100


def test_oversized_unnamed_and_empty_uploads_are_refused(tmp_path: Path) -> None:
    with client_for(tmp_path, memories={"max_import_bytes": 2048}) as client:
        create(client)
        big = upload(client, "acme", b"<tmx>" + b" " * 4096 + b"</tmx>")
        assert big.status_code == 413
        unnamed = client.post("/admin/memories/acme/import", content=b"a\tb\n",
                              headers={**H, "Content-Type": "text/plain"})
        assert unnamed.status_code == 422 and unnamed.json()["error"]["field"] == "format"
        assert upload(client, "acme", b"").status_code == 422
        assert upload(client, "nope", toolkit_tmx()).status_code == 404


def test_a_large_file_is_a_job_with_progress_and_replace_mode_replaces(
        tmp_path: Path) -> None:
    with client_for(tmp_path, memories={"sync_import_bytes": 0}) as client:
        create(client)
        add(client, "acme", "Old pair.", "Ancienne paire.")
        queued = upload(client, "acme", toolkit_tmx(), mode="replace")
        assert queued.status_code == 202, queued.text
        job_id = queued.json()["id"]
        deadline = time.monotonic() + 60
        while (job := client.get(f"/admin/memory-imports/{job_id}", headers=H).json()
               )["state"] not in ("done", "failed"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert job["state"] == "done" and job["progress"] == 1.0
        assert pairs_of(client, "acme") == len(TOOLKIT_PAIRS)
        assert translate(client, TOOLKIT_PAIRS[2][0], memory="acme")["translation"] == \
            TOOLKIT_PAIRS[2][1]
        assert client.get("/admin/memory-imports/nope", headers=H).status_code == 404


def test_an_owner_past_its_unfinished_imports_is_refused_until_one_ends(
        tmp_path: Path) -> None:
    """The shared memories may have 2 unfinished imports here: two queued by another
    replica (rows in the shared registry) fill it, a third upload is 429 with why and when
    and leaves no job behind; once one ends the upload is accepted."""
    with client_for(tmp_path, memories={"max_owner_imports": 2,
                                        "max_import_bytes": 2**20}) as client:
        memory = create(client)
        registry = client.app.state.store.registry  # type: ignore[attr-defined]
        elsewhere = [registry.create_memory_import(memory["id"], format="tmx",
                                                   mode="append", filename=f"{n}.tmx")
                     for n in range(2)]
        refused = upload(client, "acme", toolkit_tmx())
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "too_many_jobs"
        assert "NMT_MEMORIES__MAX_OWNER_IMPORTS" in refused.json()["error"]["message"]
        assert int(refused.headers["Retry-After"]) >= 1
        # refused before its body is read: a file past the size limit is 429, not 413
        oversized = upload(client, "acme", b"<tmx>" + b" " * (2**20) + b"</tmx>")
        assert oversized.status_code == 429, oversized.text
        assert [job.id for job in registry.unfinished_memory_imports("shared")] == \
            [job.id for job in elsewhere]  # the refused upload made no job
        assert pairs_of(client, "acme") == 0
        registry.update_memory_import(elsewhere[0].id, state="done", progress=1.0)
        accepted = upload(client, "acme", toolkit_tmx())
        assert accepted.status_code == 200 and accepted.json()["state"] == "done"
        assert pairs_of(client, "acme") == len(TOOLKIT_PAIRS)


def test_export_is_tmx_that_imports_back(client: TestClient) -> None:
    create(client)
    upload(client, "acme", python_tmx_file())
    exported = client.get("/admin/memories/acme/export", headers=H)
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("application/x-tmx+xml")
    create(client, "copy")
    again = upload(client, "copy", exported.content).json()
    assert again["report"]["pairs"] == 3
    first = client.get("/admin/memories/copy/pairs", headers=H).json()["pairs"][0]
    assert first["tuid"] == "leaflet-1" and first["attributes"]["props"] == [
        ["x-Project", "Leaflets 2025"]]
    assert client.get("/admin/memories/nope/export", headers=H).status_code == 404


def test_the_version_shows_in_the_listing_the_matches_and_the_export(
        client: TestClient) -> None:
    def version() -> int:
        found: int = client.get("/admin/memories/acme", headers=H).json()["version"]
        return found

    created = create(client)["version"]
    assert client.get("/admin/memories", headers=H).json()["memories"][0]["version"] == \
        created == version() > 0
    add(client, "acme", "Open the file.", "Ouvrez le fichier.")
    added = version()
    assert added > created
    assert translate(client, "Open the file.", memory="acme")["match"]["version"] == added
    upload(client, "acme", toolkit_tmx())
    imported = version()
    assert imported > added
    [fuzzy] = translate(client, "Open the files.", memory="acme")["matches"]
    assert (fuzzy["source"], fuzzy["version"]) == ("Open the file.", imported)
    sentence = translate(client, f"Open the file. {TOOLKIT_PAIRS[1][0]}", memory="acme")
    assert [m["version"] for m in sentence["sentence_matches"]] == [imported, imported]
    renamed = client.patch("/admin/memories/acme", json={"name": "acme-2"}, headers=H)
    assert renamed.json()["version"] == imported  # a rename leaves the pairs as they were
    exported = client.get("/admin/memories/acme-2/export", headers=H).content
    assert f'<prop type="x-memory-version">{imported}</prop>'.encode() in exported


def test_memories_can_be_turned_off(tmp_path: Path) -> None:
    with client_for(tmp_path, memories={"enabled": False}) as client:
        assert client.get("/admin/memories", headers=H).status_code == 403
        assert "matches" not in translate(client, "Open the file.", memory="acme")


def test_a_documents_sentences_use_the_domains_memory(client: TestClient) -> None:
    create(client, "medical-tm", domain="medical")
    add(client, "medical-tm", LEAFLET[3][0], LEAFLET[3][1])
    text = f"Leaflet\n\n{LEAFLET[3][0]} Shake well before use.\n"
    answer = client.post("/translate/file", data={"domain": "medical"},
                         files={"file": ("leaflet.txt", text.encode(), "text/plain")})
    assert answer.status_code == 200, answer.text
    lines = answer.content.decode().split("\n")
    assert lines[2].startswith(LEAFLET[3][1] + " ")
