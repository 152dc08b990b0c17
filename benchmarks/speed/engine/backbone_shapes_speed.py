"""CPU decoding speed of candidate backbone shapes for the GPU-trained default (issue #47),
side by side with the shape it replaces, in one run.

    python -m benchmarks.speed.engine.backbone_shapes_speed [--rounds N] [--threads N] [--tiny]
                                                     [--shapes a,b] [--int8] [--out DIR]

Each shape (trainer/gpu/shape.py) gets random weights and the recipe's joint sentencepiece
vocabulary; every engine decodes the same batch of sources (random ids, EOS last) to exactly
`target_length` tokens, greedy and beam 4, in rounds that interleave the shapes
(benchmarks/speed/engine/measure.py): random weights cost what trained ones do. `--int8` adds each
shape under `EngineOptions(int8=True)` (`NMT_ENGINE__INT8`). Writes
results/backbone_shapes_speed.json and .md with each shape's speed relative to today's.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
from collections.abc import Sequence
from pathlib import Path

import torch

from benchmarks.locations import REPO, RESULTS_DIR
from benchmarks.report_files import write_report
from benchmarks.speed.engine.measure import DECODES, Row, measure
from benchmarks.speed.engine.systems import Runner, Workload, engine_runner
from contract.backbone import BackboneConfig
from server.engine.backbone import Backbone
from server.engine.engine import Engine, EngineOptions, Member
from server.engine.tokenizer import Tokenizer
from trainer.gpu.shape import CANDIDATES, TODAY, parameter_count

BUILTIN_SPM = REPO / "model_store" / "builtin" / "backbones" / "default-en-fr"
BASELINE = "today-256-6+3"


def spm_bytes() -> bytes:
    """The recipe's joint sentencepiece (the published backbone's source.spm)."""
    found = sorted(BUILTIN_SPM.glob("v*/source.spm"))
    if not found:
        raise FileNotFoundError(f"no source.spm under {BUILTIN_SPM}")
    return found[-1].read_bytes()


def random_engine(config: BackboneConfig, spm: bytes, *, int8: bool, seed: int) -> Engine:
    torch.manual_seed(seed)
    tensors = {k: v.detach().clone() for k, v in Backbone(config).state_dict().items()}
    tokenizer = Tokenizer(spm, vocab=None, eos_id=config.eos_id, unk_id=config.unk_id,
                          pad_id=config.pad_id)
    return Engine(config, tensors, source_tokenizer=tokenizer, target_tokenizer=tokenizer,
                  options=EngineOptions(int8=int8))


def workload(batch: int, source_length: int, target_length: int) -> Workload:
    rng = random.Random(0)
    sources = [[rng.randrange(4, TODAY.src_vocab_size) for _ in range(source_length - 1)]
               + [TODAY.eos_id] for _ in range(batch)]
    return Workload(sources, [], target_length, TODAY.pad_id, TODAY.eos_id)


def run(shapes: Sequence[str], *, int8: bool, rounds: int, batch: int, source_length: int,
        target_length: int) -> list[Row]:
    spm = spm_bytes()
    work = workload(batch, source_length, target_length)
    runners: dict[str, Runner] = {}
    for seed, name in enumerate(shapes):
        for quantized in (False, True) if int8 else (False,):
            label = f"{name}-int8" if quantized else name
            engine = random_engine(CANDIDATES[name], spm, int8=quantized, seed=seed)
            runners[label] = engine_runner(engine, work, [Member(None)])
    return measure(runners, rounds=rounds, batch=batch, target_length=target_length,
                   decodes=DECODES, verbose=True)


def markdown(rows: Sequence[Row], meta: dict[str, object]) -> str:
    base = {r.decode: r.tokens_per_s for r in rows if r.system == BASELINE}
    lines = ["# CPU decoding speed of candidate backbone shapes (random weights)", "",
             "| shape | parameters | float16 MB | int8 MB | decode | tokens/s | vs today |",
             "|---|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        name = r.system.removesuffix("-int8")
        params = parameter_count(CANDIDATES[name])
        lines.append(f"| {r.system} | {params / 1e6:.1f}M | {2 * params / 1e6:.1f} | "
                     f"{params / 1e6:.1f} | {r.decode} | {r.tokens_per_s:.0f} | "
                     f"{r.tokens_per_s / base[r.decode]:.2f}x |")
    lines += ["", f"Run {meta['started_at']} on {meta['machine']}, {meta['threads']} torch "
              f"threads, load average before the run {meta['load_before']}, after "
              f"{meta['load_after']}; batch {meta['batch']}, {meta['source_length']} source and "
              f"exactly {meta['target_length']} target tokens per sentence; median of "
              f"{meta['rounds']} interleaved rounds."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed.engine.backbone_shapes_speed",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=",".join(CANDIDATES))
    parser.add_argument("--int8", action="store_true", help="each shape with int8 too")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--tiny", action="store_true", help="2 short sentences, 1 round "
                        "(checks the code path; its numbers mean nothing)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = sorted(set(shapes) - set(CANDIDATES))
    if unknown or BASELINE not in shapes:
        parser.error(f"shapes must include {BASELINE} and come from {', '.join(CANDIDATES)}"
                     f" (unknown: {unknown})")
    torch.set_num_threads(args.threads)
    batch, source_length, target_length = (2, 6, 5) if args.tiny else (args.batch, 25, 25)
    rounds = 1 if args.tiny else args.rounds
    meta: dict[str, object] = {
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "threads": args.threads, "load_before": round(os.getloadavg()[0], 2),
        "batch": batch, "source_length": source_length, "target_length": target_length,
        "rounds": rounds}
    rows = run(shapes, int8=args.int8, rounds=rounds, batch=batch,
               source_length=source_length, target_length=target_length)
    meta["load_after"] = round(os.getloadavg()[0], 2)
    text = markdown(rows, meta)
    write_report(args.out, "backbone_shapes_speed",
                 {"meta": meta, "rows": [r.to_dict() for r in rows]}, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
