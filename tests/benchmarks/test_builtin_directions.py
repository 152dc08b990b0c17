"""Benchmarks run on the shipped store, which holds two directions (en->fr, fr->en): the
ones that read "the" backbone must read the default direction's, not refuse the store."""

from __future__ import annotations

from pathlib import Path

from benchmarks.quality.text.pipeline import load_engine
from benchmarks.speed.serve.store import backbone_files, seed_default_store
from server.engine.artifacts import backbone_parts


def test_serving_benchmarks_measure_the_default_direction(tmp_path: Path) -> None:
    spec = seed_default_store(tmp_path / "store")
    with spec.open() as store:
        names = store.registry.list_names("backbone")
    assert {"default-en-fr", "default-fr-en"} <= set(names)
    assert spec.backbone == "default-en-fr"
    assert spec.environment()["NMT_BACKBONE"] == "default-en-fr"
    assert backbone_parts(backbone_files(spec)).config.d_model > 0


def test_quality_benchmarks_load_the_default_direction_with_its_modules(
        tmp_path: Path) -> None:
    engine, modules = load_engine(tmp_path / "store")
    assert sorted(modules) == ["edu", "it", "law", "medical", "religion", "subtitles", "ted"]
    (french,) = engine.translate_texts(["Thank you very much."])
    assert "merci" in french.lower()  # en->fr, the default direction
