"""The default model's recipe stages that run without the shared corpora: rebuilding the
run dir from a published backbone (and warm-starting the backbone stage from it), and the
router's "generic" examples."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import sentencepiece as spm
import torch

from model_store import Store
from server.engine.artifacts import backbone_parts
from server.engine.backbone import Backbone
from tests.tiny import ENGLISH, FRENCH, spm_bytes, tiny_backbone_files
from tests.trainer.test_trainer_backbone import SETTINGS
from trainer.data import encode_pairs
from trainer.recipes.default_en_fr import backbone_trainable
from trainer.recipes.default_stages import (
    BACKBONE_NAME,
    GENERIC_GENRES,
    GENERIC_LABEL,
    generic_examples,
    load_trained_backbone,
    restore_run_dir,
)
from trainer.run import train


def published_builtin(root: Path) -> dict[str, bytes]:
    """A store root laid out like model_store/builtin, holding a tiny default backbone."""
    files = tiny_backbone_files()
    with Store.open(root, builtin_dir=None) as store:
        store.publish("backbone", BACKBONE_NAME, files, config=json.loads(files["config.json"]),
                      provenance={"steps": 42, "target_tokens": 9000, "train_seconds": 60.0})
    return files


def test_restore_rebuilds_the_backbone_stage_from_the_published_artifact(
        tmp_path: Path) -> None:
    files = published_builtin(tmp_path / "builtin")
    run_dir = tmp_path / "run"
    assert restore_run_dir(run_dir, tmp_path / "builtin")
    assert not restore_run_dir(run_dir, tmp_path / "builtin")  # done once

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


def write_genres(data: Path, lines: int) -> None:
    for genre in GENERIC_GENRES:
        folder = data / "en-fr" / "extra" / genre
        folder.mkdir(parents=True)
        (folder / "train.en").write_text("".join(f"{genre} line {i}\n" for i in range(lines)))


def test_generic_examples_take_train_from_the_head_and_dev_from_the_tail(
        tmp_path: Path) -> None:
    write_genres(tmp_path, lines=10)
    train_examples, dev_examples = generic_examples(tmp_path, train=8, dev=4)
    assert len(train_examples) == 8 and len(dev_examples) == 4
    assert {label for label, _ in train_examples + dev_examples} == {GENERIC_LABEL}
    assert ("generic", "news line 0") in train_examples
    assert ("generic", "news line 9") in dev_examples
    assert not {text for _, text in train_examples} & {text for _, text in dev_examples}


def test_generic_examples_refuse_a_genre_that_is_too_small(tmp_path: Path) -> None:
    write_genres(tmp_path, lines=2)
    with pytest.raises(ValueError, match="need 3"):
        generic_examples(tmp_path, train=8, dev=4)
