"""The review runs the scoring pass only where it is needed: an estimator of the search's
own features (DECODE_FEATURES, the shipped one) scores sentences from their hypotheses
alone; an estimator fitted with pass features, or an output short enough for the
dropped-content rule to read coverage, sends the sentence through the pass."""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_quality_rules import manifest

from server.core.metrics import Metrics
from server.core.settings import QualitySettings
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.execution.engine_thread import EngineThread
from server.quality.estimator import PRIOR
from server.quality.estimators import EstimatorBook, write_estimator
from server.quality.features import DECODE_FEATURES, PASS_FEATURES, Candidate, features
from server.quality.review import Assessment, QualityReview
from server.textproc.languages import LanguageDetectors
from tests.tiny import ENGLISH, adapter_engine

OPTIONS = SearchOptions(beam_size=2, n_best=2)


@pytest.fixture(scope="module")
def engine() -> Engine:
    return adapter_engine(EngineOptions(), count=1)


def reviewed(engine: Engine, jobs: list[SentenceJob], book: EstimatorBook,
             fingerprint: str | None) -> tuple[list[Assessment], list[int],
                                               list[list[Hypothesis]]]:
    """The assessments, and the number of sentences each scoring call got."""
    hypotheses = engine.translate(jobs, OPTIONS)
    thread = EngineThread()
    calls: list[int] = []
    original = thread.run

    async def counted(function: Any, *args: Any) -> Any:
        calls.append(len(args[1]))
        return await original(function, *args)

    async def go() -> list[Assessment]:
        review = QualityReview(thread, QualitySettings(recover=False), metrics=Metrics(),
                               max_beam=4, estimators=book, languages=LanguageDetectors())
        thread.run = counted  # type: ignore[method-assign]

        async def never(more: list[SentenceJob], chosen: SearchOptions) -> list[Any]:
            raise AssertionError("recovery is off")

        backbone = manifest(fingerprint) if fingerprint is not None else None
        _, found = await review.review(engine, backbone, jobs, ENGLISH[: len(jobs)],
                                       hypotheses, options=OPTIONS, run=never)
        return found

    try:
        return asyncio.run(go()), calls, hypotheses
    finally:
        thread.shutdown()


def jobs_for(engine: Engine, max_length: int) -> list[SentenceJob]:
    ids = engine.source_tokenizer.encode(ENGLISH[:4])
    return [SentenceJob(i, (Member("m1"),), max_length) for i in ids]


def test_a_search_feature_estimator_needs_no_pass_for_outputs_of_normal_length(
        engine: Engine) -> None:
    jobs = jobs_for(engine, 40)
    assessments, calls, hypotheses = reviewed(engine, jobs, EstimatorBook([]), None)
    cheap = [features(Candidate(s, "x", j.source_ids, h[0].tokens, (), [h[0].score]), None)
             for s, j, h in zip(ENGLISH[:4], jobs, hypotheses, strict=True)]
    short = [row["length_ratio"] < math.log(0.7) and math.exp(row["source_length"]) >= 6
             for row in cheap]
    assert not all(short)
    assert sum(calls) == sum(short)  # the pass ran for the short outputs only
    for assessment, hypothesis in zip(assessments, hypotheses, strict=True):
        # the prior reads lp_mean, which is the search's own length-normalised score
        expected = min(1.0, max(0.0, 1 + 0.4 * hypothesis[0].score))
        assert assessment.quality == pytest.approx(expected, abs=1e-4)


def test_short_outputs_get_the_pass_for_coverage(engine: Engine) -> None:
    jobs = jobs_for(engine, 2)  # two tokens for sources of 6+: under 0.7x
    assert all(len(j.source_ids) >= 7 for j in jobs)
    _, calls, _ = reviewed(engine, jobs, EstimatorBook([]), None)
    assert calls == [len(jobs)]


def test_an_estimator_with_pass_features_scores_every_sentence(engine: Engine,
                                                               tmp_path: Path) -> None:
    fingerprint = "e" * 64
    assert "entropy_mean" in PASS_FEATURES and "entropy_mean" not in DECODE_FEATURES
    write_estimator(tmp_path, "tiny", replace(
        PRIOR, features=("lp_mean", "entropy_mean"), mean=(0.0, 0.0), scale=(1.0, 1.0),
        weights=(0.4, -0.1), backbone_fingerprint=fingerprint))
    jobs = jobs_for(engine, 40)
    _, calls, _ = reviewed(engine, jobs, EstimatorBook([tmp_path]), fingerprint)
    assert calls == [len(jobs)]
