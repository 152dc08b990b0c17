"""Shares between clients (server/scheduling/fair_share.py, clients.py): smallest work
first within a client, round robin across clients, the queue bounded per client, the
optional per-client rate limit; over real HTTP (uvicorn), clients told apart by API key
or address. Order and counts of batches, never the clock."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import build_store, make_settings
from fastapi import FastAPI
from test_server_backpressure import wait_for
from test_server_scheduler import GREEDY, FakeEngine, job, later, run
from uvicorn_live import serving

from server.app import create_app
from server.core.errors import Busy, RateLimited
from server.scheduling.clients import CLIENT, client_of, key_client
from server.scheduling.scheduler import Scheduler


def test_within_a_client_the_request_with_least_work_goes_first() -> None:
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> None:
        blocker = scheduler.submit([job(1, "blocker")], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)
        CLIENT.set("one client")
        bulk = scheduler.submit([job(4, "bulk") for _ in range(12)], GREEDY, deadline=later())
        small = scheduler.submit([job(4, "small"), job(4, "small")], GREEDY, deadline=later())
        gate.set()
        await asyncio.gather(*blocker, *bulk, *small)

    run(engine, body, max_batch_tokens=16, max_queue=100)
    batches = [[m.module_id for j in b for m in j.members] for b in engine.batches[1:]]
    assert batches[0][:2] == ["small", "small"]  # sent last, least work: first
    assert sum(len(ids) for ids in batches) == 14


def test_across_clients_round_robin_serves_the_least_recently_served_first() -> None:
    """Two requests of client A and one of client B wait: each batch takes one sentence
    per client in turn (A's two requests do not make two turns), and the client left out
    of a batch leads the next."""
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> None:
        blocker = scheduler.submit([job(1, "blocker")], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)
        CLIENT.set("A")
        a1 = scheduler.submit([job(4, "a") for _ in range(3)], GREEDY, deadline=later())
        a2 = scheduler.submit([job(4, "a") for _ in range(3)], GREEDY, deadline=later())
        CLIENT.set("B")
        b = scheduler.submit([job(4, "b") for _ in range(3)], GREEDY, deadline=later())
        gate.set()
        await asyncio.gather(*blocker, *a1, *a2, *b)

    # a batch of 3 sentences; share: one sentence beyond the first (4 tokens)
    run(engine, body, max_batch_tokens=12, max_request_batch_tokens=4, max_queue=100,
        lookahead_batches=1)
    batches = [[m.module_id for j in b for m in j.members] for b in engine.batches[1:]]
    assert batches[0] == ["a", "b", "a"]
    assert batches[1] == ["b", "a", "b"]  # B had fewer turns in the last batch: it leads
    assert sum(batch.count("a") for batch in batches) == 6


def test_the_queue_is_bounded_per_client_never_for_all() -> None:
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> tuple[Busy, int]:
        blocker = scheduler.submit([job(1, "blocker")], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)
        CLIENT.set("A")
        mine = scheduler.submit([job(), job(), job()], GREEDY, deadline=later())
        with pytest.raises(Busy) as refused:
            scheduler.submit([job()], GREEDY, deadline=later())
        others = []
        for client in ("B", "C", "D"):  # the queue holds 3 + 9 > max_queue: all taken
            CLIENT.set(client)
            others += scheduler.submit([job(), job(), job()], GREEDY, deadline=later())
        depth = scheduler.depth
        gate.set()
        await asyncio.gather(*blocker, *mine, *others)
        return refused.value, depth

    refused, depth = run(engine, body, max_queue=3, retry_after_s=2)
    assert depth == 12
    assert refused.code == "queue_full" and refused.retry_after >= 2
    assert "this client's queue is full" in refused.message


def test_a_request_larger_than_its_clients_bound_is_taken_when_its_queue_is_empty() -> None:
    async def body(scheduler: Scheduler) -> int:
        return len(await asyncio.gather(*scheduler.submit([job() for _ in range(5)], GREEDY,
                                                          deadline=later())))

    assert run(FakeEngine(), body, max_queue=2) == 5


def test_the_rate_limit_is_per_client_and_off_by_default() -> None:
    async def body(scheduler: Scheduler) -> RateLimited:
        CLIENT.set("A")
        await asyncio.gather(*scheduler.submit([job(), job()], GREEDY, deadline=later()))
        with pytest.raises(RateLimited) as refused:
            scheduler.submit([job()], GREEDY, deadline=later())
        CLIENT.set("B")
        await asyncio.gather(*scheduler.submit([job(), job()], GREEDY, deadline=later()))
        return refused.value

    refused = run(FakeEngine(), body, client_sentences_per_minute=2)
    assert refused.code == "rate_limited" and refused.retry_after >= 1
    assert "2 sentences per minute" in refused.message

    async def unlimited(scheduler: Scheduler) -> int:
        futures = [f for _ in range(50) for f in scheduler.submit([job()], GREEDY,
                                                                  deadline=later())]
        return len(await asyncio.gather(*futures))

    assert run(FakeEngine(), unlimited, max_queue=100) == 50


def test_a_client_is_its_key_else_its_address() -> None:
    peer = ("10.0.0.7", 5555)
    assert client_of([(b"x-api-key", b"k1")], peer) == key_client("k1")
    assert client_of([(b"Authorization", b"DeepL-Auth-Key k1")], peer) != key_client("k1")
    assert client_of([(b"content-type", b"text/plain")], peer) == "addr:10.0.0.7"
    assert client_of([(b"content-type", b"text/plain")], ("10.0.0.7", 6666)) == "addr:10.0.0.7"
    assert "k1" not in key_client("k1")  # the key itself is never kept


# -- over real HTTP --------------------------------------------------------------------
@contextmanager
def live(tmp_path: Path, **scheduler: Any) -> Iterator[tuple[str, FastAPI]]:
    root = build_store(tmp_path / "store", domains=("law",), classifier=False)
    app = create_app(make_settings(root, scheduler={"max_wait_ms": 2.0, "continuous": False,
                                                    **scheduler}))  # batches counted
    with serving(app) as url:
        yield url, app


def post(url: str, text: str, *, key: str | None = None, source: str = "127.0.0.1") -> Any:
    transport = httpx.HTTPTransport(local_address=source)
    headers = {"X-API-Key": key} if key else {}
    with httpx.Client(base_url=url, transport=transport, timeout=120) as client:
        return client.post("/translate", json={"text": text, "domain": "law"}, headers=headers)


def test_over_http_a_client_past_its_queue_bound_is_429_and_others_are_served(
        tmp_path: Path) -> None:
    """Engine held: client A's first request runs, two more fill A's queue (bound 2), a
    fourth is 429 with Retry-After; clients B (another key) and an address without a key
    are queued beside them (the queue holds more than the bound) and every one is a 200."""
    with live(tmp_path, max_queue=2, retry_after_s=3) as (url, app):
        scheduler = app.state.scheduler
        gate = threading.Event()
        app.state.engine_thread._executor.submit(gate.wait, 60)
        answers: list[Any] = []
        threads: list[threading.Thread] = []

        def send(text: str, **how: Any) -> None:
            thread = threading.Thread(target=lambda: answers.append(post(url, text, **how)))
            thread.start()
            threads.append(thread)

        try:
            send("First.", key="alpha")
            wait_for(lambda: bool(scheduler._running) or scheduler.depth == 1, timeout=30)
            send("Two.", key="alpha")
            send("Three.", key="alpha")
            wait_for(lambda: scheduler.depth + len(scheduler._running) == 3, timeout=30)
            refused = post(url, "Four.", key="alpha")
            send("Beta one.", key="beta")
            send("Beta two.", key="beta")
            send("By address.", source="127.0.0.2")
            wait_for(lambda: scheduler.depth + len(scheduler._running) == 6, timeout=30)
        finally:
            gate.set()
            for thread in threads:
                thread.join(60)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "queue_full"
        assert int(refused.headers["Retry-After"]) >= 3
        assert sorted(answer.status_code for answer in answers) == [200] * 6
        assert post(url, "Again.", key="alpha").status_code == 200


def test_over_http_the_rate_limit_is_429_for_that_client_alone(tmp_path: Path) -> None:
    with live(tmp_path, client_sentences_per_minute=2) as (url, _app):
        assert post(url, "One.", source="127.0.0.3").status_code == 200
        assert post(url, "Two.", source="127.0.0.3").status_code == 200
        refused = post(url, "Three.", source="127.0.0.3")
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "rate_limited"
        assert int(refused.headers["Retry-After"]) >= 1
        assert post(url, "Other.", source="127.0.0.4").status_code == 200
        assert post(url, "Keyed.", key="gamma", source="127.0.0.3").status_code == 200


def test_over_http_a_later_client_is_answered_before_a_bulk_client(tmp_path: Path) -> None:
    """Engine held: client A's batch of 40 sentences waits, then client B's one sentence;
    once the engine is free, B's answer comes first (round robin across clients), and A's
    batch is answered whole. Small batches: A's first one (held in the engine) takes a
    few of its sentences, the rest wait beside B's."""
    with live(tmp_path, max_batch_tokens=48, max_request_batch_tokens=12) as (url, app):
        scheduler = app.state.scheduler
        gate = threading.Event()
        app.state.engine_thread._executor.submit(gate.wait, 60)
        finished: list[str] = []
        answers: dict[str, Any] = {}

        def bulk() -> None:
            transport = httpx.HTTPTransport(local_address="127.0.0.5")
            with httpx.Client(base_url=url, transport=transport, timeout=300) as client:
                answers["A"] = client.post("/translate/batch", json={
                    "domain": "law", "items": [{"text": f"Sentence number {i}."}
                                               for i in range(40)]})
            finished.append("A")

        def polite() -> None:
            answers["B"] = post(url, "The court ruled.", source="127.0.0.6")
            finished.append("B")

        threads = [threading.Thread(target=bulk), threading.Thread(target=polite)]
        try:
            threads[0].start()
            wait_for(lambda: bool(scheduler._running) and scheduler.depth > 0, timeout=60)
            threads[1].start()
            wait_for(lambda: len({lane.client for lane in scheduler._lanes.values()}) == 2,
                     timeout=60)
        finally:
            gate.set()
            for thread in threads:
                thread.join(300)
        assert answers["B"].status_code == 200
        assert answers["A"].status_code == 200 and len(answers["A"].json()["results"]) == 40
        assert finished == ["B", "A"]


def test_the_servers_own_deadline_grows_to_what_the_measured_rate_needs() -> None:
    """At 10 budget tokens per second (the slower of the rates measured), 20 sentences of
    10 tokens behind a queued request need about 40 s (60 s with the margin): a 5 s
    deadline grows to that, a later one is kept, none grows past `max_timeout_s`."""
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> tuple[float, float, float, float]:
        blocker = scheduler.submit([job(1, "blocker")], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)
        scheduler._throughput = 20.0  # budget tokens per second, as if measured ...
        scheduler._recent_rate = 10.0  # ... and the slower rate of the last batches
        CLIENT.set("A")
        queued = scheduler.submit([job(10) for _ in range(20)], GREEDY, deadline=later(),
                                  judged=False)
        work = [job(10) for _ in range(20)]
        now = time.monotonic()
        grown = scheduler.grown_deadline(work, GREEDY, now + 5.0) - now
        kept = scheduler.grown_deadline(work, GREEDY, now + 500.0) - now
        capped = scheduler.grown_deadline(work * 10, GREEDY, now + 5.0) - now
        gate.set()
        await asyncio.gather(*blocker, *queued)
        return grown, kept, capped, scheduler.grown_deadline([], GREEDY, now + 5.0) - now

    grown, kept, capped, empty = run(engine, body, max_queue=100, max_timeout_s=120.0)
    assert 55.0 <= grown <= 61.0  # 1.5 x (1 running + 200 queued + 200 own) / 10
    assert kept == pytest.approx(500.0)
    assert 100.0 < capped <= 121.0
    assert empty == pytest.approx(5.0)
