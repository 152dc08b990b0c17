"""The registry poller: hot reload whenever the registry's change counter moves; it
survives any exception (logged, counted in `nmt_registry_poll_errors_total`, retried)."""

from __future__ import annotations

import asyncio
import logging

from model_store.notify import ChangeWaiter, SleepingWaiter
from server.serving.runtime import Runtime

log = logging.getLogger(__name__)


async def watch_registry(runtime: Runtime, interval: float, *,
                         changes: ChangeWaiter | None = None) -> None:
    """Call `runtime.refresh()` whenever `registry.latest_event_id()` changes, or a failed
    load is due for another attempt (backoff): checked every `interval`, and at once when
    `changes` announces a change (PostgreSQL's NOTIFY; model_store/notify.py). Runs until
    cancelled."""
    changes = changes or SleepingWaiter()
    while True:
        await changes.wait(interval)
        try:
            latest = await asyncio.to_thread(runtime.store.registry.latest_event_id)
            if latest != runtime.seen_event or runtime.retry_due():
                await runtime.refresh()
        except Exception:  # the poller outlives any failure; it retries next tick
            runtime.metrics.poll_errors.inc()
            log.exception("reloading from the registry failed")
