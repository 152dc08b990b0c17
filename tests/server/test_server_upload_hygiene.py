"""Module uploads are verified as a stream: bounded in size while they arrive, bounded in
how much they inflate, and refused with messages that name no server path."""

from __future__ import annotations

import io
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conftest import admin_headers, backbone_fingerprint, make_client, module_archive
from fastapi.testclient import TestClient

GZIP = {"content-type": "application/gzip"}
URL = "/admin/domains/medical/versions"


def zeros_bomb(size: int) -> bytes:
    """A tar.gz whose one member declares `size` bytes of zeros (~1000x compression)."""
    info = tarfile.TarInfo("module.safetensors")
    info.size = size
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [deflate.compress(info.tobuf(format=tarfile.PAX_FORMAT))]
    parts += [deflate.compress(bytes(1 << 20)) for _ in range(size >> 20)]
    parts.append(deflate.compress(bytes(2 * tarfile.RECORDSIZE)) + deflate.flush())
    return b"".join(parts)


def versions(client: TestClient, name: str) -> list[int]:
    listed = client.get("/admin/domains", headers=admin_headers()).json()["domains"]
    return [v["version"] for d in listed if d["name"] == name for v in d["versions"]]


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def test_a_gzip_bomb_is_refused_with_413_and_nothing_is_published(client: TestClient) -> None:
    bomb = zeros_bomb(48 << 20)

    error = error_of(client.post(URL, content=bomb, headers={**admin_headers(), **GZIP}), 413)

    assert error["code"] == "too_large" and "inflates beyond" in error["message"]
    assert versions(client, "medical") == [1]


def test_a_chunked_body_is_cut_off_at_the_limit(store_root: Path) -> None:
    def body() -> Iterator[bytes]:  # no Content-Length: the limit applies while it streams
        for _ in range(64):
            yield b"x" * 1024

    with make_client(store_root, limits={"max_upload_bytes": 4096}) as client:
        response = client.post(URL, content=body(), headers={**admin_headers(), **GZIP})
        assert error_of(response, 413)["code"] == "too_large"
        assert versions(client, "medical") == [1]


def test_refusals_name_no_server_path(client: TestClient, store_root: Path,
                                      tmp_path: Path) -> None:
    fingerprint = backbone_fingerprint(store_root)
    tampered = module_archive(tmp_path / "a", "medical", 5, fingerprint=fingerprint,
                              tamper=True)
    backbone = _repacked(module_archive(tmp_path / "b", "medical", 5, fingerprint=fingerprint),
                         kind="backbone")
    bodies = [tampered, backbone, b"\x1f\x8b\x08garbage", zeros_bomb(8 << 20)]
    for body in bodies:
        response = client.post(URL, content=body, headers={**admin_headers(), **GZIP})
        assert response.status_code in (413, 422), response.text
        message = response.json()["error"]["message"]
        for path in (str(store_root), tempfile.gettempdir() + "/", str(tmp_path)):
            assert path not in message, message


def _repacked(archive: bytes, *, kind: str) -> bytes:
    """`archive` with its manifest's kind replaced (its hashes stay valid)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as source, \
            tarfile.open(fileobj=out, mode="w:gz") as target:
        for member in source:
            data = source.extractfile(member)
            content = data.read() if data is not None else b""
            if member.name.endswith("manifest.json"):
                content = content.replace(b'"kind":"module"', f'"kind":"{kind}"'.encode())
                content = content.replace(b'"kind": "module"', f'"kind": "{kind}"'.encode())
                member.size = len(content)
            target.addfile(member, io.BytesIO(content))
    return out.getvalue()
