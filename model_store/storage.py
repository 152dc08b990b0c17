"""Where artifact bytes live: a small `Storage` protocol and its local-filesystem backend.

Keys are relative POSIX paths (`modules/medical/v2/module.safetensors`); the empty key
is the storage root. Storage knows nothing about manifests, versions or the registry.

How an S3-compatible backend would implement the protocol with `fsspec`/`s3fs` (not
implemented here; the store only relies on the properties below):

- `fs = fsspec.filesystem("s3", endpoint_url=...)`; a key maps to `<bucket>/<prefix>/<key>`.
- `read_bytes` / `write_bytes`: `fs.cat_file(path)` / `fs.pipe_file(path, data)`. A put is
  atomic per object, so no fsync is needed; a half-written object is never visible.
- `exists`: `fs.exists(path)`; `list`: `fs.ls(path, detail=False)` (direct children) or
  `fs.find(path)` (recursive, relative to the prefix); `modified_at`: `fs.modified(path)`
  of the newest object under the prefix.
- `publish_dir(src, dst)`: S3 has no rename. Copy every object server-side
  (`fs.copy(src, dst, recursive=True)`) using conditional puts (`If-None-Match: *`) so
  that an existing key is never overwritten (raise `FileExistsError`), then
  `fs.rm(src, recursive=True)`. The copy is not atomic and need not be: object keys are
  immutable per version, and an artifact becomes visible only when the store inserts its
  registry row *after* `publish_dir` returns. That row is the flip. A crash mid-copy leaves
  a prefix without a row, which `Store.sweep` removes.
- `remove_tree`: `fs.rm(path, recursive=True)`.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from contract.manifest import is_safe_relpath


class Storage(Protocol):
    """Byte storage under one root, addressed by relative keys."""

    def read_bytes(self, key: str) -> bytes:
        """The whole object; FileNotFoundError if absent."""
        ...

    def write_bytes(self, key: str, data: bytes) -> None:
        """Durably write (replace) one object; parents are created."""
        ...

    def exists(self, key: str) -> bool: ...

    def list(self, key: str, *, recursive: bool = False) -> Sequence[str]:
        """Sorted names of the direct children of `key`, or with `recursive` the relative
        paths of every file below it; empty if `key` does not exist."""
        ...

    def modified_at(self, key: str) -> float:
        """Last modification time (epoch seconds) of `key`."""
        ...

    def publish_dir(self, src: str, dst: str) -> None:
        """Move the tree `src` to `dst`; FileExistsError if `dst` already exists."""
        ...

    def remove_tree(self, key: str) -> None:
        """Remove `key` and everything below it; no error if absent."""
        ...


class LocalStorage:
    """`Storage` on a local directory; renames are atomic and writes are fsynced."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __repr__(self) -> str:
        return f"LocalStorage({str(self.root)!r})"

    def path(self, key: str) -> Path:
        if key == "":
            return self.root
        if not is_safe_relpath(key):
            raise ValueError(f"unsafe storage key {key!r}")
        return self.root / key

    def read_bytes(self, key: str) -> bytes:
        # O_NOFOLLOW: an artifact file that is a symlink could point anywhere.
        fd = os.open(self.path(key), os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    def write_bytes(self, key: str, data: bytes) -> None:
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Write aside and rename so that a reader never sees a half-written file.
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
        _fsync_dir(target.parent)

    def exists(self, key: str) -> bool:
        return os.path.lexists(self.path(key))

    def list(self, key: str, *, recursive: bool = False) -> Sequence[str]:
        base = self.path(key)
        if not base.is_dir():
            return []
        if not recursive:
            return sorted(entry.name for entry in base.iterdir())
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(base):
            rel = Path(dirpath).relative_to(base)
            # Symlinked directories are not descended into but still reported.
            links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
            found.extend((rel / name).as_posix() for name in [*filenames, *links])
        return sorted(found)

    def modified_at(self, key: str) -> float:
        return self.path(key).stat().st_mtime

    def publish_dir(self, src: str, dst: str) -> None:
        source, target = self.path(src), self.path(dst)
        target.parent.mkdir(parents=True, exist_ok=True)
        # rename(2) would silently replace an *empty* directory; refuse any existing one.
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "artifact directory exists", str(target))
        try:
            os.rename(source, target)
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise FileExistsError(exc.errno, "artifact directory exists", str(target)) from exc
            raise
        _fsync_dir(target.parent)
        _fsync_dir(source.parent)

    def remove_tree(self, key: str) -> None:
        target = self.path(key)
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
