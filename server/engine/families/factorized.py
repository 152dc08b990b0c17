"""Factorized Transformer families ("Factorized Transformer for Multi-Domain Neural
Machine Translation"): a domain owns copies of some of the backbone's
linear projections, which replace the backbone's for its rows.

- "sf" (shallow factorization): own key/value projections in every attention (encoder
  self-attention, decoder self- and cross-attention), plus a d x d matrix applied to every
  feed-forward output: `ffn(x) = M (W2 h + b2)`.
- "pa" (parallel attention): own query/key/value/output projections in every attention;
  optionally the same feed-forward matrix.

A fresh module copies the backbone's projections (and M = I), so it is exactly the
backbone. Both are mergeable: the copies replace the backbone's weights and M folds into
the second feed-forward layer (`W2' = M W2`, `b2' = M b2`), so a domain exports to
CTranslate2 as a plain Transformer.

Parameter names: `{side}.{layer}.{attn}.{q,k,v,o}.{weight,bias}` (nn.Linear layout,
weight [out, in]) and `{side}.{layer}.ffn.matrix` ([d, d], output = M @ input).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from contract.backbone import BackboneConfig
from contract.families import FactorizedSpec, ParallelAttentionSpec, ShallowFactorizationSpec
from server.engine.families.base import Family, ModuleConfigError, Params
from server.engine.hooks import Linear, Side

SIDES: tuple[Side, ...] = ("encoder", "decoder")
FFN_OUTPUT = "ffn.fc2"  # the projection site whose output the matrix multiplies


def attentions(backbone: BackboneConfig) -> list[tuple[Side, int, str]]:
    """Every attention of the backbone as (side, layer, "self_attn" / "cross_attn")."""
    found: list[tuple[Side, int, str]] = []
    for side in SIDES:
        layers = backbone.encoder_layers if side == "encoder" else backbone.decoder_layers
        kinds = ("self_attn",) if side == "encoder" else ("self_attn", "cross_attn")
        found += [(side, index, kind) for index in range(layers) for kind in kinds]
    return found


def all_layers(backbone: BackboneConfig) -> list[tuple[Side, int]]:
    return [(side, index) for side in SIDES for index in range(
        backbone.encoder_layers if side == "encoder" else backbone.decoder_layers)]


class Factorized(Family, FactorizedSpec):
    """Shared mechanism: the module's tensors named after the projection sites they
    override; a site without a tensor keeps the backbone's projection."""

    sites = frozenset({"project"})
    mergeable = True
    projections: tuple[str, ...] = ()  # which of q/k/v/o the module owns
    def shapes(self, backbone: BackboneConfig,
               config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        d = backbone.d_model
        shapes: dict[str, tuple[int, ...]] = {}
        for side, index, kind in attentions(backbone):
            for p in self.projections:
                shapes[f"{side}.{index}.{kind}.{p}.weight"] = (d, d)
                shapes[f"{side}.{index}.{kind}.{p}.bias"] = (d,)
        if config["ffn_matrix"]:
            shapes |= {f"{side}.{index}.ffn.matrix": (d, d)
                       for side, index in all_layers(backbone)}
        return shapes

    def copied_from(self, backbone: BackboneConfig,
                    config: dict[str, Any]) -> dict[str, str]:
        """Module tensor -> the backbone tensor a fresh module copies."""
        sources: dict[str, str] = {}
        for name in self.shapes(backbone, config):
            side, index, site, rest = name.split(".", 3)
            if site != "ffn":  # "{p}.weight" -> "{p}_proj.weight"
                p, kind = rest.split(".")
                sources[name] = f"{side}.layers.{index}.{site}.{p}_proj.{kind}"
        return sources

    def initial(self, backbone: BackboneConfig, config: dict[str, Any],
                generator: torch.Generator, weights: Params | None = None) -> Params:
        shapes = self.shapes(backbone, config)
        sources = self.copied_from(backbone, config)
        if weights is None:
            raise ModuleConfigError(
                f"a {self.name!r} module starts from copies of the backbone's projections: "
                f"initial() needs the backbone's tensors (weights=backbone.state_dict())")
        problems = [f"missing backbone tensor {source!r}" for source in sources.values()
                    if source not in weights]
        problems += [f"backbone tensor {source!r} has shape {list(weights[source].shape)}, "
                     f"expected {list(shapes[name])}" for name, source in sources.items()
                     if source in weights and tuple(weights[source].shape) != shapes[name]]
        if problems:
            raise ModuleConfigError(f"cannot start a {self.name!r} module from these backbone "
                                    f"weights: " + "; ".join(problems))
        params: Params = {}
        for name, shape in shapes.items():
            if name in sources:  # a copy, never a view: training must not touch the backbone
                params[name] = weights[sources[name]].detach().to(
                    "cpu", torch.float32, copy=True)
            else:  # ffn.matrix: the identity, so the feed-forward output is unchanged
                params[name] = torch.eye(shape[0])
        return params

    def project(self, params: Params, side: Side, index: int, name: str, x: Tensor,
                linear: Linear) -> Tensor | None:
        weight = params.get(f"{side}.{index}.{name}.weight")
        if weight is not None:  # one matmul on the module's own float weights
            bias = params[f"{side}.{index}.{name}.bias"]
            return F.linear(x, weight.to(x.dtype), bias.to(x.dtype))
        if name == FFN_OUTPUT:
            matrix = params.get(f"{side}.{index}.ffn.matrix")
            if matrix is not None:  # M (W2 h + b2): the backbone's fc2 (int8 or not), then M
                out = linear(x)
                return F.linear(out, matrix.to(out.dtype))
        return None

    def merge(self, backbone_tensors: Params, params: Params,
              backbone: BackboneConfig) -> tuple[Params, BackboneConfig]:
        merged = dict(backbone_tensors)
        normalised = {"ffn_matrix": any(name.endswith(".ffn.matrix") for name in params)}
        for name, source in self.copied_from(backbone, normalised).items():
            merged[source] = params[name].detach().to(backbone_tensors[source].dtype, copy=True)
        if normalised["ffn_matrix"]:
            for side, index in all_layers(backbone):
                matrix = params[f"{side}.{index}.ffn.matrix"].double()
                for kind in ("weight", "bias"):
                    target = f"{side}.layers.{index}.ffn.fc2.{kind}"
                    original = backbone_tensors[target]
                    merged[target] = (matrix @ original.double()).to(original.dtype)
        return merged, backbone


class ShallowFactorization(Factorized, ShallowFactorizationSpec):
    projections = ("k", "v")


class ParallelAttention(Factorized, ParallelAttentionSpec):
    projections = ("q", "k", "v", "o")
