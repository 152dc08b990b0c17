"""Continuous against static batching on mixed-length traffic (issue #45).

    python -m benchmarks.speed.batching.mixed_lengths [--data DIR] [--tiny] [--quick] [--rate R]
                                             [--seconds S] [--rounds N] [--out DIR]
                                             [--device cuda --dtype float16]

1. seed one store (the built-in default model, or `--tiny`: a toy backbone) and start two
   servers on it, identical but for `NMT_SCHEDULER__CONTINUOUS`: static batches and
   continuous batching (the default), on `--device` in `--dtype` (the CPU in float32
   unless told; benchmarks/speed/gpu/gpu_serve_run.sh's `mixed` part runs it on a GPU);
2. sentences of 1 to 80 source tokens, uniform in tokens, cut from the words of the en-fr
   test sets of `--data` (synthetic words without it), one per /translate request
   (domain "generic": every request the same plain backbone);
3. rounds alternate the servers (static then continuous, then the other way round), so
   the shared host's load drifts fall on both: each round sends Poisson arrivals at
   `--rate` requests per second for `--seconds` (open loop: a request leaves at its
   arrival time whatever the answers) and waits for every answer. A rate above a
   server's capacity makes its queue grow, so the round's length measures its capacity;
4. per server: target tokens per second (answered target tokens over first send to last
   answer), latency p50/p95 of short sentences (at most 10 source tokens) and of all,
   statuses; continuous / static ratios side by side.

Writes results/mixed_lengths.json and .md (`--tiny`: results/tmp/).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.live_server import batching_environment, live_server
from benchmarks.report_files import results_dir, write_report
from benchmarks.speed.data import read_test_sets, training_lines
from benchmarks.speed.model import quiet_libraries, synthetic_lines
from benchmarks.speed.serve.loadstats import percentile
from benchmarks.speed.serve.store import seed_default_store, seed_tiny_store, token_counter

SHORT_TOKENS = 10  # "short sentences": at most this many source tokens
MAX_TOKENS = 80
SERVERS = ("static", "continuous")
SETTINGS = {"NMT_SCHEDULER__REQUEST_TIMEOUT_S": "600", "NMT_SCHEDULER__MAX_QUEUE": "100000",
            "NMT_DECODING__BEAM_SIZE": "4"}


def sentences(words: Sequence[str], count: int, tokens: Callable[[str], int], *,
              seed: int) -> list[tuple[str, int]]:
    """`count` (text, source tokens) pairs, lengths uniform in 1..MAX_TOKENS: words are
    appended until the text has its drawn length (or just over it)."""
    rng = random.Random(seed)
    out: list[tuple[str, int]] = []
    for _ in range(count):
        wanted = rng.randint(1, MAX_TOKENS)
        start = rng.randrange(len(words))
        text = words[start]
        position = start + 1
        while tokens(text) < wanted:
            text += " " + words[position % len(words)]
            position += 1
        out.append((text, tokens(text)))
    return out


async def poisson_round(base_url: str, texts: Sequence[tuple[str, int]], *, rate: float,
                        seconds: float, seed: int) -> dict[str, Any]:
    """One round of open-loop Poisson arrivals; per request (source tokens, status,
    latency, translation)."""
    rng = random.Random(seed)
    outcomes: list[tuple[int, int, float, str]] = []
    timeout = aiohttp.ClientTimeout(total=900)
    async with aiohttp.ClientSession(base_url, timeout=timeout) as session:
        async def send(text: str, length: int) -> None:
            started = time.perf_counter()
            try:
                async with session.post("/translate", json={"text": text,
                                                            "domain": "generic"}) as answer:
                    body = await answer.json(content_type=None)
                    status = answer.status
            except (aiohttp.ClientError, TimeoutError):
                body, status = None, 0
            translation = str(body.get("translation", "")) if isinstance(body, dict) else ""
            outcomes.append((length, status, time.perf_counter() - started, translation))

        start = time.perf_counter()
        tasks: list[asyncio.Task[None]] = []
        due = 0.0
        index = 0
        while due < seconds:
            await asyncio.sleep(max(0.0, start + due - time.perf_counter()))
            text, length = texts[index % len(texts)]
            tasks.append(asyncio.create_task(send(text, length)))
            index += 1
            due += rng.expovariate(rate)
        await asyncio.gather(*tasks)
        wall = time.perf_counter() - start
    return {"wall_s": wall, "outcomes": outcomes}


def summarise(rounds: list[dict[str, Any]], count: Callable[[str], int]) -> dict[str, Any]:
    outcomes = [o for r in rounds for o in r["outcomes"]]
    ok = [o for o in outcomes if o[1] == 200]
    statuses: dict[str, int] = {}
    for outcome in outcomes:
        statuses[str(outcome[1])] = statuses.get(str(outcome[1]), 0) + 1
    tokens = sum(count(o[3]) for o in ok)
    wall = sum(r["wall_s"] for r in rounds)
    short = [o[2] for o in ok if o[0] <= SHORT_TOKENS]
    every = [o[2] for o in ok]

    def ms(values: list[float], q: float) -> float | None:
        value = percentile(values, q)
        return None if value is None else round(1000 * value, 1)

    return {"requests": len(outcomes), "statuses": dict(sorted(statuses.items())),
            "target_tokens": tokens, "wall_s": round(wall, 2),
            "tokens_per_s": round(tokens / wall, 1) if wall else 0.0,
            "short_requests": len(short), "short_p50_ms": ms(short, 50),
            "short_p95_ms": ms(short, 95), "p50_ms": ms(every, 50), "p95_ms": ms(every, 95)}


def markdown(results: dict[str, Any]) -> str:
    meta, servers = results["meta"], results["servers"]
    lines = ["# Continuous against static batching, mixed-length traffic", "",
             meta["note"], "", f"Machine load at the end of the run (1/5/15-min load "
             f"average): {meta['load_average']}. Model: {meta['model']}; texts: "
             f"{meta['texts']}; {meta['rounds']} rounds per server of Poisson arrivals at "
             f"{meta['rate']}/s for {meta['seconds']} s; beam 4.", "",
             "| server | requests | statuses | target tokens/s | short p50 ms | short p95 ms "
             "| all p50 ms | all p95 ms |", "|---|---:|---|---:|---:|---:|---:|---:|"]
    for name in SERVERS:
        s = servers[name]
        statuses = ", ".join(f"{k}: {v}" for k, v in s["statuses"].items())
        lines.append(f"| {name} | {s['requests']} | {statuses} | {s['tokens_per_s']} | "
                     f"{s['short_p50_ms']} | {s['short_p95_ms']} | {s['p50_ms']} | "
                     f"{s['p95_ms']} |")
    ratio = results["ratios"]
    lines += ["", f"Continuous / static: tokens/s {ratio['tokens_per_s']:.2f}x (target >= "
              f"1.2x); short-sentence p95 {ratio['short_p95']:.2f}x (target < 1).", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed.batching.mixed_lengths")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--tiny", action="store_true", help="a toy model (code path)")
    parser.add_argument("--quick", action="store_true", help="one short round per server")
    parser.add_argument("--rate", type=float, default=40.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=15.0, help="arrivals per round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per server")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--device", default="cpu", help="the servers' engine device")
    parser.add_argument("--dtype", default="float32", help="the servers' engine dtype")
    args = parser.parse_args(argv)
    engine = {"NMT_ENGINE__DEVICE": args.device, "NMT_ENGINE__DTYPE": args.dtype}
    rounds, seconds = (1, min(args.seconds, 5.0)) if args.quick else (args.rounds, args.seconds)
    data = args.data if args.data.is_dir() else None
    quiet_libraries()
    sets = read_test_sets(data, per_set=200)
    lines = [t for texts in sets.values() for t in texts] or synthetic_lines(400, seed=5)
    words = " ".join(lines).split()
    out = results_dir(args.out, tiny=args.tiny)
    with tempfile.TemporaryDirectory(prefix="nmt-mixed-lengths-") as scratch:
        root = Path(scratch)
        spec = (seed_tiny_store(root / "store", lines=training_lines(data, per_file=500))
                if args.tiny else seed_default_store(root / "store"))
        count = token_counter(spec)
        texts = sentences(words, 400, count, seed=1)
        collected: dict[str, list[dict[str, Any]]] = {name: [] for name in SERVERS}
        with ExitStack() as stack:
            urls = {name: stack.enter_context(live_server(
                spec.environment() | SETTINGS | engine
                | batching_environment(static=name == "static"),
                root / f"{name}.log")) for name in SERVERS}
            for round_ in range(rounds):
                order = SERVERS if round_ % 2 == 0 else SERVERS[::-1]
                for name in order:
                    collected[name].append(asyncio.run(poisson_round(
                        urls[name], texts, rate=args.rate, seconds=seconds, seed=round_)))
        servers = {name: summarise(collected[name], count) for name in SERVERS}
    static, continuous = servers["static"], servers["continuous"]
    results = {
        "meta": {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                 "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                 "load_average": " ".join(f"{x:.1f}" for x in os.getloadavg()),
                 "model": ("tiny toy model" if args.tiny else "built-in default model")
                 + f" on {args.device}, {args.dtype}",
                 "texts": str(data) if data else "synthetic", "rate": args.rate,
                 "seconds": seconds, "rounds": rounds,
                 "note": "Measured side by side in one run: both servers up at once, rounds "
                         "alternating between them; absolute numbers move with the host's "
                         "load: read the ratios."},
        "servers": servers,
        "ratios": {"tokens_per_s": continuous["tokens_per_s"] / max(static["tokens_per_s"],
                                                                     1e-9),
                   "short_p95": (continuous["short_p95_ms"] or 0.0)
                   / max(static["short_p95_ms"] or 0.0, 1e-9)}}
    write_report(out, "mixed_lengths", results, markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
