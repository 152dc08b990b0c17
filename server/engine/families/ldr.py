"""Lexicalised domain embeddings (Pham et al. 2019, "Generic and Specialized Word
Embeddings"), as a module on any backbone: a low-rank domain term added to the shared
embedding of every token, `E'(w) = E(w) + A[w] @ B` with rank r (the paper gives 8 of 512
dimensions to each domain). `B` starts at zero, so a fresh module is the backbone.

Mergeable: the merged model has its own source and target input embeddings; the output
projection keeps the backbone's matrix.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from contract.backbone import BackboneConfig
from contract.families import LdrSpec
from server.engine.families.base import Family, Params
from server.engine.hooks import Side


class LexicalDomainEmbedding(Family, LdrSpec):
    sites = frozenset({"embed"})
    mergeable = True

    def shapes(self, backbone: BackboneConfig,
               config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        r, d = int(config["rank"]), backbone.d_model
        return {"src.A": (backbone.src_vocab_size, r), "src.B": (r, d),
                "tgt.A": (backbone.tgt_vocab_size, r), "tgt.B": (r, d)}

    def initial(self, backbone: BackboneConfig, config: dict[str, Any],
                generator: torch.Generator, weights: Params | None = None) -> Params:
        params: Params = {}
        for name, shape in self.shapes(backbone, config).items():
            if name.endswith(".A"):
                params[name] = torch.randn(shape, generator=generator) / math.sqrt(shape[1])
            else:
                params[name] = torch.zeros(shape)
        return params

    def embed(self, params: Params, side: Side, ids: Tensor, embedded: Tensor) -> Tensor:
        p = "src" if side == "encoder" else "tgt"
        return embedded + params[f"{p}.A"][ids] @ params[f"{p}.B"]  # [rows, len, d]

    def merge(self, backbone_tensors: Params, params: Params,
              backbone: BackboneConfig) -> tuple[Params, BackboneConfig]:
        merged = dict(backbone_tensors)
        shared = backbone_tensors.get("embed.weight")
        src = shared if shared is not None else backbone_tensors["encoder.embed.weight"]
        tgt = shared if shared is not None else backbone_tensors["decoder.embed.weight"]
        output = backbone_tensors.get("output.weight", tgt)
        merged.pop("embed.weight", None)
        merged["encoder.embed.weight"] = src + params["src.A"] @ params["src.B"]
        merged["decoder.embed.weight"] = tgt + params["tgt.A"] @ params["tgt.B"]
        merged["output.weight"] = output
        return merged, replace(backbone, shared_embeddings="none")
