"""The model store: publish, load, activate and sweep artifacts.

Atomic publication
------------------
An artifact becomes visible in exactly one step: the insertion of its registry row.
`Store.publish` runs these steps:

1. write every file and `manifest.json` into a private staging directory
   `<root>/.staging/<uuid>/` (each write fsynced, then renamed into place);
2. verify the staged directory by loading it back exactly as a reader would;
3. pick the next version (`1 + highest registered`) and rename the staging directory to
   `<kind>s/<name>/v<version>/` (a rename never replaces an existing directory);
4. insert the registry row in a transaction. The unique key `(kind, name, version)`
   arbitrates concurrent publishers: the loser moves its directory back to staging and
   retries with the next version.

A crash before step 4 leaves a staging directory or a version directory without a row:
both are invisible to readers (who look artifacts up only through rows) and are removed
by `Store.sweep`. A crash after step 4 leaves a complete, verified artifact. Directories
are never modified after publication; rollback means activating an older version.
Built-in artifacts are layered under the root: layering.py.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from contract.manifest import (
    KINDS,
    MANIFEST_FILE,
    NAME_PATTERN,
    ArtifactKind,
    Manifest,
    check_name,
    is_safe_relpath,
)

from .artifact import ArtifactId, LoadedArtifact, build_manifest, verify_artifact
from .artifact_pages import ArtifactRecord
from .errors import ArtifactError, ConflictError, NotFoundError, StoreError
from .layering import (
    BUILTIN_SCHEME,
    DEFAULT_SWEEP_AGE,
    DIRECTIONS,
    STAGING,
    register_builtins,
    sweep,
)
from .layout import artifact_dir, is_sharded, reshard
from .registry import Registry
from .storage import LocalStorage, Storage

log = logging.getLogger(__name__)
BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
MAX_PUBLISH_ATTEMPTS = 100

PublishStep = Literal["staged", "renamed"]
# Test seam: called with ("staged", staging key) after verification and with
# ("renamed", version key) between the rename and the registry row; tests crash there.
PublishHook = Callable[[PublishStep, str], None]


class Store:
    """Artifacts in a `Storage`, made visible and activated through a `Registry`."""

    def __init__(
        self, storage: Storage, registry: Registry, *, builtin: Storage | None = None
    ) -> None:
        self.storage = storage
        self.registry = registry
        self._builtin = builtin
        self.sharded = is_sharded(storage)  # modules/_<shard>/<name>/v<n> (layout.py)

    @classmethod
    def open(
        cls,
        root: Path,
        *,
        registry_url: str | None = None,
        builtin_dir: Path | None = BUILTIN_DIR,
    ) -> Store:
        """Create the writable root if needed, open the registry (default: SQLite in the
        root) and register the built-in artifacts of `builtin_dir` (None: no layering)."""
        root = root.resolve()
        root.mkdir(parents=True, exist_ok=True)
        registry = Registry(registry_url or f"sqlite:///{root / 'registry.sqlite'}")
        builtin = LocalStorage(builtin_dir) if builtin_dir and builtin_dir.is_dir() else None
        store = cls(LocalStorage(root), registry, builtin=builtin)
        try:
            store.register_builtins()
        except BaseException:
            registry.close()
            raise
        return store

    def close(self) -> None:
        self.registry.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- publication -----------------------------------------------------------------

    def publish(
        self,
        kind: ArtifactKind,
        name: str,
        files: Mapping[str, bytes | Path],
        *,
        config: Mapping[str, Any],
        provenance: Mapping[str, Any] | None = None,
        scores: Mapping[str, Any] | None = None,
        backbone_fingerprint: str | None = None,
        hook: PublishHook | None = None,
        backbone: str | None = None,
    ) -> Manifest:
        """Publish `files` as the next version of `kind`/`name` and return its manifest.

        A backbone's fingerprint is computed (a given one must match); modules and
        classifiers must pass the fingerprint of the backbone they were built for, and
        belong to `backbone` (default: the one with that fingerprint, else the default).
        The new version is not activated.
        """
        _check_request(kind, name, files)
        blobs = {p: src.read_bytes() if isinstance(src, Path) else src for p, src in files.items()}
        staging = f"{STAGING}/{uuid.uuid4().hex}"
        scope = self.registry.owner(kind, backbone_fingerprint, backbone)
        try:
            manifest = build_manifest(
                kind,
                name,
                blobs,
                version=self.registry.next_version(kind, name, backbone=scope),
                config=config,
                provenance=provenance or {},
                scores=scores or {},
                fingerprint=backbone_fingerprint,
            )
            self._stage(manifest, blobs, staging)
            if hook is not None:
                hook("staged", staging)
            return self._flip(manifest, staging, hook, scope)
        finally:
            # No-op after a successful rename; a hard crash leaves it for sweep().
            self.storage.remove_tree(staging)

    def _stage(self, manifest: Manifest, blobs: Mapping[str, bytes], staging: str) -> None:
        for path, data in blobs.items():
            self.storage.write_bytes(f"{staging}/{path}", data)
        self.storage.write_bytes(f"{staging}/{MANIFEST_FILE}", manifest.to_json())
        expect = ArtifactId(manifest.kind, manifest.name, manifest.version)
        verify_artifact(self.storage, staging, expect=expect, label=f"{manifest.label} (staged)")

    def _flip(self, manifest: Manifest, staging: str, hook: PublishHook | None,
              scope: str) -> Manifest:
        version = manifest.version
        prefix = self.directory_of(scope)
        for _attempt in range(MAX_PUBLISH_ATTEMPTS):
            # A version directory without a row (a crashed publisher) also pushes us on.
            version = max(version, self.registry.next_version(manifest.kind, manifest.name,
                                                              backbone=scope))
            if version != manifest.version:
                manifest = manifest.model_copy(update={"version": version})
                self.storage.write_bytes(f"{staging}/{MANIFEST_FILE}", manifest.to_json())
            key = prefix + artifact_dir(manifest.kind, manifest.name, version,
                                        sharded=self.sharded)
            try:
                self.storage.publish_dir(staging, key)
            except FileExistsError:
                version += 1
                continue
            if hook is not None:
                hook("renamed", key)
            try:
                self.registry.add_artifact(manifest, location=key, backbone=scope)
            except ConflictError:
                self.storage.publish_dir(key, staging)
                version += 1
                continue
            return manifest
        raise ConflictError(
            f"no free version for {manifest.kind}s/{manifest.name} "
            f"after {MAX_PUBLISH_ATTEMPTS} attempts"
        )

    def directory_of(self, scope: str) -> str:
        """Where a backbone's modules and classifiers are stored: the flat layout for the
        default backbone's (and backbones themselves), `directions/<backbone>/` otherwise."""
        if scope in ("", self.registry.default_backbone()):
            return ""
        return f"{DIRECTIONS}/{scope}/"

    def import_artifact_dir(
        self,
        path: Path,
        expected_kind: ArtifactKind | None = None,
        *,
        expected_fingerprint: str | frozenset[str] | None = None,
        label: str | None = None,
        backbone: str | None = None,
    ) -> Manifest:
        """Verify a prebuilt artifact directory (e.g. an unpacked upload) and publish it as
        the next version of its name; the version in its manifest is ignored. Errors name
        it `label` (default: its path; an upload passes a label without server paths)."""
        label = label or str(path)
        loaded = verify_artifact(
            LocalStorage(path), "", label=label, expected_fingerprint=expected_fingerprint
        )
        manifest = loaded.manifest
        if expected_kind is not None and manifest.kind != expected_kind:
            problem = f"kind: expected a {expected_kind}, got a {manifest.kind}"
            raise ArtifactError(label, [problem])
        return self.publish(
            manifest.kind,
            manifest.name,
            dict(loaded.files),
            config=manifest.config,
            provenance=manifest.provenance,
            scores=manifest.scores,
            backbone_fingerprint=manifest.backbone_fingerprint,
            backbone=backbone,
        )

    # -- loading -----------------------------------------------------------------------

    def load(
        self,
        kind: ArtifactKind,
        name: str,
        version: int | None = None,
        *,
        expected_fingerprint: str | frozenset[str] | None = None,
        backbone: str | None = None,
    ) -> LoadedArtifact:
        """Load and verify one version (default: the active one) of `backbone`'s artifact
        (default: the default backbone's) into memory."""
        record = self.record(kind, name, version, backbone=backbone)
        storage, key = self._resolve(record.location)
        expect = ArtifactId(kind, name, record.version)
        loaded = verify_artifact(
            storage, key, expect=expect, expected_fingerprint=expected_fingerprint
        )
        if loaded.manifest != record.manifest:
            problem = f"{MANIFEST_FILE}: differs from the registry's copy"
            raise ArtifactError(expect.label, [problem])
        return loaded

    def load_backbone(self, name: str | None = None) -> LoadedArtifact:
        """The active version of backbone `name`; without a name, the only backbone (or
        the only one with an active version)."""
        if name is None:
            names = self.registry.list_names("backbone")
            active = sorted(self.registry.active_versions("backbone"))
            if len(names) == 1:
                name = names[0]
            elif len(active) == 1:
                name = active[0]
            elif not names:
                raise NotFoundError("backbone", "*", [])
            else:
                raise ConflictError(f"several backbones; name one of: {', '.join(names)}")
        return self.load("backbone", name)

    def load_default_backbone(self) -> LoadedArtifact:
        """The active version of the default direction's backbone (the oldest registered,
        `Registry.default_backbone`), however many backbones the store holds."""
        return self.load_backbone(self.registry.default_backbone() or None)

    def record(self, kind: ArtifactKind, name: str, version: int | None = None, *,
               backbone: str | None = None) -> ArtifactRecord:
        """The registry row of a version (default: the active one), or NotFoundError."""
        scope = self.registry.name_scope(kind, name, backbone, version=version)
        if version is None:
            version = self.registry.get_active(kind, name, backbone=scope)
            if version is None:
                self._raise_unknown(kind, name, scope)
                versions = self.registry.list_versions(kind, name, backbone=scope)
                raise NotFoundError(f"active version of {kind}", name, versions)
        record = self.registry.get_artifact(kind, name, version, backbone=scope)
        if record is None:
            self._raise_unknown(kind, name, scope)
            versions = self.registry.list_versions(kind, name, backbone=scope)
            raise NotFoundError(f"{kind} {name!r} version", version, versions)
        return record

    def _raise_unknown(self, kind: ArtifactKind, name: str, scope: str) -> None:
        names = self.registry.list_names(kind, backbone=scope)
        if name not in names:
            raise NotFoundError(kind, name, names)

    def _resolve(self, location: str) -> tuple[Storage, str]:
        if location.startswith(BUILTIN_SCHEME):
            if self._builtin is None:
                raise StoreError(f"{location} is registered but no builtin directory is open")
            return self._builtin, location[len(BUILTIN_SCHEME) :]
        if "://" in location:
            raise StoreError(f"unsupported artifact location {location!r}")
        return self.storage, location

    # -- activation ------------------------------------------------------------------------

    def activate(self, kind: ArtifactKind, name: str, version: int, *,
                 backbone: str | None = None) -> None:
        """Activate (or roll back to) a registered version."""
        self.registry.set_active(kind, name, version, backbone=backbone)

    def active_domains(self, backbone: str | None = None) -> dict[str, int]:
        """Domain name -> active module version, of `backbone` (default: the default)."""
        return self.registry.active_versions("module", backbone=backbone)

    def delete_domain(self, name: str, *, backbone: str | None = None) -> None:
        """Stop serving a domain; its module versions stay for a later rollback."""
        self.registry.clear_active("module", name, backbone=backbone)

    def active_backbones(self) -> dict[str, int]:
        """Backbone name -> active version: the directions a server serves."""
        return self.registry.active_versions("backbone")

    # -- layering and maintenance --------------------------------------------------------

    def register_builtins(self) -> list[Manifest]:
        """Verify and register built-in artifacts not yet in the registry, activate them
        where layering.py's rules say so; returns the newly registered ones."""
        if self._builtin is None:
            return []
        return register_builtins(self.registry, self._builtin)

    def reshard(self) -> list[tuple[str, str]]:
        """Move the store to the sharded layout (layout.py); returns the keys moved."""
        moved = reshard(self.storage, self.registry)
        self.sharded = True
        return moved

    def sweep(self, *, older_than: timedelta = DEFAULT_SWEEP_AGE) -> list[str]:
        """Remove staging directories and row-less version directories older than
        `older_than` (leftovers of crashed publishers); returns the removed keys."""
        return sweep(self.storage, self.registry, older_than=older_than)


def _check_request(kind: str, name: str, files: Mapping[str, bytes | Path]) -> None:
    problems: list[str] = []
    if kind not in KINDS:
        problems.append(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    try:
        check_name(name)
    except ValueError:
        problems.append(f"name: {name!r} does not match {NAME_PATTERN}")
    if not files:
        problems.append("files: none given")
    problems += [
        f"{path}: not a safe relative path or reserved"
        for path in sorted(files)
        if not is_safe_relpath(path) or path == MANIFEST_FILE
    ]
    if problems:
        raise ArtifactError(f"{kind}s/{name}", problems)
