"""A request's results from its sentences' hypotheses: each item's share of them, and the
n-best alternatives of a text."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from server.decoding.search import Hypothesis
from server.serving.requests import Alternative, Prepared
from server.textproc.document import Document

Decode = Callable[[Hypothesis], str]


def per_item(prepared: Sequence[Prepared],
              hypotheses: list[list[Hypothesis]]) -> list[list[list[Hypothesis]]]:
    out: list[list[list[Hypothesis]]] = []
    cursor = 0
    for item in prepared:
        out.append(hypotheses[cursor: cursor + len(item.jobs)])
        cursor += len(item.jobs)
    return out


def n_best_alternatives(document: Document, hypotheses: list[list[Hypothesis]], finals: list[str],
                  decode: Decode, *, n_best: int) -> list[Alternative]:
    """The i-th alternative joins every sentence's i-th best hypothesis (a sentence whose
    markers that hypothesis lost keeps its final translation); its score is the mean of
    their length-normalised log-probabilities."""
    if not hypotheses:
        return [Alternative(document.render(finals), 0.0)]
    count = min(n_best, min(len(h) for h in hypotheses))
    out: list[Alternative] = []
    for rank in range(count):
        chosen = [h[rank] for h in hypotheses]
        restored = document.restore([decode(h) for h in chosen])
        texts = [mine if mine is not None else final
                 for mine, final in zip(restored, finals, strict=True)]
        out.append(Alternative(document.render(texts), sum(h.score for h in chosen) /
                               len(chosen)))
    return out
