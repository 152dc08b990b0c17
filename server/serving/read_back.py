"""An evicted module read back into the host tier before its sentences run (the
scheduler's `Residency.reload`, through `Runtime.reload`).

Everything happens on a worker thread: the store read and hash, the tensors' conversion
and the registration (the host tier takes its own lock, so it never races a batch, which
reads the tier under the same lock). Waiting for the engine thread instead would wait for
the running batch to end, and again for the next one: a cold sentence would skip one or
two batches its read did not need. The copy into a spare device slot is then queued on the
engine thread, between batches, and nobody waits for it: the batch that takes the sentence
copies the module itself if the copy has not run yet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from server.engine.engine import Engine
from server.engine.families import Params
from server.execution.engine_thread import EngineThread

ModuleLoader = Callable[[str], tuple[dict[str, Any], Params]]  # "<domain>@<version>"
log = logging.getLogger(__name__)
_copies: set[asyncio.Future[list[str]]] = set()  # queued copies: the loop keeps weak refs


async def read_back(engine: Engine, engine_thread: EngineThread, load: ModuleLoader,
                    module_id: str) -> None:
    """Read `module_id` into `engine`'s host tier (a worker thread), then queue its copy
    into a spare slot without waiting for it."""
    await asyncio.to_thread(_into_host, engine, load, module_id)
    copy = asyncio.ensure_future(engine_thread.run(engine.modules.prefetch, [module_id]))
    _copies.add(copy)
    copy.add_done_callback(_copied)


def _into_host(engine: Engine, load: ModuleLoader, module_id: str) -> None:
    config, params = load(module_id)
    engine.register_module(module_id, config, params)


def _copied(copy: asyncio.Future[list[str]]) -> None:
    _copies.discard(copy)
    if not copy.cancelled() and copy.exception() is not None:
        log.warning("copying a read-back module into a slot failed: %s", copy.exception())
