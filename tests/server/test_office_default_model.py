"""Office files of every format translated by the embedded default model (en -> fr): an
independent pass over every text node of every XML part finds >= 95 % of the nodes with
3+ words in French (language ID per node), and formatting inside a sentence comes back."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator

import docx
import pytest
from fastapi.testclient import TestClient
from office_checks import target_share, translate
from office_files import (
    sheet_by_odfdo,
    slides_by_odfdo,
    slides_by_python_pptx,
    text_by_odfdo,
    word_by_python_docx,
    workbook_by_openpyxl,
)

from server.app import create_app
from server.documents import formats
from server.documents.formats.base import ReadOptions
from server.settings import Settings

FILES: dict[str, Callable[[], bytes]] = {
    "docx": word_by_python_docx, "pptx": slides_by_python_pptx, "xlsx": workbook_by_openpyxl,
    "odt": text_by_odfdo, "odp": slides_by_odfdo, "ods": sheet_by_odfdo,
}


@pytest.fixture(scope="module")
def default_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(store_dir=tmp_path_factory.mktemp("office-default") / "store",
                        builtin_artifacts=True,  # decoded as served: beam 4
                        scheduler={"request_timeout_s": 600})  # a busy CI machine
    with TestClient(create_app(settings)) as client:
        yield client


_DONE: dict[str, bytes] = {}  # each file is translated once for this module's tests


def _translated(client: TestClient, fmt: str) -> bytes:
    if fmt not in _DONE:
        parsed = formats.by_name(fmt).read(FILES[fmt](), ReadOptions(source="en", target="fr"))
        _DONE[fmt] = parsed.write(translate(client, parsed.segments))
    return _DONE[fmt]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(FILES))
def test_every_text_node_in_the_target_language(default_client: TestClient,
                                                fmt: str) -> None:
    output = _translated(default_client, fmt)
    share, others = target_share(output, "fr", ["en", "fr"])
    assert share >= 0.95, others


@pytest.mark.slow
def test_bold_words_stay_bold_in_the_translation(default_client: TestClient) -> None:
    output = _translated(default_client, "docx")
    paragraph = docx.Document(io.BytesIO(output)).paragraphs[1]
    bold = [run.text for run in paragraph.runs if run.bold and run.text.strip()]
    plain = "".join(run.text for run in paragraph.runs if not run.bold)
    assert bold and "tablet" not in " ".join(bold)  # the bold words, translated
    assert "patient" in plain.lower() and "takes" not in plain
