"""Corpus temperature sampling: draw each epoch's pairs from corpus c with probability
proportional to size_c ** (1 / T) (Arivazhagan et al. 2019, "Massively Multilingual
Neural Machine Translation in the Wild", section 4.2). T = 1 is the plain concatenation;
a larger T moves batches from the largest corpora (software strings, ~2/3 of the default
model's pairs) to the small ones (the 5k-pair domains).

The encoded training set stores no corpus ids: its pairs are the corpora's pairs in order,
so each corpus is one contiguous run of indices and its size is all the sampler needs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class CorpusSizes:
    """How many encoded pairs each corpus contributed, in the encoded set's order."""

    names: tuple[str, ...]
    pairs: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.names) != len(self.pairs) or any(n <= 0 for n in self.pairs):
            raise ValueError(f"corpus sizes need one positive count per name, got "
                             f"{list(zip(self.names, self.pairs, strict=False))}")

    @property
    def total(self) -> int:
        return sum(self.pairs)

    def save(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"names": list(self.names), "pairs": list(self.pairs)},
                                  indent=1))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> CorpusSizes:
        saved = json.loads(path.read_text())
        return cls(tuple(saved["names"]), tuple(int(n) for n in saved["pairs"]))


def corpus_shares(pairs: Sequence[int], temperature: float) -> np.ndarray:
    """Each corpus's probability: size ** (1/T), normalised."""
    if temperature < 1:
        raise ValueError(f"temperature must be >= 1 (1 = sample by size), got {temperature}")
    weights = np.asarray(pairs, dtype=np.float64) ** (1.0 / temperature)
    shares: np.ndarray = weights / weights.sum()
    return shares


def draws_per_corpus(pairs: Sequence[int], temperature: float, total: int) -> np.ndarray:
    """How many of `total` draws go to each corpus (largest remainder: they sum to `total`)."""
    exact = corpus_shares(pairs, temperature) * total
    counts = np.floor(exact).astype(np.int64)
    short = total - int(counts.sum())
    counts[np.argsort(-(exact - counts), kind="stable")[:short]] += 1
    return counts


def sampled_order(sizes: CorpusSizes, *, temperature: float, seed: int,
                  epoch: int) -> list[int]:
    """One epoch (as many draws as pairs) of pair indices, shuffled, that depends only on
    (sizes, temperature, seed, epoch): a resumed run replays the same batches. A corpus
    drawn more often than its size is repeated in whole shuffled passes (every pair k or
    k+1 times), not with replacement."""
    rng = np.random.default_rng([seed, epoch])
    counts = draws_per_corpus(sizes.pairs, temperature, sizes.total)
    parts: list[np.ndarray] = []
    start = 0
    for size, count in zip(sizes.pairs, counts, strict=True):
        if count == 0:
            start += size
            continue
        passes = -(-int(count) // size)  # ceil
        drawn = np.concatenate([rng.permutation(size) for _ in range(passes)])[:count]
        parts.append(drawn + start)
        start += size
    order = np.concatenate(parts)
    rng.shuffle(order)
    return [int(i) for i in order]
