"""Plain text (.txt): every line that holds words is one segment; N lines in, N lines out.

A line's indentation, trailing spaces and line ending (`\\n`, `\\r\\n`, `\\r`) are kept
byte for byte; blank lines pass through. A translation never adds a line: a line break
the model might write becomes a space.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from server.documents.formats.base import ReadOptions, Segment, check_count
from server.documents.formats.encoding import TextEncoding, decode

_LINES = re.compile(r"[^\r\n]*(?:\r\n|\n|\r|$)")
_CONTENT = re.compile(r"^(\s*)(.*?)(\s*)$", re.DOTALL)
_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def split_lines(text: str) -> list[str]:
    """The lines of `text`, each with its line ending; their concatenation is `text`."""
    return [line for line in _LINES.findall(text) if line]


def one_line(translation: str) -> str:
    return _BREAKS.sub(" ", translation.strip())


@dataclass
class TextDocument:
    pieces: list[str]  # verbatim text around the segments: len(segments) + 1 pieces
    segments: list[Segment]
    encoding: TextEncoding

    def write(self, translations: Sequence[str]) -> bytes:
        check_count(translations, self.segments)
        out = [self.pieces[0]]
        for translation, after in zip(translations, self.pieces[1:], strict=True):
            out += [one_line(translation), after]
        return self.encoding.encode("".join(out))


class PlainText:
    name = "txt"
    extensions: tuple[str, ...] = (".txt",)
    media_type = "text/plain"

    def read(self, data: bytes, options: ReadOptions) -> TextDocument:
        text, encoding = decode(data, legacy=True, what="text file")
        pieces = [""]
        segments: list[Segment] = []
        for line in split_lines(text):
            match = _CONTENT.match(line)
            assert match is not None  # the pattern matches every string
            before, words, after = match.groups()
            if not words:
                pieces[-1] += line
                continue
            pieces[-1] += before
            segments.append(Segment(words))
            pieces.append(after)
        return TextDocument(pieces, segments, encoding)


FORMAT = PlainText()
