"""Scoring passes of concurrent requests run together: one engine call for all that wait.

Why: at saturation every request would otherwise add an engine call of its own for a few
sentences, each paying the per-call overhead that batching exists to share. Natural
batching needs no timer: requests queue while a scoring call runs, and the next call
takes everything queued (per engine: a reload may swap the engine between two calls).

    semantics: await score(engine, jobs, outputs) == signals.score(engine, jobs, outputs)
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from server.engine.engine import Engine, SentenceJob
from server.execution.engine_thread import EngineThread
from server.quality.signals import Signals, score


@dataclass
class _Waiting:
    engine: Engine
    jobs: Sequence[SentenceJob]
    outputs: Sequence[list[int]]
    future: asyncio.Future[list[Signals]]


class ScoringBatcher:
    def __init__(self, engine_thread: EngineThread) -> None:
        self.engine_thread = engine_thread
        self._waiting: list[_Waiting] = []
        self._draining: asyncio.Task[None] | None = None

    async def score(self, engine: Engine, jobs: Sequence[SentenceJob],
                    outputs: Sequence[list[int]]) -> list[Signals]:
        if not jobs:
            return []
        future: asyncio.Future[list[Signals]] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(engine, jobs, outputs, future))
        if self._draining is None or self._draining.done():
            self._draining = asyncio.create_task(self._drain(), name="nmt-quality-scoring")
        return await future

    async def _drain(self) -> None:
        while self._waiting:
            taken, self._waiting = self._waiting, []
            taken = [w for w in taken if not w.future.done()]  # cancelled: not computed
            engine = taken[0].engine if taken else None
            mine = [w for w in taken if w.engine is engine]
            self._waiting = [w for w in taken if w.engine is not engine] + self._waiting
            if engine is None:
                continue
            jobs = [job for w in mine for job in w.jobs]
            outputs = [output for w in mine for output in w.outputs]
            try:
                found = await self.engine_thread.run(score, engine, jobs, outputs)
            except Exception as error:  # every waiting request gets the failure
                for w in mine:
                    if not w.future.done():
                        w.future.set_exception(error)
                continue
            cursor = 0
            for w in mine:
                if not w.future.done():
                    w.future.set_result(found[cursor: cursor + len(w.jobs)])
                cursor += len(w.jobs)
