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
EN_DE = Direction("en", "de", pair="en-de")
DIRECTIONS = {d.name: d for d in (EN_FR, FR_EN, EN_DE)}
