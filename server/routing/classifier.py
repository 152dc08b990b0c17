"""The fastText domain classifier: source text -> posterior probability of every domain.

Artifact: kind "classifier" (default name "router"), file `classifier.bin` (a fastText
supervised model whose labels are `__label__<domain>`, xz-compressed as the trainer writes
it: its dictionary of feature numbers shrinks 3x; one fastText wrote itself is read too),
manifest config
`{"labels": [domain, ...], "temperature": T, "features": {...}}`; `features` names the
hashed features the model reads (server/routing/features.py; absent: the text itself).

fastText trained to convergence is overconfident (on the default router's dev set: mean
top posterior 0.91 at 66.7% accuracy). The optional `temperature` (T > 1 flattens, fitted on
dev data by trainer/routers/classifier.py; 1.0 when absent) rescales the posteriors as
p_i^(1/T) / sum_j p_j^(1/T), i.e. softmax(logit / T): temperature scaling (Guo et al. 2017,
"On Calibration of Modern Neural Networks"). The argmax never changes; the routing
threshold and the soft ensemble's weights then read calibrated probabilities.
"""

from __future__ import annotations

import lzma
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import fasttext

from contract.artifacts import CLASSIFIER_MODEL_FILE
from server.routing.features import HashedFeatures, model_input

LABEL_PREFIX = "__label__"
MIN_PROBABILITY = 1e-6  # fastText's own smoothing floor is 1e-5
XZ_MAGIC = b"\xfd7zXZ\x00"  # fastText's own files start with its magic number instead


def stored_model(model: bytes) -> bytes:
    """A fastText model's bytes as a classifier artifact stores them (xz)."""
    return lzma.compress(model, preset=9 | lzma.PRESET_EXTREME)


def fasttext_model(stored: bytes) -> bytes:
    """The fastText model in a `classifier.bin` (xz-compressed or not); ValueError for a
    damaged compressed file."""
    if not stored.startswith(XZ_MAGIC):
        return stored
    try:
        return lzma.decompress(stored)
    except lzma.LZMAError as error:
        raise ValueError(f"{CLASSIFIER_MODEL_FILE}: damaged xz data ({error})") from None


def calibrated(posteriors: Mapping[str, float], temperature: float) -> dict[str, float]:
    """Posteriors rescaled by `temperature` (see the module docstring); sums to 1."""
    if temperature == 1.0:
        return dict(posteriors)
    logs = {label: math.log(max(p, MIN_PROBABILITY)) / temperature
            for label, p in posteriors.items()}
    top = max(logs.values(), default=0.0)
    scaled = {label: math.exp(value - top) for label, value in logs.items()}
    total = sum(scaled.values())
    return {label: value / total for label, value in scaled.items()}


@dataclass(frozen=True)
class RouterOrigin:
    """Which router a classifier is: the backbone (direction) it belongs to, its name and
    version; `shared` when it serves another direction that reads the same source
    language and has no router of its own (server/routing/shared_router.py)."""

    backbone: str
    name: str
    version: int
    shared: bool = False


class Classifier(Protocol):
    """What routing needs from a classifier (tests substitute fakes)."""

    version: int
    origin: RouterOrigin | None  # None: not loaded from the store (a test's, a benchmark's)

    def posteriors(self, text: str) -> dict[str, float]:
        """Domain -> probability, over every label the classifier knows."""
        ...


class FastTextClassifier:
    """A loaded fastText model; `posteriors` is thread-safe (fastText predict is const)."""

    def __init__(self, model: fasttext.FastText._FastText, *, labels: Sequence[str],
                 version: int, temperature: float = 1.0,
                 features: HashedFeatures | None = None,
                 origin: RouterOrigin | None = None) -> None:
        self.model = model
        self.labels = list(labels)
        self.version = version
        self.origin = origin
        self.temperature = temperature
        self.features = features

    def raw_posteriors(self, text: str) -> dict[str, float]:
        """fastText's own probabilities, before temperature scaling."""
        return raw_posteriors(self.model, text, self.labels, features=self.features)

    def posteriors(self, text: str) -> dict[str, float]:
        return calibrated(self.raw_posteriors(text), self.temperature)


def raw_posteriors(model: fasttext.FastText._FastText, text: str,
                   labels: Sequence[str] = (), *,
                   features: HashedFeatures | None = None) -> dict[str, float]:
    """Label -> fastText probability, for every label of the model (and of `labels`), of
    a model that reads `features` (None: the normalised text)."""
    return line_posteriors(model, model_input(text, features), labels)


def line_posteriors(model: fasttext.FastText._FastText, line: str,
                    labels: Sequence[str] = ()) -> dict[str, float]:
    """`raw_posteriors` of the line the model reads (normalised text or feature numbers)."""
    found, probabilities = model.predict(line, k=-1, threshold=0.0,
                                         on_unicode_error="replace")
    # fastText reports exp(log(p + 1e-5)): clamp back into [0, 1].
    result = {label.removeprefix(LABEL_PREFIX): min(1.0, float(probability))
              for label, probability in zip(found, probabilities, strict=True)}
    return {label: result.get(label, 0.0) for label in labels} | result


def config_temperature(config: Mapping[str, object]) -> float:
    """The manifest's temperature (1.0 when absent); ValueError unless a finite number > 0."""
    value = config.get("temperature", 1.0)
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"classifier config 'temperature' must be a finite number > 0 "
                         f"(got {value!r})")
    return float(value)


def load_classifier(files: Mapping[str, bytes], config: Mapping[str, object], *,
                    version: int, origin: RouterOrigin | None = None) -> FastTextClassifier:
    """A classifier from a verified artifact's files. fastText loads only from a path, so
    the verified bytes go to a private temporary file that is removed right after."""
    if CLASSIFIER_MODEL_FILE not in files:
        raise ValueError(f"classifier artifact lacks {CLASSIFIER_MODEL_FILE!r}")
    labels = config.get("labels")
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise ValueError("classifier config needs 'labels': a list of domain names")
    temperature = config_temperature(config)
    features = HashedFeatures.from_config(config)
    descriptor, path = tempfile.mkstemp(prefix="nmt-classifier-", suffix=".bin")
    try:
        with os.fdopen(descriptor, "wb") as handle:  # mkstemp: mode 0600, owner only
            handle.write(fasttext_model(files[CLASSIFIER_MODEL_FILE]))
        model = fasttext.load_model(path)
    finally:
        os.unlink(path)
    model_labels = {label.removeprefix(LABEL_PREFIX) for label in model.get_labels()}
    missing = sorted(set(labels) - model_labels)
    if missing:
        raise ValueError(f"classifier config lists labels the model lacks: {missing}")
    return FastTextClassifier(model, labels=labels, version=version,
                              temperature=temperature, features=features, origin=origin)
