"""A refresh job: the next version of a domain's module, fine-tuned from the served one on
its original data plus the corrections translators sent for it (issue #49).

1. load the backbone, the module version the job refreshes and its original data (a
   job's files, or a shipped module's data under `NMT_TRAINER__REFRESH__DATA_DIR`);
2. choose the corrections (trainer/corrections/correction_set.py: near duplicates merged, dev-set
   sentences left out, one key's share capped, a part held back); the choice is saved in
   the run directory so that a resumed job trains on the same set;
3. train (state `running`): the served module's weights are the starting point; the
   original pairs (a seeded sample) once and each correction `correction_weight` times
   per epoch; dev + held-back corrections choose the best step; the corrections earlier
   refreshes trained on are replayed with the original pairs (weighted like new ones), so
   that a refresh does not forget what the last one learnt;
4. gate (state `evaluating`, trainer/corrections/refresh_gate.py) against the served module;
5. publish the version (inactive when refused: the job fails with the reason and the
   scores, and the corrections stay unused); passed: retrain the router with the
   corrected sources (trainer/corrections/refresh_router.py), activate both in place of the versions
   they replace in one transaction (refused if another module version was activated
   meanwhile) and mark the corrections used with the new version; the backbone's quality
   estimator is refit with the domain's dev sentences as the new version translates them
   (trainer/quality/refit.py).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contract.training import training_options
from contract.tsv import Pair
from model_store import Manifest, Store
from model_store.correction_rows import TRAINABLE, CorrectionFilter, CorrectionRecord
from server.engine.artifacts import module_files, module_params
from server.serving.refresh_jobs import shared_domain
from trainer.corrections.correction_set import (
    CorrectionSet,
    correction_pairs,
    explain_empty,
    select_corrections,
)
from trainer.corrections.refresh_gate import RefreshGate, refresh_gate
from trainer.corrections.refresh_router import activate_refresh
from trainer.jobs.domain_job import (
    JobBackbone,
    JobFailed,
    TrainedModule,
    load_job_backbone,
    read_job_data,
    run_dir_of,
    train_job_module,
)
from trainer.jobs.pipeline import JobContext, job_artifact, refit_quality
from trainer.jobs.refresh_settings import RefreshSettings

log = logging.getLogger(__name__)
CHOICE_FILE = "corrections.json"


def run_refresh_job(ctx: JobContext) -> dict[str, Any]:
    job, store, refresh = ctx.job, ctx.store, ctx.settings.refresh
    spec = job.config["refresh"]
    base_version = int(spec["base_version"])
    options = training_options(job.config)
    backbone = load_job_backbone(store, job.config["backbone"])
    owner = backbone.manifest.name
    served = module_params(store.load("module", job.domain, base_version, backbone=owner).files)
    original, dev = read_original(store, spec["original_data"], refresh.data_dir)
    run_dir = run_dir_of(store, job.id)
    chosen = choose_corrections(store, job.domain, owner, run_dir, dev=dev, own=original,
                                settings=refresh, seed=options.seed)
    rng = random.Random(options.seed)
    earlier = earlier_corrections(store, job.domain, owner, chosen=chosen, dev=dev,
                                  limit=refresh.max_original_pairs, rng=rng)
    summary = chosen.summary() | {"replayed_corrections": len(earlier)}

    def report(fields: dict[str, Any]) -> None:
        scores = dict(fields.get("scores", {})) | {"refresh": summary}
        ctx.report(fields | {"scores": scores})

    report({"progress": 0.01})
    if not chosen.train or not chosen.held_out:
        raise JobFailed(f"not enough usable corrections: {explain_empty(chosen, refresh)}",
                        scores={"refresh": summary})
    replay = rng.sample(original, min(len(original), refresh.max_original_pairs))
    held_out = correction_pairs(chosen.held_out)
    train = replay + (correction_pairs(chosen.train) + earlier) * refresh.correction_weight
    log.info("refreshing %s v%d: %d new and %d earlier corrections (x%d), %d held back, "
             "%d original pairs", job.domain, base_version, len(chosen.train), len(earlier),
             refresh.correction_weight, len(held_out), len(replay))
    trained = train_job_module(backbone, dict(job.config["module"]), options,
                               data=(train, dev + held_out), run_dir=run_dir,
                               settings=ctx.settings, report=report,
                               should_stop=ctx.should_stop, initial=served)
    ctx.checkpoint("after training")
    report({"state": "evaluating", "progress": 0.9})
    gate = refresh_gate(backbone, str(job.config["module"]["family"]), served, trained.params,
                        dev=dev, held_out=held_out, margin_bleu=options.gate_margin_bleu,
                        min_gain_chrf=refresh.min_held_out_gain_chrf,
                        seed=options.seed)
    log.info("refresh gate: %s", gate.as_scores())
    scores = gate.as_scores() | {"refresh": summary, "training": {
        "steps": trained.steps, "stop_reason": trained.stop_reason,
        "train_seconds": trained.train_seconds, "pairs": trained.pairs}}
    ctx.report({"scores": scores, "progress": 0.95})
    module = job_artifact(store, "module", job.domain, job.id, owner) or publish_refresh(
        ctx, trained, gate=gate, backbone=backbone, summary=summary)
    if not gate.passed:
        raise JobFailed(f"{gate.refusal()}; {module.label} was published inactive for "
                        "inspection and the corrections stay unused", scores=scores,
                        result={"module_version": module.version, "active": False,
                                "base_version": base_version})
    ctx.checkpoint("before the router update")
    router = activate_refresh(
        store, job.domain, module, base_version=base_version, backbone=owner, job_id=job.id,
        fingerprint=backbone.manifest.backbone_fingerprint, settings=ctx.settings.router,
        router={"train_sources": [r.source for r in chosen.train],
                "held_sources": [r.source for r in chosen.held_out],
                "dev_sources": [s for s, _ in dev]})
    refit_quality(ctx, backbone, trained, dev_pairs=dev)
    marked = store.registry.mark_corrections_used([r.id for r in chosen.used()],
                                                  module.version)
    (run_dir / "checkpoint.pt").unlink(missing_ok=True)
    return {"module_version": module.version, "active": True, "base_version": base_version,
            "corrections_used": marked, "router": router}


def read_original(store: Store, reference: Mapping[str, str], data_dir: Path | None
                  ) -> tuple[list[Pair], list[Pair]]:
    """(train, dev) the refreshed module was first trained and gated with."""
    if "job" in reference:
        return read_job_data(store, reference["job"])
    path = reference.get("path", "")
    if data_dir is None:
        raise JobFailed(f"the domain's original data is {path!r} of the shipped data: set "
                        "NMT_TRAINER__REFRESH__DATA_DIR to the directory that holds it")
    folder = (data_dir / path).resolve()
    if not folder.is_relative_to(data_dir.resolve()) or not folder.is_dir():
        raise JobFailed(f"the domain's original data {path!r} is not a directory under "
                        f"{data_dir} (NMT_TRAINER__REFRESH__DATA_DIR)")
    source, _, target = path.split("/")[0].partition("-")
    return (_parallel(folder, "train", source, target), _parallel(folder, "dev", source, target))


def _parallel(folder: Path, split: str, source: str, target: str) -> list[Pair]:
    try:
        left = (folder / f"{split}.{source}").read_text(encoding="utf-8").splitlines()
        right = (folder / f"{split}.{target}").read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise JobFailed(f"cannot read the domain's original {split} data: {error}") from None
    if len(left) != len(right):
        raise JobFailed(f"{folder}/{split}.{source} and .{target} differ in line count")
    return [(s, t) for s, t in zip(left, right, strict=True) if s.strip() and t.strip()]


def earlier_corrections(store: Store, domain: str, backbone: str, *, chosen: CorrectionSet,
                        dev: Sequence[Pair], limit: int, rng: random.Random) -> list[Pair]:
    """The corrections earlier refreshes of the domain trained on (still trainable, not
    deleted), one per source, the newest winning; a source corrected again in this
    refresh, or now in the dev set, is left to the new correction; a seeded sample of at
    most `limit`."""
    records = store.registry.list_corrections(CorrectionFilter(
        domain=domain, backbone=backbone, untenanted=shared_domain(store, domain)))
    taken = {r.source for r in chosen.train + chosen.held_out + chosen.merged}
    taken.update(s for s, _ in dev)
    latest: dict[str, CorrectionRecord] = {}
    for record in sorted(records, key=lambda r: r.created_at):
        if record.used_in is not None and record.status in TRAINABLE \
                and record.source not in taken:
            latest[record.source] = record
    pairs = correction_pairs(latest.values())
    return rng.sample(pairs, limit) if len(pairs) > limit else pairs


def choose_corrections(store: Store, domain: str, backbone: str, run_dir: Path, *,
                       dev: Sequence[Pair], own: Sequence[Pair], settings: RefreshSettings,
                       seed: int) -> CorrectionSet:
    """The job's corrections: chosen on the first attempt and saved; a resumed attempt
    reads the same ones back (those deleted meanwhile are gone)."""
    saved = run_dir / CHOICE_FILE
    if saved.exists():
        ids: dict[str, list[str]] = json.loads(saved.read_text())
        every = [i for part in ids.values() for i in part]
        found = {r.id: r for r in store.registry.list_corrections(CorrectionFilter(ids=every))}
        parts = {part: [found[i] for i in chosen if i in found] for part, chosen in ids.items()}
        return CorrectionSet(train=parts["train"], held_out=parts["held_out"],
                             merged=parts["merged"], in_dev=parts["in_dev"],
                             contradicting=parts["contradicting"],
                             over_share=parts["over_share"])
    records = [r for r in store.registry.list_corrections(
        CorrectionFilter(domain=domain, backbone=backbone, unused=True,
                         untenanted=shared_domain(store, domain)))
        if r.status in TRAINABLE]  # a shared domain: not tenants' corrections of it
    chosen = select_corrections(records, dev_sources=[s for s, _ in dev], settings=settings,
                                seed=seed, own=own)
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = saved.with_suffix(".tmp")
    tmp.write_text(json.dumps({part: [r.id for r in getattr(chosen, part)] for part in
                               ("train", "held_out", "merged", "in_dev", "contradicting",
                                            "over_share")}))
    tmp.replace(saved)
    return chosen


def publish_refresh(ctx: JobContext, trained: TrainedModule, *, gate: RefreshGate,
                    backbone: JobBackbone, summary: dict[str, Any]) -> Manifest:
    job = ctx.job
    spec = job.config["refresh"]
    return ctx.store.publish(
        "module", job.domain, module_files(trained.params, half=ctx.settings.half),
        config=trained.config, backbone_fingerprint=backbone.manifest.backbone_fingerprint,
        backbone=backbone.manifest.name,
        provenance={"job": job.id, "recipe": "corrections refresh",
                    "base_version": spec["base_version"],
                    "original_data": spec["original_data"], "corrections": summary,
                    "pairs": trained.pairs, "steps": trained.steps,
                    "stop_reason": trained.stop_reason, "train_seconds": trained.train_seconds,
                    "seed": job.config["training"]["seed"]},
        scores={"dev": gate.dev_after.as_dict(),
                "held_out_corrections": gate.held_after.as_dict(),
                "gate": gate.as_scores()["gate"]})
