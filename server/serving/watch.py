"""The registry poller: hot reload whenever the registry's change counter moves."""

from __future__ import annotations

import asyncio
import logging

from server.serving.runtime import Runtime

log = logging.getLogger(__name__)


async def watch_registry(runtime: Runtime, interval: float) -> None:
    """Call `runtime.refresh()` whenever `registry.latest_event_id()` changes; runs until
    cancelled."""
    while True:
        await asyncio.sleep(interval)
        try:
            latest = await asyncio.to_thread(runtime.store.registry.latest_event_id)
            if latest != runtime.seen_event:
                await runtime.refresh()
        except Exception:  # the poller outlives any failure; it retries next tick
            log.exception("reloading from the registry failed")
