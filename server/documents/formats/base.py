"""The contract of a document format: read a file into segments, write their translations.

    fmt = formats.by_filename("leaflet.srt")              # or formats.by_name("srt")
    parsed = fmt.read(data, ReadOptions(source="en", target="fr"))
    texts = [s.text for s in parsed.segments]              # translated elsewhere, in order
    out: bytes = parsed.write(translations)                # same format, same structure

A segment is what one translation request item carries: plain text, or an HTML fragment
whose inline tags (`<b>`, `<i>`, `<a>`, or `<span data-run="3">` standing for a run of an
office file) must come back around the right words, which the markup pipeline
(server/textproc) already guarantees. A format never translates anything itself, and
everything it does not hand out as a segment is written back byte for byte where the
format allows it (subtitle numbering and timecodes, code blocks, ids, styles).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

SegmentFormat = Literal["text", "html"]


class DocumentError(Exception):
    """A file this format cannot take: the message says what is wrong, for the user (4xx)."""

    status_code = 422


class UnsupportedFormat(DocumentError):
    status_code = 415


class DocumentTooLarge(DocumentError):
    status_code = 413


@dataclass(frozen=True)
class ReadOptions:
    source: str  # ISO 639-1 code of the source language
    target: str  # ... and of the target language (written into formats that record it)
    # po / xliff: also retranslate entries that already have a translation
    overwrite_existing: bool = False
    # uncompressed bytes a container (office zip) may expand to, and XML parts' size
    max_expanded_bytes: int = 200 * 1024 * 1024


@dataclass(frozen=True)
class Segment:
    text: str
    fmt: SegmentFormat = "text"


class ParsedDocument(Protocol):
    @property
    def segments(self) -> Sequence[Segment]: ...

    def write(self, translations: Sequence[str]) -> bytes:
        """The document with segment i replaced by translations[i] (same count, in order)."""
        ...


def check_count(translations: Sequence[str], segments: Sequence[Segment]) -> None:
    """A writer's precondition: one translation per segment."""
    if len(translations) != len(segments):
        raise ValueError(f"{len(translations)} translations for {len(segments)} segments")


class FileFormat(Protocol):
    name: str  # "srt", "docx", ...
    extensions: tuple[str, ...]  # lower case, with the dot: (".po", ".pot")
    media_type: str  # of the translated file

    def read(self, data: bytes, options: ReadOptions) -> ParsedDocument:
        """Raises DocumentError (or a subclass) for a file it cannot take."""
        ...
