"""Dev-tuned ("learnable") ensemble weights: coordinate ascent over the simplex.

Semantics (the search, written out):

    current = start (normalised); best = score(current)
    repeat `rounds` times:
        for each member m, for each share s in `grid`:
            candidate = current with m's weight set to s, the others rescaled to 1 - s
            if score(candidate) > best: current, best = candidate, score(candidate)
        stop early when a whole round improved nothing

`score` is dev-slice BLEU of a greedy decode with the candidate weights; the test set is
only translated once, with the weights the search returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

Weights = dict[str, float]
DEFAULT_GRID = (0.0, 0.2, 0.4, 0.7)
EPSILON = 1e-9


@dataclass
class Search:
    weights: Weights
    score: float
    trace: list[dict[str, object]] = field(default_factory=list)


def normalised(weights: Mapping[str, float]) -> Weights:
    """Positive weights summing to 1 (zero weights dropped); raises if none is positive."""
    kept = {name: float(w) for name, w in weights.items() if w > EPSILON}
    total = sum(kept.values())
    if total <= 0:
        raise ValueError(f"no positive weight in {dict(weights)}")
    return {name: round(w / total, 6) for name, w in sorted(kept.items())}


def with_share(weights: Mapping[str, float], name: str, share: float) -> Weights | None:
    """`name` gets `share` of the mass, the other members keep their proportions; None when
    the result has no positive weight or no other member can take the rest."""
    others = {n: w for n, w in weights.items() if n != name and w > EPSILON}
    rest = sum(others.values())
    if share >= 1.0 - EPSILON:
        return {name: 1.0}
    if rest <= EPSILON:
        return None
    scaled = {n: w / rest * (1.0 - share) for n, w in others.items()}
    candidate = scaled | ({name: share} if share > EPSILON else {})
    return normalised(candidate)


def coordinate_ascent(start: Mapping[str, float], score: Callable[[Weights], float], *,
                      members: Sequence[str] | None = None,
                      grid: Sequence[float] = DEFAULT_GRID, rounds: int = 1) -> Search:
    """Maximise `score` over mixtures of `members` (default: the start's members)."""
    names = list(members) if members is not None else sorted(start)
    current = normalised(start)
    seen: dict[tuple[tuple[str, float], ...], float] = {}

    def evaluate(weights: Weights) -> float:
        key = tuple(sorted(weights.items()))
        if key not in seen:
            seen[key] = score(weights)
            search.trace.append({"weights": dict(weights), "score": round(seen[key], 4)})
        return seen[key]

    search = Search(current, float("-inf"))
    search.score = evaluate(current)
    for _round in range(max(rounds, 0)):
        improved = False
        for name in names:
            for share in grid:
                candidate = with_share(search.weights, name, share)
                if candidate is None:
                    continue
                value = evaluate(candidate)
                if value > search.score + EPSILON:
                    search.weights, search.score, improved = candidate, value, True
        if not improved:
            break
    return search
