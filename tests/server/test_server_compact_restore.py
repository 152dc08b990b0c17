"""A backbone re-stored compactly (int8 weights, `provenance.compact_of`,
model_store/compact.py) serves the modules built for the version it re-stores, and takes
uploads built for either; a module built for another backbone is still refused."""

from __future__ import annotations

from pathlib import Path

from conftest import (
    BACKBONE,
    admin_headers,
    backbone_fingerprint,
    make_client,
    module_archive,
)

from contract.artifacts import BACKBONE_WEIGHTS_FILE
from contract.tensors import tensors_from_bytes, tensors_to_bytes
from model_store import Store
from model_store.compact import COMPACT_OF
from server.engine.row_int8 import SCALE_SUFFIX, quantize_rows

GZIP = {"content-type": "application/gzip"}


def restore_compactly(root: Path) -> tuple[str, str]:
    """Publish and activate the store's backbone re-encoded as int8 rows; returns the
    (old, new) fingerprints."""
    with Store.open(root, builtin_dir=None) as store:
        old = store.load("backbone", BACKBONE)
        tensors = tensors_from_bytes(old.files[BACKBONE_WEIGHTS_FILE])
        # every matrix of the tiny backbone (the default's are all above the threshold)
        compact = quantize_rows(tensors, min_elements=1)
        files = {**old.files, BACKBONE_WEIGHTS_FILE: tensors_to_bytes(compact)}
        new = store.publish("backbone", BACKBONE, files, config=old.manifest.config,
                            provenance={COMPACT_OF: {
                                "version": old.manifest.version, "storage": "int8-rows",
                                "backbone_fingerprint": old.manifest.backbone_fingerprint}})
        store.activate("backbone", BACKBONE, new.version)
        assert any(name.endswith(SCALE_SUFFIX) for name in tensors_from_bytes(
            store.load("backbone", BACKBONE).files[BACKBONE_WEIGHTS_FILE]))
    return old.manifest.backbone_fingerprint, new.backbone_fingerprint


def test_the_compact_restore_serves_and_takes_the_modules_of_the_version_it_restores(
        store_root: Path, tmp_path: Path) -> None:
    old, new = restore_compactly(store_root)
    assert backbone_fingerprint(store_root) == new != old
    with make_client(store_root) as client:
        domains = client.get("/domains").json()
        assert domains["backbone"]["version"] == 2
        assert {d["name"]: d["status"] for d in domains["domains"]} == {
            "medical": "ready", "law": "ready", "it": "ready"}
        response = client.post("/translate", json={"text": "The patient takes a tablet.",
                                                   "domain": "medical"})
        assert response.status_code == 200, response.text
        assert response.json()["routing"]["module_version"] == 1

        for version, fingerprint in ((2, old), (3, new)):
            archive = module_archive(tmp_path / f"scratch-{version}", "medical", 7,
                                     fingerprint=fingerprint)
            response = client.post("/admin/domains/medical/versions?activate=true",
                                   content=archive, headers={**admin_headers(), **GZIP})
            assert response.status_code == 201, response.text
            assert response.json()["version"] == version

        archive = module_archive(tmp_path / "scratch-other", "medical", 7,
                                 fingerprint="0" * 64)
        response = client.post("/admin/domains/medical/versions", content=archive,
                               headers={**admin_headers(), **GZIP})
        assert response.status_code == 422
        assert "backbone_fingerprint" in response.json()["error"]["message"]
