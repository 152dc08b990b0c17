"""deploy/ray: the Serve config validates against Ray's own schema, and the KubeRay
RayService (a CRD: no bundled schema) has its required fields, pod templates that validate
as Kubernetes PodTemplates, and the same Serve application as the config file."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from ray.serve import Application
from ray.serve.schema import ServeDeploySchema

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is in the dev extra: pip install -e '.[dev]'"
)

RAY = Path(__file__).resolve().parents[2] / "deploy" / "ray"
K8S_VERSION = "1.37.0"


def _load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((RAY / name).read_text())
    return document


def _service() -> dict[str, Any]:
    return _load("rayservice.yaml")


def _templates() -> list[dict[str, Any]]:
    cluster = _service()["spec"]["rayClusterConfig"]
    return [cluster["headGroupSpec"]["template"],
            *(group["template"] for group in cluster["workerGroupSpecs"])]


def test_serve_config_validates_against_rays_schema() -> None:
    config = ServeDeploySchema.model_validate(_load("serve-config.yaml"))
    (app,) = config.applications
    (deployment,) = app.deployments
    assert app.import_path == "server.ray_serve.deployment:build" and app.route_prefix == "/"
    assert deployment.autoscaling_config is not None
    scaling = dict(deployment.autoscaling_config)
    assert 1 <= scaling["min_replicas"] <= scaling["max_replicas"]
    assert scaling["target_ongoing_requests"] <= deployment.max_ongoing_requests
    assert deployment.ray_actor_options is not None
    threads = app.runtime_env["env_vars"]["OMP_NUM_THREADS"]
    assert float(threads) == deployment.ray_actor_options.num_cpus


def test_ray_schema_rejects_a_bad_value() -> None:
    config = _load("serve-config.yaml")
    config["applications"][0]["deployments"][0]["max_ongoing_requests"] = "many"
    with pytest.raises(ValueError, match="max_ongoing_requests"):
        ServeDeploySchema.model_validate(config)


def test_import_path_builds_the_application() -> None:
    module, _, name = _load("serve-config.yaml")["applications"][0]["import_path"].partition(":")
    assert isinstance(getattr(importlib.import_module(module), name)({}), Application)


def test_rayservice_has_the_required_fields() -> None:
    service = _service()
    assert (service["apiVersion"], service["kind"]) == ("ray.io/v1", "RayService")
    assert service["metadata"]["name"] and "namespace" not in service["metadata"]
    cluster = service["spec"]["rayClusterConfig"]
    assert cluster["rayVersion"] == "2.60.0"
    assert "rayStartParams" in cluster["headGroupSpec"]
    for group in cluster["workerGroupSpecs"]:
        assert group["groupName"] and "rayStartParams" in group
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    for template in _templates():
        for container in template["spec"]["containers"]:
            assert container["name"] and container["image"]


def test_rayservice_serves_the_config_files_application() -> None:
    embedded = ServeDeploySchema.model_validate(yaml.safe_load(
        _service()["spec"]["serveConfigV2"]))
    config = ServeDeploySchema.model_validate(_load("serve-config.yaml"))
    assert embedded.applications == config.applications


@pytest.mark.parametrize("index", range(2))
def test_pod_templates_validate_against_kubernetes_schema(index: int) -> None:
    template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "nmt"},
                "template": _templates()[index]}
    kubernetes_validate.validate(template, K8S_VERSION, strict=True)


def test_replicas_get_the_shared_store_and_secrets() -> None:
    (worker,) = _service()["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    spec = worker["template"]["spec"]
    (container,) = spec["containers"]
    secrets = {item["name"]: item["valueFrom"]["secretKeyRef"] for item in container["env"]}
    assert secrets["NMT_REGISTRY_URL"] == {"name": "nmt-registry", "key": "url"}
    assert secrets["NMT_ADMIN_TOKEN"] == {"name": "nmt-admin", "key": "token"}
    (volume,) = spec["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == "nmt-store"
    (mount,) = container["volumeMounts"]
    app = _load("serve-config.yaml")["applications"][0]
    assert app["runtime_env"]["env_vars"]["NMT_STORE_DIR"].startswith(mount["mountPath"] + "/")
    assert worker["rayStartParams"]["num-cpus"] == str(
        app["deployments"][0]["ray_actor_options"]["num_cpus"])
