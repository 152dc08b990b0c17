"""The Operate view shows each domain's last refresh from corrections with its gate's
scores, as the admin API reports them: a real server, a real training sidecar (`python
-m trainer --once`) and Chromium. The religion domain is added by a job (a refresh needs
the data its module was trained on), corrections are sent and approved through the API,
a refresh is queued and run; the page's row must say what the API says."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from model_store import Store
from tests.e2e.browser import chromium, page_at
from tests.e2e.processes import live_server, start_sidecar, stop
from tests.trainer.refresh_fixtures import fresh_sources, translate
from tests.trainer.sidecar_store import (
    NEW_DOMAIN,
    TOKEN,
    admin_headers,
    build_store,
    server_settings,
    submit,
)

TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as found:
        yield found


def run_sidecar(root: Path, log: Path, **env: str) -> None:
    sidecar = start_sidecar(root, log, "--once", **env)
    try:
        assert sidecar.wait(300) == 0, log.read_text()
    finally:
        stop(sidecar)


def test_the_operate_view_shows_the_last_refresh_and_its_gate_scores(
        browser: Browser, tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    with Store.open(root, builtin_dir=None) as store:
        submit(store)  # what POST /admin/domains does
    run_sidecar(root, tmp_path / "sidecar.log")
    with live_server(server_settings(root)) as base, \
            httpx.Client(base_url=base, timeout=60, headers=admin_headers()) as http:
        for source in fresh_sources(20, avoid=[], seed=11):
            sent = http.post("/corrections", json={
                "source": source, "corrected": translate(source), "domain": NEW_DOMAIN})
            assert sent.status_code == 201, sent.text
        approved = http.post("/admin/corrections/review",
                             json={"action": "approve", "domain": NEW_DOMAIN})
        assert approved.json() == {"changed": 20}
        queued = http.post("/admin/corrections/refresh", json={
            "domain": NEW_DOMAIN, "options": {"gate_margin_bleu": 100.0, "max_epochs": 2}})
        assert queued.status_code == 202, queued.text
        # the tiny random backbone scores BLEU 0 whatever it learns: a gate set to pass
        run_sidecar(root, tmp_path / "sidecar.log",
                    NMT_TRAINER__REFRESH__MIN_HELD_OUT_GAIN_CHRF="-100")
        summary = http.get("/admin/corrections/summary").json()
        last = summary["refreshes"][NEW_DOMAIN]
        assert last["job_id"] == queued.json()["id"]
        assert (last["state"], last["gate"], last["active"]) == ("published", "passed", True)
        assert summary["domains"][NEW_DOMAIN]["new"] == 0  # all used by the refresh

        with page_at(browser, base, timeout_ms=TIMEOUT_MS) as page:
            page.goto("/#operate")
            page.get_by_label("Admin token").fill(TOKEN)
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_role("heading", name="Last refresh from corrections")
                   ).to_be_visible(timeout=TIMEOUT_MS)
            row = page.locator(f"#refreshes-body tr[data-domain='{NEW_DOMAIN}']")
            dev, held = last["dev"], last["held_out_corrections"]
            low, high = held["delta_chrf_95"]

            def two(value: float) -> str:
                return f"{value:.2f}"

            def signed(value: float) -> str:
                return f"{'+' if value >= 0 else ''}{value:.2f}"

            expect(row.locator("td")).to_have_text(
                ["published", f"v{last['module_version']} (active)", "passed",
                 f"{two(dev['served']['bleu'])} → {two(dev['refreshed']['bleu'])}",
                 f"{two(held['served']['chrf'])} → {two(held['refreshed']['chrf'])} "
                 f"(95%: {signed(low)} to {signed(high)})",
                 f"{two(held['served']['bleu'])} → {two(held['refreshed']['bleu'])}"],
                timeout=TIMEOUT_MS)
            counts = page.locator("#corrections-body tr").filter(
                has=page.get_by_role("rowheader", name=NEW_DOMAIN, exact=True))
            expect(counts.locator("td")).to_have_text(["0", "0", "20", "0", "0"])
