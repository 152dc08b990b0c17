"""Greedy and beam search one step at a time over sentences that joined at different steps
(continuous batching): the per-sentence arithmetic of `search.py`, so a sentence gets the
hypotheses it would get in a static batch, whenever it joined and whoever decodes beside it.

A sentence's step number is its own (how many tokens it has decided), so `min_length` and
`max_length` count from its join. Beam sentences have one hypothesis until their first step
and `beam_size` after it; a step ranks each width's sentences with one `topk`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from server.decoding.search import (
    BeamSentence,
    Hypothesis,
    SearchOptions,
    length_normalised,
    select_beams,
)


@dataclass
class LiveSentence:
    """One sentence's search state between steps."""

    max_length: int
    start_id: int
    step: int = 0  # tokens decided so far
    tokens: list[int] = field(default_factory=list)  # each hypothesis' last token
    scores: list[float] = field(default_factory=lambda: [0.0])  # running, per hypothesis
    histories: list[list[int]] = field(default_factory=lambda: [[]])
    # After a step: the hypothesis (before the step) each hypothesis continues.
    parents: list[int] = field(default_factory=lambda: [0])
    beams: BeamSentence | None = None  # beam search's finished hypotheses
    result: list[Hypothesis] | None = None  # set when the sentence is done

    def __post_init__(self) -> None:
        self.tokens = self.tokens or [self.start_id]
        self.beams = BeamSentence(self.max_length)

    @property
    def width(self) -> int:
        """Hypotheses (rows of log-probabilities) the sentence takes at its next step."""
        return len(self.tokens)


def forbid_early_eos(log_probs: Tensor, sentences: list[LiveSentence],
                     options: SearchOptions) -> None:
    """EOS is impossible for the rows of sentences that have not reached `min_length`."""
    if options.min_length <= 0:
        return
    rows = [row for row, sentence in _rows(sentences) if sentence.step < options.min_length]
    if rows:
        log_probs[torch.tensor(rows, dtype=torch.long), options.eos_id] = -float("inf")


def _rows(sentences: list[LiveSentence]) -> list[tuple[int, LiveSentence]]:
    out: list[tuple[int, LiveSentence]] = []
    for sentence in sentences:
        out += [(len(out) + k, sentence) for k in range(sentence.width)]
    return out


def advance(sentences: list[LiveSentence], log_probs: Tensor, options: SearchOptions) -> None:
    """One step of every sentence from its hypotheses' log-probs (rows in sentence order,
    `width` rows each; modified in place)."""
    forbid_early_eos(log_probs, sentences, options)
    if options.beam_size == 1:
        _greedy(sentences, log_probs, options)
    else:
        _beam(sentences, log_probs, options)


def _greedy(sentences: list[LiveSentence], log_probs: Tensor, options: SearchOptions) -> None:
    best_scores, best = log_probs.max(dim=-1)
    for sentence, token, score in zip(sentences, best.tolist(), best_scores.tolist(),
                                      strict=True):
        sentence.step += 1
        sentence.scores[0] += score
        output = sentence.histories[0]
        if token == options.eos_id or sentence.step >= sentence.max_length:
            if token != options.eos_id:
                output.append(token)
            length = len(output) + (token == options.eos_id)
            sentence.result = [Hypothesis(output, length_normalised(
                sentence.scores[0], length, options.length_penalty))]
        else:
            output.append(token)
            sentence.tokens = [token]


def _beam(sentences: list[LiveSentence], log_probs: Tensor, options: SearchOptions) -> None:
    """Sentences of one width are ranked together, as `beam_search` ranks its batch."""
    size = options.beam_size
    vocab = log_probs.shape[1]
    widths = [s.width for s in sentences]  # before the step (it changes them)
    starts: list[int] = []  # each sentence's first row
    offset = 0
    for width in widths:
        starts.append(offset)
        offset += width
    for width in sorted(set(widths)):
        chosen = [i for i, w in enumerate(widths) if w == width]
        first, count = starts[chosen[0]], len(chosen) * width
        if chosen[-1] - chosen[0] + 1 == len(chosen):  # one stretch of rows: a view
            part = log_probs[first: first + count]  # summed in place: the step's own tensor
        else:
            part = log_probs.index_select(0, torch.tensor(
                [starts[i] + k for i in chosen for k in range(width)],
                dtype=torch.long, device=log_probs.device))
        if width > 1:  # before the first step no scores are added, as in `beam_search`
            scores = torch.tensor([x for i in chosen for x in sentences[i].scores],
                                  device=log_probs.device)
            part.add_(scores.reshape(-1, 1))
        top_values, top_index = part.reshape(len(chosen), width * vocab).topk(2 * size, dim=-1)
        for i, values, flat in zip(chosen, top_values.tolist(), top_index.tolist(),
                                   strict=True):
            _beam_step(sentences[i], values, flat, vocab, options)


def _beam_step(sentence: LiveSentence, values: list[float], flat: list[int], vocab: int,
               options: SearchOptions) -> None:
    beams_state = sentence.beams
    assert beams_state is not None
    sentence.step += 1
    parents = [index // vocab for index in flat]
    chosen = [index % vocab for index in flat]
    beams = select_beams(values, parents, chosen, sentence.histories, beams_state,
                         sentence.step, options)
    if beams_state.done:
        sentence.result = sorted(beams_state.finished, reverse=True)[: options.n_best]
        return
    sentence.histories = [sentence.histories[p] + [t] for _, p, t in beams]
    sentence.parents = [p for _, p, _ in beams]
    sentence.scores = [value for value, _, _ in beams]
    sentence.tokens = [t for _, _, t in beams]
