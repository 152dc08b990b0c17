"""The DeepL-compatible API, driven by the official `deepl` client (`Translator(key,
server_url=...)`) against a real uvicorn on a loopback port, plus raw HTTP calls shaped
as Weblate's DeepL backend sends them (JSON lists, `<x id>` placeables, a TSV glossary
created, then named on every request)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import deepl
import httpx
import pytest
from conftest import make_client, make_settings
from test_libretranslate import build_store
from uvicorn_live import serving

from server.app import create_app
from server.serving.requests import DecodingRequest, Item
from server.serving.translation import Translator

ENGLISH = "The patient takes one tablet a day."
PLACEABLE = re.compile(r'<x id="[^"]*"></x>')


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_store(tmp_path_factory.mktemp("deepl") / "store")
    with serving(create_app(make_settings(root))) as url:
        yield url


@pytest.fixture(scope="module")
def client(base: str) -> Iterator[deepl.Translator]:
    translator = deepl.Translator("any-key", server_url=base + "/deepl/")
    yield translator
    translator.close()


def test_one_text_and_a_list_translate(client: deepl.Translator) -> None:
    one = client.translate_text(ENGLISH, target_lang="FR")
    assert isinstance(one, deepl.TextResult)
    assert one.text and one.text != ENGLISH
    assert one.detected_source_lang == "EN" and one.billed_characters == len(ENGLISH)
    texts = ["Open the file.", "Click the button.", ""]
    several = client.translate_text(texts, source_lang="EN", target_lang="FR",
                                    context="A software manual.")
    assert isinstance(several, list) and len(several) == 3
    assert [r.billed_characters for r in several] == [len(t) for t in texts]
    assert several[0].text and several[2].text == ""


def test_the_url_without_its_final_slash_reaches_the_same_door(base: str) -> None:
    joined = deepl.Translator("k", server_url=base + "/deepl")
    result = joined.translate_text("Open the file.", target_lang="FR")
    joined.close()
    assert isinstance(result, deepl.TextResult) and result.text


def test_xml_placeables_come_back_exactly(client: deepl.Translator) -> None:
    text = 'Click <x id="1"></x> to save <x id="attr-2"></x> the file.'
    result = client.translate_text(text, source_lang="EN", target_lang="FR",
                                   tag_handling="xml", ignore_tags=["x"])
    assert isinstance(result, deepl.TextResult)
    assert PLACEABLE.findall(result.text) == PLACEABLE.findall(text)
    assert "Click" not in result.text  # the words around them were translated


def test_languages_are_the_served_directions(client: deepl.Translator) -> None:
    sources = client.get_source_languages()
    targets = client.get_target_languages()
    assert [(s.code, s.name) for s in sources] == [("EN", "English")]
    assert [(t.code, t.name, t.supports_formality) for t in targets] == [
        ("FR", "French", False)]
    pairs = client.get_glossary_languages()
    assert [(p.source_lang, p.target_lang) for p in pairs] == [("EN", "FR")]


def test_usage_without_keys_is_unlimited(client: deepl.Translator) -> None:
    usage = client.get_usage()
    assert usage.character.valid and usage.character.count == 0
    assert not usage.any_limit_reached


def test_a_glossary_is_created_listed_used_and_deleted(client: deepl.Translator) -> None:
    info = client.create_glossary("Manual terms", "EN", "FR",
                                  {"file": "fichier", "button": "bouton"})
    assert (info.source_lang, info.target_lang, info.entry_count) == ("EN", "FR", 2)
    assert info.glossary_id == "Manual_20terms.en-fr" and info.name == "Manual terms"
    assert info.glossary_id in [g.glossary_id for g in client.list_glossaries()]
    assert client.get_glossary(info.glossary_id).entry_count == 2
    assert client.get_glossary_entries(info) == {"file": "fichier", "button": "bouton"}
    used = client.translate_text("Open the file.", source_lang="EN", target_lang="FR",
                                 glossary=info)
    assert isinstance(used, deepl.TextResult) and "fichier" in used.text
    by_id = client.translate_text("Open the file.", source_lang="EN", target_lang="FR",
                                  glossary=info.glossary_id)  # the id alone, as a string
    assert isinstance(by_id, deepl.TextResult) and by_id.text == used.text
    client.delete_glossary(info)
    assert info.glossary_id not in [g.glossary_id for g in client.list_glossaries()]
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_glossary(info.glossary_id)


def test_the_newer_deepl_client_makes_the_same_calls(base: str) -> None:
    """`DeepLClient` (the client's class since 1.21, `Translator`'s successor) through the
    v2 calls: a list with context, placeables with ignore_tags, languages, usage."""
    newer = deepl.DeepLClient("any-key", server_url=base + "/deepl/")
    try:
        several = newer.translate_text(["Open the file.", "Click the button."],
                                       source_lang="EN", target_lang="FR",
                                       context="A software manual.")
        assert isinstance(several, list) and len(several) == 2
        assert all(r.text and r.detected_source_lang == "EN" for r in several)
        text = 'Click <x id="1"></x> to save the file.'
        kept = newer.translate_text(text, source_lang="EN", target_lang="FR",
                                    tag_handling="xml", ignore_tags="x")
        assert isinstance(kept, deepl.TextResult)
        assert PLACEABLE.findall(kept.text) == PLACEABLE.findall(text)
        assert [s.code for s in newer.get_source_languages()] == ["EN"]
        assert [t.code for t in newer.get_target_languages()] == ["FR"]
        assert newer.get_usage().character.valid
    finally:
        newer.close()


def test_a_csv_glossary_and_a_second_one_of_the_same_name(client: deepl.Translator) -> None:
    first = client.create_glossary_from_csv("shared", "EN", "FR",
                                            "tablet,comprimé\npatient,patiente\n")
    second = client.create_glossary("shared", "EN", "FR", {"day": "jour"})
    assert first.glossary_id != second.glossary_id and first.entry_count == 2
    assert client.get_glossary_entries(first) == {"tablet": "comprimé",
                                                  "patient": "patiente"}
    for made in (first, second):
        client.delete_glossary(made)


def test_an_unknown_language_is_deepls_400(client: deepl.Translator) -> None:
    with pytest.raises(deepl.DeepLException) as refused:
        client.translate_text("Hello.", target_lang="DE")
    assert refused.value.http_status_code == 400
    assert "target_lang" in str(refused.value)
    with pytest.raises(deepl.DeepLException) as source:
        client.translate_text("Hello.", source_lang="JA", target_lang="FR")
    assert source.value.http_status_code == 400


def test_formality_on_a_target_without_it(client: deepl.Translator) -> None:
    with pytest.raises(deepl.DeepLException) as refused:
        client.translate_text("Hello.", target_lang="FR", formality="more")
    assert refused.value.http_status_code == 400 and "formality" in str(refused.value)
    kept = client.translate_text("Hello.", target_lang="FR", formality="prefer_more")
    assert isinstance(kept, deepl.TextResult) and kept.text


def test_a_weblate_shaped_request_keeps_every_placeable(base: str) -> None:
    headers = {"Authorization": "DeepL-Auth-Key weblate-key"}
    tsv = "file\tfichier\nsave\tenregistrer\n"
    created = httpx.post(base + "/deepl/v2/glossaries", headers=headers, json={
        "name": "weblate:1:en:fr:0a1b", "source_lang": "en", "target_lang": "fr",
        "entries": tsv, "entries_format": "tsv"})
    assert created.status_code == 201, created.text
    glossary_id = created.json()["glossary_id"]
    texts = [f'Save <x id="{n}"></x> the file <x id="{n + 1}"></x> now.'
             for n in range(0, 12, 2)]
    answer = httpx.post(base + "/deepl/v2/translate", headers=headers, timeout=60, json={
        "text": texts, "source_lang": "EN", "target_lang": "FR", "tag_handling": "xml",
        "ignore_tags": ["x"], "glossary_id": glossary_id})
    assert answer.status_code == 200, answer.text
    translations = answer.json()["translations"]
    assert len(translations) == len(texts)
    for text, translation in zip(texts, translations, strict=True):
        assert PLACEABLE.findall(translation["text"]) == PLACEABLE.findall(text)
        assert "fichier" in translation["text"]
    entries = httpx.get(f"{base}/deepl/v2/glossaries/{glossary_id}/entries",
                        headers=headers)
    assert entries.text == tsv
    assert httpx.delete(f"{base}/deepl/v2/glossaries/{glossary_id}",
                        headers=headers).status_code == 204


def test_form_bodies_and_get_as_older_clients_send_them(base: str) -> None:
    form = httpx.post(base + "/deepl/v2/translate",
                      data={"text": ["Open the file.", "Hello."], "target_lang": "FR"})
    assert form.status_code == 200, form.text
    assert len(form.json()["translations"]) == 2
    got = httpx.get(base + "/deepl/v2/translate",
                    params={"text": "Open the file.", "target_lang": "FR"})
    assert got.status_code == 200 and got.json()["translations"][0]["text"]


@pytest.mark.parametrize(("body", "message"), [
    ({"target_lang": "FR"}, "'text'"),
    ({"text": ["Hi."]}, "target_lang"),
    ({"text": ["Hi."], "target_lang": "FR", "tag_handling": "markdown"}, "tag_handling"),
    ({"text": [1], "target_lang": "FR"}, "'text'"),
    ({"text": ["Hi."], "target_lang": "FR", "glossary_id": "nope"}, "nope"),
])
def test_bad_requests_answer_a_message(base: str, body: dict[str, object],
                                       message: str) -> None:
    answer = httpx.post(base + "/deepl/v2/translate", json=body)
    assert answer.status_code in (400, 404), answer.text
    assert message in answer.json()["message"]


def test_context_feeds_the_router_and_is_not_translated(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """`context` disambiguates as DeepL reads it: the classifier reads it with the text
    (a text of shared words alone routes nowhere in particular)."""
    root = build_store(tmp_path_factory.mktemp("deepl-context") / "store")
    with make_client(root) as served:
        translator: Translator = served.app.state.translator  # type: ignore[attr-defined]
        assert served.portal is not None

        def decided(context: str | None) -> str | None:
            [result] = served.portal.call(translator.translate,  # type: ignore[union-attr]
                                          [Item("the", None, context=context)],
                                          DecodingRequest())
            return result.decision.domain

        assert decided("patient tablet medicine dose") == "medical"
        assert decided("council regulation directive") == "law"
        assert decided(None) not in ("medical", "law")
