"""A backbone stage that starts from a published backbone of another direction instead of
from random weights: en->de from the shipped en->fr backbone, whose encoder already reads
English. Every weight is carried over; only the embedding matrix (shared by the encoder,
the decoder and the output layer) has to change, because the run has its own vocabulary
(en+de: the en-fr vocabulary splits German into twice as many pieces, its umlauts into
bytes). Each piece of the new vocabulary takes the old row of the same piece where the old
vocabulary has it (most English pieces, the specials, the 256 byte pieces), and otherwise
the mean of the old rows of the pieces the old vocabulary splits its text into (the
embedding initialisation by subword composition of e.g. Tran 2020, "From English to
Foreign Languages: Transferring Pre-trained Language Models").

    python -m trainer.recipes.default_en_fr --direction en-de --stage backbone \\
        --warm-start default-en-fr

The run dir then holds the carried weights as a weights-only checkpoint at step 0 (as
`--stage restore` writes one): the backbone stage trains on from it with a fresh optimizer
and the recipe's whole schedule, warm-up included.
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import sentencepiece as spm
import torch
from torch import Tensor

from contract.artifacts import BACKBONE_CONFIG_FILE, SOURCE_SPM_FILE
from contract.backbone import BackboneConfig
from model_store import Store
from server.engine.artifacts import backbone_parts
from trainer.training.loop import Checkpoints, Progress

log = logging.getLogger("trainer.recipes.default_en_fr")

EMBEDDING = "embed.weight"  # shared_embeddings="all": the one matrix (server/engine/backbone.py)
WARM_START_FILE = "warm_start.json"  # in the run dir: where its first weights came from
WORD_START = "\u2581"  # sentencepiece's word-boundary mark


def warm_start_provenance(run_dir: Path) -> dict[str, Any]:
    """What a published backbone's provenance keeps of the run's warm start (`warm_start`:
    the record of warm_start.json), so a run dir restored from it on another machine still
    says how the backbone began (its model card's first line)."""
    path = run_dir / WARM_START_FILE
    return {"warm_start": json.loads(path.read_text())} if path.exists() else {}


def restore_warm_start(run_dir: Path, provenance: dict[str, Any]) -> None:
    """The inverse of `warm_start_provenance`, for a run dir restored from a publication."""
    record = provenance.get("warm_start")
    if isinstance(record, dict) and not (run_dir / WARM_START_FILE).exists():
        (run_dir / WARM_START_FILE).write_text(json.dumps(record, indent=1))


def carried_embeddings(old: Tensor, old_vocabulary: spm.SentencePieceProcessor,
                       new_vocabulary: spm.SentencePieceProcessor) -> tuple[Tensor, int]:
    """The embedding rows of `new_vocabulary`'s pieces made from `old`'s (the rows of
    `old_vocabulary`), and how many were copied whole (the rest are composed)."""
    rows = torch.empty(new_vocabulary.get_piece_size(), old.shape[1], dtype=old.dtype)
    copied = 0
    for new_id in range(new_vocabulary.get_piece_size()):
        piece = new_vocabulary.id_to_piece(new_id)
        old_id = old_vocabulary.piece_to_id(piece)
        if old_vocabulary.id_to_piece(old_id) == piece and old_id < old.shape[0]:
            rows[new_id] = old[old_id]
            copied += 1
            continue
        parts = _composition(piece, old_vocabulary)
        rows[new_id] = old[parts].mean(dim=0) if parts else old.mean(dim=0)
    return rows, copied


def _composition(piece: str, vocabulary: spm.SentencePieceProcessor) -> list[int]:
    """The old pieces of `piece`'s text. Encoding adds a word-start mark before the text,
    so a piece that does not start a word loses the bare mark the old vocabulary puts
    there."""
    ids: list[int] = vocabulary.encode(piece.replace(WORD_START, " ").strip() or piece)
    if not piece.startswith(WORD_START) and ids and vocabulary.id_to_piece(ids[0]) == WORD_START:
        ids = ids[1:]
    return ids


def warm_start(run_dir: Path, builtin: Path, *, backbone: str,
               recipe: BackboneConfig) -> bool:
    """Write the run dir's first checkpoint from the published `backbone` (in `builtin`),
    its embeddings carried into the run dir's vocabulary (spm.model, written by stage 1).
    False when the run dir has a checkpoint already (the run resumes it instead)."""
    checkpoint = run_dir / "backbone" / "checkpoint.pt"
    if checkpoint.exists():
        return False
    vocabulary = spm.SentencePieceProcessor(model_file=str(run_dir / "spm.model"))
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp), builtin_dir=builtin) as store:
        loaded = store.load_backbone(backbone)
    parts = backbone_parts(loaded.files)
    # the vocabulary may differ in size (its rows are made anew), nothing else
    resized = replace(parts.config, src_vocab_size=recipe.src_vocab_size,
                      tgt_vocab_size=recipe.tgt_vocab_size)
    if resized != recipe or recipe.shared_embeddings != "all":
        raise ValueError(f"{loaded.manifest.label} has another architecture than the "
                         "recipe's backbone: a warm start needs the same shape, with one "
                         "embedding matrix shared by encoder, decoder and output")
    if vocabulary.get_piece_size() != recipe.tgt_vocab_size:
        raise ValueError(f"{run_dir}/spm.model has {vocabulary.get_piece_size()} pieces; the "
                         f"recipe's backbone has {recipe.tgt_vocab_size}")
    old_vocabulary = spm.SentencePieceProcessor(
        model_proto=loaded.files[SOURCE_SPM_FILE])
    tensors = dict(parts.tensors)
    tensors[EMBEDDING], copied = carried_embeddings(tensors[EMBEDDING], old_vocabulary,
                                                    vocabulary)
    progress = Progress()  # step 0, not finished: the whole schedule is still ahead
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    (run_dir / BACKBONE_CONFIG_FILE).write_text(json.dumps(recipe.to_dict(), indent=1))
    torch.save({"model": tensors, "progress": asdict(progress)}, checkpoint)
    Checkpoints(checkpoint.parent).write_progress(progress)
    record = {"backbone": loaded.manifest.label, "steps": loaded.manifest.provenance.get("steps"),
              "pieces": vocabulary.get_piece_size(), "embeddings_copied": copied}
    (run_dir / WARM_START_FILE).write_text(json.dumps(record, indent=1))
    log.info("warm start from %s: %d of %d embedding rows copied, the rest composed",
             loaded.manifest.label, copied, vocabulary.get_piece_size())
    return True
