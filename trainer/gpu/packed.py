"""The packed training data of a GPU run: token ids of every corpus of the default recipe,
as flat arrays, compressed with xz (written by trainer/gpu/pack.py, read on the GPU machine
by trainer/gpu/run.py).

A pack is a folder (kept out of git: `/.gpu/` in .gitignore) that travels with the device
call's `carry`:

    pack.json      direction, max length, temperature, corpus names and pair counts (in the
                   pairs' order), the domains (the first corpora), the vocabulary's sha256
    spm.model      the recipe's joint sentencepiece
    train.npz.xz   src, tgt: uint16 ids of every pair, concatenated, no specials (the run
                   appends EOS to sources); src_len, tgt_len: uint8 per pair
    dev.npz.xz     the same for the 7 domains' dev splits, with `corpus`: each pair's domain

uint16 ids (the vocabulary has 8,000 pieces) compress to ~5.8 bits a token with xz: the
recipe's ~560k pairs (22.7M tokens) take ~16.4 MB, which fits beside the repository in the
64 MiB a device call may carry.
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

PACK_FILE = "pack.json"
SPM_FILE = "spm.model"
TRAIN_FILE = "train.npz.xz"
DEV_FILE = "dev.npz.xz"
FORMAT = 1
DIRECTIONS = ("en-fr", "fr-en")


@dataclass(frozen=True)
class PackInfo:
    direction: str
    max_len: int
    temperature: float
    names: tuple[str, ...]  # corpora, in the pairs' order
    pairs: tuple[int, ...]  # pairs each corpus contributed
    domains: tuple[str, ...]  # the adapters' domains: the first corpora
    dev_pairs: tuple[int, ...]  # dev pairs per domain
    spm_sha256: str
    vocab_size: int
    format: int = FORMAT

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction {self.direction!r}: one of {', '.join(DIRECTIONS)}")
        if self.names[: len(self.domains)] != self.domains:
            raise ValueError(f"the domains {self.domains} must be the first corpora, in "
                             f"order (corpora: {self.names})")

    def domain_range(self, domain: str) -> tuple[int, int]:
        """[start, end) of a domain's pairs in the training arrays."""
        index = self.names.index(domain)
        start = sum(self.pairs[:index])
        return start, start + self.pairs[index]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> PackInfo:
        saved = json.loads(text)
        if saved.get("format") != FORMAT:
            raise ValueError(f"pack format {saved.get('format')}, this code reads {FORMAT}: "
                             "pack again (python -m trainer.gpu.pack)")
        return cls(direction=saved["direction"], max_len=int(saved["max_len"]),
                   temperature=float(saved["temperature"]), names=tuple(saved["names"]),
                   pairs=tuple(int(n) for n in saved["pairs"]),
                   domains=tuple(saved["domains"]),
                   dev_pairs=tuple(int(n) for n in saved["dev_pairs"]),
                   spm_sha256=saved["spm_sha256"], vocab_size=int(saved["vocab_size"]))


@dataclass
class TokenPairs:
    """Ragged token ids as flat arrays: pair i's source is src[src_start[i]:][:src_len[i]]."""

    src: np.ndarray  # uint16
    tgt: np.ndarray  # uint16
    src_len: np.ndarray  # uint8 / int
    tgt_len: np.ndarray
    corpus: np.ndarray | None = None  # per pair (dev sets)

    def __len__(self) -> int:
        return len(self.src_len)

    @classmethod
    def from_lists(cls, sources: list[list[int]], targets: list[list[int]],
                   corpus: np.ndarray | None = None) -> TokenPairs:
        def flat(rows: list[list[int]]) -> np.ndarray:
            return (np.fromiter((i for row in rows for i in row), dtype=np.uint16)
                    if rows else np.zeros(0, np.uint16))

        return cls(flat(sources), flat(targets),
                   np.array([len(s) for s in sources], dtype=np.uint8),
                   np.array([len(t) for t in targets], dtype=np.uint8), corpus)

    def swapped(self) -> TokenPairs:
        return TokenPairs(self.tgt, self.src, self.tgt_len, self.src_len, self.corpus)

    def rows(self, side: str) -> list[np.ndarray]:
        flat, lengths = (self.src, self.src_len) if side == "src" else (self.tgt, self.tgt_len)
        return np.split(flat, np.cumsum(lengths.astype(np.int64))[:-1]) if len(lengths) else []


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_pairs(pairs: TokenPairs, path: Path, *, preset: int = 9) -> None:
    """npz bytes, compressed with xz, written atomically."""
    buffer = io.BytesIO()
    arrays: dict[str, Any] = {"src": pairs.src, "tgt": pairs.tgt, "src_len": pairs.src_len,
              "tgt_len": pairs.tgt_len}
    if pairs.corpus is not None:
        arrays["corpus"] = pairs.corpus
    np.savez(buffer, **arrays)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(lzma.compress(buffer.getvalue(), preset=preset))
    tmp.replace(path)


def read_pairs(path: Path) -> TokenPairs:
    with np.load(io.BytesIO(lzma.decompress(path.read_bytes()))) as arrays:
        corpus = arrays["corpus"] if "corpus" in arrays.files else None
        pairs = TokenPairs(arrays["src"], arrays["tgt"], arrays["src_len"], arrays["tgt_len"],
                           corpus)
    if int(pairs.src_len.astype(np.int64).sum()) != len(pairs.src) or \
            int(pairs.tgt_len.astype(np.int64).sum()) != len(pairs.tgt):
        raise ValueError(f"{path}: lengths do not add up to the ids: a damaged pack")
    return pairs


@dataclass(frozen=True)
class Pack:
    info: PackInfo
    train: TokenPairs
    dev: TokenPairs
    spm: bytes


def read_pack(folder: Path) -> Pack:
    if not (folder / PACK_FILE).exists():
        raise FileNotFoundError(f"{folder} holds no {PACK_FILE}: write it with "
                                "python -m trainer.gpu.pack")
    info = PackInfo.from_json((folder / PACK_FILE).read_text())
    spm = (folder / SPM_FILE).read_bytes()
    if hashlib.sha256(spm).hexdigest() != info.spm_sha256:
        raise ValueError(f"{folder / SPM_FILE} is not the vocabulary the pack was encoded with")
    train = read_pairs(folder / TRAIN_FILE)
    if len(train) != sum(info.pairs):
        raise ValueError(f"{folder}: {len(train)} pairs, pack.json counts {sum(info.pairs)}")
    return Pack(info, train, read_pairs(folder / DEV_FILE), spm)
