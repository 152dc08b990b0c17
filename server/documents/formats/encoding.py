"""A text file's bytes as text, and the translation back in the encoding it came in.

What is recognised, in order: a byte order mark (UTF-8, UTF-16 LE/BE), UTF-16 without a
mark (NUL bytes in every other position of the first kilobyte), strict UTF-8, and, for
formats that allow it (subtitles, plain text, HTML), Windows-1252, the encoding of most
legacy subtitle files. Anything else is refused with a message that names what was found,
never guessed into mojibake. Line endings are not touched: a file's `\\r\\n` stay.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from server.documents.formats.base import DocumentError

LEGACY = "cp1252"
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16-be"))


@dataclass(frozen=True)
class TextEncoding:
    codec: str  # a Python codec name: utf-8, utf-16-le, utf-16-be, cp1252
    bom: bytes = b""

    def encode(self, text: str) -> bytes:
        # a translation may hold a character the legacy code page lacks (a rare symbol):
        # it becomes "?" rather than failing the whole file
        errors = "replace" if self.codec == LEGACY else "strict"
        return self.bom + text.encode(self.codec, errors=errors)

    @property
    def label(self) -> str:
        return self.codec + (" with BOM" if self.bom and self.codec == "utf-8" else "")


def decode(data: bytes, *, legacy: bool, what: str) -> tuple[str, TextEncoding]:
    """The text of `data` and how it was encoded; DocumentError when it is not text.
    `legacy`: fall back to Windows-1252 when the bytes are not UTF-8."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return _strict(data[len(bom):], codec, what), TextEncoding(codec, bom)
    utf16 = _bomless_utf16(data)
    if utf16 is not None:
        return _strict(data, utf16, what), TextEncoding(utf16)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.reason == "unexpected end of data" and error.end == len(data):
            raise DocumentError(f"the {what} is truncated: it ends inside a UTF-8 "
                                "character") from None
        if not legacy:
            raise DocumentError(f"the {what} is not valid UTF-8 (byte 0x{data[error.start]:02x}"
                                f" at offset {error.start}); save it as UTF-8 or UTF-16"
                                ) from None
        text = _strict(data, LEGACY, what)
        _refuse_binary(text, what)
        return text, TextEncoding(LEGACY)
    _refuse_binary(text, what)
    return text, TextEncoding("utf-8")


def _strict(data: bytes, codec: str, what: str) -> str:
    if codec.startswith("utf-16") and len(data) % 2:
        raise DocumentError(f"the {what} is truncated: UTF-16 with an odd number of bytes")
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as error:
        raise DocumentError(f"the {what} cannot be read as {codec} (offset {error.start}: "
                            f"{error.reason}); it may be truncated or not text") from None
    _refuse_binary(text, what)
    return text


def _bomless_utf16(data: bytes) -> str | None:
    head = data[:1024]
    if len(head) < 4:
        return None
    even, odd = head[0::2], head[1::2]
    if even.count(0) > len(even) * 0.4 and odd.count(0) == 0:
        return "utf-16-be"
    if odd.count(0) > len(odd) * 0.4 and even.count(0) == 0:
        return "utf-16-le"
    return None


def _refuse_binary(text: str, what: str) -> None:
    if "\x00" in text:
        raise DocumentError(f"the {what} holds NUL characters: it is binary, not text")
