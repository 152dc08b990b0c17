"""The scoring pass against the search that produced the outputs: the same log-probs,
attention that sums to one per target position, and batching/chunking that change nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import torch

from server.decoding.search import SearchOptions
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.execution.engine_thread import EngineThread
from server.quality import signals as signals_module
from server.quality.batching import ScoringBatcher
from server.quality.signals import Signals, score
from tests.tiny import ENGLISH, adapter_engine


@pytest.fixture(scope="module")
def engine() -> Engine:
    return adapter_engine(EngineOptions(), count=2)


def jobs_for(engine: Engine, modules: list[str | None]) -> list[SentenceJob]:
    ids = engine.source_tokenizer.encode(ENGLISH[: len(modules)])
    return [SentenceJob(i, (Member(m),), 20) for i, m in zip(ids, modules, strict=True)]


MODULES: list[str | None] = ["m1", None, "m2", "m1", None, "m2"]


def test_log_probs_are_the_searchs_own(engine: Engine) -> None:
    """Greedy scores are the mean log-prob of the chosen tokens (EOS counted when it
    ended the sentence): the teacher-forced pass must give back exactly those."""
    jobs = jobs_for(engine, MODULES)
    found = engine.translate(jobs, SearchOptions(beam_size=1))
    signals = score(engine, jobs, [h[0].tokens for h in found])
    for job, hypotheses, signal in zip(jobs, found, signals, strict=True):
        best = hypotheses[0]
        ended = len(best.tokens) < job.max_length  # EOS was chosen
        counted = signal.token_log_probs[: len(best.tokens) + ended]
        assert sum(counted) / len(counted) == pytest.approx(best.score, abs=1e-4)
        assert len(signal.token_log_probs) == len(best.tokens) + 1
        assert all(e >= 0 for e in signal.token_entropies)


def test_attention_is_a_distribution_per_target_position(engine: Engine) -> None:
    jobs = jobs_for(engine, MODULES)
    outputs = [[5, 6, 7], [8], [], [9, 9, 9, 9], [10, 11], [12]]
    for job, output, signal in zip(jobs, outputs, score(engine, jobs, outputs), strict=True):
        assert len(signal.coverage) == len(job.source_ids) - 1  # EOS excluded
        # every target position (EOS step included) spreads one unit of attention; what
        # is not on a word went to the source's EOS
        assert 0 < sum(signal.coverage) <= len(output) + 1 + 1e-4
        assert 0.0 <= signal.attention_entropy <= 1.0 + 1e-6


def test_a_batch_scores_like_each_sentence_alone(engine: Engine,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = jobs_for(engine, MODULES)
    outputs = [[5 + i, 6, 7 + i][: 1 + i % 3] for i in range(len(jobs))]
    together = score(engine, jobs, outputs)
    alone = [score(engine, [job], [out])[0] for job, out in zip(jobs, outputs, strict=True)]
    # a chunk of one row at a time: the bound on logits splits the batch
    monkeypatch.setattr(signals_module, "MAX_LOGIT_ELEMENTS", 1)
    chunked = score(engine, jobs, outputs)
    for a, b, c in zip(together, alone, chunked, strict=True):
        assert a.token_log_probs == pytest.approx(b.token_log_probs, abs=1e-4)
        assert a.coverage == pytest.approx(b.coverage, abs=1e-4)
        assert c.token_log_probs == pytest.approx(b.token_log_probs, abs=1e-4)


def test_the_module_changes_the_score(engine: Engine) -> None:
    ids = engine.source_tokenizer.encode([ENGLISH[0]])[0]
    output = [[5, 6, 7]]
    plain = score(engine, [SentenceJob(ids, (Member(None),), 20)], output)[0]
    adapted = score(engine, [SentenceJob(ids, (Member("m1"),), 20)], output)[0]
    assert not torch.allclose(torch.tensor(plain.token_log_probs),
                              torch.tensor(adapted.token_log_probs))


def test_an_ensemble_is_scored_by_its_heaviest_member(engine: Engine) -> None:
    ids = engine.source_tokenizer.encode([ENGLISH[0]])[0]
    output = [[5, 6, 7]]
    mixed = SentenceJob(ids, (Member("m1", 0.2), Member("m2", 0.8)), 20)
    heaviest = SentenceJob(ids, (Member("m2"),), 20)
    assert score(engine, [mixed], output)[0] == score(engine, [heaviest], output)[0]


def test_mismatched_lengths_are_refused(engine: Engine) -> None:
    with pytest.raises(ValueError, match="2 jobs but 1 outputs"):
        score(engine, jobs_for(engine, [None, None]), [[5]])


def test_concurrent_requests_share_one_scoring_call(engine: Engine) -> None:
    """Passes queued while one runs go together in the next call; results are each
    request's own, and a cancelled request's sentences are never computed."""
    jobs = jobs_for(engine, MODULES)
    outputs = [[5 + i] for i in range(len(jobs))]
    thread = EngineThread()
    calls: list[int] = []
    original = thread.run

    async def counted(function: Any, *args: Any) -> Any:
        calls.append(len(args[1]))
        return await original(function, *args)

    async def go() -> list[list[Signals]]:
        batcher = ScoringBatcher(thread)
        thread.run = counted  # type: ignore[method-assign]
        first = asyncio.ensure_future(batcher.score(engine, jobs[:2], outputs[:2]))
        await asyncio.sleep(0)  # the first call starts
        waiting = [asyncio.ensure_future(batcher.score(engine, [job], [out]))
                   for job, out in zip(jobs[2:], outputs[2:], strict=True)]
        waiting[0].cancel()
        return [await first, *[await w for w in waiting[1:]]]

    try:
        found = asyncio.run(go())
    finally:
        thread.shutdown()
    assert calls == [2, 3]
    alone = score(engine, jobs, outputs)
    for got, expected in zip([*found[0], *[f[0] for f in found[1:]]], alone[:2] + alone[3:],
                             strict=True):
        assert got.token_log_probs == pytest.approx(expected.token_log_probs, abs=1e-4)
