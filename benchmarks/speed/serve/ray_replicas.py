"""Throughput through Ray Serve: 1 vs 2 replicas behind Ray's proxy, and Ray's proxy vs
uvicorn direct at one replica, in one run (one torch thread per replica everywhere).

    python -m benchmarks.speed.serve.ray_replicas [--data DIR] [--quick] [--tiny] [--clients N]
                                            [--rounds R] [--out DIR]

1. seed a temporary store: the built-in default model (or `--tiny`: a toy backbone and
   three random adapters); draw requests once from the en-fr test sets of `--data`
   (single /translate and /translate/batch, domains mixed, as
   benchmarks.speed.serve.serve_load does);
2. start `python -m server` (uvicorn, OMP_NUM_THREADS=1) and a local Ray cluster with
   2 CPUs running the same app through `server.ray_serve.deployment.application`;
3. per round, in this order: uvicorn direct, Ray with 1 replica, Ray with 2 replicas
   (Serve scales the one deployment between them); each a closed loop of `--clients`
   clients for a fixed time after a warm-up;
4. report sentences/s and target tokens/s per system, summed over rounds, and the ratios
   (targets: 2 replicas >= 1.6x one; one replica through the proxy >= 0.9x uvicorn).

Writes results/ray_replicas.json and .md (`--tiny`: results/tmp/).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import ray
from ray import serve

from benchmarks.live_server import free_port, live_server
from benchmarks.report_files import results_dir, write_report
from benchmarks.speed.model import quiet_libraries
from benchmarks.speed.serve.config import ServeConfig
from benchmarks.speed.serve.loadgen import LevelRun, LoadRequest, build_requests, run_level, warm_up
from benchmarks.speed.serve.loadstats import LevelStats, TokenCounter, summarise
from benchmarks.speed.serve.store import StoreSpec, seed_store, text_sets, token_counter
from server.ray_serve.__main__ import replica_environment
from server.ray_serve.deployment import application
from server.settings import Settings

SYSTEMS = ("uvicorn", "ray-1", "ray-2")
TARGET_SCALING = 1.6  # 2 replicas over 1
TARGET_PROXY = 0.9  # Ray's proxy at 1 replica over uvicorn direct (<= 10% overhead)


@dataclass(frozen=True)
class Plan:
    rounds: int
    seconds: float  # of sending, per system and round
    clients: int
    warm_up: int  # requests before each measurement
    texts_per_set: int = 200
    distinct_requests: int = 500


FULL = Plan(rounds=3, seconds=60.0, clients=16, warm_up=16)
QUICK = Plan(rounds=1, seconds=30.0, clients=16, warm_up=16)
TINY = Plan(rounds=1, seconds=5.0, clients=4, warm_up=4, texts_per_set=20,
            distinct_requests=40)


@dataclass(frozen=True)
class Measured:
    system: str
    round: int
    stats: LevelStats
    replicas_seen: int  # distinct X-NMT-Replica names while measuring


def replicas_answering(base_url: str, *, tries: int = 40) -> set[str]:
    with httpx.Client(base_url=base_url, timeout=30, trust_env=False) as http:
        return {http.get("/health/ready").headers.get("x-nmt-replica", "?")
                for _ in range(tries)}


def wait_for_replicas(base_url: str, count: int, *, timeout_s: float = 600) -> None:
    """Until `count` distinct replicas answer /health/ready with 200."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if len(replicas_answering(base_url, tries=20)) >= count:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError(f"{count} replicas did not become ready in {timeout_s:g} s")


def measure(base_url: str, requests: Sequence[LoadRequest], plan: Plan, *, system: str,
            index: int, count_tokens: TokenCounter) -> Measured:
    warm_up(base_url, requests, count=plan.warm_up)
    run: LevelRun = asyncio.run(run_level(base_url, requests, concurrency=plan.clients,
                                          max_requests=10**9, max_seconds=plan.seconds))
    seen = len(replicas_answering(base_url, tries=20))
    stats = summarise(run, requests, count_tokens=count_tokens)
    print(f"  round {index} {system:>7}: {stats.sentences_per_s:7.2f} sentences/s, "
          f"{stats.ok}/{stats.requests} ok, {seen} replica(s)", flush=True)
    return Measured(system, index, stats, seen)


def start_ray(*, cpus: int) -> str:
    """A local cluster with `cpus` CPUs and Serve's proxy on a free loopback port."""
    ray.init(address="local", num_cpus=cpus, object_store_memory=128 * 1024 * 1024,
             include_dashboard=False, log_to_driver=False)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    return f"http://127.0.0.1:{port}"


def deploy(spec: StoreSpec, config: ServeConfig, *, replicas: int) -> None:
    environ = spec.environment() | config.environment() | {"NMT_LOG_LEVEL": "warning"}
    settings = Settings(store_dir=spec.root)
    env = replica_environment(settings, cpus_per_replica=1, environ=environ)
    serve.run(application(replicas=replicas, cpus_per_replica=1, env=env), name="nmt",
              route_prefix="/", blocking=False)


def run_all(spec: StoreSpec, sets: dict[str, list[str]], plan: Plan, config: ServeConfig,
            *, log: Path, count_tokens: TokenCounter) -> list[Measured]:
    os.environ["OMP_NUM_THREADS"] = "1"  # the uvicorn child inherits it: one torch thread
    results: list[Measured] = []
    with live_server(spec.environment() | config.environment(), log) as direct:
        with httpx.Client(base_url=direct, timeout=30, trust_env=False) as http:
            served = [d["name"] for d in http.get("/domains").json()["domains"]]
        requests = build_requests(sets, served, count=plan.distinct_requests)
        proxy = start_ray(cpus=2)
        try:
            for index in range(plan.rounds):
                results.append(measure(direct, requests, plan, system="uvicorn", index=index,
                                       count_tokens=count_tokens))
                for replicas in (1, 2):
                    deploy(spec, config, replicas=replicas)
                    wait_for_replicas(proxy, replicas)
                    results.append(measure(proxy, requests, plan, system=f"ray-{replicas}",
                                           index=index, count_tokens=count_tokens))
        finally:
            serve.shutdown()  # type: ignore[no-untyped-call]
            ray.shutdown()
    return results


def summary(results: Sequence[Measured]) -> dict[str, Any]:
    totals: dict[str, dict[str, float]] = {}
    for system in SYSTEMS:
        mine = [m.stats for m in results if m.system == system]
        wall = sum(s.wall_s for s in mine)
        totals[system] = {
            "sentences_per_s": sum(s.sentences for s in mine) / wall if wall else 0.0,
            "tokens_per_s": sum(s.target_tokens for s in mine) / wall if wall else 0.0,
            "errors": float(sum(s.requests - s.ok for s in mine))}
    direct, one, two = (totals[s]["sentences_per_s"] for s in SYSTEMS)
    scaling = two / one if one else None
    proxy = one / direct if direct else None
    return {"systems": totals,
            "scaling_2_over_1": scaling, "scaling_target": TARGET_SCALING,
            "scaling_met": None if scaling is None else scaling >= TARGET_SCALING,
            "proxy_over_direct": proxy, "proxy_target": TARGET_PROXY,
            "proxy_met": None if proxy is None else proxy >= TARGET_PROXY}


def markdown(results: Sequence[Measured], totals: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = ["# Ray Serve: replicas and proxy overhead", "", meta["description"], "",
             "| system | sentences/s | target tokens/s | errors |", "|---|---:|---:|---:|"]
    for system in SYSTEMS:
        row = totals["systems"][system]
        lines.append(f"| {system} | {row['sentences_per_s']:.2f} | {row['tokens_per_s']:.0f} "
                     f"| {row['errors']:.0f} |")

    def ratio(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}x"

    lines += ["", f"- 2 replicas / 1 replica: {ratio(totals['scaling_2_over_1'])} "
                  f"(target >= {TARGET_SCALING}x)",
              f"- Ray proxy (1 replica) / uvicorn direct: {ratio(totals['proxy_over_direct'])} "
              f"(target >= {TARGET_PROXY}x, i.e. <= 10% overhead)", "",
              "Per round (sentences/s): " + "; ".join(
                  f"{m.system} r{m.round} {m.stats.sentences_per_s:.2f}" for m in results),
              "", f"Notes: {meta['notes']}", ""]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed.serve.ray_replicas",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="corpora root (../shared/data)")
    parser.add_argument("--quick", action="store_true", help="one round of 30 s per system")
    parser.add_argument("--tiny", action="store_true", help="toy store and plan: code path")
    parser.add_argument("--clients", type=int, help="closed-loop clients (default 16)")
    parser.add_argument("--rounds", type=int, help="rounds (overrides the plan)")
    parser.add_argument("--out", type=Path,
                        help="results directory (default: results/; --tiny: results/tmp/)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    plan = {"tiny": TINY, "quick": QUICK, "full": FULL}[mode]
    plan = Plan(args.rounds or plan.rounds, plan.seconds, args.clients or plan.clients,
                plan.warm_up, plan.texts_per_set, plan.distinct_requests)
    config = ServeConfig()
    out = results_dir(args.out, tiny=args.tiny)
    quiet_libraries()
    sets = text_sets(args.data, per_set=plan.texts_per_set)
    with tempfile.TemporaryDirectory(prefix="ray-replicas-") as scratch:
        spec = seed_store(Path(scratch) / "store", tiny=args.tiny, data=args.data)
        results = run_all(spec, sets, plan, config, log=Path(scratch) / "server.log",
                          count_tokens=token_counter(spec))
    totals = summary(results)
    load = os.getloadavg()
    meta = {
        "mode": mode, "plan": asdict(plan), "server": config.environment(),
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(),
                    "python": platform.python_version(), "load_average_at_end": load[0]},
        "versions": {"ray": ray.__version__},
        "description": (f"{mode} plan: {plan.rounds} round(s) of {plan.seconds:g} s per system, "
                        f"{plan.clients} closed-loop clients, beam {config.beam_size}, mixed "
                        "single and batch requests over the served domains; one torch thread "
                        "per replica; Ray cluster of 2 CPUs (1 per replica), proxy on "
                        "loopback; uvicorn direct is `python -m server`."),
        "notes": ("The machine has 2 cores shared with other developers' work during this run "
                  f"(load average {load[0]:.1f} at the end); Ray's proxy, controller and "
                  "the load generator share those cores with the replicas, and the idle "
                  "Ray cluster stays up while uvicorn is measured. Ratios are measured side "
                  "by side, interleaved per round."),
    }
    payload = {"meta": meta, "summary": totals,
               "runs": [{"system": m.system, "round": m.round, "replicas_seen": m.replicas_seen,
                         **asdict(m.stats)} for m in results]}
    write_report(out, "ray_replicas", payload, markdown(results, totals, meta))
    print(markdown(results, totals, meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
