"""Where a serving benchmark's own threads run when the server is placed on CPUs
(`--front-cpus N`: `NMT_EXECUTION__FRONT_CPUS`, server/execution/placement.py): the load
generator on the front's CPUs, an offline engine on the engine's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from benchmarks.speed.serve.config import ServeConfig
from server.execution.placement import pin_this_thread, plan_placement, this_threads_cpus


@contextlib.contextmanager
def on_cpus(cpus: frozenset[int] | None) -> Iterator[None]:
    """Run the block with this thread on `cpus` (None: where it is); threads it starts
    meanwhile (an offline engine's OpenMP team) keep them."""
    if cpus is None:
        yield
        return
    before = this_threads_cpus()
    pin_this_thread(cpus)
    try:
        yield
    finally:
        pin_this_thread(before)


def front_cpus(config: ServeConfig) -> frozenset[int] | None:
    """The CPUs the load generator runs on (None: no placement, wherever it is)."""
    placement = plan_placement(config.execution.front_cpus)
    return placement.front if placement else None


def placement_note(config: ServeConfig, *, offline: bool = True) -> str:
    placement = plan_placement(config.execution.front_cpus)
    if placement is None:
        return ""
    return (f" CPU placement (`NMT_EXECUTION__FRONT_CPUS={config.execution.front_cpus}`): "
            f"{placement.describe()}; the load generator on the front's CPUs"
            + (", the offline engine on the engine's with as many threads." if offline
               else "."))
