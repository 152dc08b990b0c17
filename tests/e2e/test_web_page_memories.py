"""The web page's translation memories, end to end (headless Chromium against a live
server, as tests/e2e/test_web_page.py): a memory named per translation, its exact and
fuzzy matches shown as the API answers them, and the corrected sentence added to a
memory from the improve box."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.browser import chromium, page_at
from tests.e2e.processes import live_server
from tests.e2e.test_web_page import IT_TEXT, TIMEOUT_MS, api, sign_in, translate_on_page
from tests.trainer.sidecar_store import TOKEN, admin_headers, build_store, server_settings

expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root: Path = build_store(tmp_path_factory.mktemp("web-memories") / "store")
    with live_server(server_settings(root)) as url:
        yield url


@pytest.fixture
def page(base: str) -> Iterator[Page]:
    browser: Browser
    with chromium() as browser, page_at(browser, base, timeout_ms=TIMEOUT_MS) as opened:
        yield opened


def test_add_the_corrected_sentence_to_a_memory_and_see_the_matches(page: Page,
                                                                   base: str) -> None:
    """With the admin token, the improve box adds the corrected sentence to a memory
    (POST /admin/memories/{name}/pairs); naming that memory, the same text comes back as
    the memory's exact match and a near text lists it as a fuzzy match, as the API
    answers."""
    made = api(base, "POST", "/admin/memories", headers=admin_headers(),
               json={"name": "page-tm", "source": "en", "target": "fr"})
    assert made.status_code == 201, made.text
    corrected = "cliquez sur le bouton puis ouvrez le fichier dans la fenêtre"
    page.goto("/#operate")
    sign_in(page, TOKEN)
    page.goto("/")
    page.get_by_label("Translation memory").fill("page-tm")
    translate_on_page(page, IT_TEXT)
    expect(page.locator("#translation")).not_to_be_empty()
    expect(page.locator("#memory-matches")).to_be_hidden()  # the memory is empty
    page.get_by_text("Improve this translation").click()
    page.get_by_label("Your corrected translation").fill(corrected)
    expect(page.get_by_label("Or add it to a memory")).to_have_value("page-tm")
    page.get_by_role("button", name="Add to memory").click()
    expect(page.locator("#improve-memory-status")).to_contain_text("Added to memory page-tm")

    translate_on_page(page, IT_TEXT)
    expect(page.locator("#translation")).to_have_text(corrected)
    expect(page.locator("#memory-exact")).to_contain_text("Exact match from memory page-tm")

    near = IT_TEXT.replace("the window", "a window")
    answer = api(base, "POST", "/translate", json={"text": near, "memory": "page-tm"}).json()
    [fuzzy] = answer["matches"]
    translate_on_page(page, near)
    line = page.locator("#memory-fuzzy li")
    expect(line).to_have_count(1)
    expect(line).to_contain_text(f"{round(fuzzy['score'])}%")
    expect(line).to_contain_text(corrected)
    api(base, "DELETE", "/admin/memories/page-tm", headers=admin_headers())
