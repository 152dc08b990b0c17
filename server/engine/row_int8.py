"""Weights at rest as int8 with one scale per output channel, dequantized to float32 at
load: half the disk of float16 for the matrices, so the built-in directions keep the
repository small (issues #47, #43). Symmetric quantization: each output channel c is
stored as round(w_c / s_c) in [-127, 127] with s_c = max|w_c| / 127, so each weight is
off by at most s_c / 2. The weights are rounded to float16 first, so a float32 checkpoint,
its float16 artifact and the weights loaded from its int8 artifact all quantize to the
same bytes (a republish from a restored run finds the backbone unchanged).
Vectors (biases, norms), small matrices and integer tensors are not quantized (float16,
integers as they are).

The two layouts quantized (the channel is what the input dimension is reduced over):

- a backbone matrix `[out, in]` (torch's Linear; an embedding `[tokens, dim]`): one
  scale per row, stored as the vector `name::row_scale` of shape `[out]`;
- a module bank `[layers, in, out]` (server/engine/families): one scale per layer and
  output column, stored as `name::row_scale` of shape `[layers, 1, out]`.

In general the scales of the int8 tensor `name` are the float tensor `name::row_scale`,
either of the int8 tensor's rank and broadcasting to it, or (a 2-D matrix) one per row.
Files without such scales are read exactly as before (float16 / float32 tensors).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

SCALE_SUFFIX = "::row_scale"
MIN_ELEMENTS = 4096  # smaller matrices are not worth a scale vector


def quantize_rows(tensors: Mapping[str, Tensor], *, rank: int = 2,
                  min_elements: int = MIN_ELEMENTS) -> dict[str, Tensor]:
    """int8 + float32 scales for the float tensors of `rank` (2: a backbone's matrices,
    per row; 3: a module's banks, per layer and output column), float16 for the other
    float tensors (a module's `[layers, dim]` vectors stay float16), as are matrices of
    fewer than `min_elements` weights. The conversion the built-in publish stage applies
    to every backbone and module it ships."""
    if rank not in (2, 3):
        raise ValueError(f"rank {rank}: 2 (backbone matrices) or 3 (module banks)")
    out: dict[str, Tensor] = {}
    for name, tensor in tensors.items():
        if not tensor.is_floating_point():
            out[name] = tensor
            continue
        matrix = tensor[0] if tensor.dim() == 3 else tensor  # one layer's matrix of a bank
        if tensor.dim() != rank or matrix.numel() < min_elements:
            out[name] = tensor.half()
            continue
        weight = tensor.detach().half().float()
        # dim 1 is the input dimension of both layouts: [out, in] and [layers, in, out]
        scale = weight.abs().amax(dim=1, keepdim=True) / 127.0
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        out[name] = torch.round(weight / scale).clamp(-127, 127).to(torch.int8)
        out[name + SCALE_SUFFIX] = scale.squeeze(1) if tensor.dim() == 2 else scale
    return out


def dequantize_rows(tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """float32 tensors: quantized tensors times their scales, the rest converted."""
    out: dict[str, Tensor] = {}
    for name, tensor in tensors.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        scale = tensors.get(name + SCALE_SUFFIX)
        if scale is not None:
            out[name] = tensor.float() * _broadcast_scale(name, tensor, scale)
        else:
            out[name] = tensor.float()
    return out


def _broadcast_scale(name: str, tensor: Tensor, scale: Tensor) -> Tensor:
    """`scale` shaped to multiply `tensor`, or ValueError when it does not fit."""
    fits = tensor.dtype == torch.int8 and tensor.dim() >= 1
    if fits and scale.dim() == 1 and tensor.dim() == 2 and scale.shape == tensor.shape[:1]:
        return scale.float()[:, None]
    if fits and scale.dim() == tensor.dim():
        try:
            fits = torch.broadcast_shapes(scale.shape, tensor.shape) == tensor.shape
        except RuntimeError:
            fits = False
        if fits:
            return scale.float()
    raise ValueError(f"{name}: row scales {tuple(scale.shape)} do not fit an int8 "
                     f"matrix (got {tensor.dtype} {tuple(tensor.shape)})")
