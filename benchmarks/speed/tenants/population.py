"""The tenants' modules of the benchmark, and the registry timed at 10,000 of them.

Modules: residual adapters of bottleneck 64 on the shipped en-fr backbone, each the
shipped `law` adapter's first 64 bottleneck units plus a perturbation of its own (seeded
by its index, 2 % of each tensor's spread), so every module is distinct and decodes like a
trained one. They are published to the store (not activated): every one starts on disk.

Registry: 10,000 module rows (one backbone, in a registry of their own) written in bulk,
then the calls the admin API and the serving path make, each timed over repeats; and as
many API keys (one in 100 a tenant's), for a page of `GET /admin/keys`: the first, one
deep in the list, and a tenant admin's first.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import torch
from sqlalchemy import insert

from contract.tensors import tensors_to_bytes
from model_store import Registry, Store
from model_store.tables import active, api_keys, artifacts, tenant_keys
from server.engine.artifacts import module_params
from server.engine.families import Params

BOTTLENECK = 64
BACKBONE = "default-en-fr"  # the shipped model the tenants' modules are built for
SOURCE_MODULE = "law"  # one of its shipped adapters
PERTURBATION = 0.02


def tenant_name(index: int) -> str:
    return f"tenant-{index:05d}"


def shipped_adapter(store: Store) -> tuple[dict[str, Any], Params, str]:
    """The shipped adapter cut to the benchmark's bottleneck, and its backbone's
    fingerprint."""
    loaded = store.load("module", SOURCE_MODULE, backbone=BACKBONE)
    config = dict(loaded.manifest.config)
    params = module_params(loaded.files)
    if config.get("family") != "adapter" or int(config["bottleneck"]) < BOTTLENECK:
        raise SystemExit(f"the shipped {SOURCE_MODULE!r} module is not an adapter of "
                         f"bottleneck >= {BOTTLENECK}")
    cut: Params = {}
    for name, tensor in params.items():
        if name.endswith("down_w"):
            cut[name] = tensor[..., :BOTTLENECK]
        elif name.endswith("down_b") or name.endswith("up_w"):
            cut[name] = tensor[:, :BOTTLENECK]
        else:
            cut[name] = tensor
    return ({**config, "bottleneck": BOTTLENECK}, {k: v.contiguous() for k, v in cut.items()},
            loaded.manifest.backbone_fingerprint)


def perturbed(params: Params, index: int) -> Params:
    generator = torch.Generator().manual_seed(1_000 + index)
    return {name: tensor + torch.randn(tensor.shape, generator=generator)
            * (PERTURBATION * float(tensor.std()) + 1e-6)
            for name, tensor in params.items()}


def publish_tenants(store: Store, count: int) -> tuple[list[str], int]:
    """`count` distinct tenant modules published (version 1 each, not active); their ids
    (`name@1`) and one module's bytes in host memory (float32)."""
    config, base, fingerprint = shipped_adapter(store)
    ids: list[str] = []
    existing = set(store.registry.list_names("module", backbone=BACKBONE))
    for index in range(count):
        name = tenant_name(index)
        if name not in existing:
            store.publish("module", name,
                          {"module.safetensors": tensors_to_bytes(perturbed(base, index),
                                                                  half=True)},
                          config=config, provenance={"benchmark": "tenants", "index": index},
                          backbone_fingerprint=fingerprint, backbone=BACKBONE)
        ids.append(f"{name}@{store.registry.list_versions('module', name, backbone=BACKBONE)[0]}")
    size = sum(t.numel() * 4 for t in base.values())
    return ids, size


def timed(call: Callable[[], object], repeats: int) -> float:
    """Median milliseconds of `call` over `repeats` runs."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def registry_at_scale(folder: Path, count: int = 10_000, repeats: int = 20) -> dict[str, Any]:
    """The registry's list and lookup times with `count` modules (SQLite, one backbone)."""
    registry = Registry(f"sqlite:///{folder / 'registry.db'}")
    try:
        now = datetime.now(UTC)
        manifest_json = ('{"format": 1, "kind": "module", "name": "%s", "version": 1, '
                         '"created_at": "2026-01-01T00:00:00Z", "files": {}, '
                         '"backbone_fingerprint": "' + "0" * 64 + '", "config": '
                         '{"family": "adapter", "bottleneck": 64}, "provenance": {}, '
                         '"scores": {}}')
        rows = [{"backbone": "bench", "kind": "module", "name": tenant_name(i), "version": 1,
                 "location": f"modules/{tenant_name(i)}/v1", "fingerprint": "0" * 64,
                 "manifest_json": manifest_json % tenant_name(i), "created_at": now}
                for i in range(count)]
        with registry.engine.begin() as conn:
            conn.execute(insert(artifacts), [{**rows[0], "kind": "backbone", "name": "bench",
                                              "backbone": "", "location": "backbones/bench/v1"}])
            conn.execute(insert(artifacts), rows)
            conn.execute(insert(active), [{"backbone": "bench", "kind": "module",
                                           "name": row["name"], "version": 1,
                                           "updated_at": now} for row in rows[::2]])
        middle = tenant_name(count // 2)
        return {
            "modules": count,
            "page_first_ms": timed(lambda: registry.artifact_page(
                "module", backbone="bench", limit=100), repeats),
            "page_middle_ms": timed(lambda: registry.artifact_page(
                "module", backbone="bench", after=middle, limit=100), repeats),
            "lookup_artifact_ms": timed(lambda: registry.get_artifact(
                "module", middle, 1, backbone="bench"), repeats),
            "lookup_active_ms": timed(lambda: registry.get_active(
                "module", middle, backbone="bench"), repeats),
            "lookup_unscoped_ms": timed(lambda: registry.get_active("module", middle),
                                        repeats),
            "default_backbone_ms": timed(registry.default_backbone, repeats),
            "active_versions_all_ms": timed(lambda: registry.active_versions(
                "module", backbone="bench"), max(3, repeats // 4)),
            "list_names_all_ms": timed(lambda: registry.list_names(
                "module", backbone="bench"), max(3, repeats // 4)),
        } | admin_keys_at_scale(registry, count, repeats)
    finally:
        registry.close()


def admin_keys_at_scale(registry: Registry, count: int, repeats: int) -> dict[str, float]:
    """Pages of 100 API keys, oldest first, among `count` (one in 100 owned by a tenant):
    the first, one 90 % of the way in (a cursor, not an offset), a tenant's first."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [{"id": f"{i:032x}", "name": f"key-{i}", "key_hash": f"{i:064x}", "prefix": "p",
             "created_at": start + timedelta(milliseconds=i)} for i in range(count)]
    registry.create_tenant("bench")
    with registry.engine.begin() as conn:
        conn.execute(insert(api_keys), rows)
        conn.execute(insert(tenant_keys), [{"key_id": row["id"], "tenant": "bench",
                                            "role": "member"} for row in rows[::100]])
    deep = (start + timedelta(milliseconds=count * 9 // 10), f"{count * 9 // 10:032x}")
    return {
        "admin_keys_first_page_ms": timed(lambda: registry.api_key_page(limit=100), repeats),
        "admin_keys_deep_page_ms": timed(lambda: registry.api_key_page(
            after=deep, limit=100), repeats),
        "admin_keys_tenant_page_ms": timed(lambda: registry.api_key_page(
            tenant="bench", limit=100), repeats),
    }
