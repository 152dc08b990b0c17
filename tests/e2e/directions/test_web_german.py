"""The web page with a third direction (en->de beside en->fr and fr->en): English offers
French and German, German translates as the public API does into German, and the Documents
view offers English → German and detection into German."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.two_directions import ENGLISH


def test_english_offers_german_and_translates_into_it(page: Page, base: str) -> None:
    page.goto("/")
    source = page.get_by_label("From", exact=True)
    target = page.get_by_label("To", exact=True)
    expect(source).to_have_value("en")
    expect(target.locator("option")).to_have_text(["French (fr)", "German (de)"])

    target.select_option("de")
    page.get_by_label("Source text").fill(ENGLISH)
    page.get_by_role("button", name="Translate").click()
    expected = httpx.post(base + "/translate", timeout=60,
                          json={"text": ENGLISH, "source": "en", "target": "de"})
    french = httpx.post(base + "/translate", timeout=60,
                        json={"text": ENGLISH, "source": "en", "target": "fr"})
    assert expected.status_code == 200, expected.text
    assert expected.json()["translation"] != french.json()["translation"]
    expect(page.locator("#translation")).to_have_text(expected.json()["translation"])


def test_a_file_goes_from_english_into_german(page: Page, base: str, tmp_path: Path) -> None:
    english = tmp_path / "leaflet.txt"
    english.write_text(ENGLISH + "\n")
    page.goto("/#documents")
    languages = page.get_by_label("Languages of the files")
    expect(languages.locator("option", has_text="Detect language → German")).to_have_count(1)
    languages.select_option(label="English → German")
    page.locator("#document-file").set_input_files(str(english))

    link = page.get_by_role("link", name="Download leaflet.de.txt")
    expect(link).to_be_visible()
    with page.expect_download() as download:
        link.click()
    expected = httpx.post(base + "/translate/file", timeout=60,
                          files={"file": ("leaflet.txt", english.read_bytes())},
                          data={"source": "en", "target": "de"})
    assert expected.status_code == 200, expected.text
    assert Path(download.value.path()).read_bytes() == expected.content
