"""Building manifests, verifying artifact directories, and the in-memory loaded artifact."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import ValidationError

from contract.artifacts import (
    BACKBONE_CONFIG_FILE,
    BACKBONE_WEIGHTS_FILE,
    CLASSIFIER_MODEL_FILE,
    MODULE_WEIGHTS_FILE,
    vocabulary_problems,
)
from contract.manifest import (
    MANIFEST_FILE,
    REQUIRED_FILES,
    ArtifactKind,
    FileEntry,
    Manifest,
    artifact_key,
)
from contract.tensors import check_safetensors, tensors_from_bytes

from .errors import ArtifactError
from .hashing import backbone_fingerprint, sha256_hex, short_hash
from .storage import Storage

if TYPE_CHECKING:
    import torch

# The weights file of each kind, for LoadedArtifact.tensors().
WEIGHTS_FILE: dict[ArtifactKind, str] = {
    "backbone": BACKBONE_WEIGHTS_FILE,
    "module": MODULE_WEIGHTS_FILE,
    "classifier": CLASSIFIER_MODEL_FILE,
}


class ArtifactId(NamedTuple):
    kind: ArtifactKind
    name: str
    version: int

    @property
    def label(self) -> str:
        return artifact_key(self.kind, self.name, self.version)


@dataclass(frozen=True)
class LoadedArtifact:
    """A verified artifact in memory: the bytes that were hashed are the bytes handed out."""

    manifest: Manifest
    files: Mapping[str, bytes]

    @property
    def label(self) -> str:
        return self.manifest.label

    def tensors(self, relpath: str | None = None) -> dict[str, torch.Tensor]:
        """Tensors of a safetensors file (default: the kind's weights file)."""
        path = relpath or WEIGHTS_FILE[self.manifest.kind]
        return load_safetensors(self.files[path], label=f"{self.label}/{path}")

    def json(self, relpath: str) -> Any:
        return json.loads(self.files[relpath])


def build_manifest(
    kind: ArtifactKind,
    name: str,
    files: Mapping[str, bytes],
    *,
    version: int,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
    scores: Mapping[str, Any],
    fingerprint: str | None,
) -> Manifest:
    """Hash `files` into a manifest. A backbone's fingerprint is computed (and must equal
    `fingerprint` when one is given); modules and classifiers must name theirs."""
    entries = {p: FileEntry(sha256=sha256_hex(data), size=len(data)) for p, data in files.items()}
    if kind == "backbone":
        hashes = {path: entry.sha256 for path, entry in entries.items()}
        if BACKBONE_WEIGHTS_FILE not in hashes:
            raise ArtifactError(f"{kind}s/{name}", ["model.safetensors: required for a backbone"])
        computed = backbone_fingerprint(config, hashes)
        if fingerprint is not None and fingerprint != computed:
            problem = (
                f"backbone_fingerprint: given {short_hash(fingerprint)}, "
                f"computed {short_hash(computed)}"
            )
            raise ArtifactError(f"{kind}s/{name}", [problem])
        fingerprint = computed
    if fingerprint is None:
        raise ValueError(f"a {kind} must name the backbone_fingerprint it was built for")
    return Manifest(
        kind=kind,
        name=name,
        version=version,
        created_at=datetime.now(UTC),
        files=entries,
        backbone_fingerprint=fingerprint,
        config=dict(config),
        provenance=dict(provenance),
        scores=dict(scores),
    )


def verify_artifact(
    storage: Storage,
    key: str,
    *,
    expect: ArtifactId | None = None,
    expected_fingerprint: str | frozenset[str] | None = None,
    label: str | None = None,
) -> LoadedArtifact:
    """Read and verify the artifact directory `key`; raise one ArtifactError listing
    every problem (files, sizes, hashes, unexpected files, fingerprints, identity).
    `expected_fingerprint`: the one, or the set (model_store/compact.py), accepted."""
    label = label or (expect.label if expect else key)
    manifest = _read_manifest(storage, key, label)
    problems = _identity_problems(manifest, expect)
    files, file_problems = _read_files(storage, key, manifest)
    problems += file_problems
    problems += _content_problems(manifest, files)
    wanted = ({expected_fingerprint} if isinstance(expected_fingerprint, str)
              else expected_fingerprint)
    if wanted is not None and manifest.backbone_fingerprint not in wanted:
        expected = " or ".join(short_hash(f) for f in sorted(wanted))
        problems.append(
            f"backbone_fingerprint: built for {short_hash(manifest.backbone_fingerprint)}, "
            f"expected {expected}"
        )
    if problems:
        raise ArtifactError(label, problems)
    return LoadedArtifact(manifest=manifest, files=files)


def _read_manifest(storage: Storage, key: str, label: str) -> Manifest:
    try:
        raw = storage.read_bytes(f"{key}/{MANIFEST_FILE}" if key else MANIFEST_FILE)
    except FileNotFoundError:
        raise ArtifactError(label, [f"{MANIFEST_FILE}: missing"]) from None
    try:
        return Manifest.from_json(raw)
    except ValidationError as exc:
        errors = [f"{'.'.join(map(str, e['loc'])) or 'json'}: {e['msg']}" for e in exc.errors()]
        raise ArtifactError(label, [f"{MANIFEST_FILE}: invalid ({'; '.join(errors)})"]) from exc


def _identity_problems(manifest: Manifest, expect: ArtifactId | None) -> list[str]:
    if expect is None or (manifest.kind, manifest.name, manifest.version) == tuple(expect):
        return []
    return [f"{MANIFEST_FILE}: describes {manifest.label}, expected {expect.label}"]


def _read_files(
    storage: Storage, key: str, manifest: Manifest
) -> tuple[dict[str, bytes], list[str]]:
    present = set(storage.list(key, recursive=True)) - {MANIFEST_FILE}
    files: dict[str, bytes] = {}
    problems: list[str] = []
    for path, entry in sorted(manifest.files.items()):
        if path not in present:
            problems.append(f"{path}: missing")
            continue
        data = storage.read_bytes(f"{key}/{path}" if key else path)
        digest = sha256_hex(data)
        if len(data) != entry.size:
            problems.append(f"{path}: size mismatch (expected {entry.size}, got {len(data)})")
        elif digest != entry.sha256:
            problems.append(
                f"{path}: sha256 mismatch (expected {short_hash(entry.sha256)}, "
                f"got {short_hash(digest)})"
            )
        else:
            files[path] = data
    problems += [f"{path}: unexpected file" for path in sorted(present - set(manifest.files))]
    return files, problems


def _content_problems(manifest: Manifest, files: Mapping[str, bytes]) -> list[str]:
    """Checks on the verified bytes: required files, safetensors structure, backbone config
    and fingerprint (recomputed from the manifest's own hashes: file hashes are checked
    above, so a mismatch here means the manifest itself is inconsistent)."""
    problems = [
        f"{path}: required for a {manifest.kind} but not listed in the manifest"
        for path in REQUIRED_FILES[manifest.kind]
        if path not in manifest.files
    ]
    for path, data in sorted(files.items()):
        if path.endswith(".safetensors") and (problem := check_safetensors(data)):
            problems.append(f"{path}: {problem}")
    if manifest.kind != "backbone":
        return problems
    problems += vocabulary_problems(manifest.files, manifest.config)
    config_file = files.get(BACKBONE_CONFIG_FILE)
    if config_file is not None and _json_or_none(config_file) != manifest.config:
        problems.append("config.json: differs from the manifest's config")
    if BACKBONE_WEIGHTS_FILE in manifest.files:
        computed = backbone_fingerprint(manifest.config, manifest.file_hashes)
        if computed != manifest.backbone_fingerprint:
            problems.append(
                f"backbone_fingerprint: mismatch (manifest says "
                f"{short_hash(manifest.backbone_fingerprint)}, recomputed {short_hash(computed)})"
            )
    return problems


def _json_or_none(data: bytes) -> object:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None


def load_safetensors(data: bytes, *, label: str = "safetensors") -> dict[str, torch.Tensor]:
    """Deserialize safetensors bytes; any corruption raises ArtifactError naming `label`."""
    try:
        return tensors_from_bytes(data)
    except ValueError as error:
        raise ArtifactError(label, [str(error)]) from error
