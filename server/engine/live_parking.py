"""Parked rows: a live sentence's decoder state set aside, so that the steps skip it while a
light client's sentence is live (server/scheduling/light_clients.py), and put back where
it left off.

On a CPU a step's time grows with its rows, and a sentence takes as many steps as its
length: a one-sentence answer beside 15 busy sentences took 7x its time alone. Parking
copies a sentence's groups out of the live buffers (server/engine/live_rows.py: its
sources' cross-attention keys/values and mask, its rows' decoded self-attention positions,
their age) and removes them as a leave does; resuming appends them at the tail as a join
does, with the copied state. Nothing is recomputed, so a parked sentence's hypotheses are
the ones it would have had unparked.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from server.engine.live_rows import LiveRows


@dataclass
class ParkedRows:
    """One sentence's groups (all of one age: a sentence's members join together)."""

    cross: Tensor  # [2 * layers, groups, heads, source, head_dim]
    cross_bias: Tensor  # [groups, 1, 1, source]
    history: Tensor  # [age, 2 * layers, groups x group rows, heads, head_dim]
    source_lengths: list[int]
    age: int


def park_rows(rows: LiveRows, groups: list[int]) -> tuple[ParkedRows, dict[int, int]]:
    """Copy `groups` out of the live buffers and remove them; returns the copy and where
    the groups that moved into their places went (`LiveRows.remove`)."""
    ages = {rows.group_ages[g] for g in groups}
    if len(ages) != 1:
        raise ValueError(f"one sentence's groups share an age, got {sorted(ages)}")
    age = ages.pop()
    source = max(rows.source_lengths[g] for g in groups)
    index = torch.tensor(groups, device=rows.device)
    offsets = torch.arange(rows.group, device=rows.device)
    row_index = (index[:, None] * rows.group + offsets).flatten()
    parked = ParkedRows(
        cross=rows.cross[:, :, :, :source].index_select(1, index),
        cross_bias=rows.cross_bias[..., :source].index_select(0, index),
        history=rows.self_kv[:age].index_select(2, row_index),
        source_lengths=[rows.source_lengths[g] for g in groups], age=age)
    return parked, rows.remove(groups)


def resume_rows(rows: LiveRows, parked: ParkedRows) -> list[int]:
    """Append the parked groups at the tail of the live rows, at the age they were parked;
    returns their new group numbers (in the order they were parked)."""
    added, source = parked.cross.shape[1], parked.cross.shape[3]
    start, end = rows.append(added, source, parked.age, parked.source_lengths)
    rows.cross[:, start:end, :, :source] = parked.cross
    rows.cross_bias[start:end, ..., :source] = parked.cross_bias
    rows.self_kv[: parked.age, :, start * rows.group: end * rows.group] = parked.history
    return list(range(start, end))


def parked_rows(parked: ParkedRows, group: int) -> int:
    return parked.cross.shape[1] * group
