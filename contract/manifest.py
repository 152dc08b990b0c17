"""The artifact manifest (`manifest.json`) and the naming rules of artifact directories."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_serializer,
    field_validator,
)

from contract.artifacts import KINDS, MANIFEST_FILE, REQUIRED_FILES, ArtifactKind

__all__ = ["KINDS", "MANIFEST_FILE", "REQUIRED_FILES", "ArtifactKind", "FileEntry", "Manifest",
           "artifact_key", "check_name", "is_safe_relpath", "kind_of_dir", "parse_version_dir"]

FORMAT_VERSION: Literal[1] = 1
NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,62}$"
SHA256_PATTERN = r"^[0-9a-f]{64}$"

ArtifactName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
Sha256 = Annotated[str, StringConstraints(pattern=SHA256_PATTERN)]

_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")
_VERSION_DIR = re.compile(r"v([1-9][0-9]*)")


def check_name(name: str) -> str:
    """Return `name` if it is a valid artifact name, else raise ValueError naming the rule."""
    if not re.fullmatch(NAME_PATTERN, name):
        raise ValueError(f"invalid artifact name {name!r}: must match {NAME_PATTERN}")
    return name


def is_safe_relpath(path: str) -> bool:
    """A relative POSIX path inside the artifact: no absolute paths, `..`, or odd characters."""
    parts = path.split("/")
    return all(p not in (".", "..") and _SEGMENT.fullmatch(p) for p in parts)


def artifact_key(kind: ArtifactKind, name: str, version: int) -> str:
    """Storage key of an artifact directory: `<kind>s/<name>/v<version>`."""
    return f"{kind}s/{name}/v{version}"


def parse_version_dir(entry: str) -> int | None:
    """`v3` -> 3; anything else (including `v03`) -> None."""
    match = _VERSION_DIR.fullmatch(entry)
    return int(match.group(1)) if match else None


def kind_of_dir(entry: str) -> ArtifactKind | None:
    """`modules` -> `module`; anything else -> None."""
    for kind in KINDS:
        if entry == f"{kind}s":
            return kind
    return None


class FileEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    sha256: Sha256
    size: int = Field(ge=0, strict=True)


class Manifest(BaseModel):
    """The contents of `manifest.json` (docs/ARCHITECTURE.md, "Artifacts")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal[1] = FORMAT_VERSION
    kind: ArtifactKind
    name: ArtifactName
    version: int = Field(ge=1, strict=True)
    created_at: AwareDatetime
    files: dict[str, FileEntry]
    backbone_fingerprint: Sha256
    config: dict[str, Any] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)
    scores: dict[str, Any] = Field(default_factory=dict)

    @field_validator("files")
    @classmethod
    def _check_paths(cls, files: dict[str, FileEntry]) -> dict[str, FileEntry]:
        bad = [p for p in files if not is_safe_relpath(p) or p == MANIFEST_FILE]
        if bad:
            raise ValueError(f"unsafe or reserved file paths: {', '.join(sorted(bad))}")
        return files

    @field_validator("created_at")
    @classmethod
    def _to_utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)

    @field_serializer("created_at")
    def _iso_utc(self, value: datetime) -> str:
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")

    @property
    def label(self) -> str:
        """`modules/medical/v2`: how errors and logs name the artifact."""
        return artifact_key(self.kind, self.name, self.version)

    @property
    def file_hashes(self) -> dict[str, str]:
        return {path: entry.sha256 for path, entry in self.files.items()}

    def to_json(self) -> bytes:
        return (self.model_dump_json(indent=2) + "\n").encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        return cls.model_validate_json(data)
