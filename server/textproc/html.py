"""HTML in, the same HTML out with its text translated.

The document is read with the standard library's HTML parser (`html.parser`, the kept
tokenizer of CPython), which reports every tag, comment, entity and text run with its
position, so every byte that is not translated is copied from the source as it was
(attribute quoting, entity spelling, comments, broken markup included). A tree parser
(lxml, html5lib) would re-serialise instead and normalise all of that.

- block elements (`p`, `div`, `li`, `td`, `h1`..., `br`) end a segment: sentences never
  cross them;
- inline elements (`b`, `a`, `span`, ...) inside a segment become tag pairs that the
  translation keeps around the words they wrap; inline void elements (`img`) and comments
  are kept where they stand;
- `script`, `style`, `code`, `pre`, `textarea` and any element with `translate="no"` or
  class `notranslate` are copied untranslated (inline ones, such as `code` or a `span`,
  as one kept span of their sentence);
- entities and placeholders in text are kept verbatim.
"""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser

from server.textproc.parts import Close, Keep, Open, Part
from server.textproc.placeholders import protect

BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "details",
    "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1",
    "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "html", "legend", "li",
    "main", "menu", "meta", "link", "nav", "ol", "optgroup", "option", "p", "section",
    "select", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "title", "tr", "ul",
    "base", "col", "colgroup", "iframe", "noscript", "object", "template", "video", "audio",
    "canvas", "map", "frameset", "frame",
})
UNTRANSLATED = frozenset({"script", "style", "pre", "textarea", "svg", "math", "code", "kbd",
                          "samp", "var"})
UNTRANSLATED_INLINE = frozenset({"code", "kbd", "samp", "var"})  # kept inside the sentence
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                  "param", "source", "track", "wbr"})

Chunk = str | list[Part]  # verbatim text, or a segment of parts to translate


@dataclass
class _Event:
    kind: str  # data, start, end, void, other
    start: int
    tag: str = ""
    skip: bool = False  # start tag of an element whose content is not translated


class _Tokens(HTMLParser):
    """Records every event with its start offset; the raw text of an event runs to the
    start of the next one."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=False)
        self.events: list[_Event] = []
        self._line_starts = [0]
        for index, char in enumerate(text):
            if char == "\n":
                self._line_starts.append(index + 1)

    def _at(self) -> int:
        line, column = self.getpos()
        return self._line_starts[line - 1] + column

    def handle_data(self, data: str) -> None:
        self.events.append(_Event("data", self._at()))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        skip = (values.get("translate") == "no"
                or "notranslate" in (values.get("class") or "").split())
        kind = "void" if tag in VOID else "start"
        self.events.append(_Event(kind, self._at(), tag, skip or tag in UNTRANSLATED))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(_Event("void", self._at(), tag))

    def handle_endtag(self, tag: str) -> None:
        self.events.append(_Event("end", self._at(), tag))

    def handle_entityref(self, name: str) -> None:
        self.events.append(_Event("entity", self._at()))

    def handle_charref(self, name: str) -> None:
        self.events.append(_Event("entity", self._at()))

    def handle_comment(self, data: str) -> None:
        self.events.append(_Event("other", self._at()))

    def handle_decl(self, decl: str) -> None:
        self.events.append(_Event("other", self._at()))

    def handle_pi(self, data: str) -> None:
        self.events.append(_Event("other", self._at()))

    def unknown_decl(self, data: str) -> None:
        self.events.append(_Event("other", self._at()))


def segments(text: str) -> list[Chunk]:
    """The document as verbatim strings and segments; their raw texts concatenate to
    `text` exactly."""
    parser = _Tokens(text)
    parser.feed(text)
    parser.close()
    events = parser.events
    ends = [e.start for e in events[1:]] + [len(text)]
    builder = _Builder()
    head = events[0].start if events else len(text)
    if head:  # text the tokenizer reported no event for (e.g. a leading "</>")
        builder.chunks.append(text[:head])
    for event, end in zip(events, ends[: len(events)], strict=True):
        builder.add(event, text[event.start: end])
    return builder.finish()


class _Builder:
    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.segment: list[Part] = []
        self.open_pairs: list[tuple[str, int]] = []  # inline tags open in this segment
        self.pairs = 0
        self.skipping: list[str] = []  # untranslated elements we are inside
        self.kept: list[str] | None = None  # raw text of an untranslated inline element

    def add(self, event: _Event, raw: str) -> None:
        if self.skipping:
            self._skip(event, raw)
        elif event.kind == "start" and event.skip:
            self.skipping.append(event.tag)
            if event.tag in BLOCKS or (event.tag in UNTRANSLATED
                                       and event.tag not in UNTRANSLATED_INLINE):
                self._end_segment()
                self.chunks.append(raw)
            else:
                self.kept = [raw]
        elif event.tag in BLOCKS and event.kind in ("start", "end", "void"):
            self._end_segment()
            self.chunks.append(raw)
        elif event.kind == "data":
            self.segment.extend(protect(raw))
        elif event.kind == "start":
            self.pairs += 1
            self.open_pairs.append((event.tag, self.pairs))
            self.segment.append(Open(raw, self.pairs))
        elif event.kind == "end":
            self.segment.append(self._close(event.tag, raw))
        else:  # void inline tags, entities, comments, declarations
            self.segment.append(Keep(raw))

    def _skip(self, event: _Event, raw: str) -> None:
        if self.kept is not None:
            self.kept.append(raw)
        else:
            self.chunks.append(raw)
        if event.kind == "start" and event.tag in self.skipping:
            self.skipping.append(event.tag)
        elif event.kind == "end" and event.tag == self.skipping[-1]:
            self.skipping.pop()
            if not self.skipping and self.kept is not None:
                self.segment.append(Keep("".join(self.kept)))
                self.kept = None

    def _close(self, tag: str, raw: str) -> Part:
        for index in range(len(self.open_pairs) - 1, -1, -1):
            if self.open_pairs[index][0] == tag:
                pair = self.open_pairs[index][1]
                del self.open_pairs[index:]
                return Close(raw, pair)
        return Keep(raw)  # a stray end tag stays where it is

    def _end_segment(self) -> None:
        if self.segment:
            self.chunks.append(list(self.segment))
        self.segment = []
        self.open_pairs = []

    def finish(self) -> list[Chunk]:
        if self.kept is not None:  # an untranslated inline element never closed
            self.segment.append(Keep("".join(self.kept)))
        self._end_segment()
        return self.chunks
