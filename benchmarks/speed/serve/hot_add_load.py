"""The sidecar's share: a hot add on a quiet server and beside 16 clients, in one run.

    python -m benchmarks.speed.serve.hot_add_load --data ../shared/data [--clients 16]
        [--requests N] [--pause S] [--pairs N] [--quick] [--threads N] [--static]
        [--out DIR]

1. a scratch store with the built-in default model (benchmarks/speed/serve/hot_add.py's),
   `python -m server` on it with default settings (continuous batching; `--static`:
   static batches);
2. quiet: the polite client alone: one sentence per request from an address of its own,
   a pause of `--pause` seconds between its answer and its next request (a light user, far
   below its share of the engine); half of its `--requests` requests here, half after
   step 4 (once the clients stopped and the sidecar ended), so that drifts of a shared
   host's load fall on both sides: its p50;
3. hot add on a quiet server: `POST /admin/domains` (the train and dev split of en-fr
   medical as a new domain), `python -m trainer --once` (the sidecar at its default
   niceness, `--threads` torch threads: by default the one CPU the server yields while a
   job trains, NMT_EXECUTION__TRAINING_CPUS) trains, gates and publishes: upload ->
   published, and the CPU time the sidecar got (its share of one CPU);
4. the same hot add (another name) while `--clients` busy clients (each from an address of
   its own) send one-sentence requests back to back and the polite client goes on as in 2:
   upload -> published, every request's status, the polite client's p50 and the busy
   clients' own p50 and requests per second while the sidecar ran, and the engine's
   batches meanwhile (the server's /metrics: sentences per batch, the engine's busy share).
   The clients are threads of the bench's process (httpx, ~1.4 ms of CPU a request): the
   polite client's reading of its answers shares that process with the busy ones.

Targets (issue: the sidecar costs serving at most its share): 0 failed requests, the
polite client's p50 beside the sidecar and the busy clients within 3x of its p50 quiet,
the domain published within 2x of its time on the quiet server. The busy clients' p50
against the polite client's quiet p50 is reported beside them. Writes
results/hot_add_load.json and .md (`--static`: hot_add_load-static.*).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.live_server import batching_environment, live_server
from benchmarks.locations import DEFAULT_DATA, RESULTS_DIR
from benchmarks.report_files import write_report
from benchmarks.speed.adversarial.adversarial import percentiles, polite_texts
from benchmarks.speed.serve.hot_add import QUICK_JOB, prepare_store, read_split, start_sidecar, tsv

TARGET_RATIO, TARGET_PUBLISH = 3.0, 2.0
POLITE_ADDRESS = "127.0.0.3"  # the busy clients are 127.0.0.10 onwards


class Clients:
    """One client per address, each sending one-sentence requests until stopped, `pause_s`
    between an answer and its next request (0: back to back)."""

    def __init__(self, base_url: str, texts: Sequence[str], addresses: Sequence[str], *,
                 pause_s: float = 0.0) -> None:
        self.base_url, self.texts, self.pause_s = base_url, list(texts), pause_s
        self.answers: list[tuple[float, float, int | str]] = []  # (sent, seconds, status)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i, address), daemon=True)
                         for i, address in enumerate(addresses)]

    def _run(self, index: int, address: str) -> None:
        transport = httpx.HTTPTransport(local_address=address)
        with httpx.Client(base_url=self.base_url, transport=transport, timeout=900) as http:
            turn = index
            while not self._stop.is_set():
                text = self.texts[turn % len(self.texts)]
                turn += 1
                sent = time.time()
                try:
                    status: int | str = http.post("/translate", json={"text": text}).status_code
                except httpx.HTTPError as error:
                    status = type(error).__name__
                self.answers.append((sent, time.time() - sent, status))
                self._stop.wait(self.pause_s)

    def between(self, started: float, ended: float) -> list[tuple[float, float, int | str]]:
        """The answers to the requests sent within [started, ended]."""
        return [answer for answer in self.answers if started <= answer[0] <= ended]

    def __enter__(self) -> Clients:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(900)


def busy_addresses(count: int) -> list[str]:
    return [f"127.0.0.{10 + index}" for index in range(count)]


def hot_add(args: argparse.Namespace, root: Path, base_url: str, token: str,
            name: str) -> dict[str, Any]:
    """Upload `name` with the domain's data, run the sidecar once; (upload, published)."""
    train = read_split(args.data, args.domain, "train", args.pairs)
    dev = read_split(args.data, args.domain, "dev", 500)
    config = json.dumps(QUICK_JOB if args.quick else {})
    with httpx.Client(base_url=base_url, timeout=300,
                      headers={"Authorization": f"Bearer {token}"}) as http:
        uploaded = time.time()
        response = http.post("/admin/domains", data={"name": name, "config": config},
                             files={"train": ("train.tsv", tsv(train)),
                                    "dev": ("dev.tsv", tsv(dev))})
        response.raise_for_status()
        sidecar = start_sidecar(args, root, f"sidecar-{name}.log")
        started, cpu_s = time.time(), 0.0
        try:
            while sidecar.poll() is None:
                cpu_s = cpu_seconds(sidecar.pid) or cpu_s  # the last reading before it ends
                time.sleep(0.5)
        finally:
            sidecar.kill()
        job = http.get(response.headers["location"]).json()
    if job["state"] != "published":
        raise RuntimeError(f"the job did not publish: {json.dumps(job)[:500]}")
    ran = time.time() - started
    return {"domain": name, "pairs": len(train), "started": uploaded, "ended": time.time(),
            "upload_to_published_s": round(time.time() - uploaded, 1),
            "sidecar_cpu_s": round(cpu_s, 1), "sidecar_cpu_share": round(cpu_s / ran, 2)}


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process (Linux's /proc; None elsewhere)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def polite_alone(base_url: str, texts: Sequence[str], pause_s: float) -> list[float]:
    """The polite client alone: `texts` one by one from its address, `pause_s` apart; the
    seconds of each."""
    seconds = []
    transport = httpx.HTTPTransport(local_address=POLITE_ADDRESS)
    with httpx.Client(base_url=base_url, transport=transport, timeout=900) as http:
        for text in texts:
            started = time.perf_counter()
            assert http.post("/translate", json={"text": text}).status_code == 200
            seconds.append(time.perf_counter() - started)
            time.sleep(pause_s)
    return seconds


def answered(answers: Sequence[tuple[float, float, int | str]]) -> dict[str, Any]:
    """Requests, statuses, failures and latency percentiles of a client group's answers."""
    statuses: dict[str, int] = {}
    for _, _, status in answers:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {"requests": len(answers), "statuses": dict(sorted(statuses.items())),
            "failed": sum(status != 200 for _, _, status in answers),
            **percentiles([seconds for _, seconds, status in answers if status == 200])}


ENGINE_SAMPLES = ("nmt_scheduler_batch_sentences_count", "nmt_scheduler_batch_sentences_sum",
                  "nmt_engine_live_rows_count", "nmt_engine_live_rows_sum",
                  "nmt_engine_busy_seconds_total")


def engine_reading(base_url: str) -> dict[str, float]:
    """The engine's counters so far (the server's /metrics): batches and their sentences,
    live steps and their rows (continuous batching), seconds busy."""
    with httpx.Client(base_url=base_url, timeout=60) as http:
        answer = http.get("/metrics")
        answer.raise_for_status()
    values = {sample.name: sample.value
              for family in text_string_to_metric_families(answer.text)
              for sample in family.samples if sample.name in ENGINE_SAMPLES}
    return {name: values.get(name, 0.0) for name in ENGINE_SAMPLES}


def engine_batches(before: dict[str, float], after: dict[str, float],
                   seconds: float) -> dict[str, Any]:
    """The engine's work between two readings `seconds` apart: batches (static batching)
    or live steps (continuous), their size (a batch's sentences, a step's beam rows), time
    in each, the engine's busy share."""
    done = {name: after[name] - before[name] for name in ENGINE_SAMPLES}
    busy = done["nmt_engine_busy_seconds_total"]
    batches, steps = (int(done["nmt_scheduler_batch_sentences_count"]),
                      int(done["nmt_engine_live_rows_count"]))
    units = batches or steps
    sentences = done["nmt_scheduler_batch_sentences_sum" if batches
                     else "nmt_engine_live_rows_sum"]
    return {"unit": "batch" if batches or not steps else "step", "count": units,
            "size": round(sentences / units, 1) if units else None,  # sentences; rows a step
            "ms_per_unit": round(1000 * busy / units, 1) if units else None,
            "engine_busy_share": round(busy / seconds, 2) if seconds > 0 else None}


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = prepare_store(args)
    token = secrets.token_hex(16)
    settings = {"NMT_STORE_DIR": str(root), "NMT_ADMIN_TOKEN": token,
                "NMT_BUILTIN_ARTIFACTS": "true", "NMT_BACKBONE": args.backbone,
                "NMT_EXECUTION__TRAINING_CPUS": str(args.training_cpus)}
    settings |= batching_environment(static=args.static)
    texts = polite_texts(args.data, max(args.requests, 40))
    with live_server(settings, args.out / "tmp" / "hot_add" / "server-load.log") as base_url:
        polite_alone(base_url, texts[:3], 0.0)  # warm-up
        half = args.requests // 2  # quiet before and after the rest: the host's drifts
        quiet = polite_alone(base_url, texts[:half], args.pause)  # fall on both sides
        alone = hot_add(args, root, base_url, token, "hot-quiet")
        with (Clients(base_url, texts, busy_addresses(args.clients)) as busy,
              Clients(base_url, texts[:args.requests], [POLITE_ADDRESS],
                      pause_s=args.pause) as polite):
            time.sleep(2.0)  # the clients are at work before the upload
            before = engine_reading(base_url)
            loaded = hot_add(args, root, base_url, token, "hot-loaded")
            batches = engine_batches(before, engine_reading(base_url),
                                     loaded["ended"] - loaded["started"])
        quiet += polite_alone(base_url, texts[half:args.requests], args.pause)
    window = (loaded.pop("started"), loaded.pop("ended"))
    alone.pop("started"), alone.pop("ended")
    clients = answered(busy.between(*window))
    clients["requests_per_s"] = round(
        sum(status == 200 for _, _, status in busy.between(*window))
        / (window[1] - window[0]), 2)
    return {"quiet": {"requests": len(quiet), **percentiles(quiet)},
            "hot_add_quiet": alone, "hot_add_loaded": loaded,
            "polite": answered(polite.between(*window)),
            "clients": {"count": args.clients, **clients},
            "failed": answered(busy.answers + polite.answers)["failed"],
            "engine_batches": batches,
            "setup": {"threads": args.threads, "pairs": args.pairs, "quick": args.quick,
                      "training_cpus": args.training_cpus, "pause_s": args.pause,
                      "continuous": not args.static}}


def verdict(result: dict[str, Any]) -> dict[str, Any]:
    """The targets: the polite client's p50 beside the sidecar and the busy clients
    against its p50 alone, the time to publish against the quiet server's, failures (of
    every request the clients sent, the whole run)."""
    quiet = result["quiet"]["p50_ms"]
    polite = result["polite"].get("p50_ms", float("nan")) / quiet
    clients = result["clients"].get("p50_ms", float("nan")) / quiet
    publish = (result["hot_add_loaded"]["upload_to_published_s"]
               / result["hot_add_quiet"]["upload_to_published_s"])
    return {"polite_ratio": round(polite, 2), "polite_met": polite <= TARGET_RATIO,
            "clients_ratio": round(clients, 2),
            "publish_ratio": round(publish, 2), "publish_met": publish <= TARGET_PUBLISH,
            "failed_met": result["failed"] == 0}


def markdown(result: dict[str, Any]) -> str:
    v, c, p, setup = result["verdict"], result["clients"], result["polite"], result["setup"]
    b = result["engine_batches"]
    units = {"batch": "batches", "step": "live steps"}[b["unit"]]
    size = {"batch": "sentences", "step": "beam rows"}[b["unit"]]
    met = {True: "met", False: "MISSED"}
    statuses = ", ".join(f"{k}: {n}" for k, n in sorted(c["statuses"].items()))
    polite_statuses = ", ".join(f"{k}: {n}" for k, n in sorted(p["statuses"].items()))
    return "\n".join([
        "# The sidecar's share: a hot add beside clients", "",
        f"Sidecar: {setup['threads']} torch thread(s), default niceness; the server "
        f"({'continuous' if setup['continuous'] else 'static'} batching) yields "
        f"{setup['training_cpus']} CPU(s) while a job trains; {setup['pairs']} pairs"
        + (", quick job" * setup["quick"]) + f". The polite client sends one sentence per "
        f"request, {setup['pause_s']:g} s between an answer and its next request, from an "
        f"address of its own; the {c['count']} busy clients send back to back. Absolute "
        "times vary with the shared host: read the ratios.", "",
        f"| measure | quiet | beside the sidecar and {c['count']} busy clients |",
        "|---|---:|---:|",
        f"| polite client: one-sentence p50 ms | {result['quiet']['p50_ms']} | "
        f"{p.get('p50_ms')} |",
        f"| busy clients: one-sentence p50 ms (answers/s, all together) | - | "
        f"{c.get('p50_ms')} ({c['requests_per_s']}) |",
        f"| upload -> published s | {result['hot_add_quiet']['upload_to_published_s']} | "
        f"{result['hot_add_loaded']['upload_to_published_s']} |",
        f"| sidecar CPU s (share of one CPU) | {result['hot_add_quiet']['sidecar_cpu_s']} "
        f"({result['hot_add_quiet']['sidecar_cpu_share']}) | "
        f"{result['hot_add_loaded']['sidecar_cpu_s']} "
        f"({result['hot_add_loaded']['sidecar_cpu_share']}) |",
        f"| engine {units}: {size} per {b['unit']}, ms per {b['unit']} (engine busy "
        f"share) | - | {b['size']}, {b['ms_per_unit']} "
        f"({b['engine_busy_share']}) |", "",
        f"While the sidecar ran: the polite client {p['requests']} requests ({polite_statuses}),"
        f" the busy clients {c['requests']} ({statuses}); {b['count']} engine {units}.", "",
        f"- failed requests (the whole run): {result['failed']} (target 0: "
        f"{met[v['failed_met']]});",
        f"- polite p50 beside the sidecar and the busy clients: {v['polite_ratio']}x quiet "
        f"(target <= {TARGET_RATIO:g}x: {met[v['polite_met']]}); the busy clients' own p50: "
        f"{v['clients_ratio']}x the polite client's quiet p50;",
        f"- published in {v['publish_ratio']}x its quiet time (target <= {TARGET_PUBLISH:g}x:"
        f" {met[v['publish_met']]}).", ""])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed.serve.hot_add_load")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--clients", type=int, default=16, help="busy clients")
    parser.add_argument("--requests", type=int, default=20,
                        help="the polite client's requests alone")
    parser.add_argument("--pause", type=float, default=1.0,
                        help="seconds between the polite client's answer and its next request")
    parser.add_argument("--domain", default="medical")
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=1,
                        help="the sidecar's torch threads (the CPUs the server yields)")
    parser.add_argument("--training-cpus", type=int, default=1,
                        help="the server's NMT_EXECUTION__TRAINING_CPUS (0: never yield)")
    parser.add_argument("--backbone", default="default-en-fr")
    parser.add_argument("--quick", action="store_true", help=f"job config {QUICK_JOB}")
    parser.add_argument("--static", action="store_true",
                        help="the server with static batches (NMT_SCHEDULER__CONTINUOUS=false; "
                             "the default: continuous batching)")
    args = parser.parse_args(argv)
    args.store_dir, args.builtin = None, True  # what hot_add.py's helpers read
    result = run(args)
    result["verdict"] = verdict(result)
    name = "hot_add_load-static" if args.static else "hot_add_load"
    write_report(args.out, name, result, markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
