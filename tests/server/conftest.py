"""A tiny model store for server tests: a tiny backbone, three `adapter` domains and a
tiny fastText router, published and activated through model_store."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest
import torch
from fastapi.testclient import TestClient
from fasttext_tiny import classifier_bytes

from model_store import Manifest, Store, pack_artifact_dir
from server.app import create_app
from server.engine.artifacts import module_files
from server.settings import Settings
from tests.tiny import random_module, tiny_backbone_files, tiny_config

BACKBONE = "tiny"
TOKEN = "s3cret-token"
DOMAINS = ("medical", "law", "it")
KEYWORDS = {
    "medical": ["patient", "tablet", "medicine", "dose", "children"],
    "law": ["council", "regulation", "member", "states", "directive", "decision"],
    "it": ["click", "button", "window", "file", "files"],
}
SHARED = ["the"]  # a word of every domain: uniform posteriors
SEEDS = {"medical": 1, "law": 2, "it": 3}
T = TypeVar("T")


@pytest.fixture(autouse=True)
def _no_nmt_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("NMT_"):
            monkeypatch.delenv(key)


def module_artifact(seed: int) -> tuple[dict[str, Any], dict[str, bytes]]:
    config, params = random_module(tiny_config(), "adapter", seed=seed, bottleneck=4)
    return config, module_files(params)


def publish_module(store: Store, name: str, seed: int, *, activate: bool = True) -> Manifest:
    backbone = store.record("backbone", BACKBONE)
    config, files = module_artifact(seed)
    manifest = store.publish("module", name, files, config=config,
                             backbone_fingerprint=backbone.fingerprint)
    if activate:
        store.activate("module", name, manifest.version)
    return manifest


def publish_classifier(store: Store, data: bytes | None = None) -> Manifest:
    backbone = store.record("backbone", BACKBONE)
    data = data if data is not None else classifier_bytes(KEYWORDS, shared=SHARED)
    manifest = store.publish("classifier", "router", {"classifier.bin": data},
                             config={"labels": list(KEYWORDS)},
                             backbone_fingerprint=backbone.fingerprint)
    store.activate("classifier", "router", manifest.version)
    return manifest


def build_store(root: Path, *, domains: tuple[str, ...] = DOMAINS, classifier: bool = True,
                backbone: bool = True, registry_url: str | None = None) -> Path:
    with Store.open(root, registry_url=registry_url, builtin_dir=None) as store:
        if backbone:
            files = tiny_backbone_files()
            manifest = store.publish("backbone", BACKBONE, files,
                                     config=json.loads(files["config.json"]))
            store.activate("backbone", BACKBONE, manifest.version)
        for name in domains:
            publish_module(store, name, SEEDS[name])
        if classifier:
            publish_classifier(store)
    return root


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def make_settings(root: Path, **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "store_dir": root, "builtin_artifacts": False, "backbone": BACKBONE,
        "admin_token": TOKEN, "poll_interval_s": 0.05,
        # process-wide, so the tests keep glibc's defaults (test_allocator.py checks it
        # in processes of their own)
        # cpu_path: float32 on every host (auto takes bfloat16 on AMX CPUs), so that
        # the expected translations hold wherever the suite runs
        "engine": {"slots_per_bank": 4, "host_capacity": 16, "keep_freed_memory": False,
                   "cpu_path": "float32"},
        "decoding": {"beam_size": 1, "max_length": 8},
        "scheduler": {"max_wait_ms": 2.0, "request_timeout_s": 30.0},
        # a worker process per app would cost every test ~1.4 s of CPU; its tests ask for it
        "execution": {"start_text_worker": False},
        # below the threshold: the ensemble, which these tests exercise through HTTP (the
        # default, the plain backbone, has tests of its own)
        "routing": {"fallback": "ensemble"},
        # random tiny models loop until max_length on most sentences: recovery would
        # re-decode nearly every one (tests/server/test_quality_*.py turn it on)
        "quality": {"recover": False},
    }
    return Settings(**_merge(base, overrides))


def make_client(root: Path, **overrides: Any) -> TestClient:
    return TestClient(create_app(make_settings(root, **overrides)))


@dataclass(frozen=True)
class WhereThingsRun(Generic[T]):
    """`probe()` as seen from each of a running app's threads and its text worker."""

    engine: T  # the engine thread
    front: T  # the event loop's thread
    small: T  # a small request's preparation (on the loop)
    large: T  # a large request's preparation (a thread)
    worker: T  # the text worker process, started by the large requests' thread
    worker_pid: int


def where_things_run(client: TestClient, probe: Callable[[], T]) -> WhereThingsRun[T]:
    """Needs `client` entered (its portal runs the app's event loop)."""
    assert client.portal is not None
    state = client.app.state  # type: ignore[attr-defined]
    gate = state.translator.preparation
    deadline = time.monotonic() + 60
    call = client.portal.call
    return WhereThingsRun(
        engine=state.engine_thread.call(probe), front=call(probe),
        small=call(gate.run, 10, deadline, probe),
        large=call(gate.run, 10_000, deadline, probe),
        worker=call(gate.run, 10_000, deadline, gate.apart, deadline, probe),
        worker_pid=call(gate.run, 10_000, deadline, gate.apart, deadline, os.getpid))


def admin_headers(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    return build_store(tmp_path / "store")


@pytest.fixture(scope="module")
def shared_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One app for tests that only read (translate, list, errors)."""
    root = build_store(tmp_path_factory.mktemp("shared") / "store")
    with make_client(root) as client:
        yield client


@pytest.fixture
def client(store_root: Path) -> Iterator[TestClient]:
    """A fresh app of its own (for tests that change what is served)."""
    with make_client(store_root) as client:
        yield client


def backbone_fingerprint(root: Path) -> str:
    with Store.open(root, builtin_dir=None) as store:
        return store.record("backbone", BACKBONE).fingerprint


def module_archive(scratch: Path, name: str, seed: int, *, fingerprint: str,
                   config: dict[str, Any] | None = None, tamper: bool = False) -> bytes:
    """A tar.gz of a module artifact directory, as an operator would upload it."""
    module_config, files = module_artifact(seed)
    with Store.open(scratch, builtin_dir=None) as store:
        manifest = store.publish("module", name, files, config=config or module_config,
                                 backbone_fingerprint=fingerprint)
    directory = scratch / "modules" / name / f"v{manifest.version}"
    if tamper:
        weights = directory / "module.safetensors"
        data = bytearray(weights.read_bytes())
        data[-1] ^= 0xFF
        weights.write_bytes(bytes(data))
    return pack_artifact_dir(directory)


@pytest.fixture
def cpus() -> list[int]:
    """The CPUs this process may use; skips where there are fewer than two (placing or
    yielding CPUs needs one for the engine and one more)."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(allowed) < 2:
        pytest.skip(f"needs 2 CPUs; this process may use {len(allowed)}")
    return allowed


@pytest.fixture
def torch_threads() -> Iterator[None]:
    """An engine thread placed or yielding sets torch's thread count: give it back."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
