"""Weblate's own machinery classes against a live server (en->fr, fr->en and en->de): its
LibreTranslate, DeepL and ModernMT backends pass the check Weblate runs when an
administrator saves their settings (list the languages, translate "test" from English
into German), and then translate into German exactly as the native API does; a wrong key
fails the check, and so does a server without German. Weblate's DeepL and ModernMT
backends then sync a project's glossary as Weblate does when a translator asks for a
suggestion (create it, name it in the request, replace it when it changes): the door
lists it under Weblate's name, the server stores its entries and the translation uses
them. Keys are on: DeepL syncs with an API key; ModernMT needs the admin token (memory
calls are admin calls), which its door also accepts for translations.

Weblate runs in a venv of its own (`make weblate-venv`, which `make test` runs: its pins
conflict with ours), through tests/weblate/machinery_check.py."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import TOKEN, admin_headers, make_settings
from uvicorn_live import serving

from server.app import create_app
from tests.services import require_program, unavailable
from tests.two_directions import EN_FR, ENGLISH, build_two_directions

ROOT = Path(__file__).resolve().parents[2]
# where the Makefile's weblate-venv puts it: the user's cache folder
WEBLATE_VENV = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / \
    "nmt-server" / "weblate-venv"
CHECK = ROOT / "tests" / "weblate" / "machinery_check.py"
# where each door is, as an administrator types it into Weblate's settings
DOORS = {"libretranslate": "/libretranslate/", "deepl": "/deepl/v2/",
         "modernmt": "/modernmt/"}
ACCESS = {"api_keys": True, "requests_per_minute": 1000, "chars_per_minute": 100_000}
# the project's glossary that Weblate syncs (terms of ENGLISH); the second round drops the last
TERMS = [("tablet", "Pille"), ("water", "Sprudelwasser")]
# the key each glossary-syncing backend is set up with
SYNCING = {"deepl": "ok", "modernmt": "admin"}


@pytest.fixture(scope="module")
def weblate_python() -> Path:
    require_program("python3", at="/usr/bin/python3")
    python = WEBLATE_VENV / "bin" / "python"
    if not (WEBLATE_VENV / ".installed").exists():
        unavailable(f"no Weblate venv at {WEBLATE_VENV}: `make weblate-venv` (which "
                    "`make test` runs) builds it")
    return python


def new_key(base: str) -> str:
    created = httpx.post(base + "/admin/keys", headers=admin_headers(), timeout=30,
                         json={"name": "weblate"})
    assert created.status_code == 201, created.text
    key: str = created.json()["key"]
    return key


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(a server of en->fr, fr->en and en->de, a server of en->fr and fr->en), keys on."""
    three = build_two_directions(tmp_path_factory.mktemp("weblate") / "store", german=True)
    two = build_two_directions(tmp_path_factory.mktemp("weblate-two") / "store")
    with serving(create_app(make_settings(three, backbone=EN_FR, access=ACCESS))) as base, \
            serving(create_app(make_settings(two, backbone=EN_FR, access=ACCESS))) as other:
        yield base, other


def native(base: str, target: str) -> str:
    response = httpx.post(base + "/translate", timeout=60, headers={"X-API-Key": new_key(base)},
                          json={"text": ENGLISH, "source": "en", "target": target})
    assert response.status_code == 200, response.text
    return str(response.json()["translation"])


@pytest.fixture(scope="module")
def native_german(servers: tuple[str, str]) -> str:
    german = native(servers[0], "de")
    assert german != native(servers[0], "fr")  # the backbones differ: the check can fail
    return german


@pytest.fixture(scope="module")
def checked(weblate_python: Path, servers: tuple[str, str]) -> dict[tuple[str, str], Any]:
    """Weblate's check of each door: with a key ("ok"), a wrong key ("wrong"), against
    the server without German ("no-german") and with the admin token ("admin"), each
    passing one then syncing the glossary TERMS; in one Weblate process (Django starts
    once)."""
    base, other = servers
    cases = {"ok": (base, new_key(base)), "wrong": (base, "not-a-key"),
             "no-german": (other, new_key(other)), "admin": (base, TOKEN)}
    arguments = [value for service, path in DOORS.items() for url, key in cases.values()
                 for value in (service, url + path, key)]
    terms = [f"--term={source}={target}" for source, target in TERMS]
    done = subprocess.run([str(weblate_python), str(CHECK), "--text", ENGLISH, *terms,
                           *arguments],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    names = [(service, case) for service in DOORS for case in cases]
    assert [line["service"] for line in lines] == [service for service, _ in names]
    return dict(zip(names, lines, strict=True))


@pytest.mark.parametrize("service", list(DOORS))
def test_weblate_accepts_the_door_and_translates_into_german(
        checked: dict[tuple[str, str], Any], native_german: str, service: str) -> None:
    result = checked[service, "ok"]

    assert result["valid"], result["errors"]
    assert result["translation"] == native_german


@pytest.mark.parametrize("service", list(DOORS))
def test_a_wrong_key_fails_weblates_check(checked: dict[tuple[str, str], Any],
                                          service: str) -> None:
    result = checked[service, "wrong"]

    assert not result["valid"]
    assert result["translation"] is None
    assert any("403" in error and "API key is not valid" in error
               for error in result["errors"]), result["errors"]


@pytest.mark.parametrize("service", list(DOORS))
def test_a_server_without_german_fails_weblates_check(
        checked: dict[tuple[str, str], Any], service: str) -> None:
    result = checked[service, "no-german"]

    assert not result["valid"]
    assert any("Could not fetch translation" in error and "de" in error
               for error in result["errors"]), result["errors"]


@pytest.mark.parametrize("service", ["libretranslate", "deepl"])
def test_the_admin_token_is_no_api_key_of_the_other_doors(
        checked: dict[tuple[str, str], Any], service: str) -> None:
    result = checked[service, "admin"]

    assert not result["valid"]
    assert any("403" in error for error in result["errors"]), result["errors"]


def test_weblates_modernmt_translates_with_the_admin_token(
        checked: dict[tuple[str, str], Any], native_german: str) -> None:
    result = checked["modernmt", "admin"]

    assert result["valid"], result["errors"]
    assert result["translation"] == native_german


def test_weblates_modernmt_cannot_sync_a_glossary_with_an_api_key(
        checked: dict[tuple[str, str], Any]) -> None:
    synced = checked["modernmt", "ok"]["synced"]

    assert "error" in synced and "403" in synced["error"], synced


def stored_glossary(base: str, service: str, listed_id: str | int) -> httpx.Response:
    """The server's own record of a glossary Weblate synced (native admin API): DeepL's
    glossary id is its name; a ModernMT memory's en->de glossary is named after it."""
    name = listed_id if service == "deepl" else f"modernmt-memory-{listed_id}.en-de"
    return httpx.get(f"{base}/admin/glossaries/{name}", headers=admin_headers(), timeout=30)


@pytest.mark.parametrize("service", list(SYNCING))
def test_weblate_syncs_its_glossary_and_translates_with_it(
        checked: dict[tuple[str, str], Any], servers: tuple[str, str], service: str) -> None:
    first, second = checked[service, SYNCING[service]]["synced"]
    source, target = ("EN", "DE") if service == "deepl" else ("en", "de")

    # the door lists each glossary under Weblate's own name, and only the current one
    assert first["name"].startswith(f"weblate:7:{source}:{target}:")
    assert second["name"].startswith(f"weblate:7:{source}:{target}:")
    assert first["name"] != second["name"]
    assert list(first["listed"]) == [first["name"]]
    assert list(second["listed"]) == [second["name"]]
    # the glossary's terms come back in the translation, as placeholders guarantee
    assert "Pille" in first["translation"] and "Sprudelwasser" in first["translation"]
    assert "Pille" in second["translation"]
    assert "Sprudelwasser" not in second["translation"]
    # the server holds the current glossary's entries, and no longer the stale one
    stored = stored_glossary(servers[0], service, second["listed"][second["name"]])
    assert stored.status_code == 200, stored.text
    assert stored.json()["entries"] == dict(TERMS[:-1])
    stale = stored_glossary(servers[0], service, first["listed"][first["name"]])
    assert stale.status_code == 404, stale.text
