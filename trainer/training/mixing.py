"""Joint training of a word-level domain mixture (family "mixing", Jiang et al. 2020) over
all its domains at once, against the frozen backbone.

Unlike the other families, a mixture is not one domain's module: batches mix domains, and
every pair carries its domain label. The loss of a batch is

    translation CE  +  domain_weight * domain CE

where the domain CE is the mean, over every mixed site and every real (non-padding) token
at that site, of `-log p_label(token)`: each token's smoothed proportions against its
sentence's domain (source positions for encoder sites and cross-attention keys/values,
target positions for decoder sites). The proportion layers read a stop-gradient copy of
the hidden states, so the domain loss trains the proportion layers only. Only the module's
tensors train (the smoothing constant `epsilon` excepted); the backbone stays frozen.

Dev selection: the mean over domains of the teacher-forced dev translation loss (decoding
every domain's dev set at each evaluation would cost more than the training steps on a
CPU). The chosen module is then scored once per domain with BLEU/chrF (greedy), and the
token-level domain accuracy of its proportions (argmax of the encoder sites' mean) is
reported.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from server.engine.backbone import Backbone
from server.engine.families import Params, get_family
from server.engine.families.mixing import WordMixing
from server.engine.mixture import MixtureHooks, SiteProportions
from server.engine.tokenizer import Tokenizer
from trainer.training.data import (
    Batch,
    EncodedPairs,
    encode_for_backbone,
    iterate_batches,
    token_batches,
)
from trainer.training.evaluate import Scores, evaluate_texts
from trainer.training.loop import (
    OnProgress,
    Progress,
    ShouldStop,
    Trainable,
    TrainingInterrupted,
    TrainSettings,
    bf16_autocast,
    translation_loss,
)
from trainer.training.run import train

log = logging.getLogger(__name__)
Pairs = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class DevMetrics:
    loss: float  # teacher-forced translation CE per target token
    accuracy: float  # token-level domain accuracy of the proportions (source tokens)


@dataclass(frozen=True)
class MixingResult:
    config: dict[str, Any]
    params: Params
    dev: dict[str, DevMetrics]  # by domain
    bleu: dict[str, Scores]  # by domain (empty when not asked)
    progress: Progress


def domain_loss(sites: Sequence[SiteProportions], labels: Tensor, *, source_mask: Tensor,
                target_mask: Tensor) -> Tensor:
    """Mean over sites and real tokens of -log p_label; masks [batch, len] True = real."""
    total: Tensor = torch.zeros(())
    count: Tensor = torch.zeros(())
    for site in sites:
        p = site.proportions  # [batch, len, k]
        mask = (source_mask if site.on_source else target_mask).to(p.dtype)
        index = labels.to(p.device)[:, None, None].expand(*p.shape[:2], 1)
        nll = -p.gather(-1, index).squeeze(-1).clamp_min(1e-12).log()
        total = total + (nll * mask).sum()
        count = count + mask.sum()
    return total / count.clamp_min(1.0)


def source_hits(sites: Sequence[SiteProportions], labels: Tensor,
                source_mask: Tensor) -> tuple[int, int]:
    """(correct, total) real source tokens whose encoder-mean proportions peak on the label."""
    encoder = [s.proportions for s in sites if s.side == "encoder"]
    predicted = torch.stack(encoder).mean(0).argmax(-1)  # [batch, src_len]
    correct = (predicted == labels[:, None]) & source_mask
    return int(correct.sum()), int(source_mask.sum())


def dev_metrics(backbone: Backbone, family: WordMixing, params: Params,
                dev: Mapping[str, EncodedPairs], *, bf16: bool) -> dict[str, DevMetrics]:
    hooks = MixtureHooks(family, params)
    found: dict[str, DevMetrics] = {}
    for label, (domain, data) in enumerate(dev.items()):
        total, tokens, hits, seen = 0.0, 0, 0, 0
        with torch.no_grad(), bf16_autocast(bf16):
            for _, batch in iterate_batches(data, token_batches(data, max_tokens=6000, seed=0,
                                                                epoch=0)):
                logits = backbone(batch.src, batch.tgt_in, hooks)
                count = batch.target_tokens
                total += float(translation_loss(logits, batch, 0.0)) * count
                tokens += count
                labels = torch.full((batch.src.shape[0],), label, dtype=torch.long)
                right, all_ = source_hits(hooks.take(), labels, batch.src != batch.pad_id)
                hits, seen = hits + right, seen + all_
        found[domain] = DevMetrics(total / max(tokens, 1), hits / max(seen, 1))
    return found


def _trainable(backbone: Backbone, hooks: MixtureHooks, params: Params, names: list[str], *,
               domain_weight: float) -> Trainable:
    current: dict[str, Batch] = {}

    def forward(batch: Batch) -> Tensor:
        hooks.take()  # nothing of an earlier batch may leak into this one's loss
        current["batch"] = batch
        return backbone(batch.src, batch.tgt_in, hooks)

    def extra_loss() -> Tensor:
        batch = current.pop("batch")
        if batch.labels is None:
            raise ValueError("joint mixture training needs labelled batches")
        return domain_weight * domain_loss(hooks.take(), batch.labels,
                                           source_mask=batch.src != batch.pad_id,
                                           target_mask=batch.tgt_out != batch.pad_id)

    def set_train(mode: bool) -> None:
        backbone.train(mode)  # the backbone's dropout regularises the module too
        hooks.recording = mode

    def load(state: dict[str, Tensor]) -> None:
        with torch.no_grad():
            for name in params:
                params[name].copy_(state[name])

    return Trainable(parameters=[params[n] for n in names], forward=forward,
                     state_dict=lambda: {n: t.detach().clone() for n, t in params.items()},
                     load_state_dict=load, set_train=set_train, extra_loss=extra_loss)


def _check(config: dict[str, Any], data: EncodedPairs, dev: Mapping[str, Pairs]) -> None:
    domains = list(config["domains"])
    problems: list[str] = []
    if data.labels is None:
        problems.append("the training pairs carry no domain labels")
    elif len(data.labels) and not 0 <= int(data.labels.min()) <= int(data.labels.max()) \
            < len(domains):
        problems.append(f"training labels must be in [0, {len(domains)})")
    if list(dev) != domains:
        problems.append(f"dev sets {list(dev)} must be those of the domains {domains}, in order")
    if problems:
        raise ValueError("; ".join(problems))


def train_mixing(backbone: Backbone, config: dict[str, Any], data: EncodedPairs,
                 dev: Mapping[str, Pairs], *, source: Tokenizer, target: Tokenizer,
                 settings: TrainSettings, run_dir: Path, domain_weight: float = 1.0,
                 max_len: int = 128, bleu: bool = True, on_progress: OnProgress | None = None,
                 should_stop: ShouldStop | None = None) -> MixingResult:
    """Train a mixture over `config["domains"]` on labelled `data` (label i = domain i);
    returns the parameters with the best mean dev loss. Resumes from `run_dir`; raises
    TrainingInterrupted (checkpoint saved) when `should_stop` asks before the end."""
    family = get_family(str(config.get("family", "mixing")))
    if not isinstance(family, WordMixing):
        raise ValueError(f"joint mixture training needs the family 'mixing', not {family.name!r}")
    config = family.normalise(config)
    _check(config, data, dev)
    backbone.requires_grad_(False)
    generator = torch.Generator().manual_seed(settings.seed)
    params = family.initial(backbone.config, config, generator, weights=backbone.state_dict())
    names = sorted(n for n in params if family.trainable(n))
    for name in names:
        params[name].requires_grad_(True)
    dev_sets = {d: encode_for_backbone(p, source, target, backbone.config, max_len=max_len,
                                       label=i)
                for i, (d, p) in enumerate(dev.items())}
    best_path = run_dir / "best.safetensors"

    def evaluate() -> float:
        metrics = dev_metrics(backbone, family, params, dev_sets, bf16=settings.bf16)
        log.info("dev: " + ", ".join(f"{d} loss {m.loss:.3f} acc {m.accuracy:.2f}"
                                     for d, m in metrics.items()))
        return -float(np.mean([m.loss for m in metrics.values()]))

    def keep_best(progress: Progress) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        tmp = best_path.with_suffix(".tmp")
        save_file({k: v.detach().contiguous() for k, v in params.items()}, str(tmp))
        tmp.replace(best_path)

    hooks = MixtureHooks(family, params)
    trainable = _trainable(backbone, hooks, params, names, domain_weight=domain_weight)
    progress = train(trainable, data, settings, run_dir, evaluate=evaluate,
                     on_progress=on_progress, on_best=keep_best, should_stop=should_stop)
    if not progress.finished:
        raise TrainingInterrupted(progress)
    backbone.eval()
    final = load_file(str(best_path)) if best_path.exists() else trainable.state_dict()
    chosen = {k: v.detach() for k, v in final.items()}
    metrics = dev_metrics(backbone, family, chosen, dev_sets, bf16=settings.bf16)
    scores: dict[str, Scores] = {}
    if bleu:
        single = MixtureHooks(family, chosen, recording=False)
        for domain, pairs in dev.items():
            scores[domain], _ = evaluate_texts(backbone, source, target, pairs, hooks=single)
            log.info("dev %s: BLEU %.2f chrF %.2f", domain, scores[domain].bleu,
                     scores[domain].chrf)
    return MixingResult(config, chosen, metrics, scores, progress)
