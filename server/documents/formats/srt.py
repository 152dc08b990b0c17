"""SubRip subtitles (.srt): cue numbers and timecodes byte for byte, the text translated.

Timing lines are checked strictly (`HH:MM:SS,mmm --> HH:MM:SS,mmm`, a dot accepted for
the comma, position settings after it), so a malformed or truncated one is refused with
its line number rather than written back broken. (The `srt` library's parser accepts a
timestamp without milliseconds, which is exactly what a truncated file ends with.) Files
come in UTF-8 (with or without BOM), UTF-16, or Windows-1252 (common for older
subtitles) and go back in the same encoding.
"""

from __future__ import annotations

import re

from server.documents.formats.base import DocumentError, ReadOptions
from server.documents.formats.cues import CueDocument, read_cues
from server.documents.formats.encoding import decode

_STAMP = r"\d{1,3}:\d{2}:\d{2}[,.]\d{1,3}"
_TIMING = re.compile(rf"^\s*{_STAMP}[ \t]*-->[ \t]*{_STAMP}(?:[ \t].*)?\s*$")


def _is_timing(line: str) -> bool:
    return "-->" in line


def _check_timing(line: str, number: int) -> None:
    if not _TIMING.match(line):
        raise DocumentError(f"line {number}: malformed SubRip timing {line.strip()[:60]!r} "
                            "(expected 'HH:MM:SS,mmm --> HH:MM:SS,mmm'); the file may be "
                            "truncated")


class SubRip:
    name = "srt"
    extensions: tuple[str, ...] = (".srt",)
    media_type = "application/x-subrip"

    def read(self, data: bytes, options: ReadOptions) -> CueDocument:
        text, encoding = decode(data, legacy=True, what="SubRip file")
        return read_cues(text, encoding, is_timing=_is_timing, check_timing=_check_timing,
                         skip=lambda lines: False, what="SubRip file")


FORMAT = SubRip()
