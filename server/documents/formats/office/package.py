"""An office file's zip package, read within bounds and written back entry for entry.

Office files (OOXML and OpenDocument) are zips of XML parts. A zip says how large each
entry expands, but a hostile one lies, and a zip bomb expands a few kilobytes into
gigabytes, so every entry is inflated in chunks while two counters run: the whole
package's expanded bytes (`max_expanded_bytes`) and each entry's expansion ratio
(`MAX_RATIO` over its compressed size). Either one stops the read at the chunk that
crosses it. Real office XML compresses 5 to 30 times; 0.6 MB of zeros compressed by
deflate expands about 1,000 times.

Encrypted files are refused with a message that says so: password-protected OOXML is an
OLE compound file (an `EncryptedPackage` stream, ECMA-376 part 2 / MS-OFFCRYPTO 2.3.4),
an encrypted OpenDocument part is listed with `manifest:encryption-data` in
META-INF/manifest.xml (ODF 1.2 part 3, 3.8), and a zip entry can carry the zip's own
encryption flag (APPNOTE 4.4.4, bit 0).
"""

from __future__ import annotations

import io
import zipfile
import zlib
from dataclasses import dataclass

from server.documents.formats.base import DocumentError, DocumentTooLarge

MAX_RATIO = 200  # expanded bytes per compressed byte, per entry
RATIO_FLOOR = 1 << 20  # an entry may always expand to 1 MiB (tiny entries, high ratios)
MAX_ENTRIES = 10_000
_CHUNK = 1 << 16
_OLE_SIGNATURE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # compound file: encrypted or binary


@dataclass
class Package:
    """Every entry of the zip, expanded, in the zip's order."""

    infos: list[zipfile.ZipInfo]
    data: dict[str, bytes]

    def write(self, replaced: dict[str, bytes]) -> bytes:
        """The package with some entries' bytes replaced; every other entry, its name,
        order, date and compression as read (an OpenDocument `mimetype` stays first and
        stored, as ODF requires)."""
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as archive:
            for info in self.infos:
                copy = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                copy.compress_type = info.compress_type
                copy.external_attr = info.external_attr
                copy.comment = info.comment
                copy.extra = b""  # zip64 and timestamp extras are rewritten by zipfile
                archive.writestr(copy, replaced.get(info.filename, self.data[info.filename]))
        return out.getvalue()


def read_package(data: bytes, *, what: str, max_expanded_bytes: int) -> Package:
    """Raises DocumentError for anything that is not a readable, unencrypted zip within
    the bounds; `what` names the format in messages ("Word document (.docx)")."""
    if data.startswith(_OLE_SIGNATURE):
        raise DocumentError(
            f"this {what} is password-protected (encrypted), or an old binary Office file "
            "(.doc, .xls, .ppt): save it without a password in the newer format and send "
            "it again")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError) as error:
        raise DocumentError(f"this is not a readable {what}: it is not a zip archive "
                            f"({error}); the file may be truncated or of another type"
                            ) from error
    with archive:
        infos = archive.infolist()
        _check_entries(infos, what=what, max_expanded_bytes=max_expanded_bytes)
        expanded = 0
        contents: dict[str, bytes] = {}
        for info in infos:
            body = _expand(archive, info, what=what, used=expanded,
                           max_expanded_bytes=max_expanded_bytes)
            expanded += len(body)
            contents[info.filename] = body
    return Package(infos, contents)


def _check_entries(infos: list[zipfile.ZipInfo], *, what: str,
                   max_expanded_bytes: int) -> None:
    """What the zip's directory alone gives away, before anything is inflated."""
    if len(infos) > MAX_ENTRIES:
        raise DocumentError(f"this {what} holds {len(infos):,} zip entries; at most "
                            f"{MAX_ENTRIES:,} are allowed")
    names = [info.filename for info in infos]
    if len(set(names)) != len(names):
        raise DocumentError(f"this {what} is corrupt: its zip lists an entry twice")
    for info in infos:
        if info.flag_bits & 0x1:
            raise DocumentError(f"this {what} is encrypted (its part {info.filename!r} "
                                "needs a password): send it without a password")
    declared = sum(info.file_size for info in infos)
    if declared > max_expanded_bytes:
        raise DocumentTooLarge(_too_large(what, max_expanded_bytes))


def _expand(archive: zipfile.ZipFile, info: zipfile.ZipInfo, *, what: str, used: int,
            max_expanded_bytes: int) -> bytes:
    """One entry inflated chunk by chunk, stopped as soon as it crosses the package's
    remaining budget or its own ratio bound (the directory's sizes may lie)."""
    limit = max(RATIO_FLOOR, MAX_RATIO * info.compress_size)
    chunks: list[bytes] = []
    size = 0
    try:
        with archive.open(info) as entry:
            while chunk := entry.read(_CHUNK):
                size += len(chunk)
                if used + size > max_expanded_bytes:
                    raise DocumentTooLarge(_too_large(what, max_expanded_bytes))
                if size > limit:
                    raise DocumentError(
                        f"this {what} looks like a zip bomb: its part {info.filename!r} "
                        f"expands more than {MAX_RATIO} times its compressed size")
                chunks.append(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError,
            RuntimeError, OSError) as error:
        raise DocumentError(f"this {what} is corrupt: its part {info.filename!r} cannot be "
                            f"read ({error})") from error
    return b"".join(chunks)


def _too_large(what: str, limit: int) -> str:
    return (f"this {what} expands to more than {limit / 2**20:.0f} MiB when unzipped, the "
            "most allowed: split it into smaller files")
