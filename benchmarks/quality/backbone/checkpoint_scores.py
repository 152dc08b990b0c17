"""How good one backbone checkpoint is: teacher-forced loss per set and greedy BLEU on the
first sentences of each set. Shared by the learning curve, checkpoint averaging and the
backbone experiments, so their numbers are comparable.

The sets: every domain's dev split (the domains have dev splits; their test splits stay
for `make eval`) and the test sets of the open genres news, captions and conversation
(the only held-out text they have; nothing is tuned on it here, only measured).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchmarks.quality.data import EvalSet, domain_names, domain_set, genre_names, genre_set
from contract.artifacts import BACKBONE_CONFIG_FILE
from contract.backbone import BackboneConfig
from server.engine.backbone import Backbone
from server.engine.tokenizer import Tokenizer
from trainer.recipes.default_en_fr import MAX_LEN, dev_loss_fn
from trainer.training.data import EncodedPairs, encode_pairs
from trainer.training.evaluate import evaluate_texts

OPEN_GENRES = ("news", "captions", "conversation")


@dataclass(frozen=True)
class ScoreSet:
    """One set: all its pairs for the loss, the first `bleu_sentences` of them for BLEU."""

    eval_set: EvalSet
    bleu_sentences: int

    @property
    def name(self) -> str:
        return self.eval_set.name


def score_sets(data_dir: Path, *, bleu_sentences: int, genre_lines: int,
               genres: Sequence[str] = OPEN_GENRES) -> list[ScoreSet]:
    """Every domain's dev split (BLEU on its first `bleu_sentences`), then the first
    `genre_lines` of each open genre's test set that the data has (BLEU on news only: the
    others' losses say whether a change hurts them, at a fraction of the decoding time)."""
    sets = [ScoreSet(domain_set(data_dir, d, split="dev"), bleu_sentences)
            for d in domain_names(data_dir)]
    sets += [ScoreSet(genre_set(data_dir, g, limit=genre_lines),
                      bleu_sentences if g == "news" else 0)
             for g in genres if g in genre_names(data_dir)]
    return sets


@dataclass(frozen=True)
class RunFiles:
    """A backbone training run's config and vocabulary (what a checkpoint file lacks)."""

    config: BackboneConfig
    tokenizer: Tokenizer

    @classmethod
    def of(cls, run_dir: Path) -> RunFiles:
        config = BackboneConfig.from_dict(
            json.loads((run_dir / BACKBONE_CONFIG_FILE).read_text()))
        tokenizer = Tokenizer((run_dir / "spm.model").read_bytes(), vocab=None,
                              eos_id=config.eos_id, unk_id=config.unk_id, pad_id=config.pad_id)
        return cls(config, tokenizer)

    def model(self, weights: dict[str, torch.Tensor]) -> Backbone:
        model = Backbone(self.config)
        model.load_state_dict(weights)
        model.eval().requires_grad_(False)
        return model


def checkpoint_weights(path: Path) -> dict[str, torch.Tensor]:
    """The model weights of a training checkpoint (trainer/training/run.py's format)."""
    saved: dict[str, Any] = torch.load(path, weights_only=True, map_location="cpu")
    weights: dict[str, torch.Tensor] = saved["model"]
    return weights


def _encoded(eval_set: EvalSet, tokenizer: Tokenizer) -> EncodedPairs:
    pairs = list(zip(eval_set.sources, eval_set.references, strict=True))
    return encode_pairs(pairs, tokenizer.processor, max_len=MAX_LEN)


def score_model(model: Backbone, tokenizer: Tokenizer,
                sets: Sequence[ScoreSet]) -> dict[str, dict[str, float]]:
    """{set: {"loss": nats per target token, "bleu": greedy BLEU (sets with BLEU)}}."""
    scores: dict[str, dict[str, float]] = {}
    for item in sets:
        entry = {"loss": round(dev_loss_fn(model, _encoded(item.eval_set, tokenizer)), 4)}
        if item.bleu_sentences > 0:
            pairs = list(zip(item.eval_set.sources, item.eval_set.references,
                             strict=True))[: item.bleu_sentences]
            bleu, _ = evaluate_texts(model, tokenizer, tokenizer, pairs)
            entry["bleu"] = round(bleu.bleu, 2)
        scores[item.name] = entry
    return scores


def summary(scores: dict[str, dict[str, float]], domains: Sequence[str]) -> dict[str, float]:
    """Averages over the domains (loss, BLEU) and the open genres' mean loss."""
    genres = [name for name in scores if name not in domains]
    out = {"domain_loss": _mean([scores[d]["loss"] for d in domains]),
           "domain_bleu": _mean([scores[d]["bleu"] for d in domains if "bleu" in scores[d]])}
    if genres:
        out["genre_loss"] = _mean([scores[g]["loss"] for g in genres])
    return out


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4) if values else float("nan")
