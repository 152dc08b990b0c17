"""Hooks that apply one module to every row: module training and evaluation."""

from __future__ import annotations

from torch import Tensor

from server.engine.families import Family, Params
from server.engine.hooks import Linear, Project, Side


class SingleModuleHooks:
    """`ModuleHooks` for a batch in which every row uses `params` of `family`.

    With `penalty_weight` > 0 it accumulates the squared norm of what the module adds
    (the layer regularisation of Pham et al. 2020) in `penalty` for the training loss.
    """

    def __init__(self, family: Family, params: Params) -> None:
        self.family, self.params = family, params
        self.needs_layer_states = "stack" in family.sites
        self.track_penalty = False
        self.penalty: Tensor | None = None

    def _track(self, before: Tensor, after: Tensor) -> Tensor:
        if self.track_penalty:
            term = (after - before).pow(2).sum(-1).mean()
            self.penalty = term if self.penalty is None else self.penalty + term
        return after

    def embed(self, side: Side, ids: Tensor, embedded: Tensor) -> Tensor:
        return self._track(embedded, self.family.embed(self.params, side, ids, embedded))

    def after_layer(self, side: Side, index: int, hidden: Tensor) -> Tensor:
        return self._track(hidden, self.family.after_layer(self.params, side, index, hidden))

    def after_stack(self, side: Side, hidden: Tensor, states: list[Tensor]) -> Tensor:
        return self._track(hidden, self.family.after_stack(self.params, side, hidden, states))

    def projections(self, side: Side, index: int) -> Project | None:
        if "project" not in self.family.sites:
            return None

        def project(name: str, x: Tensor, linear: Linear) -> Tensor:
            out = self.family.project(self.params, side, index, name, x, linear)
            return linear(x) if out is None else out

        return project

    def take_penalty(self) -> Tensor | None:
        penalty, self.penalty = self.penalty, None
        return penalty
