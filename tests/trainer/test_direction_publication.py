"""The default recipe's stages for fr->en (issue #43): its adapters and router read the
French side of the same data, its publish stage puts its backbone, modules, router and
model card beside en->fr's in the built-in directory without touching them, and its
quality estimator is fitted on French->English dev sets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from model_store import Store
from server.quality.estimator import Estimator
from server.quality.estimators import EstimatorBook
from server.routing.features import HashedFeatures
from tests.tiny import ENGLISH, FRENCH
from tests.trainer.builtin_directions import (
    FR_EN_NAME,
    build_both,
    build_en_fr,
    fr_en_run_dir,
)
from trainer.quality.fit import dev_sets, refit_builtin
from trainer.recipes.default_en_fr import published
from trainer.recipes.default_stages import (
    BACKBONE_NAME,
    ROUTER_NAME,
    domain_corpus,
    load_trained_backbone,
    restore_adapters,
    restore_run_dir,
)
from trainer.recipes.direction_publication import publish_direction, publish_direction_router
from trainer.recipes.directions import EN_FR, FR_EN
from trainer.recipes.model_card import backbone_origin
from trainer.recipes.publication import adapter_files
from trainer.recipes.router_stage import generic_examples, sister_pair_examples
from trainer.recipes.warm_start import WARM_START_FILE


def shipped(builtin: Path) -> list[str]:
    return sorted(p.parent.relative_to(builtin).as_posix()
                  for p in builtin.rglob("manifest.json"))


def files_of(builtin: Path) -> dict[str, bytes]:
    return {p.relative_to(builtin).as_posix(): p.read_bytes()
            for p in builtin.rglob("*") if p.is_file()}


def test_publish_puts_fr_en_beside_en_fr_and_leaves_en_fr_as_it_was(tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    build_en_fr(builtin, tmp_path / "factory")
    (builtin / "MODEL_CARD.md").write_text("en-fr's card\n")
    before = files_of(builtin)
    assert not published(builtin, FR_EN) and published(builtin, EN_FR)
    run_dir = fr_en_run_dir(tmp_path)

    written = publish_direction(tmp_path / "data", run_dir, builtin, FR_EN,
                                snapshot=tmp_path / "no-snapshot")
    assert [p.relative_to(builtin).as_posix() for p in written] == [
        f"backbones/{FR_EN_NAME}/v1", f"directions/{FR_EN_NAME}/modules/medical/v1",
        f"directions/{FR_EN_NAME}/classifiers/{ROUTER_NAME}/v1"]
    assert shipped(builtin) == sorted([
        f"backbones/{BACKBONE_NAME}/v1", "modules/medical/v1", f"classifiers/{ROUTER_NAME}/v1",
        *(p.relative_to(builtin).as_posix() for p in written)])
    after = files_of(builtin)
    assert {k: v for k, v in after.items() if k in before} == before  # en-fr untouched
    module = f"directions/{FR_EN_NAME}/modules/medical/v1/module.safetensors"
    assert after[module] == adapter_files(run_dir / "adapters" / "medical")[
        "module.safetensors"]  # stored as en-fr's are (int8 banks)
    card = (builtin / "MODEL_CARD-fr-en.md").read_text()
    assert card.startswith(f"# Model card: {FR_EN_NAME}\n")
    assert "a French→English Transformer backbone" in card
    assert "over the French source" in card and "benchmarks/results/eval-fr-en.md" in card
    assert "English side of the en-de" not in card  # no sister pair has French
    # what the router's artifact holds, said beside the corpora's licences
    assert "The router ships no training text" in card and "`features.npz.xz`" in card
    assert "those of at least 5 training sentences" in card
    assert published(builtin, FR_EN)

    # nothing changed: nothing new, the card written again
    assert publish_direction(tmp_path / "data", run_dir, builtin, FR_EN,
                             snapshot=tmp_path / "no-snapshot") == []
    assert files_of(builtin).keys() == after.keys()


def test_a_warm_start_survives_publication_and_a_restore_elsewhere(tmp_path: Path) -> None:
    """The run's warm start goes into the published backbone's provenance, and a run dir
    restored from that backbone (another machine, no training checkpoint) gets it back, so
    republishing its modules there keeps the model card's "warm-started from" line."""
    builtin = tmp_path / "builtin"
    build_en_fr(builtin, tmp_path / "factory")
    run_dir = fr_en_run_dir(tmp_path)
    record = {"backbone": f"backbones/{BACKBONE_NAME}/v1", "steps": 7, "pieces": 120,
              "embeddings_copied": 60}
    (run_dir / WARM_START_FILE).write_text(json.dumps(record))
    result = run_dir / "adapters" / "medical" / "result.json"
    result.write_text(json.dumps(json.loads(result.read_text()) | {"lr": 0.003}))
    publish_direction(tmp_path / "data", run_dir, builtin, FR_EN,
                      snapshot=tmp_path / "no-snapshot")
    with Store.open(tmp_path / "serving", builtin_dir=builtin) as store:
        assert store.load_backbone(FR_EN_NAME).manifest.provenance["warm_start"] == record

    elsewhere = tmp_path / "elsewhere"
    assert restore_run_dir(elsewhere, builtin, snapshot=tmp_path / "no-snapshot",
                           backbone=FR_EN_NAME)
    assert json.loads((elsewhere / WARM_START_FILE).read_text()) == record
    assert f"warm-started from the published `backbones/{BACKBONE_NAME}/v1`" in \
        backbone_origin(elsewhere)

    # its published adapters come back for the publish stage: republished, nothing changes
    for made in run_dir.glob("train.*"):  # the encoded set `--stage restore` prepares
        shutil.copy(made, elsewhere / made.name)
    assert restore_adapters(elsewhere, builtin, backbone=FR_EN_NAME) == ["medical"]
    put_back = json.loads((elsewhere / "adapters" / "medical" / "result.json").read_text())
    trained = json.loads((run_dir / "adapters" / "medical" / "result.json").read_text())
    assert {k: put_back[k] for k in ("config", "lr", "pairs", "steps", "dev")} == \
        {k: trained[k] for k in ("config", "lr", "pairs", "steps", "dev")}
    assert publish_direction(tmp_path / "data", elsewhere, builtin, FR_EN,
                             snapshot=tmp_path / "no-snapshot") == []
    assert "| medical |" in (builtin / "MODEL_CARD-fr-en.md").read_text()
    # a backbone trained on from it is another one: its adapters are not the published ones
    shutil.rmtree(elsewhere / "adapters")
    checkpoint = elsewhere / "backbone" / "checkpoint.pt"
    saved = torch.load(checkpoint, weights_only=True)
    name = "encoder.layers.0.ffn.fc1.weight"
    saved["model"][name] = saved["model"][name] + 0.5
    torch.save(saved, checkpoint)
    assert restore_adapters(elsewhere, builtin, backbone=FR_EN_NAME) == []


def test_a_store_over_the_built_ins_registers_both_directions_apart(tmp_path: Path) -> None:
    builtin = build_both(tmp_path)
    with Store.open(tmp_path / "serving", builtin_dir=builtin) as store:
        assert store.active_backbones() == {BACKBONE_NAME: 1, FR_EN_NAME: 1}
        assert store.registry.default_backbone() == BACKBONE_NAME  # the older one
        fingerprints = {name: store.load_backbone(name).manifest.backbone_fingerprint
                        for name in (BACKBONE_NAME, FR_EN_NAME)}
        assert fingerprints[BACKBONE_NAME] != fingerprints[FR_EN_NAME]
        for name in (BACKBONE_NAME, FR_EN_NAME):
            assert store.active_domains(name) == {"medical": 1}
            module = store.load("module", "medical", backbone=name).manifest
            router = store.load("classifier", ROUTER_NAME, backbone=name).manifest
            assert module.backbone_fingerprint == router.backbone_fingerprint \
                == fingerprints[name]
        backbone = store.load_backbone(FR_EN_NAME).manifest
        assert backbone.provenance["languages"] == {"source": "fr", "target": "en"}
        assert "--direction fr-en" in backbone.provenance["recipe"]
        router = store.load("classifier", ROUTER_NAME, backbone=FR_EN_NAME).manifest
        assert router.config == {"labels": ["generic", "medical"], "temperature": 1.5,
                                 "features": HashedFeatures().as_config()}
        assert "train.fr" in router.provenance["data"]


def test_a_republished_fr_en_router_is_a_new_version_of_fr_en_only(tmp_path: Path) -> None:
    builtin = build_both(tmp_path)
    run_dir = tmp_path / "fr-en-run"
    accuracy = run_dir / "classifier" / "accuracy.json"
    accuracy.write_text(json.dumps(json.loads(accuracy.read_text()) | {"temperature": 2.5}))
    publish_direction(tmp_path / "data", run_dir, builtin, FR_EN,
                      snapshot=tmp_path / "no-snapshot")
    assert f"directions/{FR_EN_NAME}/classifiers/{ROUTER_NAME}/v2" in shipped(builtin)
    assert f"directions/{FR_EN_NAME}/classifiers/{ROUTER_NAME}/v1" not in shipped(builtin)
    assert f"classifiers/{ROUTER_NAME}/v1" in shipped(builtin)  # en-fr's router stays
    with Store.open(tmp_path / "serving", builtin_dir=builtin) as store:
        assert store.registry.get_active("classifier", ROUTER_NAME, backbone=FR_EN_NAME) == 2
        assert store.registry.get_active("classifier", ROUTER_NAME,
                                         backbone=BACKBONE_NAME) == 1


def test_publish_router_ships_the_fr_en_router_alone(tmp_path: Path) -> None:
    builtin = build_both(tmp_path)
    before = {p: p.read_bytes() for p in builtin.rglob("*") if p.is_file()}
    run_dir = tmp_path / "fr-en-run"
    accuracy = run_dir / "classifier" / "accuracy.json"
    accuracy.write_text(json.dumps(json.loads(accuracy.read_text()) | {"temperature": 2.5}))
    written = publish_direction_router(run_dir, builtin, FR_EN)
    routers = builtin / "directions" / FR_EN_NAME / "classifiers" / ROUTER_NAME
    assert written == [routers / "v2"]
    after = {p: p.read_bytes() for p in builtin.rglob("*") if p.is_file()}
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    assert changed and all(p.is_relative_to(routers) for p in changed)  # card and rest kept
    with Store.open(tmp_path / "serving", builtin_dir=builtin) as store:
        router = store.load("classifier", ROUTER_NAME, backbone=FR_EN_NAME).manifest
        assert router.version == 2 and router.config["temperature"] == 2.5
        assert router.config["features"] == HashedFeatures().as_config()
    assert publish_direction_router(run_dir, builtin, FR_EN) == []  # unchanged: no version


def write_pairs(folder: Path, split: str, pairs: list[tuple[str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.en").write_text("".join(f"{en}\n" for en, _ in pairs))
    (folder / f"{split}.fr").write_text("".join(f"{fr}\n" for _, fr in pairs))


def test_the_quality_stage_fits_fr_en_on_french_sources_beside_en_fr(tmp_path: Path) -> None:
    builtin = build_both(tmp_path)
    data = tmp_path / "data"
    pairs = list(zip(ENGLISH, FRENCH, strict=True))
    write_pairs(data / "en-fr" / "domains" / "medical", "dev", pairs[:6])
    write_pairs(data / "en-fr" / "extra" / "news", "train", pairs * 2)
    sets = dev_sets(data, {"medical": "m@1"}, genre_lines=4, source="fr", target="en")
    assert sets[0].pairs == [(fr, en) for en, fr in pairs[:6]]

    en_fr = refit_builtin(builtin, data, genre_lines=4, backbone=BACKBONE_NAME)
    en_fr_bytes = en_fr.read_bytes()
    fr_en = refit_builtin(builtin, data, genre_lines=4, backbone=FR_EN_NAME, source="fr",
                          target="en")
    assert fr_en.name == f"{FR_EN_NAME}.json.xz" and en_fr.read_bytes() == en_fr_bytes
    estimator = Estimator.from_json(fr_en.read_bytes())
    assert estimator.fitted_on["sets"] == {"medical": 6, "news": 4}
    with Store.open(tmp_path / "serving", builtin_dir=builtin) as store:
        backbones = {name: store.load_backbone(name).manifest
                     for name in (BACKBONE_NAME, FR_EN_NAME)}
    book = EstimatorBook([builtin / "quality"])
    assert book.get(backbones[FR_EN_NAME]) == estimator
    assert book.get(backbones[BACKBONE_NAME]) == Estimator.from_json(en_fr_bytes)
    with pytest.raises(Exception, match="several backbones"):  # it must be named now
        refit_builtin(builtin, data, genre_lines=4)


def test_fr_en_adapters_and_router_read_the_french_side(tmp_path: Path) -> None:
    data = tmp_path / "data"
    pairs = list(zip(ENGLISH, FRENCH, strict=True))
    write_pairs(data / "en-fr" / "domains" / "medical", "train", pairs[:3])
    assert domain_corpus(data, "medical", "train", FR_EN).read() == \
        [(fr, en) for en, fr in pairs[:3]]
    for genre in ("captions", "conversation", "news"):
        write_pairs(data / "en-fr" / "extra" / genre, "train",
                    [(f"{genre} line {i}", f"{genre} ligne {i}") for i in range(12)])
    train, dev = generic_examples(data, train=6, dev=1, held_out=3, language="fr")
    assert {text.split()[1] for _, text in train + dev} == {"ligne"}
    # en-de has no French side: a French router gets no sister-pair lines
    sister = data / "en-de" / "domains" / "medical"
    sister.mkdir(parents=True)
    (sister / "train.en").write_text("a medical line in english\n")
    assert sister_pair_examples(data, ("medical",), language="fr") == []
    assert sister_pair_examples(data, ("medical",)) == [("medical", "a medical line in english")]


def test_restore_prefers_the_published_fr_en_backbone(tmp_path: Path) -> None:
    builtin = build_both(tmp_path)
    shutil.rmtree(tmp_path / "fr-en-factory")
    run_dir = tmp_path / "again"
    assert restore_run_dir(run_dir, builtin, snapshot=tmp_path / "no-snapshot",
                           backbone=FR_EN_NAME)
    restored, _ = load_trained_backbone(run_dir)
    original, _ = load_trained_backbone(tmp_path / "fr-en-run")
    assert all(v.equal(original.state_dict()[k]) for k, v in restored.state_dict().items())
    progress = json.loads((run_dir / "backbone" / "progress.json").read_text())
    assert progress["step"] == 900
