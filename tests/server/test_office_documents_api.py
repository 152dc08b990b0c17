"""Office files through `POST /translate/file` and LibreTranslate's file form (its real
client against a live server): translated, same format, opened by their libraries; bad
packages refused with a 4xx that names the problem."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import docx
import httpx
import odfdo
import openpyxl
import pptx
import pytest
from conftest import make_client, make_settings
from fastapi.testclient import TestClient
from libretranslate_aio import LibreTranslate
from office_checks import replaced_share
from office_files import (
    slides_by_python_pptx,
    text_by_odfdo,
    word_by_python_docx,
    workbook_by_openpyxl,
)
from test_libretranslate import build_store
from test_office_bad_input import BILLION_LAUGHS, _replaced
from uvicorn_live import serving

from server.app import create_app
from server.documents import formats

FILES = {"leaflet.docx": word_by_python_docx, "results.pptx": slides_by_python_pptx,
         "products.xlsx": workbook_by_openpyxl, "garden.odt": text_by_odfdo}
OPENS = {".docx": lambda b: docx.Document(io.BytesIO(b)),
         ".pptx": lambda b: pptx.Presentation(io.BytesIO(b)),
         ".xlsx": lambda b: openpyxl.load_workbook(io.BytesIO(b)),
         ".odt": lambda b: odfdo.Document(io.BytesIO(b))}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    root = build_store(tmp_path_factory.mktemp("office-api") / "store")
    with make_client(root, decoding={"beam_size": 1, "max_length": 8}) as served:
        yield served


@pytest.mark.parametrize("name", list(FILES))
def test_an_office_file_comes_back_translated(client: TestClient, name: str) -> None:
    source = FILES[name]()
    response = client.post("/translate/file", files={"file": (name, source)})
    assert response.status_code == 200, response.text
    fmt = formats.by_filename(name)
    assert response.headers["content-type"].startswith(fmt.media_type)
    stem, suffix = name.rsplit(".", 1)
    assert f'filename="{stem}.fr.{suffix}"' in response.headers["content-disposition"]
    assert json.loads(response.headers["x-nmt-routing"])["mode"]
    OPENS["." + suffix](response.content)  # it opens in its library
    assert replaced_share(source, response.content) >= 0.95


@pytest.mark.parametrize(("body", "message"), [
    (b" " * (64 << 20), "zip bomb"),
    (BILLION_LAUGHS, "DTD"),
    (b"<w:document", "not well-formed"),
], ids=["zip-bomb", "xml-bomb", "corrupt-part"])
def test_bad_packages_are_422_naming_the_problem(client: TestClient, body: bytes,
                                                 message: str) -> None:
    bomb = _replaced(word_by_python_docx(), "word/document.xml", body)
    response = client.post("/translate/file", files={"file": ("bad.docx", bomb)})
    assert response.status_code == 422, response.text
    assert message in response.text and "bad.docx" in response.text


@pytest.mark.parametrize(("data", "message"), [
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(2048), "password-protected"),
    (b"PK\x03\x04 truncated", "not a zip archive"),
], ids=["encrypted", "truncated"])
def test_encrypted_and_truncated_files_are_422(client: TestClient, data: bytes,
                                               message: str) -> None:
    response = client.post("/translate/file", files={"file": ("secret.xlsx", data)})
    assert response.status_code == 422, response.text
    assert message in response.text


def test_libretranslate_client_translates_a_word_file(tmp_path_factory: pytest.TempPathFactory,
                                                      tmp_path: Path) -> None:
    root = build_store(tmp_path_factory.mktemp("office-lt") / "store")
    source = word_by_python_docx()
    path = tmp_path / "leaflet.docx"
    path.write_bytes(source)
    with serving(create_app(make_settings(root))) as base, \
            LibreTranslate(base + "/libretranslate") as client:
        result = client.translate_file(path, source="en", target="fr")
        formats_listed = client.frontend_settings().supported_files_format
        downloaded = httpx.get(result.translated_file_url, timeout=60)
    assert result.translated_file_url.endswith(".leaflet.fr.docx")
    assert downloaded.status_code == 200
    docx.Document(io.BytesIO(downloaded.content))  # it opens
    assert replaced_share(source, downloaded.content) >= 0.95
    assert {".docx", ".pptx", ".xlsx", ".odt", ".odp", ".ods"} <= set(formats_listed)
