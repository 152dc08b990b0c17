"""Paired bootstrap intervals of BLEU differences: the statistics reproduce sacrebleu's
corpus BLEU, and the intervals behave as intervals should."""

from __future__ import annotations

import random

import numpy as np
import pytest
import sacrebleu

from benchmarks.quality.evaluation.significance import (
    corpus_bleu,
    paired_interval,
    sentence_statistics,
    significance,
)

WORDS = "le la un une chat chien maison table rouge bleu grand petit voit mange est a".split()


def sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(3, 12))) for _ in range(count)]


def noisy(references: list[str], keep: float, seed: int) -> list[str]:
    """Each word of each reference kept with probability `keep`, else replaced."""
    rng = random.Random(seed)
    return [" ".join(w if rng.random() < keep else rng.choice(WORDS) for w in r.split())
            for r in references]


REFERENCES = sentences(200, seed=1)


def test_summed_statistics_give_sacrebleus_corpus_bleu() -> None:
    hypotheses = noisy(REFERENCES, 0.7, seed=2)
    statistics = sentence_statistics(hypotheses, REFERENCES)
    assert statistics.shape == (200, 10)
    expected = sacrebleu.corpus_bleu(hypotheses, [REFERENCES]).score
    assert corpus_bleu(statistics.sum(0)) == pytest.approx(expected, abs=1e-9)


def test_a_clearly_better_system_has_an_interval_above_zero() -> None:
    better = sentence_statistics(noisy(REFERENCES, 0.9, seed=3), REFERENCES)
    worse = sentence_statistics(noisy(REFERENCES, 0.5, seed=4), REFERENCES)
    found = paired_interval([(better, worse)])
    assert found.low <= found.difference <= found.high
    assert found.low > 0
    reverse = paired_interval([(worse, better)])
    assert reverse.high < 0
    assert reverse.difference == pytest.approx(-found.difference)


def test_equal_systems_straddle_zero_and_identical_ones_collapse() -> None:
    one = sentence_statistics(noisy(REFERENCES, 0.7, seed=5), REFERENCES)
    other = sentence_statistics(noisy(REFERENCES, 0.7, seed=6), REFERENCES)
    found = paired_interval([(one, other)])
    assert found.low < 0 < found.high
    same = paired_interval([(one, one)])
    assert (same.low, same.difference, same.high) == (0.0, 0.0, 0.0)


def test_the_average_over_sets_is_the_mean_of_set_differences() -> None:
    second_refs = sentences(50, seed=7)
    pairs = [(sentence_statistics(noisy(REFERENCES, 0.9, seed=8), REFERENCES),
              sentence_statistics(noisy(REFERENCES, 0.6, seed=9), REFERENCES)),
             (sentence_statistics(noisy(second_refs, 0.6, seed=10), second_refs),
              sentence_statistics(noisy(second_refs, 0.8, seed=11), second_refs))]
    each = [paired_interval([pair]).difference for pair in pairs]
    assert paired_interval(pairs).difference == pytest.approx(np.mean(each))


def test_systems_on_different_sentences_are_refused() -> None:
    one = sentence_statistics(REFERENCES, REFERENCES)
    with pytest.raises(ValueError, match="different sentences"):
        paired_interval([(one, one[:10])])


def test_significance_rows_cover_only_comparisons_with_both_systems() -> None:
    stats = sentence_statistics(noisy(REFERENCES, 0.8, seed=12), REFERENCES)
    low = sentence_statistics(noisy(REFERENCES, 0.6, seed=13), REFERENCES)
    statistics = {("adapter-true", "law"): stats, ("generic", "law"): low,
                  ("adapter-true", "it"): stats, ("generic", "it"): low,
                  ("ensemble-soft", "news"): low, ("generic", "news"): stats}
    rows = significance(statistics, domains=["law", "it"], genres=["news", "captions"])
    assert [(r["comparison"], r["sets"]) for r in rows] == [
        ("adapters (true label) - generic", "2-set average"),
        ("adapters (true label) - generic", "law"),
        ("adapters (true label) - generic", "it"),
        ("soft ensemble - generic", "news")]
    assert rows[0]["low"] > 0 and rows[-1]["high"] < 0
