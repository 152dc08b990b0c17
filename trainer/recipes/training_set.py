"""Stage 1 of the default recipe: a direction's corpora, its joint vocabulary (sentencepiece
trained on both sides of its pairs: English and French for en-fr and fr-en, English and
German for en-de) and the encoded training set, cached in the run dir."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import sentencepiece as spm

from trainer.recipes.directions import EN_FR, Direction
from trainer.training.data import (
    Corpus,
    EncodedPairs,
    encode_pairs,
    encoded_corpus_sizes,
    load_encoded,
    save_encoded,
    train_sentencepiece,
)
from trainer.training.sampling import CorpusSizes

log = logging.getLogger("trainer.recipes.default_en_fr")

DOMAINS = ("medical", "law", "it", "subtitles", "edu", "ted", "religion")
VOCAB_SIZE = 8000
MAX_LEN = 128


def corpora(data_dir: Path, split: str = "train",
            direction: Direction = EN_FR) -> list[Corpus]:
    folder = data_dir / direction.pair
    found = [direction.corpus(d, folder / "domains" / d, split) for d in DOMAINS]
    if split == "train":
        for extra in sorted((folder / "extra").iterdir()):
            found.append(direction.corpus(extra.name, extra, "train"))
    return found


def prepare(data_dir: Path, run_dir: Path,
            direction: Direction = EN_FR) -> tuple[spm.SentencePieceProcessor, EncodedPairs]:
    """Stage 1: joint vocabulary and the encoded training set (cached in run_dir), with
    each corpus's pair count beside it (train.corpora.json, for temperature sampling)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    spm_path = run_dir / "spm.model"
    encoded_path = run_dir / "train.npz"
    sizes_path = run_dir / "train.corpora.json"
    pairs: list[tuple[str, str]] = []
    if not spm_path.exists() or not encoded_path.exists():
        for corpus in corpora(data_dir, direction=direction):
            part = corpus.read()
            log.info("corpus %s: %d pairs", corpus.name, len(part))
            pairs.extend(part)
    if not spm_path.exists():
        texts = [s for s, _ in pairs] + [t for _, t in pairs]
        train_sentencepiece(texts, run_dir / "spm", vocab_size=VOCAB_SIZE)
    processor = spm.SentencePieceProcessor(model_file=str(spm_path))
    if not encoded_path.exists():
        save_encoded(encode_pairs(pairs, processor, max_len=MAX_LEN), encoded_path)
        encoded_with_path(run_dir).write_text(file_digest(spm_path))
    check_encoded_vocabulary(run_dir)
    data = load_encoded(encoded_path)
    if not sizes_path.exists():  # a run dir encoded before the sizes were kept
        encoded_corpus_sizes(corpora(data_dir, direction=direction), processor, max_len=MAX_LEN,
                             encoded=data).save(sizes_path)
    data.corpora = CorpusSizes.load(sizes_path)
    log.info("training set: %d pairs, %d target tokens", len(data),
             sum(len(t) + 1 for t in data.target))
    return processor, data


def encoded_with_path(run_dir: Path) -> Path:
    return run_dir / "train.spm.sha256"


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_encoded_vocabulary(run_dir: Path) -> None:
    """train.npz holds token ids of one sentencepiece model: a run dir whose spm.model was
    replaced afterwards would train on ids that the dev set, the snapshot and the published
    backbone read as other words. A run dir encoded before the digest was kept gets it now."""
    record, spm_path = encoded_with_path(run_dir), run_dir / "spm.model"
    if not record.exists():
        record.write_text(file_digest(spm_path))
    elif record.read_text().strip() != file_digest(spm_path):
        raise ValueError(f"{run_dir}/train.npz was encoded with another sentencepiece model "
                         f"than {spm_path} (sha256 in {record.name}): put back the model it "
                         "was encoded with, or delete train.npz to encode it again")
