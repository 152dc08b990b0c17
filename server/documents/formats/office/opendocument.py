"""OpenDocument text, presentations and spreadsheets (.odt, .odp, .ods; ODF 1.3).

The text a reader sees is in `content.xml` (body, tables, frames and text boxes, notes,
annotations, slides and their speaker notes, cells) and, for text documents and
spreadsheets, in `styles.xml` (the master pages' headers and footers; a presentation's
master pages only hold placeholder prompts). Alt text is `svg:title` / `svg:desc`.

Left as they are: deleted text of tracked changes (`text:tracked-changes`), a cell that
computes (`table:formula`) or shows a typed value (a number, a date: its text is a
rendering of `office:value`), a placeholder's prompt. The package's `mimetype` entry must
name the format; an encrypted package (`manifest:encryption-data`, ODF 1.3 part 2, 4.8)
is refused.
"""

from __future__ import annotations

from lxml import etree

from server.documents.formats.base import DocumentError, ReadOptions
from server.documents.formats.office import odf_text
from server.documents.formats.office.document import (
    OfficeDocument,
    Slot,
    TextSlot,
    paragraph_slots,
    read_office,
    require_part,
)
from server.documents.formats.office.inline import has_words
from server.documents.formats.office.package import Package
from server.documents.formats.office.xmlparts import parse_part

_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_SVG = "{urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0}"
_PRESENTATION = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
_MANIFEST = "{urn:oasis:names:tc:opendocument:xmlns:manifest:1.0}"


def _left_alone(paragraph: etree._Element) -> bool:
    for ancestor in paragraph.iterancestors():
        if ancestor.tag == odf_text.TEXT_NS + "tracked-changes":
            return True
        if ancestor.tag == _TABLE + "table-cell" and (
                ancestor.get(_TABLE + "formula") is not None
                or ancestor.get(_OFFICE + "value-type", "string") != "string"):
            return True
        if ancestor.get(_PRESENTATION + "placeholder") == "true":
            return True
    return False


def find_slots(name: str, root: etree._Element) -> list[Slot]:
    paragraphs = [p for p in root.iter(*odf_text.PARAGRAPHS) if not _left_alone(p)]
    slots = paragraph_slots(paragraphs, odf_text.OpenDocumentDialect())
    alt = [TextSlot(e) for e in root.iter(_SVG + "title", _SVG + "desc")
           if e.text and has_words(e.text) and len(e) == 0]
    return slots + list(alt)


class _OpenDocument:
    name: str
    extensions: tuple[str, ...]
    media_type: str
    what: str
    parts: tuple[str, ...] = ("content.xml", "styles.xml")

    def read(self, data: bytes, options: ReadOptions) -> OfficeDocument:
        return read_office(data, options, what=self.what, text_parts=self._text_parts,
                           find_slots=find_slots)

    def _text_parts(self, package: Package) -> list[str]:
        require_part(package, "mimetype", self.what)
        found = package.data["mimetype"].decode("ascii", "replace").strip()
        if found != self.media_type:
            raise DocumentError(f"this is not an {self.what}: its mimetype is {found!r}")
        require_part(package, "content.xml", self.what)
        manifest = package.data.get("META-INF/manifest.xml")
        if manifest is not None:
            root = parse_part(manifest, name="META-INF/manifest.xml", what=self.what)
            if next(root.iter(_MANIFEST + "encryption-data"), None) is not None:
                raise DocumentError(f"this {self.what} is password-protected (encrypted): "
                                    "save it without a password and send it again")
        return [name for name in self.parts if name in package.data]


class Odt(_OpenDocument):
    name = "odt"
    extensions: tuple[str, ...] = (".odt",)
    media_type = "application/vnd.oasis.opendocument.text"
    what = "OpenDocument text (.odt)"


class Odp(_OpenDocument):
    name = "odp"
    extensions: tuple[str, ...] = (".odp",)
    media_type = "application/vnd.oasis.opendocument.presentation"
    what = "OpenDocument presentation (.odp)"
    parts = ("content.xml",)


class Ods(_OpenDocument):
    name = "ods"
    extensions: tuple[str, ...] = (".ods",)
    media_type = "application/vnd.oasis.opendocument.spreadsheet"
    what = "OpenDocument spreadsheet (.ods)"
