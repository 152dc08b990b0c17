"""The default model's recipe stages that run without the shared corpora: rebuilding the
run dir from a published backbone (and warm-starting the backbone stage from it),
snapshots and publication (the router's examples and settings:
test_default_recipe_router.py)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from safetensors.torch import save_file

from contract.artifacts import CLASSIFIER_FEATURES_FILE
from model_store import Store
from server.engine.artifacts import backbone_files, backbone_parts, module_files
from server.engine.backbone import Backbone
from server.engine.row_int8 import dequantize_rows, quantize_rows
from server.routing.features import HashedFeatures
from tests.server.fasttext_tiny import hashed_classifier_bytes
from tests.tiny import (
    ENGLISH,
    FRENCH,
    random_module,
    spm_bytes,
    tiny_backbone_files,
    tiny_config,
)
from tests.trainer.test_trainer_backbone import SETTINGS
from trainer.recipes.default_en_fr import (
    DOMAINS,
    backbone_trainable,
    corpora,
    prepare,
    train_backbone,
)
from trainer.recipes.default_stages import (
    BACKBONE_NAME,
    ROUTER_NAME,
    load_trained_backbone,
    restore_run_dir,
)
from trainer.recipes.publication import averaged_steps, publish_builtin, publish_router
from trainer.recipes.router_stage import (
    GENERIC_LABEL,
    GENERIC_TRAIN,
)
from trainer.recipes.snapshot import load_snapshot, save_snapshot
from trainer.routers.features import features_to_bytes, featurize
from trainer.training.average import average_checkpoints
from trainer.training.data import EncodedPairs, encode_pairs, save_encoded
from trainer.training.run import train


def published_builtin(root: Path) -> dict[str, bytes]:
    """A store root laid out like model_store/builtin, holding a tiny default backbone
    (float16 weights on disk, as the recipe publishes them)."""
    parts = backbone_parts(tiny_backbone_files())
    spm_model = spm_bytes()
    files = backbone_files(parts.config, parts.tensors, source_spm=spm_model,
                           target_spm=spm_model, half=True)
    with Store.open(root, builtin_dir=None) as store:
        store.publish("backbone", BACKBONE_NAME, files, config=json.loads(files["config.json"]),
                      provenance={"steps": 42, "target_tokens": 9000, "train_seconds": 60.0})
    return files


def test_restore_rebuilds_the_backbone_stage_from_the_published_artifact(
        tmp_path: Path) -> None:
    files = published_builtin(tmp_path / "builtin")
    run_dir = tmp_path / "run"
    no_snapshot = tmp_path / "snapshot"
    assert restore_run_dir(run_dir, tmp_path / "builtin", snapshot=no_snapshot)
    assert not restore_run_dir(run_dir, tmp_path / "builtin", snapshot=no_snapshot)  # done

    model, tokenizer = load_trained_backbone(run_dir)
    published = backbone_parts(files)
    assert model.config == published.config
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, published.tensors[name]), name
    assert (run_dir / "spm.model").read_bytes() == files["source.spm"]
    progress = json.loads((run_dir / "backbone" / "progress.json").read_text())
    assert progress["step"] == 42 and progress["target_tokens"] == 9000

    # The backbone stage warm-starts from it when given a larger budget.
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes())
    data = encode_pairs(list(zip(ENGLISH, FRENCH, strict=True)), processor, max_len=64)
    settings = replace(SETTINGS, max_epochs=1, max_minutes=5.0)
    trained = Backbone(model.config)  # as the recipe's backbone stage builds it
    done = train(backbone_trainable(trained), data, settings, run_dir / "backbone")
    assert done.finished and done.step > 42
    assert not torch.equal(trained.state_dict()["encoder.layers.0.ffn.fc1.weight"],
                           published.tensors["encoder.layers.0.ffn.fc1.weight"])


def test_prepare_keeps_each_corpus_size_beside_an_older_encoded_set(tmp_path: Path) -> None:
    # A run dir encoded before the sizes were kept: they are derived, not re-encoded.
    data, run_dir = tmp_path / "data", tmp_path / "run"
    for number, name in enumerate((*DOMAINS, "news")):
        folder = data / "en-fr" / ("extra" if name == "news" else "domains") / name
        folder.mkdir(parents=True)
        lines = 1 + number % 3
        (folder / "train.en").write_text("\n".join(ENGLISH[:lines]) + "\n")
        (folder / "train.fr").write_text("\n".join(FRENCH[:lines]) + "\n")
    run_dir.mkdir()
    (run_dir / "spm.model").write_bytes(spm_bytes())
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes())
    pairs = [p for corpus in corpora(data) for p in corpus.read()]
    save_encoded(encode_pairs(pairs, processor, max_len=64), run_dir / "train.npz")
    _, encoded = prepare(data, run_dir)
    assert encoded.corpora is not None
    assert encoded.corpora.names == (*DOMAINS, "news")
    assert encoded.corpora.pairs == tuple(1 + n % 3 for n in range(len(DOMAINS) + 1))
    assert (run_dir / "train.corpora.json").exists()


def trained_run_dir(tmp_path: Path, builtin: Path) -> Path:
    """A restored run dir with one trained adapter (random weights), as the adapters stage
    leaves it, and the encoded training set the model card reads."""
    run_dir = tmp_path / "run"
    restore_run_dir(run_dir, builtin, snapshot=tmp_path / "snapshot")
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes())
    save_encoded(encode_pairs(list(zip(ENGLISH, FRENCH, strict=True)), processor, max_len=64),
                 run_dir / "train.npz")
    config, params = random_module(tiny_config(), "adapter", seed=5, bottleneck=4)
    adapter_dir = run_dir / "adapters" / "medical"
    adapter_dir.mkdir(parents=True)
    save_file(params, str(adapter_dir / "module.safetensors"))
    scores = {"bleu": 1.0, "chrf": 10.0}
    (adapter_dir / "result.json").write_text(json.dumps(
        {"domain": "medical", "config": config, "pairs": 3, "dev": scores,
         "backbone_dev": scores, "steps": 10, "train_seconds": 1.0}))
    return run_dir


def test_publish_ships_new_versions_once_and_stores_follow_them(tmp_path: Path) -> None:
    factory = tmp_path / "factory"
    files = published_builtin(factory)
    with Store.open(factory, builtin_dir=None) as store:  # the package's v1 module
        fingerprint = store.record("backbone", BACKBONE_NAME, 1).fingerprint
        config, params = random_module(tiny_config(), "adapter", seed=1, bottleneck=4)
        store.publish("module", "medical", module_files(params), config=config,
                      backbone_fingerprint=fingerprint)
    builtin = tmp_path / "builtin"
    for label in (f"backbones/{BACKBONE_NAME}/v1", "modules/medical/v1"):
        shutil.copytree(factory / label, builtin / label)
    Store.open(tmp_path / "serving", builtin_dir=builtin).close()  # serves medical v1
    run_dir = trained_run_dir(tmp_path, builtin)

    def shipped() -> list[str]:
        return sorted(p.parent.relative_to(builtin).as_posix()
                      for p in builtin.glob("*s/*/v*/manifest.json"))

    publish_builtin(tmp_path / "data", run_dir, builtin, snapshot=tmp_path / "snapshot")
    assert shipped() == [f"backbones/{BACKBONE_NAME}/v1", "modules/medical/v2"]
    assert (builtin / f"backbones/{BACKBONE_NAME}/v1/model.safetensors").read_bytes() == \
        files["model.safetensors"]
    assert (builtin / "MODEL_CARD.md").is_file()

    publish_builtin(tmp_path / "data", run_dir, builtin,  # nothing changed: nothing new
                    snapshot=tmp_path / "snapshot")
    assert shipped() == [f"backbones/{BACKBONE_NAME}/v1", "modules/medical/v2"]

    with Store.open(tmp_path / "serving", builtin_dir=builtin) as store:
        assert store.active_domains() == {"medical": 2}
        assert store.load("module", "medical").manifest.backbone_fingerprint == fingerprint


def test_the_model_card_names_the_averaged_checkpoints_and_the_routers_extra_text(
        tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    published_builtin(builtin)
    run_dir = trained_run_dir(tmp_path, builtin)
    checkpoint = run_dir / "backbone" / "checkpoint.pt"
    for step in (7, 9):  # two copies of the restored checkpoint, averaged over it
        shutil.copy(checkpoint, tmp_path / f"step-{step}.pt")
    torch.save(average_checkpoints([tmp_path / "step-7.pt", tmp_path / "step-9.pt"]), checkpoint)
    assert averaged_steps(run_dir) == [7, 9]
    publish_builtin(tmp_path / "data", run_dir, builtin, snapshot=tmp_path / "snapshot")
    card = (builtin / "MODEL_CARD.md").read_text()
    assert "the mean of the checkpoints of steps 7, 9" in card
    assert "the medical class also learns from 2,000 lines of the biomedical corpus" in card
    assert f"news: {GENERIC_TRAIN:,} lines drawn across their train splits" in card


FEATURES = HashedFeatures()


def write_router(run_dir: Path, *, temperature: float) -> None:
    """The classifier stage's outputs (a tiny fastText model, its examples and scores)."""
    directory = run_dir / "classifier"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "classifier.bin").write_bytes(
        hashed_classifier_bytes({"medical": ["dose"], GENERIC_LABEL: ["photo"]}))
    (directory / CLASSIFIER_FEATURES_FILE).write_bytes(features_to_bytes(featurize(
        [("medical", "one dose"), (GENERIC_LABEL, "a photo")], FEATURES)))
    (directory / "accuracy.json").write_text(json.dumps(
        {"dev_accuracy": 0.9, "per_domain": {"medical": 0.9, GENERIC_LABEL: 0.9},
         "confusion": {}, "temperature": temperature, "dev_nll": 0.5,
         "dev_nll_uncalibrated": 0.8, "features": FEATURES.as_config()}))


def test_publish_ships_the_router_with_its_calibration(tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    published_builtin(builtin)
    run_dir = trained_run_dir(tmp_path, builtin)
    write_router(run_dir, temperature=2.0)
    publish_builtin(tmp_path / "data", run_dir, builtin, snapshot=tmp_path / "snapshot")
    with Store.open(tmp_path / "serving", builtin_dir=builtin) as store:
        router = store.load("classifier", ROUTER_NAME).manifest
        assert router.config == {"labels": ["generic", "medical"], "temperature": 2.0,
                                 "features": FEATURES.as_config()}
        assert router.scores["dev_nll"] == 0.5 and router.scores["dev_nll_uncalibrated"] == 0.8
    assert "temperature 2.00" in (builtin / "MODEL_CARD.md").read_text()

    write_router(run_dir, temperature=3.0)  # the same model, calibrated anew: a new version
    publish_builtin(tmp_path / "data", run_dir, builtin, snapshot=tmp_path / "snapshot")
    with Store.open(tmp_path / "serving", builtin_dir=builtin) as store:
        router = store.load("classifier", ROUTER_NAME).manifest
        assert router.version == 2 and router.config["temperature"] == 3.0


def test_publish_router_ships_the_router_alone(tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    published_builtin(builtin)
    before = {p: p.read_bytes() for p in builtin.rglob("*") if p.is_file()}
    run_dir = tmp_path / "run"  # only the classifier stage ran: no backbone, no adapters
    write_router(run_dir, temperature=2.0)
    publish_router(run_dir, builtin)
    after = {p: p.read_bytes() for p in builtin.rglob("*") if p.is_file()}
    assert {p: b for p, b in after.items() if p in before} == before  # nothing else changed
    assert sorted(p.relative_to(builtin).as_posix() for p in set(after) - set(before)) == [
        f"classifiers/{ROUTER_NAME}/v1/{name}" for name in
        sorted(["classifier.bin", CLASSIFIER_FEATURES_FILE, "manifest.json"])]
    with Store.open(tmp_path / "serving", builtin_dir=builtin) as store:
        router = store.load("classifier", ROUTER_NAME).manifest
        backbone = store.load_backbone(BACKBONE_NAME).manifest
        assert router.backbone_fingerprint == backbone.backbone_fingerprint
        assert router.config["temperature"] == 2.0
    publish_router(run_dir, builtin)  # unchanged: no new version
    assert {p for p in builtin.rglob("*") if p.is_file()} == set(after)


def test_publish_router_rewrites_the_model_card_of_its_own_backbone(tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    published_builtin(builtin)
    run_dir = trained_run_dir(tmp_path, builtin)  # restored: the built-in backbone
    write_router(run_dir, temperature=2.0)
    publish_builtin(tmp_path / "data", run_dir, builtin, snapshot=tmp_path / "snapshot")
    assert "temperature 2.00" in (builtin / "MODEL_CARD.md").read_text()
    write_router(run_dir, temperature=3.0)
    publish_router(run_dir, builtin)
    card = (builtin / "MODEL_CARD.md").read_text()
    assert "temperature 3.00" in card and "temperature 2.00" not in card
    assert "religion classes also learn from the English side of the en-de data" in card


def tiny_data() -> EncodedPairs:
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes())
    return encode_pairs(list(zip(ENGLISH, FRENCH, strict=True)), processor, max_len=64)


def test_a_snapshot_carries_the_backbone_stage_to_another_machine(tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    published_builtin(builtin)
    snapshot = tmp_path / "snapshot"
    first = tmp_path / "first-machine"
    restore_run_dir(first, builtin, snapshot=snapshot)
    config = load_trained_backbone(first)[0].config
    settings = replace(SETTINGS, max_tokens=40, max_epochs=3, max_minutes=5.0)
    done = train(backbone_trainable(Backbone(config)), tiny_data(), settings,
                 first / "backbone")
    assert done.step > 42
    half_way = replace(settings, max_steps=done.step - 3)  # a run stopped inside an epoch
    second_try = Backbone(config)
    shutil.rmtree(first / "backbone")
    restore_run_dir(first, builtin, snapshot=snapshot)
    stopped = train(backbone_trainable(second_try), tiny_data(), half_way, first / "backbone")
    assert stopped.batch_in_epoch > 0
    saved = save_snapshot(first, snapshot)
    assert (saved.step, saved.epoch, saved.batch_in_epoch) == \
        (stopped.step, stopped.epoch, stopped.batch_in_epoch)

    second = tmp_path / "second-machine"
    assert restore_run_dir(second, builtin, snapshot=snapshot)  # further along: taken
    restored, _ = load_trained_backbone(second)
    on_disk = dequantize_rows(quantize_rows(second_try.state_dict()))  # int8 rows, float16
    for name, tensor in on_disk.items():
        assert torch.equal(restored.state_dict()[name], tensor), name
    progress = json.loads((second / "backbone" / "progress.json").read_text())
    assert (progress["step"], progress["epoch"], progress["batch_in_epoch"]) == \
        (stopped.step, stopped.epoch, stopped.batch_in_epoch)
    resumed = train(backbone_trainable(Backbone(restored.config)), tiny_data(), settings,
                    second / "backbone")  # the larger budget trains on from that batch
    assert resumed.finished and resumed.step == done.step


def test_restore_prefers_the_published_backbone_over_an_older_snapshot(tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    files = published_builtin(builtin)  # step 42
    snapshot = tmp_path / "snapshot"
    run_dir = tmp_path / "run"
    restore_run_dir(run_dir, builtin, snapshot=snapshot)
    checkpoint = run_dir / "backbone" / "checkpoint.pt"
    saved = torch.load(checkpoint, weights_only=True)
    saved["progress"]["step"] = 40
    saved["model"] = {k: torch.zeros_like(v) for k, v in saved["model"].items()}
    torch.save(saved, checkpoint)
    save_snapshot(run_dir, snapshot)

    fresh = tmp_path / "fresh"
    restore_run_dir(fresh, builtin, snapshot=snapshot)
    model, _ = load_trained_backbone(fresh)
    published = backbone_parts(files)
    assert all(torch.equal(t, published.tensors[k]) for k, t in model.state_dict().items())


def test_publishing_a_backbone_as_far_along_removes_the_snapshot(tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    published_builtin(builtin)
    run_dir = trained_run_dir(tmp_path, builtin)
    snapshot = tmp_path / "snapshot"
    save_snapshot(run_dir, snapshot)  # step 42, as the run dir's backbone
    saved = load_snapshot(snapshot)
    assert saved is not None and saved.progress.step == 42
    publish_builtin(tmp_path / "data", run_dir, builtin, snapshot=snapshot)
    assert not snapshot.exists()


def other_architecture_snapshot(tmp_path: Path, step: int) -> Path:
    """A snapshot of a pre-norm tiny backbone (the published one is post-norm), as a newer
    recipe's backbone stage leaves it after `step` steps."""
    run_dir = tmp_path / "newer-recipe"
    config = tiny_config(normalize_before=True)
    (run_dir / "backbone").mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    (run_dir / "spm.model").write_bytes(spm_bytes())
    torch.manual_seed(3)
    torch.save({"model": Backbone(config).state_dict(),
                "progress": {"step": step, "epoch": 0, "batch_in_epoch": step}},
               run_dir / "backbone" / "checkpoint.pt")
    snapshot = tmp_path / "snapshot"
    save_snapshot(run_dir, snapshot)
    return snapshot


def test_restore_takes_a_snapshot_of_another_architecture_whatever_its_step(
        tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    published_builtin(builtin)  # post-norm, step 42
    snapshot = other_architecture_snapshot(tmp_path, step=5)
    run_dir = tmp_path / "run"
    assert restore_run_dir(run_dir, builtin, snapshot=snapshot)
    model, _ = load_trained_backbone(run_dir)
    assert model.config.normalize_before
    assert json.loads((run_dir / "backbone" / "progress.json").read_text())["step"] == 5


def test_publishing_another_architecture_keeps_the_snapshot(tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    published_builtin(builtin)
    run_dir = trained_run_dir(tmp_path, builtin)  # the published post-norm backbone, step 42
    snapshot = other_architecture_snapshot(tmp_path, step=5)
    publish_builtin(tmp_path / "data", run_dir, builtin, snapshot=snapshot)
    saved = load_snapshot(snapshot)
    assert saved is not None and saved.progress.step == 5


def test_the_backbone_stage_refuses_a_run_dir_of_another_architecture(tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    published_builtin(builtin)  # the tiny config, not the recipe's
    run_dir = tmp_path / "run"
    restore_run_dir(run_dir, builtin, snapshot=tmp_path / "snapshot")
    with pytest.raises(ValueError, match="another architecture .* new --run-dir"):
        train_backbone(tmp_path / "no-data", run_dir, SETTINGS)


def test_prepare_refuses_an_encoded_set_whose_vocabulary_was_replaced(tmp_path: Path) -> None:
    # The ids in train.npz mean words of the model they were encoded with; a run dir whose
    # spm.model changed afterwards would train on ids that its dev set reads as other words.
    data, run_dir = tmp_path / "data", tmp_path / "run"
    for name in (*DOMAINS, "news"):
        folder = data / "en-fr" / ("extra" if name == "news" else "domains") / name
        folder.mkdir(parents=True)
        (folder / "train.en").write_text("\n".join(ENGLISH[:2]) + "\n")
        (folder / "train.fr").write_text("\n".join(FRENCH[:2]) + "\n")
    run_dir.mkdir()
    (run_dir / "spm.model").write_bytes(spm_bytes())
    prepare(data, run_dir)
    assert (run_dir / "train.spm.sha256").exists()
    prepare(data, run_dir)  # the same model: fine

    (run_dir / "spm.model").write_bytes(spm_bytes(vocab_size=100))  # another model
    with pytest.raises(ValueError, match="encoded with another sentencepiece model"):
        prepare(data, run_dir)
