"""The live rows' self-attention bias (server/engine/live_rows.py) is kept up to date in
place: after joins, steps, leaves (the last groups moving into the holes) and capacity
growth it is 0 exactly at the positions each row has reached and -inf after."""

from __future__ import annotations

import torch

from server.engine.layers import attention_step, attention_step_runs
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


def test_rows_attend_in_runs_of_their_own_span_with_the_same_result() -> None:
    """Old rows and young rows split into runs; each run's span covers its oldest row,
    and attending run by run gives what attending over the oldest row's span gives."""
    rows = LiveRows(layers=LAYERS, heads=HEADS, head_dim=DIM, group=GROUP,
                    device=torch.device("cpu"), dtype=torch.float32)
    join(rows, 4, 5)
    for _ in range(40):
        rows.advance()
    join(rows, 4, 5)  # 12 young rows after 12 rows 40 positions older
    rows.advance()
    runs = rows.row_runs()
    assert len(runs) == 2 and runs[0][0] == 0 and runs[-1][1] == rows.count
    assert all(end == start for (_, end, _), (start, _, _) in zip(runs[:-1], runs[1:], strict=True))
    ages = rows.ages[: rows.count]
    for start, end, positions in runs:
        assert positions == int(ages[start:end].max()) + 1
    assert runs[1][2] < rows.span
    state = rows.state()
    assert state.self_bias is not None and state.row_runs == runs
    torch.manual_seed(0)
    q = torch.randn(rows.count, HEADS, 1, DIM)
    key, value = torch.randn(2, rows.count, HEADS, rows.span, DIM)
    whole = attention_step(q, key, value, state.self_bias)
    assert torch.allclose(attention_step_runs(q, key, value, state.self_bias, runs), whole,
                          atol=1e-6)


def test_moved_rows_keep_their_own_history() -> None:
    """A leave and a beam split copy only the moved rows' decoded positions: every row
    still holds, at each position it has reached, what was written there for it."""
    rows = LiveRows(layers=LAYERS, heads=HEADS, head_dim=DIM, group=GROUP,
                    device=torch.device("cpu"), dtype=torch.float32)
    join(rows, 2, 5)
    for _ in range(20):
        rows.advance()
    join(rows, 2, 4)
    for _ in range(3):
        rows.advance()
    torch.manual_seed(1)
    rows.self_kv[: rows.span, :, : rows.count] = torch.randn(
        rows.span, 2 * LAYERS, rows.count, HEADS, DIM)
    before = rows.self_kv.clone()
    rows.copy_rows([10], [9])  # a young group's beam splits: row 10 takes row 9's history
    age = int(rows.ages[10])
    assert torch.equal(rows.self_kv[: age + 1, :, 10], before[: age + 1, :, 9])
    moved = rows.remove([0])  # the last (young) group moves into group 0's place
    assert moved == {3: 0}
    for row in range(GROUP):
        source = 3 * GROUP + row
        reached = int(rows.ages[row]) + 1
        assert reached == age + 1
        expected = before[:reached, :, source] if source != 10 else before[:reached, :, 9]
        assert torch.equal(rows.self_kv[:reached, :, row], expected)
