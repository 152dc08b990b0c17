"""XLIFF 1.2 and 2.0 (.xlf, .xliff): empty targets filled, marked machine translated.

Read with lxml with entity expansion and network access off; a file that declares a
DOCTYPE (the way in for entity bombs and external entities; XLIFF needs none) is
refused before it is parsed. A unit's `<source>` becomes an HTML fragment whose inline
elements stand in as `<span data-x="k">` (paired: `<g>`, `<mrk>`, `<pc>`, `<sub>`) and
`<img data-x="k">` (standalone codes: `<x>`, `<bx>`, `<ex>`, `<ph>`, `<bpt>`, `<ept>`,
`<it>`, `<sc>`, `<ec>`), so the markup pipeline keeps them around the right words; the
`<target>` is rebuilt from the translated fragment with copies of those elements (ids,
attributes and the native code inside them unchanged).

The file is written back byte for byte except where a translation goes (xml_splice.py):
the filled targets, a new target's line, and the attributes set below (a present
attribute keeps its place and quotes). A file whose targets cannot be spliced in (a
namespace prefix declared on `<source>` that its inline codes use) is written by lxml
instead: the same XML, with attribute order and namespace declarations as lxml writes them.

Marks: XLIFF 1.2 `state="needs-review-translation"` with
`state-qualifier="mt-suggestion"` on the target (the 1.2 values for a machine suggestion
awaiting review); XLIFF 2.0 `state="translated"` on the segment (2.0 has no machine
state; `subState` may say more but needs a namespace of its own). Units with
`translate="no"` and targets that already hold text are kept (unless
`overwrite_existing`). The target language goes into `target-language` / `trgLang`
when the file has none.
"""

from __future__ import annotations

import copy
import html
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

from lxml import etree

from server.documents.formats.base import DocumentError, ReadOptions, Segment, check_count
from server.documents.formats.xml_splice import (
    Edit,
    element_spans,
    splice,
    tag_end,
    with_attributes,
)

log = logging.getLogger(__name__)

NS12 = "urn:oasis:names:tc:xliff:document:1.2"
NS20 = "urn:oasis:names:tc:xliff:document:2.0"
PAIRED = frozenset({"g", "mrk", "pc", "sub"})
_DECLARATION = re.compile(rb"(\xef\xbb\xbf)?\s*<\?xml[^>]*\?>\s*")
_DECLARATIONS = re.compile(rb"<!(DOCTYPE|ENTITY)", re.IGNORECASE)
REFUSED_DTD = ("the XLIFF file declares a DOCTYPE or entities; refused (entity expansion and "
               "external entities are not allowed, and XLIFF needs no DTD)")
Element = Any  # lxml's _Element (lxml ships no type information)


@dataclass(frozen=True)
class Unit:
    source: Element
    target: Element  # an empty target element, already in the tree
    inline: list[Element]  # the source's inline elements, by data-x index


@dataclass
class XliffDocument:
    tree: Any
    units: list[Unit]
    segments: list[Segment]
    declaration: bytes  # the source's XML declaration, as written (b"" if none)
    trailer: bytes  # the whitespace after the root element (lxml drops it)
    data: bytes  # the file as it came
    elements: list[Element]  # every element as read, in document order
    attributes: list[dict[str, str]]  # ... and its attributes before any was set

    def write(self, translations: Sequence[str]) -> bytes:
        check_count(translations, self.segments)
        for unit, translation in zip(self.units, translations, strict=True):
            _fill(unit, translation)
        try:
            return self._spliced()
        except (ValueError, KeyError, UnicodeError, DocumentError) as error:
            log.info("XLIFF written by lxml (its targets could not be spliced in: %s)",
                     error)
            return self._serialized()

    def _spliced(self) -> bytes:
        """The source's bytes with the targets and changed attributes replaced."""
        work, finish = _as_utf8(self.data, self.tree.docinfo.encoding or "UTF-8")
        spans = element_spans(work)
        if len(spans) != len(self.elements):
            raise ValueError("expat and lxml see different elements")
        where = {element: index for index, element in enumerate(self.elements)}
        targets = {unit.target for unit in self.units}
        edits: list[Edit] = []
        for index, element in enumerate(self.elements):
            changes = _changed(self.attributes[index], element)
            if changes and element not in targets:
                span = spans[index]
                tag = with_attributes(work[span.start:span.open_end].decode(), changes)
                edits.append(Edit(span.start, span.open_end, tag.encode()))
        for unit in self.units:
            content = _content(unit.target)
            if unit.target in where:  # a target that was there: its whole element
                index = where[unit.target]
                span = spans[index]
                tag = with_attributes(work[span.start:span.open_end].decode(),
                                      _changed(self.attributes[index], unit.target))
                if span.empty:
                    name = re.match(r"<([^\s/>]+)", tag).group(1)  # type: ignore[union-attr]
                    tag, close = tag[:-2].rstrip() + ">", f"</{name}>".encode()
                else:
                    close = work[span.close_start:span.end]
                edits.append(Edit(span.start, span.end, tag.encode() + content + close))
                continue
            anchor = unit.target.getprevious()  # a new target, after source / seg-source
            span = spans[where[anchor]]  # KeyError: not an element of the source
            prefix = re.match(rb"<([^\s/>:]+:)?", work[span.start:span.open_end])
            name = (prefix.group(1) or b"").decode() + "target" if prefix else "target"
            tag = with_attributes(f"<{name}>", dict(unit.target.attrib))
            line = (anchor.tail or "") + tag
            edits.append(Edit(span.end, span.end,
                              line.encode() + content + f"</{name}>".encode()))
        written = finish(splice(work, edits))
        _parse(written)  # still well-formed XML (a prefix out of its scope is not)
        return written

    def _serialized(self) -> bytes:
        encoding = self.tree.docinfo.encoding or "UTF-8"
        if encoding.upper() in ("UTF-8", "US-ASCII", "ASCII"):
            body: bytes = etree.tostring(self.tree, encoding="UTF-8", xml_declaration=False)
            return self.declaration + body + self.trailer
        data: bytes = etree.tostring(self.tree, encoding=encoding,
                                     xml_declaration=bool(self.declaration))
        return data


def _as_utf8(data: bytes, encoding: str) -> tuple[bytes, Callable[[bytes], bytes]]:
    """The file as UTF-8 (what expat's offsets are taken on), and the way back."""
    name = encoding.upper()
    if name == "UTF-8":
        return data, lambda written: written
    if name in ("US-ASCII", "ASCII"):
        return data, lambda written: written.decode().encode("ascii", "xmlcharrefreplace")
    if name.startswith("UTF-16"):
        bom = data[:2]
        codec = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}.get(bom)
        if codec is None:
            raise ValueError("UTF-16 without a byte order mark")
        return (data[2:].decode(codec).encode(),
                lambda written: bom + written.decode().encode(codec))
    return (data.decode(encoding).encode(),
            lambda written: written.decode().encode(encoding, "xmlcharrefreplace"))


def _changed(before: dict[str, str], element: Element) -> dict[str, str]:
    """The attributes set since reading (none is ever removed)."""
    now = dict(element.attrib)
    if set(before) - set(now):
        raise ValueError("an attribute was removed")
    changes = {name: value for name, value in now.items() if before.get(name) != value}
    if any(name.startswith("{") for name in changes):
        raise ValueError("a namespaced attribute changed")
    return changes


def _content(target: Element) -> bytes:
    """What lxml writes between the target's start and end tags (UTF-8)."""
    written: bytes = etree.tostring(target, encoding="UTF-8", with_tail=False)
    opened = tag_end(written, 0)
    if opened == len(written):  # <target/>
        return b""
    return written[opened:written.rindex(b"</")]


def _local(element: Element) -> str:
    tag = element.tag
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _fragment(source: Element) -> tuple[str, list[Element]]:
    """The source's content as an HTML fragment, and its inline elements by index."""
    inline: list[Element] = []

    def walk(element: Element) -> str:
        out = [html.escape(element.text or "", quote=False)]
        for child in element:
            if not isinstance(child.tag, str):  # comments, processing instructions
                out.append(html.escape(child.tail or "", quote=False))
                continue
            index = len(inline)
            inline.append(child)
            if _local(child) in PAIRED:
                out.append(f'<span data-x="{index}">{walk(child)}</span>')
            else:
                out.append(f'<img data-x="{index}">')
            out.append(html.escape(child.tail or "", quote=False))
        return "".join(out)

    return walk(source), inline


class _Rebuild(HTMLParser):
    """The translated fragment back into `target`'s children, with copies of the inline
    elements it names."""

    def __init__(self, target: Element, inline: list[Element]) -> None:
        super().__init__(convert_charrefs=True)
        self.inline = inline
        self.stack = [target]
        self.last: Element | None = None  # the element whose tail takes the next text

    def handle_data(self, data: str) -> None:
        if self.last is None:
            parent = self.stack[-1]
            parent.text = (parent.text or "") + data
        else:
            self.last.tail = (self.last.tail or "") + data

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = self._inline(attrs)
        if found is None:
            return
        parent = self.stack[-1]
        if tag == "span":
            element = copy.copy(found)
            for child in list(element):
                element.remove(child)
            element.text = None
            element.tail = None
            parent.append(element)
            self.stack.append(element)
            self.last = None
        else:
            element = copy.deepcopy(found)
            element.tail = None
            parent.append(element)
            self.last = element

    def handle_endtag(self, tag: str) -> None:
        if tag == "span" and len(self.stack) > 1:
            self.last = self.stack.pop()

    def _inline(self, attrs: list[tuple[str, str | None]]) -> Element | None:
        value = dict(attrs).get("data-x")
        if value is None or not value.isdigit() or int(value) >= len(self.inline):
            return None
        return self.inline[int(value)]


def _fill(unit: Unit, translation: str) -> None:
    target = unit.target
    for child in list(target):
        target.remove(child)
    target.text = None
    rebuild = _Rebuild(target, unit.inline)
    rebuild.feed(translation)
    rebuild.close()


def _parse(data: bytes) -> Any:
    if _DECLARATIONS.search(data):
        raise DocumentError(REFUSED_DTD)
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                             huge_tree=False, remove_blank_text=False)
    try:
        tree = etree.ElementTree(etree.fromstring(data, parser))
    except etree.XMLSyntaxError as error:
        raise DocumentError(f"not well-formed XML ({error}); the file may be truncated"
                            ) from None
    except ValueError as error:
        raise DocumentError(f"not readable as XML: {error}") from None
    if tree.docinfo.doctype or tree.docinfo.internalDTD is not None:  # UTF-16 files
        raise DocumentError(REFUSED_DTD)
    return tree


class Xliff:
    name = "xliff"
    extensions: tuple[str, ...] = (".xlf", ".xliff")
    media_type = "application/xliff+xml"

    def read(self, data: bytes, options: ReadOptions) -> XliffDocument:
        tree = _parse(data)
        root = tree.getroot()
        elements = [element for element in root.iter() if isinstance(element.tag, str)]
        attributes = [dict(element.attrib) for element in elements]
        if root.tag == f"{{{NS12}}}xliff":
            units = _units12(root, options)
        elif root.tag == f"{{{NS20}}}xliff":
            units = _units20(root, options)
        else:
            raise DocumentError(f"not an XLIFF 1.2 or 2.0 file (root element {root.tag!r}; "
                                f"expected xliff in {NS12!r} or {NS20!r})")
        segments: list[Segment] = []
        kept: list[Unit] = []
        for source, target in units:
            fragment, inline = _fragment(source)
            if not fragment.strip():
                continue
            segments.append(Segment(fragment, "html"))
            kept.append(Unit(source, target, inline))
        found = _DECLARATION.match(data)
        trailer = data[len(data.rstrip()):]
        return XliffDocument(tree, kept, segments, found.group(0) if found else b"", trailer,
                             data, elements, attributes)


def _units12(root: Element, options: ReadOptions) -> list[tuple[Element, Element]]:
    found: list[tuple[Element, Element]] = []
    for file in root.iter(f"{{{NS12}}}file"):
        if file.get("target-language") is None:
            file.set("target-language", options.target)
    for unit in root.iter(f"{{{NS12}}}trans-unit"):
        source = unit.find(f"{{{NS12}}}source")
        if source is None or unit.get("translate") == "no":
            continue
        target = unit.find(f"{{{NS12}}}target")
        if target is not None and _has_text(target) and not options.overwrite_existing:
            continue
        if target is None:
            target = etree.Element(f"{{{NS12}}}target")
            after = unit.find(f"{{{NS12}}}seg-source")
            _insert_after(after if after is not None else source, target)
        target.set("state", "needs-review-translation")
        target.set("state-qualifier", "mt-suggestion")
        found.append((source, target))
    return found


def _units20(root: Element, options: ReadOptions) -> list[tuple[Element, Element]]:
    if root.get("trgLang") is None:
        root.set("trgLang", options.target)
    found: list[tuple[Element, Element]] = []
    for unit in root.iter(f"{{{NS20}}}unit"):
        if unit.get("translate") == "no":
            continue
        for segment in unit.iter(f"{{{NS20}}}segment"):
            source = segment.find(f"{{{NS20}}}source")
            if source is None:
                continue
            target = segment.find(f"{{{NS20}}}target")
            if target is not None and _has_text(target) and not options.overwrite_existing:
                continue
            if target is None:
                target = etree.Element(f"{{{NS20}}}target")
                _insert_after(source, target)
            segment.set("state", "translated")
            found.append((source, target))
    return found


def _insert_after(anchor: Element, element: Element) -> None:
    """`element` after `anchor`, on a line of its own indented as the anchor is."""
    before = anchor.getprevious()
    indent = before.tail if before is not None else anchor.getparent().text
    tail = anchor.tail
    anchor.addnext(element)
    element.tail = tail
    anchor.tail = indent if indent is not None and not indent.strip() else tail


def _has_text(element: Element) -> bool:
    return bool("".join(element.itertext()).strip())


FORMAT = Xliff()
