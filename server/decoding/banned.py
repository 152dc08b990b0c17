"""Banned target token sequences per sentence (forbidden terms of a glossary, as token
ids): a row may never complete one. At each step, a row whose decided tokens end with the
first n-1 tokens of a banned sequence of n tokens gets -inf on its last token; a banned
single token is never chosen. Beam search then keeps the next-best continuation, so a
banned term costs the hypothesis what the model thinks its alternative is worth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from server.decoding.step_hooks import SentenceGuide, StepHook, StepRows


@dataclass(frozen=True)
class BannedSequences:
    """A sentence's banned target sequences (each a non-empty tuple of token ids)."""

    sequences: tuple[tuple[int, ...], ...]
    # after: the tokens before the last of a sequence -> the last tokens they may not take
    after: dict[tuple[int, ...], frozenset[int]] = field(init=False, compare=False,
                                                         repr=False)
    runs_last = True  # constraints apply after every other kind of guide

    def __post_init__(self) -> None:
        if any(not sequence for sequence in self.sequences):
            raise ValueError("a banned sequence needs at least one token")
        after: dict[tuple[int, ...], set[int]] = {}
        for sequence in self.sequences:
            after.setdefault(tuple(sequence[:-1]), set()).add(sequence[-1])
        object.__setattr__(self, "after", {k: frozenset(v) for k, v in after.items()})

    def forbidden(self, prefix: Sequence[int]) -> set[int]:
        """The tokens that would complete a banned sequence after `prefix`."""
        out: set[int] = set()
        for head, last in self.after.items():
            size = len(head)
            if size <= len(prefix) and (size == 0 or tuple(prefix[-size:]) == head):
                out |= last
        return out

    def batched(self, guides: Mapping[int, SentenceGuide]) -> StepHook:
        return BannedHook({s: g for s, g in guides.items() if isinstance(g, BannedSequences)})


class BannedHook:
    """`StepHook` of a batch's banned sequences."""

    def __init__(self, guides: Mapping[int, BannedSequences]) -> None:
        self.guides = dict(guides)

    def adjust(self, log_probs: Tensor, hidden: Tensor | None, rows: StepRows) -> None:
        where: list[int] = []
        tokens: list[int] = []
        for row, (sentence, prefix) in enumerate(zip(rows.sentences, rows.prefixes,
                                                     strict=True)):
            guide = self.guides.get(sentence)
            if guide is None:
                continue
            for token in guide.forbidden(prefix):
                where.append(row)
                tokens.append(token)
        if where:
            device = log_probs.device
            log_probs[torch.tensor(where, device=device),
                      torch.tensor(tokens, device=device)] = -float("inf")
