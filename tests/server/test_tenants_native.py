"""Tenants on the native API of a live server (real HTTP): a key of tenant acme cannot
translate with, list, export, correct with or infer the existence of tenant beta's
domains, glossaries and memories; `auto` routes among its own and the shared domains; a
tenant's admin manages its own, the operator everything; metric labels stay bounded."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import admin_headers, make_settings
from tenant_world import World, build_tenant_store, make_world, same_refusal
from uvicorn_live import serving

from server.app import create_app


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = build_tenant_store(tmp_path_factory.mktemp("tenants") / "store")
    settings = make_settings(root, access={"api_keys": True, "cache_s": 0.0})
    with serving(create_app(settings)) as base:
        world = make_world(base)
        # beta's glossary and memory, made by beta's admin
        put = httpx.put(base + "/admin/glossaries/beta-terms", headers=admin_headers(
            world.beta_admin), json={"entries": {"court": "tribunal"}}, timeout=30)
        assert put.status_code == 201, put.text
        made = httpx.post(base + "/admin/memories", headers=admin_headers(world.beta_admin),
                          json={"name": "beta-tm"}, timeout=30)
        assert made.status_code == 201, made.text
        yield world


def call(world: World, method: str, path: str, key: str | None, **kwargs: Any
         ) -> httpx.Response:
    headers = {"X-API-Key": key} if key else {}
    return httpx.request(method, world.base + path, headers=headers, timeout=30, **kwargs)


def admin(world: World, method: str, path: str, token: str | None = None,
          **kwargs: Any) -> httpx.Response:
    headers = admin_headers(token) if token else admin_headers()
    return httpx.request(method, world.base + path, headers=headers, timeout=30, **kwargs)


def domains(world: World, key: str | None) -> set[str]:
    answer = call(world, "GET", "/domains", key)
    assert answer.status_code == 200, answer.text
    return {d["name"] for d in answer.json()["domains"]}


def test_each_key_lists_its_tenants_domains_and_the_shared_ones(world: World) -> None:
    assert domains(world, world.acme) == {"medical", "acme-legal"}
    assert domains(world, world.beta) == {"medical", "beta-legal"}
    assert domains(world, world.shared) == domains(world, None) == {"medical"}
    listed = call(world, "GET", "/languages", world.acme).json()["directions"][0]["domains"]
    assert set(listed) == {"medical", "acme-legal"}


def test_another_tenants_domain_is_as_unknown_as_a_missing_one(world: World) -> None:
    def translate(domain: Any) -> httpx.Response:
        return call(world, "POST", "/translate", world.acme,
                    json={"text": "the court", "domain": domain})
    own = translate("acme-legal")
    assert own.status_code == 200 and own.json()["routing"]["domain"] == "acme-legal"
    theirs, missing = translate("beta-legal"), translate("beta-legak")
    assert theirs.status_code == 404
    assert same_refusal(theirs, missing, "beta-legal", "beta-legak")
    assert "beta-legal" not in theirs.json()["error"]["message"].replace("'beta-legal'", "")
    mixed, nothing = translate({"beta-legal": 1.0}), translate({"beta-legak": 1.0})
    assert mixed.status_code == 422 and same_refusal(mixed, nothing, "beta-legal", "beta-legak")
    batch = call(world, "POST", "/translate/batch", world.acme,
                 json={"items": [{"text": "a", "domain": "beta-legal"}]})
    assert batch.status_code == 404


def test_auto_routing_chooses_among_the_tenants_and_the_shared_domains(world: World) -> None:
    text = "court verdict appeal"  # beta-legal's words
    answer = call(world, "POST", "/translate", world.beta,
                  json={"text": text, "explain": True}).json()
    assert answer["routing"]["domain"] == "beta-legal"
    answer = call(world, "POST", "/translate", world.acme,
                  json={"text": text, "explain": True}).json()
    assert answer["routing"]["domain"] != "beta-legal"
    assert set(answer["explanation"]["posteriors"]) <= {"medical", "acme-legal", "generic"}
    assert "beta-legal" not in str(answer)
    own = call(world, "POST", "/translate", world.acme,
               json={"text": "contract clause tenancy"}).json()
    assert own["routing"]["domain"] == "acme-legal"


def test_glossaries_and_memories_of_another_tenant_do_not_exist(world: World) -> None:
    def translate(key: str, **extra: Any) -> httpx.Response:
        return call(world, "POST", "/translate", key, json={"text": "the court", **extra})
    assert translate(world.beta, glossary_id="beta-terms").status_code == 200
    theirs = translate(world.acme, glossary_id="beta-terms")
    assert same_refusal(theirs, translate(world.acme, glossary_id="beta-termz"),
                        "beta-terms", "beta-termz") and theirs.status_code == 404
    assert translate(world.beta, memory="beta-tm").status_code == 200
    theirs = translate(world.acme, memory="beta-tm")
    assert same_refusal(theirs, translate(world.acme, memory="beta-tx"), "beta-tm", "beta-tx")
    assert theirs.status_code == 404 and "beta-tm" not in theirs.json()["error"]["message"] \
        .replace("'beta-tm'", "")


def test_a_correction_cannot_name_another_tenants_domain(world: World) -> None:
    def correct(domain: str) -> httpx.Response:
        return call(world, "POST", "/corrections", world.acme,
                    json={"source": "the court", "corrected": "le tribunal",
                          "domain": domain})
    theirs, missing = correct("beta-legal"), correct("beta-legak")
    assert theirs.status_code == 404 and same_refusal(theirs, missing, "beta-legal",
                                                      "beta-legak")
    assert correct("acme-legal").status_code in (200, 201, 202)


def test_a_tenant_admin_manages_only_its_own(world: World) -> None:
    token = world.acme_admin
    listed = {d["name"] for d in admin(world, "GET", "/admin/domains", token).json()["domains"]}
    assert listed == {"medical", "acme-legal"}
    gone, missing = (admin(world, "DELETE", f"/admin/domains/{name}", token)
                     for name in ("beta-legal", "beta-legak"))
    assert gone.status_code == 404 and same_refusal(gone, missing, "beta-legal", "beta-legak")
    assert admin(world, "DELETE", "/admin/domains/medical", token).status_code == 403
    glossaries = admin(world, "GET", "/admin/glossaries", token).json()["glossaries"]
    assert "beta-terms" not in {g["name"] for g in glossaries}
    seen, missing = (admin(world, "GET", f"/admin/glossaries/{name}", token)
                     for name in ("beta-terms", "beta-termz"))
    assert seen.status_code == 404 and same_refusal(seen, missing, "beta-terms", "beta-termz")
    memories = admin(world, "GET", "/admin/memories", token).json()["memories"]
    assert "beta-tm" not in {m["name"] for m in memories}
    for path in ("/admin/memories/{}", "/admin/memories/{}/export",
                 "/admin/memories/{}/pairs"):
        theirs = admin(world, "GET", path.format("beta-tm"), token)
        missing = admin(world, "GET", path.format("beta-tx"), token)
        assert theirs.status_code == 404 and same_refusal(theirs, missing, "beta-tm", "beta-tx")
    made = admin(world, "POST", "/admin/memories", token, json={"name": "acme-tm"})
    assert made.status_code == 201, made.text
    assert admin(world, "POST", "/admin/memories", token,
                 json={"name": "plain-tm"}).status_code == 403
    keys = admin(world, "GET", "/admin/keys", token).json()["keys"]
    assert {k["name"] for k in keys} == {"acme", "acme_admin"}
    revoked, missing = (admin(world, "DELETE", f"/admin/keys/{key_id}", token)
                        for key_id in (world.beta_key_id, "f" * 32))
    assert revoked.status_code == 404 and same_refusal(revoked, missing, world.beta_key_id,
                                                       "f" * 32)
    made_key = admin(world, "POST", "/admin/keys", token, json={"name": "acme-ci"})
    assert made_key.status_code == 201
    assert domains(world, made_key.json()["key"]) == {"medical", "acme-legal"}
    assert "acme-ci" not in {k["name"] for k in admin(
        world, "GET", "/admin/keys", world.beta_admin).json()["keys"]}
    assert admin(world, "POST", "/admin/tenants/beta/keys", token,
                 json={"name": "intruder"}).status_code == 404
    assert admin(world, "GET", "/admin/tenants", token).status_code == 403
    sent = call(world, "POST", "/corrections", world.acme, json={
        "source": "Sign the contract.", "corrected": "Signez le contrat.",
        "domain": "acme-legal"})
    assert sent.status_code == 201, sent.text
    own = admin(world, "GET", "/admin/corrections", token, params={"domain": "acme-legal"})
    assert "Sign the contract." in {c["source"] for c in own.json()["corrections"]}
    theirs, missing = (admin(world, "GET", "/admin/corrections", token,
                             params={"domain": name}) for name in ("beta-legal", "beta-legak"))
    assert theirs.status_code == 404 and same_refusal(theirs, missing, "beta-legal",
                                                      "beta-legak")
    # without a domain: its own keys' corrections only
    listed = admin(world, "GET", "/admin/corrections", token).json()["corrections"]
    assert listed and all(c["key_id"] != world.beta_key_id for c in listed)
    counted = admin(world, "GET", "/admin/corrections/summary", token).json()["domains"]
    assert set(counted) == {"acme-legal"}
    assert "acme-legal" in admin(world, "GET", "/admin/corrections/summary").json()["domains"]
    # a member's key is no admin token
    assert admin(world, "GET", "/admin/domains", world.acme).status_code == 403


def test_the_operator_sees_and_gives_everything(world: World) -> None:
    listed = {d["name"] for d in admin(world, "GET", "/admin/domains").json()["domains"]}
    assert listed == {"medical", "acme-legal", "beta-legal"}
    assert {t["name"] for t in admin(world, "GET", "/admin/tenants").json()["tenants"]} \
        == {"acme", "beta"}
    given = admin(world, "PUT", "/admin/tenants/acme/domains/medical")
    assert given.status_code == 200, given.text
    try:
        assert domains(world, world.beta) == {"beta-legal"}
        assert domains(world, world.acme) == {"medical", "acme-legal"}
        assert admin(world, "PUT", "/admin/tenants/beta/domains/medical").status_code == 409
    finally:
        assert admin(world, "DELETE", "/admin/tenants/acme/domains/medical").status_code == 200
    assert domains(world, world.beta) == {"medical", "beta-legal"}


def test_a_tenant_cannot_take_a_name_the_server_gives_its_own_resources(world: World) -> None:
    """`ml-...` (DeepL v3 glossaries) and `modernmt-...` (memories' glossaries) would be a
    tenant's by the prefix rule."""
    for name in ("ml", "modernmt", "default"):
        refused = admin(world, "POST", "/admin/tenants", json={"name": name})
        assert refused.status_code == 422, refused.text
        assert "reserved" in refused.text and "modernmt" in refused.text
    assert {t["name"] for t in admin(world, "GET", "/admin/tenants").json()["tenants"]} \
        == {"acme", "beta"}


def test_metric_labels_name_no_tenant(world: World) -> None:
    call(world, "POST", "/translate", world.beta, json={"text": "court verdict appeal"})
    text = httpx.get(world.base + "/metrics", timeout=30).text
    tenant_lines = [line for line in text.splitlines()
                    if line.startswith("nmt_tenant_requests_total{")]
    assert tenant_lines and all('tenant="tenant-' in line or 'tenant="shared"' in line
                                for line in tenant_lines)
    assert "beta" not in text and "acme" not in text


def test_a_tenants_correction_of_a_shared_domain_stays_out_of_its_memory(world: World) -> None:
    def correct(source: str, corrected: str, domain: str) -> None:
        sent = call(world, "POST", "/corrections", world.acme,
                    json={"source": source, "corrected": corrected, "domain": domain})
        assert sent.status_code == 201, sent.text

    def translation(key: str, source: str, domain: str) -> str:
        answer = call(world, "POST", "/translate", key, json={"text": source,
                                                               "domain": domain})
        assert answer.status_code == 200, answer.text
        return str(answer.json()["translation"])
    correct("Read the contract twice.", "Lisez le contrat deux fois.", "acme-legal")
    correct("Give the patient a tablet.", "Donnez un comprimé au patient.", "medical")
    deadline = time.monotonic() + 10
    while translation(world.acme, "Read the contract twice.", "acme-legal") \
            != "Lisez le contrat deux fois.":  # its own domain's memory has it
        assert time.monotonic() < deadline, "the correction never reached the memory"
        time.sleep(0.1)
    assert translation(world.beta, "Give the patient a tablet.", "medical") \
        != "Donnez un comprimé au patient."
    # stored for acme (its admin lists it; beta's does not), never trains the shared
    # domain's refresh: nothing new to refresh medical with
    for token, listed in ((world.acme_admin, True), (world.beta_admin, False)):
        answer = admin(world, "GET", "/admin/corrections", token,
                       params={"domain": "medical"})
        assert answer.status_code == 200, answer.text
        sources = {c["source"] for c in answer.json()["corrections"]}
        assert ("Give the patient a tablet." in sources) is listed
    refresh = admin(world, "POST", "/admin/corrections/refresh", json={"domain": "medical"})
    assert refresh.status_code == 422 and "no new usable corrections" in refresh.text
