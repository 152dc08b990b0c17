"""Which parts of an OOXML package hold text, found through its relationships.

The main part is the target of the package relationship of type `officeDocument`
(ECMA-376 part 2, 9.3 and part 1, 11.3/12.3/13.3); tools mostly call it
`word/document.xml`, `xl/workbook.xml` or `ppt/presentation.xml`, but the name is theirs to
choose. The other parts are matched by their conventional names under the main part's
folder, which every writer we know of uses.
"""

from __future__ import annotations

import posixpath
import re

from lxml import etree

from server.documents.formats.base import DocumentError
from server.documents.formats.office.document import require_part
from server.documents.formats.office.package import Package
from server.documents.formats.office.xmlparts import parse_part

_RELATIONSHIPS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_OFFICE_DOCUMENT = "/officeDocument"


def main_part(package: Package, what: str) -> str:
    """The name of the package's main part; DocumentError when there is none."""
    require_part(package, "[Content_Types].xml", what)
    require_part(package, "_rels/.rels", what)
    root = parse_part(package.data["_rels/.rels"], name="_rels/.rels", what=what)
    for relation in root.iter(_RELATIONSHIPS + "Relationship"):
        if (relation.get("Type") or "").endswith(_OFFICE_DOCUMENT):
            target = (relation.get("Target") or "").lstrip("/")
            name = posixpath.normpath(target)
            require_part(package, name, what)
            return name
    raise DocumentError(f"this is not a {what}: its package names no main document part")


def parts_matching(package: Package, pattern: str) -> list[str]:
    """Part names matching `pattern` in full, in the zip's order."""
    compiled = re.compile(pattern)
    return [info.filename for info in package.infos if compiled.fullmatch(info.filename)]


def local_name(element: etree._Element) -> str:
    return etree.QName(element).localname
