"""tar.gz packing of artifact directories, for uploads through the admin API.

Unpacking never trusts the archive: every member is checked before anything is written
(no absolute paths, no `..`, no links or device files, bounded sizes and counts), and
files are written by us rather than by `tarfile.extractall`.
"""

from __future__ import annotations

import gzip
import io
import re
import tarfile
import zlib
from pathlib import Path, PurePosixPath

from contract.manifest import MANIFEST_FILE, is_safe_relpath

from .errors import ArtifactError

MAX_MEMBER_BYTES = 4 << 30
MAX_TOTAL_BYTES = 16 << 30
MAX_MEMBERS = 256
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
    data: bytes,
    dest: Path,
    *,
    max_member_bytes: int = MAX_MEMBER_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_members: int = MAX_MEMBERS,
) -> Path:
    """Unpack a tar.gz upload into `dest` (absent or empty) and return the directory that
    holds `manifest.json` (the archive root, or its single top-level directory).

    Raises ArtifactError listing every refused member before writing anything.
    """
    if dest.exists() and any(dest.iterdir()):
        raise ArtifactError(UPLOAD_LABEL, [f"destination {dest} is not empty"])
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = _checked_members(tar, max_member_bytes, max_total_bytes, max_members)
            dest.mkdir(parents=True, exist_ok=True)
            for name, member in members.items():
                _extract(tar, member, dest / name)
    except (tarfile.TarError, gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise ArtifactError(UPLOAD_LABEL, [f"not a readable tar.gz archive ({exc})"]) from exc
    return _artifact_root(dest)


def _checked_members(
    tar: tarfile.TarFile, max_member_bytes: int, max_total_bytes: int, max_members: int
) -> dict[str, tarfile.TarInfo]:
    problems: list[str] = []
    members: dict[str, tarfile.TarInfo] = {}
    total = 0
    for count, member in enumerate(tar, start=1):
        if count > max_members:
            problems.append(f"more than {max_members} members")
            break
        name, problem = _member_problem(member, max_member_bytes)
        if problem is None and name in members:
            problem = "duplicate member"
        if problem is not None:
            problems.append(f"{member.name}: {problem}")
            continue
        total += member.size if member.isfile() else 0
        if total > max_total_bytes:
            problems.append(f"archive unpacks to more than {max_total_bytes} bytes")
            break
        if name:
            members[name] = member
    if problems:
        raise ArtifactError(UPLOAD_LABEL, problems)
    return members


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
        out.write(source.read(member.size))


def _artifact_root(dest: Path) -> Path:
    if (dest / MANIFEST_FILE).is_file():
        return dest
    entries = list(dest.iterdir())
    if len(entries) == 1 and (entries[0] / MANIFEST_FILE).is_file():
        return entries[0]
    raise ArtifactError(UPLOAD_LABEL, [f"{MANIFEST_FILE}: missing at the archive root"])
