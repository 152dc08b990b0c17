"""The misbehaving clients of the adversarial benchmark (issue #19), one request each.

Every adversary returns what happened: the HTTP status (None when the connection failed
before any answer) and the seconds until the status line arrived. Huge bodies go through
a raw socket that reads the answer while it is still sending, the way a server that
refuses early must be observed (an HTTP client library would insist on sending all of
the body first).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

CHUNK = b"x" * 65536


@dataclass(frozen=True)
class Outcome:
    client: str
    status: int | None  # None: no answer (connection error)
    seconds: float
    note: str = ""


Adversary = Callable[[httpx.AsyncClient, str], Awaitable[Outcome]]


async def _json(client: httpx.AsyncClient, name: str, path: str, body: object) -> Outcome:
    started = time.perf_counter()
    try:
        answer = await client.post(path, json=body)
    except httpx.HTTPError as error:
        return Outcome(name, None, time.perf_counter() - started, type(error).__name__)
    return Outcome(name, answer.status_code, time.perf_counter() - started)


async def splitter_text(client: httpx.AsyncClient, _base_url: str) -> Outcome:
    """The text that made the old splitter quadratic (minutes of CPU at this size)."""
    return await _json(client, "splitter text", "/translate",
                       {"text": "a" * 5000 + "). b" * 1200})


async def dots(client: httpx.AsyncClient, _base_url: str) -> Outcome:
    return await _json(client, "9,999 dots", "/translate", {"text": "." * 9999})


async def big_batch(client: httpx.AsyncClient, _base_url: str) -> Outcome:
    """30 x 9,000 characters: three times the characters a request may carry."""
    return await _json(client, "30 x 9,000-char batch", "/translate/batch",
                       {"items": [{"text": "Word " * 1800}] * 30})


async def sentence_flood(client: httpx.AsyncClient, _base_url: str) -> Outcome:
    """100,000 characters of "A.\\n": 33,000 sentences that would fill the queue."""
    return await _json(client, "33,000-sentence batch", "/translate/batch",
                       {"items": [{"text": "A.\n" * 3333}] * 10})


async def nested_json(client: httpx.AsyncClient, _base_url: str) -> Outcome:
    started = time.perf_counter()
    body = b"[" * 100_000 + b"]" * 100_000
    try:
        answer = await client.post("/translate", content=body,
                                   headers={"content-type": "application/json"})
    except httpx.HTTPError as error:
        return Outcome("nested JSON", None, time.perf_counter() - started, type(error).__name__)
    return Outcome("nested JSON", answer.status_code, time.perf_counter() - started)


async def huge_body(_client: httpx.AsyncClient, base_url: str) -> Outcome:
    """24 MB with its Content-Length declared."""
    size = 24 * 1024 * 1024
    return await raw_post(base_url, "24 MB body", size=size, chunked=False)


async def chunked_body(_client: httpx.AsyncClient, base_url: str) -> Outcome:
    """24 MB sent chunked: no Content-Length to refuse it by."""
    return await raw_post(base_url, "24 MB chunked body", size=24 * 1024 * 1024, chunked=True)


ADVERSARIES: tuple[Adversary, ...] = (splitter_text, dots, big_batch, sentence_flood,
                                      nested_json, huge_body, chunked_body)


def _body(size: int, *, chunked: bool) -> Iterator[bytes]:
    sent = 0
    while sent < size:
        piece = CHUNK[: min(len(CHUNK), size - sent)]
        sent += len(piece)
        yield (f"{len(piece):x}\r\n".encode() + piece + b"\r\n") if chunked else piece
    if chunked:
        yield b"0\r\n\r\n"


async def raw_post(base_url: str, name: str, *, size: int, chunked: bool,
                   timeout_s: float = 60.0) -> Outcome:
    """POST /translate with a `size`-byte body over a raw socket; the status line is read
    while the body is still being sent."""
    url = urlsplit(base_url)
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    length = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}"
    writer.write(f"POST /translate HTTP/1.1\r\nHost: {url.netloc}\r\n"
                 f"Content-Type: application/json\r\n{length}\r\n\r\n".encode())

    async def upload() -> None:
        try:
            for piece in _body(size, chunked=chunked):
                writer.write(piece)
                await writer.drain()
        except OSError:  # the server refused and closed: expected
            pass

    sending = asyncio.ensure_future(upload())
    try:
        line = await asyncio.wait_for(reader.readline(), timeout_s)
        status = int(line.split()[1]) if line else None
        note = "" if status is not None else "closed without an answer"
    except (OSError, TimeoutError, ValueError, IndexError) as error:
        status, note = None, type(error).__name__
    finally:
        sending.cancel()
        writer.close()
    return Outcome(name, status, time.perf_counter() - started, note)


def bulk_batch(texts: list[str], *, items: int = 64, chars: int = 900) -> dict[str, object]:
    """A legal but heavy batch: `items` texts of about `chars` characters of real
    sentences (just inside the default limits)."""
    joined: list[str] = []
    source = iter(texts * (1 + items * chars // max(1, sum(map(len, texts)))))
    for _ in range(items):
        text = ""
        while len(text) < chars:
            text += next(source) + " "
        joined.append(text.strip())
    return {"items": [{"text": text} for text in joined]}


def payload_size(body: dict[str, object]) -> int:
    return len(json.dumps(body))
