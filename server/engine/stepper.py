"""The model side of decoding: member rows (one per sentence x ensemble member x beam) run
through the decoder; their next-token distributions are mixed into hypothesis rows.

Semantics (reference loop), for hypothesis row h with members m of weights w_m:
    log p(y | h) = log sum_m w_m * p_m(y | h)
One member of weight 1 is exactly that member. Member rows are kept ordered by slot, so
each module runs once per contiguous run of rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from server.engine.backbone import Backbone
from server.engine.decode_state import DecoderState
from server.engine.hooks import ModuleHooks
from server.engine.slots import BatchHooks, ModuleBank, runs_of

RowKey = tuple[ModuleBank | None, int]


@dataclass
class MemberRow:
    rank: int  # sort rank of the row's (bank, slot): equal ranks are contiguous
    key: RowKey
    sentence: int
    member: int
    log_weight: float


def mix_members(log_probs: Tensor, hyp_index: Tensor, log_weights: Tensor,
                n_hyps: int) -> Tensor:
    """Per hypothesis: logsumexp over its member rows (`hyp_index`: each row's hypothesis)
    of (log w + log p); [n_hyps, vocab]."""
    weighted = log_probs + log_weights[:, None]
    peak = torch.full((n_hyps, weighted.shape[1]), -float("inf"), device=weighted.device)
    peak.scatter_reduce_(0, hyp_index[:, None].expand_as(weighted), weighted, "amax")
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    total = torch.zeros_like(peak).index_add_(
        0, hyp_index, (weighted - peak.index_select(0, hyp_index)).exp())
    return peak + total.log()


class MemberStepper:
    """`Stepper` over a batch whose sentences may each mix several modules."""

    def __init__(self, model: Backbone, project: Callable[[Tensor], Tensor],
                 state: DecoderState | None, rows: list[MemberRow], *,
                 device: torch.device) -> None:
        self.model, self.project, self.state = model, project, state
        self.device = device
        self.rows = rows
        # Hypothesis rows start as sentences (in order); member rows know theirs.
        self.hyp_of = [row.sentence for row in rows]
        self.members_of: list[list[int]] = [[] for _ in range(max(self.hyp_of) + 1)]
        for index, hyp in enumerate(self.hyp_of):
            self.members_of[hyp].append(index)
        self.single = (all(len(m) == 1 for m in self.members_of)
                       and self.hyp_of == sorted(self.hyp_of))
        self._refresh()

    def _refresh(self) -> None:
        self.hooks = BatchHooks(runs_of([row.key for row in self.rows]))
        self.hyp_index = torch.tensor(self.hyp_of, dtype=torch.long, device=self.device)
        self.log_weights = torch.tensor([row.log_weight for row in self.rows],
                                        device=self.device)

    def _state(self) -> DecoderState:
        if self.state is None:
            raise RuntimeError("the stepper has no decoder state yet (encode first)")
        return self.state

    def step(self, tokens: Tensor) -> Tensor:
        state = self._state()
        tokens = tokens.to(self.device)
        member_tokens = tokens if self.single else tokens.index_select(0, self.hyp_index)
        hooks = self.hooks if self.hooks.runs else None
        hidden = self.model.decode(member_tokens[:, None], torch.empty(0),
                                   state.memory_mask, hooks, state)
        self.last_hidden = hidden[:, -1]
        log_probs = torch.log_softmax(self.project(self.last_hidden).float(), dim=-1)
        if self.single:
            return log_probs
        return self._mix(log_probs, tokens.shape[0])

    def hidden(self) -> Tensor:
        """The last step's final hidden state per hypothesis: its heaviest member's row
        (the member a kNN datastore is keyed by, server/engine/knn_store.py)."""
        if self.single:
            return self.last_hidden
        lead: dict[int, int] = {}
        for index, (row, hyp) in enumerate(zip(self.rows, self.hyp_of, strict=True)):
            best = lead.get(hyp)
            if best is None or (row.log_weight, -row.member) > (
                    self.rows[best].log_weight, -self.rows[best].member):
                lead[hyp] = index
        index_ = torch.tensor([lead[h] for h in range(len(lead))], device=self.device)
        return self.last_hidden.index_select(0, index_)

    def _mix(self, log_probs: Tensor, n_hyps: int) -> Tensor:
        return mix_members(log_probs, self.hyp_index, self.log_weights, n_hyps)

    def reorder(self, index: Tensor) -> None:
        if self.single:
            self._state().reorder(index.to(self.device))
            self.rows = [self.rows[i] for i in index.tolist()]
            self.hyp_of = list(range(len(self.rows)))
            self._refresh()
            return
        entries: list[tuple[int, int, int, int, int]] = []
        for new_hyp, old_hyp in enumerate(index.tolist()):
            for old_row in self.members_of[old_hyp]:
                row = self.rows[old_row]
                entries.append((row.rank, row.sentence, row.member, new_hyp, old_row))
        entries.sort()
        self._state().reorder(torch.tensor([e[4] for e in entries], dtype=torch.long,
                                           device=self.device))
        self.rows = [self.rows[e[4]] for e in entries]
        self.hyp_of = [e[3] for e in entries]
        self.members_of = [[] for _ in range(len(index))]
        for position, hyp in enumerate(self.hyp_of):
            self.members_of[hyp].append(position)
        self._refresh()


class FixedStepper:
    """`Stepper` for a batch that uses one hooks object for every row (or none): module
    training, evaluation and reference paths."""

    def __init__(self, model: Backbone, hooks: ModuleHooks | None, state: DecoderState) -> None:
        self.model, self.hooks, self.state = model, hooks, state

    def step(self, tokens: Tensor) -> Tensor:
        tokens = tokens.to(self.state.memory_mask.device)
        hidden = self.model.decode(tokens[:, None], torch.empty(0), self.state.memory_mask,
                                   self.hooks, self.state)
        self.last_hidden = hidden[:, -1]
        return torch.log_softmax(self.model.logits(self.last_hidden).float(), dim=-1)

    def hidden(self) -> Tensor:
        return self.last_hidden

    def reorder(self, index: Tensor) -> None:
        self.state.reorder(index.to(self.state.memory_mask.device))
