"""Train the fastText domain classifier (the router).

The classifier artifact carries its own training examples (`examples.tsv.gz`: label TAB
text), so adding a domain retrains on every domain the store knows plus the new one.
fastText reads its input in order and does not shuffle, so examples are shuffled here
(seeded); one thread keeps training deterministic. `fit_temperature` calibrates the trained
model's posteriors on held-out examples (server/routing/classifier.py applies it).
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
    raw_posteriors,
)
from server.routing.features import classifier_text, neutralise

Example = tuple[str, str]  # (label, source text)


@dataclass(frozen=True)
class ClassifierSettings:
    """fastText knobs. The defaults are the router's, the one place they are set: the
    default model's recipe trains with them and they are the sidecar's defaults
    (trainer/routers/settings.py `RouterSettings`), so a router retrained when a domain is added
    is trained as the shipped one was.

    Word uni+bigrams without character n-grams, 10 epochs (router v5): on a held-out
    1,000 train lines + dev per domain (1,150 each) the lowest of medical/law/it/religion
    was 91.0% (it 92.4%), against 90.1% (it 90.1%) for 25 epochs with character
    3-5-grams, which overfit the 5,000 lines per domain (benchmarks/results/router.md)."""

    epoch: int = 10
    lr: float = 0.5
    dim: int = 32
    word_ngrams: int = 2
    minn: int = 0  # character n-grams: none (maxn 0)
    maxn: int = 0
    bucket: int = 200_000
    seed: int = 1
    quantize: bool = True  # product quantization: the file shrinks ~10x


def examples_to_bytes(examples: Sequence[Example]) -> bytes:
    """`label TAB text` lines; texts are neutralised (no TAB, line break or label marker
    inside), so every example stays one line with its own label."""
    lines = "".join(f"{label}\t{neutralise(text)}\n" for label, text in examples)
    return gzip.compress(lines.encode("utf-8"), mtime=0)


def examples_from_bytes(data: bytes) -> list[Example]:
    out: list[Example] = []
    # split("\n"), not splitlines(): older files may hold a form feed or U+2028 in a text.
    for line in gzip.decompress(data).decode("utf-8").split("\n"):
        if line:
            label, _, text = line.partition("\t")
            out.append((label, text))
    return out


def train_classifier(examples: Sequence[Example], settings: ClassifierSettings | None = None
                     ) -> bytes:
    """The bytes of a trained fastText model (`classifier.bin`)."""
    settings = settings or ClassifierSettings()
    labels = sorted({label for label, _ in examples})
    if len(labels) < 2:
        raise ValueError(f"a classifier needs at least two domains (got {labels})")
    shuffled = list(examples)
    random.Random(settings.seed).shuffle(shuffled)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "train.txt"
        data.write_text("".join(f"{LABEL_PREFIX}{label} {classifier_text(text)}\n"
                                for label, text in shuffled), encoding="utf-8")
        model = fasttext.train_supervised(
            str(data), epoch=settings.epoch, lr=settings.lr, dim=settings.dim,
            wordNgrams=settings.word_ngrams, minn=settings.minn, maxn=settings.maxn,
            bucket=settings.bucket, thread=1, seed=settings.seed, verbose=0)
        out = Path(tmp) / CLASSIFIER_MODEL_FILE
        if settings.quantize:
            model.quantize(input=str(data), qnorm=True, retrain=False, cutoff=100_000)
        model.save_model(str(out))
        return out.read_bytes()


@dataclass(frozen=True)
class Accuracy:
    overall: float
    per_label: dict[str, float]
    confusion: dict[str, dict[str, int]]  # true label -> predicted label -> count


def load_model(model_bytes: bytes) -> fasttext.FastText._FastText:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / CLASSIFIER_MODEL_FILE
        path.write_bytes(model_bytes)
        return fasttext.load_model(str(path))


def accuracy(model_bytes: bytes, examples: Sequence[Example]) -> Accuracy:
    model = load_model(model_bytes)
    confusion: dict[str, Counter[str]] = {}
    for label, text in examples:
        predicted = model.predict(classifier_text(text), k=1)[0][0].removeprefix(LABEL_PREFIX)
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


def fit_temperature(model_bytes: bytes, examples: Sequence[Example]) -> Calibration:
    """The temperature that minimises the negative log-likelihood of held-out `examples`
    (those whose label the model knows). The NLL is convex in 1/T, so a fine grid finds
    its minimum; with no usable example the temperature stays 1."""
    model = load_model(model_bytes)
    known = {label.removeprefix(LABEL_PREFIX) for label in model.get_labels()}
    usable = [(label, text) for label, text in examples if label in known]
    if not usable:
        return Calibration(1.0, math.nan, math.nan, 0)
    posteriors = [raw_posteriors(model, text) for _, text in usable]
    labels = [label for label, _ in usable]
    scores = {t: negative_log_likelihood(posteriors, labels, t) for t in TEMPERATURES}
    best = min(scores, key=lambda t: (scores[t], abs(math.log(t))))
    return Calibration(round(best, 4), scores[best], scores[1.0], len(usable))
