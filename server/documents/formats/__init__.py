"""Every supported document format, one module each, looked up by name or file name."""

from __future__ import annotations

from pathlib import PurePath

from server.documents.formats import html, md, po, srt, txt, vtt, xliff
from server.documents.formats.base import (
    DocumentError,
    FileFormat,
    ReadOptions,
    Segment,
    UnsupportedFormat,
)
from server.documents.formats.office import OFFICE_FORMATS

# Each format module registers its instance here (kept in this order in error messages).
FORMATS: tuple[FileFormat, ...] = (txt.FORMAT, md.FORMAT, html.FORMAT, srt.FORMAT, vtt.FORMAT,
                                   po.FORMAT, xliff.FORMAT, *OFFICE_FORMATS)


def supported_extensions() -> list[str]:
    return [ext for fmt in FORMATS for ext in fmt.extensions]


def by_name(name: str) -> FileFormat:
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise UnsupportedFormat(f"unknown document format {name!r}; supported: "
                            + ", ".join(f.name for f in FORMATS))


def by_filename(filename: str) -> FileFormat:
    suffix = PurePath(filename).suffix.lower()
    for fmt in FORMATS:
        if suffix in fmt.extensions:
            return fmt
    raise UnsupportedFormat(f"cannot translate files of type {suffix or '(no extension)'!r}; "
                            "supported: " + ", ".join(supported_extensions()))


__all__ = ["FORMATS", "DocumentError", "FileFormat", "ReadOptions", "Segment",
           "UnsupportedFormat", "by_filename", "by_name", "supported_extensions"]
