"""tar.gz packing of artifact directories, for uploads through the admin API.

Unpacking never trusts the archive: every member is checked before its data is written
(no absolute paths, no `..`, no links or device files, bounded sizes and counts), the
archive is read as a stream with a bound on how much it may inflate, and files are written
by us, in chunks, rather than by `tarfile.extractall`.
"""

from __future__ import annotations

import gzip
import io
import re
import shutil
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from contract.manifest import MANIFEST_FILE, is_safe_relpath

from .errors import ArtifactError
from .gunzip import BoundedGunzip

MAX_MEMBER_BYTES = 4 << 30
MAX_TOTAL_BYTES = 16 << 30
MAX_MEMBERS = 256
# Trained weights barely compress (float16 safetensors: ~1.1x); a gzip of zeros does
# ~1000x. FREE_BYTES covers tar headers and small, repetitive files such as manifests.
MAX_RATIO = 100.0
FREE_BYTES = 1 << 20
COPY_CHUNK = 1 << 20
UPLOAD_LABEL = "upload"
_DRIVE = re.compile(r"^[A-Za-z]:")


def pack_artifact_dir(directory: Path) -> bytes:
    """A deterministic tar.gz of the regular files under `directory` (paths relative to it)."""
    problems: list[str] = []
    paths: list[Path] = []
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory).as_posix()
        if path.is_symlink():
            problems.append(f"{rel}: links are not packed")
        elif path.is_file():
            paths.append(path)
        elif not path.is_dir():
            problems.append(f"{rel}: not a regular file")
    if problems:
        raise ArtifactError(str(directory), problems)
    buffer = io.BytesIO()
    # mtime=0 in gzip and tar headers: the same directory always packs to the same bytes.
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in paths:
            data = path.read_bytes()
            info = tarfile.TarInfo(path.relative_to(directory).as_posix())
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def unpack_artifact(
    source: bytes | IO[bytes],
    dest: Path,
    *,
    max_member_bytes: int = MAX_MEMBER_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_members: int = MAX_MEMBERS,
    max_ratio: float = MAX_RATIO,
) -> Path:
    """Unpack a tar.gz upload (bytes, or a binary file read once from its start) into
    `dest` (absent or empty) and return the directory that holds `manifest.json` (the
    archive root, or its single top-level directory).

    One streaming pass: every member is checked before its data is written, data is copied
    in chunks (no member is held whole in memory), and the archive may inflate to at most
    `max_ratio` times its compressed size (see `gunzip.py`). Raises ArtifactError listing
    every refused member (InflationError when the archive inflates too much); `dest` is
    then left empty.
    """
    if dest.exists() and any(dest.iterdir()):
        raise ArtifactError(UPLOAD_LABEL, [f"the destination directory {dest.name} is not empty"])
    raw = io.BytesIO(source) if isinstance(source, bytes) else source
    stream = BoundedGunzip(raw, label=UPLOAD_LABEL, max_bytes=max_total_bytes + FREE_BYTES,
                           max_ratio=max_ratio, free_bytes=FREE_BYTES)
    dest.mkdir(parents=True, exist_ok=True)
    limits = _Limits(max_member_bytes, max_total_bytes, max_members)
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            problems = _extract_checked(tar, dest, limits)
    except ArtifactError:
        _empty(dest)
        raise
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        _empty(dest)
        raise ArtifactError(UPLOAD_LABEL, [f"not a readable tar.gz archive ({exc})"]) from exc
    if problems:
        _empty(dest)
        raise ArtifactError(UPLOAD_LABEL, problems)
    return _artifact_root(dest)


@dataclass(frozen=True)
class _Limits:
    member_bytes: int
    total_bytes: int
    members: int


def _extract_checked(tar: tarfile.TarFile, dest: Path, limits: _Limits) -> list[str]:
    """Write every acceptable member under `dest`; the problems of the others."""
    problems: list[str] = []
    seen: set[str] = set()
    total = 0
    for count, member in enumerate(tar, start=1):
        if count > limits.members:
            problems.append(f"more than {limits.members} members")
            break
        name, problem = _member_problem(member, limits.member_bytes)
        if problem is None and name in seen:
            problem = "duplicate member"
        if problem is not None:
            problems.append(f"{member.name}: {problem}")
            continue  # the stream skips its data
        total += member.size if member.isfile() else 0
        if total > limits.total_bytes:
            problems.append(f"archive unpacks to more than {limits.total_bytes} bytes")
            break
        if name:
            seen.add(name)
            if not problems:  # after a refusal nothing more is written
                _extract(tar, member, dest / name)
    return problems


def _empty(dest: Path) -> None:
    for entry in dest.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _member_problem(member: tarfile.TarInfo, max_bytes: int) -> tuple[str, str | None]:
    """(normalized name, why the member is refused or None)."""
    raw = member.name
    if raw.startswith(("/", "\\")) or PurePosixPath(raw).is_absolute() or _DRIVE.match(raw):
        return raw, "absolute path refused"
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        return raw, "path traversal ('..') refused"
    if member.issym() or member.islnk():
        return raw, "links are refused"
    if not (member.isfile() or member.isdir()):
        return raw, "special files are refused"
    name = "/".join(parts)
    if name and not is_safe_relpath(name):
        return raw, "unsupported characters in path"
    if member.isfile() and member.size > max_bytes:
        return raw, f"too large ({member.size} bytes, limit {max_bytes})"
    return name, None


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    if member.isdir():
        target.mkdir(parents=True, exist_ok=True)
        return
    source = tar.extractfile(member)
    if source is None:
        raise ArtifactError(UPLOAD_LABEL, [f"{member.name}: unreadable member"])
    target.parent.mkdir(parents=True, exist_ok=True)
    with source, open(target, "xb") as out:
        shutil.copyfileobj(source, out, COPY_CHUNK)


def _artifact_root(dest: Path) -> Path:
    if (dest / MANIFEST_FILE).is_file():
        return dest
    entries = list(dest.iterdir())
    if len(entries) == 1 and (entries[0] / MANIFEST_FILE).is_file():
        return entries[0]
    raise ArtifactError(UPLOAD_LABEL, [f"{MANIFEST_FILE}: missing at the archive root"])
