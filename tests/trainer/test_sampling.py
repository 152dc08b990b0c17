"""Corpus temperature sampling (trainer/training/sampling.py): shares by size ** (1/T), whole
shuffled passes when a small corpus is drawn more often than its size, the same epoch for
the same (seed, epoch), and each corpus's pair count recovered from the corpora."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm

from tests.tiny import ENGLISH, FRENCH, spm_bytes
from trainer.training.data import Corpus, encode_pairs, encoded_corpus_sizes, token_batches
from trainer.training.sampling import CorpusSizes, corpus_shares, draws_per_corpus, sampled_order

SIZES = CorpusSizes(("software", "news", "religion"), (900, 90, 10))


@pytest.mark.parametrize(("temperature", "expected"), [
    (1.0, [0.9, 0.09, 0.01]),
    (2.0, [30 / 42.6491, 9.4868 / 42.6491, 3.1623 / 42.6491]),
    (1e9, [1 / 3, 1 / 3, 1 / 3]),
])
def test_shares_follow_size_to_the_power_one_over_t(temperature: float,
                                                    expected: list[float]) -> None:
    assert corpus_shares(SIZES.pairs, temperature) == pytest.approx(expected, abs=1e-4)


def test_a_temperature_below_one_is_refused_with_the_allowed_range() -> None:
    with pytest.raises(ValueError, match="temperature must be >= 1"):
        corpus_shares(SIZES.pairs, 0.5)


@pytest.mark.parametrize("temperature", [1.0, 2.0, 5.0])
def test_draws_sum_to_the_epoch_size(temperature: float) -> None:
    counts = draws_per_corpus(SIZES.pairs, temperature, SIZES.total)
    assert int(counts.sum()) == SIZES.total
    assert list(counts) == sorted(counts, reverse=True)  # bigger corpus, more draws


def test_an_epoch_draws_small_corpora_in_whole_passes() -> None:
    order = sampled_order(SIZES, temperature=3.0, seed=1, epoch=0)
    assert len(order) == SIZES.total
    expected = draws_per_corpus(SIZES.pairs, 3.0, SIZES.total)
    per_corpus = Counter(int(np.searchsorted(np.cumsum(SIZES.pairs), i, side="right"))
                         for i in order)
    assert [per_corpus[c] for c in range(3)] == list(expected)
    religion = Counter(i for i in order if i >= 990)  # 10 pairs drawn ~ 17 times each
    assert len(religion) == 10
    assert max(religion.values()) - min(religion.values()) <= 1
    assert len(set(order)) < SIZES.total  # software is down-sampled: pairs left out


def test_an_epoch_depends_only_on_seed_and_epoch() -> None:
    first = sampled_order(SIZES, temperature=2.0, seed=1, epoch=3)
    assert sampled_order(SIZES, temperature=2.0, seed=1, epoch=3) == first
    assert sampled_order(SIZES, temperature=2.0, seed=1, epoch=4) != first
    assert sampled_order(SIZES, temperature=2.0, seed=2, epoch=3) != first


def test_temperature_one_keeps_every_pair_once_per_epoch() -> None:
    assert sorted(sampled_order(SIZES, temperature=1.0, seed=0, epoch=0)) == \
        list(range(SIZES.total))


def _tiny_corpora(tmp_path: Path) -> list[Corpus]:
    found = []
    for name, part in (("first", slice(0, 4)), ("second", slice(4, None))):
        source, target = tmp_path / f"{name}.en", tmp_path / f"{name}.fr"
        english, french = ENGLISH[part], FRENCH[part]
        if name == "first":  # one pair over max_len: encoding drops it
            english, french = [*english, "word " * 80], [*french, "mot " * 80]
        source.write_text("\n".join(english) + "\n", encoding="utf-8")
        target.write_text("\n".join(french) + "\n", encoding="utf-8")
        found.append(Corpus(name, source, target))
    return found


def test_corpus_sizes_are_recovered_when_encoding_dropped_pairs(tmp_path: Path) -> None:
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes())
    corpora = _tiny_corpora(tmp_path)
    encoded = encode_pairs([p for c in corpora for p in c.read()], processor, max_len=64)
    sizes = encoded_corpus_sizes(corpora, processor, max_len=64, encoded=encoded)
    assert sizes == CorpusSizes(("first", "second"), (4, len(ENGLISH) - 4))
    assert sizes.total == len(encoded)
    sizes.save(tmp_path / "sizes.json")
    assert CorpusSizes.load(tmp_path / "sizes.json") == sizes


def test_corpus_sizes_refuse_a_set_encoded_from_other_corpora(tmp_path: Path) -> None:
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes())
    corpora = _tiny_corpora(tmp_path)
    other = encode_pairs([p for c in reversed(corpora) for p in c.read()], processor,
                         max_len=64)
    with pytest.raises(ValueError, match="not made from these corpora"):
        encoded_corpus_sizes(corpora, processor, max_len=64, encoded=other)


def test_sampled_batches_need_the_corpus_sizes() -> None:
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes())
    data = encode_pairs(list(zip(ENGLISH, FRENCH, strict=True)), processor, max_len=64)
    with pytest.raises(ValueError, match="needs each corpus's pair count"):
        token_batches(data, max_tokens=400, seed=0, epoch=0, temperature=2.0)
    data.corpora = CorpusSizes(("a", "b"), (2, len(data) - 2))
    batches = token_batches(data, max_tokens=400, seed=0, epoch=0, temperature=2.0)
    drawn = Counter(i for batch in batches for i in batch)
    assert sum(drawn.values()) == len(data)
    assert drawn[0] + drawn[1] > 2  # the small corpus is drawn more than once per pair


def test_corpus_sizes_refuse_non_positive_counts() -> None:
    with pytest.raises(ValueError, match="one positive count per name"):
        CorpusSizes(("a", "b"), (3, 0))
