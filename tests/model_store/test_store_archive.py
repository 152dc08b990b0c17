"""tar.gz uploads: roundtrip into the store, and every unsafe member refused."""

from __future__ import annotations

import io
import random
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from tiny_artifacts import publish_module, store_root

from model_store import (
    ArtifactError,
    InflationError,
    Manifest,
    Store,
    pack_artifact_dir,
    unpack_artifact,
)


def test_pack_unpack_import_roundtrip(store: Store, backbone: Manifest, tmp_path: Path) -> None:
    module = publish_module(store, "medical", backbone.backbone_fingerprint)
    publish_module(store, "medical", backbone.backbone_fingerprint, seed=3.0)
    data = pack_artifact_dir(store_root(store) / module.label)

    unpacked = unpack_artifact(data, tmp_path / "upload")
    imported = store.import_artifact_dir(
        unpacked, "module", expected_fingerprint=backbone.backbone_fingerprint
    )

    assert data == pack_artifact_dir(store_root(store) / module.label)  # deterministic
    assert imported.version == 3  # the upload said 1: versions are reassigned
    assert imported.files == module.files and imported.config == module.config
    assert store.load("module", "medical", 3).files == store.load("module", "medical", 1).files


def test_import_checks_the_kind(store: Store, backbone: Manifest, tmp_path: Path) -> None:
    data = pack_artifact_dir(store_root(store) / backbone.label)
    unpacked = unpack_artifact(data, tmp_path / "upload")

    with pytest.raises(ArtifactError, match="kind: expected a module, got a backbone"):
        store.import_artifact_dir(unpacked, "module")

    assert store.registry.list_versions("backbone", backbone.name) == [1]


def _tar(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name: str, kind: bytes, target: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


Builder = Callable[[], bytes]


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: _tar(_file("/etc/evil")), "/etc/evil: absolute path refused"),
        (lambda: _tar(_file("../evil")), "../evil: path traversal ('..') refused"),
        (lambda: _tar(_file("a/../../evil")), "a/../../evil: path traversal"),
        (lambda: _tar(_special("link", tarfile.SYMTYPE, "/etc/passwd")), "link: links are refused"),
        (lambda: _tar(_special("hard", tarfile.LNKTYPE, "x")), "hard: links are refused"),
        (lambda: _tar(_special("fifo", tarfile.FIFOTYPE)), "fifo: special files are refused"),
        (
            lambda: _tar(_file("big.bin", b"x" * 2048)),
            "big.bin: too large (2048 bytes, limit 1024)",
        ),
        (lambda: _tar(*[_file(f"f{i}") for i in range(9)]), "more than 8 members"),
        (lambda: _tar(_file("a"), _file("a")), "a: duplicate member"),
        (lambda: b"not a tarball", "not a readable tar.gz archive"),
    ],
    ids=[
        "absolute",
        "dotdot",
        "nested-dotdot",
        "symlink",
        "hardlink",
        "fifo",
        "size",
        "count",
        "duplicate",
        "garbage",
    ],
)
def test_unsafe_uploads_are_refused(build: Builder, expected: str, tmp_path: Path) -> None:
    dest = tmp_path / "upload"

    with pytest.raises(ArtifactError) as info:
        unpack_artifact(build(), dest, max_member_bytes=1024, max_members=8)

    assert str(info.value).startswith("artifact upload is invalid")
    assert expected in str(info.value)
    assert not dest.exists() or list(dest.iterdir()) == []
    assert not (tmp_path / "evil").exists()


def test_every_unsafe_member_is_listed(tmp_path: Path) -> None:
    data = _tar(_file("../a"), _file("/b"), _file("ok"))

    with pytest.raises(ArtifactError) as info:
        unpack_artifact(data, tmp_path / "upload")

    assert info.value.problems == [
        "../a: path traversal ('..') refused",
        "/b: absolute path refused",
    ]


def test_upload_without_manifest_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="manifest.json: missing at the archive root"):
        unpack_artifact(_tar(_file("module.safetensors")), tmp_path / "upload")

    assert (tmp_path / "upload" / "module.safetensors").read_bytes() == b"x"


def test_single_top_level_directory_is_accepted(
    store: Store, backbone: Manifest, tmp_path: Path
) -> None:
    module = publish_module(store, "medical", backbone.backbone_fingerprint)
    source = store_root(store) / module.label
    members = [_file(f"medical/{p.name}", p.read_bytes()) for p in sorted(source.iterdir())]

    unpacked = unpack_artifact(_tar(*members), tmp_path / "upload")

    assert unpacked == tmp_path / "upload" / "medical"
    assert store.import_artifact_dir(unpacked).version == 2


def zeros_bomb(size: int) -> bytes:
    """A tar.gz whose one member declares `size` bytes of zeros: ~1000x compression."""
    info = tarfile.TarInfo("module.safetensors")
    info.size = size
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [deflate.compress(info.tobuf(format=tarfile.PAX_FORMAT))]
    chunk = bytes(1 << 20)
    for _ in range(size // len(chunk)):
        parts.append(deflate.compress(chunk))
    parts.append(deflate.compress(bytes(2 * tarfile.RECORDSIZE)) + deflate.flush())
    return b"".join(parts)


def test_a_gzip_bomb_is_refused_while_it_streams(tmp_path: Path) -> None:
    bomb = zeros_bomb(64 << 20)
    assert len(bomb) < 200_000  # 64 MiB declared in a small upload
    dest = tmp_path / "upload"

    with pytest.raises(InflationError) as info:
        unpack_artifact(io.BytesIO(bomb), dest)

    assert "inflates beyond" in str(info.value) and "100x the compressed size" in str(info.value)
    assert list(dest.iterdir()) == []


def test_the_ratio_bound_admits_incompressible_data(tmp_path: Path) -> None:
    weights = random.Random(1).randbytes(3 << 20)  # like trained float weights
    data = _tar(_file("manifest.json", b"{}"), _file("module.safetensors", weights))

    root = unpack_artifact(io.BytesIO(data), tmp_path / "upload", max_ratio=2.0)

    assert (root / "module.safetensors").read_bytes() == weights


def test_a_truncated_archive_is_refused(tmp_path: Path) -> None:
    data = _tar(_file("manifest.json", b"{}"), _file("module.safetensors", b"w" * 5000))

    with pytest.raises(ArtifactError, match="not a readable tar.gz archive"):
        unpack_artifact(data[: len(data) // 2], tmp_path / "upload")
