"""Prometheus scrape config and Grafana provisioning under deploy/."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "nmt.json"

# metric -> the labels its panel aggregates by (None: summed over everything).
PANEL_METRICS: dict[str, tuple[str, ...] | None] = {
    "nmt_api_requests_total": ("route", "status"),
    "nmt_api_request_latency_seconds_bucket": ("le",),
    "nmt_engine_target_tokens_total": None,
    "nmt_engine_busy_seconds_total": ("instance",),
    "nmt_routing_decisions_total": ("mode",),
    "nmt_routing_predicted_domain_total": ("domain",),
    "nmt_scheduler_queue_depth": None,
    "nmt_scheduler_batch_sentences_bucket": ("le",),
    "nmt_scheduler_batch_length_spread_bucket": ("le",),
    "nmt_engine_resident_modules": ("tier",),
    "nmt_engine_module_loads_total": None,
    "nmt_engine_module_evictions_total": None,
    "nmt_trainer_jobs": ("state",),
}


def _dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def _expressions() -> list[str]:
    return [t["expr"] for panel in _dashboard()["panels"] for t in panel["targets"]]


def _yaml(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def test_compose_prometheus_scrapes_the_server() -> None:
    config = _yaml(ROOT / "deploy" / "prometheus" / "prometheus.yml")
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["server:8000"]


@pytest.mark.parametrize("metric", sorted(PANEL_METRICS))
def test_dashboard_charts_metric(metric: str) -> None:
    exprs = [e for e in _expressions() if re.search(rf"\b{metric}\b", e)]
    assert exprs, f"no panel queries {metric}"
    labels = PANEL_METRICS[metric]
    if labels is not None:
        by = f"by ({', '.join(labels)})"
        assert any(by in e for e in exprs), f"{metric} not aggregated {by}"


def test_latency_panel_has_p50_p95_p99() -> None:
    latency = [e for e in _expressions() if "nmt_api_request_latency_seconds_bucket" in e]
    quantiles = [re.match(r"histogram_quantile\(([0-9.]+),", e) for e in latency]
    assert all(quantiles), latency
    assert {q.group(1) for q in quantiles if q} == {"0.5", "0.95", "0.99"}


def test_dashboard_panels_use_the_provisioned_datasource() -> None:
    (datasource,) = _yaml(GRAFANA / "provisioning" / "datasources" / "prometheus.yml")[
        "datasources"
    ]
    assert datasource["url"] == "http://prometheus:9090"
    dashboard = _dashboard()
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == datasource["uid"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == datasource["uid"], panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]


def test_dashboard_provider_reads_the_mounted_folder() -> None:
    (provider,) = _yaml(GRAFANA / "provisioning" / "dashboards" / "nmt.yml")["providers"]
    compose = _yaml(ROOT / "docker-compose.yml")
    mounts = dict(m.split(":")[:2] for m in compose["services"]["grafana"]["volumes"])
    assert mounts["./deploy/grafana/dashboards"] == provider["options"]["path"]
