"""A thousand tenants' modules on one backbone: throughput, latency and memory by how many
modules the traffic spreads over (make bench-tenants).

    python -m benchmarks.speed.tenants.tenants [--data DIR] [--modules 1000]
        [--requests 800] [--rounds 8] [--clients 8] [--adapters int8] [--quick]
        [--registry-modules 10000] [--slots 16] [--device cpu] [--dtype float32]
        [--spreads 1,10,100,1000]
        [--store DIR] [--out DIR]

`--modules` distinct adapters (bottleneck 64, population.py) are published to a store over
the shipped en-fr model, none active: every one starts on disk. The serving path is the
server's own minus HTTP: `Runtime` (the store, the engine, the host tier bounded by
`NMT_ENGINE__HOST_BUDGET_BYTES`, reads of cold modules on a worker thread) and the
`Scheduler` (micro-batches mixing modules, at most `slots_per_bank` per batch; a sentence
whose module is cold waits for its read while others decode). The host budget is 20 % of
the modules' bytes, so modules are evicted and read back.

Traffic: `--clients` closed-loop clients each send one sentence at a time; the module of
each request is drawn over the first 1, 10, 100 or 1,000 modules, Zipf (s = 1) or
uniform. The runs take turns, `--rounds` rounds of `--requests / --rounds` requests each
(a shared host's load drifts; every run sees the same drift), the same sentences in every
run; before each turn the host tier is brought to the run's steady state (as many draws
of its distribution as the tier holds, read unmeasured), so no run inherits another's
cache. Reported per run: target tokens per second, and its ratio to the one-module run
(the median over rounds of each round's ratio: a stall of the shared host hits a round),
the p50/p99 latency, the p99 of requests whose module was cold when sent, and of the
requests to the least-used 10 % of the modules that got traffic (grown until they hold
`LEAST_USED_MIN_REQUESTS`), sentences a batch; the host tier's largest size against the
budget, evictions, reads. And the
registry's list and lookup times at `--registry-modules` rows (0: not measured).

`--device cuda` serves from device slots on the GPU (`--dtype` float16 or bfloat16, the
adapters grouped in it, the engine's CUDA default) and writes tenants_gpu.json/.md;
`--spreads` keeps only some of the spreads (the one-module run is always there).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from benchmarks.locations import DEFAULT_DATA
from benchmarks.report_files import results_dir, write_report
from benchmarks.speed.data import read_test_sets
from benchmarks.speed.model import synthetic_lines
from benchmarks.speed.tenants.population import (
    BACKBONE,
    publish_tenants,
    registry_at_scale,
)
from benchmarks.speed.tenants.report import markdown
from model_store import BUILTIN_DIR, Store
from server.core.metrics import Metrics
from server.decoding.search import SearchOptions
from server.engine.engine import Member, SentenceJob
from server.execution.engine_thread import EngineThread
from server.scheduling.scheduler import Scheduler
from server.serving.runtime import Runtime
from server.settings import Settings

SPREADS = (1, 10, 100, 1000)
SLOTS = 16
BUDGET_SHARE = 0.20  # of the modules' bytes: at most 25 %, so that modules are evicted
OPTIONS = SearchOptions(beam_size=1)
# how a batch's adapters run (NMT_ENGINE__MODULE_*): one small matmul per module and layer
# (float32), or every module of the batch in one call per matrix (int8 through the grouped
# kernel, bfloat16 batched): with one sentence per module, per-module calls dominate a step
# (CPU options); "default": the engine's own (on CUDA: grouped in the engine's dtype)
# requests the least-used bucket holds at least (grown past 10 % of the modules if need
# be): its p99 is then not its slowest request alone
LEAST_USED_MIN_REQUESTS = 100
ADAPTERS: dict[str, dict[str, bool]] = {"float32": {}, "int8": {"module_int8": True},
                                        "bfloat16": {"module_bf16": True}, "default": {}}


@dataclass
class Run:
    label: str
    modules: int
    spread: str
    tokens: int = 0
    seconds: float = 0.0  # summed over its rounds
    rounds: list[float] = field(default_factory=list)  # tokens/s of each round
    latencies: list[tuple[str, bool, float]] = field(default_factory=list)  # module, cold, s
    host_peak: int = 0
    batches: int = 0  # engine batches while it ran, and their sentences
    batched: int = 0

    least_used_min: int = LEAST_USED_MIN_REQUESTS

    def summary(self) -> dict[str, Any]:
        times = [s for _, _, s in self.latencies]
        cold = [s for _, was_cold, s in self.latencies if was_cold]
        uses = Counter(m for m, _, _ in self.latencies)
        least = least_used(uses, self.least_used_min)
        least_times = [s for m, _, s in self.latencies if m in least]
        tenth = least_used(uses, 0)  # the strict 10 %, however few requests it holds
        tenth_times = [s for m, _, s in self.latencies if m in tenth]
        return {"label": self.label, "modules": self.modules, "spread": self.spread,
                "requests": len(times), "modules_used": len(uses),
                "tokens_per_s": self.tokens / self.seconds, "round_tokens_per_s": self.rounds,
                "p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99),
                "cold_requests": len(cold), "p99_cold_ms": percentile(cold, 99),
                "p99_least_used_ms": percentile(least_times, 99),
                "least_used_modules": len(least), "least_used_requests": len(least_times),
                "p99_strict_tenth_ms": percentile(tenth_times, 99),
                "strict_tenth_requests": len(tenth_times),
                "host_peak_bytes": self.host_peak,
                "sentences_per_batch": self.batched / self.batches if self.batches else None}


def least_used(uses: Counter[str], min_requests: int) -> set[str]:
    """The least-used 10 % of the modules that got traffic (fewest requests first, ties by
    name), grown by the next least-used ones until they hold `min_requests` requests: a
    p99 over a handful of requests is their slowest one, a single stall of the shared
    host."""
    ordered = sorted(uses.items(), key=lambda item: (item[1], item[0]))
    tenth = max(1, math.ceil(len(ordered) / 10))
    chosen: set[str] = set()
    requests = 0
    for index, (module, count) in enumerate(ordered):
        if index >= tenth and requests >= min_requests:
            break
        chosen.add(module)
        requests += count
    return chosen


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1)]


def sentences(data: Path | None, count: int) -> list[str]:
    sets = read_test_sets(data if data is not None and data.is_dir() else None, per_set=count)
    texts = [t for name, ts in sorted(sets.items()) for t in ts if 20 <= len(t) <= 160]
    return (texts or synthetic_lines(count, seed=3))[:count]


def draws(modules: list[str], spread: str, count: int, seed: int) -> list[str]:
    chooser = random.Random(seed)
    weights = [1.0 / (rank + 1) if spread == "zipf" else 1.0 for rank in range(len(modules))]
    return chooser.choices(modules, weights=weights, k=count)


def batch_tally(metrics: Metrics) -> tuple[int, int]:
    """(batches, sentences) the scheduler ran so far: a cold sentence held back while its
    module is read leaves its batch one sentence short."""
    samples = {s.name: s.value for m in metrics.batch_sentences.collect() for s in m.samples}
    return (int(samples.get("nmt_scheduler_batch_sentences_count", 0)),
            int(samples.get("nmt_scheduler_batch_sentences_sum", 0)))


async def traffic(runtime: Runtime, scheduler: Scheduler, run: Run, ids: list[list[int]],
                  modules: list[str], clients: int) -> Run:
    engine = runtime.current_engine()
    before = batch_tally(runtime.metrics)
    queue = list(zip(ids, modules, strict=True))
    queue.reverse()

    async def client() -> None:
        while queue:
            source, module = queue.pop()
            cold = bool(runtime.missing([module]))
            job = SentenceJob(source, (Member(module),), engine.max_length(len(source)))
            started = time.perf_counter()
            [future] = scheduler.submit([job], OPTIONS, deadline=time.monotonic() + 600)
            hypotheses = await future
            run.latencies.append((module, cold, time.perf_counter() - started))
            run.tokens += len(hypotheses[0].tokens)
            run.host_peak = max(run.host_peak, engine.modules.host_bytes)

    started, tokens = time.perf_counter(), run.tokens
    await asyncio.gather(*(client() for _ in range(clients)))
    seconds = time.perf_counter() - started
    run.seconds += seconds
    run.rounds.append((run.tokens - tokens) / seconds)
    after = batch_tally(runtime.metrics)
    run.batches += after[0] - before[0]
    run.batched += after[1] - before[1]
    return run


async def steady_state(runtime: Runtime, modules: list[str]) -> int:
    """Leave the host tier as a long run of this traffic would: `modules` (as many draws
    of its distribution as the tier holds) read in, unmeasured. Runs take turns, so without
    this a run over 100 modules would find them evicted by the 1,000-module runs before it.
    Returns the modules read."""
    reads = 0
    for module_id in dict.fromkeys(modules):
        if runtime.missing([module_id]):
            await runtime.reload(module_id)
            reads += 1
    return reads


def counters(metrics: Metrics) -> dict[str, float]:
    def value(name: str, **labels: str) -> float:
        return metrics.registry.get_sample_value(name, labels or None) or 0.0

    return {"host_evictions": value("nmt_engine_module_evictions_total", tier="host"),
            "slot_evictions": value("nmt_engine_module_evictions_total", tier="device"),
            "reads_off_engine_thread": value("nmt_engine_module_reloads_total", thread="worker"),
            "reads_on_engine_thread": value("nmt_engine_module_reloads_total", thread="engine"),
            "slot_loads": sum(s.value for m in metrics.module_loads.collect()
                              for s in m.samples if s.name.endswith("_total")),
            "slot_hits": sum(s.value for m in metrics.module_hits.collect()
                             for s in m.samples if s.name.endswith("_total"))}


async def serve(root: Path, ids: list[str], module_bytes: int, texts: list[str],
                args: argparse.Namespace) -> dict[str, Any]:
    budget = int(BUDGET_SHARE * module_bytes * len(ids))
    settings = Settings.model_validate({
        "store_dir": root, "builtin_artifacts": True, "backbone": BACKBONE,
        "engine": {"slots_per_bank": args.slots, "host_capacity": 1_000_000,
                   "host_budget_bytes": budget, "device": args.device, "dtype": args.dtype,
                   **ADAPTERS[args.adapters]},
        "scheduler": {"max_wait_ms": 2.0, "request_timeout_s": 600.0}})
    metrics, thread = Metrics(), EngineThread()
    with Store.open(root, builtin_dir=BUILTIN_DIR) as store:
        runtime = Runtime(store, settings, metrics=metrics, engine_thread=thread)
        await runtime.refresh()
        scheduler = Scheduler(runtime.run_batch, thread, settings.scheduler,
                              max_modules=args.slots, metrics=metrics, residency=runtime)
        scheduler.start()
        try:
            engine = runtime.current_engine()
            source = [engine.source_tokenizer.encode([t])[0] for t in texts]
            warm = Run("warm-up", 1, "uniform")
            await traffic(runtime, scheduler, warm, source[:args.clients * 2],
                          [ids[0]] * (args.clients * 2), args.clients)
            plans = [Run("one", 1, "uniform")] + [
                Run(f"{n}-{spread}", n, spread) for n in args.spreads
                if 1 < n <= len(ids) for spread in ("zipf", "uniform")]
            chosen = [draws(ids[:run.modules], run.spread, len(source), seed)
                      for seed, run in enumerate(plans)]
            share = math.ceil(len(source) / args.rounds)
            room = budget // module_bytes  # modules the host tier holds
            warm_reads = 0
            for round_ in range(args.rounds):
                part = slice(round_ * share, (round_ + 1) * share)
                for index, (run, modules) in enumerate(zip(plans, chosen, strict=True)):
                    warm_reads += await steady_state(runtime, draws(
                        ids[:run.modules], run.spread, room, 10_000 + round_ * 10 + index))
                    await traffic(runtime, scheduler, run, source[part], modules[part],
                                  args.clients)
                    print(f"round {round_ + 1} {run.label}: {run.tokens / run.seconds:.1f} "
                          "tokens/s so far", flush=True)
            runs = [run.summary() for run in plans]
            banks = sum(t.numel() * t.element_size() for bank in engine.modules.banks.values()
                        for t in bank.tensors.values())
        finally:
            await scheduler.stop()
            thread.shutdown()
    return {"runs": runs, "budget_bytes": budget, "module_bytes": module_bytes,
            "slot_bytes": banks, "counters": counters(metrics) | {"warm_up_reads": warm_reads}}


def summarise(served: dict[str, Any], registry: dict[str, Any], modules: int) -> dict[str, Any]:
    runs = {r["label"]: r for r in served["runs"]}
    one, one_p99 = runs["one"]["tokens_per_s"], runs["one"]["p99_ms"]
    for run in served["runs"]:  # each round against the same round's one-module run: a
        # shared host's stalls hit single rounds, the median of the rounds' ratios skips them
        run["ratio"] = statistics.median(
            mine / base for mine, base in zip(run["round_tokens_per_s"],
                                              runs["one"]["round_tokens_per_s"], strict=True))
    result: dict[str, Any] = {"modules": modules, "one_module_tokens_per_s": one,
                              "one_module_p99_ms": one_p99}
    for n in sorted({run["modules"] for run in served["runs"]} - {1}):
        pair = [runs[f"{n}-{s}"] for s in ("zipf", "uniform") if f"{n}-{s}" in runs]
        if pair:
            result[f"ratio_{n}"] = min(r["ratio"] for r in pair)
            result[f"least_used_p99_over_one_{n}"] = max(
                (r["p99_least_used_ms"] or 0.0) for r in pair) / one_p99
            result[f"least_used_requests_{n}"] = min(r["least_used_requests"] for r in pair)
            result[f"strict_tenth_p99_over_one_{n}"] = max(
                (r.get("p99_strict_tenth_ms") or 0.0) for r in pair) / one_p99
            result[f"strict_tenth_requests_{n}"] = min(
                r.get("strict_tenth_requests", 0) for r in pair)
    cold = [r["p99_cold_ms"] for r in served["runs"] if r["p99_cold_ms"] is not None]
    result |= {
        "host_memory_bytes": max(r["host_peak_bytes"] for r in served["runs"]),
        "budget_bytes": served["budget_bytes"],
        "modules_bytes": served["module_bytes"] * modules,
        "budget_share": served["budget_bytes"] / (served["module_bytes"] * modules),
        "slot_bytes": served["slot_bytes"], "p99_cold_ms": max(cold) if cold else None,
        **served["counters"], "registry": registry, "runs": served["runs"]}
    return result


def device_name(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(torch.device(device))} (CUDA {torch.version.cuda})"
    return device


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--modules", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--adapters", choices=sorted(ADAPTERS), default=None,
                        help="how a batch's adapters run (default: int8, grouped, on the "
                             "CPU; the engine's default on CUDA)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--registry-modules", type=int, default=10_000,
                        help="rows of the registry timing (0: not measured)")
    parser.add_argument("--slots", type=int, default=SLOTS,
                        help="device slots (per bank), also the most modules per batch; at "
                             "least routing's top_k (3)")
    parser.add_argument("--device", default="cpu", help="the engine's device: cpu, cuda")
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default=None,
                        help="the engine's dtype (default: float32; float16 on CUDA)")
    parser.add_argument("--spreads", default=",".join(map(str, SPREADS)),
                        help="modules the traffic spreads over, comma-separated (beside the "
                             "one-module run)")
    parser.add_argument("--store", type=Path, default=None,
                        help="keep the store here (reused: its modules are not published "
                             "again)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--quick", action="store_true",
                        help="150 modules, 160 requests in 8 rounds (the 1,000-module runs "
                             "are left out; results/tmp/)")
    args = parser.parse_args(argv)
    if args.quick:
        args.modules, args.requests, args.rounds = 150, 160, 8
    cpu = args.device == "cpu"
    args.dtype = args.dtype or ("float32" if cpu else "float16")
    args.adapters = args.adapters or ("int8" if cpu else "default")
    args.spreads = sorted({int(n) for n in args.spreads.split(",") if n.strip()})
    with tempfile.TemporaryDirectory(prefix="nmt-tenants-") as scratch:
        root = args.store or Path(scratch) / "store"
        with Store.open(root, builtin_dir=BUILTIN_DIR) as store:
            started = time.perf_counter()
            ids, size = publish_tenants(store, args.modules)
            print(f"{len(ids)} modules in the store ({time.perf_counter() - started:.0f} s)",
                  flush=True)
        registry = (registry_at_scale(Path(scratch), args.registry_modules)
                    if args.registry_modules > 0 else {})
        served = asyncio.run(serve(root, ids, size, sentences(args.data, args.requests), args))
    result = summarise(served, registry, args.modules) | {
        "adapters": args.adapters, "requests": args.requests, "rounds": args.rounds,
        "clients": args.clients, "device": device_name(args.device), "dtype": args.dtype,
        "slots": args.slots, "least_used_min": LEAST_USED_MIN_REQUESTS}
    full = args.modules >= 1000 and args.requests >= 400
    folder = results_dir(args.out, tiny=not full)
    paths = write_report(folder, "tenants" if cpu else "tenants_gpu", result, markdown(result))
    print(f"wrote {paths[-1]}")


if __name__ == "__main__":
    main()
