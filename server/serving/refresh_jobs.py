"""Queue a refresh of a domain's module from its corrections (issue #49).

A refresh is a training job (the same queue, states and sidecar as adding a domain) whose
config has a `refresh` part: the module version it fine-tunes and where that module's
original data lives. The data are not copied: a module trained by a job here points at
that job's files; a shipped module names its data in its provenance ("shared/data
en-fr/domains/medical/train"), which the sidecar reads from `NMT_TRAINER__REFRESH__DATA_DIR`;
a refreshed module carries its base's reference on. The corrections themselves are read
by the sidecar when the job runs (trainer/corrections/refresh_job.py), so a correction deleted for a
privacy request in the meantime is not trained on.

Queued by `POST /admin/corrections/refresh` or by an idle sidecar once a domain has
`NMT_TRAINER__REFRESH__MIN_NEW_CORRECTIONS` new usable corrections (`due_refreshes`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ValidationError

from contract.training import TRAIN_FILE, TrainingOptions, job_key
from model_store import ConflictError, Job, Manifest, Store
from server.core.errors import Conflict, InvalidInput, NotFound

Trigger = Literal["admin", "corrections"]
SHARED_DATA = "shared/data "  # how the shipped recipes name their data in provenance
# Fine-tuning a trained module on a few thousand pairs: smaller batches than a new
# domain's (more steps from little data), a short warm-up, a few passes, and a dev margin
# of half a BLEU point (the gate also wants the held-back corrections to improve).
REFRESH_TRAINING: dict[str, Any] = {"lr": 5e-4, "warmup_steps": 10, "max_tokens": 2000,
                                    "max_epochs": 3, "eval_every": 50, "patience": 2,
                                    "gate_margin_bleu": 0.5}
UNFINISHED = ("queued", "running", "evaluating")


def is_refresh(job: Job) -> bool:
    return isinstance(job.config.get("refresh"), dict)


def original_data(store: Store, manifest: Manifest) -> dict[str, str] | None:
    """Where the module's own training data is: {"job": id} or {"path": "en-fr/domains/x"}
    (relative to the sidecar's data directory); None when nobody knows."""
    provenance = manifest.provenance
    carried = provenance.get("original_data")
    if isinstance(carried, dict):
        return {str(k): str(v) for k, v in carried.items()}
    job = provenance.get("job")
    if isinstance(job, str) and store.storage.exists(job_key(job, TRAIN_FILE)):
        return {"job": job}
    data = provenance.get("data")
    if isinstance(data, str) and data.startswith(SHARED_DATA):
        return {"path": data.removeprefix(SHARED_DATA).strip().removesuffix("/train")}
    return None


def submit_refresh(store: Store, domain: str, *, backbone: Manifest, trigger: Trigger,
                   options: Mapping[str, Any] | None = None, require_new: bool = False) -> Job:
    """A queued refresh job of `domain`'s active module; NotFound (no such domain),
    Conflict (no known original data, or the domain has an unfinished job), InvalidInput
    (a bad training option; with `require_new`, no new usable correction)."""
    version = store.registry.get_active("module", domain, backbone=backbone.name)
    if version is None:
        served = sorted(store.registry.active_versions("module", backbone=backbone.name))
        raise NotFound(f"no active module of domain {domain[:64]!r}; served: "
                       f"{', '.join(served) or 'none'}", field="domain")
    if require_new and not store.registry.count_new_corrections(
            domain, backbone=backbone.name, untenanted=shared_domain(store, domain)):
        raise InvalidInput(f"domain {domain!r} has no new usable corrections (accepted with "
                           "a key, or approved; not used by a refresh yet); pending ones need "
                           "POST /admin/corrections/review first", field="domain")
    manifest = store.record("module", domain, version, backbone=backbone.name).manifest
    reference = original_data(store, manifest)
    if reference is None:
        raise Conflict(f"{manifest.label} does not say what data it was trained on, so it "
                       "cannot be refreshed without forgetting it", field="domain")
    try:
        training = TrainingOptions.model_validate(
            REFRESH_TRAINING | dict(options or {})).model_dump()
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                             for e in error.errors())
        raise InvalidInput(f"options: {problems}; allowed: "
                           f"{', '.join(TrainingOptions.model_fields)}",
                           field="options") from None
    config = {"refresh": {"base_version": version, "original_data": reference,
                          "trigger": trigger},
              "module": dict(manifest.config), "training": training,
              "backbone": {"name": backbone.name, "version": backbone.version,
                           "fingerprint": backbone.backbone_fingerprint}}
    job_id = str(uuid.uuid4())
    try:
        return store.registry.create_domain_job(
            domain, config=config, data_location=job_key(job_id), job_id=job_id,
            backbone=backbone.name, refresh_of=version)
    except ConflictError as error:
        raise Conflict(str(error), field="domain") from None


def due_refreshes(store: Store, backbone: str, *, min_new: int) -> list[str]:
    """Domains with at least `min_new` usable corrections received since their last refresh
    job (a refused refresh is retried only when as many new ones came in), and no
    unfinished job."""
    jobs = [job for job in store.registry.list_jobs() if job.backbone == backbone]
    busy = {job.domain for job in jobs if job.state in UNFINISHED}
    last: dict[str, Any] = {}
    for job in jobs:
        if is_refresh(job):
            last[job.domain] = max(last.get(job.domain, job.created_at), job.created_at)
    due = []
    for domain in sorted(store.registry.active_versions("module", backbone=backbone)):
        if domain in busy:
            continue
        count = store.registry.count_new_corrections(
            domain, backbone=backbone, since=last.get(domain),
            untenanted=shared_domain(store, domain))
        if count >= min_new:
            due.append(domain)
    return due


def shared_domain(store: Store, domain: str) -> bool:
    """A domain no tenant owns: its refresh trains on the corrections of keys of no
    tenant only (a tenant's corrections of it stay the tenant's)."""
    return store.registry.resource_owner("domain", domain) is None
