"""The ModernMT door with the admin API on a listener of its own (NMT_ADMIN_PORT), both
served by uvicorn: memory calls belong with the admin routes, so the public port answers
them with a 404 in ModernMT's shape that names the admin listener, while it still
translates; the admin listener serves the whole door (ModernMT's clients have one base
URL), so the official client manages memories and translates with them there."""

from __future__ import annotations

import httpx
import pytest
from conftest import TOKEN, admin_headers, make_settings
from modernmt import ModernMT, ModernMTException
from test_corrections import build_store
from uvicorn_live import free_port, serving

from server.app import create_admin_app, create_app


def client_at(base: str) -> ModernMT:
    client = ModernMT(TOKEN)
    client._ModernMT__base_url = base  # type: ignore[attr-defined]  # fixed in the client
    return client


def test_memory_calls_are_served_on_the_admin_listener_only(tmp_path_factory:
                                                             pytest.TempPathFactory) -> None:
    admin_port = free_port()
    app = create_app(make_settings(build_store(tmp_path_factory.mktemp("mmt") / "store"),
                                   admin_port=admin_port))
    with serving(app) as public_url, serving(create_admin_app(app)) as admin_url:
        public, admin = client_at(public_url + "/modernmt"), client_at(admin_url + "/modernmt")
        with pytest.raises(ModernMTException) as refused:
            public.memories.create("acme")
        assert (refused.value.status, refused.value.type) == (404, "NotFoundException")
        assert f"port {admin_port}" in refused.value.message
        listed = httpx.get(f"{public_url}/modernmt/memories", timeout=60,
                           headers={"MMT-ApiKey": TOKEN})
        assert listed.status_code == 404 and "NMT_ADMIN_PORT" in listed.json()["error"][
            "message"]
        assert httpx.get(f"{public_url}/admin/memories", headers=admin_headers(),
                         timeout=60).status_code == 404
        machine = public.translate("en", "fr", "Close the window.").translation
        assert machine

        memory = admin.memories.create("acme")
        admin.memories.add(memory.id, "en", "fr", "Close the window.", "Fermez la fenêtre.")
        assert [m.name for m in admin.memories.list()] == ["acme"]
        assert admin.translate("en", "fr", "Close the window.",
                               hints=[memory.id]).translation == "Fermez la fenêtre."
        # a memory made on the admin listener is in play on the public port
        assert public.translate("en", "fr", "Close the window.",
                                hints=[memory.id]).translation == "Fermez la fenêtre."
        assert httpx.post(f"{admin_url}/translate", json={"text": "Hi."},
                          timeout=60).status_code == 404  # the native API stays public


def test_with_keys_on_the_admin_token_translates_only_where_memories_are_managed(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """ModernMT's clients send one key for translations and memories (Weblate syncs its
    glossaries as memories): the admin listener takes the admin token for both; the
    public port refuses it as it refuses any key it does not know, and takes API keys."""
    access = {"api_keys": True, "requests_per_minute": 1000, "chars_per_minute": 100_000}
    app = create_app(make_settings(build_store(tmp_path_factory.mktemp("keys") / "store"),
                                   admin_port=free_port(), access=access))
    with serving(app) as public_url, serving(create_admin_app(app)) as admin_url:
        made = httpx.post(f"{admin_url}/admin/keys", headers=admin_headers(), timeout=60,
                          json={"name": "mmt"})
        assert made.status_code == 201, made.text
        query = {"q": "Close the window.", "source": "en", "target": "fr"}

        def status(base: str, key: str) -> int:
            return httpx.get(f"{base}/modernmt/translate", params=query, timeout=60,
                             headers={"MMT-ApiKey": key}).status_code

        assert status(admin_url, TOKEN) == 200
        assert status(public_url, TOKEN) == 403
        assert status(public_url, made.json()["key"]) == 200
        assert status(admin_url, "s3cret-token-guess") == 403
        vector = httpx.get(f"{admin_url}/modernmt/context-vector", timeout=60,
                           headers={"MMT-ApiKey": TOKEN},
                           params={"source": "en", "targets": "fr", "text": "Hello."})
        assert vector.status_code == 200, vector.text
