"""The directions the default recipe trains: both halves of the en-fr data it reads, and
English->German from the en-de data.

The corpora live under shared/data/<pair> (en-fr, en-de) whichever way they are read; a
direction says which folder it reads and which side of each pair is the source."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainer.training.data import Corpus


@dataclass(frozen=True)
class Direction:
    source: str  # ISO 639-1
    target: str
    pair: str = "en-fr"  # the folder of shared/data holding its corpora
    # the direction whose router it routes with (the same source language: the server
    # shares it, server/routing/shared_router.py), so it builds and ships none; None: its own
    router_from: str | None = None

    @property
    def name(self) -> str:
        return f"{self.source}-{self.target}"

    @property
    def backbone_name(self) -> str:
        """The name its published backbone has in the built-in store."""
        return f"default-{self.name}"

    def corpus(self, name: str, folder: Path, split: str) -> Corpus:
        """The pairs of `folder`'s `split` files, source side first."""
        return Corpus(name, folder / f"{split}.{self.source}", folder / f"{split}.{self.target}")


EN_FR = Direction("en", "fr")
FR_EN = Direction("fr", "en")
# en->fr's router routes en->de's English as well as one of its own (72.8% against 72.0%
# on en->de's dev sentences, benchmarks/results/builtin_size.md) and spares its 3.35 MB
EN_DE = Direction("en", "de", pair="en-de", router_from="en-fr")
DIRECTIONS = {d.name: d for d in (EN_FR, FR_EN, EN_DE)}
