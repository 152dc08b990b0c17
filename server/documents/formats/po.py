"""gettext catalogues (.po, .pot): empty translations filled, marked `fuzzy`.

`polib` reads the catalogue (syntax, escapes, contexts, plurals, obsolete entries); the
translation is then written into the file's own text: only the `msgstr` lines of the
entries that were translated change (and their flags line gains `fuzzy`, gettext's mark
for a translation a person has not reviewed). Comments, references, contexts, ids,
previous ids, obsolete entries, the header and the line wrapping of every other entry
stay byte for byte, so a diff of the result shows exactly what was filled in.

Entries that already have a translation are kept unless `overwrite_existing`. A plural
entry gets `msgstr[0]` from `msgid` and every other form from `msgid_plural`, as many
forms as the header's `Plural-Forms` says (2 without one).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import polib

from server.documents.formats.base import DocumentError, ReadOptions, Segment, check_count
from server.documents.formats.cues import blocks
from server.documents.formats.encoding import TextEncoding, decode

_NPLURALS = re.compile(r"nplurals\s*=\s*(\d+)")
_MSGSTR = re.compile(r"^\s*msgstr\b")
_CONTINUATION = re.compile(r'^\s*"')
_BEFORE_ID = re.compile(r"^(#\||msgctxt\b|msgid\b)")
_ENDING = re.compile(r"(\r\n|\n|\r)$")


@dataclass(frozen=True)
class Entry:
    lines: list[str]  # the entry's block, with line endings
    plural_forms: int  # 0: a singular entry
    first_segment: int


@dataclass
class Catalogue:
    pieces: list[str | Entry]
    segments: list[Segment]
    encoding: TextEncoding

    def write(self, translations: Sequence[str]) -> bytes:
        check_count(translations, self.segments)
        out: list[str] = []
        for piece in self.pieces:
            out.append(piece if isinstance(piece, str) else _filled(piece, translations))
        return self.encoding.encode("".join(out))


def _filled(entry: Entry, translations: Sequence[str]) -> str:
    lines = entry.lines
    newline = _newline(lines[0])
    start = next(i for i, line in enumerate(lines) if _MSGSTR.match(line))
    end = start + 1
    while end < len(lines) and (_MSGSTR.match(lines[end]) or
                                _CONTINUATION.match(lines[end])):
        end += 1
    first = translations[entry.first_segment]
    if entry.plural_forms:
        other = translations[entry.first_segment + 1]
        strings = [_field(f"msgstr[{n}]", first if n == 0 else other, newline)
                   for n in range(entry.plural_forms)]
    else:
        strings = [_field("msgstr", first, newline)]
    ending = _ENDING.search(lines[end - 1])
    if not ending:  # the file's last line had no line ending: neither has ours
        strings[-1] = strings[-1][: -len(newline)]
    return "".join(_fuzzy(lines[:start]) + strings + lines[end:])


def _field(keyword: str, value: str, newline: str) -> str:
    if "\n" not in value.rstrip("\n"):
        return f'{keyword} "{polib.escape(value)}"{newline}'
    parts = value.splitlines(keepends=True)
    return f'{keyword} ""{newline}' + "".join(f'"{polib.escape(p)}"{newline}' for p in parts)


def _fuzzy(lines: list[str]) -> list[str]:
    for index, line in enumerate(lines):
        if line.startswith("#,"):
            if "fuzzy" in line:
                return lines
            body = line.rstrip("\r\n")
            return [*lines[:index], body + ", fuzzy" + line[len(body):], *lines[index + 1:]]
    index = next((i for i, line in enumerate(lines) if _BEFORE_ID.match(line)), len(lines))
    return [*lines[:index], "#, fuzzy" + _newline(lines[0] if lines else "\n"), *lines[index:]]


def _newline(line: str) -> str:
    ending = _ENDING.search(line)
    return ending.group(1) if ending else "\n"


def _parse(text: str) -> polib.POFile:
    try:
        return polib.pofile(text)
    except OSError as error:  # polib reports syntax errors as IOError
        raise DocumentError(f"not a valid gettext catalogue: {error}") from None


class Gettext:
    name = "po"
    extensions: tuple[str, ...] = (".po", ".pot")
    media_type = "text/x-gettext-translation"

    def read(self, data: bytes, options: ReadOptions) -> Catalogue:
        text, encoding = decode(data, legacy=False, what="gettext catalogue")
        whole = _parse(text)
        found = _NPLURALS.search(whole.metadata.get("Plural-Forms", ""))
        nplurals = int(found.group(1)) if found else 2
        pieces: list[str | Entry] = []
        segments: list[Segment] = []
        for number, lines in blocks(text):
            entries = _parse("".join(lines)) if number else []
            entry = entries[0] if len(entries) == 1 else None
            if entry is None or entry.obsolete or not entry.msgid or not any(
                    _MSGSTR.match(line) for line in lines) or (
                    _has_translation(entry) and not options.overwrite_existing):
                pieces.append("".join(lines))
                continue
            forms = max(nplurals, len(entry.msgstr_plural)) if entry.msgid_plural else 0
            pieces.append(Entry(lines, forms, len(segments)))
            segments.append(Segment(entry.msgid))
            if forms:
                segments.append(Segment(entry.msgid_plural))
        return Catalogue(pieces, segments, encoding)


def _has_translation(entry: polib.POEntry) -> bool:
    return bool(entry.msgstr) or any(entry.msgstr_plural.values())


FORMAT = Gettext()
