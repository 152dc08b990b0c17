"""Two directions in one server against one direction alone, at the same load (issue #42).

    python -m benchmarks.speed.serve.serve_directions [--data DIR] [--quick] [--tiny]
                                                      [--levels N] [--out DIR]
    make bench-serve DIRECTIONS=1 [QUICK=1]

A second direction is made by publishing a copy of the default direction's backbone
(en->fr), with a copy of each of its active modules and its router, as another backbone
(`bench-copy`, registered as en->de so that requests can name it: it translates English
into French exactly as the original; the shipped fr->en direction would do as a second
one, but its texts cost differently, so the ratio would mix the two directions' speeds).
The server then holds these backbones, each with its own engine, modules and scheduler,
batched separately (a batch never mixes backbones) and sharing the one engine thread: what
serving two directions costs.

One live server, the same drawn requests (serve_load's: single and batch requests, domains
mixed) and the same number of closed-loop clients, in interleaved rounds. The number is
twice serve_load's saturation level (64 in the full plan): half of it, kept to one
direction, fills that direction's queue as one direction's is filled at saturation, so the
comparison is of two saturated directions against one (at 64 clients each direction of the
split waits with about one batch's worth and runs smaller batches).

- *one*: every request to the default direction (no languages named);
- *split*: every other request names the copy (`source: en, target: de`), the rest go to
  the default direction; half the clients send the one kind, half the other (a client
  keeps to its language pair, as a user or a document's job does).

The verdict is the median over rounds of split / one target tokens/s (steady window, as
serve_load counts them); the target is >= 0.9x. Each round also checks that the copy
answers a request as the original does (same weights: the same translation), and reports
each run's engine batches from the server's metrics (sentences per batch, the share of the
run the engine spent decoding), which tell smaller batches from an idle engine.
Writes results/serve_directions.{json,md} (`--tiny`: results/tmp/).
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from benchmarks.live_server import live_server
from benchmarks.report_files import results_dir, write_report
from benchmarks.speed.data import read_test_sets
from benchmarks.speed.model import quiet_libraries
from benchmarks.speed.serve.config import LoadPlan, ServeConfig, choose_plan, load_arguments
from benchmarks.speed.serve.loadgen import (
    LevelRun,
    LoadRequest,
    build_requests,
    run_level,
    served_domains,
    warm_up,
)
from benchmarks.speed.serve.loadstats import (
    BatchShape,
    TokenCounter,
    batch_shape,
    served_speed,
    summarise,
)
from benchmarks.speed.serve.store import StoreSpec, seed_store, text_sets, token_counter

COPY = "bench-copy"
COPY_LANGUAGES = {"source": "en", "target": "de"}  # a label requests can name
TARGET = 0.9  # split / one (issue #42)


def add_copy_direction(spec: StoreSpec) -> str:
    """Publish a copy of the store's default backbone, with its active modules and router,
    as backbone COPY; returns the original's name."""
    with spec.open() as store:
        original = store.load_backbone(spec.backbone)
        name = original.manifest.name
        copy = store.publish("backbone", COPY, original.files,
                             config=original.manifest.config,
                             provenance={"languages": COPY_LANGUAGES, "copy_of": name})
        store.activate("backbone", COPY, copy.version)
        fingerprint = copy.backbone_fingerprint
        for domain, version in store.active_domains(name).items():
            _copy(store, "module", domain, version, name, fingerprint)
        for classifier, version in store.registry.active_versions(
                "classifier", backbone=name).items():
            _copy(store, "classifier", classifier, version, name, fingerprint)
    return name


def _copy(store: Any, kind: str, name: str, version: int, backbone: str,
          fingerprint: str | None) -> None:
    loaded = store.load(kind, name, version, backbone=backbone)
    published = store.publish(kind, name, loaded.files, config=loaded.manifest.config,
                              backbone_fingerprint=fingerprint, backbone=COPY)
    store.activate(kind, name, published.version, backbone=COPY)


def split(requests: Sequence[LoadRequest]) -> list[LoadRequest]:
    """Every other request to the copy direction (the same texts and domains)."""
    return [replace(r, body=r.body | {"source": COPY_LANGUAGES["source"],
                                      "target": COPY_LANGUAGES["target"]}) if i % 2 else r
            for i, r in enumerate(requests)]


@dataclass(frozen=True)
class Round:
    number: int
    one_tokens_per_s: float
    split_tokens_per_s: float
    one_errors: int
    split_errors: int
    compared: int  # requests answered in both runs
    identical: int  # ... with the same translations
    one_batch: float = 0.0  # sentences per engine batch
    split_batch: float = 0.0
    one_busy: float = 0.0  # share of the run's wall time the engine spent in batches
    split_busy: float = 0.0

    @property
    def ratio(self) -> float:
        return self.split_tokens_per_s / max(self.one_tokens_per_s, 1e-9)


def translations(run: LevelRun, count: int) -> dict[int, list[str]]:
    return {o.index % count: [str(r["translation"]) for r in o.results]
            for o in run.outcomes if o.status == 200}


def measure(spec: StoreSpec, sets: dict[str, list[str]], plan: LoadPlan,
            config: ServeConfig, *, clients: int, log: Path,
            count_tokens: TokenCounter) -> list[Round]:
    timeout_s = config.request_timeout_s + 30
    with live_server(spec.environment() | config.environment(), log) as base_url:
        served = served_domains(base_url)
        one = build_requests(sets, served, count=plan.distinct_requests)
        both = split(one)
        print(f"server ready at {base_url}; domains: {', '.join(served)}", flush=True)
        warm_up(base_url, one, timeout_s=timeout_s)
        warm_up(base_url, both, timeout_s=timeout_s)
        groups = 2  # clients keep to one direction: even requests the default, odd the copy
        rounds = []
        for number in range(1, plan.pairs + 1):
            order = [("one", one), ("split", both)]
            if number % 2 == 0:  # ABBA: a drifting host weighs on both alike
                order.reverse()
            runs: dict[str, LevelRun] = {}
            shapes: dict[str, BatchShape] = {}
            for label, requests in order:
                before = batch_shape(base_url)
                runs[label] = asyncio.run(run_level(
                    base_url, requests, concurrency=clients, max_requests=plan.round_requests,
                    max_seconds=plan.max_seconds, timeout_s=timeout_s, groups=groups))
                shapes[label] = batch_shape(base_url).since(before)
            stats = {label: summarise(runs[label], one if label == "one" else both,
                                      count_tokens=count_tokens) for label in runs}
            alone = translations(runs["one"], len(one))
            mixed = translations(runs["split"], len(both))
            common = [i for i in mixed if i in alone and i % 2]  # copy-direction answers
            rounds.append(Round(
                number, served_speed(stats["one"]), served_speed(stats["split"]),
                sum(stats["one"].errors.values()), sum(stats["split"].errors.values()),
                len(common), sum(alone[i] == mixed[i] for i in common),
                shapes["one"].sentences_per_batch, shapes["split"].sentences_per_batch,
                busy_share(shapes["one"], runs["one"]), busy_share(shapes["split"],
                                                                   runs["split"])))
            last = rounds[-1]
            print(f"  round {number}/{plan.pairs}: one {last.one_tokens_per_s:,.1f} tokens/s, "
                  f"split {last.split_tokens_per_s:,.1f}: {last.ratio:.2f}x; sentences per "
                  f"batch {last.one_batch:.1f} / {last.split_batch:.1f}, engine busy "
                  f"{last.one_busy:.0%} / {last.split_busy:.0%}", flush=True)
    return rounds


def busy_share(shape: BatchShape, run: LevelRun) -> float:
    return shape.engine_s / run.wall_s if run.wall_s else 0.0


def table(rounds: Sequence[Round], *, description: str) -> str:
    ratio = statistics.median(r.ratio for r in rounds)
    verdict = "meets" if ratio >= TARGET else "misses"
    lines = ["# Two directions in one server against one alone (issue #42)", "",
             description, "",
             f"**Split / one: {ratio:.2f}x** (median of {len(rounds)} rounds; target >= "
             f"{TARGET}x: {verdict} it).", "",
             "| round | one direction, tokens/s | split over two, tokens/s | ratio | errors "
             "(one / split) | copy answers identical | sentences per batch (one / split) "
             "| engine busy (one / split) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r.number} | {r.one_tokens_per_s:,.1f} | {r.split_tokens_per_s:,.1f} | "
              f"{r.ratio:.2f}x | {r.one_errors} / {r.split_errors} | "
              f"{r.identical} of {r.compared} | {r.one_batch:.1f} / {r.split_batch:.1f} | "
              f"{r.one_busy:.0%} / {r.split_busy:.0%} |" for r in rounds]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = load_arguments("python -m benchmarks.speed.serve.serve_directions",
                          __doc__).parse_args(argv)
    mode, plan = choose_plan(args)
    # twice serve_load's saturation level: each direction of the split saturated (the
    # module docstring says why; `--levels N` sets it)
    clients = plan.levels[-1] if args.levels else plan.levels[-1] * 2
    config = ServeConfig(beam_size=args.beam_size, continuous=args.continuous)
    quiet_libraries()
    sets = text_sets(args.data, per_set=plan.texts_per_set)
    texts = (f"{args.data} en-fr test sets" if read_test_sets(args.data, per_set=1)
             else "synthetic") + f" ({sum(map(len, sets.values()))} texts)"
    with tempfile.TemporaryDirectory(prefix="serve-directions-") as scratch:
        spec = seed_store(Path(scratch) / "store", tiny=args.tiny, data=args.data)
        original = add_copy_direction(spec)
        spec = replace(spec, backbone=original)  # the default direction
        rounds = measure(spec, sets, plan, config, clients=clients,
                         log=Path(scratch) / "server.log", count_tokens=token_counter(spec))
    description = (
        f"Live `python -m server` on loopback serving `{original}` and `{COPY}` (a copy of "
        f"it with its modules and router: two backbones, batched separately), {mode} plan: "
        f"{clients} closed-loop clients in both runs (in the split run, half keep to each "
        f"direction: each direction's queue as full as one direction's at serve_load's "
        f"saturation level, {clients // 2}), "
        f"at most {plan.round_requests} requests or "
        f"{plan.max_seconds:g} s per run, beam {config.beam_size}, texts: {texts}; rounds "
        f"alternate which run goes first. Host: {platform.processor() or platform.machine()}"
        f", {os.cpu_count()} CPUs, torch {torch.__version__}, shared with other work.")
    rows = [{**r.__dict__, "ratio": r.ratio} for r in rounds]
    text = table(rounds, description=description)
    write_report(results_dir(args.out, tiny=args.tiny), "serve_directions",
                 {"description": description, "rows": rows}, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
