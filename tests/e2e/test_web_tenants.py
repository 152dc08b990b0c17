"""The web page with tenants, end to end (headless Chromium against a live server, API
keys on): the API key typed into Operate is sent with the page's calls, so the domain
lists are the key's tenant's and the shared ones, and a tenant admin's key signs in to
Operate, which then lists its own tenant's domains beside the shared ones. Documents
dropped on the page are translated with the key too (upload and download), so a
tenant's key translates a file, small or a job, with its own domain."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from model_store import Store
from server.engine.artifacts import module_files
from tests.e2e.browser import chromium, page_at
from tests.e2e.processes import live_server
from tests.tiny import random_module, tiny_config
from tests.trainer.sidecar_store import BACKBONE, admin_headers, build_store, server_settings

TIMEOUT_MS = 30_000
TENANT_DOMAINS = {"acme-legal": 11, "beta-legal": 12}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_store(tmp_path_factory.mktemp("web-tenants") / "store")
    with Store.open(root, builtin_dir=None) as store:
        fingerprint = store.record("backbone", BACKBONE).fingerprint
        for name, seed in TENANT_DOMAINS.items():
            config, params = random_module(tiny_config(), "adapter", seed=seed, bottleneck=4)
            manifest = store.publish("module", name, module_files(params), config=config,
                                     backbone_fingerprint=fingerprint)
            store.activate("module", name, manifest.version)
    with live_server(server_settings(root, access={"api_keys": True},
                                     documents={"sync_chars": 300})) as url:
        yield url


def made(base: str, path: str, body: dict[str, Any]) -> Any:
    answer = httpx.post(base + path, json=body, headers=admin_headers(), timeout=60)
    assert answer.status_code == 201, answer.text
    return answer.json()


@pytest.fixture(scope="module")
def keys(base: str) -> dict[str, str]:
    for tenant in ("acme", "beta"):
        made(base, "/admin/tenants", {"name": tenant})
    return {role: made(base, "/admin/tenants/acme/keys", {"name": role, "role": role})["key"]
            for role in ("member", "admin")}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as found:
        yield found


@pytest.fixture
def page(browser: Browser, base: str) -> Iterator[Page]:
    with page_at(browser, base, timeout_ms=TIMEOUT_MS) as opened:
        yield opened


def test_the_pages_key_shows_its_tenants_domains(page: Page, base: str,
                                                 keys: dict[str, str]) -> None:
    page.goto("/#operate")
    page.get_by_label("API key").fill(keys["member"])
    page.get_by_role("button", name="Use").click()
    page.wait_for_load_state()
    assert page.evaluate("sessionStorage.getItem('nmt-api-key')") == keys["member"]
    page.goto("/")
    domain = page.get_by_label("Domain", exact=True)
    expect(domain.locator("option[value='acme-legal']")).to_have_count(1)
    expect(domain.locator("option[value='beta-legal']")).to_have_count(0)
    seen = httpx.get(base + "/domains", headers={"X-API-Key": keys["member"]},
                     timeout=60).json()["domains"]
    assert "acme-legal" in {d["name"] for d in seen}
    page.get_by_label("Source text").fill("click the button")
    page.get_by_role("button", name="Translate").click()  # keys are on: it needs the key
    answer = httpx.post(base + "/translate", headers={"X-API-Key": keys["member"]},
                        json={"text": "click the button"}, timeout=60).json()
    expect(page.locator("#translation")).to_have_text(answer["translation"])


def test_a_tenant_admin_signs_in_to_its_own_domains(page: Page, keys: dict[str, str]) -> None:
    page.goto("/#operate")
    page.get_by_label("Admin token").fill(keys["admin"])
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#domains-body")).to_contain_text("acme-legal")
    expect(page.locator("#domains-body")).not_to_contain_text("beta-legal")


def use_key(page: Page, key: str) -> None:
    page.goto("/#operate")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Use").click()
    page.wait_for_load_state()


def test_a_tenants_key_translates_documents_from_the_page(page: Page, base: str,
                                                          keys: dict[str, str],
                                                          tmp_path: Path) -> None:
    small = tmp_path / "clause.txt"
    small.write_text("Sign the contract.\n")
    large = tmp_path / "contract.txt"  # enough lines to be a job (202, then polling)
    large.write_text("".join(f"Read clause {i} of the contract.\n" for i in range(20)))
    use_key(page, keys["member"])
    page.goto("/#documents")
    select = page.locator("#document-domain")
    expect(select.locator("option[value='acme-legal']")).to_have_count(1)
    expect(select.locator("option[value='beta-legal']")).to_have_count(0)
    select.select_option("acme-legal")
    page.locator("#document-file").set_input_files([str(small), str(large)])
    statuses = set()
    for source in (small, large):
        name = source.name.replace(".txt", ".und.txt")
        link = page.get_by_role("link", name=f"Download {name}")
        expect(link).to_be_visible()
        with page.expect_download() as download:
            link.click()
        got = Path(download.value.path()).read_bytes()
        key = {"X-API-Key": keys["member"]}
        expected = httpx.post(base + "/translate/file", headers=key, timeout=60,
                              data={"domain": "acme-legal"},
                              files={"file": (source.name, source.read_bytes())})
        statuses.add(expected.status_code)
        if expected.status_code == 202:
            job = httpx.get(base + expected.headers["location"], headers=key, timeout=60,
                            params={"wait": 30}).json()
            assert job["routing"]["domain"] == "acme-legal"
            expected = httpx.get(base + job["result_url"], headers=key, timeout=60)
        assert expected.status_code == 200, expected.text
        assert got == expected.content
    assert statuses == {200, 202}  # both ways: the answer itself and a job's result
    expect(page.locator("#documents .error-text")).to_have_count(0)
