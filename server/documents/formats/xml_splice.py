"""Edit a few elements of an XML file and leave every other byte as it was.

A serializer (lxml's included) writes the XML it parsed, not the bytes: attribute order,
namespace declarations, quotes, character references and empty-element tags may all come
out differently. A format that only changes some elements (XLIFF: the targets it fills
and a few attributes) finds where each element is in the file with expat (the byte offset
of every start and end tag, in document order, the same order as lxml's `iter()`) and
replaces just those bytes.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from xml.parsers import expat


@dataclass(frozen=True)
class Span:
    """Byte offsets of one element: `<a x="1">` is [start, open_end), `</a>` is
    [close_start, end); an empty-element tag `<a/>` has close_start == end == open_end."""

    start: int
    open_end: int
    close_start: int
    end: int

    @property
    def empty(self) -> bool:
        return self.close_start == self.open_end == self.end


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: bytes  # replaces data[start:end] (an insertion when start == end)


def element_spans(data: bytes) -> list[Span]:
    """Every element's span, in document order; `data` is UTF-8 (with or without BOM).
    Raises ValueError for XML expat cannot read (the caller's parser has read it)."""
    spans: list[list[int]] = []
    stack: list[int] = []
    parser = expat.ParserCreate("UTF-8")

    def start(_name: str, _attributes: dict[str, str]) -> None:
        where = parser.CurrentByteIndex
        after = tag_end(data, where)
        spans.append([where, after, after, after])
        stack.append(len(spans) - 1)

    def end(_name: str) -> None:
        span = spans[stack.pop()]
        where = parser.CurrentByteIndex
        if where == span[1] and data[span[1] - 2:span[1]] == b"/>":
            return  # <a/>: expat reports its end after the tag
        span[2], span[3] = where, tag_end(data, where)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except expat.ExpatError as error:
        raise ValueError(str(error)) from None
    return [Span(*span) for span in spans]


def tag_end(data: bytes, start: int) -> int:
    """The offset after the `>` that closes the tag at `start` (quotes may hold `>`)."""
    quote = 0
    for index in range(start + 1, len(data)):
        byte = data[index]
        if quote:
            if byte == quote:
                quote = 0
        elif byte in (0x22, 0x27):  # " '
            quote = byte
        elif byte == 0x3E:  # >
            return index + 1
    raise ValueError(f"the tag at byte {start} is not closed")


def with_attributes(tag: str, changes: dict[str, str]) -> str:
    """The start tag `tag` (as written) with attributes set: a present one keeps its
    place and quotes and gets the new value, a new one goes after the last."""
    for name, value in changes.items():
        escaped = html.escape(value, quote=True)
        present = re.compile(rf"(\s{re.escape(name)}\s*=\s*)(\"[^\"]*\"|'[^']*')")
        found = present.search(tag)
        if found:
            quote = found.group(2)[0]
            tag = (tag[:found.start(2)] + quote + escaped + quote + tag[found.end(2):])
            continue
        body = tag[:-1]
        closing = "/>" if body.endswith("/") else ">"
        body = body[:-1] if closing == "/>" else body
        stripped = body.rstrip()
        tag = f'{stripped} {name}="{escaped}"{body[len(stripped):]}{closing}'
    return tag


def splice(data: bytes, edits: Sequence[Edit]) -> bytes:
    """`data` with the edits applied (they must not overlap)."""
    out: list[bytes] = []
    cursor = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        if edit.start < cursor:
            raise ValueError(f"overlapping edits at byte {edit.start}")
        out += [data[cursor:edit.start], edit.text]
        cursor = edit.end
    out.append(data[cursor:])
    return b"".join(out)
