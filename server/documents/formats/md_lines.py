"""A Markdown paragraph's translation laid out on the source's lines.

A paragraph (or list item, quote, heading) of n source lines is translated as one text, so
that a sentence wrapped over lines is one sentence to the model, and comes back as n
lines: the translation is cut at spaces of its words (never inside inline code, a link's
target or an image) where the source's lines end, in proportion to their lengths (the
cuts of plain text's lines, server/textproc/line_layout.py: `cut_lines`). What
lies between two source lines (the line ending and the next line's `> ` or indentation)
is written between the translated lines as it was, and a hard line break (a line ending
in two spaces or a backslash) stays a hard break with its own marker, at the break the
translation carries (the markup pipeline keeps it, as every void element). A translation
with fewer words than the source has lines comes back on fewer lines; one whose hard
breaks went missing is laid out with soft breaks only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from server.textproc.line_layout import breakable_spaces, cut_lines

PieceKind = Literal["text", "kept", "hard"]
# text: written words (its spaces may become line breaks); kept: inline code, a link's
# target, an image, raw HTML (never cut); hard: a hard line break.
Piece = tuple[str, PieceKind]

_HARD_TAIL = re.compile(r"( {2,}|\\)$")
# What would start a block if it opened a line: a heading, quote, list item, setext
# underline, thematic break, or an ordered list's number (escaped at its delimiter).
_BLOCK_START = re.compile(r"^[#>+=-]")
_ORDERED = re.compile(r"^(\d+)([.)])")


@dataclass(frozen=True)
class LineLayout:
    """A run's source lines: how long each one's text is, and what lies between them."""

    widths: list[int]  # characters of each line's text
    joints: list[str]  # between line k and k + 1: the line ending and the next line's prefix
    tails: list[str]  # after line k: its hard break's marker ("  " or "\\"), "" if soft

    @classmethod
    def of(cls, parts: Sequence[str], joints: Sequence[str],
           hard_breaks: int) -> LineLayout | None:
        """From the run's source lines (`parts`, as the parser gives them) and the text
        between them; None when the parser's hard breaks cannot be put on lines (a line
        ending that looks like one inside inline code): then the run is one line."""
        tails = [found.group(1) if (found := _HARD_TAIL.search(part)) else ""
                 for part in parts[:-1]]
        if sum(1 for tail in tails if tail) != hard_breaks:
            return None
        widths = [len(part.strip()) for part in parts]
        # a line's own indentation (beyond its block's) is kept with what precedes it
        indents = [part[:len(part) - len(part.lstrip())] for part in parts]
        return cls(widths, [joint + indents[k + 1] for k, joint in enumerate(joints)],
                   tails)


def lay_out(pieces: Sequence[Piece], layout: LineLayout) -> str:
    """The translation's pieces written on the layout's lines."""
    groups = _source_groups(layout)
    translated = _split_hard(pieces)
    hard_kept = len(translated) == len(groups)
    if not hard_kept:  # the translation lost a hard break: every line break is soft
        translated = [[(text, kind) if kind != "hard" else (" ", "text")
                       for text, kind in pieces]]
        groups = [list(range(len(layout.widths)))]
    out: list[str] = []
    for number, (lines, group) in enumerate(zip(groups, translated, strict=True)):
        text, spaces = _flatten(group)
        written = cut_lines(text, spaces, [layout.widths[i] for i in lines])
        for index, line in enumerate(written):
            if index:
                out.append(layout.joints[lines[index - 1]])
            out.append(escape_line_start(line))
        if number + 1 < len(groups):
            boundary = lines[-1]
            out += [layout.tails[boundary] if hard_kept else "", layout.joints[boundary]]
    return "".join(out)


def one_line(pieces: Sequence[Piece]) -> str:
    """The translation on one line (a run whose lines could not be told apart)."""
    text = "".join("<br>" if kind == "hard" else text for text, kind in pieces)
    return escape_line_start(" ".join(text.split("\n")))


def escape_line_start(line: str) -> str:
    """A backslash where the line's first character would make it a block of its own."""
    if _BLOCK_START.match(line):
        return "\\" + line
    return _ORDERED.sub(r"\1\\\2", line, count=1)


def _source_groups(layout: LineLayout) -> list[list[int]]:
    """Line numbers, in runs ended by a hard break."""
    groups: list[list[int]] = [[]]
    for line in range(len(layout.widths)):
        groups[-1].append(line)
        if line < len(layout.tails) and layout.tails[line]:
            groups.append([])
    return groups


def _split_hard(pieces: Sequence[Piece]) -> list[list[Piece]]:
    groups: list[list[Piece]] = [[]]
    for piece in pieces:
        if piece[1] == "hard":
            groups.append([])
        else:
            groups[-1].append(piece)
    return groups


def _flatten(pieces: Sequence[Piece]) -> tuple[str, list[int]]:
    """The text, stripped, and the offsets of the spaces where it may be cut: between
    two words of written text, never at its ends or in a run of spaces."""
    text = ""
    breakable: set[int] = set()
    for piece, kind in pieces:
        if kind == "text":
            piece = piece.replace("\n", " ")
            breakable.update(len(text) + i for i, c in enumerate(piece) if c == " ")
        text += piece
    stripped = text.lstrip()
    shift = len(text) - len(stripped)
    stripped = stripped.rstrip()
    return stripped, breakable_spaces(stripped, (i - shift for i in breakable))
