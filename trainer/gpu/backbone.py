"""The backbone phase of a GPU run: train until a wall-clock deadline with large token
batches, keep snapshots of the last stretch, and average the window of them that scores
best on the dev sets.

The learning rate warms up linearly, then falls linearly with the time spent to a tenth of
its peak at the deadline: a run whose length is a fixed budget spends it all (Li et al.
2020, "Budgeted Training", found linear decay to the budget's end the best of the schedules
they compared). Snapshots are spaced evenly over the last quarter of the time; averaging
(Vaswani et al. 2017, section 6.1) tries the last 1, 2, 4 and 8 and keeps the one with the
lowest dev loss.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from server.engine.backbone import Backbone
from trainer.gpu.batches import Batch, DeviceBatches
from trainer.gpu.steps import Clock, dev_loss, evaluating, optimizer, train_step
from trainer.training.average import average_weights
from trainer.training.sampling import CorpusSizes

log = logging.getLogger("trainer.gpu")


@dataclass(frozen=True)
class BackboneSettings:
    lr: float = 1e-3  # the recipe's peak (pre-norm)
    warmup_steps: int = 400
    max_tokens: int = 65_536  # padded source + target tokens per batch (recipe: 5,000)
    final_lr: float = 0.1  # of the peak, reached at the deadline
    snapshots: int = 8
    snapshot_share: float = 0.25  # of the phase's time, at its end
    curve_points: int = 40  # dev-loss points on the loss curve
    windows: tuple[int, ...] = (1, 2, 4, 8)  # averaging windows tried on dev
    seed: int = 1


@dataclass
class BackboneResult:
    steps: int = 0
    epochs: float = 0.0
    target_tokens: int = 0
    seconds: float = 0.0
    curve: list[dict[str, float]] = field(default_factory=list)
    snapshots: list[dict[str, float]] = field(default_factory=list)
    windows: dict[int, float] = field(default_factory=dict)  # window -> dev loss
    chosen_window: int = 1
    averaged_steps: list[int] = field(default_factory=list)
    dev_loss: float = float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "epochs": round(self.epochs, 3),
                "target_tokens": self.target_tokens, "seconds": round(self.seconds, 1),
                "target_tokens_per_s": round(self.target_tokens / max(self.seconds, 1e-9)),
                "curve": self.curve, "snapshots": self.snapshots,
                "averaging_dev_loss": {str(k): round(v, 4) for k, v in self.windows.items()},
                "chosen_window": self.chosen_window, "averaged_steps": self.averaged_steps,
                "dev_loss": round(self.dev_loss, 4)}


def lr_at(settings: BackboneSettings, step: int, fraction: float) -> float:
    """Warm-up over steps, then linear decay over the phase's `fraction` of time spent."""
    warm = min(1.0, step / settings.warmup_steps)
    return settings.lr * warm * max(settings.final_lr, 1.0 - fraction)


def _snapshot(model: Backbone) -> dict[str, Tensor]:
    return {k: v.detach().float().clone() for k, v in model.state_dict().items()}


def train_backbone(model: Backbone, train: DeviceBatches, dev: DeviceBatches, *,
                   sizes: CorpusSizes, temperature: float, settings: BackboneSettings,
                   clock: Clock, end_s: float) -> BackboneResult:
    """Train `model` in place until `end_s` on `clock`; it ends holding the chosen average."""
    device, pad = train.device, train.specials.pad
    parameters: list[Tensor] = [p for p in model.parameters() if p.requires_grad]
    opt = optimizer(parameters, settings.lr, device)

    def forward(batch: Batch) -> Tensor:
        return model(batch.src, batch.tgt_in)

    start = clock.now()
    duration = max(end_s - start, 1e-3)
    snapshot_start = end_s - duration * settings.snapshot_share
    snapshot_every = duration * settings.snapshot_share / settings.snapshots
    next_snapshot = snapshot_start + snapshot_every
    curve_every = duration / settings.curve_points
    next_point = start + curve_every
    result = BackboneResult()
    states: list[tuple[int, dict[str, Tensor]]] = []
    tokens = torch.zeros((), dtype=torch.long, device=device)
    window_loss = torch.zeros((), device=device)
    window_steps, window_tokens, window_start = 0, 0, start
    model.train()
    epoch, done = 0, False
    while not done:
        batches = train.epoch(max_tokens=settings.max_tokens, seed=settings.seed, epoch=epoch,
                              sizes=sizes, temperature=temperature)
        for number, rows in enumerate(batches):
            now = clock.now()
            # past the budget, stop once the curve has two points (on a starved CPU the
            # first step can outlast the budget; two points show the trend)
            if now >= end_s and len(result.curve) >= 2:
                result.epochs = epoch + number / len(batches)
                done = True
                break
            step = train_step(forward, train.gather(rows), opt, parameters,
                              lr=lr_at(settings, result.steps + 1, (now - start) / duration),
                              pad=pad, device=device)
            result.steps += 1
            tokens += step.tokens
            window_loss += step.loss
            window_steps += 1
            if now >= next_point:
                seen = int(tokens)
                with evaluating(model):
                    point_dev = dev_loss(forward, dev, pad=pad, device=device)
                synced = clock.synced()
                point = {"t": round(synced, 1), "step": result.steps, "epoch": round(
                    epoch + number / len(batches), 3), "target_tokens": seen,
                    "train_loss": round(float(window_loss) / window_steps, 4),
                    "dev_loss": round(point_dev, 4),
                    "lr": lr_at(settings, result.steps, (now - start) / duration),
                    "target_tokens_per_s": round((seen - window_tokens)
                                                 / max(synced - window_start, 1e-9))}
                result.curve.append(point)
                log.info("backbone %s", point)
                window_loss.zero_()
                window_steps, window_tokens, window_start = 0, seen, clock.synced()
                next_point += curve_every
            if now >= next_snapshot:
                states.append((result.steps, _snapshot(model)))
                next_snapshot += snapshot_every
        else:
            epoch += 1
    result.seconds = clock.synced() - start
    result.target_tokens = int(tokens)
    if not states or states[-1][0] != result.steps:
        states.append((result.steps, _snapshot(model)))
    states = states[-max(settings.windows):]
    _choose_average(model, states, dev, result, settings)
    return result


def _choose_average(model: Backbone, states: list[tuple[int, dict[str, Tensor]]],
                    dev: DeviceBatches, result: BackboneResult,
                    settings: BackboneSettings) -> None:
    """Score every averaging window on dev; leave the model holding the best one."""
    pad, device = dev.specials.pad, dev.device

    def forward(batch: Batch) -> Tensor:
        return model(batch.src, batch.tgt_in)

    for step, state in states:
        model.load_state_dict(state)
        with evaluating(model):
            result.snapshots.append({"step": step, "dev_loss": round(dev_loss(
                forward, dev, pad=pad, device=device), 4)})
    best: tuple[float, int] | None = None
    for window in sorted({min(w, len(states)) for w in settings.windows}):
        model.load_state_dict(average_weights([s for _, s in states[-window:]]))
        with evaluating(model):
            loss = dev_loss(forward, dev, pad=pad, device=device)
        result.windows[window] = loss
        if best is None or loss < best[0]:
            best = (loss, window)
    assert best is not None
    result.dev_loss, result.chosen_window = best
    chosen = states[-result.chosen_window:]
    result.averaged_steps = [step for step, _ in chosen]
    model.load_state_dict(average_weights([s for _, s in chosen]))
    log.info("backbone: dev loss by averaging window %s; chosen %d (steps %s)",
             {k: round(v, 4) for k, v in result.windows.items()}, result.chosen_window,
             result.averaged_steps)
