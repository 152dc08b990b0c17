"""`POST /translate/file` over the tiny model: the same pipeline as /translate/batch
(one routing decision for the whole file), the file's structure and encoding kept, and
every refusal a quick 4xx that names the problem, with nothing left behind."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_client
from fastapi.testclient import TestClient
from test_libretranslate import build_store
from test_server_bulk_batches import engine_blocked

SRT = ("1\r\n00:00:01,000 --> 00:00:02,500\r\nThe patient takes <i>one tablet</i>\r\n"
       "every day.\r\n\r\n2\r\n00:00:03,000 --> 00:00:04,000\r\nAsk the doctor "
       "about the dose.\r\n")
TXT = "The patient takes one tablet a day.\nThe dose is adjusted for children.\n\n" \
      "Ask the doctor.\n"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    root = build_store(tmp_path_factory.mktemp("documents") / "store")
    with make_client(root, documents={"max_bytes": 4096}) as client:
        yield client


def post(client: TestClient, name: str, data: bytes, **fields: str):  # type: ignore[no-untyped-def]
    return client.post("/translate/file", files={"file": (name, data)}, data=fields)


def test_a_subtitle_file_comes_back_translated_with_its_timecodes(client: TestClient) -> None:
    response = post(client, "leaflet.srt", SRT.encode("cp1252"))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-subrip")
    assert 'filename="leaflet.fr.srt"' in response.headers["content-disposition"]
    routing = json.loads(response.headers["x-nmt-routing"])
    assert routing["mode"] in ("classifier", "ensemble", "generic")
    assert response.headers["x-nmt-segments"] == "2"
    written = response.content.decode("cp1252")
    timing = re.compile(r"^.*-->.*$", re.MULTILINE)
    assert timing.findall(written) == timing.findall(SRT)
    blocks = written.split("\r\n\r\n")
    assert [b.split("\r\n")[0] for b in blocks] == ["1", "2"]
    assert len(blocks[0].split("\r\n")) == 4  # two text lines in, two out
    assert "patient" not in written


def test_the_file_is_the_batch_endpoints_translation_of_its_lines(client: TestClient) -> None:
    """One routing decision for the whole file; each line translated as /translate/batch
    translates it with that domain."""
    response = post(client, "notes.txt", TXT.encode(), domain="medical")
    assert response.status_code == 200, response.text
    assert json.loads(response.headers["x-nmt-routing"])["domain"] == "medical"
    lines = [line for line in TXT.splitlines() if line]
    batch = client.post("/translate/batch", json={
        "domain": "medical", "items": [{"text": line} for line in lines]})
    expected = [r["translation"] for r in batch.json()["results"]]
    written = response.content.decode().split("\n")
    assert [w for w in written if w] == expected
    assert written[2] == "" and len(written) == len(TXT.split("\n"))


def test_each_units_quality_comes_beside_the_file(client: TestClient) -> None:
    """X-NMT-Quality: the units (segments) scored, their lowest and mean quality, and which
    units hold a sentence under min_quality (the batch endpoint's own flags)."""
    response = post(client, "notes.txt", TXT.encode(), domain="medical")
    assert response.status_code == 200, response.text
    report = json.loads(response.headers["x-nmt-quality"])
    units = int(response.headers["x-nmt-segments"])
    lines = [line for line in TXT.splitlines() if line]
    batch = client.post("/translate/batch", json={
        "domain": "medical", "items": [{"text": line} for line in lines]}).json()["results"]
    qualities = [r["quality"] for r in batch]
    assert report["units"] == units and report["scored"] == len(lines)
    assert report["lowest"] == min(qualities)
    assert report["mean"] == pytest.approx(sum(qualities) / len(qualities), abs=1e-4)
    assert report["flagged"] == len(report["flagged_units"]) == sum(
        any(s["flagged"] for s in r["sentences"]) for r in batch)
    assert all(0 <= unit < units for unit in report["flagged_units"])


def test_automatic_routing_is_one_decision_for_the_document(client: TestClient) -> None:
    medical = "The patient takes one tablet.\nThe dose for children.\nAsk about the medicine.\n"
    response = post(client, "a.txt", medical.encode())
    routing = json.loads(response.headers["x-nmt-routing"])
    assert routing["mode"] == "classifier" and routing["domain"] == "medical"
    assert routing["module_version"] == 1


@pytest.mark.parametrize(("name", "data", "status", "message"), [
    ("setup.exe", b"MZ", 415, r"'\.exe'.*supported: \.txt, .*\.srt"),
    ("noext", b"hello", 415, "no extension"),
    ("a.srt", b"1\n00:00:01,000 --> 00:00:0\nHi\n", 422, "line 2: malformed SubRip timing"),
    ("a.txt", "Caf\u00e9".encode()[:-1], 422, "truncated"),
    ("a.xlf", b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
              b"<xliff>&e;</xliff>", 422, "DOCTYPE or entities"),
    ("a.txt", b"", 422, "empty"),
    ("big.txt", b"word " * 1000, 413, "at most 4096"),
])
def test_bad_files_are_refused_with_the_reason(client: TestClient, name: str, data: bytes,
                                               status: int, message: str) -> None:
    response = post(client, name, data)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert re.search(message, error["message"]), error
    assert error["field"] == "file"


@pytest.mark.parametrize(("fields", "status", "field"), [
    ({"target": "de"}, 400, "target"),
    ({"source": "es"}, 400, "source"),
    ({"domain": "cooking"}, 404, "domain"),
    ({"domain": "{\"medical\": \"x\"}"}, 422, "domain"),
    ({"glossary_id": "missing"}, 404, "glossary_id"),
    ({"colour": "red"}, 422, "colour"),
    ({"overwrite": "maybe"}, 422, "overwrite"),
])
def test_bad_fields_are_named(client: TestClient, fields: dict[str, str], status: int,
                              field: str) -> None:
    response = post(client, "a.txt", b"Open the file.\n", **fields)
    assert response.status_code == status, response.text
    assert response.json()["error"]["field"] == field


def test_the_served_direction_and_weights_are_accepted(client: TestClient) -> None:
    response = post(client, "a.txt", b"Open the file.\n", source="en", target="fr",
                    domain='{"it": 0.7, "generic": 0.3}')
    assert response.status_code == 200, response.text
    routing = json.loads(response.headers["x-nmt-routing"])
    assert routing["mode"] == "ensemble" and routing["weights"] == {"it": 0.7, "generic": 0.3}


def test_not_multipart_is_refused(client: TestClient) -> None:
    response = client.post("/translate/file", content=b"hello",
                           headers={"content-type": "text/plain"})
    assert response.status_code == 422
    assert "multipart/form-data" in response.json()["error"]["message"]


def test_a_large_upload_leaves_no_temporary_file(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Starlette spools a file part over 1 MiB to disk; refused or not, it is deleted."""
    root = build_store(tmp_path / "store")
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    with make_client(root, documents={"max_bytes": 3 << 20, "max_chars": 10}) as client:
        response = post(client, "big.txt", b"word " * (2 << 18))
        assert response.status_code == 413, response.text
        assert "NMT_DOCUMENTS__MAX_CHARS" in response.json()["error"]["message"]
        response = post(client, "big.txt", b"word " * (1 << 20))
        assert response.status_code == 413
    assert list(spool.iterdir()) == []


def test_a_large_file_becomes_a_job_with_progress_and_a_result(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    lines = "".join(f"The patient takes tablet number {i}.\n" for i in range(60))
    with make_client(root, documents={"sync_chars": 100, "chunk_chars": 300}) as client:
        response = post(client, "long.txt", lines.encode())
        assert response.status_code == 202, response.text
        job = response.json()
        assert job["state"] in ("queued", "running")
        assert job["progress"]["total"] == 60 and job["result_url"] is None
        assert response.headers["location"] == f"/translate/file/jobs/{job['id']}"
        done = client.get(response.headers["location"], params={"wait": 30}).json()
        assert done["state"] == "done", done
        assert done["progress"] == {"done": 60, "total": 60, "fraction": 1.0}
        assert done["routing"]["mode"] == "classifier"
        result = client.get(done["result_url"])
        assert result.status_code == 200
        assert 'filename="long.fr.txt"' in result.headers["content-disposition"]
        written = result.content.decode().split("\n")
        assert len(written) == 61 and "patient" not in result.text
        # the same text through the synchronous path gives the same file
        with make_client(root) as direct:
            same = post(direct, "long.txt", lines.encode(), domain=done["routing"]["domain"])
        assert same.content == result.content
        # chunks of the job, one call for the direct path: the same per-unit report
        report = json.loads(result.headers["x-nmt-quality"])
        assert report["units"] == report["scored"] == 60
        assert report == json.loads(same.headers["x-nmt-quality"])
        assert done["quality"] == report  # the job's status says it too


def test_a_client_past_its_unfinished_document_jobs_is_refused_until_one_ends(
        tmp_path: Path) -> None:
    """Each job holds its upload on disk and a place in the queue: a client may have
    NMT_DOCUMENTS__MAX_CLIENT_JOBS unfinished, one more is a 429 that says why and when
    and leaves nothing behind (another client is not affected), and once its jobs end the
    client may send again."""
    root = build_store(tmp_path / "store")
    lines = "".join(f"The patient takes tablet number {i}.\n" for i in range(20)).encode()
    settings = {"sync_chars": 100, "chunk_chars": 300, "max_client_jobs": 2}
    with make_client(root, documents=settings) as client:
        with engine_blocked(client):
            first, second, refused = [post(client, "long.txt", lines) for _ in range(3)]
            other = client.post("/translate/file", files={"file": ("long.txt", lines)},
                                headers={"X-API-Key": "another client"})
        assert [first.status_code, second.status_code, other.status_code] == [202] * 3
        assert refused.status_code == 429
        error = refused.json()["error"]
        assert error["code"] == "too_many_jobs"
        assert "NMT_DOCUMENTS__MAX_CLIENT_JOBS" in error["message"]
        assert int(refused.headers["Retry-After"]) >= 1
        assert len(list((root / "document-jobs").iterdir())) == 3
        for accepted in (first, second, other):
            done = client.get(accepted.headers["location"], params={"wait": 60}).json()
            assert done["state"] == "done", done
        assert post(client, "long.txt", lines).status_code == 202


def test_a_job_another_replica_writes_meanwhile_counts_before_the_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Replicas share the jobs folder: another replica writes a job of this client after
    this one checked its room and before it wrote its own. Counted again once written,
    the client's jobs would pass the bound: this replica's job is removed and the upload
    refused (429), the other replica's job kept."""
    root = build_store(tmp_path / "store")
    lines = "".join(f"The patient takes tablet number {i}.\n" for i in range(20)).encode()
    settings = {"sync_chars": 100, "chunk_chars": 300, "max_client_jobs": 2}
    with make_client(root, documents=settings) as client, engine_blocked(client):
        first = post(client, "long.txt", lines)
        assert first.status_code == 202
        jobs = client.app.state.document_jobs  # type: ignore[attr-defined]
        written = jobs._create
        folder = root / "document-jobs"

        def another_replica_first(files, job, data):  # type: ignore[no-untyped-def]
            copy = folder / ("f" * 32)
            state = json.loads(_job_file(root, first.json()["id"]).read_text())
            copy.mkdir()
            (copy / "job.json").write_text(json.dumps({**state, "id": copy.name}))
            written(files, job, data)

        monkeypatch.setattr(jobs, "_create", another_replica_first)
        refused = post(client, "long.txt", lines)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "too_many_jobs"
        assert sorted(p.name for p in folder.iterdir()) == sorted([first.json()["id"],
                                                                   "f" * 32])


def test_unknown_and_unfinished_jobs(client: TestClient) -> None:
    assert client.get("/translate/file/jobs/" + "0" * 32).status_code == 404
    assert client.get("/translate/file/jobs/..%2F..%2Fetc").status_code == 404
    response = client.get("/translate/file/jobs/" + "0" * 32 + "/result")
    assert response.status_code == 404 and response.json()["error"]["field"] == "job_id"


def _job_file(root: Path, job_id: str) -> Path:
    return root / "document-jobs" / job_id / "job.json"


def test_jobs_survive_a_restart_or_fail_cleanly(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    lines = "".join(f"Click the button number {i}.\n" for i in range(40)).encode()
    settings = {"documents": {"sync_chars": 10, "chunk_chars": 200, "running_jobs": 1}}
    with make_client(root, **settings) as client:
        ids = [post(client, f"doc{n}.txt", lines).json()["id"] for n in range(3)]
    # the app stopped: what was running went back to the queue, nothing was lost
    states = [json.loads(_job_file(root, i).read_text())["state"] for i in ids]
    assert set(states) <= {"queued", "done"}
    # a crash: the second job's owner died while running it (a pid that ran and ended)
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    for job_id, attempts in ((ids[1], 1), (ids[2], 3)):
        state = json.loads(_job_file(root, job_id).read_text())
        state.update(state="running", owner=f"{host}:{dead.pid}", attempts=attempts, done=5)
        _job_file(root, job_id).write_text(json.dumps(state))
    with make_client(root, **settings) as client:
        first = client.get(f"/translate/file/jobs/{ids[0]}", params={"wait": 30}).json()
        second = client.get(f"/translate/file/jobs/{ids[1]}", params={"wait": 30}).json()
        third = client.get(f"/translate/file/jobs/{ids[2]}").json()
        assert first["state"] == second["state"] == "done"
        assert client.get(second["result_url"]).status_code == 200
        assert third["state"] == "failed"
        assert third["error"] == {"code": "interrupted", "message":
                                  "the server stopped 3 times while translating it"}
        refused = client.get(f"/translate/file/jobs/{ids[2]}/result")
        assert refused.status_code == 409 and "failed" in refused.json()["error"]["message"]
    leftovers = [p.name for p in (root / "document-jobs").rglob("*.tmp")]
    assert leftovers == []
