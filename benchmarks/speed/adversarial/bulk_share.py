"""Bulk clients beside a polite client and documents: every legal request answered.

    python -m benchmarks.speed.adversarial.bulk_share [--data DIR] [--requests N]
        [--items N] [--batches N] [--documents N] [--static] [--device D --dtype T]
        [--out DIR]

One server with default settings (the built-in default model, continuous batching;
`--static`: static batches), four kinds of clients, each from an address of its own (the server
tells clients apart by address when they send no API key: 127.0.0.1 to 127.0.0.4):

- bulk: `/translate/batch` of `--items` (64) texts of about 900 characters of held-out
  legal and medical prose (the law and medical test sets of `--data`), one after another;
- the official LibreTranslate client (`libretranslatepy`, at its default timeout: none),
  translating the same texts one per request through `/libretranslate`, in a loop;
- polite: one sentence per request, sequential;
- documents: `--documents` (40) files of 14 formats (benchmarks/documents/corpus.py),
  sequential, a 202 job followed to its end (a bulk batch past the async size too);
  `--documents 0` leaves that phase out (a GPU host lacks the document converters' tools).

Phases, side by side in one run: quiet (polite alone), bulk alone (both bulk clients,
`--batches` bulk batches), bulk + polite, bulk + documents. Targets: polite p50 beside
the bulk clients within 3x of quiet; no bulk request refused or failed (429, 504, an
error of the LibreTranslate client); bulk throughput (both bulk clients' characters per
second) beside the polite client at least 0.6x the bulk alone; every document completes.

`--device cuda --dtype float16` serves on a GPU (benchmarks/speed/gpu/gpu_serve_run.sh's
`bulk` part). Writes results/bulk_share.json and .md (`--static`: bulk_share-static.*; on
another device than the CPU: bulk_share-gpu.*).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import httpx
from libretranslatepy import LibreTranslateAPI

from benchmarks.documents import corpus
from benchmarks.live_server import batching_environment, ends_with_parent, live_server
from benchmarks.report_files import results_dir, write_report
from benchmarks.speed.adversarial.adversarial import percentiles, polite_texts
from benchmarks.speed.adversarial.adversaries import bulk_batch
from benchmarks.speed.data import read_test_sets
from benchmarks.speed.serve.store import seed_default_store

BULK_ADDRESS, LIBRE_ADDRESS, POLITE_ADDRESS, DOCUMENT_ADDRESS = (
    "127.0.0.2", "127.0.0.1", "127.0.0.3", "127.0.0.4")  # urllib's client: the default
TARGET_RATIO, TARGET_THROUGHPUT = 3.0, 0.6
BULK_DOMAINS = ("law", "medical")


def bulk_texts(data: Path | None, items: int) -> list[str]:
    """`items` texts of about 900 characters of held-out legal and medical prose."""
    sets = read_test_sets(data, per_set=600) if data is not None else {}
    prose = [t for domain in BULK_DOMAINS for t in sets.get(domain, []) if len(t) >= 40]
    body = bulk_batch(prose or polite_texts(None, 40), items=items)
    return [str(item["text"]) for item in body["items"]]  # type: ignore[attr-defined]


def follow_batch_job(client: httpx.Client, job_id: str) -> httpx.Response:
    """The job's last answer: 200 once it is done, or the failure's status (a failed job
    counts as refused: 500 stands for it)."""
    while True:
        answer = client.get(f"/translate/batch/jobs/{job_id}", params={"wait": 60})
        if answer.status_code != 200:
            return answer
        state = answer.json()["state"]
        if state == "done":
            return answer
        if state == "failed":
            return httpx.Response(500, json=answer.json(), request=answer.request)


def bulk_side(base_url: str, texts: list[str], batches: int, polite_done: Event,
              results: multiprocessing.Queue[dict[str, Any]]) -> None:
    """The bulk clients' process: the batch client sends at least `batches` batches and
    goes on until `polite_done`; the LibreTranslate client loops over the texts meanwhile.
    Each finishes the request it is in; only completed work counts. It ends with the
    bench, killed or not (the server does too: benchmarks/live_server.py)."""
    ends_with_parent()  # else it would retry a dead server forever
    stop = threading.Event()
    libre: dict[str, Any] = {"chars": 0, "requests": 0, "errors": []}

    def libretranslate() -> None:
        client = LibreTranslateAPI(base_url + "/libretranslate/")
        index = 0
        while not stop.is_set():
            text = texts[index % len(texts)]
            index += 1
            try:
                client.translate(text, source="en", target="fr")  # its default timeout
            except Exception as error:  # noqa: BLE001 - every failure is a refusal here
                libre["errors"].append(f"{type(error).__name__}: {error}"[:200])
                continue
            libre["chars"] += len(text)
            libre["requests"] += 1

    started = time.perf_counter()
    thread = threading.Thread(target=libretranslate, daemon=True)
    thread.start()
    statuses: list[int | str] = []
    seconds: list[float] = []
    chars = 0
    body = {"items": [{"text": text} for text in texts]}
    transport = httpx.HTTPTransport(local_address=BULK_ADDRESS)
    with httpx.Client(base_url=base_url, transport=transport, timeout=900) as client:
        while len(statuses) < batches or not polite_done.is_set():
            sent = time.perf_counter()
            try:
                answer = client.post("/translate/batch", json=body)
                if answer.status_code == 202:  # past the async size: a job, followed to its end
                    answer = follow_batch_job(client, answer.json()["id"])
                statuses.append(answer.status_code)
                if answer.status_code == 200:
                    chars += sum(map(len, texts))
            except httpx.HTTPError as error:
                statuses.append(type(error).__name__)
            seconds.append(time.perf_counter() - sent)
    stop.set()
    thread.join(900)
    elapsed = time.perf_counter() - started
    results.put({"statuses": statuses, "batch_seconds": [round(s, 1) for s in seconds],
                 "batch_chars": chars, "libre_chars": libre["chars"],
                 "libre_requests": libre["requests"], "libre_errors": libre["errors"],
                 "seconds": round(elapsed, 1),
                 "chars_per_s": round((chars + libre["chars"]) / elapsed, 1)})


async def polite(base_url: str, texts: Sequence[str]) -> dict[str, Any]:
    transport = httpx.AsyncHTTPTransport(local_address=POLITE_ADDRESS)
    latencies: list[float] = []
    statuses: list[int] = []
    async with httpx.AsyncClient(base_url=base_url, transport=transport, timeout=900) as client:
        for text in texts:
            started = time.perf_counter()
            answer = await client.post("/translate", json={"text": text})
            latencies.append(time.perf_counter() - started)
            statuses.append(answer.status_code)
    return {"requests": len(texts), "errors": sum(s != 200 for s in statuses),
            **percentiles(latencies)}


def documents(base_url: str, paths: Sequence[Path], count: int) -> dict[str, Any]:
    """`count` documents, the formats in turn; a 202 job is followed to its end."""
    transport = httpx.HTTPTransport(local_address=DOCUMENT_ADDRESS)
    done, failures, seconds = 0, [], []
    with httpx.Client(base_url=base_url, transport=transport, timeout=900) as client:
        for index in range(count):
            path = paths[index % len(paths)]
            started = time.perf_counter()
            answer = client.post("/translate/file",
                                 files={"file": (path.name, path.read_bytes())})
            if answer.status_code == 202:
                job = {"state": "queued"}
                while job["state"] not in ("done", "failed"):
                    job = client.get(answer.headers["location"], params={"wait": 60}).json()
                answer = (client.get(job["result_url"]) if job["state"] == "done"
                          else httpx.Response(500, text=str(job.get("error"))))
            if answer.status_code == 200 and answer.content:
                done += 1
            else:
                failures.append(f"{path.name}: {answer.status_code} {answer.text[:120]}")
            seconds.append(time.perf_counter() - started)
    return {"documents": count, "completed": done, "failures": failures,
            "median_s": round(statistics.median(seconds), 2) if seconds else None}


async def beside_bulk(base_url: str, texts: list[str], batches: int,
                      work: Any) -> tuple[dict[str, Any], Any]:
    """Run the bulk clients' process and `work()` (a coroutine function) beside it."""
    context = multiprocessing.get_context("spawn")
    done = context.Event()
    results: multiprocessing.Queue[dict[str, Any]] = context.Queue()
    process = context.Process(target=bulk_side, name="bulk",
                              args=(base_url, texts, batches, done, results))
    process.start()
    try:
        outcome = await work() if work is not None else None
        done.set()
        bulk = await asyncio.to_thread(results.get, True, 3600)
    finally:
        done.set()
        process.join(60)
        if process.is_alive():
            process.kill()
    return bulk, outcome


async def measure(base_url: str, texts: list[str], politely: list[str], paths: list[Path],
                  *, batches: int, count: int) -> dict[str, Any]:
    await polite(base_url, politely[:3])  # warm-up
    phases: dict[str, Any] = {"quiet": {"polite": await polite(base_url, politely)}}
    progress(phases, "quiet")
    alone, _ = await beside_bulk(base_url, texts, batches, None)
    phases["bulk alone"] = {"bulk": alone}
    progress(phases, "bulk alone")
    bulk, mine = await beside_bulk(base_url, texts, batches,
                                   lambda: polite(base_url, politely))
    phases["bulk + polite"] = {"bulk": bulk, "polite": mine}
    progress(phases, "bulk + polite")
    if count == 0:
        return phases
    bulk, files = await beside_bulk(base_url, texts, 0, lambda: asyncio.to_thread(
        documents, base_url, paths, count))
    phases["bulk + documents"] = {"bulk": bulk, "documents": files}
    progress(phases, "bulk + documents")
    return phases


def progress(phases: dict[str, Any], name: str) -> None:
    """Each phase as it ends (a long run's partial results are not lost)."""
    print(f"{name}: {json.dumps(phases[name])}", flush=True)


def refused(bulk: dict[str, Any]) -> int:
    return int(sum(status != 200 for status in bulk["statuses"]) + len(bulk["libre_errors"]))


def verdict(phases: dict[str, Any]) -> dict[str, Any]:
    quiet = phases["quiet"]["polite"]["p50_ms"]
    ratio = phases["bulk + polite"]["polite"]["p50_ms"] / quiet
    share = (phases["bulk + polite"]["bulk"]["chars_per_s"]
             / max(1e-9, phases["bulk alone"]["bulk"]["chars_per_s"]))
    bulk_refused = sum(refused(phases[name]["bulk"]) for name in phases if "bulk" in phases[name])
    files = phases.get("bulk + documents", {}).get("documents")
    return {"polite_ratio": round(ratio, 2), "polite_ratio_met": ratio <= TARGET_RATIO,
            "bulk_refused": bulk_refused, "bulk_refused_met": bulk_refused == 0,
            "throughput_ratio": round(share, 2),
            "throughput_met": share >= TARGET_THROUGHPUT,
            # None: the phase was left out (--documents 0)
            "documents_met": (None if files is None
                              else files["completed"] == files["documents"])}


def markdown(results: dict[str, Any]) -> str:
    phases, v, meta = results["phases"], results["verdict"], results["meta"]
    lines = ["# Bulk clients beside a polite client and documents", "",
             f"{meta['setup']}", "", "| phase | polite p50 ms | p95 ms | errors | "
             "bulk batches (statuses) | LibreTranslate requests (errors) | bulk chars/s |",
             "|---|---:|---:|---:|---|---|---:|"]
    for name, phase in phases.items():
        p, b = phase.get("polite"), phase.get("bulk")
        statuses = ", ".join(map(str, b["statuses"])) if b else "-"
        libre = f"{b['libre_requests']} ({len(b['libre_errors'])})" if b else "-"
        lines.append(f"| {name} | {p['p50_ms'] if p else '-'} | {p['p95_ms'] if p else '-'} "
                     f"| {p['errors'] if p else '-'} | {statuses} | {libre} | "
                     f"{b['chars_per_s'] if b else '-'} |")
    files = phases.get("bulk + documents", {}).get("documents")
    met = {True: "met", False: "MISSED"}
    lines += ["", f"- polite p50 beside the bulk clients: {v['polite_ratio']:.2f}x quiet "
              f"(target <= {TARGET_RATIO:g}x: {met[v['polite_ratio_met']]});",
              f"- bulk requests refused or failed: {v['bulk_refused']} (target 0: "
              f"{met[v['bulk_refused_met']]});",
              f"- bulk throughput beside the polite client: {v['throughput_ratio']:.2f}x "
              f"alone (target >= {TARGET_THROUGHPUT:g}x: {met[v['throughput_met']]});",
              f"- documents beside the bulk clients: {files['completed']} of "
              f"{files['documents']} completed (median {files['median_s']} s; "
              f"{met[v['documents_met']]})." if files is not None else
              "- documents beside the bulk clients: not run (`--documents 0`).", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed.adversarial.bulk_share")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--requests", type=int, default=40, help="polite requests per phase")
    parser.add_argument("--items", type=int, default=64, help="texts per bulk batch")
    parser.add_argument("--batches", type=int, default=2, help="bulk batches, at least")
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--static", action="store_true",
                        help="static batches (the default: continuous batching)")
    parser.add_argument("--device", default="cpu", help="the server's engine device")
    parser.add_argument("--dtype", default="float32", help="the server's engine dtype")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    data = args.data if args.data.is_dir() else None
    if data is None:
        parser.error(f"--data {args.data}: no such folder (the bulk prose and documents)")
    texts, politely = bulk_texts(data, args.items), polite_texts(data, args.requests)
    with tempfile.TemporaryDirectory(prefix="nmt-bulk-share-") as scratch:
        root = Path(scratch)
        paths = corpus.build(data, root / "documents", lines=8) if args.documents else []
        environment = (seed_default_store(root / "store").environment()
                       | batching_environment(static=args.static)
                       | {"NMT_ENGINE__DEVICE": args.device, "NMT_ENGINE__DTYPE": args.dtype})
        with live_server(environment, root / "server.log") as base_url:
            phases = asyncio.run(measure(base_url, texts, politely, paths,
                                         batches=args.batches, count=args.documents))
    setup = (f"One server with default settings{' and static batches' * args.static}"
             f", the built-in default model on {args.device} ({args.dtype}); bulk: "
             f"{args.items} texts of about 900 characters ({sum(map(len, texts))} "
             "characters) per batch, at least "
             f"{args.batches} batches per phase, beside the LibreTranslate client "
             f"(libretranslatepy, default timeout); {args.requests} polite requests; "
             f"{args.documents} documents of {len(paths)} formats. Absolute times vary "
             "with the shared host: read the ratios.")
    results = {"meta": {"setup": setup, "items": args.items, "batches": args.batches},
               "phases": phases}
    results["verdict"] = verdict(phases)
    name = ("bulk_share" + "-static" * args.static
            + ("-gpu" if args.device != "cpu" else ""))
    write_report(results_dir(args.out, tiny=False), name, results, markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
