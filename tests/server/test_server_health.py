"""Liveness, readiness (and what makes it fail), Prometheus metrics."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import build_store, make_client, publish_classifier
from fastapi.testclient import TestClient

from model_store import Store

METRIC_NAMES = [
    "nmt_api_requests_total", "nmt_api_request_latency_seconds", "nmt_api_errors_total",
    "nmt_scheduler_queue_depth", "nmt_scheduler_batch_sentences", "nmt_scheduler_batch_tokens",
    "nmt_scheduler_batch_length_spread",
    "nmt_engine_target_tokens_total", "nmt_engine_busy_seconds_total",
    "nmt_routing_decisions_total",
    "nmt_routing_predicted_domain_total", "nmt_routing_confidence",
    "nmt_engine_module_loads_total", "nmt_engine_module_evictions_total",
    "nmt_engine_module_load_seconds", "nmt_engine_resident_modules",
]


def test_live(shared_client: TestClient) -> None:
    response = shared_client.get("/health/live")
    assert response.status_code == 200 and response.json() == {"status": "alive"}


def test_ready_reports_what_is_loaded(shared_client: TestClient) -> None:
    response = shared_client.get("/health/ready")
    assert response.status_code == 200
    checks = response.json()["checks"]
    assert checks["backbone"] == "loaded (backbones/tiny/v1)"
    assert checks["classifier"] == "loaded (v1)"
    assert checks["modules"] == {"it": "loaded (v1)", "law": "loaded (v1)",
                                 "medical": "loaded (v1)"}


def test_without_classifier_auto_goes_generic_and_ready_says_so(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", classifier=False)
    with make_client(root) as client:
        response = client.get("/health/ready")
        assert response.status_code == 200
        assert response.json()["checks"]["classifier"].startswith("absent")
        result = client.post("/translate", json={"text": "The patient takes a tablet."})
        assert result.json()["routing"]["mode"] == "generic"


def test_without_backbone_not_ready_and_translate_is_503(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", domains=(), classifier=False, backbone=False)
    with make_client(root) as client:
        assert client.get("/health/live").status_code == 200
        response = client.get("/health/ready")
        assert response.status_code == 503
        body = response.json()
        assert body["error"]["code"] == "not_ready" and "backbone" in body["error"]["message"]
        assert body["checks"]["backbone"].startswith("failed")
        error = client.post("/translate", json={"text": "x"}).json()["error"]
        assert error["code"] == "not_ready"
        assert client.post("/translate", json={"text": "x"}).status_code == 503


def test_a_broken_classifier_leaves_the_server_ready_with_generic_routing(
        tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", classifier=False)
    with Store.open(root, builtin_dir=None) as store:
        publish_classifier(store, b"this is not a fastText model")
    with make_client(root) as client:
        response = client.get("/health/ready")
        assert response.status_code == 200  # damage stays local
        assert response.json()["checks"]["classifier"].startswith("failed")
        routed = client.post("/translate", json={"text": "The patient takes a tablet."})
        assert routed.json()["routing"]["mode"] == "generic"
        explicit = client.post("/translate", json={"text": "x", "domain": "medical"})
        assert explicit.status_code == 200


def test_metrics_expose_every_collector(shared_client: TestClient) -> None:
    shared_client.post("/translate", json={"text": "The patient takes one tablet a day."})
    shared_client.post("/translate", json={"text": "x", "domain": "generic"})
    response = shared_client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    for name in METRIC_NAMES:
        assert f"# TYPE {name}" in text or f"# TYPE {name.removesuffix('_total')}" in text, name
    assert 'nmt_routing_decisions_total{mode="classifier"}' in text
    assert 'nmt_routing_decisions_total{mode="generic"}' in text
    assert 'nmt_routing_predicted_domain_total{domain="medical"}' in text
    assert 'nmt_engine_resident_modules{tier="device"} 3.0' in text
    assert 'nmt_engine_module_loads_total{family="adapter"} 3.0' in text
    assert 'nmt_api_request_latency_seconds_count{route="/translate"}' in text


def test_metric_registries_are_per_app(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", domains=("law",), classifier=False)
    with make_client(root) as first, make_client(root) as second:
        first.post("/translate", json={"text": "x"})
        assert 'route="/translate"' in first.get("/metrics").text
        assert 'route="/translate"' not in second.get("/metrics").text


def test_a_backbone_published_later_is_picked_up(tmp_path: Path) -> None:
    root = build_store(tmp_path / "empty", domains=(), classifier=False, backbone=False)
    with make_client(root) as client:
        assert client.get("/health/ready").status_code == 503
        build_store(root, domains=("law",))  # the backbone, a domain and the classifier
        expected = {"backbone": "loaded (backbones/tiny/v1)", "classifier": "loaded (v1)",
                    "modules": {"law": "loaded (v1)"}}
        deadline = time.monotonic() + 10
        while (ready := client.get("/health/ready")).json().get("checks") != expected:
            assert time.monotonic() < deadline, ready.json()
            time.sleep(0.05)
        assert ready.status_code == 200
        result = client.post("/translate", json={"text": "The council adopted it."})
        assert result.json()["routing"]["domain"] == "law"
