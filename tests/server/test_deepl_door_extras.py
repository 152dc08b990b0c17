"""The DeepL door under a client's retries: identical requests join the work already
running (server/api/deepl/joined.py), a long one is answered behind heartbeats
(heartbeat.py), and the official client at its default settings
(10 s read timeout, up to 5 retries on timeouts, 429 and 5xx) gets 50 texts of 900
characters answered by its first request; `ignore_tags` elements come back untranslated
(server/api/deepl/ignored_tags.py)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator

import deepl
import httpx
import pytest
from conftest import admin_headers, make_settings
from fastapi.responses import StreamingResponse
from test_libretranslate import build_store
from uvicorn_live import serving

from server.api.deepl.heartbeat import AnswerAborted, answer_when_done
from server.api.deepl.ignored_tags import hide, show, tag_names
from server.api.deepl.joined import InFlight, fingerprint
from server.app import create_app

# sentences of ordinary length (~110 characters): 900 characters hold about 8
SENTENCES = [
    "The patient takes one tablet a day with a glass of water, and the doctor checks the "
    "dose every month.",
    "Click the button at the top of the window to open the file, then save the changes "
    "before you close it.",
    "The council adopted the regulation after the member states agreed on the directive "
    "and its decision.",
    "Children need a smaller dose of the medicine, which the doctor writes on the label of "
    "every box.",
    "Close the window when the files are saved, and open the next file from the list that "
    "the button shows."]


def test_identical_work_runs_once_and_every_waiter_gets_it() -> None:
    started: list[str] = []

    async def scenario() -> list[str]:
        joined = InFlight()
        release = asyncio.Event()

        async def work() -> str:
            started.append("work")
            await release.wait()
            return "done"

        first = asyncio.ensure_future(joined.join("a", work))
        second = asyncio.ensure_future(joined.join("a", work))
        other = asyncio.ensure_future(joined.join("b", work))
        await asyncio.sleep(0)
        assert len(joined) == 2
        release.set()
        results = list(await asyncio.gather(first, second, other))
        assert len(joined) == 0  # finished work is forgotten: a later request runs anew
        results.append(await joined.join("a", work))
        return results

    assert asyncio.run(scenario()) == ["done"] * 4
    assert len(started) == 3  # "a" once while it ran, "b", and "a" again afterwards


def test_work_stops_only_when_its_last_waiter_leaves() -> None:
    async def scenario() -> tuple[bool, str, bool]:
        joined = InFlight(grace_s=0)
        release = asyncio.Event()
        cancelled = asyncio.Event()

        async def work(gate: asyncio.Event) -> str:
            try:
                await gate.wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return "done"

        gone = asyncio.ensure_future(joined.join("a", lambda: work(release)))
        retry = asyncio.ensure_future(joined.join("a", lambda: work(release)))
        await asyncio.sleep(0)
        gone.cancel()  # the first client disconnected; its retry still waits
        await asyncio.sleep(0)
        kept = not cancelled.is_set()
        release.set()
        answer = await retry
        lone = asyncio.ensure_future(joined.join("b", lambda: work(asyncio.Event())))
        await asyncio.sleep(0)
        lone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await lone
        for _ in range(3):  # the cancel is scheduled after grace_s (0), then delivered
            await asyncio.sleep(0)
        return kept, answer, cancelled.is_set()

    assert asyncio.run(scenario()) == (True, "done", True)


def test_a_retry_after_the_client_left_joins_the_running_work() -> None:
    started: list[str] = []

    async def scenario() -> str:
        joined = InFlight(grace_s=60)  # polled below: no wait as long
        release = asyncio.Event()

        async def work() -> str:
            started.append("work")
            await release.wait()
            return "done"

        first = asyncio.ensure_future(joined.join("a", work))
        await asyncio.sleep(0)
        first.cancel()  # the client timed out and closed its connection
        await asyncio.sleep(0)
        retry = asyncio.ensure_future(joined.join("a", work))
        await asyncio.sleep(0)
        release.set()
        return await retry

    assert asyncio.run(scenario()) == "done"
    assert started == ["work"]


def test_an_error_reaches_every_waiter() -> None:
    async def scenario() -> list[BaseException | str]:
        joined = InFlight()

        async def work() -> str:
            await asyncio.sleep(0)
            raise ValueError("bad text")

        return list(await asyncio.gather(joined.join("a", work), joined.join("a", work),
                                         return_exceptions=True))

    assert [str(e) for e in asyncio.run(scenario())] == ["bad text", "bad text"]


def test_requests_are_identical_only_with_the_same_key_and_parameters() -> None:
    body = {"text": ["Hello."], "target_lang": "FR"}
    same = fingerprint("k1", "translate", dict(reversed(list(body.items()))))
    assert fingerprint("k1", "translate", body) == same
    assert fingerprint("k2", "translate", body) != same
    assert fingerprint("k1", "translate", body | {"target_lang": "DE"}) != same


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_store(tmp_path_factory.mktemp("deepl-retries") / "store")
    with serving(create_app(make_settings(root))) as url:
        yield url


@pytest.fixture(scope="module")
def client(base: str) -> Iterator[deepl.Translator]:
    translator = deepl.Translator("any-key", server_url=base + "/deepl/")
    yield translator
    translator.close()


def test_fifty_texts_of_900_characters_need_no_retry(client: deepl.Translator,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    texts = []
    for number in range(50):
        text = ""
        while len(text) < 900:
            text += SENTENCES[(number + len(text)) % len(SENTENCES)] + " "
        texts.append(text[:900].rsplit(" ", 1)[0] + ".")
    assert min(map(len, texts)) > 850
    with caplog.at_level(logging.INFO, logger="deepl"):
        results = client.translate_text(texts, source_lang="EN", target_lang="FR")
    assert isinstance(results, list) and len(results) == 50
    assert all(result.text for result in results)
    retries = [r.getMessage() for r in caplog.records if "retry" in r.getMessage().lower()]
    assert retries == []
    # the client logs each request it sends: one
    assert sum("Request to DeepL API" in r.getMessage() for r in caplog.records) == 1


def test_ignored_elements_are_hidden_whole_and_shown_again() -> None:
    assert tag_names("keep, Code") == {"keep", "code"}
    assert tag_names(["keep", "x,y"]) == {"keep", "x", "y"}
    text = ('Run <keep a="1">this <keep>nested</keep> part</keep> now, '
            "<!-- a comment --> then <keep/> and <keep>left open")
    hidden = hide(text, frozenset({"keep"}))
    assert "nested" not in hidden.text and "this" not in hidden.text
    assert "<!-- a comment -->" in hidden.text and "left open" in hidden.text
    assert len(hidden.elements) == 2  # the outer element and the self-closing one
    assert show(hidden.text, hidden) == text
    assert hide(text, frozenset()).text == text


def test_the_client_gets_ignored_tags_back_exactly(client: deepl.Translator) -> None:
    text = ("Open the <keep>file and the window</keep> now. "
            '<b>Click</b> the <keep id="2">button</keep>.')
    result = client.translate_text(text, source_lang="EN", target_lang="FR",
                                   tag_handling="xml", ignore_tags=["keep"])
    assert isinstance(result, deepl.TextResult)
    assert "<keep>file and the window</keep>" in result.text
    assert '<keep id="2">button</keep>' in result.text
    assert "<b>" in result.text and "</b>" in result.text


def test_a_long_answer_starts_with_heartbeats_and_ends_with_its_json() -> None:
    async def scenario() -> tuple[int, bytes, bytes]:
        release = asyncio.Event()

        async def work() -> list[str]:
            await release.wait()
            return ["une traduction"]

        quick = asyncio.ensure_future(asyncio.sleep(0, result=["vite"]))
        answered = await answer_when_done(quick, lambda r: {"translations": r})
        running = asyncio.ensure_future(work())
        streamed = await answer_when_done(running, lambda r: {"translations": r},
                                          first_bytes_s=0, heartbeat_s=0)
        assert isinstance(streamed, StreamingResponse)
        chunks: list[bytes] = []
        async for chunk in streamed.body_iterator:
            chunks.append(bytes(chunk) if not isinstance(chunk, str) else chunk.encode())
            if len(chunks) == 3:
                release.set()  # the work ends after a few heartbeats
        return answered.status_code, bytes(answered.body), b"".join(chunks)

    status, body, streamed = asyncio.run(scenario())
    assert status == 200 and json.loads(body) == {"translations": ["vite"]}
    assert streamed.startswith(b"   ") and streamed.strip().startswith(b"{")
    assert json.loads(streamed) == {"translations": ["une traduction"]}  # leading spaces


def test_a_failure_after_the_heartbeats_cuts_the_answer_short() -> None:
    async def scenario() -> None:
        async def work() -> list[str]:
            await asyncio.sleep(0)
            raise TimeoutError("the deadline passed")

        streamed = await answer_when_done(asyncio.ensure_future(work()), list,
                                          first_bytes_s=0, heartbeat_s=0)
        assert isinstance(streamed, StreamingResponse)
        async for _ in streamed.body_iterator:
            pass

    with pytest.raises(AnswerAborted, match="deadline"):
        asyncio.run(scenario())


def test_a_translation_memory_by_deepls_parameters(base: str,
                                                   client: deepl.Translator) -> None:
    made = httpx.post(base + "/admin/memories", json={"name": "acme"},
                      headers=admin_headers(), timeout=60)
    assert made.status_code == 201, made.text
    added = httpx.post(base + "/admin/memories/acme/pairs", headers=admin_headers(),
                       timeout=60, json={"source": "Keep out of the reach of children.",
                             "target": "Tenir hors de la portée des enfants."})
    assert added.status_code == 201, added.text
    found = client.translate_text("Keep out of the reach of children.", source_lang="EN",
                                  target_lang="FR", translation_memory="acme",
                                  translation_memory_threshold=75)
    assert isinstance(found, deepl.TextResult)
    assert found.text == "Tenir hors de la portée des enfants."
    with pytest.raises(deepl.DeepLException, match="unknown memory"):
        client.translate_text("Hello.", target_lang="FR", translation_memory="nope")
    refused = httpx.post(base + "/deepl/v2/translate", timeout=60, json={
        "text": ["Hello."], "target_lang": "FR", "translation_memory_id": "acme",
        "translation_memory_threshold": 101})  # the client itself refuses to send it
    assert refused.status_code == 400
    assert "translation_memory_threshold" in refused.json()["message"]
