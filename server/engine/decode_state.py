"""Decode-time state of the backbone's decoder: each layer's self-attention keys/values in
one preallocated position-major buffer written in place (`SelfAttentionCache`), the
cross-attention keys/values of the sources, and the rows' module groups, reordered as beams
change parents (`DecoderState`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class LayerCache:
    """Cached cross-attention keys/values of one decoder layer, each
    [groups, heads, src_len, head_dim] (see `DecoderState`)."""

    cross_k: Tensor
    cross_v: Tensor


class SelfAttentionCache:
    """Self-attention keys/values of every decoder layer in one position-major buffer
    [capacity, 2 * layers, rows, heads, head_dim], written in place at each step.

    Why position-major: the decoded positions 0..filled-1 are one contiguous block, so a
    reorder copies only what was decoded (not the spare capacity) with one contiguous
    `index_select`, and a layer's keys [rows, heads, length, head_dim] are a strided view
    that the batched matmul reads without a copy. A beam step keeps rows where they are
    (`continue_rows`: only a parent's second and later children are copied). Any other
    reorder that is the identity copies nothing; one that moves few rows rewrites only
    those rows in place; otherwise the rows are gathered into a second buffer (the two
    swap). Capacity grows `CHUNK` positions at a time, copying the filled block once, so
    steady decoding allocates nothing.
    """

    CHUNK = 16
    IN_PLACE_SHARE = 1 / 3  # rewrite in place when at most this share of rows moves

    def __init__(self, layers: int) -> None:
        self.layers = layers
        self.buffer: Tensor | None = None  # [capacity, 2 * layers, rows, heads, dim]
        self.spare: Tensor | None = None  # flat storage the next gathering reorder fills
        self.filled = 0  # positions written so far

    def append(self, layer: int, position: int, k: Tensor,
               v: Tensor) -> tuple[Tensor, Tensor]:
        """Store layer `layer`'s key/value of target `position` (k, v: [rows, heads, 1,
        head_dim]); returns that layer's keys/values of positions 0..position, each a view
        [rows, heads, position + 1, head_dim]."""
        if self.buffer is None or position >= self.buffer.shape[0]:
            self._grow(position + 1, k)
        buffer = self.buffer
        assert buffer is not None
        buffer[position, 2 * layer] = k[:, :, 0]
        buffer[position, 2 * layer + 1] = v[:, :, 0]
        self.filled = max(self.filled, position + 1)
        keys = buffer[: position + 1, 2 * layer].permute(1, 2, 0, 3)
        values = buffer[: position + 1, 2 * layer + 1].permute(1, 2, 0, 3)
        return keys, values

    def _grow(self, needed: int, like: Tensor) -> None:
        rows, heads, _, dim = like.shape
        capacity = -(-needed // self.CHUNK) * self.CHUNK
        grown = like.new_empty((capacity, 2 * self.layers, rows, heads, dim))
        if self.buffer is not None:
            grown[: self.filled] = self.buffer[: self.filled]
        self.buffer, self.spare = grown, None

    def continue_rows(self, source: Tensor) -> Tensor | None:
        """New row j continues cache row `source[j]`, where every source lies in its new
        row's group (a beam step). Rows stay put: the first row to continue a cache row
        takes it over, the others take the rows that nobody continues (in the same groups,
        as many as there are repeats), rewritten with a copy of their source's history.
        Returns the cache row of each new row (None when that is row j itself)."""
        rows = source.shape[0]
        identity = torch.arange(rows, device=source.device)
        order = torch.argsort(source, stable=True)
        ordered = source.index_select(0, order)
        repeat = torch.zeros(rows, dtype=torch.bool, device=source.device)
        repeat[1:] = ordered[1:] == ordered[:-1]
        duplicates = order[repeat].sort().values  # new rows whose source is already taken
        taken = torch.zeros(rows, dtype=torch.bool, device=source.device)
        taken[source] = True
        free = torch.nonzero(~taken).flatten()  # ascending, as many per group as repeats
        slots = source.clone()
        slots[duplicates] = free
        if duplicates.shape[0] and self.buffer is not None:
            capacity, planes, _, heads, dim = self.buffer.shape
            block = self.buffer.view(capacity * planes, rows, heads * dim)[: self.filled * planes]
            block.index_copy_(1, free, block.index_select(1, source.index_select(0, duplicates)))
        return None if bool((slots == identity).all()) else slots

    def reorder(self, index: Tensor) -> None:
        if self.buffer is None:
            return
        capacity, planes, rows, heads, dim = self.buffer.shape
        filled = self.filled * planes  # leading (position, plane) pairs in use
        if index.shape[0] == rows:
            moved = torch.nonzero(index != torch.arange(rows, device=index.device)).flatten()
            if moved.shape[0] == 0:
                return
            if moved.shape[0] <= rows * self.IN_PLACE_SHARE:
                block = self.buffer.view(capacity * planes, rows, heads * dim)[:filled]
                block.index_copy_(1, moved, block.index_select(1, index.index_select(0, moved)))
                return
        shape = (capacity, planes, index.shape[0], heads, dim)
        if self.spare is None or self.spare.numel() < math.prod(shape):
            self.spare = self.buffer.new_empty(math.prod(shape))
        target = self.spare[: math.prod(shape)].view(shape)
        source = self.buffer.view(capacity * planes, rows, heads * dim)[:filled]
        torch.index_select(source, 1, index,
                           out=target.view(capacity * planes, -1, heads * dim)[:filled])
        self.spare = self.buffer.view(-1)
        self.buffer = target


@dataclass
class DecoderState:
    """Everything incremental decoding carries between steps.

    Cross-attention keys/values and the memory mask are stored once per *group*: the rows of
    a group (the beams of one source row) are contiguous and share their source, so beam
    reordering never copies them; they are re-indexed only when groups are dropped.
    """

    memory_mask: Tensor  # [groups, 1, 1, src_len] True = attend
    layers: list[LayerCache] = field(default_factory=list)
    self_cache: SelfAttentionCache = field(default_factory=lambda: SelfAttentionCache(0))
    length: int = 0  # target positions already decoded
    group_size: int = 1  # rows per group
    # The self-attention cache row of each row (None: row i is cache row i). A reorder
    # inside groups (every beam step that ends no sentence) leaves the histories in place
    # and changes only this map, so it copies just the rows that split from one parent;
    # `Backbone.decode` runs the rows in cache order and returns them in row order.
    slots: Tensor | None = None
    cache_order: Tensor | None = None  # the inverse map: the row held in each cache row
    # The memory mask as cross-attention applies it at a step: an additive bias (0 or
    # -inf: one add per layer instead of a negation and a masked fill), None when no
    # source of the batch is padded.
    memory_bias: Tensor | None = None
    # Fixed-shape steps (server/engine/fixed_steps.py): the position being decoded, on the
    # device, read instead of `length` so that one captured CUDA graph serves every step;
    # and the self-attention bias over the cache's whole capacity (0 up to `position`,
    # -inf after it). None in ordinary decoding.
    position: Tensor | None = None
    self_bias: Tensor | None = None
    # Live rows (server/engine/live_rows.py): runs of rows (start, end, positions) whose
    # self-attention reads only their own first `positions` keys. None: every row reads all.
    row_runs: list[tuple[int, int, int]] | None = None

    def set_memory_mask(self, mask: Tensor, dtype: torch.dtype) -> None:
        self.memory_mask = mask
        self.memory_bias = None if bool(mask.all()) else torch.zeros(
            mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, -float("inf"))

    def reorder(self, index: Tensor) -> None:
        """Keep rows `index` (beam reordering, dropping finished rows): the one state hook."""
        source = index if self.slots is None else self.slots.index_select(0, index)
        if self._inside_groups(index):
            self._set_slots(self.self_cache.continue_rows(source))
            return
        self.self_cache.reorder(source)
        self._set_slots(None)
        groups = torch.div(index, self.group_size, rounding_mode="floor")
        size = _uniform_run(groups)
        if size is None:  # rows of one group no longer contiguous: give every row its own
            self._reindex_groups(groups)
            self.group_size = 1
            return
        kept = groups[::size]
        self.group_size = size
        if kept.shape[0] != self.memory_mask.shape[0] or not bool(
                (kept == torch.arange(kept.shape[0], device=kept.device)).all()):
            self._reindex_groups(kept)

    def _inside_groups(self, index: Tensor) -> bool:
        """Every row kept, each taking a parent of its own group."""
        rows = self.memory_mask.shape[0] * self.group_size
        if index.shape[0] != rows:
            return False
        position = torch.arange(rows, device=index.device)
        if self.group_size == 1:
            return bool((index == position).all())
        return bool((torch.div(index, self.group_size, rounding_mode="floor") ==
                     torch.div(position, self.group_size, rounding_mode="floor")).all())

    def _set_slots(self, slots: Tensor | None) -> None:
        self.slots = slots
        self.cache_order = None if slots is None else torch.argsort(slots)

    def _reindex_groups(self, groups: Tensor) -> None:
        bias_dtype = self.memory_bias.dtype if self.memory_bias is not None else torch.float32
        self.set_memory_mask(self.memory_mask.index_select(0, groups), bias_dtype)
        for cache in self.layers:
            cache.cross_k = cache.cross_k.index_select(0, groups)
            cache.cross_v = cache.cross_v.index_select(0, groups)


def _uniform_run(groups: Tensor) -> int | None:
    """The common length of the runs of equal values in `groups`, when every run has the
    same length and no value repeats after its run; otherwise None."""
    rows = groups.shape[0]
    change = torch.ones(rows, dtype=torch.bool, device=groups.device)
    change[1:] = groups[1:] != groups[:-1]
    starts = torch.nonzero(change).flatten()
    count = starts.shape[0]
    if count == 0 or rows % count:
        return None
    size = rows // count
    expected = torch.arange(0, rows, size, device=groups.device)
    if not bool((starts == expected).all()) or int(groups[starts].unique().shape[0]) != count:
        return None
    return size
