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
- entities and placeholders in text are kept verbatim;
- the values of `alt`, `title`, `placeholder`, `aria-label` and the `value` of an
  `input` button (type button, submit or reset: its label) are translated like text (a
  `<button>`'s `value` is form data, not shown); every other attribute stays as it was.
  Such a value is cut out of its tag and replaced by a slot (`Attribute.slot`) that the
  document fills in when it renders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import unescape
from html.parser import HTMLParser

from server.textproc.escaping import opens_markup
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

TRANSLATED_ATTRIBUTES = frozenset({"alt", "title", "placeholder", "aria-label"})
LABELLED_INPUTS = frozenset({"button", "submit", "reset"})  # their `value` is the label
_SPACE = " \t\n\f\r"  # ASCII whitespace, as the HTML tokenizer knows it

Chunk = str | list[Part]  # verbatim text, or a segment of parts to translate
Attributes = Sequence[tuple[str, str | None]]


@dataclass(frozen=True)
class Attribute:
    """A translated attribute value, cut out of its tag."""
    slot: str  # stands for the value in the tag's text until the document renders
    value: str  # as written in the source (entities included, quotes not)
    quoted: bool


@dataclass
class Segments:
    chunks: list[Chunk]
    attributes: list[Attribute]


@dataclass
class _Event:
    kind: str  # data, start, end, void, other
    start: int
    tag: str = ""
    skip: bool = False  # start tag of an element whose content is not translated
    attrs: Attributes = field(default_factory=list)


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
        kind = "void" if tag in VOID else "start"
        skip = _untranslated(attrs) or tag in UNTRANSLATED
        self.events.append(_Event(kind, self._at(), tag, skip, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(_Event("void", self._at(), tag, _untranslated(attrs), attrs))

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


def _untranslated(attrs: Attributes) -> bool:
    values = dict(attrs)
    return (values.get("translate") == "no"
            or "notranslate" in (values.get("class") or "").split())


def segments(text: str) -> Segments:
    """The document as verbatim strings and segments, and its translated attribute values;
    with every slot replaced by its value, the raw texts concatenate to `text` exactly."""
    parser = _Tokens(text)
    parser.feed(text)
    parser.close()
    # adjacent data events are one text (the parser splits a cut-off tag: "<", "img ...")
    events = [e for i, e in enumerate(parser.events)
              if not (e.kind == "data" and i and parser.events[i - 1].kind == "data")]
    ends = [e.start for e in events[1:]] + [len(text)]
    # a private-use character the text does not hold brackets every slot's number
    mark = next(chr(c) for c in range(0xE100, 0xF900) if chr(c) not in text)
    builder = _Builder(mark)
    head = events[0].start if events else len(text)
    if head:  # text the tokenizer reported no event for (e.g. a leading "</>")
        builder.chunks.append(text[:head])
    for event, end in zip(events, ends[: len(events)], strict=True):
        builder.add(event, text[event.start: end])
    return Segments(builder.finish(), builder.attributes)


def _text(raw: str) -> list[Part]:
    """Character data as parts; from a `<` or `&` that still opens markup on (a tag the
    parser could not read, cut off by the end of the text) it is kept verbatim."""
    cut = next((i for i in range(len(raw)) if opens_markup(raw, i)), len(raw))
    return protect(raw[:cut]) + ([Keep(raw[cut:])] if cut < len(raw) else [])


def translated_spans(raw: str, tag: str, attrs: Attributes) -> list[tuple[int, int, bool]]:
    """(start, end, quoted) in a start tag's text of every value translated like text;
    none when the tag's own attribute scan disagrees with the parser's `attrs`."""
    spans = _attribute_spans(raw)
    if [(name, None if start < 0 else unescape(raw[start:end]))
            for name, start, end, _ in spans] != [(n, v) for n, v in attrs]:
        return []
    values = {name: value for name, value in attrs}
    button = tag == "input" and (values.get("type") or "").lower() in LABELLED_INPUTS
    return [(start, end, quoted) for name, start, end, quoted in spans
            if start >= 0 and (name in TRANSLATED_ATTRIBUTES or (button and name == "value"))]


def _attribute_spans(raw: str) -> list[tuple[str, int, int, bool]]:
    """(name, value start, value end, quoted) of every attribute of a start tag (start -1
    for a name without value), after the HTML tokenizer's attribute states (WHATWG HTML
    13.2.5.32-13.2.5.39). `html.parser` reports values, not where they are."""
    spans: list[tuple[str, int, int, bool]] = []
    index = _skip(raw, 1, lambda c: c not in _SPACE + "/>")  # the tag name
    while True:
        index = _skip(raw, index, lambda c: c in _SPACE + "/")
        if index >= len(raw) or raw[index] == ">":
            return spans
        start = index  # a name may begin with "=" (a parse error the tokenizer accepts)
        index = _skip(raw, index + 1, lambda c: c not in _SPACE + "/>=")
        name = raw[start:index].lower()
        after = _skip(raw, index, lambda c: c in _SPACE)
        if raw[after: after + 1] != "=":
            spans.append((name, -1, -1, False))
            continue
        index = _skip(raw, after + 1, lambda c: c in _SPACE)
        quote = raw[index: index + 1]
        if quote in ('"', "'"):
            end = raw.find(quote, index + 1)
            if end < 0:
                return spans
            spans.append((name, index + 1, end, True))
            index = end + 1
        else:
            end = _skip(raw, index, lambda c: c not in _SPACE + ">")
            spans.append((name, index, end, False))
            index = end


def _skip(text: str, index: int, while_: Callable[[str], bool]) -> int:
    while index < len(text) and while_(text[index]):
        index += 1
    return index


class _Builder:
    def __init__(self, mark: str) -> None:
        self.mark = mark
        self.attributes: list[Attribute] = []
        self.chunks: list[Chunk] = []
        self.segment: list[Part] = []
        self.open_pairs: list[tuple[str, int]] = []  # inline tags open in this segment
        self.pairs = 0
        self.skipping: list[str] = []  # untranslated elements we are inside
        self.kept: list[str] | None = None  # raw text of an untranslated inline element

    def add(self, event: _Event, raw: str) -> None:
        if self.skipping:
            self._skip(event, raw)
            return
        if event.kind in ("start", "void") and not event.skip:
            raw = self._slotted(event, raw)
        if event.kind == "start" and event.skip:
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
            self.segment.extend(_text(raw))
        elif event.kind == "start":
            self.pairs += 1
            self.open_pairs.append((event.tag, self.pairs))
            self.segment.append(Open(raw, self.pairs))
        elif event.kind == "end":
            self.segment.append(self._close(event.tag, raw))
        else:  # void inline tags, entities, comments, declarations
            self.segment.append(Keep(raw))

    def _slotted(self, event: _Event, raw: str) -> str:
        """The tag's text with every translated value replaced by a slot."""
        out: list[str] = []
        cursor = 0
        for start, end, quoted in translated_spans(raw, event.tag, event.attrs):
            slot = f"{self.mark}{len(self.attributes)}{self.mark}"
            self.attributes.append(Attribute(slot, raw[start:end], quoted))
            out += [raw[cursor:start], slot]
            cursor = end
        return "".join(out) + raw[cursor:]

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
