"""A router's training examples as hashed features: what a classifier artifact keeps for
its retraining, instead of text.

The shipped routers learn from corpora whose text is not ours to redistribute (TED and QED:
CC BY-NC-ND; OpenSubtitles: research use only). A router is retrained (a domain added,
corrections learnt) on its old examples plus new text, and fastText sees nothing of an
example but its feature numbers (server/routing/features.py), so the numbers are all that
the retraining needs.

What is kept, per example: its label and the sorted numbers of its words and word pairs
(the order of the sentence is gone). Only numbers that occur in at least `min_examples`
distinct examples are kept (`pruned`): nothing peculiar to a few sentences (a name, a rare
phrase) is stored or learnt. Training and storing both use the pruned examples, so a
retrained router learns from exactly what its predecessor learnt from, plus the new text,
whose features are cut the same way (`pruned_new`). Stored examples are never pruned
again: two sentences that differed only by a dropped feature are one bag now, so counting
distinct bags a second time would drop features that five sentences did share.

The file (`features.npz.xz`): an xz-compressed numpy archive without pickles: `labels`
(the class names), `label` (per example: its index in `labels`), `length` (per example:
its count of features), `vocabulary` (the distinct feature numbers, the most frequent
first) and `index` (every example's features as positions in `vocabulary`, ascending within
the example and stored as the differences from the previous one: small numbers that
compress well).
"""

from __future__ import annotations

import io
import lzma
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from server.routing.features import Features, HashedFeatures

FeatureExample = tuple[str, Features]  # (label, sorted feature numbers)


def featurize(examples: Iterable[tuple[str, str]], features: HashedFeatures
              ) -> list[FeatureExample]:
    """(label, text) examples as (label, feature numbers)."""
    return [(label, features.of(text)) for label, text in examples]


def pruned(examples: Sequence[FeatureExample], min_examples: int) -> list[FeatureExample]:
    """`examples` with only the features found in at least `min_examples` distinct examples
    (repeats of an example count once); an example left without features is dropped."""
    if min_examples <= 1:
        return [(label, bag) for label, bag in examples if bag]
    seen = Counter(number for bag in {bag for _, bag in examples} for number in set(bag))
    kept = ((label, tuple(n for n in bag if seen[n] >= min_examples)) for label, bag in examples)
    return [(label, bag) for label, bag in kept if bag]


def pruned_new(bags: Sequence[Features], stored: Sequence[FeatureExample],
               min_examples: int) -> list[Features]:
    """New sentences' `bags` with only the features found in at least `min_examples` of
    the stored examples (each a sentence: they are pruned already) and the distinct new
    bags together."""
    if min_examples <= 1:
        return list(bags)
    seen = Counter(number for _, bag in stored for number in set(bag))
    seen.update(number for bag in set(bags) for number in set(bag))
    return [tuple(n for n in bag if seen[n] >= min_examples) for bag in bags]


def projected(bag: Features, known: set[int]) -> Features:
    """`bag` without the features outside `known`: a new text as a stored (pruned) example
    of the same text holds it, to find that example."""
    return tuple(number for number in bag if number in known)


def features_to_bytes(examples: Sequence[FeatureExample]) -> bytes:
    """The examples as the artifact's features file (see the module docstring)."""
    labels = sorted({label for label, _ in examples})
    counts = Counter(number for _, bag in examples for number in bag)
    vocabulary = sorted(counts, key=lambda number: (-counts[number], number))
    position = {number: i for i, number in enumerate(vocabulary)}
    rows = [sorted(position[number] for number in bag) for _, bag in examples]
    flat = np.array([p for row in rows for p in row], dtype=np.int64)
    lengths = np.array([len(row) for row in rows], dtype=np.int64)
    steps = np.diff(flat, prepend=0)
    starts = (np.cumsum(lengths) - lengths)[lengths > 0]
    steps[starts] = flat[starts]  # each example starts from 0
    out = io.BytesIO()
    np.savez(out, labels=np.array(labels, dtype=str),
             label=np.array([labels.index(label) for label, _ in examples], dtype=np.uint16),
             length=lengths.astype(np.uint32), vocabulary=np.array(vocabulary, dtype=np.uint32),
             index=steps.astype(np.uint32))
    return lzma.compress(out.getvalue())


def features_from_bytes(data: bytes) -> list[FeatureExample]:
    """The examples of a features file; ValueError for a file that is not one."""
    try:
        with np.load(io.BytesIO(lzma.decompress(data)), allow_pickle=False) as archive:
            labels = [str(label) for label in archive["labels"]]
            label, lengths = archive["label"].astype(np.int64), archive["length"].astype(np.int64)
            vocabulary, steps = archive["vocabulary"], archive["index"].astype(np.int64)
    except (lzma.LZMAError, OSError, KeyError, ValueError) as error:
        raise ValueError(f"not a router features file: {error}") from None
    if len(label) != len(lengths) or int(lengths.sum()) != len(steps) \
            or (len(label) and int(label.max()) >= len(labels)):
        raise ValueError("router features file: its arrays do not fit together")
    totals = np.concatenate([[0], np.cumsum(steps)])
    before = totals[np.cumsum(lengths) - lengths]  # the running total before each example
    positions = totals[1:] - np.repeat(before, lengths)
    if len(positions) and (int(positions.min()) < 0 or int(positions.max()) >= len(vocabulary)):
        raise ValueError("router features file: a feature outside its vocabulary")
    numbers = vocabulary[positions].tolist()
    out: list[FeatureExample] = []
    start = 0
    for index, length in zip(label.tolist(), lengths.tolist(), strict=True):
        out.append((labels[index], tuple(sorted(numbers[start:start + length]))))
        start += length
    return out
