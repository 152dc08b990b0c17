"""LibreTranslate's file translation with its real client: `libretranslate-aio`'s
`translate_file` against a live server, then the download its URL points to."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

import httpx
import pytest
from conftest import make_settings
from libretranslate_aio import AsyncLibreTranslate, LibreTranslate
from libretranslate_aio.exceptions import BadRequestError
from test_libretranslate import build_store
from uvicorn_live import serving

from server.app import create_app

SRT = ("1\n00:00:01,000 --> 00:00:02,000\nTake <i>one tablet</i> a day.\n\n"
       "2\n00:00:03,500 --> 00:00:05,000\nClick the button.\n")
TIMING = re.compile(r"^.*-->.*$", re.MULTILINE)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_store(tmp_path_factory.mktemp("ltfiles") / "store")
    with serving(create_app(make_settings(root))) as url:
        yield url


def test_the_client_translates_a_file_and_downloads_it(base: str, tmp_path: Path) -> None:
    path = tmp_path / "leaflet.srt"
    path.write_bytes(SRT.encode("cp1252"))
    with LibreTranslate(base + "/libretranslate") as client:
        result = client.translate_file(path, source="en", target="fr")
        settings = client.frontend_settings()
    assert result.translated_file_url.startswith(base + "/libretranslate/download_file/")
    assert result.translated_file_url.endswith(".leaflet.fr.srt")
    download = httpx.get(result.translated_file_url)
    assert download.status_code == 200
    assert 'filename="leaflet.fr.srt"' in download.headers["content-disposition"]
    written = download.content.decode("cp1252")
    assert TIMING.findall(written) == TIMING.findall(SRT)
    assert "tablet" not in written and written.split("\n")[0] == "1"
    assert ".srt" in settings.supported_files_format
    assert ".xliff" in settings.supported_files_format


def test_the_async_client_and_the_same_file_as_the_native_endpoint(base: str) -> None:
    async def call() -> str:
        async with AsyncLibreTranslate(base + "/libretranslate") as client:
            data = BytesIO(b"Open the file.\nClick the button.\n")
            data.name = "notes.txt"
            result = await client.translate_file(data, source="auto", target="fr")
            return result.translated_file_url

    url = asyncio.run(call())
    lt_file = httpx.get(url).content
    native = httpx.post(base + "/translate/file", files={
        "file": ("notes.txt", b"Open the file.\nClick the button.\n")})
    assert native.status_code == 200 and lt_file == native.content


@pytest.mark.parametrize(("name", "data", "target", "message"), [
    ("setup.exe", b"MZ", "fr", r"Invalid request: .*supported: \.txt"),
    ("a.srt", b"1\n00:00:01,000 --> x\nHi\n", "fr", "malformed SubRip timing"),
    ("a.txt", b"Hello.\n", "de", "no served backbone translates from en into de; served "
     "directions: en->fr"),
])
def test_refusals_are_400_with_a_message(base: str, tmp_path: Path, name: str, data: bytes,
                                         target: str, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with LibreTranslate(base + "/libretranslate") as client:
        with pytest.raises(BadRequestError) as refused:
            client.translate_file(path, source="en", target=target)
    assert refused.value.status_code == 400
    assert re.search(message, refused.value.message), refused.value.message


def test_download_of_an_unknown_file_is_refused(base: str) -> None:
    response = httpx.get(base + "/libretranslate/download_file/" + "0" * 32 + ".a.txt")
    assert response.status_code == 400
    assert response.json() == {"error": "Invalid filename"}
    assert response.headers["access-control-allow-origin"] == "*"
