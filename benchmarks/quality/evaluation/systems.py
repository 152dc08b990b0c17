"""The members of every sentence for each evaluated system, and the classifier's report.

Routing reuses `server.routing.RoutingPolicy` (the code the server runs):
- "auto" is the policy as served: the predicted domain at or above the threshold, below
  it the plain backbone or (setting `fallback`) the soft ensemble;
- "soft ensemble" is the policy's ensemble branch for *every* sentence: a policy whose
  threshold is 1.0 sees posteriors scaled by (1 - 1e-6), so no sentence passes it;
- "uniform ensemble" is an explicit mixture, every served domain and the backbone
  weighted equally (the policy's mixture path).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.quality.data import EvalSet
from benchmarks.quality.decode import GENERIC_MEMBERS, Members
from benchmarks.quality.models import ModuleInfo
from server.core.settings import RoutingSettings
from server.engine.engine import Member
from server.routing import GENERIC, Classifier, RoutingDecision, RoutingPolicy

UNSURE_SCALE = 1.0 - 1e-6


class _Unsure:
    """A classifier view whose confidence never reaches 1.0 (forces the ensemble branch)."""

    def __init__(self, classifier: Classifier) -> None:
        self.classifier = classifier
        self.version = classifier.version
        self.origin = classifier.origin

    def posteriors(self, text: str) -> dict[str, float]:
        return {d: p * UNSURE_SCALE for d, p in self.classifier.posteriors(text).items()}


class Router:
    """Per-sentence members of the routed systems, over the served modules."""

    def __init__(self, served: Mapping[str, ModuleInfo], classifier: Classifier | None, *,
                 settings: RoutingSettings) -> None:
        self.served = dict(served)
        self.classifier = classifier
        self.settings = settings
        self.versions = {d: info.version for d, info in self.served.items()}
        self.auto_policy = RoutingPolicy(settings, max_members=max(1, len(self.served)))
        forced = settings.model_copy(update={"threshold": 1.0, "ensemble": "soft",
                                             "fallback": "ensemble"})
        self.soft_policy = RoutingPolicy(forced, max_members=max(1, len(self.served)))
        self._posteriors: dict[str, dict[str, float]] = {}

    def posteriors(self, text: str) -> dict[str, float]:
        if self.classifier is None:
            return {}
        if text not in self._posteriors:
            self._posteriors[text] = self.classifier.posteriors(text)
        return self._posteriors[text]

    def predicted(self, text: str) -> tuple[str | None, float]:
        """The most probable domain (ties: alphabetical, as the policy) and its posterior."""
        found = self.posteriors(text)
        if not found:
            return None, 0.0
        return min(found.items(), key=lambda item: (-item[1], item[0]))

    def members(self, decision: RoutingDecision) -> Members:
        return tuple(Member(self.served[d].module_id if d else None, w)
                     for d, w in decision.members)

    def auto(self, text: str) -> RoutingDecision:
        return self.auto_policy.decide(None, text, domains=self.versions,
                                       classifier=self.classifier)

    def soft(self, text: str) -> RoutingDecision:
        classifier = _Unsure(self.classifier) if self.classifier is not None else None
        return self.soft_policy.decide(None, text, domains=self.versions, classifier=classifier)

    def uniform(self) -> RoutingDecision:
        weights = {d: 1.0 for d in sorted(self.served)} | {GENERIC: 1.0}
        return self.auto_policy.decide(weights, "", domains=self.versions, classifier=None)

    def fixed(self, weights: Mapping[str, float]) -> RoutingDecision:
        """An explicit mixture (e.g. dev-tuned weights); "generic" is the backbone."""
        kept = {d: w for d, w in weights.items() if w > 0}
        return self.auto_policy.decide(kept, "", domains=self.versions, classifier=None)


def single(module: ModuleInfo | None) -> Members:
    return (Member(module.module_id, 1.0),) if module is not None else GENERIC_MEMBERS


def true_label(dataset: EvalSet, modules: Mapping[str, ModuleInfo]) -> list[Members]:
    return [single(modules.get(dataset.name))] * len(dataset)


def predicted_label(dataset: EvalSet, router: Router) -> list[Members]:
    """The classifier's top domain, whatever its confidence (backbone if not served)."""
    return [single(router.served.get(router.predicted(text)[0] or ""))
            for text in dataset.sources]


def wrong_label(dataset: EvalSet, modules: Mapping[str, ModuleInfo], *,
                seed: int) -> list[Members]:
    """A random module of another domain per sentence (seeded by set: same draw for every
    family). A family without another domain's module falls back to the backbone."""
    rng = random.Random(f"{seed}:{dataset.name}")
    others = sorted(d for d in modules if d != dataset.name)
    return [single(modules[rng.choice(others)]) if others else GENERIC_MEMBERS
            for _ in dataset.sources]


def routed(dataset: EvalSet, router: Router, mode: str) -> list[Members]:
    """Members of "auto" / "soft" routing for every sentence."""
    decide = router.auto if mode == "auto" else router.soft
    return [router.members(decide(text)) for text in dataset.sources]


def classifier_report(router: Router, sets: Sequence[EvalSet]) -> dict[str, Any]:
    """Accuracy per domain and the confusion matrix (true -> predicted -> count)."""
    confusion: dict[str, dict[str, int]] = {}
    for dataset in sets:
        counts = Counter(router.predicted(text)[0] or "none" for text in dataset.sources)
        confusion[dataset.name] = dict(sorted(counts.items()))
    per_domain = {d: round(c.get(d, 0) / max(sum(c.values()), 1), 4)
                  for d, c in confusion.items()}
    correct = sum(c.get(d, 0) for d, c in confusion.items())
    total = sum(sum(c.values()) for c in confusion.values())
    return {"accuracy": per_domain, "overall": round(correct / max(total, 1), 4),
            "confusion": confusion, "sentences": total}


def routing_report(router: Router, sets: Sequence[EvalSet]) -> dict[str, Any]:
    """How the served policy routes each set: decision modes, predicted domains, and the
    mean confidence (open-domain genres show where the router sends unknown text)."""
    report: dict[str, Any] = {}
    for dataset in sets:
        decisions = [router.auto(text) for text in dataset.sources]
        modes = Counter(d.mode for d in decisions)
        predicted = Counter(router.predicted(text)[0] or "none" for text in dataset.sources)
        confidence = [router.predicted(text)[1] for text in dataset.sources]
        report[dataset.name] = {
            "modes": dict(sorted(modes.items())),
            "predicted": dict(predicted.most_common()),
            "mean_confidence": round(sum(confidence) / max(len(confidence), 1), 4),
            "sentences": len(dataset)}
    return report


def mean_soft_weights(dataset: EvalSet, router: Router, *, top_k: int) -> dict[str, float]:
    """The soft ensemble's weights averaged over a set: the top-k domains by mean weight
    plus the backbone, renormalised (the start of the dev-tuned weight search)."""
    totals: Counter[str] = Counter()
    for text in dataset.sources:
        weights = router.soft(text).weights or {GENERIC: 1.0}
        totals.update(weights)
    domains = [d for d, _ in totals.most_common() if d != GENERIC][:top_k]
    kept = {d: totals[d] for d in domains} | {GENERIC: max(totals[GENERIC], 1e-3)}
    total = sum(kept.values())
    return {d: w / total for d, w in kept.items()}
