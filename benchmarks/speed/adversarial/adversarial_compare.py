"""The adversarial benchmark with static and continuous batching side by side (issue #45).

    python -m benchmarks.speed.adversarial.adversarial_compare [--data DIR] [--quick] [--requests N]
                                                   [--out DIR]

Two servers on one store, identical but for `NMT_SCHEDULER__CONTINUOUS`, both up for the
whole run. The phases of benchmarks/speed/adversarial/adversarial.py (quiet, mix, mix + bulk) run in
rounds, and within each phase kind the servers alternate (which goes first alternates by
round), so the shared host's load drifts fall on both alike. Targets per server: polite
p50 within 3x of quiet in the mix + bulk phase (issue #45), every bulk request a 200 (its
full translation: the server answers a batch whole or not at all; a batch past the
async size is a job, which the bulk client follows to its end).

Writes results/adversarial_compare.json and .md.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.live_server import batching_environment, live_server
from benchmarks.locations import RESULTS_DIR
from benchmarks.report_files import write_report
from benchmarks.speed.adversarial.adversarial import (
    BULK,
    TARGET_RATIO,
    Phase,
    polite_texts,
    report,
    run_phase,
)
from benchmarks.speed.adversarial.adversaries import bulk_batch
from benchmarks.speed.serve.store import seed_default_store

SERVERS = ("static", "continuous")
BULK_PHASE = "mix + bulk"


async def measure(urls: dict[str, str], texts: list[str], *, bulk_body: dict[str, object],
                  warm: int, rounds: int) -> dict[str, dict[str, Phase]]:
    for base_url in urls.values():
        await run_phase(base_url, "warm-up", texts[:warm], adversaries=False)
    kinds: dict[str, tuple[bool, dict[str, object] | None]] = {
        "quiet": (False, None), "mix": (True, None), BULK_PHASE: (True, bulk_body)}
    phases: dict[str, dict[str, Phase]] = {name: {} for name in urls}
    for round_ in range(rounds):
        share = texts[round_::rounds]
        order = list(urls) if round_ % 2 == 0 else list(reversed(urls))
        for kind, (adversaries, body) in kinds.items():
            for server in order:
                phase = await run_phase(urls[server], kind, share, adversaries=adversaries,
                                        bulk_body=body)
                mine = phases[server]
                mine[kind] = mine[kind] + phase if kind in mine else phase
    return phases


def verdict(results: dict[str, Any]) -> dict[str, Any]:
    """Per server: the polite p50 ratios and the bulk requests' statuses."""
    phases = results["phases"]
    quiet = phases["quiet"]["polite"]["p50_ms"]
    bulk = phases[BULK_PHASE]["adversaries"].get(BULK, {"statuses": {}, "requests": 0})
    ratio = phases[BULK_PHASE]["polite"]["p50_ms"] / quiet
    return {"mix_ratio": round(phases["mix"]["polite"]["p50_ms"] / quiet, 2),
            "bulk_ratio": round(ratio, 2), "bulk_ratio_met": ratio <= TARGET_RATIO,
            "bulk_statuses": bulk["statuses"], "bulk_requests": bulk["requests"],
            "bulk_all_200": bool(bulk["requests"]) and set(bulk["statuses"]) == {"200"},
            "bulk_slowest_s": bulk.get("max_s")}


def markdown(by_server: dict[str, dict[str, Any]]) -> str:
    first = by_server[SERVERS[0]]["meta"]
    lines = ["# Polite latency beside adversarial clients: static and continuous batching",
             "", "Measured side by side in one run: both servers up at once on one store, "
             "the phases in rounds with the servers alternating within each phase; "
             "absolute times vary with the shared 2-core host: read the ratios.", "",
             f"Machine load at the end of the run (1/5/15-min load average): "
             f"{first['load_average']}.", "",
             "| server | phase | polite p50 ms | p95 ms | max ms | x quiet p50 | "
             "polite errors |", "|---|---|---:|---:|---:|---:|---:|"]
    for server, results in by_server.items():
        quiet = results["phases"]["quiet"]["polite"]["p50_ms"]
        for name, phase in results["phases"].items():
            p = phase["polite"]
            lines.append(f"| {server} | {name} | {p['p50_ms']} | {p['p95_ms']} | "
                         f"{p['max_ms']} | {p['p50_ms'] / quiet:.2f} | {p['errors']} |")
    lines += ["", "| server | bulk requests | statuses | slowest s | every other "
              "adversary a 4xx/200 within 10 s |", "|---|---:|---|---:|---|"]
    for server, results in by_server.items():
        v = results["verdict"]
        statuses = ", ".join(f"{k}: {n}" for k, n in sorted(v["bulk_statuses"].items()))
        others = results["targets"]["answers_met"]
        lines.append(f"| {server} | {v['bulk_requests']} | {statuses or '-'} | "
                     f"{v['bulk_slowest_s']} | {'yes' if others else 'NO'} |")
    lines.append("")
    for server, results in by_server.items():
        v = results["verdict"]
        lines.append(f"- {server}: mix + bulk polite p50 {v['bulk_ratio']:.2f}x quiet "
                     f"(target <= {TARGET_RATIO:g}x: "
                     f"{'met' if v['bulk_ratio_met'] else 'MISSED'}); every bulk request "
                     f"answered (a 200, or its job done): "
                     f"{'met' if v['bulk_all_200'] else 'MISSED'}.")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.speed.adversarial.adversarial_compare")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--quick", action="store_true", help="10 polite requests per phase")
    parser.add_argument("--requests", type=int, default=40, help="polite requests per phase")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    count = 10 if args.quick else args.requests
    data = args.data if args.data.is_dir() else None
    texts = polite_texts(data, count)
    bulk_body = bulk_batch(polite_texts(data, 400))
    with tempfile.TemporaryDirectory(prefix="nmt-adversarial-") as scratch, \
            ExitStack() as servers:
        root = Path(scratch)
        spec = seed_default_store(root / "store")
        urls: dict[str, str] = {}
        for server in SERVERS:
            environment = spec.environment() | batching_environment(
                static=server == "static")
            urls[server] = servers.enter_context(
                live_server(environment, root / f"{server}.log"))
        phases = asyncio.run(measure(urls, texts, bulk_body=bulk_body, warm=3,
                                     rounds=2 if args.quick else 4))
    by_server: dict[str, dict[str, Any]] = {}
    for server in SERVERS:
        results = report(phases[server], tiny=False, data=data,
                         continuous=server == "continuous")
        results["verdict"] = verdict(results)
        by_server[server] = results
    text = markdown(by_server)
    write_report(args.out, "adversarial_compare", {"servers": by_server}, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
