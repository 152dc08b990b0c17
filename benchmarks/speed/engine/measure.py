"""Interleaved timing of several systems on one machine, in one run.

Protocol: every (system, decode) is run once untimed (warm-up: allocations, lazy
initialisation, module slots), then `rounds` rounds each run every (system, decode) once,
in an order rotated from round to round, so that slow phases of a noisy machine hit all
systems alike. A system's figure is its median time. Every run's outputs are counted:
a system that did not produce exactly `target_length` tokens per sentence fails the
benchmark instead of reporting a speed for different work.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.speed.engine.systems import Runner

DECODES: dict[str, int] = {"greedy": 1, "beam4": 4}  # decode name -> beam size


class LengthMismatch(RuntimeError):
    """A system produced a different number of tokens than the forced length."""


@dataclass(frozen=True)
class Row:
    """One result row of `engine_speed.json`."""

    system: str
    decode: str
    tokens_per_s: float
    median_s: float
    rounds: int
    batch: int
    target_length: int
    tokens_per_run: int  # counted from the outputs
    round_s: list[float] = field(default_factory=list)  # every round's time, in order

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_lengths(system: str, decode: str, lengths: Sequence[int], *, batch: int,
                  target_length: int) -> int:
    """The tokens of one run; raises when any sentence is not exactly `target_length`."""
    wrong = [(row, n) for row, n in enumerate(lengths) if n != target_length]
    if len(lengths) != batch or wrong:
        raise LengthMismatch(
            f"{system} ({decode}) returned {len(lengths)} sentences for a batch of {batch}; "
            f"sentences not of {target_length} tokens (row, length): {wrong[:8]}")
    return sum(lengths)


def schedule(names: Sequence[tuple[str, str]], round_index: int) -> list[tuple[str, str]]:
    """The round's order: the list rotated by the round number."""
    if not names:
        return []
    shift = round_index % len(names)
    return [*names[shift:], *names[:shift]]


def _timed(runner: Runner, beam_size: int) -> tuple[float, list[int]]:
    start = time.perf_counter()
    lengths = runner(beam_size)
    return time.perf_counter() - start, lengths


def measure(runners: Mapping[str, Runner], *, rounds: int, batch: int, target_length: int,
            decodes: Mapping[str, int] = DECODES, verbose: bool = False) -> list[Row]:
    """Rows for every system x decode, in the order of `runners` then `decodes`."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1 (got {rounds})")
    pairs = [(system, decode) for system in runners for decode in decodes]
    times: dict[tuple[str, str], list[float]] = {pair: [] for pair in pairs}
    counted: dict[tuple[str, str], int] = {}
    for round_index in range(-1, rounds):  # round -1 is the warm-up
        for system, decode in schedule(pairs, max(round_index, 0)):
            seconds, lengths = _timed(runners[system], decodes[decode])
            counted[(system, decode)] = check_lengths(
                system, decode, lengths, batch=batch, target_length=target_length)
            if round_index >= 0:
                times[(system, decode)].append(seconds)
            if verbose:
                label = "warm-up" if round_index < 0 else f"round {round_index + 1}/{rounds}"
                print(f"  {label:>12}  {system:<24} {decode:<7} {seconds:8.3f} s", flush=True)
    rows: list[Row] = []
    for system, decode in pairs:
        median = statistics.median(times[(system, decode)])
        tokens = counted[(system, decode)]
        rows.append(Row(system, decode, tokens / median, median, rounds, batch, target_length,
                        tokens, times[(system, decode)]))
    return rows
