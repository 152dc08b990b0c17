"""Token batches of a GPU run, built on the device: every pair padded once into device
matrices, each step gathering its rows (no per-batch collation on the CPU).

Batches group pairs of similar length: each pair falls in a bucket of `width` tokens by its
longer side, each bucket's batches hold as many pairs as fit `max_tokens` padded source +
target tokens at the bucket's length, and an epoch's batches are shuffled. An epoch draws
its pairs by corpus temperature exactly as the recipe does (trainer/training/sampling.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from trainer.gpu.packed import TokenPairs
from trainer.training.sampling import CorpusSizes, sampled_order


@dataclass(frozen=True)
class Specials:
    pad: int
    start: int
    eos: int


@dataclass(frozen=True)
class Batch:
    src: Tensor  # [rows, src_len] long, EOS-terminated, pad-filled
    tgt_in: Tensor  # [rows, tgt_len]: decoder start + target
    tgt_out: Tensor  # [rows, tgt_len]: target + EOS, pad where padded


def _padded(flat: np.ndarray, lengths: np.ndarray, width: int, pad: int, *,
            first: int | None = None, last: int | None = None) -> np.ndarray:
    """[pairs, width] int32: each row `first`? + its ids + `last`?, then padding."""
    lengths = lengths.astype(np.int64)
    out = np.full((len(lengths), width), pad, dtype=np.int32)
    offset = 0 if first is None else 1
    if first is not None:
        out[:, 0] = first
    columns = np.arange(width - offset)
    out[:, offset:][columns[None, :] < lengths[:, None]] = flat
    if last is not None:
        out[np.arange(len(lengths)), lengths + offset] = last
    return out


class DeviceBatches:
    """A set of pairs on `device`, and its epochs as batches of row indices."""

    def __init__(self, pairs: TokenPairs, specials: Specials, device: torch.device, *,
                 rows: slice | None = None) -> None:
        if rows is not None:
            pairs = _slice(pairs, rows)
        self.specials = specials
        self.src_len = pairs.src_len.astype(np.int64) + 1  # + EOS
        self.tgt_len = pairs.tgt_len.astype(np.int64) + 1  # + start / EOS
        src_width, tgt_width = int(self.src_len.max()), int(self.tgt_len.max())
        self.src = torch.from_numpy(_padded(pairs.src, pairs.src_len, src_width, specials.pad,
                                            last=specials.eos)).to(device)
        self.tgt_in = torch.from_numpy(_padded(pairs.tgt, pairs.tgt_len, tgt_width,
                                               specials.pad, first=specials.start)).to(device)
        self.tgt_out = torch.from_numpy(_padded(pairs.tgt, pairs.tgt_len, tgt_width,
                                                specials.pad, last=specials.eos)).to(device)
        self.device = device

    def __len__(self) -> int:
        return len(self.src_len)

    def target_tokens(self) -> int:
        return int(self.tgt_len.sum())

    def epoch(self, *, max_tokens: int, seed: int, epoch: int, width: int = 8,
              sizes: CorpusSizes | None = None, temperature: float = 1.0) -> list[np.ndarray]:
        """The epoch's batches (row indices), in training order. With `sizes` and a
        temperature above 1 the pairs are drawn by corpus temperature."""
        if sizes is not None and temperature != 1.0:
            order = np.asarray(sampled_order(sizes, temperature=temperature, seed=seed,
                                             epoch=epoch), dtype=np.int64)
        else:
            order = np.random.default_rng([seed, epoch]).permutation(len(self))
        longest = np.maximum(self.src_len, self.tgt_len)[order]
        bucket = (longest + width - 1) // width
        order = order[np.argsort(bucket, kind="stable")]  # shuffled within a bucket
        bucket = np.sort(bucket, kind="stable")
        batches: list[np.ndarray] = []
        for value in np.unique(bucket):
            members = order[bucket == value]
            rows = max(1, max_tokens // (2 * int(value) * width))
            batches += np.array_split(members, -(-len(members) // rows))
        permutation = np.random.default_rng([seed, epoch, 1]).permutation(len(batches))
        return [batches[i] for i in permutation]

    def gather(self, rows: np.ndarray) -> Batch:
        index = torch.from_numpy(rows).to(self.device)
        src_width = int(self.src_len[rows].max())
        tgt_width = int(self.tgt_len[rows].max())
        return Batch(self.src[index, :src_width].long(), self.tgt_in[index, :tgt_width].long(),
                     self.tgt_out[index, :tgt_width].long())

    def iterate(self, batches: list[np.ndarray]) -> Iterator[Batch]:
        for rows in batches:
            yield self.gather(rows)


def _slice(pairs: TokenPairs, rows: slice) -> TokenPairs:
    src_starts = np.concatenate([[0], np.cumsum(pairs.src_len.astype(np.int64))])
    tgt_starts = np.concatenate([[0], np.cumsum(pairs.tgt_len.astype(np.int64))])
    start, stop, _ = rows.indices(len(pairs))
    return TokenPairs(pairs.src[src_starts[start]: src_starts[stop]],
                      pairs.tgt[tgt_starts[start]: tgt_starts[stop]],
                      pairs.src_len[start:stop], pairs.tgt_len[start:stop],
                      None if pairs.corpus is None else pairs.corpus[start:stop])


def select(pairs: TokenPairs, mask: np.ndarray) -> TokenPairs:
    """The pairs where `mask` is true (e.g. one domain of a dev set)."""
    src_rows = np.repeat(mask, pairs.src_len.astype(np.int64))
    tgt_rows = np.repeat(mask, pairs.tgt_len.astype(np.int64))
    return TokenPairs(pairs.src[src_rows], pairs.tgt[tgt_rows], pairs.src_len[mask],
                      pairs.tgt_len[mask], None if pairs.corpus is None else pairs.corpus[mask])
