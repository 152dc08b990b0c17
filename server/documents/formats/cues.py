"""What SubRip and WebVTT share: blocks of lines, a timing line, the cue's text lines.

Only a cue's text lines are translated; everything else (numbering, identifiers, timing
lines with their settings, NOTE/STYLE/REGION blocks, blank lines, line endings) is
copied byte for byte. A cue of k text lines comes back as k lines, the translation
broken at spaces into lines of similar length (never inside a tag such as
`<font color="red">`). Inline tags (`<i>`, `<b>`, `<v Bob>`, `<c.loud>`) travel with the
words as an HTML fragment; SSA positioning tags (`{\\an8}`) in front stay in front.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from server.documents.formats.base import DocumentError, Segment, check_count
from server.documents.formats.encoding import TextEncoding
from server.documents.formats.txt import one_line, split_lines

_LEADING_TAGS = re.compile(r"^(?:\{\\[^}]*\}\s*)+")
_WORDS = re.compile(r"(?:<[^>]*>|\S)+")
_ENDING = re.compile(r"(\r\n|\n|\r)$")


@dataclass(frozen=True)
class CueText:
    lines: int  # text lines of the cue in the source
    newline: str  # between them


@dataclass
class CueDocument:
    pieces: list[str]  # verbatim text around the segments: len(segments) + 1 pieces
    segments: list[Segment]
    cues: list[CueText]
    encoding: TextEncoding

    def write(self, translations: Sequence[str]) -> bytes:
        check_count(translations, self.segments)
        out = [self.pieces[0]]
        for translation, cue, after in zip(translations, self.cues, self.pieces[1:],
                                           strict=True):
            out += [cue.newline.join(wrap(one_line(translation), cue.lines)), after]
        return self.encoding.encode("".join(out))


def wrap(text: str, lines: int) -> list[str]:
    """`text` in at most `lines` lines of similar length, broken at spaces between words
    (a tag with spaces inside counts as part of its word)."""
    words = _WORDS.findall(text)
    if lines <= 1 or len(words) <= 1:
        return [text]
    out: list[str] = []
    remaining = words
    for left in range(lines, 1, -1):
        total = len(" ".join(remaining))
        goal = total / left
        taken, length = 0, -1
        while taken < len(remaining) - 1 and length + 1 + len(remaining[taken]) / 2 <= goal:
            length += 1 + len(remaining[taken])
            taken += 1
        taken = max(taken, 1)
        out.append(" ".join(remaining[:taken]))
        remaining = remaining[taken:]
        if len(remaining) <= 1:
            break
    if remaining:
        out.append(" ".join(remaining))
    return out


def blocks(text: str) -> list[tuple[int, list[str]]]:
    """Runs of non-blank lines (with their endings) and the 1-based number of the first;
    blank lines between them are runs of their own with number 0."""
    found: list[tuple[int, list[str]]] = []
    for number, line in enumerate(split_lines(text), 1):
        blank = not line.strip()
        if found and (found[-1][0] == 0) == blank:
            found[-1][1].append(line)
        else:
            found.append((0 if blank else number, [line]))
    return found


def read_cues(text: str, encoding: TextEncoding, *, is_timing: Callable[[str], bool],
              check_timing: Callable[[str, int], None], skip: Callable[[list[str]], bool],
              what: str) -> CueDocument:
    """`is_timing(line)`: the line is a cue's timing line (then `check_timing(line,
    number)` refuses a malformed one); `skip(block)`: a block kept whole (headers, notes)."""
    pieces = [""]
    segments: list[Segment] = []
    cues: list[CueText] = []
    timings = 0
    for number, lines in blocks(text):
        timing = next((i for i, line in enumerate(lines[:2]) if is_timing(line)), None)
        if timing is not None and number:
            check_timing(lines[timing], number + timing)
            timings += 1
        body = lines[timing + 1:] if timing is not None and not skip(lines) else []
        joined = " ".join(line.strip() for line in body)
        tags = _LEADING_TAGS.match(joined)
        lead = tags.group(0) if tags else ""
        words = joined[len(lead):]
        if not number or not words:
            pieces[-1] += "".join(lines)
            continue
        assert timing is not None
        first = body[0]
        pieces[-1] += "".join(lines[: timing + 1]) + first[: len(first) - len(first.lstrip())]
        pieces[-1] += lead
        segments.append(Segment(words, "html" if "<" in words else "text"))
        cues.append(CueText(len(body), _newline(first)))
        ending = _ENDING.search(body[-1])
        pieces.append(ending.group(1) if ending else "")
    if not timings:
        raise DocumentError(f"the {what} has no cue (no timing line 'start --> end')")
    return CueDocument(pieces, segments, cues, encoding)


def _newline(line: str) -> str:
    ending = _ENDING.search(line)
    return ending.group(1) if ending else "\n"
