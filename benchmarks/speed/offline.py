"""The engine's offline throughput on the inputs a load level served.

Same texts (split by the server's rule), same modules (the routing each answer reported,
so automatic routing and ensembles are reproduced exactly, versions included), same
decoding options and default length budget, and batches packed as the scheduler packs a
full queue: in arrival order, within the token budget (source tokens x beam x members)
and the slots per bank. The engine is built in-process from the same store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.speed.loadgen import LevelRun, LoadRequest
from benchmarks.speed.loadstats import OfflineStats, TokenCounter
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.engine.families import Params
from server.scheduling.batching import job_cost
from server.text import Piece, join_pieces, sentences, split_text

ModuleLoader = Callable[[str, int], tuple[dict[str, Any], Params]]


@dataclass(frozen=True)
class OfflineItem:
    pieces: list[Piece]
    members: tuple[Member, ...]


def module_key(domain: str, version: int) -> str:
    return f"{domain}@{version}"


def members_of(routing: Mapping[str, Any]) -> tuple[Member, ...]:
    """The engine members a served answer's `routing` describes."""
    if routing["mode"] == "ensemble":
        versions = routing.get("module_versions") or {}
        return tuple(Member(None if name == "generic" else module_key(name, versions[name]),
                            float(weight)) for name, weight in routing["weights"].items())
    domain = routing.get("domain")
    if routing["mode"] == "generic" or domain in (None, "generic"):
        return (Member(None),)
    return (Member(module_key(str(domain), int(routing["module_version"]))),)


def offline_items(run: LevelRun, requests: Sequence[LoadRequest]) -> list[OfflineItem]:
    """Every text the level translated successfully, in request order."""
    items: list[OfflineItem] = []
    for outcome in run.outcomes:
        if outcome.status != 200:
            continue
        texts = requests[outcome.index % len(requests)].texts
        for text, result in zip(texts, outcome.results, strict=True):
            items.append(OfflineItem(split_text(text), members_of(result["routing"])))
    return items


def offline_engine(files: Mapping[str, bytes], items: Sequence[OfflineItem],
                   load_module: ModuleLoader, options: EngineOptions) -> Engine:
    """The backbone plus every module the items use, registered under its served id."""
    engine = build_engine(files, options)
    register_missing(engine, items, load_module)
    return engine


def register_missing(engine: Engine, items: Sequence[OfflineItem],
                     load_module: ModuleLoader) -> None:
    """Register every module the items use that `engine` lacks, under its served id."""
    needed = sorted({m.module_id for item in items for m in item.members if m.module_id})
    for key in needed:
        if engine.modules.resident(key):
            continue
        domain, _, version = key.rpartition("@")
        config, params = load_module(domain, int(version))
        engine.register_module(key, config, params)


def item_jobs(engine: Engine, items: Sequence[OfflineItem], *, length_ratio: float,
              max_length: int) -> list[tuple[int, SentenceJob]]:
    """(item index, job) for every sentence, with the server's default length budget."""
    jobs: list[tuple[int, SentenceJob]] = []
    for index, item in enumerate(items):
        texts = sentences(item.pieces)
        for source in engine.source_tokenizer.encode(texts) if texts else []:
            budget = engine.max_length(len(source), ratio=length_ratio, limit=max_length)
            jobs.append((index, SentenceJob(source, item.members, budget)))
    return jobs


def pack(jobs: Sequence[SentenceJob], options: SearchOptions, *, max_batch_tokens: int,
         max_modules: int) -> list[list[int]]:
    """Job indices per batch: arrival order, token budget and distinct-module limit
    (a job alone above the budget still forms a batch)."""
    batches: list[list[int]] = []
    current: list[int] = []
    tokens = 0
    modules: set[str] = set()
    for index, job in enumerate(jobs):
        cost = job_cost(job, options)
        wanted = modules | {m.module_id for m in job.members if m.module_id}
        if current and (tokens + cost > max_batch_tokens or len(wanted) > max_modules):
            batches.append(current)
            current, tokens = [], 0
            wanted = {m.module_id for m in job.members if m.module_id}
        current.append(index)
        tokens += cost
        modules = wanted
    if current:
        batches.append(current)
    return batches


def run_offline(engine: Engine, items: Sequence[OfflineItem], *, beam_size: int,
                length_ratio: float, max_length: int, max_batch_tokens: int,
                max_modules: int, max_seconds: float,
                count_tokens: TokenCounter) -> OfflineStats:
    """Translate the items' sentences batch by batch (the first batch once untimed, as a
    warm-up), stopping after `max_seconds`; counts only fully translated items."""
    pairs = item_jobs(engine, items, length_ratio=length_ratio, max_length=max_length)
    jobs = [job for _, job in pairs]
    options = SearchOptions(beam_size=beam_size)
    batches = pack(jobs, options, max_batch_tokens=max_batch_tokens, max_modules=max_modules)
    if batches:
        engine.translate([jobs[i] for i in batches[0]], options)
    done: dict[int, list[Hypothesis]] = {}
    start = time.perf_counter()
    ran = 0
    for batch in batches:
        if time.perf_counter() - start > max_seconds:
            break
        for index, hyps in zip(batch, engine.translate([jobs[i] for i in batch], options),
                               strict=True):
            done[index] = hyps
        ran += 1
    seconds = max(time.perf_counter() - start, 1e-9)
    n_sentences, tokens = _count(engine, items, pairs, done, count_tokens)
    return OfflineStats(n_sentences, tokens, ran, seconds, n_sentences / seconds,
                        tokens / seconds)


def _count(engine: Engine, items: Sequence[OfflineItem],
           pairs: Sequence[tuple[int, SentenceJob]], done: Mapping[int, list[Hypothesis]],
           count_tokens: TokenCounter) -> tuple[int, int]:
    """(sentences, target tokens) of the items whose every sentence was translated; the
    translation is rejoined exactly as the server does before counting."""
    per_item: dict[int, list[int]] = {}
    for job_index, (item_index, _) in enumerate(pairs):
        per_item.setdefault(item_index, []).append(job_index)
    n_sentences = tokens = 0
    for item_index, job_indices in per_item.items():
        if not all(j in done for j in job_indices):
            continue
        texts = [engine.target_tokenizer.decode(done[j][0].tokens) if done[j] else ""
                 for j in job_indices]
        tokens += count_tokens(join_pieces(items[item_index].pieces, texts))
        n_sentences += len(job_indices)
    return n_sentences, tokens
