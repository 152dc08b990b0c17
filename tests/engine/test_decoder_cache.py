"""The incremental decoder's caches against teacher forcing: steps beyond the
self-attention cache's first chunks (capacity growth), and beam-style reorders that permute,
repeat and drop rows between steps."""

from __future__ import annotations

import pytest
import torch

from server.engine.backbone import Backbone
from server.engine.decode_state import SelfAttentionCache
from tests.tiny import random_backbone, tiny_config

STEPS = 2 * SelfAttentionCache.CHUNK + 5  # crosses two capacity growths


def sources(model: Backbone) -> torch.Tensor:
    pad = model.config.pad_id
    return torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, pad, pad], [11, 12, 13, 14, 3]])


def teacher_forced(model: Backbone, src: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Next-token logits [rows, len, vocab] of the whole target prefix at once."""
    return model(src, targets)


@pytest.mark.parametrize("overrides", [{}, {"normalize_before": True}])
def test_incremental_steps_equal_teacher_forcing_across_growth(
        overrides: dict[str, object]) -> None:
    model = random_backbone(tiny_config(**overrides), seed=3).eval()
    src = sources(model)
    generator = torch.Generator().manual_seed(0)
    targets = torch.randint(4, model.config.tgt_vocab_size, (src.shape[0], STEPS),
                            generator=generator)
    with torch.inference_mode():
        memory, mask = model.encode(src)
        state = model.start_state(memory, mask)
        stepped = torch.stack([model.decode_step(targets[:, t], state)
                               for t in range(STEPS)], dim=1)
        whole = teacher_forced(model, src, targets)
    assert state.self_cache.buffer is not None
    assert state.self_cache.buffer.shape[0] >= STEPS
    torch.testing.assert_close(stepped, whole, atol=1e-4, rtol=1e-4)


def test_reorders_between_steps_follow_the_kept_rows() -> None:
    """Rows are permuted, duplicated and dropped mid-decode (as beam search does); every
    kept row must continue exactly as its own history decoded from scratch."""
    model = random_backbone(tiny_config(), seed=4).eval()
    src = sources(model)
    rows = src.shape[0]
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(4, model.config.tgt_vocab_size, (rows, STEPS), generator=generator)
    # Gathering reorders (7, 20, 33), one row rewritten in place (10), the identity (12).
    reorders = {7: torch.tensor([2, 0, 0, 1]), 10: torch.tensor([0, 0, 2, 3]),
                12: torch.arange(4), 20: torch.tensor([3, 1, 2]), 33: torch.tensor([0, 2])}
    with torch.inference_mode():
        memory, mask = model.encode(src)
        state = model.start_state(memory, mask)
        origin = torch.arange(rows)  # source row of each live row
        history = tokens.clone()  # each live row's own target prefix
        for step in range(STEPS):
            logits = model.decode_step(history[:, step], state)
            expected = teacher_forced(model, src.index_select(0, origin),
                                      history[:, : step + 1])[:, -1]
            torch.testing.assert_close(logits, expected, atol=1e-4, rtol=1e-4)
            if step in reorders:
                index = reorders[step]
                state.reorder(index)
                origin = origin.index_select(0, index)
                # The kept rows keep their prefixes, then continue with fresh tokens.
                fresh = torch.randint(4, model.config.tgt_vocab_size,
                                      (index.shape[0], STEPS), generator=generator)
                fresh[:, : step + 1] = history.index_select(0, index)[:, : step + 1]
                history = fresh


def test_beam_steps_move_only_the_rows_that_split() -> None:
    """Reorders inside groups (beam steps that end no sentence) leave histories where they
    are: each kept row continues its own history, the first child of a parent takes the
    parent's cache row, and only repeated parents are copied (into rows nobody continues)."""
    model = random_backbone(tiny_config(), seed=5).eval()
    src = sources(model)
    beams = 3
    generator = torch.Generator().manual_seed(2)
    tokens = torch.randint(4, model.config.tgt_vocab_size, (src.shape[0] * beams, STEPS),
                           generator=generator)
    with torch.inference_mode():
        memory, mask = model.encode(src)
        state = model.start_state(memory, mask)
        model.decode_step(tokens[: src.shape[0], 0], state)
        expand = torch.arange(src.shape[0]).repeat_interleave(beams)
        state.reorder(expand)  # one row per sentence -> `beams` rows: a gathering reorder
        assert state.group_size == beams
        assert getattr(state, "slots") is None  # noqa: B009 (keeps mypy from narrowing it)
        origin, history = expand, tokens.clone()
        history[:, :1] = tokens[: src.shape[0], :1].index_select(0, expand)
        for step in range(1, STEPS):
            logits = model.decode_step(history[:, step], state)
            expected = teacher_forced(model, src.index_select(0, origin),
                                      history[:, : step + 1])[:, -1]
            torch.testing.assert_close(logits, expected, atol=1e-4, rtol=1e-4)
            # Each row takes a random parent among its group's rows.
            group = torch.arange(origin.shape[0]) // beams
            index = group * beams + torch.randint(0, beams, group.shape, generator=generator)
            # Only the written positions: the rest of the buffer is uninitialized memory,
            # which may hold NaNs (never equal to themselves).
            filled = state.self_cache.filled
            before = state.self_cache.buffer[:filled].clone()  # type: ignore[index]
            state.reorder(index)
            assert state.slots is None or sorted(state.slots.tolist()) == list(range(len(index)))
            assert state.self_cache.buffer is not None
            after = state.self_cache.buffer[:filled]
            changed = {row for row in range(len(index))
                       if not torch.equal(before[:, :, row], after[:, :, row])}
            assert len(changed) <= len(index) - len(set(index.tolist()))
            origin = origin.index_select(0, index)
            fresh = torch.randint(4, model.config.tgt_vocab_size, (index.shape[0], STEPS),
                                  generator=generator)
            fresh[:, : step + 1] = history.index_select(0, index)[:, : step + 1]
            history = fresh


def test_cross_attention_masks_padding_with_a_bias_and_skips_it_without_padding() -> None:
    model = random_backbone(tiny_config(), seed=6).eval()
    padded = sources(model)
    unpadded = padded[[0, 2]]
    generator = torch.Generator().manual_seed(3)
    with torch.inference_mode():
        for src, has_padding in ((padded, True), (unpadded, False)):
            memory, mask = model.encode(src)
            state = model.start_state(memory, mask)
            if has_padding:
                assert state.memory_bias is not None
                assert torch.equal(state.memory_bias == -float("inf"), ~mask)
            else:
                assert state.memory_bias is None
            targets = torch.randint(4, model.config.tgt_vocab_size, (src.shape[0], 6),
                                    generator=generator)
            stepped = torch.stack([model.decode_step(targets[:, t], state) for t in range(6)],
                                  dim=1)
            torch.testing.assert_close(stepped, teacher_forced(model, src, targets),
                                       atol=1e-4, rtol=1e-4)
