"""The adapter phase of a GPU run: one residual adapter per domain against the frozen,
averaged backbone, each within its share of the time left, keeping the epoch with the
lowest dev loss on its domain.

The settings are the recipe's (trainer/recipes/default_en_fr.py ADAPTER and
ADAPTER_SETTINGS: bottleneck 128, lr 1e-3 with 100 warm-up steps and inverse square-root
decay, 5,000-token batches, at most 20 epochs); the recipe's module is not imported here
because it needs the server's web stack, which the device machine lacks (a test keeps the
two equal). Dev loss rather than dev BLEU chooses the epoch: no decoding on the device.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from server.engine.backbone import Backbone
from server.engine.families import Params, get_family
from server.engine.single import SingleModuleHooks
from trainer.gpu.batches import Batch, DeviceBatches, Specials, select
from trainer.gpu.packed import Pack
from trainer.gpu.steps import Clock, dev_loss, evaluating, optimizer, train_step

log = logging.getLogger("trainer.gpu")

ADAPTER = {"family": "adapter", "bottleneck": 128}


@dataclass(frozen=True)
class AdapterSettings:
    lr: float = 1e-3
    warmup_steps: int = 100
    max_tokens: int = 5000
    max_epochs: int = 20
    patience: int = 4  # epochs without a better dev loss
    seed: int = 1


def lr_at(settings: AdapterSettings, step: int) -> float:
    """The recipe's schedule (trainer/training/loop.py lr_at): warm-up, inverse square root."""
    step = max(step, 1)
    return settings.lr * min(step / settings.warmup_steps,
                             math.sqrt(settings.warmup_steps / step))


def train_adapter(model: Backbone, train: DeviceBatches, dev: DeviceBatches, *,
                  settings: AdapterSettings, clock: Clock,
                  end_s: float) -> tuple[Params, dict[str, Any]]:
    """The adapter's best parameters (on the CPU, float32) and a summary."""
    device, pad = train.device, train.specials.pad
    family = get_family(str(ADAPTER["family"]))
    config = family.normalise(dict(ADAPTER))
    generator = torch.Generator().manual_seed(settings.seed)
    params = {k: v.to(device).requires_grad_(True)
              for k, v in family.initial(model.config, config, generator).items()}
    hooks = SingleModuleHooks(family, params)
    names = sorted(params)
    parameters = [params[n] for n in names]
    opt = optimizer(parameters, settings.lr, device)

    def forward(batch: Batch) -> Tensor:
        return model(batch.src, batch.tgt_in, hooks)

    def plain(batch: Batch) -> Tensor:
        return model(batch.src, batch.tgt_in)

    start = clock.now()
    with evaluating(model):
        backbone_dev = dev_loss(plain, dev, pad=pad, device=device)
    best = (backbone_dev, -1, {n: params[n].detach().clone() for n in names})
    steps, epoch, stale, stop_reason = 0, 0, 0, "max_epochs"
    tokens = torch.zeros((), dtype=torch.long, device=device)
    model.train()  # the backbone's dropout regularises the adapter, as in the recipe
    while epoch < settings.max_epochs and stop_reason == "max_epochs":
        for rows in train.epoch(max_tokens=settings.max_tokens, seed=settings.seed,
                                epoch=epoch):
            if clock.now() >= end_s and steps > 0:  # one step at least: the path runs
                stop_reason = "time budget"
                break
            steps += 1
            tokens += train_step(forward, train.gather(rows), opt, parameters,
                                 lr=lr_at(settings, steps), pad=pad, device=device).tokens
        else:
            with evaluating(model):
                loss = dev_loss(forward, dev, pad=pad, device=device)
            if loss < best[0]:
                best, stale = (loss, epoch, {n: params[n].detach().clone() for n in names}), 0
            else:
                stale += 1
            epoch += 1
            if stale >= settings.patience:
                stop_reason = "early stopping"
    model.eval()
    summary = {"config": config, "pairs": len(train), "steps": steps, "epochs": epoch,
               "best_epoch": best[1] + 1, "target_tokens": int(tokens),
               "dev_loss": round(best[0], 4), "backbone_dev_loss": round(backbone_dev, 4),
               "seconds": round(clock.synced() - start, 1), "stop_reason": stop_reason}
    return {n: t.float().cpu() for n, t in best[2].items()}, summary


def train_adapters(model: Backbone, pack: Pack, specials: Specials, device: torch.device, *,
                   settings: AdapterSettings, clock: Clock,
                   end_s: float) -> dict[str, tuple[Params, dict[str, Any]]]:
    """Every domain's adapter, each given an equal share of the time left before `end_s`."""
    model.requires_grad_(False)
    out: dict[str, tuple[Params, dict[str, Any]]] = {}
    domains = pack.info.domains
    for index, domain in enumerate(domains):
        share = (end_s - clock.now()) / (len(domains) - index)
        start, stop = pack.info.domain_range(domain)
        assert pack.dev.corpus is not None
        train = DeviceBatches(pack.train, specials, device, rows=slice(start, stop))
        dev = DeviceBatches(select(pack.dev, pack.dev.corpus == np.uint8(index)), specials,
                            device)
        params, summary = train_adapter(model, train, dev, settings=settings, clock=clock,
                                        end_s=clock.now() + share)
        log.info("adapter %s: %s", domain, summary)
        out[domain] = (params, summary)
    return out
