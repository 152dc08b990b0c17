"""Screenshots of the web page for docs/ and the README, taken with the embedded default
model (real French): a server on a temporary store, a training sidecar adding a domain
from real finance pairs, headless Chromium.

    .venv/bin/python docs/screenshots.py [--data ../shared/data] [--out docs/images]

(`make screenshots`.) Reads the repository's packages, so run it from the repository root.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn
from playwright.sync_api import Page, expect, sync_playwright

from server.app import create_app
from server.settings import Settings

REPO = Path(__file__).resolve().parents[1]

TOKEN = "screenshot-token"
TEXTS = {
    "translate": "Take one tablet twice a day with a glass of water.\n\n"
                 "Do not use this medicine after the expiry date.",
    "why": "We need to talk about the future of our children.",
}
TRAFFIC = ["The Council adopted this regulation.", "Open the file menu.",
           "Store in a refrigerator.", "I love you so much.", "Member States shall comply."]


@contextmanager
def live_server(settings: Settings) -> Iterator[str]:
    """The app served by uvicorn on 127.0.0.1 and a free port, in a thread."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        thread.join(0.05)
        if not thread.is_alive():
            raise SystemExit("the server did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def pairs(data: Path, corpus: str, start: int, count: int) -> bytes:
    english = (data / "en-fr/extra" / corpus / "train.en").read_text("utf-8").splitlines()
    french = (data / "en-fr/extra" / corpus / "train.fr").read_text("utf-8").splitlines()
    rows = list(zip(english, french, strict=True))[start:start + count]
    return "".join(f"{s}\t{t}\n" for s, t in rows if "\t" not in s + t).encode("utf-8")


def traffic(base: str, stop: threading.Event) -> None:
    """Background requests, so that the live metrics show numbers."""
    with httpx.Client(base_url=base, timeout=60) as http:
        while not stop.is_set():
            for text in TRAFFIC:  # light: the sidecar trains on the same CPU meanwhile
                http.post("/translate", json={"text": text})
                if stop.wait(2.0):
                    return


def translate_views(page: Page, out: Path) -> None:
    page.goto("/")
    page.get_by_label("Source text").fill(TEXTS["translate"])
    page.get_by_label("Beam size").fill("4")
    page.get_by_label("Alternatives").fill("2")
    page.get_by_role("button", name="Translate").click()
    expect(page.locator("#alternatives-list li")).to_have_count(2, timeout=60_000)
    page.screenshot(path=out / "web-translate.png")
    page.get_by_label("Source text").fill(TEXTS["why"])
    page.get_by_label("Alternatives").fill("1")
    page.get_by_role("button", name="Translate").click()
    expect(page.locator("#translate-form")).not_to_have_attribute("aria-busy", "true",
                                                                  timeout=60_000)
    page.get_by_role("link", name="Why", exact=True).click()
    page.get_by_role("button", name="Compare with generic").click()
    expect(page.locator(".compare-col")).to_have_count(2, timeout=60_000)
    page.screenshot(path=out / "web-why.png", full_page=True)


def operate_view(page: Page, out: Path, data: Path, scratch: Path) -> None:
    train = scratch / "finance.tsv"
    dev = scratch / "finance-dev.tsv"
    train.write_bytes(pairs(data, "finance", 0, 400))
    dev.write_bytes(pairs(data, "finance", 7000, 30))
    page.goto("/#operate")
    page.get_by_label("Admin token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_label("New domain").fill("finance")
    page.get_by_label("Training data (TSV)").set_input_files(train)
    page.get_by_label("Dev data (TSV, optional)").set_input_files(dev)
    page.get_by_label("More options (JSON, optional)").fill(
        '{"max_minutes": 5, "eval_every": 5, "max_tokens": 600}')
    page.get_by_role("button", name="Start training").click()
    # wait until the job reports a dev score while it trains
    expect(page.locator(".job").first).to_contain_text("best dev BLEU", timeout=600_000)
    page.screenshot(path=out / "web-operate.png", full_page=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=Path("docs/images"))
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        # a long deadline: the sidecar trains on the same CPU meanwhile
        settings = Settings(store_dir=scratch / "store", admin_token=TOKEN,
                            poll_interval_s=0.5, scheduler={"request_timeout_s": 300})
        env = os.environ | {"PYTHONPATH": str(REPO), "NMT_STORE_DIR": str(scratch / "store"),
                            "NMT_TRAINER__PROGRESS_EVERY_STEPS": "1"}
        with live_server(settings) as base, sync_playwright() as playwright:
            log = open(scratch / "sidecar.log", "wb")  # noqa: SIM115 (closed below)
            sidecar = subprocess.Popen([sys.executable, "-m", "trainer"], cwd=REPO, env=env,
                                       stdout=log, stderr=subprocess.STDOUT)
            stop = threading.Event()
            background = threading.Thread(target=traffic, args=(base, stop), daemon=True)
            browser = playwright.chromium.launch(executable_path=args.chromium,
                                                 args=["--no-sandbox"])
            page = browser.new_page(base_url=base, viewport={"width": 1280, "height": 860})
            try:
                translate_views(page, args.out)
                background.start()
                operate_view(page, args.out, args.data, scratch)
            except AssertionError:
                page.screenshot(path=scratch_dir + "-failure.png", full_page=True)
                sys.stderr.write(f"what the page showed: {scratch_dir}-failure.png\n"
                                 f"sidecar: {(scratch / 'sidecar.log').read_text()[-3000:]}\n")
                raise
            finally:
                stop.set()
                browser.close()
                sidecar.terminate()
                sidecar.wait(60)
                log.close()
    sys.stdout.write(f"screenshots in {args.out}\n")


if __name__ == "__main__":
    main()
