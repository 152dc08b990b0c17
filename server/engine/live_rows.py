"""Decoder state of a batch whose rows join and leave at every decoding step (continuous
batching, server/engine/live.py).

Layout: rows of different ages and sources share fixed-capacity buffers.

- A *group* is the `group` rows (the beams) of one sentence x ensemble member; they share
  one source, so cross-attention keys/values are stored once per group:
  `cross` [2 * layers, group capacity, heads, source capacity, head_dim], each group's
  source left-aligned and its padding masked by an additive bias (0 / -inf) per group.
- Self-attention keys/values: `self_kv` [position capacity, 2 * layers, row capacity,
  heads, head_dim]; row r's target position p is at [p, :, r], so every row starts at
  position 0 whenever it joined. A step writes each row at its own age (one `index_put_`
  per layer and plane) and attends over positions 0..oldest, the positions a row has not
  reached masked by a per-row bias. Buffers are zeros at allocation and only ever hold
  finite values, so a masked position never leaks a NaN (0 * NaN).
- Rows in use are always [0, rows): a leaving group's place is taken by the last group
  (swap-remove), so a leave copies at most as many rows as leave, and a join writes at the
  tail without moving anybody. Capacities grow by chunks (a copy, rare); steady decoding
  allocates nothing but the step's activations.

Cost per step beyond a static batch's: a row's self-attention reads its run's oldest
row's positions (`row_runs`: rows in runs of similar age, each run its own matmuls) and
its cross-attention the longest source among the live groups (masked), instead of its
batch's own. Moves (leaves, beam splits) copy only the moved rows' own decoded positions.
"""

from __future__ import annotations

import torch
from torch import Tensor

from server.engine.decode_state import DecoderState, LayerCache, SelfAttentionCache

ROW_CHUNK = 32
POSITION_CHUNK = 16
SOURCE_CHUNK = 16
# Row-positions of self-attention (per layer) one more run of rows must save to pay for
# its calls: ~50 us of call overhead against ~0.2 us per row-position read (CPU, 1 thread).
RUN_OVERHEAD = 256


def _rounded(needed: int, chunk: int) -> int:
    return -(-needed // chunk) * chunk


def _grown(needed: int, current: int, chunk: int) -> int:
    """A capacity of at least `needed`, and at least half again `current`: each growth
    copies the whole buffer, so growing by a fixed chunk made a batch that fills up copy
    it again every few steps."""
    return _rounded(max(needed, current + current // 2), chunk)


class _AgedCache(SelfAttentionCache):
    """One step's view of the live self-attention buffer: each row writes at its own age."""

    def __init__(self, rows: LiveRows) -> None:
        super().__init__(rows.layers)
        self.rows = rows

    def append(self, layer: int, position: int, k: Tensor,
               v: Tensor) -> tuple[Tensor, Tensor]:
        live = self.rows
        used, span = live.count, live.span
        ages, index = live.ages[:used], live.row_index[:used]
        live.self_kv[:, 2 * layer].index_put_((ages, index), k[:, :, 0])
        live.self_kv[:, 2 * layer + 1].index_put_((ages, index), v[:, :, 0])
        return (live.self_kv[:span, 2 * layer, :used].permute(1, 2, 0, 3),
                live.self_kv[:span, 2 * layer + 1, :used].permute(1, 2, 0, 3))


class LiveRows:
    """The live rows' buffers; group g holds rows [g * group, (g + 1) * group)."""

    def __init__(self, *, layers: int, heads: int, head_dim: int, group: int,
                 device: torch.device, dtype: torch.dtype) -> None:
        self.layers, self.heads, self.head_dim = layers, heads, head_dim
        self.group = group
        self.device, self.dtype = device, dtype
        self.groups = 0
        self.source_lengths: list[int] = []  # per group
        self.group_ages: list[int] = []  # per group: positions its rows have decoded
        self.self_kv = self._zeros(POSITION_CHUNK, 2 * layers, ROW_CHUNK, heads, head_dim)
        self.cross = self._zeros(2 * layers, ROW_CHUNK // group + 1, heads, SOURCE_CHUNK,
                                 head_dim)
        self.cross_bias = self._closed(ROW_CHUNK // group + 1, SOURCE_CHUNK)
        self.ages = torch.zeros(self.self_kv.shape[2], dtype=torch.long, device=device)
        self.row_index = torch.arange(self.self_kv.shape[2], device=device)
        # Per row: 0 at the positions it has reached, -inf after; kept up to date by
        # add/advance/remove, so a step slices it instead of building a mask.
        self.self_bias = self._closed(ROW_CHUNK, POSITION_CHUNK)

    def _zeros(self, *shape: int) -> Tensor:
        return torch.zeros(shape, dtype=self.dtype, device=self.device)

    def _closed(self, rows: int, positions: int) -> Tensor:
        """A bias [rows, 1, 1, positions] for rows nobody uses yet: -inf but at position 0.
        Graph steps (live_graphs.py) decode the buffers' whole capacity, unused rows
        included; an all -inf row would make NaNs (softmax of nothing), written into its
        keys and values, where a later occupant would read 0 * NaN at a masked position."""
        bias = self._zeros(rows, 1, 1, positions).fill_(-float("inf"))
        bias[..., 0] = 0.0
        return bias

    @property
    def count(self) -> int:
        """Rows in use."""
        return self.groups * self.group

    @property
    def span(self) -> int:
        """Positions a step attends over: the oldest row's, this step's included."""
        return max(self.group_ages, default=0) + 1

    def add(self, cross: list[tuple[Tensor, Tensor]], mask: Tensor) -> list[int]:
        """New groups from their encoder pass: per decoder layer keys and values [groups,
        heads, src_len, head_dim], `mask` [groups, 1, 1, src_len] (True = a real token).
        Their rows start at position 0; returns the new groups' numbers."""
        added, length = mask.shape[0], mask.shape[-1]
        start, end = self.append(added, length, 0, mask[:, 0, 0].sum(-1).tolist())
        for layer, (k, v) in enumerate(cross):
            self.cross[2 * layer, start:end, :, :length] = k
            self.cross[2 * layer + 1, start:end, :, :length] = v
        self.cross_bias[start:end, ..., :length].masked_fill_(mask, 0.0)
        return list(range(start, end))

    def append(self, added: int, source: int, age: int,
               source_lengths: list[int]) -> tuple[int, int]:
        """Room for `added` groups at the tail, sources of `source` tokens, their rows at
        position `age` (0: new; parked rows coming back, server/engine/live_parking.py,
        keep theirs): sources masked out and positions up to `age` open until the caller
        writes them. Returns the groups' range [start, end)."""
        self._reserve(self.groups + added, source)
        self._reserve_positions(age + 1)
        start, end = self.groups, self.groups + added
        first, last = start * self.group, end * self.group
        self.cross_bias[start:end].fill_(-float("inf"))
        self.ages[first:last] = age
        self.self_bias[first:last].fill_(-float("inf"))
        self.self_bias[first:last, ..., : age + 1] = 0.0
        self.source_lengths += source_lengths
        self.group_ages += [age] * added
        self.groups = end
        return start, end

    def _reserve(self, groups: int, source: int) -> None:
        if groups * self.group > self.self_kv.shape[2]:
            rows = _grown(groups * self.group, self.self_kv.shape[2], ROW_CHUNK)
            grown = self._zeros(self.self_kv.shape[0], 2 * self.layers, rows, self.heads,
                                self.head_dim)
            grown[:, :, : self.count] = self.self_kv[:, :, : self.count]
            self.self_kv = grown
            ages = torch.zeros(rows, dtype=torch.long, device=self.device)
            ages[: self.count] = self.ages[: self.count]
            bias = self._closed(rows, self.self_bias.shape[-1])
            bias[: self.count] = self.self_bias[: self.count]
            self.self_bias = bias
            self.ages, self.row_index = ages, torch.arange(rows, device=self.device)
        capacity, sources = self.cross.shape[1], self.cross.shape[3]
        if groups > capacity or source > sources:
            if groups > capacity:
                capacity = _grown(groups, capacity, ROW_CHUNK // self.group + 1)
            sources = max(sources, _rounded(source, SOURCE_CHUNK))
            cross = self._zeros(2 * self.layers, capacity, self.heads, sources, self.head_dim)
            old = self.cross.shape[3]
            cross[:, : self.groups, :, :old] = self.cross[:, : self.groups]
            bias = self._closed(capacity, sources)
            bias[: self.groups, ..., :old] = self.cross_bias[: self.groups]
            self.cross, self.cross_bias = cross, bias

    def _reserve_positions(self, needed: int) -> None:
        if needed <= self.self_kv.shape[0]:
            return
        positions = _grown(needed, self.self_kv.shape[0], POSITION_CHUNK)
        grown = self._zeros(positions, *self.self_kv.shape[1:])
        grown[: self.self_kv.shape[0]] = self.self_kv
        self.self_kv = grown
        bias = self._zeros(*self.self_bias.shape[:3], positions).fill_(-float("inf"))
        bias[..., : self.self_bias.shape[-1]] = self.self_bias
        self.self_bias = bias

    def remove(self, groups: list[int]) -> dict[int, int]:
        """Drop these groups; the last groups move into their places. Returns where each
        moved group went (old number -> new number). A move copies only the movers'
        decoded positions and sources, not the oldest row's and the longest source's."""
        leaving = set(groups)
        remaining = self.groups - len(leaving)
        holes = sorted(g for g in leaving if g < remaining)
        movers = [g for g in range(remaining, self.groups) if g not in leaving]
        moved = dict(zip(movers, holes, strict=True))
        if moved:
            source = torch.tensor(movers, device=self.device)
            target = torch.tensor(holes, device=self.device)
            cross = self.cross[:, :, :, : max(self.source_lengths[g] for g in movers)]
            cross.index_copy_(1, target, cross.index_select(1, source))
            self.cross_bias.index_copy_(0, target, self.cross_bias.index_select(0, source))
            offsets = torch.arange(self.group, device=self.device)
            rows_from = (source[:, None] * self.group + offsets).flatten()
            rows_to = (target[:, None] * self.group + offsets).flatten()
            block = self._history(max(self.group_ages[g] for g in movers) + 1)
            block.index_copy_(1, rows_to, block.index_select(1, rows_from))
            self.ages.index_copy_(0, rows_to, self.ages.index_select(0, rows_from))
            self.self_bias.index_copy_(0, rows_to, self.self_bias.index_select(0, rows_from))
            for old, new in moved.items():
                self.source_lengths[new] = self.source_lengths[old]
                self.group_ages[new] = self.group_ages[old]
        del self.source_lengths[remaining:]
        del self.group_ages[remaining:]
        self.groups = remaining
        return moved

    def copy_rows(self, targets: list[int], sources: list[int]) -> None:
        """Rows `targets` take the histories of rows `sources` (beams that split from one
        parent; every source is a row nobody overwrites)."""
        if not targets:
            return
        # Siblings share a group, hence an age: their self-attention biases are equal.
        # Rows copy their own group's decoded positions, not the oldest row's: targets go
        # by age in chunks of POSITION_CHUNK, one gather per chunk.
        by_positions: dict[int, tuple[list[int], list[int]]] = {}
        for target, source in zip(targets, sources, strict=True):
            needed = _rounded(self.group_ages[target // self.group] + 1, POSITION_CHUNK)
            pair = by_positions.setdefault(min(needed, self.span), ([], []))
            pair[0].append(target)
            pair[1].append(source)
        for positions, (to, of) in by_positions.items():
            block = self._history(positions)
            block.index_copy_(1, torch.tensor(to, device=self.device),
                              block.index_select(1, torch.tensor(of, device=self.device)))

    def _history(self, positions: int) -> Tensor:
        """The first `positions` positions of every plane as [positions x planes, rows,
        heads x head_dim] (a view): one contiguous 3-d gather moves rows, as the static
        cache."""
        capacity, planes, rows = self.self_kv.shape[:3]
        flat = self.self_kv.view(capacity * planes, rows, self.heads * self.head_dim)
        return flat[: positions * planes]

    def row_runs(self) -> list[tuple[int, int, int]]:
        """Runs of rows (start, end, positions) for a step's self-attention, each reading
        only its oldest row's positions instead of the batch's oldest. Joins append at the
        tail, so ages mostly fall along the rows (a leave's swap puts a young group into
        an old one's place: that run reads the old span, as every row did before runs); a
        run ends where splitting saves more row-positions than `RUN_OVERHEAD` (the cost of
        one more run's few calls)."""
        runs: list[tuple[int, int, int]] = []
        start, span = 0, 0
        ages, group = self.group_ages, self.group
        for index, age in enumerate(ages):
            if index == 0:
                span = age + 1
            elif (span - age - 1) * (len(ages) - index) * group > RUN_OVERHEAD:
                runs.append((start * group, index * group, span))
                start, span = index, age + 1
            else:
                span = max(span, age + 1)
        runs.append((start * group, len(ages) * group, span))
        return runs

    def state(self) -> DecoderState:
        """The decoder state of one step over every live row."""
        self._reserve_positions(self.span)
        used, span = self.count, self.span
        source = max(self.source_lengths, default=1)
        layers = [LayerCache(cross_k=self.cross[2 * layer, : self.groups, :, :source],
                             cross_v=self.cross[2 * layer + 1, : self.groups, :, :source])
                  for layer in range(self.layers)]
        ages = self.ages[:used]
        self_bias = self.self_bias[:used, ..., :span]
        bias = self.cross_bias[: self.groups, ..., :source]
        # `memory_mask` is only read by reorders, which live rows never ask of the state.
        return DecoderState(memory_mask=bias, layers=layers,
                            self_cache=_AgedCache(self), group_size=self.group,
                            memory_bias=bias, position=ages[:, None], self_bias=self_bias,
                            row_runs=self.row_runs())

    def advance(self) -> None:
        """Every live row has decoded one more position."""
        used = self.count
        self._reserve_positions(self.span + 1)
        self.ages[:used] += 1
        self.self_bias[:, 0, 0].index_put_((self.row_index[:used], self.ages[:used]),
                                           self.self_bias.new_zeros(()))
        self.group_ages = [age + 1 for age in self.group_ages]
