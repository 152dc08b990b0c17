"""HTML pages (.html, .htm): the markup pipeline's own format, cut into pieces.

The page is one HTML text, so the whole of it goes through `format: "html"` (tags,
attributes, entities, comments, scripts and styles copied as written; see
server/textproc/html.py). A page may be longer than one request's text limit, so it is
cut into segments of at most `SEGMENT_CHARS` characters, each cut just before the start
tag of a block element (`<p>`, `<li>`, `<tr>`, ...), never inside `script`, `style`,
`pre` or `textarea`: a sentence never crosses a block element, so no sentence is cut.

The encoding is the byte order mark's, else a `<meta charset>` in the first kilobytes,
else UTF-8, else Windows-1252 (what browsers assume for legacy pages); the page comes
back in the same encoding.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser

from server.documents.formats.base import ReadOptions, Segment, check_count
from server.documents.formats.encoding import TextEncoding, decode
from server.textproc.html import BLOCKS, UNTRANSLATED

SEGMENT_CHARS = 4000
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)
_RAW = frozenset({"script", "style", "pre", "textarea"})


class _Cuts(HTMLParser):
    """Offsets (in characters) where a block element starts, outside raw-text elements."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=False)
        self.line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\n|\r", text)]
        self.cuts: list[int] = []
        self.raw: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.raw is None and tag in BLOCKS and tag not in UNTRANSLATED:
            line, column = self.getpos()
            self.cuts.append(self.line_starts[line - 1] + column)
        if tag in _RAW:
            self.raw = tag

    def handle_endtag(self, tag: str) -> None:
        if tag == self.raw:
            self.raw = None


@dataclass
class HtmlDocument:
    segments: list[Segment]
    encoding: TextEncoding

    def write(self, translations: Sequence[str]) -> bytes:
        check_count(translations, self.segments)
        return self.encoding.encode("".join(translations))


def cut(text: str, limit: int = SEGMENT_CHARS) -> list[str]:
    """`text` in pieces of at most `limit` characters where block starts allow (a block
    longer than that stays whole); their concatenation is `text`."""
    finder = _Cuts(text)
    finder.feed(text)
    finder.close()
    pieces: list[str] = []
    start = 0
    last = 0  # the latest cut point at or before the current position
    for point in [*finder.cuts, len(text)]:
        if point - start > limit and last > start:
            pieces.append(text[start:last])
            start = last
        last = point
    pieces.append(text[start:])
    return [piece for piece in pieces if piece]


def _encoding_hint(data: bytes) -> str | None:
    found = _META_CHARSET.search(data[:4096])
    return found.group(1).decode("ascii").lower() if found else None


class Html:
    name = "html"
    extensions: tuple[str, ...] = (".html", ".htm", ".xhtml")
    media_type = "text/html"

    def read(self, data: bytes, options: ReadOptions) -> HtmlDocument:
        hint = _encoding_hint(data)
        legacy = hint is None or hint not in ("utf-8", "utf8")
        text, encoding = decode(data, legacy=legacy, what="HTML page")
        # an all-text segment (no words) is still a segment: its bytes come back as sent
        return HtmlDocument([Segment(piece, "html") for piece in cut(text)], encoding)


FORMAT = Html()
