"""int8 backbone weights at rest with per-row scales (server/engine/row_int8.py)."""

from __future__ import annotations

import pytest
import torch

from contract.tensors import tensors_from_bytes, tensors_to_bytes
from server.engine.artifacts import (
    backbone_files,
    backbone_parts,
    build_engine,
    module_files,
    module_params,
)
from server.engine.row_int8 import SCALE_SUFFIX, dequantize_rows, quantize_rows
from tests.tiny import random_backbone, spm_bytes, tiny_config


def test_each_weight_is_within_half_a_step_of_its_row() -> None:
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(64, 128, generator=generator) * torch.linspace(0.01, 3, 64)[:, None]
    weight[5] = 0.0  # a zero row keeps a usable scale
    stored = quantize_rows({"w": weight, "b": torch.randn(128), "step": torch.tensor(3)})
    assert stored["w"].dtype == torch.int8 and stored["b"].dtype == torch.float16
    assert stored["step"].dtype == torch.int64
    back = dequantize_rows(stored)
    step = weight.abs().amax(dim=1, keepdim=True) / 127
    # half a step, plus the float16 rounding that comes first (2**-11 relative)
    assert ((back["w"] - weight).abs() <= step / 2 + weight.abs() / 2048 + 1e-6).all()
    assert torch.equal(back["w"][5], torch.zeros(128))
    assert back["b"].dtype == torch.float32 and SCALE_SUFFIX not in "".join(back)


def test_mismatched_scales_are_refused() -> None:
    stored = quantize_rows({"w": torch.randn(64, 128)})
    stored["w" + SCALE_SUFFIX] = torch.ones(3)
    with pytest.raises(ValueError, match="row scales"):
        dequantize_rows(stored)


def test_an_int8_backbone_artifact_is_smaller_and_translates_like_float32() -> None:
    config = tiny_config(d_model=64, d_ff=128)
    model = random_backbone(config, std=0.05)
    tensors = model.state_dict()
    spm = spm_bytes()
    half = backbone_files(config, tensors, source_spm=spm, target_spm=spm, half=True)
    int8 = backbone_files(config, tensors, source_spm=spm, target_spm=spm, int8_rows=True)
    assert len(int8["model.safetensors"]) < 0.75 * len(half["model.safetensors"])
    parts = backbone_parts(int8)
    for name, tensor in tensors.items():
        assert parts.tensors[name].dtype == torch.float32
        assert torch.allclose(parts.tensors[name], tensor.float(), atol=0.02 * float(
            tensor.abs().max()) + 1e-3)
    exact = build_engine(backbone_files(config, tensors, source_spm=spm, target_spm=spm))
    compact = build_engine(int8)
    text = ["the patient takes one tablet a day"]
    assert compact.translate_texts(text) == exact.translate_texts(text)


def test_a_float32_checkpoint_and_its_float16_artifact_quantize_to_the_same_bytes() -> None:
    # so a publish from the training checkpoint finds the compact re-store unchanged
    weight = torch.randn(64, 128, generator=torch.Generator().manual_seed(1))
    from_float32 = tensors_to_bytes(quantize_rows({"w": weight}))
    assert from_float32 == tensors_to_bytes(quantize_rows({"w": weight.half()}))


def test_module_banks_get_a_scale_per_layer_and_output_column() -> None:
    bank = torch.randn(3, 64, 128, generator=torch.Generator().manual_seed(2))
    bank[1, :, 7] = 0.0
    stored = quantize_rows({"up_w": bank, "up_b": torch.randn(3, 2048)}, rank=3)
    assert stored["up_w"].dtype == torch.int8
    assert stored["up_w" + SCALE_SUFFIX].shape == (3, 1, 128)
    assert stored["up_b"].dtype == torch.float16  # [layers, dim] vectors are not matrices
    back = dequantize_rows(stored)["up_w"]
    step = bank.abs().amax(dim=1, keepdim=True) / 127
    assert ((back - bank).abs() <= step / 2 + bank.abs() / 2048 + 1e-6).all()
    assert torch.equal(back[1, :, 7], torch.zeros(64))
    stored["up_w" + SCALE_SUFFIX] = torch.ones(3, 1, 64)  # not one per column of 128
    with pytest.raises(ValueError, match="row scales"):
        dequantize_rows(stored)


def test_float16_and_float32_artifacts_load_as_before() -> None:
    # the files in operators' stores: no scales, read unchanged
    config = tiny_config()
    tensors = random_backbone(config, std=0.05).state_dict()
    spm = spm_bytes()
    for half in (False, True):
        parts = backbone_parts(backbone_files(config, tensors, source_spm=spm,
                                              target_spm=spm, half=half))
        for name, tensor in tensors.items():
            expected = tensor.half().float() if half else tensor.float()
            assert torch.equal(parts.tensors[name], expected)
        params = {"enc.down_w": torch.randn(2, 16, 8), "enc.down_b": torch.randn(2, 8)}
        loaded = module_params(module_files(params, half=half))
        assert all(torch.equal(loaded[k], v.half().float() if half else v)
                   for k, v in params.items())


@pytest.mark.parametrize("rank", [2, 3])
def test_weights_loaded_from_a_compact_file_quantize_to_the_same_bytes(rank: int) -> None:
    # a run restored from the published artifact republishes it unchanged (same version,
    # same fingerprint), as with float16 before
    generator = torch.Generator().manual_seed(3)
    shape = (96, 128) if rank == 2 else (3, 96, 128)
    weight = torch.randn(shape, generator=generator) * torch.rand(shape[:-1] + (1,),
                                                                  generator=generator) * 4
    stored = tensors_to_bytes(quantize_rows({"w": weight, "b": torch.randn(96)}, rank=rank))
    loaded = dequantize_rows(tensors_from_bytes(stored))
    assert tensors_to_bytes(quantize_rows(loaded, rank=rank)) == stored
