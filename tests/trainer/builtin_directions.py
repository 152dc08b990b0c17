"""A tiny built-in directory holding both default directions, as the recipe publishes them:
en->fr in the flat layout (backbone `default-en-fr`, a `medical` adapter, a router), and
fr->en published beside it by the recipe's own publish stage for `--direction fr-en`
(trainer/recipes/direction_publication.py) from a run dir as its adapters and classifier
stages leave it. Tiny random models: no shared data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import sentencepiece as spm
from safetensors.torch import save_file

from contract.artifacts import CLASSIFIER_FEATURES_FILE
from model_store import Store
from server.engine.artifacts import backbone_files, backbone_parts, module_files
from server.routing.features import HashedFeatures
from tests.server.fasttext_tiny import classifier_bytes, hashed_classifier_bytes
from tests.tiny import ENGLISH, FRENCH, random_module, spm_bytes, tiny_backbone_files, tiny_config
from trainer.recipes.default_stages import BACKBONE_NAME, ROUTER_NAME, restore_run_dir
from trainer.recipes.direction_publication import publish_direction
from trainer.recipes.directions import FR_EN
from trainer.routers.features import features_to_bytes, featurize
from trainer.training.data import encode_pairs, save_encoded

FR_EN_NAME = FR_EN.backbone_name
# the routers' classes and their keywords (the French one reads French, hashed as the
# recipe's router does; the English one reads the text, as routers did before features)
ENGLISH_ROUTER = {"medical": ["patient", "tablet", "dose"], "generic": ["photo"]}
FRENCH_ROUTER = {"medical": ["patient", "comprimé", "dose"], "generic": ["photo"]}


def half_backbone(seed: int) -> dict[str, bytes]:
    """A tiny backbone's files as the recipe publishes them (float16 weights)."""
    parts = backbone_parts(tiny_backbone_files(seed=seed))
    vocabulary = spm_bytes()
    return backbone_files(parts.config, parts.tensors, source_spm=vocabulary,
                          target_spm=vocabulary, half=True)


def build_en_fr(builtin: Path, factory: Path) -> None:
    """en->fr's built-in artifacts: backbone v1, module medical v1, router v1 (flat),
    published in the store `factory` and copied as the package ships them."""
    with Store.open(factory, builtin_dir=None) as store:
        files = half_backbone(seed=0)
        backbone = store.publish("backbone", BACKBONE_NAME, files,
                                 config=json.loads(files["config.json"]),
                                 provenance={"steps": 42, "target_tokens": 9000,
                                             "train_seconds": 60.0,
                                             "languages": {"source": "en", "target": "fr"}})
        config, params = random_module(tiny_config(), "adapter", seed=1, bottleneck=4)
        store.publish("module", "medical", module_files(params, half=True), config=config,
                      backbone_fingerprint=backbone.backbone_fingerprint)
        store.publish("classifier", ROUTER_NAME,
                      {"classifier.bin": classifier_bytes(ENGLISH_ROUTER)},
                      config={"labels": sorted(ENGLISH_ROUTER)},
                      backbone_fingerprint=backbone.backbone_fingerprint)
    for version in factory.glob("*s/*/v*"):
        shutil.copytree(version, builtin / version.relative_to(factory))


def fr_en_run_dir(tmp_path: Path) -> Path:
    """A fr->en run dir after its adapters and classifier stages: another tiny backbone
    (restored from a store that holds it), one `medical` adapter, a French router."""
    factory = tmp_path / "fr-en-factory"
    with Store.open(factory, builtin_dir=None) as store:
        files = half_backbone(seed=7)
        store.publish("backbone", FR_EN_NAME, files, config=json.loads(files["config.json"]),
                      provenance={"steps": 900, "target_tokens": 70000, "train_seconds": 120.0})
    run_dir = tmp_path / "fr-en-run"
    restore_run_dir(run_dir, factory, snapshot=tmp_path / "no-snapshot", backbone=FR_EN_NAME)
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes())
    save_encoded(encode_pairs(list(zip(FRENCH, ENGLISH, strict=True)), processor, max_len=64),
                 run_dir / "train.npz")
    config, params = random_module(tiny_config(), "adapter", seed=11, bottleneck=4)
    adapter_dir = run_dir / "adapters" / "medical"
    adapter_dir.mkdir(parents=True)
    save_file(params, str(adapter_dir / "module.safetensors"))
    scores = {"bleu": 2.0, "chrf": 20.0}
    (adapter_dir / "result.json").write_text(json.dumps(
        {"domain": "medical", "config": config, "pairs": 3, "dev": scores,
         "backbone_dev": {"bleu": 1.0, "chrf": 10.0}, "steps": 10, "train_seconds": 1.0}))
    router = run_dir / "classifier"
    router.mkdir()
    (router / "classifier.bin").write_bytes(hashed_classifier_bytes(FRENCH_ROUTER))
    features = HashedFeatures()
    (router / CLASSIFIER_FEATURES_FILE).write_bytes(features_to_bytes(
        featurize([("medical", "une dose"), ("generic", "une photo")], features)))
    (router / "accuracy.json").write_text(json.dumps(
        {"dev_accuracy": 0.9, "per_domain": {"medical": 0.95, "generic": 0.85},
         "confusion": {}, "temperature": 1.5, "dev_nll": 0.4, "dev_nll_uncalibrated": 0.6,
         "features": features.as_config()}))
    return run_dir


def build_both(tmp_path: Path) -> Path:
    """The built-in directory with en->fr, then fr->en published beside it."""
    builtin = tmp_path / "builtin"
    build_en_fr(builtin, tmp_path / "en-fr-factory")
    publish_direction(tmp_path / "data", fr_en_run_dir(tmp_path), builtin, FR_EN,
                      snapshot=tmp_path / "no-snapshot")
    return builtin
