"""Statistics and written results of the serving benchmark.

Throughput counts what the server answered successfully: sentences (the server's own
splitting rule, server/textproc/sentences.py) and target tokens (the backbone's target
tokenizer over each translation), per second of the level's wall time. Latencies are those
of successful requests; failures are counted by error code.

Steady state: a level's wall time includes its ramp-up (the first batch forms while the
clients' first requests arrive) and its drain (after the last request is sent), which
differs from saturation both ways: no request arrives while its batches run, and its last
batches hold the leftovers (under round-robin with shortest sentences first, the long
sentences of batch requests: a few rows decoding for many steps). The steady window runs
from the end of a warm-up (a quarter of the level's answers) to the last answer before the
last send: every client is still sending, the answers in it are whole batches (closed-loop
clients send the moment they are answered), and the server is in its steady state at both
ends (see `steady_window`).
Saturation compares the steady throughput with the offline engine and reports the
whole-level ratio beside it.

Interleaved rounds: a single served run and a single offline run minutes apart each meet
whatever phase the shared host is in (single 32-client runs of the same code read 0.76x
to 0.93x). So the saturation level runs again, each time followed by the offline engine
on the same inputs, and the verdict is the median of these rounds' ratios.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.report_files import write_report
from benchmarks.speed.serve.loadgen import LevelRun, LoadRequest
from server.textproc.sentences import sentences, split_text

TokenCounter = Callable[[str], int]
SERVED_OVER_OFFLINE_TARGET = 0.95  # issue #23 (0.8 before it)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None when empty."""
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be in [0, 100] (got {q})")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def sentence_count(text: str) -> int:
    return len(sentences(split_text(text)))


@dataclass(frozen=True)
class LevelStats:
    concurrency: int
    requests: int
    ok: int
    errors: dict[str, int]
    sentences: int
    target_tokens: int
    wall_s: float
    sentences_per_s: float
    tokens_per_s: float
    latency_p50_s: float | None
    latency_p95_s: float | None
    latency_p99_s: float | None
    latency_mean_s: float | None
    steady_s: float = 0.0  # the steady window (see `steady_window`); 0: none
    steady_sentences: int = 0
    steady_tokens_per_s: float | None = None


BURST_GAP_S = 0.05  # answers closer than this to the previous one left the same batch
WARM_UP_SHARE = 0.25  # of a level's answers: before the steady window, at least one batch


def steady_window(run: LevelRun) -> tuple[float, float] | None:
    """(start, end) in seconds from the level's start, or None when too short to hold an
    answer after the warm-up.

    Both ends are answers, so the window holds whole batches: it starts at the end of the
    burst of answers (one batch's replies, less than `BURST_GAP_S` apart) that completes
    the first `WARM_UP_SHARE` of the level's answers, and ends at the last answer at or
    before the last send. The warm-up puts the server in the same state at both ends:
    right after the first batch no large request is part-way done, while later some always
    are, and the answers in the window would miss their work done before its end."""
    if run.last_send_s is None:
        return None
    answered = sorted(o.answered_s for o in run.outcomes if o.status == 200)
    skip = max(1, int(len(answered) * WARM_UP_SHARE))
    start = next((t for index, (t, later) in enumerate(zip(answered, answered[1:],
                                                             strict=False))
                  if index >= skip - 1 and later - t >= BURST_GAP_S), None)
    ends = [t for t in answered if t <= run.last_send_s]
    if start is None or not ends or ends[-1] <= start:
        return None
    return start, ends[-1]


def summarise(run: LevelRun, requests: Sequence[LoadRequest], *,
              count_tokens: TokenCounter) -> LevelStats:
    ok = [o for o in run.outcomes if o.status == 200]
    errors = Counter(o.error or f"http_{o.status}" for o in run.outcomes if o.status != 200)
    n_sentences = sum(sentence_count(text) for o in ok
                      for text in requests[o.index % len(requests)].texts)
    tokens = sum(count_tokens(str(r["translation"])) for o in ok for r in o.results)
    latencies = [o.latency_s for o in ok]
    wall = max(run.wall_s, 1e-9)
    window = steady_window(run)
    steady = [o for o in ok if window is not None and window[0] < o.answered_s <= window[1]]
    steady_s = window[1] - window[0] if window is not None else 0.0
    steady_sentences = sum(sentence_count(text) for o in steady
                           for text in requests[o.index % len(requests)].texts)
    steady_tokens = sum(count_tokens(str(r["translation"])) for o in steady for r in o.results)
    return LevelStats(
        concurrency=run.concurrency, requests=len(run.outcomes), ok=len(ok),
        errors=dict(sorted(errors.items())), sentences=n_sentences, target_tokens=tokens,
        wall_s=run.wall_s, sentences_per_s=n_sentences / wall, tokens_per_s=tokens / wall,
        latency_p50_s=percentile(latencies, 50), latency_p95_s=percentile(latencies, 95),
        latency_p99_s=percentile(latencies, 99),
        latency_mean_s=sum(latencies) / len(latencies) if latencies else None,
        steady_s=steady_s, steady_sentences=steady_sentences,
        steady_tokens_per_s=steady_tokens / steady_s if steady else None)


@dataclass(frozen=True)
class OfflineStats:
    sentences: int
    target_tokens: int
    batches: int
    seconds: float
    sentences_per_s: float
    tokens_per_s: float
    shape: BatchShape | None = None  # of the batches it ran


@dataclass(frozen=True)
class BatchShape:
    """Engine batches over a stretch of work: how full and how mixed in length (the
    served side reads the server's own metrics; `length_spread` per batch), and the
    engine's time in them."""

    batches: int = 0
    sentences: int = 0
    spread_sum: float = 0.0
    engine_s: float = 0.0  # seconds the engine spent decoding these batches
    live_steps: int = 0  # continuous batching: decoder steps over the live rows ...
    live_rows: int = 0  # ... and the beam rows they stepped

    @property
    def sentences_per_batch(self) -> float:
        return self.sentences / self.batches if self.batches else 0.0

    @property
    def rows_per_step(self) -> float:
        return self.live_rows / self.live_steps if self.live_steps else 0.0

    @property
    def mean_spread(self) -> float:
        return self.spread_sum / self.batches if self.batches else 0.0

    def add(self, sentences: int, spread: float, engine_s: float = 0.0) -> BatchShape:
        return replace(self, batches=self.batches + 1, sentences=self.sentences + sentences,
                       spread_sum=self.spread_sum + spread, engine_s=self.engine_s + engine_s)

    def since(self, earlier: BatchShape) -> BatchShape:
        return BatchShape(self.batches - earlier.batches, self.sentences - earlier.sentences,
                          self.spread_sum - earlier.spread_sum,
                          self.engine_s - earlier.engine_s,
                          self.live_steps - earlier.live_steps,
                          self.live_rows - earlier.live_rows)


def served_shape(metrics_text: str) -> BatchShape:
    """The batches a server ran so far, from its Prometheus text (`GET /metrics`)."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            values[sample.name] = sample.value
    return BatchShape(int(values.get("nmt_scheduler_batch_sentences_count", 0)),
                      int(values.get("nmt_scheduler_batch_sentences_sum", 0)),
                      values.get("nmt_scheduler_batch_length_spread_sum", 0.0),
                      values.get("nmt_engine_busy_seconds_total", 0.0),
                      int(values.get("nmt_engine_live_rows_count", 0)),
                      int(values.get("nmt_engine_live_rows_sum", 0)))


def batch_shape(base_url: str) -> BatchShape:
    """The engine batches the server ran so far (its /metrics)."""
    with httpx.Client(base_url=base_url, timeout=30.0, trust_env=False) as client:
        answer = client.get("/metrics")
        answer.raise_for_status()
        return served_shape(answer.text)


@dataclass(frozen=True)
class Pair:
    """One interleaved round at saturation: the level served again, then the offline
    engine on the same inputs."""

    served_tokens_per_s: float  # steady, when the level had a steady window
    offline_tokens_per_s: float
    whole_tokens_per_s: float | None = None  # served, over the whole level
    served_batches: BatchShape | None = None  # the whole level's
    offline_batches: BatchShape | None = None
    served_wall_s: float | None = None  # the whole level's

    @property
    def ratio(self) -> float:
        return self.served_tokens_per_s / self.offline_tokens_per_s

    @property
    def engine_share(self) -> float | None:
        """Share of the whole served level the engine spent in batches."""
        if self.served_batches is None or not self.served_wall_s:
            return None
        return self.served_batches.engine_s / self.served_wall_s

    @property
    def engine_speed_ratio(self) -> float | None:
        """Served target tokens per second of engine time, over the offline run's tokens
        per second: how fast the engine decodes beside the serving work. With
        `engine_share` it splits whole / offline into time lost between batches and
        time lost inside them."""
        share = self.engine_share
        if not share or self.whole_tokens_per_s is None or self.offline_tokens_per_s <= 0:
            return None
        return self.whole_tokens_per_s / share / self.offline_tokens_per_s

    @staticmethod
    def of(level: LevelStats, offline: OfflineStats,
           served_batches: BatchShape | None = None) -> Pair:
        return Pair(served_speed(level), offline.tokens_per_s, level.tokens_per_s,
                    served_batches, offline.shape, level.wall_s)


@dataclass(frozen=True)
class Saturation:
    concurrency: int
    served_tokens_per_s: float  # steady, when the level had a steady window
    offline_tokens_per_s: float
    ratio: float | None  # steady served / offline, the first run of each
    target: float
    met: bool | None  # on the rounds' median ratio when there are rounds, else on `ratio`
    level_ratio: float | None = None  # whole level (ramp-up and drain included) / offline
    round_ratios: tuple[float, ...] = ()  # interleaved rounds (`Pair`), in order
    median_ratio: float | None = None  # the verdict's when there are rounds

    @property
    def verdict_ratio(self) -> float | None:
        return self.median_ratio if self.median_ratio is not None else self.ratio


def served_speed(level: LevelStats) -> float:
    return (level.steady_tokens_per_s if level.steady_tokens_per_s is not None
            else level.tokens_per_s)


def saturation(levels: Sequence[LevelStats], offline: OfflineStats | None, *,
               pairs: Sequence[Pair] = (),
               target: float = SERVED_OVER_OFFLINE_TARGET) -> Saturation | None:
    """The level of highest served throughput (steady), against the offline engine; with
    interleaved rounds at that level, the verdict is their median ratio."""
    if not levels:
        return None
    best = max(levels, key=served_speed)
    offline_speed = offline.tokens_per_s if offline is not None else 0.0
    ratio = served_speed(best) / offline_speed if offline_speed > 0 else None
    level_ratio = best.tokens_per_s / offline_speed if offline_speed > 0 else None
    rounds = tuple(pair.ratio for pair in pairs if pair.offline_tokens_per_s > 0)
    median = statistics.median(rounds) if rounds else None
    verdict = median if median is not None else ratio
    return Saturation(best.concurrency, served_speed(best), offline_speed, ratio, target,
                      None if verdict is None else verdict >= target, level_ratio, rounds,
                      median)


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:,.0f}"


def markdown(levels: Sequence[LevelStats], offline: OfflineStats | None,
             best: Saturation | None, meta: Mapping[str, Any],
             pairs: Sequence[Pair] = ()) -> str:
    lines = [f"# Serving load ({meta.get('mode', 'full')} run)", "",
             str(meta.get("description", "")), "",
             "| clients | requests | ok | errors | sentences/s | target tokens/s | "
             "steady tokens/s (window) | p50 ms | p95 ms | p99 ms |",
             "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for s in levels:
        errors = ", ".join(f"{code}: {n}" for code, n in s.errors.items()) or "0"
        steady = ("n/a" if s.steady_tokens_per_s is None
                  else f"{s.steady_tokens_per_s:,.1f} ({s.steady_s:.1f} s)")
        lines.append(f"| {s.concurrency} | {s.requests} | {s.ok} | {errors} | "
                     f"{s.sentences_per_s:,.2f} | {s.tokens_per_s:,.1f} | {steady} | "
                     f"{_seconds(s.latency_p50_s)} | {_seconds(s.latency_p95_s)} | "
                     f"{_seconds(s.latency_p99_s)} |")
    if offline is not None:
        lines += ["", f"Offline engine on the same inputs ({offline.sentences} sentences in "
                      f"{offline.batches} batches of the server's budget): "
                      f"{offline.sentences_per_s:,.2f} sentences/s, "
                      f"{offline.tokens_per_s:,.1f} target tokens/s."]
    if best is None or best.ratio is None:
        return "\n".join(lines) + "\n"
    verdict = "met" if best.met else "**missed**"
    whole = "" if best.level_ratio is None else (
        f"; over the whole level, ramp-up and drain included: {best.level_ratio:.2f}x")
    if best.median_ratio is None:
        lines += ["", f"Saturation ({best.concurrency} clients): served (steady window) / "
                      f"offline = {best.ratio:.2f}x (target >= {best.target:.2f}x): "
                      f"{verdict}{whole}."]
        return "\n".join(lines) + "\n"
    lines += ["", f"Saturation ({best.concurrency} clients), {len(pairs)} interleaved rounds "
                  "(the level served again, then the offline engine on the same inputs):",
              "", "| round | served steady tokens/s | offline tokens/s | served / offline | "
                  "whole level tokens/s | whole / offline | engine busy | engine speed / "
                  "offline | served batches: sentences, spread | offline batches |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {number} | {pair.served_tokens_per_s:,.1f} | "
              f"{pair.offline_tokens_per_s:,.1f} | {pair.ratio:.2f}x | "
              f"{_rate(pair.whole_tokens_per_s)} | "
              f"{_times(pair.whole_tokens_per_s, pair.offline_tokens_per_s)} | "
              f"{_share(pair.engine_share)} | {_times(pair.engine_speed_ratio, 1.0)} | "
              f"{_shape(pair.served_batches)} | {_shape(pair.offline_batches)} |"
              for number, pair in enumerate(pairs, start=1)]
    lines += ["", "Batches: mean sentences per engine batch and mean length spread (longest "
                  "over mean source length of a batch; 1: all equal). The served side counts "
                  "every batch of the level, ramp-up and drain included. Engine busy: the "
                  "share of the whole served level the engine spent in batches (the "
                  "server's `nmt_engine_busy_seconds_total`); engine speed / offline: the "
                  "level's target tokens per second of that time, over the offline run's "
                  "tokens per second. Their product is whole / offline: the first factor "
                  "is time lost between batches, the second time lost inside them."]
    lines += ["", f"Median of the rounds: served / offline = {best.median_ratio:.2f}x "
                  f"(target >= {best.target:.2f}x): {verdict}. The sweep's own level against "
                  f"the first offline run: {best.ratio:.2f}x{whole}."]
    return "\n".join(lines) + "\n"


def _shape(shape: BatchShape | None) -> str:
    if shape is None or not shape.batches:
        return "n/a"
    return f"{shape.sentences_per_batch:.1f}, {shape.mean_spread:.2f}"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f}"


def _times(value: float | None, base: float) -> str:
    return "n/a" if value is None or base <= 0 else f"{value / base:.2f}x"


def write_results(levels: Sequence[LevelStats], offline: OfflineStats | None,
                  meta: Mapping[str, Any], out_dir: Path, *, pairs: Sequence[Pair] = (),
                  stem: str = "serve_load") -> list[Path]:
    """`<stem>.json` (levels, offline, rounds, saturation), `<stem>.meta.json`, `<stem>.md`."""
    best = saturation(levels, offline, pairs=pairs)
    data = {"levels": [asdict(s) for s in levels],
            "offline": asdict(offline) if offline is not None else None,
            "rounds": [asdict(pair) | {"ratio": pair.ratio} for pair in pairs],
            "saturation": asdict(best) if best is not None else None}
    return write_report(out_dir, stem, data, markdown(levels, offline, best, meta, pairs),
                        meta=meta)
