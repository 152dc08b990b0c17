"""The web page's "Why" view of a word-level mixture, end to end: the heatmap of each
sentence's per-word domain proportions, layer by layer, is what the public API's
`explain` answers for the same text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.e2e.browser import chromium
from tests.e2e.processes import live_server
from tests.e2e.test_web_page import TIMEOUT_MS, api, translate_on_page
from tests.tiny import publish_word_mixture
from tests.trainer.sidecar_store import BACKBONE, WORDS, build_store, server_settings


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as found:
        yield found


def publish_mixture(root: Path, name: str) -> None:
    """A word-level mixture over the fixture's domains, perturbed so proportions differ."""
    publish_word_mixture(root, name, backbone=BACKBONE, domains=list(WORDS), spread=0.5)


def test_a_word_level_mixture_shows_its_proportions_as_a_heatmap(
        browser: Browser, tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    publish_mixture(root, "mixed")
    with live_server(server_settings(root, routing={"mixture": "mixed"})) as url:
        context = browser.new_context(base_url=url)
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto("/")
        text = "the patient takes a tablet. click the button."
        translate_on_page(page, text)
        expect(page.locator("#routing-summary")).to_contain_text("Word-level mixture mixed")
        answer = api(url, "POST", "/translate", json={"text": text, "explain": True}).json()
        page.get_by_role("link", name="Why", exact=True).click()
        tables = page.locator("table.heatmap")
        expect(tables).to_have_count(len(answer["proportions"]["sentences"]))
        assert errors == [], f"the page threw: {errors}"
        first = answer["proportions"]["sentences"][0]
        rows = tables.first.locator("tbody tr")
        expect(rows).to_have_count(len(WORDS))
        expect(rows.first.locator("td")).to_have_count(len(first["pieces"]))
        layers = page.get_by_label("Encoder layer")
        expect(layers.locator("option")).to_have_count(len(first["layers"]) + 1)
        layers.select_option(label="Layer 2")
        cell = rows.nth(1).locator("td").first  # second domain, first piece, layer 2
        expect(cell).to_have_text(str(round(first["layers"][1][0][1] * 100)))
        context.close()
