"""Add a domain through the admin API with a live server and a real sidecar process:
the job is trained, gated and published, the server serves the new domain (by name and
through the classifier) without a restart, every other domain's outputs stay
bit-identical, and a client sending requests throughout sees no failure."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.processes import live_server, start_sidecar, stop, wait_for
from tests.trainer.sidecar_store import (
    FAST_JOB,
    NEW_DOMAIN,
    NEW_TEXT,
    WORDS,
    admin_headers,
    build_store,
    new_domain_pairs,
    server_settings,
    tsv,
)

PROBES = {domain: " ".join(words[:5]) for domain, words in WORDS.items()}


def translate(http: httpx.Client, text: str, domain: str | None) -> dict[str, Any]:
    response = http.post("/translate", json={"text": text, "domain": domain})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def outputs(http: httpx.Client) -> dict[str, tuple[str, Any]]:
    """Every existing domain (and the plain backbone) on every probe text."""
    found: dict[str, tuple[str, Any]] = {}
    for domain in [*WORDS, "generic"]:
        for name, text in PROBES.items():
            body = translate(http, text, domain)
            found[f"{domain}/{name}"] = (body["translation"], body["routing"]["module_version"])
    return found


class Traffic:
    """A client that keeps sending requests (explicit, automatic and generic routing)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.statuses: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        domains: list[str | None] = [*WORDS, None, "generic"]
        with httpx.Client(base_url=self.base, timeout=60) as http:
            while not self._stop.is_set():
                domain = domains[len(self.statuses) % len(domains)]
                text = PROBES[domain] if domain in PROBES else NEW_TEXT
                response = http.post("/translate", json={"text": text, "domain": domain})
                self.statuses.append(response.status_code)

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def test_add_a_domain_without_a_restart(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    log = tmp_path / "sidecar.log"
    with live_server(server_settings(root)) as base, \
            httpx.Client(base_url=base, timeout=60, headers=admin_headers()) as http:
        before = outputs(http)
        sidecar = start_sidecar(root, log)
        try:
            with Traffic(base) as traffic:
                job = submit_and_follow(http)
                wait_for(lambda: NEW_DOMAIN in served(http), timeout=60,
                         what="the server to serve the new domain")
                explicit = translate(http, NEW_TEXT, NEW_DOMAIN)
                routed = translate(http, NEW_TEXT, None)
            assert stop(sidecar) == 0, log.read_text()  # SIGTERM while idle: clean exit
        finally:
            sidecar.kill()
        after = outputs(http)
    assert job["state"] == "published", json.dumps(job, indent=1)
    assert job["scores"]["gate"] == "passed" and job["progress"] == 1.0
    assert job["result"]["module_version"] == 1 and job["result"]["classifier_version"] == 2
    assert explicit["routing"] == explicit["routing"] | {
        "mode": "explicit", "domain": NEW_DOMAIN, "module_version": 1}
    assert routed["routing"]["mode"] == "classifier", routed
    assert routed["routing"]["domain"] == NEW_DOMAIN
    assert after == before  # nothing forgotten: other domains are bit-identical
    assert traffic.statuses and set(traffic.statuses) == {200}


def submit_and_follow(http: httpx.Client) -> dict[str, Any]:
    response = http.post("/admin/domains", data={
        "name": NEW_DOMAIN, "config": json.dumps(FAST_JOB)}, files={
        "train": ("train.tsv", tsv(new_domain_pairs()), "text/tab-separated-values")})
    assert response.status_code == 202, response.text
    location = response.headers["location"]
    seen: list[dict[str, Any]] = []

    def finished() -> bool:
        seen.append(http.get(location).json())
        return seen[-1]["state"] in ("published", "failed")

    wait_for(finished, timeout=600, what="the job to finish", interval=0.2)
    progress = [job["progress"] for job in seen]
    assert progress == sorted(progress)  # reported as it runs, never backwards
    return seen[-1]


def served(http: httpx.Client) -> set[str]:
    return {domain["name"] for domain in http.get("/domains").json()["domains"]}
