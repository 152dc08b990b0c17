"""Word documents (.docx): the body, headers and footers, notes, comments, text boxes,
charts and SmartArt, and images' alt text.

Paragraphs are found wherever they are (`w:p` in table cells, text boxes, content
controls; a text box's paragraphs are their own segments, the box stays an object of the
paragraph that anchors it). A text box written by Word is there twice, as a drawing and
as its VML fallback for old readers: both are translated, so either reader sees the
translation. Tracked insertions are translated, deletions kept as they were.
"""

from __future__ import annotations

import posixpath

from lxml import etree

from server.documents.formats.base import DocumentError, ReadOptions
from server.documents.formats.office import drawingml, wordml
from server.documents.formats.office.document import (
    OfficeDocument,
    Slot,
    attribute_slots,
    paragraph_slots,
    read_office,
)
from server.documents.formats.office.package import Package
from server.documents.formats.office.parts import local_name, main_part, parts_matching
from server.documents.formats.office.xmlparts import parse_part

WHAT = "Word document (.docx)"
_WORD_PARTS = frozenset({"document", "hdr", "ftr", "footnotes", "endnotes", "comments"})
_DRAWING_PARTS = frozenset({"chartSpace", "dataModel", "drawing"})  # charts, SmartArt
ALT_TEXT = (["descr", "title"], frozenset({"docPr", "cNvPr"}))


def _text_parts(package: Package) -> list[str]:
    main = main_part(package, WHAT)
    root = parse_part(package.data[main], name=main, what=WHAT)
    if root.tag != wordml.W + "document":
        raise DocumentError(f"this is not a {WHAT}: its main part is a "
                            f"{local_name(root)!r}, not a Word document")
    folder = posixpath.dirname(main)
    others = parts_matching(
        package, rf"{folder}/(?:(?:header|footer)\d*|footnotes|endnotes|comments"
                 r"|charts/chart\d*|diagrams/(?:data|drawing)\d*)\.xml")
    return [main, *[name for name in others if name != main]]


def find_slots(name: str, root: etree._Element) -> list[Slot]:
    kind = local_name(root)
    if kind in _WORD_PARTS:
        slots = paragraph_slots(list(root.iter(wordml.PARAGRAPH)), wordml.WordDialect(root))
    elif kind in _DRAWING_PARTS:
        slots = paragraph_slots(list(root.iter(drawingml.PARAGRAPH)),
                                drawingml.DrawingDialect())
    else:
        return []
    return slots + attribute_slots(root, *ALT_TEXT)


class Docx:
    name = "docx"
    extensions: tuple[str, ...] = (".docx",)
    media_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

    def read(self, data: bytes, options: ReadOptions) -> OfficeDocument:
        return read_office(data, options, what=WHAT, text_parts=_text_parts,
                           find_slots=find_slots)
