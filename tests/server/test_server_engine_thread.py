"""Every tensor the server builds is built on the engine thread (one OpenMP team: see
`server.execution.engine_thread.EngineThread`), for the backbone, the modules loaded at
start-up, a module version published while serving and an uploaded module's check."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    admin_headers,
    backbone_fingerprint,
    make_client,
    module_archive,
    publish_module,
)

import server.serving.admin
import server.serving.runtime
from model_store import Store
from server.engine.families import Params

ENGINE_THREAD_PREFIX = "nmt-engine"


def _recording(function: Callable[..., Any], seen: list[str]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        seen.append(threading.current_thread().name)
        return function(*args, **kwargs)
    return wrapper


def test_backbone_and_modules_are_built_on_the_engine_thread(
        store_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    converted: list[str] = []
    checked: list[str] = []
    monkeypatch.setattr(server.serving.runtime, "build_engine",
                        _recording(server.serving.runtime.build_engine, built))
    original_params: Callable[..., Params] = server.serving.runtime.module_params
    monkeypatch.setattr(server.serving.runtime, "module_params",
                        _recording(original_params, converted))
    monkeypatch.setattr(server.serving.admin, "module_params", _recording(original_params, checked))

    with make_client(store_root) as client:
        assert client.get("/health/ready").status_code == 200
        assert len(built) == 1 and len(converted) == 3  # backbone + medical, law, it
        with Store.open(store_root, builtin_dir=None) as store:
            manifest = publish_module(store, "medical", seed=7)
        deadline = time.monotonic() + 10
        while len(converted) < 4:  # the poller loads the new version
            assert time.monotonic() < deadline, "the new version was never loaded"
            time.sleep(0.02)
        domains = client.get("/admin/domains", headers=admin_headers()).json()["domains"]
        medical = next(d for d in domains if d["name"] == "medical")
        assert medical["active_version"] == manifest.version
        archive = module_archive(tmp_path / "scratch", "law", 11,
                                 fingerprint=backbone_fingerprint(store_root))
        uploaded = client.post("/admin/domains/law/versions", content=archive,
                               headers={**admin_headers(), "content-type": "application/gzip"})
        assert uploaded.status_code == 201, uploaded.text
        assert len(checked) == 1

    assert all(name.startswith(ENGINE_THREAD_PREFIX) for name in built + converted + checked), (
        built, converted, checked)
