"""What a batch's mix of lengths costs: the engine offline, same sentences, batches cut by
the scheduler's lookahead (server/scheduling/batching.py) at 1, 2 and 3 budgets.

A batch decodes until its longest sentence ends, and each step has a cost whatever its
rows (the weights read, the per-step search work), so batches of similar lengths spend
fewer steps per sentence. Sentences arrive in a shuffled order (as a server's queue
fills), every sentence runs with the generic backbone at the server's default beam and
batch budget, and the lookaheads are interleaved over rounds; the median of the rounds is
reported.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.report_files import results_dir, write_report
from benchmarks.sentence_runs import sentence_benchmark_args
from benchmarks.speed.data import read_test_sets
from benchmarks.speed.model import synthetic_lines
from benchmarks.speed.serve.config import ServeConfig
from benchmarks.speed.serve.offline import pack, text_jobs
from benchmarks.speed.serve.store import backbone_files, seed_store
from server.decoding.search import SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, Member, SentenceJob

LOOKAHEADS = (1, 2, 3)


def sentences(data: Path | None, *, count: int, seed: int) -> list[str]:
    """`count` test-set sentences in a shuffled order (synthetic ones without data)."""
    texts = [t for texts in read_test_sets(data, per_set=count).values() for t in texts]
    texts = texts or synthetic_lines(count, seed=seed)
    random.Random(seed).shuffle(texts)
    return texts[:count]


def timed(engine: Engine, jobs: Sequence[SentenceJob], batches: Sequence[list[int]],
          options: SearchOptions) -> float:
    start = time.perf_counter()
    for batch in batches:
        engine.translate([jobs[i] for i in batch], options)
    return time.perf_counter() - start


def measure(engine: Engine, texts: Sequence[str], config: ServeConfig, *,
            rounds: int) -> list[dict[str, float]]:
    options = SearchOptions(beam_size=config.beam_size)
    owned = text_jobs(engine, list(enumerate(texts)), [(Member(None),)] * len(texts),
                      length_ratio=config.length_ratio, max_length=config.max_length)
    jobs = [job for _, job in owned]
    plans = {k: pack(jobs, options, max_batch_tokens=config.max_batch_tokens,
                     max_modules=config.engine.slots_per_bank, lookahead=k)
             for k in LOOKAHEADS}
    timed(engine, jobs, plans[1][:1], options)  # warm-up
    seconds: dict[int, list[float]] = {k: [] for k in LOOKAHEADS}
    for number in range(rounds):
        for k in LOOKAHEADS[number % len(LOOKAHEADS):] + LOOKAHEADS[:number % len(LOOKAHEADS)]:
            seconds[k].append(timed(engine, jobs, plans[k], options))
    base = statistics.median(seconds[1])
    return [{"lookahead": k, "batches": len(plans[k]),
             "sentences_per_batch": len(jobs) / len(plans[k]),
             "ms_per_sentence": 1000 * statistics.median(seconds[k]) / len(jobs),
             "cost_vs_lookahead_1": statistics.median(seconds[k]) / base} for k in LOOKAHEADS]


def markdown(rows: Sequence[dict[str, float]], description: str) -> str:
    lines = ["# Batch lengths: the scheduler's lookahead, offline", "", description, "",
             "| lookahead | batches | sentences / batch | ms / sentence | cost vs 1 |",
             "|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['lookahead']:.0f} | {r['batches']:.0f} | {r['sentences_per_batch']:.1f} "
              f"| {r['ms_per_sentence']:.2f} | {r['cost_vs_lookahead_1']:.2f}x |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = sentence_benchmark_args("python -m benchmarks.speed.batching.batch_lengths", __doc__,
                                   argv)
    count, rounds = (40, 1) if args.tiny else (args.sentences, args.rounds)
    config = ServeConfig()
    texts = sentences(args.data, count=count, seed=0)
    with tempfile.TemporaryDirectory(prefix="batch-lengths-") as scratch:
        spec = seed_store(Path(scratch) / "store", tiny=args.tiny, data=args.data)
        engine = build_engine(backbone_files(spec), config.engine_options())
        rows = measure(engine, texts, config, rounds=rounds)
    description = (f"{'Toy' if args.tiny else 'Default'} model, {len(texts)} shuffled "
                   f"sentences, beam {config.beam_size}, budget {config.max_batch_tokens} "
                   f"tokens, median of {rounds} interleaved rounds "
                   f"(`python -m benchmarks.speed.batching.batch_lengths --data {args.data}`).")
    text = markdown(rows, description)
    write_report(results_dir(args.out, tiny=args.tiny), "batch_lengths",
                 {"description": description, "rows": rows}, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
