"""A slow, obviously-correct decoder: the oracle the fast batched search is tested against.

No caches, no batching: every step re-runs the whole decoder on each hypothesis prefix,
one sentence at a time; ensemble members are mixed as log sum_m w_m p_m.
"""

from __future__ import annotations

import math

import torch

from server.decoding.search import Hypothesis
from server.engine.backbone import Backbone
from server.engine.hooks import ModuleHooks

Members = list[tuple[ModuleHooks | None, float]]


def next_log_probs(model: Backbone, source: list[int], prefix: list[int],
                   members: Members) -> list[float]:
    mixed = None
    for hooks, weight in members:
        src = torch.tensor([source])
        memory, mask = model.encode(src, hooks)
        tgt = torch.tensor([[model.config.decoder_start_id] + prefix])
        hidden = model.decode(tgt, memory, mask, hooks)
        log_probs = torch.log_softmax(model.logits(hidden[0, -1]).float(), dim=-1)
        term = log_probs + math.log(weight)
        mixed = term if mixed is None else torch.logaddexp(mixed, term)
    assert mixed is not None
    return mixed.tolist()


def reference_search(model: Backbone, source: list[int], members: Members, *, beam: int,
                     max_length: int, n_best: int = 1, length_penalty: float = 1.0,
                     min_length: int = 0) -> list[Hypothesis]:
    eos = model.config.eos_id
    total = sum(w for _, w in members)
    members = [(h, w / total) for h, w in members]
    beams: list[tuple[list[int], float]] = [([], 0.0)]
    finished: list[Hypothesis] = []
    for step in range(1, max_length + 1):
        candidates: list[tuple[float, int, int]] = []
        for parent, (prefix, score) in enumerate(beams):
            log_probs = next_log_probs(model, source, prefix, members)
            if step - 1 < min_length:
                log_probs[eos] = -math.inf
            candidates += [(score + lp, parent, token) for token, lp in enumerate(log_probs)]
        candidates.sort(key=lambda c: -c[0])
        next_beams: list[tuple[list[int], float]] = []
        for rank, (score, parent, token) in enumerate(candidates[: 2 * beam]):
            if token == eos:
                if rank < beam:
                    finished.append(Hypothesis(beams[parent][0], score / step ** length_penalty))
                continue
            next_beams.append((beams[parent][0] + [token], score))
            if len(next_beams) == beam:
                break
        beams = next_beams
        if step == max_length:
            finished += [Hypothesis(p, s / step ** length_penalty) for p, s in beams]
            break
        if len(finished) >= beam:
            worst = sorted(finished, reverse=True)[:beam][-1].score
            if beams[0][1] / step ** length_penalty <= worst:
                break
    return sorted(finished, reverse=True)[:n_best]


def reference_greedy(model: Backbone, source: list[int], members: Members, *,
                     max_length: int, length_penalty: float = 1.0,
                     min_length: int = 0) -> Hypothesis:
    eos = model.config.eos_id
    total = sum(w for _, w in members)
    members = [(h, w / total) for h, w in members]
    prefix: list[int] = []
    score = 0.0
    for step in range(1, max_length + 1):
        log_probs = next_log_probs(model, source, prefix, members)
        if step - 1 < min_length:
            log_probs[eos] = -math.inf
        token = max(range(len(log_probs)), key=lambda t: log_probs[t])
        score += log_probs[token]
        if token == eos:
            return Hypothesis(prefix, score / step ** length_penalty)
        prefix.append(token)
    return Hypothesis(prefix, score / max_length ** length_penalty)
