"""The admin lists of keys, glossaries, memories and jobs a page at a time (`limit`,
`after`, `next_after`), as `GET /admin/domains`: every entry once, in order, and a tenant
admin's pages full of its own entries (filtered before paging)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import admin_headers, make_settings
from tenant_world import World, build_tenant_store, make_world
from uvicorn_live import serving

from model_store import Registry
from server.api.list_pages import created_cursor
from server.app import create_app

LISTS = {"/admin/keys": ("keys", "id"), "/admin/glossaries": ("glossaries", "name"),
         "/admin/memories": ("memories", "name"), "/admin/jobs": ("jobs", "id")}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = build_tenant_store(tmp_path_factory.mktemp("pages") / "store")
    settings = make_settings(root, access={"api_keys": True, "cache_s": 0.0})
    with serving(create_app(settings)) as base:
        world = make_world(base)
        for tenant, token in (("acme", world.acme_admin), ("beta", world.beta_admin)):
            for index in range(3):
                for method, path, body in (
                        ("PUT", f"/admin/glossaries/{tenant}-terms{index}",
                         {"entries": {"court": "tribunal"}}),
                        ("POST", "/admin/memories", {"name": f"{tenant}-tm{index}"}),
                        ("POST", "/admin/keys", {"name": f"{tenant}-extra{index}"})):
                    made = httpx.request(method, base + path, json=body, timeout=30,
                                         headers=admin_headers(token))
                    assert made.status_code == 201, made.text
        registry = Registry(f"sqlite:///{Path(root) / 'registry.sqlite'}")
        try:
            for tenant in ("acme", "beta"):
                for index in range(3):
                    registry.create_job(f"{tenant}-legal", config={}, data_location=f"d{index}")
        finally:
            registry.close()
        yield world


def listed(world: World, path: str, token: str | None, **params: Any) -> dict[str, Any]:
    answer = httpx.get(world.base + path, params=params, timeout=30,
                       headers=admin_headers(token) if token else admin_headers())
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def every_page(world: World, path: str, token: str | None, limit: int) -> list[list[str]]:
    field, ident = LISTS[path]
    pages: list[list[str]] = []
    after: str | None = None
    while True:
        body = listed(world, path, token, limit=limit, **({"after": after} if after else {}))
        pages.append([entry[ident] for entry in body[field]])
        after = body["next_after"]
        if after is None:
            return pages
        assert len(pages) < 50  # the cursor moves on


@pytest.mark.parametrize("path", sorted(LISTS))
def test_pages_hold_every_entry_once_in_the_whole_lists_order(world: World, path: str) -> None:
    field, ident = LISTS[path]
    whole = listed(world, path, None)
    assert whole["next_after"] is None
    expected = [entry[ident] for entry in whole[field]]
    assert len(expected) >= 6
    pages = every_page(world, path, None, 2)
    assert [len(p) for p in pages[:-1]] == [2] * (len(pages) - 1) and pages[-1]
    assert [entry for p in pages for entry in p] == expected


@pytest.mark.parametrize("path", sorted(LISTS))
def test_a_tenant_admins_pages_are_full_of_its_own(world: World, path: str) -> None:
    field, _ = LISTS[path]
    pages = every_page(world, path, world.acme_admin, 2)
    names = [entry for p in pages for entry in p]
    assert all(len(p) == 2 for p in pages[:-1]) and len(names) >= 3
    if path != "/admin/keys" and path != "/admin/jobs":
        assert all(not name.startswith("beta-") for name in names)
    operator = [entry for p in every_page(world, path, None, 2) for entry in p]
    assert set(names) < set(operator)


def test_limits_out_of_range_are_refused(world: World) -> None:
    for path in LISTS:
        for limit in (0, 1001):
            answer = httpx.get(world.base + path, params={"limit": limit}, timeout=30,
                               headers=admin_headers())
            assert answer.status_code == 422, (path, limit, answer.text)


def test_a_cursor_of_no_entry_is_refused_and_one_past_the_end_is_an_empty_page(
        world: World) -> None:
    for path in ("/admin/keys", "/admin/jobs"):  # cursors `<time>~<id>`
        for after in ("acme-tm1", "2026-13-01T00:00:00.000000~x", "2026-01-01T00:00:00.0~"):
            answer = httpx.get(world.base + path, params={"after": after}, timeout=30,
                               headers=admin_headers())
            assert answer.status_code == 422, (path, after, answer.text)
            assert answer.json()["error"]["field"] == "after", answer.text
    for path, (field, _) in LISTS.items():
        last = listed(world, path, None, limit=1000)[field][-1]
        cursor = (created_cursor(datetime.fromisoformat(last["created_at"]), last["id"])
                  if path in ("/admin/keys", "/admin/jobs") else last["name"])
        assert listed(world, path, None, after=cursor) == {field: [], "next_after": None}
