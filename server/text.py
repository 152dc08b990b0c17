"""Sentence splitting and rejoining that preserves the text's layout.

`split_text` cuts a text into pieces: sentences to translate and literal layout (line
breaks, indentation, the spaces between sentences, empty lines) to keep verbatim.
`join_pieces` puts translations back in their places, so paragraph breaks and surrounding
whitespace survive translation exactly.

The rule (simple on purpose, table-tested in tests/server/test_text.py):
- a line break always ends a sentence;
- within a line, a sentence ends after `.`, `!`, `?` or `…` (optionally followed by
  closing quotes or brackets) when whitespace and then an uppercase letter, a digit or an
  opening quote/bracket follow;
- except after a known abbreviation ("Dr.", "e.g.", "Art.") or a single-letter initial.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "e.g", "i.e", "cf", "nr",
    "fig", "figs", "art", "arts", "sec", "ch", "vol", "pp", "para", "approx", "dept", "inc",
    "ltd", "corp", "gen", "gov", "jan", "feb", "apr", "jun", "jul", "aug", "sep", "sept",
    "oct", "nov", "dec", "mme", "mlle", "av", "bd", "env", "ibid", "al", "eq", "ref", "tel",
})
# Sentence end candidate: terminal punctuation, closers, then whitespace, then an opener.
_BOUNDARY = re.compile(r"""[.!?…]+["'”’»)\]]*(?P<space>[ \t\f\v\u00a0]+)(?=["'“‘«(\[]?[\w])""")
_LINE_BREAK = re.compile(r"(\r\n|\n|\r|\u2028|\u2029)")
_LAST_WORD = re.compile(r"([\w.]+)\.$")


@dataclass(frozen=True)
class Piece:
    """A sentence to translate (`translate=True`) or literal layout to keep verbatim."""

    text: str
    translate: bool


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


def sentences(pieces: Sequence[Piece]) -> list[str]:
    """The texts to translate, in order."""
    return [piece.text for piece in pieces if piece.translate]


def join_pieces(pieces: Sequence[Piece], translations: Iterable[str]) -> str:
    """The text with each sentence replaced by its translation (layout kept verbatim)."""
    supply = iter(translations)
    out: list[str] = []
    for piece in pieces:
        if piece.translate:
            try:
                out.append(next(supply))
            except StopIteration:
                raise ValueError("fewer translations than sentences") from None
        else:
            out.append(piece.text)
    if next(supply, None) is not None:
        raise ValueError("more translations than sentences")
    return "".join(out)
