"""A gzip reader that refuses to inflate too much: a bound on the total output and on the
ratio of output to input, checked on every read.

A gzip of zeros compresses about 1000:1, so a small upload can declare and inflate
gigabytes. Reading the archive through `BoundedGunzip` (and `tarfile` in stream mode on top
of it) stops such an upload after at most `max_ratio` times its own size (plus a small
`free_bytes` allowance for headers and manifests), without holding more than one chunk in
memory. Tar headers, PAX records and member data all pass through here, so none of them
escapes the bound.
"""

from __future__ import annotations

import io
import zlib
from typing import IO

from .errors import ArtifactError

CHUNK = 64 * 1024
GZIP_WBITS = 16 + zlib.MAX_WBITS


class InflationError(ArtifactError):
    """The archive inflates beyond a bound (its total size or its compression ratio)."""


class BoundedGunzip(io.RawIOBase):
    """A readable binary stream of the gunzipped `raw` (several gzip members are read one
    after the other, as `gzip` does)."""

    def __init__(self, raw: IO[bytes], *, label: str, max_bytes: int, max_ratio: float,
                 free_bytes: int) -> None:
        super().__init__()
        self._raw = raw
        self._label = label
        self._max_bytes = max_bytes
        self._max_ratio = max_ratio
        self._free_bytes = free_bytes
        self._inflater = zlib.decompressobj(GZIP_WBITS)
        self._pending = b""  # compressed input not yet given to the inflater
        self._eof = False
        self.bytes_in = 0
        self.bytes_out = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1, /) -> bytes:
        """Up to `size` bytes (a whole chunk when `size` < 0); b"" at the end."""
        want = CHUNK if size is None or size < 0 else size
        out = bytearray()
        while len(out) < want and not self._eof:
            out += self._inflate(want - len(out))
        self.bytes_out += len(out)
        self._check()
        return bytes(out)

    def _inflate(self, limit: int) -> bytes:
        if not self._pending:
            self._pending = self._raw.read(CHUNK)
            self.bytes_in += len(self._pending)
        if self._inflater.eof:
            if not self._pending:
                self._eof = True
                return b""
            self._inflater = zlib.decompressobj(GZIP_WBITS)  # the next gzip member
        starved = not self._pending
        data = self._inflater.decompress(self._pending, limit)
        self._pending = self._inflater.unconsumed_tail or self._inflater.unused_data
        if starved and not data and not self._inflater.eof:
            raise zlib.error("the gzip stream ends early")
        return data

    def _check(self) -> None:
        allowed = min(self._max_bytes,
                      self._free_bytes + int(self._max_ratio * max(self.bytes_in, 1)))
        if self.bytes_out > allowed:
            raise InflationError(self._label, [
                f"the archive inflates beyond {allowed} bytes after {self.bytes_in} "
                f"compressed bytes (at most {self._max_bytes} bytes in all and "
                f"{self._max_ratio:g}x the compressed size)"])
