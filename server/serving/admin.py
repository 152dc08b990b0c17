"""Domain administration: list versions, upload, activate / roll back, delete.

Every change goes through the model store's registry (the source of truth, shared with
other replicas and the training sidecar) and is then applied to this server at once with
`Runtime.refresh()`, so the answer reflects what is served.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import IO, Any

from contract.backbone import BackboneConfig
from contract.manifest import check_name
from model_store import LocalStorage, Manifest, Store, unpack_artifact, verify_artifact
from model_store.compact import served_fingerprints
from server.core.errors import InvalidArtifact, InvalidInput, NotFound, NotReady
from server.engine.artifacts import module_params
from server.engine.families import get_family
from server.engine.residency import check_params
from server.serving.runtime import Runtime
from server.serving.state import DomainEntry


@dataclass(frozen=True)
class VersionInfo:
    version: int
    created_at: datetime
    family: str
    active: bool
    scores: Mapping[str, Any]


@dataclass(frozen=True)
class DomainVersions:
    name: str
    active_version: int | None
    versions: list[VersionInfo]


@dataclass(frozen=True)
class Deleted:
    name: str
    deactivated_version: int
    drained: bool


class DomainAdmin:
    def __init__(self, store: Store, runtime: Runtime, *, drain_timeout_s: float) -> None:
        self.store = store
        self.runtime = runtime
        self.drain_timeout_s = drain_timeout_s

    async def list_domains(self, *, after: str | None = None,
                           limit: int = 100) -> tuple[list[DomainVersions], str | None]:
        """`limit` domains after the name `after`, and the cursor of the next page (None:
        this was the last)."""
        return await asyncio.to_thread(self._list, after, limit)

    def _list(self, after: str | None, limit: int) -> tuple[list[DomainVersions], str | None]:
        page = self.store.registry.artifact_page("module", backbone=self.runtime.scope,
                                                 after=after, limit=limit)
        by_name: dict[str, list[VersionInfo]] = {}
        for record in page.records:
            manifest = record.manifest
            by_name.setdefault(record.name, []).append(VersionInfo(
                record.version, record.created_at, str(manifest.config.get("family", "")),
                page.active.get(record.name) == record.version, manifest.scores))
        return ([DomainVersions(name, page.active.get(name), versions)
                 for name, versions in by_name.items()], page.next_after)

    async def upload(self, name: str, archive: bytes | IO[bytes], *,
                     activate: bool) -> Manifest:
        """Verify an uploaded module artifact (tar.gz, bytes or a file read from its
        start) and publish it as the next version."""
        check_domain_name(name)
        manifest = await asyncio.to_thread(self._import, name, archive)
        if activate:
            await self.activate(name, manifest.version)
        return manifest

    def _import(self, name: str, archive: bytes | IO[bytes]) -> Manifest:
        engine, backbone = self.runtime.engine, self.runtime.backbone
        if engine is None or backbone is None:
            raise NotReady("no backbone is loaded: uploads are verified against it")
        fingerprints = served_fingerprints(backbone)  # a compact re-store's too
        with tempfile.TemporaryDirectory(prefix="nmt-upload-") as scratch:
            root = unpack_artifact(archive, Path(scratch) / "artifact")
            loaded = verify_artifact(LocalStorage(root), "", label="upload",
                                     expected_fingerprint=fingerprints)
            manifest = loaded.manifest
            problems: list[str] = []
            if manifest.kind != "module":
                problems.append(f"kind: expected a module, got a {manifest.kind}")
            if manifest.name != name:
                problems.append(f"name: the artifact is for domain {manifest.name!r}, "
                                f"uploaded as {name!r}")
            if manifest.kind == "module":
                # Converting the tensors is torch work: on the engine thread (EngineThread).
                problems += self.runtime.engine_thread.call(
                    _shape_problems, manifest.config, loaded.files, engine.config)
            if problems:
                raise InvalidArtifact(f"upload is invalid: {len(problems)} problem(s): "
                                      + "; ".join(problems), field="body")
            return self.store.import_artifact_dir(root, "module", label="upload",
                                                  expected_fingerprint=fingerprints,
                                                  backbone=backbone.name)

    async def activate(self, name: str, version: int) -> DomainEntry:
        """Serve `version` of `name` (roll forward or back): verify and load it first, then
        flip the registry, then apply."""
        check_domain_name(name)
        scope = self.runtime.scope
        await asyncio.to_thread(partial(self.store.record, "module", name, version,
                                        backbone=scope))  # NotFound
        await self.runtime.preload(name, version)
        await asyncio.to_thread(partial(self.store.activate, "module", name, version,
                                        backbone=scope))
        await self.runtime.refresh()
        entry = self.runtime.state.domains.get(name)
        if entry is None or entry.version != version:
            problem = self.runtime.state.module_failures.get(name, "it is not served")
            raise NotReady(f"{name} v{version} is active in the registry but not served: "
                           f"{problem}")
        return entry

    async def delete(self, name: str) -> Deleted:
        """Stop serving `name`: deactivate it, then wait for in-flight requests that use
        any of its versions. The artifacts stay for a later rollback."""
        check_domain_name(name)
        scope = self.runtime.scope
        version = await asyncio.to_thread(
            partial(self.store.registry.get_active, "module", name, backbone=scope))
        if version is None:
            active = await asyncio.to_thread(self.store.active_domains, scope)
            raise NotFound(f"domain {name!r} is not active; active: "
                           f"{', '.join(sorted(active)) or 'none'}", field="name")
        await asyncio.to_thread(partial(self.store.delete_domain, name, backbone=scope))
        await self.runtime.refresh()
        drained = await self.runtime.drain(name, timeout=self.drain_timeout_s)
        return Deleted(name, version, drained)


def check_domain_name(name: str) -> None:
    try:
        check_name(name)
    except ValueError as error:
        raise InvalidInput(str(error), field="name") from None
    if name in ("generic", "auto"):
        raise InvalidInput(f"{name!r} is reserved for routing", field="name")


def _shape_problems(config: Mapping[str, Any], files: Mapping[str, bytes],
                    backbone: BackboneConfig) -> list[str]:
    """Every way the module's tensors do not fit the serving backbone."""
    try:
        family = get_family(str(config.get("family")))
        normalised = family.normalise(dict(config))
        params = module_params(files)
    except ValueError as error:
        return [str(error)]
    return check_params(normalised, params, backbone)
