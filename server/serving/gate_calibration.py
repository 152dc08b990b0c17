"""Choosing a memory's gate from its own pairs (no dev or test data).

The best gate differs by memory: a memory whose pairs are close to the text it meets
(a scripture, a product's manual) gains from a wide gate, one of loose pairs (subtitles)
loses. So each memory's gate is calibrated for the module it decodes with:

1. a seeded sample of its pairs is held out (`calibration_pairs`, the same sample every
   time for the same pairs);
2. each held-out source retrieves its neighbours from the rest of the memory, as
   serving would (leave-one-out: the fuzzy index never returns the query's own source
   or its exact duplicates);
3. the held-out sources are decoded with retrieval off and with each candidate gate
   (`calibration_gates`) at the server's default decoding, and scored with corpus BLEU
   against their targets;
4. the best gate wins (ties: the smaller); when none beats retrieval off by
   `calibration_margin`, the smallest candidate does, so a memory that does not help
   weighs little.

Sentences that retrieve nothing decode the same under every gate: they are decoded once.
`decode` runs the engine's jobs: the scheduler in the server (server/serving/
gate_calibrator.py), `Engine.translate` in benchmarks and tests.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

import sacrebleu

from server.core.memory_settings import RetrievalSettings
from server.core.settings import DecodingSettings
from server.decoding.knn import Neighbours, Pair
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import Engine, Member, SentenceJob
from server.memories.calibrated_gates import Calibration
from server.memories.index import Entry, PairIndex
from server.serving.memory_retrieval import knn_params, pairs_of

SEED = 20230501  # any fixed number: the same pairs are held out every time
BATCH = 32  # sentences per batch when decoding directly
Decode = Callable[[list[SentenceJob]], Awaitable[list[list[Hypothesis]]]]


def direct_decode(engine: Engine, options: SearchOptions) -> Decode:
    """Decoding on the caller's thread, batches of similar lengths (benchmarks, tests:
    no scheduler)."""
    async def decode(jobs: list[SentenceJob]) -> list[list[Hypothesis]]:
        order = sorted(range(len(jobs)), key=lambda j: len(jobs[j].source_ids))
        found: dict[int, list[Hypothesis]] = {}
        for start in range(0, len(order), BATCH):
            chunk = order[start: start + BATCH]
            results = engine.translate([jobs[j] for j in chunk], options)
            found.update(zip(chunk, results, strict=True))
        return [found[j] for j in range(len(jobs))]
    return decode


def held_out(index: PairIndex, size: int) -> list[Entry]:
    """A seeded sample of `size` pairs (all when fewer), oldest first; pairs with an
    empty side are left out (nothing to score)."""
    entries = [e for e in index.entries() if e.source.strip() and e.target.strip()]
    if len(entries) <= size:
        return entries
    chosen = random.Random(SEED).sample(range(len(entries)), size)
    return [entries[i] for i in sorted(chosen)]


def choose(off: float, scores: Sequence[tuple[float, float]], margin: float) -> float:
    """The gate of the best (gate, BLEU) (ties: the smaller gate); the smallest gate
    when none beats `off` by `margin`."""
    smallest = min(gate for gate, _ in scores)
    best_gate, best = min(scores, key=lambda s: (-s[1], s[0]))
    return best_gate if best >= off + margin else smallest


def held_out_jobs(engine: Engine, index: PairIndex, module_id: str | None,
                  settings: RetrievalSettings, decoding: DecodingSettings | None = None,
                  ) -> tuple[list[Entry], list[SentenceJob], list[tuple[Pair, ...]]]:
    """The held-out pairs, their jobs without retrieval (`decoding`: the server's length
    limits; None: the engine's own), and each one's neighbours from the rest of the
    memory (the fuzzy index leaves out the query's own source). Sources longer than the
    model's positions are left out (a request would have to split them)."""
    sample = held_out(index, settings.calibration_pairs)
    encoded = engine.source_tokenizer.encode([e.source for e in sample]) if sample else []
    kept = [(e, ids) for e, ids in zip(sample, encoded, strict=True)
            if len(ids) <= engine.config.max_positions]
    sample, sources = [e for e, _ in kept], [e.source for e, _ in kept]
    members = (Member(module_id),)
    plain = [SentenceJob(ids, members, engine.max_length(len(ids)) if decoding is None
                         else engine.max_length(len(ids), ratio=decoding.length_ratio,
                                                limit=decoding.max_length))
             for _, ids in kept]
    found = [pairs_of(engine, [(n.entry.source, n.entry.target) for n in index.fuzzy(
        text, threshold=settings.min_score, limit=settings.max_pairs)]) for text in sources]
    return sample, plain, found


def bleu(hypotheses: list[str], references: list[str]) -> float:
    return round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2)


async def calibrate(engine: Engine, index: PairIndex, module_id: str | None,
                    settings: RetrievalSettings, decode: Decode, *, memory_id: int = 0,
                    version: int = 0, decoding: DecodingSettings | None = None) -> Calibration:
    """The memory's gate for `module_id` (see the module's comment); `decoding`: the
    server's length limits (None: the engine's own, as the benchmarks decode)."""
    started = time.perf_counter()
    pairs = len(index)
    # sampling, retrieving and tokenizing: off the event loop (a large memory's sample)
    sample, plain, found = await asyncio.to_thread(held_out_jobs, engine, index, module_id,
                                                   settings, decoding)
    guided = [i for i, near in enumerate(found) if near]

    def text(hypotheses: list[list[Hypothesis]]) -> list[str]:
        return [engine.target_tokenizer.decode(h[0].tokens) for h in hypotheses]

    off_text = text(await decode(plain)) if plain else []
    references = [e.target for e in sample]
    off = bleu(off_text, references) if sample else 0.0
    scores: list[tuple[float, float]] = []
    base = knn_params(settings)
    for gate in settings.calibration_gates:
        params = replace(base, gate=gate)
        jobs = [replace(plain[i], neighbours=Neighbours(found[i], params)) for i in guided]
        on_text = list(off_text)
        for i, translation in zip(guided, text(await decode(jobs)) if jobs else [],
                                  strict=True):
            on_text[i] = translation
        scores.append((gate, bleu(on_text, references) if sample else 0.0))
    return Calibration(memory_id=memory_id, module_id=module_id, version=version,
                       pairs=pairs, gate=choose(off, scores, settings.calibration_margin),
                       off=off, scores=tuple(scores), held_out=len(sample),
                       seconds=round(time.perf_counter() - started, 2))
