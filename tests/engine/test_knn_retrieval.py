"""Retrieval during decoding (server/decoding/knn.py, server/engine/knn_store.py): a memory
pair forced through the model that decodes its own source steers every family, greedy and
beam, ensembles and word-level mixtures, static and continuous batching, towards the
pair's target; sentences unlike the memory (every step beyond the gate) decode exactly as
without it, bit for bit, in a batch mixing both. The same on CUDA (skipped without a GPU):
float32 as on the CPU, half precision with its own tolerance for the rows beside."""

from __future__ import annotations

import pytest

from server.decoding.knn import KnnParams, Neighbours
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from tests.engine.test_device_agreement import MEMBERS, engine_with, modules
from tests.engine.test_live import decode_live

SOURCE = [5, 6, 7, 8, 3]
TARGET = (30, 31, 32, 33, 34)
FAR = [40, 41, 42, 43, 44, 45, 3]
# The tiny random model's hidden states lie close together: a low temperature lets the
# nearest entry (the forced step itself) decide the vote.
PARAMS = KnnParams(k=4, temperature=1e-4, gate=0.05, max_weight=0.9)
SEARCHES = [SearchOptions(beam_size=1), SearchOptions(beam_size=4, n_best=2)]


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture(scope="module", params=DEVICES)
def engines(request: pytest.FixtureRequest) -> dict[str, Engine]:
    made, device = modules(), request.param
    # on CUDA fixed steps (CUDA graphs) are the default: the eager path is asked for
    return {"eager": engine_with(EngineOptions(device=device, fixed_steps=False), made),
            "fixed": engine_with(EngineOptions(device=device, fixed_steps=True), made)}


def memory() -> Neighbours:
    return Neighbours(((tuple(SOURCE), TARGET),), PARAMS)


def batch(members: tuple[Member, ...], guided: bool) -> list[SentenceJob]:
    """The memory's own source, and a sentence unlike it (guided or not), twice over."""
    return [SentenceJob(SOURCE, members, 12, neighbours=memory() if guided else None),
            SentenceJob(FAR, members, 12, neighbours=memory() if guided else None),
            SentenceJob(FAR[1:], members, 10)]


def tokens(results: list[list[Hypothesis]]) -> list[list[list[int]]]:
    return [[h.tokens for h in r] for r in results]


@pytest.mark.parametrize("search", SEARCHES, ids=["greedy", "beam4"])
@pytest.mark.parametrize("path", ["eager", "fixed"])
def test_memory_steers_its_sentence_and_leaves_far_ones_bit_identical(
        engines: dict[str, Engine], search: SearchOptions, path: str) -> None:
    engine = engines[path]
    if path == "fixed":  # one member per sentence: the fixed-step path
        member_sets = [m for m in MEMBERS if len(m) == 1]
    else:
        member_sets = MEMBERS
    for members in member_sets:
        plain = engine.translate(batch(members, guided=False), search)
        jobs = batch(members, guided=True)
        guided = engine.translate(jobs, search)
        name = [m.module_id for m in members]
        assert plain[0][0].tokens != list(TARGET), name
        if search.beam_size == 1:
            assert guided[0][0].tokens == list(TARGET), name
        else:  # beam: a shorter ending may win on length, never another start
            assert guided[0][0].tokens[:3] == list(TARGET[:3]), name
        near, far = jobs[0].neighbours, jobs[1].neighbours
        assert near is not None and far is not None
        assert near.report.keys == len(TARGET) + 1 and near.report.rows_on > 0
        assert near.report.mean_weight > 0.5
        assert far.report.rows > 0 and far.report.rows_on == 0, name
        for row in (1, 2):  # gated off, and without memory: as without retrieval (the
            # batch's rows change when the guided sentence ends sooner: float noise)
            assert tokens(guided)[row] == tokens(plain)[row], (name, row)
            assert [h.score for h in guided[row]] == pytest.approx(
                [h.score for h in plain[row]], abs=1e-5)
        alone = engine.translate([SentenceJob(FAR, members, 12, neighbours=memory())], search)
        assert alone == engine.translate([SentenceJob(FAR, members, 12)], search), name


def test_mixed_batch_of_modules_with_and_without_memory(engines: dict[str, Engine]) -> None:
    engine = engines["eager"]
    search = SearchOptions(beam_size=3)
    jobs = [SentenceJob(SOURCE, members, 12, neighbours=memory() if i % 2 else None)
            for i, members in enumerate(MEMBERS)]
    plain = engine.translate([SentenceJob(j.source_ids, j.members, 12) for j in jobs], search)
    guided = engine.translate(jobs, search)
    for i, (mine, theirs) in enumerate(zip(guided, plain, strict=True)):
        if i % 2:
            assert mine[0].tokens[:3] == list(TARGET[:3]), i
        else:
            assert [h.tokens for h in mine] == [h.tokens for h in theirs], i


@pytest.mark.parametrize("search", SEARCHES, ids=["greedy", "beam4"])
def test_continuous_batching_decodes_as_the_static_batch(engines: dict[str, Engine],
                                                         search: SearchOptions) -> None:
    engine = engines["eager"]
    jobs = [job for members in MEMBERS[::2] for job in batch(members, guided=True)]
    static = engine.translate(jobs, search)
    again = [SentenceJob(j.source_ids, j.members, j.max_length,
                         neighbours=memory() if j.neighbours else None) for j in jobs]
    live, _ = decode_live(engine, again, search, [i % 4 for i in range(len(again))])
    assert tokens(live) == tokens(static)
    for job, static_job in zip(again, jobs, strict=True):
        if job.neighbours is not None and static_job.neighbours is not None:
            assert job.neighbours.report.rows_on == static_job.neighbours.report.rows_on


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("fixed", [False, True], ids=["eager", "fixed"])
def test_cuda_half_precision_memory_steers_and_gates(dtype: str, fixed: bool) -> None:
    """What the server runs on a GPU: half precision (fixed steps by default). The memory's
    own source takes its target; the far sentence stays beyond the gate and keeps its
    tokens (its scores within half precision's noise)."""
    made = modules()
    engine = engine_with(EngineOptions(device="cuda", dtype=dtype, fixed_steps=fixed), made)
    assert engine.device.type == "cuda"
    search = SearchOptions(beam_size=1)
    for members in [m for m in MEMBERS if len(m) == 1]:
        plain = engine.translate(batch(members, guided=False), search)
        jobs = batch(members, guided=True)
        guided = engine.translate(jobs, search)
        name = [m.module_id for m in members]
        assert guided[0][0].tokens == list(TARGET), name
        far = jobs[1].neighbours
        assert far is not None and far.report.rows > 0 and far.report.rows_on == 0, name
        for row in (1, 2):
            assert tokens(guided)[row] == tokens(plain)[row], (name, row)
            assert guided[row][0].score == pytest.approx(plain[row][0].score, abs=0.1)
