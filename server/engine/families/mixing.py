"""Word-level, layer-wise domain mixing (Jiang et al. 2020, "Multi-Domain Neural Machine
Translation with Word-Level Adaptive Layer-wise Domain Mixing"), as one module (family
"mixing") that holds every domain at once.

Every mixed projection (attention q/k/v/o, FFN fc1/fc2; encoder only or encoder+decoder)
holds one weight matrix and bias per domain, `W_d`, `b_d` for d in 1..k, and a domain
proportion layer `R`, `r`. For a token whose input to the projection is `x`:

    p(x)  = (1 - eps) * softmax(R x + r) + eps / k        # [k], smoothed proportions
    out   = sum_d p_d(x) * (W_d x + b_d)                   # = (sum_d p_d W_d) x + sum_d p_d b_d

Mixing the k outputs equals projecting with the proportion-weighted mixture of the
weights (the paper's formulation) and is cheaper: ONE matmul against the stacked
`[k * d_out, d_in]` weights, then a weighted sum over k (`mix`).

Where the proportions are computed: per projection, from that projection's own input
(the stop-gradient copy of it). This keeps `project` a pure function of one site and
follows the paper's per-mapping proportion layers of multi-head attention (the query,
key and value mappings each weigh their domains from their own input); cross-attention
keys/values therefore mix by the *source* token's proportions, and incremental decoding
needs no state across steps. Deviation, documented: the paper mixes the FFN as one block
with one proportion; here fc1 and fc2 are mixed as two projections, each with its own
proportion layer (fc2's reads the FFN's hidden activations). The proportion layers are
layer-wise (every layer has its own), as in the paper.

Stop-gradient: the proportion layers read `x.detach()`, so neither the domain loss nor the
translation loss flows from a proportion back into the hidden states; `R` learns from both.

Smoothing `eps` (default 0.1): the paper smooths the softmax so that proportions are never
over-sharp; every domain keeps at least eps / k of every token (0.014 for k = 7) and so
keeps receiving gradient, while a confident token still puts 1 - eps + eps / k (0.91) on
its domain. It is stored with the weights as the constant tensor `epsilon` (the family is
stateless; `project` sees only a slot's tensors) and is never trained.

A fresh module starts from k copies of the backbone's projections and uniform proportions
(`R` = 0): it reproduces the backbone up to float rounding. This family is trained jointly
over all its domains (trainer/mixing.py), not added one domain at a time.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from contract.backbone import BackboneConfig
from contract.families import MixingSpec
from server.engine.families.base import Family, Params
from server.engine.hooks import Linear, Side

EPSILON = "epsilon"


def site_names(side: Side, projections: list[str]) -> list[str]:
    """The hook site names of one layer of `side` that a module mixes."""
    blocks = ("self_attn", "cross_attn") if side == "decoder" else ("self_attn",)
    names = [f"{block}.{p}" for block in blocks for p in ("q", "k", "v", "o") if p in projections]
    return names + [f"ffn.{p}" for p in ("fc1", "fc2") if p in projections]


def sides_of(config: dict[str, Any]) -> tuple[Side, ...]:
    return ("encoder", "decoder") if config["sides"] == "both" else ("encoder",)


def smoothed_proportions(x: Tensor, weight: Tensor, bias: Tensor, epsilon: Tensor) -> Tensor:
    """x [..., d_in]; weight [k, d_in]; bias [k] -> float32 proportions [..., k] in
    [eps/k, 1 - eps + eps/k], summing to 1. `x` is detached: the stop-gradient."""
    logits = F.linear(x.detach(), weight, bias).float()
    k = logits.shape[-1]
    eps = epsilon.detach().float()  # a constant, never trained
    return (1.0 - eps) * torch.softmax(logits, dim=-1) + eps / k


def mix(x: Tensor, weight: Tensor, bias: Tensor, proportions: Tensor) -> Tensor:
    """x [..., d_in]; weight [k, d_out, d_in]; bias [k, d_out]; proportions [..., k]
    -> [..., d_out].

    Semantics (the reference loop):
        out = sum(proportions[..., d, None] * (x @ weight[d].T + bias[d]) for d in range(k))
    computed as one matmul against the stacked [k * d_out, d_in] weights.
    """
    k, d_out, d_in = weight.shape
    stacked = F.linear(x, weight.reshape(k * d_out, d_in), bias.reshape(k * d_out))
    per_domain = stacked.unflatten(-1, (k, d_out))  # [..., k, d_out]
    return torch.einsum("...k,...ko->...o", proportions.to(per_domain.dtype), per_domain)


class WordMixing(Family, MixingSpec):
    sites = frozenset({"project"})
    bank_slots = 2  # k copies of the backbone's projections: a serving version and its successor
    merge_refusal = ("word-level mixing weighs every token's projections by proportions "
                     "computed from that token's own hidden state; the mixture changes from "
                     "token to token, so no single set of plain weights equals it")

    def shapes(self, backbone: BackboneConfig,
               config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        k = len(config["domains"])
        shapes: dict[str, tuple[int, ...]] = {EPSILON: (1,)}
        for side in sides_of(config):
            layers = backbone.encoder_layers if side == "encoder" else backbone.decoder_layers
            for site in site_names(side, list(config["projections"])):
                d_out, d_in = _dims(backbone, site)
                key = f"{side[:3]}.{site}"
                shapes |= {f"{key}.w": (layers, k, d_out, d_in), f"{key}.b": (layers, k, d_out),
                           f"{key}.r": (layers, k, d_in), f"{key}.rb": (layers, k)}
        return shapes

    def initial(self, backbone: BackboneConfig, config: dict[str, Any],
                generator: torch.Generator, weights: Params | None = None) -> Params:
        if weights is None:
            raise ValueError("a mixing module starts from copies of the backbone's "
                             "projections: pass the backbone's tensors as `weights`")
        k = len(config["domains"])
        params: Params = {EPSILON: torch.tensor([float(config["epsilon"])])}
        for name, shape in self.shapes(backbone, config).items():
            if name == EPSILON:
                continue
            if name.endswith((".r", ".rb")):  # uniform proportions
                params[name] = torch.zeros(shape)
                continue
            prefix, site = name[:3], name[4:].rsplit(".", 1)[0]
            side = "encoder" if prefix == "enc" else "decoder"
            suffix = "weight" if name.endswith(".w") else "bias"
            per_layer = [weights[f"{side}.layers.{i}.{_backbone_name(site)}.{suffix}"]
                         for i in range(shape[0])]
            params[name] = torch.stack(
                [w.detach().float().unsqueeze(0).expand(k, *w.shape) for w in per_layer]).clone()
        return params

    def proportions(self, params: Params, side: Side, index: int, name: str,
                    x: Tensor) -> Tensor | None:
        """The smoothed proportions [..., k] (float32) of site `name` of layer `index`,
        or None where this module does not mix that site."""
        key = f"{side[:3]}.{name}"
        if f"{key}.r" not in params:
            return None
        return smoothed_proportions(x, params[f"{key}.r"][index], params[f"{key}.rb"][index],
                                    params[EPSILON])

    def mix_site(self, params: Params, side: Side, index: int, name: str,
                 x: Tensor) -> tuple[Tensor, Tensor] | None:
        """(output, proportions) of a mixed site; None where the backbone's projection runs."""
        proportions = self.proportions(params, side, index, name, x)
        if proportions is None:
            return None
        key = f"{side[:3]}.{name}"
        return mix(x, params[f"{key}.w"][index], params[f"{key}.b"][index], proportions), \
            proportions

    def project(self, params: Params, side: Side, index: int, name: str, x: Tensor,
                linear: Linear) -> Tensor | None:
        mixed = self.mix_site(params, side, index, name, x)
        return None if mixed is None else mixed[0]

    def trainable(self, name: str) -> bool:
        """Every tensor but the smoothing constant."""
        return name != EPSILON


def _dims(backbone: BackboneConfig, site: str) -> tuple[int, int]:
    """(d_out, d_in) of a projection site."""
    d, ff = backbone.d_model, backbone.d_ff
    return {"ffn.fc1": (ff, d), "ffn.fc2": (d, ff)}.get(site, (d, d))


def _backbone_name(site: str) -> str:
    """Site name -> the backbone's module path: "self_attn.q" -> "self_attn.q_proj"."""
    block, projection = site.split(".")
    return site if block == "ffn" else f"{block}.{projection}_proj"
