"""Text from the shared corpora (`--data`, layout in ../shared/data/README.md).

`en-fr/domains/<domain>/{train,dev,test}.{en,fr}` and `en-fr/extra/<corpus>/test.{en,fr}`.
Everything here reads a bounded number of lines; a missing directory yields nothing, and
callers fall back to synthetic text.
"""

from __future__ import annotations

import itertools
from pathlib import Path


def _head(path: Path, limit: int) -> list[str]:
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as handle:
        return [line.strip() for line in itertools.islice(handle, limit) if line.strip()]


def training_lines(data_dir: Path | None, *, per_file: int = 2_000) -> list[str]:
    """A small slice of en-fr training text (both sides of every domain), for the
    benchmark backbone's sentencepiece model."""
    if data_dir is None:
        return []
    domains = data_dir / "en-fr" / "domains"
    if not domains.is_dir():
        return []
    lines: list[str] = []
    for domain in sorted(p for p in domains.iterdir() if p.is_dir()):
        for side in ("en", "fr"):
            lines += _head(domain / f"train.{side}", per_file)
    return lines


def read_test_sets(data_dir: Path | None, *, per_set: int = 200) -> dict[str, list[str]]:
    """English sides of the en-fr test sets: set name (a domain, or `extra:<corpus>`) ->
    texts. The 7 domain sets carry domain names a server may serve."""
    if data_dir is None:
        return {}
    root = data_dir / "en-fr"
    sets: dict[str, list[str]] = {}
    domains = root / "domains"
    if domains.is_dir():
        for domain in sorted(p for p in domains.iterdir() if p.is_dir()):
            texts = _head(domain / "test.en", per_set)
            if texts:
                sets[domain.name] = texts
    extra = root / "extra"
    if extra.is_dir():
        for corpus in sorted(p for p in extra.iterdir() if p.is_dir()):
            texts = _head(corpus / "test.en", per_set)
            if texts:
                sets[f"extra:{corpus.name}"] = texts
    return sets
