"""The sidecar's share: a hot add on a quiet server and beside 16 clients, in one run.

    python -m benchmarks.speed.serve.hot_add_load --data ../shared/data [--clients 16]
        [--requests N] [--pairs N] [--quick] [--threads N] [--out DIR]

1. a scratch store with the built-in default model (benchmarks/speed/serve/hot_add.py's),
   `python -m server` on it with default settings;
2. quiet: one client alone, one sentence per request (`--requests`): its p50;
3. hot add on a quiet server: `POST /admin/domains` (the train and dev split of en-fr
   medical as a new domain), `python -m trainer --once` (the sidecar at its default
   niceness, `--threads` torch threads: by default the one CPU the server yields while a
   job trains, NMT_EXECUTION__TRAINING_CPUS) trains, gates and publishes: upload ->
   published, and the CPU time the sidecar got (its share of one CPU);
4. the same hot add (another name) while `--clients` clients (each from an address of its
   own) send one-sentence requests back to back: upload -> published, every request's
   status, the clients' p50 while the sidecar ran.

Targets (issue: the sidecar costs serving at most its share): 0 failed requests, the
clients' p50 within 3x of quiet, the domain published within 2x of its time on the quiet
server. Writes results/hot_add_load.json and .md.
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

from benchmarks.live_server import live_server
from benchmarks.locations import DEFAULT_DATA, RESULTS_DIR
from benchmarks.report_files import write_report
from benchmarks.speed.adversarial.adversarial import percentiles, polite_texts
from benchmarks.speed.serve.hot_add import QUICK_JOB, prepare_store, read_split, start_sidecar, tsv

TARGET_RATIO, TARGET_PUBLISH = 3.0, 2.0


class Clients:
    """`count` clients sending one-sentence requests back to back until stopped."""

    def __init__(self, base_url: str, texts: Sequence[str], count: int) -> None:
        self.base_url, self.texts = base_url, list(texts)
        self.answers: list[tuple[float, float, int | str]] = []  # (sent, seconds, status)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                         for i in range(count)]

    def _run(self, index: int) -> None:
        transport = httpx.HTTPTransport(local_address=f"127.0.0.{10 + index}")
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

    def __enter__(self) -> Clients:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(900)


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


def quiet_p50(base_url: str, texts: Sequence[str]) -> dict[str, Any]:
    seconds = []
    with httpx.Client(base_url=base_url, timeout=900) as http:
        for text in texts:
            started = time.perf_counter()
            assert http.post("/translate", json={"text": text}).status_code == 200
            seconds.append(time.perf_counter() - started)
    return {"requests": len(texts), **percentiles(seconds)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = prepare_store(args)
    token = secrets.token_hex(16)
    settings = {"NMT_STORE_DIR": str(root), "NMT_ADMIN_TOKEN": token,
                "NMT_BUILTIN_ARTIFACTS": "true", "NMT_BACKBONE": args.backbone,
                "NMT_EXECUTION__TRAINING_CPUS": str(args.training_cpus)}
    texts = polite_texts(args.data, max(args.requests, 40))
    with live_server(settings, args.out / "tmp" / "hot_add" / "server-load.log") as base_url:
        quiet_p50(base_url, texts[:3])  # warm-up
        quiet = quiet_p50(base_url, texts[:args.requests])
        alone = hot_add(args, root, base_url, token, "hot-quiet")
        with Clients(base_url, texts, args.clients) as clients:
            time.sleep(2.0)  # the clients are at work before the upload
            loaded = hot_add(args, root, base_url, token, "hot-loaded")
        during = [a for a in clients.answers if loaded["started"] <= a[0] <= loaded["ended"]]
        failed = [a for a in clients.answers if a[2] != 200]
    for entry in (alone, loaded):
        entry.pop("started"), entry.pop("ended")
    ratio = (percentiles([s for _, s, _ in during])["p50_ms"] / quiet["p50_ms"]
             if during else float("nan"))
    publish = loaded["upload_to_published_s"] / alone["upload_to_published_s"]
    statuses: dict[str, int] = {}
    for _, _, status in clients.answers:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {"quiet": quiet, "hot_add_quiet": alone, "hot_add_loaded": loaded,
            "clients": {"count": args.clients, "requests": len(clients.answers),
                        "during_sidecar": len(during), "statuses": statuses,
                        "failed": len(failed),
                        **percentiles([s for _, s, _ in during])},
            "setup": {"threads": args.threads, "pairs": args.pairs, "quick": args.quick,
                      "training_cpus": args.training_cpus},
            "verdict": {"polite_ratio": round(ratio, 2), "polite_met": ratio <= TARGET_RATIO,
                        "publish_ratio": round(publish, 2),
                        "publish_met": publish <= TARGET_PUBLISH,
                        "failed_met": not failed}}


def markdown(result: dict[str, Any]) -> str:
    v, c = result["verdict"], result["clients"]
    met = {True: "met", False: "MISSED"}
    statuses = ", ".join(f"{k}: {n}" for k, n in sorted(c["statuses"].items()))
    return "\n".join([
        "# The sidecar's share: a hot add beside clients", "",
        f"Sidecar: {result['setup']['threads']} torch thread(s), default niceness; the "
        f"server yields {result['setup']['training_cpus']} CPU(s) while a job trains; "
        f"{result['setup']['pairs']} pairs" + (", quick job" * result["setup"]["quick"])
        + ". Absolute times vary with the shared host: read the ratios.", "",
        "| measure | quiet | beside the sidecar and clients |", "|---|---:|---:|",
        f"| one-sentence p50 ms | {result['quiet']['p50_ms']} | {c.get('p50_ms')} |",
        f"| upload -> published s | {result['hot_add_quiet']['upload_to_published_s']} | "
        f"{result['hot_add_loaded']['upload_to_published_s']} |",
        f"| sidecar CPU s (share of one CPU) | {result['hot_add_quiet']['sidecar_cpu_s']} "
        f"({result['hot_add_quiet']['sidecar_cpu_share']}) | "
        f"{result['hot_add_loaded']['sidecar_cpu_s']} "
        f"({result['hot_add_loaded']['sidecar_cpu_share']}) |", "",
        f"{c['count']} clients, {c['requests']} requests ({c['during_sidecar']} while the "
        f"sidecar ran): {statuses}.", "",
        f"- failed requests: {c['failed']} (target 0: {met[v['failed_met']]});",
        f"- p50 beside the sidecar: {v['polite_ratio']}x quiet (target <= {TARGET_RATIO:g}x: "
        f"{met[v['polite_met']]});",
        f"- published in {v['publish_ratio']}x its quiet time (target <= {TARGET_PUBLISH:g}x:"
        f" {met[v['publish_met']]}).", ""])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed.serve.hot_add_load")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=20, help="quiet requests")
    parser.add_argument("--domain", default="medical")
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=1,
                        help="the sidecar's torch threads (the CPUs the server yields)")
    parser.add_argument("--training-cpus", type=int, default=1,
                        help="the server's NMT_EXECUTION__TRAINING_CPUS (0: never yield)")
    parser.add_argument("--backbone", default="default-en-fr")
    parser.add_argument("--quick", action="store_true", help=f"job config {QUICK_JOB}")
    args = parser.parse_args(argv)
    args.store_dir, args.builtin = None, True  # what hot_add.py's helpers read
    result = run(args)
    write_report(args.out, "hot_add_load", result, markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
