"""Large work is answered, never refused for its size: a bulk batch beside a polite
client (the polite one first), /translate/batch as a job (`"async": true`) and as an
NDJSON stream, and a refusal that says why and when to retry. Nothing here reads the
clock to judge the server: order of completion, not timing."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import build_store, make_client
from fastapi.testclient import TestClient
from test_server_backpressure import wait_for

from server.serving.batch_jobs import in_order

SENTENCES = ("The council adopted this regulation after consulting the committee.",
             "Member states shall comply with the directive within two years.",
             "The patient takes one tablet a day with a glass of water.",
             "Any party may appeal the decision before the competent court.",
             "Side effects are rare but include headache and mild nausea.")
ITEMS = [{"text": SENTENCES[i % len(SENTENCES)]} for i in range(6)]


@contextmanager
def engine_blocked(client: TestClient) -> Iterator[threading.Event]:
    """Occupy the engine thread until the gate opens (batches queue up behind it)."""
    gate = threading.Event()
    client.app.state.engine_thread._executor.submit(gate.wait, 600)  # type: ignore[attr-defined]
    try:
        yield gate
    finally:
        gate.set()


def bulk_text(seed: int, chars: int = 900) -> str:
    """About `chars` characters of prose: the sentences above in an order of its own."""
    words: list[str] = []
    index = seed
    while sum(len(w) + 1 for w in words) < chars - 80:
        words.append(SENTENCES[index % len(SENTENCES)])
        index += seed % 3 + 1
    return " ".join(words)


@pytest.fixture(scope="module")
def law_client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = build_store(tmp_path_factory.mktemp("bulk") / "store", domains=("law",),
                       classifier=False)
    with make_client(root) as client:
        yield client


def batch(client: TestClient, **extra: Any) -> Any:
    return client.post("/translate/batch",
                       json={"domain": "law", "items": ITEMS, **extra}, **{})


def finished_job(client: TestClient, location: str) -> Any:
    job = client.get(location, params={"wait": 60}).json()
    while job["state"] not in ("done", "failed"):  # a slow host: wait again
        job = client.get(location, params={"wait": 60}).json()
    return job


def test_an_async_batch_is_a_job_whose_results_equal_the_synchronous_ones(
        law_client: TestClient) -> None:
    synchronous = batch(law_client)
    assert synchronous.status_code == 200
    accepted = batch(law_client, **{"async": True})
    assert accepted.status_code == 202
    job = accepted.json()
    assert accepted.headers["Location"] == f"/translate/batch/jobs/{job['id']}"
    assert job["progress"]["total"] == len(ITEMS)
    done = finished_job(law_client, accepted.headers["Location"])
    assert done["state"] == "done", done["error"]
    assert done["progress"] == {"done": len(ITEMS), "total": len(ITEMS), "fraction": 1.0}
    assert done["results"] == synchronous.json()["results"]


def test_an_unknown_batch_job_is_404(law_client: TestClient) -> None:
    response = law_client.get("/translate/batch/jobs/0123456789abcdef")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_a_client_past_its_unfinished_batch_jobs_is_refused_until_one_ends(
        tmp_path: Path) -> None:
    """Each job holds its texts and keeps items in the scheduler: a client may have
    NMT_SCHEDULER__MAX_BATCH_JOBS unfinished, one more is a 429 that says why and when
    (another client is not affected), and once one ends the client may send again."""
    root = build_store(tmp_path / "store", domains=("law",), classifier=False)
    with make_client(root, scheduler={"max_batch_jobs": 2}) as client:
        with engine_blocked(client):
            first, second = [batch(client, **{"async": True}) for _ in range(2)]
            refused = batch(client, **{"async": True})
            other = client.post("/translate/batch", headers={"X-API-Key": "another client"},
                                json={"domain": "law", "items": ITEMS, "async": True})
        assert [first.status_code, second.status_code, other.status_code] == [202] * 3
        assert refused.status_code == 429
        error = refused.json()["error"]
        assert error["code"] == "too_many_jobs"
        assert "NMT_SCHEDULER__MAX_BATCH_JOBS" in error["message"]
        assert int(refused.headers["Retry-After"]) >= 1
        for accepted in (first, second, other):
            assert finished_job(client, accepted.headers["Location"])["state"] == "done"
        assert batch(client, **{"async": True}).status_code == 202


@pytest.mark.parametrize("how", ["field", "accept"])
def test_streaming_yields_every_item_in_order(law_client: TestClient, how: str) -> None:
    synchronous = batch(law_client).json()["results"]
    extra: dict[str, Any] = {"stream": True} if how == "field" else {}
    headers = {"Accept": "application/x-ndjson"} if how == "accept" else {}
    with law_client.stream("POST", "/translate/batch", headers=headers,
                           json={"domain": "law", "items": ITEMS, **extra}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert [line["index"] for line in lines] == list(range(len(ITEMS)))
    assert [{k: v for k, v in line.items() if k != "index"} for line in lines] == synchronous


def test_a_bad_async_batch_is_refused_before_it_becomes_a_job(
        law_client: TestClient) -> None:
    response = law_client.post("/translate/batch", json={
        "async": True, "items": [{"text": "Hello.", "domain": "nowhere"}]})
    assert response.status_code in (202, 404)
    if response.status_code == 202:  # the unknown domain fails the job, with the reason
        job = law_client.get(response.headers["Location"], params={"wait": 60}).json()
        assert job["state"] == "failed"
        assert job["error"]["code"] == "unknown_domain"


def test_a_bulk_batch_beside_a_polite_client_is_answered_after_it(
        law_client: TestClient) -> None:
    """64 texts of ~900 characters: answered (its deadline grows with its size), and the
    polite client's one sentence, sent while the bulk waits, completes first."""
    scheduler = law_client.app.state.scheduler  # type: ignore[attr-defined]
    items = [{"text": bulk_text(seed)} for seed in range(64)]
    assert sum(len(item["text"]) for item in items) > 50_000
    finished: list[str] = []
    answers: dict[str, Any] = {}

    def send(name: str, path: str, body: dict[str, Any]) -> None:
        answers[name] = law_client.post(path, json=body)
        finished.append(name)

    with engine_blocked(law_client) as gate:
        bulk = threading.Thread(target=send, args=(
            "bulk", "/translate/batch", {"domain": "law", "items": items}))
        bulk.start()
        wait_for(lambda: scheduler.depth > 0, timeout=300)
        polite = threading.Thread(target=send, args=(
            "polite", "/translate", {"text": "The court ruled.", "domain": "law"}))
        polite.start()
        # both wait behind the engine: the bulk's sentences and the polite one
        wait_for(lambda: len(scheduler._lanes) == 2, timeout=300)
        gate.set()
        polite.join(600)
        bulk.join(600)
    assert answers["polite"].status_code == 200
    assert answers["bulk"].status_code == 200, answers["bulk"].text
    assert len(answers["bulk"].json()["results"]) == 64
    assert finished == ["polite", "bulk"]


@pytest.fixture(scope="module", params=["continuous", "static"])
def both_law_clients(tmp_path_factory: pytest.TempPathFactory,
                     request: pytest.FixtureRequest) -> Any:
    """`law_client` (continuous batching, the default), then one with static batches."""
    if request.param == "continuous":
        yield request.getfixturevalue("law_client")
        return
    root = build_store(tmp_path_factory.mktemp("bulk-static") / "store", domains=("law",),
                       classifier=False)
    with make_client(root, scheduler={"continuous": False}) as client:
        yield client


def test_a_deadline_the_client_cannot_get_is_refused_with_why_and_when(
        both_law_clients: TestClient) -> None:
    """Behind queued work, a request whose own deadline (X-NMT-Deadline) cannot be met is
    refused at once: 504 `deadline_unreachable`, the reason, and a Retry-After (continuous
    batching too: even a short live run measures the rate admission falls back on)."""
    law_client = both_law_clients
    scheduler = law_client.app.state.scheduler  # type: ignore[attr-defined]
    assert batch(law_client).status_code == 200  # the engine's rate is measured
    answers: list[Any] = []
    with engine_blocked(law_client):
        waiting = threading.Thread(target=lambda: answers.append(batch(law_client)))
        waiting.start()
        wait_for(lambda: scheduler.depth > 0 or bool(scheduler._running), timeout=60)
        # a few sentences: their own cost alone outlasts the deadline at any real rate
        refused = law_client.post("/translate", headers={"X-NMT-Deadline": "0.001"},
                                  json={"text": bulk_text(1, chars=400), "domain": "law"})
    waiting.join(120)
    assert refused.status_code == 504
    error = refused.json()["error"]
    assert error["code"] == "deadline_unreachable"
    assert "past its deadline" in error["message"] and "Retry-After" in error["message"]
    assert int(refused.headers["Retry-After"]) >= 1
    assert answers[0].status_code == 200  # the work queued before it was not refused


def test_in_order_yields_in_the_items_order_whatever_order_they_finish_in() -> None:
    """The last started item finishes first; results still come in the items' order,
    and no more than `ahead` items run at once."""
    async def scenario() -> tuple[list[int], list[int], int]:
        gates = [asyncio.Event() for _ in range(6)]
        finished: list[int] = []
        running = peak = 0

        def work(index: int) -> Callable[[], Awaitable[int]]:
            async def run() -> int:
                nonlocal running, peak
                running += 1
                peak = max(peak, running)
                await gates[index].wait()
                running -= 1
                finished.append(index)
                return index * 10
            return run

        async def release() -> None:
            for index in reversed(range(6)):  # the latest first
                await asyncio.sleep(0)
                gates[index].set()

        releaser = asyncio.ensure_future(release())
        results = [value async for value in in_order([work(i) for i in range(6)], ahead=3)]
        await releaser
        return results, finished, peak

    results, finished, peak = asyncio.run(scenario())
    assert results == [0, 10, 20, 30, 40, 50]
    assert finished != sorted(finished)  # some later item finished before an earlier one
    assert peak <= 3


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "inf"])
def test_a_bad_deadline_header_is_422_naming_it(law_client: TestClient, value: str) -> None:
    response = law_client.post("/translate", headers={"X-NMT-Deadline": value},
                               json={"text": "The court ruled.", "domain": "law"})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "X-NMT-Deadline"
