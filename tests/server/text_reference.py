"""The pre-hardening sentence splitter, kept verbatim as the oracle of the linear one.

It is quadratic (and worse) on adversarial input: the tests only feed it short texts.
Same rule as server/textproc/sentences.py; `split_text` here must agree with it piece for piece.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from server.textproc.sentences import ABBREVIATIONS, Piece

# Sentence end candidate: terminal punctuation, closers, then whitespace, then an opener.
_BOUNDARY = re.compile(r"""[.!?…]+["'”’»)\]]*(?P<space>[ \t\f\v\u00a0]+)(?=["'“‘«(\[]?[\w])""")
_LINE_BREAK = re.compile(r"(\r\n|\n|\r|\u2028|\u2029)")
_LAST_WORD = re.compile(r"([\w.]+)\.$")


def split_text(text: str) -> list[Piece]:
    """Pieces whose concatenation is exactly `text`; empty input gives no pieces."""
    pieces: list[Piece] = []
    for part in _LINE_BREAK.split(text):
        if not part:
            continue
        if _LINE_BREAK.fullmatch(part) or not part.strip():
            pieces.append(Piece(part, False))
            continue
        pieces.extend(_split_line(part))
    return pieces


def _split_line(line: str) -> Iterator[Piece]:
    stripped = line.strip()
    start = line.index(stripped[0])
    end = start + len(stripped)
    if start:
        yield Piece(line[:start], False)
    cursor = start
    for match in _BOUNDARY.finditer(line, start, end):
        sentence_end = match.start("space")
        if _is_abbreviation(line[cursor:sentence_end]) or not _next_starts_sentence(
                line, match.end("space")):
            continue
        yield Piece(line[cursor:sentence_end], True)
        yield Piece(match.group("space"), False)
        cursor = match.end("space")
    yield Piece(line[cursor:end], True)
    if end < len(line):
        yield Piece(line[end:], False)


def _next_starts_sentence(line: str, position: int) -> bool:
    """An uppercase letter or digit starts the next sentence (after an optional opener)."""
    rest = line[position:].lstrip("\"'“‘«([")
    return bool(rest) and (rest[0].isupper() or rest[0].isdigit())


def _is_abbreviation(sentence: str) -> bool:
    """Does this candidate sentence end with an abbreviation's or an initial's period?"""
    if not sentence.endswith("."):
        return False
    match = _LAST_WORD.search(sentence)
    if match is None:
        return False
    word = match.group(1)
    if len(word) == 1 and word.isalpha():  # an initial: "J. Smith"
        return True
    return word.lower() in ABBREVIATIONS
