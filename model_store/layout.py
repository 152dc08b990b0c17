"""Where a module's directory lives in the store: flat or sharded.

The flat layout keeps every module of a backbone in one directory (`modules/<name>/v<n>`):
at 10,000 modules, listing it (the sweep, an operator's `ls`, an object store's LIST) reads
10,000 entries, and some filesystems slow down on directories that large. A sharded store
puts each module under one of 256 subdirectories named by its name's hash
(`modules/_3f/<name>/v<n>`; names start with a letter, so a shard never collides with a
name), about 40 names each at 10,000.

A store is sharded once `layout.json` at its root says so: `reshard` (python -m
model_store reshard STORE) writes it first, so that every publisher from then on writes
sharded directories, then moves each flat module directory and points its registry row at
the new place. Readers follow the registry's `location`, so both layouts load at any time;
a rerun finishes an interrupted migration.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from contract.manifest import ArtifactKind, artifact_key, parse_version_dir

from .artifact import ArtifactId
from .registry import Registry
from .storage import Storage

LAYOUT_FILE = "layout.json"
SHARDED_KINDS: frozenset[str] = frozenset({"module"})
SHARD_PREFIX = "_"


def shard_of(name: str) -> str:
    return SHARD_PREFIX + hashlib.sha256(name.encode()).hexdigest()[:2]


def artifact_dir(kind: ArtifactKind, name: str, version: int, *, sharded: bool) -> str:
    """The key of an artifact directory (below a backbone's prefix) in either layout."""
    if sharded and kind in SHARDED_KINDS:
        return f"{kind}s/{shard_of(name)}/{name}/v{version}"
    return artifact_key(kind, name, version)


def is_sharded(storage: Storage) -> bool:
    if not storage.exists(LAYOUT_FILE):
        return False
    return bool(json.loads(storage.read_bytes(LAYOUT_FILE)).get("modules") == "sharded")


def sharded_dirs(storage: Storage, prefixes: Sequence[str]) -> list[tuple[str, ArtifactId]]:
    """Every sharded artifact directory below `prefixes` as (key, id)."""
    found: list[tuple[str, ArtifactId]] = []
    for prefix in prefixes:
        for kind in sorted(SHARDED_KINDS):
            base = f"{prefix}{kind}s"
            for shard in storage.list(base):
                if not shard.startswith(SHARD_PREFIX):
                    continue
                for name in storage.list(f"{base}/{shard}"):
                    for entry in storage.list(f"{base}/{shard}/{name}"):
                        version = parse_version_dir(entry)
                        if version is not None:
                            found.append((f"{base}/{shard}/{name}/{entry}",
                                          ArtifactId(kind, name, version)))  # type: ignore[arg-type]
    return found


def reshard(storage: Storage, registry: Registry) -> list[tuple[str, str]]:
    """Mark the store sharded, then move every flat module directory of the store's own
    (built-in ones stay where the package keeps them); returns the (from, to) keys moved."""
    storage.write_bytes(LAYOUT_FILE, json.dumps({"modules": "sharded"}).encode())
    moved: list[tuple[str, str]] = []
    for kind in sorted(SHARDED_KINDS):
        for record in registry.list_artifacts(kind):  # type: ignore[arg-type]
            flat = artifact_key(record.kind, record.name, record.version)
            if not record.location.endswith(flat) or ":" in record.location:
                continue  # sharded already, or not in this storage (built-in)
            prefix = record.location[: -len(flat)]
            if prefix and not prefix.endswith("/"):
                continue
            target = prefix + artifact_dir(record.kind, record.name, record.version,
                                           sharded=True)
            if storage.exists(record.location):
                storage.publish_dir(record.location, target)
            if storage.exists(target):  # moved now, or by an interrupted run
                registry.relocate(record, target)
                moved.append((record.location, target))
            flat_parent = prefix + f"{record.kind}s/{record.name}"
            if storage.exists(flat_parent) and not storage.list(flat_parent):
                storage.remove_tree(flat_parent)
    return moved
