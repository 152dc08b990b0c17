"""The CPU paths server/engine/host_paths.py chooses between decode as float32 does, on any
CPU (bfloat16 is emulated where the CPU lacks it: same numbers, slower): the bfloat16 path
with mixed batches of grouped and int8 adapters (test_device_agreement.py: every
module family); and the int8 path on each of torch's x86 quantized engines."""

from __future__ import annotations

import pytest
import torch

from server.engine.engine import EngineOptions
from server.engine.host_paths import HostFeatures, apply_quantized_engine, choose
from tests.engine.test_device_agreement import (
    ADAPTER_MIX,
    HALF,
    Tolerance,
    assert_agree,
)

INT8 = Tolerance(flips=4, score=0.3)  # per-tensor int8 weights, activations per call


@pytest.fixture(autouse=True)
def _keep_the_quantized_engine() -> object:
    """The quantized engine is process-wide: put back what the other tests run on."""
    before = torch.backends.quantized.engine
    yield
    apply_quantized_engine(before)


@pytest.mark.parametrize("options", [
    EngineOptions(dtype="bfloat16", module_grouped=True),  # a batch's adapters in one matmul
    EngineOptions(dtype="bfloat16", module_int8=True),  # int8 adapter slots
    EngineOptions(dtype="bfloat16", module_bf16=True),  # grouped from bfloat16 copies
])
def test_the_bfloat16_path_decodes_mixed_adapters_as_float32(options: EngineOptions) -> None:
    assert_agree(options, HALF, ADAPTER_MIX)


@pytest.mark.parametrize("engine", [e for e in ("x86", "onednn", "fbgemm")
                                    if e in torch.backends.quantized.supported_engines])
def test_the_int8_path_decodes_as_float32_on_each_quantized_engine(engine: str) -> None:
    assert_agree(EngineOptions(int8=True, quantized_engine=engine), INT8, ADAPTER_MIX)
    assert torch.backends.quantized.engine == engine


def test_the_path_an_amx_host_takes_decodes_here() -> None:
    """The options auto gives a Xeon with AMX, run on this CPU."""
    amx = HostFeatures(frozenset({"avx512f", "avx512_bf16", "amx_tile", "amx_bf16",
                                  "amx_int8"}), ("x86", "onednn", "fbgemm"), "x86", True)
    choice = choose(amx, "int8")
    if choice.quantized_engine in torch.backends.quantized.supported_engines:
        assert_agree(EngineOptions(int8=True, quantized_engine=choice.quantized_engine), INT8,
                     ADAPTER_MIX)
