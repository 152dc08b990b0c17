"""The GPU benchmark's code path at a toy size on the CPU: every system and decode has a
row (batch and one sentence), system names parse or are refused with the accepted forms,
and the device memory report counts the backbone and the module slots. Nothing here
asserts on speed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks.speed.engine.engine_speed import TINY
from benchmarks.speed.engine.measure import DECODES
from benchmarks.speed.gpu.engine_speed_gpu import (
    BATCH1,
    EngineLine,
    main,
    parse_engine,
    run_benchmark,
    validate,
)

SYSTEMS = ["ct2-float32", "engine-float32", "engine-bfloat16-adapter", "engine-float32-mixed8",
           "engine-float32-eager"]


def test_engine_system_names_parse() -> None:
    assert parse_engine("engine-float16") == EngineLine("float16", "", eager=False)
    assert parse_engine("engine-float16-mixed8-eager") == EngineLine("float16", "-mixed8",
                                                                     eager=True)
    assert parse_engine("engine-bfloat16-adapter").engine_key == "bfloat16"
    assert parse_engine("engine-float32-eager").engine_key == "float32-eager"
    assert parse_engine("engine-float16-mixed8-eager-ungrouped") == EngineLine(
        "float16", "-mixed8", eager=True, ungrouped=True)
    assert parse_engine("engine-float16-mixed8-ungrouped").engine_key == "float16-ungrouped"
    with pytest.raises(ValueError,
                       match=r"engine-<dtype>\[-adapter\|-mixed8\]\[-eager\]\[-ungrouped\]"):
        parse_engine("engine-int4")
    with pytest.raises(ValueError, match="unknown system 'hf'"):
        validate(["ct2-float16", "hf"])


@pytest.mark.slow
def test_tiny_run_on_cpu_has_every_row_and_the_memory(tmp_path: Path) -> None:
    rows, memory, runners = run_benchmark(TINY, tmp_path, device="cpu", systems=SYSTEMS)
    decodes = [*DECODES, *(name + BATCH1 for name in DECODES)]
    assert sorted((r.system, r.decode) for r in rows) == sorted(
        (s, d) for s in SYSTEMS for d in decodes)
    assert {r.batch for r in rows if r.decode.endswith(BATCH1)} == {1}
    assert {r.batch for r in rows if not r.decode.endswith(BATCH1)} == {TINY.batch}
    assert all(r.tokens_per_run == r.batch * TINY.target_length for r in rows)
    assert set(runners) == set(SYSTEMS)
    engines = memory["engines"]
    assert set(engines) == {"float32", "bfloat16", "float32-eager"}
    assert engines["bfloat16"]["backbone_bytes"] * 2 == engines["float32"]["backbone_bytes"]
    (bank,) = engines["float32"]["banks"].values()  # the mixed line's adapters
    assert bank["slots"] == 16 and bank["slot_bytes"] > 0


def test_main_refuses_cuda_without_a_gpu_and_writes_a_tiny_report(tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="no CUDA device here"):
            main(["--tiny", "--systems", "engine-float32"])
    assert main(["--tiny", "--device", "cpu", "--systems", "engine-float32,engine-float32-adapter",
                 "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "engine_speed_gpu.json").read_text())
    assert {row["system"] for row in rows} == {"engine-float32", "engine-float32-adapter"}
    report = (tmp_path / "engine_speed_gpu.md").read_text()
    assert "| engine-float32-adapter |" in report
    assert "## Device memory" in report and "| float32 | " in report
