"""The adapter precision benchmark's weight variants and verdicts (no data, no decoding)."""

from __future__ import annotations

import pytest
import torch

from benchmarks.quality.precision.adapter_precision import (
    TOLERANCE,
    markdown,
    quantize_int8,
    to_bfloat16,
    to_int8,
    verdicts,
)


def test_int8_keeps_each_output_column_within_half_a_step() -> None:
    matrix = torch.randn(2, 16, 8, generator=torch.Generator().manual_seed(0))
    matrix[1, :, 3] *= 100.0  # one loud column must not coarsen the others
    quantized = quantize_int8(matrix)
    step = matrix.abs().amax(dim=-2, keepdim=True) / 127.0
    assert ((quantized - matrix).abs() <= step / 2 + 1e-6).all()
    assert not torch.equal(quantized, matrix)
    assert ((quantized / step).round() - quantized / step).abs().max() < 1e-3  # on the grid


def test_variants_change_what_they_claim() -> None:
    params = {"dec.up_w": torch.randn(2, 4, 8), "dec.up_b": torch.randn(2, 8)}
    int8 = to_int8(params)
    assert torch.equal(int8["dec.up_b"], params["dec.up_b"])  # vectors stay float32
    assert not torch.equal(int8["dec.up_w"], params["dec.up_w"])
    bf16 = to_bfloat16(params)
    assert all(t.dtype == torch.float32 for t in bf16.values())
    assert torch.equal(bf16["dec.up_b"], params["dec.up_b"].to(torch.bfloat16).float())


@pytest.mark.parametrize(("score", "within"), [(20.0, True), (19.95, True), (19.85, False)])
def test_verdict_is_the_worst_domain_against_the_tolerance(score: float, within: bool) -> None:
    bleu = {"float32": {"law": 20.0, "it": 30.0}, "int8": {"law": score, "it": 30.2}}
    verdict = verdicts(bleu)["int8"]
    assert verdict["worst"] == pytest.approx(min(score - 20.0, 0.2))
    assert verdict["within"] is within
    result = {"backbone": "b v1", "families": {"law": "adapter"}, "sentences": 2,
              "decode": "greedy", "bleu": bleu, "verdicts": verdicts(bleu)}
    text = markdown(result, "cmd")
    assert f"within {TOLERANCE} BLEU" in text and ("| yes |" in text) is within
