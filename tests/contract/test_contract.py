"""The contract package: torch-free, the one owner of family configs, file names and
training defaults, and the server's independence from the trainer."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from contract.artifacts import FINGERPRINT_FILES, KINDS, MANIFEST_FILE, REQUIRED_FILES
from contract.families import (
    FAMILY_SPECS,
    ModuleConfigError,
    get_family_spec,
    mixes_domains,
    mixture_families,
)
from contract.tensors import check_safetensors, tensors_from_bytes, tensors_to_bytes
from contract.training import TrainingOptions
from server.engine.families import FAMILIES
from trainer.training.loop import TrainSettings

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_contract_loads_no_torch() -> None:
    modules = sorted(p.stem for p in (ROOT / "contract").glob("*.py") if p.stem != "__init__")
    code = ("import sys\n" + "".join(f"import contract.{m}\n" for m in modules)
            + "print(sorted(m for m in ('torch', 'server', 'trainer', 'model_store') "
              "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert {"training", "tsv", "manifest", "families", "tensors", "artifacts"} <= set(modules)


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_server_imports_nothing_from_the_trainer() -> None:
    offenders = {str(path.relative_to(ROOT)): sorted(m for m in _imported_modules(path)
                                                     if m.split(".")[0] == "trainer")
                 for path in (ROOT / "server").rglob("*.py")}
    assert {path: found for path, found in offenders.items() if found} == {}


def test_every_engine_family_is_built_on_its_spec() -> None:
    assert set(FAMILIES) == set(FAMILY_SPECS)
    for name, family in FAMILIES.items():
        spec = FAMILY_SPECS[name]
        assert isinstance(family, type(spec)), name
        assert family.defaults() == spec.defaults()
        assert family.joint == spec.joint and family.mixes_domains == spec.mixes_domains


def test_mixing_is_the_one_family_that_mixes_domains() -> None:
    assert mixture_families() == ["mixing"]
    assert mixes_domains("mixing") and not mixes_domains("adapter")
    assert not mixes_domains("no-such-family")


@pytest.mark.parametrize(("name", "config", "expected"), [
    ("adapter", {}, {"family": "adapter", "bottleneck": 64}),
    ("ldr", {"rank": 4}, {"family": "ldr", "rank": 4}),
    ("sf", {}, {"family": "sf", "ffn_matrix": True}),
    ("pa", {}, {"family": "pa", "ffn_matrix": False}),
])
def test_spec_normalise_fills_defaults(name: str, config: dict[str, object],
                                       expected: dict[str, object]) -> None:
    assert get_family_spec(name).normalise(config) == expected


def test_spec_normalise_lists_every_problem() -> None:
    with pytest.raises(ModuleConfigError) as info:
        get_family_spec("mixing").normalise({"domains": ["a"], "epsilon": 2, "size": 3})
    message = str(info.value)
    assert "unknown option 'size'" in message and "domains must be" in message
    assert "epsilon must be" in message
    with pytest.raises(ModuleConfigError, match="unknown module family 'nope'; known: "):
        get_family_spec("nope")


def test_training_loop_defaults_are_the_job_options_defaults() -> None:
    options = TrainingOptions()
    shared = {f.name for f in dataclasses.fields(TrainSettings)} & set(
        TrainingOptions.model_fields)
    assert {"lr", "max_tokens", "max_minutes", "eval_every", "patience"} <= shared
    assert {name: getattr(TrainSettings(), name) for name in shared} == {
        name: getattr(options, name) for name in shared}
    loop = TrainSettings.from_options(options.model_copy(update={"max_tokens": 700}),
                                      bf16=False, log_every=3, checkpoint_every_s=9.0)
    assert (loop.max_tokens, loop.log_every, loop.bf16) == (700, 3, False)


def test_required_files_are_listed_per_kind() -> None:
    assert set(REQUIRED_FILES) == set(KINDS)
    assert MANIFEST_FILE not in {f for files in REQUIRED_FILES.values() for f in files}
    assert REQUIRED_FILES["backbone"][1] == FINGERPRINT_FILES[0] == "model.safetensors"


def test_tensor_bytes_round_trip_and_half() -> None:
    tensors = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
               "ids": torch.tensor([1, 2], dtype=torch.int64)}
    data = tensors_to_bytes(tensors, half=True)
    assert check_safetensors(data) is None
    back = tensors_from_bytes(data)
    assert back["w"].dtype == torch.float16 and back["ids"].dtype == torch.int64
    assert torch.equal(back["w"].float(), tensors["w"])


@pytest.mark.parametrize("data", [b"", b"\x05\x00\x00\x00\x00\x00\x00\x00{}", b"garbage!!"])
def test_corrupt_tensor_bytes_raise_value_error(data: bytes) -> None:
    with pytest.raises(ValueError, match="corrupt safetensors"):
        tensors_from_bytes(data)
