"""Engine speed against its peers, on one backbone and one input batch, in one run.

    python -m benchmarks.speed.engine.engine_speed [--data DIR] [--quick] [--tiny] [--profile]
                                      [--systems hf,ct2-float32,...] [--rounds N]
                                      [--threads N] [--out DIR]

The backbone is a Transformer-base (6+6 layers, d=512, 8 heads, FFN 2048, 8k vocabulary)
with random weights, saved as a Hugging Face Marian checkpoint (sentencepiece model
trained on a slice of `--data` text, or on synthetic text). Systems:

    hf                      MarianMTModel.generate
    ct2-float32, ct2-int8   CTranslate2 (its TransformersConverter), intra_threads = threads
    engine-float32, engine-int8   this engine (converters.marian), backbone only; int8 on
                            the quantized engine the server takes on this host (onednn
                            with AMX-INT8, torch's default elsewhere: host_paths.py)
    engine-bfloat16         the same in bfloat16 (`engine.cpu_path=bfloat16`, the path the
                            server takes on CPUs with AMX-BF16); only on CPUs with native
                            bfloat16 (AVX512-BF16 or AMX-BF16), where the server offers it
    engine-float32-adapter  every row through one residual adapter (bottleneck 256)
    engine-float32-mixed8   8 such adapters in one batch, 4 rows each
    engine-float32-adapter-int8, engine-float32-mixed8-int8   the same two with the
                            adapters' matrices in int8 slots (`EngineOptions.module_int8`:
                            grouped through server/engine/int8_groups.c where it builds)
    engine-float32-adapter-bf16, engine-float32-mixed8-bf16   the same two run grouped
                            from bfloat16 copies (`EngineOptions.module_bf16`)
    engine-float32-sf       every row through one factorized "sf" module (own key/value
                            projections of every attention + the FFN output matrix)
    engine-float32-pa       every row through one factorized "pa" module (own
                            query/key/value/output projections of every attention)
    engine-float32-mixing   every row through one word-level mixture of 8 domains
                            (encoder q/k/v/o/fc1/fc2, proportions per token and site)
    engine-float32-mixing-lowrank   the same with rank-32 differences from the backbone
                            (family option `rank`: the backbone's projection once plus the
                            k differences at rank 32, instead of k full projections)

The sf, pa and mixing modules start from copies of the backbone's projections plus small
noise (they are not the backbone itself); all the engine-float32 lines share one engine.

Each decodes the same 32 sources of 25 tokens to exactly 25 target tokens, greedy and
beam 4; rounds interleave the systems and the median is reported (benchmarks/
speed_measure.py). Writes results/engine_speed.json (a list of rows), .meta.json and .md;
`--profile` adds results/engine_profile.txt. `--tiny` runs a toy size (checks the code
path in seconds; its numbers mean nothing).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from benchmarks.host import ctranslate2_info, current_host
from benchmarks.report_files import results_dir
from benchmarks.speed import model as speed_model
from benchmarks.speed.data import training_lines
from benchmarks.speed.engine.measure import DECODES, Row, measure
from benchmarks.speed.engine.profile import write_profile
from benchmarks.speed.engine.report import check_targets, markdown, write_results
from benchmarks.speed.engine.systems import (
    Runner,
    Workload,
    ct2_runner,
    engine_runner,
    hf_runner,
    mixed_members,
    register_adapters,
    register_override,
)
from benchmarks.speed.model import Checkpoint, ModelSize, quiet_libraries
from contract.families import mixes_domains
from converters.marian import convert_marian
from server.engine import host_paths
from server.engine.artifacts import build_engine
from server.engine.engine import EngineOptions, Member

# Systems of one module of a weight-override family for every row -> that family.
FAMILY_SYSTEMS: dict[str, str] = {"engine-float32-sf": "sf", "engine-float32-pa": "pa",
                                  "engine-float32-mixing": "mixing",
                                  "engine-float32-mixing-lowrank": "mixing"}
LOW_RANK_MIXING = "engine-float32-mixing-lowrank"
INT8_SLOTS = ("engine-float32-adapter-int8", "engine-float32-mixed8-int8")
BF16_GROUPED = ("engine-float32-adapter-bf16", "engine-float32-mixed8-bf16")
BF16_PATH = "engine-bfloat16"
SYSTEMS = ("hf", "ct2-float32", "ct2-int8", "engine-float32", "engine-int8", BF16_PATH,
           "engine-float32-adapter", "engine-float32-mixed8", *INT8_SLOTS, *BF16_GROUPED,
           *FAMILY_SYSTEMS)
FLOAT32 = ("engine-float32", "engine-float32-adapter", "engine-float32-mixed8",
           *FAMILY_SYSTEMS)
PROFILED = ("engine-float32", "engine-int8", "engine-float32-adapter", "engine-float32-mixed8")


@dataclass(frozen=True)
class BenchConfig:
    size: ModelSize
    batch: int = 32
    source_length: int = 25  # EOS included
    target_length: int = 25  # forced: EOS disabled before it, decoding stops at it
    rounds: int = 9
    threads: int = 2
    bottleneck: int = 256
    mixed_modules: int = 8
    mixing_domains: int = 8  # k of the word-level mixture (encoder side, the default)
    mixing_rank: int = 32  # rank of the differences of the low-rank mixture line


FULL = BenchConfig(speed_model.BASE)
QUICK = replace(FULL, rounds=3)
TINY = BenchConfig(speed_model.TINY, batch=4, source_length=5, target_length=5, rounds=1,
                   bottleneck=8, mixing_rank=2)


def workload(checkpoint: Checkpoint, config: BenchConfig) -> Workload:
    sources = speed_model.source_batch(checkpoint, batch=config.batch,
                                       length=config.source_length)
    return Workload(sources, checkpoint.vocab, config.target_length, checkpoint.pad_id,
                    checkpoint.eos_id)


def build_runners(config: BenchConfig, work_dir: Path, *, lines: Sequence[str] = (),
                  systems: Sequence[str] = SYSTEMS) -> tuple[dict[str, Runner], Workload]:
    """The checkpoint, its conversions and one runner per requested system."""
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        raise ValueError(f"unknown systems {unknown}; known: {', '.join(SYSTEMS)}")
    checkpoint, model = speed_model.build_checkpoint(work_dir / "marian", config.size,
                                                     lines=lines)
    work = workload(checkpoint, config)
    runners: dict[str, Runner] = {}
    if "hf" in systems:
        runners["hf"] = hf_runner(model, work)
    for quantization in ("float32", "int8"):
        name = f"ct2-{quantization}"
        if name in systems:
            out = speed_model.convert_ct2(checkpoint, work_dir / name, quantization=quantization)
            runners[name] = ct2_runner(out, work, compute_type=quantization,
                                       threads=config.threads)
    runners |= engine_runners(config, checkpoint, work, systems)
    return {name: runners[name] for name in systems}, work


def engine_runners(config: BenchConfig, checkpoint: Checkpoint, work: Workload,
                   systems: Sequence[str]) -> dict[str, Runner]:
    files = convert_marian(checkpoint.path)
    runners: dict[str, Runner] = {}
    quantized = host_paths.choose_quantized_engine(host_paths.detect())
    if "engine-int8" in systems:
        runners["engine-int8"] = engine_runner(
            build_engine(files, EngineOptions(int8=True, quantized_engine=quantized)), work,
            [Member(None)])
    if BF16_PATH in systems:
        runners[BF16_PATH] = engine_runner(build_engine(files, EngineOptions(dtype="bfloat16")),
                                           work, [Member(None)])
    slots = max(16, config.mixed_modules)
    for names, options in ((INT8_SLOTS, EngineOptions(slots_per_bank=slots, module_int8=True)),
                           (BF16_GROUPED, EngineOptions(slots_per_bank=slots, module_bf16=True))):
        if not set(names) & set(systems):
            continue
        adapters = build_engine(files, options)
        modules = register_adapters(adapters, config.mixed_modules,
                                    bottleneck=config.bottleneck)
        runners[names[0]] = engine_runner(adapters, work, [Member(modules[0])])
        runners[names[1]] = engine_runner(adapters, work,
                                          mixed_members(modules, batch=config.batch))
    if not set(FLOAT32) & set(systems):
        return runners
    # One engine for every float32 line. A mixing module holds k copies of the
    # projections (151M parameters at k = 8, Transformer-base): its family caps its bank
    # at `bank_slots` (2) slots, and one module fits.
    engine = build_engine(files, EngineOptions(slots_per_bank=slots))
    modules = register_adapters(engine, config.mixed_modules, bottleneck=config.bottleneck)
    runners["engine-float32"] = engine_runner(engine, work, [Member(None)])
    runners["engine-float32-adapter"] = engine_runner(engine, work, [Member(modules[0])])
    runners["engine-float32-mixed8"] = engine_runner(
        engine, work, mixed_members(modules, batch=config.batch))
    for seed, (system, family) in enumerate(FAMILY_SYSTEMS.items(), start=200):
        if system in systems:  # only what was asked for: a mixing module is large
            module_id = register_override(engine, family, seed=seed, name=f"{system}-0",
                                          **system_options(system, config))
            runners[system] = engine_runner(engine, work, [Member(module_id)])
    return runners


def default_systems(host: host_paths.HostFeatures) -> list[str]:
    """Every system; the bfloat16 path only where the CPU runs bfloat16 natively (elsewhere
    torch emulates it and the server refuses the path)."""
    return [name for name in SYSTEMS if name != BF16_PATH or host.native_bf16]


def family_options(family: str, config: BenchConfig) -> dict[str, Any]:
    """The benchmarked options of a weight-override family (the family's defaults, and for
    the mixture its k domain names)."""
    if mixes_domains(family):
        return {"domains": [f"domain-{i}" for i in range(config.mixing_domains)],
                "sides": "encoder"}
    return {}


def system_options(system: str, config: BenchConfig) -> dict[str, Any]:
    """The module options of a family system: its family's, plus the low-rank line's rank."""
    options = family_options(FAMILY_SYSTEMS[system], config)
    if system == LOW_RANK_MIXING:
        options["rank"] = config.mixing_rank
    return options


def run_benchmark(config: BenchConfig, work_dir: Path, *, lines: Sequence[str] = (),
                  systems: Sequence[str] = SYSTEMS,
                  verbose: bool = False) -> tuple[list[Row], dict[str, Runner]]:
    runners, work = build_runners(config, work_dir, lines=lines, systems=systems)
    rows = measure(runners, rounds=config.rounds, batch=work.batch,
                   target_length=config.target_length, decodes=DECODES, verbose=verbose)
    return rows, runners


def describe(config: BenchConfig) -> str:
    size = config.size
    return (f"Marian Transformer ({size.layers}+{size.layers} layers, d={size.d_model}, "
            f"{size.heads} heads, FFN {size.ffn}, {size.vocab} vocabulary), random weights; "
            f"batch {config.batch}, {config.source_length} source and exactly "
            f"{config.target_length} target tokens per sentence; {config.threads} threads "
            f"(torch and CTranslate2 intra_threads); adapters: residual, bottleneck "
            f"{config.bottleneck}; mixed batch: {config.mixed_modules} adapters; sf: own K/V "
            f"of every attention + FFN output matrix; pa: own Q/K/V/O of every attention; "
            f"mixing: one word-level mixture of {config.mixing_domains} domains over the "
            f"encoder's q/k/v/o/fc1/fc2, mixing-lowrank: the same with rank-"
            f"{config.mixing_rank} differences (sf, pa, mixing: backbone copies + noise, "
            f"one module for every row).")


def metadata(config: BenchConfig, *, mode: str, data: str) -> dict[str, Any]:
    import ctranslate2
    import transformers

    return {"mode": mode, "description": describe(config), "config": asdict(config),
            "spm_text": data, "decodes": DECODES,
            "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": {"platform": platform.platform(), "processor": platform.processor(),
                        "cpu_count": os.cpu_count(), "python": platform.python_version()},
            "host": current_host().as_dict(), "ctranslate2": ctranslate2_info(),
            "versions": {"torch": torch.__version__, "ctranslate2": ctranslate2.__version__,
                         "transformers": transformers.__version__},
            "torch_threads": torch.get_num_threads()}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed.engine.engine_speed",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="corpora root (../shared/data)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK.rounds} rounds")
    parser.add_argument("--tiny", action="store_true", help="toy sizes: checks the code path")
    parser.add_argument("--profile", action="store_true", help="write engine_profile.txt")
    parser.add_argument("--rounds", type=int, help="override the number of timed rounds")
    parser.add_argument("--threads", type=int, help="override the torch and CTranslate2 "
                        "threads (2); 1 measures more steadily on a machine shared with "
                        "other work")
    parser.add_argument("--systems", help="comma-separated (default: all; engine-bfloat16 "
                        "only on CPUs with native bfloat16)")
    parser.add_argument("--out", type=Path, help="results directory (default: results/; "
                                                 "--tiny: results/tmp/, git-ignored)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    config = TINY if args.tiny else QUICK if args.quick else FULL
    config = replace(config, rounds=args.rounds) if args.rounds else config
    config = replace(config, threads=args.threads) if args.threads else config
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    torch.set_num_threads(config.threads)
    quiet_libraries()
    lines = training_lines(args.data)
    systems = default_systems(host_paths.detect()) if args.systems is None else [
        name.strip() for name in args.systems.split(",") if name.strip()]
    out = results_dir(args.out, tiny=args.tiny)
    meta = metadata(config, mode=mode, data=f"{args.data} ({len(lines)} lines)" if lines
                    else "synthetic")
    print(describe(config), flush=True)
    with tempfile.TemporaryDirectory(prefix="engine-speed-") as scratch:
        rows, runners = run_benchmark(config, Path(scratch), lines=lines, systems=systems,
                                      verbose=True)
        paths = write_results(rows, meta, out)
        if args.profile:
            chosen = {name: runners[name] for name in PROFILED if name in runners}
            paths.append(write_profile(chosen, out / "engine_profile.txt",
                                       header=describe(config)))
    print(markdown(rows, check_targets(rows), meta))
    print("wrote " + ", ".join(str(path) for path in paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
