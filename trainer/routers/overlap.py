"""Which of the router's stored examples does a new domain's text claim?

A shipped class may hold text of the new domain's own kind: the default router's medical
class learned from 2,000 biomedical abstracts (trainer/recipes/router_stage.py
`DOMAIN_EXTRAS`), so a biomedical domain added from Medline abstracts lost its own unseen
lines to medical (41% top-1 however its class was weighted;
benchmarks/results/router_new_domain.md). Such examples are moved to the new domain.

Which ones: a binary fastText model (the new domain's lines against the other examples)
is trained on half of the other examples and scores the other half, and the other way
round (cross-fitting: no example is scored by a model that saw it). An example it gives
the new domain with probability >= `threshold` is claimed. With 3,000 new lines against
~65,000 others the model is cautious: text unlike the new domain's is never claimed.

A class the new domain would take most of is left whole: it is a domain of the same text
(two domains added from the same corpus), and moving its examples would drop it from the
router. At most `MAX_CLAIMED_SHARE` of any class moves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from server.routing.classifier import line_posteriors
from server.routing.features import Features, feature_line
from trainer.routers.classifier import ClassifierSettings, load_model, train_classifier
from trainer.routers.features import FeatureExample

NEW, OTHER = "new", "other"
FOLDS = 2
MAX_CLAIMED_SHARE = 0.5


def claimed(others: Sequence[FeatureExample], new_lines: Sequence[Features], *,
            settings: ClassifierSettings, threshold: float = 0.5) -> set[int]:
    """Indices of `others` that look like `new_lines` (see the module docstring)."""
    if not others or not new_lines:
        return set()
    binary = replace(settings, quantize=False)
    found: set[int] = set()
    for fold in range(FOLDS):
        train = [(NEW, line) for line in new_lines] + [
            (OTHER, bag) for i, (_, bag) in enumerate(others) if i % FOLDS != fold]
        model = load_model(train_classifier(train, binary))
        for i in range(fold, len(others), FOLDS):
            posteriors = line_posteriors(model, feature_line(others[i][1]))
            if posteriors.get(NEW, 0.0) >= threshold:
                found.add(i)
    return _without_whole_classes(others, found)


def _without_whole_classes(others: Sequence[FeatureExample], found: set[int]) -> set[int]:
    """`found` less the examples of classes it would take more than MAX_CLAIMED_SHARE of."""
    sizes = Counter(label for label, _ in others)
    taken = Counter(others[i][0] for i in found)
    kept = {label for label, count in taken.items()
            if count > MAX_CLAIMED_SHARE * sizes[label]}
    return {i for i in found if others[i][0] not in kept}
