"""`POST /admin/domains` and `GET /admin/jobs[/{id}]`: accepted uploads become queued jobs;
every refused upload says what is wrong and leaves nothing behind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from model_store import Store
from server.app import create_app
from tests.trainer.sidecar_store import (
    admin_headers,
    build_store,
    new_domain_pairs,
    server_settings,
    tsv,
)

GOOD = tsv(new_domain_pairs(30))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("api") / "store")


@pytest.fixture(scope="module")
def client(root: Path) -> Iterator[TestClient]:
    settings = server_settings(root, limits={"min_domain_pairs": 20,
                                             "max_domain_upload_bytes": 4000})
    with TestClient(create_app(settings)) as client:
        yield client


def post(client: TestClient, name: str | None = "religion", *, train: bytes | None = GOOD,
         dev: bytes | None = None, config: Any = None, **extra: Any) -> Any:
    data = {} if name is None else {"name": name}
    if config is not None:
        data["config"] = config if isinstance(config, str) else json.dumps(config)
    files = {} if train is None else {"train": ("train.tsv", train, "text/tab-separated-values")}
    if dev is not None:
        files["dev"] = ("dev.tsv", dev, "text/tab-separated-values")
    return client.post("/admin/domains", data=data | extra.pop("data", {}), files=files or None,
                       headers=admin_headers(), **extra)


def nothing_left(root: Path) -> bool:
    with Store.open(root, builtin_dir=None) as store:
        rows = store.registry.list_jobs()
        return not rows and not store.storage.list("jobs")


REFUSALS: list[tuple[dict[str, Any], int, str, str]] = [
    ({"train": b""}, 422, "train", "train: the file is empty"),
    ({"train": b" \n\n"}, 422, "train", "train: the file is empty"),
    ({"train": GOOD + b"no tab\na\tb\tc\n\tx\n"}, 422, "train",
     "3 misaligned line(s) (line 31, 32, 33); each line must hold exactly one TAB"),
    ({"train": GOOD.replace(b"dieu", b"\xe9t\xe9", 1)}, 422, "train", "not valid UTF-8"),
    ({"train": GOOD, "dev": b"x\n"}, 422, "dev", "dev: 1 misaligned line(s) (line 1)"),
    ({"train": tsv(new_domain_pairs(21))}, 422, "train",
     "train: 19 pairs after holding out 2 for dev; a new domain needs at least 20"),
    ({"train": b"a\tb\n" * 2000}, 413, "body", "at most 4000"),
    ({"name": "Bad Name!"}, 422, "name", "invalid artifact name 'Bad Name!'"),
    ({"name": "generic"}, 422, "name", "'generic' is reserved for routing"),
    ({"name": "law"}, 409, "name", "domain 'law' already exists (module v1 is active)"),
    ({"name": None}, 422, "name", "the field 'name' is required"),
    ({"train": None, "dev": GOOD}, 422, "train", "the file field 'train' is required"),
    ({"config": "{not json"}, 422, "config", "config: not valid JSON"),
    ({"config": "[1]"}, 422, "config", "config: must be a JSON object"),
    ({"config": {"family": "lora"}}, 422, "config",
     "unknown module family 'lora'; allowed: adapter, gated, highway, ldr"),
    ({"config": {"family": "ldr", "bottleneck": 4}}, 422, "config",
     "unknown option(s) 'bottleneck' for family 'ldr'; allowed: family, rank (module); lr,"),
    ({"config": {"lr": -1, "max_epochs": 0}}, 422, "config",
     "lr: Input should be greater than 0; max_epochs: Input should be greater than or equal"),
    ({"data": {"train": "a\tb"}, "train": None, "dev": GOOD}, 422, "train",
     "must be a file part"),
    ({"data": {"extra": "1"}}, 422, "extra", "unknown field(s) extra"),
]


@pytest.mark.parametrize(("upload", "status", "field", "message"), REFUSALS)
def test_refused_uploads_say_why_and_leave_nothing(
        client: TestClient, root: Path, upload: dict[str, Any], status: int, field: str,
        message: str) -> None:
    response = post(client, **upload)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["field"] == field
    assert message in error["message"]
    assert nothing_left(root)


def test_a_body_that_is_not_multipart_is_refused(client: TestClient, root: Path) -> None:
    response = client.post("/admin/domains", json={"name": "x"}, headers=admin_headers())
    assert response.status_code == 422
    assert "send multipart/form-data with the fields name, train" in response.text
    chunked = client.post("/admin/domains", headers=admin_headers() | {
        "content-type": "multipart/form-data; boundary=b"}, content=iter([b"x" * 3000] * 2))
    assert chunked.status_code == 413  # no Content-Length: counted while streaming
    assert nothing_left(root)


def test_admin_token_is_required(client: TestClient) -> None:
    assert client.post("/admin/domains").status_code == 401
    assert client.get("/admin/jobs", headers=admin_headers("wrong")).status_code == 403


def test_openapi_documents_the_jobs_endpoints(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    form = paths["/admin/domains"]["post"]["requestBody"]["content"]["multipart/form-data"]
    assert form["schema"]["required"] == ["name", "train"]
    assert {"202", "409", "413", "422"} <= set(paths["/admin/domains"]["post"]["responses"])
    assert "get" in paths["/admin/jobs"] and "get" in paths["/admin/jobs/{job_id}"]


def test_accepted_upload_is_a_queued_job(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    with TestClient(create_app(server_settings(root))) as client:
        response = post(client, config={"family": "ldr", "rank": 2, "seed": 3},
                        dev=tsv(new_domain_pairs(5, seed=99)))
        assert response.status_code == 202, response.text
        job = response.json()
        assert response.headers["location"] == f"/admin/jobs/{job['id']}"
        assert (job["domain"], job["state"], job["progress"]) == ("religion", "queued", 0.0)
        assert job["config"]["module"] == {"family": "ldr", "rank": 2}
        assert job["config"]["training"]["seed"] == 3
        assert job["config"]["data"] == {"train_pairs": 30, "dev_pairs": 5, "dev": "uploaded"}
        assert job["config"]["backbone"]["name"] == "tiny"
        assert client.get(f"/admin/jobs/{job['id']}", headers=admin_headers()).json() == job
        listed = client.get("/admin/jobs", headers=admin_headers()).json()["jobs"]
        assert [j["id"] for j in listed] == [job["id"]]
        assert client.get("/admin/jobs?state=failed", headers=admin_headers()).json() == {
            "jobs": [], "next_after": None}
        again = post(client)
        assert again.status_code == 409
        assert "already has a queued training job" in again.json()["error"]["message"]
        missing = client.get("/admin/jobs/nope", headers=admin_headers())
        assert missing.status_code == 404 and missing.json()["error"]["field"] == "job_id"
    with Store.open(root, builtin_dir=None) as store:
        assert store.storage.list(f"jobs/{job['id']}") == ["dev.tsv", "train.tsv"]
