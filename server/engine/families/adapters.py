"""Residual, highway and gated adapters (Bapna & Firat 2019; Pham et al. 2020).

One adapter per layer and side: `A(h) = up(ReLU(down(LayerNorm(h))))`, `up` zero-initialised
so a fresh module is exactly the backbone.
- residual (family "adapter"): after every layer, `h <- h + A_l(h)`.
- highway: adapters read every layer's output; their sum is added at the top of the stack:
  `top <- top + sum_l A_l(h_l)` (lower layers are shared by all domains).
- gated: like highway, scaled per token by `z(top) = sigmoid(w . top + b)`, the module's
  token-level estimate that the token belongs to its domain.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from contract.backbone import BackboneConfig
from contract.families import AdapterSpec, GatedSpec, HighwaySpec
from server.engine import int8_groups
from server.engine.families.base import Family, Params
from server.engine.hooks import Side
from server.engine.packing import packed_key, packed_linear, quantized_key, quantized_linear

SIDES: tuple[Side, ...] = ("encoder", "decoder")


def adapter(params: Params, side: Side, index: int, hidden: Tensor) -> Tensor:
    """A_l(h) for layer `index` of `side`: hidden [rows, len, d] -> [rows, len, d]."""
    p = side[:3]
    h = F.layer_norm(hidden, hidden.shape[-1:], params[f"{p}.norm_w"][index],
                     params[f"{p}.norm_b"][index])
    quantized = params.get(quantized_key(f"{p}.down_w", index))
    if quantized is not None and not torch.is_grad_enabled():  # an int8 bank slot
        h = torch.relu(quantized_linear(h, quantized, params[f"{p}.down_b"][index]))
        return quantized_linear(h, params[quantized_key(f"{p}.up_w", index)],
                                params[f"{p}.up_b"][index])
    down = params.get(packed_key(f"{p}.down_w", index))
    if down is not None and not torch.is_grad_enabled():  # a CPU float32 bank slot
        h = packed_linear(h, down, params[f"{p}.down_b"][index], "relu")
        return packed_linear(h, params[packed_key(f"{p}.up_w", index)],
                             params[f"{p}.up_b"][index])
    h = torch.relu(h @ params[f"{p}.down_w"][index] + params[f"{p}.down_b"][index])
    return h @ params[f"{p}.up_w"][index] + params[f"{p}.up_b"][index]


def grouped_adapter(stacked: Params, side: Side, index: int, hidden: Tensor) -> Tensor:
    """`adapter` of n modules at once (see `Family.after_layer_grouped`): the layer norm's
    statistics over all rows, then one batched matmul per matrix in the matrices' dtype, or
    one grouped int8 matmul over the bank's int8 weights (`int8_groups`)."""
    p = side[:3]
    h = F.layer_norm(hidden, hidden.shape[-1:])
    h = torch.addcmul(stacked[f"{p}.norm_b"][index], h, stacked[f"{p}.norm_w"][index])
    if int8_groups.SLOTS_KEY in stacked:
        slots = stacked[int8_groups.SLOTS_KEY]
        for matrix, relu in ((f"{p}.down_w", True), (f"{p}.up_w", False)):
            h = int8_groups.matmul(h, stacked[int8_groups.weights_key(matrix)][index],
                                   stacked[int8_groups.scales_key(matrix)][index], slots,
                                   stacked[matrix.replace("_w", "_b")][index], relu=relu)
        return h.to(hidden.dtype)
    down = stacked[f"{p}.down_w"][index]  # [n, d, bottleneck]
    h = torch.baddbmm(stacked[f"{p}.down_b"][index], h.to(down.dtype), down).relu_()
    return torch.baddbmm(stacked[f"{p}.up_b"][index], h,
                         stacked[f"{p}.up_w"][index]).to(hidden.dtype)


class ResidualAdapter(Family, AdapterSpec):
    sites = frozenset({"layer"})
    packed_matrices = ("enc.down_w", "enc.up_w", "dec.down_w", "dec.up_w")
    grouped_sites = frozenset({"layer"})
    grouped_low_precision = (*packed_matrices, "enc.down_b", "enc.up_b", "dec.down_b",
                             "dec.up_b")
    merge_refusal = ("a residual adapter adds a non-linear block after every layer; it cannot "
                     "be folded into the backbone's weights, so CTranslate2 cannot run it")

    def shapes(self, backbone: BackboneConfig,
               config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        d, b = backbone.d_model, int(config["bottleneck"])
        shapes: dict[str, tuple[int, ...]] = {}
        for side, layers in (("enc", backbone.encoder_layers), ("dec", backbone.decoder_layers)):
            shapes |= {f"{side}.norm_w": (layers, d), f"{side}.norm_b": (layers, d),
                       f"{side}.down_w": (layers, d, b), f"{side}.down_b": (layers, b),
                       f"{side}.up_w": (layers, b, d), f"{side}.up_b": (layers, d)}
        return shapes

    def initial(self, backbone: BackboneConfig, config: dict[str, Any],
                generator: torch.Generator, weights: Params | None = None) -> Params:
        params: Params = {}
        for name, shape in self.shapes(backbone, config).items():
            if name.endswith("norm_w"):
                params[name] = torch.ones(shape)
            elif name.endswith("down_w"):
                bound = math.sqrt(6.0 / (shape[1] + shape[2]))  # Xavier uniform
                params[name] = (torch.rand(shape, generator=generator) * 2 - 1) * bound
            else:  # biases, norm offsets and the zero `up`: the module starts as identity
                params[name] = torch.zeros(shape)
        return params

    def after_layer(self, params: Params, side: Side, index: int, hidden: Tensor) -> Tensor:
        return hidden + adapter(params, side, index, hidden)

    def after_layer_grouped(self, stacked: Params, side: Side, index: int,
                            hidden: Tensor) -> Tensor:
        return grouped_adapter(stacked, side, index, hidden)


class HighwayAdapter(ResidualAdapter, HighwaySpec):
    sites = frozenset({"stack"})
    grouped_sites: frozenset[str] = frozenset()
    merge_refusal = ("a highway adapter adds non-linear blocks over every layer's output; it "
                     "cannot be folded into the backbone's weights")

    def after_layer(self, params: Params, side: Side, index: int, hidden: Tensor) -> Tensor:
        return hidden

    def highway_sum(self, params: Params, side: Side, states: list[Tensor]) -> Tensor:
        total = adapter(params, side, 0, states[0])
        for index in range(1, len(states)):
            total = total + adapter(params, side, index, states[index])
        return total

    def after_stack(self, params: Params, side: Side, hidden: Tensor,
                    states: list[Tensor]) -> Tensor:
        return hidden + self.highway_sum(params, side, states)


class GatedAdapter(HighwayAdapter, GatedSpec):
    def shapes(self, backbone: BackboneConfig,
               config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        d = backbone.d_model
        return super().shapes(backbone, config) | {
            "enc.gate_w": (d,), "enc.gate_b": (1,), "dec.gate_w": (d,), "dec.gate_b": (1,)}

    def initial(self, backbone: BackboneConfig, config: dict[str, Any],
                generator: torch.Generator, weights: Params | None = None) -> Params:
        params = super().initial(backbone, config, generator)
        for side in ("enc", "dec"):
            params[f"{side}.gate_w"] = torch.zeros(backbone.d_model)
            params[f"{side}.gate_b"] = torch.zeros(1)
        return params

    def gate(self, params: Params, side: Side, hidden: Tensor) -> Tensor:
        """z(top): [rows, len, 1] in (0, 1)."""
        p = side[:3]
        return torch.sigmoid(hidden @ params[f"{p}.gate_w"][:, None] + params[f"{p}.gate_b"])

    def after_stack(self, params: Params, side: Side, hidden: Tensor,
                    states: list[Tensor]) -> Tensor:
        return hidden + self.gate(params, side, hidden) * self.highway_sum(params, side, states)
