"""The training run: batches -> loss -> Adam step, with evaluation, early stopping,
periodic checkpoints and exact resume (same batches, same optimiser state)."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from trainer.training.data import Batch, EncodedPairs, iterate_batches, token_batches
from trainer.training.loop import (
    Checkpoints,
    Evaluate,
    OnProgress,
    Progress,
    ShouldStop,
    Trainable,
    TrainSettings,
    bf16_autocast,
    lr_at,
    translation_loss,
)

log = logging.getLogger(__name__)


def _restore(checkpoints: Checkpoints, trainable: Trainable,
             optimizer: torch.optim.Optimizer) -> Progress:
    saved = checkpoints.load()
    if saved is None:
        return Progress()
    trainable.load_state_dict(saved["model"])
    progress = Progress(**saved["progress"])
    if "optimizer" not in saved:  # weights only (e.g. restored from a published artifact)
        log.info("warm start at step %d: weights only, fresh optimizer state", progress.step)
        return progress
    optimizer.load_state_dict(saved["optimizer"])
    torch.set_rng_state(saved["rng"])
    log.info("resumed at step %d (epoch %d, batch %d)", progress.step, progress.epoch,
             progress.batch_in_epoch)
    return progress


def _budget_extended(progress: Progress, settings: TrainSettings) -> bool:
    """A run stopped by its time, step or epoch budget continues when given a larger one."""
    if progress.stop_reason == "max_epochs":
        return progress.epoch < settings.max_epochs
    if progress.stop_reason == "max_minutes":
        return progress.elapsed_s < settings.max_minutes * 60
    if progress.stop_reason == "max_steps":
        return progress.step < settings.max_steps
    return False


def _save(checkpoints: Checkpoints, trainable: Trainable, optimizer: torch.optim.Optimizer,
          progress: Progress) -> None:
    payload: dict[str, Any] = {"model": trainable.state_dict(),
                               "optimizer": optimizer.state_dict(),
                               "rng": torch.get_rng_state(), "progress": asdict(progress)}
    checkpoints.save(payload, progress)


def _evaluate(progress: Progress, evaluate: Evaluate, settings: TrainSettings,
              trainable: Trainable) -> None:
    trainable.set_train(False)
    score = evaluate()
    trainable.set_train(True)
    progress.history.append({"step": progress.step, "score": score, "loss": progress.loss})
    if score > progress.best_score:
        progress.best_score = score
        progress.evals_without_improvement = 0
    else:
        progress.evals_without_improvement += 1
    log.info("step %d: dev score %.4f (best %.4f)", progress.step, score, progress.best_score)


def _step(trainable: Trainable, optimizer: torch.optim.Optimizer, batch: Batch,
          progress: Progress, settings: TrainSettings) -> int:
    """One optimizer step on `batch`; returns its target tokens."""
    for group in optimizer.param_groups:
        group["lr"] = lr_at(progress.step + 1, settings)
    with bf16_autocast(settings.bf16):
        logits = trainable.forward(batch)
        loss = translation_loss(logits, batch, settings.label_smoothing)
        if trainable.extra_loss is not None:
            loss = loss + trainable.extra_loss()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if settings.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(trainable.parameters, settings.grad_clip)
    optimizer.step()
    progress.step += 1
    progress.loss = loss.item()
    tokens = batch.target_tokens
    progress.target_tokens += tokens
    return tokens


@dataclass
class _Window:
    """Throughput between two log lines."""

    tokens: int = 0
    start: float = field(default_factory=time.monotonic)


def _log_step(progress: Progress, settings: TrainSettings, window: _Window,
              on_progress: OnProgress | None) -> None:
    rate = window.tokens / max(time.monotonic() - window.start, 1e-9)
    log.info("step %d epoch %d loss %.4f lr %.2e %.0f tgt tok/s elapsed %.0fs",
             progress.step, progress.epoch, progress.loss, lr_at(progress.step, settings),
             rate, progress.elapsed_s)
    window.tokens, window.start = 0, time.monotonic()
    if on_progress is not None:
        on_progress(progress)


def _check_stop(progress: Progress, settings: TrainSettings, trainable: Trainable, *,
                evaluate: Evaluate | None, on_best: OnProgress | None) -> bool:
    """Evaluate when due; mark the run finished by early stopping or a budget (True)."""
    if evaluate is not None and progress.step % settings.eval_every == 0:
        _evaluate(progress, evaluate, settings, trainable)
        if progress.evals_without_improvement == 0 and on_best is not None:
            on_best(progress)
        if settings.patience and progress.evals_without_improvement >= settings.patience:
            progress.finished, progress.stop_reason = True, "early stopping"
    if progress.step >= settings.max_steps:
        progress.finished, progress.stop_reason = True, "max_steps"
    if progress.elapsed_s >= settings.max_minutes * 60:
        progress.finished, progress.stop_reason = True, "max_minutes"
    return progress.finished


def train(trainable: Trainable, data: EncodedPairs, settings: TrainSettings, run_dir: Path, *,
          evaluate: Evaluate | None = None, on_progress: OnProgress | None = None,
          on_best: OnProgress | None = None, should_stop: ShouldStop | None = None) -> Progress:
    """Train until max_epochs / max_steps / max_minutes / early stopping; resumable.

    `should_stop` is polled after every step: when it says so, the run checkpoints and
    returns unfinished (`stop_reason` "interrupted"); calling `train` again resumes it.
    """
    torch.manual_seed(settings.seed)
    optimizer = torch.optim.Adam(trainable.parameters, lr=settings.lr, betas=(0.9, 0.98),
                                 eps=1e-9, weight_decay=settings.weight_decay)
    checkpoints = Checkpoints(run_dir)
    progress = _restore(checkpoints, trainable, optimizer)
    if _budget_extended(progress, settings):
        progress.finished, progress.stop_reason = False, ""
    if progress.finished:
        return progress
    trainable.set_train(True)
    started, last_save = time.monotonic() - progress.elapsed_s, time.monotonic()
    window = _Window()
    while progress.epoch < settings.max_epochs and not progress.finished:
        batches = token_batches(data, max_tokens=settings.max_tokens, seed=settings.seed,
                                epoch=progress.epoch, temperature=settings.temperature)
        for number, batch in iterate_batches(data, batches, start=progress.batch_in_epoch):
            window.tokens += _step(trainable, optimizer, batch, progress, settings)
            progress.batch_in_epoch = number + 1
            progress.elapsed_s = time.monotonic() - started
            if progress.step % settings.log_every == 0:
                _log_step(progress, settings, window, on_progress)
            done = _check_stop(progress, settings, trainable, evaluate=evaluate, on_best=on_best)
            if done or time.monotonic() - last_save >= settings.checkpoint_every_s:
                _save(checkpoints, trainable, optimizer, progress)
                last_save = time.monotonic()
            if done:
                break
            if should_stop is not None and should_stop():
                return _interrupt(checkpoints, trainable, optimizer, progress)
        else:
            progress.epoch += 1
            progress.batch_in_epoch = 0
    if not progress.finished:
        progress.finished, progress.stop_reason = True, "max_epochs"
    _save(checkpoints, trainable, optimizer, progress)
    trainable.set_train(False)
    log.info("training finished: %s after %d steps", progress.stop_reason, progress.step)
    return progress


def _interrupt(checkpoints: Checkpoints, trainable: Trainable,
               optimizer: torch.optim.Optimizer, progress: Progress) -> Progress:
    _save(checkpoints, trainable, optimizer, progress)
    progress.stop_reason = "interrupted"
    trainable.set_train(False)
    log.info("training interrupted at step %d; checkpoint saved", progress.step)
    return progress
