"""The quality gate: a new module must not be worse than the plain backbone on the
domain's dev set by more than a margin of BLEU (sacrebleu BLEU and chrF, greedy decoding,
as `trainer.training.evaluate` scores every module).

The module is scored with exactly the weights that will be stored (float16-rounded when
modules are stored in half precision), so the gate judges what will be served.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contract.tsv import Pair
from server.engine.families import Params, get_family
from server.engine.single import SingleModuleHooks
from trainer.jobs.domain_job import JobBackbone
from trainer.training.evaluate import Scores, evaluate_texts


@dataclass(frozen=True)
class GateResult:
    backbone: Scores
    module: Scores
    margin_bleu: float

    @property
    def delta_bleu(self) -> float:
        return self.module.bleu - self.backbone.bleu

    @property
    def passed(self) -> bool:
        return self.delta_bleu >= -self.margin_bleu

    def as_scores(self) -> dict[str, Any]:
        return {"backbone": self.backbone.as_dict(), "module": self.module.as_dict(),
                "delta_bleu": round(self.delta_bleu, 2), "margin_bleu": self.margin_bleu,
                "gate": "passed" if self.passed else "refused"}

    def refusal(self) -> str:
        return (f"quality gate: dev BLEU {self.module.bleu:.2f} (chrF {self.module.chrf:.2f}) "
                f"is {-self.delta_bleu:.2f} below the backbone's {self.backbone.bleu:.2f} "
                f"(chrF {self.backbone.chrf:.2f}); at most {self.margin_bleu:g} is allowed")


def quality_gate(backbone: JobBackbone, module_config: dict[str, Any], params: Params, *,
                 dev_pairs: Sequence[Pair], margin_bleu: float) -> GateResult:
    """Score the plain backbone and backbone + module on the same dev pairs."""
    plain, _ = evaluate_texts(backbone.model, backbone.source, backbone.target, dev_pairs)
    hooks = SingleModuleHooks(get_family(str(module_config["family"])), params)
    with_module, _ = evaluate_texts(backbone.model, backbone.source, backbone.target,
                                    dev_pairs, hooks=hooks)
    return GateResult(plain, with_module, margin_bleu)
