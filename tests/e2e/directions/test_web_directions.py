"""The web page on a server of several directions (tiny en->fr, fr->en, en->de): source
and target selectors appear, a swap button reverses the direction, "Detect language" shows
what was detected, and every translation is what the public API answers for the same
request."""

from __future__ import annotations

from typing import Any

import httpx
from playwright.sync_api import Page, expect

from tests.two_directions import FRENCH


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
