"""The GPU run's default shape still fits the repository once published (issue #47): its
backbone and 7 adapters, stored as the publish stage stores them, replace today's en->fr
weights beside the shipped fr->en direction, under the 60 MB tests/test_repository_size.py
enforces. Computed from the shape's tensors, no training."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from contract.backbone import BackboneConfig
from trainer.gpu import repository_budget as rb
from trainer.gpu.shape import CANDIDATES, CHOSEN, FALLBACK

ROOT = Path(__file__).resolve().parents[2]
# what a publication adds besides the weights: the run's log committed beside eval.md
# (run.json + run.log, ~40 kB at the real run's size) and its rewritten manifests and card
PUBLICATION_EXTRAS = 250_000


@pytest.fixture(scope="module")
def sizes() -> dict[Path, int]:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    return rb.tracked_sizes(ROOT)


def shipped_backbone(sizes: dict[Path, int]) -> Path:
    found = sorted({p.parent for p in sizes if p.is_relative_to(rb.EN_FR_BACKBONE)})
    assert len(found) == 1, f"one en->fr backbone version is shipped, found {found}"
    return found[0]


def test_the_computed_bytes_are_those_of_the_shipped_en_fr_weights(
        sizes: dict[Path, int]) -> None:
    """The method, checked on what ships: the shipped backbone's shape, stored the publish
    stage's way, takes exactly the bytes of its model.safetensors and of each module."""
    version = shipped_backbone(sizes)
    config = BackboneConfig.from_dict(json.loads((ROOT / version / "config.json").read_text()))
    assert rb.backbone_weight_bytes(config) == sizes[version / "model.safetensors"]
    modules = {p: n for p, n in sizes.items()
               if p.is_relative_to(rb.EN_FR_MODULES) and p.name == "module.safetensors"}
    assert len(modules) == rb.DOMAINS
    assert set(modules.values()) == {rb.adapter_weight_bytes(config)}
    assert rb.replaced_bytes(sizes) == sizes[version / "model.safetensors"] + sum(
        modules.values())


def test_the_default_shape_published_keeps_the_repository_under_60_mb(
        sizes: dict[Path, int]) -> None:
    chosen = rb.budget(CHOSEN, sizes)
    after = chosen.after + PUBLICATION_EXTRAS
    assert after < rb.LIMIT, (
        f"publishing the GPU run's default shape {CHOSEN} would take the repository to "
        f"{after / 1e6:.2f} MB (limit {rb.LIMIT / 1e6:.0f} MB): train --shape {FALLBACK}, "
        "or pick a shape with `python -m trainer.gpu.repository_budget --all` and set "
        "trainer/gpu/shape.py CHOSEN")
    # the fallback is smaller, so it fits wherever the default does, with room to spare
    fallback = rb.budget(FALLBACK, sizes)
    assert fallback.parameters < chosen.parameters and fallback.after < chosen.after


def test_the_budget_refuses_a_shape_past_the_limit(sizes: dict[Path, int]) -> None:
    """384-6+4 (the shape chosen before fr->en shipped) no longer fits."""
    assert "384-6+4" in CANDIDATES
    assert not rb.budget("384-6+4", sizes).fits
    assert rb.main(["--shape", "384-6+4"]) == 1
