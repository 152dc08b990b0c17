"""The built-in directory re-stored compactly (trainer/recipes/compact_builtin.py, issue
#43): a store that served the float16 built-ins moves to the int8 ones on its next open,
and the operator's own modules, built for the float16 backbone, keep serving."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from contract.artifacts import BACKBONE_WEIGHTS_FILE, MODULE_WEIGHTS_FILE
from converters.cli import backbone_for
from model_store import ArtifactError, Store
from model_store.compact import COMPACT_OF, served_fingerprints
from server.engine.artifacts import backbone_files, build_engine, module_files, module_params
from server.engine.engine import Member
from server.routing.classifier import XZ_MAGIC, fasttext_model, load_classifier
from tests.tiny import random_backbone, random_module, spm_bytes, tiny_config
from trainer.recipes.compact_builtin import compact_builtin, compress_routers
from trainer.routers.classifier import ClassifierSettings, train_classifier
from trainer.routers.features import featurize

CONFIG = tiny_config(d_model=64, d_ff=128)
TEXTS = ["the patient takes one tablet a day", "a court rules on the appeal"]


def _module(seed: int) -> tuple[dict[str, object], dict[str, bytes]]:
    # bottleneck 64: each layer's bank is 64 x 64 = 4096 weights, enough to be quantized
    config, params = random_module(CONFIG, "adapter", seed=seed, std=0.05, bottleneck=64)
    return config, module_files(params, half=True)


@pytest.fixture
def builtin(tmp_path: Path) -> Path:
    """A built-in directory as published before issue #43: a float16 backbone, a module
    and a router built for it."""
    spm = spm_bytes()
    model = random_backbone(CONFIG, std=0.05)
    files = backbone_files(CONFIG, model.state_dict(), source_spm=spm, target_spm=spm,
                           half=True)
    with Store.open(tmp_path / "factory", builtin_dir=None) as factory:
        backbone = factory.publish("backbone", "default-en-fr", files, config=CONFIG.to_dict(),
                                   provenance={"languages": {"source": "en", "target": "fr"}})
        config, module = _module(seed=1)
        medical = factory.publish("module", "medical", module, config=config,
                                  scores={"dev": {"bleu": 30.0}},
                                  backbone_fingerprint=backbone.backbone_fingerprint)
        router = factory.publish("classifier", "router",
                                 {"classifier.bin": b"fasttext bytes",
                                  "features.npz.xz": b"features"},
                                 config={"labels": ["medical"]},
                                 backbone_fingerprint=backbone.backbone_fingerprint)
        out = tmp_path / "builtin"
        for manifest in (backbone, medical, router):
            shutil.copytree(tmp_path / "factory" / manifest.label, out / manifest.label)
    return out


def _translations(store: Store, domain: str) -> list[str]:
    engine = build_engine(store.load_backbone().files)
    loaded = store.load("module", domain, expected_fingerprint=served_fingerprints(
        store.load_backbone().manifest))
    engine.register_module(domain, dict(loaded.manifest.config), module_params(loaded.files))
    return engine.translate_texts(TEXTS, [Member(domain)])


def test_a_store_of_the_float16_builtins_moves_to_the_compact_ones_and_keeps_its_own(
        tmp_path: Path, builtin: Path) -> None:
    with Store.open(tmp_path / "store", builtin_dir=builtin) as store:
        old = store.load_backbone().manifest
        # the operator's own domain, trained on the float16 backbone
        config, files = _module(seed=2)
        own = store.publish("module", "cooking", files, config=config,
                            backbone_fingerprint=old.backbone_fingerprint)
        store.activate("module", "cooking", own.version)
        before = {domain: _translations(store, domain) for domain in ("medical", "cooking")}
        old_size = len(store.load_backbone().files[BACKBONE_WEIGHTS_FILE])

    written = compact_builtin(builtin)

    assert sorted(p.relative_to(builtin).as_posix() for p in written) == [
        "backbones/default-en-fr/v2", "classifiers/router/v2", "modules/medical/v2"]
    assert not (builtin / "backbones/default-en-fr/v1").exists()  # replaced, as a publish does
    with Store.open(tmp_path / "store", builtin_dir=builtin) as store:
        new = store.load_backbone().manifest
        assert (new.version, store.active_domains()) == (2, {"medical": 2, "cooking": 1})
        assert store.registry.get_active("classifier", "router") == 2
        assert new.provenance[COMPACT_OF] == {
            "version": 1, "backbone_fingerprint": old.backbone_fingerprint,
            "storage": "int8-rows"}
        assert new.created_at == old.created_at  # the default backbone stays the oldest
        assert len(store.load_backbone().files[BACKBONE_WEIGHTS_FILE]) < 0.75 * old_size
        medical = store.load("module", "medical")
        assert medical.manifest.backbone_fingerprint == new.backbone_fingerprint
        assert medical.manifest.scores == {"dev": {"bleu": 30.0}}
        assert module_params(medical.files)["enc.down_w"].shape == (CONFIG.encoder_layers,
                                                                    64, 64)
        # the operator's module serves on the compact re-store, not on another backbone
        with pytest.raises(ArtifactError, match="backbone_fingerprint"):
            store.load("module", "cooking", expected_fingerprint=new.backbone_fingerprint)
        # the CTranslate2 export of the operator's module finds the backbone it serves on
        assert backbone_for(store, store.record("module", "cooking").manifest).label == \
            new.label
        after = {domain: _translations(store, domain) for domain in ("medical", "cooking")}
    assert after == before
    assert compact_builtin(builtin) == []  # compact already: nothing to do


def test_module_weights_stay_close_through_the_int8_banks() -> None:
    _config, params = random_module(CONFIG, "adapter", seed=3, std=0.05, bottleneck=64)
    compact = module_files(params, int8_rows=True)
    half = module_files(params, half=True)
    assert len(compact[MODULE_WEIGHTS_FILE]) < 0.6 * len(half[MODULE_WEIGHTS_FILE])
    back = module_params(compact)
    for name, tensor in params.items():
        step = tensor.abs().amax(dim=1, keepdim=True) / 127 if tensor.dim() == 3 else 0.0
        assert back[name].dtype == torch.float32
        assert ((back[name] - tensor).abs() <= step / 2 + tensor.abs() / 1024 + 1e-6).all()


def test_an_uncompressed_router_is_re_stored_compressed_and_routes_the_same(
        builtin: Path, tmp_path: Path) -> None:
    settings = ClassifierSettings(epoch=2, quantize=False, min_examples=1, bucket=20_000)
    examples = [("medical", TEXTS[0]), ("law", TEXTS[1])] * 20
    stored = featurize(examples, settings.features())
    old = fasttext_model(train_classifier(stored, settings))  # as fastText writes it
    assert not old.startswith(XZ_MAGIC)
    config = {"labels": ["law", "medical"], "features": {
        "kind": "hashed-word-ngrams", "ngrams": 2, "buckets": 20_000}}
    with Store.open(tmp_path / "factory2", builtin_dir=builtin) as factory:
        backbone = factory.load_backbone().manifest
        router = factory.publish("classifier", "router", {"classifier.bin": old},
                                 config=config, backbone_fingerprint=backbone.backbone_fingerprint)
    shutil.rmtree(builtin / "classifiers")
    shutil.copytree(tmp_path / "factory2" / router.label, builtin / router.label)

    written = compress_routers(builtin)
    label = f"classifiers/router/v{router.version + 1}"
    assert [p.relative_to(builtin).as_posix() for p in written] == [label]
    assert not (builtin / router.label).exists()  # the newest version alone is shipped
    new = (builtin / label / "classifier.bin").read_bytes()
    assert new.startswith(XZ_MAGIC) and len(new) < len(old) and fasttext_model(new) == old
    with Store.open(tmp_path / "served", builtin_dir=builtin) as store:
        loaded = store.load("classifier", "router")
    assert loaded.manifest.provenance["compressed_of"] == router.version
    before = load_classifier({"classifier.bin": old}, config, version=router.version)
    after = load_classifier(loaded.files, loaded.manifest.config, version=router.version + 1)
    assert all(before.posteriors(text) == after.posteriors(text) for text in TEXTS)
    assert compress_routers(builtin) == []  # compressed already: nothing new
