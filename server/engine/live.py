"""Continuous batching: sentences join a running batch after their encoder pass and leave
it the step they finish, so nobody waits for a batch's longest sentence (iteration-level
scheduling, Yu et al., "Orca", OSDI 2022).

`LiveDecoder` holds one engine's live rows for one set of search options. A sentence is
`members x beam` rows: one group of `beam` rows per ensemble member (its module slot, its
source's cross-attention memory), all of them joining and leaving together. Each step
decodes every live row at its own position (server/engine/live_rows.py has the layout),
mixes members into hypotheses as `MemberStepper` does, and advances every sentence with
the per-sentence arithmetic of the static search (server/decoding/live_search.py), so a
sentence's hypotheses are the ones a static batch gives it.

Beam rows stay where they are: the first child of a hypothesis continues its parent's row,
the other children take the rows nobody continues, with a copy of the parent's history.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from server.decoding.live_search import LiveSentence, advance
from server.decoding.search import Hypothesis, SearchOptions
from server.decoding.step_hooks import SentenceGuide, StepHook, StepRows, batch_hook
from server.engine.engine import (
    Engine,
    SentenceJob,
    check_lengths,
    pad_rows,
    sentence_guides,
    with_ids,
)
from server.engine.knn_store import lead_member
from server.engine.live_graphs import LiveGraphs
from server.engine.live_parking import ParkedRows, park_rows, parked_rows, resume_rows
from server.engine.live_rows import LiveRows
from server.engine.residency import Lease
from server.engine.slots import BatchHooks, ModuleBank, runs_of
from server.engine.stepper import mix_members

RowKey = tuple[ModuleBank | None, int]


@dataclass
class LiveStats:
    """Counters since the decoder started (the scheduler turns them into metrics)."""

    steps: int = 0
    rows_stepped: int = 0  # summed over steps: rows per step = rows_stepped / steps
    joins: int = 0
    leaves: int = 0  # finished sentences
    cancelled: int = 0
    parks: int = 0  # sentences parked (live_parking.py)
    step_seconds: float = 0.0
    first_step_seconds: float = 0.0  # summed: a sentence's join to the end of its 1st step
    first_steps: int = 0


@dataclass
class _Entry:
    """One live sentence."""

    search: LiveSentence
    groups: list[int]  # its groups, one per member in member order
    log_weights: list[float]  # per member: log(w / sum w)
    lease: Lease
    joined: float
    slots: list[int] = field(default_factory=lambda: [0])  # each hypothesis' row in a group
    guides: list[SentenceGuide] = field(default_factory=list)  # step_hooks.py
    lead: int = 0  # the member whose hidden state the guides read (knn_store.py)


class LiveDecoder:
    """Rows join (`join`) and leave (finished: returned by `step`; `cancel`) between steps.
    One thread at a time, like the engine."""

    def __init__(self, engine: Engine, options: SearchOptions) -> None:
        if options.n_best > options.beam_size:
            raise ValueError(f"n_best ({options.n_best}) cannot exceed beam_size "
                             f"({options.beam_size})")
        config = engine.config
        self.engine = engine
        self.options = with_ids(options, config)
        self.rows = LiveRows(layers=config.decoder_layers, heads=config.n_heads,
                             head_dim=config.head_dim, group=options.beam_size,
                             device=engine.device, dtype=engine.dtype)
        self.entries: dict[int, _Entry] = {}  # by ticket, in join order
        self.group_keys: list[RowKey] = []  # per group: its member's module slot
        self.group_owner: list[int] = []  # per group: its sentence's ticket
        self.cancelled: set[int] = set()
        # Parked sentences (live_parking.py): kept, skipped by the steps until resumed.
        self.parked: dict[int, tuple[_Entry, ParkedRows, list[RowKey]]] = {}
        self.stats = LiveStats()
        self._tickets = itertools.count()
        self._hooks: BatchHooks | None = None
        self._hooks_stale = True
        self._step_hook: StepHook | None = None
        self._step_hook_stale = False
        self._picked: list[int] = []  # the last step's member rows, hypothesis by hypothesis
        self._lead_rows: list[int] = []  # per hypothesis: its lead member's place in _picked
        self._last: Tensor | None = None  # eager steps: the picked rows' hidden states
        self._no_memory = torch.empty(0, device=engine.device)
        # Steps over the buffers' whole capacity, CUDA graphs on CUDA (live_graphs.py):
        # as the engine's static batches take fixed steps (by default on CUDA only).
        self.graphs = (LiveGraphs(engine, self.rows, start_id=self.options.start_id,
                                  capture=engine.device.type == "cuda")
                       if engine.fixed_steps else None)

    @property
    def live(self) -> int:
        """Sentences in the batch, parked ones included."""
        return len(self.entries) + len(self.parked)

    @property
    def row_count(self) -> int:
        """Rows a step decodes (parked rows not included)."""
        return self.rows.count

    @property
    def parked_row_count(self) -> int:
        return sum(parked_rows(rows, self.rows.group) for _, rows, _ in self.parked.values())

    @torch.inference_mode()
    def park(self, tickets: Sequence[int]) -> None:
        """These live sentences sit out the steps, their state kept, until `resume`."""
        for ticket in tickets:
            entry = self.entries.get(ticket)
            if entry is None or ticket in self.cancelled:
                continue
            keys = [self.group_keys[g] for g in entry.groups]
            saved, moved = park_rows(self.rows, entry.groups)
            self._moved(moved)
            del self.entries[ticket]
            self.parked[ticket] = (entry, saved, keys)
            self.stats.parks += 1
            self._step_hook_stale = self._step_hook_stale or bool(entry.guides)
        self._hooks_stale = True

    @torch.inference_mode()
    def resume(self, tickets: Sequence[int]) -> None:
        """Parked sentences decode again from the next step, where they left off."""
        for ticket in tickets:
            parked = self.parked.pop(ticket, None)
            if parked is None:
                continue
            entry, saved, keys = parked
            entry.groups = resume_rows(self.rows, saved)
            self.group_keys += keys
            self.group_owner += [ticket] * len(keys)
            self.entries[ticket] = entry
            self._step_hook_stale = self._step_hook_stale or bool(entry.guides)
        self._hooks_stale = True

    @torch.inference_mode()
    def join(self, jobs: Sequence[SentenceJob]) -> list[int]:
        """Encode `jobs` and add their rows; they decode from the next step. Returns a
        ticket per job (what `step` reports their hypotheses under)."""
        if not jobs:
            return []
        check_lengths(jobs, self.engine.config)
        modules = self.engine.modules
        leases: list[Lease] = []
        try:
            for job in jobs:
                leases.append(modules.acquire([m.module_id for m in job.members
                                               if m.module_id]))
            groups = self._encode(jobs, leases)
            guides = sentence_guides(self.engine, leases, jobs)
        except Exception:
            for lease in leases:
                modules.release(lease)
            raise
        tickets: list[int] = []
        now = time.perf_counter()
        for index, job in enumerate(jobs):
            ticket = next(self._tickets)
            total = sum(m.weight for m in job.members)
            self.entries[ticket] = _Entry(
                LiveSentence(job.max_length, self.options.start_id), groups[index],
                [math.log(m.weight / total) for m in job.members], leases[index], now,
                guides=guides[index], lead=lead_member(job.members))
            self._step_hook_stale = self._step_hook_stale or bool(guides[index])
            for group in groups[index]:
                self.group_owner[group] = ticket
            tickets.append(ticket)
        self.stats.joins += len(jobs)
        self._hooks_stale = True
        return tickets

    def _encode(self, jobs: Sequence[SentenceJob], leases: list[Lease]) -> list[list[int]]:
        """One encoder pass over the jobs' member rows (ordered by module slot, so each
        module runs once per run of rows); returns each job's groups."""
        members: list[tuple[RowKey, int, int]] = []
        for index, (job, lease) in enumerate(zip(jobs, leases, strict=True)):
            for number, member in enumerate(job.members):
                ref = lease.refs.get(member.module_id) if member.module_id else None
                members.append(((ref.bank, ref.slot) if ref else (None, -1), index, number))
        members.sort(key=lambda m: (id(m[0][0]) if m[0][0] else 0, m[0][1], m[1], m[2]))
        engine = self.engine
        source = pad_rows([jobs[index].source_ids for _, index, _ in members],
                          engine.config.pad_id).to(engine.device)
        hooks = BatchHooks(runs_of([key for key, _, _ in members]))
        chosen = hooks if hooks.runs else None
        memory, mask = engine.model.encode(source, chosen)
        state = engine.model.start_state(memory, mask, chosen)
        added = self.rows.add([(c.cross_k, c.cross_v) for c in state.layers], mask)
        groups: list[list[int]] = [[0] * len(job.members) for job in jobs]
        for group, (_, index, number) in zip(added, members, strict=True):
            groups[index][number] = group
        self.group_keys += [key for key, _, _ in members]
        self.group_owner += [-1] * len(added)
        return groups

    def cancel(self, ticket: int) -> None:
        """The sentence leaves before the next step (its client went away)."""
        if ticket in self.entries:
            self.cancelled.add(ticket)
        elif ticket in self.parked:
            self.engine.modules.release(self.parked.pop(ticket)[0].lease)
            self.stats.cancelled += 1

    @torch.inference_mode()
    def step(self) -> list[tuple[int, list[Hypothesis]]]:
        """Decode one position of every live row; returns the sentences that finished
        (ticket, n-best hypotheses), which have left the batch."""
        if self.cancelled:
            self._remove(sorted(self.cancelled))
            self.stats.cancelled += len(self.cancelled)
            self.cancelled.clear()
        if not self.entries and self.parked:
            self.resume(list(self.parked))  # parked rows never wait on an idle batch
        if not self.entries:
            return []
        started = time.perf_counter()
        entries = list(self.entries.values())
        log_probs = self._hypothesis_log_probs(entries)
        self._guide(entries, log_probs)
        sentences = [entry.search for entry in entries]
        widths = [s.width for s in sentences]
        advance(sentences, log_probs, self.options)
        self._continue_beams(entries, widths)
        done = [(t, e) for t, e in self.entries.items() if e.search.result is not None]
        self._remove([ticket for ticket, _ in done])
        self.rows.advance()
        finished = time.perf_counter()
        for entry in entries:
            if entry.search.step == 1:
                self.stats.first_steps += 1
                self.stats.first_step_seconds += finished - entry.joined
        self.stats.steps += 1
        self.stats.rows_stepped += sum(len(e.groups) for e in entries) * self.rows.group
        self.stats.leaves += len(done)
        self.stats.step_seconds += finished - started
        return [(ticket, entry.search.result or []) for ticket, entry in done]

    def _guide(self, entries: list[_Entry], log_probs: Tensor) -> None:
        """The live sentences' step hook (rebuilt when a guided sentence joins or
        leaves), keyed by ticket."""
        if self._step_hook_stale:
            self._step_hook = batch_hook({ticket: entry.guides for ticket, entry
                                          in self.entries.items() if entry.guides})
            self._step_hook_stale = False
        if self._step_hook is None:
            return
        tickets = list(self.entries)
        rows = StepRows([t for t, e in zip(tickets, entries, strict=True)
                         for _ in e.search.histories],
                        [h for e in entries for h in e.search.histories])
        lead = torch.tensor(self._lead_rows, device=self.engine.device)
        if self.graphs is not None:
            picked = torch.tensor(self._picked, device=self.engine.device)
            hidden = self.graphs.hidden(picked.index_select(0, lead))
        else:
            assert self._last is not None
            hidden = self._last.index_select(0, lead)
        self._step_hook.adjust(log_probs, hidden, rows)

    def _hypothesis_log_probs(self, entries: list[_Entry]) -> Tensor:
        """Every row's next-token log-probs, as hypotheses [sum of widths, vocab]: one
        member's row, or the members' rows mixed."""
        engine, group = self.engine, self.rows.group
        tokens = [self.options.start_id] * self.rows.count
        rows: list[int] = []
        hyp_of: list[int] = []
        weights: list[float] = []
        hyps = 0
        self._lead_rows = []
        for entry in entries:
            for k, token in enumerate(entry.search.tokens):
                self._lead_rows.append(len(rows) + entry.lead)
                for number, first in enumerate(entry.groups):
                    row = first * group + entry.slots[k]
                    tokens[row] = token
                    rows.append(row)
                    hyp_of.append(hyps)
                    weights.append(entry.log_weights[number])
                hyps += 1
        self._picked = rows
        if self.graphs is not None:
            log_probs = self.graphs.step(tokens, self.group_keys,
                                         torch.tensor(rows, device=engine.device))
        else:
            log_probs = self._eager_log_probs(tokens, rows)
        if len(rows) == hyps:  # one member per sentence
            return log_probs
        return mix_members(log_probs, torch.tensor(hyp_of, device=engine.device),
                           torch.tensor(weights, device=engine.device), hyps)

    def _eager_log_probs(self, tokens: list[int], rows: list[int]) -> Tensor:
        """Log-probs of rows `rows`, from a step over the live rows only (in runs of
        their own spans, `LiveRows.state`)."""
        engine = self.engine
        state = self.rows.state()
        ids = torch.tensor(tokens, dtype=torch.long, device=engine.device)
        hidden = engine.model.decode(ids[:, None], self._no_memory, state.memory_mask,
                                     self._batch_hooks(), state)
        last = hidden[:, -1]
        if len(rows) != last.shape[0] or rows != list(range(len(rows))):
            # Gather before the output projection: d_model wide, not vocabulary wide.
            last = last.index_select(0, torch.tensor(rows, device=engine.device))
        self._last = last
        return torch.log_softmax(engine.project(last).float(), dim=-1)

    def _batch_hooks(self) -> BatchHooks | None:
        if self._hooks_stale:
            keys = [key for key in self.group_keys for _ in range(self.rows.group)]
            hooks = BatchHooks(runs_of(keys))
            self._hooks = hooks if hooks.runs else None
            self._hooks_stale = False
        return self._hooks

    def _continue_beams(self, entries: list[_Entry], widths: list[int]) -> None:
        """Each new hypothesis takes a row of its groups: its parent's, if no earlier
        sibling took it; otherwise a row nobody continues, given the parent's history."""
        targets: list[int] = []
        sources: list[int] = []
        group = self.rows.group
        for entry, width in zip(entries, widths, strict=True):
            search = entry.search
            if search.result is not None or group == 1:
                continue
            if width == 1:  # the first step: every row of a group decoded the same
                entry.slots = list(range(len(search.tokens)))
                continue
            taken: set[int] = set()
            slots: list[int | None] = []
            for parent in search.parents:
                row = entry.slots[parent]
                slots.append(None if row in taken else row)
                taken.add(row)
            free = iter(r for r in range(group) if r not in taken)
            for k, slot in enumerate(slots):
                if slot is None:
                    target, source = next(free), entry.slots[search.parents[k]]
                    slots[k] = target
                    for first in entry.groups:
                        targets.append(first * group + target)
                        sources.append(first * group + source)
            entry.slots = [slot for slot in slots if slot is not None]
        self.rows.copy_rows(targets, sources)

    def _remove(self, tickets: list[int]) -> None:
        if not tickets:
            return
        leaving = [g for t in tickets for g in self.entries[t].groups]
        self._moved(self.rows.remove(leaving))
        for ticket in tickets:
            entry = self.entries.pop(ticket)
            self._step_hook_stale = self._step_hook_stale or bool(entry.guides)
            self.engine.modules.release(entry.lease)
        self._hooks_stale = True

    def _moved(self, moved: dict[int, int]) -> None:
        """Groups moved into the places of removed ones (`LiveRows.remove`): their owners
        and keys follow them."""
        for old, new in moved.items():
            owner = self.entries[self.group_owner[old]]
            owner.groups = [new if g == old else g for g in owner.groups]
            self.group_keys[new] = self.group_keys[old]
            self.group_owner[new] = self.group_owner[old]
        del self.group_keys[self.rows.groups:]
        del self.group_owner[self.rows.groups:]
