"""WordprocessingML paragraphs (`w:p`, ECMA-376 part 1, 17.3): runs, links, insertions.

A paragraph holds runs (`w:r`: properties `w:rPr`, then text `w:t`, tabs, breaks,
drawings, note and comment references, field characters) inside containers that mean
something of their own: hyperlinks, tracked insertions and moves (`w:ins`, `w:moveTo`),
content controls (`w:sdt`), smart tags, simple fields. Runs are formatting, so runs with
equal `w:rPr` are one stretch; containers are compared by identity. A field's code (from
its `begin` character to `separate`) is one object: it is never translated. Deleted text
(`w:del`, `w:delText`) is an object too: it stays as the author deleted it. Spelling
marks and rendered page breaks (`w:proofErr`, `w:lastRenderedPageBreak`) are layout
caches that a change of text invalidates, so they are dropped.
"""

from __future__ import annotations

from collections.abc import Hashable

from lxml import etree

from server.documents.formats.office.inline import Element, Leaf, empty_copy

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
PARAGRAPH = W + "p"
RUN = W + "r"
TEXT = W + "t"
_PROPERTIES = frozenset({W + "pPr", W + "rPr", W + "sdtPr", W + "sdtEndPr"})
_DROPPED = frozenset({W + "proofErr", W + "lastRenderedPageBreak", W + "softHyphen"})
_CONTAINERS = frozenset({W + "hyperlink", W + "ins", W + "moveTo", W + "smartTag",
                         W + "customXml", W + "fldSimple", W + "dir", W + "bdo",
                         W + "sdtContent"})
_BREAKS = frozenset({W + "br", W + "cr"})


class WordDialect:
    """One per part: copies of tracked changes get ids no other annotation of the part
    holds (`w:id` is unique among a part's annotations, 17.13.1)."""

    def __init__(self, root: Element) -> None:
        ids = [int(v) for v in root.xpath("//@w:id", namespaces={"w": W[1:-1]})
               if isinstance(v, str) and v.lstrip("-").isdigit()]
        self._next_id = max(ids, default=0) + 1

    def leaves(self, paragraph: Element) -> list[Leaf]:
        out: list[Leaf] = []
        self._walk(paragraph, (), out)
        return out

    def _walk(self, element: Element, chain: tuple[Element, ...], out: list[Leaf]) -> None:
        code: list[Element] = []  # the runs of a field's code, `begin` to `separate`
        for child in element:
            if not isinstance(child.tag, str) or child.tag in _PROPERTIES | _DROPPED:
                continue
            if code:
                code.append(child)
                if _field_char(child) in ("separate", "end"):
                    out.append(Leaf(chain, objects=tuple(code)))
                    code = []
            elif child.tag == RUN and _field_char(child) == "begin":
                code = [child]
            elif child.tag == RUN:
                self._run(child, chain, out)
            elif child.tag in _CONTAINERS:
                self._walk(child, (*chain, child), out)
            elif child.tag == W + "sdt" and (content := child.find(W + "sdtContent")) is not None:
                self._walk(content, (*chain, child, content), out)
            else:
                out.append(Leaf(chain, objects=(child,)))
        if code:
            out.append(Leaf(chain, objects=tuple(code)))

    @staticmethod
    def _run(run: Element, chain: tuple[Element, ...], out: list[Leaf]) -> None:
        inside = (*chain, run)
        for content in run:
            if not isinstance(content.tag, str) or content.tag in _PROPERTIES | _DROPPED:
                continue
            if content.tag == TEXT:
                out.append(Leaf(inside, text=content.text or ""))
            else:
                out.append(Leaf(inside, objects=(content,), breaks=content.tag in _BREAKS))

    def signature(self, container: Element) -> Hashable:
        if container.tag != RUN:
            return id(container)
        properties = container.find(W + "rPr")
        return b"" if properties is None else etree.tostring(properties)

    def formatting_only(self, container: Element) -> bool:
        return container.tag == RUN

    def clear(self, element: Element) -> None:
        element.text = None
        for child in list(element):
            if child.tag not in _PROPERTIES:
                element.remove(child)

    def copy(self, container: Element) -> Element:
        duplicate = empty_copy(container, self)
        if duplicate.get(W + "id") is not None:
            duplicate.set(W + "id", str(self._next_id))
            self._next_id += 1
        return duplicate

    def add_text(self, parent: Element, text: str) -> None:
        if parent.tag != RUN:  # text always sits in a run
            parent = etree.SubElement(parent, RUN)
        element = etree.SubElement(parent, TEXT)
        element.text = text
        element.set(XML_SPACE, "preserve")

    def add_child(self, parent: Element, child: Element) -> None:
        child.tail = None
        parent.append(child)


def _field_char(run: Element) -> str | None:
    if run.tag != RUN:
        return None
    char = run.find(W + "fldChar")
    return None if char is None else char.get(W + "fldCharType")
