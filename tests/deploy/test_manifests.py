"""Kubernetes manifests under deploy/k8s: schema-valid offline, and consistent with each other.

Schemas come from the `kubernetes-validate` package (dev extra), which ships the Kubernetes
JSON schemas, so nothing is downloaded at test time. Strict mode rejects unknown fields.
"""

from pathlib import Path
from typing import Any

import pytest
import yaml

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is in the dev extra: pip install -e '.[dev]'"
)

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
K8S_VERSION = "1.37.0"
KUSTOMIZATION = K8S / "kustomization.yaml"
SECRET_EXAMPLE = K8S / "admin-secret.example.yaml"
REGISTRY_SECRET_EXAMPLE = K8S / "registry-secret.example.yaml"
EXAMPLES = {SECRET_EXAMPLE.name, REGISTRY_SECRET_EXAMPLE.name}


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _manifest_files() -> list[Path]:
    return sorted(p for p in K8S.glob("*.yaml") if p != KUSTOMIZATION)


def _resources() -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, name) -> resource, over every manifest file."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in _manifest_files():
        for doc in _documents(path):
            found[(doc["kind"], doc["metadata"]["name"])] = doc
    return found


def _pod_spec(kind: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = _resources()[(kind, name)]["spec"]["template"]["spec"]
    return spec


def _container(name: str) -> dict[str, Any]:
    (container,) = _pod_spec("Deployment", name)["containers"]
    return dict(container)


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


def _claims(deployment: str) -> dict[str, str]:
    """mountPath -> claimName for the Deployment's PVC-backed volume mounts."""
    spec = _pod_spec("Deployment", deployment)
    claims = {
        vol["name"]: vol["persistentVolumeClaim"]["claimName"]
        for vol in spec["volumes"]
        if "persistentVolumeClaim" in vol
    }
    (container,) = spec["containers"]
    return {m["mountPath"]: claims[m["name"]] for m in container["volumeMounts"]}


@pytest.mark.parametrize("path", _manifest_files(), ids=lambda p: p.name)
def test_manifest_validates_against_kubernetes_schema(path: Path) -> None:
    docs = _documents(path)
    assert docs, f"{path.name} holds no resource"
    for doc in docs:
        validated = kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        assert validated == "1.37"


def test_validator_rejects_an_unknown_field() -> None:
    doc = _documents(K8S / "server-deployment.yaml")[0]
    doc["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_manifests_are_namespace_free() -> None:
    for (kind, name), doc in _resources().items():
        assert "namespace" not in doc["metadata"], f"{kind}/{name} sets a namespace"


def test_kustomization_lists_every_manifest_except_the_secret_examples() -> None:
    kustomization = yaml.safe_load(KUSTOMIZATION.read_text())
    assert kustomization["kind"] == "Kustomization"
    listed = set(kustomization["resources"])
    expected = {p.name for p in _manifest_files()} - EXAMPLES
    assert listed == expected
    assert "namespace" not in kustomization


def test_server_probes_and_admin_secret() -> None:
    server = _container("nmt-server")
    assert server["readinessProbe"]["httpGet"]["path"] == "/health/ready"
    assert server["livenessProbe"]["httpGet"]["path"] == "/health/live"
    (port,) = server["ports"]
    assert port["containerPort"] == 8000
    # the server's default is 127.0.0.1: the pod listens on every interface explicitly
    assert server["command"] == ["python", "-m", "server", "--host", "0.0.0.0", "--port", "8000"]
    ref = _env(server)["NMT_ADMIN_TOKEN"]["secretKeyRef"]
    secret = _resources()[("Secret", ref["name"])]
    assert ref["key"] in secret["stringData"]
    assert {"requests", "limits"} <= server["resources"].keys()
    assert "nvidia.com/gpu" in (K8S / "server-deployment.yaml").read_text()  # commented option


def test_server_and_trainer_share_the_store_claim() -> None:
    server, trainer = _container("nmt-server"), _container("nmt-trainer")
    assert trainer["command"] == ["python", "-m", "trainer"]
    assert trainer["image"] == server["image"]
    for key in ("NMT_STORE_DIR", "NMT_REGISTRY_URL"):
        assert _env(trainer)[key] == _env(server)[key]
    assert "sqlite" not in str(_env(server)["NMT_REGISTRY_URL"])  # no SQLite on network storage
    assert _claims("nmt-server") == _claims("nmt-trainer") == {"/data": "nmt-store"}
    pvc = _resources()[("PersistentVolumeClaim", "nmt-store")]
    assert "ReadWriteMany" in pvc["spec"]["accessModes"]


def test_pods_run_as_the_image_user() -> None:
    dockerfile_users = {
        line.split()[1]
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("USER ")
    }
    for name in ("nmt-server", "nmt-trainer"):
        ctx = _pod_spec("Deployment", name)["securityContext"]
        assert ctx["runAsNonRoot"] is True
        assert dockerfile_users == {f"{ctx['runAsUser']}:{ctx['runAsGroup']}"}


def test_service_selects_the_server_pods() -> None:
    service = _resources()[("Service", "nmt-server")]
    labels = _resources()[("Deployment", "nmt-server")]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    assert port["port"] == 8000
    assert port["targetPort"] == _container("nmt-server")["ports"][0]["name"]


def test_prometheus_configmap_scrapes_the_server_service() -> None:
    config_map = _resources()[("ConfigMap", "nmt-prometheus")]
    config = yaml.safe_load(config_map["data"]["prometheus.yml"])
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["nmt-server:8000"]


def _secret_key(ref: dict[str, Any]) -> str:
    secret = _resources()[("Secret", ref["secretKeyRef"]["name"])]
    value: str = secret["stringData"][ref["secretKeyRef"]["key"]]
    return value


def test_server_replicas_share_a_postgresql_registry_from_a_secret() -> None:
    deployment = _resources()[("Deployment", "nmt-server")]
    assert deployment["spec"]["replicas"] >= 2
    url = _secret_key(_env(_container("nmt-server"))["NMT_REGISTRY_URL"])
    assert url.startswith("postgresql+psycopg://")
    # The example URL names the example database's Service, port, user, database, password.
    service = _resources()[("Service", "nmt-postgres")]
    (port,) = service["spec"]["ports"]
    assert f"@{service['metadata']['name']}:{port['port']}/" in url
    (postgres,) = _resources()[("StatefulSet", "nmt-postgres")]["spec"]["template"]["spec"][
        "containers"]
    env = _env(postgres)
    assert url.endswith(f"/{env['POSTGRES_DB']}")
    assert url.startswith(f"postgresql+psycopg://{env['POSTGRES_USER']}:"
                          f"{_secret_key(env['POSTGRES_PASSWORD'])}@")


def test_postgres_statefulset_sits_behind_its_headless_service() -> None:
    statefulset = _resources()[("StatefulSet", "nmt-postgres")]
    service = _resources()[("Service", "nmt-postgres")]
    assert statefulset["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert statefulset["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    assert [m["name"] for m in container["volumeMounts"]] == [claim["metadata"]["name"]]
    # The server Service must not pick up the database pods, nor the other way round.
    server = _resources()[("Service", "nmt-server")]
    assert not server["spec"]["selector"].items() <= labels.items()


def test_server_termination_covers_the_prestop_sleep_and_the_drain() -> None:
    """SIGTERM comes after the preStop sleep; the server then drains for up to
    NMT_SHUTDOWN_DRAIN_S (server/operations/lifecycle.py); Kubernetes kills it at the grace
    period."""
    from server.settings import Settings

    server = _container("nmt-server")
    sleep = server["lifecycle"]["preStop"]["sleep"]["seconds"]
    drain = float(_env(server).get("NMT_SHUTDOWN_DRAIN_S",
                                   Settings.model_fields["shutdown_drain_s"].default))
    grace = _pod_spec("Deployment", "nmt-server")["terminationGracePeriodSeconds"]
    assert sleep >= 1
    assert grace >= sleep + drain + 10, (grace, sleep, drain)
    stall = float(_env(server)["NMT_LIVENESS_STALL_S"])
    probe = server["livenessProbe"]
    assert stall >= probe["periodSeconds"]  # the watchdog bound, not the probe, decides
