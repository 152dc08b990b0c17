"""The engine's offline throughput on the inputs a load level served.

Same texts, same work, no serving: each text becomes the server's document
(server/textproc: sentences, placeholders and markup protected by markers), its sentences
are translated with the same modules (the routing each answer reported, so automatic
routing and ensembles are reproduced exactly, versions included), decoding options and
default length budget, in batches packed as the scheduler packs a full queue: a pool of
its lookahead's budgets in arrival order, within the slots per bank, and from it the
anchor (the sentence pools left out most often) with its nearest lengths within the token
budget (source tokens x beam x members).
Sentences whose markers were lost are translated again run by run, as the server does,
and the final text is rendered as it would be answered. The engine is built in-process
from the same store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.speed.serve.loadgen import LevelRun, LoadRequest
from benchmarks.speed.serve.loadstats import BatchShape, OfflineStats, TokenCounter, sentence_count
from server.decoding.search import SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.engine.families import Params
from server.scheduling.batching import job_cost, length_spread, similar_lengths
from server.serving.state import ModuleRef
from server.textproc.document import build_document

ModuleLoader = Callable[[str, int], tuple[dict[str, Any], Params]]


@dataclass(frozen=True)
class OfflineItem:
    text: str
    members: tuple[Member, ...]


def module_key(domain: str, version: int) -> str:
    return ModuleRef(domain, version).key


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
            items.append(OfflineItem(text, members_of(result["routing"])))
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
        config, params = load_module(*ModuleRef.parse(key))
        engine.register_module(key, config, params)


def text_jobs(engine: Engine, texts: Sequence[tuple[int, str]],
              members: Sequence[tuple[Member, ...]], *, length_ratio: float,
              max_length: int) -> list[tuple[int, SentenceJob]]:
    """(owner, job) for every (owner, text), with the server's default length budget."""
    ids = engine.source_tokenizer.encode([text for _, text in texts]) if texts else []
    return [(owner, SentenceJob(source, members[owner],
                                engine.max_length(len(source), ratio=length_ratio,
                                                  limit=max_length)))
            for (owner, _), source in zip(texts, ids, strict=True)]


def pack(jobs: Sequence[SentenceJob], options: SearchOptions, *, max_batch_tokens: int,
         max_modules: int, lookahead: int = 1) -> list[list[int]]:
    """Job indices per batch as the scheduler cuts them from a full queue: a pool of the
    next `lookahead` budgets in arrival order (within the distinct-module limit), then the
    pool's anchor (the job pools left out most often, the oldest among equals) and its
    nearest lengths within the budget (`similar_lengths`; the whole pool when `lookahead`
    is 1). A job alone above the budget still forms a batch."""
    batches: list[list[int]] = []
    waiting = list(range(len(jobs)))
    costs = [job_cost(job, options) for job in jobs]
    passed = [0] * len(jobs)
    while waiting:
        pool = _pool(jobs, costs, waiting, max_batch_tokens * lookahead, max_modules)
        chosen = (range(len(pool)) if lookahead <= 1 else similar_lengths(
            [len(jobs[i].source_ids) for i in pool], [costs[i] for i in pool],
            [passed[i] for i in pool], max_batch_tokens))
        batch = [pool[i] for i in chosen]
        batches.append(batch)
        taken = set(batch)
        for index in pool:
            passed[index] += index not in taken
        waiting = [i for i in waiting if i not in taken]
    return batches


def _pool(jobs: Sequence[SentenceJob], costs: Sequence[int], waiting: Sequence[int],
          max_tokens: int, max_modules: int) -> list[int]:
    """The arrival-order prefix of `waiting` within `max_tokens` and `max_modules`."""
    pool: list[int] = []
    tokens = 0
    modules: set[str] = set()
    for index in waiting:
        wanted = modules | {m.module_id for m in jobs[index].members if m.module_id}
        if pool and (tokens + costs[index] > max_tokens or len(wanted) > max_modules):
            break
        pool.append(index)
        tokens += costs[index]
        modules = wanted
    return pool


def run_offline(engine: Engine, items: Sequence[OfflineItem], *, beam_size: int,
                length_ratio: float, max_length: int, max_batch_tokens: int,
                max_modules: int, lookahead: int, max_seconds: float,
                count_tokens: TokenCounter) -> OfflineStats:
    """Translate the items as the server would (the first batch once untimed, as a
    warm-up), stopping after `max_seconds`; counts only fully translated items."""
    options = SearchOptions(beam_size=beam_size)
    members = [item.members for item in items]
    run = _Batches(engine, options, max_batch_tokens=max_batch_tokens,
                   max_modules=max_modules, lookahead=lookahead)
    documents = [build_document(item.text) for item in items]
    first = text_jobs(engine, [(i, t) for i, d in enumerate(documents) for t in d.sources()],
                      members, length_ratio=length_ratio, max_length=max_length)
    jobs = [job for _, job in first]
    warm = pack(jobs, options, max_batch_tokens=max_batch_tokens, max_modules=max_modules,
                lookahead=lookahead)
    if warm:
        engine.translate([jobs[i] for i in warm[0]], options)
    start = time.perf_counter()
    deadline = start + max_seconds
    done = _per_owner(len(items), first, run.translate(jobs, deadline=deadline))
    restored = {i: documents[i].restore(texts) for i, texts in done.items()}
    again = text_jobs(engine, [(i, t) for i, r in restored.items()
                               for t in documents[i].retry_texts(r)],
                      members, length_ratio=length_ratio, max_length=max_length)
    retried = _per_owner(len(items), again, run.translate([job for _, job in again],
                                                          deadline=deadline))
    answers = [documents[i].render(documents[i].finals(restored[i], retried[i]))
               for i in restored if i in retried]
    seconds = max(time.perf_counter() - start, 1e-9)
    n_sentences = sum(sentence_count(items[i].text) for i in restored if i in retried)
    tokens = sum(count_tokens(text) for text in answers)
    return OfflineStats(n_sentences, tokens, run.shape.batches, seconds,
                        n_sentences / seconds, tokens / seconds, run.shape)


class _Batches:
    """Packs and translates jobs (`pack`), recording the batches run."""

    def __init__(self, engine: Engine, options: SearchOptions, *, max_batch_tokens: int,
                 max_modules: int, lookahead: int) -> None:
        self.engine, self.options = engine, options
        self.max_batch_tokens, self.max_modules = max_batch_tokens, max_modules
        self.lookahead = lookahead
        self.shape = BatchShape()

    def translate(self, jobs: Sequence[SentenceJob], *, deadline: float) -> dict[int, str]:
        """Job index -> translation, for the batches begun before `deadline`."""
        out: dict[int, str] = {}
        decode = self.engine.target_tokenizer.decode
        for batch in pack(jobs, self.options, max_batch_tokens=self.max_batch_tokens,
                          max_modules=self.max_modules, lookahead=self.lookahead):
            if time.perf_counter() > deadline:
                break
            started = time.perf_counter()
            hypotheses = self.engine.translate([jobs[i] for i in batch], self.options)
            engine_s = time.perf_counter() - started
            for index, hyps in zip(batch, hypotheses, strict=True):
                out[index] = decode(hyps[0].tokens) if hyps else ""
            self.shape = self.shape.add(len(batch), length_spread(
                [len(jobs[i].source_ids) for i in batch]), engine_s)
        return out


def _per_owner(owners: int, jobs: Sequence[tuple[int, SentenceJob]],
               translations: Mapping[int, str]) -> dict[int, list[str]]:
    """owner -> its translations in order, for the owners whose every job was translated
    (an owner without jobs has none to wait for)."""
    per: dict[int, list[str]] = {i: [] for i in range(owners)}
    missing: set[int] = set()
    for index, (owner, _) in enumerate(jobs):
        if index in translations:
            per[owner].append(translations[index])
        else:
            missing.add(owner)
    return {owner: texts for owner, texts in per.items() if owner not in missing}

