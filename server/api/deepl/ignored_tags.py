"""DeepL's `ignore_tags`: the elements named there come back exactly as sent, content and
all (DeepL: "XML tags that indicate text not to be translated").

Before translation each such element (outermost, nested ones inside it included) is
replaced by an HTML comment that names it; markup translation keeps comments verbatim
where they stand in their sentence (server/textproc/html.py), and after translation
every comment is replaced by the element it stands for. The comments carry a token the
text does not hold, so no comment of the text itself is mistaken for one. An element
left open at the end of the text is translated like the rest.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any


@dataclass(frozen=True)
class Hidden:
    text: str  # what is translated
    elements: dict[str, str]  # comment -> the element it stands for


def tag_names(value: Any) -> frozenset[str]:
    """DeepL's `ignore_tags`: "x,y", or a list of such strings (lowercased, as HTML
    parsing names tags)."""
    values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return frozenset(name.strip().lower() for item in values if isinstance(item, str)
                     for name in item.split(",") if name.strip())


def hide(text: str, names: frozenset[str]) -> Hidden:
    if not names:
        return Hidden(text, {})
    spans = _Elements(text, names).spans()
    if not spans:
        return Hidden(text, {})
    token = secrets.token_hex(4)
    while token in text:
        token = secrets.token_hex(4)
    out: list[str] = []
    elements: dict[str, str] = {}
    cursor = 0
    for number, (start, end) in enumerate(spans):
        comment = f"<!--ignored:{token}:{number}-->"
        elements[comment] = text[start:end]
        out += [text[cursor:start], comment]
        cursor = end
    out.append(text[cursor:])
    return Hidden("".join(out), elements)


def show(translation: str, hidden: Hidden) -> str:
    for comment, element in hidden.elements.items():
        translation = translation.replace(comment, element)
    return translation


class _Elements(HTMLParser):
    """(start, end) offsets of the outermost complete elements named `names`."""

    def __init__(self, text: str, names: frozenset[str]) -> None:
        super().__init__(convert_charrefs=False)
        self._text = text
        self._names = names
        self._line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
        self._open: list[int] = []  # starts of the named elements open, outermost first
        self._found: list[tuple[int, int]] = []

    def spans(self) -> list[tuple[int, int]]:
        self.feed(self._text)
        self.close()
        return self._found

    def _at(self) -> int:
        line, column = self.getpos()
        return self._line_starts[line - 1] + column

    def handle_starttag(self, tag: str, attrs: Iterable[tuple[str, str | None]]) -> None:
        if tag in self._names:
            self._open.append(self._at())

    def handle_endtag(self, tag: str) -> None:
        if tag not in self._names or not self._open:
            return
        start = self._open.pop()
        if not self._open:  # the outermost one closed
            close = self._text.find(">", self._at())
            self._found.append((start, len(self._text) if close < 0 else close + 1))
