"""Decoding evaluation sets the way the server does, with every sentence's quality review:
the beam's hypotheses, the scoring pass's features, chrF against the reference, and the
served review (detectors, recovery) through the server's own `QualityReview`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchmarks.quality.data import EvalSet
from model_store import Manifest
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import Engine, SentenceJob
from server.languages import LanguageDetectors
from server.metrics import Metrics
from server.quality.detectors import detect
from server.quality.estimators import EstimatorBook
from server.quality.features import Candidate, features
from server.quality.review import Assessment, QualityReview
from server.quality.signals import score
from server.scheduling.scheduler import EngineThread
from server.settings import QualitySettings
from trainer.quality_refit import BATCH, BEAM, Decoded, decode, decode_and_measure


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


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rho: Pearson correlation of average ranks (ties share their mean rank)."""
    return float(np.corrcoef(_ranks(a), _ranks(b))[0, 1])


def _ranks(values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    order = array.argsort(kind="stable")
    ranks = np.empty(len(array))
    ranks[order] = np.arange(len(array), dtype=float)
    for value in np.unique(array):
        tied = array == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def cost(engine: Engine, jobs: Sequence[SentenceJob], *, rounds: int = 2) -> dict[str, float]:
    """Decoding (beam 4) against decoding + the scoring pass + features and detectors
    (the source stands in by the output: a copy, the costliest path), side by side: at batch 1
    (latency per sentence) and at batch 32 (target tokens per second)."""
    options = SearchOptions(beam_size=BEAM, n_best=BEAM)
    single = list(jobs[:12])

    def timed(batch: int, with_score: bool, chosen: Sequence[SentenceJob]) -> tuple[float, int]:
        started = time.perf_counter()
        tokens = 0
        for start in range(0, len(chosen), batch):
            part = list(chosen[start:start + batch])
            found = engine.translate(part, options)
            tokens += sum(len(h[0].tokens) + 1 for h in found)
            if with_score:
                signals = score(engine, part, [h[0].tokens for h in found])
                text = engine.target_tokenizer.decode
                for job, own, signal in zip(part, found, signals, strict=True):
                    output = text(own[0].tokens)
                    found_features = features(Candidate(
                        output, output, job.source_ids, own[0].tokens,
                        [h.tokens for h in own[1:]], [h.score for h in own]), signal)
                    detect(found_features, source=output, output=output, reads_as_source=None,
                           hit_length_limit=False)
        return time.perf_counter() - started, tokens

    best: dict[str, float] = {}
    for _ in range(rounds):  # interleaved, best of rounds: the machine is shared
        for key, batch, with_score, chosen in (
                ("latency_beam4_s", 1, False, single), ("latency_scored_s", 1, True, single),
                ("saturated_beam4", BATCH, False, jobs), ("saturated_scored", BATCH, True, jobs)):
            seconds, tokens = timed(batch, with_score, chosen)
            value = seconds / len(chosen) if batch == 1 else -tokens / seconds
            best[key] = min(best.get(key, float("inf")), value)
    return {"latency_beam4_ms": 1000 * best["latency_beam4_s"],
            "latency_scored_ms": 1000 * best["latency_scored_s"],
            "tokens_per_s_beam4": -best["saturated_beam4"],
            "tokens_per_s_scored": -best["saturated_scored"]}
