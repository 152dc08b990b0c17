"""Live decoding over the live buffers' whole capacity (server/engine/live_graphs.py: what
a CUDA graph replays per capacity bucket and module layout). On the CPU the same steps run
eagerly over the same buffers, with the bucket and layout bookkeeping of CUDA: rows that
join at random steps and grow the buffers across buckets decode as static batches and as
the ordinary live steps. On CUDA (skipped without a GPU) the steps are captured and
replayed, and decode as the static batches do: float32 the same tokens, half precision
within its own tolerance (benchmarks/speed/gpu/gpu_serve_run.sh runs these)."""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.engine.live import LiveDecoder
from server.engine.live_graphs import GraphCounts, LiveGraphs
from server.engine.live_rows import POSITION_CHUNK, ROW_CHUNK
from server.engine.slots import BatchHooks
from tests.engine.test_device_agreement import (
    ADAPTER_MIX,
    FLOAT32,
    HALF,
    MEMBERS,
    SOURCES,
    Tolerance,
    engine_with,
    modules,
)
from tests.engine.test_live import assert_same, decode_live, jobs_of

PLAIN = (Member(None),)


def scenario(seed: int) -> tuple[list[SentenceJob], list[int]]:
    """Jobs of every member set joining at random steps, and long plain-backbone ones
    from the start: more rows than the first row capacity (beam search) and more
    positions than the first position capacity, so the buffers grow to new buckets while
    rows decode; the plain rows keep decoding through steps nobody joins or leaves."""
    jobs = [SentenceJob(SOURCES[2], PLAIN, 3 * POSITION_CHUNK) for _ in range(2)]
    jobs += jobs_of(len(MEMBERS) + 2, seed)
    chooser = random.Random(seed)
    return jobs, [0, 0] + [chooser.randint(0, 10) for _ in jobs[2:]]


def decode_with_graphs(engine: Engine, jobs: list[SentenceJob], search: SearchOptions,
                       join_steps: list[int]) -> tuple[list[list[Hypothesis]], GraphCounts]:
    hypotheses, decoder = decode_live(engine, jobs, search, join_steps)
    assert decoder.graphs is not None
    assert decoder.live == 0 and not engine.modules.in_use
    return hypotheses, decoder.graphs.counts


@pytest.fixture(scope="module")
def made() -> dict[str, tuple[dict[str, object], dict]]:
    return modules()


@pytest.mark.parametrize("search", [SearchOptions(beam_size=1),
                                    SearchOptions(beam_size=3, n_best=2)],
                         ids=["greedy", "beam3-nbest2"])
def test_capacity_steps_decode_as_static_batches_and_live_rows(
        made: dict, search: SearchOptions) -> None:
    jobs, join_steps = scenario(seed=5)
    reference = engine_with(EngineOptions(), made)
    static = reference.translate(jobs, search)
    live, _ = decode_live(reference, jobs, search, join_steps)
    graphed, counts = decode_with_graphs(engine_with(EngineOptions(fixed_steps=True), made),
                                         jobs, search, join_steps)
    assert_same(graphed, static)
    assert_same(graphed, live)
    assert counts.buckets >= 2  # the buffers grew while rows were decoding
    # Every layout's first step in a bucket is a warm-up; steps of a layout seen before
    # are its capture, then replays; nothing failed to capture.
    assert counts.warmups >= counts.buckets and counts.eager == 0
    assert counts.captures >= 1 and counts.replays >= 1


def test_a_steady_batch_is_captured_once_per_bucket_and_replayed(made: dict) -> None:
    """Rows of one module and plain rows that nobody joins or leaves: one layout, so each
    bucket is warmed up, captured and then replayed until the buffers grow."""
    search = SearchOptions(beam_size=2)
    jobs = [SentenceJob(SOURCES[i % len(SOURCES)], (Member("adapter0"),) if i % 2 else PLAIN,
                        POSITION_CHUNK + 4) for i in range(ROW_CHUNK // 2 + 2)]
    engine = engine_with(EngineOptions(fixed_steps=True), made)
    decoder = LiveDecoder(engine, search)
    decoder.join(jobs)
    assert decoder.graphs is not None
    counts = decoder.graphs.counts
    steps = 0
    finished: list[tuple[int, list[Hypothesis]]] = []
    while steps < POSITION_CHUNK + 2 and not finished:  # a leave changes the layout
        finished = decoder.step()
        steps += 1
    assert decoder.rows.self_kv.shape[2] > ROW_CHUNK  # the joins grew the rows
    assert counts.warmups == counts.captures == counts.buckets
    assert counts.replays == steps - 2 * counts.buckets >= 1


def test_unused_capacity_rows_stay_finite(made: dict) -> None:
    """Capacity steps decode unused rows too: after leaves and growth every row and group
    of the capacity attends to something (an all -inf row would write NaNs that a later
    occupant reads as 0 * NaN), and a sentence joining those rows decodes as alone."""
    engine = engine_with(EngineOptions(fixed_steps=True), made)
    search = SearchOptions(beam_size=2)
    decoder = LiveDecoder(engine, search)
    decoder.join([SentenceJob(SOURCES[i % 4], MEMBERS[i % len(MEMBERS)], 4)
                  for i in range(ROW_CHUNK // 2 + 1)])
    while decoder.live:
        decoder.step()
    rows = decoder.rows
    assert bool((rows.self_bias[..., 0] == 0).all())
    assert bool(rows.cross_bias.amax(dim=-1).isfinite().all())
    late = SentenceJob(SOURCES[2], MEMBERS[-1], 8)  # into the rows the others left
    (ticket,) = decoder.join([late])
    finished: list[tuple[int, list[Hypothesis]]] = []
    while not finished:
        finished = decoder.step()
    assert [t for t, _ in finished] == [ticket]
    assert_same([finished[0][1]], engine_with(EngineOptions(), made).translate([late], search))


# Operations a CUDA graph capture refuses or records wrongly: a read back to the host
# (`.item()`, `nonzero`, boolean indexing and other data-dependent shapes), and tensors
# made from host data (a copy from the host, frozen into the graph at capture).
HOST_BOUND = {"aten._local_scalar_dense", "aten.item", "aten.nonzero", "aten.masked_select",
              "aten.unique", "aten._unique2", "aten.lift_fresh", "aten.lift_fresh_copy",
              "aten.tolist", "aten.equal", "aten.is_nonzero"}


class StepOps(TorchDispatchMode):
    """Records the operations a step runs, and whether any indexes with booleans."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        self.boolean_indices = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        name = str(func.overloadpacket)  # aten.index_put_, not its overload
        self.names.add(name)
        if name in ("aten.index", "aten.index_put", "aten.index_put_"):
            indices = args[1]
            self.boolean_indices += sum(isinstance(i, torch.Tensor) and i.dtype == torch.bool
                                        for i in indices)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("options", [EngineOptions(fixed_steps=True),
                                     EngineOptions(fixed_steps=True, module_grouped=True)],
                         ids=["per-module", "grouped"])
def test_a_step_never_waits_for_the_host(made: dict, options: EngineOptions,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """What a capture would record, rehearsed on the CPU: the step of every family, of
    mixtures and ensembles, reads nothing back to the host and makes no tensor from host
    data (tokens go in through the static tensor, before the step)."""
    recorded = StepOps()
    body = LiveGraphs._body

    def watched(self: LiveGraphs, hooks: BatchHooks | None) -> torch.Tensor:
        with recorded:
            return body(self, hooks)

    monkeypatch.setattr(LiveGraphs, "_body", watched)
    decoder = LiveDecoder(engine_with(options, made), SearchOptions(beam_size=2))
    decoder.join([SentenceJob(SOURCES[i % len(SOURCES)], members, 6)
                  for i, members in enumerate(MEMBERS + ADAPTER_MIX)])
    for _ in range(3):
        decoder.step()
    assert "aten.index_put_" in recorded.names and "aten.log_softmax" in recorded.names
    assert not recorded.names & HOST_BOUND and recorded.boolean_indices == 0


def assert_within(got: list[list[Hypothesis]], want: list[list[Hypothesis]],
                  tolerance: Tolerance) -> None:
    flipped = [row for row, (a, b) in enumerate(zip(got, want, strict=True))
               if a[0].tokens != b[0].tokens]
    assert len(flipped) <= tolerance.flips, flipped
    for row, (a, b) in enumerate(zip(got, want, strict=True)):
        if row not in flipped:
            assert a[0].score == pytest.approx(b[0].score, abs=tolerance.score), row


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "tolerance"), [("float32", Tolerance(0, FLOAT32.score)),
                                                  ("float16", HALF)])
@pytest.mark.parametrize("search", [SearchOptions(beam_size=1), SearchOptions(beam_size=3)],
                         ids=["greedy", "beam3"])
def test_cuda_graphs_decode_live_rows_as_static_batches(
        made: dict, dtype: str, tolerance: Tolerance, search: SearchOptions) -> None:
    """Captured per bucket and layout and replayed; float32 the static batches' tokens."""
    engine = engine_with(EngineOptions(device="cuda", dtype=dtype), made)
    assert engine.fixed_steps  # the default on CUDA
    jobs, join_steps = scenario(seed=5)
    static = engine.translate(jobs, search)
    graphed, counts = decode_with_graphs(engine, jobs, search, join_steps)
    assert_within(graphed, static, tolerance)
    assert counts.captures >= 1 and counts.replays >= 1 and counts.eager == 0
    eager = engine_with(EngineOptions(device="cuda", dtype=dtype, fixed_steps=False), made)
    live, _ = decode_live(eager, jobs, search, join_steps)
    assert_within(graphed, live, tolerance)
