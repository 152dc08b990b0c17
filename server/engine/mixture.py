"""Recording a word-level mixture's proportions during a forward pass.

The family's `project` stays pure and the batched serving path (`BatchHooks`) never
records. `MixtureHooks` (one mixing module for every row) keeps each mixed site's
proportions when `recording` is on: the training loss and the debug output read them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from server.engine.families import Params
from server.engine.families.mixing import WordMixing
from server.engine.hooks import Linear, Project, Side
from server.engine.single import SingleModuleHooks


@dataclass(frozen=True)
class SiteProportions:
    """The proportions of one mixed site: [rows, len, k] float32, for the site's input
    positions (source positions for encoder sites and cross-attention keys/values, target
    positions otherwise)."""

    side: Side
    index: int
    name: str
    proportions: Tensor

    @property
    def on_source(self) -> bool:
        return self.side == "encoder" or self.name in ("cross_attn.k", "cross_attn.v")


class MixtureHooks(SingleModuleHooks):
    """`ModuleHooks` of one mixing module for every row, recording proportions."""

    def __init__(self, family: WordMixing, params: Params, *, recording: bool = True) -> None:
        super().__init__(family, params)
        self.mixing = family
        self.recording = recording
        self.recorded: list[SiteProportions] = []

    def projections(self, side: Side, index: int) -> Project | None:
        def project(name: str, x: Tensor, linear: Linear) -> Tensor:
            mixed = self.mixing.mix_site(self.params, side, index, name, x, linear)
            if mixed is None:
                return linear(x)
            out, proportions = mixed
            if self.recording:
                self.recorded.append(SiteProportions(side, index, name, proportions))
            return out

        return project

    def take(self) -> list[SiteProportions]:
        """What was recorded since the last call (and forget it)."""
        recorded, self.recorded = self.recorded, []
        return recorded


def encoder_layer_means(recorded: list[SiteProportions], layers: int) -> Tensor:
    """[layers, rows, src_len, k]: per encoder layer, the mean proportions of its mixed
    sites (a mean of distributions is a distribution)."""
    per_layer: list[list[Tensor]] = [[] for _ in range(layers)]
    for site in recorded:
        if site.side == "encoder":
            per_layer[site.index].append(site.proportions)
    if any(not found for found in per_layer):
        raise ValueError("every encoder layer of a mixing module mixes at least one site")
    return torch.stack([torch.stack(found).mean(0) for found in per_layer])


@dataclass(frozen=True)
class SourceProportions:
    """A mixing module's proportions over some source sentences (the debug output)."""

    domains: list[str]  # proportion index -> domain name
    sentences: list[Tensor]  # per sentence: [encoder layers, tokens, k]
