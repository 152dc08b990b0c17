"""Tenants on the other doors of a live server, with their real clients where they have
one: LibreTranslate (`libretranslate_aio` and its form fields), DeepL (the official
`deepl` client: v2 glossaries and `DeepLClient`'s multilingual v3 ones), ModernMT (the
official `modernmt` client: memories, hints) and document uploads. A key of tenant acme
cannot use, list, read or infer tenant beta's domains, glossaries or memories on any of
them."""

from __future__ import annotations

from collections.abc import Iterator

import deepl
import httpx
import pytest
from conftest import admin_headers, make_settings
from deepl.api_data import MultilingualGlossaryDictionaryEntries as Dictionary
from libretranslate_aio import LibreTranslate
from modernmt import ModernMT, ModernMTException
from tenant_world import World, build_tenant_store, make_world, same_refusal
from uvicorn_live import serving

from server.app import create_app

BETA_WORDS = "court verdict appeal"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = build_tenant_store(tmp_path_factory.mktemp("tenant-doors") / "store")
    settings = make_settings(root, access={"api_keys": True, "cache_s": 0.0})
    with serving(create_app(settings)) as base:
        yield make_world(base)


def modernmt(world: World, key: str) -> ModernMT:
    client = ModernMT(key)
    client._ModernMT__base_url = world.base + "/modernmt"  # type: ignore[attr-defined]
    return client


def test_libretranslate_keys_use_their_tenants_domains(world: World) -> None:
    with LibreTranslate(world.base + "/libretranslate", api_key=world.acme) as client:
        assert client.translate("the contract", "en", "fr").translated_text
    def translate(key: str, domain: str) -> httpx.Response:
        return httpx.post(world.base + "/libretranslate/translate", timeout=30, json={
            "q": BETA_WORDS, "source": "en", "target": "fr", "api_key": key,
            "domain": domain})
    assert translate(world.beta, "beta-legal").status_code == 200
    theirs, missing = translate(world.acme, "beta-legal"), translate(world.acme, "beta-legak")
    # LibreTranslate answers an unknown domain with its 400, like any bad parameter
    assert theirs.status_code == 400 and same_refusal(theirs, missing, "beta-legal",
                                                      "beta-legak")
    routed = translate(world.acme, "auto").json()["routing"]
    assert routed["domain"] != "beta-legal"


def test_deepl_glossaries_belong_to_the_tenant_that_made_them(world: World) -> None:
    beta = deepl.Translator(world.beta, server_url=world.base + "/deepl/")
    acme = deepl.Translator(world.acme, server_url=world.base + "/deepl/")
    try:
        made = beta.create_glossary("terms", "EN", "FR", {"court": "tribunal"})
        assert made.glossary_id.startswith("beta-")
        assert made.glossary_id in [g.glossary_id for g in beta.list_glossaries()]
        assert made.glossary_id not in [g.glossary_id for g in acme.list_glossaries()]
        with pytest.raises(deepl.GlossaryNotFoundException):
            acme.get_glossary(made.glossary_id)
        with pytest.raises(deepl.GlossaryNotFoundException):
            acme.get_glossary_entries(made.glossary_id)
        with pytest.raises(deepl.GlossaryNotFoundException):
            acme.delete_glossary(made.glossary_id)
        with pytest.raises(deepl.DeepLException) as theirs:
            acme.translate_text("the court", source_lang="EN", target_lang="FR",
                                glossary=made.glossary_id)
        with pytest.raises(deepl.DeepLException) as missing:
            acme.translate_text("the court", source_lang="EN", target_lang="FR",
                                glossary="beta-termz.en-fr")
        assert type(theirs.value) is type(missing.value)
        assert str(theirs.value).replace(made.glossary_id, "X") == \
            str(missing.value).replace("beta-termz.en-fr", "X")
        used = beta.translate_text("the court", source_lang="EN", target_lang="FR",
                                   glossary=made)
        assert isinstance(used, deepl.TextResult) and "tribunal" in used.text
        beta.delete_glossary(made)
    finally:
        beta.close()
        acme.close()


def test_deepl_multilingual_glossaries_belong_to_the_tenant_that_made_them(
        world: World) -> None:
    beta = deepl.DeepLClient(world.beta, server_url=world.base + "/deepl/")
    acme = deepl.DeepLClient(world.acme, server_url=world.base + "/deepl/")
    unknown = "ml-beta-termz-0123abcd"
    def v3(key: str, method: str, path: str, **kwargs: object) -> httpx.Response:
        return httpx.request(method, f"{world.base}/deepl/v3/glossaries{path}", timeout=30,
                             headers={"Authorization": f"DeepL-Auth-Key {key}"},
                             **kwargs)  # type: ignore[arg-type]
    try:
        made = beta.create_multilingual_glossary(
            "terms", [Dictionary("EN", "FR", {"court": "tribunal"})])
        assert made.name == "beta-terms"
        assert made.glossary_id in [g.glossary_id for g in beta.list_multilingual_glossaries()]
        assert made.glossary_id not in [
            g.glossary_id for g in acme.list_multilingual_glossaries()]
        for call in (lambda: acme.get_multilingual_glossary(made.glossary_id),
                     lambda: acme.get_multilingual_glossary_entries(made, "EN", "FR"),
                     lambda: acme.update_multilingual_glossary_dictionary(
                         made, Dictionary("EN", "FR", {"court": "cour"})),
                     lambda: acme.delete_multilingual_glossary_dictionary(
                         made, source_lang="EN", target_lang="FR"),
                     lambda: acme.delete_multilingual_glossary(made)):
            with pytest.raises(deepl.GlossaryNotFoundException):
                call()
        pair = {"source_lang": "EN", "target_lang": "FR"}
        for method, path, kwargs in (
                ("GET", "/{}", {}), ("GET", "/{}/entries", {"params": pair}),
                ("PATCH", "/{}", {"json": {"dictionaries": [{**pair, "entries": "a\tb"}]}}),
                ("PUT", "/{}/dictionaries", {"json": {**pair, "entries": "a\tb"}}),
                ("DELETE", "/{}/dictionaries", {"params": pair}), ("DELETE", "/{}", {})):
            theirs = v3(world.acme, method, path.format(made.glossary_id), **kwargs)
            missing = v3(world.acme, method, path.format(unknown), **kwargs)
            assert theirs.status_code == 404, (method, path, theirs.text)
            assert same_refusal(theirs, missing, made.glossary_id, unknown)
        with pytest.raises(deepl.DeepLException) as theirs_used:
            acme.translate_text("the court", source_lang="EN", target_lang="FR",
                                glossary=made.glossary_id)
        with pytest.raises(deepl.DeepLException) as missing_used:
            acme.translate_text("the court", source_lang="EN", target_lang="FR",
                                glossary=unknown)
        assert type(theirs_used.value) is type(missing_used.value)
        assert str(theirs_used.value).replace(made.glossary_id, "X") == \
            str(missing_used.value).replace(unknown, "X")
        # the owner still has it whole, and a dictionary it adds stays its own
        assert beta.get_multilingual_glossary_entries(made, "EN", "FR").dictionaries[
            0].entries == "court\ttribunal\n"
        merged = beta.update_multilingual_glossary_dictionary(
            made, Dictionary("EN", "FR", {"appeal": "appel"}))
        assert merged.dictionaries[0].entry_count == 2
        used = beta.translate_text("the court", source_lang="EN", target_lang="FR",
                                   glossary=made)
        assert isinstance(used, deepl.TextResult) and "tribunal" in used.text
        # a shared multilingual glossary is used by a tenant's key but not changed by it
        shared = deepl.DeepLClient(world.shared, server_url=world.base + "/deepl/")
        try:
            common = shared.create_multilingual_glossary(
                "common", [Dictionary("EN", "FR", {"dose": "dose"})])
        finally:
            shared.close()
        assert common.glossary_id in [g.glossary_id for g in acme.list_multilingual_glossaries()]
        with pytest.raises(deepl.DeepLException) as refused:
            acme.delete_multilingual_glossary(common)
        assert "managed by the operator" in str(refused.value)
        assert acme.get_multilingual_glossary(common.glossary_id).dictionaries
        beta.delete_multilingual_glossary(made)
        with pytest.raises(deepl.GlossaryNotFoundException):
            beta.get_multilingual_glossary(made.glossary_id)
    finally:
        beta.close()
        acme.close()


def test_modernmt_memories_belong_to_the_tenant_that_made_them(world: World) -> None:
    beta, acme = modernmt(world, world.beta_admin), modernmt(world, world.acme_admin)
    memory = beta.memories.create("client-tm")
    assert memory.name == "beta-client-tm"
    assert memory.id in [m.id for m in beta.memories.list()]
    assert memory.id not in [m.id for m in acme.memories.list()]
    for attempt in (lambda: acme.memories.get(memory.id),
                    lambda: acme.memories.delete(memory.id)):
        with pytest.raises(ModernMTException) as refused:
            attempt()
        assert refused.value.status == 404
    member = modernmt(world, world.acme)
    with pytest.raises(ModernMTException) as theirs:
        member.translate("en", "fr", "the court", hints=[memory.id])
    with pytest.raises(ModernMTException) as missing:
        member.translate("en", "fr", "the court", hints=[memory.id + 1000])
    assert theirs.value.status == missing.value.status == 404
    assert str(theirs.value).replace(str(memory.id), "X") == \
        str(missing.value).replace(str(memory.id + 1000), "X")
    vector = member.get_context_vector("en", "fr", BETA_WORDS)
    assert str(memory.id) not in vector
    assert modernmt(world, world.beta).translate("en", "fr", "the court",
                                                  hints=[memory.id]).translation
    # a member's key is not a memory admin
    with pytest.raises(ModernMTException) as refused:
        modernmt(world, world.acme).memories.list()
    assert refused.value.status == 403


def test_documents_cannot_name_another_tenants_domain(world: World) -> None:
    def upload(key: str, domain: str) -> httpx.Response:
        return httpx.post(world.base + "/translate/file", headers={"X-API-Key": key},
                          files={"file": ("notes.txt", b"The court heard the appeal.\n")},
                          data={"domain": domain}, timeout=60)
    assert upload(world.beta, "beta-legal").status_code == 200
    theirs, missing = upload(world.acme, "beta-legal"), upload(world.acme, "beta-legak")
    assert theirs.status_code == 404 and same_refusal(theirs, missing, "beta-legal",
                                                      "beta-legak")


def test_the_operator_memory_token_sees_every_tenants_memories(world: World) -> None:
    beta = modernmt(world, world.beta_admin)
    memory = beta.memories.create("kept")
    operator = httpx.get(world.base + "/admin/memories", headers=admin_headers(),
                         timeout=30).json()["memories"]
    assert memory.name in {m["name"] for m in operator}
    beta.memories.delete(memory.id)


def test_a_modernmt_memorys_glossary_and_new_name_stay_its_tenants(world: World) -> None:
    beta = modernmt(world, world.beta_admin)
    memory = beta.memories.create("weblate-project")
    renamed = beta.memories.edit(memory.id, name="renamed")
    assert renamed.name == "beta-renamed"
    uploaded = httpx.post(f"{world.base}/modernmt/memories/{memory.id}/glossary",
                          headers={"MMT-ApiKey": world.beta_admin},
                          data={"type": "unidirectional"},
                          files={"csv": ("glossary.csv", b"en,fr\ncourt,tribunal\n")},
                          timeout=30)
    assert uploaded.status_code == 200, uploaded.text
    def translate(key: str, memory_id: int) -> httpx.Response:
        return httpx.get(f"{world.base}/modernmt/translate", headers={"MMT-ApiKey": key},
                         params={"q": "the court", "source": "en", "target": "fr",
                                 "glossaries": str(memory_id)}, timeout=60)
    assert "tribunal" in translate(world.beta, memory.id).json()["data"]["translation"]
    theirs, missing = translate(world.acme, memory.id), translate(world.acme, memory.id + 999)
    assert theirs.status_code == 404
    assert theirs.text.replace(str(memory.id), "X") == \
        missing.text.replace(str(memory.id + 999), "X")
    for key, sees in ((world.acme, False), (world.beta, True)):
        client = deepl.Translator(key, server_url=world.base + "/deepl/")
        try:
            listed = {g.glossary_id for g in client.list_glossaries()}
        finally:
            client.close()
        assert (f"modernmt-memory-{memory.id}.en-fr" in listed) is sees
    beta.memories.delete(memory.id)
