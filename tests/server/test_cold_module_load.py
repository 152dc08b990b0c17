"""A cold module is read while other requests' batches run (server/scheduling/scheduler.py
with the engine's residency): nothing waits for the read but its own sentences, which then
decode exactly as they would have with the module resident all along; on the CPU, and on CUDA
where one is available (a copy into a device slot)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from contract.tensors import tensors_from_bytes, tensors_to_bytes
from server.core.metrics import Metrics
from server.core.settings import SchedulerSettings
from server.decoding.search import SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.execution.engine_thread import EngineThread
from server.scheduling.scheduler import Scheduler
from server.serving.read_back import read_back
from tests.tiny import random_module, tiny_backbone_files, tiny_config

CONFIG = {"family": "adapter", "bottleneck": 8}


class FileResidency:
    """The scheduler's residency over module files in a folder, read back as Runtime.reload
    reads the store's (server/serving/read_back.py: the read and the registration on a
    worker thread, the copy into a spare slot queued on the engine thread). `gate` holds
    the read back until the test lets it go."""

    def __init__(self, engine: Engine, engine_thread: EngineThread, folder: Path) -> None:
        self.engine, self.engine_thread, self.folder = engine, engine_thread, folder
        self.gate = threading.Event()
        self.reading = threading.Event()

    def missing(self, module_ids: Iterable[str]) -> set[str]:
        return {m for m in module_ids if not self.engine.modules.resident(m)}

    def _read(self, module_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        self.reading.set()
        assert self.gate.wait(30)
        return CONFIG, tensors_from_bytes((self.folder / f"{module_id}.safetensors").read_bytes())

    async def reload(self, module_id: str) -> None:
        await read_back(self.engine, self.engine_thread, self._read, module_id)


def sentence(module: str, seed: int) -> SentenceJob:
    return SentenceJob([4 + (seed * 7 + i * 3) % 50 for i in range(6)], (Member(module),), 14)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_cold_load_runs_beside_other_batches_and_changes_no_output(tmp_path: Path,
                                                                      device: str) -> None:
    for seed in range(3):
        _config, params = random_module(tiny_config(), "adapter", seed=seed, bottleneck=8)
        (tmp_path / f"m{seed}.safetensors").write_bytes(tensors_to_bytes(params))
    reference = build_engine(tiny_backbone_files(), EngineOptions(device=device,
                                                                  slots_per_bank=4))
    # no loader: a module read on the engine thread, inside a batch, would fail the batch
    engine = build_engine(tiny_backbone_files(), EngineOptions(
        device=device, slots_per_bank=2, host_capacity=2))
    for seed in range(3):
        params = tensors_from_bytes((tmp_path / f"m{seed}.safetensors").read_bytes())
        reference.register_module(f"m{seed}", CONFIG, params)
    for seed in (1, 2):
        engine.register_module(f"m{seed}", CONFIG,
                               tensors_from_bytes((tmp_path / f"m{seed}.safetensors").read_bytes()))
    options = SearchOptions(beam_size=2)

    async def main() -> tuple[list[Any], list[Any], int]:
        thread = EngineThread()
        residency = FileResidency(engine, thread, tmp_path)
        settings = SchedulerSettings.model_validate({"max_wait_ms": 1.0,
                                                     "max_batch_tokens": 256})
        scheduler = Scheduler(engine.translate, thread, settings, max_modules=2,
                              metrics=Metrics(), residency=residency)
        scheduler.start()
        try:
            deadline = time.monotonic() + 60
            cold = scheduler.submit([sentence("m0", 0), sentence("m1", 1)], options,
                                    deadline=deadline)
            await asyncio.to_thread(residency.reading.wait, 30)
            warm_batches = 0
            warm: list[Any] = []
            for round_ in range(3):  # m0's read is held: these batches run meanwhile
                futures = scheduler.submit([sentence("m1", 10 + round_),
                                            sentence("m2", 20 + round_)], options,
                                           deadline=deadline)
                warm += await asyncio.gather(*futures)
                warm_batches += 1
            assert not any(f.done() for f in cold[:1])  # its own sentence still waits
            residency.gate.set()
            return list(await asyncio.gather(*cold)), warm, warm_batches
        finally:
            residency.gate.set()
            await scheduler.stop()
            thread.shutdown()

    cold, warm, batches = asyncio.run(main())
    assert batches == 3
    expected_cold = reference.translate([sentence("m0", 0), sentence("m1", 1)], options)
    expected_warm = [r for round_ in range(3) for r in reference.translate(
        [sentence("m1", 10 + round_), sentence("m2", 20 + round_)], options)]
    assert [[h.tokens for h in r] for r in cold] == [[h.tokens for h in r] for r in expected_cold]
    assert [[h.tokens for h in r] for r in warm] == [[h.tokens for h in r] for r in expected_warm]
    assert "m0" in engine.modules.snapshot()["device"]


def test_a_batch_waits_a_moment_for_its_cold_sentences_read(tmp_path: Path,
                                                            monkeypatch: Any) -> None:
    """A cold sentence sent beside a warm one, as closed-loop clients send as the last
    batch ends: the batch waits (within READ_WAIT_S, long here) for the read, and both run
    in it, rather than the warm one alone and the cold one a whole batch later."""
    monkeypatch.setattr("server.scheduling.scheduler.READ_WAIT_S", 60.0)
    _config, params = random_module(tiny_config(), "adapter", seed=0, bottleneck=8)
    (tmp_path / "m0.safetensors").write_bytes(tensors_to_bytes(params))
    engine = build_engine(tiny_backbone_files(), EngineOptions(slots_per_bank=2))
    _config, warm_params = random_module(tiny_config(), "adapter", seed=1, bottleneck=8)
    engine.register_module("m1", CONFIG, warm_params)
    batches: list[list[str]] = []

    def runner(jobs: Any, options: SearchOptions) -> Any:
        batches.append([job.members[0].module_id for job in jobs])
        return engine.translate(jobs, options)

    async def main() -> None:
        thread = EngineThread()
        residency = FileResidency(engine, thread, tmp_path)
        settings = SchedulerSettings.model_validate({"max_wait_ms": 1.0})
        scheduler = Scheduler(runner, thread, settings, max_modules=2, metrics=Metrics(),
                              residency=residency)
        scheduler.start()
        try:
            futures = scheduler.submit([sentence("m0", 0), sentence("m1", 1)],
                                       SearchOptions(beam_size=1),
                                       deadline=time.monotonic() + 120)
            await asyncio.to_thread(residency.reading.wait, 30)
            await asyncio.sleep(0.2)  # well past max_wait_ms: the batch would have gone
            assert batches == []
            residency.gate.set()
            await asyncio.gather(*futures)
        finally:
            residency.gate.set()
            await scheduler.stop()
            thread.shutdown()

    asyncio.run(main())
    assert [sorted(batch) for batch in batches] == [["m0", "m1"]]
