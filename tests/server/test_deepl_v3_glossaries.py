"""DeepL's multilingual glossaries (`/v3/glossaries`) through the official client's
`DeepLClient`: create, list, get, entries, use by id on /v2/translate, merge and replace
a dictionary, delete a dictionary and the glossary; a refused dictionary stores nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import deepl
import httpx
import pytest
from conftest import make_settings
from deepl.api_data import MultilingualGlossaryDictionaryEntries as Dictionary
from test_libretranslate import build_store
from uvicorn_live import serving

from server.app import create_app

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_store(tmp_path_factory.mktemp("deepl-v3") / "store")
    with serving(create_app(make_settings(root))) as url:
        yield url


@pytest.fixture(scope="module")
def client(base: str) -> Iterator[deepl.DeepLClient]:
    made = deepl.DeepLClient("any-key", server_url=base + "/deepl/")
    yield made
    made.close()


def test_a_multilingual_glossary_from_creation_to_deletion(client: deepl.DeepLClient) -> None:
    info = client.create_multilingual_glossary(
        "Product terms", [Dictionary("EN", "FR", {"file": "fichier", "button": "bouton"})])
    assert info.glossary_id.startswith("ml-Product-terms-") and info.name == "Product-terms"
    assert [(d.source_lang, d.target_lang, d.entry_count) for d in info.dictionaries] == [
        ("EN", "FR", 2)]
    assert info.glossary_id in [g.glossary_id for g in client.list_multilingual_glossaries()]
    assert client.get_multilingual_glossary(info.glossary_id).dictionaries[0].entry_count == 2
    found = client.get_multilingual_glossary_entries(info, "EN", "FR").dictionaries[0]
    assert found.entries == "file\tfichier\nbutton\tbouton\n"
    used = client.translate_text("Open the file.", source_lang="EN", target_lang="FR",
                                 glossary=info)
    assert isinstance(used, deepl.TextResult) and "fichier" in used.text
    merged = client.update_multilingual_glossary_dictionary(
        info, Dictionary("EN", "FR", {"file": "document", "window": "fenêtre"}))
    assert merged.dictionaries[0].entry_count == 3  # button kept, file replaced, window new
    replaced = client.replace_multilingual_glossary_dictionary(
        info, Dictionary("EN", "FR", {"tablet": "comprimé"}))
    assert replaced.entry_count == 1
    assert client.get_multilingual_glossary_entries(info, "EN", "FR").dictionaries[
        0].entries == "tablet\tcomprimé\n"
    client.delete_multilingual_glossary_dictionary(info, source_lang="EN", target_lang="FR")
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_multilingual_glossary(info.glossary_id)  # its only dictionary is gone


def test_deleting_a_glossary_and_refusals(base: str, client: deepl.DeepLClient) -> None:
    info = client.create_multilingual_glossary("gone", [Dictionary("EN", "FR", {"a": "b"})])
    client.delete_multilingual_glossary(info)
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_multilingual_glossary_entries(info.glossary_id, "EN", "FR")
    before = len(client.list_multilingual_glossaries())
    with pytest.raises(deepl.DeepLException, match="Unsupported glossary language pair"):
        client.create_multilingual_glossary("bad", [Dictionary("EN", "FR", {"a": "b"}),
                                                    Dictionary("EN", "JA", {"c": "d"})])
    assert len(client.list_multilingual_glossaries()) == before  # nothing half-written
    tbx = httpx.post(base + "/deepl/v3/glossaries", timeout=60, json={
        "name": "terms", "dictionaries": [{
            "source_lang": "EN", "target_lang": "FR", "entries_format": "tbx",
            "entries": (DATA / "tbx2019-basic.tbx").read_text(encoding="utf-8")}]})
    assert tbx.status_code == 201, tbx.text
    assert tbx.json()["dictionaries"][0]["entry_count"] == 4
    renamed = httpx.patch(f"{base}/deepl/v3/glossaries/{tbx.json()['glossary_id']}",
                          json={"name": "other"}, timeout=60)
    assert renamed.status_code == 400 and "Renaming" in renamed.json()["message"]


def test_only_a_multilingual_id_is_resolved_to_its_dictionary() -> None:
    from server.api.deepl.glossary_ids import resolve_glossary_id
    from server.textproc.languages import LanguagePair

    pair = LanguagePair("en", "fr")
    assert resolve_glossary_id("ml-terms-0a1b2c3d", pair) == "ml-terms-0a1b2c3d.en-fr"
    # a v2 glossary named "ml-..." keeps its id, which ends in its pair
    assert resolve_glossary_id("ml-terms.en-fr", pair) == "ml-terms.en-fr"
    assert resolve_glossary_id(None, pair) is None
