"""The DeepL-compatible API's keys and documents with the official `deepl` client: a bad
key raises AuthorizationException, a request over a key's character allowance
QuotaExceededException (456), usage reports the key's use and limit; `translate_document`
uploads a .docx and a .txt, waits on the status and downloads the translation."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import deepl
import docx
import httpx
import pytest
from conftest import admin_headers, make_settings
from office_files import word_by_python_docx
from test_libretranslate import build_store
from uvicorn_live import serving

from server.access.limiter import RateLimiter
from server.app import create_app

KEY_LIMIT = 1000  # characters per minute of the test keys


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_store(tmp_path_factory.mktemp("deepl-keys") / "store")
    settings = make_settings(root, access={"api_keys": True, "requests_per_minute": 1000,
                                           "chars_per_minute": 100_000})
    with serving(create_app(settings)) as url:
        yield url


def new_key(base: str, **limits: int) -> str:
    created = httpx.post(base + "/admin/keys", headers=admin_headers(),
                         json={"name": "deepl-user", **limits})
    assert created.status_code == 201, created.text
    key: str = created.json()["key"]
    return key


@pytest.fixture(scope="module")
def client(base: str) -> Iterator[deepl.Translator]:
    translator = deepl.Translator(new_key(base, chars_per_minute=KEY_LIMIT),
                                  server_url=base + "/deepl/")
    yield translator
    translator.close()


def test_a_bad_or_missing_key_is_an_authorization_failure(base: str) -> None:
    refused = deepl.Translator("not-a-key", server_url=base + "/deepl/")
    with pytest.raises(deepl.AuthorizationException):
        refused.translate_text("Hello.", target_lang="FR")
    with pytest.raises(deepl.AuthorizationException):
        refused.get_usage()
    refused.close()
    bare = httpx.post(base + "/deepl/v2/translate", json={"text": ["Hi."],
                                                          "target_lang": "FR"})
    assert bare.status_code == 403 and "message" in bare.json()


def test_usage_counts_the_keys_characters(client: deepl.Translator) -> None:
    # 600 characters of a 1000 a minute allowance take 36 s to refill
    text = "Open the file and click the button. " * 17
    client.translate_text(text, target_lang="FR")
    usage = client.get_usage()
    assert usage.character.limit == KEY_LIMIT
    assert 0 < usage.character.count <= KEY_LIMIT


def test_the_allowance_in_use_refills_with_the_clock() -> None:
    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0])
    assert limiter.used("k", chars_per_minute=600) == 0
    assert limiter.take("k", chars=300, requests_per_minute=10, chars_per_minute=600) is None
    assert limiter.used("k", chars_per_minute=600) == 300
    now[0] = 10.0  # 10 s refill 100 characters
    assert limiter.used("k", chars_per_minute=600) == 200
    now[0] = 120.0
    assert limiter.used("k", chars_per_minute=600) == 0


def test_a_request_over_the_keys_allowance_is_deepls_quota(base: str) -> None:
    tiny = deepl.Translator(new_key(base, chars_per_minute=20), server_url=base + "/deepl/")
    assert tiny.translate_text("Hello.", target_lang="FR").text  # type: ignore[union-attr]
    with pytest.raises(deepl.QuotaExceededException) as exceeded:
        tiny.translate_text("The patient takes one tablet a day.", target_lang="FR")
    assert exceeded.value.http_status_code == 456
    tiny.close()


def test_a_docx_translates_through_a_document_job(client: deepl.Translator,
                                                  tmp_path: Path) -> None:
    source = tmp_path / "leaflet.docx"
    source.write_bytes(word_by_python_docx())
    output = tmp_path / "leaflet.fr.docx"
    status = client.translate_document_from_filepath(source, output, source_lang="EN",
                                                     target_lang="FR")
    assert status.done and status.status == deepl.DocumentStatus.Status.DONE
    assert status.billed_characters and status.billed_characters > 100
    written = docx.Document(io.BytesIO(output.read_bytes()))
    texts = [p.text for p in written.paragraphs if p.text]
    assert texts and "Package leaflet for the patient" not in texts
    assert written.tables[0].cell(1, 1).text == "25"  # a number is not translated


def test_a_txt_keeps_its_lines_and_each_step_answers(client: deepl.Translator,
                                                     base: str) -> None:
    data = b"Open the file.\nClick the button.\n"
    handle = client.translate_document_upload(data, target_lang="FR", filename="notes.txt")
    assert handle.document_id and handle.document_key
    status = client.translate_document_wait_until_done(handle)
    assert status.status.value == "done"
    translated = client.translate_document_download(handle)
    assert translated is not None
    lines = translated.content.decode().split("\n")
    assert len(lines) == 3 and lines[2] == "" and lines[0] != "Open the file."
    wrong = httpx.post(f"{base}/deepl/v2/document/{handle.document_id}",
                       json={"document_key": "0" * 32})
    assert wrong.status_code == 403
    unknown = httpx.post(f"{base}/deepl/v2/document/{'f' * 32}",
                         json={"document_key": handle.document_key})
    assert unknown.status_code == 404 and "message" in unknown.json()


def test_a_document_in_an_unsupported_format_or_language(client: deepl.Translator) -> None:
    with pytest.raises(deepl.DeepLException) as refused:
        client.translate_document_upload(b"MZ", target_lang="FR", filename="setup.exe")
    assert refused.value.http_status_code == 400
    with pytest.raises(deepl.DeepLException) as language:
        client.translate_document_upload(b"Hello.\n", target_lang="DE", filename="a.txt")
    assert language.value.http_status_code == 400


def test_the_older_auth_key_parameter(base: str) -> None:
    key = new_key(base)
    form = httpx.post(base + "/deepl/v2/translate", timeout=60,
                      data={"text": "Open the file.", "target_lang": "FR", "auth_key": key})
    assert form.status_code == 200, form.text
    wrong = httpx.post(base + "/deepl/v2/translate",
                       data={"text": "Open the file.", "target_lang": "FR",
                             "auth_key": "wrong"})
    assert wrong.status_code == 403


def test_a_document_is_not_converted(client: deepl.Translator) -> None:
    with pytest.raises(deepl.DeepLException) as refused:
        client.translate_document_upload(b"Hello.\n", target_lang="FR", filename="a.txt",
                                         output_format="docx")
    assert refused.value.http_status_code == 400 and "output_format" in str(refused.value)
