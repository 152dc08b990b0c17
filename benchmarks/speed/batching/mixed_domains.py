"""What mixing domains in a batch costs on the served model, by how adapters are held.

    python -m benchmarks.speed.batching.mixed_domains [--data DIR] [--sentences 600] [--rounds 5]
                                             [--tiny] [--out DIR]

Test-set sentences of every set (the 7 domains and the open genres, shuffled; each with
its domain's module, the plain backbone for a genre) are packed as the scheduler packs a
full queue (`benchmarks/speed/serve/offline.py: pack`, lookahead 2), so batches mix domains as
served ones do. The same batches are decoded, greedy and beam 4, by three engines of the
served backbone and modules: adapters in float32 (one matmul per module), in int8 banks
(`EngineOptions.module_int8`, grouped through server/engine/int8_groups.c where it
builds), grouped in bfloat16 (`module_bf16`). Rounds interleave the engines; the medians
are reported. Writes results/mixed_domains.{json,md} (`--tiny`: a toy store, results/tmp/).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.report_files import results_dir, write_report
from benchmarks.sentence_runs import sentence_benchmark_args
from benchmarks.speed.data import read_test_sets
from benchmarks.speed.model import synthetic_lines
from benchmarks.speed.serve.config import ServeConfig
from benchmarks.speed.serve.offline import pack, text_jobs
from benchmarks.speed.serve.store import StoreSpec, backbone_files, seed_store
from server.decoding.search import SearchOptions
from server.engine import int8_groups
from server.engine.artifacts import build_engine, module_params
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob

VARIANTS: dict[str, EngineOptions] = {
    "float32": EngineOptions(host_capacity=64, module_int8=False),
    "int8": EngineOptions(host_capacity=64, module_int8=True),
    "bfloat16": EngineOptions(host_capacity=64, module_bf16=True)}
BEAMS = (4, 1)


def labelled_sentences(data: Path | None, *, count: int,
                       seed: int) -> list[tuple[str, str]]:
    """`count` (set, sentence) pairs from every test set, shuffled (synthetic sentences
    spread over three domains without data)."""
    sets = read_test_sets(data, per_set=count)
    if not sets:
        sets = {domain: synthetic_lines(count, seed=seed + i)
                for i, domain in enumerate(("medical", "law", "it"))}
    pairs = [(name, text) for name, texts in sets.items() for text in texts]
    random.Random(seed).shuffle(pairs)
    return pairs[:count]


def engines(spec: StoreSpec) -> tuple[dict[str, Engine], list[str]]:
    """One engine per variant with every active domain's module registered."""
    files = backbone_files(spec)
    built = {name: build_engine(files, options) for name, options in VARIANTS.items()}
    with spec.open() as store:
        domains = sorted(store.active_domains())
        for domain in domains:
            loaded = store.load("module", domain)
            for engine in built.values():
                engine.register_module(domain, dict(loaded.manifest.config),
                                       module_params(loaded.files))
    return built, domains


def decode_all(engine: Engine, jobs: Sequence[SentenceJob], batches: Sequence[list[int]],
               options: SearchOptions) -> float:
    start = time.perf_counter()
    for batch in batches:
        engine.translate([jobs[i] for i in batch], options)
    return time.perf_counter() - start


def measure(built: dict[str, Engine], domains: Sequence[str],
            sentences: Sequence[tuple[str, str]], *, rounds: int) -> list[dict[str, Any]]:
    config = ServeConfig()
    members = [(Member(name if name in domains else None),) for name, _ in sentences]
    texts = list(enumerate(text for _, text in sentences))
    rows: list[dict[str, Any]] = []
    for beam in BEAMS:
        options = SearchOptions(beam_size=beam)
        jobs = {name: [job for _, job in text_jobs(engine, texts, members,
                                                   length_ratio=config.length_ratio,
                                                   max_length=config.max_length)]
                for name, engine in built.items()}
        batches = pack(jobs["float32"], options, max_batch_tokens=config.max_batch_tokens,
                       max_modules=config.engine.slots_per_bank, lookahead=2)
        modules = [len({jobs["float32"][i].members[0].module_id for i in batch})
                   for batch in batches]
        for name, engine in built.items():  # warm-up
            decode_all(engine, jobs[name], batches[:1], options)
        seconds: dict[str, list[float]] = {name: [] for name in built}
        names = list(built)
        for number in range(rounds):
            for name in names[number % len(names):] + names[:number % len(names)]:
                seconds[name].append(decode_all(built[name], jobs[name], batches, options))
        base = statistics.median(seconds["float32"])
        for name in built:
            median = statistics.median(seconds[name])
            rows.append({"beam": beam, "variant": name, "batches": len(batches),
                         "modules_per_batch": statistics.mean(modules),
                         "seconds": median, "speed_vs_float32": base / median})
    return rows


def markdown(rows: Sequence[dict[str, Any]], description: str) -> str:
    lines = ["# Mixed-domain batches on the served model, by adapter precision", "",
             description, "",
             "| beam | adapters | batches | modules / batch | seconds | speed vs float32 |",
             "|---:|---|---:|---:|---:|---:|"]
    lines += [f"| {r['beam']} | {r['variant']} | {r['batches']} | "
              f"{r['modules_per_batch']:.1f} | {r['seconds']:.2f} | "
              f"{r['speed_vs_float32']:.3f}x |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = sentence_benchmark_args("python -m benchmarks.speed.batching.mixed_domains", __doc__,
                                   argv)
    count, rounds = (24, 1) if args.tiny else (args.sentences, args.rounds)
    torch.set_num_threads(2)
    sentences = labelled_sentences(args.data, count=count, seed=0)
    with tempfile.TemporaryDirectory(prefix="mixed-domains-") as scratch:
        spec = seed_store(Path(scratch) / "store", tiny=args.tiny, data=args.data)
        built, domains = engines(spec)
        rows = measure(built, domains, sentences, rounds=rounds)
    kernel = "built" if int8_groups.available() else "not built (int8: one call per module)"
    description = (f"{'Toy' if args.tiny else 'Default'} model, {len(sentences)} shuffled "
                   f"test sentences of {len({name for name, _ in sentences})} sets, batches "
                   f"as the scheduler packs a full queue, 2 torch threads, median of "
                   f"{rounds} interleaved rounds; grouped int8 kernel {kernel} "
                   f"(`python -m benchmarks.speed.batching.mixed_domains --data {args.data}`).")
    text = markdown(rows, description)
    write_report(results_dir(args.out, tiny=args.tiny), "mixed_domains",
                 {"description": description, "rows": rows}, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
