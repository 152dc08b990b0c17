"""`python -m converters`: import into a store, export from it, one-line errors (exit 2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from contract.backbone import BackboneConfig
from converters.cli import main
from converters.marian import convert_marian
from model_store.store import Store
from server.engine.artifacts import module_files
from tests.tiny import random_module

REPO = Path(__file__).resolve().parents[2]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def import_marian(store: Path, marian_dir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run(["import-marian", str(marian_dir), "--store", str(store),
                          "--name", "opus-tiny", "--activate"], capsys)
    assert (code, err) == (0, "")
    return out


def publish_module(store_dir: Path, family: str, **options: int) -> None:
    with Store.open(store_dir) as store:
        backbone = store.load("backbone", "opus-tiny")
        config = BackboneConfig.from_dict(backbone.json("config.json"))
        module_config, params = random_module(config, family, seed=5, **options)
        manifest = store.publish("module", "medical", module_files(params), config=module_config,
                                 backbone_fingerprint=backbone.manifest.backbone_fingerprint)
        store.activate("module", "medical", manifest.version)


def test_import_marian_publishes_the_converted_backbone(
        marian_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = import_marian(tmp_path / "store", marian_dir, capsys)
    assert out.startswith("published backbones/opus-tiny/v1 (active)")
    with Store.open(tmp_path / "store") as store:
        loaded = store.load("backbone", "opus-tiny")
    assert dict(loaded.files) == convert_marian(marian_dir)
    assert loaded.manifest.provenance["format"] == "huggingface-marian"


def test_import_records_the_languages(marian_dir: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    code, _, err = run(["import-marian", str(marian_dir), "--store", str(store),
                        "--name", "opus-tiny", "--languages", "en-de"], capsys)
    assert (code, err) == (0, "")
    with Store.open(store) as opened:
        provenance = opened.load("backbone", "opus-tiny", 1).manifest.provenance
    assert provenance["languages"] == {"source": "en", "target": "de"}
    with pytest.raises(SystemExit):
        main(["import-marian", str(marian_dir), "--store", str(store), "--name", "x",
              "--languages", "english-german"])
    assert "is not SRC-TGT with two ISO 639-1 codes" in capsys.readouterr().err


def test_export_ct2_from_the_store(marian_dir: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    import_marian(tmp_path / "store", marian_dir, capsys)
    code, out, err = run(["export-ct2", "--store", str(tmp_path / "store"), "--backbone",
                          "opus-tiny", "--quantization", "int8", str(tmp_path / "ct2")], capsys)
    assert (code, err) == (0, "")
    assert "exported backbones/opus-tiny/v1" in out
    assert (tmp_path / "ct2" / "model.bin").is_file()


def test_import_opennmt_without_activation_needs_a_version(
        opennmt_path: Path, spm_path: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "store")
    code, out, _ = run(["import-opennmt", str(opennmt_path), "--source-spm", str(spm_path),
                        "--target-spm", str(spm_path), "--store", store, "--name", "onmt"], capsys)
    assert code == 0 and "published backbones/onmt/v1 (not active)" in out
    code, _, err = run(["export-ct2", "--store", store, "--backbone", "onmt",
                        str(tmp_path / "a")], capsys)
    assert code == 2 and err.startswith("error: no active version of backbone 'onmt'")
    code, _, err = run(["export-ct2", "--store", store, "--backbone", "onmt", "--version", "1",
                        str(tmp_path / "b")], capsys)
    assert (code, err) == (0, "")


def test_export_ct2_domain_uses_the_module_backbone(
        marian_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    import_marian(store, marian_dir, capsys)
    publish_module(store, "ldr", rank=4)
    code, out, err = run(["export-ct2-domain", "--store", str(store), "--domain", "medical",
                          str(tmp_path / "ct2")], capsys)
    assert (code, err) == (0, "")
    # The store also layers the built-in default (whose medical module fits another
    # backbone): the export must pick the module version built for opus-tiny.
    assert re.search(r"modules/medical/v\d+ merged into backbones/opus-tiny/v1", out)
    assert (tmp_path / "ct2" / "model.bin").is_file()


def test_export_of_an_adapter_domain_fails_in_one_line(
        marian_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    import_marian(store, marian_dir, capsys)
    publish_module(store, "adapter", bottleneck=4)
    code, _, err = run(["export-ct2-domain", "--store", str(store), "--domain", "medical",
                        str(tmp_path / "ct2")], capsys)
    assert code == 2
    assert err.count("\n") == 1 and "cannot export a 'adapter' module" in err


def test_store_defaults_to_the_environment(marian_dir: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NMT_STORE_DIR", str(tmp_path / "env-store"))
    code, out, _ = run(["import-marian", str(marian_dir), "--name", "from-env"], capsys)
    assert code == 0 and "backbones/from-env/v1" in out
    monkeypatch.delenv("NMT_STORE_DIR")
    code, _, err = run(["export-ct2", "--backbone", "from-env", str(tmp_path / "x")], capsys)
    assert (code, err) == (2, "error: no model store: pass --store or set NMT_STORE_DIR\n")


def test_conversion_errors_are_one_line(marian_dir: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "vocab.json").write_bytes((marian_dir / "vocab.json").read_bytes())
    code, out, err = run(["import-marian", str(broken), "--store", str(tmp_path / "store"),
                          "--name", "broken"], capsys)
    assert (code, out) == (2, "")
    assert err.startswith("error: cannot convert Marian checkpoint") and err.count("\n") == 1
    assert "missing file config.json" in err and "no weights" in err


def test_module_help_and_usage_errors() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("NMT_STORE_DIR", None)
    shown = subprocess.run([sys.executable, "-m", "converters", "--help"], capture_output=True,
                           text=True, env=env, cwd=REPO, timeout=120)
    assert shown.returncode == 0
    for command in ("import-marian", "import-opennmt", "export-ct2", "export-ct2-domain"):
        assert command in shown.stdout
    failed = subprocess.run([sys.executable, "-m", "converters", "export-ct2", "--backbone", "x",
                             "out"], capture_output=True, text=True, env=env, cwd=REPO,
                            timeout=120)
    assert failed.returncode == 2
    assert failed.stderr == "error: no model store: pass --store or set NMT_STORE_DIR\n"
