"""The independent pass for office files (docx, pptx, xlsx, odt, odp, ods).

Text units are found without the format readers: every XML part of the zip a reader may
see is parsed with lxml and every paragraph-like element (`p`, `h`, a string item `si`)
gives its text (its nested paragraphs, such as a text box's, are units of their own).
Left out, since no reader sees them as text: package metadata, settings, slide layouts
and masters (placeholder prompts; an OpenDocument presentation's `styles.xml`), formulas
and deleted text of tracked changes.

Structure: the part names, and per part the sequence of block elements (paragraphs,
tables, rows, cells, shapes, notes, comments, sections), which translation must not
change; runs inside paragraphs may be merged and split.
"""

from __future__ import annotations

import io
import re
import zipfile

from lxml import etree

NOT_SEEN = re.compile(r"docProps/.*|meta\.xml|settings\.xml|META-INF/.*|\[Content_Types\]\.xml"
                      r"|.*\.rels|ppt/(?:slideLayouts|slideMasters|notesMasters|handoutMasters)"
                      r"/.*|.*/(?:fontTable|webSettings|theme/theme\d*)\.xml")
REMOVED = ("{http://schemas.openxmlformats.org/wordprocessingml/2006/main}delText",
           "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}deletion",
           "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}f")
PARAGRAPHS = frozenset({"p", "h", "si", "is"})
BLOCKS = frozenset({"p", "h", "tbl", "tr", "tc", "table", "table-row", "table-cell", "sp",
                    "frame", "note", "annotation", "footnote", "endnote", "comment",
                    "sectPr", "page", "si", "c"})


def _parts(data: bytes) -> list[tuple[str, etree._Element]]:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    out: list[tuple[str, etree._Element]] = []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
        presentation = "mimetype" in names and b"presentation" in archive.read("mimetype")
        for name in names:
            body = archive.read(name)
            if (not name.endswith(".xml") or NOT_SEEN.fullmatch(name) or not body.strip()
                    or (presentation and name == "styles.xml")):
                continue
            root = etree.fromstring(body, parser)
            for element in [*root.iter(*REMOVED)]:
                parent = element.getparent()
                if parent is not None:
                    parent.remove(element)
            out.append((name, root))
    return out


def _local(element: etree._Element) -> str:
    return etree.QName(element).localname if isinstance(element.tag, str) else ""


def _own_text(paragraph: etree._Element) -> str:
    """The paragraph's text, less that of paragraphs nested in it."""
    pieces = [paragraph.text or ""]
    for child in paragraph:
        if _local(child) not in PARAGRAPHS and not any(
                _local(e) in PARAGRAPHS for e in child.iter()):
            pieces.append("".join(child.itertext()))
        elif _local(child) not in PARAGRAPHS:
            pieces.append(_own_text(child))
        pieces.append(child.tail or "")
    return "".join(pieces)


def units(data: bytes) -> list[str]:
    out: list[str] = []
    for _, root in _parts(data):
        for element in root.iter():
            if _local(element) in PARAGRAPHS:
                text = " ".join(_own_text(element).split())
                if text:
                    out.append(text)
    return out


def skeleton(data: bytes) -> list[str]:
    out: list[str] = []
    for name, root in _parts(data):
        out.append(name)
        out += [_local(e) for e in root.iter() if _local(e) in BLOCKS]
    return out
