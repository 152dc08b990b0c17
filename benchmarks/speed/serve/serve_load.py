"""Serving throughput and latency of a live server, against the engine offline.

    python -m benchmarks.speed.serve.serve_load [--data DIR] [--quick] [--tiny] [--levels 1,4,16]
                                    [--beam-size N] [--front-cpus N] [--static]
                                    [--out DIR]

1. seed a temporary store: the package's built-in artifacts layered under an empty root
   (what `python -m server` serves out of the box), or with `--tiny` a toy backbone and
   three random adapters (no classifier: "auto" then means the plain backbone);
2. start `python -m server` on 127.0.0.1 and a free port, wait for /health/ready;
3. draw requests once from the en-fr test sets of `--data` (synthetic text without it):
   single /translate and /translate/batch requests, domains mixed (explicit, "auto",
   "generic"); warm the server up;
4. for each concurrency level: closed-loop clients (aiohttp), bounded by a
   request count and a duration; throughput (sentences/s, target tokens/s counted with the
   backbone's target tokenizer), p50/p95/p99 latency, errors by code;
5. translate the saturation level's inputs with the engine in this process (same store,
   routing, options and batch budget); then, the server still up, run `pairs` rounds of
   the saturation level served again (longer: `round_requests`, so that the ends of its
   steady window weigh less) followed by the offline engine on that round's inputs, and
   report served / offline as the median of the rounds' ratios (target >= 0.95x, issue
   #23): one served and one offline run minutes apart each meet their own phase of a
   noisy host.

`--front-cpus N` serves with the server's CPU placement (`NMT_EXECUTION__FRONT_CPUS`,
server/execution/placement.py): the load generator then runs on the front's CPUs, and the offline
engine on the engine's, with as many threads as the server's engine.

Writes results/serve_load.json, .meta.json and .md (`--front-cpus N`:
serve_load-front-cpus-N.*; `--tiny`: results/tmp/).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import platform
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from benchmarks.live_server import live_server
from benchmarks.report_files import results_dir
from benchmarks.speed.data import read_test_sets
from benchmarks.speed.model import quiet_libraries
from benchmarks.speed.serve.config import LoadPlan, ServeConfig, choose_plan, load_arguments
from benchmarks.speed.serve.cpu_placement import on_cpus, placement_note
from benchmarks.speed.serve.loadgen import (
    LevelRun,
    LoadRequest,
    build_requests,
    run_level,
    served_domains,
    warm_up,
)
from benchmarks.speed.serve.loadstats import (
    LevelStats,
    OfflineStats,
    Pair,
    TokenCounter,
    batch_shape,
    markdown,
    saturation,
    served_speed,
    summarise,
    write_results,
)
from benchmarks.speed.serve.offline import (
    OfflineItem,
    offline_engine,
    offline_items,
    register_missing,
    run_offline,
)
from benchmarks.speed.serve.store import (
    StoreSpec,
    backbone_files,
    load_module,
    seed_store,
    text_sets,
    token_counter,
)
from server.engine.engine import Engine
from server.execution.allocator import keep_freed_memory
from server.execution.placement import Placement, plan_placement
from server.execution.settings import ExecutionSettings


async def run_levels(base_url: str, requests: Sequence[LoadRequest], plan: LoadPlan, *,
                     timeout_s: float) -> list[LevelRun]:
    runs: list[LevelRun] = []
    for concurrency in plan.levels:
        run = await run_level(base_url, requests, concurrency=concurrency,
                              max_requests=plan.max_requests, max_seconds=plan.max_seconds,
                              timeout_s=timeout_s)
        failed = sum(outcome.status != 200 for outcome in run.outcomes)
        print(f"  {concurrency:>3} clients: {len(run.outcomes)} requests in {run.wall_s:.1f} s, "
              f"{failed} failed", flush=True)
        runs.append(run)
    return runs


@dataclass
class Served:
    """Everything one live server measured."""

    requests: list[LoadRequest]
    domains: list[str]
    levels: list[LevelStats]
    offline: OfflineStats
    pairs: list[Pair]


def serve(spec: StoreSpec, sets: dict[str, list[str]], plan: LoadPlan, config: ServeConfig,
          *, log: Path, count_tokens: TokenCounter, seed: int = 0) -> Served:
    """Start the server, draw the requests over the served domains, run every level, then
    the offline engine on the saturation level's inputs and the interleaved rounds."""
    timeout_s = config.request_timeout_s + 30
    placement = plan_placement(config.execution.front_cpus)
    front = placement.front if placement else None
    with live_server(spec.environment() | config.environment(), log) as base_url:
        served = served_domains(base_url)
        requests = build_requests(sets, served, count=plan.distinct_requests, seed=seed)
        print(f"server ready at {base_url}; domains: {', '.join(served) or '(none)'}",
              flush=True)
        warm_up(base_url, requests, timeout_s=timeout_s)
        with on_cpus(front):
            runs = asyncio.run(run_levels(base_url, requests, plan, timeout_s=timeout_s))
        levels = [summarise(run, requests, count_tokens=count_tokens) for run in runs]
        best = max(range(len(levels)), key=lambda i: served_speed(levels[i]))
        concurrency = runs[best].concurrency
        print(f"offline engine on the {concurrency}-client inputs", flush=True)
        with offline_cpus(placement):
            engine, items = offline_setup(spec, runs[best], requests, config)
            first = offline_run(engine, items, config, max_seconds=plan.offline_seconds,
                                count_tokens=count_tokens)
        pairs: list[Pair] = []
        for number in range(1, plan.pairs + 1):
            before = batch_shape(base_url)
            with on_cpus(front):
                again = asyncio.run(run_level(base_url, requests, concurrency=concurrency,
                                              max_requests=plan.round_requests,
                                              max_seconds=plan.max_seconds,
                                              timeout_s=timeout_s))
            batches = batch_shape(base_url).since(before)
            level = summarise(again, requests, count_tokens=count_tokens)
            items = offline_items(again, requests)
            register_missing(engine, items, lambda name, version: load_module(spec, name,
                                                                              version))
            with offline_cpus(placement):
                offline = offline_run(engine, items, config, max_seconds=plan.offline_seconds,
                                      count_tokens=count_tokens)
            pairs.append(Pair.of(level, offline, batches))
            print(f"  round {number}/{plan.pairs}: served {pairs[-1].served_tokens_per_s:,.1f} "
                  f"tokens/s, offline {pairs[-1].offline_tokens_per_s:,.1f}: "
                  f"{pairs[-1].ratio:.2f}x", flush=True)
    return Served(requests, served, levels, first, pairs)


@contextlib.contextmanager
def offline_cpus(placement: Placement | None) -> Iterator[None]:
    """The offline engine where the server's runs: on its CPUs, with as many threads."""
    if placement is None:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(len(placement.engine))
    try:
        with on_cpus(placement.engine):
            yield
    finally:
        torch.set_num_threads(threads)


def offline_setup(spec: StoreSpec, run: LevelRun, requests: Sequence[LoadRequest],
                  config: ServeConfig) -> tuple[Engine, list[OfflineItem]]:
    """An engine in this process and the inputs `run` served successfully; the process
    gets the server's allocator settings, as the server's does."""
    if config.execution.keep_freed_memory:
        keep_freed_memory()
    items = offline_items(run, requests)
    engine = offline_engine(backbone_files(spec), items,
                            lambda name, version: load_module(spec, name, version),
                            config.engine_options())
    return engine, items


def offline_run(engine: Engine, items: Sequence[OfflineItem], config: ServeConfig, *,
                max_seconds: float, count_tokens: TokenCounter) -> OfflineStats:
    return run_offline(engine, items, beam_size=config.beam_size,
                       length_ratio=config.length_ratio, max_length=config.max_length,
                       max_batch_tokens=config.max_batch_tokens,
                       max_modules=config.engine.slots_per_bank,
                       lookahead=config.lookahead_batches, max_seconds=max_seconds,
                       count_tokens=count_tokens)


def offline(spec: StoreSpec, run: LevelRun, requests: Sequence[LoadRequest],
            config: ServeConfig, *, max_seconds: float,
            count_tokens: TokenCounter) -> OfflineStats:
    """The engine in this process, on the inputs `run` served successfully."""
    engine, items = offline_setup(spec, run, requests, config)
    return offline_run(engine, items, config, max_seconds=max_seconds,
                       count_tokens=count_tokens)


def metadata(plan: LoadPlan, config: ServeConfig, *, mode: str, data: str,
             served: Sequence[str]) -> dict[str, Any]:
    return {"mode": mode, "plan": asdict(plan), "server": config.environment(),
            "engine": config.engine.model_dump(), "served_domains": list(served), "texts": data,
            "description": (f"Live `python -m server` on loopback, {mode} plan: clients "
                            f"{', '.join(map(str, plan.levels))}; at most "
                            f"{plan.max_requests} requests or {plan.max_seconds:g} s per "
                            f"level; beam {config.beam_size}; batch budget "
                            f"{config.max_batch_tokens} tokens; texts: {data}."
                            + placement_note(config)),
            "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(),
                        "python": platform.python_version()},
            "versions": {"torch": torch.__version__}, "torch_threads": torch.get_num_threads()}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = load_arguments("python -m benchmarks.speed.serve.serve_load", __doc__)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    mode, plan = choose_plan(args)
    config = ServeConfig(beam_size=args.beam_size,
                         execution=ExecutionSettings(front_cpus=args.front_cpus),
                         continuous=not args.static)
    out = results_dir(args.out, tiny=args.tiny)
    stem = f"serve_load-front-cpus-{args.front_cpus}" if args.front_cpus else "serve_load"
    stem += "-static" if args.static else ""
    quiet_libraries()
    sets = text_sets(args.data, per_set=plan.texts_per_set)
    described = (f"{args.data} en-fr test sets" if read_test_sets(args.data, per_set=1)
                 else "synthetic") + f" ({sum(map(len, sets.values()))} texts)"
    with tempfile.TemporaryDirectory(prefix="serve-load-") as scratch:
        spec = seed_store(Path(scratch) / "store", tiny=args.tiny, data=args.data)
        result = serve(spec, sets, plan, config, seed=args.seed,
                       log=Path(scratch) / "server.log", count_tokens=token_counter(spec))
    meta = metadata(plan, config, mode=mode, data=described, served=result.domains)
    paths = write_results(result.levels, result.offline, meta, out, pairs=result.pairs,
                          stem=stem)
    print(markdown(result.levels, result.offline,
                   saturation(result.levels, result.offline, pairs=result.pairs), meta,
                   result.pairs))
    print("wrote " + ", ".join(str(path) for path in paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
