"""The step hook of decoding (server/decoding/step_hooks.py) with its two kinds of
guidance: banned target sequences never complete, greedy or beam, whatever the model
prefers; a kNN datastore mixes its vote in only for rows near its keys (elsewhere the
log-probs are left untouched, bit for bit), on the CPU and on CUDA where one is available."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from server.decoding.banned import BannedSequences
from server.decoding.knn import KnnGuide, KnnHook, KnnParams, KnnReport
from server.decoding.search import SearchOptions, search
from server.decoding.step_hooks import ChainedHooks, SentenceGuide, StepRows, batch_hook

VOCAB = 12
EOS = 2


class ScriptedStepper:
    """Prefers token 5, then 6, then 7, then EOS (by position), with a hidden state equal
    to the one-hot of the step number (so a kNN key can match a step exactly)."""

    def __init__(self, rows: int) -> None:
        self.positions = torch.zeros(rows, dtype=torch.long)

    def step(self, tokens: Tensor) -> Tensor:
        preferred = torch.tensor([5, 6, 7, EOS, EOS, EOS, EOS, EOS, EOS, EOS])
        logits = torch.zeros((tokens.shape[0], VOCAB))
        logits[torch.arange(tokens.shape[0]), preferred[self.positions]] = 4.0
        logits[:, 8] = 3.0  # the runner-up everywhere
        self.last = torch.nn.functional.one_hot(self.positions, 8).float()
        self.positions = self.positions + 1
        return torch.log_softmax(logits, dim=-1)

    def hidden(self) -> Tensor:
        return self.last

    def reorder(self, index: Tensor) -> None:
        self.positions = self.positions.index_select(0, index)


def decode(hook_guides: dict[int, list[SentenceGuide]], beam: int,
           rows: int = 2) -> list[list[int]]:
    options = SearchOptions(beam_size=beam, eos_id=EOS)
    results = search(ScriptedStepper(rows), [8] * rows, options, batch_hook(hook_guides))
    return [r[0].tokens for r in results]


def test_without_guides_there_is_no_hook() -> None:
    assert batch_hook({0: [], 1: []}) is None
    assert decode({}, beam=1) == [[5, 6, 7], [5, 6, 7]]


def test_a_banned_sequence_never_completes_greedy_and_beam() -> None:
    for beam in (1, 3):
        got = decode({0: [BannedSequences(((5, 6),))]}, beam=beam)
        assert got[0][:2] != [5, 6] and got[0][0] == 5, beam
        assert got[1] == [5, 6, 7], beam  # another sentence is not constrained
        got = decode({1: [BannedSequences(((5,), (8, 6)))]}, beam=beam)
        assert 5 not in got[1] and all(got[1][i: i + 2] != [8, 6] for i in range(len(got[1])))


def test_banned_forbidden_tokens_follow_the_prefix() -> None:
    banned = BannedSequences(((1, 2, 3), (4,), (2, 9)))
    assert banned.forbidden([]) == {4}
    assert banned.forbidden([1, 2]) == {3, 4, 9}
    assert banned.forbidden([7, 2]) == {4, 9}


def knn_guide(key_steps: list[int], tokens: list[int], gate: float = 0.1,
              device: str = "cpu") -> KnnGuide:
    keys = torch.nn.functional.one_hot(torch.tensor(key_steps), 8).float().to(device)
    return KnnGuide(keys, torch.tensor(tokens, device=device),
                    KnnParams(k=2, temperature=0.01, gate=gate, max_weight=0.9), KnnReport())


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("skip_idle", [True, False], ids=["checked", "no-wait"])
def test_knn_vote_changes_near_rows_and_leaves_far_rows_exactly(skip_idle: bool,
                                                                device: str) -> None:
    """Both ways a step is applied (the CPU's, which skips a step no row is on, and the
    accelerators', which never waits to check) leave far rows bit-identical."""
    guide = knn_guide([1], [9], device=device)  # at step 1 the memory says 9
    rows = StepRows([0, 1], [[5], [5]])
    hidden = torch.nn.functional.one_hot(torch.tensor([1, 3]), 8).float().to(device)
    log_probs = torch.log_softmax(torch.randn(2, VOCAB), dim=-1).to(device)
    before = log_probs.clone()
    hook = guide.batched({0: guide, 1: knn_guide([0], [4], device=device)})
    assert isinstance(hook, KnnHook)
    assert hook.skip_idle == (device == "cpu")  # the accelerators never wait to check
    hook.skip_idle = skip_idle
    hook.adjust(log_probs, hidden, rows)
    assert log_probs[0].argmax() == 9
    assert torch.equal(log_probs[1], before[1])  # distance 2/8 > gate: untouched
    assert torch.exp(log_probs[0]).sum().item() == pytest.approx(1.0, abs=1e-5)
    assert guide.report.rows == 1 and guide.report.rows_on == 1


def test_knn_steers_a_search_and_constraints_run_after_it() -> None:
    steered = decode({0: [knn_guide([0, 1], [8, 8])]}, beam=1)
    assert steered == [[8, 8, 7], [5, 6, 7]]
    both = batch_hook({0: [BannedSequences(((8, 8),)), knn_guide([0, 1], [8, 8])]})
    assert isinstance(both, ChainedHooks)
    result = search(ScriptedStepper(2), [8, 8], SearchOptions(eos_id=EOS), both)
    assert result[0][0].tokens[:2] != [8, 8] and result[0][0].tokens[0] == 8
