"""The parts of a sentence unit, and sentence splitting over parts.

A unit's parts, in order: `Text` (to translate), `Keep` (a span copied verbatim: a
placeholder, an entity, an inline void tag, a comment), `Term` (a glossary term: its target
replaces it), `Open`/`Close` (an inline tag pair, e.g. `<b>` ... `</b>`, kept around the
words they wrap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from server.textproc.sentences import split_text

OPAQUE = "\ue000"  # stands for a non-text part while sentences are split
_AS_SPACE = str.maketrans({"\n": " ", "\r": " ", "\u2028": " ", "\u2029": " "})


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Keep:
    raw: str


@dataclass(frozen=True)
class Term:
    source: str  # as written in the text
    key: str  # the glossary entry's source term
    target: str


@dataclass(frozen=True)
class Open:
    raw: str
    pair: int  # shared with its Close within one segment


@dataclass(frozen=True)
class Close:
    raw: str
    pair: int


Part = Text | Keep | Term | Open | Close


def raw_of(part: Part) -> str:
    """What the part was in the source text."""
    if isinstance(part, Text):
        return part.text
    if isinstance(part, Term):
        return part.source
    return part.raw


def merged(parts: Sequence[Part]) -> list[Part]:
    """Adjacent Text parts joined, empty ones dropped."""
    out: list[Part] = []
    for part in parts:
        if isinstance(part, Text):
            if not part.text:
                continue
            if out and isinstance(out[-1], Text):
                out[-1] = Text(out[-1].text + part.text)
                continue
        out.append(part)
    return out


def split_sentences(parts: Sequence[Part], *,
                    lines: bool = True) -> list[str | list[Part]]:
    """Sentences (lists of parts) and verbatim layout between them (strings), in order.

    The sentence rule of server/textproc/sentences.py runs on a probe string in which every non-text
    part is one opaque character, so its offsets map back onto the parts. `lines=False`
    (HTML, where a line break is only whitespace): line breaks do not end sentences
    (masking folds them into spaces)."""
    parts = merged(parts)
    probe = "".join(p.text if isinstance(p, Text) else OPAQUE for p in parts)
    if not lines:
        probe = probe.translate(_AS_SPACE)  # same length: offsets still map
    starts: list[int] = []
    cursor = 0
    for part in parts:
        starts.append(cursor)
        cursor += len(part.text) if isinstance(part, Text) else 1
    out: list[str | list[Part]] = []
    offset = 0
    first = 0  # the first part the next piece can touch: pieces only move forward
    for piece in split_text(probe):
        end = offset + len(piece.text)
        chosen, first = _slice(parts, starts, first, offset, end)
        if piece.translate:
            out.append(chosen)
        else:
            out.append("".join(raw_of(p) for p in chosen))
        offset = end
    return out


def _slice(parts: Sequence[Part], starts: Sequence[int], first: int, begin: int,
           end: int) -> tuple[list[Part], int]:
    """The parts (text parts cut) within [begin, end) of the probe, looking from `first`
    on, and the first part a later piece (beginning at `end`) can still touch. Looking
    only there keeps splitting linear: a text of n sentences with a placeholder in each
    once cost n x n steps (26,000 characters: 1.7 s)."""
    chosen: list[Part] = []
    index = first
    while index < len(parts) and starts[index] < end:
        part, start = parts[index], starts[index]
        if isinstance(part, Text):
            low, high = max(begin, start), min(end, start + len(part.text))
            if low < high:
                chosen.append(Text(part.text[low - start: high - start]))
        elif begin <= start:
            chosen.append(part)
        index += 1
    while first < len(parts) and _ends_by(parts[first], starts[first], end):
        first += 1
    return chosen, first


def _ends_by(part: Part, start: int, offset: int) -> bool:
    """Whether `part` lies wholly before `offset` of the probe."""
    return start + (len(part.text) if isinstance(part, Text) else 1) <= offset

