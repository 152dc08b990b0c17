"""Where one engine run spends its time: torch.profiler's top operators and cProfile's
top Python functions, written as plain text (benchmarks/results/engine_profile.txt)."""

from __future__ import annotations

import cProfile
import io
import pstats
from collections.abc import Mapping
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.report_files import write_stamped
from benchmarks.speed.engine.systems import Runner

TOP_OPS = 25
TOP_FUNCTIONS = 30


def op_table(runner: Runner, beam_size: int, *, rows: int = TOP_OPS) -> str:
    """torch operators of one run, by self CPU time."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        runner(beam_size)
    table: str = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)
    return table


def function_table(runner: Runner, beam_size: int, *, rows: int = TOP_FUNCTIONS) -> str:
    """Python functions of one run, by cumulative and by own time (framework overhead:
    search bookkeeping, row regrouping, hooks, shows here rather than in the operators)."""
    profiler = cProfile.Profile()
    profiler.enable()
    runner(beam_size)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs()
    stats.sort_stats(pstats.SortKey.CUMULATIVE).print_stats(rows)
    stats.sort_stats(pstats.SortKey.TIME).print_stats(rows // 2)
    return out.getvalue()


def write_profile(runners: Mapping[str, Runner], path: Path, *,
                  beam_sizes: tuple[int, ...] = (1, 4), header: str = "") -> Path:
    """One section per runner and beam size (each runner already warmed up by the
    measurement)."""
    sections = [header.strip(), f"torch threads: {torch.get_num_threads()}", ""]
    for beam_size in beam_sizes:
        for name, runner in runners.items():
            title = f"=== {name} (beam {beam_size})"
            sections += [f"{title}: torch operators by self CPU time ===",
                         op_table(runner, beam_size), "",
                         f"{title}: Python functions by cumulative, then own time ===",
                         function_table(runner, beam_size), ""]
    return write_stamped(path, "\n".join(sections))
