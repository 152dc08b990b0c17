"""The tenants benchmark's parts: the modules it builds from a shipped one, what a run
reports (percentiles, the least-used 10 %), and the registry's timings at scale."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from benchmarks.speed.tenants.population import (
    BACKBONE,
    BOTTLENECK,
    perturbed,
    registry_at_scale,
    shipped_adapter,
)
from benchmarks.speed.tenants.tenants import Run, draws, least_used, percentile, summarise
from contract.backbone import BackboneConfig
from model_store import BUILTIN_DIR, Store
from server.engine.families import get_family
from server.engine.residency import check_params


def test_modules_are_the_shipped_adapter_cut_to_64_and_each_distinct(tmp_path: Path) -> None:
    if not (BUILTIN_DIR / "modules" / "law").is_dir():
        pytest.skip("no shipped law module")
    with Store.open(tmp_path / "store", builtin_dir=BUILTIN_DIR) as store:
        config, params, fingerprint = shipped_adapter(store)
        backbone = store.load_backbone(BACKBONE)
    assert config["bottleneck"] == BOTTLENECK and len(fingerprint) == 64
    shape = BackboneConfig.from_dict(json.loads(backbone.files["config.json"]))
    config = get_family("adapter").normalise(config)
    assert check_params(config, params, shape) == []
    first, second = perturbed(params, 1), perturbed(params, 2)
    for name, tensor in params.items():
        assert not torch.equal(first[name], second[name])
        spread = float((first[name] - tensor).std())
        assert spread <= 0.05 * float(tensor.std()) + 1e-5  # near the trained module


def test_a_run_reports_the_least_used_tenth_and_cold_requests() -> None:
    run = Run("100-zipf", 100, "zipf", tokens=500, seconds=2.0, least_used_min=1)
    for index in range(20):
        run.latencies.append(("hot", False, 0.1))
        run.latencies.append((f"m{index:02d}", index < 5, 0.2 + index / 100))
    summary = run.summary()
    assert summary["tokens_per_s"] == 250 and summary["modules_used"] == 21
    assert summary["cold_requests"] == 5
    assert summary["p99_cold_ms"] == pytest.approx(240)
    # 21 modules used: the 3 least used are single-request ones, m00 to m02
    assert summary["p99_least_used_ms"] == pytest.approx(220)
    assert (summary["least_used_modules"], summary["least_used_requests"]) == (3, 3)
    assert percentile([], 99) is None
    assert percentile([0.001 * i for i in range(1, 101)], 99) == pytest.approx(99)


def test_the_least_used_bucket_grows_until_one_stall_is_not_its_p99() -> None:
    uses = Counter({"hot": 300, **{f"m{i:02d}": 1 + i // 10 for i in range(40)}})
    # 41 modules: a tenth is 5 (m00..m04, 5 requests); grown to 100 requests
    bucket = least_used(uses, 100)
    assert {f"m{i:02d}" for i in range(5)} <= bucket and "hot" not in bucket
    assert sum(uses[m] for m in bucket) >= 100
    assert sum(uses[m] for m in bucket) - max(uses[m] for m in bucket) < 100
    assert least_used(uses, 1) == {f"m{i:02d}" for i in range(5)}
    run = Run("1000-uniform", 1000, "uniform", tokens=10, seconds=1.0)
    for index in range(200):  # one stall among 200 single-request modules
        run.latencies.append((f"m{index:03d}", True, 9.0 if index == 3 else 0.5))
    summary = run.summary()
    assert summary["least_used_requests"] == 100 and summary["p99_least_used_ms"] == 500


def test_zipf_traffic_favours_the_first_modules() -> None:
    modules = [f"m{i}" for i in range(100)]
    zipf, uniform = draws(modules, "zipf", 5000, 1), draws(modules, "uniform", 5000, 1)
    assert zipf.count("m0") > 5 * uniform.count("m0")
    assert len(set(uniform)) == 100


def test_registry_timings_cover_pages_and_lookups(tmp_path: Path) -> None:
    timings = registry_at_scale(tmp_path, count=300, repeats=2)
    assert timings["modules"] == 300
    assert {"page_first_ms", "page_middle_ms", "lookup_artifact_ms", "lookup_active_ms",
            "default_backbone_ms", "admin_keys_first_page_ms", "admin_keys_deep_page_ms",
            "admin_keys_tenant_page_ms"} <= set(timings)
    assert all(value >= 0 for key, value in timings.items() if key.endswith("_ms"))


def test_ratios_are_the_median_of_each_rounds_ratio() -> None:
    one = Run("one", 1, "uniform", tokens=400, seconds=4.0, rounds=[100.0, 100.0, 10.0])
    many = Run("100-zipf", 100, "zipf", tokens=300, seconds=4.0, rounds=[90.0, 95.0, 100.0])
    for run in (one, many):
        run.latencies.append(("m", False, 0.1))
    served = {"runs": [one.summary(), many.summary()], "budget_bytes": 10, "module_bytes": 8,
              "slot_bytes": 0, "counters": {}}
    result = summarise(served, {}, 5)
    # round 3 stalled the one-module run: its ratio (10x) is the outlier the median drops
    assert result["ratio_100"] == pytest.approx(0.95)
    assert result["budget_share"] == pytest.approx(0.25)
