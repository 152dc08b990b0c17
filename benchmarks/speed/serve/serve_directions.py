"""One, two and three directions in one server, at the same load (issues #42 and #66).

    python -m benchmarks.speed.serve.serve_directions [--data DIR] [--quick] [--tiny]
                                                      [--levels N] [--rounds N] [--out DIR]
                                                      [--front-cpus N] [--static]
    make bench-serve DIRECTIONS=1 [QUICK=1] [FRONT_CPUS=N] [STATIC=1]

The extra directions are copies of the default direction's backbone (en->fr), each with a
copy of its active modules and its router, published as backbones of their own
(`bench-copy`, `bench-copy-2`) under language pairs requests can name (direction_copies:
en->de and en->eo while the store declares neither; a shipped en->de stays untouched and
the copy takes the next free pair). A copy translates English into French exactly as the
original: the real second and third directions have the same shape (the cost of serving
a direction depends on its shape), but their texts cost differently, so the ratios would
mix the directions' speeds. The server holds these backbones, each with its own engine,
modules and scheduler, batched separately (a batch never mixes backbones) and sharing the
one engine thread: what serving several directions costs.

One live server, the same drawn requests (serve_load's: single and batch requests, domains
mixed) and the same closed-loop clients in every run, side by side in interleaved rounds
(each round runs the three in a rotated order: a drifting host weighs on all alike). The
number of clients is three times serve_load's saturation level (192 in the full and quick
plans): a third of it, kept to one direction, fills that direction's queue as one
direction's is filled at saturation, so the three-direction run is of saturated directions.

- *one*: every request to the default direction (no languages named);
- *two*: every other request names the first copy (`source: en, target: de`);
- *three*: requests go in turn to the default direction, the first and the second copy.

Every client keeps to the requests of one residue modulo 6, so it keeps to one language
pair in every run (as a user or a document's job does) and sends the same texts in each.
The verdict is the median over rounds of three / two target tokens/s (steady window, as
serve_load counts them), target >= 0.9x ("serving three directions costs each no more than
two did"); two / one (issue #42's verdict, the same target) is reported beside it. Each
round also checks that every copy answers its requests as the original does (same weights:
the same translations), and reports each run's engine batches from the server's metrics
(sentences per static batch, or beam rows per live step with continuous batching; the
share of the run the engine spent decoding), which tell smaller batches from an idle
engine.
`--front-cpus N` serves with the server's CPU placement and runs the load generator on
the front's CPUs (as serve_load does).
Writes results/serve_directions.{json,md} (`--front-cpus N`: serve_directions-front-cpus-N,
`--static`: ...-static; `--tiny`: results/tmp/).
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from benchmarks.live_server import live_server
from benchmarks.report_files import results_dir, write_report
from benchmarks.speed.data import read_test_sets
from benchmarks.speed.model import quiet_libraries
from benchmarks.speed.serve.config import LoadPlan, ServeConfig, choose_plan, load_arguments
from benchmarks.speed.serve.cpu_placement import front_cpus, on_cpus, placement_note
from benchmarks.speed.serve.direction_copies import (
    CopyDirection,
    add_copy_directions,
    spread,
)
from benchmarks.speed.serve.loadgen import (
    LevelRun,
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
from server.execution.settings import ExecutionSettings

ARMS = ("one", "two", "three")  # a run's name: how many directions share its load
WAYS = {"one": 1, "two": 2, "three": 3}
GROUPS = 6  # client groups: a multiple of every run's direction count
TARGET = 0.9  # three / two (issue #66), two / one (issue #42)


@dataclass(frozen=True)
class Run:
    """One run of a round: its load over `ways` directions."""

    tokens_per_s: float
    errors: int
    sentences_per_batch: float  # static batches (0: none ran)
    busy: float  # share of the run's wall time the engine spent in batches
    rows_per_step: float = 0.0  # continuous batching's live steps (0: none ran)

    @property
    def engine_unit(self) -> str:
        """What one engine call held: a static batch's sentences, or a live step's rows."""
        if self.sentences_per_batch:
            return f"{self.sentences_per_batch:.1f}"
        return f"{self.rows_per_step:.1f} rows" if self.rows_per_step else "-"


@dataclass(frozen=True)
class Round:
    number: int
    order: list[str]  # the runs, in the order they ran
    runs: dict[str, Run]
    identical: dict[str, list[int]]  # copy backbone -> [identical, compared] answers

    def ratio(self, split: str, base: str) -> float:
        return self.runs[split].tokens_per_s / max(self.runs[base].tokens_per_s, 1e-9)


def translations(run: LevelRun, count: int) -> dict[int, list[str]]:
    return {o.index % count: [str(r["translation"]) for r in o.results]
            for o in run.outcomes if o.status == 200}


def copy_answers(runs: dict[str, LevelRun], copies: Sequence[CopyDirection],
                 count: int) -> dict[str, list[int]]:
    """Per copy, [identical, compared]: its answers in the split runs against the default
    direction's answers to the same requests in the run `one`."""
    alone = translations(runs["one"], count)
    found = {copy.backbone: [0, 0] for copy in copies}
    for arm in ARMS[1:]:
        ways = WAYS[arm]
        for index, answer in translations(runs[arm], count).items():
            if index % ways == 0 or index not in alone:
                continue
            tally = found[copies[index % ways - 1].backbone]
            tally[0] += answer == alone[index]
            tally[1] += 1
    return found


def rotated(number: int) -> list[str]:
    """The runs of round `number`, rotated so each runs first, second and third in turn."""
    shift = (number - 1) % len(ARMS)
    return list(ARMS[shift:] + ARMS[:shift])


def measure(spec: StoreSpec, sets: dict[str, list[str]], plan: LoadPlan,
            config: ServeConfig, *, clients: int, copies: Sequence[CopyDirection],
            log: Path, count_tokens: TokenCounter) -> list[Round]:
    timeout_s = config.request_timeout_s + 30
    front = front_cpus(config)
    with live_server(spec.environment() | config.environment(), log) as base_url:
        served = served_domains(base_url)
        # a multiple of GROUPS: each client keeps to one residue, hence to one direction
        count = max(plan.distinct_requests - plan.distinct_requests % GROUPS, GROUPS)
        base = build_requests(sets, served, count=count)
        requests = {arm: spread(base, copies[:WAYS[arm] - 1]) for arm in ARMS}
        print(f"server ready at {base_url}; domains: {', '.join(served)}; copies: "
              + ", ".join(f"{c.backbone} ({c.label})" for c in copies), flush=True)
        warm_up(base_url, requests["three"], count=6, timeout_s=timeout_s)
        rounds = []
        for number in range(1, plan.pairs + 1):
            order = rotated(number)
            runs: dict[str, LevelRun] = {}
            shapes: dict[str, BatchShape] = {}
            for arm in order:
                before = batch_shape(base_url)
                with on_cpus(front):
                    runs[arm] = asyncio.run(run_level(
                        base_url, requests[arm], concurrency=clients,
                        max_requests=plan.round_requests, max_seconds=plan.max_seconds,
                        timeout_s=timeout_s, groups=GROUPS))
                shapes[arm] = batch_shape(base_url).since(before)
            measured = {}
            for arm, run in runs.items():
                stats = summarise(run, requests[arm], count_tokens=count_tokens)
                measured[arm] = Run(served_speed(stats), sum(stats.errors.values()),
                                    shapes[arm].sentences_per_batch, busy_share(shapes[arm], run),
                                    shapes[arm].rows_per_step)
            rounds.append(Round(number, order, measured, copy_answers(runs, copies, count)))
            last = rounds[-1]
            print(f"  round {number}/{plan.pairs} ({', '.join(order)}): "
                  + ", ".join(f"{arm} {last.runs[arm].tokens_per_s:,.1f}" for arm in ARMS)
                  + f" tokens/s; three / two {last.ratio('three', 'two'):.2f}x, two / one "
                  f"{last.ratio('two', 'one'):.2f}x; per engine call "
                  + " / ".join(last.runs[arm].engine_unit for arm in ARMS)
                  + "; engine busy "
                  + " / ".join(f"{last.runs[arm].busy:.0%}" for arm in ARMS), flush=True)
    return rounds


def busy_share(shape: BatchShape, run: LevelRun) -> float:
    return shape.engine_s / run.wall_s if run.wall_s else 0.0


def median_ratio(rounds: Sequence[Round], split: str, base: str) -> float:
    return statistics.median(r.ratio(split, base) for r in rounds)


def verdict(ratio: float) -> str:
    return "meets" if ratio >= TARGET else "misses"


def table(rounds: Sequence[Round], *, description: str) -> str:
    three, two = median_ratio(rounds, "three", "two"), median_ratio(rounds, "two", "one")
    copies = list(rounds[0].identical)
    lines = ["# One, two and three directions in one server, at the same load", "",
             description, "",
             f"**Three / two: {three:.2f}x** (median of {len(rounds)} rounds; target >= "
             f"{TARGET}x: {verdict(three)} it). Two / one: {two:.2f}x (target >= {TARGET}x: "
             f"{verdict(two)} it); three / one: "
             f"{median_ratio(rounds, 'three', 'one'):.2f}x.", "",
             "| round | order | one, tokens/s | two, tokens/s | three, tokens/s | three / two "
             "| two / one | errors (one / two / three) | "
             + " | ".join(f"{c} answers identical" for c in copies)
             + " | sentences a batch, or beam rows a live step (one / two / three) "
             "| engine busy (one / two / three) |",
             "|---:|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(copies) + "---:|---:|"]
    for r in rounds:
        runs = [r.runs[arm] for arm in ARMS]
        lines.append(
            f"| {r.number} | {', '.join(r.order)} | "
            + " | ".join(f"{run.tokens_per_s:,.1f}" for run in runs)
            + f" | {r.ratio('three', 'two'):.2f}x | {r.ratio('two', 'one'):.2f}x | "
            + " / ".join(str(run.errors) for run in runs) + " | "
            + " | ".join(f"{same} of {compared}" for same, compared in r.identical.values())
            + " | " + " / ".join(run.engine_unit for run in runs)
            + " | " + " / ".join(f"{run.busy:.0%}" for run in runs) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = load_arguments("python -m benchmarks.speed.serve.serve_directions", __doc__)
    parser.add_argument("--rounds", type=int, help="interleaved rounds (overrides the plan)")
    args = parser.parse_args(argv)
    mode, plan = choose_plan(args)
    if args.rounds:
        plan = replace(plan, pairs=args.rounds)
    # three times serve_load's saturation level: each direction of the three saturated
    # (the module docstring says why; `--levels N` sets it)
    clients = plan.levels[-1] if args.levels else plan.levels[-1] * len(ARMS)
    config = ServeConfig(beam_size=args.beam_size,
                         execution=ExecutionSettings(front_cpus=args.front_cpus),
                         continuous=not args.static)
    quiet_libraries()
    sets = text_sets(args.data, per_set=plan.texts_per_set)
    texts = (f"{args.data} en-fr test sets" if read_test_sets(args.data, per_set=1)
             else "synthetic") + f" ({sum(map(len, sets.values()))} texts)"
    with tempfile.TemporaryDirectory(prefix="serve-directions-") as scratch:
        spec = seed_store(Path(scratch) / "store", tiny=args.tiny, data=args.data)
        original, copies = add_copy_directions(spec, len(ARMS) - 1)
        spec = replace(spec, backbone=original)  # the default direction
        rounds = measure(spec, sets, plan, config, clients=clients, copies=copies,
                         log=Path(scratch) / "server.log", count_tokens=token_counter(spec))
    named = ", ".join(f"`{c.backbone}` ({c.label})" for c in copies)
    description = (
        f"Live `python -m server` on loopback serving `{original}` and copies of it with "
        f"its modules and router, {named} (three backbones, batched separately), {mode} "
        f"plan: {clients} closed-loop clients in every run (in the split runs, an equal "
        f"share keeps to each direction: in the three-direction run each direction's queue "
        f"is about as full as one direction's at {clients // len(ARMS)} clients), at most "
        f"{plan.round_requests} requests or {plan.max_seconds:g} s per run, beam "
        f"{config.beam_size}, texts: {texts}; each round runs one, two and three "
        f"directions in a rotated order. Host: {platform.processor() or platform.machine()}"
        f", {os.cpu_count()} CPUs, torch {torch.__version__}, shared with other work."
        + placement_note(config, offline=False))
    rows = [asdict(r) | {"three_over_two": r.ratio("three", "two"),
                         "two_over_one": r.ratio("two", "one")} for r in rounds]
    text = table(rounds, description=description)
    stem = "serve_directions" + (f"-front-cpus-{args.front_cpus}" if args.front_cpus else "")
    stem += "-static" if args.static else ""
    write_report(results_dir(args.out, tiny=args.tiny), stem,
                 {"description": description,
                  "copies": [{"backbone": c.backbone, "source": c.pair.source,
                              "target": c.pair.target} for c in copies],
                  "three_over_two": median_ratio(rounds, "three", "two"),
                  "two_over_one": median_ratio(rounds, "two", "one"),
                  "rows": rows}, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
