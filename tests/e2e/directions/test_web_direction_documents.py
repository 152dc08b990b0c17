"""The Documents view on a server of several directions (tiny en->fr, fr->en, en->de): the
files' languages are chosen there ("Detect language" into a target sends source auto), and
the file downloaded is the one the public API answers for the same upload and fields."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.two_directions import FRENCH


def test_a_file_goes_to_the_chosen_direction_and_says_what_was_detected(
        page: Page, base: str, tmp_path: Path) -> None:
    french = tmp_path / "avis.txt"
    french.write_text(FRENCH + "\n")
    page.goto("/#documents")
    languages = page.get_by_label("Languages of the files")
    expect(languages).to_have_value('{"source":"en","target":"fr"}')  # the default one
    languages.select_option(label="Detect language → English")
    page.locator("#document-file").set_input_files(str(french))

    link = page.get_by_role("link", name="Download avis.en.txt")
    expect(link).to_be_visible()
    with page.expect_download() as download:
        link.click()
    expected = httpx.post(base + "/translate/file", timeout=60,
                          files={"file": ("avis.txt", french.read_bytes())},
                          data={"source": "auto", "target": "en"})
    assert expected.status_code == 200, expected.text
    assert Path(download.value.path()).read_bytes() == expected.content
    expect(page.locator("#documents")).to_contain_text("detected: fr")
