"""The web page at `/`, end to end: headless Chromium (Playwright) against the app served
by a real uvicorn on a loopback port with the tiny fixture models. Every check compares
what the page shows with what the public API answers for the same request."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from model_store import Store, pack_artifact_dir
from server.engine.artifacts import module_files
from tests.e2e.browser import chromium, page_at
from tests.e2e.processes import live_server, start_sidecar, stop
from tests.tiny import random_module, tiny_config
from tests.trainer.sidecar_store import (
    BACKBONE,
    FAST_JOB,
    NEW_DOMAIN,
    TOKEN,
    admin_headers,
    build_store,
    new_domain_pairs,
    server_settings,
    tsv,
)

IT_TEXT = "click the button and open the file in the window"
TIMEOUT_MS = 30_000
expect.set_options(timeout=TIMEOUT_MS)  # the machine may be busy: wait, do not guess


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as found:
        yield found


@pytest.fixture(scope="module")
def store_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("web") / "store")


@pytest.fixture(scope="module")
def base(store_root: Path) -> Iterator[str]:
    # files over 300 characters become jobs (the Documents view follows them)
    with live_server(server_settings(store_root, documents={"sync_chars": 300})) as url:
        yield url


@pytest.fixture
def page(browser: Browser, base: str) -> Iterator[Page]:
    with page_at(browser, base, timeout_ms=TIMEOUT_MS) as opened:  # a fresh session storage
        yield opened


def api(base: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    with httpx.Client(base_url=base, timeout=60) as http:
        return http.request(method, path, **kwargs)


def translate_on_page(page: Page, text: str) -> None:
    page.get_by_label("Source text").fill(text)
    page.get_by_role("button", name="Translate").click()


def test_the_page_is_served_by_the_server_itself(base: str) -> None:
    page = api(base, "GET", "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert 'src="ui/js/main.js"' in page.text and "http" not in page.text.split("<body")[0]
    script = api(base, "GET", "/ui/js/main.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert "/" not in api(base, "GET", "/openapi.json").json()["paths"]


def test_type_translate_and_see_the_translation_and_the_routing(page: Page, base: str) -> None:
    page.goto("/")
    translate_on_page(page, IT_TEXT)
    expected = api(base, "POST", "/translate", json={"text": IT_TEXT, "explain": True}).json()
    assert expected["routing"]["mode"] == "classifier" and expected["routing"]["domain"] == "it"
    expect(page.locator("#translation")).to_have_text(expected["translation"])
    confidence = round(expected["routing"]["confidence"] * 100)
    expect(page.locator("#routing-summary")).to_contain_text(
        f"Routed by the classifier to it (confidence {confidence}%) · module v1")

    page.get_by_role("link", name="Why?").click()
    expect(page.get_by_role("heading", name="Why this translation")).to_be_focused()
    expect(page.locator("#decision")).to_contain_text("classifier")
    router = expected["explanation"]["router"]  # the direction's own: not shared
    expect(page.locator("#decision")).to_contain_text(
        f"{router['name']} v{router['version']} of {router['backbone']}")
    posteriors = page.locator("#posteriors .bar")
    expect(posteriors).to_have_count(len(expected["explanation"]["posteriors"]))
    expect(page.locator("#posteriors .bar.chosen .bar-label")).to_have_text("it")
    expect(posteriors.first).to_contain_text(
        f"{expected['explanation']['posteriors']['it'] * 100:.1f}%")


def test_each_sentence_is_coloured_by_its_quality(page: Page, base: str) -> None:
    """Issue #44: one span per sentence, its class from the API's `flagged` and `quality`
    (low: flagged, mid: under 0.6, high otherwise) and the score on hover."""
    text = f"{IT_TEXT}.\nopen the window."
    page.goto("/")
    translate_on_page(page, text)
    expected = api(base, "POST", "/translate", json={"text": text}).json()
    spans = page.locator("#translation .sentence")
    expect(spans).to_have_count(len(expected["sentences"]))
    for index, sentence in enumerate(expected["sentences"]):
        level = ("low" if sentence["flagged"] else
                 "mid" if sentence["quality"] < 0.6 else "high")
        span = spans.nth(index)
        expect(span).to_have_text(sentence["translation"])
        expect(span).to_have_class(f"sentence q-{level}")
        expect(span).to_have_attribute("data-quality", f"{sentence['quality']:.2f}")
        expect(span).to_have_attribute("title", re.compile(
            rf"^quality {sentence['quality']:.2f}"))
    expect(page.locator("#translation")).to_have_text(expected["translation"])


def test_html_mode_and_glossary_appear_exactly_when_the_api_has_them(page: Page,
                                                                     base: str) -> None:
    fields = api(base, "GET", "/openapi.json").json()[
        "components"]["schemas"]["TranslateRequest"]["properties"]
    page.goto("/")
    expect(page.get_by_role("button", name="Translate")).to_be_enabled()
    for field, label in (("format", "HTML input (tags kept)"), ("glossary", "Glossary")):
        control = expect(page.get_by_label(label))
        if field in fields:
            control.to_be_visible()
        else:
            control.to_be_hidden()


def test_the_keyboard_alone_translates(page: Page, base: str) -> None:
    page.goto("/")
    page.keyboard.press("Tab")  # the skip link comes first
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    # the page sends nothing until it has read the API's schema (the button says when)
    expect(page.get_by_role("button", name="Translate")).to_be_enabled()
    page.get_by_label("Source text").focus()
    page.keyboard.type("the council adopted the regulation")
    page.keyboard.press("Control+Enter")
    law = api(base, "POST", "/translate", json={"text": "the council adopted the regulation"})
    expect(page.locator("#translation")).to_have_text(law.json()["translation"])
    page.keyboard.press("Tab")  # from the text box on to the domain selector
    expect(page.get_by_label("Domain", exact=True)).to_be_focused()


def test_pick_a_domain_and_a_custom_mixture(page: Page, base: str) -> None:
    page.goto("/")
    page.get_by_label("Domain", exact=True).select_option(label="law (v1)")
    translate_on_page(page, IT_TEXT)
    law = api(base, "POST", "/translate", json={"text": IT_TEXT, "domain": "law"}).json()
    expect(page.locator("#routing-summary")).to_contain_text("Domain law, as requested · module v1")
    expect(page.locator("#translation")).to_have_text(law["translation"])

    page.get_by_label("Domain", exact=True).select_option(label="Custom mixture…")
    page.get_by_label("Weight of medical").fill("3")
    page.get_by_label("Weight of generic").fill("1")
    page.get_by_role("button", name="Translate").click()
    expect(page.locator("#routing-summary")).to_contain_text(
        "Ensemble of medical 75%, generic 25%")
    mixed = api(base, "POST", "/translate",
                json={"text": IT_TEXT, "domain": {"medical": 3, "generic": 1}}).json()
    expect(page.locator("#translation")).to_have_text(mixed["translation"])

    page.get_by_role("link", name="Why", exact=True).click()
    expect(page.locator("#weights .bar")).to_have_count(2)
    expect(page.locator("#posteriors-card")).to_be_hidden()  # no classifier was asked
    page.get_by_role("button", name="Compare with generic").click()
    generic = api(base, "POST", "/translate", json={"text": IT_TEXT, "domain": "generic"}).json()
    columns = page.locator(".compare-col .translation")
    expect(columns.nth(0)).to_have_text(generic["translation"])
    expect(columns.nth(1)).to_have_text(mixed["translation"])


def test_an_api_error_is_shown_as_the_api_words_it(page: Page, base: str) -> None:
    page.goto("/")
    page.get_by_label("Beam size").fill("2")
    page.get_by_label("Alternatives").fill("3")
    translate_on_page(page, IT_TEXT)
    refused = api(base, "POST", "/translate",
                  json={"text": IT_TEXT, "options": {"beam_size": 2, "n_best": 3}})
    assert refused.status_code == 422
    error = refused.json()["error"]
    alert = page.locator("#translate-error")
    expect(alert).to_be_visible()
    expect(alert).to_contain_text(error["message"])
    expect(alert).to_contain_text(f"422 {error['code']}")


def test_alternatives_are_listed_with_their_scores(page: Page, base: str) -> None:
    page.goto("/")
    page.get_by_label("Beam size").fill("3")
    page.get_by_label("Alternatives").fill("3")
    translate_on_page(page, IT_TEXT)
    answer = api(base, "POST", "/translate",
                 json={"text": IT_TEXT, "options": {"beam_size": 3, "n_best": 3}}).json()
    items = page.locator("#alternatives-list li .alt-text")
    expect(items).to_have_count(len(answer["alternatives"]))
    expect(items.first).to_have_text(answer["alternatives"][0]["translation"])


def module_archive(scratch: Path, name: str, seed: int, *, fingerprint: str) -> Path:
    """A module artifact as an operator uploads it: a tar.gz of its directory."""
    config, params = random_module(tiny_config(), "adapter", seed=seed, bottleneck=4)
    with Store.open(scratch, builtin_dir=None) as store:
        manifest = store.publish("module", name, module_files(params), config=config,
                                 backbone_fingerprint=fingerprint)
    archive = scratch / f"{name}.tar.gz"
    archive.write_bytes(pack_artifact_dir(scratch / "modules" / name / f"v{manifest.version}"))
    return archive


def sign_in(page: Page, token: str) -> None:
    page.get_by_label("Admin token").fill(token)
    page.get_by_role("button", name="Sign in").click()


def served(base: str) -> dict[str, int]:
    return {d["name"]: d["version"] for d in api(base, "GET", "/domains").json()["domains"]}


def test_upload_a_module_and_roll_it_back(page: Page, base: str, store_root: Path,
                                          tmp_path: Path) -> None:
    page.goto("/#operate")
    sign_in(page, "not-the-token")
    wrong = api(base, "GET", "/admin/domains", headers=admin_headers("not-the-token"))
    assert wrong.status_code == 403
    expect(page.locator("#token-error")).to_contain_text(wrong.json()["error"]["message"])

    sign_in(page, TOKEN)
    expect(page.locator("#domains-body")).to_contain_text("law")
    assert page.evaluate("sessionStorage.getItem('nmt-admin-token')") == TOKEN
    with Store.open(store_root, builtin_dir=None) as store:
        fingerprint = store.record("backbone", BACKBONE).fingerprint
    archive = module_archive(tmp_path / "scratch", "law", 11, fingerprint=fingerprint)
    page.get_by_label("Module domain").fill("law")
    page.get_by_label("Module archive").set_input_files(archive)
    page.get_by_role("button", name="Upload module").click()
    expect(page.locator("#admin-notice")).to_have_text("Uploaded law v2 (adapter), now serving.")
    assert served(base)["law"] == 2

    page.get_by_role("button", name="Roll back law to v1").click()
    expect(page.locator("#admin-notice")).to_have_text("law now serves v1.")
    assert served(base)["law"] == 1
    expect(page.get_by_role("button", name="Activate law to v2")).to_be_visible()

    page.get_by_role("button", name="Remove it").click()
    page.get_by_role("button", name="Confirm removing it").click()
    expect(page.locator("#admin-notice")).to_contain_text("it no longer served")
    assert "it" not in served(base)
    page.get_by_role("button", name="Activate it to v1").click()  # serve it again
    expect(page.locator("#admin-notice")).to_have_text("it now serves v1.")
    assert served(base)["it"] == 1

    bad = module_archive(tmp_path / "other", "law", 12, fingerprint="0" * 64)
    page.get_by_label("Module domain").fill("law")
    page.get_by_label("Module archive").set_input_files(bad)
    page.get_by_role("button", name="Upload module").click()
    refused = api(base, "POST", "/admin/domains/law/versions", headers=admin_headers(),
                  content=bad.read_bytes())
    assert refused.status_code == 422
    expect(page.locator("#admin-error")).to_contain_text(refused.json()["error"]["message"])


def test_live_metrics_count_the_traffic(page: Page, base: str) -> None:
    page.goto("/#operate")
    tiles = page.locator("#metrics .tile")
    expect(tiles).to_have_count(5)
    expect(tiles.nth(4)).to_contain_text("Queue depth0 sentences")
    for _ in range(3):
        api(base, "POST", "/translate", json={"text": IT_TEXT})
    # a scrape every 2 s differences the counters: some scrape sees the 3 requests
    expect(tiles.nth(3)).not_to_contain_text("— · —", timeout=TIMEOUT_MS)


def test_add_a_domain_from_tsv_and_follow_its_training_job(page: Page, base: str,
                                                           store_root: Path,
                                                           tmp_path: Path) -> None:
    train = tmp_path / "religion.tsv"
    train.write_bytes(tsv(new_domain_pairs()))
    page.goto("/#operate")
    sign_in(page, TOKEN)
    page.get_by_label("New domain").fill(NEW_DOMAIN)
    page.get_by_label("Training data (TSV)").set_input_files(train)
    page.get_by_label("More options (JSON, optional)").fill(json.dumps(FAST_JOB))
    page.get_by_role("button", name="Start training").click()
    job = page.locator(".job").first
    expect(job).to_contain_text("Queued: waiting for the training sidecar")
    sidecar = start_sidecar(store_root, tmp_path / "sidecar.log", "--once")
    try:
        expect(job.locator(".state")).to_have_text("published", timeout=180_000)
        assert sidecar.wait(120) == 0, (tmp_path / "sidecar.log").read_text()  # --once: done
    finally:
        stop(sidecar)
    jobs = api(base, "GET", "/admin/jobs", headers=admin_headers()).json()["jobs"]
    version = jobs[-1]["result"]["module_version"]
    expect(job).to_contain_text(f"Published as v{version} (")
    assert job.locator("progress").evaluate("bar => bar.value") == 1
    expect(page.locator("#domains-body")).to_contain_text(NEW_DOMAIN)
    assert NEW_DOMAIN in served(base)


SRT = "1\n00:00:01,000 --> 00:00:02,000\nClick the button.\n"


def test_drop_a_file_follow_it_and_download_it(page: Page, base: str, tmp_path: Path) -> None:
    small = tmp_path / "ui.srt"
    small.write_text(SRT)
    large = tmp_path / "manual.txt"
    large.write_text("".join(f"Click the button and open file {i}.\n" for i in range(20)))
    page.goto("/#documents")
    expect(page.get_by_role("heading", name="Documents")).to_be_visible()
    expect(page.locator("#document-domain option[value='it']")).to_have_count(1)
    page.locator("#document-file").set_input_files([str(small), str(large)])
    # the tiny backbone names no languages: "und" (undetermined) stands for the target
    for source, name in ((small, "ui.und.srt"), (large, "manual.und.txt")):
        link = page.get_by_role("link", name=f"Download {name}")
        expect(link).to_be_visible()
        with page.expect_download() as download:
            link.click()
        got = Path(download.value.path()).read_bytes()
        expected = api(base, "POST", "/translate/file", files={
            "file": (source.name, source.read_bytes())})
        if expected.status_code == 202:
            job = api(base, "GET", expected.headers["location"], params={"wait": 30}).json()
            expected = api(base, "GET", job["result_url"])
        assert got == expected.content
    expect(page.locator("#documents li")).to_have_count(2)
    expect(page.locator("#documents")).to_contain_text("routed once for the whole file")
    expect(page.locator("#documents progress").first).to_have_attribute("value", "1")


def test_improve_a_translation_and_see_it_counted_in_operate(page: Page, base: str) -> None:
    """The box under a result sends the edited translation as a correction (anonymous
    here: pending approval); the Operate view counts it under its domain."""
    page.goto("/")
    translate_on_page(page, IT_TEXT)
    expect(page.locator("#translation")).not_to_be_empty()
    page.get_by_text("Improve this translation").click()
    page.get_by_label("Your corrected translation").fill(
        "cliquez sur le bouton et ouvrez le fichier dans la fenêtre")
    page.get_by_role("button", name="Send correction").click()
    expect(page.locator("#improve-status")).to_have_text(
        "Thank you: stored for it, waiting for an administrator's approval.")
    page.get_by_role("button", name="Send correction").click()  # the same one again
    expect(page.locator("#improve-error")).to_contain_text("422 invalid_request (corrected): "
                                                           "duplicate correction")
    [row] = api(base, "GET", "/admin/corrections", headers=admin_headers()).json()["corrections"]
    assert (row["source"], row["domain"], row["status"]) == (IT_TEXT, "it", "pending")
    assert row["routed"] == "it"

    page.goto("/#operate")
    sign_in(page, TOKEN)
    row_on_page = page.locator("#corrections-body tr").filter(
        has=page.get_by_role("rowheader", name="it", exact=True))
    expect(row_on_page.locator("td")).to_have_text(["0", "1", "0", "0", "0"])
    api(base, "DELETE", "/admin/corrections", params={"domain": "it"}, headers=admin_headers())

