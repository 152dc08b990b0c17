"""Dev-set quality: translate with a backbone (+ optional module) and score with sacrebleu."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sacrebleu
import torch

from server.decoding.search import SearchOptions, search
from server.engine.backbone import Backbone
from server.engine.hooks import ModuleHooks
from server.engine.stepper import FixedStepper
from server.engine.tokenizer import Tokenizer


@dataclass(frozen=True)
class Scores:
    bleu: float
    chrf: float

    def as_dict(self) -> dict[str, float]:
        return {"bleu": round(self.bleu, 2), "chrf": round(self.chrf, 2)}


def score(hypotheses: Sequence[str], references: Sequence[str]) -> Scores:
    bleu = sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score
    chrf = sacrebleu.corpus_chrf(list(hypotheses), [list(references)]).score
    return Scores(float(bleu), float(chrf))


@torch.inference_mode()
def translate_ids(model: Backbone, sources: Sequence[list[int]], *,
                  hooks: ModuleHooks | None = None, beam_size: int = 1,
                  batch_size: int = 64, max_ratio: float = 1.5) -> list[list[int]]:
    """Best hypothesis for every source (ids ending with EOS), in input order."""
    config = model.config
    options = SearchOptions(beam_size=beam_size, start_id=config.decoder_start_id,
                            eos_id=config.eos_id)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    outputs: list[list[int]] = [[] for _ in sources]
    for start in range(0, len(order), batch_size):
        chunk = order[start: start + batch_size]
        width = max(len(sources[i]) for i in chunk)
        src = torch.full((len(chunk), width), config.pad_id, dtype=torch.long)
        for row, index in enumerate(chunk):
            src[row, : len(sources[index])] = torch.tensor(sources[index])
        memory, mask = model.encode(src, hooks)
        stepper = FixedStepper(model, hooks, model.start_state(memory, mask, hooks))
        limits = [min(config.max_positions, int(max_ratio * len(sources[i])) + 10) for i in chunk]
        for index, hypotheses in zip(chunk, search(stepper, limits, options), strict=True):
            outputs[index] = hypotheses[0].tokens
    return outputs


def evaluate_texts(model: Backbone, source: Tokenizer, target: Tokenizer,
                   pairs: Sequence[tuple[str, str]], *, hooks: ModuleHooks | None = None,
                   beam_size: int = 1) -> tuple[Scores, list[str]]:
    ids = source.encode([s for s, _ in pairs])
    hypotheses = [target.decode(t) for t in translate_ids(model, ids, hooks=hooks,
                                                          beam_size=beam_size)]
    return score(hypotheses, [t for _, t in pairs]), hypotheses

