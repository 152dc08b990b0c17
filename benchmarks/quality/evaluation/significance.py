"""How much of a BLEU gap could be test-set noise: paired bootstrap resampling (Koehn 2004,
"Statistical Significance Tests for Machine Translation Evaluation").

Each system's per-sentence BLEU statistics (sacrebleu's hypothesis/reference lengths and
n-gram matches/totals) are kept; a resample draws the same sentences, with replacement,
for both systems, recomputes corpus BLEU on every set and takes the difference of the
means over sets (the quantity the targets compare). The interval is the central 95 % of
1,000 such differences. With 200 test sentences per domain and BLEU near 2, an interval
that straddles a target's threshold means the test set cannot tell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sacrebleu.metrics.bleu import BLEU

# sacrebleu's defaults, as trainer.training.evaluate.score computes corpus BLEU.
_BLEU = BLEU()
RESAMPLES = 1000
LEVEL = 0.95

Statistics = Mapping[tuple[str, str], np.ndarray]  # (system, set) -> [sentences, 10]


def sentence_statistics(hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """[sentences, 2 + 2 * 4]: lengths, then n-gram matches and totals for n = 1..4."""
    found = _BLEU._extract_corpus_statistics(list(hypotheses), [list(references)])
    return np.asarray(found, dtype=np.float64).reshape(len(hypotheses), -1)


def corpus_bleu(summed: np.ndarray) -> float:
    """Corpus BLEU from summed sentence statistics (== sacrebleu.corpus_bleu)."""
    return float(_BLEU._compute_score_from_stats([int(v) for v in summed]).score)


@dataclass(frozen=True)
class Interval:
    difference: float  # better - worse, mean over the sets
    low: float
    high: float

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 2) for k, v in asdict(self).items()}


def paired_interval(pairs: Sequence[tuple[np.ndarray, np.ndarray]], *,
                    resamples: int = RESAMPLES, level: float = LEVEL,
                    seed: int = 0) -> Interval:
    """`pairs`: per set, the two systems' statistics over the same sentences."""
    if not pairs:
        raise ValueError("no set to compare")
    rng = np.random.default_rng(seed)
    differences = np.zeros(resamples)
    observed = 0.0
    for better, worse in pairs:
        if better.shape != worse.shape:
            raise ValueError(f"systems scored on different sentences: {better.shape} vs "
                             f"{worse.shape}")
        sentences = better.shape[0]
        # How often each sentence is drawn in each resample: [resamples, sentences].
        counts = rng.multinomial(sentences, np.full(sentences, 1.0 / sentences),
                                 size=resamples).astype(np.float64)
        for row, (high, low) in enumerate(zip(counts @ better, counts @ worse, strict=True)):
            differences[row] += corpus_bleu(high) - corpus_bleu(low)
        observed += corpus_bleu(better.sum(0)) - corpus_bleu(worse.sum(0))
    differences /= len(pairs)
    tail = (1.0 - level) / 2
    low, high = np.quantile(differences, [tail, 1.0 - tail])
    return Interval(observed / len(pairs), float(low), float(high))


# (comparison, better system, worse system, which sets, per set or averaged)
COMPARISONS = (
    ("adapters (true label) - generic", "adapter-true", "generic", "known", "average"),
    ("adapters (true label) - generic", "adapter-true", "generic", "known", "each"),
    ("automatic routing - adapters (true label)", "auto", "adapter-true", "known", "average"),
    ("soft ensemble - adapters (true label)", "ensemble-soft", "adapter-true", "known",
     "average"),
    ("soft ensemble - generic", "ensemble-soft", "generic", "open", "each"),
)


def significance(statistics: Statistics, *, domains: Sequence[str],
                 genres: Sequence[str]) -> list[dict[str, Any]]:
    """Intervals of the differences the targets are about, where both systems ran."""
    rows: list[dict[str, Any]] = []
    for label, better, worse, section, mode in COMPARISONS:
        names = domains if section == "known" else genres
        present = [n for n in names if (better, n) in statistics and (worse, n) in statistics]
        if not present or (mode == "average" and len(present) < len(names)):
            continue
        groups = [present] if mode == "average" else [[n] for n in present]
        for sets in groups:
            found = paired_interval([(statistics[(better, n)], statistics[(worse, n)])
                                     for n in sets])
            where = f"{len(sets)}-set average" if mode == "average" else sets[0]
            rows.append({"comparison": label, "sets": where, **found.as_dict()})
    return rows
