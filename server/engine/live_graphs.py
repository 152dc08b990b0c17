"""Live decoding steps over the live buffers' whole capacity, so that a GPU replays each
step as a CUDA graph (continuous batching's counterpart of server/engine/fixed_steps.py).

A graph replays fixed kernels on fixed addresses, while live rows join, leave and age at
every step. So a step here decodes every row of the live buffers' capacity
(server/engine/live_rows.py), used or not, at a fixed shape:

- rows: the first `rows` of the row capacity (a whole number of groups that fit both the
  row and the group capacity); a row nobody uses decodes a start token and is ignored;
- self-attention: every row writes its key/value at its own age (the device tensor
  `LiveRows.ages`) and attends over the whole position capacity, masked by its row of
  `LiveRows.self_bias` (no runs of rows: their spans change every step);
- cross-attention: every group over the whole source capacity, masked by `cross_bias`;
- the output projection and log-softmax of every row into one tensor; the caller picks
  its hypotheses' rows out of it (outside the graph).

What changes between steps is written into those tensors in place, outside the graph:
tokens into `tokens`, ages and masks by `LiveRows.add/advance/remove`. A *bucket* is one
set of buffers (their addresses and shapes): `LiveRows` replaces its buffers only when it
grows them, and then every graph of the old bucket is dropped. Module slots are Python
structure (runs of rows per slot, `BatchHooks`), so a graph is kept per bucket and *module
layout*, a few layouts at a time (`LAYOUTS`). Per bucket and layout, as fixed_steps.py: the
first step runs eagerly on a side stream (kernels set up lazily), the second is captured
and replayed, every later one replayed.

Elsewhere (the tests on CPU) every step runs the same body eagerly over the same buffers,
and the bucket/layout bookkeeping runs as on CUDA (`GraphCounts`), so the CPU tests check
the arithmetic a graph replays and the rule that nothing it reads moves inside a bucket.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from server.engine.decode_state import DecoderState, LayerCache, SelfAttentionCache
from server.engine.families import Params
from server.engine.live_rows import LiveRows
from server.engine.slots import BatchHooks, ModuleBank, RowRun, runs_of

if TYPE_CHECKING:
    from server.engine.engine import Engine

log = logging.getLogger(__name__)

RowKey = tuple[ModuleBank | None, int]
# Per run of rows with a module: (bank id, the bank's writes, slot, first row, end row).
# The writes count because a graph reads the grouped copies made when it was captured.
Layout = tuple[tuple[int, int, int, int, int], ...]
LAYOUTS = 4  # graphs kept per bucket (least recently used dropped): each holds a pool


@dataclass
class GraphCounts:
    """What the steps did (on CPU: what they would have done on CUDA)."""

    buckets: int = 0  # distinct sets of buffers stepped over
    warmups: int = 0  # eager steps of a layout new to its bucket
    captures: int = 0
    replays: int = 0
    eager: int = 0  # steps of a layout whose capture failed


class _CapacityCache(SelfAttentionCache):
    """The self-attention buffer of a graph step: each of the first `rows` rows writes at
    its own age; a layer's keys/values are the whole position capacity."""

    def __init__(self, live: LiveRows, rows: int) -> None:
        super().__init__(live.layers)
        self.live, self.rows = live, rows

    def append(self, layer: int, position: int, k: Tensor,
               v: Tensor) -> tuple[Tensor, Tensor]:
        live, rows = self.live, self.rows
        where = (live.ages[:rows], live.row_index[:rows])
        live.self_kv[:, 2 * layer].index_put_(where, k[:, :, 0])
        live.self_kv[:, 2 * layer + 1].index_put_(where, v[:, :, 0])
        return (live.self_kv[:, 2 * layer, :rows].permute(1, 2, 0, 3),
                live.self_kv[:, 2 * layer + 1, :rows].permute(1, 2, 0, 3))


@dataclass
class _Graph:
    """One module layout of the current bucket."""

    hooks: BatchHooks | None
    kept: Params | None = None  # grouped module copies the graph reads (kept alive)
    graph: torch.cuda.CUDAGraph | None = None
    out: Tensor | None = None  # the graph's output: overwritten by every replay
    hidden: Tensor | None = None  # the graph's final hidden states (as `out`)
    captured: bool = False  # on CPU: the step CUDA would have captured has run
    failed: bool = False  # capture failed: eager steps for this layout


def _signature(live: LiveRows) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """Addresses and shapes of every buffer a step reads or writes: a bucket."""
    return tuple((t.data_ptr(), tuple(t.shape)) for t in (
        live.self_kv, live.cross, live.cross_bias, live.self_bias, live.ages, live.row_index))


class LiveGraphs:
    """Steps of one `LiveRows` over its whole capacity; CUDA graphs when `capture`."""

    def __init__(self, engine: Engine, live: LiveRows, *, start_id: int,
                 capture: bool) -> None:
        self.model, self.project = engine.model, engine.project
        self.live = live
        self.start_id = start_id
        self.capture = capture
        self.counts = GraphCounts()
        self.signature: tuple[tuple[int, tuple[int, ...]], ...] = ()
        self.graphs: OrderedDict[Layout, _Graph] = OrderedDict()
        self.rows = self.groups = 0
        self.tokens = torch.empty(0, dtype=torch.long, device=live.device)
        self._no_memory = torch.empty(0, device=live.device)
        self._warned = False
        self._hidden: Tensor | None = None  # the last step's final hidden states [rows, d]

    def step(self, tokens: list[int], group_keys: list[RowKey], picked: Tensor) -> Tensor:
        """One step of every row; returns the log-probabilities (float32) of the rows
        `picked` [picked, vocab], a tensor of the caller's own (a replay overwrites the
        graph's). `tokens`: each live row's last token; `group_keys`: each live group's
        module slot."""
        self._enter_bucket()
        layout, hooks = self._layout(group_keys)
        padded = tokens + [self.start_id] * (self.rows - len(tokens))
        self.tokens.copy_(torch.tensor(padded, dtype=torch.long))
        entry = self.graphs.get(layout)
        if entry is None:
            entry = self.graphs[layout] = _Graph(hooks)
            while len(self.graphs) > LAYOUTS:
                self.graphs.popitem(last=False)
            self.counts.warmups += 1
            out = self._warm_up(entry)
        else:
            self.graphs.move_to_end(layout)
            out = self._step(entry)
        return out.index_select(0, picked)

    def hidden(self, picked: Tensor) -> Tensor:
        """The last step's final hidden states of the rows `picked` [picked, d_model]."""
        assert self._hidden is not None, "no step yet"
        return self._hidden.index_select(0, picked)

    def _enter_bucket(self) -> None:
        live = self.live
        signature = _signature(live)
        if signature == self.signature:
            return
        # The buffers grew: graphs of the old ones would read and write freed memory.
        self.graphs.clear()
        self.signature = signature
        self.groups = min(live.cross.shape[1], live.self_kv.shape[2] // live.group)
        self.rows = self.groups * live.group
        self.tokens = torch.full((self.rows,), self.start_id, dtype=torch.long,
                                 device=live.device)
        self.counts.buckets += 1

    def _layout(self, group_keys: list[RowKey]) -> tuple[Layout, BatchHooks | None]:
        """The module runs over the capacity's rows (unused rows: the plain backbone)."""
        group = self.live.group
        runs = [RowRun(run.bank, run.slot, run.start * group, run.end * group)
                for run in runs_of(group_keys) if run.bank is not None]
        layout = tuple((id(run.bank), run.bank.writes if run.bank else 0, run.slot,
                        run.start, run.end) for run in runs)
        entry = self.graphs.get(layout)
        if entry is not None:
            return layout, entry.hooks
        return layout, BatchHooks(runs) if runs else None

    def _step(self, entry: _Graph) -> Tensor:
        if entry.graph is not None and entry.out is not None:
            entry.graph.replay()
            self.counts.replays += 1
            self._hidden = entry.hidden
            return entry.out
        if entry.failed:
            self.counts.eager += 1
            return self._body(entry.hooks)
        if entry.captured:  # CPU: the replay is the same body, eagerly
            self.counts.replays += 1
            return self._body(entry.hooks)
        self.counts.captures += 1
        if not self.capture:
            entry.captured = True
            return self._body(entry.hooks)
        return self._captured(entry)

    def _body(self, hooks: BatchHooks | None) -> Tensor:
        """One step of every row of the capacity: log-probabilities [rows, vocab]."""
        live, rows, groups = self.live, self.rows, self.groups
        bias = live.cross_bias[:groups]  # [groups, 1, 1, source capacity]
        layers = [LayerCache(cross_k=live.cross[2 * layer, :groups],
                             cross_v=live.cross[2 * layer + 1, :groups])
                  for layer in range(live.layers)]
        state = DecoderState(memory_mask=bias, layers=layers,
                             self_cache=_CapacityCache(live, rows), group_size=live.group,
                             memory_bias=bias, position=live.ages[:rows, None],
                             self_bias=live.self_bias[:rows])
        hidden = self.model.decode(self.tokens[:, None], self._no_memory, bias, hooks, state)
        self._hidden = hidden[:, -1]
        return torch.log_softmax(self.project(self._hidden).float(), dim=-1)

    def _warm_up(self, entry: _Graph) -> Tensor:
        if not self.capture:
            return self._body(entry.hooks)
        device = self.tokens.device
        current = torch.cuda.current_stream(device)
        side = torch.cuda.Stream(device=device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            out = self._body(entry.hooks)
        current.wait_stream(side)
        out.record_stream(current)  # made on the side stream, read on this one
        if self._hidden is not None:
            self._hidden.record_stream(current)
        return out

    def _captured(self, entry: _Graph) -> Tensor:
        """Record the step on a side stream, then replay it (`capture_begin`/`_end`
        directly, as fixed_steps.py says why)."""
        # Grouped module copies are gathered now, outside the capture (a capture may not
        # copy from the host), and kept: the bank's cache may drop them for another batch.
        entry.kept = entry.hooks.grouped_copies() if entry.hooks is not None else None
        graph = torch.cuda.CUDAGraph()
        device = self.tokens.device
        current = torch.cuda.current_stream(device)
        side = torch.cuda.Stream(device=device)
        side.wait_stream(current)
        try:
            with torch.cuda.stream(side):
                graph.capture_begin()
                try:
                    out = self._body(entry.hooks)
                finally:
                    graph.capture_end()
        except RuntimeError as error:  # a module whose step cannot be captured
            if not self._warned:
                log.warning("live decoding step not captured as a CUDA graph (%s); this "
                            "module layout runs eagerly", error)
                self._warned = True
            entry.failed = True
            return self._body(entry.hooks)
        current.wait_stream(side)
        entry.graph, entry.out, entry.hidden = graph, out, self._hidden
        graph.replay()
        return out
