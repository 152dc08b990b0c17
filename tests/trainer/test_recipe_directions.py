"""The default recipe's second direction: fr->en reads the same en-fr pairs reversed, and
its backbone travels between machines by its own snapshot until it is published."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.tiny import ENGLISH, FRENCH
from tests.trainer.test_default_recipe import published_builtin
from trainer.recipes.default_en_fr import DOMAINS, corpora, share_vocabulary, snapshot_dir
from trainer.recipes.default_stages import (
    load_trained_backbone,
    restore_from_snapshot,
    restore_run_dir,
)
from trainer.recipes.directions import EN_FR, FR_EN
from trainer.recipes.snapshot import SNAPSHOT_DIR, save_snapshot


def write_data(root: Path) -> None:
    for number, name in enumerate((*DOMAINS, "news")):
        folder = root / "en-fr" / ("extra" if name == "news" else "domains") / name
        folder.mkdir(parents=True)
        (folder / "train.en").write_text(ENGLISH[number % len(ENGLISH)] + "\n")
        (folder / "train.fr").write_text(FRENCH[number % len(FRENCH)] + "\n")


def test_fr_en_reads_every_corpus_with_french_as_the_source(tmp_path: Path) -> None:
    write_data(tmp_path)
    forward = [p for c in corpora(tmp_path, direction=EN_FR) for p in c.read()]
    backward = [p for c in corpora(tmp_path, direction=FR_EN) for p in c.read()]
    assert [c.name for c in corpora(tmp_path, direction=FR_EN)] == [*DOMAINS, "news"]
    assert backward == [(fr, en) for en, fr in forward]
    assert backward[0] == (FRENCH[0], ENGLISH[0])


def test_each_direction_keeps_its_own_snapshot() -> None:
    assert snapshot_dir(EN_FR) == SNAPSHOT_DIR
    assert snapshot_dir(FR_EN) == SNAPSHOT_DIR.with_name("snapshot-fr-en")


def test_an_unpublished_direction_restores_from_its_snapshot_alone(tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    published_builtin(builtin)
    trained = tmp_path / "trained"
    restore_run_dir(trained, builtin, snapshot=tmp_path / "none")  # any backbone will do
    snapshot = tmp_path / "snapshot-fr-en"
    save_snapshot(trained, snapshot)

    with pytest.raises(FileNotFoundError, match="no snapshot"):
        restore_from_snapshot(tmp_path / "elsewhere", tmp_path / "missing")
    run_dir = tmp_path / "run"
    assert restore_from_snapshot(run_dir, snapshot)
    assert not restore_from_snapshot(run_dir, snapshot)  # already there
    restored, _ = load_trained_backbone(run_dir)
    original, _ = load_trained_backbone(trained)
    for name, tensor in original.state_dict().items():  # float16 in the snapshot
        assert torch.equal(restored.state_dict()[name], tensor.half().float()), name


def test_the_other_direction_shares_the_published_joint_vocabulary(tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    files = published_builtin(builtin)
    run_dir = tmp_path / "run"
    share_vocabulary(builtin, run_dir)
    assert (run_dir / "spm.model").read_bytes() == files["source.spm"]
    (run_dir / "spm.model").write_bytes(b"trained already")
    share_vocabulary(builtin, run_dir)  # a run dir's own vocabulary is never replaced
    assert (run_dir / "spm.model").read_bytes() == b"trained already"
    share_vocabulary(tmp_path / "no-builtin", tmp_path / "other")  # nothing to share
    assert not (tmp_path / "other" / "spm.model").exists()
