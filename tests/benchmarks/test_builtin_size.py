"""benchmarks/builtin_size.py on the repository itself: the tree's sizes as git lists them,
the shipped router, estimator and backbone compared with themselves (nothing differs), and
the en->de projection computed from en->fr's shape (one vocabulary file, no router)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks import builtin_size as bs
from trainer.gpu import repository_budget as rb

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sizes() -> dict[str, int]:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    return bs.tracked(None)


def test_the_shipped_router_compared_with_itself_differs_nowhere(
        sizes: dict[str, int]) -> None:
    folder, _pair, _side = bs.ROUTERS["en-fr"]
    shipped = bs.router_files(None, sizes, folder)
    sentences = [("medical", "take one tablet a day"), ("law", "the court dismissed the appeal")]
    found = bs.compare_router("en-fr", shipped, shipped, sentences)
    assert found["argmax_differs"] == 0 and found["largest_posterior_change"] == 0.0
    assert found["accuracy_before"] == found["accuracy_after"]
    assert found["bytes_after"] == {name: sizes[f"{shipped[0]}/{name}"]
                                    for name in shipped[2]["files"]}


def test_the_en_de_projection_is_en_fr_shaped_and_reported(sizes: dict[str, int]) -> None:
    addition = bs.en_de_addition(sizes, spm_bytes=1000)
    backbone = bs.version_dir(sizes, "backbones/default-en-fr")
    assert addition["backbone"] == sizes[f"{backbone}/model.safetensors"]
    assert addition["vocabulary"] == 1000  # one file: its target vocabulary is the same
    assert "router" not in addition  # it routes with en->fr's
    assert addition["adapters"] == rb.DOMAINS * sizes[
        bs.version_dir(sizes, "modules/medical") + "/module.safetensors"]
    shared = bs.compare_backbone("default-en-fr", sizes, sizes, None)
    assert shared["same"] and shared["files_after"] == [
        "config.json", "model.safetensors", "source.spm"]
    result = {"before": "HEAD", "en_de_run": "None", "tracked_before": 1, "tracked_after": 1,
              "routers": [], "backbones": [shared],
              "quality": [], "en_de_addition": addition,
              "with_en_de": 1 + sum(addition.values())}
    text = bs.markdown(result)
    assert f"| **all** | **{sum(addition.values()) / 1e6:.2f}** |" in text
    assert "With en->de:" in text
    assert "| default-en-fr | " in text
