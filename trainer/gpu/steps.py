"""What the GPU run's backbone and adapter phases share: the loss, an optimizer step under
bfloat16 autocast, the dev loss, and a wall-clock clock with deadlines.

The run imports nothing that needs the server's web stack (pydantic, fastapi): the device
machine's image has torch, numpy, safetensors and sentencepiece, not the project's pins.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from trainer.gpu.batches import Batch, DeviceBatches

# The recipe's values (contract/training.py TrainingOptions, trainer/training/run.py): label
# smoothing 0.1, Adam (0.9, 0.98), eps 1e-9, gradient norm clipped at 1.
LABEL_SMOOTHING = 0.1
BETAS = (0.9, 0.98)
EPS = 1e-9
GRAD_CLIP = 1.0

Forward = Callable[[Batch], Tensor]  # logits [rows, tgt_len, vocab]


def autocast(device: torch.device) -> contextlib.AbstractContextManager[object]:
    """bfloat16 autocast on CUDA; float32 on the CPU (the tiny test run)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def loss_sum(logits: Tensor, batch: Batch, pad: int, smoothing: float) -> Tensor:
    """Summed cross-entropy over the batch's target tokens (padding ignored)."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                           batch.tgt_out.reshape(-1), ignore_index=pad,
                           label_smoothing=smoothing, reduction="sum")


def optimizer(parameters: list[Tensor], lr: float, device: torch.device) -> torch.optim.Adam:
    return torch.optim.Adam(parameters, lr=lr, betas=BETAS, eps=EPS,
                            fused=device.type == "cuda")


@dataclass
class StepResult:
    loss: Tensor  # mean loss per target token (on the device: read it only when logging)
    tokens: Tensor  # target tokens of the batch (on the device)


def train_step(forward: Forward, batch: Batch, opt: torch.optim.Optimizer,
               parameters: list[Tensor], *, lr: float, pad: int,
               device: torch.device) -> StepResult:
    for group in opt.param_groups:
        group["lr"] = lr
    tokens = (batch.tgt_out != pad).sum()
    with autocast(device):
        logits = forward(batch)
    loss = loss_sum(logits, batch, pad, LABEL_SMOOTHING) / tokens.clamp(min=1)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(parameters, GRAD_CLIP)
    opt.step()
    return StepResult(loss.detach(), tokens)


@torch.no_grad()
def dev_loss(forward: Forward, data: DeviceBatches, *, pad: int, device: torch.device,
             max_tokens: int = 16_000) -> float:
    """Mean cross-entropy (no smoothing) per target token of `data`, in nats."""
    total = torch.zeros((), device=device)
    tokens = torch.zeros((), device=device, dtype=torch.long)
    for batch in data.iterate(data.epoch(max_tokens=max_tokens, seed=0, epoch=0)):
        with autocast(device):
            logits = forward(batch)
        total += loss_sum(logits, batch, pad, 0.0)
        tokens += (batch.tgt_out != pad).sum()
    return float(total / tokens.clamp(min=1))


class Clock:
    """Seconds since the run started, and whether a deadline has passed."""

    def __init__(self, device: torch.device) -> None:
        self.started = time.monotonic()
        self.device = device

    def now(self) -> float:
        return time.monotonic() - self.started

    def synced(self) -> float:
        """`now` after the device's queued work has run (for rates and phase times)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return self.now()


@contextlib.contextmanager
def evaluating(*modules: torch.nn.Module) -> Iterator[None]:
    """Modules in eval mode (no dropout) for the block, back in training mode after."""
    for module in modules:
        module.eval()
    try:
        yield
    finally:
        for module in modules:
            module.train()
