"""The ModernMT-compatible door (`/modernmt`) on a live server (uvicorn on a loopback
port), called by the official `modernmt` Python client (every call a POST with
X-HTTP-Method-Override and a JSON body or a form) and with exactly the requests
Weblate's ModernMT backend (weblate/machinery/modernmt.py, 5.14) sends: real GETs with
query parameters, `{url}/languages`, a form-encoded `POST /memories`, a CSV glossary."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
from conftest import TOKEN, admin_headers, make_settings
from fastapi.testclient import TestClient
from modernmt import ModernMT, ModernMTException
from test_corrections import build_store
from tmx_files import TOOLKIT_PAIRS, toolkit_tmx
from uvicorn_live import serving

from server.app import create_app

WEBLATE = {"MMT-ApiKey": TOKEN, "MMT-Platform": "Weblate", "MMT-PlatformVersion": "5.14.3"}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_store(tmp_path_factory.mktemp("mmt") / "store")
    with serving(create_app(make_settings(root))) as url:
        yield url + "/modernmt"


@pytest.fixture(scope="module")
def mmt(base: str) -> ModernMT:
    client = ModernMT(TOKEN)
    client._ModernMT__base_url = base  # type: ignore[attr-defined]  # fixed in the client
    return client


def wait_done(mmt: ModernMT, job_id: str) -> Any:
    for _ in range(400):
        job = mmt.memories.get_import_status(job_id)
        if job.progress >= 1:
            return job
        time.sleep(0.05)
    raise AssertionError("the import did not finish")


def test_the_modernmt_client_creates_imports_adds_and_translates(mmt: ModernMT) -> None:
    assert mmt.list_supported_languages() == {"en": ["fr"]}
    memory = mmt.memories.create("acme-client")
    assert isinstance(memory.id, int) and memory.name == "acme-client"
    assert memory.id in [m.id for m in mmt.memories.list()]
    assert mmt.memories.get(memory.id).name == "acme-client"
    job = mmt.memories.import_tmx(memory.id, io.BytesIO(toolkit_tmx()))
    assert job.memory == memory.id
    done = wait_done(mmt, job.id)
    assert done.progress == 1.0 and done.size == len(TOOLKIT_PAIRS)
    # the imported sentence comes back verbatim, markup kept, when the memory is hinted
    source, target = TOOLKIT_PAIRS[0]
    assert mmt.translate("en", "fr", source, hints=[memory.id]).translation == target
    # a pair added by the client changes the next answer; PUT replaces it by its tuid
    added = mmt.memories.add(memory.id, "en", "fr", "Wash your hands.",
                             "Lavez-vous les mains.", tuid="wash-1")
    assert added.progress == 1.0 and wait_done(mmt, added.id).memory == memory.id
    assert mmt.translate("en", "fr", "Wash your hands.",
                         hints=str(memory.id)).translation == "Lavez-vous les mains."
    mmt.memories.replace(memory.id, "wash-1", "en", "fr", "Wash your hands.",
                         "Lavez vos mains.")
    many = mmt.translate("en", "fr", ["Wash your hands.", source], hints=[memory.id])
    assert [t.translation for t in many] == ["Lavez vos mains.", target]
    # without the hint the memory is not in play: the machine answers
    assert mmt.translate("en", "fr", "Wash your hands.").translation != "Lavez vos mains."
    # a standalone memory in hints weighs its best fuzzy match in the context vector
    vector = mmt.get_context_vector("en", "fr", "Wash your hands!", hints=[memory.id])
    weight = dict(part.split(":") for part in vector.split(","))[str(memory.id)]
    assert 0.75 <= float(weight) <= 1.0
    assert mmt.memories.delete(memory.id).id == memory.id
    with pytest.raises(ModernMTException) as error:
        mmt.memories.get(memory.id)
    assert (error.value.status, error.value.type) == (404, "NotFoundException")


def test_the_client_renames_a_memory_and_a_taken_name_is_a_conflict(mmt: ModernMT,
                                                                     base: str) -> None:
    memory = mmt.memories.create("rename-me")
    mmt.memories.create("rename-taken")
    mmt.memories.add(memory.id, "en", "fr", "Save the file.", "Enregistrez le fichier.")
    renamed = mmt.memories.edit(memory.id, name="renamed")
    assert (renamed.id, renamed.name) == (memory.id, "renamed")
    assert mmt.memories.get(memory.id).name == "renamed"
    assert mmt.translate("en", "fr", "Save the file.",
                         hints=[memory.id]).translation == "Enregistrez le fichier."
    native = httpx.get(f"{base.removesuffix('/modernmt')}/admin/memories/renamed",
                       headers=admin_headers(), timeout=60)
    assert native.status_code == 200 and native.json()["id"] == memory.id
    with pytest.raises(ModernMTException) as error:
        mmt.memories.edit(memory.id, name="rename-taken")
    assert (error.value.status, error.value.type) == (409, "ConflictException")
    assert "'rename-taken'" in error.value.message
    with pytest.raises(ModernMTException) as error:
        mmt.memories.edit(memory.id, name="no spaces here")
    assert error.value.status == 400 and "not allowed" in error.value.message
    assert mmt.memories.edit(memory.id).name == "renamed"  # no name: as it was


def test_client_errors_come_in_modernmt_shape(mmt: ModernMT, base: str) -> None:
    with pytest.raises(ModernMTException) as error:
        mmt.translate("en", "fr", "Hello.", hints="one,two")
    assert error.value.status == 400 and "hints" in error.value.message
    with pytest.raises(ModernMTException) as error:
        mmt.translate("en", "de", "Hello.")
    assert error.value.status == 400 and error.value.type == "BadRequestException"
    answer = httpx.get(f"{base}/memories", headers={"MMT-ApiKey": "wrong"}, timeout=60)
    assert answer.status_code == 403
    assert answer.json() == {"status": 403, "error": {
        "type": "ForbiddenException", "message": "the MMT-ApiKey is not the admin token"}}
    assert httpx.get(f"{base}/memories/abc", headers=WEBLATE, timeout=60).json()["status"] == 400
    assert httpx.get(f"{base}/translate", params={"target": "fr"}, timeout=60).json()["error"][
        "message"] == "missing parameter: q"


def test_weblate_lists_translates_and_syncs_a_glossary(base: str) -> None:
    """The calls of Weblate's ModernMTTranslation, in its order: download_languages,
    create_glossary (form-encoded memory, then a multipart CSV), list_glossaries,
    download_translations with `glossaries`, delete_glossary."""
    languages = requests.get(f"{base}/languages", headers=WEBLATE, timeout=30)
    languages.raise_for_status()
    pairs = [(s, t) for s, targets in languages.json()["data"].items() for t in targets]
    assert pairs == [("en", "fr")]
    plain = requests.get(f"{base}/translate", headers=WEBLATE, timeout=60,
                         params={"q": "Close the window.", "source": "en", "target": "fr"})
    assert plain.status_code == 200 and plain.json()["data"]["translation"]
    name = "weblate:1:en:fr:0123abcd"
    created = requests.post(f"{base}/memories", headers=WEBLATE, data={"name": name},
                            timeout=30)
    glossary_id = created.json()["data"]["id"]
    again = requests.post(f"{base}/memories", headers=WEBLATE, data={"name": name},
                          timeout=30)
    assert again.json()["data"]["id"] == glossary_id  # a name again: the same memory
    sheet = io.StringIO()
    writer = csv.writer(sheet)
    writer.writerow(["en", "fr"])  # Weblate's mandatory header
    writer.writerows(csv.reader(["window\tlucarne"], delimiter="\t"))
    uploaded = requests.post(f"{base}/memories/{glossary_id}/glossary", headers=WEBLATE,
                             data={"type": "unidirectional"},
                             files={"csv": ("glossary.csv", sheet.getvalue().encode())},
                             timeout=30)
    uploaded.raise_for_status()
    assert uploaded.json()["data"]["size"] == 1
    unserved = requests.post(f"{base}/memories/{glossary_id}/glossary", headers=WEBLATE,
                             data={"type": "unidirectional"},
                             files={"csv": ("glossary.csv", b"en,es\nwindow,ventana\n")},
                             timeout=30)
    assert unserved.status_code == 400
    assert "no served direction" in unserved.json()["error"]["message"]
    listed = requests.get(f"{base}/memories", headers=WEBLATE, timeout=30).json()["data"]
    assert {m["name"]: m["id"] for m in listed}[name] == glossary_id
    assert all(m["creationDate"] for m in listed)
    translated = requests.get(f"{base}/translate", headers=WEBLATE, timeout=60, params={
        "q": "Close the window.", "source": "en", "target": "fr",
        "glossaries": glossary_id})
    assert "lucarne" in translated.json()["data"]["translation"]
    assert requests.delete(f"{base}/memories/{glossary_id}", headers=WEBLATE,
                           timeout=30).status_code == 200
    gone = requests.delete(f"{base}/memories/{glossary_id}", headers=WEBLATE, timeout=30)
    assert gone.status_code == 404 and "error" in gone.json()


def test_context_vectors_weigh_domain_memories_by_the_router(base: str) -> None:
    """A memory of a domain weighs the router's posterior of its domain; Weblate's
    `context_vector` setting ("id:weight") then routes the request to that domain."""
    native = base.removesuffix("/modernmt")
    made = httpx.post(f"{native}/admin/memories", headers=admin_headers(),
                      json={"name": "medical-tm", "domain": "medical"}, timeout=60)
    assert made.status_code == 201, made.text
    memory_id = made.json()["id"]
    answer = httpx.get(f"{base}/context-vector", headers=WEBLATE, timeout=60, params={
        "source": "en", "targets": "fr", "text": "The patient takes one tablet a day."})
    vectors = answer.json()["data"]["vectors"]
    weights = dict(part.split(":") for part in vectors["fr"].split(","))
    assert 0 < float(weights[str(memory_id)]) <= 1
    routed = httpx.get(f"{base}/translate", headers=WEBLATE, timeout=60, params={
        "q": "Close the window.", "source": "en", "target": "fr",
        "context_vector": f"{memory_id}:1"})
    assert routed.json()["data"]["domain"] == "medical"
    bad = httpx.get(f"{base}/translate", timeout=60, params={
        "q": "x", "target": "fr", "context_vector": "medical"})
    assert bad.status_code == 400 and "context_vector" in bad.json()["error"]["message"]


def test_a_post_with_the_override_is_the_method_it_names(base: str) -> None:
    override = {**WEBLATE, "X-HTTP-Method-Override": "GET"}
    listed = httpx.post(f"{base}/translate/languages", headers=override, timeout=60)
    assert listed.json() == {"status": 200, "data": {"en": ["fr"]}}
    # without the header a POST to a GET route is refused (405)
    assert httpx.post(f"{base}/translate/languages", timeout=60).status_code == 405


@pytest.mark.parametrize("memory", ["٣", "99999999999999999999999", "-1", "1e3"])
def test_memory_ids_are_ascii_integers_of_64_bits(base: str, memory: str) -> None:
    answer = httpx.get(f"{base}/memories/{memory}", headers=WEBLATE, timeout=60)
    assert answer.status_code == 400 and answer.json()["error"]["type"] == (
        "BadRequestException")
    hinted = httpx.get(f"{base}/translate", headers=WEBLATE, timeout=60,
                       params={"q": "x", "source": "en", "target": "fr", "hints": memory})
    assert hinted.status_code == 400


def test_a_form_without_its_boundary_is_a_400(base: str) -> None:
    answer = httpx.get(f"{base}/translate", timeout=60,
                       headers={"Content-Type": "multipart/form-data"})
    assert answer.status_code == 400 and "boundary" in answer.json()["error"]["message"]


def test_a_tmx_import_past_the_owners_unfinished_imports_is_refused_before_its_body(
        tmp_path: Path) -> None:
    """With the shared memories' one unfinished import taken (by another replica), a TMX
    through the ModernMT door is a 429 with Retry-After, even one past the size limit (its
    body never read: not a 413), and leaves no job; a pair, as a form too, is still
    added; once the import ends, the TMX is accepted."""
    settings = make_settings(build_store(tmp_path / "store"),
                             memories={"max_owner_imports": 1, "max_import_bytes": 2**20})
    with TestClient(create_app(settings)) as client:
        made = client.post("/modernmt/memories", headers=WEBLATE, json={"name": "busy"})
        memory_id = made.json()["data"]["id"]
        registry = client.app.state.store.registry  # type: ignore[attr-defined]
        elsewhere = registry.create_memory_import(memory_id, format="tmx", mode="append",
                                                  filename="other.tmx")

        def send(tmx: bytes) -> httpx.Response:
            return client.post(f"/modernmt/memories/{memory_id}/content", headers=WEBLATE,
                               files={"tmx": ("memory.tmx", tmx, "application/xml")})

        for tmx in (toolkit_tmx(), b"<tmx>" + b" " * 2**20 + b"</tmx>"):
            refused = send(tmx)
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["type"] == "TooManyRequestsException"
            assert "NMT_MEMORIES__MAX_OWNER_IMPORTS" in refused.json()["error"]["message"]
            assert int(refused.headers["Retry-After"]) >= 1
        assert [job.id for job in registry.unfinished_memory_imports("shared")] == [
            elsewhere.id]
        pair = client.post(f"/modernmt/memories/{memory_id}/content", headers=WEBLATE,
                           files={"sentence": (None, "Wash your hands."),
                                  "translation": (None, "Lavez-vous les mains.")})
        assert pair.status_code == 200 and pair.json()["data"]["progress"] == 1.0, pair.text
        registry.update_memory_import(elsewhere.id, state="done", progress=1.0)
        accepted = send(toolkit_tmx())
        assert accepted.status_code == 200, accepted.text
        assert client.get(f"/modernmt/memories/{memory_id}", headers=WEBLATE).status_code == 200
