"""server/engine/host_paths.py: each kind of host gets its CPU path and quantized engine
(the host's features faked), an explicit choice the host cannot run or that contradicts
another setting is refused with the reason (tests/server/test_cpu_path.py: the server
says at start-up which path it took, or does not start)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from server.core.settings import EngineSettings
from server.engine import host_paths
from server.engine.host_paths import HostFeatures, UnsupportedPath, choose, read_flags

ENGINES = ("qnnpack", "none", "onednn", "x86", "fbgemm")
BASE = {"fpu", "sse4_2", "avx2", "fma"}
# A Sapphire Rapids Xeon (family 6 model 143/207), an AMD EPYC Genoa (AVX-512 with BF16,
# no AMX), a Skylake Xeon (AVX-512, no VNNI/BF16), an AVX2 desktop, an ARM server.
INTEL_AMX = HostFeatures(frozenset(BASE | {"avx512f", "avx512_vnni", "avx512_bf16", "amx_tile",
                                           "amx_bf16", "amx_int8"}), ENGINES, "x86", True)
AMD_EPYC = HostFeatures(frozenset(BASE | {"avx512f", "avx512_vnni", "avx512_bf16"}), ENGINES,
                        "x86", True)
SKYLAKE = HostFeatures(frozenset(BASE | {"avx512f"}), ENGINES, "x86", False)
AVX2 = HostFeatures(frozenset(BASE), ENGINES, "x86", False)
ARM = HostFeatures(frozenset({"fp", "asimd"}), ("qnnpack", "none"), "qnnpack", False)


@pytest.mark.parametrize(("host", "engine"), [
    (INTEL_AMX, "onednn"), (AMD_EPYC, "x86"), (SKYLAKE, "x86"), (AVX2, "x86"),
    (ARM, "qnnpack")])
def test_auto_takes_each_hosts_path(host: HostFeatures, engine: str) -> None:
    choice = choose(host)  # float32 everywhere until bfloat16's quality bound holds
    assert (choice.path, choice.quantized_engine) == ("float32", engine)
    assert choice.dtype == "float32" and not choice.int8
    assert choice.reason.startswith("AMX-BF16 present" if host is INTEL_AMX else "no AMX-BF16")


@pytest.mark.parametrize(("host", "path"), [(INTEL_AMX, "bfloat16"), (AMD_EPYC, "float32"),
                                            (AVX2, "float32")])
def test_auto_bfloat16_is_taken_on_amx_only(monkeypatch: pytest.MonkeyPatch,
                                            host: HostFeatures, path: str) -> None:
    monkeypatch.setattr(host_paths, "AUTO_BFLOAT16", True)
    choice = choose(host)
    assert choice.path == path and choice.dtype == path


@pytest.mark.parametrize("host", [INTEL_AMX, AMD_EPYC, AVX2])
def test_auto_keeps_what_int8_and_dtype_ask_for(host: HostFeatures) -> None:
    int8 = choose(host, int8=True)
    assert int8.path == "int8" and int8.int8 and int8.dtype == "float32"
    assert int8.quantized_engine == ("onednn" if host is INTEL_AMX else "x86")
    assert "engine.int8=true" in int8.reason
    if host.native_bf16:
        assert choose(host, dtype="bfloat16").path == "bfloat16"


@pytest.mark.parametrize("path", ["float32", "bfloat16", "int8"])
@pytest.mark.parametrize("host", [INTEL_AMX, AMD_EPYC])
def test_an_explicit_path_is_taken_where_the_host_runs_it(host: HostFeatures,
                                                          path: str) -> None:
    choice = choose(host, path)
    assert choice.path == path and f"engine.cpu_path={path}" in choice.reason


@pytest.mark.parametrize(("host", "kwargs", "message"), [
    (AVX2, {"requested": "bfloat16"}, "bfloat16 needs a CPU with AVX512-BF16 or AMX-BF16"),
    (SKYLAKE, {"requested": "bfloat16"}, "(this one: avx512f)"),
    (AVX2, {"dtype": "bfloat16"}, "slower than float32"),
    (AMD_EPYC, {"requested": "bfloat16", "int8": True}, "contradicts engine.int8=true"),
    (AMD_EPYC, {"requested": "int8", "dtype": "bfloat16"},
     "contradicts engine.dtype=bfloat16"),
    (AMD_EPYC, {"dtype": "float16"}, "float16 is for CUDA"),
    (ARM, {"quantized_engine": "onednn"}, "not built into this torch (it has qnnpack)"),
    (AMD_EPYC, {"requested": "fastest"}, "allowed: auto, float32, bfloat16, int8"),
])
def test_an_impossible_choice_is_refused_with_the_reason(host: HostFeatures,
                                                         kwargs: dict[str, object],
                                                         message: str) -> None:
    with pytest.raises(UnsupportedPath) as refused:
        choose(host, **kwargs)  # type: ignore[arg-type]
    assert message in str(refused.value)


def test_an_explicit_quantized_engine_wins() -> None:
    assert choose(INTEL_AMX, "int8", quantized_engine="fbgemm").quantized_engine == "fbgemm"
    assert choose(AMD_EPYC, "int8", quantized_engine="onednn").quantized_engine == "onednn"


def test_settings_map_to_a_choice_on_cpu_and_none_on_cuda() -> None:
    choice = host_paths.for_settings(EngineSettings(cpu_path="int8"), AMD_EPYC)
    assert choice is not None and choice.path == "int8"
    assert host_paths.for_settings(EngineSettings(device="cuda", dtype="float16"),
                                   INTEL_AMX) is None
    with pytest.raises(UnsupportedPath, match="applies to engine.device=cpu, not cuda"):
        host_paths.for_settings(EngineSettings(device="cuda", cpu_path="bfloat16"), AMD_EPYC)


def test_the_flags_come_from_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu avx2 "
                       "amx_bf16 amx_tile\n\nprocessor\t: 1\nflags\t\t: other\n")
    assert read_flags(cpuinfo) == {"fpu", "avx2", "amx_bf16", "amx_tile"}
    assert read_flags(tmp_path / "absent") == frozenset()
    here = host_paths.detect()
    assert here.quantized_engines == tuple(torch.backends.quantized.supported_engines)
