"""Decoding sentence lists with a module and, optionally, a memory guiding each step, as
the server does (benchmarks.quality.memory_retrieval): BLEU, the memory's weight, speed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import sacrebleu

from benchmarks.quality.data import read_pairs
from benchmarks.quality.models import Models
from server.core.memory_settings import MemorySettings, RetrievalSettings
from server.decoding.knn import Neighbours
from server.decoding.search import SearchOptions
from server.engine.engine import Member, SentenceJob
from server.engine.forced_cache import cache_of
from server.memories.calibrated_gates import MIN_PAIRS
from server.memories.index import PairIndex, entry
from server.serving.gate_calibration import calibrate, direct_decode
from server.serving.memory_retrieval import knn_params, pairs_of
from trainer.recipes.directions import Direction

BATCH = 32


class Runner:
    """Decodes sentence lists with a module and (optionally) a memory."""

    def __init__(self, models: Models, beam: int) -> None:
        self.models, self.engine = models, models.engine
        self.options = SearchOptions(beam_size=beam)
        self.threshold = MemorySettings().fuzzy_threshold

    def translate(self, sources: list[str], modules: list[str | None],
                  memories: list[PairIndex | None], settings: RetrievalSettings | None,
                  batch: int = BATCH) -> tuple[list[str], list[Neighbours]]:
        engine = self.engine
        params = knn_params(settings) if settings is not None else None
        ids = engine.source_tokenizer.encode(sources)
        out: list[str | None] = [None] * len(sources)
        jobs: list[SentenceJob] = []
        where: list[int] = []
        reports: list[Neighbours] = []
        for i, (text, source) in enumerate(zip(sources, ids, strict=True)):
            memory = memories[i] if settings is not None else None
            exact = memory.exact(text) if memory is not None else None
            if exact is not None:
                out[i] = exact.target
                continue
            neighbours = None
            if memory is not None and settings is not None and params is not None:
                found = memory.fuzzy(text, threshold=settings.min_score,
                                     limit=settings.max_pairs)
                if found:
                    neighbours = Neighbours(pairs_of(engine, [(s.entry.source, s.entry.target)
                                                             for s in found]), params)
                    reports.append(neighbours)
            jobs.append(SentenceJob(source, (Member(modules[i]),),
                                    engine.max_length(len(source)), neighbours=neighbours))
            where.append(i)
        order = sorted(range(len(jobs)), key=lambda j: len(jobs[j].source_ids))
        for start in range(0, len(order), batch):
            chunk = order[start: start + batch]
            results = engine.translate([jobs[j] for j in chunk], self.options)
            for j, hyps in zip(chunk, results, strict=True):
                out[where[j]] = engine.target_tokenizer.decode(hyps[0].tokens)
        return [o or "" for o in out], reports


def calibrated_gate(runner: Runner, memory: PairIndex, module: str | None,
                    settings: RetrievalSettings) -> dict[str, Any]:
    """The memory's gate for `module`, calibrated from its own pairs as the server
    calibrates it (server/serving/gate_calibration.py); the settings' gate when
    calibration is off or the memory is too small to calibrate."""
    if not settings.calibrate or len(memory) < MIN_PAIRS:
        return {"gate": settings.gate, "calibrated": False}
    decode = direct_decode(runner.engine, runner.options)
    found = asyncio.run(calibrate(runner.engine, memory, module, settings, decode))
    return {"gate": found.gate, "calibrated": True, "held_out": found.held_out,
            "held_out_off": found.off, "held_out_scores": [list(s) for s in found.scores],
            "seconds": found.seconds}


def bleu(hyps: list[str], refs: list[str]) -> float:
    return round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2) if hyps else 0.0


def memory_of(data: Path, direction: Direction, domain: str, limit: int) -> PairIndex:
    pairs = read_pairs(data / "domains" / domain, "train", direction)
    pairs = pairs[:limit] if limit else pairs
    return PairIndex(entry(i, s, t) for i, (s, t) in enumerate(pairs, 1))


def weighed(reports: list[Neighbours]) -> dict[str, float]:
    rows = sum(n.report.rows for n in reports)
    return {"guided_sentences": len(reports),
            "steps_on_share": round(sum(n.report.rows_on for n in reports) / rows, 3)
            if rows else 0.0,
            "mean_weight": round(sum(n.report.weight_sum for n in reports) / rows, 3)
            if rows else 0.0}


def speed(runner: Runner, module: str | None, pairs: list[tuple[str, str]], memory: PairIndex,
          settings: RetrievalSettings, repeats: int = 2) -> list[dict[str, Any]]:
    sources = [s for s, _ in pairs]
    rows = []
    for batch in (BATCH, 1):
        chosen = sources if batch == BATCH else sources[: max(1, len(sources) // 4)]
        timing: dict[str, float] = {}
        # "on": forced pairs cache emptied first (every pair forced, as for new text);
        # "warm": the same sentences again, their pairs already forced
        for label in ("off", "on") * repeats + ("off", "warm") * repeats:
            if label == "on":
                cache_of(runner.engine.model).clear()
            use = label != "off"
            started = time.perf_counter()
            hyps, _ = runner.translate(chosen, [module] * len(chosen),
                                       [memory if use else None] * len(chosen),
                                       settings if use else None, batch=batch)
            seconds = time.perf_counter() - started
            tokens = sum(len(ids) for ids in runner.engine.target_tokenizer.encode(hyps))
            timing[label] = max(timing.get(label, 0.0), tokens / seconds)  # best of runs
        rows.append({"batch": batch, "sentences": len(chosen),
                     "tokens_per_s_off": round(timing["off"], 1),
                     "tokens_per_s_on": round(timing["on"], 1),
                     "ratio": round(timing["on"] / timing["off"], 3),
                     "tokens_per_s_warm": round(timing["warm"], 1),
                     "ratio_warm": round(timing["warm"] / timing["off"], 3)})
        print(rows[-1], flush=True)
    return rows
