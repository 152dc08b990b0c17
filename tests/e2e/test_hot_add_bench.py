"""`python -m benchmarks.speed.serve.hot_add` end to end on a tiny store and tiny data (the
full-size run uses the built-in default model and a 5,000-pair en-fr domain)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.speed.serve import hot_add
from tests.trainer.sidecar_store import FAST_JOB, ROUTER, build_store, new_domain_pairs


def fake_data(root: Path) -> Path:
    """`en-fr/domains/medical/{train,dev}.{en,fr}` as in the shared data."""
    base = root / "en-fr" / "domains" / "medical"
    base.mkdir(parents=True)
    for split, pairs in (("train", new_domain_pairs(40)), ("dev", new_domain_pairs(5, seed=9))):
        (base / f"{split}.en").write_text("".join(s + "\n" for s, _ in pairs))
        (base / f"{split}.fr").write_text("".join(t + "\n" for _, t in pairs))
    return root


def test_hot_add_benchmark_runs_on_a_tiny_store(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMT_TRAINER__ROUTER__BUCKET", str(ROUTER.bucket))
    monkeypatch.setenv("NMT_TRAINER__ROUTER__QUANTIZE", "false")
    monkeypatch.setenv("NMT_TRAINER__ROUTER__MIN_EXAMPLES", str(ROUTER.min_examples))
    root = build_store(tmp_path / "store")
    out = tmp_path / "results"
    code = hot_add.main([
        "--data", str(fake_data(tmp_path / "data")), "--out", str(out), "--store-dir", str(root),
        "--no-builtin", "--backbone", "tiny", "--pairs", "40", "--flips", "2",
        "--poll-interval", "0.05", "--threads", "1", "--config", json.dumps(FAST_JOB)])
    assert code == 0
    result = json.loads((out / "hot_add.json").read_text())
    flip = result["flip"]
    assert flip["flips"] == 2 and flip["module_config"]["family"] == "adapter"
    assert all(0 < latency < 60 for latency in flip["latency_s"])
    added = result["hot_add"]
    assert added["job"]["state"] == "published" and added["pairs"] == 40
    assert 0 < added["flip_to_first_served_s"] < added["upload_to_first_served_s"]
    assert 0 < added["upload_to_published_s"] <= added["upload_to_first_served_s"] + 1
    assert added["train_seconds"] is not None and added["steps"] > 0
    assert "registry flip -> first request served" in (out / "hot_add.md").read_text()
