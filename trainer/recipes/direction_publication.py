"""Stage 4 of the default recipe for a direction other than en-fr (`--direction fr-en`):
its backbone, adapters and router (none for a direction that routes with another's of the
same source language: en-de) published into the built-in directory beside en-fr's, in
the layout of docs/DIRECTIONS.md:

    backbones/default-fr-en/v<n>/
    directions/default-fr-en/modules/<domain>/v<n>/
    directions/default-fr-en/classifiers/router/v<n>/
    MODEL_CARD-fr-en.md

The files are written as en-fr's are (default_stages.py's `published_backbone_files`,
publication.py's `adapter_files`): only where to put them and what their provenance says
differ. Every name is looked up within this direction's backbone: both directions have a
`medical` module and a `router`.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from contract.artifacts import CLASSIFIER_MODEL_FILE
from model_store import ArtifactKind, Manifest, Store
from model_store.hashing import sha256_hex
from trainer.recipes.default_stages import (
    ROUTER_NAME,
    backbone_progress,
    load_trained_backbone,
    published_backbone_files,
)
from trainer.recipes.directions import Direction
from trainer.recipes.model_card import write_model_card
from trainer.recipes.publication import (
    CALIBRATION_SCORES,
    _adapter_sizes,
    adapter_files,
    averaged_steps,
    gpu_run,
    install_version,
)
from trainer.recipes.router_stage import (
    DOMAIN_EXTRAS,
    GENERIC_GENRES,
    GENERIC_TRAIN,
    SISTER_DOMAINS,
    router_config,
    router_files,
    sister_pairs_of,
)
from trainer.recipes.snapshot import remove_if_superseded
from trainer.recipes.warm_start import warm_start_provenance

log = logging.getLogger("trainer.recipes.default_en_fr")
DIRECTIONS_DIR = "directions"  # model_store/layering.py's layout


def publish_direction(data_dir: Path, run_dir: Path, out: Path, direction: Direction, *,
                      snapshot: Path) -> list[Path]:
    """Publish the run dir's backbone, adapters and router as the next built-in versions
    of `direction`'s names in `out` (where the files changed), leave every other
    backbone's artifacts as they are, and write the direction's model card. Returns the
    version directories written. A snapshot no further along than the published backbone
    is removed, as for en-fr."""
    name = direction.backbone_name
    model, _ = load_trained_backbone(run_dir)
    progress = backbone_progress(run_dir)
    files = published_backbone_files(run_dir, model)
    builtin = out if out.is_dir() else None
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp), builtin_dir=builtin) as store:
        new: list[Manifest] = []
        backbone = _active_with(store, "backbone", name, files, backbone=None)
        if backbone is None:
            backbone = store.publish("backbone", name, files, config=model.config.to_dict(),
                                     provenance=_provenance(direction, progress) |
                                     warm_start_provenance(run_dir))
            new.append(backbone)
        else:
            log.info("backbone unchanged: keeping %s", backbone.label)
        fingerprint = backbone.backbone_fingerprint
        for result_path in sorted((run_dir / "adapters").glob("*/result.json")):
            new += _publish_adapter(store, result_path, fingerprint, direction)
        if direction.router_from is None:  # otherwise it routes with that direction's
            new += _publish_router(store, run_dir / "classifier", fingerprint, direction)
        published = [_install(store, Path(tmp), out, manifest, name) for manifest in new]
    remove_if_superseded(snapshot, published_step=progress["step"], published_config=model.config)
    card = write_model_card(out, run_dir, config=model.config,
                            parameters=sum(p.numel() for p in model.parameters()),
                            adapter_sizes=_adapter_sizes(run_dir), progress=progress,
                            generic_lines=GENERIC_TRAIN, domain_extras=DOMAIN_EXTRAS,
                            sister_pairs={pair: SISTER_DOMAINS
                                          for pair in sister_pairs_of(direction)},
                            averaged_steps=averaged_steps(run_dir),
                            gpu_run=gpu_run(run_dir), direction=direction)
    log.info("%s published to %s: %s; model card %s", name, out,
             ", ".join(str(p.relative_to(out)) for p in published) or "unchanged", card.name)
    return published


def publish_direction_router(run_dir: Path, out: Path, direction: Direction) -> list[Path]:
    """Publish the run dir's router alone, as the next built-in version of `direction`'s
    router for its published backbone (which, with its modules and model card, stays as
    it is). Returns the version directories written (none when the router is unchanged)."""
    name = direction.backbone_name
    if direction.router_from is not None:
        raise ValueError(f"{direction.name} ships no router: the server routes it with "
                         f"{direction.router_from}'s (the same source language)")
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp), builtin_dir=out) as store:
        version = store.registry.get_active("backbone", name)
        if version is None:
            raise ValueError(f"no built-in backbone {name!r} in {out}")
        fingerprint = store.record("backbone", name, version).manifest.backbone_fingerprint
        new = _publish_router(store, run_dir / "classifier", fingerprint, direction)
        published = [_install(store, Path(tmp), out, manifest, name) for manifest in new]
    log.info("router of %s written to %s: %s", name, out,
             ", ".join(str(p.relative_to(out)) for p in published) or "unchanged")
    return published


def built_in_path(manifest: Manifest, backbone: str) -> str:
    """Where a version lives in the built-in directory: a backbone under `backbones/`, its
    modules and classifiers under `directions/<backbone>/`, whichever backbone is the
    default of a store that opens it (the directory names their backbone)."""
    relative = f"{manifest.kind}s/{manifest.name}/v{manifest.version}"
    return relative if manifest.kind == "backbone" else f"{DIRECTIONS_DIR}/{backbone}/{relative}"


def _install(store: Store, tmp: Path, out: Path, manifest: Manifest, backbone: str) -> Path:
    """Copy one version published into the scratch store `tmp` to `out`, and remove the
    older versions of that name there (the built-in directory holds the newest only)."""
    scope = None if manifest.kind == "backbone" else backbone
    location = store.record(manifest.kind, manifest.name, manifest.version,
                            backbone=scope).location
    return install_version(tmp / location, out / built_in_path(manifest, backbone))


def _active_with(store: Store, kind: ArtifactKind, name: str, files: dict[str, bytes], *,
                 backbone: str | None) -> Manifest | None:
    """The active version of `backbone`'s `kind`/`name` when it holds exactly these files."""
    active = store.registry.get_active(kind, name, backbone=backbone)
    if active is None:
        return None
    manifest = store.record(kind, name, active, backbone=backbone).manifest
    if manifest.file_hashes != {path: sha256_hex(data) for path, data in files.items()}:
        return None
    return manifest


def _unchanged(store: Store, kind: ArtifactKind, name: str, files: dict[str, bytes],
               fingerprint: str, backbone: str, config: dict[str, Any] | None = None) -> bool:
    manifest = _active_with(store, kind, name, files, backbone=backbone)
    if manifest is None or manifest.backbone_fingerprint != fingerprint \
            or (config is not None and dict(manifest.config) != config):
        return False
    log.info("%s of %s unchanged: keeping %s", name, backbone, manifest.label)
    return True


def _publish_adapter(store: Store, result_path: Path, fingerprint: str,
                     direction: Direction) -> list[Manifest]:
    result = json.loads(result_path.read_text())
    domain, backbone = result["domain"], direction.backbone_name
    files = adapter_files(result_path.parent)
    if _unchanged(store, "module", domain, files, fingerprint, backbone):
        return []
    return [store.publish(
        "module", domain, files, config=result["config"], backbone_fingerprint=fingerprint,
        backbone=backbone,
        provenance={"data": f"shared/data {direction.pair}/domains/{domain}/train."
                            f"{{{direction.source},{direction.target}}} "
                            f"({direction.source} side first)",
                    "pairs": result["pairs"], "steps": result["steps"],
                    "train_seconds": result["train_seconds"],
                    **({"lr": result["lr"]} if "lr" in result else {})},
        scores={"dev": result["dev"], "backbone_dev": result["backbone_dev"]})]


def _publish_router(store: Store, directory: Path, fingerprint: str,
                    direction: Direction) -> list[Manifest]:
    if not (directory / CLASSIFIER_MODEL_FILE).exists():
        return []
    scores = json.loads((directory / "accuracy.json").read_text())
    files, config = router_files(directory), router_config(scores)
    backbone, side = direction.backbone_name, direction.source
    if _unchanged(store, "classifier", ROUTER_NAME, files, fingerprint, backbone, config):
        return []
    data = f"shared/data {direction.pair}/domains/*/train.{side}" + "".join(
        f", {pair}/domains/{{{','.join(d for d in SISTER_DOMAINS if d in config['labels'])}}}"
        f"/train.{side} (lines of dev/test splits left out)"
        for pair in sister_pairs_of(direction)) + "".join(
        f"; {domain} also: {count} lines drawn from en-fr/extra/{genre}/train.{side}"
        for domain, (genre, count) in sorted(DOMAIN_EXTRAS.items()))
    data += (f"; generic: {GENERIC_TRAIN} lines drawn from "
             f"en-fr/extra/{{{','.join(GENERIC_GENRES)}}}/train.{side}")
    return [store.publish(
        "classifier", ROUTER_NAME, files, config=config, backbone_fingerprint=fingerprint,
        backbone=backbone, provenance={"data": data},
        scores={"dev_accuracy": round(scores["dev_accuracy"], 4),
                "per_domain": {k: round(v, 4) for k, v in scores["per_domain"].items()},
                **{key: round(scores[key], 4) for key in CALIBRATION_SCORES if key in scores}})]


def _provenance(direction: Direction, progress: dict[str, Any]) -> dict[str, Any]:
    return {"recipe": f"trainer/recipes/default_en_fr.py --direction {direction.name}",
            "data": f"shared/data {direction.pair}: 7 domains + extra genres (train splits), "
                    f"{direction.source} side first",
            "steps": progress["step"], "target_tokens": progress["target_tokens"],
            "train_seconds": round(progress["elapsed_s"], 1),
            # where the training batches stopped: a warm start reads on from there
            "epoch": progress["epoch"], "batch_in_epoch": progress["batch_in_epoch"],
            # what /languages and the LibreTranslate API list (server/textproc/languages.py)
            "languages": {"source": direction.source, "target": direction.target}}
