"""The host a benchmark ran on, recorded in every speed result: CPU model and vendor, the
instruction-set features that decide which kernels run (AVX-512, VNNI, BF16, AMX), and the
paths torch and CTranslate2 pick on it. Engine speed differs several-fold between CPU
generations, so a ratio is only read beside the host it came from."""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

# /proc/cpuinfo flags that change which kernels torch, oneDNN and CTranslate2 use.
FEATURES = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16",
            "amx_int8")


@dataclass(frozen=True)
class Host:
    model_name: str
    vendor: str
    cpu_count: int
    features: tuple[str, ...]  # the FEATURES this CPU has
    torch_capability: str  # torch's CPU kernel level (DEFAULT, AVX2, AVX512, ...)
    quantized_engine: str  # torch's default quantized engine
    bf16_matmul: bool  # oneDNN reports native bfloat16 support

    @property
    def label(self) -> str:
        """Short name for tables: "AMD EPYC (AVX-512, VNNI, BF16; 2 CPUs)"."""
        names = {"avx512f": "AVX-512", "avx512_vnni": "VNNI", "avx512_bf16": "BF16",
                 "amx_bf16": "AMX-BF16", "amx_int8": "AMX-INT8"}
        shown = [names[f] for f in self.features if f in names]
        if not shown and "avx2" in self.features:
            shown = ["AVX2"]
        return f"{self.model_name} ({', '.join(shown + [f'{self.cpu_count} CPUs'])})"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "features": list(self.features), "label": self.label}


def parse_cpuinfo(text: str) -> tuple[str, str, set[str]]:
    """Model name, vendor and flags of the first processor in /proc/cpuinfo's text."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return (fields.get("model name", ""), fields.get("vendor_id", ""),
            set(fields.get("flags", "").split()))


def current_host(cpuinfo: Path = Path("/proc/cpuinfo")) -> Host:
    text = cpuinfo.read_text() if cpuinfo.exists() else ""
    model, vendor, flags = parse_cpuinfo(text)
    return Host(model_name=model or platform.processor() or platform.machine(),
                vendor=vendor or "unknown", cpu_count=os.cpu_count() or 1,
                features=tuple(f for f in FEATURES if f in flags),
                torch_capability=torch.backends.cpu.get_cpu_capability(),
                quantized_engine=torch.backends.quantized.engine,
                bf16_matmul=bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()))


def ctranslate2_info() -> dict[str, Any]:
    """CTranslate2's CPU compute types, and the ISA it was told to use (by default it picks
    the widest the CPU has: AVX-512 where `avx512f` is present)."""
    import ctranslate2

    return {"version": ctranslate2.__version__,
            "compute_types": sorted(ctranslate2.get_supported_compute_types("cpu")),
            "forced_isa": os.environ.get("CT2_FORCE_CPU_ISA")}
