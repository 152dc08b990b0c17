"""PowerPoint presentations (.pptx): slides (shapes, text boxes, tables, groups), speaker
notes, comments, charts and SmartArt, and alt text.

Slide layouts and masters are left alone: their text is the prompt a placeholder shows
while empty ("Click to add title"), which no reader of the slides sees.
"""

from __future__ import annotations

import posixpath

from lxml import etree

from server.documents.formats.base import DocumentError, ReadOptions
from server.documents.formats.office import drawingml
from server.documents.formats.office.document import (
    OfficeDocument,
    Slot,
    TextSlot,
    attribute_slots,
    paragraph_slots,
    read_office,
)
from server.documents.formats.office.package import Package
from server.documents.formats.office.parts import local_name, main_part, parts_matching
from server.documents.formats.office.xmlparts import parse_part

WHAT = "PowerPoint presentation (.pptx)"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
ALT_TEXT = (["descr", "title"], frozenset({"cNvPr"}))


def _text_parts(package: Package) -> list[str]:
    main = main_part(package, WHAT)
    root = parse_part(package.data[main], name=main, what=WHAT)
    if root.tag != _P + "presentation":
        raise DocumentError(f"this is not a {WHAT}: its main part is a "
                            f"{local_name(root)!r}, not a presentation")
    folder = posixpath.dirname(main)
    return parts_matching(
        package, rf"{folder}/(?:slides/slide|notesSlides/notesSlide|comments/\w*?[cC]omment"
                 r"|charts/chart|diagrams/(?:data|drawing))\d*\.xml")


def find_slots(name: str, root: etree._Element) -> list[Slot]:
    slots = paragraph_slots(list(root.iter(drawingml.PARAGRAPH)), drawingml.DrawingDialect())
    # legacy comments (`p:cm/p:text`) are plain text
    slots += [TextSlot(element) for element in root.iter(_P + "text")
              if element.text and any(char.isalpha() for char in element.text)]
    return slots + attribute_slots(root, *ALT_TEXT)


class Pptx:
    name = "pptx"
    extensions: tuple[str, ...] = (".pptx",)
    media_type = "application/vnd.openxmlformats-officedocument.presentationml.presentation"

    def read(self, data: bytes, options: ReadOptions) -> OfficeDocument:
        return read_office(data, options, what=WHAT, text_parts=_text_parts,
                           find_slots=find_slots)
