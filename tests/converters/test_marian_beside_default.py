"""An imported (tiny) Marian model is served beside the built-in default: importing a
second backbone adds a direction instead of replacing the first (docs/DIRECTIONS.md).
Where the package ships a backbone of the same pair (en->de), requests for that pair go to
the imported one, the operator's choice; the built-in one is still listed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from converters.cli import main
from server.app import create_app
from server.settings import Settings

TEXT = "The patient takes one tablet a day."


def settings(store: Path, **extra: Any) -> Settings:
    return Settings(store_dir=store, builtin_artifacts=True, poll_interval_s=0.05,
                    engine={"keep_freed_memory": False},
                    decoding={"beam_size": 1, "max_length": 8},
                    execution={"start_text_worker": False}, **extra)


def test_an_imported_marian_model_is_served_beside_the_builtin_default(
        marian_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("NMT_")]:
        monkeypatch.delenv(key)
    store = tmp_path / "store"
    assert main(["import-marian", str(marian_dir), "--store", str(store), "--name",
                 "opus-en-de", "--languages", "en-de", "--activate"]) == 0

    with TestClient(create_app(settings(store))) as client:
        listed = client.get("/languages").json()["directions"]
        german = client.post("/translate", json={"text": TEXT, "source": "en",
                                                 "target": "de"})
        french = client.post("/translate", json={"text": TEXT, "domain": "medical"})
        named = client.post("/translate", json={"text": TEXT, "domain": "medical",
                                                "source": "en", "target": "fr"})
        no_module = client.post("/translate", json={"text": TEXT, "domain": "medical",
                                                    "target": "de"})
    with TestClient(create_app(settings(store, backbone="opus-en-de",
                                        all_backbones=False))) as alone:
        german_alone = alone.post("/translate", json={"text": TEXT}).json()

    shipped = {(d["backbone"], d["source"], d["target"]) for d in listed[:-1]}
    assert listed[0]["backbone"] == "default-en-fr" and listed[0]["default"]
    assert ("default-fr-en", "fr", "en") in shipped  # what the package ships, then ours
    assert [(d["source"], d["target"], d["backbone"], d["default"]) for d in listed[-1:]] \
        == [("en", "de", "opus-en-de", False)]
    assert "medical" in listed[0]["domains"] and listed[-1]["domains"] == []
    assert german.status_code == 200 and french.status_code == 200
    assert german.json()["translation"] == german_alone["translation"]
    assert named.json() == french.json()  # the default direction, named or not
    assert no_module.status_code == 404  # the imported backbone has no domain modules
