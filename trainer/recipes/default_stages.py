"""Stage 2 of the default model's recipe: one residual adapter per domain against the
frozen backbone, and the run directory's restore from a built-in or a snapshot. The router
is stage 3 (router_stage.py), publication as built-in artifacts stage 4 (publication.py)."""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from contract.artifacts import (
    BACKBONE_CONFIG_FILE,
    MODULE_WEIGHTS_FILE,
    SOURCE_SPM_FILE,
)
from contract.backbone import BackboneConfig
from model_store import Store
from model_store.hashing import sha256_hex
from server.engine.artifacts import (
    BackboneParts,
    backbone_files,
    backbone_parts,
    module_params,
)
from server.engine.backbone import Backbone
from server.engine.tokenizer import Tokenizer
from trainer.recipes.directions import EN_FR, Direction
from trainer.recipes.snapshot import load_snapshot, position
from trainer.recipes.warm_start import restore_warm_start
from trainer.training.data import Corpus, encode_pairs
from trainer.training.evaluate import evaluate_texts
from trainer.training.loop import Checkpoints, Progress, ShouldStop, TrainSettings
from trainer.training.modules import train_module

log = logging.getLogger("trainer.recipes.default_en_fr")

BACKBONE_NAME = "default-en-fr"
ROUTER_NAME = "router"
MAX_LEN = 128


def domain_corpus(data_dir: Path, domain: str, split: str,
                  direction: Direction = EN_FR) -> Corpus:
    """A domain's `split` pairs, `direction`'s source side first."""
    return direction.corpus(domain, data_dir / direction.pair / "domains" / domain, split)


def backbone_progress_path(run_dir: Path) -> Path:
    """Where the backbone stage's checkpoint records its progress (trainer/training/loop.py
    `Checkpoints`, in the stage's folder `backbone`)."""
    return run_dir / "backbone" / "progress.json"


def backbone_progress(run_dir: Path) -> dict[str, Any]:
    """The backbone stage's progress as its last checkpoint saved it (step, epoch, ...)."""
    loaded: dict[str, Any] = json.loads(backbone_progress_path(run_dir).read_text())
    return loaded


def load_trained_backbone(run_dir: Path) -> tuple[Backbone, Tokenizer]:
    config = BackboneConfig.from_dict(json.loads((run_dir / BACKBONE_CONFIG_FILE).read_text()))
    model = Backbone(config)
    saved = torch.load(run_dir / "backbone" / "checkpoint.pt", weights_only=True)
    model.load_state_dict(saved["model"])
    model.eval().requires_grad_(False)
    spm_bytes = (run_dir / "spm.model").read_bytes()
    tokenizer = Tokenizer(spm_bytes, vocab=None, eos_id=config.eos_id, unk_id=config.unk_id,
                          pad_id=config.pad_id)
    return model, tokenizer


def train_adapter(data_dir: Path, run_dir: Path, domain: str, settings: TrainSettings, *,
                  config: dict[str, Any], should_stop: ShouldStop | None = None,
                  direction: Direction = EN_FR) -> None:
    """Raises TrainingInterrupted (checkpoint saved) when `should_stop` asks for it."""
    out_dir = run_dir / "adapters" / domain
    if (out_dir / "result.json").exists():
        log.info("adapter %s: already trained", domain)
        return
    model, tokenizer = load_trained_backbone(run_dir)
    train = domain_corpus(data_dir, domain, "train", direction).read()
    dev = domain_corpus(data_dir, domain, "dev", direction).read()
    data = encode_pairs(train, tokenizer.processor, max_len=MAX_LEN)
    generic, _ = evaluate_texts(model, tokenizer, tokenizer, dev)
    log.info("adapter %s: %d pairs; backbone dev BLEU %.2f", domain, len(data), generic.bleu)
    result = train_module(model, dict(config), data, dev, source=tokenizer, target=tokenizer,
                          settings=settings, run_dir=out_dir, should_stop=should_stop)
    save_file({k: v.contiguous() for k, v in result.params.items()},
              str(out_dir / MODULE_WEIGHTS_FILE))
    summary = {"domain": domain, "config": result.config, "lr": settings.lr, "pairs": len(data),
               "dev": result.dev.as_dict(), "backbone_dev": generic.as_dict(),
               "steps": result.progress.step, "stop_reason": result.progress.stop_reason,
               "train_seconds": round(result.progress.elapsed_s, 1)}
    (out_dir / "result.json").write_text(json.dumps(summary, indent=1))
    log.info("adapter %s: dev BLEU %.2f (backbone %.2f)", domain, result.dev.bleu, generic.bleu)


def restore_run_dir(run_dir: Path, builtin: Path, *, snapshot: Path,
                    backbone: str = BACKBONE_NAME) -> bool:
    """Rebuild the backbone stage's outputs (config, vocabulary, weights, position) from
    the published built-in backbone, or from the recipe's committed snapshot when that is
    further along or of another architecture (trainer/recipes/snapshot.py), so later
    stages (adapters, router, publish) can run on a machine without the training
    checkpoint. False when there is nothing to do.

    The checkpoint holds the model only (no optimizer state): resuming the backbone stage
    from it warm-starts a fresh optimizer at the saved step and batch."""
    checkpoint = run_dir / "backbone" / "checkpoint.pt"
    if checkpoint.exists():
        return False
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp), builtin_dir=builtin) as store:
        loaded = store.load_backbone(backbone)
    parts, spm_bytes = backbone_parts(loaded.files), loaded.files[SOURCE_SPM_FILE]
    provenance = loaded.manifest.provenance  # written at publication (publication.py)
    progress = position({**provenance, "step": provenance.get("steps", 0),
                         "elapsed_s": provenance.get("train_seconds", 0.0)})
    source = f"the published {loaded.manifest.label}"
    saved = load_snapshot(snapshot)
    # Only the recipe that trains now writes snapshots: one of another architecture than the
    # published backbone belongs to a newer recipe and is taken whatever its step.
    if saved is not None and (saved.progress.step > progress.step
                              or saved.parts.config != parts.config):
        parts, spm_bytes, progress = saved.parts, saved.spm, saved.progress
        source = f"the snapshot in {snapshot}"
    _write_run_dir(run_dir, parts, spm_bytes, progress, source)
    if source.startswith("the published"):
        restore_warm_start(run_dir, provenance)  # how it began, for its model card
    return True


def published_backbone_files(run_dir: Path, model: Backbone) -> dict[str, bytes]:
    """The backbone's artifact files as publish writes them: the matrices int8 with per-row
    scales, the rest float16 (server/engine/row_int8.quantize_rows: within 0.1 BLEU of
    float16, benchmarks/results/compact_weights.md), so both directions fit the repository."""
    spm_bytes = (run_dir / "spm.model").read_bytes()
    return backbone_files(model.config, model.state_dict(), source_spm=spm_bytes,
                          target_spm=spm_bytes, int8_rows=True)


def published_hashes(run_dir: Path, model: Backbone) -> dict[str, str]:
    """Equal to a published backbone's file hashes when the run dir's backbone is that one."""
    return {path: sha256_hex(data)
            for path, data in published_backbone_files(run_dir, model).items()}


def restore_adapters(run_dir: Path, builtin: Path, *, backbone: str) -> list[str]:
    """When the run dir's backbone is the published one: put its published adapters back
    in the run dir (weights dequantized from their int8 files, `result.json` from their
    manifests) for every domain the run dir has none of, so the publish stage, which
    publishes what the run dir holds, keeps them as they are (unchanged files: no new
    version) beside the ones retrained here, and the model card lists all. Returns the
    domains put back (none for a backbone trained further: its adapters are retrained)."""
    restored: list[str] = []
    if not builtin.is_dir() or not (run_dir / "backbone" / "checkpoint.pt").exists():
        return restored
    model, _ = load_trained_backbone(run_dir)
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp), builtin_dir=builtin) as store:
        if store.registry.get_active("backbone", backbone) is None or \
                store.load_backbone(backbone).manifest.file_hashes != \
                published_hashes(run_dir, model):
            return restored
        for domain in sorted(store.active_domains(backbone)):
            out_dir = run_dir / "adapters" / domain
            if (out_dir / "result.json").exists():
                continue
            loaded = store.load("module", domain, backbone=backbone)
            manifest, provenance = loaded.manifest, loaded.manifest.provenance
            out_dir.mkdir(parents=True, exist_ok=True)
            save_file({k: v.contiguous() for k, v in module_params(loaded.files).items()},
                      str(out_dir / MODULE_WEIGHTS_FILE))
            summary = {"domain": domain, "config": dict(manifest.config),
                       "pairs": provenance.get("pairs"), "dev": manifest.scores.get("dev"),
                       "backbone_dev": manifest.scores.get("backbone_dev"),
                       "steps": provenance.get("steps"),
                       "stop_reason": f"published {manifest.label}",
                       "train_seconds": provenance.get("train_seconds")}
            if "lr" in provenance:  # recorded since 2026-11-30 (the model card's column)
                summary["lr"] = provenance["lr"]
            (out_dir / "result.json").write_text(json.dumps(summary, indent=1))
            restored.append(domain)
    if restored:
        log.info("adapters put back from the published ones: %s", ", ".join(restored))
    return restored


def restore_from_snapshot(run_dir: Path, snapshot: Path) -> bool:
    """`restore_run_dir` for a backbone that is not published yet (another direction's):
    from its committed snapshot alone. False when there is nothing to do."""
    if (run_dir / "backbone" / "checkpoint.pt").exists():
        return False
    saved = load_snapshot(snapshot)
    if saved is None:
        raise FileNotFoundError(f"no snapshot in {snapshot} to restore the run dir from")
    _write_run_dir(run_dir, saved.parts, saved.spm, saved.progress, f"the snapshot in {snapshot}")
    return True


def _write_run_dir(run_dir: Path, parts: BackboneParts, spm_bytes: bytes, progress: Progress,
                   source: str) -> None:
    checkpoint = run_dir / "backbone" / "checkpoint.pt"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    (run_dir / BACKBONE_CONFIG_FILE).write_text(json.dumps(parts.config.to_dict(), indent=1))
    (run_dir / "spm.model").write_bytes(spm_bytes)
    torch.save({"model": parts.tensors, "progress": asdict(progress)}, checkpoint)
    Checkpoints(checkpoint.parent).write_progress(progress)
    log.info("run dir restored from %s (step %d, epoch %d, batch %d)", source, progress.step,
             progress.epoch, progress.batch_in_epoch)


