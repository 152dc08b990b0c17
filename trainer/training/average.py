"""Checkpoint averaging: the element-wise mean of the model weights of the last k saved
checkpoints of one run (Vaswani et al. 2017, section 6.1, averaged the last 5 for base
models and 20 for big ones). The result is a weights-only checkpoint at the newest one's
position: the recipe's later stages read it as they read any backbone checkpoint, and the
backbone stage warm-starts from it with a fresh optimizer.

    python -m trainer.training.average --out runs/avg/checkpoint.pt runs/curve/step-*.pt --last 5
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

STEP = re.compile(r"step-(\d+)\.pt$")


def checkpoint_step(path: Path) -> int:
    """The step in a curve copy's name (`step-N.pt`)."""
    found = STEP.search(path.name)
    if found is None:
        raise ValueError(f"{path.name}: not a step-N.pt checkpoint copy")
    return int(found.group(1))


def last_checkpoints(paths: Sequence[Path], k: int) -> list[Path]:
    """The `k` latest `step-N.pt` paths, oldest first."""
    if k < 1:
        raise ValueError(f"average at least 1 checkpoint, got {k}")
    return sorted(paths, key=checkpoint_step)[-k:]


def average_weights(states: Sequence[dict[str, Tensor]]) -> dict[str, Tensor]:
    """The mean of each floating-point tensor (in float32, cast back to its dtype); other
    tensors (step counters, integer buffers) are taken from the last state. Every state
    must hold the same names and shapes."""
    if not states:
        raise ValueError("nothing to average")
    last = states[-1]
    for number, state in enumerate(states[:-1]):
        if state.keys() != last.keys() or any(state[n].shape != t.shape for n, t in last.items()):
            raise ValueError(f"checkpoint {number} has other tensors than the last one: "
                             "only checkpoints of one architecture can be averaged")
    averaged: dict[str, Tensor] = {}
    for name, tensor in last.items():
        if tensor.is_floating_point():
            total = torch.stack([state[name].float() for state in states]).mean(dim=0)
            averaged[name] = total.to(tensor.dtype)
        else:
            averaged[name] = tensor.clone()
    return averaged


def average_checkpoints(paths: Sequence[Path]) -> dict[str, Any]:
    """A weights-only checkpoint: the averaged model at the last path's position."""
    saved = [torch.load(path, weights_only=True, map_location="cpu") for path in paths]
    return {"model": average_weights([s["model"] for s in saved]),
            "progress": saved[-1]["progress"],
            "averaged": [str(path) for path in paths]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", type=Path, help="step-N.pt copies")
    parser.add_argument("--last", type=int, default=5, help="how many of the latest to average")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    chosen = last_checkpoints(args.checkpoints, args.last)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(average_checkpoints(chosen), args.out)


if __name__ == "__main__":
    main()
