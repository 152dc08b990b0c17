"""Adding a domain from data: validate an upload, write its files, create the training job.

The training sidecar (`python -m trainer`, sharing the store) claims the job from the
registry, trains and gates the module, retrains the router and publishes both; this
server's registry poller then serves them. Jobs live in the registry, so they survive a
restart of either process.

No half-written state: everything is validated first; the data files are then written
(each atomically) under `<store root>/jobs/<id>/`, and only the registry row makes the job
exist. A failure before the row removes the files; a crash leaves a directory without a
row, which the sidecar sweeps.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Any

from contract.backbone import BackboneConfig
from contract.training import (
    DEV_FILE,
    TRAIN_FILE,
    JobConfigError,
    TrainingOptions,
    job_key,
    normalise_config,
)
from contract.tsv import DataError, Pair, hold_out, pairs_to_bytes, parse_pairs
from model_store import (
    ConflictError,
    CreatedKey,
    Job,
    JobState,
    Manifest,
    NotFoundError,
    Page,
    Store,
    Viewer,
)
from server.core.errors import Conflict, InvalidInput, NotFound, NotReady
from server.serving.admin import check_domain_name
from server.serving.runtime import Runtime


@dataclass(frozen=True)
class DomainUpload:
    """`POST /admin/domains` as received: raw bytes, validated by `JobAdmin.submit`."""

    name: str
    train: bytes
    dev: bytes | None = None
    config: str | None = None  # JSON text


class JobAdmin:
    def __init__(self, store: Store, runtime: Runtime, *, min_pairs: int) -> None:
        self.store = store
        self.runtime = runtime
        self.min_pairs = min_pairs

    async def submit(self, upload: DomainUpload) -> Job:
        return await asyncio.to_thread(self._submit, upload)

    async def get(self, job_id: str) -> Job:
        try:
            return await asyncio.to_thread(self.store.registry.get_job, job_id)
        except NotFoundError:
            raise NotFound(f"no training job {job_id!r}", field="job_id") from None

    async def job_page(self, *, state: JobState | None, viewer: Viewer | None,
                       after: CreatedKey | None, limit: int) -> Page[Job]:
        return await asyncio.to_thread(self.store.registry.job_page, state=state,
                                       viewer=viewer, after=after, limit=limit)

    def _submit(self, upload: DomainUpload) -> Job:
        backbone = self.runtime.backbone
        if backbone is None or self.runtime.engine is None:
            raise NotReady("no backbone is loaded: a new domain is trained against the "
                           "served backbone")
        return submit_domain(self.store, upload, backbone=backbone,
                             backbone_config=self.runtime.engine.config,
                             min_pairs=self.min_pairs)


def submit_domain(store: Store, upload: DomainUpload, *, backbone: Manifest,
                  backbone_config: BackboneConfig, min_pairs: int) -> Job:
    """Validate `upload`, write its data and create its queued job (see the module doc)."""
    check_domain_name(upload.name)
    config = parse_job_config(upload.config, backbone_config)
    _check_free(store, upload.name, backbone.name)
    options = TrainingOptions.model_validate(config["training"])
    train, dev, summary = _data(upload, options, min_pairs=min_pairs)
    config |= {"data": summary, "backbone": {
        "name": backbone.name, "version": backbone.version,
        "fingerprint": backbone.backbone_fingerprint}}
    job_id = str(uuid.uuid4())
    try:
        store.storage.write_bytes(job_key(job_id, TRAIN_FILE), pairs_to_bytes(train))
        store.storage.write_bytes(job_key(job_id, DEV_FILE), pairs_to_bytes(dev))
        return store.registry.create_domain_job(
            upload.name, config=config, data_location=job_key(job_id), job_id=job_id,
            backbone=backbone.name)
    except ConflictError as error:
        store.storage.remove_tree(job_key(job_id))
        raise Conflict(str(error), field="name") from None
    except BaseException:
        store.storage.remove_tree(job_key(job_id))
        raise


def _check_free(store: Store, domain: str, backbone: str) -> None:
    """Early 409 (the registry re-checks atomically when it inserts the job)."""
    version = store.registry.get_active("module", domain, backbone=backbone)
    if version is not None:
        raise Conflict(f"domain {domain!r} already exists (module v{version} is active); "
                       f"upload a version with POST /admin/domains/{domain}/versions or "
                       f"DELETE /admin/domains/{domain} first", field="name")
    for job in store.registry.list_jobs():
        if (job.domain == domain and job.backbone == backbone
                and job.state in ("queued", "running", "evaluating")):
            raise Conflict(f"domain {domain!r} already has a {job.state} training job "
                           f"({job.id})", field="name")


def _data(upload: DomainUpload, options: TrainingOptions, *, min_pairs: int
          ) -> tuple[list[Pair], list[Pair], dict[str, Any]]:
    """(train, dev, summary); the dev set is held out of `train` when none is given."""
    try:
        train = parse_pairs(upload.train, label="train")
        dev = parse_pairs(upload.dev, label="dev") if upload.dev is not None else None
    except DataError as error:
        field = "dev" if str(error).startswith("dev:") else "train"
        raise InvalidInput(str(error), field=field) from None
    held_out = dev is None
    if dev is None:
        train, dev = hold_out(train, seed=options.seed, fraction=options.dev_fraction,
                              max_dev=options.max_dev_pairs)
    if len(train) < min_pairs:
        after = f" after holding out {len(dev)} for dev" if held_out else ""
        raise InvalidInput(f"train: {len(train)} pairs{after}; a new domain needs at least "
                           f"{min_pairs}", field="train")
    summary = {"train_pairs": len(train), "dev_pairs": len(dev),
               "dev": "held out of train" if held_out else "uploaded"}
    return train, dev, summary


def parse_job_config(text: str | None, backbone: BackboneConfig) -> dict[str, Any]:
    """The normalised job config of the `config` field (JSON object; empty = defaults)."""
    raw: Any = {}
    if text is not None and text.strip():
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as error:
            raise InvalidInput(f"config: not valid JSON ({error})", field="config") from None
    if not isinstance(raw, dict):
        raise InvalidInput("config: must be a JSON object, e.g. "
                           '{"family": "adapter", "max_epochs": 5}', field="config")
    try:
        return normalise_config(raw, backbone)
    except JobConfigError as error:
        raise InvalidInput(f"config: {error}", field="config") from None
