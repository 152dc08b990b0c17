"""The pieces of one domain job: its backbone, its data, and its module's training.

The trained module is cached in the job's run directory (`module.safetensors` +
`module.json`, written atomically) so that a job taken over after training re-does only
the cheap steps (gate, router, publication).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save_file

from contract.artifacts import MODULE_WEIGHTS_FILE
from contract.training import DEV_FILE, RUN_DIR, TRAIN_FILE, TrainingOptions, job_key
from contract.tsv import Pair, pairs_from_bytes
from model_store import LocalStorage, Manifest, Store
from server.engine.artifacts import backbone_parts
from server.engine.backbone import Backbone
from server.engine.engine import load_backbone
from server.engine.families import Params
from server.engine.tokenizer import Tokenizer
from trainer.jobs.settings import WorkerSettings
from trainer.training.data import EncodedPairs, encode_for_backbone, token_batches
from trainer.training.loop import Progress, ShouldStop, TrainingInterrupted, TrainSettings
from trainer.training.modules import train_module

log = logging.getLogger(__name__)

MODULE_SUMMARY = "module.json"
TRAINING_SHARE = 0.85  # of the job's progress bar; gate, router and publication share the rest


class JobFailed(Exception):
    """The job cannot succeed (retrying would not help): it is failed with this reason."""

    def __init__(self, reason: str, *, scores: Mapping[str, Any] | None = None,
                 result: Mapping[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.scores = dict(scores or {})
        self.result = dict(result or {})


class JobInterrupted(Exception):
    """The job stopped on request (SIGTERM) before it finished; it stays resumable."""


@dataclass(frozen=True)
class JobBackbone:
    manifest: Manifest
    model: Backbone
    source: Tokenizer
    target: Tokenizer


@dataclass(frozen=True)
class TrainedModule:
    config: dict[str, Any]
    params: Params
    pairs: int
    steps: int
    stop_reason: str
    train_seconds: float


def job_path(store: Store, job_id: str, *parts: str) -> Path:
    """A local path in the job's directory (training needs real files for checkpoints)."""
    if not isinstance(store.storage, LocalStorage):
        raise JobFailed("the sidecar needs a store on a local (or mounted) filesystem")
    return store.storage.path(job_key(job_id, *parts))


def read_job_data(store: Store, job_id: str) -> tuple[list[Pair], list[Pair]]:
    """(train, dev) as the server validated and wrote them."""
    train = pairs_from_bytes(store.storage.read_bytes(job_key(job_id, TRAIN_FILE)))
    dev = pairs_from_bytes(store.storage.read_bytes(job_key(job_id, DEV_FILE)))
    return train, dev


def load_job_backbone(store: Store, spec: Mapping[str, Any]) -> JobBackbone:
    """The exact backbone version the job was created for, frozen."""
    loaded = store.load("backbone", str(spec["name"]), int(spec["version"]))
    if loaded.manifest.backbone_fingerprint != spec["fingerprint"]:
        raise JobFailed(f"backbone {loaded.manifest.label} does not have the fingerprint the "
                        "job was created for")
    parts = backbone_parts(loaded.files)
    model = load_backbone(parts.config, parts.tensors)
    return JobBackbone(loaded.manifest, model, parts.source_tokenizer, parts.target_tokenizer)


def encode(pairs: Sequence[Pair], backbone: JobBackbone, *, max_len: int) -> EncodedPairs:
    """The job's pairs through the backbone's own tokenizers and special ids."""
    return encode_for_backbone(pairs, backbone.source, backbone.target, backbone.model.config,
                               max_len=max_len)


def training_fraction(progress: Progress, options: TrainingOptions,
                      batches_per_epoch: int) -> float:
    """How far the run is towards its first budget (epochs, steps or minutes)."""
    epochs = progress.epoch + progress.batch_in_epoch / max(batches_per_epoch, 1)
    done = max(epochs / options.max_epochs, progress.step / options.max_steps,
               progress.elapsed_s / (options.max_minutes * 60))
    return min(1.0, done)


def progress_fields(progress: Progress, fraction: float) -> dict[str, Any]:
    """Job-row fields for a training progress report (JSON has no NaN or infinity)."""
    fields: dict[str, Any] = {"progress": round(TRAINING_SHARE * fraction, 4)}
    if math.isfinite(progress.loss):
        fields["loss"] = progress.loss
    training: dict[str, Any] = {"step": progress.step, "epoch": progress.epoch}
    if math.isfinite(progress.best_score):
        training["best_dev_bleu"] = round(progress.best_score, 2)
    fields["scores"] = {"training": training}
    return fields


def train_job_module(backbone: JobBackbone, module_config: dict[str, Any],
                     options: TrainingOptions, *, data: tuple[list[Pair], list[Pair]],
                     run_dir: Path, settings: WorkerSettings,
                     report: Callable[[dict[str, Any]], None],
                     should_stop: ShouldStop, initial: Params | None = None) -> TrainedModule:
    """Train (or resume, or reuse the cached result of) the job's module."""
    cached = load_trained(run_dir)
    if cached is not None:
        log.info("module already trained (%d steps); reusing it", cached.steps)
        return cached
    train_pairs, dev_pairs = data
    encoded = encode(train_pairs, backbone, max_len=options.max_len)
    if not len(encoded):
        raise JobFailed(f"no training pair is at most {options.max_len} tokens long")
    batches = len(token_batches(encoded, max_tokens=options.max_tokens, seed=options.seed,
                                epoch=0))
    loop = TrainSettings.from_options(options, bf16=settings.bf16,
                                      log_every=settings.progress_every_steps,
                                      checkpoint_every_s=settings.checkpoint_every_s)
    log.info("training a %s module on %d pairs (%d dev), %d batches per epoch",
             module_config["family"], len(encoded), len(dev_pairs), batches)
    try:
        result = train_module(
            backbone.model, dict(module_config), encoded, dev_pairs, source=backbone.source,
            target=backbone.target, settings=loop, run_dir=run_dir,
            penalty_weight=options.layer_regularisation, should_stop=should_stop,
            initial=initial,
            on_progress=lambda p: report(progress_fields(p, training_fraction(p, options,
                                                                              batches))))
    except TrainingInterrupted as interrupted:
        raise JobInterrupted(str(interrupted)) from interrupted
    params = {k: v.half().float() if settings.half else v for k, v in result.params.items()}
    trained = TrainedModule(result.config, params, len(encoded), result.progress.step,
                            result.progress.stop_reason, round(result.progress.elapsed_s, 1))
    save_trained(run_dir, trained)
    return trained


def save_trained(run_dir: Path, trained: TrainedModule) -> None:
    """Weights first, summary last: the summary's presence means both are complete."""
    run_dir.mkdir(parents=True, exist_ok=True)
    weights = run_dir / MODULE_WEIGHTS_FILE
    tmp = weights.with_suffix(".tmp")
    save_file({k: v.contiguous() for k, v in trained.params.items()}, str(tmp))
    tmp.replace(weights)
    summary = {k: v for k, v in asdict(trained).items() if k != "params"}
    tmp = (run_dir / MODULE_SUMMARY).with_suffix(".tmp")
    tmp.write_text(json.dumps(summary, indent=1))
    tmp.replace(run_dir / MODULE_SUMMARY)


def load_trained(run_dir: Path) -> TrainedModule | None:
    if not (run_dir / MODULE_SUMMARY).exists():
        return None
    summary = json.loads((run_dir / MODULE_SUMMARY).read_text())
    return TrainedModule(params=load_file(str(run_dir / MODULE_WEIGHTS_FILE)), **summary)


def run_dir_of(store: Store, job_id: str) -> Path:
    return job_path(store, job_id, RUN_DIR)
