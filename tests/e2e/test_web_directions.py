"""The web page on a server of two directions (tiny en->fr and fr->en): source and target
selectors appear, a swap button reverses the direction, "Detect language" shows what was
detected, and every translation is what the public API answers for the same request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from model_store import Store
from server.engine.artifacts import module_files
from tests.e2e.browser import chromium
from tests.e2e.processes import live_server
from tests.tiny import random_module, tiny_backbone_files, tiny_config
from tests.trainer.helpers import server_settings

EN_FR, FR_EN = "tiny-en-fr", "tiny-fr-en"
FRENCH = "Le patient prend un comprimé chaque jour avec un grand verre d'eau."
TIMEOUT_MS = 30_000
expect.set_options(timeout=TIMEOUT_MS)


def build_store(root: Path) -> Path:
    with Store.open(root, builtin_dir=None) as store:
        for seed, name in enumerate((EN_FR, FR_EN)):
            files = tiny_backbone_files(seed=seed)
            backbone = store.publish("backbone", name, files,
                                     config=json.loads(files["config.json"]))
            store.activate("backbone", name, backbone.version)
            config, params = random_module(tiny_config(), "adapter", seed=seed + 1,
                                           bottleneck=4)
            module = store.publish("module", "medical", module_files(params), config=config,
                                   backbone_fingerprint=backbone.backbone_fingerprint)
            store.activate("module", "medical", module.version, backbone=name)
    return root


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_store(tmp_path_factory.mktemp("web-directions") / "store")
    with live_server(server_settings(root, backbone=EN_FR)) as url:
        yield url


@pytest.fixture
def page(base: str) -> Iterator[Page]:
    with chromium() as browser:
        yield from _page(browser, base)


def _page(browser: Browser, base: str) -> Iterator[Page]:
    context = browser.new_context(base_url=base)
    context.set_default_timeout(TIMEOUT_MS)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield opened
    finally:
        context.close()
    assert errors == [], f"the page threw: {errors}"


def translated(base: str, **body: Any) -> dict[str, Any]:
    answer = httpx.post(base + "/translate", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def test_choose_swap_and_detect_the_direction(page: Page, base: str) -> None:
    page.goto("/")
    source = page.get_by_label("From", exact=True)
    target = page.get_by_label("To", exact=True)
    expect(source).to_have_value("en")  # the default direction
    expect(target).to_have_value("fr")

    page.get_by_role("button", name="Swap source and target languages").click()
    expect(source).to_have_value("fr")
    expect(target).to_have_value("en")
    page.get_by_label("Source text").fill(FRENCH)
    page.get_by_role("button", name="Translate").click()
    expected = translated(base, text=FRENCH, source="fr", target="en", explain=True)
    expect(page.locator("#translation")).to_have_text(expected["translation"])
    expect(page.locator("#detected-language")).to_be_hidden()

    source.select_option("auto")
    page.get_by_role("button", name="Translate").click()
    detected = translated(base, text=FRENCH, source="auto", target="en", explain=True)
    expect(page.locator("#detected-language")).to_have_text(
        f"detected: fr ({round(detected['detected']['confidence'] * 100)}%)")
    expect(page.locator("#translation")).to_have_text(detected["translation"])
