"""How much the backbone's predictions depend on the source sentence: a diagnostic that
explains low BLEU.

For every evaluation set, the teacher-forced negative log-likelihood of each reference
token (nats, no label smoothing) given its own source, and given another sentence's source
of the same set (the sources rotated by one). A model that translates scores its
references far better with their own sources; one that writes fluent target-language
text whatever its input (hallucination: Lee et al. 2018; Müller et al. 2020) shows a small
gap. The gap is a lower bound on the information the model takes from the source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from benchmarks.quality.data import EvalSet
from server.engine.artifacts import backbone_parts
from server.engine.backbone import Backbone
from server.engine.engine import load_backbone
from trainer.training.data import Specials, collate, encode_for_backbone
from trainer.training.loop import translation_loss

BATCH_SIZE = 32


def reference_nll(model: Backbone, sources: Sequence[np.ndarray], targets: Sequence[np.ndarray],
                  specials: Specials, *, batch_size: int = BATCH_SIZE) -> float:
    """Mean NLL per reference token (EOS included) of `targets` given `sources`."""
    total, tokens = 0.0, 0
    for start in range(0, len(sources), batch_size):
        batch = collate(sources[start: start + batch_size], targets[start: start + batch_size],
                        specials=specials)
        with torch.inference_mode():
            loss = translation_loss(model(batch.src, batch.tgt_in), batch, 0.0)
        total += float(loss) * batch.target_tokens
        tokens += batch.target_tokens
    return total / max(tokens, 1)


def source_reliance(backbone_files: Mapping[str, bytes],
                    sets: Sequence[EvalSet]) -> dict[str, dict[str, Any]]:
    """Per set: sentences scored, NLL with the own / another source, and their gap."""
    parts = backbone_parts(backbone_files)
    model = load_backbone(parts.config, parts.tensors)  # plain float32, no packing
    out: dict[str, dict[str, Any]] = {}
    for eval_set in sets:
        data = encode_for_backbone(list(zip(eval_set.sources, eval_set.references, strict=True)),
                                   parts.source_tokenizer, parts.target_tokenizer, parts.config,
                                   max_len=parts.config.max_positions - 1)
        if len(data) < 2:
            continue
        rotated = data.source[1:] + data.source[:1]
        own = reference_nll(model, data.source, data.target, data.specials)
        other = reference_nll(model, rotated, data.target, data.specials)
        out[eval_set.name] = {"kind": eval_set.kind, "sentences": len(data),
                              "nll_own_source": round(own, 4),
                              "nll_other_source": round(other, 4),
                              "gap": round(other - own, 4)}
    return out
