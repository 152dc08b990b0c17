"""Routing per source language: which router a direction without one of its own borrows.

A router reads the source text only, so one trained on English routes English whatever
the target language: on en->de's dev sentences en->fr's router picks the right domain as
often as en->de's own (72.8% against 72.0%, benchmarks/results/builtin_size.md). So a
direction with no active router of its own routes with the router (same name) of another
served direction that reads the same source language, the first in the server's order
(the default direction first, then by name), provided every label of that router is a
domain this direction has ("generic", the plain backbone, every direction has): a router
that knows a domain this direction lacks would send texts to a module it does not serve.

A direction's own router always wins: the one its recipe published, or one the sidecar
trained for it. Without either (no direction of the same source language has a router,
or each knows a domain this direction lacks) the direction routes as one without a
router: `domain: auto` goes to the plain backbone (mode `generic`), named domains and
mixtures work as always, and /health/ready says why.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from model_store import Manifest, Store
from server.textproc.languages import language_pair, pair_of_name

GENERIC = "generic"


@dataclass(frozen=True)
class SharedRouter:
    """The active router `name` of `backbone`, which another direction may use."""

    backbone: str
    name: str
    version: int


def router_labels(manifest: Manifest) -> set[str]:
    """The domains a classifier's manifest says it predicts (`config.labels`)."""
    labels = manifest.config.get("labels")
    return {label for label in labels if isinstance(label, str)} \
        if isinstance(labels, list) else set()


def unknown_here(labels: Collection[str], domains: Collection[str]) -> list[str]:
    """The labels of a router that are not domains of a direction (sorted)."""
    return sorted(set(labels) - {GENERIC} - set(domains))


def source_language(store: Store, backbone: str) -> str | None:
    """The source language of the active version of `backbone` (None: it does not say)."""
    registry = store.registry
    version = registry.get_active("backbone", backbone)
    record = (registry.get_artifact("backbone", backbone, version)
              if version is not None else None)
    pair = language_pair(record.manifest) if record is not None else pair_of_name(backbone)
    return pair.source if pair is not None else None


def shared_router(store: Store, name: str, *, backbone: str, source: str | None,
                  served: Sequence[str], domains: Collection[str]) -> SharedRouter | str:
    """The router `backbone` (reading `source`, with the active `domains`) borrows from
    another of the `served` backbones, or why there is none (a line for /health/ready).
    Blocking: reads the registry."""
    if source is None:
        return "no router of its own, and the backbone does not say its source language"
    registry = store.registry
    refused: list[str] = []
    for other in served:
        if other == backbone or source_language(store, other) != source:
            continue
        version = registry.get_active("classifier", name, backbone=other)
        record = (registry.get_artifact("classifier", name, version, backbone=other)
                  if version is not None else None)
        if version is None or record is None:
            continue
        lacking = unknown_here(router_labels(record.manifest), domains)
        if lacking:
            refused.append(f"{other}'s v{version} knows {', '.join(lacking)}, "
                           "not domains here")
            continue
        return SharedRouter(other, name, version)
    if refused:
        return "no router of its own, none to share (" + "; ".join(refused) + ")"
    return f"no router of its own, nor has another direction from {source}"
