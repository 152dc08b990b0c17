"""Sentence units that span line breaks (`split_sentences` "off" or "nonewlines"), and
their translation laid back out on as many lines as the source had.

The engine reads such a unit with its line breaks folded into spaces (one sentence to the
model); the translation comes back on the source's line count: cut at spaces between
words, each cut nearest the point where the source's line ended in proportion of the
lengths, each line break written as in the source (with the next line's indentation).
A translation with fewer spaces than the source had line breaks ends with empty lines:
the count of lines is kept whatever the words.

    "off"         each paragraph (lines between empty lines) is one unit
    "nonewlines"  sentences end at punctuation only; a line break does not end one;
                  empty lines still end a paragraph
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from server.textproc.parts import Part, Text

SplitMode = Literal["on", "off", "nonewlines"]
SPLIT_MODES: tuple[SplitMode, ...] = get_args(SplitMode)

_NEWLINE = r"(?:\r\n|[\n\r\u2028\u2029])"
_BREAK = re.compile(rf"[ \t]*{_NEWLINE}[ \t]*")  # one line break and its spaces
_PARAGRAPH_BREAK = re.compile(rf"[ \t]*(?:{_NEWLINE}[ \t]*){{2,}}")  # an empty line or more


@dataclass(frozen=True)
class LineLayout:
    widths: tuple[int, ...]  # characters of each source line's text
    joints: tuple[str, ...]  # between line k and k + 1, as written in the source


def layout_of(raw: str) -> LineLayout | None:
    """The lines of a unit's source text; None when it has one line."""
    joints = tuple(match.group() for match in _BREAK.finditer(raw))
    if not joints:
        return None
    return LineLayout(tuple(len(line) for line in _BREAK.split(raw)), joints)


def lay_out(text: str, layout: LineLayout) -> str:
    """`text` (one line) written on the layout's lines."""
    text = _BREAK.sub(" ", text)
    lines = cut_lines(text, breakable_spaces(text), layout.widths)
    out = [lines[0]]
    for line, joint in zip(lines[1:], layout.joints, strict=False):
        out += [joint, line]
    out += layout.joints[len(lines) - 1:]  # fewer places to cut than lines: empty lines
    return "".join(out)


def breakable_spaces(text: str, candidates: Iterable[int] | None = None) -> list[int]:
    """Offsets of the spaces (of `candidates`, by default all) where `text` may be cut onto
    another line: between two words, never at its ends or in a run of spaces."""
    found = range(len(text)) if candidates is None else candidates
    return sorted(i for i in found if 0 < i < len(text) - 1 and text[i] == " "
                  and text[i - 1] != " " and text[i + 1] != " ")


def cut_lines(text: str, spaces: Sequence[int], widths: Sequence[int]) -> list[str]:
    """`text` cut at `len(widths) - 1` of `spaces` (at every one if there are no more),
    each cut nearest the point where the source's line ended, in proportion of the
    lengths, while enough spaces are left for the cuts after it."""
    count = len(widths)
    if count == 1 or not spaces:
        return [text]
    if len(spaces) <= count - 1:  # as many lines as there are words, at most
        bounds = [-1, *spaces, len(text)]
        return [text[bounds[i] + 1:bounds[i + 1]] for i in range(len(bounds) - 1)]
    total = sum(widths) or count
    cuts: list[int] = []
    reached = 0
    for number in range(1, count):
        reached += widths[number - 1]
        target = len(text) * reached / total
        left = count - 1 - number  # cuts still to make after this one
        options = [s for position, s in enumerate(spaces)
                   if (not cuts or s > cuts[-1]) and len(spaces) - position - 1 >= left]
        if not options:
            break
        cuts.append(min(options, key=lambda s: abs(s - target)))
    bounds = [-1, *cuts, len(text)]
    return [text[bounds[i] + 1:bounds[i + 1]] for i in range(len(bounds) - 1)]


def paragraphs(parts: Sequence[Part]) -> list[str | list[Part]]:
    """Runs of parts between empty lines (which come back as strings, verbatim)."""
    out: list[str | list[Part]] = [[]]
    for part in parts:
        if not isinstance(part, Text):
            _last_block(out).append(part)
            continue
        position = 0
        for match in _PARAGRAPH_BREAK.finditer(part.text):
            _last_block(out).append(Text(part.text[position:match.start()]))
            out += [match.group(), []]
            position = match.end()
        _last_block(out).append(Text(part.text[position:]))
    return [block for block in out if block]


def whole(parts: Sequence[Part]) -> list[str | list[Part]]:
    """The parts as one unit, the whitespace at either end kept as layout."""
    parts = [p for p in parts if not isinstance(p, Text) or p.text]
    if not parts:
        return []
    lead = trail = ""
    first = parts[0]
    if isinstance(first, Text):
        lead = first.text[: len(first.text) - len(first.text.lstrip())]
        parts[0] = Text(first.text[len(lead):])
    last = parts[-1]
    if isinstance(last, Text):
        kept = last.text.rstrip()
        trail = last.text[len(kept):]
        parts[-1] = Text(kept)
    middle = [p for p in parts if not isinstance(p, Text) or p.text]
    return [piece for piece in (lead, middle, trail) if piece]


def _last_block(out: list[str | list[Part]]) -> list[Part]:
    block = out[-1]
    assert isinstance(block, list)
    return block
