"""The engine on CUDA in half precision agrees with float32 on CPU (skipped without a GPU)."""

from __future__ import annotations

import pytest

from server.decoding.search import SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import EngineOptions, Member, SentenceJob
from tests.tiny import random_module, tiny_backbone_files, tiny_config

SOURCES = [[5, 6, 7, 8, 3], [9, 10, 3], [11, 12, 13, 14, 15, 16, 3]]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_half_precision_matches_cpu(dtype: str) -> None:
    files = tiny_backbone_files()
    config, params = random_module(tiny_config(), "adapter", seed=1, std=0.05)
    results = []
    for options in (EngineOptions(), EngineOptions(device="cuda", dtype=dtype)):
        engine = build_engine(files, options)
        engine.register_module("a", config, params)
        jobs = [SentenceJob(s, (Member(m),), 8) for s in SOURCES for m in ("a", None)]
        results.append(engine.translate(jobs, SearchOptions(beam_size=2)))
    cpu, gpu = results
    agreeing = sum(a[0].tokens == b[0].tokens for a, b in zip(cpu, gpu, strict=True))
    assert agreeing >= len(cpu) - 1  # half precision may flip one near-tie
    for a, b in zip(cpu, gpu, strict=True):
        if a[0].tokens == b[0].tokens:
            assert a[0].score == pytest.approx(b[0].score, abs=0.05)
