"""Office files written by their libraries, LibreOffice and pandoc, translated through the
real server (tiny model, /translate/batch) and written back: every output opens in its
library and in LibreOffice (PDF export), keeps its structure and its formatting kinds per
paragraph, and every text node of 3+ words was replaced by the translator's output."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import docx
import odfdo
import openpyxl
import pptx
import pytest
from conftest import build_store, make_client
from fastapi.testclient import TestClient
from lxml import etree
from office_checks import converts_to_pdf, replaced_share, translate
from office_files import (
    INSERTED,
    by_pandoc,
    converted,
    sheet_by_odfdo,
    slides_by_odfdo,
    slides_by_python_pptx,
    text_by_odfdo,
    word_by_python_docx,
    workbook_by_openpyxl,
)

from server.documents import formats
from server.documents.formats.base import ReadOptions

Build = Callable[[Path], bytes]
CASES: dict[str, tuple[str, Build]] = {
    "docx-python-docx": ("docx", lambda tmp: word_by_python_docx()),
    "docx-pandoc": ("docx", lambda tmp: by_pandoc("docx", tmp)),
    "docx-libreoffice": ("docx", lambda tmp: converted(text_by_odfdo(), ".odt", "docx", tmp)),
    "pptx-python-pptx": ("pptx", lambda tmp: slides_by_python_pptx()),
    "pptx-pandoc": ("pptx", lambda tmp: by_pandoc("pptx", tmp)),
    "pptx-libreoffice": ("pptx", lambda tmp: converted(slides_by_odfdo(), ".odp", "pptx", tmp)),
    "xlsx-openpyxl": ("xlsx", lambda tmp: workbook_by_openpyxl()),
    "xlsx-libreoffice": ("xlsx", lambda tmp: converted(sheet_by_odfdo(), ".ods", "xlsx", tmp)),
    "odt-odfdo": ("odt", lambda tmp: text_by_odfdo()),
    "odt-pandoc": ("odt", lambda tmp: by_pandoc("odt", tmp)),
    "odt-libreoffice": ("odt", lambda tmp: converted(word_by_python_docx(), ".docx", "odt",
                                                     tmp)),
    "odp-odfdo": ("odp", lambda tmp: slides_by_odfdo()),
    "odp-libreoffice": ("odp", lambda tmp: converted(slides_by_python_pptx(), ".pptx", "odp",
                                                     tmp)),
    "ods-odfdo": ("ods", lambda tmp: sheet_by_odfdo()),
    "ods-libreoffice": ("ods", lambda tmp: converted(workbook_by_openpyxl(), ".xlsx", "ods",
                                                     tmp)),
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    root = build_store(tmp_path_factory.mktemp("office") / "store")
    with make_client(root, decoding={"beam_size": 1, "max_length": 8},
                     scheduler={"max_wait_ms": 2.0, "request_timeout_s": 600}) as served:
        yield served


def _round_trip(client: TestClient, fmt: str, data: bytes) -> bytes:
    parsed = formats.by_name(fmt).read(data, ReadOptions(source="en", target="fr"))
    assert parsed.segments, "no text was found"
    return parsed.write(translate(client, parsed.segments))


# ------------------------------------------------------------------ structure and kinds


def _word_shape(data: bytes) -> list[object]:
    document = docx.Document(io.BytesIO(data))
    paragraphs = [*document.paragraphs,
                  *(p for t in document.tables for row in t.rows for c in row.cells
                    for p in c.paragraphs)]
    return [len(document.tables), len(document.sections), len(list(document.comments)),
            [(p.style.name if p.style else None,
              sorted({(bool(r.bold), bool(r.italic)) for r in p.runs if r.text.strip()}))
             for p in paragraphs]]


def _slides_shape(data: bytes) -> list[object]:
    presentation = pptx.Presentation(io.BytesIO(data))
    out: list[object] = []
    for slide in presentation.slides:
        for shape in slide.shapes:
            frames = [shape.text_frame] if shape.has_text_frame else []
            if shape.has_table:
                frames = [c.text_frame for row in shape.table.rows for c in row.cells]
            out.append([shape.shape_type, [
                sorted({bool(r.font.bold) for r in p.runs if r.text.strip()})
                for f in frames for p in f.paragraphs]])
        out.append(slide.has_notes_slide)
    return out


def _workbook_shape(data: bytes) -> list[object]:
    workbook = openpyxl.load_workbook(io.BytesIO(data), rich_text=True)
    return [(sheet.title, cell.coordinate, cell.data_type,
             cell.value if cell.data_type in ("n", "f") else None,
             sorted({bool(b.font.b) for b in cell.value if not isinstance(b, str)})
             if isinstance(cell.value, openpyxl.cell.rich_text.CellRichText) else None)
            for sheet in workbook.worksheets for row in sheet.iter_rows() for cell in row]


_ODF_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"


def _odf_shape(data: bytes) -> list[object]:
    odfdo.Document(io.BytesIO(data))  # it opens in its library
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        root = etree.fromstring(archive.read("content.xml"))
    kept = ("note", "a", "line-break", "tab", "bookmark", "list-item")
    counts = {tag: sum(1 for _ in root.iter(_ODF_TEXT + tag)) for tag in kept}
    frames = sum(1 for e in root.iter() if etree.QName(e).localname in ("frame", "annotation",
                                                                         "table-cell"))
    return [counts, frames, [
        (p.tag, p.get(_ODF_TEXT + "style-name"),
         sorted({s.get(_ODF_TEXT + "style-name") or "" for s in p.iter(_ODF_TEXT + "span")
                 if "".join(s.itertext()).strip()}))
        for p in root.iter(_ODF_TEXT + "p", _ODF_TEXT + "h")]]


SHAPES: dict[str, Callable[[bytes], list[object]]] = {
    "docx": _word_shape, "pptx": _slides_shape, "xlsx": _workbook_shape,
    "odt": _odf_shape, "odp": _odf_shape, "ods": _odf_shape,
}


@pytest.mark.parametrize("case", list(CASES))
def test_translated_file_keeps_structure_and_opens(client: TestClient, case: str,
                                                   tmp_path: Path) -> None:
    fmt, build = CASES[case]
    source = build(tmp_path)
    output = _round_trip(client, fmt, source)
    assert SHAPES[fmt](output) == SHAPES[fmt](source)
    assert replaced_share(source, output) >= 0.95
    assert converts_to_pdf(output, f".{fmt}", tmp_path).startswith(b"%PDF")


def test_word_tracked_insertion_translated_deletion_kept(client: TestClient) -> None:
    output = _round_trip(client, "docx", word_by_python_docx())
    with zipfile.ZipFile(io.BytesIO(output)) as archive:
        body = archive.read("word/document.xml").decode()
    assert "<w:ins " in body and "<w:del " in body
    assert INSERTED not in body  # the insertion was translated
    assert "This old sentence was removed." in body  # the deletion kept as deleted


def test_write_is_repeatable(client: TestClient) -> None:
    parsed = formats.by_name("docx").read(word_by_python_docx(), ReadOptions("en", "fr"))
    translations = translate(client, parsed.segments)
    assert parsed.write(translations) == parsed.write(translations)


@pytest.mark.parametrize("case", [c for c in CASES if "pandoc" not in c
                                  and "libreoffice" not in c])
def test_untranslated_round_trip_reads_the_same(case: str, tmp_path: Path) -> None:
    """Each segment written back as it was is read back the same, runs and objects
    in their places."""
    fmt, build = CASES[case]
    source = build(tmp_path)
    parsed = formats.by_name(fmt).read(source, ReadOptions("en", "fr"))
    output = parsed.write([segment.text for segment in parsed.segments])
    again = formats.by_name(fmt).read(output, ReadOptions("en", "fr"))
    assert again.segments == parsed.segments
    assert SHAPES[fmt](output) == SHAPES[fmt](source)
