"""Excel workbooks (.xlsx): cell text, comments, text boxes, charts and alt text; never
formulas, numbers or sheet names.

Cell text lives in the shared string table (`xl/sharedStrings.xml`, ECMA-376 part 1,
18.4): each `si` is plain text (`t`) or rich text, runs (`r`: `rPr` and `t`) followed by
phonetic runs (`rPh`, `phoneticPr`) that stay last. A cell may also hold its string
inline (`is`, same shape) and legacy comments (`comment/text`) are shaped alike. A
formula's cached result (`c/v`) is left for the spreadsheet to compute; sheet names stay,
since formulas refer to them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Hashable

from lxml import etree

from server.documents.formats.base import DocumentError, ReadOptions
from server.documents.formats.office import drawingml
from server.documents.formats.office.document import (
    OfficeDocument,
    Slot,
    attribute_slots,
    paragraph_slots,
    read_office,
)
from server.documents.formats.office.inline import Element, Leaf, empty_copy
from server.documents.formats.office.package import Package
from server.documents.formats.office.parts import local_name, main_part, parts_matching
from server.documents.formats.office.xmlparts import parse_part

WHAT = "Excel workbook (.xlsx)"
S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
_TRAILING = frozenset({S + "rPh", S + "phoneticPr"})
ALT_TEXT = (["descr", "title"], frozenset({"cNvPr"}))


class SpreadsheetDialect:
    """A string item (`si`, `is`, `comment/text`): plain `t` or runs."""

    def leaves(self, paragraph: Element) -> list[Leaf]:
        out: list[Leaf] = []
        for child in paragraph:
            if child.tag == S + "t":
                out.append(Leaf((), text=child.text or ""))
            elif child.tag == S + "r":
                text = child.find(S + "t")
                out.append(Leaf((child,), text="" if text is None else text.text or ""))
        return out

    def signature(self, container: Element) -> Hashable:
        properties = container.find(S + "rPr")
        return b"" if properties is None else etree.tostring(properties)

    def formatting_only(self, container: Element) -> bool:
        return True

    def clear(self, element: Element) -> None:
        element.text = None
        keep = _TRAILING if element.tag != S + "r" else frozenset({S + "rPr"})
        for child in list(element):
            if child.tag not in keep:
                element.remove(child)

    def copy(self, container: Element) -> Element:
        return empty_copy(container, self)

    def add_text(self, parent: Element, text: str) -> None:
        element = parent.makeelement(S + "t", {XML_SPACE: "preserve"})
        element.text = text
        self.add_child(parent, element)

    def add_child(self, parent: Element, child: Element) -> None:
        """Before the phonetic runs, which end a string item."""
        child.tail = None
        trailing = next((c for c in parent if c.tag in _TRAILING), None)
        if trailing is None:
            parent.append(child)
        else:
            trailing.addprevious(child)


def _text_parts(package: Package) -> list[str]:
    main = main_part(package, WHAT)
    root = parse_part(package.data[main], name=main, what=WHAT)
    if root.tag != S + "workbook":
        raise DocumentError(f"this is not a {WHAT}: its main part is a "
                            f"{local_name(root)!r}, not a workbook")
    folder = posixpath.dirname(main)
    return parts_matching(
        package, rf"{folder}/(?:sharedStrings|worksheets/sheet\d*|comments\d*|comments/comment\d*"
                 r"|drawings/drawing\d*|charts/chart\d*|diagrams/(?:data|drawing)\d*)\.xml")


def _items(root: Element) -> list[Element]:
    if root.tag == S + "sst":
        return list(root.iter(S + "si"))
    if root.tag == S + "comments":
        return list(root.iter(S + "text"))
    return [item for item in root.iter(S + "is")]  # a worksheet's inline strings


def find_slots(name: str, root: etree._Element) -> list[Slot]:
    if root.tag in (S + "sst", S + "comments", S + "worksheet"):
        return paragraph_slots(_items(root), SpreadsheetDialect())
    slots = paragraph_slots(list(root.iter(drawingml.PARAGRAPH)), drawingml.DrawingDialect())
    return slots + attribute_slots(root, *ALT_TEXT)


class Xlsx:
    name = "xlsx"
    extensions: tuple[str, ...] = (".xlsx",)
    media_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

    def read(self, data: bytes, options: ReadOptions) -> OfficeDocument:
        return read_office(data, options, what=WHAT, text_parts=_text_parts,
                           find_slots=find_slots)
