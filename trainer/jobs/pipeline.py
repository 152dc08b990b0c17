"""One domain job from claim to publication:

1. load the backbone the job was created for (frozen) and the job's data;
2. train the module (state `running`; resumable from the run directory's checkpoint);
3. state `evaluating`: the quality gate on the dev set (module vs plain backbone);
4. publish the module (inactive). Refused by the gate: the job fails with both scores and
   the refused version stays inactive for inspection. Passed: retrain the router with the
   new domain and publish it (inactive);
5. flip both active versions in ONE registry transaction (the server's poller notices the
   new event and loads them), then mark the job `published`;
6. refit the backbone's quality estimator with the domain's dev sentences
   (trainer/quality/refit.py; the server rereads it).

Every step is idempotent, so a job taken over after a crash at any point finishes
correctly: the trained module is cached in the run directory, and artifacts carry the job
id in their provenance, so a re-run finds what an earlier attempt published instead of
publishing it twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from contract.training import training_options
from contract.tsv import Pair
from model_store import ArtifactKind, ConflictError, Job, Manifest, Store, StoreError
from server.engine.artifacts import module_files
from trainer.jobs.domain_job import (
    JobBackbone,
    JobFailed,
    JobInterrupted,
    TrainedModule,
    load_job_backbone,
    read_job_data,
    run_dir_of,
    train_job_module,
)
from trainer.jobs.gate import GateResult, quality_gate
from trainer.jobs.settings import WorkerSettings
from trainer.quality.refit import refit_for_module
from trainer.routers.tenant_router import tenant_router_name, tenant_router_update
from trainer.routers.update import RouterUpdate, publish_router, router_update
from trainer.training.loop import ShouldStop

log = logging.getLogger(__name__)

Report = Callable[[dict[str, Any]], None]  # fenced job-row update (raises when lost)
FLIP_ATTEMPTS = 3  # router updates racing another publisher


@dataclass(frozen=True)
class JobContext:
    store: Store
    job: Job
    settings: WorkerSettings
    report: Report
    should_stop: ShouldStop

    def checkpoint(self, where: str) -> None:
        """Between two steps: stop here (the job stays resumable) when asked to."""
        if self.should_stop():
            raise JobInterrupted(f"stopped {where}")


def run_domain_job(ctx: JobContext) -> dict[str, Any]:
    """Process one claimed job; returns the job's result. Raises JobFailed (fail it),
    JobInterrupted (resumable), or whatever `report` raises when the job is lost."""
    job = ctx.job
    options = training_options(job.config)
    backbone = load_job_backbone(ctx.store, job.config["backbone"])
    data = read_job_data(ctx.store, job.id)
    trained = train_job_module(
        backbone, dict(job.config["module"]), options, data=data,
        run_dir=run_dir_of(ctx.store, job.id), settings=ctx.settings, report=ctx.report,
        should_stop=ctx.should_stop)
    ctx.checkpoint("after training")
    ctx.report({"state": "evaluating", "progress": 0.9})
    gate = quality_gate(backbone, trained.config, trained.params, dev_pairs=data[1],
                        margin_bleu=options.gate_margin_bleu)
    log.info("gate: module BLEU %.2f chrF %.2f, backbone BLEU %.2f chrF %.2f: %s",
             gate.module.bleu, gate.module.chrf, gate.backbone.bleu, gate.backbone.chrf,
             "passed" if gate.passed else "refused")
    scores = gate.as_scores() | {"training": {
        "steps": trained.steps, "stop_reason": trained.stop_reason,
        "train_seconds": trained.train_seconds, "pairs": trained.pairs}}
    ctx.report({"scores": scores, "progress": 0.92})
    module = job_artifact(ctx.store, "module", job.domain, job.id,
                           backbone.manifest.name) or publish_module(
        ctx.store, job, trained, gate=gate, backbone=backbone, half=ctx.settings.half)
    if not gate.passed:
        raise JobFailed(f"{gate.refusal()}; {module.label} was published inactive for "
                        "inspection", scores=scores,
                        result={"module_version": module.version, "active": False})
    ctx.checkpoint("before the router update")
    result = _publish(ctx, module, backbone=backbone, data=data)
    refit_quality(ctx, backbone, trained, dev_pairs=data[1])
    # The optimizer state is of no use once the module is served (the trained module
    # stays in the run directory).
    (run_dir_of(ctx.store, job.id) / "checkpoint.pt").unlink(missing_ok=True)
    return result


def refit_quality(ctx: JobContext, backbone: JobBackbone, trained: TrainedModule, *,
                   dev_pairs: list[Pair]) -> None:
    """The backbone's quality estimator, refit with the domain's dev sentences as its newly
    served module translates them (trainer/quality/refit.py): after a new domain and after
    a refresh (trainer/corrections/refresh_job.py). The module already serves: a failed refit is
    logged and the previous estimator stays."""
    try:
        refit_for_module(ctx.store, backbone.manifest, domain=ctx.job.domain,
                         module_config=trained.config, params=trained.params,
                         dev_pairs=dev_pairs)
    except (StoreError, ValueError, OSError, RuntimeError) as error:
        log.error("quality estimator not refit for %s: %s", ctx.job.domain, error)


def publish_module(store: Store, job: Job, trained: TrainedModule, *, gate: GateResult,
                   backbone: JobBackbone, half: bool) -> Manifest:
    """Publish the trained module as the next version of the domain (inactive)."""
    data = job.config.get("data", {})
    return store.publish(
        "module", job.domain, module_files(trained.params, half=half),
        config=trained.config, backbone_fingerprint=backbone.manifest.backbone_fingerprint,
        backbone=backbone.manifest.name,
        provenance={"job": job.id, "recipe": "trainer sidecar", "data": data,
                    "pairs": trained.pairs, "steps": trained.steps,
                    "stop_reason": trained.stop_reason, "train_seconds": trained.train_seconds,
                    "seed": job.config["training"]["seed"]},
        scores={"dev": gate.module.as_dict(), "backbone_dev": gate.backbone.as_dict(),
                "gate": gate.as_scores()["gate"]})


def _publish(ctx: JobContext, module: Manifest, *, backbone: JobBackbone,
             data: tuple[list[Pair], list[Pair]]) -> dict[str, Any]:
    """Router update + the one-transaction flip; retried when another publisher changed
    the active router meanwhile (the update is then redone on top of theirs)."""
    store, job = ctx.store, ctx.job
    serving = store.registry.get_active("backbone", backbone.manifest.name)
    if serving != backbone.manifest.version:
        raise JobFailed(f"the active backbone changed from {backbone.manifest.label} to "
                        f"version {serving} during training; submit the domain again")
    notes: list[str] = []
    for _attempt in range(FLIP_ATTEMPTS):
        router, expected, note = _router_for_job(ctx, backbone, data)
        ctx.report({"progress": 0.97})
        versions: list[tuple[ArtifactKind, str, int]] = [("module", job.domain, module.version)]
        expect: dict[tuple[ArtifactKind, str], int | None] = {}
        if router is not None:  # the shared router, or the domain's tenant's
            versions.append(("classifier", router.name, router.version))
            expect[("classifier", router.name)] = expected
        try:
            store.registry.set_active_many(versions, expect=expect,
                                           backbone=backbone.manifest.name)
        except ConflictError as error:
            log.warning("router changed meanwhile (%s); updating it again", error)
            continue
        notes += [note] if note else []
        log.info("activated %s%s", module.label, f" and {router.label}" if router else "")
        return {"module_version": module.version, "active": True, "notes": notes,
                "classifier_version": router.version if router else None}
    raise JobFailed(f"the router kept changing during {FLIP_ATTEMPTS} publication attempts")


def _router_for_job(ctx: JobContext, backbone: JobBackbone, data: tuple[list[Pair], list[Pair]]
                    ) -> tuple[Manifest | None, int | None, str | None]:
    """(classifier to activate, the active version it must replace, note). Reuses this
    job's classifier when an earlier attempt published it on top of the current one."""
    store, job, settings = ctx.store, ctx.job, ctx.settings.router
    owner = backbone.manifest.name
    # a tenant's domain teaches its tenant's router, never the shared one
    tenant = store.registry.resource_owner("domain", job.domain)
    name = settings.name if tenant is None else tenant_router_name(tenant, settings.name)
    current = store.registry.get_active("classifier", name, backbone=owner)
    mine = job_artifact(store, "classifier", name, job.id, owner)
    if mine is not None and current in (mine.version, mine.provenance.get("based_on")):
        return mine, current, None
    update: RouterUpdate | str = (
        router_update(store, job.domain, data, settings=settings, backbone=owner)
        if tenant is None else
        tenant_router_update(store, tenant, job.domain, data, settings=settings,
                             backbone=owner))
    if isinstance(update, str):
        log.warning("%s", update)
        return None, None, update
    manifest = publish_router(store, update, name=name, job_id=job.id,
                              domain=job.domain,
                              fingerprint=backbone.manifest.backbone_fingerprint,
                              backbone=owner)
    return manifest, update.base_version, None


def job_artifact(store: Store, kind: ArtifactKind, name: str, job_id: str,
                  backbone: str) -> Manifest | None:
    """The newest version of `kind`/`name` of `backbone` that this job published, if any."""
    found = [r.manifest for r in store.registry.list_artifacts(kind, backbone=backbone)
             if r.name == name and r.manifest.provenance.get("job") == job_id]
    return max(found, key=lambda m: m.version, default=None)
