"""Re-store the built-in directory's float weights compactly (issue #43): every active
backbone whose `model.safetensors` holds no int8 yet becomes a new version with its
matrices as int8 rows (server/engine/row_int8.py), and its modules and routers new
versions for it: the modules' banks int8 too, the routers' files as they are.

    python -m trainer.recipes.compact_builtin [--out model_store/builtin]

The new backbone version names the one it re-stores in `provenance.compact_of`
(model_store/compact.py), so the modules an operator trained on the float16 version keep
serving on it; it keeps that version's creation time, so which backbone is the default
(the oldest) does not change. Each new version replaces the older ones of its name in
`--out` (as the publish stage does); a store that registered them moves to the new ones on
its next open (`Store.register_builtins`). The publish stage itself ships int8 from then
on (trainer/recipes/publication.py).

Every active router whose `classifier.bin` is fastText's own file becomes a new version
with the same model xz-compressed (server/routing/classifier.py; 37% fewer bytes, the same
routing to the last bit: benchmarks/results/builtin_size.md); routers trained since are
written compressed.

Every active backbone that ships its one vocabulary twice (`target.spm` byte-identical to
`source.spm`, and `target.vocab` to `source.vocab`) becomes a new version without the
target files: no target.spm means "the target vocabulary is the source one"
(contract/artifacts.py). Its fingerprint is the same (a shared vocabulary's target files
enter it as the source ones), so its modules and routers stay as they are.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from contract.artifacts import (
    BACKBONE_WEIGHTS_FILE,
    CLASSIFIER_MODEL_FILE,
    SOURCE_SPM_FILE,
    SOURCE_VOCAB_FILE,
    TARGET_SPM_FILE,
    TARGET_VOCAB_FILE,
)
from contract.manifest import Manifest
from contract.tensors import tensors_from_bytes, tensors_to_bytes
from model_store import BUILTIN_DIR, Store
from model_store.compact import COMPACT_OF
from server.engine.artifacts import module_files, module_params
from server.engine.row_int8 import SCALE_SUFFIX, quantize_rows
from server.routing.classifier import XZ_MAGIC, stored_model
from trainer.recipes.publication import install_published, keep_created_at

log = logging.getLogger(__name__)
STORAGE = "int8-rows"


def compact_builtin(out: Path) -> list[Path]:
    """Re-store `out`'s float backbones (and their modules and routers) compactly; returns
    the version directories written."""
    created: dict[str, datetime] = {}
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp), builtin_dir=out) as store:
        for name in sorted(store.active_backbones()):
            loaded = store.load("backbone", name)
            tensors = tensors_from_bytes(loaded.files[BACKBONE_WEIGHTS_FILE])
            if any(key.endswith(SCALE_SUFFIX) for key in tensors):
                log.info("%s is compact already", loaded.label)
                continue
            old = loaded.manifest
            files = {**loaded.files,
                     BACKBONE_WEIGHTS_FILE: tensors_to_bytes(quantize_rows(tensors))}
            compact_of = {"version": old.version, "backbone_fingerprint":
                          old.backbone_fingerprint, "storage": STORAGE}
            new = store.publish("backbone", name, files, config=old.config,
                                provenance={**old.provenance, COMPACT_OF: compact_of},
                                scores=old.scores)
            created[f"backbones/{name}/v{new.version}"] = old.created_at
            _republish_dependents(store, name, new.backbone_fingerprint)
        written = install_published(Path(tmp), out)
    for key, created_at in created.items():  # the default backbone stays the oldest
        keep_created_at(out / key, created_at)
    return written


def compress_routers(out: Path) -> list[Path]:
    """Re-store `out`'s active routers whose fastText model is not compressed yet: a new
    version each, the same files but `classifier.bin` xz-compressed; returns the version
    directories written."""
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp), builtin_dir=out) as store:
        for backbone in sorted(store.active_backbones()):
            for name in sorted(store.registry.active_versions("classifier", backbone=backbone)):
                loaded = store.load("classifier", name, backbone=backbone)
                model = loaded.files[CLASSIFIER_MODEL_FILE]
                if model.startswith(XZ_MAGIC):
                    continue
                old = loaded.manifest
                files = {**loaded.files, CLASSIFIER_MODEL_FILE: stored_model(model)}
                _publish_like(store, old.model_copy(update={"provenance": {
                    **old.provenance, "compressed_of": old.version}}), files,
                    old.backbone_fingerprint, backbone)
        return install_published(Path(tmp), out)


def share_vocabularies(out: Path) -> list[Path]:
    """Re-store `out`'s active backbones whose target vocabulary files repeat the source
    ones byte for byte: a new version each that ships them once (see above); returns the
    version directories written."""
    created: dict[str, datetime] = {}
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp), builtin_dir=out) as store:
        for name in sorted(store.active_backbones()):
            loaded = store.load("backbone", name)
            files = loaded.files
            if TARGET_SPM_FILE not in files or files[TARGET_SPM_FILE] != files[SOURCE_SPM_FILE] \
                    or files.get(TARGET_VOCAB_FILE) != files.get(SOURCE_VOCAB_FILE):
                continue
            old = loaded.manifest
            kept = {k: v for k, v in files.items() if k not in (TARGET_SPM_FILE, TARGET_VOCAB_FILE)}
            new = store.publish("backbone", name, kept, config=old.config,
                                provenance={**old.provenance, "vocabulary_shared_of": old.version},
                                scores=old.scores)
            if new.backbone_fingerprint != old.backbone_fingerprint:
                raise AssertionError(f"{new.label}: the fingerprint changed")
            log.info("%s -> %s: one vocabulary file", old.label, new.label)
            created[f"backbones/{name}/v{new.version}"] = old.created_at
        written = install_published(Path(tmp), out)
    for key, created_at in created.items():  # the default backbone stays the oldest
        keep_created_at(out / key, created_at)
    return written


def _republish_dependents(store: Store, backbone: str, fingerprint: str) -> None:
    """Every active module (banks as int8) and classifier (files as they are) of
    `backbone`, as a new version built for `fingerprint`."""
    for domain in sorted(store.active_domains(backbone)):
        loaded = store.load("module", domain, backbone=backbone)
        files = module_files(module_params(loaded.files), int8_rows=True)
        _publish_like(store, loaded.manifest, files, fingerprint, backbone)
    for name in sorted(store.registry.active_versions("classifier", backbone=backbone)):
        loaded = store.load("classifier", name, backbone=backbone)
        _publish_like(store, loaded.manifest, dict(loaded.files), fingerprint, backbone)


def _publish_like(store: Store, manifest: Manifest, files: dict[str, bytes],
                  fingerprint: str, backbone: str) -> None:
    new = store.publish(manifest.kind, manifest.name, files, config=manifest.config,
                        provenance=manifest.provenance, scores=manifest.scores,
                        backbone_fingerprint=fingerprint, backbone=backbone)
    log.info("%s -> %s", manifest.label, new.label)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.recipes.compact_builtin",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=BUILTIN_DIR,
                        help="the built-in directory to re-store (default: the package's)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    written = (compact_builtin(args.out) + compress_routers(args.out)
               + share_vocabularies(args.out))
    log.info("written: %s", ", ".join(str(p) for p in written) or "nothing (compact already)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
