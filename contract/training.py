"""The configuration of a training job: module family + hyper-parameters, training
settings and the quality gate, with defaults suited to the backbone.

Operators send it flat (`{"family": "ldr", "rank": 4, "max_epochs": 3}`); the server
validates it at upload time (422 naming the allowed options) and stores it normalised and
nested in the job row (`{"module": {...}, "training": {...}, ...}`), which the sidecar
reads back. Pure (no torch, no I/O): both processes import it. The training loop's
`TrainSettings` (trainer/training/loop.py) takes its defaults from `TrainingOptions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contract.backbone import BackboneConfig
from contract.families import FAMILY_SPECS, FamilySpec, ModuleConfigError

DEFAULT_FAMILY = "adapter"

# Where a job's files live, as storage keys under the store's writable root.
JOBS_DIR = "jobs"
TRAIN_FILE = "train.tsv"
DEV_FILE = "dev.tsv"
RUN_DIR = "run"  # checkpoints and the trained module, until publication


def job_key(job_id: str, *parts: str) -> str:
    """`jobs/<id>[/<part>...]`: the storage key of a job's directory or of a file in it."""
    return "/".join((JOBS_DIR, job_id, *parts))


class JobConfigError(ValueError):
    """A job configuration that cannot be used; the message lists every problem."""


class TrainingOptions(BaseModel):
    """Per-job training settings (the module's own sizes are the family's options)."""

    # Every option has an upper bound (a job is work the server accepts from a client) and
    # NaN/infinity are refused.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    lr: float = Field(1e-3, gt=0, le=1.0, description="peak Adam learning rate")
    warmup_steps: int = Field(100, ge=1, le=100_000, description="linear warm-up steps")
    max_tokens: int = Field(5000, ge=64, le=100_000, description="padded tokens per batch")
    max_epochs: int = Field(8, ge=1, le=10_000, description="passes over the training pairs")
    max_steps: int = Field(1_000_000, ge=1, le=10_000_000,
                           description="optimizer steps at most")
    max_minutes: float = Field(30.0, gt=0, le=1440, description="wall-clock training budget")
    patience: int = Field(3, ge=0, le=1000, description="evaluations without dev BLEU gain "
                                                         "before stopping (0: never stop early)")
    eval_every: int = Field(50, ge=1, le=100_000, description="steps between dev evaluations")
    weight_decay: float = Field(0.0, ge=0, le=1.0,
                                description="Adam (L2) weight decay of the module")
    layer_regularisation: float = Field(
        0.0, ge=0, le=100.0, description="weight of the squared norm of what the module adds "
                                         "to the hidden states (Pham et al. 2020)")
    label_smoothing: float = Field(0.1, ge=0, lt=1)
    seed: int = Field(1, ge=0, le=2**32 - 1,
                      description="initialisation, batch order, held-out dev set")
    gate_margin_bleu: float = Field(
        1.0, ge=-100, le=100,
        description="refuse the module when its dev BLEU is below the backbone's by more "
                    "than this (negative: it must beat the backbone)")
    dev_fraction: float = Field(0.1, gt=0, lt=0.5,
                                description="held out for dev when no dev file is uploaded")
    max_dev_pairs: int = Field(500, ge=1, le=100_000, description="size cap of a held-out dev set")
    max_len: int = Field(128, ge=8, le=1024,
                         description="pairs longer than this (tokens) are skipped")


def suggested_options(family: FamilySpec, backbone: BackboneConfig) -> dict[str, Any]:
    """Family defaults scaled to the backbone: an adapter bottleneck of d_model / 2 (the
    default model's 128 for d=256)."""
    options = family.defaults()
    if "bottleneck" in options:
        options["bottleneck"] = max(8, backbone.d_model // 2)
    return options


def allowed_options(family: FamilySpec) -> str:
    module = ", ".join(sorted(family.defaults()))
    training = ", ".join(TrainingOptions.model_fields)
    return f"family, {module} (module); {training} (training)"


def addable_families() -> list[str]:
    """Families a training job can add as one new domain (not the joint ones)."""
    return sorted(name for name, family in FAMILY_SPECS.items() if not family.joint)


def normalise_config(raw: Mapping[str, Any], backbone: BackboneConfig) -> dict[str, Any]:
    """`{"module": {...}, "training": {...}}` with every default filled in; JobConfigError
    lists every unknown option or bad value (and names the allowed ones)."""
    name = raw.get("family", DEFAULT_FAMILY)
    if not isinstance(name, str) or name not in FAMILY_SPECS:
        raise JobConfigError(f"unknown module family {name!r}; allowed: "
                             f"{', '.join(addable_families())}")
    family = FAMILY_SPECS[name]
    if family.joint:
        raise JobConfigError(f"module family {name!r} is trained jointly over all its domains "
                             "(python -m trainer.recipes.mixing_en_fr), not added as one "
                             f"domain; allowed: {', '.join(addable_families())}")
    module_keys = set(family.defaults())
    training_keys = set(TrainingOptions.model_fields)
    problems: list[str] = []
    unknown = sorted(set(raw) - module_keys - training_keys - {"family"})
    if unknown:
        problems.append(f"unknown option(s) {', '.join(map(repr, unknown))} for family "
                        f"{name!r}; allowed: {allowed_options(family)}")
    module: dict[str, Any] = {}
    try:
        given = {k: v for k, v in raw.items() if k in module_keys}
        module = family.normalise({**suggested_options(family, backbone), **given})
    except ModuleConfigError as error:
        problems.append(str(error))
    training: dict[str, Any] = {}
    try:
        values = {k: _lenient_float(k, v) for k, v in raw.items() if k in training_keys}
        training = TrainingOptions.model_validate(values).model_dump()
    except ValidationError as error:
        problems += [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()]
    if problems:
        raise JobConfigError("; ".join(problems))
    return {"module": module, "training": training}


def _lenient_float(key: str, value: Any) -> Any:
    """JSON has one number type: accept `1` where a float is expected (strict mode would
    refuse it), never a bool."""
    field = TrainingOptions.model_fields[key]
    if field.annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def training_options(config: Mapping[str, Any]) -> TrainingOptions:
    """The training options of a stored (normalised) job config."""
    return TrainingOptions.model_validate(dict(config["training"]))
