"""Publish -> load roundtrips and verification: every problem is found and named."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from tiny_artifacts import (
    BACKBONE_CONFIG,
    backbone_files,
    make_safetensors,
    publish_module,
)

from model_store import (
    ArtifactError,
    LocalStorage,
    Manifest,
    NotFoundError,
    Store,
    backbone_fingerprint,
    load_safetensors,
    sha256_hex,
)


def artifact_dir(store: Store, manifest: Manifest) -> Path:
    assert isinstance(store.storage, LocalStorage)
    return store.storage.path(manifest.label)


def test_publish_then_load_roundtrip(store: Store, backbone: Manifest) -> None:
    module = publish_module(store, "medical", backbone.backbone_fingerprint)
    store.activate("module", "medical", module.version)

    loaded_backbone = store.load_backbone()
    loaded = store.load("module", "medical", expected_fingerprint=backbone.backbone_fingerprint)

    assert (backbone.version, module.version) == (1, 1)
    assert loaded_backbone.files == backbone_files()
    assert loaded_backbone.manifest.backbone_fingerprint == backbone_fingerprint(
        BACKBONE_CONFIG, loaded_backbone.manifest.file_hashes
    )
    assert loaded.manifest == module
    assert loaded.manifest.provenance == {"data": "medical.tsv", "pairs": 100}
    assert loaded.manifest.files["module.safetensors"].sha256 == sha256_hex(
        loaded.files["module.safetensors"]
    )
    assert torch.equal(loaded.tensors()["w"], torch.tensor([0.5, -0.5]))
    on_disk = json.loads((artifact_dir(store, module) / "manifest.json").read_bytes())
    assert on_disk["created_at"].endswith("Z") and on_disk["version"] == 1
    assert store.active_domains() == {"medical": 1}


def _flip_byte(d: Path) -> None:
    data = bytearray((d / "module.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (d / "module.safetensors").write_bytes(bytes(data))


def _truncate(d: Path) -> None:
    data = (d / "module.safetensors").read_bytes()
    (d / "module.safetensors").write_bytes(data[:-3])


def _remove(d: Path) -> None:
    (d / "module.safetensors").unlink()


def _add_extra(d: Path) -> None:
    (d / "notes.txt").write_text("not listed")


def _break_manifest(d: Path) -> None:
    (d / "manifest.json").write_text("{not json")


def _drop_manifest(d: Path) -> None:
    (d / "manifest.json").unlink()


@pytest.mark.parametrize(
    ("corrupt", "expected"),
    [
        (_flip_byte, "module.safetensors: sha256 mismatch (expected "),
        (_truncate, "module.safetensors: size mismatch (expected "),
        (_remove, "module.safetensors: missing"),
        (_add_extra, "notes.txt: unexpected file"),
        (_break_manifest, "manifest.json: invalid"),
        (_drop_manifest, "manifest.json: missing"),
    ],
    ids=["hash", "truncated", "missing", "extra", "bad-manifest", "no-manifest"],
)
def test_load_names_the_problem(
    store: Store, backbone: Manifest, corrupt: Callable[[Path], None], expected: str
) -> None:
    module = publish_module(store, "medical", backbone.backbone_fingerprint)
    corrupt(artifact_dir(store, module))

    with pytest.raises(ArtifactError) as info:
        store.load("module", "medical", 1)

    assert str(info.value).startswith("artifact modules/medical/v1 is invalid: 1 problem: ")
    assert expected in str(info.value)


def test_every_problem_is_listed_at_once(store: Store, backbone: Manifest) -> None:
    path = artifact_dir(store, backbone)
    (path / "model.safetensors").write_bytes(b"garbage!")
    (path / "target.spm").unlink()

    with pytest.raises(ArtifactError) as info:
        store.load_backbone()

    message = str(info.value)
    assert message.startswith("artifact backbones/default-en-fr/v1 is invalid: 2 problems: ")
    assert "model.safetensors: size mismatch" in message
    assert "target.spm: missing" in message
    assert len(info.value.problems) == 2


def test_module_built_for_another_backbone_is_refused(store: Store, backbone: Manifest) -> None:
    other = backbone_fingerprint({"d_model": 16}, {"model.safetensors": "0" * 64})
    publish_module(store, "law", other)

    with pytest.raises(ArtifactError) as info:
        store.load("module", "law", 1, expected_fingerprint=backbone.backbone_fingerprint)

    assert f"backbone_fingerprint: built for {other[:12]}.., expected" in str(info.value)


def test_tampered_backbone_config_fails_the_fingerprint(store: Store, backbone: Manifest) -> None:
    path = artifact_dir(store, backbone) / "manifest.json"
    raw = json.loads(path.read_bytes())
    raw["config"]["d_model"] = 16
    path.write_text(json.dumps(raw))

    with pytest.raises(ArtifactError) as info:
        store.load_backbone()

    assert "backbone_fingerprint: mismatch (manifest says" in str(info.value)
    assert "config.json: differs from the manifest's config" in str(info.value)


def test_publish_refuses_truncated_safetensors_and_leaves_nothing(store: Store) -> None:
    truncated = make_safetensors([1.0, 2.0])[:-4]

    with pytest.raises(ArtifactError) as info:
        store.publish(
            "module",
            "medical",
            {"module.safetensors": truncated},
            config={"family": "adapter"},
            backbone_fingerprint="a" * 64,
        )

    assert "module.safetensors: corrupt safetensors" in str(info.value)
    assert store.registry.list_names("module") == []
    assert store.storage.list(".staging") == [] and not store.storage.exists("modules/medical")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x08\x00",
        make_safetensors([1.0, 2.0])[:-1],
        b"\xff" * 64,
        b"\x02" + b"\0" * 7 + b"{x",
    ],
    ids=["empty", "short", "truncated", "huge-header", "not-json"],
)
def test_load_safetensors_turns_corruption_into_artifact_error(data: bytes) -> None:
    with pytest.raises(ArtifactError) as info:
        load_safetensors(data, label="modules/x/v1/module.safetensors")

    assert str(info.value).startswith("artifact modules/x/v1/module.safetensors is invalid")
    assert "corrupt safetensors" in str(info.value)


def test_load_safetensors_reads_valid_bytes() -> None:
    tensors = load_safetensors(make_safetensors([1.0, 2.0, 3.0], name="bias"))

    assert torch.equal(tensors["bias"], torch.tensor([1.0, 2.0, 3.0]))


def test_not_found_names_what_exists(store: Store, backbone: Manifest) -> None:
    for name in ("medical", "law"):
        publish_module(store, name, backbone.backbone_fingerprint)

    with pytest.raises(NotFoundError, match=r"^no module 'foo'; known: law, medical$"):
        store.load("module", "foo")
    with pytest.raises(NotFoundError, match=r"^no active version of module 'law'; known: 1$"):
        store.load("module", "law")
    with pytest.raises(NotFoundError, match=r"^no module 'law' version 7; known: 1$"):
        store.load("module", "law", 7)


BASE = backbone_fingerprint(
    BACKBONE_CONFIG, {"model.safetensors": "a" * 64, "source.spm": "b" * 64}
)


@pytest.mark.parametrize(
    ("config", "hashes", "same"),
    [
        (
            {"vocab": 16, "layers": 1, "d_model": 8},
            {"source.spm": "b" * 64, "model.safetensors": "a" * 64},
            True,
        ),
        (
            BACKBONE_CONFIG,
            {"model.safetensors": "a" * 64, "source.spm": "b" * 64, "x.txt": "c" * 64},
            True,
        ),
        (
            {**BACKBONE_CONFIG, "d_model": 16},
            {"model.safetensors": "a" * 64, "source.spm": "b" * 64},
            False,
        ),
        (BACKBONE_CONFIG, {"model.safetensors": "c" * 64, "source.spm": "b" * 64}, False),
        (BACKBONE_CONFIG, {"model.safetensors": "a" * 64, "source.spm": "c" * 64}, False),
        (
            BACKBONE_CONFIG,
            {"model.safetensors": "a" * 64, "source.spm": "b" * 64, "target.vocab": "d" * 64},
            False,
        ),
    ],
    ids=["key-order", "unrelated-file", "config", "weights", "tokenizer", "vocab-added"],
)
def test_backbone_fingerprint(
    config: dict[str, object], hashes: dict[str, str], same: bool
) -> None:
    assert (backbone_fingerprint(config, hashes) == BASE) is same


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("kind", "adapter"),
        ("name", "Medical"),
        ("name", "9lives"),
        ("name", "a" * 64),
        ("version", 0),
        ("files", {"../escape": {"sha256": "a" * 64, "size": 1}}),
        ("files", {"manifest.json": {"sha256": "a" * 64, "size": 1}}),
        ("files", {"w.bin": {"sha256": "xyz", "size": 1}}),
        ("backbone_fingerprint", "abc"),
        ("surprise", 1),
    ],
)
def test_manifest_rejects_invalid_fields(field: str, value: object) -> None:
    raw = {
        "format": 1,
        "kind": "module",
        "name": "medical",
        "version": 1,
        "created_at": "2026-11-22T12:00:00Z",
        "files": {"module.safetensors": {"sha256": "a" * 64, "size": 1}},
        "backbone_fingerprint": "b" * 64,
    }
    assert Manifest.model_validate(raw).name == "medical"

    with pytest.raises(ValidationError):
        Manifest.model_validate({**raw, field: value})


@pytest.mark.parametrize(
    ("kind", "name", "files", "expected"),
    [
        ("module", "Bad Name", {"module.safetensors": b"x"}, "name: 'Bad Name' does not match"),
        ("adapter", "medical", {"module.safetensors": b"x"}, "kind: 'adapter' is not one of"),
        ("module", "medical", {"../x": b"x"}, "../x: not a safe relative path"),
        ("module", "medical", {"manifest.json": b"x"}, "manifest.json: not a safe relative path"),
        ("module", "medical", {}, "files: none given"),
    ],
)
def test_publish_rejects_bad_requests(
    store: Store, kind: str, name: str, files: dict[str, bytes | Path], expected: str
) -> None:
    with pytest.raises(ArtifactError, match=re.escape(expected)):
        store.publish(kind, name, files, config={}, backbone_fingerprint="a" * 64)  # type: ignore[arg-type]

    assert store.registry.list_names("module") == []


def test_module_without_fingerprint_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="must name the backbone_fingerprint"):
        store.publish(
            "module", "medical", {"module.safetensors": make_safetensors([1.0])}, config={}
        )

    assert store.storage.list(".staging") == []


def test_files_may_be_paths(store: Store, tmp_path: Path) -> None:
    weights = tmp_path / "weights.safetensors"
    weights.write_bytes(make_safetensors([4.0]))

    manifest = store.publish(
        "module",
        "medical",
        {"module.safetensors": weights},
        config={},
        backbone_fingerprint="a" * 64,
    )

    assert store.load("module", "medical", manifest.version).files["module.safetensors"] == (
        weights.read_bytes()
    )
