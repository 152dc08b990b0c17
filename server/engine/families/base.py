"""What a module family is (its config and capabilities: contract.families), plus parameter
shapes, identity initialisation, and what it does at
the backbone's hook sites for the rows of one slot."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch
from torch import Tensor

from contract.backbone import BackboneConfig
from contract.families import FamilySpec, ModuleConfigError
from server.engine.hooks import Linear, Side

Params = dict[str, Tensor]  # one module's tensors (or one slot's views into a bank)


__all__ = ["Family", "ModuleConfigError", "Params"]


class Family(FamilySpec, ABC):
    """A kind of domain module. Subclasses are stateless: all state is in `Params`; each
    also derives from its `FamilySpec` (name, options, capabilities)."""

    sites: frozenset[str] = frozenset()  # of "embed", "layer", "stack", "project"
    mergeable: bool = False  # can be folded into plain backbone weights (CTranslate2 export)
    merge_refusal: str = ""  # why not, when not mergeable
    bank_slots: int | None = None  # cap on a bank's slots (large modules); None: the engine's
    # `[layers, in, out]` matrices applied as `x @ W[layer]`: a CPU float32 bank keeps a
    # packed copy of each (see server/engine/packing.py) under `packed_key(name, layer)`.
    packed_matrices: tuple[str, ...] = ()
    # Sites with a grouped form (`after_layer_grouped`): a bank holding bfloat16 copies runs
    # the rows of all its modules in a batch through one batched matmul per matrix.
    grouped_sites: frozenset[str] = frozenset()
    grouped_low_precision: tuple[str, ...] = ()  # tensors the grouped form holds in bf16

    @abstractmethod
    def shapes(self, backbone: BackboneConfig,
               config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        """Every parameter's shape."""

    @abstractmethod
    def initial(self, backbone: BackboneConfig, config: dict[str, Any],
                generator: torch.Generator, weights: Params | None = None) -> Params:
        """Fresh parameters that leave the backbone's outputs exactly unchanged. `weights`
        (the backbone's tensors by name) is needed by families that start from copies of
        the backbone's projections."""

    def embed(self, params: Params, side: Side, ids: Tensor, embedded: Tensor) -> Tensor:
        return embedded

    def after_layer(self, params: Params, side: Side, index: int, hidden: Tensor) -> Tensor:
        return hidden

    def after_stack(self, params: Params, side: Side, hidden: Tensor,
                    states: list[Tensor]) -> Tensor:
        return hidden

    def after_layer_grouped(self, stacked: Params, side: Side, index: int,
                            hidden: Tensor) -> Tensor:
        """What `after_layer` adds, for n modules at once: hidden [n, tokens, d] holds the
        tokens of module i in row i; `stacked` has every tensor as [layers, n, ...] (see
        `ModuleBank.stacked`). Only for families with "layer" in `grouped_sites`."""
        raise NotImplementedError(f"family {self.name!r} has no grouped form")

    def project(self, params: Params, side: Side, index: int, name: str, x: Tensor,
                linear: Linear) -> Tensor | None:
        """This module's output at projection site `name` of layer `index` (see
        `server.engine.hooks.Project`), or None where it keeps the backbone's `linear`."""
        return None

    def merge(self, backbone_tensors: Params, params: Params,
              backbone: BackboneConfig) -> tuple[Params, BackboneConfig]:
        """Plain backbone weights (and config) equivalent to backbone + this module."""
        raise NotImplementedError(self.merge_refusal)

    def parameter_count(self, backbone: BackboneConfig, config: dict[str, Any]) -> int:
        total = 0
        for shape in self.shapes(backbone, config).values():
            count = 1
            for size in shape:
                count *= size
            total += count
        return total
