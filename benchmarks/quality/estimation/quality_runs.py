"""Decoding evaluation sets the way the server does, with every sentence's quality review:
the beam's hypotheses, the scoring pass's features, chrF against the reference, and the
served review (detectors, recovery) through the server's own `QualityReview`."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from benchmarks.quality.data import EvalSet
from model_store import Manifest
from server.core.metrics import Metrics
from server.core.settings import QualitySettings
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import Engine, SentenceJob
from server.execution.engine_thread import EngineThread
from server.quality.detectors import detect, needs_coverage
from server.quality.estimators import EstimatorBook
from server.quality.features import Candidate, features
from server.quality.review import Assessment, QualityReview
from server.quality.signals import score
from server.textproc.languages import LanguageDetectors
from trainer.quality.refit import BATCH, BEAM, Decoded, decode, decode_and_measure


@dataclass
class SetRun:
    """One evaluation set decoded: per sentence its features and chrF (first outputs)."""

    name: str
    dataset: EvalSet
    decoded: Decoded

    @property
    def jobs(self) -> list[SentenceJob]:
        return self.decoded.jobs

    @property
    def rows(self) -> list[dict[str, float]]:
        return self.decoded.rows

    @property
    def chrf(self) -> list[float]:
        return self.decoded.chrf


def run_set(engine: Engine, dataset: EvalSet, module_id: str | None) -> SetRun:
    return SetRun(dataset.name, dataset, decode_and_measure(engine, dataset.sources,
                                                            dataset.references, module_id))


@dataclass(frozen=True)
class Reviewed:
    assessments: list[Assessment]
    outputs: list[str]  # after recovery


def review_set(engine: Engine, backbone: Manifest, book: EstimatorBook, run: SetRun,
               engine_thread: EngineThread) -> Reviewed:
    """The server's review of the set's first outputs (detectors, recovery)."""
    review = QualityReview(engine_thread, QualitySettings(), metrics=Metrics(), max_beam=8,
                           estimators=book, languages=LanguageDetectors())
    options = SearchOptions(beam_size=BEAM, n_best=1)

    async def redecode(jobs: list[SentenceJob], chosen: SearchOptions
                       ) -> list[list[Hypothesis]]:
        return await engine_thread.run(decode, engine, jobs, chosen)

    async def go() -> tuple[list[list[Hypothesis]], list[Assessment]]:
        return await review.review(engine, backbone, run.jobs, run.dataset.sources,
                                   run.decoded.hypotheses, options=options, run=redecode)

    hypotheses, assessments = asyncio.run(go())
    text = engine.target_tokenizer.decode
    return Reviewed(assessments, [text(h[0].tokens) for h in hypotheses])


def cost(engine: Engine, jobs: Sequence[SentenceJob], *, rounds: int = 4) -> dict[str, float]:
    """Decoding (beam 4) alone, then with the review as the server runs it (features from
    the search, the scoring pass only where `needs_coverage`), then with the scoring pass
    over every sentence (how the review ran before), side by side: at batch 1 (latency per
    sentence) and at batch 32 (target tokens per second). The source stands in by the
    output (a copy: the detectors' costliest path)."""
    options = SearchOptions(beam_size=BEAM, n_best=BEAM)
    single = list(jobs[:12])
    text = engine.target_tokenizer.decode

    def review(part: list[SentenceJob], found: list[list[Hypothesis]], every: bool) -> None:
        candidates = []
        for job, own in zip(part, found, strict=True):
            output = text(own[0].tokens)
            candidates.append(Candidate(output, output, job.source_ids, own[0].tokens,
                                        [h.tokens for h in own[1:]], [h.score for h in own],
                                        source_eos=engine.config.source_eos,
                                        alternative_outputs=[text(h.tokens)
                                                             for h in own[1:]]))
        rows = [features(c, None) for c in candidates]
        again = [i for i, row in enumerate(rows) if every or needs_coverage(row)]
        signals = score(engine, [part[i] for i in again], [found[i][0].tokens for i in again])
        for index, signal in zip(again, signals, strict=True):
            rows[index] = features(candidates[index], signal)
        for candidate, row in zip(candidates, rows, strict=True):
            detect(row, source=candidate.source, output=candidate.output,
                   reads_as_source=None, hit_length_limit=False)

    def timed(batch: int, mode: str, chosen: Sequence[SentenceJob]) -> tuple[float, int]:
        """CPU seconds of this process (one torch thread): on a shared machine, wall time
        measures the neighbours as much as the work."""
        started = time.process_time()
        tokens = 0
        for start in range(0, len(chosen), batch):
            part = list(chosen[start:start + batch])
            found = engine.translate(part, options)
            tokens += sum(len(h[0].tokens) + 1 for h in found)
            if mode != "beam4":
                review(part, found, every=mode == "every")
        return time.process_time() - started, tokens

    best: dict[str, float] = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for round_ in range(rounds):  # interleaved, order reversed every other round
            modes = ("beam4", "served", "every")
            for mode in modes if round_ % 2 == 0 else modes[::-1]:
                seconds, _ = timed(1, mode, single)
                best[f"latency_{mode}_s"] = min(best.get(f"latency_{mode}_s", math.inf),
                                                seconds / len(single))
                seconds, tokens = timed(BATCH, mode, jobs)
                best[f"tokens_per_s_{mode}"] = max(best.get(f"tokens_per_s_{mode}", 0.0),
                                                   tokens / seconds)
    finally:
        torch.set_num_threads(threads)
    return {"latency_beam4_ms": 1000 * best["latency_beam4_s"],
            "latency_scored_ms": 1000 * best["latency_served_s"],
            "latency_every_ms": 1000 * best["latency_every_s"],
            "tokens_per_s_beam4": best["tokens_per_s_beam4"],
            "tokens_per_s_scored": best["tokens_per_s_served"],
            "tokens_per_s_every": best["tokens_per_s_every"]}
