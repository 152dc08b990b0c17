"""The host record of the speed benchmarks, from /proc/cpuinfo texts of two server CPUs."""

from __future__ import annotations

from pathlib import Path

from benchmarks.host import current_host, parse_cpuinfo

XEON = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu sse avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: something else
flags\t\t: fpu
"""

EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu avx2 avx512f avx512_vnni avx512_bf16
"""


def test_the_first_processor_gives_model_vendor_and_flags() -> None:
    model, vendor, flags = parse_cpuinfo(XEON)
    assert (model, vendor) == ("Intel(R) Xeon(R) Platinum 8488C", "GenuineIntel")
    assert {"amx_bf16", "amx_int8", "avx512_vnni"} <= flags and "fpu" in flags


def test_the_label_names_the_features_that_pick_kernels(tmp_path: Path) -> None:
    (tmp_path / "xeon").write_text(XEON)
    (tmp_path / "epyc").write_text(EPYC)
    xeon, epyc = current_host(tmp_path / "xeon"), current_host(tmp_path / "epyc")
    assert xeon.features == ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile",
                             "amx_bf16", "amx_int8")
    assert xeon.label.startswith("Intel(R) Xeon(R) Platinum 8488C (AVX-512, VNNI, BF16, "
                                 "AMX-BF16, AMX-INT8,")
    assert epyc.vendor == "AuthenticAMD" and "AMX" not in epyc.label
    record = epyc.as_dict()
    assert record["label"] == epyc.label and record["features"] == list(epyc.features)
    assert record["torch_capability"] and record["quantized_engine"]


def test_the_engine_benchmark_records_and_shows_its_host() -> None:
    from benchmarks.speed.engine.engine_speed import TINY, metadata
    from benchmarks.speed.engine.report import markdown

    meta = metadata(TINY, mode="tiny", data="none")
    assert meta["host"]["label"] == current_host().label
    assert "float32" in meta["ctranslate2"]["compute_types"]
    assert f"Host: {current_host().label};" in markdown([], [], meta)
