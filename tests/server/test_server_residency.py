"""Directions beyond memory (`NMT_DIRECTIONS__RESIDENT`, server/serving/residency.py):
with a limit of 1 the two tiny backbones swap in and out and both still answer exactly as a
server of each alone; an unloaded engine is really freed; readiness and liveness speak per
direction, and a damaged backbone fails only its own direction."""

from __future__ import annotations

import gc
import re
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import admin_headers, make_client
from fastapi.testclient import TestClient
from test_server_damage import flip_a_byte
from test_server_directions import alone

from tests.two_directions import EN_FR, ENGLISH, FR_EN, FRENCH, build_two_directions

TO_FRENCH = {"text": ENGLISH, "domain": "medical"}
TO_ENGLISH = {"text": FRENCH, "domain": "medical", "source": "fr", "target": "en"}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_two_directions(tmp_path_factory.mktemp("residency") / "store")


@pytest.fixture(scope="module")
def expected(root: Path) -> dict[str, str]:
    """Each direction's translation by a server of that backbone alone."""
    return {EN_FR: alone(root, EN_FR, [TO_FRENCH])[0],
            FR_EN: alone(root, FR_EN, [{k: v for k, v in TO_ENGLISH.items()
                                        if k in ("text", "domain")}])[0]}


@pytest.fixture
def one_resident(root: Path) -> Iterator[TestClient]:
    with make_client(root, backbone=EN_FR, directions={"resident": 1}) as client:
        yield client


def answer(client: TestClient, body: dict[str, Any]) -> str:
    response = client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["translation"])


def counter(client: TestClient, name: str, backbone: str) -> float:
    found = re.search(rf'^{name}\{{backbone="{backbone}"\}} (\S+)$',
                      client.get("/metrics").text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def loaded(client: TestClient) -> list[str]:
    residency = client.app.state.residency  # type: ignore[attr-defined]
    names: list[str] = residency.loaded()
    return names


def test_limit_one_swaps_the_two_backbones_and_both_answer_as_alone(
        one_resident: TestClient, expected: dict[str, str]) -> None:
    client = one_resident
    # start-up loaded both (verifying each), in order: the last one stays
    assert loaded(client) == [FR_EN]
    directions = client.get("/health/ready").json()["checks"]["directions"]
    assert directions[FR_EN].startswith("fr->en: loaded (")
    assert directions[EN_FR].startswith("en->fr: unloaded (")
    listed = client.get("/languages").json()["directions"]
    assert [(d["backbone"], d["domains"]) for d in listed] == [
        (EN_FR, ["law", "medical"]), (FR_EN, ["medical"])]  # unloaded ones too

    answers = []
    for body in (TO_FRENCH, TO_ENGLISH, TO_FRENCH, TO_ENGLISH):
        answers.append(answer(client, body))
        assert len(loaded(client)) == 1

    assert answers == [expected[EN_FR], expected[FR_EN]] * 2
    assert loaded(client) == [FR_EN]
    # start-up: en-fr in, out, fr-en in; then each request swapped them
    assert counter(client, "nmt_backbone_loads_total", EN_FR) == 3
    assert counter(client, "nmt_backbone_unloads_total", EN_FR) == 3
    assert counter(client, "nmt_backbone_loads_total", FR_EN) == 3
    assert counter(client, "nmt_backbone_unloads_total", FR_EN) == 2
    assert "nmt_backbones_resident 1.0" in client.get("/metrics").text


def test_an_unloaded_engine_is_freed(one_resident: TestClient) -> None:
    client = one_resident
    runtime = client.app.state.directions.by_name(FR_EN).runtime  # type: ignore[attr-defined]
    engine = weakref.ref(runtime.engine)

    answer(client, TO_FRENCH)  # en->fr needs the room
    gc.collect()

    assert runtime.engine is None and engine() is None


def test_concurrent_requests_of_both_directions_all_answer(
        one_resident: TestClient, expected: dict[str, str]) -> None:
    bodies = [TO_FRENCH, TO_ENGLISH] * 6
    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(lambda body: answer(one_resident, body), bodies))

    assert answers == [expected[EN_FR], expected[FR_EN]] * 6
    assert len(loaded(one_resident)) == 1


def test_an_admin_call_loads_its_direction(one_resident: TestClient) -> None:
    listed = one_resident.get(f"/admin/domains?backbone={EN_FR}",
                              headers=admin_headers())

    assert listed.status_code == 200, listed.text
    assert loaded(one_resident) == [EN_FR]


def test_a_damaged_backbone_fails_only_its_own_direction(
        tmp_path: Path, expected: dict[str, str]) -> None:
    root = build_two_directions(tmp_path / "store")
    flip_a_byte(next((root / "backbones" / FR_EN).glob("v1/*.safetensors")))
    with make_client(root, backbone=EN_FR) as client:
        ready = client.get("/health/ready")
        french = client.post("/translate", json=TO_ENGLISH)
        english = answer(client, TO_FRENCH)
        languages = client.get("/languages").json()["directions"]

    assert ready.status_code == 200
    line = ready.json()["checks"]["directions"][FR_EN]
    assert line.startswith("fr->en: failed: ") and "sha256 mismatch" in line
    assert french.status_code == 503
    message = french.json()["error"]["message"]
    assert message.startswith(f"the backbone that translates from fr into en is not "
                              f"serving: {FR_EN} (")
    assert english == expected[EN_FR]
    assert [d["backbone"] for d in languages] == [EN_FR]


def test_a_damaged_backbone_never_unloads_the_healthy_one(
        tmp_path: Path, expected: dict[str, str]) -> None:
    # Its files are read and verified before room is made: the healthy backbone stays.
    root = build_two_directions(tmp_path / "store")
    flip_a_byte(next((root / "backbones" / FR_EN).glob("v1/*.safetensors")))
    with make_client(root, backbone=EN_FR, directions={"resident": 1}) as client:
        statuses = [client.post("/translate", json=TO_ENGLISH).status_code for _ in range(3)]
        english = answer(client, TO_FRENCH)
        line = client.get("/health/ready").json()["checks"]["directions"][FR_EN]
        still = loaded(client)
        unloads = counter(client, "nmt_backbone_unloads_total", EN_FR)

    assert statuses == [503] * 3
    assert english == expected[EN_FR]
    assert line.startswith("fr->en: failed: ") and "sha256 mismatch" in line
    assert still == [EN_FR] and unloads == 0


def test_limit_one_with_continuous_batching_swaps_and_answers_as_alone(
        root: Path, expected: dict[str, str]) -> None:
    with make_client(root, backbone=EN_FR, directions={"resident": 1},
                     scheduler={"continuous": True}) as client:
        bodies = [TO_FRENCH, TO_ENGLISH] * 3
        with ThreadPoolExecutor(max_workers=3) as pool:
            answers = list(pool.map(lambda body: answer(client, body), bodies))
        swaps = counter(client, "nmt_backbone_unloads_total", EN_FR)

    assert answers == [expected[EN_FR], expected[FR_EN]] * 3
    assert swaps >= 1


def test_liveness_names_a_stopped_direction_scheduler(root: Path) -> None:
    with make_client(root, backbone=EN_FR) as client:
        assert client.get("/health/live").status_code == 200
        scheduler = client.app.state.directions.by_name(FR_EN).scheduler  # type: ignore[attr-defined]
        assert client.portal is not None
        client.portal.call(scheduler.stop)
        live = client.get("/health/live")

    assert live.status_code == 503
    assert f"scheduler of {FR_EN}: not running" in live.json()["error"]["message"]
