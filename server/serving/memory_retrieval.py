"""Retrieval during decoding for one text: each sentence the engine decodes carries the
memory pairs most like it (server/memories/index.py's fuzzy index), as token ids, and the
engine turns them into the sentence's kNN datastore (server/engine/knn_store.py).

Only the memories in play for the text take part: those the request names and the memory
of the domain the router chose, so a memory of another domain never weighs in on text
routed elsewhere. What each sentence's memory weighed is reported in the answer's
`retrieval` (server/api/schemas_memories.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from server.core.memory_settings import RetrievalSettings
from server.decoding.knn import KnnParams, KnnReport, Neighbours, Pair
from server.engine.engine import Engine, SentenceJob
from server.memories.book import Loaded, MemoryBook, MemoryChoice
from server.memories.calibrated_gates import GateChoice
from server.serving.memory_use import MemoryUse


def knn_params(settings: RetrievalSettings) -> KnnParams:
    return KnnParams(k=settings.k, temperature=settings.temperature, gate=settings.gate,
                     max_weight=settings.max_weight)


def pairs_of(engine: Engine, found: Sequence[tuple[str, str]]) -> tuple[Pair, ...]:
    """Memory pairs as the engine reads them: source ids with EOS, target ids without."""
    if not found:
        return ()
    eos = engine.config.eos_id
    sources = engine.source_tokenizer.encode([source for source, _ in found])
    targets = engine.target_tokenizer.encode([target for _, target in found])
    return tuple((tuple(source), tuple(t for t in target if t != eos))
                 for source, target in zip(sources, targets, strict=True))


def with_neighbours(book: MemoryBook | None, choice: MemoryChoice, domain: str | None,
                    use: MemoryUse | None, texts: Sequence[str], jobs: list[SentenceJob],
                    engine: Engine) -> tuple[list[SentenceJob], MemoryUse | None]:
    """`jobs` (one per text of `texts`), each with its retrieved pairs when a memory in
    play holds pairs like it; `use` with a report per guided sentence."""
    if book is None or use is None or not jobs:
        return jobs, use
    settings = book.settings.retrieval
    if not settings.enabled:
        return jobs, use
    memories = book.in_play(choice, domain)
    if not memories:
        return jobs, use
    params = knn_params(settings)
    guided: list[SentenceJob] = []
    reports: list[KnnReport] = []
    for text, job in zip(texts, jobs, strict=True):
        found = book.neighbours(memories, text, min_score=settings.min_score,
                                limit=settings.max_pairs)
        if not found:
            guided.append(job)
            continue
        gate = gate_of(book, found[0][0], job, engine)
        neighbours = Neighbours(pairs_of(engine, [(e.source, e.target) for _, e in found]),
                                replace(params, gate=gate.gate),
                                KnnReport(gate=gate.gate, calibrated=gate.calibrated))
        reports.append(neighbours.report)
        guided.append(replace(job, neighbours=neighbours))
    return guided, replace(use, retrieval=reports)


def gate_of(book: MemoryBook, memory: Loaded, job: SentenceJob, engine: Engine) -> GateChoice:
    """The gate of the memory that holds the sentence's nearest pair, as calibrated for
    the sentence's module (an ensemble of modules: the settings' gate)."""
    if len(job.members) != 1:
        return GateChoice(book.settings.retrieval.gate, False)
    return book.gates.gate(memory.record.id, memory.version, len(memory.index),
                           job.members[0].module_id, engine)
