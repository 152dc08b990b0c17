"""Linear layers with their weights reordered once for oneDNN (CPU float32 inference).

Why: `F.linear` on CPU goes to MKL's sgemm, which repacks the weight matrix at every call
and, on the AMD EPYC machines this project runs on, also takes a slower code path. At the
shapes of a decoding step (32-128 rows, d=512, FFN 2048, 8k vocabulary) oneDNN with a
weight packed once ran 2-3x faster in `benchmarks/` measurements, with results equal to
`F.linear` within float32 rounding (max difference ~1e-4 on outputs of magnitude ~20).

The `nn.Linear` parameters stay in place (state dicts, exports and weight-copying module
families still read them); the packed copy is an inference-only cache beside them (one
extra copy of the linear weights in memory: `engine.packed=false` trades it back). A
packed layer falls back to `F.linear` whenever the packed kernel does not apply (autograd,
another dtype or device).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

BATCH_HINT = 64  # rows the packed layout is tuned for; any row count works


def packing_available() -> bool:
    """oneDNN is compiled in and exposes the prepacked linear operators."""
    return bool(torch.backends.mkldnn.is_available()
                and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
                and hasattr(torch.ops.mkldnn, "_linear_pointwise"))


class PackedLinear(nn.Linear):
    """An `nn.Linear` (same parameters) whose CPU float32 inference uses a packed weight."""

    packed: Tensor

    @classmethod
    def wrap(cls, linear: nn.Linear) -> PackedLinear:
        packed = cls.__new__(cls)
        nn.Module.__init__(packed)
        packed.in_features, packed.out_features = linear.in_features, linear.out_features
        packed.weight, packed.bias = linear.weight, linear.bias
        packed.training = linear.training
        packed.repack()
        return packed

    def repack(self) -> None:
        """Rebuild the packed copy (after the weight changed)."""
        self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), BATCH_HINT)

    def forward(self, x: Tensor) -> Tensor:
        if (x.dtype != torch.float32 or x.device.type != "cpu" or self.weight.dtype !=
                torch.float32 or (torch.is_grad_enabled() and (x.requires_grad
                                                               or self.weight.requires_grad))):
            return F.linear(x, self.weight, self.bias)
        out: Tensor = torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none",
                                                         [], "")
        return out


def packed_key(name: str, layer: int) -> str:
    """The key of the packed copy of matrix `name[layer]` in a module bank's slot view."""
    return f"{name}#packed{layer}"


def pack_matrix(weight: Tensor) -> Tensor:
    """A packed copy of an `[in, out]` matrix applied as `x @ weight`."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.t().contiguous(), BATCH_HINT)


def packed_linear(x: Tensor, packed: Tensor, bias: Tensor, activation: str = "none") -> Tensor:
    """`activation(x @ weight + bias)` with a `pack_matrix` copy ("none" or "relu")."""
    out: Tensor = torch.ops.mkldnn._linear_pointwise(x, packed, bias, activation, [], "")
    return out


def quantized_key(name: str, layer: int) -> str:
    """The key of the int8 copy of matrix `name[layer]` in a module bank's slot view."""
    return f"{name}#int8_{layer}"


def quantize_matrix(weight: Tensor) -> Tensor:
    """An fbgemm int8 copy of an `[in, out]` matrix applied as `x @ weight`: symmetric,
    one scale per output column (127 levels), prepacked once (CPU only)."""
    matrix = weight.detach().float().cpu().t().contiguous()  # [out, in]
    scales = (matrix.abs().amax(dim=1).clamp_min(1e-12) / 127.0).double()
    quantized = torch.quantize_per_channel(matrix, scales, torch.zeros_like(scales,
                                                                           dtype=torch.long),
                                           0, torch.qint8)
    packed: Tensor = torch.ops.quantized.linear_prepack(quantized, None)
    return packed


def quantized_linear(x: Tensor, packed: Tensor, bias: Tensor) -> Tensor:
    """`x @ weight + bias` with a `quantize_matrix` copy: the rows are quantized to int8
    per call (dynamic quantization, as `EngineOptions.int8` does for the backbone); the
    kernel takes float32 rows, so bfloat16 ones (the CPU bfloat16 path) go through widened."""
    out: Tensor = torch.ops.quantized.linear_dynamic(x.float(), packed, True)
    return (out + bias).to(x.dtype)


def pack_linears(model: nn.Module) -> int:
    """Replace every `nn.Linear` below `model` by a `PackedLinear` (wrap a bare
    `nn.Linear` with `PackedLinear.wrap`); returns how many were packed."""
    count = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                setattr(parent, name, PackedLinear.wrap(child))
                count += 1
    return count
