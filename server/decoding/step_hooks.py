"""The one place where something other than the model changes a decoding step's
distribution: a `StepHook` sees every live row's next-token log-probs, the decoder's final
hidden state of the row, the sentence the row belongs to and the tokens it has decided so
far, and may change the log-probs in place before the search ranks them.

Per-sentence guidance travels with a sentence as a `SentenceGuide` (retrieval from a
memory: server/decoding/knn.py; banned target sequences: server/decoding/banned.py); the
guides of one kind in a batch run as one hook (`batch_hook`), so a batch pays one batched
computation per kind and step, not one per sentence.

Rows are described afresh at every step (`StepRows`), so a hook never follows beam
reorders itself: whatever the search did to its rows, the row's sentence and prefix say
where it stands. A row whose sentence has no guide of a kind is not touched by that kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from torch import Tensor


@dataclass(frozen=True)
class StepRows:
    """The live rows of one step, in the order of the log-probs' rows."""

    sentences: Sequence[int]  # the batch sentence of each row
    prefixes: Sequence[Sequence[int]]  # the target tokens each row has decided so far


class StepHook(Protocol):
    def adjust(self, log_probs: Tensor, hidden: Tensor | None, rows: StepRows) -> None:
        """log_probs [rows, vocab] (the step's own tensor: change it in place); hidden
        [rows, d_model], the decoder's final hidden state that made the row's log-probs
        (None where the stepper does not expose one)."""
        ...


class SentenceGuide(Protocol):
    """One sentence's guidance of some kind (a dataclass instance per sentence)."""

    def batched(self, guides: Mapping[int, SentenceGuide]) -> StepHook:
        """The hook that applies `guides` (batch sentence -> guide, all of this guide's
        kind, `self` among them) to a batch."""
        ...


@runtime_checkable
class HiddenStates(Protocol):
    """A stepper that exposes the decoder's final hidden state of its last step's rows."""

    def hidden(self) -> Tensor:
        """[rows, d_model], rows as in the log-probs the last `step` returned."""
        ...


class ChainedHooks:
    """Several hooks, applied in order (retrieval before constraints: a banned token
    stays banned whatever a memory says)."""

    def __init__(self, hooks: Sequence[StepHook]) -> None:
        self.hooks = list(hooks)

    def adjust(self, log_probs: Tensor, hidden: Tensor | None, rows: StepRows) -> None:
        for hook in self.hooks:
            hook.adjust(log_probs, hidden, rows)


def batch_hook(guides: Mapping[int, Sequence[SentenceGuide]]) -> StepHook | None:
    """The hook of a batch whose sentence s carries `guides[s]`; None when none does (the
    search then runs exactly as without hooks). Kinds run in the order they first appear,
    except that a kind marked `runs_last` (constraints) runs after the others."""
    by_kind: dict[type, dict[int, SentenceGuide]] = {}
    for sentence, own in guides.items():
        for guide in own:
            by_kind.setdefault(type(guide), {})[sentence] = guide
    if not by_kind:
        return None
    kinds = sorted(by_kind, key=lambda kind: bool(getattr(kind, "runs_last", False)))
    hooks = [next(iter(by_kind[kind].values())).batched(by_kind[kind]) for kind in kinds]
    return hooks[0] if len(hooks) == 1 else ChainedHooks(hooks)
