"""Adapters run from int8 copies of their matrices (`EngineOptions.module_int8`): the slot
holds the copies, an adapter's output stays within int8 rounding of float32, a hot swap
requantizes, and a batch mixing adapters gives each row the tokens it gets alone."""

from __future__ import annotations

import pytest
import torch

from server.decoding.search import SearchOptions
from server.engine.engine import EngineOptions, Member, SentenceJob
from server.engine.families.adapters import adapter
from server.engine.packing import packed_key, quantize_matrix, quantized_key, quantized_linear
from server.engine.slots import build_bank
from tests.tiny import adapter_engine, random_module, tiny_config

CPU = torch.device("cpu")


def test_quantized_linear_is_close_to_float32() -> None:
    generator = torch.Generator().manual_seed(0)
    weight, bias = torch.randn(48, 24, generator=generator), torch.randn(24)
    x = torch.randn(7, 48, generator=generator)
    want = x @ weight + bias
    got = quantized_linear(x, quantize_matrix(weight), bias)
    assert got.shape == want.shape
    error = (got - want).abs().max() / want.abs().max()
    assert 0 < error < 0.03  # int8 rounding: close, not equal


@pytest.mark.parametrize("family", ["adapter", "highway", "gated"])
def test_an_int8_adapter_slot_is_close_to_its_parameters(family: str) -> None:
    config = tiny_config()
    module_config, params = random_module(config, family, seed=3, bottleneck=6)
    bank = build_bank(module_config, config, n_slots=2, device=CPU, dtype=torch.float32,
                      pack=True, int8=True)
    bank.write(1, params)
    view = bank.view(1)
    assert quantized_key("dec.down_w", 0) in view and packed_key("dec.down_w", 0) not in view
    hidden = torch.randn(5, 3, config.d_model)
    with torch.inference_mode():
        for side in ("encoder", "decoder"):
            want = adapter(params, side, 0, hidden)
            torch.testing.assert_close(adapter(view, side, 0, hidden), want,
                                       atol=0.03 * float(want.abs().max()), rtol=0.0)
        _, other = random_module(config, family, seed=4, bottleneck=6)
        bank.write(1, other)  # the hot swap requantizes
        want = adapter(other, "decoder", 1, hidden)
        torch.testing.assert_close(adapter(bank.view(1), "decoder", 1, hidden), want,
                                   atol=0.03 * float(want.abs().max()), rtol=0.0)


@pytest.mark.parametrize("beam", [1, 2])
def test_an_int8_batch_mixing_adapters_equals_rows_alone(beam: int) -> None:
    """One row per module and sources of one length: each module's call sees the same rows
    in the batch as alone (dynamic quantization scales a call's rows together, so with
    neighbours of its own module a row's score moves within int8 rounding)."""
    engine = adapter_engine(EngineOptions(module_int8=True))
    jobs = [SentenceJob([5 + i, 6, 7, 8, 3], (Member(f"m{1 + i}"),), 12) for i in range(3)]
    options = SearchOptions(beam_size=beam, n_best=1)
    mixed = engine.translate(jobs, options)
    ref = engine.modules.activate("m1")
    assert quantized_key("enc.up_w", 0) in ref.bank.view(ref.slot)
    for job, got in zip(jobs, mixed, strict=True):
        alone = engine.translate([job], options)[0]
        assert got[0].tokens == alone[0].tokens
        assert got[0].score == pytest.approx(alone[0].score, abs=1e-4)
    plain = engine.translate([SentenceJob(jobs[0].source_ids, (Member(None),), 12)], options)
    assert plain[0][0].score != pytest.approx(mixed[0][0].score, abs=1e-4)
