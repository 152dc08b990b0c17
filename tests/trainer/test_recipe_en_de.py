"""The default recipe's English->German direction: its corpora (shared/data/en-de), its own
vocabulary, the backbone stage warm-started from a published backbone of another direction
(embeddings carried into the new vocabulary), a step budget, and snapshots carried in the
repository's history instead of its tree."""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
import sentencepiece as spm
import torch

from server.engine.artifacts import backbone_parts
from tests.tiny import ENGLISH, spm_bytes, tiny_config
from tests.trainer.test_default_recipe import published_builtin
from trainer.recipes import default_en_fr as recipe
from trainer.recipes.default_stages import BACKBONE_NAME, restore_run_dir
from trainer.recipes.directions import EN_DE, EN_FR
from trainer.recipes.snapshot import SNAPSHOT_DIR, load_snapshot, save_snapshot, snapshot_dir
from trainer.recipes.snapshot_history import carry, fetch, pointer_path
from trainer.recipes.training_set import DOMAINS, corpora
from trainer.recipes.warm_start import EMBEDDING, WARM_START_FILE, carried_embeddings, warm_start

GERMAN = [
    "der patient nimmt eine tablette pro tag",
    "verwenden sie dieses arzneimittel nicht nach dem verfallsdatum",
    "der rat hat diese verordnung angenommen", "die mitgliedstaaten kommen dieser richtlinie nach",
    "klicken sie auf die schaltfläche um eine datei zu öffnen",
    "das fenster zeigt die liste der dateien", "ich liebe dich", "wohin gehst du heute abend",
    "wir werden heute über wissenschaft sprechen", "vielen dank fürs zuhören",
    "im namen gottes des barmherzigen", "die dosis muss für kinder angepasst werden",
    "diese entscheidung ist an die mitgliedstaaten gerichtet",
]


def german_spm_bytes() -> bytes:
    """A tiny en+de vocabulary of the tiny backbone's size (120 pieces)."""
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter((ENGLISH + GERMAN) * 4), model_writer=out, vocab_size=120,
        model_type="unigram", character_coverage=1.0, pad_id=0, unk_id=1, bos_id=2, eos_id=3,
        minloglevel=2, hard_vocab_limit=False)
    return out.getvalue()


def write_en_de(root: Path) -> None:
    for number, name in enumerate((*DOMAINS, "news")):
        folder = root / "en-de" / ("extra" if name == "news" else "domains") / name
        folder.mkdir(parents=True)
        for split in ("train", "dev"):
            lines = [number % len(ENGLISH), (number + 1) % len(ENGLISH)]
            (folder / f"{split}.en").write_text("\n".join(ENGLISH[i] for i in lines) + "\n")
            (folder / f"{split}.de").write_text("\n".join(GERMAN[i] for i in lines) + "\n")


def test_en_de_reads_the_en_de_folder_english_first(tmp_path: Path) -> None:
    write_en_de(tmp_path)
    found = corpora(tmp_path, direction=EN_DE)
    assert [c.name for c in found] == [*DOMAINS, "news"]
    assert found[0].read()[0] == (ENGLISH[0], GERMAN[0])
    assert [c.name for c in corpora(tmp_path, "dev", EN_DE)] == list(DOMAINS)
    with pytest.raises(FileNotFoundError):  # en-fr's folder is not read
        corpora(tmp_path, direction=EN_FR)
    assert snapshot_dir(EN_DE) == SNAPSHOT_DIR.with_name("snapshot-en-de")


def test_carried_embeddings_copy_shared_pieces_and_compose_the_others() -> None:
    old_vocabulary = spm.SentencePieceProcessor(model_proto=spm_bytes())  # en+fr
    new_vocabulary = spm.SentencePieceProcessor(model_proto=german_spm_bytes())
    old = torch.randn(old_vocabulary.get_piece_size(), 8)
    rows, copied = carried_embeddings(old, old_vocabulary, new_vocabulary)
    assert rows.shape == (new_vocabulary.get_piece_size(), 8)
    old_pieces = {old_vocabulary.id_to_piece(i): i for i in range(old.shape[0])}
    shared = [i for i in range(rows.shape[0]) if new_vocabulary.id_to_piece(i) in old_pieces]
    assert copied == len(shared) and 4 < copied < rows.shape[0]
    for new_id in shared:  # the specials among them
        assert torch.equal(rows[new_id], old[old_pieces[new_vocabulary.id_to_piece(new_id)]])
    # a German word the en+fr vocabulary lacks: the mean of the old pieces it splits into
    new_id = next(i for i in range(rows.shape[0]) if i not in shared
                  and new_vocabulary.id_to_piece(i).startswith("\u2581")
                  and len(new_vocabulary.id_to_piece(i)) > 3)
    text = new_vocabulary.id_to_piece(new_id).replace("\u2581", " ").strip()
    parts = old_vocabulary.encode(text)
    assert len(parts) > 1
    assert torch.allclose(rows[new_id], old[parts].mean(dim=0))


def backbone_args(tmp_path: Path, **overrides: object) -> argparse.Namespace:
    values: dict[str, object] = dict(
        data=tmp_path / "data", run_dir=tmp_path / "run", out=tmp_path / "builtin",
        snapshot=tmp_path / "snapshot-en-de", warm_start=None, max_minutes=5.0, max_steps=3,
        max_epochs=recipe.SETTINGS.max_epochs, eval_every=2, temperature=1.0,
        cooldown_from=None, cooldown_steps=0)
    values.update(overrides)
    return argparse.Namespace(**values)


def test_the_backbone_stage_warm_starts_from_a_published_backbone_for_a_step_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recipe, "BACKBONE", tiny_config())  # the published tiny shape
    files = published_builtin(tmp_path / "builtin")
    write_en_de(tmp_path / "data")
    args = backbone_args(tmp_path, warm_start=BACKBONE_NAME)
    args.run_dir.mkdir()
    (args.run_dir / "spm.model").write_bytes(german_spm_bytes())  # stage 1's vocabulary
    recipe.run_stages(args, ("backbone",), threading.Event(), EN_DE)

    progress = json.loads((args.run_dir / "backbone" / "progress.json").read_text())
    assert (progress["step"], progress["stop_reason"]) == (3, "max_steps")
    assert [h["step"] for h in progress["history"]] == [2]  # --eval-every 2
    record = json.loads((args.run_dir / WARM_START_FILE).read_text())
    assert record["backbone"].startswith(f"backbones/{BACKBONE_NAME}/")
    assert record["pieces"] == 120 and 4 < record["embeddings_copied"] < 120
    # three steps of warm-up move the published weights by little; random ones differ
    published = backbone_parts(files).tensors
    trained = torch.load(args.run_dir / "backbone" / "checkpoint.pt", weights_only=True)["model"]
    name = "encoder.layers.0.ffn.fc1.weight"
    assert not torch.equal(trained[name], published[name])
    assert (trained[name] - published[name]).abs().max() < 0.01 < published[name].abs().max()

    # a larger step budget trains on from the checkpoint: no second warm start
    (args.run_dir / WARM_START_FILE).unlink()
    recipe.run_stages(backbone_args(tmp_path, warm_start=BACKBONE_NAME, max_steps=4),
                      ("backbone",), threading.Event(), EN_DE)
    assert json.loads((args.run_dir / "backbone" / "progress.json").read_text())["step"] == 4
    assert not (args.run_dir / WARM_START_FILE).exists()


def test_a_warm_start_refuses_another_shape_or_vocabulary_size(tmp_path: Path) -> None:
    published_builtin(tmp_path / "builtin")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "spm.model").write_bytes(german_spm_bytes())
    with pytest.raises(ValueError, match="another architecture"):
        warm_start(run_dir, tmp_path / "builtin", backbone=BACKBONE_NAME,
                   recipe=tiny_config(d_model=64))
    with pytest.raises(ValueError, match="another architecture"):
        warm_start(run_dir, tmp_path / "builtin", backbone=BACKBONE_NAME,
                   recipe=tiny_config(shared_embeddings="none"))
    with pytest.raises(ValueError, match="120 pieces"):
        warm_start(run_dir, tmp_path / "builtin", backbone=BACKBONE_NAME,
                   recipe=tiny_config(src_vocab_size=200, tgt_vocab_size=200))
    assert warm_start(run_dir, tmp_path / "builtin", backbone=BACKBONE_NAME,
                      recipe=tiny_config())
    saved = torch.load(run_dir / "backbone" / "checkpoint.pt", weights_only=True)
    assert saved["progress"]["step"] == 0 and not saved["progress"]["finished"]
    assert saved["model"][EMBEDDING].shape == (120, 32)
    assert not warm_start(run_dir, tmp_path / "builtin", backbone=BACKBONE_NAME,
                          recipe=tiny_config())  # a checkpoint is there: resumed instead


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_snapshot_travels_in_the_history_and_never_in_the_tree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "recipes").mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.org")
    git(repo, "config", "user.name", "t")
    (repo / ".gitignore").write_text("/recipes/snapshot*/\n")
    (repo / "README").write_text("a repository\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "start")
    # a snapshot as save_snapshot writes it, of a restored tiny backbone
    builtin = tmp_path / "builtin"
    published_builtin(builtin)
    run_dir = tmp_path / "run"
    restore_run_dir(run_dir, builtin, snapshot=tmp_path / "none")
    snapshot = repo / "recipes" / "snapshot-en-de"
    save_snapshot(run_dir, snapshot)
    written = {p.name: p.read_bytes() for p in snapshot.iterdir()}

    side = carry(snapshot, repo=repo)
    assert git(repo, "status", "--porcelain") == ""  # the pointer is committed, the rest ignored
    assert git(repo, "ls-files").split() == [".gitignore", "README",
                                             "recipes/snapshot-en-de.commit"]
    assert git(repo, "rev-parse", "HEAD^2").strip() == side  # the history keeps it
    pointer = json.loads(pointer_path(snapshot).read_text())
    assert pointer == {"commit": side, "path": "recipes/snapshot-en-de", "step": 42}

    shutil.rmtree(snapshot)  # the next machine: a clone without the folder
    assert fetch(snapshot, repo=repo)
    assert {p.name: p.read_bytes() for p in snapshot.iterdir()} == written
    assert not fetch(snapshot, repo=repo)  # it holds that step already
    loaded = load_snapshot(snapshot)
    assert loaded is not None and loaded.progress.step == 42
    assert not fetch(repo / "recipes" / "snapshot-fr-en", repo=repo)  # no pointer
