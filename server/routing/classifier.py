"""The fastText domain classifier: source text -> posterior probability of every domain.

Artifact: kind "classifier" (default name "router"), file `classifier.bin` (a fastText
supervised model whose labels are `__label__<domain>`), manifest config
`{"labels": [domain, ...]}`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Protocol

import fasttext

from server.routing.features import classifier_text

CLASSIFIER_FILE = "classifier.bin"
LABEL_PREFIX = "__label__"


class Classifier(Protocol):
    """What routing needs from a classifier (tests substitute fakes)."""

    version: int

    def posteriors(self, text: str) -> dict[str, float]:
        """Domain -> probability, over every label the classifier knows."""
        ...


class FastTextClassifier:
    """A loaded fastText model; `posteriors` is thread-safe (fastText predict is const)."""

    def __init__(self, model: fasttext.FastText._FastText, *, labels: Sequence[str],
                 version: int) -> None:
        self.model = model
        self.labels = list(labels)
        self.version = version

    def posteriors(self, text: str) -> dict[str, float]:
        line = classifier_text(text)
        labels, probabilities = self.model.predict(line, k=-1, threshold=0.0,
                                                   on_unicode_error="replace")
        # fastText reports exp(log(p + 1e-5)): clamp back into [0, 1].
        result = {label.removeprefix(LABEL_PREFIX): min(1.0, float(probability))
                  for label, probability in zip(labels, probabilities, strict=True)}
        return {label: result.get(label, 0.0) for label in self.labels} | result


def load_classifier(files: Mapping[str, bytes], config: Mapping[str, object], *,
                    version: int) -> FastTextClassifier:
    """A classifier from a verified artifact's files. fastText loads only from a path, so
    the verified bytes go to a private temporary file that is removed right after."""
    if CLASSIFIER_FILE not in files:
        raise ValueError(f"classifier artifact lacks {CLASSIFIER_FILE!r}")
    labels = config.get("labels")
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise ValueError("classifier config needs 'labels': a list of domain names")
    descriptor, path = tempfile.mkstemp(prefix="nmt-classifier-", suffix=".bin")
    try:
        with os.fdopen(descriptor, "wb") as handle:  # mkstemp: mode 0600, owner only
            handle.write(files[CLASSIFIER_FILE])
        model = fasttext.load_model(path)
    finally:
        os.unlink(path)
    model_labels = {label.removeprefix(LABEL_PREFIX) for label in model.get_labels()}
    missing = sorted(set(labels) - model_labels)
    if missing:
        raise ValueError(f"classifier config lists labels the model lacks: {missing}")
    return FastTextClassifier(model, labels=labels, version=version)
