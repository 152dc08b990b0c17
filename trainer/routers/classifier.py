"""Train the fastText domain classifier (the router).

The router reads hashed word n-grams (server/routing/features.py) and the classifier
artifact carries its training examples as those features (`features.npz.xz`, no text:
trainer/routers/features.py), so adding a domain retrains on every domain the store knows
plus the new one. fastText reads its input in order and does not shuffle, so examples are
shuffled here (seeded); one thread keeps training deterministic. `fit_temperature`
calibrates the trained model's posteriors on held-out examples (server/routing/
classifier.py applies it).
"""

from __future__ import annotations

import gzip
import math
import random
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import fasttext

from contract.artifacts import CLASSIFIER_MODEL_FILE
from server.routing.classifier import (
    LABEL_PREFIX,
    calibrated,
    fasttext_model,
    raw_posteriors,
    stored_model,
)
from server.routing.features import HashedFeatures, feature_line, model_input
from trainer.routers.features import FeatureExample

Example = tuple[str, str]  # (label, source text)
QUANTIZE_MIN_FEATURES = 256


@dataclass(frozen=True)
class ClassifierSettings:
    """fastText knobs. The defaults are the router's, the one place they are set: the
    default model's recipe trains with them and they are the sidecar's defaults
    (trainer/routers/settings.py `RouterSettings`), so a router retrained when a domain is added
    is trained as the shipped one was.

    Word uni+bigrams, 10 epochs (router v5): on a held-out 1,000 train lines + dev per
    domain (1,150 each) the lowest of medical/law/it/religion was 91.0% (it 92.4%),
    against 90.1% (it 90.1%) for 25 epochs with character 3-5-grams, which overfit the
    5,000 lines per domain (benchmarks/results/router.md). The words and pairs are hashed
    (`word_ngrams`, `bucket`: server/routing/features.py) and kept where they occur in at
    least `min_examples` distinct examples (trainer/routers/features.py): on dev as
    accurate as the text itself (benchmarks/results/router-artifacts.md)."""

    epoch: int = 10
    lr: float = 0.5
    dim: int = 32
    word_ngrams: int = 2
    bucket: int = 1 << 22  # hashed feature numbers
    min_examples: int = 5
    seed: int = 1
    quantize: bool = True  # product quantization: the file shrinks ~10x

    def features(self) -> HashedFeatures:
        return HashedFeatures(self.word_ngrams, self.bucket)


def examples_from_bytes(data: bytes) -> list[Example]:
    """The examples of an older classifier (`examples.tsv.gz`: `label TAB text` lines), to
    retrain it into one that keeps features."""
    out: list[Example] = []
    # split("\n"), not splitlines(): older files may hold a form feed or U+2028 in a text.
    for line in gzip.decompress(data).decode("utf-8").split("\n"):
        if line:
            label, _, text = line.partition("\t")
            out.append((label, text))
    return out


def train_classifier(examples: Sequence[FeatureExample],
                     settings: ClassifierSettings | None = None) -> bytes:
    """The bytes of `classifier.bin` (a fastText model, xz-compressed: server/routing/
    classifier.py) trained on the examples' features as they are (prune them first:
    trainer/routers/features.py `pruned`)."""
    settings = settings or ClassifierSettings()
    labels = sorted({label for label, _ in examples})
    if len(labels) < 2:
        raise ValueError(f"a classifier needs at least two domains (got {labels})")
    shuffled = list(examples)
    random.Random(settings.seed).shuffle(shuffled)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "train.txt"
        data.write_text("".join(f"{LABEL_PREFIX}{label} {feature_line(bag)}\n"
                                for label, bag in shuffled), encoding="utf-8")
        # the features are the n-grams: fastText's own word and character n-grams off
        model = fasttext.train_supervised(
            str(data), epoch=settings.epoch, lr=settings.lr, dim=settings.dim,
            wordNgrams=1, minn=0, maxn=0, bucket=0, thread=1, seed=settings.seed, verbose=0)
        out = Path(tmp) / CLASSIFIER_MODEL_FILE
        # product quantization needs 256 rows (its codebooks); a router of fewer
        # features is small anyway
        if settings.quantize and len(model.get_words()) >= QUANTIZE_MIN_FEATURES:
            model.quantize(input=str(data), qnorm=True, retrain=False, cutoff=100_000)
        model.save_model(str(out))
        return stored_model(out.read_bytes())


@dataclass(frozen=True)
class Accuracy:
    overall: float
    per_label: dict[str, float]
    confusion: dict[str, dict[str, int]]  # true label -> predicted label -> count


def load_model(model_bytes: bytes) -> fasttext.FastText._FastText:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / CLASSIFIER_MODEL_FILE
        path.write_bytes(fasttext_model(model_bytes))
        return fasttext.load_model(str(path))


def accuracy(model_bytes: bytes, examples: Sequence[Example],
             features: HashedFeatures | None) -> Accuracy:
    """Top-1 accuracy on (label, text) examples of a model that reads `features` (None:
    the normalised text, an older classifier)."""
    model = load_model(model_bytes)
    confusion: dict[str, Counter[str]] = {}
    for label, text in examples:
        line = model_input(text, features)
        predicted = model.predict(line, k=1)[0][0].removeprefix(LABEL_PREFIX)
        confusion.setdefault(label, Counter())[predicted] += 1
    per_label = {label: counts[label] / sum(counts.values()) for label, counts in confusion.items()}
    correct = sum(counts[label] for label, counts in confusion.items())
    return Accuracy(correct / max(len(examples), 1), per_label,
                    {label: dict(counts) for label, counts in confusion.items()})


@dataclass(frozen=True)
class Calibration:
    temperature: float
    nll: float  # mean negative log-likelihood of the true labels at `temperature`
    nll_uncalibrated: float  # ... at temperature 1
    examples: int


# Candidate temperatures: a log-spaced grid from 1/4 to 16 that contains 1.0 exactly, so
# the fitted temperature never does worse on the fitting examples than none at all.
TEMPERATURES = tuple(2 ** (i / 8) for i in range(-16, 33))


def negative_log_likelihood(posteriors: Sequence[dict[str, float]], labels: Sequence[str],
                            temperature: float) -> float:
    total = 0.0
    for found, label in zip(posteriors, labels, strict=True):
        total -= math.log(max(calibrated(found, temperature)[label], 1e-12))
    return total / max(len(labels), 1)


def fit_temperature(model_bytes: bytes, examples: Sequence[Example],
                    features: HashedFeatures | None) -> Calibration:
    """The temperature that minimises the negative log-likelihood of held-out `examples`
    (those whose label the model knows) for a model that reads `features`. The NLL is
    convex in 1/T, so a fine grid finds its minimum; with no usable example the
    temperature stays 1."""
    model = load_model(model_bytes)
    known = {label.removeprefix(LABEL_PREFIX) for label in model.get_labels()}
    usable = [(label, text) for label, text in examples if label in known]
    if not usable:
        return Calibration(1.0, math.nan, math.nan, 0)
    posteriors = [raw_posteriors(model, text, features=features) for _, text in usable]
    labels = [label for label, _ in usable]
    scores = {t: negative_log_likelihood(posteriors, labels, t) for t in TEMPERATURES}
    best = min(scores, key=lambda t: (scores[t], abs(math.log(t))))
    return Calibration(round(best, 4), scores[best], scores[1.0], len(usable))
