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
over all its domains (trainer/training/mixing.py), not added one domain at a time.

Low-rank differences (option `rank` = r; default None = the full copies above): domain
d's projection is the backbone's plus a rank-r difference, `W_d = W + U_d V_d`,
`b_d = b + c_d`. Because the proportions sum to 1, the mixture then needs the backbone's
projection once and the k differences at rank r (`mix_low_rank`):

    out = sum_d p_d ((W + U_d V_d) x + b + c_d) = (W x + b) + sum_d p_d (U_d (V_d x) + c_d)

k * r * (d_in + d_out) multiply-adds per token on top of the backbone's d_in * d_out,
instead of k * d_in * d_out. Stored stacked (`{site}.dv` [layers, k*r, d_in]: rows
d*r..(d+1)*r are V_d; `{site}.du` [layers, d_out, k*r]: the matching columns are U_d;
`{site}.db` [layers, k, d_out] the c_d), so both products are one matmul each. A fresh
module has U = 0 and c = 0 (V random): it is exactly the backbone.
"""

from __future__ import annotations

import math
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


def mix_low_rank(x: Tensor, linear: Linear, down: Tensor, up: Tensor, bias: Tensor,
                 proportions: Tensor) -> Tensor:
    """x [..., d_in]; linear: the backbone's projection; down [k*r, d_in]; up [d_out, k*r];
    bias [k, d_out]; proportions [..., k] -> [..., d_out].

    Semantics (the reference loop, with V_d = down[d*r:(d+1)*r], U_d = up[:, d*r:(d+1)*r]):
        out = sum(proportions[..., d, None] * (linear(x) + x @ (U_d @ V_d).T + bias[d])
                  for d in range(k))
    computed as linear(x) once (the proportions sum to 1) plus two matmuls over all domains.
    """
    k = proportions.shape[-1]
    p = proportions.to(x.dtype)
    hidden = F.linear(x, down)  # [..., k*r]
    hidden = (hidden.unflatten(-1, (k, -1)) * p[..., None]).flatten(-2)
    return linear(x) + F.linear(hidden, up) + p @ bias


class WordMixing(Family, MixingSpec):
    sites = frozenset({"project"})
    bank_slots = 2  # k copies of the backbone's projections: a serving version and its successor
    merge_refusal = ("word-level mixing weighs every token's projections by proportions "
                     "computed from that token's own hidden state; the mixture changes from "
                     "token to token, so no single set of plain weights equals it")

    def shapes(self, backbone: BackboneConfig,
               config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        k, rank = len(config["domains"]), config.get("rank")
        shapes: dict[str, tuple[int, ...]] = {EPSILON: (1,)}
        for side in sides_of(config):
            layers = backbone.encoder_layers if side == "encoder" else backbone.decoder_layers
            for site in site_names(side, list(config["projections"])):
                d_out, d_in = _dims(backbone, site)
                key = f"{side[:3]}.{site}"
                if rank is None:
                    shapes |= {f"{key}.w": (layers, k, d_out, d_in),
                               f"{key}.b": (layers, k, d_out)}
                else:
                    shapes |= {f"{key}.dv": (layers, k * int(rank), d_in),
                               f"{key}.du": (layers, d_out, k * int(rank)),
                               f"{key}.db": (layers, k, d_out)}
                shapes |= {f"{key}.r": (layers, k, d_in), f"{key}.rb": (layers, k)}
        return shapes

    def initial(self, backbone: BackboneConfig, config: dict[str, Any],
                generator: torch.Generator, weights: Params | None = None) -> Params:
        if config.get("rank") is not None:
            return self._initial_low_rank(backbone, config, generator)
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

    def _initial_low_rank(self, backbone: BackboneConfig, config: dict[str, Any],
                          generator: torch.Generator) -> Params:
        """U = 0 and c = 0 (exactly the backbone), V random (Hu et al. 2021's LoRA init:
        the differences start at zero but receive gradient), uniform proportions."""
        params: Params = {EPSILON: torch.tensor([float(config["epsilon"])])}
        for name, shape in self.shapes(backbone, config).items():
            if name.endswith(".dv"):
                params[name] = torch.randn(shape, generator=generator) / math.sqrt(shape[-1])
            elif name != EPSILON:
                params[name] = torch.zeros(shape)
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

    def mix_site(self, params: Params, side: Side, index: int, name: str, x: Tensor,
                 linear: Linear) -> tuple[Tensor, Tensor] | None:
        """(output, proportions) of a mixed site; None where the backbone's projection runs.
        `linear` is the backbone's projection (the low-rank form adds to it)."""
        proportions = self.proportions(params, side, index, name, x)
        if proportions is None:
            return None
        key = f"{side[:3]}.{name}"
        if f"{key}.w" in params:
            out = mix(x, params[f"{key}.w"][index], params[f"{key}.b"][index], proportions)
        else:
            out = mix_low_rank(x, linear, params[f"{key}.dv"][index],
                               params[f"{key}.du"][index], params[f"{key}.db"][index],
                               proportions)
        return out, proportions

    def project(self, params: Params, side: Side, index: int, name: str, x: Tensor,
                linear: Linear) -> Tensor | None:
        mixed = self.mix_site(params, side, index, name, x, linear)
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
