"""How well the router's posteriors match its accuracy on labelled test sentences.

Reports, for the posteriors as served (after the artifact's temperature) and for fastText's
own (temperature 1): mean top posterior vs accuracy, the negative log-likelihood of the
true domain, and the expected calibration error (ECE: 10 equal-width confidence bins, the
|accuracy - confidence| gap weighted by each bin's share; Guo et al. 2017).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.quality.data import EvalSet
from server.routing import Classifier
from server.routing.classifier import FastTextClassifier

BINS = 10


def calibration_scores(posteriors: Sequence[Mapping[str, float]],
                       labels: Sequence[str]) -> dict[str, float]:
    """Mean confidence, accuracy, NLL and ECE of `posteriors` against the true `labels`."""
    bins: list[list[tuple[float, bool]]] = [[] for _ in range(BINS)]
    nll = 0.0
    for found, label in zip(posteriors, labels, strict=True):
        predicted, confidence = min(found.items(), key=lambda item: (-item[1], item[0]))
        bins[min(int(confidence * BINS), BINS - 1)].append((confidence, predicted == label))
        nll -= math.log(max(found.get(label, 0.0), 1e-12))
    count = max(len(labels), 1)
    flat = [item for members in bins for item in members]
    ece = sum(abs(sum(c for c, _ in members) - sum(ok for _, ok in members)) / count
              for members in bins if members)
    return {"mean_confidence": round(sum(c for c, _ in flat) / count, 4),
            "accuracy": round(sum(ok for _, ok in flat) / count, 4),
            "nll": round(nll / count, 4), "ece": round(ece, 4)}


def calibration_report(classifier: Classifier, sets: Sequence[EvalSet]) -> dict[str, Any]:
    """Calibration on the labelled sets (each set's name is its true domain)."""
    texts = [(dataset.name, text) for dataset in sets for text in dataset.sources]
    labels = [label for label, _ in texts]
    served = calibration_scores([classifier.posteriors(t) for _, t in texts], labels)
    report: dict[str, Any] = {"sentences": len(texts), "served": served}
    if isinstance(classifier, FastTextClassifier):
        report["temperature"] = classifier.temperature
        report["uncalibrated"] = calibration_scores(
            [classifier.raw_posteriors(t) for _, t in texts], labels)
    return report
