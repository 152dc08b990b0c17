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
# A sentence end candidate is terminal punctuation, optional closers, whitespace, then an
# opener-or-word-character (an optional opening quote/bracket, then a letter or digit).
# Each piece is found by its own single-class pattern from where the last one stopped, so
# every character is looked at a bounded number of times: the splitter is linear in its
# input (one combined regex re-scanned runs of dots or closers at every start: quadratic).
_TERMINALS = re.compile(r"[.!?…]+")
_CLOSERS = re.compile(r"""["'”’»)\]]*""")
_SPACE = re.compile(r"[ \t\f\v\u00a0]+")
_OPENERS = "\"'“‘«(["
_LINE_BREAK = re.compile(r"(\r\n|\n|\r|\u2028|\u2029)")
# Only words this long can be abbreviations or initials: the look back stops there.
_LONGEST_ABBREVIATION = max(len(word) for word in ABBREVIATIONS)


@dataclass(frozen=True)
class Piece:
    """A sentence to translate (`translate=True`) or literal layout to keep verbatim."""

    text: str
    translate: bool


def split_text(text: str) -> list[Piece]:
    """Pieces whose concatenation is exactly `text`; empty input gives no pieces.
    Linear time in `len(text)`, whatever its shape."""
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
    for sentence_end, next_start in _candidates(line, start, end):
        if _ends_with_abbreviation(line, cursor, sentence_end) or not _next_starts_sentence(
                line, next_start):
            continue
        yield Piece(line[cursor:sentence_end], True)
        yield Piece(line[sentence_end:next_start], False)
        cursor = next_start
    yield Piece(line[cursor:end], True)
    if end < len(line):
        yield Piece(line[end:], False)


def _candidates(line: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """`(sentence_end, next_start)` of every sentence end candidate in `line[start:end]`:
    where its whitespace begins and ends. Each search resumes where the last one stopped."""
    position = start
    while (terminals := _TERMINALS.search(line, position, end)) is not None:
        closers = _CLOSERS.match(line, terminals.end(), end)
        assert closers is not None  # a starred class always matches
        space = _SPACE.match(line, closers.end(), end)
        if space is None:
            position = closers.end()
            continue
        if _opens_word(line, space.end(), end):
            yield space.start(), space.end()
        position = space.end()


def _is_word(char: str) -> bool:
    """The regex class `\\w` on str: Unicode alphanumerics and the underscore."""
    return char.isalnum() or char == "_"


def _opens_word(line: str, position: int, end: int) -> bool:
    """A word character at `position`, or an opening quote/bracket and then one."""
    if position >= end:
        return False
    if _is_word(line[position]):
        return True
    return line[position] in _OPENERS and position + 1 < end and _is_word(line[position + 1])


def _next_starts_sentence(line: str, position: int) -> bool:
    """An uppercase letter or digit starts the next sentence (after an optional opener)."""
    while position < len(line) and line[position] in _OPENERS:
        position += 1
    return position < len(line) and (line[position].isupper() or line[position].isdigit())


def _ends_with_abbreviation(line: str, cursor: int, sentence_end: int) -> bool:
    """Does `line[cursor:sentence_end]` end with an abbreviation's or an initial's period?
    The word is the run of word characters and dots before that period; only the last
    `_LONGEST_ABBREVIATION + 1` characters are looked at (a longer word is neither)."""
    period = sentence_end - 1
    if period < cursor or line[period] != ".":
        return False
    first = period
    lowest = max(cursor, period - _LONGEST_ABBREVIATION - 1)
    while first > lowest and (_is_word(line[first - 1]) or line[first - 1] == "."):
        first -= 1
    word = line[first:period]
    if not word or len(word) > _LONGEST_ABBREVIATION:
        return False
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
