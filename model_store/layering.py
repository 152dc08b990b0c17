"""Built-in artifacts layered under the store's writable root, and the sweep of what
crashed publishers left behind.

Built-in artifacts ship read-only inside the package (`model_store/builtin/<kind>s/<name>/
v<version>/`). `Store.open` layers them under the writable root: each one is verified and
registered with the location `builtin:<kind>s/<name>/v<version>` (resolved against the
builtin directory given at open, so a reinstalled package still resolves). Nothing ever
writes into the builtin directory: new versions of a built-in name are published under
the root.

Upgrades: a new package may ship a newer built-in version of a name (a retrained module).
On open it is registered, and activated when nothing of that name was registered before,
or when the active version is an older built-in one (the store still followed the
package's default). A version the operator published, or a built-in name the operator
deleted, is left as it is. A built-in version whose number the store already used for an
artifact of its own is not registered (logged): the store's own artifact keeps it.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from contract.manifest import MANIFEST_FILE, ArtifactKind, Manifest, kind_of_dir, parse_version_dir

from .artifact import ArtifactId, verify_artifact
from .errors import ConflictError
from .layout import sharded_dirs
from .registry import Registry
from .storage import Storage

log = logging.getLogger(__name__)

BUILTIN_SCHEME = "builtin:"
STAGING = ".staging"
# Modules and classifiers of a backbone other than the default one live below
# `directions/<backbone>/` (docs/DIRECTIONS.md); the default backbone's keep the flat layout.
DIRECTIONS = "directions"
DEFAULT_SWEEP_AGE = timedelta(minutes=60)


def register_builtins(registry: Registry, builtin: Storage) -> list[Manifest]:
    """Verify and register built-in artifacts not yet in the registry, activate them
    where the rules above say so; returns the newly registered ones."""
    added: list[tuple[str, Manifest]] = []
    known_before = {(r.backbone, r.kind, r.name) for r in registry.list_artifacts()}
    for prefix, ident in layered_ids(builtin):
        label = prefix + ident.label
        location = BUILTIN_SCHEME + label
        scope = _builtin_scope(registry, builtin, prefix, ident, label)
        record = registry.get_artifact(*ident, backbone=scope)
        if record is None:
            loaded = verify_artifact(builtin, label, expect=ident)
            try:
                registry.add_artifact(loaded.manifest, location=location,
                                           backbone=scope)
                added.append((scope, loaded.manifest))
            except ConflictError:  # a concurrent open won
                record = registry.get_artifact(*ident, backbone=scope)
        if record is not None and record.location != location:
            log.warning("built-in %s is not registered: the store published version %d "
                        "of %r itself (%s)", label, ident.version, ident.name,
                        record.location)
    newest = {(scope, m.kind, m.name): m.version
              for scope, m in sorted(added, key=lambda sm: sm[1].version)}
    for (scope, kind, name), version in sorted(newest.items()):
        new = (scope, kind, name) not in known_before
        if _follows_builtin(registry, kind, name, version, new=new, scope=scope):
            registry.set_active(kind, name, version, backbone=scope)
    return [m for _scope, m in added]

def _builtin_scope(registry: Registry, builtin: Storage, prefix: str, ident: ArtifactId,
                   label: str) -> str:
    """The backbone a built-in artifact belongs to: its `directions/<backbone>/`
    directory's, or (flat layout) the one whose fingerprint its manifest carries."""
    if prefix:
        return prefix.split("/")[1]
    manifest = Manifest.model_validate_json(
        builtin.read_bytes(f"{label}/{MANIFEST_FILE}"))
    return registry.owner(ident.kind, manifest.backbone_fingerprint)

def _follows_builtin(registry: Registry, kind: ArtifactKind, name: str, version: int, *,
                     new: bool, scope: str) -> bool:
    """Whether a newly registered built-in version should become the active one."""
    active = registry.get_active(kind, name, backbone=scope)
    if active is None:
        return new  # a built-in domain deleted by an operator stays deleted
    record = registry.get_artifact(kind, name, active, backbone=scope)
    return (active < version and record is not None
            and record.location.startswith(BUILTIN_SCHEME))

def sweep(storage: Storage, registry: Registry, *,
          older_than: timedelta = DEFAULT_SWEEP_AGE) -> list[str]:
    """Remove staging directories and row-less version directories older than
    `older_than` (leftovers of crashed publishers); returns the removed keys."""
    cutoff = time.time() - older_than.total_seconds()
    candidates = [f"{STAGING}/{entry}" for entry in storage.list(STAGING)]
    registered = {r.location for r in registry.list_artifacts()}
    candidates += [label for label in (prefix + ident.label
                                       for prefix, ident in layered_ids(storage))
                   if label not in registered]
    prefixes = ["", *(f"{DIRECTIONS}/{backbone}/" for backbone in storage.list(DIRECTIONS))]
    candidates += [key for key, _ in sharded_dirs(storage, prefixes) if key not in registered]
    removed: list[str] = []
    for key in candidates:
        try:
            stale = storage.modified_at(key) <= cutoff
        except FileNotFoundError:  # renamed or swept by another process meanwhile
            continue
        if stale:
            storage.remove_tree(key)
            removed.append(key)
    return removed


def layered_ids(storage: Storage) -> list[tuple[str, ArtifactId]]:
    """Every artifact directory in `storage` as (prefix, id): the flat layout's with prefix
    "", then every `directions/<backbone>/` one's."""
    found = [("", ident) for ident in _artifact_ids(storage)]
    for backbone in storage.list(DIRECTIONS):
        prefix = f"{DIRECTIONS}/{backbone}/"
        found += [(prefix, ident) for ident in _artifact_ids(storage, prefix)]
    return found


def _artifact_ids(storage: Storage, prefix: str = "") -> list[ArtifactId]:
    """Every `<kind>s/<name>/v<version>` directory in `storage` (below `prefix`)."""
    found: list[ArtifactId] = []
    for kind_dir in storage.list(prefix.rstrip("/")):
        kind = kind_of_dir(kind_dir)
        if kind is None:
            continue
        for name in storage.list(prefix + kind_dir):
            for entry in storage.list(f"{prefix}{kind_dir}/{name}"):
                version = parse_version_dir(entry)
                if version is not None:
                    found.append(ArtifactId(kind, name, version))
    return sorted(found)
