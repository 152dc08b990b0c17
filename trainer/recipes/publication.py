"""Stage 4 of the default model's recipe: publication of the backbone, the adapters and the
router as built-in artifacts (a new version only where the files changed), with the
model card."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from contract.artifacts import (
    CLASSIFIER_MODEL_FILE,
    MODULE_WEIGHTS_FILE,
)
from contract.backbone import BackboneConfig
from contract.manifest import MANIFEST_FILE
from model_store import ArtifactKind, Manifest, Store
from model_store.hashing import sha256_hex
from server.engine.artifacts import module_files
from server.engine.backbone import Backbone
from trainer.recipes.default_stages import (
    BACKBONE_NAME,
    ROUTER_NAME,
    backbone_progress,
    load_trained_backbone,
    published_backbone_files,
)
from trainer.recipes.model_card import write_model_card
from trainer.recipes.router_stage import (
    DOMAIN_EXTRAS,
    GENERIC_GENRES,
    GENERIC_LABEL,
    GENERIC_TRAIN,
    SISTER_DOMAINS,
    SISTER_PAIRS,
    router_config,
    router_files,
)
from trainer.recipes.snapshot import remove_if_superseded
from trainer.training.average import checkpoint_step

log = logging.getLogger("trainer.recipes.default_en_fr")


def publish_builtin(data_dir: Path, run_dir: Path, out: Path, *, snapshot: Path) -> None:
    """Publish every trained artifact as the next version of its built-in name, then make
    `out` (the package's read-only built-in directory) hold exactly the newest version of
    each name. Built-in versions are immutable: a retrained module ships as a new version,
    and stores that served the old built-in version move to it on their next open
    (`Store.register_builtins`). A backbone whose files did not change keeps its version,
    so the modules of every store stay valid for it; a new one keeps the creation time of
    the one it replaces, so en->fr stays the default direction. A backbone snapshot that is
    no further along than the published backbone is removed."""
    model, tokenizer = load_trained_backbone(run_dir)
    progress = backbone_progress(run_dir)
    files = published_backbone_files(run_dir, model)
    builtin = out if out.is_dir() else None
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp), builtin_dir=builtin) as store:
        active = store.registry.get_active("backbone", BACKBONE_NAME)
        replaced = None if active is None else store.record(
            "backbone", BACKBONE_NAME, active).manifest.created_at
        fingerprint = _backbone_version(store, files, model.config, progress)
        for result_path in sorted((run_dir / "adapters").glob("*/result.json")):
            _publish_adapter(store, result_path, fingerprint)
        _publish_router(store, run_dir / "classifier", fingerprint)
        published = install_published(Path(tmp), out)
    if replaced is not None:
        for path in published:
            if path.parent == out / "backbones" / BACKBONE_NAME:
                keep_created_at(path, replaced)
    remove_if_superseded(snapshot, published_step=progress["step"], published_config=model.config)
    _write_card(run_dir, out, model, progress)
    log.info("built-in artifacts written to %s: %s", out,
             ", ".join(str(p.relative_to(out)) for p in published))


def keep_created_at(version: Path, created_at: datetime) -> None:
    """Give a built-in backbone version the creation time of the one it replaces: the
    default direction is the oldest backbone registered (model_store/registry.py
    `default_backbone`), so en->fr must stay older than fr->en when it ships anew."""
    path = version / MANIFEST_FILE
    manifest = Manifest.from_json(path.read_bytes())
    path.write_bytes(manifest.model_copy(update={"created_at": created_at}).to_json())


def adapter_files(adapter_dir: Path) -> dict[str, bytes]:
    """A trained adapter's artifact files as publish writes them: its banks int8, as the
    backbone (every direction's publication reads them here)."""
    return module_files(load_file(str(adapter_dir / MODULE_WEIGHTS_FILE)), int8_rows=True)


def gpu_run(run_dir: Path) -> dict[str, Any] | None:
    """The log of the GPU run a run dir was restored from (trainer/gpu/restore.py), if any."""
    path = run_dir / "gpu_run.json"
    return json.loads(path.read_text()) if path.exists() else None


def _write_card(run_dir: Path, out: Path, model: Backbone, progress: dict[str, Any]) -> None:
    write_model_card(out, run_dir, config=model.config,
                     parameters=sum(p.numel() for p in model.parameters()),
                     adapter_sizes=_adapter_sizes(run_dir), progress=progress,
                     generic_lines=GENERIC_TRAIN, domain_extras=DOMAIN_EXTRAS,
                     sister_pairs={pair: SISTER_DOMAINS for pair in SISTER_PAIRS},
                     averaged_steps=averaged_steps(run_dir), gpu_run=gpu_run(run_dir))


def publish_router(run_dir: Path, out: Path) -> None:
    """Publish only the router (as the next version of its built-in name, for the built-in
    backbone that is active), leaving the backbone and the modules as they are: for a router
    retrained on its own, on the backbone it routes for. The model card is rewritten when
    the run dir's backbone is the built-in one (else it would describe another backbone)."""
    has_backbone = (run_dir / "backbone" / "checkpoint.pt").exists()
    model = load_trained_backbone(run_dir)[0] if has_backbone else None
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp), builtin_dir=out) as store:
        version = store.registry.get_active("backbone", BACKBONE_NAME)
        if version is None:
            raise ValueError(f"no built-in backbone {BACKBONE_NAME!r} in {out}")
        fingerprint = store.record("backbone", BACKBONE_NAME, version).manifest \
            .backbone_fingerprint
        same_backbone = model is not None and _active_with(
            store, "backbone", BACKBONE_NAME,
            published_backbone_files(run_dir, model)) is not None
        _publish_router(store, run_dir / "classifier", fingerprint)
        published = install_published(Path(tmp), out)
    if model is not None and same_backbone:
        _write_card(run_dir, out, model,
                    backbone_progress(run_dir))
    else:
        log.warning("the run dir holds another backbone than the built-in one, or none: "
                    "model card left as is")
    log.info("router written to %s: %s", out,
             ", ".join(str(p.relative_to(out)) for p in published) or "unchanged")


def install_version(source: Path, target: Path) -> Path:
    """Copy one version directory to `target` and remove the older versions of that name
    beside it (a built-in directory holds the newest only)."""
    shutil.copytree(source, target)
    for old in target.parent.iterdir():
        if old != target:
            shutil.rmtree(old)
    return target


def install_published(tmp: Path, out: Path) -> list[Path]:
    """Copy the versions published into the scratch store `tmp` (flat and
    `directions/<backbone>/` layouts alike; its staging directories skipped) to `out`.
    Returns their paths under `out`."""
    return [install_version(manifest.parent, out / manifest.parent.relative_to(tmp))
            for manifest in sorted(tmp.rglob(MANIFEST_FILE))
            if not manifest.relative_to(tmp).parts[0].startswith(".")]


def _backbone_version(store: Store, files: dict[str, bytes], config: BackboneConfig,
                      progress: dict[str, Any]) -> str:
    """The fingerprint of the backbone to publish the modules for: the built-in one when
    its files are these, else a newly published version."""
    current = _active_with(store, "backbone", BACKBONE_NAME, files)
    if current is not None:
        log.info("backbone unchanged: keeping %s", current.label)
        return current.backbone_fingerprint
    return store.publish("backbone", BACKBONE_NAME, files, config=config.to_dict(),
                         provenance=_backbone_provenance(progress)).backbone_fingerprint


def averaged_steps(run_dir: Path) -> list[int]:
    """The steps of the checkpoints the run's backbone checkpoint is the mean of (written by
    trainer/training/average.py), or [] when it is a training checkpoint."""
    saved = torch.load(run_dir / "backbone" / "checkpoint.pt", weights_only=True,
                       map_location="cpu")
    return [checkpoint_step(Path(path)) for path in saved.get("averaged", [])]


def _adapter_sizes(run_dir: Path) -> list[int]:
    """Each distinct adapter size, smallest first (domains may have other bottlenecks)."""
    found = (run_dir / "adapters").glob("*/module.safetensors")
    return sorted({sum(t.numel() for t in load_file(str(path)).values()) for path in found})


def _backbone_provenance(progress: dict[str, Any]) -> dict[str, Any]:
    return {"recipe": "trainer/recipes/default_en_fr.py", "data": "shared/data en-fr: 7 domains "
            "+ extra genres (train splits)", "steps": progress["step"],
            "target_tokens": progress["target_tokens"],
            "train_seconds": round(progress["elapsed_s"], 1),
            # where the training batches stopped: a warm start reads on from there
            "epoch": progress["epoch"], "batch_in_epoch": progress["batch_in_epoch"],
            # what the LibreTranslate API lists (server/textproc/languages.py)
            "languages": {"source": "en", "target": "fr"}}


def _active_with(store: Store, kind: ArtifactKind, name: str,
                 files: dict[str, bytes]) -> Manifest | None:
    """The active version of `kind`/`name` when it holds exactly these files (then
    republishing would only add a duplicate version)."""
    active = store.registry.get_active(kind, name)
    if active is None:
        return None
    manifest = store.record(kind, name, active).manifest
    if manifest.file_hashes != {path: sha256_hex(data) for path, data in files.items()}:
        return None
    return manifest


def _unchanged(store: Store, kind: ArtifactKind, name: str, files: dict[str, bytes],
               fingerprint: str, *, config: dict[str, Any] | None = None) -> bool:
    """The active version of `kind`/`name` holds these files (and `config`, when given)
    for this backbone."""
    manifest = _active_with(store, kind, name, files)
    if manifest is None or manifest.backbone_fingerprint != fingerprint \
            or (config is not None and dict(manifest.config) != config):
        return False
    log.info("%s unchanged: keeping %s", name, manifest.label)
    return True


def _publish_adapter(store: Store, result_path: Path, fingerprint: str) -> None:
    result = json.loads(result_path.read_text())
    files = adapter_files(result_path.parent)
    if _unchanged(store, "module", result["domain"], files, fingerprint):
        return
    store.publish("module", result["domain"], files,
                  config=result["config"], backbone_fingerprint=fingerprint,
                  provenance={"data": f"shared/data en-fr/domains/{result['domain']}/train",
                              "pairs": result["pairs"], "steps": result["steps"],
                              "train_seconds": result["train_seconds"]},
                  scores={"dev": result["dev"], "backbone_dev": result["backbone_dev"]})


CALIBRATION_SCORES = ("dev_nll", "dev_nll_uncalibrated")


def _publish_router(store: Store, directory: Path, fingerprint: str) -> None:
    if not (directory / CLASSIFIER_MODEL_FILE).exists():
        return
    scores = json.loads((directory / "accuracy.json").read_text())
    files, config = router_files(directory), router_config(scores)
    labels = config["labels"]
    if _unchanged(store, "classifier", ROUTER_NAME, files, fingerprint, config=config):
        return
    sisters = ",".join(d for d in SISTER_DOMAINS if d in labels)
    data = "shared/data en-fr/domains/*/train.en" + "".join(
        f", {pair}/domains/{{{sisters}}}/train.en (lines of en-fr dev/test left out)"
        for pair in SISTER_PAIRS)
    data += "".join(f"; {domain} also: {count} lines drawn from en-fr/extra/{genre}/train.en"
                    for domain, (genre, count) in sorted(DOMAIN_EXTRAS.items()))
    if GENERIC_LABEL in labels:
        genres = ",".join(GENERIC_GENRES)
        data += (f"; {GENERIC_LABEL}: {GENERIC_TRAIN} lines drawn from "
                 f"en-fr/extra/{{{genres}}}/train.en")
    store.publish("classifier", ROUTER_NAME, files,
                  config=config, backbone_fingerprint=fingerprint,
                  provenance={"data": data},
                  scores={"dev_accuracy": round(scores["dev_accuracy"], 4),
                          "per_domain": {k: round(v, 4) for k, v in scores["per_domain"].items()},
                          **{key: round(scores[key], 4) for key in CALIBRATION_SCORES
                             if key in scores}})
