"""Which CPU decoding path the engine takes on the host it runs on: float32, bfloat16 or
int8, and which of torch's quantized engines runs the int8 matmuls.

Why per host: the same engine was 1.75x CTranslate2 (float32 greedy) on an AMD EPYC with
AVX-512 and 0.87-1.06x on an Intel Xeon with AMX (issue #51). On AMX a bfloat16 matmul ran
~5x a float32 one (1,560 against 310 GFLOP/s, 800x512 by 2048x512 on 2 threads), and
oneDNN's int8 kernels use AMX-INT8 where fbgemm's (torch's `x86` engine, for linear
layers) do not. So:

- `auto` (the default) keeps what the settings ask for (`engine.int8`, `engine.dtype`);
  left at float32, it stays float32 everywhere for now: bfloat16 is offered
  (`engine.cpu_path=bfloat16`) but taken by itself on AMX-BF16 only once `AUTO_BFLOAT16`
  is on, which waits for its quality bound (within 0.1 BLEU of float32 on every domain,
  results/cpu_bf16_quality.md, 300 sentences per domain: equal on average, six domains
  within 0.1, religion -0.27) and a full `make bench-engine` on such a host.
- an explicit `engine.cpu_path` is taken as asked, or refused at start-up with the
  reason when this CPU cannot run it well (bfloat16 without bf16 instructions is
  emulated, slower than float32) or when it contradicts `engine.int8` / `engine.dtype`.
- the int8 matmuls run on `onednn` on a CPU with AMX-INT8, on torch's default (`x86`)
  elsewhere; `engine.quantized_engine` forces one.

The host's features are read once (/proc/cpuinfo flags, torch's oneDNN and quantized
engines); every choice takes them as an argument, so tests fake any host.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import torch

# auto takes bfloat16 on CPUs with AMX-BF16 (see above for why it is off).
AUTO_BFLOAT16 = False
CpuPath = Literal["auto", "float32", "bfloat16", "int8"]
QuantizedEngine = Literal["auto", "x86", "onednn", "fbgemm", "qnnpack"]
CPU_PATHS: tuple[str, ...] = ("auto", "float32", "bfloat16", "int8")
QUANTIZED_ENGINES: tuple[str, ...] = ("auto", "x86", "onednn", "fbgemm", "qnnpack")


class UnsupportedPath(ValueError):
    """An explicit choice this host cannot run (or that contradicts another setting)."""


@dataclass(frozen=True)
class HostFeatures:
    flags: frozenset[str]  # /proc/cpuinfo flags
    quantized_engines: tuple[str, ...]  # torch.backends.quantized.supported_engines
    default_quantized_engine: str  # torch.backends.quantized.engine at start
    bf16_kernels: bool  # oneDNN reports native bfloat16 (AVX512-BF16 or AMX-BF16)

    @property
    def amx_bf16(self) -> bool:
        return {"amx_tile", "amx_bf16"} <= self.flags

    @property
    def amx_int8(self) -> bool:
        return {"amx_tile", "amx_int8"} <= self.flags

    @property
    def native_bf16(self) -> bool:
        return self.bf16_kernels and bool({"avx512_bf16", "amx_bf16"} & self.flags)

    def summary(self) -> str:
        shown = [f for f in ("avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
                 if f in self.flags]
        return ", ".join(shown) or "no AVX-512"


@dataclass(frozen=True)
class PathChoice:
    path: Literal["float32", "bfloat16", "int8"]
    quantized_engine: str  # runs int8 matmuls (the backbone's on the int8 path, and int8 adapters)
    reason: str

    @property
    def dtype(self) -> str:
        return "bfloat16" if self.path == "bfloat16" else "float32"

    @property
    def int8(self) -> bool:
        return self.path == "int8"

    def describe(self) -> str:
        return f"{self.path} (int8 matmuls on {self.quantized_engine}): {self.reason}"


def read_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first processor's flags (empty where /proc/cpuinfo is absent)."""
    text = cpuinfo.read_text() if cpuinfo.exists() else ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


@functools.cache
def detect() -> HostFeatures:
    """This host's features (read once per process)."""
    return HostFeatures(flags=read_flags(),
                        quantized_engines=tuple(torch.backends.quantized.supported_engines),
                        default_quantized_engine=torch.backends.quantized.engine,
                        bf16_kernels=bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()))


def choose_quantized_engine(host: HostFeatures, requested: str = "auto") -> str:
    if requested != "auto":
        if requested not in host.quantized_engines:
            raise UnsupportedPath(
                f"engine.quantized_engine={requested} is not built into this torch "
                f"(it has {', '.join(e for e in host.quantized_engines if e != 'none')})")
        return requested
    if host.amx_int8 and "onednn" in host.quantized_engines:
        return "onednn"  # AMX-INT8 tiles; fbgemm (and x86's linear layers) stop at VNNI
    return host.default_quantized_engine


def choose(host: HostFeatures, requested: str = "auto", *, dtype: str = "float32",
           int8: bool = False, quantized_engine: str = "auto") -> PathChoice:
    """The CPU path for these settings on this host; UnsupportedPath says why not."""
    if requested not in CPU_PATHS:
        raise UnsupportedPath(f"engine.cpu_path={requested!r}; allowed: {', '.join(CPU_PATHS)}")
    engine = choose_quantized_engine(host, quantized_engine)
    if dtype == "float16":
        raise UnsupportedPath("engine.dtype=float16 is for CUDA; on the CPU use "
                              "engine.cpu_path=bfloat16 (or float32)")
    asked = "int8" if int8 else dtype  # what engine.int8 / engine.dtype already ask for
    if requested != "auto" and asked != "float32" and asked != requested:
        setting = "engine.int8=true" if int8 else f"engine.dtype={dtype}"
        raise UnsupportedPath(f"engine.cpu_path={requested} contradicts {setting}: set one")
    wanted = requested if requested != "auto" else asked
    if wanted == "bfloat16" and not host.native_bf16:
        raise UnsupportedPath(
            f"bfloat16 needs a CPU with AVX512-BF16 or AMX-BF16 (this one: "
            f"{host.summary()}); without them torch emulates it, slower than float32: "
            "use engine.cpu_path=float32 or int8")
    if wanted == "int8" and engine in ("", "none"):
        raise UnsupportedPath("int8 needs one of torch's quantized engines; this torch has none")
    if requested != "auto" or asked != "float32":
        how = f"engine.cpu_path={requested}" if requested != "auto" else (
            "engine.int8=true" if int8 else f"engine.dtype={dtype}")
        return PathChoice(wanted, engine, f"asked for ({how})")  # type: ignore[arg-type]
    if host.amx_bf16 and host.native_bf16:
        if AUTO_BFLOAT16:
            return PathChoice("bfloat16", engine, "AMX-BF16: bfloat16 matmuls run ~5x "
                              "float32 on this CPU (benchmarks/results/cpu_bf16_quality.md)")
        return PathChoice("float32", engine, "AMX-BF16 present, float32 kept until bfloat16's "
                          "quality bound holds (engine.cpu_path=bfloat16 takes it: ~5x "
                          "float32's matmul speed here)")
    return PathChoice("float32", engine, f"no AMX-BF16 ({host.summary()}): float32 at "
                      "full quality (engine.cpu_path=bfloat16 or int8 trade some for speed)")


class PathSettings(Protocol):
    """The engine settings a choice reads (server.settings.EngineSettings)."""

    @property
    def device(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def int8(self) -> bool: ...
    @property
    def cpu_path(self) -> str: ...
    @property
    def quantized_engine(self) -> str: ...


def for_settings(settings: PathSettings, host: HostFeatures | None = None) -> PathChoice | None:
    """The CPU path of an engine built from these settings; None on CUDA, where
    engine.dtype decides (an explicit cpu_path there is refused)."""
    if torch.device(settings.device).type != "cpu":
        if settings.cpu_path != "auto":
            raise UnsupportedPath(f"engine.cpu_path={settings.cpu_path} applies to "
                                  f"engine.device=cpu, not {settings.device}")
        return None
    return choose(host or detect(), settings.cpu_path, dtype=settings.dtype,
                  int8=settings.int8, quantized_engine=settings.quantized_engine)


def apply_quantized_engine(name: str) -> None:
    """Make `name` torch's quantized engine (process-wide: weights are prepacked for the
    engine current when they are quantized, so set it before building the engine)."""
    if torch.backends.quantized.engine != name:
        torch.backends.quantized.engine = name
