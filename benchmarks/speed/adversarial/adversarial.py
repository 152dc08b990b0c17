"""A polite client's latency while adversarial clients run beside it (issue #19).

    python -m benchmarks.speed.adversarial.adversarial [--data DIR] [--quick] [--tiny]
                                                       [--requests N] [--no-bulk] [--out DIR]

1. seed a temporary store: the package's built-in default model (or `--tiny`: a toy
   backbone and random adapters); start `python -m server` with its default settings on
   127.0.0.1 and a free port;
2. the polite client: one sentence per request, sequential, texts from the en-fr test
   sets of `--data` (synthetic without it); warm up;
3. quiet: the polite client alone;
4. mix: every adversary of benchmarks/speed/adversarial/adversaries.py (the splitter text,
   9,999 dots, a 30 x 9,000-character batch, a 33,000-sentence batch, deeply nested JSON,
   a 24 MB body and a 24 MB chunked body), each a client of its own sending in a loop,
   while the polite client sends its requests. The adversaries run in a process of their
   own (as they would on other machines): in the polite client's process, their callbacks
   would delay the polite client's own reading of its answers, and that delay is not the
   server's;
5. bulk (unless `--no-bulk`): the same, plus a client sending a legal but heavy batch
   (64 x 900 characters of real sentences) in a loop; phases alternate over a few
   rounds (N polite requests per phase in all), so the shared machine's load drifts fall
   on every phase alike;
6. targets: the polite median under the mix within 3x of quiet; every adversarial request
   answered within 10 s with a 4xx or a 2xx (202: a job). The bulk phase is reported
   beside them; the bulk client follows each job its batch became to its end.

The polite client sends from 127.0.0.3, the adversaries from 127.0.0.1: the server tells
clients without API keys apart by address, as it would clients on other machines.

Writes results/adversarial.json (per phase and client: counts, statuses, latency
percentiles) and .md (`--tiny`: results/tmp/).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import multiprocessing
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.synchronize import Event as StopEvent
from pathlib import Path
from typing import Any

import httpx

from benchmarks.live_server import batching_environment, live_server
from benchmarks.report_files import results_dir, write_report
from benchmarks.speed.adversarial.adversaries import ADVERSARIES, Adversary, Outcome, bulk_batch
from benchmarks.speed.data import read_test_sets
from benchmarks.speed.serve.store import StoreSpec, seed_default_store, seed_tiny_store

POLITE_DOMAINS = ("medical", "law", "it")
SYNTHETIC = ["The patient takes one tablet a day.", "Click the button to open the file.",
             "The council adopted this regulation.", "We will meet tomorrow morning."]
TARGET_RATIO = 3.0
TARGET_ANSWER_S = 10.0
BULK = "bulk 64 x 900 chars"
# the polite client's own address (the adversaries send from 127.0.0.1): without API keys
# the server tells clients apart by address, and a polite client is not the adversaries
POLITE_ADDRESS = "127.0.0.3"


@dataclass(frozen=True)
class Phase:
    name: str
    polite: list[float]  # seconds per polite request, in order
    polite_statuses: list[int]
    others: list[Outcome]

    def __add__(self, other: Phase) -> Phase:
        return Phase(self.name, self.polite + other.polite,
                     self.polite_statuses + other.polite_statuses, self.others + other.others)


def polite_texts(data: Path | None, count: int) -> list[str]:
    sets = read_test_sets(data, per_set=200) if data is not None else {}
    texts = [t for domain in POLITE_DOMAINS for t in sets.get(domain, [])
             if 20 <= len(t) <= 160]
    texts = texts or SYNTHETIC
    return [texts[(i * 7) % len(texts)] for i in range(count)]


async def polite_client(client: httpx.AsyncClient,
                        texts: Sequence[str]) -> tuple[list[float], list[int]]:
    latencies: list[float] = []
    statuses: list[int] = []
    for text in texts:
        started = time.perf_counter()
        answer = await client.post("/translate", json={"text": text})
        latencies.append(time.perf_counter() - started)
        statuses.append(answer.status_code)
    return latencies, statuses


async def loop(adversary: Adversary, client: httpx.AsyncClient, base_url: str,
               stop: StopEvent, out: list[Outcome]) -> None:
    while not stop.is_set():
        out.append(await adversary(client, base_url))


async def bulk(client: httpx.AsyncClient, _base_url: str, body: dict[str, object]) -> Outcome:
    """One bulk batch to its end: a batch past the server's async size is a job (202),
    which the client follows until it is done (200) or failed (no status, its error)."""
    started = time.perf_counter()
    try:
        answer = await client.post("/translate/batch", json=body)
        if answer.status_code != 202:
            return Outcome(BULK, answer.status_code, time.perf_counter() - started)
        job = answer.json()
        while job["state"] not in ("done", "failed"):
            job = (await client.get(answer.headers["Location"], params={"wait": 60})).json()
    except httpx.HTTPError as error:
        return Outcome(BULK, None, time.perf_counter() - started, type(error).__name__)
    if job["state"] == "failed":
        return Outcome(BULK, None, time.perf_counter() - started,
                       f"job failed: {job['error']['code']}")
    return Outcome(BULK, 200, time.perf_counter() - started, "a job, followed to its end")


def adversary_clients(bulk_body: dict[str, object] | None) -> tuple[Adversary, ...]:
    if bulk_body is None:
        return ADVERSARIES
    body = bulk_body

    async def heavy(client: httpx.AsyncClient, base: str) -> Outcome:
        return await bulk(client, base, body)

    return (*ADVERSARIES, heavy)


def adversary_process(base_url: str, bulk_body: dict[str, object] | None, stop: StopEvent,
                      started: StopEvent, results: multiprocessing.Queue[list[Outcome]]
                      ) -> None:
    """The adversaries' process: every client loops until `stop`, then the outcomes go back
    through `results`."""
    async def main() -> list[Outcome]:
        limits = httpx.Limits(max_connections=64)
        async with httpx.AsyncClient(base_url=base_url, timeout=120.0,
                                     limits=limits) as client:
            out: list[Outcome] = []
            running = [asyncio.ensure_future(loop(adversary, client, base_url, stop, out))
                       for adversary in adversary_clients(bulk_body)]
            started.set()
            await asyncio.gather(*running)
            return out

    results.put(asyncio.run(main()))


async def run_phase(base_url: str, name: str, texts: Sequence[str], *, adversaries: bool,
                    bulk_body: dict[str, object] | None = None) -> Phase:
    context = multiprocessing.get_context("spawn")
    stop, started = context.Event(), context.Event()
    results: multiprocessing.Queue[list[Outcome]] = context.Queue()
    process = (context.Process(target=adversary_process, name="adversaries",
                               args=(base_url, bulk_body, stop, started, results))
               if adversaries else None)
    others: list[Outcome] = []
    try:
        if process is not None:
            process.start()
            await asyncio.to_thread(started.wait, 120)
            await asyncio.sleep(1.0)  # the adversaries are at work before the first polite
        # a client of its own: the server tells clients without a key apart by address
        transport = httpx.AsyncHTTPTransport(local_address=POLITE_ADDRESS)
        async with httpx.AsyncClient(base_url=base_url, timeout=120.0,
                                     transport=transport) as client:
            latencies, statuses = await polite_client(client, texts)
        if process is not None:
            stop.set()  # each client finishes the request it is in, then stops
            others = await asyncio.to_thread(results.get, True, 300)
    finally:
        if process is not None:
            stop.set()
            process.join(30)
            if process.is_alive():
                process.kill()
    return Phase(name, latencies, statuses, others)


def percentiles(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p95 and max in milliseconds (nearest rank)."""
    ordered = sorted(seconds)
    if not ordered:
        return {}
    return {"p50_ms": round(1000 * statistics.median(ordered), 1),
            "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 1),
            "max_ms": round(1000 * ordered[-1], 1)}


def histogram(statuses: Sequence[int | None]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[str(status)] = counts.get(str(status), 0) + 1
    return dict(sorted(counts.items()))


def summary(phase: Phase) -> dict[str, Any]:
    """Per client kind: requests, status histogram, latency percentiles (not every
    request: a run makes tens of thousands)."""
    kinds: dict[str, list[Outcome]] = {}
    for outcome in phase.others:
        kinds.setdefault(outcome.client, []).append(outcome)
    by_client: dict[str, dict[str, Any]] = {}
    for client, outcomes in kinds.items():
        notes = sorted({outcome.note for outcome in outcomes if outcome.note})
        times = percentiles([outcome.seconds for outcome in outcomes])
        by_client[client] = {"requests": len(outcomes),
                             "statuses": histogram([o.status for o in outcomes]),
                             **times, "max_s": round(times["max_ms"] / 1000, 3),
                             "notes": notes}
    return {"polite": {"requests": len(phase.polite),
                       "statuses": histogram(phase.polite_statuses),
                       "errors": sum(s != 200 for s in phase.polite_statuses),
                       **percentiles(phase.polite)},
            "adversaries": by_client}


def answered_in_time(entry: dict[str, Any]) -> bool:
    ok = all(s.startswith(("2", "4")) for s in entry["statuses"])  # 202: a job
    return ok and float(entry["max_s"]) <= TARGET_ANSWER_S


def markdown(results: dict[str, Any]) -> str:
    phases = results["phases"]
    quiet = phases["quiet"]["polite"]["p50_ms"]
    lines = ["# Polite latency beside adversarial clients", "",
             f"{results['meta']['note']}", "",
             f"Machine load at the end of the run (1/5/15-min load average): "
             f"{results['meta'].get('load_average', 'not recorded')}.", "",
             "| phase | polite p50 ms | p95 ms | max ms | x quiet p50 | polite errors |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, phase in phases.items():
        p = phase["polite"]
        lines.append(f"| {name} | {p['p50_ms']} | {p['p95_ms']} | {p['max_ms']} | "
                     f"{p['p50_ms'] / quiet:.2f} | {p['errors']} |")
    lines += ["", "| phase | adversary | requests | statuses | slowest answer s | "
              "4xx/200 within 10 s |", "|---|---|---:|---|---:|---|"]
    for name, phase in phases.items():
        for client, entry in phase["adversaries"].items():
            statuses = ", ".join(f"{k}: {v}" for k, v in sorted(entry["statuses"].items()))
            lines.append(f"| {name} | {client} | {entry['requests']} | {statuses} | "
                         f"{entry['max_s']} | {'yes' if answered_in_time(entry) else 'NO'} |")
    verdict = results["targets"]
    lines += ["", f"Targets (mix phase): polite p50 within {TARGET_RATIO:g}x of quiet: "
              f"{verdict['ratio']:.2f}x ({'met' if verdict['ratio_met'] else 'MISSED'}); "
              f"every adversarial request a 4xx or a 200 within {TARGET_ANSWER_S:g} s: "
              f"{'met' if verdict['answers_met'] else 'MISSED'}.", ""]
    return "\n".join(lines)


async def measure(base_url: str, texts: list[str], *, bulk_body: dict[str, object] | None,
                  warm: int, rounds: int) -> dict[str, Phase]:
    """Phases alternate in `rounds` rounds (quiet, mix, mix + bulk, quiet, ...), each
    with a share of the polite texts, so that drifts of the shared machine's load fall on
    every phase alike."""
    await run_phase(base_url, "warm-up", texts[:warm], adversaries=False)
    kinds: dict[str, tuple[bool, dict[str, object] | None]] = {
        "quiet": (False, None), "mix": (True, None)}
    if bulk_body is not None:
        kinds["mix + bulk"] = (True, bulk_body)
    phases: dict[str, Phase] = {}
    for round_ in range(rounds):
        share = texts[round_::rounds]
        for name, (adversaries, body) in kinds.items():
            phase = await run_phase(base_url, name, share, adversaries=adversaries,
                                    bulk_body=body)
            phases[name] = phases[name] + phase if name in phases else phase
    return phases


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed.adversarial.adversarial")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--quick", action="store_true", help="10 polite requests per phase")
    parser.add_argument("--tiny", action="store_true", help="a toy model (smoke run)")
    parser.add_argument("--requests", type=int, default=60, help="polite requests per phase")
    parser.add_argument("--no-bulk", action="store_true", help="skip the bulk phase")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--static", action="store_true",
                        help="the server with static batches (NMT_SCHEDULER__CONTINUOUS=false; "
                             "the default: continuous batching); writes adversarial-static.*")
    args = parser.parse_args(argv)
    count = 10 if args.quick else args.requests
    data = args.data if args.data.is_dir() else None
    texts = polite_texts(data, count)
    out = results_dir(args.out, tiny=args.tiny)
    with tempfile.TemporaryDirectory(prefix="nmt-adversarial-") as scratch:
        root = Path(scratch)
        spec: StoreSpec = (seed_tiny_store(root / "store") if args.tiny
                           else seed_default_store(root / "store"))
        bulk_body = None if args.no_bulk else bulk_batch(polite_texts(data, 400))
        environment = spec.environment() | batching_environment(static=args.static)
        with live_server(environment, root / "server.log") as base_url:
            phases = asyncio.run(measure(base_url, texts, bulk_body=bulk_body, warm=3,
                                         rounds=2 if args.quick else 4))
    results = report(phases, tiny=args.tiny, data=data, continuous=not args.static)
    name = "adversarial-static" if args.static else "adversarial"
    write_report(out, name, results, markdown(results))
    print(markdown(results))
    return 0


def report(phases: dict[str, Phase], *, tiny: bool, data: Path | None,
           continuous: bool = False) -> dict[str, Any]:
    summaries = {name: summary(phase) for name, phase in phases.items()}
    ratio = summaries["mix"]["polite"]["p50_ms"] / summaries["quiet"]["polite"]["p50_ms"]
    answers_met = all(answered_in_time(entry)
                      for entry in summaries["mix"]["adversaries"].values())
    meta = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "model": "tiny toy model" if tiny else "built-in default model",
            "texts": str(data) if data is not None else "synthetic",
            "load_average": " ".join(f"{x:.1f}" for x in os.getloadavg()),
            "note": ("Measured side by side in one run, one server with default settings"
                     + (" (continuous batching)" if continuous else " and static batches")
                     + ", the adversaries in a process of their own; absolute times vary "
                     "with the phases of the shared 2-core host: read the ratios.")}
    return {"meta": meta, "phases": summaries,
            "targets": {"ratio": ratio, "ratio_met": ratio <= TARGET_RATIO,
                        "answers_met": answers_met}}


if __name__ == "__main__":
    raise SystemExit(main())
