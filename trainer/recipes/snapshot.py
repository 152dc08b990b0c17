"""A backbone snapshot beside the recipe, for a backbone stage that needs more compute than
one session (or one machine) has: the backbone's artifact files (matrices as int8 rows with
a scale each, server/engine/row_int8.py: ~10.9 MB for the default shape, vocabulary
included) and the run's position (step, epoch, batch within the epoch, training time). No
optimizer state: a run restored from it warm-starts Adam at the saved step, and reads the
training batches from where the snapshot stopped; the weights' rounding (at most half a
row's scale each) is noise the next steps train away. This is already the smallest form
that resumes well (float16 weights would double it, Adam's moments triple it), and still
too large for the repository's tree: it travels in the history (snapshot_history.py).

    python -m trainer.recipes.default_en_fr --stage snapshot   # after some backbone training
    python -m trainer.recipes.snapshot_history carry           # commit it beside the branch
    python -m trainer.recipes.default_en_fr --stage restore    # on the next machine

`--stage restore` takes the snapshot when it is further along than the published built-in
backbone, or of another architecture (a newer recipe's); publishing a backbone of the same
architecture at least as far along removes the snapshot.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from contract.artifacts import BACKBONE_CONFIG_FILE, SOURCE_SPM_FILE
from contract.backbone import BackboneConfig
from server.engine.artifacts import BackboneParts, backbone_files, backbone_parts
from trainer.recipes.directions import EN_FR, Direction
from trainer.training.loop import Progress

log = logging.getLogger("trainer.recipes.default_en_fr")

SNAPSHOT_DIR = Path(__file__).resolve().parent / "snapshot"
PROGRESS_FILE = "progress.json"
POSITION = ("step", "epoch", "batch_in_epoch", "elapsed_s", "target_tokens")


@dataclass(frozen=True)
class Snapshot:
    parts: BackboneParts
    spm: bytes
    progress: Progress  # finished by "max_minutes": a larger budget trains on


def snapshot_dir(direction: Direction) -> Path:
    """The recipe's snapshot folder of `direction`."""
    return SNAPSHOT_DIR if direction == EN_FR else SNAPSHOT_DIR.with_name(
        f"snapshot-{direction.name}")


def position(values: dict[str, Any]) -> Progress:
    """A finished run's position from saved values (missing ones count as 0): a backbone
    stage given a larger --max-minutes continues from it."""
    return Progress(step=int(values.get("step", 0)), epoch=int(values.get("epoch", 0)),
                    batch_in_epoch=int(values.get("batch_in_epoch", 0)),
                    elapsed_s=float(values.get("elapsed_s", 0.0)),
                    target_tokens=int(values.get("target_tokens", 0)), finished=True,
                    stop_reason="max_minutes")


def save_snapshot(run_dir: Path, out: Path) -> Progress:
    """Write the run dir's backbone checkpoint to `out` (replaced whole: a reader never
    sees a mix of two snapshots)."""
    saved = torch.load(run_dir / "backbone" / "checkpoint.pt", weights_only=True)
    config = BackboneConfig.from_dict(json.loads((run_dir / BACKBONE_CONFIG_FILE).read_text()))
    spm = (run_dir / "spm.model").read_bytes()
    progress = position(saved["progress"])
    files = backbone_files(config, saved["model"], source_spm=spm, target_spm=spm, int8_rows=True)
    files[PROGRESS_FILE] = json.dumps({k: asdict(progress)[k] for k in POSITION},
                                      indent=1).encode()
    staging = out.with_name(out.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name, data in files.items():
        (staging / name).write_bytes(data)
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    log.info("snapshot of step %d (epoch %d, batch %d) written to %s", progress.step,
             progress.epoch, progress.batch_in_epoch, out)
    return progress


def load_snapshot(folder: Path) -> Snapshot | None:
    if not (folder / PROGRESS_FILE).exists():
        return None
    files = {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}
    progress = position(json.loads(files.pop(PROGRESS_FILE)))
    return Snapshot(parts=backbone_parts(files), spm=files[SOURCE_SPM_FILE], progress=progress)


def remove_if_superseded(folder: Path, published_step: int,
                         published_config: BackboneConfig) -> None:
    """A published backbone of the same architecture and at least as far along makes the
    snapshot useless."""
    snapshot_progress = folder / PROGRESS_FILE
    if not snapshot_progress.exists():
        return
    step = int(json.loads(snapshot_progress.read_text())["step"])
    config = BackboneConfig.from_dict(json.loads((folder / BACKBONE_CONFIG_FILE).read_text()))
    if step <= published_step and config == published_config:
        shutil.rmtree(folder)
        log.info("snapshot of step %d removed: the published backbone has step %d", step,
                 published_step)
