"""Ratios, targets and the written results of the engine speed benchmark.

A ratio is that of the two systems' median speeds (the verdict's); beside it, `paired` is
the median over rounds of the two systems' speed ratio within each round. The rounds
interleave the systems, so both of a pair run seconds apart: a slow phase of the shared
host that hits one round moves both, and the paired figure shows what that noise hides
when it hits half the rounds of one system and not the other's.

`engine_speed.json` is exactly a JSON list of rows (`system`, `decode`, `tokens_per_s`,
plus the measurement's details); run metadata goes to `engine_speed.meta.json`;
`engine_speed.md` is the human-readable table with the ratios and the targets, one
section per host kind and mode (host_runs.py: a run on another CPU keeps the others).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.report_files import write_report
from benchmarks.speed.engine.host_runs import host_kind, merge
from benchmarks.speed.engine.measure import Row


@dataclass(frozen=True)
class Target:
    """`numerator` / `denominator` (target tokens/s of two systems, same decode), and the
    least ratio that meets the target (None: reported without a target)."""

    label: str
    numerator: str
    denominator: str
    minimum: float | None
    decode: str | None = None  # checked for this decode only (None: every decode)


FAMILY_MINIMUMS: dict[tuple[str, str], float] = {("mixing-lowrank", "engine-float32"): 0.5}

TARGETS: tuple[Target, ...] = (
    Target("engine float32 / CT2 float32", "engine-float32", "ct2-float32", 1.0),
    Target("engine int8 / CT2 int8", "engine-int8", "ct2-int8", 0.7),
    # Issue #23: beam search ahead of CTranslate2.
    Target("engine float32 / CT2 float32, beam (#23)", "engine-float32", "ct2-float32", 1.2,
           "beam4"),
    Target("engine int8 / CT2 int8, beam (#23)", "engine-int8", "ct2-int8", 1.5, "beam4"),
    # Issue #51: on CPUs with AMX-BF16 the server decodes in bfloat16 (host_paths.py), at
    # float32's quality (results/cpu_bf16_quality.md): its lead over CTranslate2 float32.
    Target("engine bfloat16 / CT2 float32 (#51)", "engine-bfloat16", "ct2-float32", 1.2),
    Target("engine bfloat16 / engine float32", "engine-bfloat16", "engine-float32", None),
    Target("one adapter / backbone only", "engine-float32-adapter", "engine-float32", 0.8),
    Target("8 mixed adapters / one adapter", "engine-float32-mixed8",
           "engine-float32-adapter", 0.95),
    Target("8 mixed int8 adapters / one int8 adapter", "engine-float32-mixed8-int8",
           "engine-float32-adapter-int8", 0.95),
    Target("one int8 adapter / one adapter", "engine-float32-adapter-int8",
           "engine-float32-adapter", None),
    Target("8 mixed int8 adapters / one adapter", "engine-float32-mixed8-int8",
           "engine-float32-adapter", None),
    Target("8 mixed grouped bf16 adapters / one grouped bf16 adapter",
           "engine-float32-mixed8-bf16", "engine-float32-adapter-bf16", 0.95),
    Target("one grouped bf16 adapter / one adapter", "engine-float32-adapter-bf16",
           "engine-float32-adapter", None),
    Target("8 mixed grouped bf16 adapters / one adapter", "engine-float32-mixed8-bf16",
           "engine-float32-adapter", 0.95),
    Target("engine float32 / HF generate", "engine-float32", "hf", None),
    # Other module families: what one module of each costs; the low-rank word-level
    # mixture has a target against the backbone (issue #23).
    *(Target(f"{family} module / {versus}", f"engine-float32-{family}", denominator,
             FAMILY_MINIMUMS.get((family, denominator)))
      for family in ("sf", "pa", "mixing", "mixing-lowrank")
      for versus, denominator in (("one adapter", "engine-float32-adapter"),
                                  ("backbone only", "engine-float32"))),
)


@dataclass(frozen=True)
class Check:
    target: Target
    decode: str
    ratio: float | None  # None when a system is missing
    met: bool | None  # None when there is no target or no ratio
    paired: float | None = None  # median of the per-round ratios

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.target.label, "decode": self.decode, "ratio": self.ratio,
                "minimum": self.target.minimum, "met": self.met, "paired": self.paired}


def find_row(rows: Sequence[Row], system: str, decode: str) -> Row | None:
    return next((r for r in rows if r.system == system and r.decode == decode), None)


def speed(rows: Sequence[Row], system: str, decode: str) -> float | None:
    row = find_row(rows, system, decode)
    return None if row is None else row.tokens_per_s


def ratio(rows: Sequence[Row], numerator: str, denominator: str, decode: str) -> float | None:
    top, bottom = speed(rows, numerator, decode), speed(rows, denominator, decode)
    if top is None or bottom is None or bottom <= 0:
        return None
    return top / bottom


def paired_ratio(rows: Sequence[Row], numerator: str, denominator: str,
                 decode: str) -> float | None:
    """Median over rounds of numerator speed / denominator speed in the same round."""
    top, bottom = find_row(rows, numerator, decode), find_row(rows, denominator, decode)
    if top is None or bottom is None or not top.round_s or len(top.round_s) != len(
            bottom.round_s):
        return None
    per_round = [(b / bottom.tokens_per_run) / (t / top.tokens_per_run)
                 for t, b in zip(top.round_s, bottom.round_s, strict=True)]
    return statistics.median(per_round)


def check_targets(rows: Sequence[Row], targets: Sequence[Target] = TARGETS) -> list[Check]:
    """Every target for every decode present in `rows`, in (decode, target) order."""
    decodes = list(dict.fromkeys(row.decode for row in rows))
    checks: list[Check] = []
    for decode in decodes:
        for target in targets:
            if target.decode not in (None, decode):
                continue
            value = ratio(rows, target.numerator, target.denominator, decode)
            met = None if value is None or target.minimum is None else value >= target.minimum
            checks.append(Check(target, decode, value, met,
                                paired_ratio(rows, target.numerator, target.denominator, decode)))
    return checks


def _verdict(check: Check) -> str:
    if check.target.minimum is None:
        return "(no target)"
    if check.met is None:
        return "n/a"
    return "met" if check.met else "**missed**"


def markdown(rows: Sequence[Row], checks: Sequence[Check], meta: Mapping[str, Any]) -> str:
    """The results table (tokens/s per system and decode) and the ratio/target table."""
    decodes = list(dict.fromkeys(row.decode for row in rows))
    systems = list(dict.fromkeys(row.system for row in rows))
    title = meta.get("title", "Engine speed" + (f" on {host_kind(meta['host']['label'])}"
                                                if "host" in meta else ""))
    lines = [f"# {title} ({meta.get('mode', 'full')} run)", "",
             f"{meta.get('description', '')}".strip(), "",
             *([f"Host: {meta['host']['label']}; torch CPU kernels "
                f"{meta['host']['torch_capability']}, quantized engine "
                f"{meta['host']['quantized_engine']}.", ""] if "host" in meta else []),
             "Target tokens per second (median of interleaved rounds; higher is better).", "",
             "| system | " + " | ".join(decodes) + " |",
             "|---|" + "---:|" * len(decodes)]
    for system in systems:
        cells = [speed(rows, system, decode) for decode in decodes]
        lines.append(f"| {system} | " + " | ".join(
            "n/a" if value is None else f"{value:,.0f}" for value in cells) + " |")
    lines += ["", "Ratios: of the median speeds (the verdict's); paired: the median of the "
                  "per-round ratios.", "",
              "| ratio | decode | value | paired | target | verdict |",
              "|---|---|---:|---:|---:|---|"]
    for check in checks:
        value = "n/a" if check.ratio is None else f"{check.ratio:.2f}x"
        paired = "n/a" if check.paired is None else f"{check.paired:.2f}x"
        minimum = "" if check.target.minimum is None else f">= {check.target.minimum:.2f}x"
        lines.append(f"| {check.target.label} | {check.decode} | {value} | {paired} | "
                     f"{minimum} | {_verdict(check)} |")
    missed = [c for c in checks if c.met is False]
    lines += ["", f"Targets met: {sum(c.met is True for c in checks)} of "
                  f"{sum(c.met is not None for c in checks)}"
              + (f"; missed: {', '.join(f'{c.target.label} ({c.decode})' for c in missed)}."
                 if missed else "."), ""]
    return "\n".join(lines)


def write_results(rows: Sequence[Row], meta: Mapping[str, Any], out_dir: Path, *,
                  stem: str = "engine_speed", targets: Sequence[Target] = TARGETS,
                  more: str = "") -> list[Path]:
    """`<stem>.json` (a list of rows), `<stem>.meta.json`, `<stem>.md` (`more` after the
    targets: a section of the run's own)."""
    checks = check_targets(rows, targets)
    full_meta = {**meta, "targets": [check.to_dict() for check in checks]}
    # one run per host kind and mode (host_runs.py); the JSON files hold the latest run
    return write_report(out_dir, stem, [row.to_dict() for row in rows],
                        markdown(rows, checks, meta) + more, meta=full_meta, merge=merge)
