"""A tenant's router: the shared classifier's posteriors restricted to the labels the
tenant sees (its own domains, the shared ones and "generic"), renormalised, so `auto`
routing never picks, ranks or names another tenant's domain (docs/API.md, "Tenants")."""

from __future__ import annotations

from collections.abc import Callable

from server.routing.classifier import Classifier

GENERIC = "generic"


class VisibleLabels:
    def __init__(self, classifier: Classifier, sees: Callable[[str], bool]) -> None:
        self.classifier = classifier
        self.sees = sees
        self.version = classifier.version
        self.origin = classifier.origin

    def posteriors(self, text: str) -> dict[str, float]:
        kept = {label: p for label, p in self.classifier.posteriors(text).items()
                if label == GENERIC or self.sees(label)}
        total = sum(kept.values())
        if total <= 0:
            return {label: 1.0 / len(kept) for label in kept} if kept else {}
        return {label: p / total for label, p in kept.items()}
