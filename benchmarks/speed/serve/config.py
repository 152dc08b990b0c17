"""What the serving benchmarks fix: the load plans (how many clients, how long), the server
settings the offline run mirrors, and the command line serve_load and serve_directions
share."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks.live_server import batching_environment
from server.core.settings import DecodingSettings, EngineSettings, SchedulerSettings
from server.engine.engine import EngineOptions
from server.execution.settings import ExecutionSettings
from server.serving.runtime import engine_options


@dataclass(frozen=True)
class LoadPlan:
    levels: tuple[int, ...]  # concurrent clients
    max_requests: int  # per level
    max_seconds: float  # of sending, per level
    offline_seconds: float
    pairs: int = 5  # interleaved rounds at saturation: served again, then offline
    round_requests: int = 400  # requests per round (its level runs at most max_seconds)
    distinct_requests: int = 500  # the drawn list; levels cycle through it
    texts_per_set: int = 200


FULL = LoadPlan((1, 2, 4, 8, 16, 32, 64), max_requests=400, max_seconds=60.0,
                offline_seconds=120.0, round_requests=1200)
# Saturation needs more closed-loop clients than one batch holds (a 4,096-token budget at
# beam 4 is ~40 sentences): with fewer, batches stay as small as the clients in flight.
QUICK = LoadPlan((1, 16, 64), max_requests=160, max_seconds=30.0, offline_seconds=40.0,
                 pairs=3, round_requests=400)
TINY = LoadPlan((1, 4), max_requests=20, max_seconds=5.0, offline_seconds=10.0, pairs=2,
                distinct_requests=40, texts_per_set=20, round_requests=20)
PLANS = {"tiny": TINY, "quick": QUICK, "full": FULL}


@dataclass(frozen=True)
class ServeConfig:
    """The server settings the benchmark fixes (the offline run mirrors them); the rest
    are the server's defaults."""

    beam_size: int = DecodingSettings().beam_size
    max_batch_tokens: int = SchedulerSettings().max_batch_tokens
    lookahead_batches: int = SchedulerSettings().lookahead_batches
    request_timeout_s: float = 300.0  # measure throughput, not timeouts, at saturation
    max_queue: int = 4096
    length_ratio: float = DecodingSettings().length_ratio
    max_length: int = DecodingSettings().max_length
    engine: EngineSettings = field(default_factory=EngineSettings)
    execution: ExecutionSettings = field(default_factory=ExecutionSettings)
    continuous: bool = True  # NMT_SCHEDULER__CONTINUOUS (false: static batches)

    def environment(self) -> dict[str, str]:
        placed = ({"NMT_EXECUTION__FRONT_CPUS": str(self.execution.front_cpus)}
                  if self.execution.front_cpus else {})
        placed |= batching_environment(static=not self.continuous)
        return placed | {"NMT_DECODING__BEAM_SIZE": str(self.beam_size),
                "NMT_DECODING__MAX_BEAM_SIZE": str(max(self.beam_size,
                                                       DecodingSettings().max_beam_size)),
                "NMT_SCHEDULER__MAX_BATCH_TOKENS": str(self.max_batch_tokens),
                "NMT_SCHEDULER__LOOKAHEAD_BATCHES": str(self.lookahead_batches),
                "NMT_SCHEDULER__REQUEST_TIMEOUT_S": str(self.request_timeout_s),
                "NMT_SCHEDULER__MAX_QUEUE": str(self.max_queue)}

    def engine_options(self) -> EngineOptions:
        return engine_options(self.engine)  # the server's own mapping


def load_arguments(prog: str, doc: str) -> argparse.ArgumentParser:
    """The options every serving load benchmark takes (a benchmark adds its own)."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="corpora root (../shared/data)")
    parser.add_argument("--quick", action="store_true", help="fewer levels, shorter levels")
    parser.add_argument("--tiny", action="store_true", help="toy store and plan: code path")
    parser.add_argument("--levels", help="comma-separated client counts (overrides the plan)")
    parser.add_argument("--beam-size", type=int, default=ServeConfig().beam_size)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--static", action="store_true",
                        help="serve with static batches (the default: continuous batching)")
    parser.add_argument("--front-cpus", type=int, default=0,
                        help="serve with NMT_EXECUTION__FRONT_CPUS=N "
                             "(server/execution/placement.py)")
    parser.add_argument("--out", type=Path,
                        help="results directory (default: results/; --tiny: results/tmp/)")
    return parser


def choose_plan(args: argparse.Namespace) -> tuple[str, LoadPlan]:
    """The plan's name and the plan of `--tiny` / `--quick` / neither, `--levels` applied."""
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    plan = PLANS[mode]
    if args.levels:
        plan = replace(plan, levels=tuple(int(v) for v in args.levels.split(",") if v.strip()))
    return mode, plan
