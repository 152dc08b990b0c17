"""The points where domain modules attach to the backbone.

The backbone calls these at fixed sites; a hooks object is built per batch by the engine
and carries the batch's per-row slot assignment, so module choice is batch data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from torch import Tensor

Side = Literal["encoder", "decoder"]

Linear = Callable[[Tensor], Tensor]
# Projection site of one layer: (name, input, the backbone's own projection) -> output.
# Names: "self_attn.{q,k,v,o}", "cross_attn.{q,k,v,o}", "ffn.fc1", "ffn.fc2".
Project = Callable[[str, Tensor, Linear], Tensor]


class ModuleHooks(Protocol):
    """Sites where module families change the backbone's computation for some rows."""

    @property
    def needs_layer_states(self) -> bool:
        """True when `after_stack` wants every layer's output (highway families)."""
        ...

    def embed(self, side: Side, ids: Tensor, embedded: Tensor) -> Tensor:
        """ids [batch, len]; embedded [batch, len, d_model] (the table rows, before scaling)."""
        ...

    def after_layer(self, side: Side, index: int, hidden: Tensor) -> Tensor:
        """hidden [batch, len, d_model]: the output of layer `index`."""
        ...

    def after_stack(self, side: Side, hidden: Tensor, states: list[Tensor]) -> Tensor:
        """hidden: the top of the stack (before a pre-norm final norm); states: layer outputs."""
        ...

    def projections(self, side: Side, index: int) -> Project | None:
        """Weight-override families (factorized, word-level mixing) replace some of layer
        `index`'s linear projections for their rows; None when no row's module does."""
        ...
