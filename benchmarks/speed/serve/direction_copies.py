"""Extra directions for the directions benchmark (serve_directions): copies of the default
backbone, with its active modules and router, published as backbones of their own under
language pairs that requests can name, and the requests that spread the load over them.

A copy translates exactly as the original (the same weights), so a run that spreads the
load over the original and its copies measures what serving several directions costs, with
every direction of the same shape and texts of the same cost.

The server picks a direction by `source` and `target`, and refuses a pair that two served
backbones translate, so each copy needs a pair no backbone of the store declares. A copy
keeps the original's source language (English for the built-in en->fr) and takes the
first free target of COPY_TARGETS: German first (the label the earlier two-direction runs
used), so a store that ships an en->de backbone keeps it, untouched and unambiguous, and
the copy moves on; then Esperanto and Interlingua, real ISO 639-1 codes (the request
schema takes two lower-case letters; pycountry names them in /languages and in errors)
that no direction of this project serves or plans.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.speed.serve.loadgen import LoadRequest
from benchmarks.speed.serve.store import StoreSpec
from server.textproc.languages import LanguagePair, language_pair

COPY_NAMES = ("bench-copy", "bench-copy-2")
COPY_TARGETS = ("de", "eo", "ia", "vo")
SOURCE_WITHOUT_PAIR = "en"  # a backbone that says no languages (the tiny one) is English


@dataclass(frozen=True)
class CopyDirection:
    backbone: str  # the copy's backbone name
    pair: LanguagePair  # what requests name to reach it

    @property
    def label(self) -> str:
        return f"{self.pair.source}->{self.pair.target}"


def declared_pairs(store: Any) -> set[tuple[str, str]]:
    """The language pairs every backbone version of the store declares (active or not)."""
    found = set()
    for record in store.registry.list_artifacts("backbone"):
        pair = language_pair(record.manifest)
        if pair is not None:
            found.add((pair.source, pair.target))
    return found


def free_pairs(source: str, taken: set[tuple[str, str]], count: int) -> list[LanguagePair]:
    """The first `count` pairs from `source` into a target of COPY_TARGETS that no
    backbone declares."""
    free = [LanguagePair(source, target) for target in COPY_TARGETS
            if (source, target) not in taken and target != source]
    if len(free) < count:
        raise SystemExit(f"the store already declares every pair the copies could take "
                         f"({', '.join(f'{source}->{t}' for t in COPY_TARGETS)})")
    return free[:count]


def add_copy_directions(spec: StoreSpec, count: int) -> tuple[str, list[CopyDirection]]:
    """Publish `count` copies of the store's default backbone, each with its active modules
    and router; returns the original's name and the copies."""
    if not 1 <= count <= len(COPY_NAMES):
        raise ValueError(f"between 1 and {len(COPY_NAMES)} copies, not {count}")
    with spec.open() as store:
        original = store.load_backbone(spec.backbone)
        name = original.manifest.name
        existing = set(store.registry.list_names("backbone"))
        clash = existing & set(COPY_NAMES[:count])
        if clash:  # never publish over a backbone of the store
            raise SystemExit(f"the store already holds a backbone named {sorted(clash)}")
        own = language_pair(original.manifest)
        source = own.source if own is not None else SOURCE_WITHOUT_PAIR
        pairs = free_pairs(source, declared_pairs(store), count)
        copies = [CopyDirection(backbone, pair)
                  for backbone, pair in zip(COPY_NAMES[:count], pairs, strict=True)]
        for copy in copies:
            _copy_backbone(store, original, name, copy)
    return name, copies


def _copy_backbone(store: Any, original: Any, name: str, copy: CopyDirection) -> None:
    languages = {"source": copy.pair.source, "target": copy.pair.target}
    published = store.publish("backbone", copy.backbone, original.files,
                              config=original.manifest.config,
                              provenance={"languages": languages, "copy_of": name})
    store.activate("backbone", copy.backbone, published.version)
    fingerprint = published.backbone_fingerprint
    for domain, version in store.active_domains(name).items():
        _copy(store, "module", domain, version, name, copy.backbone, fingerprint)
    for classifier, version in store.registry.active_versions(
            "classifier", backbone=name).items():
        _copy(store, "classifier", classifier, version, name, copy.backbone, fingerprint)


def _copy(store: Any, kind: str, name: str, version: int, backbone: str, copy: str,
          fingerprint: str | None) -> None:
    loaded = store.load(kind, name, version, backbone=backbone)
    published = store.publish(kind, name, loaded.files, config=loaded.manifest.config,
                              backbone_fingerprint=fingerprint, backbone=copy)
    store.activate(kind, name, published.version, backbone=copy)


def spread(requests: Sequence[LoadRequest],
           copies: Sequence[CopyDirection]) -> list[LoadRequest]:
    """Request i to direction i modulo (1 + copies): 0 the default one (no languages
    named), k the k-th copy; the same texts and domains."""
    ways = 1 + len(copies)
    return [r if i % ways == 0 else replace(r, body=r.body | {
                "source": copies[i % ways - 1].pair.source,
                "target": copies[i % ways - 1].pair.target})
            for i, r in enumerate(requests)]
