"""One training loop for backbones and modules: Adam, warm-up, checkpoints, resume.

What is trained is given as a `Trainable`: the parameters to optimise, a loss over a batch,
and a state dict to checkpoint. The backbone recipe trains every backbone parameter; a
module job trains only the module's parameters with the backbone frozen.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from contract.training import TrainingOptions
from trainer.training.data import Batch

log = logging.getLogger(__name__)


def native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX). Elsewhere (an AVX2
    machine, say) autocast emulates bf16: 25x slower than float32 there (41 vs ~1,030 target
    tokens/s training the default backbone on 2 AVX2 cores)."""
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def bf16_autocast(wanted: bool) -> contextlib.AbstractContextManager[Any]:
    """CPU bfloat16 autocast when `wanted` and the CPU has native bf16; float32 otherwise."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=wanted and native_bf16())


DEFAULTS = TrainingOptions()  # one set of knobs and defaults for jobs and recipes


@dataclass(frozen=True)
class TrainSettings:
    """The training loop's settings: a job's `TrainingOptions` (same names, same defaults)
    plus how this run logs, evaluates and checkpoints."""

    lr: float = DEFAULTS.lr
    warmup_steps: int = DEFAULTS.warmup_steps
    max_tokens: int = DEFAULTS.max_tokens  # padded source + target tokens per batch
    max_epochs: int = DEFAULTS.max_epochs
    max_steps: int = DEFAULTS.max_steps
    max_minutes: float = DEFAULTS.max_minutes
    label_smoothing: float = DEFAULTS.label_smoothing
    grad_clip: float = 1.0
    weight_decay: float = DEFAULTS.weight_decay
    seed: int = DEFAULTS.seed
    bf16: bool = True  # CPU autocast where native (bf16_autocast): ~2x faster there
    log_every: int = 50
    eval_every: int = DEFAULTS.eval_every
    checkpoint_every_s: float = 600.0
    # evaluations without improvement before stopping; 0 = never stop early
    patience: int = DEFAULTS.patience
    # corpus temperature sampling (trainer/training/sampling.py); 1 = every pair once per epoch
    temperature: float = 1.0
    # cooldown: from this step the learning rate falls linearly to 0 over cooldown_steps,
    # and training stops there (0 = inverse square-root decay to the end)
    cooldown_from: int = 0
    cooldown_steps: int = 0

    @classmethod
    def from_options(cls, options: TrainingOptions, *, bf16: bool, log_every: int,
                     checkpoint_every_s: float) -> TrainSettings:
        """The loop settings of a training job."""
        return cls(
            lr=options.lr, warmup_steps=options.warmup_steps, max_tokens=options.max_tokens,
            max_epochs=options.max_epochs, max_steps=options.max_steps,
            max_minutes=options.max_minutes, label_smoothing=options.label_smoothing,
            weight_decay=options.weight_decay, seed=options.seed, bf16=bf16,
            log_every=log_every, eval_every=options.eval_every,
            checkpoint_every_s=checkpoint_every_s, patience=options.patience)


@dataclass
class Trainable:
    """What a training run optimises."""

    parameters: list[Tensor]  # leaf tensors that require grad
    forward: Callable[[Batch], Tensor]  # logits [batch, tgt_len, vocab]
    state_dict: Callable[[], dict[str, Tensor]]
    load_state_dict: Callable[[dict[str, Tensor]], None]
    set_train: Callable[[bool], object]  # nn.Module.train fits
    extra_loss: Callable[[], Tensor] | None = None  # regularisers (e.g. adapter output norm)


@dataclass
class Progress:
    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    elapsed_s: float = 0.0
    target_tokens: int = 0
    loss: float = float("nan")
    best_score: float = -math.inf
    evals_without_improvement: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    finished: bool = False
    stop_reason: str = ""


def lr_at(step: int, settings: TrainSettings) -> float:
    """Linear warm-up then inverse square-root decay (Vaswani et al. 2017), then, where a
    cooldown is set, a linear fall to 0: annealing a constant or slowly decaying rate to
    zero at the end recovers most of what a schedule planned for the whole run would give
    (Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed Training
    Durations")."""
    if settings.cooldown_steps > 0 and step > settings.cooldown_from:
        left = 1.0 - (step - settings.cooldown_from) / settings.cooldown_steps
        return _decay(settings.cooldown_from, settings) * max(left, 0.0)
    return _decay(step, settings)


def _decay(step: int, settings: TrainSettings) -> float:
    step = max(step, 1)
    return settings.lr * min(step / settings.warmup_steps,
                             math.sqrt(settings.warmup_steps / step))


def translation_loss(logits: Tensor, batch: Batch, label_smoothing: float) -> Tensor:
    """Mean cross-entropy over the batch's target tokens (its padding ignored)."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                           batch.tgt_out.reshape(-1), ignore_index=batch.pad_id,
                           label_smoothing=label_smoothing)


class Checkpoints:
    """Atomic checkpoint files in a run directory: a reader never sees half a file."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "checkpoint.pt"
        self.progress_path = run_dir / "progress.json"
        run_dir.mkdir(parents=True, exist_ok=True)

    def save(self, payload: dict[str, Any], progress: Progress) -> None:
        tmp = self.path.with_suffix(".pt.tmp")
        torch.save(payload, tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        tmp.replace(self.path)
        self.write_progress(progress)

    def write_progress(self, progress: Progress) -> None:
        tmp = self.progress_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(progress), indent=1))
        tmp.replace(self.progress_path)

    def load(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        # weights_only: a checkpoint holds tensors and plain values only, never objects.
        loaded: dict[str, Any] = torch.load(self.path, weights_only=True)
        return loaded


Evaluate = Callable[[], float]  # higher is better (e.g. -dev loss or dev BLEU)
OnProgress = Callable[[Progress], None]
ShouldStop = Callable[[], bool]  # polled after every step (e.g. SIGTERM received)


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM / SIGINT: a run polling it (`should_stop=event.is_set`)
    checkpoints after its current step and stops; the same command resumes it."""
    stop = threading.Event()

    def on_signal(number: int, _frame: FrameType | None) -> None:
        log.info("%s: stopping after the current step", signal.Signals(number).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop


class TrainingInterrupted(Exception):
    """A run stopped on request before it finished; its checkpoint resumes it exactly."""

    def __init__(self, progress: Progress) -> None:
        super().__init__(f"training interrupted at step {progress.step}")
        self.progress = progress
