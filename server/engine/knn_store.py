"""Per-request kNN datastores (server/decoding/knn.py): the memory pairs retrieved for a
sentence, forced through the backbone and the module that decode the sentence (teacher
forcing), give one key per target position, the decoder's final hidden state, whose value
is the token that follows it (the target's next token; EOS after the last).

Only a small bounded cache is kept between requests (server/engine/forced_cache.py): a pair
added to a memory a moment ago is forced the first time it is retrieved, and a changed
module or backbone forces its own keys.

A pair retrieved for several sentences of a batch with the same module is forced once;
pairs go through the model in chunks, rows of one module contiguous (one run per module).
An ensemble's sentence keys its datastore by its heaviest member (`lead_member`), whose
hidden state is also the one its steps are compared with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from torch import Tensor

from contract.backbone import BackboneConfig
from server.decoding.knn import KnnGuide, Neighbours, Pair
from server.engine.backbone import Backbone
from server.engine.forced_cache import cache_of
from server.engine.residency import Lease
from server.engine.slots import BatchHooks, ModuleBank, runs_of


class Member(Protocol):
    """An ensemble member (server/engine/engine.py's `Member`)."""

    @property
    def module_id(self) -> str | None: ...

    @property
    def weight(self) -> float: ...


class Forcing(Protocol):
    """What forcing needs of the engine (server/engine/engine.py's `Engine`)."""

    config: BackboneConfig
    model: Backbone
    device: torch.device


RowKey = tuple[ModuleBank | None, int]
CHUNK_TOKENS = 8192  # padded target positions per forward pass (bounds the activations)
CHUNK_ROWS = 32  # pairs per forward pass: length-sorted chunks waste little on padding


def lead_member(members: Sequence[Member]) -> int:
    """The index of the heaviest member (the first among equals)."""
    return max(range(len(members)), key=lambda i: (members[i].weight, -i))


def row_key(lease: Lease, module_id: str | None) -> RowKey:
    ref = lease.refs.get(module_id) if module_id else None
    return (ref.bank, ref.slot) if ref else (None, -1)


def force_pairs(engine: Forcing, wanted: Sequence[tuple[RowKey, Pair]]) -> list[Tensor]:
    """Per (module, pair): the decoder's final hidden states [target + 1, d] (float32);
    pairs forced recently through the same slot come from the backbone's cache."""
    cache = cache_of(engine.model)
    out: list[Tensor] = [torch.empty(0)] * len(wanted)
    todo: list[int] = []
    for index, ((bank, slot), pair) in enumerate(wanted):
        found = cache.get(cache.key(bank, slot, pair))
        if found is None:
            todo.append(index)
        else:
            out[index] = found
    # rows of one module contiguous (one run each), and of similar lengths (little padding)
    order = sorted(todo, key=lambda i: (
        id(wanted[i][0][0]) if wanted[i][0][0] is not None else 0, wanted[i][0][1],
        len(wanted[i][1][1]), len(wanted[i][1][0])))
    chunk: list[int] = []
    for index in order:
        if chunk and (len(chunk) >= CHUNK_ROWS
                      or (len(chunk) + 1) * (len(wanted[index][1][1]) + 1) > CHUNK_TOKENS):
            _force_chunk(engine, wanted, chunk, out)
            chunk = []
        chunk.append(index)
    if chunk:
        _force_chunk(engine, wanted, chunk, out)
    for index in todo:
        (bank, slot), pair = wanted[index]
        cache.put(cache.key(bank, slot, pair), out[index])
    return out


def _padded(rows: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> Tensor:
    out = torch.full((len(rows), max(len(r) for r in rows)), pad_id, dtype=torch.long)
    for index, row in enumerate(rows):
        out[index, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out.to(device)


def _force_chunk(engine: Forcing, wanted: Sequence[tuple[RowKey, Pair]], chunk: list[int],
                 out: list[Tensor]) -> None:
    config = engine.config
    keys = [wanted[i][0] for i in chunk]
    hooks = BatchHooks(runs_of(keys))
    chosen = hooks if hooks.runs else None
    sources = _padded([wanted[i][1][0] for i in chunk], config.pad_id, engine.device)
    targets = _padded([[config.decoder_start_id, *wanted[i][1][1]] for i in chunk],
                      config.pad_id, engine.device)
    memory, mask = engine.model.encode(sources, chosen)
    hidden = engine.model.decode(targets, memory, mask, chosen).float()
    for row, index in enumerate(chunk):
        out[index] = hidden[row, : len(wanted[index][1][1]) + 1].clone()  # own storage


def lead_key(lease: Lease, members: Sequence[Member]) -> RowKey:
    """The module slot a sentence's datastore is forced through."""
    return row_key(lease, members[lead_member(members)].module_id)


def build_guides(engine: Forcing,
                 jobs: Sequence[tuple[RowKey, Neighbours]]) -> list[KnnGuide | None]:
    """A datastore per job (its lead member's module slot, its neighbours); None for one
    whose neighbours gave no key."""
    eos = engine.config.eos_id
    unique: dict[tuple[RowKey, Pair], int] = {}
    for key, neighbours in jobs:
        for pair in neighbours.pairs:
            unique.setdefault((key, pair), len(unique))
    forced = force_pairs(engine, list(unique)) if unique else []
    guides: list[KnnGuide | None] = []
    for key, neighbours in jobs:
        parts = [forced[unique[(key, pair)]] for pair in neighbours.pairs]
        values = [token for _, target in neighbours.pairs for token in (*target, eos)]
        neighbours.report.neighbours = len(neighbours.pairs)
        neighbours.report.keys = len(values)
        if not values:
            guides.append(None)
            continue
        guides.append(KnnGuide(torch.cat(parts), torch.tensor(values, device=engine.device),
                               neighbours.params, neighbours.report))
    return guides
