"""An office file's XML parts, parsed with everything that reaches outside them off.

Office XML never declares a DTD (ECMA-376 part 2 forbids one in a package's parts, ODF's
parts are schema-valid without one), so a part that does is refused outright: that is
where entity expansion bombs ("billion laughs") and external entities (a `SYSTEM`
reference to a local file or a URL) live. The parser itself also never resolves entities,
loads DTDs or touches the network, so nothing is expanded before that check runs.
"""

from __future__ import annotations

from lxml import etree

from server.documents.formats.base import DocumentError


def parse_part(data: bytes, *, name: str, what: str) -> etree._Element:
    """The root of one part; DocumentError for malformed XML or a DTD."""
    if b"<!DOCTYPE" in data[:4096] or b"<!ENTITY" in data[:4096]:
        raise _dtd_error(name, what)
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                             dtd_validation=False, huge_tree=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as error:
        raise DocumentError(f"this {what} is corrupt: its part {name!r} is not well-formed "
                            f"XML ({error})") from error
    if root.getroottree().docinfo.doctype:
        raise _dtd_error(name, what)
    return root


def serialize_part(root: etree._Element) -> bytes:
    """UTF-8 with the declaration's `standalone` as the part had it."""
    standalone = root.getroottree().docinfo.standalone
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8",
                          standalone=standalone)


def _dtd_error(name: str, what: str) -> DocumentError:
    return DocumentError(f"this {what} is refused: its part {name!r} declares a DTD or "
                         "entities (<!DOCTYPE>/<!ENTITY>), which office files never do and "
                         "which can expand without bound or read other files")
