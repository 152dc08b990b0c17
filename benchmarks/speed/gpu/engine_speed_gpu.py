"""Engine speed against CTranslate2 on one GPU, in one run (issue #25).

    python -m benchmarks.speed.gpu.engine_speed_gpu [--device cuda] [--quick] [--tiny]
                                          [--systems ct2-float16,...] [--rounds N] [--out DIR]

The model and the work are engine_speed's: a Transformer-base Marian checkpoint with
random weights, 32 sources of 25 tokens, each decoded to exactly 25 target tokens. Every
system runs on `--device`:

    ct2-<compute type>        CTranslate2 (float32, float16, bfloat16, int8_float16, ...)
                              in a worker process of its own
    engine-<dtype>            this engine in float32, float16 or bfloat16, backbone only
    engine-<dtype>-adapter    every row through one residual adapter (bottleneck 256)
    engine-<dtype>-mixed8     8 such adapters in one batch, 4 rows each
    ...-eager                 the same with ordinary decoding steps; without the suffix,
                              on CUDA, each step is one CUDA graph replay (fixed steps,
                              server/engine/fixed_steps.py)
    ...-ungrouped             adapters run one matmul per module and matrix; without the
                              suffix, on CUDA, a batch's adapters run grouped (one
                              batched matmul, EngineOptions.module_grouped)

Decodes: greedy and beam 4 over the batch of 32 (throughput), and the same for its first
sentence alone (`-batch1`: the latency of one request). Rounds interleave the systems;
each figure is a median (benchmarks/speed/engine/measure.py). The metadata names the GPU and
gives the engine's device memory: the backbone, one adapter slot, and the peak of a
decode. Writes results/engine_speed_gpu.json (a list of rows), .meta.json and .md.
`--tiny --device cpu` checks the code path on a machine without a GPU (its numbers mean
nothing).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import platform
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.report_files import results_dir, write_stamped
from benchmarks.speed import model as speed_model
from benchmarks.speed.engine.engine_speed import FULL, TINY, BenchConfig, workload
from benchmarks.speed.engine.measure import DECODES, Row, measure
from benchmarks.speed.engine.profile import function_table
from benchmarks.speed.engine.report import Target, write_results
from benchmarks.speed.engine.systems import (
    Runner,
    Workload,
    ct2_runner,
    engine_runner,
    mixed_members,
    register_adapters,
)
from benchmarks.speed.model import quiet_libraries
from converters.marian import convert_marian
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, EngineOptions, Member

SYSTEMS = ("ct2-float32", "ct2-float16", "ct2-int8_float16", "engine-float32",
           "engine-float16", "engine-bfloat16", "engine-float16-adapter",
           "engine-float16-mixed8", "engine-float16-eager", "engine-float16-mixed8-eager",
           "engine-float16-mixed8-ungrouped")
ENGINE_DTYPES = ("float32", "float16", "bfloat16")
ENGINE_LINES = ("", "-adapter", "-mixed8")
EAGER = "-eager"  # suffix: ordinary steps (EngineOptions.fixed_steps=False)
UNGROUPED = "-ungrouped"  # suffix: one matmul per module (EngineOptions.module_grouped=False)
BATCH1 = "-batch1"  # suffix of the decodes of one sentence alone

TARGETS: tuple[Target, ...] = (
    # Issue #25: at least CTranslate2 float16, at batch 32 and in one request's latency.
    Target("engine float16 / CT2 float16", "engine-float16", "ct2-float16", 1.0),
    Target("engine bfloat16 / CT2 float16", "engine-bfloat16", "ct2-float16", None),
    Target("engine float16 / CT2 int8_float16", "engine-float16", "ct2-int8_float16", None),
    Target("engine float32 / CT2 float32", "engine-float32", "ct2-float32", None),
    Target("one adapter / backbone only (float16)", "engine-float16-adapter",
           "engine-float16", None),
    Target("8 mixed adapters / one adapter (float16)", "engine-float16-mixed8",
           "engine-float16-adapter", None),
    Target("fixed steps (CUDA graphs) / eager steps (float16)", "engine-float16",
           "engine-float16-eager", None),
    Target("fixed steps / eager steps, 8 mixed adapters (float16)", "engine-float16-mixed8",
           "engine-float16-mixed8-eager", None),
    # Issue #23's target for mixed batches, on the GPU
    Target("8 mixed adapters / one adapter, ungrouped (float16)",
           "engine-float16-mixed8-ungrouped", "engine-float16-adapter", None),
    Target("grouped / ungrouped, 8 mixed adapters (float16)", "engine-float16-mixed8",
           "engine-float16-mixed8-ungrouped", None),
)


@dataclass(frozen=True)
class EngineLine:
    """A parsed `engine-<dtype>[-adapter|-mixed8][-eager][-ungrouped]` system name."""

    dtype: str
    line: str  # "", "-adapter" or "-mixed8"
    eager: bool  # ordinary decoding steps, not fixed ones replayed as CUDA graphs
    ungrouped: bool = False  # one matmul per module, not one batched matmul

    @property
    def engine_key(self) -> str:
        return self.dtype + (EAGER if self.eager else "") + (UNGROUPED if self.ungrouped else "")


def parse_engine(system: str) -> EngineLine:
    rest = system.removeprefix("engine-")
    ungrouped = rest.endswith(UNGROUPED)
    rest = rest.removesuffix(UNGROUPED)
    eager = rest.endswith(EAGER)
    rest = rest.removesuffix(EAGER)
    for line in ENGINE_LINES[1:]:
        if rest.endswith(line):
            rest, chosen = rest.removesuffix(line), line
            break
    else:
        chosen = ""
    if rest not in ENGINE_DTYPES:
        raise ValueError(f"unknown engine system {system!r}: engine-<dtype>[-adapter|-mixed8]"
                         f"[-eager][-ungrouped] with dtype one of {', '.join(ENGINE_DTYPES)}")
    return EngineLine(rest, chosen, eager, ungrouped)


def validate(systems: Sequence[str]) -> None:
    for system in systems:
        if system.startswith("engine-"):
            parse_engine(system)
        elif not system.startswith("ct2-") or system == "ct2-":
            raise ValueError(f"unknown system {system!r}: ct2-<compute type> or "
                             f"engine-<dtype>[-adapter|-mixed8][-eager][-ungrouped]")


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    return sum(tensor.numel() * tensor.element_size() for tensor in tensors)


def held_memory(engine: Engine) -> dict[str, Any]:
    """What an engine holds on its device: the backbone (with its output projection), and
    per module bank (family and shape; a bank is made at its family's first use) its
    slots and the bytes of one slot."""
    model = [*engine.model.parameters(), *engine.model.buffers(), *engine.project.parameters()]
    return {"backbone_bytes": tensor_bytes(model),
            "banks": {key: {"slots": bank.n_slots,
                            "slot_bytes": tensor_bytes(bank.tensors.values()) // bank.n_slots}
                      for key, bank in engine.modules.banks.items()}}


@dataclass
class Engines:
    """One engine per dtype and kind of step (the backbone, adapter and mixed lines share
    it), with the adapters registered in it."""

    built: dict[str, tuple[Engine, list[str]]]

    def memory(self) -> dict[str, dict[str, Any]]:
        return {key: held_memory(engine) for key, (engine, _) in self.built.items()}


def build_engines(files: dict[str, bytes], lines: Sequence[EngineLine], config: BenchConfig,
                  device: str) -> Engines:
    """One engine per dtype and kind of step (fixed or eager)."""
    engines = Engines({})
    for line in lines:
        if line.engine_key in engines.built:
            continue
        engine = build_engine(files, EngineOptions(
            device=device, dtype=line.dtype, slots_per_bank=max(16, config.mixed_modules),
            fixed_steps=False if line.eager else None,
            module_grouped=False if line.ungrouped else None))
        modules = register_adapters(engine, config.mixed_modules, bottleneck=config.bottleneck)
        engines.built[line.engine_key] = (engine, modules)
    return engines


def runners_for(systems: Sequence[str], work: Workload, engines: Engines,
                ct2: Callable[[str, Workload], Runner]) -> dict[str, Runner]:
    runners: dict[str, Runner] = {}
    for system in systems:
        if system.startswith("ct2-"):
            runners[system] = ct2(system.removeprefix("ct2-"), work)
            continue
        parsed = parse_engine(system)
        engine, modules = engines.built[parsed.engine_key]
        members = {"": [Member(None)], "-adapter": [Member(modules[0])],
                   "-mixed8": mixed_members(modules, batch=work.batch)}[parsed.line]
        runners[system] = engine_runner(engine, work, members)
    return runners


def run_benchmark(config: BenchConfig, work_dir: Path, *, device: str,
                  systems: Sequence[str] = SYSTEMS,
                  verbose: bool = False) -> tuple[list[Row], dict[str, Any], dict[str, Runner]]:
    """Rows of every system at batch `config.batch` and at batch 1, the engines' device
    memory, and the runners of the batch."""
    validate(systems)
    chosen = torch.device(device)
    checkpoint, _ = speed_model.build_checkpoint(work_dir / "marian", config.size)
    batch = workload(checkpoint, config)
    single = replace(batch, sources=batch.sources[:1])
    ct2_dir: Path | None = None

    def ct2(compute_type: str, work: Workload) -> Runner:
        nonlocal ct2_dir
        if ct2_dir is None:  # one float32 conversion: the compute type is chosen at load
            ct2_dir = speed_model.convert_ct2(checkpoint, work_dir / "ct2",
                                              quantization="float32")
        return ct2_runner(ct2_dir, work, compute_type=compute_type, threads=config.threads,
                          device=device)

    lines = [parse_engine(s) for s in systems if s.startswith("engine-")]
    engines = build_engines(convert_marian(checkpoint.path), lines, config, device)
    if chosen.type == "cuda":
        torch.cuda.reset_peak_memory_stats(chosen)
    runners = runners_for(systems, batch, engines, ct2)
    rows = measure(runners, rounds=config.rounds,
                   batch=batch.batch, target_length=config.target_length, decodes=DECODES,
                   verbose=verbose)
    peak = torch.cuda.max_memory_allocated(chosen) if chosen.type == "cuda" else 0
    ones = measure(runners_for(systems, single, engines, ct2), rounds=config.rounds,
                   batch=1, target_length=config.target_length, decodes=DECODES,
                   verbose=verbose)
    rows += [replace(row, decode=row.decode + BATCH1) for row in ones]
    memory = {"engines": engines.memory(), "peak_bytes_batch": peak}
    return rows, memory, runners


def describe(config: BenchConfig, device: str) -> str:
    size = config.size
    return (f"Marian Transformer ({size.layers}+{size.layers} layers, d={size.d_model}, "
            f"{size.heads} heads, FFN {size.ffn}, {size.vocab} vocabulary), random weights, "
            f"on {device}; batch {config.batch} and batch 1 (`-batch1`: its first sentence "
            f"alone), {config.source_length} source and exactly {config.target_length} "
            f"target tokens per sentence; adapters: residual, bottleneck {config.bottleneck}; "
            f"mixed batch: {config.mixed_modules} adapters.")


def gpu_name(device: str) -> str:
    chosen = torch.device(device)
    if chosen.type != "cuda":
        return f"none ({platform.processor() or platform.machine()} CPU)"
    properties = torch.cuda.get_device_properties(chosen)
    return f"{properties.name}, {properties.total_memory / 2**30:.0f} GiB"


def metadata(config: BenchConfig, *, mode: str, device: str,
             memory: dict[str, Any]) -> dict[str, Any]:
    return {"title": "Engine speed on a GPU, against CTranslate2", "mode": mode,
            "description": describe(config, device), "config": asdict(config),
            "device": device, "gpu": gpu_name(device), "memory": memory,
            "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": {"platform": platform.platform(), "python": platform.python_version()},
            "versions": {"torch": torch.__version__, "cuda": torch.version.cuda,
                         "ctranslate2": ct2_version()}}


def ct2_version() -> str:
    """CTranslate2's version without importing it here (its runtime stays in its workers);
    a copy carried without its package metadata still has its version module."""
    try:
        return importlib.metadata.version("ctranslate2")
    except importlib.metadata.PackageNotFoundError:
        spec = importlib.util.find_spec("ctranslate2.version")
        if spec is None or spec.origin is None:
            return "not installed"
        found = re.search(r"__version__ = \"([^\"]+)\"", Path(spec.origin).read_text())
        return found.group(1) if found else "unknown"


def memory_markdown(meta: dict[str, Any]) -> str:
    lines = ["## Device memory", "", f"GPU: {meta['gpu']}", "",
             "| engine | backbone | module bank | slots | one slot |", "|---|---:|---|---:|---:|"]
    for dtype, held in meta["memory"]["engines"].items():
        for key, bank in held["banks"].items():
            lines.append(f"| {dtype} | {held['backbone_bytes'] / 2**20:.1f} MiB | {key} | "
                         f"{bank['slots']} | {bank['slot_bytes'] / 2**20:.2f} MiB |")
    lines += ["", f"Peak allocated during the batch decodes (all engines loaded): "
                  f"{meta['memory']['peak_bytes_batch'] / 2**20:.0f} MiB.", ""]
    return "\n".join(lines)


def write_gpu_profile(runners: dict[str, Runner], path: Path, *, header: str) -> Path:
    """Per runner and beam size: the wall time of one decode against the time its kernels
    kept the GPU busy (how far decoding is bound by launching them), the operators by GPU
    and by CPU time, and the Python functions by cumulative time."""
    sections = [header.strip(), ""]
    for beam_size in (1, 4):
        for name, runner in runners.items():
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                start = time.perf_counter()
                runner(beam_size)
                wall = time.perf_counter() - start
            averages = prof.key_averages()
            busy = sum(getattr(event, "self_device_time_total", 0) for event in averages)
            sections += [f"=== {name} (beam {beam_size}): {wall * 1e3:.1f} ms wall under the "
                         f"profiler, kernels busy {busy / 1e3:.1f} ms ===",
                         averages.table(sort_by="self_device_time_total", row_limit=15),
                         averages.table(sort_by="self_cpu_time_total", row_limit=15),
                         function_table(runner, beam_size), ""]
    return write_stamped(path, "\n".join(sections))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed.gpu.engine_speed_gpu",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="torch/CTranslate2 device (cuda)")
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--tiny", action="store_true", help="toy sizes: checks the code path")
    parser.add_argument("--rounds", type=int, help="override the number of timed rounds")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    parser.add_argument("--profile", help="comma-separated systems to profile at batch "
                        f"{FULL.batch} (CUDA only): writes engine_profile_gpu.txt")
    parser.add_argument("--out", type=Path, help="results directory (default: results/; "
                                                 "--tiny: results/tmp/, git-ignored)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here; --device cpu --tiny checks the code path")
    config = TINY if args.tiny else replace(FULL, rounds=3) if args.quick else FULL
    config = replace(config, rounds=args.rounds) if args.rounds else config
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    quiet_libraries()
    systems = [name.strip() for name in args.systems.split(",") if name.strip()]
    out = results_dir(args.out, tiny=args.tiny)
    print(describe(config, args.device), flush=True)
    with tempfile.TemporaryDirectory(prefix="engine-speed-gpu-") as scratch:
        rows, memory, runners = run_benchmark(config, Path(scratch), device=args.device,
                                              systems=systems, verbose=True)
        meta = metadata(config, mode=mode, device=args.device, memory=memory)
        paths = write_results(rows, meta, out, stem="engine_speed_gpu", targets=TARGETS,
                              more="\n" + memory_markdown(meta))
        if args.profile:
            chosen = {name: runners[name] for name in args.profile.split(",")}
            paths.append(write_gpu_profile(chosen, out / "engine_profile_gpu.txt",
                                           header=describe(config, args.device)))
    print(paths[2].read_text())
    print("wrote " + ", ".join(str(path) for path in paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
