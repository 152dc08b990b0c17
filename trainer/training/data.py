"""Parallel text: reading corpora, sentencepiece vocabularies, encoding and batching."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import sentencepiece as spm
import torch
from torch import Tensor

from contract.backbone import BackboneConfig
from server.engine.tokenizer import Tokenizer
from trainer.training.sampling import CorpusSizes, sampled_order

log = logging.getLogger(__name__)

# Special ids of vocabularies this project trains itself (sentencepiece's own ids).
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


@dataclass(frozen=True)
class Specials:
    """The special ids batches are built with: padding, decoder start, end of sentence.
    Defaults: this project's vocabularies; an imported backbone brings its own (Marian:
    eos 0, pad = decoder start = the last id)."""

    pad: int = PAD_ID
    start: int = BOS_ID
    eos: int = EOS_ID

    @classmethod
    def of(cls, config: BackboneConfig) -> Specials:
        return cls(pad=config.pad_id, start=config.decoder_start_id, eos=config.eos_id)


@dataclass(frozen=True)
class Corpus:
    """One parallel corpus: line N of `source` translates line N of `target`."""

    name: str
    source: Path
    target: Path

    def read(self) -> list[tuple[str, str]]:
        src = self.source.read_text(encoding="utf-8").splitlines()
        tgt = self.target.read_text(encoding="utf-8").splitlines()
        if len(src) != len(tgt):
            raise ValueError(f"{self.name}: {len(src)} source lines but {len(tgt)} target lines")
        return [(s, t) for s, t in zip(src, tgt, strict=True) if s.strip() and t.strip()]


def train_sentencepiece(texts: Sequence[str], model_prefix: Path, *, vocab_size: int,
                        seed: int = 1, sample_size: int = 600_000) -> Path:
    """Train a unigram sentencepiece model (pad=0, unk=1, bos=2, eos=3, byte fallback)."""
    rng = random.Random(seed)
    sample = list(texts) if len(texts) <= sample_size else rng.sample(list(texts), sample_size)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sample), model_prefix=str(model_prefix), vocab_size=vocab_size,
        model_type="unigram", character_coverage=0.9995, byte_fallback=True,
        pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID, num_threads=2,
        input_sentence_size=sample_size, shuffle_input_sentence=True, max_sentence_length=4096,
        minloglevel=2)
    return model_prefix.with_suffix(".model")


@dataclass
class EncodedPairs:
    """Token ids of parallel sentences; source ends with EOS, target carries no specials.
    `labels` (joint multi-domain training): each pair's domain index. `corpora`: how
    many pairs each corpus contributed, in order (what temperature sampling needs)."""

    source: list[np.ndarray]
    target: list[np.ndarray]
    labels: np.ndarray | None = None
    specials: Specials = Specials()
    corpora: CorpusSizes | None = None

    def __len__(self) -> int:
        return len(self.source)


def encode_pairs(pairs: Sequence[tuple[str, str]], processor: spm.SentencePieceProcessor, *,
                 max_len: int, chunk: int = 20_000) -> EncodedPairs:
    """Encode and drop pairs longer than `max_len` tokens on either side."""
    sources: list[np.ndarray] = []
    targets: list[np.ndarray] = []
    for start in range(0, len(pairs), chunk):
        part = pairs[start: start + chunk]
        src_ids = processor.encode([s for s, _ in part])
        tgt_ids = processor.encode([t for _, t in part])
        for s, t in zip(src_ids, tgt_ids, strict=True):
            if 0 < len(s) < max_len and 0 < len(t) < max_len:
                sources.append(np.asarray(s + [EOS_ID], dtype=np.int32))
                targets.append(np.asarray(t, dtype=np.int32))
    return EncodedPairs(sources, targets)


def encode_for_backbone(pairs: Sequence[tuple[str, str]], source: Tokenizer, target: Tokenizer,
                        config: BackboneConfig, *, max_len: int,
                        label: int | None = None) -> EncodedPairs:
    """Token ids through a backbone's own tokenizers, batched with its special ids
    (sources end with EOS when the backbone's do; targets carry no specials). Pairs with
    an empty side or over `max_len` tokens are dropped; `label` marks every pair."""
    src_ids = source.encode([s for s, _ in pairs])
    tgt_ids = target.encode([t for _, t in pairs], add_eos=False)
    shortest = 1 + int(source.add_eos)
    kept = [(s, t) for s, t in zip(src_ids, tgt_ids, strict=True)
            if shortest <= len(s) <= max_len and 0 < len(t) < max_len]
    labels = None if label is None else np.full(len(kept), label, dtype=np.int64)
    return EncodedPairs([np.asarray(s, dtype=np.int32) for s, _ in kept],
                        [np.asarray(t, dtype=np.int32) for _, t in kept], labels,
                        Specials.of(config))


@dataclass(frozen=True)
class Batch:
    src: Tensor  # [batch, src_len] padded with pad_id
    tgt_in: Tensor  # [batch, tgt_len]: decoder start + target
    tgt_out: Tensor  # [batch, tgt_len]: target + EOS, pad_id where padded
    labels: Tensor | None = None  # [batch] domain index of each pair (labelled data only)
    pad_id: int = PAD_ID

    @property
    def target_tokens(self) -> int:
        return int((self.tgt_out != self.pad_id).sum())


def collate(sources: Sequence[np.ndarray], targets: Sequence[np.ndarray], *,
            specials: Specials = Specials()) -> Batch:
    src_len = max(len(s) for s in sources)
    tgt_len = max(len(t) for t in targets) + 1
    pad = specials.pad
    src = torch.full((len(sources), src_len), pad, dtype=torch.long)
    tgt_in = torch.full((len(sources), tgt_len), pad, dtype=torch.long)
    tgt_out = torch.full((len(sources), tgt_len), pad, dtype=torch.long)
    for row, (s, t) in enumerate(zip(sources, targets, strict=True)):
        src[row, : len(s)] = torch.from_numpy(s.astype(np.int64))
        tgt_in[row, 0] = specials.start
        tgt_in[row, 1: len(t) + 1] = torch.from_numpy(t.astype(np.int64))
        tgt_out[row, : len(t)] = torch.from_numpy(t.astype(np.int64))
        tgt_out[row, len(t)] = specials.eos
    return Batch(src, tgt_in, tgt_out, pad_id=pad)


def token_batches(data: EncodedPairs, *, max_tokens: int, seed: int, epoch: int,
                  temperature: float = 1.0) -> list[list[int]]:
    """Index batches of similar lengths under `max_tokens` (padded src+tgt), in an order
    that depends only on (seed, epoch): resuming replays exactly the same batches.
    `temperature` > 1 draws the epoch's pairs by corpus temperature
    (trainer/training/sampling.py)."""
    rng = random.Random(seed * 1_000_003 + epoch)
    if temperature == 1.0:
        order = list(range(len(data)))
        rng.shuffle(order)
    elif data.corpora is None or data.corpora.total != len(data):
        raise ValueError("corpus temperature sampling needs each corpus's pair count "
                         "(EncodedPairs.corpora) summing to the set's size")
    else:
        order = sampled_order(data.corpora, temperature=temperature, seed=seed, epoch=epoch)
    batches: list[list[int]] = []
    pool = 100 * 64  # sort within pools: similar lengths together, still shuffled overall
    for start in range(0, len(order), pool):
        chunk = sorted(order[start: start + pool],
                       key=lambda i: (len(data.target[i]), len(data.source[i])))
        current: list[int] = []
        longest = 0
        for index in chunk:
            length = max(len(data.source[index]), len(data.target[index]) + 1)
            if current and (len(current) + 1) * max(longest, length) * 2 > max_tokens:
                batches.append(current)
                current, longest = [], 0
            current.append(index)
            longest = max(longest, length)
        if current:
            batches.append(current)
    rng.shuffle(batches)
    return batches


def iterate_batches(data: EncodedPairs, batches: Sequence[list[int]], *,
                    start: int = 0) -> Iterator[tuple[int, Batch]]:
    for number in range(start, len(batches)):
        indices = batches[number]
        batch = collate([data.source[i] for i in indices], [data.target[i] for i in indices],
                        specials=data.specials)
        if data.labels is not None:
            batch = replace(batch, labels=torch.from_numpy(data.labels[indices].astype(np.int64)))
        yield number, batch


def save_encoded(data: EncodedPairs, path: Path) -> None:
    """Ragged arrays as flat ids + lengths (one .npz, written atomically)."""
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, src=np.concatenate(data.source), tgt=np.concatenate(data.target),
             src_len=np.array([len(s) for s in data.source], dtype=np.int32),
             tgt_len=np.array([len(t) for t in data.target], dtype=np.int32))
    tmp.replace(path)


def load_encoded(path: Path) -> EncodedPairs:
    arrays = np.load(path)
    src_split = np.cumsum(arrays["src_len"])[:-1]
    tgt_split = np.cumsum(arrays["tgt_len"])[:-1]
    return EncodedPairs(list(np.split(arrays["src"], src_split)),
                        list(np.split(arrays["tgt"], tgt_split)))


def join_labelled(parts: Sequence[EncodedPairs]) -> EncodedPairs:
    """One labelled set from per-domain sets (of one backbone): part i's pairs get label i."""
    specials = {part.specials for part in parts}
    if len(specials) > 1:
        raise ValueError(f"parts encoded for different backbones: special ids {specials}")
    return EncodedPairs([s for part in parts for s in part.source],
                        [t for part in parts for t in part.target],
                        np.concatenate([np.full(len(part), i, dtype=np.int64)
                                        for i, part in enumerate(parts)]),
                        specials.pop() if specials else Specials())


def encoded_corpus_sizes(corpora: Sequence[Corpus], processor: spm.SentencePieceProcessor, *,
                         max_len: int, encoded: EncodedPairs) -> CorpusSizes:
    """How many pairs of `encoded` (made by `encode_pairs` from these corpora, in order) each
    corpus contributed. From the corpora's pair counts alone when no pair was dropped;
    otherwise each corpus is encoded again to learn which were, and the result is checked
    against the encoded set's lengths."""
    read = [corpus.read() for corpus in corpora]
    names = tuple(corpus.name for corpus in corpora)
    if sum(len(pairs) for pairs in read) == len(encoded):
        return CorpusSizes(names, tuple(len(pairs) for pairs in read))
    parts = [encode_pairs(pairs, processor, max_len=max_len) for pairs in read]
    lengths = [len(s) for part in parts for s in part.source]
    if lengths != [len(s) for s in encoded.source]:
        raise ValueError("the encoded training set was not made from these corpora in this "
                         "order: encode it again (delete train.npz)")
    return CorpusSizes(names, tuple(len(part) for part in parts))
