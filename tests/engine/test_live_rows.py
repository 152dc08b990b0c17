"""The live rows' self-attention bias (server/engine/live_rows.py) is kept up to date in
place: after joins, steps, leaves (the last groups moving into the holes) and capacity
growth it is 0 exactly at the positions each row has reached and -inf after."""

from __future__ import annotations

import torch

from server.engine.live_rows import POSITION_CHUNK, ROW_CHUNK, LiveRows

LAYERS, HEADS, DIM, GROUP = 2, 2, 4, 3


def join(rows: LiveRows, groups: int, length: int) -> list[int]:
    cross = [(torch.randn(groups, HEADS, length, DIM), torch.randn(groups, HEADS, length, DIM))
             for _ in range(LAYERS)]
    return rows.add(cross, torch.ones(groups, 1, 1, length, dtype=torch.bool))


def expected_bias(rows: LiveRows) -> torch.Tensor:
    ages = rows.ages[: rows.count]
    reached = torch.arange(rows.span)[None, :] <= ages[:, None]
    return torch.zeros(reached.shape).masked_fill_(~reached, -float("inf"))


def test_bias_follows_joins_steps_leaves_and_growth() -> None:
    rows = LiveRows(layers=LAYERS, heads=HEADS, head_dim=DIM, group=GROUP,
                    device=torch.device("cpu"), dtype=torch.float32)
    join(rows, 2, 5)
    for _ in range(3):
        rows.advance()
    join(rows, 1, 7)  # a younger group beside older ones
    rows.advance()
    assert rows.ages[: rows.count].tolist() == [4] * 6 + [1] * 3
    rows.remove([0])  # the last group (age 1) moves into group 0's place
    assert rows.ages[: rows.count].tolist() == [1] * 3 + [4] * 3
    join(rows, ROW_CHUNK // GROUP + 1, 3)  # more rows than the first capacity
    for _ in range(POSITION_CHUNK + 2):  # more positions than the first capacity
        rows.advance()
        state = rows.state()
        assert state.self_bias is not None
        assert torch.equal(state.self_bias[:, 0, 0], expected_bias(rows))
    assert rows.self_kv.shape[2] > ROW_CHUNK and rows.self_kv.shape[0] > POSITION_CHUNK
