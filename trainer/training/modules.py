"""Train one domain module against a frozen backbone (Pham et al. 2020 curriculum, step 3).

Only the module's tensors receive gradients; the backbone is never modified, so every other
domain's outputs stay bit-identical. Dev quality (BLEU) drives early stopping and the best
parameters are kept.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from server.engine.backbone import Backbone
from server.engine.families import Params, get_family
from server.engine.single import SingleModuleHooks
from server.engine.tokenizer import Tokenizer
from trainer.training.data import EncodedPairs
from trainer.training.evaluate import Scores, evaluate_texts
from trainer.training.loop import (
    Progress,
    ShouldStop,
    Trainable,
    TrainingInterrupted,
    TrainSettings,
)
from trainer.training.run import train

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModuleResult:
    config: dict[str, Any]
    params: Params
    dev: Scores
    progress: Progress


def _trainable(backbone: Backbone, hooks: SingleModuleHooks, params: Params,
               penalty_weight: float) -> Trainable:
    names = sorted(params)

    def set_train(mode: bool) -> None:
        backbone.train(mode)  # the backbone's dropout regularises the module too
        hooks.track_penalty = mode and penalty_weight > 0

    def extra_loss() -> torch.Tensor:
        penalty = hooks.take_penalty()
        return penalty * penalty_weight if penalty is not None else torch.zeros(())

    def load(state: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for name in names:
                params[name].copy_(state[name])

    return Trainable(parameters=[params[n] for n in names],
                     forward=lambda batch: backbone(batch.src, batch.tgt_in, hooks),
                     state_dict=lambda: {n: params[n].detach().clone() for n in names},
                     load_state_dict=load, set_train=set_train,
                     extra_loss=extra_loss if penalty_weight > 0 else None)


def train_module(backbone: Backbone, config: dict[str, Any], data: EncodedPairs,
                 dev_pairs: Sequence[tuple[str, str]], *, source: Tokenizer, target: Tokenizer,
                 settings: TrainSettings, run_dir: Path, penalty_weight: float = 0.0,
                 on_progress: Callable[[Progress], None] | None = None,
                 should_stop: ShouldStop | None = None,
                 initial: Params | None = None) -> ModuleResult:
    """Train a module of `config["family"]`; returns the parameters with the best dev BLEU.
    `initial`: start from these parameters (a refresh fine-tunes the served module)
    instead of the family's initialisation.

    Resumes from `run_dir`'s checkpoint; raises TrainingInterrupted (checkpoint saved)
    when `should_stop` asks for it before the run finishes.
    """
    family = get_family(str(config["family"]))
    config = family.normalise(config)
    backbone.requires_grad_(False)
    generator = torch.Generator().manual_seed(settings.seed)
    start = family.initial(backbone.config, config, generator, weights=backbone.state_dict())
    if initial is not None:
        if set(initial) != set(start):
            raise ValueError(f"initial parameters {sorted(initial)} are not the {config['family']}"
                             f" module's {sorted(start)}")
        start = {k: v.detach().float().clone() for k, v in initial.items()}
    params = {k: v.requires_grad_(True) for k, v in start.items()}
    hooks = SingleModuleHooks(family, params)
    best_path = run_dir / "best.safetensors"
    best: dict[str, Any] = {"scores": None}

    def evaluate() -> float:
        scores, _ = evaluate_texts(backbone, source, target, dev_pairs, hooks=hooks)
        best["last"] = scores
        log.info("dev BLEU %.2f chrF %.2f", scores.bleu, scores.chrf)
        return scores.bleu

    def keep_best(progress: Progress) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        tmp = best_path.with_suffix(".tmp")
        save_file({k: v.detach().contiguous() for k, v in params.items()}, str(tmp))
        tmp.replace(best_path)
        best["scores"] = best["last"]

    trainable = _trainable(backbone, hooks, params, penalty_weight)
    progress = train(trainable, data, settings, run_dir, evaluate=evaluate,
                     on_progress=on_progress, on_best=keep_best, should_stop=should_stop)
    if not progress.finished:
        raise TrainingInterrupted(progress)
    final = load_file(str(best_path)) if best_path.exists() else trainable.state_dict()
    backbone.eval()
    chosen = {k: v.detach() for k, v in final.items()}
    scores = best["scores"]
    if scores is None:  # resumed after the best was chosen: score it again
        scores, _ = evaluate_texts(backbone, source, target, dev_pairs,
                                   hooks=SingleModuleHooks(family, chosen))
    return ModuleResult(config, chosen, scores, progress)
