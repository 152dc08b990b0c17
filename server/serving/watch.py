"""The registry poller: hot reload whenever the registry's change counter moves."""

from __future__ import annotations

import asyncio
import logging

from model_store.notify import ChangeWaiter, SleepingWaiter
from server.serving.runtime import Runtime

log = logging.getLogger(__name__)


async def watch_registry(runtime: Runtime, interval: float, *,
                         changes: ChangeWaiter | None = None) -> None:
    """Call `runtime.refresh()` whenever `registry.latest_event_id()` changes: checked every
    `interval`, and at once when `changes` announces a change (PostgreSQL's NOTIFY; see
    model_store/notify.py). Runs until cancelled."""
    changes = changes or SleepingWaiter()
    while True:
        await changes.wait(interval)
        try:
            latest = await asyncio.to_thread(runtime.store.registry.latest_event_id)
            if latest != runtime.seen_event:
                await runtime.refresh()
        except Exception:  # the poller outlives any failure; it retries next tick
            log.exception("reloading from the registry failed")
