"""Tenants' jobs on every door that has them (a live server, API keys on): a document job
(native and DeepL), a batch job, a memory import (native and ModernMT) and a training job
belong to the tenant whose request started them. Another tenant's job id is answered
exactly as an unknown id (404, the same text); the operator follows every job."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from typing import Any

import deepl
import httpx
import pytest
from conftest import admin_headers, make_settings
from modernmt import ModernMT
from tenant_world import World, build_tenant_store, make_world, same_refusal
from tmx_files import toolkit_tmx
from uvicorn_live import serving

from server.app import create_app
from tests.trainer.sidecar_store import new_domain_pairs, tsv

TEXT = b"The court heard the appeal.\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = build_tenant_store(tmp_path_factory.mktemp("tenant-jobs") / "store")
    # every upload a job (sync_chars 1); small training uploads are accepted
    settings = make_settings(root, access={"api_keys": True, "cache_s": 0.0},
                             documents={"sync_chars": 1},
                             limits={"min_domain_pairs": 20})
    with serving(create_app(settings)) as base:
        yield make_world(base)


def get(world: World, path: str, *, key: str | None = None, token: str | None = None,
        **kwargs: Any) -> httpx.Response:
    headers = {"X-API-Key": key} if key else admin_headers(token) if token else {}
    return httpx.get(world.base + path, headers=headers, timeout=30, **kwargs)


def hidden(world: World, path: str, job_id: str, **who: str) -> bool:
    """Whether `path` (with `{id}`) answers `job_id` exactly as an id nobody made."""
    unknown = uuid.uuid4().hex
    theirs = get(world, path.format(id=job_id), **who)
    missing = get(world, path.format(id=unknown), **who)
    return theirs.status_code == 404 and same_refusal(theirs, missing, job_id, unknown)


def test_native_document_and_batch_jobs_are_their_tenants(world: World) -> None:
    upload = httpx.post(world.base + "/translate/file", headers={"X-API-Key": world.beta},
                        files={"file": ("notes.txt", TEXT)}, timeout=60)
    assert upload.status_code == 202, upload.text
    document = upload.json()["id"]
    batch = httpx.post(world.base + "/translate/batch", headers={"X-API-Key": world.beta},
                       json={"items": [{"text": "The court."}], "async": True}, timeout=30)
    assert batch.status_code == 202, batch.text
    batch_id = batch.json()["id"]
    for path, job_id in (("/translate/file/jobs/{id}?wait=30", document),
                         ("/translate/file/jobs/{id}/result", document),
                         ("/translate/batch/jobs/{id}?wait=30", batch_id)):
        assert get(world, path.format(id=job_id), key=world.beta).status_code == 200
        for other in (world.acme, world.shared):
            assert hidden(world, path, job_id, key=other), path
        assert hidden(world, path, job_id)  # no key: the shared scope
    # a key of no tenant follows its own jobs, a tenant's key not those
    shared = httpx.post(world.base + "/translate/batch", headers={"X-API-Key": world.shared},
                        json={"items": [{"text": "The court."}], "async": True}, timeout=30)
    assert get(world, f"/translate/batch/jobs/{shared.json()['id']}",
               key=world.shared).status_code == 200
    assert hidden(world, "/translate/batch/jobs/{id}", shared.json()["id"], key=world.acme)


def test_deepl_documents_are_their_tenants(world: World) -> None:
    beta = deepl.Translator(world.beta, server_url=world.base + "/deepl")
    handle = beta.translate_document_upload(TEXT, target_lang="FR",
                                            filename="notes.txt")
    beta.translate_document_wait_until_done(handle)
    assert beta.translate_document_get_status(handle).ok
    for path in ("/deepl/v2/document/{id}", "/deepl/v2/document/{id}/result"):
        def status(key: str, document_id: str, path: str = path) -> httpx.Response:
            return httpx.post(world.base + path.format(id=document_id),
                              headers={"Authorization": f"DeepL-Auth-Key {key}"},
                              data={"document_key": handle.document_key}, timeout=30)
        unknown = uuid.uuid4().hex
        theirs, missing = status(world.acme, handle.document_id), status(world.acme, unknown)
        assert theirs.status_code == 404, theirs.text
        assert same_refusal(theirs, missing, handle.document_id, unknown)
        assert status(world.beta, handle.document_id).status_code == 200


def test_memory_imports_are_their_tenants(world: World) -> None:
    beta = ModernMT(world.beta_admin)
    beta._ModernMT__base_url = world.base + "/modernmt"  # type: ignore[attr-defined]
    memory = beta.memories.create("imported")
    job = beta.memories.import_tmx(memory.id, io.BytesIO(toolkit_tmx()))
    assert beta.memories.get_import_status(job.id).memory == memory.id
    for path in ("/modernmt/import-jobs/{id}", "/admin/memory-imports/{id}"):
        headers = ({"MMT-ApiKey": world.acme_admin} if path.startswith("/modernmt")
                   else admin_headers(world.acme_admin))
        unknown = str(uuid.uuid4())
        theirs = httpx.get(world.base + path.format(id=job.id), headers=headers, timeout=30)
        missing = httpx.get(world.base + path.format(id=unknown), headers=headers, timeout=30)
        assert theirs.status_code == 404, theirs.text
        assert same_refusal(theirs, missing, job.id, unknown), path
    assert get(world, f"/admin/memory-imports/{job.id}", token=world.beta_admin
               ).status_code == 200
    assert httpx.get(world.base + f"/admin/memory-imports/{job.id}",  # the operator
                     headers=admin_headers(), timeout=30).status_code == 200


def test_training_jobs_are_their_tenants(world: World) -> None:
    queued = httpx.post(world.base + "/admin/domains", headers=admin_headers(world.beta_admin),
                        data={"name": "beta-tax"},
                        files={"train": ("train.tsv", tsv(new_domain_pairs(30)))},
                        timeout=30)
    assert queued.status_code == 202, queued.text
    job_id = queued.json()["id"]
    assert get(world, f"/admin/jobs/{job_id}", token=world.beta_admin).status_code == 200
    assert hidden(world, "/admin/jobs/{id}", job_id, token=world.acme_admin)
    listed = get(world, "/admin/jobs", token=world.acme_admin).json()["jobs"]
    assert job_id not in {job["id"] for job in listed}
    every = httpx.get(world.base + "/admin/jobs", headers=admin_headers(), timeout=30)
    assert job_id in {job["id"] for job in every.json()["jobs"]}  # the operator's
