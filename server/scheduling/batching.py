"""Which waiting sentences form the next engine batch: the policy, without asyncio.

The scheduler hands it one lane per client (server/scheduling/fair_share.py: a client's
requests, least work first); "request" below is such a lane.

- fairness: the batch takes sentences round-robin over the waiting requests (one sentence
  of each request per round), so a large request shares every batch with the small ones
  that arrived after it instead of going first whole;
- a request's share: while other requests wait (or shared the last batch), one request
  adds at most `request_tokens` to a batch beyond its first sentence. A large request
  then runs as a series of short batches interleaved with the others' work, so nobody
  waits long behind it; alone, it fills whole batches again;
- length buckets: a request's sentences wait shortest first (see `Lane.add`), so the
  consecutive sentences a batch takes from it have similar lengths and one long sentence
  does not pad, or prolong the decoding of, many short ones;
- module groups: within each round, requests whose next sentence uses the same modules
  are visited one after another, groups in the order of their oldest request; when the
  budget ends mid-round, the batch holds few distinct modules (rows of one module are
  contiguous in the engine and its weights stream from memory once) and the requests
  left out are first in the next batch's round (their group is then the oldest);
- limits: the batch's cost (source tokens x beam x members) stays within `max_tokens` (a
  single sentence above it still runs, alone) and it uses at most `max_modules` distinct
  modules (the engine's slots per bank);
- similar lengths (`lookahead` > 1): the rules above choose a pool of the next `lookahead`
  batches' worth, and the batch is the pool's anchor with the sentences nearest to it in
  length, up to the budget (`length_window`). The anchor is the sentence pools have left
  out most often, the oldest in the fair order among equals, so a sentence left out
  anchors a coming batch instead of waiting while others of other lengths go. A batch
  decodes until its longest sentence ends, and every step costs a fixed part whatever
  its rows: on the default model at beam 4, batches of 40 sentences cost 21% less per
  sentence when each was cut from a pool of two budgets, 25% from three
  (results/batch_lengths.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import SentenceJob
from server.scheduling.clients import ANONYMOUS


def job_cost(job: SentenceJob, options: SearchOptions) -> int:
    """Budget tokens of one sentence: source tokens x beam x ensemble members."""
    return len(job.source_ids) * options.beam_size * max(1, len(job.members))


@dataclass(eq=False)
class Pending:
    """One queued sentence."""

    request: int
    job: SentenceJob
    options: SearchOptions
    cost: int
    enqueued: float
    deadline: float
    future: asyncio.Future[list[Hypothesis]]
    client: str = ANONYMOUS  # who sent it (server/scheduling/clients.py)
    reloaded: bool = False  # its modules were read back once already
    passed: int = 0  # batches cut from a pool that held it and left it out

    @property
    def modules(self) -> frozenset[str]:
        return frozenset(m.module_id for m in self.job.members if m.module_id is not None)


@dataclass(eq=False)
class Lane:
    """The waiting sentences of one request, shortest first, and their total cost."""

    options: SearchOptions
    pending: dict[int, Pending] = field(default_factory=dict)
    cost: int = 0
    client: str = ANONYMOUS  # who sent it (server/scheduling/clients.py)

    def add(self, items: Sequence[tuple[int, Pending]]) -> None:
        """Queue a request's sentences by source length (stable: equal lengths keep
        their order), the length buckets a batch takes from."""
        for key, item in sorted(items, key=lambda pair: len(pair[1].job.source_ids)):
            self.pending[key] = item
            self.cost += item.cost

    def group(self) -> frozenset[str]:
        """The modules of the request's next sentence (its module group)."""
        return next(iter(self.pending.values())).modules


@dataclass(frozen=True)
class BatchLimits:
    max_tokens: int  # the batch's budget
    max_modules: int  # distinct modules in one batch
    request_tokens: int  # one request's share beyond its first sentence
    lookahead: int = 1  # batches' worth the similar-length batch is chosen from

    def pool(self) -> BatchLimits:
        """The limits of the pool a similar-length batch is cut from: `lookahead` budgets,
        the same module slots (any part of the pool fits them) and the same share per
        request unless the share is the whole budget (one request alone)."""
        share = self.request_tokens
        if share >= self.max_tokens:
            share = self.max_tokens * self.lookahead
        return BatchLimits(self.max_tokens * self.lookahead, self.max_modules, share)


def anchor_of(passed: Sequence[int]) -> int:
    """The pool entry a batch is built around: the one left out most often, the first
    (oldest in the fair order) among equals."""
    return max(range(len(passed)), key=lambda i: (passed[i], -i))


def length_window(lengths: Sequence[int], costs: Sequence[int], max_tokens: int, *,
                  anchor: int = 0) -> list[int]:
    """Indices (ascending) of the batch cut from a pool around entry `anchor`: the anchor,
    then repeatedly the shorter or longer neighbour in length order, whichever is nearer
    to the anchor's length and fits `max_tokens` (the other one when it does not), until
    neither fits."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    at = order.index(anchor)
    low, high = at - 1, at + 1  # next candidates below and above in length order
    tokens = costs[anchor]
    chosen = [anchor]
    while True:
        below = order[low] if low >= 0 and tokens + costs[order[low]] <= max_tokens else None
        above = (order[high] if high < len(order) and tokens + costs[order[high]] <= max_tokens
                 else None)
        if below is None and above is None:
            return sorted(chosen)
        if above is None or (below is not None and lengths[anchor] - lengths[below]
                             <= lengths[above] - lengths[anchor]):
            picked, low = below, low - 1
        else:
            picked, high = above, high + 1
        assert picked is not None
        chosen.append(picked)
        tokens += costs[picked]


def similar_lengths(lengths: Sequence[int], costs: Sequence[int], passed: Sequence[int],
                    max_tokens: int) -> list[int]:
    """Indices (ascending) of the batch cut from a pool: `length_window` around the entry
    pools have left out most often (`anchor_of`). The scheduler and the benchmarks' offline
    packing both cut batches here."""
    return length_window(lengths, costs, max_tokens, anchor=anchor_of(passed))


def length_spread(lengths: Sequence[int]) -> float:
    """Longest over mean source length of a batch (1: all equal): a batch decodes until
    its longest sentence ends, so this is how many of its steps run for few rows."""
    return max(lengths) * len(lengths) / max(1, sum(lengths))


def grouped(lanes: Sequence[Lane]) -> list[Lane]:
    """`lanes` (oldest first) with lanes of one module group adjacent; groups keep the
    order of their oldest lane."""
    ranks: dict[frozenset[str], int] = {}
    keyed = [(ranks.setdefault(lane.group(), len(ranks)), index, lane)
             for index, lane in enumerate(lanes) if lane.pending]
    return [lane for _, _, lane in sorted(keyed, key=lambda entry: entry[:2])]


def form_batch(lanes: Sequence[Lane], limits: BatchLimits, *,
               held_back: Callable[[Pending], bool]) -> list[tuple[int, Pending]]:
    """The next batch as (queue key, sentence) pairs (see the module's docstring): with a
    lookahead, the similar-length part of the fair pool of `limits.pool()`, whose other
    sentences count one more pass (`Pending.passed`)."""
    if limits.lookahead <= 1:
        return fair_batch(lanes, limits, held_back=held_back)
    pool = fair_batch(lanes, limits.pool(), held_back=held_back)
    if not pool:
        return []
    chosen = set(similar_lengths([len(item.job.source_ids) for _, item in pool],
                                 [item.cost for _, item in pool],
                                 [item.passed for _, item in pool], limits.max_tokens))
    for index, (_, item) in enumerate(pool):
        if index not in chosen:
            item.passed += 1
    return [pool[index] for index in sorted(chosen)]


def fair_batch(lanes: Sequence[Lane], limits: BatchLimits, *,
               held_back: Callable[[Pending], bool]) -> list[tuple[int, Pending]]:
    """The next batch as (queue key, sentence) pairs, taken round-robin over `lanes`
    (compatible requests, oldest first; not modified). `held_back(item)` is true for a
    sentence that may not run yet (its module is being read back).

    Semantics (one round; rounds repeat until no lane adds anything):
        for lane in grouped(lanes):
            take lane's first waiting sentence that is not held back, fits the budget,
            the module slots and (beyond the lane's first in this batch) its share
    """
    turns = [(lane, iter(list(lane.pending.items()))) for lane in grouped(lanes)]
    taken: dict[int, int] = {}  # id(lane) -> cost it added beyond its first sentence
    batch: list[tuple[int, Pending]] = []
    tokens = 0
    modules: frozenset[str] = frozenset()
    while turns:
        for turn in list(turns):
            lane, waiting = turn
            share = taken.get(id(lane))
            for key, item in waiting:
                if held_back(item):
                    continue
                wanted = modules | item.modules
                if batch and (tokens + item.cost > limits.max_tokens
                              or len(wanted) > limits.max_modules
                              or (share is not None
                                  and share + item.cost > limits.request_tokens)):
                    continue
                batch.append((key, item))
                tokens += item.cost
                modules = wanted
                taken[id(lane)] = 0 if share is None else share + item.cost
                break
            else:
                turns.remove(turn)
    return batch
