"""Evaluation sets of the shared data layout (`<data>/<pair>/...`, the direction's folder:
en-fr or en-de), read without the network.

- known domains: `<pair>/domains/<domain>/{dev,test}.{en,fr}`;
- open-domain genres: `<pair>/extra/<genre>/test.{en,fr}` (genres that have a test set);
- a genre's dev slice: the last lines of its `train.{en,fr}` (never its test set).

Every reader takes the `direction` it reads for (default en->fr; fr->en reads the en-fr
files French side first, en->de the en-de ones: trainer/recipes/directions.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from trainer.recipes.directions import EN_FR, Direction

SetKind = Literal["domain", "genre"]


@dataclass(frozen=True)
class EvalSet:
    """Source sentences and their references; `name` is a domain or a genre."""

    name: str
    kind: SetKind
    split: str
    sources: list[str]
    references: list[str]

    def __len__(self) -> int:
        return len(self.sources)


def read_pairs(directory: Path, split: str,
               direction: Direction = EN_FR) -> list[tuple[str, str]]:
    """Non-empty sentence pairs of `<directory>/<split>.{en,fr}`, `direction`'s source first."""
    return direction.corpus(directory.name, directory, split).read()


def _first(pairs: list[tuple[str, str]], limit: int) -> list[tuple[str, str]]:
    return pairs if limit <= 0 else pairs[:limit]


def _as_set(name: str, kind: SetKind, split: str, pairs: list[tuple[str, str]]) -> EvalSet:
    return EvalSet(name, kind, split, [s for s, _ in pairs], [t for _, t in pairs])


def domain_names(data_dir: Path, direction: Direction = EN_FR) -> list[str]:
    """Every labelled domain of the direction's data with a test set, sorted."""
    root = data_dir / direction.pair / "domains"
    if not root.is_dir():
        raise FileNotFoundError(f"no domains under {root}: is --data the shared data dir?")
    return sorted(d.name for d in root.iterdir() if (d / f"test.{direction.source}").is_file())


def genre_names(data_dir: Path, direction: Direction = EN_FR) -> list[str]:
    """Every extra genre with a test set (no domain module exists for them), sorted."""
    root = data_dir / direction.pair / "extra"
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir() if (d / f"test.{direction.source}").is_file())


def domain_set(data_dir: Path, domain: str, *, split: str = "test", limit: int = 0,
               direction: Direction = EN_FR) -> EvalSet:
    """The first `limit` pairs (0: all) of a domain's split."""
    pairs = read_pairs(data_dir / direction.pair / "domains" / domain, split, direction)
    return _as_set(domain, "domain", split, _first(pairs, limit))


def genre_set(data_dir: Path, genre: str, *, limit: int = 0,
              direction: Direction = EN_FR) -> EvalSet:
    """The first `limit` pairs (0: all) of a genre's test set."""
    pairs = read_pairs(data_dir / direction.pair / "extra" / genre, "test", direction)
    return _as_set(genre, "genre", "test", _first(pairs, limit))


def genre_dev_slice(data_dir: Path, genre: str, *, lines: int,
                    direction: Direction = EN_FR) -> EvalSet:
    """The last `lines` pairs of a genre's train split: a held-out dev slice for tuning
    ensemble weights (the test set is never used for a choice)."""
    pairs = read_pairs(data_dir / direction.pair / "extra" / genre, "train", direction)
    return _as_set(genre, "genre", "dev-slice", pairs[-lines:] if lines > 0 else pairs)


def domain_train_pairs(data_dir: Path, domain: str,
                       direction: Direction = EN_FR) -> list[tuple[str, str]]:
    return read_pairs(data_dir / direction.pair / "domains" / domain, "train", direction)
