"""The gate of a refresh: the refreshed module against the module it refreshes (not the
plain backbone), on the domain's dev set AND on the held-back corrections.

Published only when the dev BLEU is not lower by more than `gate_margin_bleu` (a
correction set that teaches the module something false, e.g. one drug name for another,
costs it dev BLEU wherever the dev set says otherwise) and the held-back corrections'
BLEU rose by more than `min_held_out_gain_bleu` (the corrections taught it something);
short corrections (UI strings, a term) often share no 4-gram with any output, and their
BLEU stays 0: then a BLEU that did not fall and a chrF that rose count as a gain.
Both modules are scored with the weights that are (or would be) served.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contract.tsv import Pair
from server.engine.families import Params, get_family
from server.engine.single import SingleModuleHooks
from trainer.domain_job import JobBackbone
from trainer.evaluate import Scores, evaluate_texts


@dataclass(frozen=True)
class RefreshGate:
    dev_before: Scores
    dev_after: Scores
    held_before: Scores
    held_after: Scores
    margin_bleu: float
    min_gain_bleu: float

    @property
    def dev_delta(self) -> float:
        return self.dev_after.bleu - self.dev_before.bleu

    @property
    def held_delta(self) -> float:
        return self.held_after.bleu - self.held_before.bleu

    @property
    def dev_ok(self) -> bool:
        return self.dev_delta >= -self.margin_bleu

    @property
    def held_ok(self) -> bool:
        chrf_gain = self.held_after.chrf - self.held_before.chrf
        return self.held_delta > self.min_gain_bleu or (
            self.held_delta >= 0 and self.min_gain_bleu <= 0 and chrf_gain > 0)

    @property
    def passed(self) -> bool:
        return self.dev_ok and self.held_ok

    def as_scores(self) -> dict[str, Any]:
        return {"dev": {"served": self.dev_before.as_dict(), "refreshed": self.dev_after.as_dict(),
                        "delta_bleu": round(self.dev_delta, 2)},
                "held_out_corrections": {
                    "served": self.held_before.as_dict(), "refreshed": self.held_after.as_dict(),
                    "delta_bleu": round(self.held_delta, 2),
                    "delta_chrf": round(self.held_after.chrf - self.held_before.chrf, 2)},
                "margin_bleu": self.margin_bleu, "min_gain_bleu": self.min_gain_bleu,
                "gate": "passed" if self.passed else "refused"}

    def refusal(self) -> str:
        reasons = []
        if not self.dev_ok:
            reasons.append(f"dev BLEU {self.dev_after.bleu:.2f} against the served module's "
                           f"{self.dev_before.bleu:.2f} (it may lose at most "
                           f"{self.margin_bleu:g})")
        if not self.held_ok:
            reasons.append(f"on the held-back corrections BLEU went from "
                           f"{self.held_before.bleu:.2f} to {self.held_after.bleu:.2f} and chrF "
                           f"from {self.held_before.chrf:.2f} to {self.held_after.chrf:.2f} "
                           f"(BLEU must rise by more than {self.min_gain_bleu:g}, or stay "
                           "while chrF rises)")
        return "refresh gate: " + "; ".join(reasons)


def refresh_gate(backbone: JobBackbone, family: str, served: Params, refreshed: Params, *,
                 dev: Sequence[Pair], held_out: Sequence[Pair], margin_bleu: float,
                 min_gain_bleu: float) -> RefreshGate:
    spec = get_family(family)

    def scored(params: Params, pairs: Sequence[Pair]) -> Scores:
        hooks = SingleModuleHooks(spec, params)
        return evaluate_texts(backbone.model, backbone.source, backbone.target, pairs,
                              hooks=hooks)[0]

    return RefreshGate(scored(served, dev), scored(refreshed, dev), scored(served, held_out),
                       scored(refreshed, held_out), margin_bleu, min_gain_bleu)
