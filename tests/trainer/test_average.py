"""Checkpoint averaging (trainer/training/average.py): the element-wise mean of the last k saved
checkpoints, a weights-only checkpoint the training loop warm-starts from."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.tiny import random_backbone, tiny_config
from trainer.training.average import (
    average_checkpoints,
    average_weights,
    checkpoint_step,
    last_checkpoints,
)


def test_the_mean_of_floats_and_the_last_of_the_rest() -> None:
    states = [{"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(1)},
              {"w": torch.tensor([3.0, 6.0]), "n": torch.tensor(2)}]
    averaged = average_weights(states)
    assert torch.equal(averaged["w"], torch.tensor([2.0, 4.0]))
    assert int(averaged["n"]) == 2


def test_half_weights_are_averaged_in_float32_and_stay_half() -> None:
    states = [{"w": torch.tensor([60000.0], dtype=torch.float16)}] * 2
    averaged = average_weights(states)
    assert averaged["w"].dtype == torch.float16 and float(averaged["w"]) == 60000.0


def test_checkpoints_of_another_architecture_are_refused() -> None:
    with pytest.raises(ValueError, match="only checkpoints of one architecture"):
        average_weights([{"w": torch.zeros(2)}, {"w": torch.zeros(3)}])
    with pytest.raises(ValueError, match="nothing to average"):
        average_weights([])


def test_the_last_k_are_chosen_by_step_number_not_by_name() -> None:
    paths = [Path(f"curve/step-{n}.pt") for n in (999, 10000, 4413, 5000)]
    assert [checkpoint_step(p) for p in last_checkpoints(paths, 2)] == [5000, 10000]
    with pytest.raises(ValueError, match="not a step-N.pt"):
        checkpoint_step(Path("curve/latest.pt"))
    with pytest.raises(ValueError, match="at least 1"):
        last_checkpoints(paths, 0)


def test_an_averaged_checkpoint_loads_into_the_backbone(tmp_path: Path) -> None:
    config = tiny_config()
    paths = []
    for seed, step in ((1, 100), (2, 200)):
        model = random_backbone(config, seed=seed)
        paths.append(tmp_path / f"step-{step}.pt")
        torch.save({"model": model.state_dict(), "progress": {"step": step},
                    "optimizer": {}}, paths[-1])
    averaged = average_checkpoints(paths)
    assert averaged["progress"] == {"step": 200} and "optimizer" not in averaged
    first, second = (torch.load(p, weights_only=True)["model"] for p in paths)
    name = "encoder.layers.0.ffn.fc1.weight"
    assert torch.allclose(averaged["model"][name], (first[name] + second[name]) / 2)
    loaded = random_backbone(config, seed=3)
    loaded.load_state_dict(averaged["model"])
