"""`NMT_EXECUTION__*`: which thread runs what, on which CPUs, at which priority, the
allocator the engine decodes under and the text worker process
(server/execution/layout.py applies them at start).

Their former names still set them (deprecated; docs/API.md, "Settings"): the first four
were engine settings, `NMT_ENGINE__GIL_SWITCH_INTERVAL_MS`, `NMT_ENGINE__FRONT_NICENESS`,
`NMT_ENGINE__FRONT_CPUS` and `NMT_ENGINE__KEEP_FREED_MEMORY` (and `engine={...}` in code),
and `start_text_worker` was `NMT_LIMITS__START_PREPARATION_WORKER`: `moved_into_execution`
takes them over.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ExecutionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gil_switch_interval_ms: float = Field(
        0.1, ge=0.05, le=100,
        description="Python's thread switch interval (sys.setswitchinterval) while the "
                    "server runs. The engine thread gives up the GIL inside every torch "
                    "op; when the event loop is busy (a flood of requests), each op then "
                    "waits up to this long to get it back. Python's 5 ms default made "
                    "decoding 4-30x slower beside a busy thread, 0.5 ms 1.6x; at "
                    "saturation a batch took 5-7% longer than in the idle server at "
                    "0.5 ms, 2% at 0.1 ms")
    front_niceness: int = Field(
        10, ge=0, le=19,
        description="Linux: how many nice levels below the engine thread the event loop "
                    "and every thread it starts run (server/execution/priorities.py), so that a "
                    "flood of requests takes CPU time from itself rather than from the "
                    "translations in progress (at 0 the adversarial mix took a polite "
                    "client's median to 4.68x quiet, against 2.03x at 10); 0 = one "
                    "priority for all")
    front_cpus: int = Field(
        0, ge=0,
        description="Linux: keep the last N CPUs the process may use for the HTTP front "
                    "(the event loop, its threads, the text worker process) and the "
                    "others for the engine thread and its OpenMP team, with one OpenMP "
                    "thread per engine CPU unless OMP_NUM_THREADS is set "
                    "(server/execution/placement.py). The engine then decodes undisturbed by "
                    "requests, on one core less: on a 2-core host served/offline read "
                    "0.97x against 0.92x-0.95x shared (full runs), at ~25% fewer "
                    "tokens/s. 0 = the engine and the front share every CPU; ignored "
                    "(logged) when it would leave the engine none")
    training_cpus: int = Field(
        1, ge=0,
        description="Linux: while a training job of the store runs (its heartbeat fresh), "
                    "the engine thread and its OpenMP team keep off the last N CPUs they "
                    "may use, with N OpenMP threads fewer, and take them back when no job "
                    "runs (server/execution/training_share.py): a sidecar on the same "
                    "host, with as many torch threads (NMT_TRAINER__THREADS), then trains "
                    "on CPUs of its own instead of ~25% of one beside a saturated engine. "
                    "0 = never yield (sidecars on hosts of their own); ignored when it "
                    "would leave the engine no CPU")
    keep_freed_memory: bool = Field(
        True, description="glibc: raise malloc's mmap and trim thresholds at start, so "
                          "that the tensors each decoding step frees are reused by the next "
                          "instead of being returned to the kernel and faulted in again "
                          "(server/execution/allocator.py: the engine's kernel time at "
                          "saturation fell "
                          "by about two thirds); the process then keeps about its peak "
                          "memory")
    start_text_worker: bool = Field(
        True, description="start the text worker process (server/execution/text_worker.py), "
                          "which splits large requests' texts, in the background when the "
                          "server starts; false: at the first large request, which then "
                          "waits for it (1.6 s here)")


# former names: (group, field) -> the execution field it sets
FORMER_NAMES = {("engine", name): name for name in (
    "gil_switch_interval_ms", "front_niceness", "front_cpus", "keep_freed_memory")}
FORMER_NAMES[("limits", "start_preparation_worker")] = "start_text_worker"


def moved_into_execution(values: Any) -> Any:
    """The server settings' raw values with the former names' fields (`FORMER_NAMES`)
    moved into the execution group (an explicit `execution` value wins)."""
    if not isinstance(values, dict):
        return values
    values = dict(values)
    moved: dict[str, Any] = {}
    for (group, name), field in FORMER_NAMES.items():
        given = values.get(group)
        if isinstance(given, dict) and name in given:
            moved[field] = given[name]
            values[group] = {key: value for key, value in given.items() if key != name}
    if not moved:
        return values
    execution = values.get("execution")
    if isinstance(execution, ExecutionSettings):
        execution = execution.model_dump(exclude_unset=True)
    return {**values, "execution": {**moved, **(execution or {})}}
