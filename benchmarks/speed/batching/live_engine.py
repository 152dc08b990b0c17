"""Continuous against static batching at the engine level, no server (issue #45).

    python -m benchmarks.speed.batching.live_engine [--data DIR] [--quick] [--rounds N] [--profile]

The built-in default backbone (float32, beam 4 as served), two workloads of sentences cut
from the en-fr test sets' words (synthetic words without `--data`): *uniform* (every
sentence 24 to 32 source tokens) and *mixed* (1 to 80 tokens, uniform in tokens), all
queued at once. Both paths decode the same sentences under the same token budget (source
tokens x beam, the scheduler's `max_batch_tokens`):

- static: batches cut in arrival order up to the budget, each run to its longest sentence
  (`Engine.translate`, what the static scheduler does);
- live: one `LiveDecoder`; before each step the waiting sentences join while the live
  rows leave budget free, finished sentences leave at once.

Times are CPU seconds of the process (`--threads`, default 1: the host is shared, so
wall time mostly measures the neighbours). Rounds interleave the paths (which goes first
alternates) and every ratio is the median over rounds, so load drifts fall on both.
Both paths must give the same hypotheses (checked). `--profile` writes cProfile's top
functions of one live run of the mixed workload to results/tmp/live_engine_profile.txt.

Writes results/live_engine.json and .md.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import platform
import pstats
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.locations import DEFAULT_DATA, RESULTS_DIR
from benchmarks.report_files import write_report, write_stamped
from benchmarks.speed.data import read_test_sets
from benchmarks.speed.model import quiet_libraries, synthetic_lines
from benchmarks.speed.serve.store import backbone_files, seed_default_store
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, Member, SentenceJob
from server.engine.live import LiveDecoder

BUDGET = 4096  # the scheduler's default max_batch_tokens
OPTIONS = SearchOptions(beam_size=4)
WORKLOADS = {"uniform": (24, 32), "mixed": (1, 80)}


def make_jobs(engine: Engine, words: Sequence[str], count: int, lengths: tuple[int, int],
              *, seed: int) -> list[SentenceJob]:
    rng = random.Random(seed)
    encode: Callable[[list[str]], list[list[int]]] = engine.source_tokenizer.encode
    jobs: list[SentenceJob] = []
    while len(jobs) < count:
        start = rng.randrange(len(words))
        wanted = rng.randint(*lengths)
        ids = encode([" ".join(words[start: start + wanted])])[0]
        while len(ids) > wanted and len(ids) > 1:  # trim to the drawn length, EOS kept
            ids = ids[: wanted - 1] + ids[-1:]
        if lengths[0] <= len(ids) <= lengths[1]:
            jobs.append(SentenceJob(ids, (Member(None),), engine.max_length(len(ids))))
    return jobs


def cost(job: SentenceJob) -> int:
    return len(job.source_ids) * OPTIONS.beam_size


def run_static(engine: Engine, jobs: Sequence[SentenceJob]) -> list[list[Hypothesis]]:
    out: list[list[Hypothesis]] = []
    batch: list[SentenceJob] = []
    for job in jobs:
        if batch and sum(map(cost, batch)) + cost(job) > BUDGET:
            out += engine.translate(batch, OPTIONS)
            batch = []
        batch.append(job)
    return out + engine.translate(batch, OPTIONS)


def run_live(engine: Engine, jobs: Sequence[SentenceJob]) -> list[list[Hypothesis]]:
    decoder = LiveDecoder(engine, OPTIONS)
    results: dict[int, list[Hypothesis]] = {}
    index_of: dict[int, int] = {}
    live_cost: dict[int, int] = {}
    waiting = 0
    while len(results) < len(jobs):
        joining: list[int] = []
        free = BUDGET - sum(live_cost.values())
        while waiting < len(jobs) and (cost(jobs[waiting]) <= free or not live_cost
                                       and not joining):
            free -= cost(jobs[waiting])
            joining.append(waiting)
            waiting += 1
        for ticket, index in zip(decoder.join([jobs[i] for i in joining]), joining,
                                 strict=True):
            index_of[ticket] = index
            live_cost[ticket] = cost(jobs[index])
        for ticket, hypotheses in decoder.step():
            results[index_of[ticket]] = hypotheses
            del live_cost[ticket]
    return [results[i] for i in range(len(jobs))]


def timed(run: Callable[[], list[list[Hypothesis]]]) -> tuple[float, list[list[Hypothesis]]]:
    """The run's CPU seconds (this process, every thread): on a shared host the wall
    clock mostly measures the neighbours; with `--threads 1` CPU time is the work."""
    started = time.process_time()
    out = run()
    return time.process_time() - started, out


def tokens_of(results: Sequence[Sequence[Hypothesis]]) -> int:
    return sum(len(r[0].tokens) for r in results)


def measure(engine: Engine, jobs: Sequence[SentenceJob], rounds: int) -> dict[str, Any]:
    runs = {"static": lambda: run_static(engine, jobs), "live": lambda: run_live(engine, jobs)}
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    outputs: dict[str, list[list[Hypothesis]]] = {}
    for number in range(rounds):
        order = list(runs) if number % 2 == 0 else list(reversed(runs))
        for name in order:
            took, outputs[name] = timed(runs[name])
            seconds[name].append(took)
    same = sum(a[0].tokens == b[0].tokens
               for a, b in zip(outputs["static"], outputs["live"], strict=True))
    tokens = tokens_of(outputs["static"])
    ratios = [s / c for s, c in zip(seconds["static"], seconds["live"], strict=True)]
    return {"sentences": len(jobs), "target_tokens": tokens, "same_best": same,
            "seconds": seconds,
            "tokens_per_s": {n: tokens / statistics.median(s) for n, s in seconds.items()},
            "live_over_static": statistics.median(ratios)}


def profile_live(engine: Engine, jobs: Sequence[SentenceJob], path: Path) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    run_live(engine, jobs)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    stats.sort_stats(pstats.SortKey.TIME).print_stats(30)
    stats.sort_stats(pstats.SortKey.CUMULATIVE).print_stats(30)
    write_stamped(path, out.getvalue())


def report(results: dict[str, dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = ["# Continuous vs static batching, engine level", "",
             f"{meta['when']} · {meta['host']} · torch threads {meta['threads']} · "
             f"{meta['rounds']} interleaved rounds, medians · default backbone, float32, "
             f"beam {OPTIONS.beam_size}, budget {BUDGET} tokens", "",
             "| workload | sentences | target tokens | static tok/CPU-s | live tok/CPU-s | "
             "live / static | same best |", "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['sentences']} | {r['target_tokens']} | "
                     f"{r['tokens_per_s']['static']:.0f} | {r['tokens_per_s']['live']:.0f} | "
                     f"{r['live_over_static']:.2f}x | {r['same_best']}/{r['sentences']} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--quick", action="store_true", help="fewer sentences and rounds")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    quiet_libraries()
    torch.set_num_threads(args.threads)
    rounds = 3 if args.quick else args.rounds
    count = args.sentences or (48 if args.quick else 160)
    sets = read_test_sets(args.data if args.data.is_dir() else None, per_set=200)
    lines = [t for texts in sets.values() for t in texts] or synthetic_lines(400, seed=5)
    words = " ".join(lines).split()
    with tempfile.TemporaryDirectory(prefix="nmt-live-engine-") as scratch:
        engine = build_engine(backbone_files(seed_default_store(Path(scratch) / "store")))
    workloads = {name: make_jobs(engine, words, count, span, seed=7)
                 for name, span in WORKLOADS.items()}
    run_live(engine, workloads["uniform"][:8])  # warm-up
    run_static(engine, workloads["uniform"][:8])
    if args.profile:
        profile_live(engine, workloads["mixed"], args.out / "tmp" / "live_engine_profile.txt")
        return 0
    results = {name: measure(engine, jobs, rounds) for name, jobs in workloads.items()}
    meta = {"when": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "host": platform.node(), "threads": torch.get_num_threads(), "rounds": rounds}
    paths = write_report(args.out, "live_engine", meta | {"results": results},
                         report(results, meta))
    print(paths[-1].read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
