"""Full fine-tuning baseline: every backbone parameter trained on one domain's train split.

This is the in-domain upper bound that modules are compared with, and the source of
catastrophic forgetting on the other domains (which frozen-backbone modules avoid).
Training goes through `trainer.training.run.train` with a fixed wall-clock budget; its run
directory is keyed by the backbone fingerprint and the settings, so a re-run resumes or
reuses a finished model.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from server.engine.artifacts import backbone_parts
from server.engine.backbone import Backbone
from server.engine.engine import Engine, EngineOptions
from trainer.recipes.default_en_fr import backbone_trainable
from trainer.training.data import encode_for_backbone
from trainer.training.loop import TrainSettings
from trainer.training.run import train

MAX_LEN = 128  # tokens per side, as the default recipe


@dataclass(frozen=True)
class FinetuneSettings:
    minutes: float = 4.0
    max_steps: int = 1_000_000
    lr: float = 2e-4
    warmup_steps: int = 100
    max_tokens: int = 5000
    seed: int = 1

    def train_settings(self) -> TrainSettings:
        return TrainSettings(lr=self.lr, warmup_steps=self.warmup_steps,
                             max_tokens=self.max_tokens, max_epochs=1000,
                             max_steps=self.max_steps, max_minutes=self.minutes,
                             seed=self.seed, log_every=50, eval_every=10**9,
                             checkpoint_every_s=120.0)

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Finetuned:
    domain: str
    engine: Engine
    label: str  # cache label of its translations
    info: dict[str, Any]


def finetune(files: Mapping[str, bytes], pairs: Sequence[tuple[str, str]], *, domain: str,
             fingerprint: str, settings: FinetuneSettings, run_root: Path) -> Finetuned:
    """Fine-tune (or resume, or reuse) the whole backbone on `pairs`; an engine on top."""
    parts = backbone_parts(files)
    model = Backbone(parts.config)
    model.load_state_dict(parts.tensors)
    data = encode_for_backbone(pairs, parts.source_tokenizer, parts.target_tokenizer,
                               parts.config, max_len=MAX_LEN)
    if len(data) == 0:
        raise ValueError(f"no usable training pairs for {domain}")
    key = f"{domain}-{fingerprint[:12]}-{settings.digest()}"
    progress = train(backbone_trainable(model), data, settings.train_settings(),
                     run_root / key)
    model.eval()
    tensors = {k: v.detach().clone() for k, v in model.state_dict().items()}
    engine = Engine(parts.config, tensors, source_tokenizer=parts.source_tokenizer,
                    target_tokenizer=parts.target_tokenizer, options=EngineOptions())
    info = {"domain": domain, "pairs": len(data), "steps": progress.step,
            "epochs": progress.epoch, "train_seconds": round(progress.elapsed_s, 1),
            "target_tokens": progress.target_tokens, "stop_reason": progress.stop_reason,
            "final_loss": round(progress.loss, 4) if math.isfinite(progress.loss) else None,
            "settings": asdict(settings),
            "run_dir": str(run_root / key), "parameters_trained": model_parameters(model)}
    return Finetuned(domain, engine, f"finetune-{key}", info)


def model_parameters(model: Backbone) -> int:
    return sum(p.numel() for p in model.parameters())
