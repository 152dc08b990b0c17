"""The built-in backbones re-stored with one vocabulary file (trainer/recipes/compact_builtin.py
`share_vocabularies`): a backbone whose target.spm repeats source.spm byte for byte becomes
a new version without it, with the same fingerprint, so its modules and router stay as
they are; a store that registered the old version moves to it on its next open and
translates exactly as before."""

from __future__ import annotations

import shutil
from pathlib import Path

from contract.artifacts import SOURCE_SPM_FILE, TARGET_SPM_FILE
from model_store import Store
from server.engine.artifacts import build_engine, module_files, module_params
from server.engine.engine import Member
from tests.tiny import random_module, spm_bytes, tiny_backbone_files, tiny_config
from trainer.recipes.compact_builtin import share_vocabularies

TEXTS = ["the patient takes one tablet a day", "click the button to open a file"]


def two_file_builtin(tmp_path: Path, *, target: bytes | None = None) -> Path:
    """A built-in directory as shipped before: source.spm and target.spm (the same bytes
    unless `target`), a module and a router built for the backbone."""
    files = tiny_backbone_files()
    files[TARGET_SPM_FILE] = target if target is not None else files[SOURCE_SPM_FILE]
    out = tmp_path / "builtin"
    with Store.open(tmp_path / "factory", builtin_dir=None) as factory:
        backbone = factory.publish("backbone", "default-en-fr", files,
                                   config=tiny_config().to_dict(),
                                   provenance={"languages": {"source": "en", "target": "fr"}})
        config, params = random_module(tiny_config(), "adapter", seed=1, bottleneck=4)
        medical = factory.publish("module", "medical", module_files(params), config=config,
                                  backbone_fingerprint=backbone.backbone_fingerprint)
        router = factory.publish("classifier", "router", {"classifier.bin": b"fasttext"},
                                 config={"labels": ["medical"]},
                                 backbone_fingerprint=backbone.backbone_fingerprint)
        for manifest in (backbone, medical, router):
            shutil.copytree(tmp_path / "factory" / manifest.label, out / manifest.label)
    return out


def translations(store: Store) -> list[str]:
    engine = build_engine(store.load_backbone().files)
    loaded = store.load("module", "medical",
                        expected_fingerprint=store.load_backbone().manifest.backbone_fingerprint)
    engine.register_module("medical", dict(loaded.manifest.config), module_params(loaded.files))
    return engine.translate_texts(TEXTS, [Member("medical")]) + engine.translate_texts(TEXTS)


def test_a_repeated_vocabulary_is_shipped_once_and_nothing_else_moves(tmp_path: Path) -> None:
    builtin = two_file_builtin(tmp_path)
    with Store.open(tmp_path / "store", builtin_dir=builtin) as store:
        old = store.load_backbone().manifest
        before = translations(store)

    written = share_vocabularies(builtin)

    assert [p.relative_to(builtin).as_posix() for p in written] == ["backbones/default-en-fr/v2"]
    assert not (builtin / "backbones/default-en-fr/v1").exists()
    assert sorted(p.name for p in (builtin / "backbones/default-en-fr/v2").iterdir()) == [
        "config.json", "manifest.json", "model.safetensors", SOURCE_SPM_FILE]
    assert (builtin / "modules/medical/v1").is_dir()
    assert (builtin / "classifiers/router/v1").is_dir()
    with Store.open(tmp_path / "store", builtin_dir=builtin) as store:
        new = store.load_backbone().manifest
        assert new.version == 2 and new.backbone_fingerprint == old.backbone_fingerprint
        assert new.created_at == old.created_at  # the default backbone stays the oldest
        assert new.provenance["vocabulary_shared_of"] == 1
        assert store.active_domains() == {"medical": 1}
        assert store.registry.get_active("classifier", "router") == 1
        assert translations(store) == before
    assert share_vocabularies(builtin) == []  # one file already: nothing to do


def test_a_different_target_vocabulary_is_kept(tmp_path: Path) -> None:
    builtin = two_file_builtin(tmp_path, target=spm_bytes(100))
    assert share_vocabularies(builtin) == []
    assert (builtin / "backbones/default-en-fr/v1" / TARGET_SPM_FILE).is_file()
