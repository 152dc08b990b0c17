"""The fast batched search against the slow reference decoder."""

from __future__ import annotations

import pytest
import torch

from contract.backbone import BackboneConfig
from server.decoding.search import SearchOptions, search
from server.engine.stepper import FixedStepper
from tests.decoding.reference import reference_greedy, reference_search
from tests.tiny import random_backbone, tiny_config

SOURCES = [[5, 6, 7, 8, 3], [9, 10, 3], [11, 12, 13, 14, 15, 16, 3], [20, 3], [30, 31, 32, 3]]


def fast(config: BackboneConfig, options: SearchOptions, max_length: int, seed: int = 0,
         std: float = 0.3) -> list[list]:
    model = random_backbone(config, seed, std)
    width = max(len(s) for s in SOURCES)
    src = torch.full((len(SOURCES), width), config.pad_id)
    for row, ids in enumerate(SOURCES):
        src[row, : len(ids)] = torch.tensor(ids)
    with torch.inference_mode():
        memory, mask = model.encode(src)
        stepper = FixedStepper(model, None, model.start_state(memory, mask))
        return search(stepper, [max_length] * len(SOURCES), options)


CASES = [  # (config overrides, beam, n_best, length penalty, min length, max length, std)
    ({}, 4, 2, 1.0, 0, 12, 0.3),
    ({}, 3, 3, 0.0, 0, 10, 0.3),
    ({"normalize_before": True, "activation": "gelu"}, 4, 1, 0.6, 2, 9, 0.3),
    ({"positions": "learned", "shared_embeddings": "none", "output_bias": True}, 2, 2, 1.0, 0,
     8, 0.3),
    ({}, 5, 2, 1.0, 0, 15, 0.05),  # flat distributions: EOS competes often
]


@pytest.mark.parametrize(("overrides", "beam", "n_best", "penalty", "min_len", "max_len", "std"),
                         CASES)
def test_beam_search_matches_reference(overrides: dict[str, object], beam: int, n_best: int,
                                       penalty: float, min_len: int, max_len: int,
                                       std: float) -> None:
    config = tiny_config(**overrides)
    options = SearchOptions(beam_size=beam, n_best=n_best, length_penalty=penalty,
                            min_length=min_len, start_id=config.decoder_start_id,
                            eos_id=config.eos_id)
    results = fast(config, options, max_len, std=std)
    model = random_backbone(config, 0, std)
    with torch.inference_mode():
        for source, got in zip(SOURCES, results, strict=True):
            want = reference_search(model, source, [(None, 1.0)], beam=beam, max_length=max_len,
                                    n_best=n_best, length_penalty=penalty, min_length=min_len)
            assert [h.tokens for h in got] == [h.tokens for h in want]
            assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-4)


@pytest.mark.parametrize("std", [0.3, 0.05])
@pytest.mark.parametrize("min_len", [0, 3])
def test_greedy_matches_reference(std: float, min_len: int) -> None:
    config = tiny_config()
    options = SearchOptions(beam_size=1, min_length=min_len, start_id=config.decoder_start_id,
                            eos_id=config.eos_id)
    results = fast(config, options, 11, std=std)
    model = random_backbone(config, 0, std)
    with torch.inference_mode():
        for source, got in zip(SOURCES, results, strict=True):
            want = reference_greedy(model, source, [(None, 1.0)], max_length=11,
                                    min_length=min_len)
            assert got[0].tokens == want.tokens
            assert got[0].score == pytest.approx(want.score, abs=1e-4)


def test_min_equals_max_length_gives_exact_length() -> None:
    config = tiny_config()
    options = SearchOptions(beam_size=1, min_length=7, start_id=config.decoder_start_id,
                            eos_id=config.eos_id)
    assert [len(r[0].tokens) for r in fast(config, options, 7)] == [7] * len(SOURCES)


def test_n_best_larger_than_beam_is_refused() -> None:
    with pytest.raises(ValueError, match="n_best"):
        search(None, [5], SearchOptions(beam_size=2, n_best=3))  # type: ignore[arg-type]
