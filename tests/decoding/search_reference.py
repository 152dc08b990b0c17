"""Frozen copy of the batched greedy and beam search as of 2026-11-25 (before the beam
search was reworked for speed): the oracle that the fast search in server/decoding/search.py
must match token for token and score for score (like tests/server/text_reference.py for the
splitter). Do not optimise this file; it is the specification by example.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from server.decoding.search import Hypothesis, SearchOptions, Stepper


@dataclass
class _Sentence:
    """Bookkeeping of one source sentence during beam search."""

    max_length: int
    finished: list[Hypothesis] = field(default_factory=list)
    done: bool = False


def length_normalised(score: float, length: int, penalty: float) -> float:
    return float(score / (max(length, 1) ** penalty))


def _forbid_eos(log_probs: Tensor, step: int, options: SearchOptions) -> Tensor:
    if step < options.min_length:
        log_probs[:, options.eos_id] = -float("inf")
    return log_probs


def greedy_search(stepper: Stepper, max_lengths: list[int],
                  options: SearchOptions) -> list[list[Hypothesis]]:
    """Argmax decoding; each sentence stops at EOS or its max length."""
    results: list[list[Hypothesis]] = [[] for _ in max_lengths]
    alive = list(range(len(max_lengths)))  # sentence of each live row
    tokens = torch.full((len(alive),), options.start_id, dtype=torch.long)
    outputs: list[list[int]] = [[] for _ in max_lengths]
    scores = [0.0] * len(max_lengths)
    step = 0
    while alive:
        log_probs = _forbid_eos(stepper.step(tokens), step, options)  # [rows, vocab]
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
            index = torch.tensor(keep, dtype=torch.long)
            stepper.reorder(index)
            best = best.index_select(0, index)
            alive = [alive[row] for row in keep]
        tokens = best
    return results


def _select(values: list[float], parents: list[int], tokens: list[int], history: list[list[int]],
            sentence: _Sentence, step: int, options: SearchOptions) -> list[tuple[float, int, int]]:
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


def beam_search(stepper: Stepper, max_lengths: list[int],
                options: SearchOptions) -> list[list[Hypothesis]]:
    """Batched beam search; returns the `n_best` hypotheses of every sentence, best first.

    Semantics (per sentence): candidates = beam score + log p(token); the top 2*beam
    candidates are visited best first; EOS among the top `beam` finishes a hypothesis, the
    first `beam` non-EOS candidates become the next beams.
    """
    size = options.beam_size
    sentences = [_Sentence(max_length) for max_length in max_lengths]
    live = list(range(len(sentences)))
    stepper.reorder(torch.arange(len(live)).repeat_interleave(size))
    scores = torch.full((len(live), size), -float("inf"))
    scores[:, 0] = 0.0  # the first step expands beam 0 only
    histories: list[list[list[int]]] = [[[] for _ in range(size)] for _ in live]
    tokens = torch.full((len(live) * size,), options.start_id, dtype=torch.long)
    step = 0
    while live:
        log_probs = _forbid_eos(stepper.step(tokens), step, options)  # [live*beam, vocab]
        vocab = log_probs.shape[-1]
        totals = scores.to(log_probs.device).reshape(-1, 1) + log_probs
        candidates = totals.reshape(len(live), size * vocab)
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
            beams = _select(values, parents, chosen, histories[position], sentence, step, options)
            if sentence.done:
                continue
            next_live.append(live[position])
            next_histories.append([histories[position][p] + [t] for _, p, t in beams])
            for value, parent, token in beams:
                keep_rows.append(position * size + parent)
                next_scores.append(value)
                next_tokens.append(token)
        live, histories = next_live, next_histories
        if live:
            stepper.reorder(torch.tensor(keep_rows, dtype=torch.long))
            scores = torch.tensor(next_scores).reshape(len(live), size)
            tokens = torch.tensor(next_tokens, dtype=torch.long)
    return [sorted(s.finished, reverse=True)[: options.n_best] for s in sentences]


def search(stepper: Stepper, max_lengths: list[int],
           options: SearchOptions) -> list[list[Hypothesis]]:
    if options.beam_size == 1:
        return greedy_search(stepper, max_lengths, options)
    return beam_search(stepper, max_lengths, options)
