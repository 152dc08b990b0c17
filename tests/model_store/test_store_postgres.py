"""What PostgreSQL adds to the registry: claims that skip rows other trainers hold,
activations serialized across processes, and changes announced with NOTIFY."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Iterator
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, text
from tiny_artifacts import publish_module

from model_store import Registry, Store
from model_store.notify import PostgresListener, SleepingWaiter, change_waiter, libpq_conninfo
from model_store.tables import jobs
from tests.postgres import PostgresServer

SPAWN = multiprocessing.get_context("spawn")
DOMAINS = [f"d{i}" for i in range(8)]
FINGERPRINT = "f" * 64


@pytest.fixture
def pg_url(postgres: PostgresServer) -> str:
    return postgres.create_database()


@pytest.fixture
def pg_store(tmp_path: Path, pg_url: str) -> Iterator[Store]:
    with Store.open(tmp_path / "store", registry_url=pg_url, builtin_dir=None) as store:
        yield store


def test_a_claim_skips_the_job_another_trainer_holds(pg_url: str) -> None:
    registry = Registry(pg_url)
    first = registry.create_job("a", config={}, data_location="x")
    second = registry.create_job("b", config={}, data_location="x")
    other = create_engine(pg_url)
    try:
        with other.begin() as conn:  # another trainer, midway through claiming `first`
            locked = select(jobs.c.id).where(jobs.c.id == first.id).with_for_update()
            assert conn.execute(locked).scalar() == first.id
            claimed = registry.claim_next_job("w")  # would block without SKIP LOCKED
        assert claimed is not None and claimed.id == second.id
        assert registry.get_job(first.id).state == "queued"
    finally:
        other.dispose()
        registry.close()


def _activate_all(url: str, barrier: Barrier, out: Queue[object]) -> None:
    registry = Registry(url)
    barrier.wait(timeout=60)
    for name in DOMAINS:  # each one's first activation races with the other process
        registry.set_active("module", name, 1)
    registry.close()
    out.put("done")


def test_concurrent_first_activations_do_not_collide(pg_store: Store) -> None:
    for name in DOMAINS:
        publish_module(pg_store, name, FINGERPRINT)
    before = pg_store.registry.latest_event_id()
    barrier, out = SPAWN.Barrier(2), SPAWN.Queue()
    url = pg_store.registry.url
    workers = [SPAWN.Process(target=_activate_all, args=(url, barrier, out)) for _ in range(2)]
    for process in workers:
        process.start()
    done = [out.get(timeout=120) for _ in workers]
    for process in workers:
        process.join(timeout=60)

    events = pg_store.registry.events_since(before)
    assert [p.exitcode for p in workers] == [0, 0] and done == ["done", "done"]
    assert pg_store.active_domains() == dict.fromkeys(DOMAINS, 1)
    assert len(events) == 2 * len(DOMAINS)
    # Serialized writers: ids are handed out in commit order, without gaps.
    assert [e.id for e in events] == list(range(before + 1, before + 1 + 2 * len(DOMAINS)))


def test_an_activation_wakes_a_listener(pg_store: Store) -> None:
    module = publish_module(pg_store, "medical", FINGERPRINT)

    async def scenario() -> tuple[bool, bool, bool]:
        listener = change_waiter(pg_store.registry.url)
        assert isinstance(listener, PostgresListener)
        try:
            connected = await listener.wait(60.0)  # connects: "check now", without waiting
            quiet = await listener.wait(0.2)  # nothing happened: the wait times out
            activation = asyncio.create_task(
                asyncio.to_thread(pg_store.activate, "module", "medical", module.version))
            # A long timeout: returning True means the announcement ended the wait.
            woken = await listener.wait(60.0)
            await activation
            return connected, quiet, woken
        finally:
            await listener.close()

    assert asyncio.run(scenario()) == (True, False, True)


def test_a_listener_reconnects_after_losing_its_connection(pg_store: Store) -> None:
    url = pg_store.registry.url

    async def scenario() -> tuple[bool, bool, bool]:
        listener = PostgresListener(libpq_conninfo(url))
        try:
            await listener.wait(0.05)  # connected and listening
            await listener.wait(0.05)  # the LISTEN query has completed
            engine = create_engine(url)
            with engine.begin() as conn:  # an administrator (or a failover) cuts it off
                conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                  "WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()"))
            engine.dispose()
            lost = await listener.wait(0.05)  # the error: sleeps instead, drops the connection
            reconnected = await listener.wait(60.0)  # listening again: "check now"
            publish = asyncio.create_task(
                asyncio.to_thread(publish_module, pg_store, "law", FINGERPRINT))
            woken = await listener.wait(60.0)
            await publish
            return lost, reconnected, woken
        finally:
            await listener.close()

    assert asyncio.run(scenario()) == (False, True, True)


def test_sqlite_has_no_announcements_and_sleeps_out_the_interval() -> None:
    waiter = change_waiter("sqlite:///registry.sqlite")

    assert isinstance(waiter, SleepingWaiter)
    assert asyncio.run(waiter.wait(0.01)) is False
