"""Greedy and beam search over a `Stepper` (the model side) — no I/O, no model code.

The model exposes two calls: `step(tokens) -> log_probs` for every live row and
`reorder(index)`, which keeps rows `index` in that order (beam reordering, dropping
finished sentences, expanding sentences into beams). Sentences that finish leave the
batch, so a long sentence never makes short ones pay for its steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import Tensor

from server.decoding.step_hooks import HiddenStates, StepHook, StepRows


class Stepper(Protocol):
    def step(self, tokens: Tensor) -> Tensor:
        """tokens [rows] (previous outputs) -> next-token log-probs [rows, vocab], a fresh
        tensor the search may modify in place."""
        ...

    def reorder(self, index: Tensor) -> None:
        """Keep rows `index` [new_rows] in that order."""
        ...


@dataclass(frozen=True)
class SearchOptions:
    beam_size: int = 1
    n_best: int = 1
    length_penalty: float = 1.0  # scores are divided by length ** length_penalty
    min_length: int = 0  # EOS is forbidden before this many tokens
    start_id: int = 0
    eos_id: int = 2


@dataclass(frozen=True)
class Hypothesis:
    tokens: list[int]  # without the start token and without EOS
    score: float  # length-normalised log-probability

    def __lt__(self, other: Hypothesis) -> bool:
        return self.score < other.score


@dataclass
class BeamSentence:
    """Bookkeeping of one source sentence during beam search."""

    max_length: int
    finished: list[Hypothesis] = field(default_factory=list)
    done: bool = False


def length_normalised(score: float, length: int, penalty: float) -> float:
    return float(score / (max(length, 1) ** penalty))


def _guide(stepper: Stepper, log_probs: Tensor, hook: StepHook, rows: StepRows) -> None:
    """The batch's step hook changes the step's log-probs."""
    hook.adjust(log_probs, stepper.hidden() if isinstance(stepper, HiddenStates) else None,
                rows)


def _forbid_eos(log_probs: Tensor, step: int, options: SearchOptions) -> Tensor:
    if step < options.min_length:
        log_probs[:, options.eos_id] = -float("inf")
    return log_probs


def greedy_search(stepper: Stepper, max_lengths: list[int], options: SearchOptions,
                  hook: StepHook | None = None) -> list[list[Hypothesis]]:
    """Argmax decoding; each sentence stops at EOS or its max length."""
    results: list[list[Hypothesis]] = [[] for _ in max_lengths]
    alive = list(range(len(max_lengths)))  # sentence of each live row
    tokens = torch.full((len(alive),), options.start_id, dtype=torch.long)
    outputs: list[list[int]] = [[] for _ in max_lengths]
    scores = [0.0] * len(max_lengths)
    step = 0
    while alive:
        log_probs = stepper.step(tokens)
        if hook is not None:
            _guide(stepper, log_probs, hook,
                   StepRows(alive, [outputs[sentence] for sentence in alive]))
        log_probs = _forbid_eos(log_probs, step, options)  # [rows, vocab]
        best_scores, best = log_probs.max(dim=-1)
        step += 1
        keep: list[int] = []
        for row, (sentence, token, score) in enumerate(
                zip(alive, best.tolist(), best_scores.tolist(), strict=True)):
            scores[sentence] += score
            if token == options.eos_id or step >= max_lengths[sentence]:
                if token != options.eos_id:
                    outputs[sentence].append(token)
                length = len(outputs[sentence]) + (token == options.eos_id)
                results[sentence] = [Hypothesis(outputs[sentence], length_normalised(
                    scores[sentence], length, options.length_penalty))]
            else:
                outputs[sentence].append(token)
                keep.append(row)
        if len(keep) < len(alive):
            index = torch.tensor(keep, dtype=torch.long, device=best.device)
            stepper.reorder(index)
            best = best.index_select(0, index)
            alive = [alive[row] for row in keep]
        tokens = best
    return results


def select_beams(values: list[float], parents: list[int], tokens: list[int],
                 history: list[list[int]], sentence: BeamSentence, step: int,
                 options: SearchOptions) -> list[tuple[float, int, int]]:
    """One sentence's step: finish EOS candidates ranked within the beam, keep the best
    `beam_size` other candidates as the next beams (score, parent beam, token)."""
    beams: list[tuple[float, int, int]] = []
    for rank, (value, parent, token) in enumerate(zip(values, parents, tokens, strict=True)):
        if token == options.eos_id:
            if rank < options.beam_size:
                sentence.finished.append(Hypothesis(history[parent], length_normalised(
                    value, step, options.length_penalty)))
            continue
        beams.append((value, parent, token))
        if len(beams) == options.beam_size:
            break
    if step >= sentence.max_length:  # out of room: the live beams end here
        for value, parent, token in beams:
            sentence.finished.append(Hypothesis(history[parent] + [token], length_normalised(
                value, step, options.length_penalty)))
        sentence.done = True
    elif len(sentence.finished) >= options.beam_size:
        # Heuristic of HF transformers: stop when the best live beam, normalised at the
        # current length, cannot beat the worst of the best finished hypotheses.
        best = sorted(sentence.finished, reverse=True)[: options.beam_size]
        best_live = length_normalised(beams[0][0], step, options.length_penalty)
        sentence.done = best_live <= best[-1].score
    return beams


def beam_search(stepper: Stepper, max_lengths: list[int], options: SearchOptions,
                hook: StepHook | None = None) -> list[list[Hypothesis]]:
    """Batched beam search; returns the `n_best` hypotheses of every sentence, best first.

    Semantics (per sentence): candidates = beam score + log p(token); the top 2*beam
    candidates are visited best first; EOS among the top `beam` finishes a hypothesis, the
    first `beam` non-EOS candidates become the next beams.

    Cost (what it avoids): the first step runs one row per sentence (every beam would be
    the same start token) and expands to `beam` rows only with the first reorder; the
    summed scores are added in place and ranked by one `topk` over beam x vocabulary per
    sentence; a reorder that keeps every row where it is is not sent to the model.
    """
    size = options.beam_size
    sentences = [BeamSentence(max_length) for max_length in max_lengths]
    live = list(range(len(sentences)))
    histories: list[list[list[int]]] = [[[]] for _ in live]  # one beam until the first step
    tokens = torch.full((len(live),), options.start_id, dtype=torch.long)
    scores: Tensor | None = None  # [live, beams] running scores; none before the first step
    step = 0
    while live:
        log_probs = stepper.step(tokens)
        if hook is not None:
            _guide(stepper, log_probs, hook, StepRows(
                [s for s, own in zip(live, histories, strict=True) for _ in own],
                [prefix for own in histories for prefix in own]))
        log_probs = _forbid_eos(log_probs, step, options)  # [live*beams, vocab]
        rows, vocab = log_probs.shape
        width = rows // len(live)  # beams per sentence: 1 at the first step, then `size`
        if scores is not None:
            log_probs.add_(scores.reshape(-1, 1))  # the step's own tensor: summed in place
        candidates = log_probs.reshape(len(live), width * vocab)
        top_values, top_index = candidates.topk(2 * size, dim=-1)  # [live, 2*beam]
        step += 1
        keep_rows: list[int] = []
        next_scores: list[float] = []
        next_tokens: list[int] = []
        next_live: list[int] = []
        next_histories: list[list[list[int]]] = []
        for position, (values, flat) in enumerate(
                zip(top_values.tolist(), top_index.tolist(), strict=True)):
            sentence = sentences[live[position]]
            parents = [index // vocab for index in flat]
            chosen = [index % vocab for index in flat]
            beams = select_beams(values, parents, chosen, histories[position], sentence, step,
                                 options)
            if sentence.done:
                continue
            next_live.append(live[position])
            next_histories.append([histories[position][p] + [t] for _, p, t in beams])
            for value, parent, token in beams:
                keep_rows.append(position * width + parent)
                next_scores.append(value)
                next_tokens.append(token)
        live, histories = next_live, next_histories
        if live:
            if keep_rows != list(range(rows)):
                stepper.reorder(torch.tensor(keep_rows, dtype=torch.long))
            scores = torch.tensor(next_scores, device=log_probs.device).reshape(len(live), size)
            tokens = torch.tensor(next_tokens, dtype=torch.long)
    return [sorted(s.finished, reverse=True)[: options.n_best] for s in sentences]


def search(stepper: Stepper, max_lengths: list[int], options: SearchOptions,
           hook: StepHook | None = None) -> list[list[Hypothesis]]:
    """Greedy when beam_size == 1, beam search otherwise; `hook` (server/decoding/
    step_hooks.py) may change every step's log-probs before they are ranked."""
    if options.n_best > options.beam_size:
        raise ValueError(f"n_best ({options.n_best}) cannot exceed beam_size ({options.beam_size})")
    if options.beam_size == 1:
        return greedy_search(stepper, max_lengths, options, hook)
    return beam_search(stepper, max_lengths, options, hook)
