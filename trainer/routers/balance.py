"""A new (or refreshed) domain's fair share of the router's training examples.

fastText's supervised loss has no class weights; a class weighs what its share of the
examples weighs. The shipped router's domain classes hold ~5,000-12,000 lines each, so a
domain added from 3,000 lines was a small class: the biomedical domain of issue #49 was
chosen for 30% of its own unseen lines. Two steps (benchmarks/results/
router_new_domain.md, `python -m benchmarks.quality.router.router_new_domain`):

- stored examples of other classes that look like the new domain's text move to it
  (trainer/routers/overlap.py): most of the lost lines went to medical, which had learned
  from biomedical abstracts. Alone: 58.2% chosen;
- the new class's lines are repeated until it is as large as the median other domain
  class (`balance`), which weighs it like them without inventing text. Alone it moved
  little (33.0%: the neighbour's examples, not the class's size, took the lines); with
  the first step 61.8%, every shipped domain's text at 74.5% top-1 (74.3% retrained
  without either step, 75.0% the shipped router).

A domain of package descriptions (software prose, the it class's neighbour) went from
77.6% to 86.4% of its lines, all shipped domains 75.1%, but the it domain's own text
from 96.6% to 90.6%: the claim also takes it-class lines that read like package
descriptions.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from server.routing.features import Features
from server.routing.policy import GENERIC
from trainer.routers.classifier import ClassifierSettings
from trainer.routers.features import FeatureExample
from trainer.routers.overlap import claimed

Balance = Literal["none", "median", "largest"]


def reference_size(examples: Sequence[FeatureExample], balance: Balance) -> int:
    """How many examples the new class should hold: the median or the largest size of the
    other domain classes ("generic", the open-genre class, is no domain and not counted);
    0 for "none" or when there is no other domain class."""
    counts = Counter(label for label, _ in examples if label != GENERIC)
    if balance == "none" or not counts:
        return 0
    sizes = list(counts.values())
    return int(statistics.median(sizes)) if balance == "median" else max(sizes)


def updated_examples(stored: Sequence[FeatureExample], domain: str,
                     sources: Sequence[Features], *, max_lines: int, balance: Balance,
                     claim: ClassifierSettings | None = None) -> list[FeatureExample]:
    """The stored examples without `domain`'s old ones, plus up to `max_lines` distinct
    `sources` (source sentences as features) of `domain`; with `claim`, the other
    examples that look like them move to `domain` too (trainer/routers/overlap.py, trained
    with these settings). The class's lines are then repeated in order (whole passes, then
    a partial one) until it reaches the reference size of the others. The repeats are kept
    in the features file the classifier carries, so a later retraining (another domain
    added) weighs the class the same again."""
    old = [(label, bag) for label, bag in stored if label != domain]
    lines = list(dict.fromkeys(bag for bag in sources if bag))[:max_lines]
    if not lines:
        return old
    if claim is not None:
        taken = claimed(old, lines, settings=claim)
        lines = list(dict.fromkeys(lines + [old[i][1] for i in sorted(taken)]))
        old = [example for i, example in enumerate(old) if i not in taken]
    size = max(len(lines), reference_size(old, balance))
    new = [(domain, lines[i % len(lines)]) for i in range(size)]
    return old + new
