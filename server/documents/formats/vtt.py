"""WebVTT subtitles (.vtt): the header, cue identifiers, timings with their settings,
NOTE, STYLE and REGION blocks byte for byte; cue text translated with its tags
(`<v Speaker>`, `<i>`, `<c.class>`) kept around the words.

The timing line follows the WebVTT syntax (`[hh:]mm:ss.ttt --> [hh:]mm:ss.ttt
[settings]`); a malformed one is refused with its line number. WebVTT is UTF-8 by
definition (a BOM allowed); UTF-16 is read too and written back as it came.
"""

from __future__ import annotations

import re

from server.documents.formats.base import DocumentError, ReadOptions
from server.documents.formats.cues import CueDocument, read_cues
from server.documents.formats.encoding import decode

_STAMP = r"(?:\d{2,}:)?[0-5]\d:[0-5]\d\.\d{3}"
_TIMING = re.compile(rf"^\s*{_STAMP}[ \t]+-->[ \t]+{_STAMP}(?:[ \t].*)?\s*$")
_KEPT_BLOCKS = ("WEBVTT", "NOTE", "STYLE", "REGION")


def _check_timing(line: str, number: int) -> None:
    if not _TIMING.match(line):
        raise DocumentError(f"line {number}: malformed WebVTT timing {line.strip()[:60]!r} "
                            "(expected '[hh:]mm:ss.ttt --> [hh:]mm:ss.ttt [settings]'); the "
                            "file may be truncated")


def _kept(lines: list[str]) -> bool:
    first = lines[0].strip()
    return any(first == word or first.startswith((word + " ", word + "\t"))
               for word in _KEPT_BLOCKS)


class WebVTT:
    name = "vtt"
    extensions: tuple[str, ...] = (".vtt",)
    media_type = "text/vtt"

    def read(self, data: bytes, options: ReadOptions) -> CueDocument:
        text, encoding = decode(data, legacy=False, what="WebVTT file")
        if not text.startswith("WEBVTT") or text[6:7] not in ("", " ", "\t", "\r", "\n"):
            raise DocumentError("a WebVTT file starts with the line 'WEBVTT'")
        return read_cues(text, encoding, is_timing=lambda line: "-->" in line,
                         check_timing=_check_timing, skip=_kept, what="WebVTT file")


FORMAT = WebVTT()
