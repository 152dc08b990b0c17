"""What the repository will weigh once a GPU-trained en->fr backbone of a given shape is
published (issue #47), computed before any device time is spent: the shape's weights are
stored exactly as the publish stage stores them (trainer/recipes/publication.py: the
backbone's matrices and the 7 adapters' banks int8 with per-row scales,
server/engine/row_int8.py), from the shape's tensors alone: int8 storage takes a fixed
size per weight, so the bytes do not depend on training, and no weights are needed.

    python -m trainer.gpu.repository_budget [--shape 384-6+4 | --all]

Publication keeps only the newest version of each built-in name (publication.py
`install_version`), so the new files replace the en->fr backbone's and modules' weights;
the router is republished unchanged and fr->en is not touched. The other files a
publication rewrites (manifests, config.json, the model card) and the GPU run's log
(~0.1 MB) are what the margin is for.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from contract.artifacts import BACKBONE_WEIGHTS_FILE, MODULE_WEIGHTS_FILE
from contract.backbone import BackboneConfig
from contract.tensors import tensors_to_bytes
from server.engine.backbone import Backbone
from server.engine.families import get_family
from server.engine.row_int8 import quantize_rows
from trainer.gpu.adapters import ADAPTER
from trainer.gpu.shape import CANDIDATES, CHOSEN, parameter_count

REPO = Path(__file__).resolve().parents[2]
BUILTIN = Path("model_store/builtin")  # relative to the repository, as git lists it
EN_FR_BACKBONE = BUILTIN / "backbones" / "default-en-fr"
EN_FR_MODULES = BUILTIN / "modules"  # the default direction's modules: the flat layout
DOMAINS = 7
LIMIT = 60_000_000  # tests/test_repository_size.py
MARGIN = 1_000_000  # manifests, model card, the run's log, a retrained quality estimator


def stored_bytes(tensors: dict[str, torch.Tensor], *, rank: int) -> int:
    """Bytes of the safetensors file the publish stage writes for `tensors` (on the meta
    device: only shapes and dtypes matter, int8 storage is a fixed size per weight)."""
    stored = quantize_rows(tensors, rank=rank)
    return len(tensors_to_bytes({k: torch.empty(v.shape, dtype=v.dtype)
                                 for k, v in stored.items()}))


def backbone_weight_bytes(config: BackboneConfig) -> int:
    """Bytes of `model.safetensors` as the publish stage writes it for this shape."""
    with torch.device("meta"):
        state = Backbone(config).state_dict()
    return stored_bytes(state, rank=2)


def adapter_weight_bytes(config: BackboneConfig) -> int:
    """Bytes of one adapter's `module.safetensors` (the recipe's bottleneck-128 adapter,
    banks int8 per output column) for a backbone of this shape."""
    family = get_family(str(ADAPTER["family"]))
    with torch.device("meta"):
        params = family.initial(config, family.normalise(dict(ADAPTER)), torch.Generator())
    return stored_bytes(params, rank=3)


def tracked_sizes(repo: Path = REPO) -> dict[Path, int]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=repo, check=True,
                            capture_output=True).stdout.decode().split("\0")
    return {Path(name): (repo / name).stat().st_size for name in listed
            if name and (repo / name).is_file()}


@dataclass(frozen=True)
class Budget:
    shape: str
    parameters: int
    tracked_now: int
    replaced: int  # today's en->fr weights the publication removes
    backbone: int
    adapters: int  # the 7 of them

    @property
    def after(self) -> int:
        return self.tracked_now - self.replaced + self.backbone + self.adapters

    @property
    def fits(self) -> bool:
        return self.after + MARGIN <= LIMIT


def replaced_bytes(sizes: dict[Path, int]) -> int:
    """Today's en->fr weights in the tracked files: what the publication replaces."""
    return sum(size for path, size in sizes.items()
               if (path.is_relative_to(EN_FR_BACKBONE) and path.name == BACKBONE_WEIGHTS_FILE)
               or (path.is_relative_to(EN_FR_MODULES) and path.name == MODULE_WEIGHTS_FILE))


def budget(shape: str, sizes: dict[Path, int]) -> Budget:
    """The repository after publishing a backbone of `shape` (trainer/gpu/shape.py)."""
    config = CANDIDATES[shape]
    return Budget(shape=shape, parameters=parameter_count(config),
                  tracked_now=sum(sizes.values()), replaced=replaced_bytes(sizes),
                  backbone=backbone_weight_bytes(config),
                  adapters=DOMAINS * adapter_weight_bytes(config))


def describe(row: Budget) -> str:
    return (f"| {row.shape} | {row.parameters / 1e6:.2f}M | {row.backbone / 1e6:.2f} MB | "
            f"{row.adapters / 1e6:.2f} MB | {row.after / 1e6:.2f} MB | "
            f"{(LIMIT - row.after) / 1e6:.2f} MB | {'yes' if row.fits else 'NO'} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.gpu.repository_budget",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(CANDIDATES), default=CHOSEN)
    parser.add_argument("--all", action="store_true", help="every candidate shape")
    args = parser.parse_args(argv)
    sizes = tracked_sizes()
    rows = [budget(s, sizes) for s in (CANDIDATES if args.all else [args.shape])]
    lines = [f"tracked now: {rows[0].tracked_now:,} bytes; today's en->fr weights replaced: "
             f"{rows[0].replaced:,} bytes; limit {LIMIT:,}, margin kept {MARGIN:,}",
             "| shape | parameters | backbone int8 | 7 adapters int8 | repository after | "
             "left under 60 MB | fits with margin |",
             "|---|---:|---:|---:|---:|---:|---|", *(describe(row) for row in rows)]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0 if all(row.fits for row in rows if row.shape == args.shape) else 1


if __name__ == "__main__":
    raise SystemExit(main())
