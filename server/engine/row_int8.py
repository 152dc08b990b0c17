"""Backbone weights at rest as int8 with one float32 scale per row, dequantized to float32
at load: half the disk of float16 for the matrices, so a larger built-in backbone keeps the
repository small (issue #47). Symmetric per-row quantization: row r is stored as
round(w_r / s_r) in [-127, 127] with s_r = max|w_r| / 127, so each weight is off by at
most s_r / 2. Vectors (biases, norms) and small matrices stay float16.

In a safetensors file a quantized matrix `name` is the int8 tensor `name` plus its scales
`name::row_scale`; files without such scales are read exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

SCALE_SUFFIX = "::row_scale"
MIN_ELEMENTS = 4096  # smaller matrices are not worth a scale vector


def quantize_rows(tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """int8 rows + float32 scales for the float matrices, float16 for other float tensors."""
    out: dict[str, Tensor] = {}
    for name, tensor in tensors.items():
        if not tensor.is_floating_point():
            out[name] = tensor
            continue
        if tensor.dim() != 2 or tensor.numel() < MIN_ELEMENTS:
            out[name] = tensor.half()
            continue
        weight = tensor.detach().float()
        scale = weight.abs().amax(dim=1) / 127.0
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        out[name] = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8)
        out[name + SCALE_SUFFIX] = scale
    return out


def dequantize_rows(tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """float32 tensors: quantized matrices times their row scales, the rest converted."""
    out: dict[str, Tensor] = {}
    for name, tensor in tensors.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        scale = tensors.get(name + SCALE_SUFFIX)
        if scale is not None:
            if tensor.dtype != torch.int8 or scale.shape != tensor.shape[:1]:
                raise ValueError(f"{name}: row scales {tuple(scale.shape)} do not fit an int8 "
                                 f"matrix (got {tensor.dtype} {tuple(tensor.shape)})")
            out[name] = tensor.float() * scale.float()[:, None]
        else:
            out[name] = tensor.float()
    return out
