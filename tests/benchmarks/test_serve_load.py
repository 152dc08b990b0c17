"""The serving benchmark against a live tiny server (a `python -m server` subprocess on
loopback): the load generator's counts, errors and percentiles, the offline run on the
same inputs, and the served / offline ratio. Nothing here asserts on speed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.live_server import ServerFailed, live_server
from benchmarks.speed.serve.config import ServeConfig
from benchmarks.speed.serve.loadgen import (
    BATCH,
    SINGLE,
    LevelRun,
    LoadRequest,
    Outcome,
    build_requests,
    run_level,
    served_domains,
)
from benchmarks.speed.serve.loadstats import (
    BatchShape,
    LevelStats,
    OfflineStats,
    Pair,
    markdown,
    percentile,
    saturation,
    sentence_count,
    served_shape,
    steady_window,
    summarise,
)
from benchmarks.speed.serve.offline import members_of, pack
from benchmarks.speed.serve.serve_load import offline
from benchmarks.speed.serve.store import TINY_DOMAINS, StoreSpec, seed_tiny_store, token_counter
from server.core.metrics import Metrics
from server.decoding.search import SearchOptions
from server.engine.engine import Member, SentenceJob
from server.scheduling.batching import length_spread

SETS = {
    "medical": ["The patient takes one tablet a day.", "Do not use after the expiry date."],
    "law": ["The council adopted this regulation. It applies from today.",
            "Member states shall comply with this directive."],
    "it": ["Click the button to open a file.", "The window shows the list of files."],
    "extra:news": ["We will talk about science tonight."],
}
CONFIG = ServeConfig(beam_size=2)


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory: pytest.TempPathFactory) -> StoreSpec:
    return seed_tiny_store(tmp_path_factory.mktemp("serve-load") / "store")


@pytest.fixture(scope="module")
def live(tiny_store: StoreSpec, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("server-log") / "server.log"
    with live_server(tiny_store.environment() | CONFIG.environment(), log,
                     ready_timeout_s=600) as base_url:
        yield base_url


@pytest.mark.slow
def test_a_level_answers_every_request_and_offline_sees_the_same_inputs(
        live: str, tiny_store: StoreSpec) -> None:
    served = served_domains(live)
    assert served == sorted(TINY_DOMAINS)
    requests = build_requests(SETS, served, count=12, seed=3)
    run = asyncio.run(run_level(live, requests, concurrency=4, max_requests=12,
                                max_seconds=600))
    count_tokens = token_counter(tiny_store)
    stats = summarise(run, requests, count_tokens=count_tokens)
    assert (stats.requests, stats.ok, stats.errors) == (12, 12, {})
    assert [o.index for o in run.outcomes] == list(range(12))
    expected = sum(sentence_count(text) for request in requests for text in request.texts)
    assert stats.sentences == expected and stats.target_tokens > 0
    assert stats.latency_p50_s is not None and stats.latency_p95_s is not None
    assert stats.latency_p99_s is not None
    assert 0 < stats.latency_p50_s <= stats.latency_p95_s <= stats.latency_p99_s
    modes = {r["routing"]["mode"] for o in run.outcomes for r in o.results}
    assert modes == {"explicit", "generic"}  # no classifier: "auto" is the backbone
    result = offline(tiny_store, run, requests, CONFIG, max_seconds=600,
                     count_tokens=count_tokens)
    assert result.sentences == stats.sentences and result.target_tokens > 0
    best = saturation([stats], result)
    assert best is not None and best.level_ratio == pytest.approx(
        stats.tokens_per_s / result.tokens_per_s)
    assert stats.steady_tokens_per_s is not None and 0 < stats.steady_s < run.wall_s
    assert best.ratio == pytest.approx(stats.steady_tokens_per_s / result.tokens_per_s)


@pytest.mark.slow
def test_a_level_stops_after_its_duration(live: str) -> None:
    requests = build_requests(SETS, list(TINY_DOMAINS), count=5, seed=1)
    run = asyncio.run(run_level(live, requests, concurrency=2, max_requests=1_000_000,
                                max_seconds=1.0))
    assert 0 < len(run.outcomes) < 1_000_000
    assert all(outcome.status == 200 for outcome in run.outcomes)


@pytest.mark.slow
def test_clients_keep_to_their_group_of_requests(live: str) -> None:
    requests = build_requests(SETS, list(TINY_DOMAINS), count=6, seed=2)
    alone = asyncio.run(run_level(live, requests, concurrency=1, max_requests=4,
                                  max_seconds=600, groups=2))
    assert [o.index for o in alone.outcomes] == [0, 2, 4, 6]  # client 0: even ones only
    pair = asyncio.run(run_level(live, requests, concurrency=2, max_requests=6,
                                 max_seconds=600, groups=2))
    assert len(pair.outcomes) == 6 and {o.index % 2 for o in pair.outcomes} == {0, 1}
    with pytest.raises(ValueError, match="divide the 5 requests"):
        asyncio.run(run_level(live, requests[:5], concurrency=2, max_requests=4,
                              max_seconds=1, groups=2))


def test_requests_mix_shapes_and_domains() -> None:
    requests = build_requests(SETS, ["it", "law", "medical"], count=200, seed=0)
    assert len(requests) == 200
    assert {r.path for r in requests} == {SINGLE, BATCH}
    domains = [item["domain"] for r in requests
               for item in (r.body["items"] if r.path == BATCH else [r.body])]
    assert {"auto", "generic", "it", "law", "medical"} <= set(domains)
    assert all(2 <= len(r.body["items"]) <= 8 for r in requests if r.path == BATCH)
    assert build_requests(SETS, ["it"], count=20, seed=5) == build_requests(
        SETS, ["it"], count=20, seed=5)
    no_domains = build_requests(SETS, [], count=50, seed=0)
    assert {d for r in no_domains for d in _domains(r)} <= {"auto", "generic"}


def _domains(request: LoadRequest) -> list[str]:
    items = request.body["items"] if request.path == BATCH else [request.body]
    return [str(item["domain"]) for item in items]


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([], 50, None), ([3.0], 99, 3.0), ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
    ([4.0, 1.0, 3.0, 2.0], 0, 1.0), ([1.0, 2.0, 3.0, 4.0], 100, 4.0),
    ([float(v) for v in range(1, 101)], 95, 95.05), ([float(v) for v in range(1, 101)], 99, 99.01),
])
def test_percentile(values: list[float], q: float, expected: float | None) -> None:
    assert percentile(values, q) == (None if expected is None else pytest.approx(expected))


def test_summary_counts_failures_apart() -> None:
    requests = [LoadRequest(SINGLE, {"text": "One. Two.", "domain": "generic"})]
    outcomes = [Outcome(0, 200, 0.5, None, [{"translation": "a b c"}]),
                Outcome(1, 429, 0.1, "queue_full"), Outcome(2, 0, 9.0, "ReadTimeout"),
                Outcome(3, 200, 1.5, None, [{"translation": "d"}])]
    stats = summarise(LevelRun(2, 2.0, outcomes), requests,
                      count_tokens=lambda text: len(text.split()))
    assert (stats.requests, stats.ok, stats.sentences, stats.target_tokens) == (4, 2, 4, 4)
    assert stats.errors == {"ReadTimeout": 1, "queue_full": 1}
    assert (stats.sentences_per_s, stats.tokens_per_s) == (2.0, 2.0)
    assert (stats.latency_p50_s, stats.latency_mean_s) == (1.0, 1.0)


def test_the_steady_window_holds_the_batches_between_the_first_and_the_last_send() -> None:
    """Answers of the first batch (ramp-up: replies a few milliseconds apart) and after
    the last send (drain) are left out of the steady throughput; the whole level still
    counts them."""
    requests = [LoadRequest(SINGLE, {"text": "One. Two.", "domain": "generic"})]
    answer = [{"translation": "a b"}]
    outcomes = [Outcome(0, 200, 1.0, None, answer, answered_s=1.0),  # the first batch
                Outcome(1, 200, 1.0, None, answer, answered_s=1.01),
                Outcome(2, 200, 1.5, None, answer, answered_s=2.5),
                Outcome(3, 429, 0.1, "queue_full", answered_s=3.0),
                Outcome(4, 200, 2.0, None, answer, answered_s=4.01),  # the last send's batch
                Outcome(5, 200, 3.0, None, answer, answered_s=5.0)]  # drain
    run = LevelRun(2, 5.0, outcomes, last_send_s=4.02)
    assert steady_window(run) == (1.01, 4.01)
    stats = summarise(run, requests, count_tokens=lambda text: len(text.split()))
    assert (stats.sentences, stats.target_tokens) == (10, 10)
    assert (stats.steady_s, stats.steady_sentences) == (pytest.approx(3.0), 4)
    assert stats.steady_tokens_per_s == pytest.approx(4 / 3)
    best = saturation([stats], offline_at(2.0))
    assert best is not None and best.ratio == pytest.approx(2 / 3)
    assert best.level_ratio == pytest.approx(1.0) and best.met is False
    assert steady_window(LevelRun(1, 1.0, outcomes[:1], last_send_s=0.0)) is None
    # one burst only: no answer after the first batch's
    assert steady_window(LevelRun(2, 2.0, outcomes[:2], last_send_s=1.5)) is None


def test_the_steady_window_starts_after_a_quarter_of_the_answers() -> None:
    """Six batches of two answers each: the warm-up takes the first three answers, so
    the window starts where the second batch's answers end."""
    outcomes = [Outcome(i, 200, 1.0, None, [{"translation": "a"}],
                        answered_s=1.0 + i // 2 + 0.01 * (i % 2)) for i in range(12)]
    assert steady_window(LevelRun(4, 7.0, outcomes, last_send_s=6.02)) == (2.01, 6.01)


def level(concurrency: int, tokens_per_s: float) -> LevelStats:
    return LevelStats(concurrency, 10, 10, {}, 10, 100, 1.0, 10.0, tokens_per_s,
                      0.1, 0.2, 0.3, 0.15)


def offline_at(tokens_per_s: float) -> OfflineStats:
    return OfflineStats(10, 100, 1, 1.0, 10.0, tokens_per_s)


@pytest.mark.parametrize(("speeds", "offline_speed", "concurrency", "ratio", "met"), [
    ([100.0, 475.0, 300.0], 500.0, 4, 0.95, True),
    ([100.0, 470.0, 300.0], 500.0, 4, 0.94, False),
    ([100.0, 200.0, 900.0], 600.0, 16, 1.5, True),
    ([100.0], 0.0, 1, None, None),
])
def test_saturation_ratio(speeds: list[float], offline_speed: float, concurrency: int,
                          ratio: float | None, met: bool | None) -> None:
    levels = [level(c, s) for c, s in zip((1, 4, 16), speeds, strict=False)]
    best = saturation(levels, offline_at(offline_speed))
    assert best is not None and best.concurrency == concurrency
    assert best.ratio == (None if ratio is None else pytest.approx(ratio))
    assert best.met is met
    assert saturation([], offline_at(1.0)) is None


def test_interleaved_rounds_give_the_verdict_by_their_median() -> None:
    levels = [level(4, 480.0)]
    pairs = [Pair(450.0, 500.0), Pair(490.0, 500.0), Pair(300.0, 500.0)]
    best = saturation(levels, offline_at(500.0), pairs=pairs)
    assert best is not None and best.ratio == pytest.approx(0.96)
    assert best.round_ratios == pytest.approx((0.9, 0.98, 0.6))
    assert best.median_ratio == pytest.approx(0.9) and best.verdict_ratio == best.median_ratio
    assert best.met is False  # the sweep's single run alone read 0.96x
    text = markdown(levels, offline_at(500.0), best, {"mode": "full"}, pairs)
    assert "| 3 | 300.0 | 500.0 | 0.60x |" in text
    assert "Median of the rounds: served / offline = 0.90x" in text
    met = saturation(levels, offline_at(500.0), pairs=[Pair(490.0, 500.0), Pair(480.0, 500.0)])
    assert met is not None and met.median_ratio == pytest.approx(0.97) and met.met is True


def test_batch_shapes_read_from_the_servers_metrics() -> None:
    """The served side reads the scheduler's own histograms; rounds report both sides."""
    metrics = Metrics()
    before = served_shape(metrics.render().decode())
    assert before == BatchShape()
    for lengths, seconds in (([4, 4], 3.0), ([2, 6, 4], 5.0)):  # spreads 1.0 and 1.5
        metrics.batch_sentences.observe(len(lengths))
        metrics.batch_length_spread.observe(length_spread(lengths))
        metrics.engine_busy.inc(seconds)
    shape = served_shape(metrics.render().decode()).since(before)
    assert (shape.batches, shape.sentences, shape.engine_s) == (2, 5, 8.0)
    assert shape.sentences_per_batch == 2.5 and shape.mean_spread == pytest.approx(1.25)
    for rows in (8, 4, 6):  # continuous batching's live steps
        metrics.live_rows.observe(rows)
    live = served_shape(metrics.render().decode()).since(before)
    assert (live.live_steps, live.live_rows, live.rows_per_step) == (3, 18, 6.0)
    offline_shape = BatchShape().add(4, 1.0, 0.5)
    pair = Pair(450.0, 500.0, 440.0, shape, offline_shape, served_wall_s=10.0)
    # 8 s of engine in a 10 s level: 440 tokens/s over the level, 550 per engine second
    assert pair.engine_share == pytest.approx(0.8)
    assert pair.engine_speed_ratio == pytest.approx(1.1)
    levels = [level(4, 480.0)]
    text = markdown(levels, offline_at(500.0), saturation(levels, offline_at(500.0),
                                                          pairs=[pair]), {}, [pair])
    assert "| 0.88x | 80.0% | 1.10x | 2.5, 1.25 | 4.0, 1.00 |" in text
    assert Pair(450.0, 500.0).engine_share is None  # rounds without the server's metrics


@pytest.mark.parametrize(("routing", "members"), [
    ({"mode": "generic", "domain": "generic"}, (Member(None),)),
    ({"mode": "explicit", "domain": "law", "module_version": 3}, (Member("law@3"),)),
    ({"mode": "classifier", "domain": "it", "module_version": 1}, (Member("it@1"),)),
    ({"mode": "ensemble", "domain": None, "weights": {"law": 0.75, "generic": 0.25},
      "module_versions": {"law": 2}}, (Member("law@2", 0.75), Member(None, 0.25))),
])
def test_members_reproduce_the_served_routing(routing: dict[str, object],
                                              members: tuple[Member, ...]) -> None:
    assert members_of(routing) == members


def test_offline_batches_follow_the_scheduler_budget() -> None:
    def job(length: int, *modules: str | None) -> SentenceJob:
        return SentenceJob([5] * length, tuple(Member(m) for m in modules), 10)

    jobs = [job(10, "a@1"), job(10, "b@1"), job(10, None), job(30, "c@1"), job(5, "a@1", None)]
    options = SearchOptions(beam_size=2)  # costs 20, 20, 20, 60, 20
    assert pack(jobs, options, max_batch_tokens=60, max_modules=4) == [[0, 1, 2], [3], [4]]
    assert pack(jobs, options, max_batch_tokens=1000, max_modules=2) == [[0, 1, 2], [3, 4]]
    assert pack([job(100, None)], options, max_batch_tokens=10, max_modules=1) == [[0]]
    # with the scheduler's lookahead: the oldest job and its nearest lengths from a pool
    # of two budgets, as `length_window` cuts a served batch
    mixed = [job(length, None) for length in (2, 9, 2, 9, 2)]
    greedy = SearchOptions()
    assert pack(mixed, greedy, max_batch_tokens=8, max_modules=1) == [[0], [1], [2], [3], [4]]
    assert pack(mixed, greedy, max_batch_tokens=8, max_modules=1, lookahead=2) == [
        [0, 2], [1], [3], [4]]


@pytest.mark.slow
def test_a_server_that_never_gets_ready_fails_with_its_log(tmp_path: Path) -> None:
    missing = StoreSpec(tmp_path / "empty", builtin=False, backbone="absent")
    with pytest.raises(ServerFailed, match="not ready"):
        with live_server(missing.environment(), tmp_path / "server.log", ready_timeout_s=3):
            pass
    assert (tmp_path / "server.log").is_file()
